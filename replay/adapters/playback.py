"""Replay transports: answer httpx / httpx2 requests from a cassette, on the recorded schedule.

A transport is the exchange's desk (`replay.engine.exchange`) for its own `Player`, which
finds what answers a request (faults applied); the httpx shell (`replay.adapters.httpx`)
plays it as a session's request is played: the engine's `Playing` body hands out its chunks
when due, as an httpx / httpx2 response of the request's own library.
The recorded end is raised as that library's exception class (`httpx.RemoteProtocolError`
for httpx, `httpx2.RemoteProtocolError` for httpx2); a stall or a recorded gap that
outlasts the client's read timeout (`request.extensions["timeout"]["read"]`) as its
`ReadTimeout`, that long after the read began.
At instant speed nothing waits and no clock is read (see `replay.engine.playing`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import httpx

from replay.adapters.httpx import ahandle, handle, play_async, play_sync
from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, speed_of
from replay.engine.player import Played, Player
from replay.errors import hide_for_replay_errors
from replay.model import Request
from replay.redact.redactor import Redactor
from replay.store.cassette import Cassette

if TYPE_CHECKING:
    from replay.engine.recorder import Recording
    from replay.faults import FaultLike, Injector

__all__ = ["AsyncReplayTransport", "ReplayTransport", "play_async", "play_sync"]


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
        self.speed = speed_of(speed)
        self.clock = clock or MonotonicClock()
        self.player = Player(cassette, redactor=redactor, faults=faults)

    @property
    def injector(self) -> Injector:
        """The faults applied, and the attempts each interaction had."""
        return self.player.injector

    # -- the exchange's desk (`replay.engine.exchange.Desk`): every request replays ---------

    def ignores(self, url: object) -> bool:
        """No request goes live: the transport has no network behind it."""
        return False

    def schedule(self) -> Schedule | None:
        """The deadlines of a response whose request is sent now (None at instant speed)."""
        return Schedule.starting_now(self.speed, self.clock)

    def answer(self, request: Request) -> Played:
        """What replays `request` (counted as played).

        Raises:
            CassetteMismatchError: no recorded interaction answers it.
        """
        __tracebackhide__ = hide_for_replay_errors
        return self.player.take(request)

    def start_recording(self, request: Request) -> Recording:
        """Never asked: `answer` answers every request or raises."""
        raise AssertionError("a replay transport records nothing")


class ReplayTransport(_Shell, httpx.BaseTransport):
    """A sync transport (for httpx and httpx2 clients) that answers from a cassette.

    Args:
        cassette: the recorded interactions; each plays once, in order, unless the
            cassette allows repeats.
        speed: 1 = as recorded, 10 = ten times faster, "instant" (or math.inf) = no waiting;
            "10x" style strings are accepted; or a speed policy ("ttft=recorded,rest=instant",
            a mapping, a `SpeedPolicy`: `replay.clock.policy`).
        redactor: applied to each request before matching (as it was before recording).
        clock: the clock to wait on (default: the real monotonic clock; a
            `replay.clock.vtime.VirtualTime` for virtual time, a `VirtualClock` in unit tests).
        faults: `replay.faults` (or their specs) applied to what is played.

    Raises (from handle_request):
        CassetteMismatchError: no recorded interaction answers the request.
    """

    def handle_request(self, request: Any) -> Any:
        """Answer `request` with the recorded response."""
        __tracebackhide__ = hide_for_replay_errors
        return handle(self, request, _unsent)


class AsyncReplayTransport(_Shell, httpx.AsyncBaseTransport):
    """Async twin of `ReplayTransport`; waits with anyio, so asyncio and trio both work."""

    async def handle_async_request(self, request: Any) -> Any:
        """Answer `request` with the recorded response."""
        __tracebackhide__ = hide_for_replay_errors
        return await ahandle(self, request, _unsent)


def _unsent(request: Any) -> Any:
    """The send of a replay transport: never called (it answers every request, or raises)."""
    raise AssertionError("a replay transport sends nothing")
