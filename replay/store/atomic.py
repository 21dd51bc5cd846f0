"""Saving a file whole or not at all: a temporary file beside it, fsync, rename over it.

A crash at any moment leaves the old file or the new one, never half of one; and a save need
not be cut off at all: `HeldSignals` holds Ctrl-C (SIGINT) and SIGTERM back while it runs
and delivers them once it is done (`use_cassette`'s end and `replay record`'s merge use it).
A symlink is written through: its target is replaced and the link stays a link. The new file
keeps the permission bits of the one it replaces (a new file gets the umask's, not the
owner-only mode of `tempfile.mkstemp`). A file the user may not write is refused rather than
replaced, as is anything but a regular file. Every failure is one `CassetteWriteError`
naming the file as given and the cause, never the temporary file, which is removed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import stat
import threading
from collections.abc import Callable, Collection
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO

from replay.errors import CassetteWriteError

__all__ = [
    "HELD_SIGNALS",
    "HeldSignals",
    "check_creatable",
    "check_saveable",
    "check_writable",
    "write_atomically",
]

#: What a save holds back: Ctrl-C and a polite kill.
HELD_SIGNALS: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)


class HeldSignals:
    """A block during which `signals` are held back, so that work such as a save is not cut
    off half-way: the first one that comes is noted (`held`) and, on leaving, delivered
    again to the handler that was there before (unless `redeliver` is False: the caller
    then acts on `held` itself). Nested, the inner block hands its signal to the outer one.

    Handlers can only be set from the main thread: elsewhere the block holds nothing (a
    save there still leaves the old file or the new one, by its atomic replace).
    """

    def __init__(self, signals: Collection[int] = HELD_SIGNALS, *, redeliver: bool = True) -> None:
        self._signals = tuple(signals)
        self._redeliver = redeliver
        self._previous: dict[int, Any] = {}
        #: The first signal held back, if any.
        self.held: int | None = None

    def __enter__(self) -> HeldSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in self._signals:
                previous = signal.getsignal(signum)
                if previous is None:  # a handler not set from Python: left as it is
                    continue
                with contextlib.suppress(ValueError):  # (not the main interpreter)
                    signal.signal(signum, self._receive)
                    self._previous[signum] = previous
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
        if self._redeliver and self.held is not None:
            held, self.held = self.held, None
            signal.raise_signal(held)  # (to the handler restored above)

    def _receive(self, signum: int, frame: FrameType | None) -> None:
        self.hold(signum)

    def hold(self, signum: int) -> None:
        """Note `signum` as held back (only the first one is kept)."""
        if self.held is None:
            self.held = signum


def write_atomically(path: str | Path, data: bytes | Callable[[BinaryIO], None]) -> None:
    """Replace the file at `path` (created with its directories) with `data`, atomically:
    bytes, or a function that writes them to the file it is given (a long file then need
    not be in memory whole).

    Raises:
        CassetteWriteError: it is read-only or not a regular file, or the save failed (the
            disk full, a directory that cannot be written...): the file is as it was.
    """
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    check_writable(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _error(path, exc, f"cannot create its directory {str(target.parent)!r}") from exc
    try:
        fd, temporary = _create_temporary(target)
    except OSError as exc:
        raise _error(path, exc, f"cannot create a file in {str(target.parent)!r}") from exc
    try:
        with os.fdopen(fd, "wb") as file:
            if isinstance(data, bytes):
                file.write(data)
            else:
                data(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(exc, OSError):
            raise _error(path, exc) from exc
        raise
    _fsync_directory(target.parent)


def check_writable(path: str | Path) -> None:
    """Raise CassetteWriteError if the file at `path` (through a symlink) exists and is not
    a regular file this process may write: no write permission for its owner, or none for
    this user (root may write anything, so the owner's write bit says what was meant)."""
    try:
        status = os.stat(path)
    except OSError:  # missing (a new file), or to be found out by the write itself
        return
    if stat.S_ISDIR(status.st_mode):
        raise CassetteWriteError(path, "it is a directory")
    if not stat.S_ISREG(status.st_mode):
        raise CassetteWriteError(path, "it is not a regular file")
    if not status.st_mode & stat.S_IWUSR or not os.access(path, os.W_OK):
        mode = stat.S_IMODE(status.st_mode)
        raise CassetteWriteError(
            path, f"it is read-only (mode {mode:o}); make it writable to save into it"
        )


def check_saveable(path: str | Path) -> None:
    """Raise CassetteWriteError unless the cassette at `path` could be saved now: written
    over if it exists (`check_writable`), created if not (`check_creatable`)."""
    if os.path.lexists(path):
        check_writable(path)
    else:
        check_creatable(path)


def check_creatable(path: str | Path) -> None:
    """Raise CassetteWriteError unless a new file at `path` could be saved: its nearest
    directory that exists must take a new file (tried with an empty file, removed at once:
    the permission bits do not tell for root, a read-only mount or /proc), and nothing on the
    way to it may be a file. A session that may record asks before any request, not at exit.
    """
    path = Path(path)
    directory = path.parent
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    if not directory.is_dir():
        raise CassetteWriteError(path, f"{str(directory)!r} is not a directory")
    try:
        fd, temporary = _create_temporary(directory / path.name)
    except OSError as exc:
        raise _error(path, exc, f"cannot create a file in {str(directory)!r}") from exc
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(temporary)


def _error(path: Path, exc: OSError, doing: str = "") -> CassetteWriteError:
    cause = exc.strerror or type(exc).__name__  # never `str(exc)`: it names the temporary
    return CassetteWriteError(path, f"{doing}: {cause}" if doing else cause, exc.errno)


def _create_temporary(path: Path) -> tuple[int, str]:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        temporary = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(temporary, flags, 0o666)  # the umask applies, as for any new file
        except FileExistsError:  # pragma: no cover - 48 random bits collided
            continue
        if mode is not None:
            with contextlib.suppress(OSError):
                os.chmod(temporary, mode)
        return fd, temporary


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; not possible on every platform, hence best effort.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
