"""`replay record` and `replay run`: a whole program under one cassette, from the outside.

The program runs unmodified as a subprocess (stdin, stdout and stderr are its own). Its
environment puts `replay/_child` first on PYTHONPATH, whose `sitecustomize` enters
`use_cassette` with the settings passed in `REPLAY_*` variables before the program starts,
and leaves it — saving — when the program exits, SIGTERM included (see `replay._child`).
Python programs the child starts record too. With record mode "all" every process records
into a cassette of its own in a temporary directory, merged into OUT here at the end (so
two processes making the same request do not replace each other's recording); otherwise
they share the cassette, saving under the store's lock.

This side validates everything it can before starting the program (a missing or corrupt
cassette, a bad speed or mode: one clear error instead of a failure inside the child),
forwards SIGINT and SIGTERM to the program, and passes its exit status through (128 + N
when signal N ended it, as shells report). While recording with a terminal on stderr it
shows a live status line from the progress the child writes on a pipe; at the end it reads
the saved cassette — redacted, as everything on disk — and prints a summary of what this
run recorded (the status line and the summary: `replay._child_report`).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from replay._child import ENV_STATUS_FD, HOOK_DIRECTORY, settings_environment
from replay._child_report import StatusLine, is_terminal, summary_lines
from replay.clock import format_speed, parse_speed
from replay.errors import ConfigurationError
from replay.faults import Fault, coerce
from replay.matching import DEFAULT_MATCH_ON
from replay.model import Interaction
from replay.session import VIRTUAL
from replay.store import load_interactions, merge

__all__ = ["RECORD_COMMAND_MODES", "RUN_MODES", "record_command", "replay_command", "summary_lines"]

#: The record modes `record_command` accepts: everything again, or only what is new.
RECORD_COMMAND_MODES: tuple[str, ...] = ("all", "new_episodes")
#: The record modes `replay_command` accepts (all would ignore the cassette).
RUN_MODES: tuple[str, ...] = ("none", "once", "new_episodes")

_FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def record_command(
    out: Path,
    command: Sequence[str],
    *,
    mode: str = "all",
    ignore_hosts: Sequence[str] = (),
    ignore_localhost: bool = False,
    stderr: TextIO | None = None,
) -> int:
    """Run `command` and record every httpx / httpx2 request it makes into the cassette `out`.

    Args:
        out: the cassette to write (created with its directories; merged into if it exists).
        command: the program and its arguments, e.g. `["python", "app.py"]`.
        mode: "all" (default) records everything again, replacing re-recorded requests;
            "new_episodes" replays what `out` already answers and records the rest.
        ignore_hosts, ignore_localhost: hosts whose requests go live, unrecorded (as
            `use_cassette` takes them).
        stderr: where the status line and the summary go (default: `sys.stderr`).

    Returns:
        The program's exit status; 128 + N if signal N ended it.

    Raises:
        ConfigurationError: an unknown mode or an empty command.
        CassetteFormatError: `out` exists but is not a readable cassette (it is left alone).
        FileNotFoundError: the command does not exist.
    """
    _check_mode(mode, RECORD_COMMAND_MODES, "replay record")
    program = _checked_command(command)
    stream = sys.stderr if stderr is None else stderr
    before = load_interactions(out) if out.exists() else []  # a corrupt `out`: fail now
    status = StatusLine(stream) if is_terminal(stream) and os.name == "posix" else None
    status_fd = None if status is None else status.write_fd
    ignoring = functools.partial(
        settings_environment, ignore_hosts=ignore_hosts, ignore_localhost=ignore_localhost
    )
    if mode == "all":
        parts = Path(tempfile.mkdtemp(prefix="replay-record-"))
        settings = ignoring(
            out, record_mode=mode, speed="instant", status_fd=status_fd, parts_dir=parts
        )
        try:
            code = _run(program, _child_environment(settings), status)
        except BaseException:  # the program did not start: nothing to merge
            shutil.rmtree(parts, ignore_errors=True)
            raise
        recorded = _merge_parts(out, parts, stream)
    else:
        settings = ignoring(out, record_mode=mode, speed="instant", status_fd=status_fd)
        code = _run(program, _child_environment(settings), status)
        recorded = _recorded_since(out, before, stream)
    if recorded is not None:
        for line in summary_lines(out, recorded):
            print(line, file=stream)
    return code


def replay_command(
    cassette: Path,
    command: Sequence[str],
    *,
    mode: str = "none",
    speed: str = "instant",
    faults: Sequence[str | Fault] = (),
    ignore_hosts: Sequence[str] = (),
    ignore_localhost: bool = False,
    stderr: TextIO | None = None,
) -> int:
    """Run `command` with its httpx / httpx2 traffic served from `cassette`.

    With mode "none" the program never touches the network: a request the cassette does
    not answer raises `replay.CassetteMismatchError` inside the program.

    Args:
        cassette: an existing cassette file.
        command: the program and its arguments.
        mode: "none" (default): replay only; "once": the same, as the file exists;
            "new_episodes": record what the cassette does not answer, into it.
        speed: "instant" (default), "1" (as recorded), "10x"…, or "virtual" (as recorded
            on virtual time: no waiting, yet the program's clocks move as recorded).
        faults: faults to apply to what is replayed, as specs ("cut(after_events=5)") or
            `replay.faults` values (without `where=`, which cannot cross processes).
        ignore_hosts, ignore_localhost: hosts whose requests go live, unrecorded (as
            `use_cassette` takes them).
        stderr: where a summary of newly recorded interactions goes (default: `sys.stderr`).

    Returns:
        The program's exit status; 128 + N if signal N ended it.

    Raises:
        FileNotFoundError: there is no cassette at `cassette`, or the command does not exist.
        CassetteFormatError: the cassette cannot be read.
        ConfigurationError: a bad speed or fault, an unknown mode or an empty command.
    """
    _check_mode(mode, RUN_MODES, "replay run")
    speed_text = _speed_text(speed)
    specs = _fault_specs(faults)
    program = _checked_command(command)
    stream = sys.stderr if stderr is None else stderr
    if not cassette.is_file():
        raise FileNotFoundError(
            f"no cassette at {str(cassette)!r}: record one with "
            f"`replay record {cassette} -- CMD [ARGS...]`"
        )
    before = load_interactions(cassette)
    settings = settings_environment(
        cassette,
        record_mode=mode,
        speed=speed_text,
        faults=specs,
        ignore_hosts=ignore_hosts,
        ignore_localhost=ignore_localhost,
    )
    code = _run(program, _child_environment(settings), None)
    if mode != "none":
        recorded = _recorded_since(cassette, before, stream)
        if recorded:
            for line in summary_lines(cassette, recorded):
                print(line, file=stream)
    return code


# -- running the program ---------------------------------------------------------------------


def _speed_text(speed: str) -> str:
    if speed.strip().lower() == VIRTUAL:
        return VIRTUAL
    return format_speed(parse_speed(speed))


def _fault_specs(faults: Sequence[str | Fault]) -> list[str]:
    """Each fault as the spec the child parses back (checked here, before the program runs)."""
    specs = []
    for fault in coerce(faults):
        if fault.where is not None:
            raise ConfigurationError(
                f"fault {fault!r}: where= cannot be passed to another process; use index="
            )
        specs.append(repr(fault))
    return specs


def _check_mode(mode: str, allowed: tuple[str, ...], verb: str) -> None:
    if mode not in allowed:
        raise ConfigurationError(f"{verb}: unknown mode {mode!r}: use one of {', '.join(allowed)}")


def _checked_command(command: Sequence[str]) -> list[str]:
    program = list(command)
    if not program:
        raise ConfigurationError("no command given: add -- CMD [ARGS...]")
    return program


def _child_environment(settings: Mapping[str, str]) -> dict[str, str]:
    """This process's environment, plus the hook first on PYTHONPATH and the settings."""
    environment = dict(os.environ)
    environment.pop(ENV_STATUS_FD, None)  # a stale one, if replay runs under replay
    hook = str(HOOK_DIRECTORY)
    existing = environment.get("PYTHONPATH", "")
    entries = [entry for entry in existing.split(os.pathsep) if entry != hook] if existing else []
    environment["PYTHONPATH"] = os.pathsep.join([hook, *entries])
    environment.update(settings)
    return environment


def _run(command: list[str], environment: dict[str, str], status: StatusLine | None) -> int:
    """Run the program to its end, forwarding signals; its status, shell style."""
    with _SignalForwarder() as forwarder, contextlib.ExitStack() as cleanup:
        if status is not None:
            cleanup.callback(status.close)
        try:
            process = subprocess.Popen(
                command, env=environment, pass_fds=() if status is None else (status.write_fd,)
            )
        except FileNotFoundError:
            raise FileNotFoundError(f"command not found: {command[0]}") from None
        forwarder.attach(process)
        if status is not None:
            status.start()
        code = process.wait()
    return 128 - code if code < 0 else code


class _SignalForwarder:
    """Passes SIGINT and SIGTERM on to the program while it runs, instead of dying of them.

    A Ctrl-C at the terminal reaches the whole foreground process group, the program
    included; passing it on as well would interrupt the program twice — possibly in the
    middle of saving its cassette. So a SIGINT is passed on only when it cannot have come
    from our terminal. Handlers can only be set from the main thread; elsewhere this does
    nothing.
    """

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._early: list[int] = []
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _SignalForwarder:
        if threading.current_thread() is threading.main_thread():
            for signum in _FORWARDED_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._forward)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def attach(self, process: subprocess.Popen[bytes]) -> None:
        """Forward to `process` from now on, starting with any signal that came before it."""
        self._process = process
        for signum in self._early:
            self._send(signum)

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        if self._process is None:
            self._early.append(signum)  # arrived while the program was being started
        elif not (signum == signal.SIGINT and _foreground_of_terminal()):
            self._send(signum)

    def _send(self, signum: int) -> None:
        assert self._process is not None
        with contextlib.suppress(ProcessLookupError):
            self._process.send_signal(signum)


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


