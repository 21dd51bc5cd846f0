"""Reading a cassette file: every field checked, in time and memory bounded by its size.

A small file (at most `_PROBE_MAX` bytes, a test's cassette as a rule) is built whole by one
`msgpack.unpackb`. Else the document is walked by a `_walk.Walker`, and each interaction is
built one of two ways:

- whole, by `msgpack.unpackb`, from a slice of at most `_PROBE_MAX` bytes;
- else (a long stream, or something odd) field by field by the walker, which builds nothing
  before its type is checked and charges every list before building it: what is not of the
  expected type is left unbuilt, a `Skipped` naming its type for the validators to report.

Whatever so few bytes declare, `unpackb` builds little from them: some 40 bytes of objects a
byte, and ahead of the elements, for lists still open, at most `_ARRAY_MAX` slots each
(msgpack allocates a list's declared length before reading it, up to 10,000 slots, and nests
1,024 deep: some 80 MiB otherwise). What is built is then checked (`_validate`) and, from a
slice, charged against the file's budget (a small file's, 32 MiB, it cannot reach). Anything
odd in a file built whole (even a field a validator refuses) sends it to the walker, which
says what, as it would have.

The slice that fits is guessed from the interactions before (twice the last one's size), so
a cassette of like interactions is read with one `unpackb` each.

A long file is mapped rather than read (`read_mapped`, which `store` uses past
`store.MAPPED_FROM`): the walker's Unpackers read it a piece at a time, and a column of long
payloads is left in the file (`Walker.places`: each element found to be a bin within the
file, from its header), its payloads read when played (`_spool.SpooledPayloads`). Loading a
long stream then takes little memory, and never the file's bytes beside the payloads built
from them; every check is the same, and a column that fails one is built, to say what.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import msgpack

from replay.model import Interaction
from replay.store.frames import flags
from replay.store.msgpack_bytes import stream
from replay.store.spool import SpooledPayloads
from replay.store.validate import Floats, Kept, expect, interaction_of, quick, shown
from replay.store.walk import (
    MAX_FIELDS,
    BadElement,
    Document,
    LoadError,
    Skipped,
    Walker,
)

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "LoadError", "read_interactions", "read_mapped"]

FORMAT_NAME = "replay-cassette"
FORMAT_VERSION = 1

# What values cost in memory (CPython 3.11, 64 bits), charged against the budget; with the
# copies made while they are checked.
_INTERACTION = 700  # the five attrs objects, empty columns, short strings
_PAIR = 240  # a header: its list or tuple, the tuple `Request` keeps, two strings, slots
_TIME = 48  # a float, its slot in the column, and in the sorted copy that checks the order
_ELEMENT = 56  # the largest column element but for its bytes (bytes: 33, int: 36), slots

_PROBE_MIN = 1024
_PROBE_MAX = 64 * 1024
_ARRAY_MAX = 1024  # longer lists, in a slice built whole: the walker reads them

Reader = Callable[[Walker, str, str], Any]
"""Reads the value of field `key` of the map at `parent` (a place, for messages)."""


def read_mapped(fileno: int) -> list[Interaction]:
    """The interactions of the cassette file open as `fileno` (a regular file, not empty),
    mapped rather than read: its payloads are then in memory once, not beside the file's
    bytes.

    Raises:
        LoadError: as `read_interactions`.
    """
    import mmap  # (here: most cassettes are read, not mapped)

    mapped = mmap.mmap(fileno, 0, access=mmap.ACCESS_READ)
    try:
        return read_interactions(mapped, fileno)
    finally:
        with contextlib.suppress(BufferError):  # a view still held: the map goes with it
            mapped.close()


def read_interactions(data: Document, fileno: int | None = None) -> list[Interaction]:
    """The interactions of the cassette file `data` (which maps the file `fileno`, if that
    is given).

    Raises:
        LoadError: it is not a complete cassette this version reads, or loading it would
            take far more memory than a cassette of its size can need.
    """
    if len(data) <= _PROBE_MAX:
        interactions = _whole(data)
        if interactions is not None:
            return interactions
    try:
        return _document(Walker(data, fileno))
    except (LoadError, IndexError, ValueError, msgpack.UnpackException) as exc:
        check_document(data, fileno)  # a broken document says so first, as `unpackb` would
        if isinstance(exc, LoadError):
            raise
        if isinstance(exc, UnicodeDecodeError):
            problem = f"not a replay cassette: a msgpack string is not valid UTF-8 ({exc.reason})"
            raise LoadError(problem) from exc
        raise LoadError(not_msgpack(exc)) from exc  # pragma: no cover - found above
    except RecursionError:  # pragma: no cover - nothing recurses into values; a last guard
        raise LoadError("not a replay cassette: values nested too deeply") from None


def _whole(data: Document) -> list[Interaction] | None:
    """The interactions of a small file built whole; None if anything is odd with it (the
    walker then reads it, and says what)."""
    try:
        document = msgpack.unpackb(data, strict_map_key=False, max_array_len=_ARRAY_MAX)
        if type(document) is not dict or len(document) > MAX_FIELDS:
            return None
        listed = document.get("interactions")
        if type(listed) is not list or _header_problem(document) is not None:
            return None
        result = []
        for value in listed:
            interaction = quick(value)
            if interaction is None:
                return None
            result.append(interaction)
        return result
    except Exception:  # damaged, unhashable keys, a bad version...: the walker tells which
        return None


def _document(walker: Walker) -> list[Interaction]:
    header: dict[str, Any] = {}
    deferred: list[int] = []

    def interactions(walker: Walker, parent: str, key: str) -> list[Interaction] | None:
        if _header_problem(header) is None:
            return _interactions(walker, f"{parent}.{key}")
        deferred.append(walker.position)  # read once "format" and "version" are known good
        walker.skip()
        return None

    readers: dict[str, Reader] = {
        "format": _scalar,
        "version": _scalar,
        "interactions": interactions,
    }
    walker.fields("document", readers, header)
    if walker.position != len(walker.data):
        raise LoadError("stray bytes after the document")  # check_document words it
    problem = _header_problem(header, final=True)
    if problem is not None:
        raise LoadError(problem)
    if "interactions" not in header:
        raise LoadError("document: missing field 'interactions'")
    if deferred:
        walker.seek(deferred[-1])
        return _interactions(walker, "document.interactions")
    result: list[Interaction] = header["interactions"]
    return result


def _header_problem(header: dict[str, Any], *, final: bool = False) -> str | None:
    """What is wrong with the format name and version read so far; None if nothing."""
    if "format" not in header:
        return f"not a replay cassette (no 'format' field; expected {FORMAT_NAME!r})"
    name = header["format"]
    if type(name) is not str or name != FORMAT_NAME:
        return f"not a replay cassette (format {shown(name)}, expected {FORMAT_NAME!r})"
    if "version" not in header:
        return "document: missing field 'version'" if final else "not read yet"
    version = expect(header["version"], int, "document.version")
    if version > FORMAT_VERSION:
        return (
            f"format version {version} is newer than this replay reads "
            f"(version {FORMAT_VERSION}): upgrade replay"
        )
    if version < 1:
        return f"unknown format version {version}"
    return None


def _interactions(walker: Walker, where: str) -> list[Interaction]:
    count, _size = walker.list_length(where)
    walker.unpacker.read_array_header()
    result = []
    # The first guess: all that is left when that fits (a small file not built whole, as
    # when it holds a bad field: its first interaction is built as one still); else little,
    # so that a long stream's first interaction does not cost a failed `unpackb` of
    # `_PROBE_MAX` bytes.
    left = len(walker.data) - walker.position
    probe = left if left <= _PROBE_MAX else _PROBE_MIN
    for index in range(count):
        place = f"interactions[{index}]"
        start = walker.position
        document = _probed(walker.data, start, probe)
        if document is _MISSED:
            walker.charge(1, _INTERACTION, place)
            interaction = interaction_of(_built(walker, place), place)
        else:
            interaction = interaction_of(document, place)
            walker.charge(1, _cost(interaction), place)
            walker.skip()
        result.append(interaction)
        probe = min(max(2 * (walker.position - start), _PROBE_MIN), _PROBE_MAX)
    return result


_MISSED = object()


def _probed(data: Document, start: int, size: int) -> Any:
    """The value at `start` if it lies within `size` bytes, built by msgpack whole (with so
    few bytes, whatever they declare builds little); `_MISSED` if not, or if anything is
    wrong with it (the walker then finds what)."""
    try:
        value = memoryview(data)[start : start + size]
        return msgpack.unpackb(value, strict_map_key=False, max_array_len=_ARRAY_MAX)
    except msgpack.ExtraData as extra:  # it ends within the slice: the usual case
        return extra.unpacked
    except Exception:  # incomplete, or damaged: the walker tells which
        return _MISSED


def _cost(interaction: Interaction) -> int:
    pairs = len(interaction.request.headers) + len(interaction.response.headers)
    pieces = len(interaction.response.chunks) + len(interaction.frames or ())
    return _INTERACTION + pairs * _PAIR + pieces * (_TIME + _ELEMENT)


# -- building an interaction with the walker -------------------------------------------------


def _scalar(walker: Walker, _parent: str, _key: str) -> Any:
    return walker.scalar()


def _map(readers: dict[str, Reader]) -> Reader:
    def read(walker: Walker, parent: str, key: str) -> Any:
        kind = walker.next_kind()
        if kind != "dict":
            walker.skip()
            return Skipped(kind)
        return walker.fields(f"{parent}.{key}", readers)

    return read


def _pairs(walker: Walker, parent: str, key: str) -> Any:
    where = f"{parent}.{key}"
    found = walker.list_or_skip(where)
    if isinstance(found, Skipped):
        return found
    count, _size = found
    walker.charge(count, _PAIR, where)
    start = walker.position
    try:
        return walker.pairs(count)
    except BadElement as bad:
        raise LoadError(_element_problem(walker, start, bad, f"{where}[{bad.index}]")) from bad


def _element_problem(walker: Walker, start: int, bad: BadElement, where: str) -> str:
    """What `_headers` would say of a header the walker could not build."""
    if not bad.kind.startswith("list"):
        return f"{where}: expected list, found {bad.kind}"
    if bad.kind != "list of length 2":
        return f"{where}: expected a [name, value] pair"
    pair = walker.element_at(start, bad.index)
    for item in (0, 1):  # a pair of something else than two strings: name the first
        kind = walker.kind(walker.element_at(pair, item))
        if kind != "str":
            return f"{where}[{item}]: expected str, found {kind}"
    return f"{where}: expected a [name, value] pair"  # pragma: no cover - refused for a reason


def _column(name: str) -> Reader:
    what = "at must be a number of seconds" if name == "at" else "data must be bytes"

    def read(walker: Walker, parent: str, key: str) -> Any:
        where = f"{parent}.{key}"
        found = walker.list_or_skip(where)
        if isinstance(found, Skipped):
            return found
        count, size = found
        if name == "at":
            walker.charge(count, _TIME, where)
            times = walker.float64s(count, size)
            if times is not None:
                return Floats(times)
            walker.charge(count, _ELEMENT - _TIME, where)
        else:
            walker.charge(count, _ELEMENT, where)
            places = walker.places(count, size) if walker.fileno is not None else None
            if places is not None:
                return Kept(SpooledPayloads(walker.file_bytes(), *places))
        try:
            return walker.column(count)
        except BadElement as bad:
            raise LoadError(f"{parent}: chunk {bad.index}: {what}, not {bad.kind}") from bad

    return read


_END_READERS: dict[str, Reader] = dict.fromkeys(
    ("at", "error", "message", "truncated", "stopped_by"), _scalar
)
_CHUNKS_READERS: dict[str, Reader] = {"at": _column("at"), "data": _column("data")}
_REQUEST_READERS: dict[str, Reader] = {
    "method": _scalar,
    "url": _scalar,
    "headers": _pairs,
    "body": _scalar,
}
_RESPONSE_READERS: dict[str, Reader] = {
    "status": _scalar,
    "headers": _pairs,
    "headers_at": _scalar,
    "chunks": _map(_CHUNKS_READERS),
    "end": _map(_END_READERS),
    "times": _scalar,
}
_FRAMES_READERS: dict[str, Reader] = {
    "at": _column("at"),
    "data": _column("data"),
    "client": flags,
    "op": flags,
}
_INTERACTION_READERS: dict[str, Reader] = {
    "request": _map(_REQUEST_READERS),
    "response": _map(_RESPONSE_READERS),
    "frames": _map(_FRAMES_READERS),  # a WebSocket conversation's (`replay.store.frames`)
}


def _built(walker: Walker, where: str) -> Any:
    """The interaction that comes next, as `unpackb` would give it, but for what is not of
    the type it should be: left unbuilt, a `Skipped`."""
    kind = walker.next_kind()
    if kind != "dict":
        walker.skip()
        return Skipped(kind)
    return walker.fields(where, _INTERACTION_READERS)


# -- the document as msgpack -----------------------------------------------------------------


def check_document(data: Document, fileno: int | None = None) -> None:
    """Raise LoadError unless `data` (which maps the file `fileno`, if given) is one
    complete msgpack document (found building nothing, in one pass in C)."""
    source, read_size = stream(data, 0, fileno)
    size = max(len(data), read_size)
    unpacker = msgpack.Unpacker(source, read_size=read_size, max_buffer_size=size)
    try:
        unpacker.skip()
    except msgpack.OutOfData as exc:
        raise LoadError(_unpack_problem(data, _TRUNCATED)) from exc
    except msgpack.StackError as exc:
        raise LoadError(_unpack_problem(data, _NESTED)) from exc
    except (ValueError, msgpack.UnpackException) as exc:
        raise LoadError(_unpack_problem(data, not_msgpack(exc))) from exc
    extra = len(data) - unpacker.tell()
    if extra:
        problem = f"unexpected bytes after the cassette document ({extra} bytes)"
        raise LoadError(_unpack_problem(data, problem))


_TRUNCATED = (
    "the file ends too early (truncated?): restore it from version control or record it again"
)
_NESTED = "not a replay cassette: msgpack values nested too deeply"


def not_msgpack(exc: Exception) -> str:
    """The problem of a file msgpack cannot decode, as `exc` says it."""
    detail = f": {exc}" if str(exc) else ""
    return f"not a msgpack document ({type(exc).__name__}{detail})"


def _unpack_problem(data: Document, problem: str) -> str:
    if not (0x80 <= data[0] <= 0x8F or data[0] in (0xDE, 0xDF)):  # fixmap, map 16, map 32
        return "not a replay cassette: the file does not start with a msgpack map"
    return problem
