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
size, however the file was crafted (`replay.store.load`, `replay.store.walk`). Saving writes a
temporary file beside the target, a piece at a time (a long stream's payloads straight from
their bytes: the document is never in memory whole), fsyncs it and renames it over the
target: a crash at any moment leaves the old cassette or the new one, never half of one; a
symlink is written through, a read-only cassette refused, and a failure is one
`CassetteWriteError` naming the cassette and the cause (`replay.store.atomic`). `file_lock`
serialises read-modify-write cycles across processes.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import msgpack

from replay.errors import CassetteFormatError
from replay.matching import MatchIndex
from replay.model import Interaction, Request, Response
from replay.store.load import FORMAT_NAME, FORMAT_VERSION, LoadError, read_interactions, read_mapped

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "dumps",
    "file_lock",
    "load_interactions",
    "merge",
    "save_interactions",
    "write_document",
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
        try:
            if _mapped(file.fileno()):
                return read_mapped(file.fileno())
            data = file.read()
            if not data:
                raise CassetteFormatError(path, "the file is empty")
            return read_interactions(data)
        except LoadError as exc:
            raise CassetteFormatError(path, str(exc)) from exc


#: Files longer than this are mapped, not read (`replay.store.load.read_mapped`): a long stream's
#: payloads are then in memory once, where reading held the file's bytes beside them.
MAPPED_FROM = 16 * 1024 * 1024


def _mapped(fileno: int) -> bool:
    status = os.fstat(fileno)
    return stat.S_ISREG(status.st_mode) and status.st_size > MAPPED_FROM and hasattr(os, "pread")


#: Payloads at least this long are written straight from their bytes, never copied into the
#: packer's buffer; smaller ones gather there until it holds about `_FLUSH` bytes.
_DIRECT = 64 * 1024
_FLUSH = 1024 * 1024


class _Writer:
    """Packs a cassette document into a file piece by piece: the bytes `msgpack.packb` would
    make of the whole, with never more than `_FLUSH` bytes and one payload's in memory
    (`packb` grows its buffer by doubling and then copies it out: some 3 times the file)."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.packer = msgpack.Packer(use_bin_type=True, autoreset=False)
        self.held = 0  # bytes of payloads in the packer's buffer (the rest is small)

    def pack(self, *values: Any) -> None:
        for value in values:
            self.packer.pack(value)

    def binary(self, data: bytes) -> None:
        """A msgpack bin, its bytes written as they are when they are many."""
        if len(data) < _DIRECT:
            self.packer.pack(data)
            self.held += len(data)
            if self.held >= _FLUSH:
                self.flush()
            return
        self.flush()
        self.file.write(_bin_header(len(data)))
        self.file.write(data)

    def flush(self) -> None:
        self.file.write(self.packer.getbuffer())
        self.packer.reset()
        self.held = 0


def _bin_header(size: int) -> bytes:
    if size < 0x100:
        return bytes((0xC4, size))
    if size < 0x10000:
        return b"\xc5" + size.to_bytes(2, "big")
    return b"\xc6" + size.to_bytes(4, "big")  # (msgpack's bins stop at 4 GiB)


def write_document(file: BinaryIO, interactions: Sequence[Interaction]) -> None:
    """Write the cassette file of `interactions` to `file`, a piece at a time: the bytes of
    `dumps`, in memory bounded by the largest payload rather than by the file."""
    writer = _Writer(file)
    writer.packer.pack_map_header(3)
    writer.pack("format", FORMAT_NAME, "version", FORMAT_VERSION, "interactions")
    writer.packer.pack_array_header(len(interactions))
    for interaction in interactions:
        request, response = interaction.request, interaction.response
        payloads = response.chunks.payloads
        size = len(request.body) + _size(payloads)
        frames = interaction.frames is not None  # (a conversation's: packed whole)
        if frames or (size < _FLUSH and type(payloads) is tuple):  # usual: packed whole, in C
            writer.pack(_interaction(interaction))
            writer.held += size
            if writer.held >= _FLUSH:
                writer.flush()
            continue
        _write_long(writer, interaction)
    writer.flush()


def _size(payloads: Sequence[bytes]) -> int:
    if type(payloads) is tuple:
        return sum(map(len, payloads))
    from replay.store.spool import SpooledPayloads  # (here: only a recording makes one)

    if isinstance(payloads, SpooledPayloads):  # (it knows: read nothing from the spool)
        return payloads.size
    return sum(map(len, payloads))


def _write_long(writer: _Writer, interaction: Interaction) -> None:
    """An interaction of many bytes: the request's body and each payload written as pieces
    of their own, the rest as `_interaction` makes it."""
    request, response = interaction.request, interaction.response
    fields = _response(response)
    times, end = fields.pop("chunks")["at"], fields.pop("end")
    source = fields.pop("times", None)
    writer.packer.pack_map_header(2)
    writer.pack("request")
    writer.packer.pack_map_header(4)
    writer.pack(*itertools.chain.from_iterable(_request(request).items()), "body")
    writer.binary(request.body)
    writer.pack("response")
    # status, headers, headers_at; then chunks, end (and where the times came from)
    writer.packer.pack_map_header(5 if source is None else 6)
    writer.pack(*itertools.chain.from_iterable(fields.items()), "chunks")
    writer.packer.pack_map_header(2)
    writer.pack("at", times, "data")
    writer.packer.pack_array_header(len(response.chunks))
    for payload in response.chunks.payloads:
        writer.binary(payload)
    writer.pack("end", end)
    if source is not None:
        writer.pack("times", source)


def _interaction(i: Interaction) -> dict[str, Any]:
    if i.frames is not None:  # a WebSocket conversation (`replay.store.frames`)
        from replay.store.frames import frames_document

        response = _response(i.response)  # (its payloads a list: a big file's are spooled)
        response["chunks"]["data"] = list(response["chunks"]["data"])
        return {
            "request": {**_request(i.request), "body": i.request.body},
            "response": response,
            "frames": frames_document(i.frames),
        }
    return {
        "request": {**_request(i.request), "body": i.request.body},
        "response": _response(i.response),
    }


def _request(r: Request) -> dict[str, Any]:
    """The request's map but for its body."""
    return {"method": r.method, "url": r.url, "headers": [list(pair) for pair in r.headers]}


def _response(r: Response) -> dict[str, Any]:
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
            **({"stopped_by": end.stopped_by} if end.stopped_by not in (None, "client") else {}),
        },
        **({"times": r.times} if r.times is not None else {}),
    }


def dumps(interactions: Sequence[Interaction]) -> bytes:
    """The cassette file's bytes for `interactions` (`write_document`'s, in memory)."""
    buffer = io.BytesIO()
    write_document(buffer, interactions)
    return buffer.getvalue()


def save_interactions(path: str | Path, interactions: Sequence[Interaction]) -> None:
    """Write a cassette atomically: temporary file beside it, fsync, rename over it.

    The file is written a piece at a time (`write_document`): saving a long stream takes
    little more memory than its payloads already do.

    A symlink is written through (the link stays); the new file keeps the permissions of the
    one it replaces, or gets the umask's default for a new file.

    Raises:
        CassetteWriteError: the cassette is read-only, or could not be written (the disk
            full...): it is left as it was, with no temporary file beside it.
    """
    from replay.store.atomic import write_atomically  # (here: replaying never writes)

    write_atomically(path, lambda file: write_document(file, interactions))


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
    from replay.store.atomic import check_writable  # (here: replaying never writes)

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