# -- what was recorded ---------------------------------------------------------------------------


def _merge_parts(out: Path, parts: Path, stream: TextIO) -> list[Interaction] | None:
    """Merge the per-process cassettes in `parts` into `out`, record mode "all" style.

    What the run recorded replaces what `out` held for the same requests; the rest of `out`
    stays. The parts are deleted once merged, and kept (after a warning) if they cannot be.
    """
    try:
        files = sorted(
            parts.glob("*.msgpack"), key=lambda file: (file.stat().st_mtime_ns, file.name)
        )
        recorded = [interaction for file in files for interaction in load_interactions(file)]
        if recorded:
            merge(out, recorded, replacing=DEFAULT_MATCH_ON)
    except (OSError, ValueError) as error:  # CassetteFormatError is a ValueError
        print(
            f"replay: warning: cannot save into {out}: {_first_line(error)}; "
            f"what was recorded is kept in {parts}",
            file=stream,
        )
        return None
    shutil.rmtree(parts, ignore_errors=True)
    return recorded


def _recorded_since(
    path: Path, before: list[Interaction], stream: TextIO
) -> list[Interaction] | None:
    """The interactions in the cassette at `path` now that were not in `before`.

    None (after a warning on `stream`) if the cassette cannot be read back.
    """
    try:
        after = load_interactions(path) if path.exists() else []
    except (OSError, ValueError) as error:  # CassetteFormatError is a ValueError
        lines = str(error).splitlines()
        print(
            f"replay: warning: cannot read {path} back: {lines[0] if lines else error!r}",
            file=stream,
        )
        return None
    remaining = collections.Counter(before)
    recorded = []
    for interaction in after:
        if remaining[interaction] > 0:
            remaining[interaction] -= 1
        else:
            recorded.append(interaction)
    return recorded


def _first_line(error: BaseException) -> str:
    lines = str(error).splitlines()
    return lines[0] if lines else type(error).__name__
