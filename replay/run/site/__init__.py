"""The child side of `replay record` / `replay run`: a cassette session for a whole process.

`replay.run.child` (the parent) starts the program with this directory first on PYTHONPATH and
the session's settings in the environment (the `ENV_*` names below). Python's `site` then
imports `sitecustomize.py` from here, which calls `start_from_environment`: it enters
`use_cassette` before the program's first line runs and leaves it, saving what was
recorded, at interpreter exit — also when SIGTERM or SIGHUP ends the program (they raise
`SystemExit(128 + signum)` so that `finally` blocks and `atexit` run; SIGINT already
raises `KeyboardInterrupt`, and its handler is left alone, as asyncio checks for it).

Descendants: PYTHONPATH and the `ENV_*` settings stay in the environment, so a Python
program the child starts (a subprocess, an xdist worker, a `multiprocessing` spawn worker)
records too, with a session of its own. Sharing one cassette file is safe (the store saves
under a file lock and merges) but not right for record mode "all", where each save replaces
the requests it re-recorded: two processes making the same request would erase each other's.
So with `ENV_PARTS_DIR` each process (and each forked child) records into a file of its own
in that directory, and the parent merges them when the program has ended; each holds the
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
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Mapping, MutableMapping, Sequence
from pathlib import Path
from types import FrameType

from replay.adapters import patch
from replay.engine.advice import COMMAND_ADVICE
from replay.errors import ConfigurationError
from replay.run.progress import ProgressReporter
from replay.run.site.parts import hold
from replay.session.imposed import Imposed, imposed
from replay.session.lifecycle import CassetteSession, use_cassette

__all__ = [
    "ENV_CASSETTE",
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
    "part_path",
    "settings_environment",
    "start_from_environment",
]

#: The directory the parent puts first on PYTHONPATH (it holds `sitecustomize.py`).
HOOK_DIRECTORY = Path(__file__).resolve().parent

ENV_CASSETTE = "REPLAY_CASSETTE"
"""The cassette (an absolute path); without it the hook does nothing. With `ENV_PARTS_DIR`
the processes record into parts, and this is the file the parent merges them into."""
ENV_RECORD_MODE = "REPLAY_RECORD_MODE"
"""The record mode: none, once, new_episodes or all."""
ENV_SPEED = "REPLAY_SPEED"
"""The replay speed, as `use_cassette` reads it ("instant", "1", "10x", "virtual")."""
ENV_FAULTS = "REPLAY_FAULTS"
"""The faults to apply at replay: a JSON list of specs (`replay.faults.parse` reads each)."""
ENV_STATUS_FD = "REPLAY_STATUS_FD"
"""A writable file descriptor for progress lines (recording with a terminal only)."""
ENV_IGNORE_HOSTS = "REPLAY_IGNORE_HOSTS"
"""Hosts whose requests go live, unrecorded: a JSON list (`use_cassette`'s `ignore_hosts`)."""
ENV_IGNORE_LOCALHOST = "REPLAY_IGNORE_LOCALHOST"
""""1": loopback hosts go live, unrecorded, too."""
ENV_PARTS_DIR = "REPLAY_PARTS_DIR"
"""If set, each process records into a cassette of its own there (see the module docs)."""
ENV_REACH_DIR = "REPLAY_REACH_DIR"
"""If set, each process writes there, as it ends, how many requests went through its
session: the parent can then tell a program that never loaded replay (no file) from one
whose requests went elsewhere (zero) (`replay.run.report.Reach`)."""

#: A second SIGTERM this soon after the first is the same one delivered twice (to the
#: process group and forwarded by the parent): ignore it rather than break the save.
_SAME_SIGNAL_WINDOW = 1.0


class ChildSession:
    """`use_cassette` held open for the whole life of this process.

    Args:
        session: the cassette session to enter.
        status_fd: where to write progress lines (`Progress.encode`), or None.
        parts_dir: the directory of per-process cassettes, if recording into one: a forked
            child then records into a new file of its own there.
    """

    def __init__(
        self,
        session: CassetteSession,
        status_fd: int | None = None,
        *,
        parts_dir: Path | None = None,
    ) -> None:
        self.session = session
        self.status_fd = status_fd
        self.parts_dir = parts_dir
        self._reporter = None if status_fd is None else ProgressReporter(session, status_fd)
        self._closed = False
        #: The descriptor that marks `parts_dir` as in use by this process, if any.
        self.parts_hold: int | None = None
        self._last_signal_at: float | None = None
        self._imposed = contextlib.ExitStack()

    def start(self) -> None:
        """Enter the session; stop it at exit, on SIGTERM / SIGHUP, and in forked children."""
        # Mismatch errors raised in the program advise replay run's flags, not keywords.
        self._imposed.enter_context(imposed(Imposed(advice=COMMAND_ADVICE)))
        self.session.__enter__()
        if self._reporter is not None:
            patch.set_front(self.session, self._reporter)  # it sees each request first
        atexit.register(self.stop)
        for signum in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            # Only where the default (die at once, saving nothing) is in force: a handler or
            # SIG_IGN the program inherited stays as it was.
            if signum is not None and signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, self._exit_on_signal)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

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
            if self._reporter is not None:
                patch.set_front(self.session, None)
                self._reporter.flush()
            self.session.__exit__(None, None, None)
            _warn_read_on_loop(self.session.read_on_loop)
            _report_reach(self.session)
        finally:
            self._imposed.close()
            self._close_status()

    def _exit_on_signal(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self._last_signal_at is not None and now - self._last_signal_at < _SAME_SIGNAL_WINDOW:
            return
        self._last_signal_at = now
        raise SystemExit(128 + signum)

    def _after_fork(self) -> None:
        # A forked child starts with copies of what the parent recorded, which the parent
        # saves itself, and of its streams in flight, whose threads did not survive the fork.
        self.session.after_fork()
        cassette = self.session.cassette
        if self.parts_dir is not None:
            self.session.path = part_path(self.parts_dir)
            if cassette is not None:
                cassette.path = self.session.path
        if self._reporter is not None:
            self._reporter.forget_fork()
        self._close_status()

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
    environ: MutableMapping[str, str] | None = None,
) -> ChildSession | None:
    """Start the process-wide session the environment asks for; None if it asks for none.

    Raises:
        ConfigurationError: a bad record mode, speed or fault.
        CassetteFormatError: the cassette exists but cannot be read.
    """
    environ = os.environ if environ is None else environ
    path = environ.get(ENV_CASSETTE)
    if not path:
        return None
    status_fd = _take_status_fd(environ)
    parts_dir = Path(environ[ENV_PARTS_DIR]) if environ.get(ENV_PARTS_DIR) else None
    session = use_cassette(
        path if parts_dir is None else part_path(parts_dir),
        record_mode=environ.get(ENV_RECORD_MODE) or "once",
        speed=environ.get(ENV_SPEED) or "instant",
        faults=_strings(environ.get(ENV_FAULTS) or "[]", ENV_FAULTS, "fault specs"),
        ignore_hosts=_strings(environ.get(ENV_IGNORE_HOSTS) or "[]", ENV_IGNORE_HOSTS, "hosts"),
        ignore_localhost=environ.get(ENV_IGNORE_LOCALHOST) == "1",
    )
    child = ChildSession(session, status_fd, parts_dir=parts_dir)
    if parts_dir is not None:
        child.parts_hold = hold(parts_dir)  # open until this process (and its forks) end
    child.start()
    return child


