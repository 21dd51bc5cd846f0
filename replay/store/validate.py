"""Checking an interaction as `_load` built it (by `unpackb`, or by the walker), and making
its values: each field must have the type it should; a value the model refuses is named
with its place in the document.

`quick` takes the usual case, every field of exactly its type, in one pass that builds no
message; `interaction_of` takes any, and says what is wrong and where (the walker's `Skipped`
values by the type they have in the file).
"""

from __future__ import annotations

from typing import Any

from replay.model import STOPPERS, TIMES, Headers, Interaction, Request, Response, StreamEnd
from replay.model.chunks import MAX_SECONDS, Chunks, first_bad_time, time_problem
from replay.store.prechecked import end_of as _end_of
from replay.store.prechecked import interaction_of as _interaction_of
from replay.store.prechecked import request_of as _request_of
from replay.store.spool import SpooledPayloads
from replay.store.walk import LoadError, Skipped

__all__ = ["Floats", "Kept", "expect", "interaction_of", "quick", "shown"]

_MISSED = object()


class Floats:
    """A time column the walker read as msgpack float64s: every time is a float.

    A holder, not a tuple subclass: building a subclass, and `Chunks` making a plain tuple
    of it again, would copy the column twice (some 40 µs for 10,000 chunks).
    """

    __slots__ = ("values",)

    def __init__(self, values: tuple[float, ...]) -> None:
        self.values = values


class Kept:
    """A payload column the walker left in the file (every payload bytes, read when asked
    for: `replay.store.spool.SpooledPayloads`)."""

    __slots__ = ("values",)

    def __init__(self, values: SpooledPayloads) -> None:
        self.values = values


def expect(value: object, kind: type | tuple[type, ...], where: str) -> Any:
    """`value`, if it is of `kind` (for `list`, a tuple too: the walker builds tuples).

    Raises:
        LoadError: it is not, named as found at `where`.
    """
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
    return expect(mapping[name], kind, f"{where}.{name}")


def quick(value: object) -> Interaction | None:
    """The interaction `value` holds if each field has exactly the type it should (as a
    good file's have), checked inline; None if not, or if a model's validator would refuse
    a value: `interaction_of` then says what is wrong, and where.

    What the validators check is checked here, once; the objects are then made without
    them (`replay.store.prechecked`): they would only check it all again.
    """
    if type(value) is not dict:
        return None
    request, response = value.get("request"), value.get("response")
    if type(request) is not dict or type(response) is not dict or "frames" in value:
        return None  # (a WebSocket conversation's frames: `interaction_of` reads them)
    chunks, end = response.get("chunks"), response.get("end")
    if type(chunks) is not dict or type(end) is not dict:
        return None
    method: Any = request.get("method")
    url: Any = request.get("url")
    body: Any = request.get("body")
    status: Any = response.get("status")
    headers_at: Any = response.get("headers_at")
    source: Any = response.get("times")
    if not (
        type(method) is str
        and type(url) is str
        and type(body) is bytes
        and type(status) is int
        and type(headers_at) in _NUMBER
        # What the validators refuse (a NaN fails every comparison):
        and 100 <= status <= 599
        and 0 <= headers_at <= MAX_SECONDS
        and source in TIMES
    ):
        return None
    ended = _quick_end(end)
    request_headers = _pairs(request.get("headers"))
    response_headers = _pairs(response.get("headers"))
    if ended is None or request_headers is None or response_headers is None:
        return None
    body_chunks = _quick_chunks(chunks.get("at"), chunks.get("data"), headers_at, ended.at)
    if body_chunks is None:
        return None
    return _interaction_of(
        _request_of(method, url, request_headers, body),
        status,
        response_headers,
        headers_at,
        body_chunks,
        ended,
        source,
    )


def _quick_end(end: dict[Any, Any]) -> StreamEnd | None:
    """`quick`'s end of the body, if each field has exactly its type and a valid value."""
    at: Any = end.get("at")
    message: Any = end.get("message")
    error = end.get("error", _MISSED)
    truncated = end.get("truncated")
    stopped_by = end.get("stopped_by", "client" if truncated else None)
    if not (
        type(at) in _NUMBER
        and type(message) is str
        and (error is None or type(error) is str)
        and type(truncated) is bool
        and stopped_by in STOPPERS
        and (stopped_by is None) != truncated
        and 0 <= at <= MAX_SECONDS
    ):
        return None
    return _end_of(at, error, message, truncated, stopped_by)


def _quick_chunks(times: Any, payloads: Any, headers_at: float, at: float) -> Chunks | None:
    """`quick`'s body: every time a number, in order, finite, after the headers (`headers_at`)
    and before the end (`at`); every payload bytes. None if not."""
    if not (
        (type(payloads) in _LIST or type(payloads) is Kept)
        and (type(times) in _LIST or type(times) is Floats)
    ):
        return None
    try:
        if type(payloads) is Kept:
            body_chunks = _kept(times, payloads)
        elif type(times) is Floats:
            body_chunks = Chunks._of_floats(times.values, tuple(payloads))
        else:
            body_chunks = Chunks(times, payloads)
    except (TypeError, ValueError):
        return None
    chunk_times = body_chunks.times
    if chunk_times and chunk_times[0] < headers_at:  # a body before its headers
        return None
    if at < (chunk_times[-1] if chunk_times else headers_at):  # an end before the body
        return None
    return body_chunks


_NUMBER = (int, float)
_LIST = (list, tuple)  # `unpackb` builds lists, the walker tuples


