"""The parts directory of `replay record` (record mode "all"), and what a killed run leaves.

Each process of the program records into a cassette of its own in a directory beside OUT,
`.<OUT's name>.replay-<pid>-<random>` (pid: the `replay record` that made it), and `replay
record` merges the parts into OUT once the program has ended, then removes the directory.

A run can die before that (SIGKILL, a crash, the machine going down). The next `replay
record` into the same OUT finds its directory by name and finishes the job (`recover`): it
merges the parts into OUT — nothing that finished recording is lost — and removes the
directory, and the unfinished saves of OUT (the store's `.<OUT's name>.<hex>.tmp` files,
removed under the store's lock, which every save through `store.merge` holds).

What tells an abandoned directory from one in use is a lock: every process that uses it —
`replay record` and each process of the program recording into it (`hold`) — holds a
shared `flock` on its `owner` file for as long as it lives, and the kernel drops the locks
of a process that dies. Whoever takes the lock exclusively without waiting knows that
nobody uses the directory any more. Directories are made, and leftovers looked for, under
the store's lock, so none is ever seen half made. (Without `fcntl`, nothing is locked and
nothing is recovered.)

A session recording into a cassette (`use_cassette`) uses the same directory beside it for
what it has finished (`replay.store.journal`): the next session recording into that cassette
recovers what a killed one left, and so does `replay record` for the sessions of its
program's processes, whose directories lie beside their part files, in its own.

Merging again is harmless: record mode "all" replaces what is recorded again, so a run
killed after saving OUT and before removing its parts adds nothing twice when they are
merged a second time.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from pathlib import Path

from replay.matching import DEFAULT_MATCH_ON
from replay.model import Interaction
from replay.store.file import file_lock, load_interactions, merge

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "APPENDED",
    "MATCH_ON",
    "PartsDirectory",
    "hold",
    "left_behind",
    "leftovers",
    "recover",
    "take_abandoned",
]

_OWNER = "owner"
#: In a directory whose parts are added to OUT rather than replacing what it holds for the
#: same requests (a session of record mode "once" or "new_episodes": `replay.store.journal`).
APPENDED = "appended"
#: The file naming the matchers by which the parts replace what `out` holds (one a line;
#: without it, `DEFAULT_MATCH_ON`): a session's own `match_on`.
MATCH_ON = "match_on"


def _prefix(out: Path) -> str:
    return f".{out.name}.replay-"


def _lock(fd: int, exclusive: bool) -> bool:
    """Take the lock without waiting; whether it was taken."""
    if fcntl is None:  # pragma: no cover - Windows
        return False
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: held by another process
        return False
    return True


def hold(parts_dir: Path) -> int | None:
    """Mark `parts_dir` as in use by this process (and its forks) for as long as it lives.

    Returns the descriptor that holds the mark (keep it open), or None if the directory is
    gone or being recovered.
    """
    try:
        fd = os.open(parts_dir / _OWNER, os.O_RDONLY)
    except OSError:
        return None
    if not _lock(fd, exclusive=False):
        os.close(fd)
        return None
    return fd


class PartsDirectory:
    """A parts directory this process made (`create`) or took over (`recover`).

    Attributes:
        path: the directory.
        owner_pid: the pid of the `replay record` that made it, if known.
    """

    def __init__(self, path: Path, fd: int | None, owner_pid: int | None) -> None:
        self.path = path
        self.owner_pid = owner_pid
        self._fd = fd

    @classmethod
    def create(cls, out: Path) -> PartsDirectory:
        """A new parts directory beside `out` (whose directories are created), held in use."""
        with file_lock(out):
            path = out.parent / f"{_prefix(out)}{os.getpid()}-{secrets.token_hex(3)}"
            path.mkdir()
            owner = path / _OWNER
            owner.write_text(f"{os.getpid()}\n")
            fd = hold(path)
        return cls(path, fd, os.getpid())

    def merge_into(self, out: Path) -> list[Interaction]:
        """Merge the parts into `out`, record mode "all" style (unless the directory holds
        `APPENDED`: they are then added), then delete them; what they held, in the order
        the processes saved them.

        Raises:
            OSError, CassetteFormatError: a part or `out` cannot be read, or `out` written
                (the parts are then kept).
        """
        recorded, files = self.read()
        if recorded:
            merge(out, recorded, replacing=self._replacing())
        for file in files:
            file.unlink(missing_ok=True)
        return recorded

    def read(self) -> tuple[list[Interaction], list[Path]]:
        """What the parts hold, in the order the processes saved them, and their files.

        Raises:
            OSError, CassetteFormatError: a part cannot be read.
        """
        for inner in leftovers_within(self.path):  # a process's session that did not end
            recover(inner)
        files = _part_files(self.path)
        return [interaction for file in files for interaction in load_interactions(file)], files

    def _replacing(self) -> tuple[str, ...] | None:
        """The matchers by which the parts replace what the cassette holds (None: added)."""
        if (self.path / APPENDED).exists():
            return None
        try:
            names = (self.path / MATCH_ON).read_text().split()
        except FileNotFoundError:
            return DEFAULT_MATCH_ON
        return tuple(names) or DEFAULT_MATCH_ON

    def remove_if_unused(self) -> bool:
        """Remove the directory unless another process still holds it; whether it did."""
        if self._fd is not None and fcntl is not None and not _lock(self._fd, exclusive=True):
            return False
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)
        return True

    def close(self) -> None:
        """Let go of the directory (it stays)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def leftovers(out: Path) -> list[Path]:
    """The parts directories beside `out` (of runs still going, or killed), by name."""
    prefix = _prefix(out)
    try:
        names = os.listdir(out.parent)  # (a list of strings: the cheapest look at it)
    except OSError:  # no directory (yet)
        return []
    return sorted(out.parent / name for name in names if name.startswith(prefix))


