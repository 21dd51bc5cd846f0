"""The cassette file: msgpack, versioned, validated on load, saved atomically.

Layout (see docs/cassette-format.md):

    {"format": "replay-cassette", "version": 1, "interactions": [
        {"request":  {"method": str, "url": str, "headers": [[str, str], ...], "body": bin},
         "response": {"status": int, "headers": [[str, str], ...], "headers_at": float,
                      "chunks": {"at": [float, ...], "data": [bin, ...]},
                      "end": {"at": float, "error": str | nil, "message": str,
                              "truncated": bool}}}, ...]}

A body's chunks are two parallel columns, arrival times and payloads, not an array of
pairs: msgpack then builds two lists instead of one small list per chunk, and `Chunks` takes
the columns as they are, checking each with a C-level pass (the load time of a long stream
is mostly that of msgpack itself).

Every key shown is required; readers ignore unknown keys. Loading checks every field, so
that any damage becomes one `CassetteFormatError` naming the file and the place, never a
KeyError deep inside playback; and it does so in time and memory bounded by the file's
size, however the file was crafted (`replay._load`, `replay._walk`). Saving writes a
temporary file beside the target, fsyncs it and renames it over the target: a crash at any
moment leaves the old cassette or the new one, never half of one; a symlink is written
through, a read-only cassette refused, and a failure is one `CassetteWriteError` naming the
cassette and the cause (`replay._atomic`). `file_lock` serialises read-modify-write cycles
across processes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgpack

from replay._load import FORMAT_NAME, FORMAT_VERSION, LoadError, read_interactions
from replay.errors import CassetteFormatError
from replay.matching import MatchIndex
from replay.model import Interaction, Request, Response

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "dumps",
    "file_lock",
    "load_interactions",
    "merge",
    "save_interactions",
]


def load_interactions(path: str | Path) -> list[Interaction]:
    """Read and validate a cassette file, in time and memory bounded by its size.

    Raises:
        FileNotFoundError: there is no such file.
        CassetteFormatError: the file is not a complete, well-formed cassette this version
            reads, or loading it would take far more memory than its size can justify.
    """
    # (Unbuffered: the whole file is read at once, and a buffer object less is made; not
    # `Path(path).read_bytes()`: a Path less to make.)
    with open(path, "rb", buffering=0) as file:
        data = file.read()
    if not data:
        raise CassetteFormatError(path, "the file is empty")
    try:
        return read_interactions(data)
    except LoadError as exc:
        raise CassetteFormatError(path, str(exc)) from exc


def _document(interactions: Sequence[Interaction]) -> dict[str, Any]:
    def request(r: Request) -> dict[str, Any]:
        headers = [list(pair) for pair in r.headers]
        return {"method": r.method, "url": r.url, "headers": headers, "body": r.body}

    def response(r: Response) -> dict[str, Any]:
        end = r.end
        return {
            "status": r.status,
            "headers": [list(pair) for pair in r.headers],
            "headers_at": float(r.headers_at),
            "chunks": {"at": [float(at) for at in r.chunks.times], "data": r.chunks.payloads},
            "end": {
                "at": float(end.at),
                "error": end.error,
                "message": end.message,
                "truncated": end.truncated,
                **(
                    {"stopped_by": end.stopped_by} if end.stopped_by not in (None, "client") else {}
                ),
            },
        }

    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "interactions": [
            {"request": request(i.request), "response": response(i.response)} for i in interactions
        ],
    }


def dumps(interactions: Sequence[Interaction]) -> bytes:
    """The cassette file's bytes for `interactions`."""
    packed: bytes = msgpack.packb(_document(interactions), use_bin_type=True)
    return packed


def save_interactions(path: str | Path, interactions: Sequence[Interaction]) -> None:
    """Write a cassette atomically: temporary file beside it, fsync, rename over it.

    A symlink is written through (the link stays); the new file keeps the permissions of the
    one it replaces, or gets the umask's default for a new file.

    Raises:
        CassetteWriteError: the cassette is read-only, or could not be written (the disk
            full...): it is left as it was, with no temporary file beside it.
    """
    from replay._atomic import write_atomically  # (here: replaying never writes)

    write_atomically(path, dumps(interactions))


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive inter-process lock for writing the cassette at `path`.

    The lock is an `flock` on the cassette's directory itself, so no lock file is left
    beside the cassettes (a lock file cannot be removed safely while others may wait on
    it). Writers of different cassettes in one directory wait for each other briefly.

    Raises:
        CassetteWriteError: the cassette exists and is read-only (found before anything
            is recorded for it, not when it is saved).
    """
    from replay._atomic import check_writable  # (here: replaying never writes)

    check_writable(path)
    directory = Path(path).parent
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no inter-process lock
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def merge(
    path: str | Path,
    recorded: Sequence[Interaction],
    *,
    replacing: Sequence[Any] | None = None,
) -> int:
    """Add `recorded` to the cassette at `path` (created if missing), under the file lock;
    how many interactions the file then holds.

    The file is read again under the lock, so what other processes (xdist workers, the
    processes of `replay record`) saved meanwhile is kept.

    Args:
        path: the cassette file.
        recorded: the interactions to add, in order, after those the file holds.
        replacing: matchers (`match_on`): what the file holds for a request that
            `recorded` has too is dropped first (record mode "all"); None keeps everything.
    """
    path = Path(path)
    with file_lock(path):
        base = load_interactions(path) if path.exists() else []
        if replacing is not None:
            index = MatchIndex([], match_on=replacing)
            fresh = {index.key(interaction.request) for interaction in recorded}
            base = [i for i in base if index.key(i.request) not in fresh]
        save_interactions(path, [*base, *recorded])
    return len(base) + len(recorded)
