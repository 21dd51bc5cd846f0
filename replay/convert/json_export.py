"""The JSON export of a cassette, both ways: interactions to JSON text and back.

The export is the msgpack document with bytes spelled as text: a body or chunk that is
valid UTF-8 is a string (`"body"`, `"data"`), anything else base64 (`"body_base64"`,
`"data_base64"`). It carries every byte and every time, so it converts back losslessly.
Files are `replay.convert.files`'s business; this module only turns values into text and back.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from replay.errors import CassetteFormatError
from replay.model import STOPPERS, TIMES, Chunk, Frame, Interaction, Request, Response, StreamEnd
from replay.model.chunks import time_problem

__all__ = [
    "JSON_FORMAT_NAME",
    "JSON_FORMAT_VERSION",
    "MAX_NESTING",
    "export_json",
    "import_document",
    "import_json",
    "parse_json",
]

JSON_FORMAT_NAME = "replay-cassette-json"
JSON_FORMAT_VERSION = 1

#: The deepest a parsed JSON or YAML cassette may nest its lists and maps. A cassette needs
#: some 6 levels, and a structured body (pydantic-ai's `parsed_body`) some 20 more; deeper,
#: it is refused before anything recurses into it (a repr, a join of the pieces of a body).
MAX_NESTING = 200


def _spelled(data: bytes, key: str) -> dict[str, str]:
    """`{key: text}` for UTF-8 bytes, else `{key_base64: base64}`."""
    try:
        return {key: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {f"{key}_base64": base64.b64encode(data).decode("ascii")}


def _json_interaction(interaction: Interaction) -> dict[str, Any]:
    request, response = interaction.request, interaction.response
    end = response.end
    return {
        "request": {
            "method": request.method,
            "url": request.url,
            "headers": [list(pair) for pair in request.headers],
            **_spelled(request.body, "body"),
        },
        "response": {
            "status": response.status,
            "headers": [list(pair) for pair in response.headers],
            "headers_at": float(response.headers_at),
            **({"times": response.times} if response.times is not None else {}),
            "chunks": [{"at": float(c.at), **_spelled(c.data, "data")} for c in response.chunks],
            "end": {
                "at": float(end.at),
                "error": end.error,
                "message": end.message,
                "truncated": end.truncated,
                **({"stopped_by": end.stopped_by} if end.stopped_by == "session" else {}),
            },
        },
        **({} if interaction.frames is None else {"frames": _json_frames(interaction.frames)}),
    }


def _json_frames(frames: Sequence[Frame]) -> list[dict[str, Any]]:
    """A WebSocket conversation's frames (`replay.model.frames`), one map each."""
    return [
        {"at": f.at, "from": f.sender, "kind": f.kind, **_spelled(f.data, "data")} for f in frames
    ]


def export_json(interactions: Sequence[Interaction]) -> str:
    """The interactions as a JSON document (UTF-8 text, indented, ending with a newline).

    Layout: `{"format": "replay-cassette-json", "version": 1, "interactions": [{"request":
    {"method", "url", "headers": [[name, value], ...], "body" | "body_base64"}, "response":
    {"status", "headers", "headers_at", "times" (if said), "chunks": [{"at", "data" |
    "data_base64"}, ...],
    "end": {"at", "error", "message", "truncated", "stopped_by" (only "session")}}}, ...]}`;
    times in seconds.
    """
    document = {
        "format": JSON_FORMAT_NAME,
        "version": JSON_FORMAT_VERSION,
        "interactions": [_json_interaction(interaction) for interaction in interactions],
    }
    return _dumps(document) + "\n"


def _dumps(value: Any, depth: int = 0) -> str:
    """JSON, indented, except that a list or object of plain values stays on one line.

    So each header pair, chunk and end is one line: readable, and a diff shows what changed.
    """
    if not isinstance(value, (dict, list)) or _is_flat(value):
        return json.dumps(value, ensure_ascii=False)
    inner = "  " * (depth + 1)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)}: {_dumps(v, depth + 1)}" for k, v in value.items()]
        opening, closing = "{", "}"
    else:
        items = [f"{inner}{_dumps(v, depth + 1)}" for v in value]
        opening, closing = "[", "]"
    return opening + "\n" + ",\n".join(items) + "\n" + "  " * depth + closing


def _is_flat(value: dict[str, Any] | list[Any]) -> bool:
    values = value.values() if isinstance(value, dict) else value
    return not any(isinstance(v, (dict, list)) for v in values)


class _Bad(Exception):
    """A shape error at a place inside a document."""


