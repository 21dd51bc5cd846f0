"""Replay transports: answer requests from a cassette, chunk by chunk, on the recorded schedule.

Chunk i is due at the absolute deadline `t_send + at_i / speed`; at instant speed there is no
schedule at all, so the loop neither sleeps nor reads a clock. After the last chunk the body
ends as recorded: EOF, or the recorded error raised as the client library's own exception
class (`httpx.RemoteProtocolError` for httpx, `httpx2.RemoteProtocolError` for httpx2).
The sync and async streams share everything but the waiting.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

import httpx

from replay._httpmod import async_stream, error_class, module_of, sync_stream
from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, parse_speed
from replay.errors import CassetteMismatchError
from replay.model import Cassette, Interaction, Request, Response
from replay.redact import Redactor

__all__ = ["AsyncReplayTransport", "ReplayTransport", "answer", "mismatch_error"]


def mismatch_error(cassette: Cassette, request: Request, record_mode: str) -> CassetteMismatchError:
    """The error for a request `cassette` cannot answer, with the nearest recorded request."""
    nearest, differences = cassette.explain(request)
    return CassetteMismatchError(
        method=request.method,
        url=request.url,
        cassette_path=cassette.path,
        record_mode=record_mode,
        nearest=nearest,
        differences=differences,
    )


def answer(cassette: Cassette, request: Request, record_mode: str = "none") -> Interaction:
    """The interaction that answers `request` (marked played), or raise CassetteMismatchError."""
    index = cassette.find(request)
    if index is None:
        raise mismatch_error(cassette, request, record_mode)
    return cassette.interactions[index]


class _Replay:
    """The shared core of one replayed body: what comes next, and how long to wait for it.

    The body is a sequence of steps: one per chunk, then the end (EOF or the recorded error),
    each due at its recorded time. The sync and async iterators below only add the waiting.
    They are iterator classes rather than generators, so an abandoned replay needs no
    finalizing (trio warns about abandoned async generators).
    """

    def __init__(
        self, module: ModuleType, response: Response, schedule: Schedule | None, clock: Clock
    ) -> None:
        self.module = module
        self.response = response
        self.schedule = schedule
        self.clock = clock
        self.closed = False
        self._next = 0  # the next chunk's index; len(chunks) is the end; past it, finished

    def wait(self) -> float:
        """Seconds until the next step is due; 0 (and no clock read) at instant speed."""
        chunks = self.response.chunks
        if self.schedule is None or self.closed or self._next > len(chunks):
            return 0.0
        at = chunks[self._next].at if self._next < len(chunks) else self.response.end.at
        return self.schedule.delay(at, self.clock.now())

    def step(self) -> bytes | None:
        """Take the next chunk; None at the end or once closed; raise the recorded error."""
        chunks = self.response.chunks
        if self.closed or self._next > len(chunks):
            return None
        index = self._next
        self._next += 1
        if index < len(chunks):
            return chunks[index].data
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
        return self

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


class _Player:
    """What the sync and async replay transports share: speed, clock, lookup."""

    def __init__(
        self,
        cassette: Cassette,
        speed: SpeedLike,
        redactor: Redactor | None,
        clock: Clock | None,
    ) -> None:
        self.cassette = cassette
        self.speed = parse_speed(speed)
        self.redactor = redactor or Redactor()
        self.clock = clock or MonotonicClock()

    def schedule(self) -> Schedule | None:
        """A schedule starting now, or None at instant speed."""
        if math.isinf(self.speed):
            return None
        return Schedule(start=self.clock.now(), speed=self.speed)


def play_sync(
    request: Any, interaction: Interaction, schedule: Schedule | None, clock: Clock
) -> Any:
    """An httpx/httpx2 response (of the request's library) replaying `interaction`."""
    module = module_of(request)
    recorded = interaction.response
    if schedule is not None:
        delay = schedule.delay(recorded.headers_at, clock.now())
        if delay > 0:
            clock.sleep(delay)
    source = _SyncReplay(module, recorded, schedule, clock)
    return _response(module, recorded, sync_stream(module, source))


async def play_async(
    request: Any, interaction: Interaction, schedule: Schedule | None, clock: Clock
) -> Any:
    """Async twin of `play_sync`."""
    module = module_of(request)
    recorded = interaction.response
    if schedule is not None:
        delay = schedule.delay(recorded.headers_at, clock.now())
        if delay > 0:
            await clock.asleep(delay)
    source = _AsyncReplay(module, recorded, schedule, clock)
    return _response(module, recorded, async_stream(module, source))


class ReplayTransport(httpx.BaseTransport):
    """A sync transport (for httpx and httpx2 clients) that answers from a cassette.

    Args:
        cassette: the recorded interactions; each plays once, in order, unless the
            cassette allows repeats.
        speed: 1 = as recorded, 10 = ten times faster, "instant" (or math.inf) = no waiting;
            "10x" style strings are accepted.
        redactor: applied to each request before matching (as it was before recording).
        clock: the clock to wait on (default: the real monotonic clock).

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
    ) -> None:
        self._player = _Player(cassette, speed, redactor, clock)

    def handle_request(self, request: Any) -> Any:
        """Answer `request` with the recorded response."""
        schedule = self._player.schedule()
        request.read()
        wanted = self._player.redactor.request(Request.from_httpx(request))
        interaction = answer(self._player.cassette, wanted)
        return play_sync(request, interaction, schedule, self._player.clock)


class AsyncReplayTransport(httpx.AsyncBaseTransport):
    """Async twin of `ReplayTransport`; waits with anyio, so asyncio and trio both work."""

    def __init__(
        self,
        cassette: Cassette,
        *,
        speed: SpeedLike = 1.0,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._player = _Player(cassette, speed, redactor, clock)

    async def handle_async_request(self, request: Any) -> Any:
        """Answer `request` with the recorded response."""
        schedule = self._player.schedule()
        await request.aread()
        wanted = self._player.redactor.request(Request.from_httpx(request))
        interaction = answer(self._player.cassette, wanted)
        return await play_async(request, interaction, schedule, self._player.clock)
