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
KeyError deep inside playback. Saving writes a temporary file beside the target, fsyncs it
and renames it over the target: a crash at any moment leaves the old cassette or the new
one, never half of one. `file_lock` serialises read-modify-write cycles across processes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgpack

from replay.errors import CassetteFormatError
from replay.matching import MatchIndex
from replay.model import STOPPERS, Chunks, Interaction, Request, Response, StreamEnd

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "dumps",
    "file_lock",
    "load_interactions",
    "merge",
    "save_interactions",
]

FORMAT_NAME = "replay-cassette"
FORMAT_VERSION = 1


class _Bad(Exception):
    """A validation failure at a place inside the document."""


def _expect(value: object, kind: type | tuple[type, ...], where: str) -> Any:
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise _Bad(f"{where}: expected a number, found a boolean")
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _Bad(f"{where}: expected {names}, found {type(value).__name__}")
    return value


def _field(mapping: dict[Any, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in mapping:
        raise _Bad(f"{where}: missing field {name!r}")
    return _expect(mapping[name], kind, f"{where}.{name}")


def _headers(value: object, where: str) -> list[tuple[str, str]]:
    pairs = []
    for i, pair in enumerate(_expect(value, list, where)):
        _expect(pair, list, f"{where}[{i}]")
        if len(pair) != 2:
            raise _Bad(f"{where}[{i}]: expected a [name, value] pair")
        pairs.append(
            (_expect(pair[0], str, f"{where}[{i}][0]"), _expect(pair[1], str, f"{where}[{i}][1]"))
        )
    return pairs


def _request(value: object, where: str) -> Request:
    doc: dict[Any, Any] = _expect(value, dict, where)
    return Request(
        method=_field(doc, "method", str, where),
        url=_field(doc, "url", str, where),
        headers=_headers(_field(doc, "headers", list, where), f"{where}.headers"),
        body=_field(doc, "body", bytes, where),
    )


def _chunks(value: object, where: str) -> Chunks:
    doc: dict[Any, Any] = _expect(value, dict, where)
    times: list[Any] = _field(doc, "at", list, where)
    payloads: list[Any] = _field(doc, "data", list, where)
    if len(times) != len(payloads):
        raise _Bad(
            f"{where}: the columns differ in length ({len(times)} in 'at', "
            f"{len(payloads)} in 'data'): each chunk needs a time and its bytes"
        )
    try:
        return Chunks(times, payloads)  # names the chunk at fault
    except (TypeError, ValueError) as exc:
        raise _Bad(f"{where}: {exc}") from exc


def _end(value: object, where: str) -> StreamEnd:
    doc: dict[Any, Any] = _expect(value, dict, where)
    error = _field(doc, "error", (str, type(None)), where)
    truncated = _field(doc, "truncated", bool, where)
    # Optional (files before it was written say only "truncated", which meant the client).
    stopped_by = doc.get("stopped_by", "client" if truncated else None)
    if stopped_by not in STOPPERS or (stopped_by is None) == truncated:
        raise _Bad(f"{where}: stopped_by {_shown(stopped_by)} does not fit truncated={truncated}")
    return StreamEnd(
        at=_field(doc, "at", (int, float), where),
        error=error,
        message=_field(doc, "message", str, where),
        truncated=truncated,
        stopped_by=stopped_by,
    )


def _response(value: object, where: str) -> Response:
    doc: dict[Any, Any] = _expect(value, dict, where)
    return Response(
        status=_field(doc, "status", int, where),
        headers=_headers(_field(doc, "headers", list, where), f"{where}.headers"),
        headers_at=_field(doc, "headers_at", (int, float), where),
        chunks=_chunks(_field(doc, "chunks", dict, where), f"{where}.chunks"),
        end=_end(_field(doc, "end", dict, where), f"{where}.end"),
    )


def _shown(value: object) -> str:
    """`value` for a message: a short str or number as it is, anything else by its type (a
    hostile file's value may be huge, or nested past what `repr` can recurse into)."""
    if isinstance(value, (str, int, float, type(None))) and len(repr(value)) <= 60:
        return repr(value)
    return f"a {type(value).__name__}"


def _interactions(value: object) -> list[Interaction]:
    document: dict[Any, Any] = _expect(value, dict, "document")
    if "format" not in document:
        raise _Bad(f"not a replay cassette (no 'format' field; expected {FORMAT_NAME!r})")
    name = document["format"]
    if name != FORMAT_NAME:
        raise _Bad(f"not a replay cassette (format {_shown(name)}, expected {FORMAT_NAME!r})")
    version = _field(document, "version", int, "document")
    if version > FORMAT_VERSION:
        raise _Bad(
            f"format version {version} is newer than this replay reads "
            f"(version {FORMAT_VERSION}): upgrade replay"
        )
    if version < 1:
        raise _Bad(f"unknown format version {version}")
    interactions = _field(document, "interactions", list, "document")
    result = []
    for i, item in enumerate(interactions):
        where = f"interactions[{i}]"
        _expect(item, dict, where)
        try:
            result.append(
                Interaction(
                    _request(_field(item, "request", dict, where), f"{where}.request"),
                    _response(_field(item, "response", dict, where), f"{where}.response"),
                )
            )
        except (TypeError, ValueError) as exc:  # attrs validators: negative times, bad status
            raise _Bad(f"{where}: {exc}") from exc
    return result


def load_interactions(path: str | Path) -> list[Interaction]:
    """Read and validate a cassette file.

    Raises:
        FileNotFoundError: there is no such file.
        CassetteFormatError: the file is not a complete, well-formed cassette this version reads.
    """
    path = Path(path)
    data = path.read_bytes()
    if not data:
        raise CassetteFormatError(path, "the file is empty")
    try:
        document = msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)
    except Exception as exc:  # msgpack raises assorted types on garbage input
        raise CassetteFormatError(path, _unpack_problem(data, exc)) from exc
    try:
        return _interactions(document)
    except _Bad as exc:
        raise CassetteFormatError(path, str(exc)) from exc
    except RecursionError:  # a value nested deeper than any cassette's, met by a check
        raise CassetteFormatError(path, "not a replay cassette: values nested too deeply") from None


def _unpack_problem(data: bytes, exc: Exception) -> str:
    """What a msgpack decoding failure says about the file."""
    if not (0x80 <= data[0] <= 0x8F or data[0] in (0xDE, 0xDF)):  # fixmap, map 16, map 32
        return "not a replay cassette: the file does not start with a msgpack map"
    if isinstance(exc, msgpack.ExtraData):
        return f"unexpected bytes after the cassette document ({len(exc.extra)} bytes)"
    if isinstance(exc, msgpack.StackError):
        return "not a replay cassette: msgpack values nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return f"not a replay cassette: a msgpack string is not valid UTF-8 ({exc.reason})"
    text = str(exc)
    # "incomplete input"; "N exceeds max_bin_len(M)": a length larger than what is left.
    if "incomplete" in text or "exceeds max" in text:
        return (
            "the file ends too early (truncated?): restore it from version control "
            "or record it again"
        )
    detail = f": {text}" if text else ""
    return f"not a msgpack document ({type(exc).__name__}{detail})"


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

    The new file gets the permissions of the one it replaces, or the umask's default for a
    new file (not the owner-only mode of `tempfile.mkstemp`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dumps(interactions)
    fd, temporary = _create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _fsync_directory(path.parent)


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


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive inter-process lock for writing the cassette at `path`.

    The lock is an `flock` on the cassette's directory itself, so no lock file is left
    beside the cassettes (a lock file cannot be removed safely while others may wait on
    it). Writers of different cassettes in one directory wait for each other briefly.
    """
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
