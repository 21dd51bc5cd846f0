"""The child side of `replay record` / `replay run`: a cassette session for a whole process.

`replay.run.child` (the parent) starts the program with this directory first on PYTHONPATH and
the session's settings in the environment (the `ENV_*` names below). Python's `site` then
imports `sitecustomize.py` from here, which calls `start_from_environment`: it enters
`use_cassette` before the program's first line runs and leaves it, saving what was
recorded, at interpreter exit — also when SIGTERM or SIGHUP ends the program (they raise
`SystemExit(128 + signum)` so that `finally` blocks and `atexit` run; SIGINT already
raises `KeyboardInterrupt`, and its handler is left alone, as asyncio checks for it).

Descendants: the session carries its settings into every Python process the program starts
(`replay.run.descendants`: a subprocess, given an env of its own or not, an xdist worker, a
`multiprocessing` worker of any start method), marked `ENV_DESCENDANT`: such a process
records too, with a session of its own that keeps each recording in parts as it finishes
(it may be killed, or end with `os._exit`, as pool workers do) and leaves the merging to
its parent; SIGTERM ends it as usual (a terminated pool's workers die quietly). With
`ENV_PARTS_DIR` (record mode "all", where two processes making the same request must not
replace each other's recording) each process (and each forked child) records into a file of
its own in that directory, and the parent merges them when the program has ended; each holds the
directory (`_parts.hold`) for as long as it lives, so that a later `replay record` can tell
what a killed run left from what a living one is still writing. Only the direct
child reports progress (`ENV_STATUS_FD` is taken out of the environment and the descriptor
is not inherited).

Progress, for the parent's live status line, is counted by a router placed in front of the
session (requests as they are made, events and bytes as the program reads the bodies), and
written on the status pipe as one ASCII line, `"<requests> <events> <bytes>\\n"`, at most
ten times a second (see `replay.run.progress`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import signal
import sys
import time
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from types import FrameType

from replay.adapters import patch
from replay.engine.advice import COMMAND_ADVICE
from replay.run.descendants import Carrier, carry
from replay.run.progress import ProgressReporter
from replay.run.settings import (
    ARRIVE,
    ENV_CASSETTE,
    ENV_DESCENDANT,
    ENV_FAULTS,
    ENV_IGNORE_HOSTS,
    ENV_IGNORE_LOCALHOST,
    ENV_PARTS_DIR,
    ENV_REACH_DIR,
    ENV_RECORD_MODE,
    ENV_SPEED,
    ENV_STATUS_FD,
    LIBRARY,
    SESSION_NAMES,
    options_from,
    refusal,
    settings_environment,
)
from replay.run.site.parts import hold
from replay.session.imposed import Imposed, imposed
from replay.session.lifecycle import CassetteSession
from replay.session.options import SessionOptions

__all__ = [
    "ENV_CASSETTE",
    "ENV_DESCENDANT",
    "ENV_FAULTS",
    "ENV_IGNORE_HOSTS",
    "ENV_IGNORE_LOCALHOST",
    "ENV_PARTS_DIR",
    "ENV_REACH_DIR",
    "ENV_RECORD_MODE",
    "ENV_SPEED",
    "ENV_STATUS_FD",
    "HOOK_DIRECTORY",
    "ChildSession",
    "arrive",
    "part_path",
    "settings_environment",
    "start_from_environment",
]

#: The directory the parent puts first on PYTHONPATH (it holds `sitecustomize.py`).
HOOK_DIRECTORY = Path(__file__).resolve().parent

#: A second SIGTERM this soon after the first is the same one delivered twice (to the
#: process group and forwarded by the parent): ignore it rather than break the save.
_SAME_SIGNAL_WINDOW = 1.0

#: The process-wide session started here, if any (one a process).
_started: ChildSession | None = None


class ChildSession:
    """`use_cassette` held open for the whole life of this process.

    Args:
        session: the cassette session to enter.
        status_fd: where to write progress lines (`Progress.encode`), or None.
        parts_dir: the directory of per-process cassettes, if recording into one: a forked
            child then records into a new file of its own there.
        descendant: this process was started by one with a session (`ENV_DESCENDANT`).
        settings: what to carry into the processes this one starts (`ENV_*` names).
        payload: the session's options, carried with them to `multiprocessing` workers.
    """

    def __init__(
        self,
        session: CassetteSession,
        status_fd: int | None = None,
        *,
        parts_dir: Path | None = None,
        descendant: bool = False,
        settings: Mapping[str, str] | None = None,
        payload: object = None,
    ) -> None:
        self.session = session
        self.status_fd = status_fd
        self.parts_dir = parts_dir
        self.descendant = descendant
        self._settings = {ENV_DESCENDANT: "1", **(settings or {})}
        self._payload = payload
        self._carrier: Carrier | None = None
        self._reporter = None if status_fd is None else ProgressReporter(session, status_fd)
        self._closed = False
        #: The descriptor that marks `parts_dir` as in use by this process, if any.
        self.parts_hold: int | None = None
        self._last_signal_at: float | None = None
        self._ours: list[int] = []  # the signals whose handler this sets
        self._reach = "unsaid"  # how many requests went through: "saying", "said"
        self._dying: int | None = None
        self._imposed = contextlib.ExitStack()

    def start(self) -> None:
        """Enter the session; stop it at exit, on SIGTERM / SIGHUP (unless a descendant:
        what it finished is kept already), and in forked children; carry it into the
        processes this one starts."""
        # Mismatch errors raised in the program advise replay run's flags, not keywords
        # (unless the session is a `use_cassette`'s, carried into this process).
        if self._settings[ENV_DESCENDANT] != LIBRARY:
            self._imposed.enter_context(imposed(Imposed(advice=COMMAND_ADVICE)))
        self.session.carries = False  # (it carries the settings it started from, below)
        if self.descendant:
            self.session.become_descendant()
        self.session.__enter__()
        if self._reporter is not None:
            patch.set_front(self.session, self._reporter)  # it sees each request first
        atexit.register(self.stop)
        for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            # Only where the default (die at once, saving nothing) is in force: a handler or
            # SIG_IGN the program inherited stays as it was.
            if self.descendant or signum is None:
                continue
            if signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, self._exit_on_signal)
                self._ours.append(signum)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)
        if self.descendant:
            self._report_reach_at_any_end()
        self._carrier = carry(
            self._settings, arrive=ARRIVE, payload=self._payload, yields_to=ENV_CASSETTE
        )

    def stop(self) -> None:
        """Leave the session (saving what was recorded) and stop reporting; once only."""
        if self._closed:
            return
        self._closed = True
        # A second Ctrl-C or SIGTERM must not break off the save half-way: the process is
        # leaving anyway (SIGKILL still works).
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread
                signal.signal(signum, signal.SIG_IGN)
        try:
            if self._carrier is not None:
                self._carrier.end()
            if self._reporter is not None:
                patch.set_front(self.session, None)
                self._reporter.flush()
            self.session.__exit__(None, None, None)
            _warn_read_on_loop(self.session.read_on_loop)
            self._report_reach()
        finally:
            self._imposed.close()
            self._close_status()

    def adopt(self, options: SessionOptions) -> None:
        """Go on with `options` (the parent session's, which reached this process only after
        its session started by their names): leave the session and enter it again."""
        if self._closed or self._payload is not None:
            return
        self._payload = options
        if self._carrier is not None:
            self._carrier.payload = options
        self.session.__exit__(None, None, None)
        self.session.options = options
        self.session.refuse_recording(None)
        self.session.__enter__()
        if self._reporter is not None:
            patch.set_front(self.session, self._reporter)

    def _exit_on_signal(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self._last_signal_at is not None and now - self._last_signal_at < _SAME_SIGNAL_WINDOW:
            return
        self._last_signal_at = now
        raise SystemExit(128 + signum)

    def _after_fork(self) -> None:
        # A forked child starts with copies of what the parent recorded, which the parent
        # saves itself, and of its streams in flight, whose threads did not survive the fork.
        # It keeps each recording as it finishes (a pool worker ends with `os._exit`, or is
        # terminated): SIGTERM kills it as usual.
        if self._closed:
            return
        self.descendant = True
        self.session.after_fork()
        for signum in self._ours:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signum, signal.SIG_DFL)
        self._ours = []
        self._report_reach_at_any_end()
        cassette = self.session.cassette
        if self.parts_dir is not None:
            self.session.path = part_path(self.parts_dir)
            if cassette is not None:
                cassette.path = self.session.path
        if self._reporter is not None:
            self._reporter.forget_fork()
        self._close_status()

    def _report_reach(self) -> None:
        if self._reach != "unsaid":
            return
        self._reach = "saying"
        try:
            _report_reach(self.session)
        finally:
            self._reach = "said"
            if self._dying is not None:  # (a SIGTERM came meanwhile: see `_report_and_die`)
                self._die(self._dying)

    def _report_reach_at_any_end(self) -> None:
        """Where the parent asks how many requests went through (`ENV_REACH_DIR`), say it
        also when this child ends without `atexit`: a `multiprocessing` worker's end (which
        is `os._exit`), or SIGTERM (a terminated pool's), after which it dies as by default."""
        if not os.environ.get(ENV_REACH_DIR):
            return
        if "multiprocessing" in sys.modules:  # (run in the worker, after its own set-up)
            from multiprocessing import util

            util.register_after_fork(self, ChildSession._report_at_worker_end)
        with contextlib.suppress(ValueError, OSError):  # ValueError: not the main thread
            if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                signal.signal(signal.SIGTERM, self._report_and_die)

    def _report_at_worker_end(self) -> None:
        from multiprocessing import util

        util.Finalize(self, self._report_reach, exitpriority=0)

    def _report_and_die(self, signum: int, frame: FrameType | None) -> None:
        if self._reach == "saying":  # (a worker's end, interrupted: it dies once it said it)
            self._dying = signum
            return
        self._report_reach()
        self._die(signum)

    def _die(self, signum: int) -> None:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def _close_status(self) -> None:
        fd, self.status_fd = self.status_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _report_reach(session: CassetteSession) -> None:
    """Write how many requests went through `session` where the parent asked for it."""
    directory = os.environ.get(ENV_REACH_DIR)
    used = session.last_used
    if not directory or used is None:
        return
    cassette, _ = used
    count = cassette.play_count + len(cassette.recorded) + len(session.mismatches)
    with contextlib.suppress(OSError):  # the parent is gone, or the directory with it
        (Path(directory) / f"{os.getpid()}-{secrets.token_hex(4)}").write_text(str(count))


def _warn_read_on_loop(requests: list[str]) -> None:
    """Say which recordings were stamped on the program's event loop (their timing is
    suspect if the program held its loop up while they streamed)."""
    if not requests:
        return
    shown = "; ".join(requests[:3]) + (
        f"; and {len(requests) - 3} more" if len(requests) > 3 else ""
    )
    print(
        f"replay: warning: {len(requests)} recording(s) were read on the program's event loop "
        f"(a transport replay cannot read from a thread): if the program blocked its loop "
        f"while they streamed, their recorded gaps include that delay ({shown})",
        file=sys.stderr,
        flush=True,
    )


def start_from_environment(
    environ: MutableMapping[str, str] | None = None, options: object = None
) -> ChildSession | None:
    """Start the process-wide session the environment asks for; None if it asks for none
    (or one was started already). `options`: the parent session's `SessionOptions`, when
    they reached this process (a `multiprocessing` worker), else the names say them.

    Raises:
        ConfigurationError: a bad record mode, speed or fault.
        CassetteFormatError: the cassette exists but cannot be read.
    """
    global _started
    environ = os.environ if environ is None else environ
    path = environ.get(ENV_CASSETTE)
    if not path or _started is not None:
        return None
    status_fd = _take_status_fd(environ)
    parts_dir = Path(environ[ENV_PARTS_DIR]) if environ.get(ENV_PARTS_DIR) else None
    session = CassetteSession(
        path if parts_dir is None else part_path(parts_dir), options_from(environ, options)
    )
    descendant = environ.get(ENV_DESCENDANT) in ("1", LIBRARY)
    if descendant and not isinstance(options, SessionOptions):
        session.refuse_recording(refusal(environ))
    settings = {name: environ[name] for name in SESSION_NAMES if name in environ}
    child = ChildSession(
        session,
        status_fd,
        parts_dir=parts_dir,
        descendant=descendant,
        settings=settings,
        payload=options if isinstance(options, SessionOptions) else None,
    )
    if parts_dir is not None:
        child.parts_hold = hold(parts_dir)  # open until this process (and its forks) end
    child.start()
    _started = child
    return child


def arrive(settings: Mapping[str, str], payload: object) -> None:
    """In a `multiprocessing` worker started while a session was carried
    (`replay.run.descendants`): start the session, unless the start-up hook did; given the
    parent's options late (its hook is in `__main__`), take them."""
    if _started is not None and isinstance(payload, SessionOptions):
        _started.adopt(options_from(settings, payload))
    else:
        start_from_environment(dict(settings), payload)


def part_path(parts_dir: Path) -> Path:
    """A cassette file in `parts_dir` that no other process uses."""
    return parts_dir / f"{os.getpid()}-{secrets.token_hex(4)}.msgpack"


def _take_status_fd(environ: MutableMapping[str, str]) -> int | None:
    """The status descriptor, kept from descendants (out of the environment, not inherited)."""
    text = environ.pop(ENV_STATUS_FD, "")
    try:
        fd = int(text)
        os.set_inheritable(fd, False)
    except (ValueError, OSError):
        return None
    return fd
