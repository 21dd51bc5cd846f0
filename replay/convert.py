"""Cassettes in other formats: vcrpy's YAML (both ways) and a JSON export (both ways).

vcrpy cassettes are read and written through vcrpy's own serializer (`vcr.serialize` with
`vcr.serializers.yamlserializer`), laid out exactly as vcrpy's httpx stub records them:
request headers through `httpx.Headers`, response headers grouped by lower-cased name,
and the body as it came off the transport, still compressed when the response had a
`Content-Encoding` (vcrpy's playback hands it to httpx, which decompresses it).
vcrpy keeps no timing and no stream ends, so a vcrpy cassette becomes one chunk per
response at 0 s; a replay cassette loses its timing and stream errors on the way out.

The JSON export is the msgpack document with bytes spelled as text: a body or chunk that
is valid UTF-8 is a string (`"body"`, `"data"`), anything else base64 (`"body_base64"`,
`"data_base64"`). It carries every byte and every time, so it converts back losslessly.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from replay.errors import CassetteFormatError, ConfigurationError
from replay.model import Chunk, Interaction, Request, Response, StreamEnd
from replay.store import load_interactions, save_interactions

__all__ = [
    "JSON_FORMAT_NAME",
    "JSON_FORMAT_VERSION",
    "convert",
    "export_json",
    "import_json",
    "load_vcr",
    "save_vcr",
]

JSON_FORMAT_NAME = "replay-cassette-json"
JSON_FORMAT_VERSION = 1

Reader = Callable[[Path], list[Interaction]]
Writer = Callable[[Path, Sequence[Interaction]], None]
_T = TypeVar("_T")

_SUFFIXES = ".msgpack (replay), .yaml or .yml (vcrpy), .json (export)"


def convert(src: str | Path, dst: str | Path) -> int:
    """Convert the cassette `src` into `dst`, each format chosen by its file's suffix.

    Suffixes: `.msgpack` (replay's format), `.yaml` / `.yml` (vcrpy), `.json` (replay's
    JSON export; a vcrpy JSON cassette is also read). `dst` is replaced if it exists.

    Returns:
        The number of interactions converted.

    Raises:
        ConfigurationError: a suffix names no format.
        FileNotFoundError: there is no `src`.
        CassetteFormatError: `src` is not a cassette of the format its suffix names.
    """
    src, dst = Path(src), Path(dst)
    reader = _by_suffix(src, _READERS)
    writer = _by_suffix(dst, _WRITERS)
    interactions = reader(src)
    writer(dst, interactions)
    return len(interactions)


def _by_suffix(path: Path, table: dict[str, _T]) -> _T:
    try:
        return table[path.suffix.lower()]
    except KeyError:
        raise ConfigurationError(
            f"cannot tell the format of {str(path)!r} from its suffix "
            f"{path.suffix or '(none)'!r}: use {_SUFFIXES}"
        ) from None


# -- JSON export ------------------------------------------------------------------------------


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
            "chunks": [{"at": float(c.at), **_spelled(c.data, "data")} for c in response.chunks],
            "end": {
                "at": float(end.at),
                "error": end.error,
                "message": end.message,
                "truncated": end.truncated,
            },
        },
    }


def export_json(interactions: Sequence[Interaction]) -> str:
    """The interactions as a JSON document (UTF-8 text, indented, ending with a newline).

    Layout: `{"format": "replay-cassette-json", "version": 1, "interactions": [{"request":
    {"method", "url", "headers": [[name, value], ...], "body" | "body_base64"}, "response":
    {"status", "headers", "headers_at", "chunks": [{"at", "data" | "data_base64"}, ...],
    "end": {"at", "error", "message", "truncated"}}}, ...]}`; times in seconds.
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
    return Interaction(request, _json_response(_get(item, "response", dict, where), where))


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
    headers_at = _get(item, "headers_at", (int, float), where)
    chunks = []
    for i, chunk in enumerate(_get(item, "chunks", list, where)):
        at = _get(chunk, "at", (int, float), f"{where}.chunks[{i}]")
        chunks.append(Chunk(at, _unspelled(chunk, "data", f"{where}.chunks[{i}]")))
    end = _get(item, "end", dict, where)
    return Response(
        status=status,
        headers=headers,
        headers_at=headers_at,
        chunks=chunks,
        end=StreamEnd(
            at=_get(end, "at", (int, float), f"{where}.end"),
            error=_get(end, "error", (str, type(None)), f"{where}.end"),
            message=_get(end, "message", str, f"{where}.end"),
            truncated=_get(end, "truncated", bool, f"{where}.end"),
        ),
    )


def import_json(text: str, path: str | Path | None = None) -> list[Interaction]:
    """Read a JSON export back (the inverse of `export_json`).

    Raises:
        CassetteFormatError: not JSON, not an export, of a newer version, or damaged (the
            message names `path` and the place).
    """
    return _import_document(_parse_json(text, path), path)


