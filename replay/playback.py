"""Replay transports: answer httpx / httpx2 requests from a cassette, on the recorded schedule.

A shell over the engine: the `Player` finds what answers a request (faults applied), the
engine's `Playing` body hands out its chunks when due (`replay.engine.playing`); this module
only turns them into an httpx / httpx2 response of the request's own library.
The recorded end is raised as that library's exception class (`httpx.RemoteProtocolError`
for httpx, `httpx2.RemoteProtocolError` for httpx2); a stall that outlasts the client's
read timeout (`request.extensions["timeout"]["read"]`) as its `ReadTimeout`.
At instant speed nothing waits and no clock is read (see `replay.engine.playing`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import httpx

from replay._httpmod import async_stream, error_class, module_of, sync_stream
from replay.cassette import Cassette
from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, parse_speed
from replay.engine.exchange import Replay
from replay.engine.player import Player
from replay.engine.playing import Fail, Playing
from replay.errors import hide_for_replay_errors
from replay.model import Request, Response
from replay.redact import Redactor

if TYPE_CHECKING:
    from replay.faults import FaultLike, Injector

__all__ = ["AsyncReplayTransport", "ReplayTransport", "play_async", "play_sync"]


def _read_timeout(request: Any) -> float | None:
    timeout = request.extensions.get("timeout")
    read = timeout.get("read") if isinstance(timeout, dict) else None
    return float(read) if isinstance(read, (int, float)) else None


def _library(request: Any) -> tuple[ModuleType, Fail]:
    """The module of `request` (httpx or httpx2) and how its recorded ends are raised,
    cached by the request's class (asked once per replayed request)."""
    kind = type(request)
    found = _LIBRARIES.get(kind)
    if found is None:
        module = module_of(request)

        def fail(name: str, message: str) -> BaseException:
            return error_class(module, name)(message)

        found = _LIBRARIES[kind] = (module, fail)
    return found


_LIBRARIES: dict[type, tuple[ModuleType, Fail]] = {}


def _response(module: ModuleType, recorded: Response, stream: Any) -> Any:
    try:
        # The usual ASCII headers as they are: the library encodes them as ASCII, which is
        # what latin-1 makes of them too.
        return module.Response(status_code=recorded.status, headers=recorded.headers, stream=stream)
    except UnicodeEncodeError:  # a latin-1 header value beyond ASCII
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in recorded.headers]
        return module.Response(status_code=recorded.status, headers=headers, stream=stream)


def _body(request: Any, replay: Replay) -> tuple[ModuleType, Playing]:
    module, fail = _library(request)
    read_timeout = _read_timeout(request) if replay.played.stall_steps else None
    return module, replay.body(fail, read_timeout)


def play_sync(request: Any, replay: Replay) -> Any:
    """An httpx/httpx2 response (of the request's library) playing `replay`, its headers
    returned at their recorded time; a stall that outlasts the request's read timeout ends
    it as the library's `ReadTimeout`."""
    module, body = _body(request, replay)
    body.head()
    return _response(module, replay.played.response, sync_stream(module, body))


async def play_async(request: Any, replay: Replay) -> Any:
    """Async twin of `play_sync`."""
    module, body = _body(request, replay)
    await body.ahead()
    return _response(module, replay.played.response, async_stream(module, body))


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
        played = self.player.take(Request.from_httpx(request))
        return play_sync(request, Replay(played, schedule, self.clock))


class AsyncReplayTransport(_Shell, httpx.AsyncBaseTransport):
    """Async twin of `ReplayTransport`; waits with anyio, so asyncio and trio both work."""

    async def handle_async_request(self, request: Any) -> Any:
        """Answer `request` with the recorded response."""
        __tracebackhide__ = hide_for_replay_errors
        schedule = Schedule.starting_now(self.speed, self.clock)
        await request.aread()
        played = self.player.take(Request.from_httpx(request))
        return await play_async(request, Replay(played, schedule, self.clock))
