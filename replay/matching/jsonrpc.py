"""JSON-RPC 2.0 requests (MCP's Streamable HTTP): matched by what they ask, answered under
the id they carry.

A JSON-RPC request's `id` is the client's own counter, and MCP's progress token
(`params._meta.progressToken`) is usually that same id: neither says what is asked. The
`body` matcher therefore compares a JSON-RPC 2.0 request (an object with `"jsonrpc": "2.0"`,
a `method` and an `id`) by its `method` and `params` only, the progress token left out
(`normalised`); a batch, element by element. Notifications (no `id`) and the client's
responses to a server's requests (no `method`) are compared whole.

A request that matched a recording made under other ids is answered under its own:
`answer` rewrites the recorded response's JSON-RPC messages (the response's `id`, the
progress notifications' `progressToken`) from the recorded request's values to the new
request's, in a JSON body or in each SSE `data:` line, so the client finds its answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from replay.redact import deep_json

if TYPE_CHECKING:
    from replay.model import Response

__all__ = ["Renames", "answer", "is_request", "normalised", "same_call"]

_VERSION = "2.0"


def is_request(value: object) -> bool:
    """Whether `value` (parsed JSON) is a JSON-RPC 2.0 request: a method and an id."""
    return (
        type(value) is dict
        and value.get("jsonrpc") == _VERSION
        and "method" in value
        and "id" in value
    )


def _without_token(params: object) -> object:
    if type(params) is not dict:
        return params
    meta = params.get("_meta")
    if type(meta) is not dict or "progressToken" not in meta:
        return params
    meta = {k: v for k, v in meta.items() if k != "progressToken"}
    params = {k: v for k, v in params.items() if k != "_meta"}
    if meta:
        params["_meta"] = meta
    return params


def _one(value: object) -> object:
    if not is_request(value):
        return value
    assert type(value) is dict
    normal = {k: v for k, v in value.items() if k not in ("id", "params")}
    if "params" in value:
        normal["params"] = _without_token(value["params"])
    return normal


def normalised(value: object) -> object:
    """`value` (parsed JSON) as the `body` matcher compares it: a JSON-RPC 2.0 request
    without its `id` and progress token, a batch element by element, anything else as it is."""
    if type(value) is list:
        return [_one(item) for item in value]
    return _one(value)


def _ids(value: object) -> list[tuple[object, object]]:
    """Each request's (id, progress token) in `value` (parsed JSON), in order."""
    items = value if type(value) is list else [value]
    found = []
    for item in items:
        if is_request(item):
            assert type(item) is dict
            params = item.get("params")
            meta = params.get("_meta") if type(params) is dict else None
            token = meta.get("progressToken") if type(meta) is dict else None
            found.append((item["id"], token))
    return found


def _parse(body: bytes) -> object:
    try:
        return deep_json.loads(body)
    except ValueError:
        return None


@attrs.frozen
class Renames:
    """The recorded request's ids and progress tokens (`_key`s), each to the new one's."""

    ids: dict[tuple[str, object], object]
    tokens: dict[tuple[str, object], object]


def same_call(new: bytes, recorded: bytes) -> Renames | None:
    """How the ids and progress tokens of `new` (a request body) differ from those of
    `recorded`, which it matched; None when none does, or either is not JSON-RPC."""
    if new == recorded or new.lstrip()[:1] not in (b"{", b"[") or b'"jsonrpc"' not in new:
        return None
    pairs = list(zip(_ids(_parse(recorded)), _ids(_parse(new)), strict=False))
    ids = {_key(old): now for (old, _), (now, _) in pairs if _key(old) != _key(now)}
    tokens = {
        _key(old): now
        for (_, old), (_, now) in pairs
        if old is not None and now is not None and _key(old) != _key(now)
    }
    if not ids and not tokens:
        return None
    return Renames(ids, tokens)


def _key(value: object) -> tuple[str, object]:
    """A JSON id as a dict key: 1 and "1" and True stay apart."""
    return (type(value).__name__, value)


def _rewrite_message(
    message: object,
    ids: Mapping[tuple[str, object], object],
    tokens: Mapping[tuple[str, object], object],
) -> bool:
    if type(message) is not dict or message.get("jsonrpc") != _VERSION:
        return False
    changed = False
    if "method" not in message and "id" in message:  # a response: result or error
        key = _key(message["id"])
        if key in ids:
            message["id"] = ids[key]
            changed = True
    params = message.get("params")
    if type(params) is dict and "progressToken" in params:
        key = _key(params["progressToken"])
        if key in tokens:
            params["progressToken"] = tokens[key]
            changed = True
    return changed


def _rewrite_json(
    text: str, ids: Mapping[tuple[str, object], object], tokens: Mapping[tuple[str, object], object]
) -> str | None:
    """`text` (one JSON value) with its messages' ids rewritten; None when none is."""
    try:
        value = deep_json.loads(text)
    except ValueError:
        return None
    messages = value if type(value) is list else [value]
    changed = [_rewrite_message(message, ids, tokens) for message in messages]
    if not any(changed):
        return None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _rewrite_sse(
    data: bytes,
    ids: Mapping[tuple[str, object], object],
    tokens: Mapping[tuple[str, object], object],
) -> bytes:
    """Each whole `data:` line of an SSE chunk with its message's ids rewritten."""
    lines = data.split(b"\n")
    for number, line in enumerate(lines[:-1]):  # the last one may be cut by the chunk's end
        if not line.startswith(b"data:"):
            continue
        ending = b"\r" if line.endswith(b"\r") else b""
        text = line[5 : len(line) - len(ending)].decode("utf-8", "surrogatepass")
        lead = " " if text.startswith(" ") else ""
        rewritten = _rewrite_json(text[len(lead) :], ids, tokens)
        if rewritten is not None:
            lines[number] = f"data:{lead}{rewritten}".encode() + ending
    return b"\n".join(lines)


def answer(response: Response, renames: Renames) -> Response:
    """`response` with its JSON-RPC messages' ids and progress tokens renamed as `renames`
    (from `same_call`) says. A compressed body is left as it is."""
    ids, tokens = renames.ids, renames.tokens
    if response.header("content-encoding") not in (None, "identity") or not response.chunks:
        return response
    kind = (response.header("content-type") or "").split(";")[0].strip().lower()
    from replay.model import Chunk

    if kind == "text/event-stream":
        chunks = [Chunk(c.at, _rewrite_sse(c.data, ids, tokens)) for c in response.chunks]
        return attrs.evolve(response, chunks=chunks)
    body = response.body.decode("utf-8", "surrogatepass")
    rewritten = _rewrite_json(body, ids, tokens)
    if rewritten is None:
        return response
    data = rewritten.encode("utf-8", "surrogatepass")
    headers = [
        (name, str(len(data)) if name.lower() == "content-length" else value)
        for name, value in response.headers
    ]
    last = response.chunks[-1].at  # the body is whole only then
    return attrs.evolve(response, headers=headers, chunks=[Chunk(last, data)])
