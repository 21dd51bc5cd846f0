"""Running a program under replay: its signals, its status, and its death with replay.

`replay.run.child` runs the program with `run_program` inside one `Signals` scope that spans
replay's own work before and after it (recovering what a killed run left, merging what this
one recorded). While the program runs, SIGINT, SIGTERM and SIGHUP are passed on to it; at
any other moment they are held back until that work is done, so that it is never cut off
half-way (a merge killed by SIGTERM would leave the recordings outside the cassette and a
temporary file beside it).

On Linux the program is started with a parent-death signal (`PR_SET_PDEATHSIG`): if
replay itself is killed (SIGKILL, which nothing can catch), the program gets SIGTERM, and
a Python program under replay's hook saves what it recorded before it exits. Descendants
of the program are not signalled by the kernel.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from types import FrameType

from replay.run.report import StatusLine
from replay.store.atomic import HeldSignals

__all__ = ["Signals", "run_program"]

_FORWARDED_SIGNALS = tuple(
    signum
    for signum in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None))
    if signum is not None
)


def run_program(
    command: list[str],
    environment: dict[str, str],
    status: StatusLine | None,
    signals: Signals,
) -> int:
    """Run the program to its end, forwarding signals; its status, shell style."""
    with contextlib.ExitStack() as cleanup:
        if status is not None:
            cleanup.callback(status.close)
        try:
            process = subprocess.Popen(
                command,
                env=environment,
                pass_fds=() if status is None else (status.write_fd,),
                preexec_fn=_dying_with_this_process(),
            )
        except FileNotFoundError:
            raise FileNotFoundError(f"command not found: {command[0]}") from None
        signals.attach(process)
        if status is not None:
            status.start()
        code = process.wait()
    return 128 - code if code < 0 else code


_PR_SET_PDEATHSIG = 1


def _dying_with_this_process() -> Callable[[], None] | None:
    """What the program runs before its first instruction so that it gets SIGTERM when this
    process dies (Linux's parent-death signal); None elsewhere.

    The kernel sends it when the *thread* that started the program ends: this thread, which
    waits for the program, so no sooner than this process's death or the wait's end.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up now: not after the fork
    except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
        return None
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the line above: too late for it
            os._exit(128 + signal.SIGTERM)

    return die_with_parent


class Signals(HeldSignals):
    """SIGINT, SIGTERM and SIGHUP while replay supervises a program: passed on to the
    program while it runs, held back before it starts and after it ended (as a save holds
    them back: `replay.store.atomic.HeldSignals`).

    A signal held back (`held`, the first one) lets replay finish what it is doing — above
    all merging what was recorded into the cassette — and then stop with 128 + N; one that
    came while the program was being started is passed on to it as soon as it is.

    A Ctrl-C at the terminal reaches the whole foreground process group, the program
    included; passing it on as well would interrupt the program twice — possibly in the
    middle of saving its cassette. So a SIGINT is passed on only when it cannot have come
    from our terminal. Handlers can only be set from the main thread; elsewhere this does
    nothing.
    """

    def __init__(self) -> None:
        super().__init__(_FORWARDED_SIGNALS, redeliver=False)
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Signals:
        super().__enter__()
        return self

    def attach(self, process: subprocess.Popen[bytes]) -> None:
        """Forward to `process` from now on, starting with any signal held back before it."""
        self._process = process
        if self.held is not None:
            held, self.held = self.held, None
            self._send(held)

    def _receive(self, signum: int, frame: FrameType | None) -> None:
        if self._process is None or _has_ended(self._process):
            self.hold(signum)  # no program running: replay stops when its work is done
        elif not (signum == signal.SIGINT and _foreground_of_terminal()):
            self._send(signum)

    def _send(self, signum: int) -> None:
        assert self._process is not None
        with contextlib.suppress(ProcessLookupError):
            self._process.send_signal(signum)


def _has_ended(process: subprocess.Popen[bytes]) -> bool:
    """Whether `process` has ended, reaped or not yet (a signal for it would be lost)."""
    if process.returncode is not None:
        return True
    if not hasattr(os, "waitid"):  # pragma: no cover - not POSIX
        return False
    try:  # WNOWAIT: look without reaping; `Popen.wait` reaps it as usual
        ended = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped already, by a `Popen.wait` not yet returned
        return True
    except OSError:
        return False
    return ended is not None


def _foreground_of_terminal() -> bool:
    """True when we are in the foreground process group of our controlling terminal."""
    if not hasattr(os, "tcgetpgrp"):
        return False
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | getattr(os, "O_NOCTTY", 0))
    except OSError:  # no controlling terminal
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)
