"""Replay transports: answer httpx / httpx2 requests from a cassette, on the recorded schedule.

A shell over the engine: the `Player` finds what answers a request (faults applied), the
`Stepper` says what comes next and when; this module only waits (the clock's `sleep` or
`asleep`) and turns the steps into an httpx / httpx2 response of the request's own library.
The recorded end is raised as that library's exception class (`httpx.RemoteProtocolError`
for httpx, `httpx2.RemoteProtocolError` for httpx2); a stall that outlasts the client's
read timeout (`request.extensions["timeout"]["read"]`) as its `ReadTimeout`.
At instant speed nothing waits and no clock is read; a response without a stall is then its
payloads and its recorded end, without a Stepper, sync or async (the usual replay in a test
suite, which then never imports `replay.engine.stepper`: its attrs classes cost 1.5 ms a run).
"""

from __future__ import annotations

import collections
import math
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import httpx

from replay._httpmod import async_stream, error_class, module_of, sync_stream
from replay.adapters.httpx_capture import request_from_httpx
from replay.cassette import Cassette
from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, parse_speed
from replay.engine.player import Played, Player
from replay.errors import hide_for_replay_errors
from replay.model import Response, StreamEnd
from replay.redact import Redactor

if TYPE_CHECKING:
    from replay.engine.stepper import Step, Stepper
    from replay.faults import FaultLike, Injector

__all__ = ["AsyncReplayTransport", "ReplayTransport", "play_async", "play_sync"]


def _read_timeout(request: Any) -> float | None:
    timeout = request.extensions.get("timeout")
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return float(read) if isinstance(read, (int, float)) else None


def _stepping() -> ModuleType:
    """`replay.engine.stepper`, imported by the first response that steps (see the module's
    docstring)."""
    from replay.engine import stepper

    return stepper


def _stepper(request: Any, played: Played, schedule: Schedule | None) -> Stepper:
    steps = _stepping()
    response, stalls = played.response, played.stall_steps
    if not stalls:
        return steps.Stepper(response, schedule)  # type: ignore[no-any-return]
    timeouts = steps.read_timeouts(response, stalls, _read_timeout(request))
    return steps.Stepper(response, schedule, timeouts=timeouts)  # type: ignore[no-any-return]


def _data_or_end(module: ModuleType, steps: ModuleType, step: Step) -> bytes | None:
    """A chunk's bytes; None at a clean end; raise a recorded error as the library's own.

    Args:
        steps: `replay.engine.stepper`, whose step classes `step` is of.
    """
    if isinstance(step, steps.Data):
        data: bytes = step.data
        return data
    if isinstance(step, steps.End) and step.error is not None:
        raise error_class(module, step.error)(step.message)
    return None


class _SyncReplay:
    """A replayed body for a sync client. At instant speed it hands out a plain generator
    over the payloads (the per-chunk cost of a tuple's iteration)."""

    def __init__(self, module: ModuleType, stepper: Stepper, clock: Clock) -> None:
        self.module = module
        self.steps = _stepping()
        self.stepper = stepper
        self.clock = clock

    def __iter__(self) -> Iterator[bytes]:
        rest = self.stepper.rest_at_once()
        return self if rest is None else self._instant(rest)

    def _instant(self, payloads: Sequence[bytes]) -> Iterator[bytes]:
        stepper = self.stepper
        for data in payloads:
            if stepper.closed:
                return
            yield data
        _data_or_end(self.module, self.steps, stepper.next())

    def __next__(self) -> bytes:
        step = self.steps.step_sync(self.stepper, self.clock)
        data = _data_or_end(self.module, self.steps, step)
        if data is None:
            raise StopIteration
        return data

    def close(self) -> None:
        self.stepper.close()


class _AsyncReplay:
    """A replayed body for an async client (an iterator class: nothing to finalize)."""

    def __init__(self, module: ModuleType, stepper: Stepper, clock: Clock) -> None:
        self.module = module
        self.steps = _stepping()
        self.stepper = stepper
        self.clock = clock

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        step = await self.steps.step_async(self.stepper, self.clock)
        data = _data_or_end(self.module, self.steps, step)
        if data is None:
            raise StopAsyncIteration
        return data

    async def aclose(self) -> None:
        self.stepper.close()


