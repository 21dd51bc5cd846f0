"""vcrpy's cassettes, both ways: interactions to the text of a vcrpy cassette and back.

Written through vcrpy's own serializers (`vcr.serialize`), laid out exactly as
vcrpy's httpx stub records them: request headers through `httpx.Headers`, response headers
grouped by lower-cased name, and the body as it came off the transport, still compressed
when the response had a `Content-Encoding` (vcrpy's playback hands it to httpx, which
decompresses it). Read back from the document `replay.convert.safe_yaml`'s safe loader (or
JSON) made, as vcrpy reads it, and a cassette of pydantic-ai's serializer (`parsed_body`) as
pydantic-ai reads it (`replay.convert.pydantic_ai`). Files are `replay.convert.files`'s
business; vcrpy itself is imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from replay.convert.pydantic_ai import ParsedBodyError, unparse_bodies
from replay.errors import CassetteFormatError, ConfigurationError
from replay.model import Chunk, Interaction, Request, Response, StreamEnd

__all__ = [
    "from_vcr_document",
    "from_vcr_request",
    "from_vcr_response",
    "to_vcr_text",
    "vcr_request",
    "vcr_response",
]


def vcr_request(request: Request) -> Any:
    """The request as vcrpy's httpx stub builds it (headers through `httpx.Headers`)."""
    from vcr.request import Request as VcrRequest

    return VcrRequest(
        request.method, request.url, request.body, httpx.Headers(list(request.headers))
    )


def vcr_response(response: Response) -> dict[str, Any]:
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


def to_vcr_text(interactions: Sequence[Interaction], serializer: Any) -> str:
    """The interactions as the text of a vcrpy cassette, written with vcrpy's `serializer`.

    Bodies are whole, as recorded (see `replay.convert.files.save_vcr`).

    Raises:
        ConfigurationError: an interaction is a WebSocket conversation (vcrpy has no frames:
            they would be dropped).
    """
    from vcr.serialize import serialize

    talks = [i for i, interaction in enumerate(interactions) if interaction.frames is not None]
    if talks:
        raise ConfigurationError(
            f"interaction #{talks[0]} is a WebSocket conversation: a vcrpy cassette has no "
            "frames to hold it (keep it as .msgpack, or export it as .json)"
        )

    cassette_dict = {
        "requests": [vcr_request(i.request) for i in interactions],
        "responses": [vcr_response(i.response) for i in interactions],
    }
    text: str = serialize(cassette_dict, serializer)
    return text


def from_vcr_document(document: Any, path: Path) -> tuple[list[Interaction], str | None]:
    """The interactions of a vcrpy cassette, parsed already (`replay.convert.safe_yaml`, or JSON).

    Each response becomes one chunk at 0 s (see `replay.convert.files.load_vcr`). A cassette of
    pydantic-ai's serializer (`parsed_body`) is read as pydantic-ai's deserializer reads it.
    The text is never handed to vcrpy's own reader: before vcrpy 8.3 it builds any Python
    object a YAML tag names.

    Returns:
        The interactions, and the serializer that wrote them when it was not vcrpy's own
        (`"pydantic-ai serializer"`), else None.

    Raises:
        CassetteFormatError: the document is not a vcrpy cassette (the message names `path`).
    """
    items = _interaction_items(document, path)
    try:
        foreign = unparse_bodies(items)
    except ParsedBodyError as exc:
        raise CassetteFormatError(path, str(exc)) from exc
    result = []
    for i, item in enumerate(items):
        try:
            request, response = _request_and_response(item)
            result.append(Interaction(from_vcr_request(request), from_vcr_response(response)))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise CassetteFormatError(path, f"interactions[{i}]: {_describe(exc)}") from exc
    return result, "pydantic-ai serializer" if foreign else None


def _interaction_items(document: Any, path: Path) -> list[Any]:
    """The document's `interactions` list, or a refusal that says what the document is."""
    first = document[0] if isinstance(document, list) and document else None
    if isinstance(first, dict) and "request" in first:
        raise CassetteFormatError(
            path,
            "a cassette of vcrpy before 1.0 (a bare list): "
            "migrate it first with `python -m vcr.migration`",
        )
    if isinstance(document, dict) and "http_interactions" in document:
        raise CassetteFormatError(
            path, "a Ruby VCR or Betamax cassette ('http_interactions'), not a vcrpy one"
        )
    if not isinstance(document, dict) or not isinstance(document.get("interactions"), list):
        found = type(document).__name__ if not isinstance(document, dict) else "no list of them"
        raise CassetteFormatError(
            path, f"not a vcrpy cassette (expected a mapping of 'interactions', found {found})"
        )
    items: list[Any] = document["interactions"]
    return items


_REQUEST_FIELDS = ("method", "uri", "body", "headers")


def _request_and_response(item: Any) -> tuple[Any, dict[str, Any]]:
    """vcrpy's request object and response dict of one interaction, as vcrpy loads them."""
    from vcr.request import Request as VcrRequest
    from vcr.serializers.compat import convert_to_bytes

    if not isinstance(item, dict):
        raise TypeError(f"expected a mapping, found {type(item).__name__}")
    request, response = item["request"], item["response"]
    for kind, value in (("request", request), ("response", response)):
        if not isinstance(value, dict):
            raise TypeError(f"{kind}: expected a mapping, found {type(value).__name__}")
    unknown = [name for name in request if name not in _REQUEST_FIELDS]
    if unknown:
        raise ValueError(f"request: unknown field {unknown[0]!r}")
    missing = [name for name in _REQUEST_FIELDS if name not in request]
    if missing:
        raise ValueError(f"request: missing field {missing[0]!r}")
    return VcrRequest._from_dict(request), convert_to_bytes(response)


def _describe(exc: Exception) -> str:
    return f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)


def from_vcr_request(request: Any) -> Request:
    """A vcrpy request as replay's `Request` (each header's first value)."""
    return Request(
        method=str(request.method),
        url=str(request.uri),
        headers=[(str(name), _first(value)) for name, value in request.headers.items()],
        body=_as_bytes(request.body),
    )


def from_vcr_response(response: Any) -> Response:
    """A vcrpy response dict as replay's `Response`: its body one chunk at 0 s."""
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
