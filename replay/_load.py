"""Reading a cassette file: every field checked, in time and memory bounded by its size.

The document is walked by a `_walk.Walker`. Each interaction is built one of two ways, then
checked by the same validators below (which also build its values):

- whole, by `msgpack.unpackb`, from a slice of at most `_PROBE_MAX` bytes: whatever it
  declares, so little can only build a few MiB of objects, dropped as soon as the interaction
  is checked; its values are then charged against the file's budget;
- else (a long stream, or something odd) field by field by the walker, which builds nothing
  before its type is checked and charges every list before building it: what is not of the
  expected type is left unbuilt, a `Skipped` naming its type for the validators to report.

The slice that fits is guessed from the interactions before (twice the last one's size), so
a cassette of like interactions is read with one `unpackb` each; the first one's slice is the
rest of the file when that is small.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from replay._walk import BadElement, LoadError, Skipped, Walker, check_document, not_msgpack
from replay.model import STOPPERS, Chunks, Interaction, Request, Response, StreamEnd

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "LoadError", "read_interactions"]

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

Reader = Callable[[Walker, str, str], Any]
"""Reads the value of field `key` of the map at `parent` (a place, for messages)."""


def read_interactions(data: bytes) -> list[Interaction]:
    """The interactions of the cassette file `data`.

    Raises:
        LoadError: it is not a complete cassette this version reads, or loading it would
            take far more memory than a cassette of its size can need.
    """
    try:
        return _document(Walker(data))
    except (LoadError, IndexError, ValueError, msgpack.UnpackException) as exc:
        check_document(data)  # a broken document says so first, as `unpackb` would
        if isinstance(exc, LoadError):
            raise
        if isinstance(exc, UnicodeDecodeError):
            problem = f"not a replay cassette: a msgpack string is not valid UTF-8 ({exc.reason})"
            raise LoadError(problem) from exc
        raise LoadError(not_msgpack(exc)) from exc  # pragma: no cover - found above
    except RecursionError:  # pragma: no cover - nothing recurses into values; a last guard
        raise LoadError("not a replay cassette: values nested too deeply") from None


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
        return f"not a replay cassette (format {_shown(name)}, expected {FORMAT_NAME!r})"
    if "version" not in header:
        return "document: missing field 'version'" if final else "not read yet"
    version = _expect(header["version"], int, "document.version")
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
    # The first guess: all that is left when that fits (a small file, with one interaction
    # as a rule, is then one `unpackb`); else little, so that a long stream's first
    # interaction does not cost a failed `unpackb` of `_PROBE_MAX` bytes.
    left = len(walker.data) - walker.position
    probe = left if left <= _PROBE_MAX else _PROBE_MIN
    for index in range(count):
        place = f"interactions[{index}]"
        start = walker.position
        document = _probed(walker.data, start, probe)
        if document is _MISSED:
            walker.charge(1, _INTERACTION, place)
            interaction = _interaction(_built(walker, place), place)
        else:
            interaction = _interaction(document, place)
            walker.charge(1, _cost(interaction), place)
            walker.skip()
        result.append(interaction)
        probe = min(max(2 * (walker.position - start), _PROBE_MIN), _PROBE_MAX)
    return result


_MISSED = object()


def _probed(data: bytes, start: int, size: int) -> Any:
    """The value at `start` if it lies within `size` bytes, built by msgpack whole (with so
    few bytes, whatever they declare builds little); `_MISSED` if not, or if anything is
    wrong with it (the walker then finds what)."""
    try:
        return msgpack.unpackb(memoryview(data)[start : start + size], strict_map_key=False)
    except msgpack.ExtraData as extra:  # it ends within the slice: the usual case
        return extra.unpacked
    except Exception:  # incomplete, or damaged: the walker tells which
        return _MISSED


def _cost(interaction: Interaction) -> int:
    pairs = len(interaction.request.headers) + len(interaction.response.headers)
    return _INTERACTION + pairs * _PAIR + len(interaction.response.chunks) * (_TIME + _ELEMENT)


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
    kind = walker.next_kind()
    if kind != "list":
        walker.skip()
        return Skipped(kind)
    count, _size = walker.list_length(where)
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
        kind = walker.next_kind()
        if kind != "list":
            walker.skip()
            return Skipped(kind)
        count, size = walker.list_length(where)
        if name == "at":
            walker.charge(count, _TIME, where)
            times = walker.float64s(count, size)
            if times is not None:
                return _Floats(times)
            walker.charge(count, _ELEMENT - _TIME, where)
        else:
            walker.charge(count, _ELEMENT, where)
        try:
            return walker.column(count)
        except BadElement as bad:
            raise LoadError(f"{parent}: chunk {bad.index}: {what}, not {bad.kind}") from bad

    return read


class _Floats:
    """A time column the walker read as msgpack float64s: every time is a float.

    A holder, not a tuple subclass: building a subclass, and `Chunks` making a plain tuple
    of it again, would copy the column twice (some 40 µs for 10,000 chunks).
    """

    __slots__ = ("values",)

    def __init__(self, values: tuple[float, ...]) -> None:
        self.values = values


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
}
_INTERACTION_READERS: dict[str, Reader] = {
    "request": _map(_REQUEST_READERS),
    "response": _map(_RESPONSE_READERS),
}


def _built(walker: Walker, where: str) -> Any:
    """The interaction that comes next, as `unpackb` would give it, but for what is not of
    the type it should be: left unbuilt, a `Skipped`."""
    kind = walker.next_kind()
    if kind != "dict":
        walker.skip()
        return Skipped(kind)
    return walker.fields(where, _INTERACTION_READERS)


# -- checking an interaction -----------------------------------------------------------------


def _expect(value: object, kind: type | tuple[type, ...], where: str) -> Any:
    if type(value) is kind or (type(kind) is tuple and type(value) in kind):
        return value  # the usual case, first
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise LoadError(f"{where}: expected a number, found a boolean")
    if not isinstance(value, (list, tuple) if kind is list else kind):  # the walker: tuples
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        found = value.kind if isinstance(value, Skipped) else type(value).__name__
        raise LoadError(f"{where}: expected {names}, found {found}")
    return value


def _field(mapping: dict[Any, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in mapping:
        raise LoadError(f"{where}: missing field {name!r}")
    return _expect(mapping[name], kind, f"{where}.{name}")


def _interaction(value: object, where: str) -> Interaction:
    item: dict[Any, Any] = _expect(value, dict, where)
    try:
        return Interaction(
            _request(_field(item, "request", dict, where), f"{where}.request"),
            _response(_field(item, "response", dict, where), f"{where}.response"),
        )
    except (TypeError, ValueError) as exc:  # attrs validators: negative times, bad status
        raise LoadError(f"{where}: {exc}") from exc


def _headers(value: object, where: str) -> list[Any]:
    pairs = []
    for i, pair in enumerate(_expect(value, list, where)):
        _expect(pair, list, f"{where}[{i}]")
        if len(pair) != 2:
            raise LoadError(f"{where}[{i}]: expected a [name, value] pair")
        _expect(pair[0], str, f"{where}[{i}][0]")
        _expect(pair[1], str, f"{where}[{i}][1]")
        pairs.append(pair)  # `Request` and `Response` make tuples of lists, and keep tuples
    return pairs


def _request(value: dict[Any, Any], where: str) -> Request:
    return Request(
        method=_field(value, "method", str, where),
        url=_field(value, "url", str, where),
        headers=_headers(_field(value, "headers", list, where), f"{where}.headers"),
        body=_field(value, "body", bytes, where),
    )


def _response(value: dict[Any, Any], where: str) -> Response:
    return Response(
        status=_field(value, "status", int, where),
        headers=_headers(_field(value, "headers", list, where), f"{where}.headers"),
        headers_at=_field(value, "headers_at", (int, float), where),
        chunks=_chunks(_field(value, "chunks", dict, where), f"{where}.chunks"),
        end=_end(_field(value, "end", dict, where), f"{where}.end"),
    )


def _chunks(value: dict[Any, Any], where: str) -> Chunks:
    floats = value.get("at")
    times = floats.values if type(floats) is _Floats else _field(value, "at", list, where)
    payloads = _field(value, "data", list, where)
    if len(times) != len(payloads):
        raise LoadError(
            f"{where}: the columns differ in length ({len(times)} in 'at', "
            f"{len(payloads)} in 'data'): each chunk needs a time and its bytes"
        )
    try:  # Chunks names the chunk at fault
        if type(floats) is _Floats:  # `times` is its tuple, `payloads` the walker's tuple
            return Chunks._of_floats(times, tuple(payloads))
        return Chunks(times, payloads)
    except (TypeError, ValueError) as exc:
        raise LoadError(f"{where}: {exc}") from exc


def _end(value: dict[Any, Any], where: str) -> StreamEnd:
    error = _field(value, "error", (str, type(None)), where)
    truncated = _field(value, "truncated", bool, where)
    # Optional (files before it was written say only "truncated", which meant the client).
    stopped_by = value.get("stopped_by", "client" if truncated else None)
    if stopped_by not in STOPPERS or (stopped_by is None) == truncated:
        raise LoadError(
            f"{where}: stopped_by {_shown(stopped_by)} does not fit truncated={truncated}"
        )
    return StreamEnd(
        at=_field(value, "at", (int, float), where),
        error=error,
        message=_field(value, "message", str, where),
        truncated=truncated,
        stopped_by=stopped_by,
    )


def _shown(value: object) -> str:
    """`value` for a message: a short str or number as it is, anything else by its type (a
    hostile file's value may be huge, or nested past what `repr` can recurse into)."""
    if isinstance(value, Skipped):
        return f"a {value.kind}"
    if isinstance(value, (str, int, float, type(None))) and len(repr(value)) <= 60:
        return repr(value)
    return f"a {type(value).__name__}"
