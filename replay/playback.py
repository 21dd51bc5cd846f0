"""Replay transports: answer requests from a cassette, chunk by chunk, on the recorded schedule.

Chunk i is due at the absolute deadline `t_send + at_i / speed`; at instant speed there is no
schedule at all, so the loop neither sleeps nor reads a clock. After the last chunk the body
ends as recorded: EOF, or the recorded error raised as the client library's own exception
class (`httpx.RemoteProtocolError` for httpx, `httpx2.RemoteProtocolError` for httpx2).
The sync and async streams share everything but the waiting.

Faults (`replay.faults`) are applied before playing: they turn the recorded response into
another one (cut, rechunked, slowed…), so this loop stays the same. The only thing they add
to it is a stall's read timeout: when a stall's silence is longer than the client's read
timeout (`request.extensions["timeout"]["read"]`), the step after the silence is replaced
by the library's `ReadTimeout`, due when the client's read would give up.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from types import ModuleType
from typing import Any

import httpx

from replay._httpmod import async_stream, error_class, module_of, sync_stream
from replay.cassette import Cassette
from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, parse_speed
from replay.errors import CassetteMismatchError
from replay.faults import FaultLike, Injector, Outcome
from replay.model import Interaction, Request, Response
from replay.redact import Redactor

__all__ = [
    "AsyncReplayTransport",
    "ReplayTransport",
    "answer",
    "mismatch_error",
    "play_async",
    "play_sync",
    "played_for",
    "read_timeouts",
]

#: The message of the ReadTimeout a stall raises.
STALL_TIMEOUT_MESSAGE = "The read operation timed out (a replay stall outlasted the read timeout)"


def mismatch_error(
    cassette: Cassette, request: Request, record_mode: str, reason: str = ""
) -> CassetteMismatchError:
    """The error for a request `cassette` cannot answer, with the nearest recorded request
    (and `reason`: why the record mode did not record it)."""
    nearest, differences = cassette.explain(request)
    return CassetteMismatchError(
        method=request.method,
        url=request.url,
        cassette_path=cassette.path,
        record_mode=record_mode,
        nearest=nearest,
        differences=differences,
        reason=reason,
    )


def answer(cassette: Cassette, request: Request, record_mode: str = "none") -> Interaction:
    """The interaction that answers `request` (marked played), or raise CassetteMismatchError."""
    index = cassette.find(request)
    if index is None:
        raise mismatch_error(cassette, request, record_mode)
    return cassette.interactions[index]


def read_timeouts(
    response: Response, stall_steps: tuple[int, ...], read_timeout: float | None
) -> dict[int, float]:
    """The steps a stall makes the client's read time out at, and when (recorded seconds).

    A step after a stall times out when the silence before it (from the previous chunk, or
    the headers) is longer than `read_timeout`; the read gives up `read_timeout` into it.
    """
    if read_timeout is None or not stall_steps:
        return {}
    times = response.chunks.times
    timeouts = {}
    for step in stall_steps:
        before = times[step - 1] if step else response.headers_at
        at = times[step] if step < len(times) else response.end.at
        if at - before > read_timeout:
            timeouts[step] = before + read_timeout
    return timeouts


class _Replay:
    """The shared core of one replayed body: what comes next, and how long to wait for it.

    The body is a sequence of steps: one per chunk, then the end (EOF or the recorded error),
    each due at its recorded time. The sync and async iterators below only add the waiting.
    They are iterator classes rather than generators, so an abandoned replay needs no
    finalizing (trio warns about abandoned async generators). At instant speed the sync
    side hands out a plain generator over the payloads: the per-chunk cost of replay is
    then that of iterating a tuple. `timeouts` (from `read_timeouts`) replaces a step by
    the library's ReadTimeout, due at the given recorded time.
    """

    def __init__(
        self,
        module: ModuleType,
        response: Response,
        schedule: Schedule | None,
        clock: Clock,
        timeouts: dict[int, float] | None = None,
    ) -> None:
        self.module = module
        self.response = response
        self.schedule = schedule
        self.clock = clock
        self.closed = False
        self._times = response.chunks.times
        self._payloads = response.chunks.payloads
        self._count = len(self._payloads)
        self._next = 0  # the next chunk's index; _count is the end; past it, finished
        self._timeouts = timeouts or {}

    def wait(self) -> float:
        """Seconds until the next step is due; 0 (and no clock read) at instant speed."""
        index = self._next
        if self.schedule is None or self.closed or index > self._count:
            return 0.0
        at = self._times[index] if index < self._count else self.response.end.at
        if self._timeouts:
            at = self._timeouts.get(index, at)
        return self.schedule.delay(at, self.clock.now())

    def step(self) -> bytes | None:
        """Take the next chunk; None at the end or once closed; raise the recorded error."""
        index = self._next
        if self.closed or index > self._count:
            return None
        self._next = index + 1
        if self._timeouts and index in self._timeouts:
            self._next = self._count + 1
            raise error_class(self.module, "ReadTimeout")(STALL_TIMEOUT_MESSAGE)
        if index < self._count:
            return self._payloads[index]
        error = self.ending()
        if error is not None:
            raise error
        return None

    def ending(self) -> Exception | None:
        """The recorded error as the client library's own exception, or None for EOF."""
        end = self.response.end
        if end.error is None:
            return None
        return error_class(self.module, end.error)(end.message)