def left_behind(out: Path) -> tuple[list[Interaction], str | None]:
    """What the parts directories beside `out` hold (not merged yet: a session or a run
    still going, or killed), and a line that says so (None if there are none)."""
    found = [d for d in leftovers(out) if d.is_dir()]
    files = [file for directory in found for file in _part_files(directory)]
    held: list[Interaction] = []
    for file in files:
        try:
            held += load_interactions(file)
        except (OSError, ValueError):  # merged and removed meanwhile, or damaged: not shown
            continue
    if not held:
        return [], None
    where = ", ".join(directory.name for directory in found)
    return held, (
        f"replay: note: the last {_count(len(held), 'interaction')} shown are not in {out} "
        f"yet but beside it ({where}), recorded by a session that has not ended or was "
        "killed; the next session recording into it (or `replay record`) merges them"
    )


def _part_files(directory: Path) -> list[Path]:
    """The parts in `directory`, in the order they were saved."""
    dated = []
    for file in directory.glob("*.msgpack"):
        try:
            dated.append((file.stat().st_mtime_ns, file.name, file))
        except OSError:  # merged and removed meanwhile (by the session that wrote it)
            continue
    return [file for _, _, file in sorted(dated)]


def leftovers_within(directory: Path) -> list[Path]:
    """The cassettes in `directory` that have parts directories beside them: the part files
    of `replay record`'s processes whose sessions (`replay.store.journal`) did not end."""
    marker = ".msgpack.replay-"
    names = (path.name for path in directory.iterdir() if marker in path.name)
    return sorted({directory / name[1 : name.index(marker) + 8] for name in names})


def take_abandoned(out: Path) -> list[PartsDirectory]:
    """The parts directories beside `out` that no living process holds, each taken by this
    one (held exclusively until closed or removed): what the child processes of a session
    that have ended left (`replay.store.journal`), or killed sessions."""
    if fcntl is None or not leftovers(out):  # (the usual case: one listing of the directory)
        return []
    taken = []
    with file_lock(out):
        for path in leftovers(out):
            directory = _take_abandoned(path) if path.is_dir() else None
            if directory is not None:
                taken.append(directory)
    return taken


def _take_abandoned(path: Path) -> PartsDirectory | None:
    """`path` if no living process uses it, locked exclusively by this one; else None."""
    try:
        fd = os.open(path / _OWNER, os.O_RDONLY)
    except FileNotFoundError:  # emptied by hand, or by a save that recreated the directory
        return PartsDirectory(path, None, None)
    if not _lock(fd, exclusive=True):
        os.close(fd)
        return None
    try:
        owner_pid: int | None = int((path / _OWNER).read_text().strip())
    except (OSError, ValueError):
        owner_pid = None
    return PartsDirectory(path, fd, owner_pid)


def recover(out: Path, *, note_busy: bool = True) -> str | None:
    """Finish what killed runs of `replay record` into `out` (or killed sessions recording
    into it: `replay.store.journal`) left beside it; one line saying what was done (None if
    nothing was left; with `note_busy` false, None too if only runs still going were).

    The parts of a dead run are merged into `out` and its directory removed; a directory in
    use (a run still going) is left alone; unfinished saves of `out` are removed.
    """
    if fcntl is None or not out.parent.is_dir():  # pragma: no cover - Windows
        return None
    said: list[str] = []
    abandoned: list[PartsDirectory] = []
    with file_lock(out):
        unfinished = re.compile(re.escape(f".{out.name}.") + r"[0-9a-f]{12}\.tmp")
        stale = [file for file in out.parent.iterdir() if unfinished.fullmatch(file.name)]
        for file in stale:
            file.unlink(missing_ok=True)
        for path in leftovers(out):
            taken = _take_abandoned(path) if path.is_dir() else None
            if taken is None and note_busy:
                said.append(f"left {path.name} alone: a run is still recording into it")
            elif taken is not None:
                abandoned.append(taken)
    for directory in abandoned:  # outside the lock: `merge` takes it
        said.append(_finish(directory, out))
    if stale:
        said.append(f"removed {_count(len(stale), 'unfinished save')} of an interrupted run")
    if not said:
        return None
    return f"replay: {out}: " + "; ".join(said)


def _finish(directory: PartsDirectory, out: Path) -> str:
    run = "an interrupted run" + (
        "" if directory.owner_pid is None else f" (pid {directory.owner_pid})"
    )
    try:
        recorded = directory.merge_into(out)
    except (OSError, ValueError) as error:  # CassetteFormatError is a ValueError
        directory.close()
        lines = str(error).splitlines()
        problem = lines[0] if lines else type(error).__name__
        return f"cannot merge what {run} recorded ({problem}): kept in {directory.path}"
    directory.remove_if_unused()
    if not recorded:
        return f"removed what {run} left (it had recorded nothing)"
    return f"merged the {_count(len(recorded), 'interaction')} {run} had recorded"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
