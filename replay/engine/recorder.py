"""Recording: one response's timeline collected into an interaction, and the tape of them.

A `Recording` is the timeline of one response: headers, each chunk stamped with the moment it
came off the network, then its end. It is finished exactly once, by whichever comes first:
the end of the body, an upstream error, the client closing early, or the session ending.
It then hands its `Interaction` to a `Tape`.

A `Tape` is what a session, a recording transport or `replay proxy` records into: it
redacts each finished interaction (the `before_record` hook included) and appends it to
its cassette, and it knows which recordings are still streaming, so that the end of a
session can wait for them (bounded) and then finish what is still open as what it is.
The shells only read upstream bodies their own way and report what they read.

A tape given a `Spool` (a session's: `replay.store.spool`) keeps what it records out of memory: a
recording that holds `SPOOL_PIECE` bytes of payloads writes them to the spool, and so does
one that finishes once the tape keeps `KEPT_IN_MEMORY` bytes of payloads in memory; their
interactions read them back from there when asked. So a session's memory does not grow with
what it records (short recordings, the usual streams of a test, stay in memory).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from replay.clock import Clock, MonotonicClock
from replay.engine.ends import recorded_error
from replay.model import Chunks, Frame, Interaction, Request, Response, StreamEnd
from replay.redact.redactor import Redactor
from replay.store.cassette import Cassette
from replay.store.spool import SPOOL_PIECE, Spool, SpooledPayloads

__all__ = ["KEPT_IN_MEMORY", "Recording", "Tape"]

#: Bytes of payloads of finished recordings a tape with a spool keeps in memory.
KEPT_IN_MEMORY = 8 * SPOOL_PIECE


class Tape:
    """Where finished recordings go: redacted, then appended to `cassette`.

    Args:
        cassette: receives each interaction, in the order they finish.
        redactor: what to scrub before anything is stored (default: credentials).
        on_recorded: called with each stored interaction (e.g. to log or save it).
        spool: where long recordings keep their payloads (None: in memory).
    """

    def __init__(
        self,
        cassette: Cassette,
        redactor: Redactor | None = None,
        *,
        on_recorded: Callable[[Interaction], None] | None = None,
        spool: Spool | None = None,
    ) -> None:
        self.cassette = cassette
        self.spool = spool
        self._kept = 0  # bytes of payloads kept in memory
        self.redactor = redactor or Redactor()
        self.on_recorded = on_recorded
        self._lock = threading.Condition()
        self._open: set[Recording] = set()
        #: "METHOD URL" (redacted) of the stored recordings whose chunks were stamped on the
        #: client's event loop: a loop the client blocked delayed those stamps.
        self.read_on_loop: list[str] = []
        #: "METHOD URL" (redacted) of the stored recordings whose response body holds a
        #: well-known key's shape (stored as it came: the session warns of them).
        self.keys_in_responses: list[str] = []

    def start(self, request: Request, clock: Clock, start: float) -> Recording:
        """A recording of the response to `request`, sent at clock reading `start`.

        It is in flight from now until it finishes (`Recording.finish`, which the shell
        must call however the request ends).
        """
        recording = Recording(request, clock, start, self)
        with self._lock:
            self._open.add(recording)
        return recording

    @property
    def open(self) -> int:
        """How many recordings are in flight."""
        with self._lock:
            return len(self._open)

    def store(self, recording: Recording, interaction: Interaction | None) -> None:
        """Keep the finished `interaction` of `recording` (None: it has nothing to keep; the
        `before_record` hook may drop it too)."""
        try:
            cleaned = None if interaction is None else self.redactor.interaction(interaction)
            if cleaned is not None:
                with self._lock:
                    self.cassette.append(cleaned)
                    if recording.read_on_loop:
                        self.read_on_loop.append(f"{cleaned.request.method} {cleaned.request.url}")
                if self.redactor.response_holds_key(cleaned.response) or _frames_hold_key(cleaned):
                    with self._lock:
                        self.keys_in_responses.append(
                            f"{cleaned.request.method} {cleaned.request.url}"
                        )
                if self.on_recorded is not None:
                    self.on_recorded(cleaned)
        finally:
            with self._lock:
                self._open.discard(recording)
                self._lock.notify_all()

    def keeps(self, size: int) -> bool:
        """Whether a finished recording of `size` bytes of payloads may stay in memory (it
        is then counted)."""
        with self._lock:
            if self.spool is not None and self._kept + size > KEPT_IN_MEMORY:
                return False
            self._kept += size
            return True

    def forget(self) -> None:
        """In a forked child: the recordings in flight are the parent's; a fresh lock (another
        thread may have held this one at the fork); a spool of its own."""
        self._lock = threading.Condition()
        self._open = set()
        if self.spool is not None:
            self.spool = self.spool.fresh()

    def finish(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the recordings in flight to end, then end the rest
        as cut short by the session, with what they had."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._open:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._lock.wait(remaining)
            still_open = list(self._open)
        for recording in still_open:
            recording.finish(stopped_by="session")


def _frames_hold_key(interaction: Interaction) -> bool:
    """Whether a conversation's server frames hold a well-known key (stored as they came,
    as response bodies are: the session warns of them)."""
    if not interaction.frames:
        return False
    from replay.redact.shapes import chunks_hold_key

    server = [f.data + b"\n" for f in interaction.frames if f.sender == "server"]
    return chunks_hold_key(server)


class Recording:
    """The timeline of one response being recorded; finished once, then stored on its tape.

    Args:
        request: the request as sent (redaction happens on the tape).
        clock: stamps headers, chunks and the end.
        start: the clock reading when the request was sent.
        tape: receives the interaction when the recording finishes.
    """

    def __init__(self, request: Request, clock: Clock, start: float, tape: Tape) -> None:
        self.request = request
        self.clock = clock
        self.start = start
        self.tape = tape
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.headers_at = 0.0
        self._times: list[float] = []
        self._payloads: list[bytes] = []  # those not in the spool (the last ones)
        self._held = 0  # their bytes
        self._offsets: list[int] = []  # where those in the spool are (the first ones)
        self._lengths: list[int] = []
        self._spilling = tape.spool is not None  # (until the spool fails)
        self._lock = threading.Lock()
        self.finished = False
        #: The chunks are stamped by a reader on the client's event loop (not a thread).
        self.read_on_loop = False
        #: Where the times came from (`replay.model.TIMES`): "network" while every moment
        #: noted was a network arrival's, "reader" once one was a reader's clock reading.
        self.times: str | None = None
        self._network = type(clock) is MonotonicClock  # arrivals' times are on its timeline
        #: A WebSocket conversation's frames (`got_frame`); None for plain HTTP.
        self.frames: list[Frame] | None = None

    def elapsed(self) -> float:
        """Seconds since the request was sent."""
        return max(0.0, self.clock.now() - self.start)

    def at(self, moment: float | None) -> float:
        """The recording's time of `moment`, a network arrival's time on `time.monotonic()`
        (None: of now, as the reader reads it); noted in `times`."""
        if moment is None or not self._network:
            self.times = "reader"
            return self.elapsed()
        if self.times is None:
            self.times = "network"
        return max(0.0, moment - self.start)

    def got_headers(
        self, status: int, headers: list[tuple[str, str]], moment: float | None = None
    ) -> None:
        """Note the status line and headers, stamped now (or at the network's `moment`)."""
        self.headers_at = self.at(moment)
        self.status = status
        self.headers = headers

    def got_chunk(
        self, data: bytes, at: float | None = None, *, moment: float | None = None
    ) -> None:
        """Note a body chunk, stamped now, at `at`, or at the network's `moment` (ignored
        once finished)."""
        if at is None:
            at = self.at(moment)
        with self._lock:
            if not self.finished:
                at = max(at, self._times[-1] if self._times else self.headers_at)
                self._times.append(at)
                self._payloads.append(data)
                self._held += len(data)
                if self._held >= SPOOL_PIECE and self._spilling:
                    self._spill()

    def got_frame(self, sender: str, kind: str, data: bytes) -> None:
        """Note a WebSocket frame sent or received now (ignored once finished): the
        recording is then a conversation (`Interaction.frames`)."""
        with self._lock:
            if self.finished:
                return
            if self.frames is None:
                self.frames = []
            last = self.frames[-1].at if self.frames else self.headers_at
            self.frames.append(Frame(max(self.elapsed(), last), sender, kind, data))

    def _spill(self) -> bool:
        """Move the payloads held in memory to the spool; whether they went (if not, they
        stay, and so do the ones to come)."""
        assert self.tape.spool is not None
        offset = self.tape.spool.add(self._payloads)
        if offset is None:
            self._spilling = False
            return False
        for payload in self._payloads:
            self._offsets.append(offset)
            self._lengths.append(len(payload))
            offset += len(payload)
        self._payloads.clear()
        self._held = 0
        return True

    def _chunks(self) -> Chunks:
        """The chunks, their payloads in memory or in the spool."""
        times, spool, held = tuple(self._times), self.tape.spool, self._payloads
        if spool is None or (not self._offsets and self.tape.keeps(self._held)):
            return Chunks(times, held)
        if held and not (self._spilling and self._spill()):  # the spool failed: in memory
            return Chunks(times, (*SpooledPayloads(spool, self._offsets, self._lengths), *held))
        return Chunks._kept(times, SpooledPayloads(spool, self._offsets, self._lengths))

    def finish(
        self,
        *,
        error: BaseException | None = None,
        stopped_by: str | None = None,
        moment: float | None = None,
    ) -> None:
        """End the recording now (the first call wins) and store it on the tape.

        Args:
            error: the exception that ended the body (None: a clean end); stored under
                the end vocabulary's name (`replay.engine.ends`).
            stopped_by: "client" (it closed early) or "session" (it ended while this was
                still streaming); None when the body reached its end.
            moment: the network arrival's time (on `time.monotonic()`) that ended the body,
                when known (else now).
        """
        with self._lock:
            if self.finished:
                return
            self.finished = True
            chunks = self._chunks()
        if not self.status:  # never got headers (refused, or cut off): nothing to record
            self.tape.store(self, None)
            return
        now = self.elapsed() if moment is None or not self._network else moment - self.start
        at = max(now, chunks.times[-1] if chunks.times else self.headers_at)
        if self.frames:
            at = max(at, self.frames[-1].at)
        name, message = (None, "") if error is None else recorded_error(error)
        truncated = stopped_by is not None
        end = StreamEnd(at, name, message, truncated=truncated, stopped_by=stopped_by)
        response = Response(
            status=self.status,
            headers=self.headers,
            headers_at=self.headers_at,
            chunks=chunks,
            end=end,
            times=self.times or "reader",
        )
        self.tape.store(self, Interaction(self.request, response, frames=self.frames))