class _SyncReplay(_Replay):
    def __iter__(self) -> Iterator[bytes]:
        if self.schedule is None and self._next == 0 and not self._timeouts:
            return self._instant()
        return self

    def _instant(self) -> Iterator[bytes]:
        for data in self._payloads:
            if self.closed:
                return
            yield data
        self._next = self._count + 1
        error = None if self.closed else self.ending()
        if error is not None:
            raise error

    def __next__(self) -> bytes:
        delay = self.wait()
        if delay > 0:
            self.clock.sleep(delay)
        data = self.step()
        if data is None:
            raise StopIteration
        return data

    def close(self) -> None:
        self.closed = True


class _AsyncReplay(_Replay):
    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self.schedule is not None:
            delay = self.wait()
            if delay > 0:
                await self.clock.asleep(delay)
        data = self.step()
        if data is None:
            raise StopAsyncIteration
        return data

    async def aclose(self) -> None:
        self.closed = True


def _response(module: ModuleType, recorded: Response, stream: Any) -> Any:
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in recorded.headers]
    return module.Response(status_code=recorded.status, headers=headers, stream=stream)


def _read_timeout(request: Any) -> float | None:
    timeout = request.extensions.get("timeout")
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return float(read) if isinstance(read, (int, float)) else None


def _played(request: Any, played: Response | Outcome) -> tuple[Response, dict[int, float]]:
    if isinstance(played, Response):
        return played, {}
    steps = played.stall_steps()
    timeouts = read_timeouts(played.response, steps, _read_timeout(request)) if steps else {}
    return played.response, timeouts


class _Player:
    """What the sync and async replay transports share: speed, clock, lookup, faults."""

    def __init__(
        self,
        cassette: Cassette,
        speed: SpeedLike,
        redactor: Redactor | None,
        clock: Clock | None,
        faults: Iterable[FaultLike],
    ) -> None:
        self.cassette = cassette
        self.speed = parse_speed(speed)
        self.redactor = redactor or Redactor()
        self.clock = clock or MonotonicClock()
        self.injector = Injector(faults)
        self._lock = threading.Lock()

    def schedule(self) -> Schedule | None:
        """A schedule starting now, or None at instant speed."""
        return Schedule.starting_now(self.speed, self.clock)

    def lookup(self, request: Any) -> Response | Outcome:
        """What answers `request` (a read httpx / httpx2 request): a response, or, with
        faults, the outcome of this attempt; or raise CassetteMismatchError."""
        wanted = self.redactor.request(Request.from_httpx(request))
        with self._lock:
            index = self.cassette.find(wanted)
        if index is None:
            raise mismatch_error(self.cassette, wanted, "none")
        return played_for(self.cassette, index, wanted, self.injector, self._lock)


