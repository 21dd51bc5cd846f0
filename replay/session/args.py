"""What a cassette session's arguments become: its faults, ignored hosts, speed and clocks.

Each import here happens only for the sessions that need it: faults (`replay.faults`),
ignored hosts (`replay.adapters.network`), virtual time (`replay.clock.vtime`) and the async
exit's wait (anyio). A test that replays without them, as most do, never loads them: every pytest
run pays for what its first cassette imports.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeGuard

from replay.clock import INSTANT, Clock, MonotonicClock, Speed, SpeedLike, speed_of
from replay.errors import ConfigurationError

if TYPE_CHECKING:
    from replay.clock.vtime import VirtualTime
    from replay.engine.recorder import Tape
    from replay.faults import Fault, FaultLike

__all__ = [
    "VIRTUAL",
    "Clocks",
    "clocks_for",
    "faults_of",
    "finish_async",
    "finish_wait",
    "host_names_of",
    "ignored_hosts",
    "is_virtual",
    "on_virtual_time",
    "session_speed",
]

#: The speed that replays as recorded on virtual time.
VIRTUAL = "virtual"

_FINISH_POLL = 0.005


def faults_of(faults: Iterable[FaultLike]) -> tuple[Fault, ...]:
    """`replay.faults.coerce(faults)`, without importing the faults when there are none."""
    if isinstance(faults, (tuple, list)) and not faults:
        return ()
    from replay.faults import coerce

    return coerce(faults)


def host_names_of(hosts: Iterable[str]) -> frozenset[str]:
    """`replay.adapters.network.host_names(hosts)`, not importing the network module for none."""
    if isinstance(hosts, (tuple, list, set, frozenset)) and not hosts:
        return frozenset()
    from replay.adapters.network import host_names

    return host_names(hosts)


def ignored_hosts(hosts: frozenset[str], localhost: bool) -> frozenset[str]:
    """`hosts`, and the loopback hosts if `localhost`."""
    if not localhost:
        return hosts
    from replay.adapters.network import LOOPBACK

    return hosts | LOOPBACK


#: The speed of a session and its clocks: whether it replays as recorded on virtual time
#: (speed "virtual"), the speed factor, the clock replay waits on, and the clock recordings
#: stamp chunks with (None: the default). A plain tuple: a NamedTuple's class costs ~0.3 ms
#: to make, in the first cassette's import.
Clocks = tuple[bool, Speed, Clock, Clock | None]


def clocks_for(speed: SpeedLike, given: Clock | None) -> Clocks:
    """The clocks of a session at `speed`, given the clock it was handed, if any.

    Raises:
        ConfigurationError: a bad speed, or virtual time with a clock of one's own.
    """
    if is_virtual(speed):
        if given is not None:
            raise ConfigurationError("speed 'virtual' brings its own clock: do not pass clock=")
        from replay.clock.vtime import RealClock, VirtualTime

        policy = session_speed(speed)[1]
        _ready_to_wait(policy)
        # Recordings stamp real time, even in a virtual-time session.
        return True, policy, VirtualTime(), RealClock()
    factor = speed_of(speed)
    if factor != INSTANT:
        _ready_to_wait(factor)
    return False, factor, given or MonotonicClock(), None


def _ready_to_wait(speed: Speed) -> None:
    """Import now what a replay that waits needs (its Stepper; the dialects, for a policy
    that keeps the time to first token), so that nothing is imported between a request's
    start and its first wait: the first replay of a process on time."""
    import replay.engine.stepper

    if not isinstance(speed, (int, float)) and (speed.needs_ttft or speed.needs_first_event):
        import replay.dialects.texts
        import replay.inspect.timing  # noqa: F401


def is_virtual(speed: SpeedLike) -> bool:
    """Whether `speed` asks for replay on virtual time: "virtual", alone or as an item of a
    speed policy ("virtual,ttft=recorded,rest=instant")."""
    if not isinstance(speed, str):
        return False
    return VIRTUAL in (item.strip().lower() for item in speed.split(","))


def session_speed(speed: SpeedLike) -> tuple[bool, Speed]:
    """Whether `speed` asks for virtual time, and the speed played (on virtual time: as
    recorded, or the policy given with "virtual").

    Raises:
        ConfigurationError: a bad speed or policy.
    """
    if not is_virtual(speed):
        return False, speed_of(speed)
    assert isinstance(speed, str)
    items = [item for item in speed.split(",") if item.strip().lower() != VIRTUAL]
    return True, speed_of(",".join(items)) if items else 1.0


def on_virtual_time(clock: Clock) -> TypeGuard[VirtualTime]:
    """Whether `clock` is a `VirtualTime` (which a session enters and leaves with itself);
    it cannot be one if `replay.clock.vtime` was never imported."""
    vtime = sys.modules.get("replay.clock.vtime")
    return vtime is not None and isinstance(clock, vtime.VirtualTime)


def finish_wait(timeout: float) -> float:
    """How long a sync exit may block for recordings still streaming: `timeout`, but not at
    all on a thread running an event loop (an async recording there could not progress)."""
    asyncio = sys.modules.get("asyncio")  # (not imported: no loop runs; none imported here)
    if asyncio is None:
        return timeout
    # (`get_running_loop` raises without a loop, a fifth of a microsecond on every exit)
    return timeout if asyncio._get_running_loop() is None else 0.0


async def finish_async(tape: Tape | None, timeout: float) -> None:
    """Wait (at most `timeout` s) for `tape`'s recordings without blocking the event loop:
    an async recording may be read on it."""
    deadline = time.monotonic() + timeout
    while tape is not None and tape.open and time.monotonic() < deadline:
        import anyio

        await anyio.sleep(_FINISH_POLL)
