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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from replay.cassette import Cassette
from replay.clock import Clock
from replay.model import Chunks, Interaction, Request, Response, StreamEnd
from replay.redact import Redactor

__all__ = ["Recording", "Tape"]


class Tape:
    """Where finished recordings go: redacted, then appended to `cassette`.

    Args:
        cassette: receives each interaction, in the order they finish.
        redactor: what to scrub before anything is stored (default: credentials).
        on_recorded: called with each stored interaction (e.g. to log or save it).
    """

    def __init__(
        self,
        cassette: Cassette,
        redactor: Redactor | None = None,
        *,
        on_recorded: Callable[[Interaction], None] | None = None,
    ) -> None:
        self.cassette = cassette
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
                if self.redactor.response_holds_key(cleaned.response):
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

    def forget(self) -> None:
        """In a forked child: the recordings in flight are the parent's; a fresh lock (another
        thread may have held this one at the fork)."""
        self._lock = threading.Condition()
        self._open = set()

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
        self._payloads: list[bytes] = []
        self._lock = threading.Lock()
        self.finished = False
        #: The chunks are stamped by a reader on the client's event loop (not a thread).
        self.read_on_loop = False

    def elapsed(self) -> float:
        """Seconds since the request was sent."""
        return max(0.0, self.clock.now() - self.start)

    def got_headers(self, status: int, headers: list[tuple[str, str]]) -> None:
        """Note the status line and headers, stamped now."""
        self.headers_at = self.elapsed()
        self.status = status
        self.headers = headers

    def got_chunk(self, data: bytes, at: float | None = None) -> None:
        """Note a body chunk, stamped now or at `at` (ignored once finished)."""
        if at is None:
            at = self.elapsed()
        with self._lock:
            if not self.finished:
                if self._times and at < self._times[-1]:
                    at = self._times[-1]
                self._times.append(at)
                self._payloads.append(data)

    def finish(self, *, error: BaseException | None = None, stopped_by: str | None = None) -> None:
        """End the recording now (the first call wins) and store it on the tape.

        Args:
            error: the exception that ended the body (None: a clean end).
            stopped_by: "client" (it closed early) or "session" (it ended while this was
                still streaming); None when the body reached its end.
        """
        with self._lock:
            if self.finished:
                return
            self.finished = True
            times, payloads = tuple(self._times), tuple(self._payloads)
        if not self.status:  # never got headers (refused, or cut off): nothing to record
            self.tape.store(self, None)
            return
        at = max(self.elapsed(), times[-1] if times else self.headers_at)
        end = StreamEnd(
            at=at,
            error=None if error is None else type(error).__name__,
            message="" if error is None else str(error),
            truncated=stopped_by is not None,
            stopped_by=stopped_by,
        )
        response = Response(
            status=self.status,
            headers=self.headers,
            headers_at=self.headers_at,
            chunks=Chunks(times, payloads),
            end=end,
        )
        self.tape.store(self, Interaction(self.request, response))