def _parse_json(text: str, path: str | Path | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CassetteFormatError(path, f"not JSON ({exc})") from exc


def _import_document(document: Any, path: str | Path | None) -> list[Interaction]:
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


def _read_json(path: Path) -> list[Interaction]:
    text = _read_text(path)
    document = _parse_json(text, path)
    if isinstance(document, dict) and "format" not in document and "interactions" in document:
        from vcr.serializers import jsonserializer

        return _from_vcr_text(text, jsonserializer, path)  # a cassette of vcrpy's JSON serializer
    return _import_document(document, path)


def _write_json(path: Path, interactions: Sequence[Interaction]) -> None:
    _write_atomically(path, export_json(interactions).encode("utf-8"))


# -- vcrpy ------------------------------------------------------------------------------------


def _vcr_request(request: Request) -> Any:
    """The request as vcrpy's httpx stub builds it (headers through `httpx.Headers`)."""
    from vcr.request import Request as VcrRequest

    return VcrRequest(
        request.method, request.url, request.body, httpx.Headers(list(request.headers))
    )


def _vcr_response(response: Response) -> dict[str, Any]:
    """The response dict vcrpy's httpx stub records: headers grouped by lower-cased name."""
    headers: dict[str, list[str]] = {}
    for name, value in httpx.Headers(list(response.headers)).multi_items():
        headers.setdefault(name, []).append(value)
    return {
        "status": {
            "code": response.status,
            "message": httpx.codes.get_reason_phrase(response.status),
        },
        "headers": headers,
        "body": {"string": response.body},
    }


def save_vcr(path: str | Path, interactions: Sequence[Interaction]) -> None:
    """Write the interactions as a vcrpy YAML cassette (atomically), with vcrpy's serializer.

    Each body is written whole, as recorded (compressed bodies stay compressed, with their
    `Content-Encoding` header); timing and stream errors have no place in vcrpy's format.
    """
    from vcr.serialize import serialize
    from vcr.serializers import yamlserializer

    cassette_dict = {
        "requests": [_vcr_request(i.request) for i in interactions],
        "responses": [_vcr_response(i.response) for i in interactions],
    }
    text: str = serialize(cassette_dict, yamlserializer)
    _write_atomically(Path(path), text.encode("utf-8"))


def load_vcr(path: str | Path) -> list[Interaction]:
    """Read a vcrpy YAML cassette, with vcrpy's own (safe) loader.

    Each response becomes one chunk at 0 s with its end at 0 s: vcrpy records no timing.

    Raises:
        FileNotFoundError: there is no such file.
        CassetteFormatError: the file is not a vcrpy cassette.
    """
    from vcr.serializers import yamlserializer

    path = Path(path)
    return _from_vcr_text(_read_text(path), yamlserializer, path)


def _from_vcr_text(text: str, serializer: Any, path: Path) -> list[Interaction]:
    from vcr.serialize import deserialize

    try:
        requests, responses, *_metadata = deserialize(text, serializer)
    except Exception as exc:  # yaml, json and vcrpy raise assorted types on foreign input
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CassetteFormatError(path, f"not a vcrpy cassette ({detail})") from exc
    result = []
    for i, (request, response) in enumerate(zip(requests, responses, strict=True)):
        try:
            result.append(Interaction(_from_vcr_request(request), _from_vcr_response(response)))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise CassetteFormatError(path, f"interactions[{i}]: {_describe(exc)}") from exc
    return result


def _describe(exc: Exception) -> str:
    return f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)


def _from_vcr_request(request: Any) -> Request:
    return Request(
        method=str(request.method),
        url=str(request.uri),
        headers=[(str(name), _first(value)) for name, value in request.headers.items()],
        body=_as_bytes(request.body),
    )


def _from_vcr_response(response: Any) -> Response:
    if "status_code" in response:  # the layout older vcrpy httpx stubs recorded
        from vcr.filters import decode_response
        from vcr.serializers.compat import convert_body_to_bytes

        response = decode_response(
            convert_body_to_bytes(
                {
                    "headers": response["headers"],
                    "body": {"string": response["content"]},
                    "status": {"code": response["status_code"]},
                }
            )
        )
    headers = [
        (str(name), str(value))
        for name, values in response["headers"].items()
        for value in (values if isinstance(values, list) else [values])
    ]
    body = _as_bytes(response["body"]["string"])
    return Response(
        status=response["status"]["code"],
        headers=headers,
        chunks=[Chunk(0.0, body)] if body else [],
        end=StreamEnd(at=0.0),
    )


def _first(value: Any) -> str:
    return str(value[0] if isinstance(value, list) and value else value)


def _as_bytes(body: Any) -> bytes:
    """A vcrpy body as bytes: None, str, bytes, a file-like or an iterable of pieces."""
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    if hasattr(body, "read"):
        return _as_bytes(body.read())
    return b"".join(_as_bytes(piece) for piece in body)


# -- files ------------------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if not data.strip():
        raise CassetteFormatError(path, "the file is empty")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CassetteFormatError(
            path, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc


def _write_atomically(path: Path, data: bytes) -> None:
    """Write beside `path`, then rename over it: a failure never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(temporary, "xb") as file:  # a new file: the umask applies
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


_READERS: dict[str, Reader] = {
    ".msgpack": load_interactions,
    ".yaml": load_vcr,
    ".yml": load_vcr,
    ".json": _read_json,
}
_WRITERS: dict[str, Writer] = {
    ".msgpack": save_interactions,
    ".yaml": save_vcr,
    ".yml": save_vcr,
    ".json": _write_json,
}