def _strings(text: str, name: str, what: str) -> list[str]:
    try:
        items = json.loads(text)
    except ValueError:
        items = None
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ConfigurationError(f"{name} must be a JSON list of {what}, not {text!r}")
    return items


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


def settings_environment(
    cassette: Path,
    *,
    record_mode: str,
    speed: str,
    status_fd: int | None = None,
    parts_dir: Path | None = None,
    faults: Sequence[str] = (),
    ignore_hosts: Sequence[str] = (),
    ignore_localhost: bool = False,
    reach_dir: Path | None = None,
) -> Mapping[str, str]:
    """The `ENV_*` variables that make the hook start a session with these settings.

    `faults` are specs (`repr` of a `replay.faults` value), parsed again by the child.
    """
    settings = {
        ENV_CASSETTE: str(cassette.resolve()),
        ENV_RECORD_MODE: record_mode,
        ENV_SPEED: speed,
    }
    if faults:
        settings[ENV_FAULTS] = json.dumps(list(faults))
    if ignore_hosts:
        settings[ENV_IGNORE_HOSTS] = json.dumps(list(ignore_hosts))
    if ignore_localhost:
        settings[ENV_IGNORE_LOCALHOST] = "1"
    if status_fd is not None:
        settings[ENV_STATUS_FD] = str(status_fd)
    if parts_dir is not None:
        settings[ENV_PARTS_DIR] = str(parts_dir.resolve())
    if reach_dir is not None:
        settings[ENV_REACH_DIR] = str(reach_dir.resolve())
    return settings