def _pairs(value: object) -> Headers | None:
    """The headers `value` holds as `Request` and `Response` keep them: a list of
    [name, value] pairs of latin-1 strings, made tuples; None if it is not one."""
    if type(value) not in _LIST:
        return None
    pairs = []
    for pair in value:  # type: ignore[attr-defined]
        if type(pair) not in _LIST or len(pair) != 2:
            return None
        name, text = pair
        if type(name) is not str or type(text) is not str:
            return None
        if not (name.isascii() and text.isascii()):  # (both O(1)) else: latin-1, as `_to_headers`
            try:
                name.encode("latin-1")
                text.encode("latin-1")
            except UnicodeEncodeError:
                return None
        pairs.append(pair if type(pair) is tuple else (name, text))
    return tuple(pairs)


def interaction_of(value: object, where: str) -> Interaction:
    """The interaction `value` holds (found at `where` in the document).

    Raises:
        LoadError: a field is missing or of the wrong type, or the model refuses a value.
    """
    built = quick(value)
    if built is not None:
        return built
    item: dict[Any, Any] = expect(value, dict, where)
    frames = None
    if "frames" in item:  # a WebSocket conversation (`replay.store.frames`)
        from replay.store.frames import frames_of

        frames = frames_of(item["frames"], f"{where}.frames")
    try:
        return Interaction(
            _request(_field(item, "request", dict, where), f"{where}.request"),
            _response(_field(item, "response", dict, where), f"{where}.response"),
            frames=frames,
        )
    except (TypeError, ValueError) as exc:  # attrs validators: negative times, bad status
        raise LoadError(f"{where}: {exc}") from exc


def _headers(value: object, where: str) -> list[Any]:
    pairs = []
    for i, pair in enumerate(expect(value, list, where)):
        expect(pair, list, f"{where}[{i}]")
        if len(pair) != 2:
            raise LoadError(f"{where}[{i}]: expected a [name, value] pair")
        expect(pair[0], str, f"{where}[{i}][0]")
        expect(pair[1], str, f"{where}[{i}][1]")
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
        headers_at=_time(value, "headers_at", where),
        chunks=_chunks(_field(value, "chunks", dict, where), f"{where}.chunks"),
        end=_end(_field(value, "end", dict, where), f"{where}.end"),
        times=_times(value, where),
    )


def _times(value: dict[Any, Any], where: str) -> str | None:
    """The response's optional "times" (files before it was written have none)."""
    source = value.get("times")
    if source not in TIMES:
        raise LoadError(
            f"{where}.times: {shown(source)} is not one of {', '.join(map(repr, TIMES[1:]))}"
        )
    return source


def _chunks(value: dict[Any, Any], where: str) -> Chunks:
    floats = value.get("at")
    times = floats.values if type(floats) is Floats else _field(value, "at", list, where)
    kept = value.get("data")
    payloads = kept.values if type(kept) is Kept else _field(value, "data", list, where)
    if len(times) != len(payloads):
        raise LoadError(
            f"{where}: the columns differ in length ({len(times)} in 'at', "
            f"{len(payloads)} in 'data'): each chunk needs a time and its bytes"
        )
    try:  # Chunks names the chunk at fault
        if type(kept) is Kept:
            return _kept(floats if type(floats) is Floats else times, kept)
        if type(floats) is Floats:  # `times` is its tuple, `payloads` the walker's tuple
            return Chunks._of_floats(times, tuple(payloads))
        return Chunks(times, payloads)
    except TypeError as exc:
        raise LoadError(f"{where}: {exc}") from exc
    except ValueError as exc:  # every time a number: a time out of bounds, or out of order
        index, problem = first_bad_time(times)
        if problem is not None:
            raise LoadError(f"{where}[{index}].at: {problem}") from exc
        raise LoadError(f"{where}: {exc}") from exc


def _kept(times: Floats | list[Any] | tuple[Any, ...], payloads: Kept) -> Chunks:
    """The chunks of a payload column left in the file.

    Raises:
        ValueError, TypeError: a time is not a number, or they are not in order.
    """
    values = times.values if isinstance(times, Floats) else tuple(times)
    return Chunks._kept(values, payloads.values)


def _end(value: dict[Any, Any], where: str) -> StreamEnd:
    error = _field(value, "error", (str, type(None)), where)
    truncated = _field(value, "truncated", bool, where)
    # Optional (files before it was written say only "truncated", which meant the client).
    stopped_by = value.get("stopped_by", "client" if truncated else None)
    if stopped_by not in STOPPERS or (stopped_by is None) == truncated:
        raise LoadError(
            f"{where}: stopped_by {shown(stopped_by)} does not fit truncated={truncated}"
        )
    return StreamEnd(
        at=_time(value, "at", where),
        error=error,
        message=_field(value, "message", str, where),
        truncated=truncated,
        stopped_by=stopped_by,
    )


def _time(mapping: dict[Any, Any], name: str, where: str) -> float:
    """Field `name` of `mapping`, a recorded time: a number from 0 to `MAX_SECONDS`.

    Raises:
        LoadError: it is missing, no number, or out of bounds, naming the field.
    """
    value: float = _field(mapping, name, (int, float), where)
    problem = time_problem(value)
    if problem is not None:
        raise LoadError(f"{where}.{name}: {problem}")
    return value


def shown(value: object) -> str:
    """`value` for a message: a short str or number as it is, anything else by its type (a
    hostile file's value may be huge, or nested past what `repr` can recurse into)."""
    if isinstance(value, Skipped):
        return f"a {value.kind}"
    if isinstance(value, (str, int, float, type(None))) and len(repr(value)) <= 60:
        return repr(value)
    return f"a {type(value).__name__}"