def played_for(
    cassette: Cassette, index: int, request: Request, injector: Injector, lock: threading.Lock
) -> Response | Outcome:
    """What interaction `index` (just found for `request`) plays: its recorded response, or,
    with faults, this attempt's outcome.

    An attempt a status fault answers does not use the interaction up: its play count
    (given by `Cassette.find`) is taken back, under `lock`, so the client's retry gets it.
    """
    recorded = cassette.interactions[index].response
    if not injector.faults:
        return recorded
    outcome = injector.outcome(index, request, recorded)
    if outcome.answered_by is not None:
        with lock:
            cassette.play_counts[index] -= 1
    return outcome


def play_sync(
    request: Any, played: Response | Outcome, schedule: Schedule | None, clock: Clock
) -> Any:
    """An httpx/httpx2 response (of the request's library) playing `played`.

    Args:
        request: the httpx / httpx2 request being answered.
        played: the recorded response, or the outcome of faults applied to it.
        schedule: the deadlines (None at instant speed).
        clock: the clock to wait on.
    """
    module = module_of(request)
    recorded, timeouts = _played(request, played)
    if schedule is not None:
        delay = schedule.delay(recorded.headers_at, clock.now())
        if delay > 0:
            clock.sleep(delay)
    source = _SyncReplay(module, recorded, schedule, clock, timeouts)
    return _response(module, recorded, sync_stream(module, source))


async def play_async(
    request: Any, played: Response | Outcome, schedule: Schedule | None, clock: Clock
) -> Any:
    """Async twin of `play_sync`."""
    module = module_of(request)
    recorded, timeouts = _played(request, played)
    if schedule is not None:
        delay = schedule.delay(recorded.headers_at, clock.now())
        if delay > 0:
            await clock.asleep(delay)
    source = _AsyncReplay(module, recorded, schedule, clock, timeouts)
    return _response(module, recorded, async_stream(module, source))


class ReplayTransport(httpx.BaseTransport):
    """A sync transport (for httpx and httpx2 clients) that answers from a cassette.

    Args:
        cassette: the recorded interactions; each plays once, in order, unless the
            cassette allows repeats.
        speed: 1 = as recorded, 10 = ten times faster, "instant" (or math.inf) = no waiting;
            "10x" style strings are accepted.
        redactor: applied to each request before matching (as it was before recording).
        clock: the clock to wait on (default: the real monotonic clock; a
            `replay.vtime.VirtualTime` for virtual time, a `VirtualClock` in unit tests).
        faults: `replay.faults` (or their specs) applied to what is played.

    Raises (from handle_request):
        CassetteMismatchError: no recorded interaction answers the request.
    """

    def __init__(
        self,
        cassette: Cassette,
        *,
        speed: SpeedLike = 1.0,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        faults: Iterable[FaultLike] = (),
    ) -> None:
        self._player = _Player(cassette, speed, redactor, clock, faults)

    @property
    def injector(self) -> Injector:
        """The faults applied, and the attempts each interaction had."""
        return self._player.injector

    def handle_request(self, request: Any) -> Any:
        """Answer `request` with the recorded response."""
        schedule = self._player.schedule()
        request.read()
        played = self._player.lookup(request)
        return play_sync(request, played, schedule, self._player.clock)


class AsyncReplayTransport(httpx.AsyncBaseTransport):
    """Async twin of `ReplayTransport`; waits with anyio, so asyncio and trio both work."""

    def __init__(
        self,
        cassette: Cassette,
        *,
        speed: SpeedLike = 1.0,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        faults: Iterable[FaultLike] = (),
    ) -> None:
        self._player = _Player(cassette, speed, redactor, clock, faults)

    @property
    def injector(self) -> Injector:
        """The faults applied, and the attempts each interaction had."""
        return self._player.injector

    async def handle_async_request(self, request: Any) -> Any:
        """Answer `request` with the recorded response."""
        schedule = self._player.schedule()
        await request.aread()
        played = self._player.lookup(request)
        return await play_async(request, played, schedule, self._player.clock)
