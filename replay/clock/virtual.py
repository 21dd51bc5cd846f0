"""`replay.clock.VirtualClock`, in a module of its own: imported when first asked for."""

from __future__ import annotations

import attrs

from replay.clock import waits

__all__ = ["VirtualClock"]


@attrs.define
class VirtualClock:
    """A clock that moves only when slept on: exact, instant schedules for tests."""

    time: float = 0.0
    sleeps: list[float] = attrs.field(factory=list)

    def now(self) -> float:
        """The virtual time."""
        return self.time

    def sleep(self, seconds: float) -> None:
        """Advance the virtual time by `seconds`, at once (negative: ValueError, as time.sleep)."""
        if not seconds >= 0:
            raise ValueError(f"cannot sleep a negative time: {seconds!r} s")
        self.sleeps.append(seconds)
        self.time += seconds

    async def asleep(self, seconds: float) -> None:
        """Advance the virtual time by `seconds`, yielding to the event loop once."""
        self.sleep(seconds)
        await waits.sleep(0)
