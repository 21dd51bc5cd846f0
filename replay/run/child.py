"""`replay record` and `replay run`: a whole program under one cassette, from the outside.

The program runs unmodified as a subprocess (stdin, stdout and stderr are its own). Its
environment puts `replay/_child` first on PYTHONPATH, whose `sitecustomize` enters
`use_cassette` with the settings passed in `REPLAY_*` variables before the program starts,
and leaves it — saving — when the program exits, SIGTERM included (see `replay.run.site`).
Python programs the child starts record too. With record mode "all" every process records
into a cassette of its own in a parts directory beside OUT, merged into OUT here at the end
(so two processes making the same request do not replace each other's recording);
otherwise they share the cassette, saving under the store's lock. A run killed before its
merge leaves its parts directory behind: the next `replay record` into OUT merges what it
holds and says so (`replay.run.site.parts`).

This side validates everything it can before starting the program (a missing or corrupt
cassette, a bad speed or mode: one clear error instead of a failure inside the child),
forwards SIGINT, SIGTERM and SIGHUP to the program while it runs, holds them back while it
merges (then stops with 128 + N, OUT whole and nothing left behind), passes the program's
exit status through (128 + N when signal N ended it, as shells report), and on Linux makes
the program die with it (all of this: `replay.run.supervise`). While recording with a
terminal on stderr it shows a live status line from the progress the child writes on a
pipe; at the end it reads the saved cassette — redacted, as everything on disk — and
prints a summary of what this run recorded (both: `replay.run.report`).
"""

from __future__ import annotations

import collections
import functools
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from replay.adapters.network import program_block
from replay.errors import ConfigurationError
from replay.faults import Fault, coerce
from replay.model import Interaction
from replay.run.report import Reach, StatusLine, is_terminal, summary_lines
from replay.run.settings import SESSION_NAMES, speed_text
from replay.run.site import HOOK_DIRECTORY, settings_environment
from replay.run.site.parts import PartsDirectory, recover
from replay.run.supervise import Signals, run_program
from replay.store.atomic import check_saveable
from replay.store.file import load_interactions

__all__ = ["RECORD_COMMAND_MODES", "RUN_MODES", "record_command", "replay_command", "summary_lines"]

#: The record modes `record_command` accepts: everything again, or only what is new.
RECORD_COMMAND_MODES: tuple[str, ...] = ("all", "new_episodes")
#: The record modes `replay_command` accepts (all would ignore the cassette).
RUN_MODES: tuple[str, ...] = ("none", "once", "new_episodes")


