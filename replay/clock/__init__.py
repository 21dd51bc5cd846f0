"""Speed, clocks and the replay schedule.

A recorded chunk `at` seconds after the request was sent is due at the absolute deadline
`t_send + at / speed`; under a speed policy (`replay.clock.policy`: the time to first token
as recorded, gaps capped, per-phase factors, seeded jitter), at `t_send` plus the time the
policy maps `at` to. Waiting for absolute deadlines, rather than sleeping each recorded gap,
keeps the error of one late wake-up from adding up over a long stream. The schedule is pure:
it reads a clock and says how long to wait; the sync and async streams do the waiting.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, Union

from replay.clock import waits
from replay.clock.frozen import Frozen
from replay.errors import ConfigurationError

if TYPE_CHECKING:
    from replay.clock.policy import SpeedPolicy
    from replay.clock.virtual import VirtualClock

__all__ = [
    "INSTANT",
    "MIN_SPEED",
    "Clock",
    "MonotonicClock",
    "Schedule",
    "Speed",
    "SpeedLike",
    "VirtualClock",
    "factor_of",
    "format_speed",
    "parse_speed",
    "seconds",
    "speed_of",
]

#: The speed of "no waiting at all".
INSTANT = math.inf

#: The slowest speed: a thousand times slower than recorded. A recorded time is at most
#: a week (`replay.model.MAX_SECONDS`), so no wait is longer than some 19 years: far below
#: what `time.sleep` takes (some 292 years), where `1e-300` would overflow every wait.
MIN_SPEED = 0.001

#: What a speed may be given as: a factor (1, 10.0, "10x", "instant"), a policy's spec
#: ("ttft=recorded,rest=instant"), a mapping of its keys, or a `SpeedPolicy`.
SpeedLike = Union[float, int, str, Mapping[str, object], "SpeedPolicy"]
#: A speed as replay uses it: a factor, or a policy that is more than one.
Speed = Union[float, "SpeedPolicy"]


def speed_of(value: SpeedLike) -> Speed:
    """A factor (`parse_speed`), or a speed policy from its spec, a mapping of its keys or a
    `SpeedPolicy` (`replay.clock.policy`); a policy that is only a factor is that factor.

    Raises:
        ConfigurationError: a bad factor or policy, in one line.
    """
    if isinstance(value, str) and "=" not in value and "," not in value:
        return parse_speed(value)
    if isinstance(value, (int, float)):
        return parse_speed(value)
    from replay.clock.policy import SpeedPolicy, parse_policy

    if isinstance(value, SpeedPolicy):
        policy = value
    elif isinstance(value, (str, Mapping)):
        policy = parse_policy(value)
    else:
        raise ConfigurationError(f"speed must be a number, 'instant' or a policy, not {value!r}")
    factor = policy.factor
    return policy if factor is None else factor


def parse_speed(value: float | int | str) -> float:
    """A speed factor from `1`, `10.0`, `"10x"`, `"0.5x"`, `"instant"` or `math.inf`.

    Raises:
        ConfigurationError: not a positive number, nor "instant".
    """
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("instant", "inf", "max"):
            return INSTANT
        try:
            number = float(text[:-1] if text.endswith("x") else text)
        except ValueError:
            raise ConfigurationError(
                f"speed {value!r} is not a number: use e.g. 1, '10x' or 'instant'"
            ) from None
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float: no waiting, in effect
            number = INSTANT
    else:
        raise ConfigurationError(f"speed must be a number or 'instant', not {value!r}")
    if not number > 0:  # also rejects NaN
        raise ConfigurationError(f"speed must be positive (1 = as recorded), not {value!r}")
    if number < MIN_SPEED:
        raise ConfigurationError(
            f"speed {value!r} is too slow: a speed is from {MIN_SPEED:g} (a thousand times "
            "slower than recorded) up, or 'instant'"
        )
    return number


def seconds(value: object, name: str) -> float:
    """`value` as a finite, non-negative number of seconds.

    Raises:
        ConfigurationError: naming `name`, for anything else.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{name} must be a number of seconds, not {value!r}")
    if not 0 <= value < math.inf:  # also rejects NaN
        raise ConfigurationError(f"{name} must be a finite number of seconds >= 0, not {value!r}")
    return float(value)


def factor_of(speed: Speed) -> float:
    """The one factor of `speed`: itself, or a policy's `rest` (what plays by a factor
    alone under a policy: WebSocket frames)."""
    return speed if isinstance(speed, (int, float)) else speed.rest


def format_speed(speed: Speed) -> str:
    """`"instant"`, `"10x"` or a policy's spec: the inverse of `speed_of`, for messages."""
    if not isinstance(speed, (int, float)):
        return str(speed)
    return "instant" if math.isinf(speed) else f"{speed:g}x"


class Clock(Protocol):
    """A source of monotonic time and a way to wait for it (sync)."""

    def now(self) -> float:
        """Seconds on a monotonic clock."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block for `seconds`."""
        ...

    async def asleep(self, seconds: float) -> None:
        """Wait `seconds` without blocking the event loop."""
        ...


class MonotonicClock:
    """The real clock: `time.monotonic` and `time.sleep`."""

    def now(self) -> float:
        """Seconds on `time.monotonic`."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """`time.sleep(seconds)`."""
        time.sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        """Wait `seconds` on the running loop, asyncio's or trio's, importing nothing (see
        `replay.clock.waits`): a replay's first wait starts on time."""
        await waits.sleep(seconds)


class Schedule(Frozen):
    """When each recorded moment is due, for one replayed response.

    Args:
        start: the clock reading when the request was sent.
        speed: the speed factor (finite and positive; instant replay has no schedule).
        policy: a speed policy that is more than a factor: the Stepper then plays each step
            at the time `policy.timeline` maps it to (`speed` is then its `rest`).
    """

    # (A plain immutable class, not attrs: instant replay never even makes one.)
    __slots__ = ("policy", "speed", "start")
    FIELDS = ("start", "speed", "policy")

    start: float
    speed: float
    policy: SpeedPolicy | None

    def __init__(self, start: float, speed: float, policy: SpeedPolicy | None = None) -> None:
        if not speed >= MIN_SPEED:  # (NaN too): slower, a wait could overflow
            raise ValueError(f"'speed' must be >= {MIN_SPEED:g}: {speed!r}")
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "speed", speed)
        object.__setattr__(self, "policy", policy)

    @classmethod
    def starting_now(cls, speed: Speed, clock: Clock) -> Schedule | None:
        """The schedule of a response whose request is sent now, or None at instant speed
        (no schedule: no waiting and no clock reads)."""
        if isinstance(speed, (int, float)):
            if math.isinf(speed):
                return None
            return cls(start=clock.now(), speed=speed)
        return cls(start=clock.now(), speed=factor_of(speed), policy=speed)

    def deadline(self, at: float) -> float:
        """The clock reading at which recorded time `at` is due."""
        return self.start + at / self.speed

    def delay(self, at: float, now: float) -> float:
        """How long to wait at clock reading `now` for recorded time `at` (never negative)."""
        return max(0.0, self.start + at / self.speed - now)


def __getattr__(name: str) -> Any:
    # `VirtualClock` is made when first asked for: a suite that replays never needs it, and
    # making an attrs class costs every run's first cassette about 0.5 ms.
    if name == "VirtualClock":
        from replay.clock.virtual import VirtualClock

        return VirtualClock
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
