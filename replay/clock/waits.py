"""Waiting on the event loop that runs the client: asyncio's or trio's, found without imports.

A replay's first wait must start on time: anyio's `sleep` imports its asyncio backend on
its first call (31–41 ms, which often sets off a full garbage collection of the client's
heap), so the clocks wait through the running library itself, found in `sys.modules` (a
running loop's library is imported already): nothing is imported inside a wait. A loop of
neither library (none that anyio supports) falls back to anyio.

Virtual time (`replay.clock.vtime`) skips a gap without skipping what falls due inside it:
`skip` moves the clocks to each timer the client set inside the gap (asyncio's scheduled
handles; trio's deadlines, whose clock is moved with the skip) and lets the loop run it,
and what it sets off, before moving on; the next chunk comes after all of them, in order.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["library", "skip", "sleep"]

#: How many turns of the loop a skip gives what a due timer set off, at most, before it
#: moves on (a client that always has work ready would otherwise hold it forever).
_TURNS = 100


def library() -> str | None:
    """ "asyncio" or "trio": the async library running this thread (None: neither)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None and asyncio._get_running_loop() is not None:
        return "asyncio"
    trio = sys.modules.get("trio")
    if trio is not None and trio.lowlevel.in_trio_run():
        return "trio"
    return None


async def sleep(seconds: float) -> None:
    """Wait `seconds` on the running loop (asyncio's or trio's sleep; else anyio's)."""
    running = library()
    if running is not None:
        await sys.modules[running].sleep(seconds)
        return
    import anyio  # (a loop of another library: none anyio runs on, as a rule)

    await anyio.sleep(seconds)


async def skip(seconds: float, now: Callable[[], float], advance: Callable[[float], None]) -> None:
    """Move virtual time `seconds` ahead (`advance`, read by `now`), stopping at each timer
    of the running loop that falls due inside, which runs (in order) before this returns."""
    running = library()
    if running == "asyncio":
        await _skip_asyncio(seconds, now, advance)
    elif running == "trio":
        await _skip_trio(seconds, advance)
    else:
        advance(seconds)
        import anyio.lowlevel

        await anyio.lowlevel.checkpoint()


async def _skip_asyncio(
    seconds: float, now: Callable[[], float], advance: Callable[[float], None]
) -> None:
    asyncio = sys.modules["asyncio"]
    loop = asyncio.get_running_loop()
    scheduled: list[Any] | None = getattr(loop, "_scheduled", None)
    ready: Any = getattr(loop, "_ready", None)
    if scheduled is None or ready is None:  # not asyncio's own loop (uvloop): one step
        advance(seconds)
        await asyncio.sleep(0)
        return
    target = now() + seconds
    for _ in range(_TURNS * _TURNS):  # (a client re-arming a due timer forever is let go)
        # What is ready runs first (a task about to set a timer, a timer just due, and what
        # it set off), until the loop has nothing ready; then on to the next timer.
        await asyncio.sleep(0)
        for _ in range(_TURNS):
            if not ready:
                break
            await asyncio.sleep(0)
        due = min((h.when() for h in scheduled if not h.cancelled()), default=math.inf)
        if due >= target:
            break
        advance(max(0.0, due - now()))
    advance(max(0.0, target - now()))
    await asyncio.sleep(0)


async def _skip_trio(seconds: float, advance: Callable[[float], None]) -> None:
    trio = sys.modules["trio"]
    clock = trio.lowlevel.current_clock()
    movable = hasattr(clock, "offset")  # trio's SystemClock: `perf_counter() + offset`
    left = seconds
    for _ in range(_TURNS * _TURNS):  # (a client re-arming a due deadline forever is let go)
        await _settle_trio(trio)  # what is runnable first (a task about to set a deadline)
        due = trio.lowlevel.current_statistics().seconds_to_next_deadline if movable else left
        if due >= left:
            break
        step = max(0.0, due)
        _move_trio(clock, step, advance)
        left -= step
    _move_trio(clock, left, advance)
    await trio.lowlevel.checkpoint()


def _move_trio(clock: Any, seconds: float, advance: Callable[[float], None]) -> None:
    advance(seconds)
    if hasattr(clock, "offset"):
        object.__setattr__(clock, "offset", clock.offset + seconds)  # (a frozen attrs class)


async def _settle_trio(trio: Any) -> None:
    """Let trio run what is runnable (the tasks a deadline woke, and what they set off): two
    checkpoints see out the batch this task ran in (trio runs a batch in a random order),
    and so on until nothing else is runnable."""
    for _ in range(_TURNS):
        await trio.lowlevel.checkpoint()
        await trio.lowlevel.checkpoint()
        if not trio.lowlevel.current_statistics().tasks_runnable:
            return