def _get(doc: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(doc, dict):
        raise _Bad(f"{where}: expected an object, found {type(doc).__name__}")
    if key not in doc:
        raise _Bad(f"{where}: missing field {key!r}")
    value = doc[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise _Bad(f"{where}.{key}: expected {_kind_name(kind)}, found a boolean")
    if not isinstance(value, kind):
        raise _Bad(f"{where}.{key}: expected {_kind_name(kind)}, found {type(value).__name__}")
    return value


def _time(doc: Any, key: str, where: str) -> float:
    """Field `key` of `doc`, a recorded time: a number from 0 to `model.MAX_SECONDS`."""
    value: float = _get(doc, key, (int, float), where)
    problem = time_problem(value)
    if problem is not None:
        raise _Bad(f"{where}.{key}: {problem}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join("null" if k is type(None) else k.__name__ for k in kinds)


def _unspelled(doc: dict[str, Any], key: str, where: str) -> bytes:
    if key in doc:
        return str(_get(doc, key, str, where)).encode("utf-8")
    if f"{key}_base64" in doc:
        text = _get(doc, f"{key}_base64", str, where)
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _Bad(f"{where}.{key}_base64: not base64 ({exc})") from exc
    raise _Bad(f"{where}: missing field {key!r} (or {key + '_base64'!r})")


def _json_headers(doc: dict[str, Any], where: str) -> list[tuple[str, str]]:
    pairs = []
    for i, pair in enumerate(_get(doc, "headers", list, where)):
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
        ):
            raise _Bad(f"{where}.headers[{i}]: expected a [name, value] pair of strings")
        pairs.append((pair[0], pair[1]))
    return pairs


def _from_json(item: Any, where: str) -> Interaction:
    """One interaction of the export, each field checked in document order."""
    request = _json_request(_get(item, "request", dict, where), f"{where}.request")
    response = _json_response(_get(item, "response", dict, where), where)
    if "frames" not in item:
        return Interaction(request, response)
    frames = []
    for index, doc in enumerate(_get(item, "frames", list, where)):
        place = f"{where}.frames[{index}]"
        doc = _get({"frame": doc}, "frame", dict, where)
        sender, kind = _get(doc, "from", str, place), _get(doc, "kind", str, place)
        try:
            frames.append(
                Frame(_time(doc, "at", place), sender, kind, _unspelled(doc, "data", place))
            )
        except (TypeError, ValueError) as exc:  # (attrs' validators: the message alone)
            raise _Bad(f"{place}: {exc.args[0] if exc.args else exc}") from exc
    return Interaction(request, response, frames=frames)


def _json_request(doc: dict[str, Any], where: str) -> Request:
    return Request(
        method=_get(doc, "method", str, where),
        url=_get(doc, "url", str, where),
        headers=_json_headers(doc, where),
        body=_unspelled(doc, "body", where),
    )


def _json_response(item: dict[str, Any], where: str) -> Response:
    where = f"{where}.response"
    status = _get(item, "status", int, where)
    headers = _json_headers(item, where)
    headers_at = _time(item, "headers_at", where)
    chunks = []
    for i, chunk in enumerate(_get(item, "chunks", list, where)):
        at = _time(chunk, "at", f"{where}.chunks[{i}]")
        chunks.append(Chunk(at, _unspelled(chunk, "data", f"{where}.chunks[{i}]")))
    end = _get(item, "end", dict, where)
    times = item.get("times")
    if times not in TIMES:
        raise _Bad(f'{where}: times must be "network", "reader" or absent')
    return Response(
        status=status,
        headers=headers,
        headers_at=headers_at,
        times=times,
        chunks=chunks,
        end=StreamEnd(
            at=_time(end, "at", f"{where}.end"),
            error=_get(end, "error", (str, type(None)), f"{where}.end"),
            message=_get(end, "message", str, f"{where}.end"),
            truncated=_get(end, "truncated", bool, f"{where}.end"),
            stopped_by=_stopped_by(end, f"{where}.end"),
        ),
    )


def _stopped_by(end: dict[str, Any], where: str) -> str | None:
    truncated = _get(end, "truncated", bool, where)
    stopped_by = end.get("stopped_by", "client" if truncated else None)
    if stopped_by not in STOPPERS or (stopped_by is None) == truncated:
        raise _Bad(f"{where}: stopped_by {stopped_by!r} does not fit truncated={truncated}")
    return cast("str | None", stopped_by)


def import_json(text: str, path: str | Path | None = None) -> list[Interaction]:
    """Read a JSON export back (the inverse of `export_json`).

    Raises:
        CassetteFormatError: not JSON, not an export, of a newer version, or damaged (the
            message names `path` and the place).
    """
    return import_document(parse_json(text, path), path)


def parse_json(text: str, path: str | Path | None) -> Any:
    """The JSON value `text` holds; a `CassetteFormatError` naming `path` if it is not JSON,
    or JSON no cassette holds: values nested past what the parser recurses into, an integer
    of more digits than Python converts (`sys.get_int_max_str_digits`)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CassetteFormatError(path, f"not JSON ({exc})") from exc
    except RecursionError:
        raise CassetteFormatError(path, _NESTED) from None
    except ValueError:  # the only other thing `loads` refuses: an integer past the limit
        limit = sys.get_int_max_str_digits()
        raise CassetteFormatError(
            path, f"not a cassette: a JSON number of more than {limit} digits"
        ) from None
    if nested_deeper(document, MAX_NESTING):
        raise CassetteFormatError(path, _NESTED)
    return document


_NESTED = f"not a cassette: values nested more than {MAX_NESTING} deep"


def nested_deeper(value: Any, limit: int) -> bool:
    """True if the lists and dicts of `value` nest more than `limit` deep (found without
    recursion: each container is looked at once)."""
    stack = [(value, 1)] if isinstance(value, _NESTS) else []
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, _NESTS))
    return False


_NESTS = (dict, list)


def import_document(document: Any, path: str | Path | None) -> list[Interaction]:
    """The interactions of a parsed export, each field checked (see `import_json`)."""
    try:
        name = _get(document, "format", str, "document")
        if name != JSON_FORMAT_NAME:
            raise _Bad(f"not a replay JSON export (format {name!r}, expected {JSON_FORMAT_NAME!r})")
        version = _get(document, "version", int, "document")
        if version > JSON_FORMAT_VERSION:
            raise _Bad(
                f"JSON export version {version} is newer than this replay reads "
                f"(version {JSON_FORMAT_VERSION}): upgrade replay"
            )
        if version < 1:
            raise _Bad(f"unknown JSON export version {version}")
        items = _get(document, "interactions", list, "document")
        result = []
        for i, item in enumerate(items):
            try:
                result.append(_from_json(item, f"interactions[{i}]"))
            except (TypeError, ValueError) as exc:  # attrs validators: times, status, headers
                raise _Bad(f"interactions[{i}]: {exc}") from exc
    except _Bad as exc:
        raise CassetteFormatError(path, str(exc)) from exc
    return result