def _instant_classes(module: ModuleType) -> tuple[type[Any], type[Any]]:
    """`module`'s sync and async streams of a response played at instant speed without a
    stall: its payloads, then its recorded end; no Stepper, no clock. A closed stream stops
    without its end, as a Stepper would: closing uses its payloads up."""

    class Instant:
        """What both streams share: the payloads left, the end, and closing."""

        def __init__(self, payloads: Sequence[bytes], end: StreamEnd) -> None:
            self.rest = iter(payloads)
            self.end = end
            self.closed = False

        def raise_end(self) -> None:
            """Raise the recorded error as `module`'s own, unless the stream was closed."""
            end = self.end
            if end.error is not None and not self.closed:
                raise error_class(module, end.error)(end.message)

        def drop(self) -> None:
            self.closed = True
            collections.deque(self.rest, maxlen=0)  # what is left will not be handed out

    class InstantStream(Instant, module.SyncByteStream):  # type: ignore[name-defined,misc]
        def __iter__(self) -> Iterator[bytes]:
            yield from self.rest  # the per-chunk cost of a tuple's iteration
            self.raise_end()

        def close(self) -> None:
            self.drop()

    class AsyncInstantStream(Instant, module.AsyncByteStream):  # type: ignore[name-defined,misc]
        # Its chunks come from an async generator, a third cheaper a chunk than an iterator
        # class's coroutines, which `aclose` closes: let go half read, it would otherwise be
        # left to the event loop to finalize (with a ResourceWarning under trio).
        chunks: AsyncGenerator[bytes, None] | None = None

        def __aiter__(self) -> AsyncIterator[bytes]:
            self.chunks = self._chunks()
            return self.chunks

        async def _chunks(self) -> AsyncGenerator[bytes, None]:
            for data in self.rest:
                yield data
            self.raise_end()

        async def aclose(self) -> None:
            self.drop()
            if self.chunks is not None:  # (it awaits nothing: it ends at once)
                await self.chunks.aclose()

    return InstantStream, AsyncInstantStream


def _library(request: Any) -> tuple[ModuleType, type[Any], type[Any]]:
    """The module of `request` (httpx or httpx2) and its instant stream classes (sync,
    async), cached by the request's class (asked once per replayed request)."""
    kind = type(request)
    found = _LIBRARIES.get(kind)
    if found is None:
        module = module_of(request)
        found = _LIBRARIES[kind] = (module, *_instant_classes(module))
    return found


_LIBRARIES: dict[type, tuple[ModuleType, type[Any], type[Any]]] = {}


def _response(module: ModuleType, recorded: Response, stream: Any) -> Any:
    try:
        # The usual ASCII headers as they are: the library encodes them as ASCII, which is
        # what latin-1 makes of them too.
        return module.Response(status_code=recorded.status, headers=recorded.headers, stream=stream)
    except UnicodeEncodeError:  # a latin-1 header value beyond ASCII
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in recorded.headers]
        return module.Response(status_code=recorded.status, headers=headers, stream=stream)


def play_sync(request: Any, played: Played, schedule: Schedule | None, clock: Clock) -> Any:
    """An httpx/httpx2 response (of the request's library) playing `played`, its headers
    returned at their recorded time.

    Args:
        request: the httpx / httpx2 request being answered.
        played: what the Player found for it.
        schedule: the deadlines (None at instant speed).
        clock: the clock to wait on.
    """
    module, instant, _ = _library(request)
    response = played.response
    if schedule is None and not played.stall_steps:  # nothing waits: no Stepper needed
        return _response(module, response, instant(response.chunks.payloads, response.end))
    stepper = _stepper(request, played, schedule)
    _stepping().step_sync(stepper, clock)  # the headers
    return _response(
        module, played.response, sync_stream(module, _SyncReplay(module, stepper, clock))
    )


async def play_async(request: Any, played: Played, schedule: Schedule | None, clock: Clock) -> Any:
    """Async twin of `play_sync`."""
    module, _, instant = _library(request)
    response = played.response
    if schedule is None and not played.stall_steps:  # nothing waits: no Stepper needed
        return _response(module, response, instant(response.chunks.payloads, response.end))
    stepper = _stepper(request, played, schedule)
    await _stepping().step_async(stepper, clock)  # the headers
    return _response(
        module, played.response, async_stream(module, _AsyncReplay(module, stepper, clock))
    )


class _Shell:
    """What the sync and async replay transports share: speed, clock, the Player."""

    def __init__(
        self,
        cassette: Cassette,
        *,
        speed: SpeedLike = 1.0,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        faults: Iterable[FaultLike] = (),
    ) -> None:
        self.speed = parse_speed(speed)
        self.clock = clock or MonotonicClock()
        self.player = Player(cassette, redactor=redactor, faults=faults)

    @property
    def injector(self) -> Injector:
        """The faults applied, and the attempts each interaction had."""
        return self.player.injector


class ReplayTransport(_Shell, httpx.BaseTransport):
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

    def handle_request(self, request: Any) -> Any:
        """Answer `request` with the recorded response."""
        __tracebackhide__ = hide_for_replay_errors
        speed = self.speed
        schedule = None if speed == math.inf else Schedule.starting_now(speed, self.clock)
        request.read()
        played = self.player.take(request_from_httpx(request))
        return play_sync(request, played, schedule, self.clock)


class AsyncReplayTransport(_Shell, httpx.AsyncBaseTransport):
    """Async twin of `ReplayTransport`; waits with anyio, so asyncio and trio both work."""

    async def handle_async_request(self, request: Any) -> Any:
        """Answer `request` with the recorded response."""
        __tracebackhide__ = hide_for_replay_errors
        schedule = Schedule.starting_now(self.speed, self.clock)
        await request.aread()
        played = self.player.take(request_from_httpx(request))
        return await play_async(request, played, schedule, self.clock)
