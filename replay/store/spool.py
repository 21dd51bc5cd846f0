"""A recording's payloads on disk: the spool beside the cassette, and the column that reads it.

A session that records a long stream (or many) would otherwise hold every payload in memory
until it merges them into the cassette at its end. Its `Tape` has a `Spool` instead: once a
recording holds `SPOOL_PIECE` bytes of payloads it writes them there (one `writev` a piece,
with no copy made) and keeps their places; the interaction it finishes holds a
`SpooledPayloads` column, which reads each payload back when asked for it (the cassette's
save writes them one at a time). Short recordings, the usual streams of a test, stay in
memory as they were.

The spool is a file in the cassette's directory (on its disk: the temporary directory may be
memory), removed from the directory as soon as it is made: the descriptor keeps its bytes for
as long as a column reads them, and a process that dies leaves nothing behind. A process
forked from a recording one gets a spool of its own (`Spool.fresh`). Without `os.pread` and
`os.writev` (Windows), or when the file cannot be made, payloads stay in memory.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

__all__ = ["SPOOL_PIECE", "FileBytes", "Spool", "SpooledPayloads"]

#: Bytes of payloads a recording holds in memory before it writes them to the spool.
SPOOL_PIECE = 1024 * 1024

_POSIX = hasattr(os, "pread") and hasattr(os, "writev")
_IOV_MAX = 1024  # (Linux's: the most buffers one `writev` takes)


class Spool:
    """Payloads written to an unnamed file in `directory`, made when first needed.

    Thread-safe: recordings of one session write to it from their reader threads.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._size = 0
        self._broken = not _POSIX

    def fresh(self) -> Spool:
        """A new spool in the same directory (for a forked process: this one is its
        parent's, which goes on writing to it)."""
        return Spool(self.directory)

    def add(self, payloads: Sequence[bytes]) -> int | None:
        """Write `payloads` one after the other; where the first starts (the others follow
        it), or None if the spool cannot be written (they then stay in memory)."""
        size = sum(map(len, payloads))
        with self._lock:
            if self._broken:
                return None
            try:
                _write_all(self._open(), payloads)
            except OSError:
                self._broken = True  # (the disk full...: what comes next stays in memory)
                return None
            start = self._size
            self._size += size
            return start

    def read(self, offset: int, size: int) -> bytes:
        """The `size` bytes written at `offset`."""
        assert self._fd is not None
        return _read(self._fd, offset, size)

    def _open(self) -> int:
        if self._fd is None:
            import secrets  # (here: a spool is made for a long recording only)

            name = f".replay-spool-{os.getpid()}-{secrets.token_hex(6)}"
            path = self.directory / name
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            os.unlink(path)  # nameless from now on: gone with the last descriptor
            _close_when_gone(self, fd)
            self._fd = fd
        return self._fd


class FileBytes:
    """An open file's bytes, read where asked (a cassette whose payloads are left in it:
    `replay.store.load`); its own descriptor, closed when nothing reads it any more. A file
    replaced by a save (a rename) is still read as it was; one written over in place (`cp`
    onto it, a truncation) is refused, never read as other bytes at the same offsets."""

    def __init__(self, fileno: int) -> None:
        self._fd = os.dup(fileno)
        _close_when_gone(self, self._fd)
        self._stamp = _stamp(self._fd)

    def read(self, offset: int, size: int) -> bytes:
        """The `size` bytes at `offset`.

        Raises:
            CassetteFormatError: the file was written over since it was loaded.
        """
        if _stamp(self._fd) != self._stamp:
            raise _changed()
        try:
            return _read(self._fd, offset, size)
        except EOFError:
            raise _changed() from None


def _stamp(fd: int) -> tuple[int, int]:
    """What changes when a file is written: its size and its time of modification (not its
    ctime: unlinking it, as a save that replaces it does, changes that)."""
    status = os.fstat(fd)
    return status.st_size, status.st_mtime_ns


def _changed() -> Exception:
    from replay.errors import CassetteFormatError

    return CassetteFormatError(
        None,
        "its file was written over in place while it was in use (a save by replay replaces "
        "it whole, which is safe): load it again",
    )


def _close_when_gone(owner: object, fd: int) -> None:
    """Close `fd` once `owner` is garbage, and not before, even at exit: the exit of a session
    (an `atexit` hook of `replay record`'s programs) still reads it."""
    weakref.finalize(owner, os.close, fd).atexit = False


def _read(fd: int, offset: int, size: int) -> bytes:
    data = os.pread(fd, size, offset)
    while len(data) < size:  # (a regular file reads whole, but a read may be short)
        more = os.pread(fd, size - len(data), offset + len(data))
        if not more:
            raise EOFError(f"the file ends at {offset + len(data)}, before {offset + size}")
        data += more
    return data


def _write_all(fd: int, payloads: Sequence[bytes]) -> None:
    """Write `payloads` at the file's position, as many at a time as `writev` takes."""
    views = [memoryview(payload) for payload in payloads if payload]
    first = 0
    while first < len(views):
        done = os.writev(fd, views[first : first + _IOV_MAX])
        while done:  # go past what was written (a write may stop within a payload)
            size = len(views[first])
            if done < size:
                views[first] = views[first][done:]
                break
            done -= size
            first += 1


class SpooledPayloads(Sequence[bytes]):
    """A column of payloads kept in a `Spool` (or a `FileBytes`): each read when asked for.

    Compares, hashes and pickles as the tuple of its payloads.
    """

    __slots__ = ("lengths", "offsets", "size", "spool")

    def __init__(
        self, spool: Spool | FileBytes, offsets: Sequence[int], lengths: Sequence[int]
    ) -> None:
        self.spool = spool
        self.offsets = tuple(offsets)
        self.lengths = tuple(lengths)
        #: The payloads' bytes in all.
        self.size = sum(self.lengths)

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> SpooledPayloads: ...
    def __getitem__(self, index: int | slice) -> bytes | SpooledPayloads:
        if isinstance(index, slice):
            return SpooledPayloads(self.spool, self.offsets[index], self.lengths[index])
        return self.spool.read(self.offsets[index], self.lengths[index])

    def __iter__(self) -> Iterator[bytes]:
        return map(self.spool.read, self.offsets, self.lengths)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, SpooledPayloads)):
            return len(self) == len(other) and all(map(bytes.__eq__, self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self),))

    def __repr__(self) -> str:
        return f"SpooledPayloads({len(self)} payloads, {self.size} bytes)"
