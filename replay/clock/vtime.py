"""Virtual time: replay does not sleep, yet the clocks the client reads move by the recorded gaps.

    with replay.use_cassette("chat.msgpack", speed="virtual"):
        started = time.perf_counter()
        ...                          # a 30-second recorded stream plays in milliseconds
        elapsed = time.perf_counter() - started      # 30.0, as recorded

Mechanism: while a virtual-time session is active, six functions of the `time` module —
`monotonic`, `perf_counter`, `time` and their `_ns` twins — are replaced by functions that
read one virtual clock. It starts at the real readings and moves by two things only:

- the replay's waits, which add to it instead of sleeping (each chunk then arrives exactly
  when the client's clocks say it is due), and
- the client's sleeps in the thread that started virtual time: `time.sleep` and
  `asyncio.sleep` (patched too) move the clocks instead of waiting (an asyncio sleep as a
  replay's async wait skips, its due timers run in order), so a client polling a
  background response every second, or an SDK's retry back-off, costs no real time;
- real time the process spends *waiting* otherwise — wall time, less the process's CPU
  time, less the time the thread that started virtual time sat runnable on the OS run
  queue (Linux `schedstat`) — so another thread's sleep or a blocking read still pass the
  time they wait.

Time the process spends computing, or preempted by a busy machine, does not pass: a
client's own work between two reads of the clock (building a request, parsing events, an
SDK building its models on first use) costs no virtual time, so a measured TTFT equals the
recorded one, every run, on a loaded machine too. The clock never goes backwards while the
patch is on: the contract whose breaking made time-machine stop mocking `monotonic` (3.0).
time-machine never mocked `perf_counter`, and it travels to instants rather than moving
clocks by gaps, so it is not used here.

asyncio's event loop reads `time.monotonic()` on each call of `loop.time()`, so its timers
run on the virtual clock, and `asyncio.sleep(d)` ends after `d` seconds of waiting, as usual.
A replay's async wait does not skip its gap in one step: it moves the clocks to each timer
the client set that falls due inside the gap (`call_later` / `call_at`, `asyncio.sleep`, a
`wait_for` / `asyncio.timeout` / `anyio.fail_after` deadline) and lets the loop run it, and
what it sets off, before the next chunk (`replay.clock.waits.skip`): a debounce groups the
chunks as their recorded times group them. Under trio, whose clock bound `perf_counter`
before any patch, the skip moves the running `SystemClock`'s offset with the virtual clock
and stops at trio's deadlines the same way. A recording made during a virtual-time session
(record mode `new_episodes`) stamps its chunks with the real clock.

Limits, honestly:

- A sync replay's wait still skips its gap in one step (a sync client has no timers to keep
  in order; other threads' timers are not looked at). On a loop other than asyncio's own
  (uvloop) the async wait skips in one step too: a deadline inside the gap fires after it.
  What a due timer sets off runs for up to 100 turns of the loop before the skip goes on.
- Code that bound a clock function before the patch (`from time import monotonic`, a
  default argument `clock=time.monotonic`) keeps the real clock, and code that bound a
  sleep (`from asyncio import sleep`: anyio's; trio's own sleeps) waits in real time:
  pytest's timers are such code; trio's clock sees only the replay's skips (a
  `trio.testing.MockClock` is left as it is) and passes the process's computing and
  preemption as real time does: on a busy machine a trio deadline can come that much early
  against the chunks.
- C code reads the system clock itself: `datetime.now()`, `time.clock_gettime()`, the
  timeouts of `select` and `socket`, uvloop's loop time and C extensions see real time.
- A busy-wait that polls the clock without ever sleeping or blocking never sees time
  pass; CPU work in other threads holds the clock back for every thread meanwhile.
- Real waits inside the client do pass: a thread hop (the async openai client runs
  `platform.platform()` in a worker thread once per client; its first use in a process
  runs `uname -p` in a subprocess), a lock held by another thread. Warm such clients up
  before measuring. Run-queue time is subtracted for the thread that started virtual time
  only, and only on Linux with `/proc`: elsewhere, or for other threads, being preempted
  counts as waiting, as does time a hypervisor steals from the machine.
- The patch is process-wide: every thread reads the virtual clock while a session is
  active, and concurrent virtual sessions share it (nested ones are fine).
- When the last virtual session ends the real functions come back, and the clocks step
  to real time (forwards or back): a reading taken inside and compared with one taken
  outside is off by the difference, and an asyncio timer scheduled inside and still
  pending outside fires off by as much.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from types import TracebackType
from typing import Any, Final

from replay.clock import waits

__all__ = ["PATCHED", "RealClock", "VirtualTime", "hold_sleeps", "is_active", "release_sleeps"]

#: The `time` functions that read the virtual clock while a session is active.
PATCHED: Final = ("monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns")

# The real clocks, bound at import, before any patch.
_real_monotonic = time.monotonic
_real_monotonic_ns = time.monotonic_ns
_real_perf_counter = time.perf_counter
_real_perf_counter_ns = time.perf_counter_ns
_real_time = time.time
_real_time_ns = time.time_ns
_process_time_ns = time.process_time_ns
_real_sleep = time.sleep

_lock = threading.Lock()
_users = 0  # active virtual sessions (nesting shares one clock)
_saved: dict[str, object] = {}  # what `time` held before the patch (maybe another mock)
# At install: the real readings of each clock, and of the process's CPU time (ns).
_base_monotonic = _base_perf_counter = _base_time = _base_cpu = _base_queued = 0
_skipped = 0  # ns the replay skipped
_waited = 0  # the most real waiting seen (ns): it never goes back, so neither does the clock


def _elapsed() -> int:
    """Virtual ns since the install: what was skipped, plus the real time spent waiting."""
    global _waited
    waited = _waiting()
    with _lock:
        _waited = max(_waited, waited)
        return _waited + _skipped


def _waiting() -> int:
    """Real ns spent waiting since the install: wall time, less CPU and run-queue time."""
    wall, cpu, queued = _readings(_queued)
    return (wall - _base_monotonic) - (cpu - _base_cpu) - (queued - _base_queued)


def _readings(queue: _RunQueue | None) -> tuple[int, int, int]:
    """The wall clock, the process's CPU time and the run-queue time, consistent (ns).

    The run queue is read before and after the two clocks: if the thread was switched out
    and back in between (its run-queue time changed), they are read again, so that a
    preemption never shows as waiting, nor as negative waiting.
    """
    for _ in range(4):
        before = queue() if queue is not None else 0
        wall, cpu = _real_monotonic_ns(), _process_time_ns()
        after = queue() if queue is not None else 0
        if after == before:
            break
    return wall, cpu, after


def _monotonic() -> float:
    return (_base_monotonic + _elapsed()) / 1e9


def _monotonic_ns() -> int:
    return _base_monotonic + _elapsed()


def _perf_counter() -> float:
    return (_base_perf_counter + _elapsed()) / 1e9


def _perf_counter_ns() -> int:
    return _base_perf_counter + _elapsed()


def _time() -> float:
    return (_base_time + _elapsed()) / 1e9


def _time_ns() -> int:
    return _base_time + _elapsed()


_REPLACEMENTS: Final = {
    "monotonic": _monotonic,
    "monotonic_ns": _monotonic_ns,
    "perf_counter": _perf_counter,
    "perf_counter_ns": _perf_counter_ns,
    "time": _time,
    "time_ns": _time_ns,
}


def is_active() -> bool:
    """True while a virtual-time session has the `time` functions patched."""
    return _users > 0


class _RunQueue:
    """The run-queue time (ns) of the thread that made it, readable from any thread.

    Linux only (`/proc/self/task/<tid>/schedstat`, second field); elsewhere always 0.
    """

    def __init__(self) -> None:
        self._last = 0
        try:
            path = f"/proc/self/task/{threading.get_native_id()}/schedstat"
            self._fd: int | None = os.open(path, os.O_RDONLY)
        except OSError:
            self._fd = None

    def __call__(self) -> int:
        if self._fd is not None:
            with contextlib.suppress(OSError, ValueError, IndexError):  # the thread is gone
                self._last = int(os.pread(self._fd, 128, 0).split()[1])
        return self._last

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


_queued: _RunQueue | None = None  # the installing thread's run queue, while installed
_sleeper: int | None = None  # the installing thread, whose sleeps move the clocks instead
_real_asyncio_sleep: Any = None  # `asyncio.sleep` before the patch (asyncio imported then)
_holders = 0  # producers in other threads (WebSocket peers) whose sends a skip would outrun


def hold_sleeps() -> None:
    """A producer in another thread starts (a replayed WebSocket's peer): until
    `release_sleeps`, the client's sleeps wait in real time again. Its frames come on the
    peer's own waits, not on the client's loop: a skipping sleep (a library's 20 s keepalive
    task) would jump the clocks past them."""
    global _holders
    with _lock:
        _holders += 1


def release_sleeps() -> None:
    """The producer `hold_sleeps` named has ended."""
    global _holders
    with _lock:
        _holders -= 1


def _skips() -> bool:
    return bool(_users and not _holders and threading.get_ident() == _sleeper)


def _sleep(seconds: float) -> None:
    """`time.sleep` while virtual time is active: in the thread that started it, the clocks
    move by `seconds` at once (after a real `sleep(0)`: other threads get their turn); a
    client polling every second replays in milliseconds while its clocks see the seconds."""
    if not (seconds > 0 and _skips()):
        _real_sleep(seconds)
        return
    _real_sleep(0)
    _advance(seconds)


async def _asyncio_sleep(delay: float, result: Any = None) -> Any:
    """`asyncio.sleep` while virtual time is active: in the thread that started it, a skip
    of `delay` that runs each timer falling due inside it (`replay.clock.waits.skip`)."""
    if not (delay > 0 and _skips()):
        return await _real_asyncio_sleep(delay, result)
    await waits.skip(delay, _monotonic, _advance)
    return result


def _install() -> None:
    global _users, _base_monotonic, _base_perf_counter, _base_time, _base_cpu, _skipped, _waited
    global _queued, _base_queued, _sleeper
    with _lock:
        if _users == 0:
            _sleeper = threading.get_ident()
            _patch_sleeps()
            _queued = _RunQueue()
            _base_monotonic, _base_cpu, _base_queued = _readings(_queued)
            _base_perf_counter = _real_perf_counter_ns()
            _base_time = _real_time_ns()
            _skipped = _waited = 0
            for name, function in _REPLACEMENTS.items():
                _saved[name] = getattr(time, name)
                setattr(time, name, function)
        _users += 1


def _patch_sleeps() -> None:
    """`time.sleep`, and `asyncio.sleep` if asyncio is imported, made virtual (`_sleep`)."""
    global _real_asyncio_sleep
    _saved_sleeps["time"] = time.sleep
    setattr(time, "sleep", _sleep)  # noqa: B010 - typeshed's signature is wider
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        _saved_sleeps["asyncio"] = _real_asyncio_sleep = getattr(asyncio, "sleep")  # noqa: B009
        setattr(asyncio, "sleep", _asyncio_sleep)  # noqa: B010


def _unpatch_sleeps() -> None:
    global _real_asyncio_sleep
    setattr(time, "sleep", _saved_sleeps.pop("time", _real_sleep))  # noqa: B010
    asyncio = sys.modules.get("asyncio")
    if "asyncio" in _saved_sleeps and asyncio is not None:
        setattr(asyncio, "sleep", _saved_sleeps.pop("asyncio"))  # noqa: B010
    _saved_sleeps.clear()
    _real_asyncio_sleep = None


_saved_sleeps: dict[str, Any] = {}


def _uninstall() -> None:
    global _users, _queued
    with _lock:
        if _users == 0:
            return
        _users -= 1
        if _users == 0:
            for name, original in _saved.items():
                setattr(time, name, original)
            _saved.clear()
            _unpatch_sleeps()
            if _queued is not None:
                _queued.close()
                _queued = None


def _advance(seconds: float) -> None:
    global _skipped
    if not seconds >= 0:  # also NaN
        raise ValueError(f"cannot sleep a negative time: {seconds!r} s")
    if not _users:
        raise RuntimeError("virtual time is not active: use `with VirtualTime() as clock:`")
    with _lock:
        _skipped += round(seconds * 1e9)


class VirtualTime:
    """The clock of virtual time: a `replay.clock.Clock` whose sleeps move time instead.

    Enter it (`with VirtualTime() as clock:`) to patch the `time` functions in `PATCHED`;
    `use_cassette(..., speed="virtual")` does so for its session. Its sleeps need it
    entered; outside, `now()` is the real monotonic clock.
    """

    def __enter__(self) -> VirtualTime:
        _install()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        _uninstall()

    @property
    def skipped(self) -> float:
        """Seconds the replay skipped since virtual time became active."""
        return _skipped / 1e9

    def now(self) -> float:
        """The virtual monotonic clock (what `time.monotonic()` returns while active)."""
        return _monotonic() if _users else _real_monotonic()

    def sleep(self, seconds: float) -> None:
        """Move the virtual clocks `seconds` ahead, at once.

        Raises:
            ValueError: a negative time.
            RuntimeError: virtual time is not active.
        """
        _advance(seconds)

    async def asleep(self, seconds: float) -> None:
        """Move the clocks ahead, stopping at each timer of the running loop that falls due
        on the way, which runs, in order, before this returns (`replay.clock.waits.skip`).

        Raises:
            ValueError: a negative time.
            RuntimeError: virtual time is not active.
        """
        if not seconds >= 0:  # (raised as `sleep` raises, before anything moves)
            raise ValueError(f"cannot sleep a negative time: {seconds!r} s")
        _advance(0.0)
        await waits.skip(seconds, self.now, _advance)

    def __repr__(self) -> str:
        state = "active" if _users else "inactive"
        return f"VirtualTime({state}, skipped={self.skipped:.6f}s)"


class RealClock:
    """The real monotonic clock, which virtual time does not move: what a recording made
    during a virtual-time session stamps its chunks with."""

    def now(self) -> float:
        """The real `time.monotonic()`, bound before any patch."""
        return _real_monotonic()

    def sleep(self, seconds: float) -> None:
        """`time.sleep(seconds)`, the real one."""
        _real_sleep(seconds)

    async def asleep(self, seconds: float) -> None:
        """Wait `seconds` on the running loop (`replay.clock.waits.sleep`)."""
        await waits.sleep(seconds)