def record_command(
    out: Path,
    command: Sequence[str],
    *,
    mode: str = "all",
    ignore_hosts: Sequence[str] = (),
    ignore_localhost: bool = False,
    block_network: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run `command` and record every httpx / httpx2 request it makes into the cassette `out`.

    Args:
        out: the cassette to write (created with its directories; merged into if it exists).
        command: the program and its arguments, e.g. `["python", "app.py"]`.
        mode: "all" (default) records everything again, replacing re-recorded requests;
            "new_episodes" replays what `out` already answers and records the rest.
        ignore_hosts, ignore_localhost, block_network, allowed_hosts: what reaches the
            network (`use_cassette`'s ignored hosts, `replay.adapters.network.program_block`).
        stderr: where the status line and the summary go (default: `sys.stderr`).

    Returns:
        The program's exit status; 128 + N if signal N ended it; 1 if the program succeeded
        but what it recorded could not be merged into `out` (it is kept beside `out`).

    Raises:
        ConfigurationError: an unknown mode or an empty command.
        CassetteFormatError: `out` exists but is not a readable cassette (it is left alone).
        FileNotFoundError: the command does not exist.
    """
    _check_mode(mode, RECORD_COMMAND_MODES, "replay record")
    program = _checked_command(command)
    stream = sys.stderr if stderr is None else stderr
    if out.exists():
        load_interactions(out)  # a corrupt `out`: fail now, before anything runs
    check_saveable(out)  # an unwritable `out`: likewise
    settings = _settings(
        out,
        (block_network, allowed_hosts),
        record_mode=mode,
        speed="instant",
        ignore_hosts=ignore_hosts,
        ignore_localhost=ignore_localhost,
    )
    with Signals() as signals, Reach() as reach:
        recovered = recover(out)
        if recovered is not None:
            print(recovered, file=stream)
        if signals.held is not None:  # stopped while recovering: the program never starts
            return _exit_status(0, signals)
        settings = functools.partial(settings, reach_dir=reach.path)
        code, recorded = _record(out, mode, program, settings, signals, stream)
        if recorded is not None:
            _print_summary(out, recorded, stream)
        if not recorded:  # (a program killed before its exit recorded, yet never said so)
            _say_if_unreached(reach, stream)
    return _exit_status(code, signals)


def _say_after_run(reach: Reach, code: int, chosen: tuple[str, list[str]], stream: TextIO) -> None:
    """What was not reached; after a failed run under faults or a seeded policy, the options
    (`chosen`: the speed and the faults, seeds included) that replay the same streams."""
    _say_if_unreached(reach, stream)
    speed, faults = chosen
    if code and (faults or "seed=" in speed):
        options = [f"--speed {shlex.quote(speed)}"]
        options += [f"--fault {shlex.quote(fault)}" for fault in faults]
        print(f"replay run: the program failed under {' '.join(options)}", file=stream)


def _record(
    out: Path,
    mode: str,
    program: list[str],
    settings: Callable[..., Mapping[str, str]],
    signals: Signals,
    stream: TextIO,
) -> tuple[int, list[Interaction] | None]:
    """Run the program recording into `out` in `mode` (with a live status line on a
    terminal): its status and what it recorded (None if that cannot be read back)."""
    status = StatusLine(stream) if is_terminal(stream) and os.name == "posix" else None
    if status is not None:
        settings = functools.partial(settings, status_fd=status.write_fd)
    if mode == "all":
        return _record_in_parts(out, program, settings, status, signals, stream)
    before = load_interactions(out) if out.exists() else []
    code = run_program(program, _child_environment(settings()), status, signals)
    return code, _recorded_since(out, before, stream)


def _record_in_parts(
    out: Path,
    program: list[str],
    settings: Callable[..., Mapping[str, str]],
    status: StatusLine | None,
    signals: Signals,
    stream: TextIO,
) -> tuple[int, list[Interaction] | None]:
    """Run the program recording into a parts directory, then merge the parts into `out`;
    the program's status (1 for a success whose merge failed) and what it recorded (None
    if the merge failed)."""
    parts = PartsDirectory.create(out)
    environment = _child_environment(settings(parts_dir=parts.path))
    try:
        code = run_program(program, environment, status, signals)
    except BaseException:  # the program did not start: nothing to merge
        parts.remove_if_unused()
        raise
    recorded = _merge_parts(out, parts, stream)
    if recorded is None and code == 0:
        code = 1  # nothing is lost (the parts are kept), but OUT is not whole: say so
    return code, recorded


def replay_command(
    cassette: Path,
    command: Sequence[str],
    *,
    mode: str = "none",
    speed: str = "instant",
    faults: Sequence[str | Fault] = (),
    ignore_hosts: Sequence[str] = (),
    ignore_localhost: bool = False,
    block_network: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run `command` with its httpx / httpx2 traffic served from `cassette`.

    With mode "none" the program never touches the network: a request the cassette does
    not answer raises `CassetteMismatchError`, any other one `NetworkBlockedError`.

    Args:
        cassette: the cassette file (it must exist in mode "none"; the other modes record
            what it does not answer, creating it if need be).
        command: the program and its arguments.
        mode: "none" (default): replay only; "once": the same, as the file exists;
            "new_episodes": record what the cassette does not answer, into it.
        speed: "instant" (default), "1" (as recorded), "10x"…, or "virtual" (as recorded
            on virtual time: no waiting, yet the program's clocks move as recorded).
        faults: faults to apply to what is replayed, as specs ("cut(after_events=5)") or
            `replay.faults` values (without `where=`, which cannot cross processes).
        ignore_hosts, ignore_localhost, block_network, allowed_hosts: what reaches the
            network (`use_cassette`'s ignored hosts, `replay.adapters.network.program_block`).
        stderr: where a summary of newly recorded interactions goes (default: `sys.stderr`).

    Returns:
        The program's exit status; 128 + N if signal N ended it.

    Raises:
        FileNotFoundError: no cassette at `cassette` in mode "none", or no such command.
        CassetteFormatError: the cassette cannot be read.
        ConfigurationError: a bad speed or fault, an unknown mode or an empty command.
    """
    _check_mode(mode, RUN_MODES, "replay run")
    settings = _settings(
        cassette,
        (block_network, allowed_hosts),
        record_mode=mode,
        speed=(chosen := speed_text(speed)),  # (a seed=random is drawn here, once)
        faults=(specs := _fault_specs(faults)),
        ignore_hosts=ignore_hosts,
        ignore_localhost=ignore_localhost,
    )
    program = _checked_command(command)
    stream = sys.stderr if stderr is None else stderr
    before = _replayable(cassette, mode)
    with Signals() as signals, Reach() as reach:
        environment = _child_environment(settings(reach_dir=reach.path))
        code = run_program(program, environment, None, signals)
        if mode != "none":
            _print_new(cassette, before, stream)
        _say_after_run(reach, code, (chosen, specs), stream)
    return _exit_status(code, signals)


def _replayable(cassette: Path, mode: str) -> list[Interaction]:
    """What the cassette holds before `replay run` starts (read now: a corrupt one fails
    before anything runs).

    Raises:
        FileNotFoundError: no cassette in mode "none" (the other modes record one).
    """
    if mode == "none" and not cassette.is_file():  # the other modes record it
        raise FileNotFoundError(
            f"no cassette at {str(cassette)!r}: record one with "
            f"`replay record {cassette} -- CMD [ARGS...]`, or add --mode once"
        )
    return load_interactions(cassette) if cassette.exists() else []


def _print_new(cassette: Path, before: list[Interaction], stream: TextIO) -> None:
    """Print on `stream` what the run recorded into `cassette`, if anything."""
    recorded = _recorded_since(cassette, before, stream)
    if recorded:
        _print_summary(cassette, recorded, stream)


def _print_summary(cassette: Path, recorded: Sequence[Interaction], stream: TextIO) -> None:
    """Print on `stream` what the run recorded into `cassette` (`summary_lines`)."""
    for line in summary_lines(cassette, recorded):
        print(line, file=stream)


def _exit_status(code: int, signals: Signals) -> int:
    """The program's exit status, or 128 + N if signal N stopped this side (as shells say)."""
    return code if signals.held is None else 128 + signals.held


def _say_if_unreached(reach: Reach, stream: TextIO) -> None:
    """Say so when no request of the program went through the cassette (it went live, or
    there was none), rather than let a run that never used the cassette pass silently."""
    line = reach.verdict()
    if line is not None:
        print(line, file=stream)


# -- running the program ---------------------------------------------------------------------


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


def _settings(
    cassette: Path, block: tuple[bool, Sequence[str] | None], **given: Any
) -> Callable[..., Mapping[str, str]]:
    """`settings_environment` for `cassette` with the `given` settings (more may be added
    at the call), plus the variables of the network block (`program_block` of `block`:
    whether asked, the allowed hosts; record mode "none" blocks by itself)."""
    variables = program_block(
        *block,
        given["ignore_hosts"],
        given["ignore_localhost"],
        replay_only=given["record_mode"] == "none",
    )
    settings = functools.partial(settings_environment, cassette, **given)
    return (lambda **more: {**settings(**more), **variables}) if variables else settings


def _child_environment(settings: Mapping[str, str]) -> dict[str, str]:
    """This process's environment, plus the hook first on PYTHONPATH and the settings."""
    environment = dict(os.environ)
    for name in SESSION_NAMES:  # an enclosing session's, if replay runs under replay
        environment.pop(name, None)
    hook = str(HOOK_DIRECTORY)
    existing = environment.get("PYTHONPATH", "")
    entries = [entry for entry in existing.split(os.pathsep) if entry != hook] if existing else []
    environment["PYTHONPATH"] = os.pathsep.join([hook, *entries])
    environment.update(settings)
    return environment


# -- what was recorded ---------------------------------------------------------------------------


def _merge_parts(out: Path, parts: PartsDirectory, stream: TextIO) -> list[Interaction] | None:
    """Merge the per-process cassettes in `parts` into `out`, record mode "all" style.

    What the run recorded replaces what `out` held for the same requests; the rest of `out`
    stays. The parts directory is removed once merged, unless processes of the program
    that outlived it still hold it; it is kept (after a warning) if the merge fails. What
    is kept, the next `replay record` into `out` merges.
    """
    try:
        recorded = parts.merge_into(out)
    except (OSError, ValueError) as error:  # CassetteFormatError is a ValueError
        parts.close()
        print(
            f"replay: error: cannot save into {out}: {_first_line(error)}; "
            f"what was recorded is kept in {parts.path}, for the next `replay record` "
            f"into {out} to merge",
            file=stream,
        )
        return None
    if not parts.remove_if_unused():
        print(
            f"replay: note: processes the program started are still recording into "
            f"{parts.path}; the next `replay record` into {out} merges what they save",
            file=stream,
        )
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
