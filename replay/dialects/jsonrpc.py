"""JSON-RPC 2.0 over SSE: MCP's Streamable HTTP answers (a POST's stream of progress
notifications then its result; the GET stream of the server's own messages).

    replay.dialects.validate(interaction)   # the request's ids are read from its body

Rules (`jsonrpc.*`): every event's data is a JSON-RPC 2.0 message (an object, or a batch
of them, with `"jsonrpc": "2.0"`); a response has an `id` and exactly one of `result` and
`error`; a response answers a request of the request's body, once; a progress
notification carries a `progressToken` (a string or an integer), one the request gave when
the request is known; a stream that ends cleanly has answered every request it was
opened for. Given events alone, the rules that need the request are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

from replay.dialects.common import EventLike, Report, Violation
from replay.model import Request
from replay.redact import deep_json

__all__ = ["asks", "check", "is_message"]

_VERSION = "2.0"


def is_message(value: object) -> bool:
    """Whether `value` (parsed JSON) claims to be a JSON-RPC 2.0 message."""
    return isinstance(value, dict) and value.get("jsonrpc") == _VERSION


def _parsed(text: str) -> object:
    try:
        return deep_json.loads(text)
    except ValueError:
        return None


def _key(value: object) -> tuple[str, object]:
    return (type(value).__name__, repr(value))


def _asked(request: Request | None) -> tuple[dict[tuple[str, object], object], set[object]]:
    """The request body's requests by id, and the progress tokens they gave."""
    if request is None or not request.body:
        return {}, set()
    body = _parsed(request.body.decode("utf-8", "replace"))
    items = body if isinstance(body, list) else [body]
    ids: dict[tuple[str, object], object] = {}
    tokens: set[object] = set()
    for item in items:
        if is_message(item) and "method" in item and "id" in item:  # type: ignore[operator]
            assert isinstance(item, dict)
            ids[_key(item["id"])] = item["id"]
            params = item.get("params")
            meta = params.get("_meta") if isinstance(params, dict) else None
            if isinstance(meta, dict) and "progressToken" in meta:
                tokens.add(_key(meta["progressToken"]))
    return ids, tokens


def check(
    events: Sequence[EventLike], *, truncated: bool = False, request: Request | None = None
) -> list[Violation]:
    """The `jsonrpc.*` rules `events` break, given the request they answer when known."""
    report = Report("jsonrpc")
    asked, tokens = _asked(request)
    answered: set[tuple[str, object]] = set()
    for index, event in enumerate(events):
        if not event.data.strip():
            continue  # an SSE priming event (an id, a retry) carries no message
        value = _parsed(event.data)
        messages = value if isinstance(value, list) and value else [value]
        for message in messages:
            if not is_message(message):
                report.add("json", f"not a JSON-RPC 2.0 message: {event.data[:60]!r}", index)
                continue
            assert isinstance(message, dict)
            _message(message, index, report, asked, tokens, answered)
    if not truncated and request is not None:
        missing = [shown for key, shown in asked.items() if key not in answered]
        if missing:
            report.add("unanswered", f"no response to request id {missing[0]!r}", None)
    return report.violations


def _message(
    message: dict[str, object],
    index: int,
    report: Report,
    asked: dict[tuple[str, object], object],
    tokens: set[object],
    answered: set[tuple[str, object]],
) -> None:
    if "method" in message:
        if not isinstance(message["method"], str):
            report.add("message", "the method is not a string", index)
        if message["method"] == "notifications/progress":
            _progress(message.get("params"), index, report, tokens)
        return
    if "id" not in message:
        report.add(
            "message", "neither a method nor an id: not a request, notification or response", index
        )
        return
    if ("result" in message) == ("error" in message):
        report.add("result-or-error", "a response has exactly one of result and error", index)
    key = _key(message["id"])
    if asked and key not in asked:
        report.add("id-answers", f"response id {message['id']!r} answers no request sent", index)
    elif key in answered:
        report.add("id-answers", f"request id {message['id']!r} answered twice", index)
    answered.add(key)


def _progress(params: object, index: int, report: Report, tokens: set[object]) -> None:
    token = params.get("progressToken") if isinstance(params, dict) else None
    if isinstance(token, bool) or not isinstance(token, (str, int)):
        report.add("progress-token", "a progress notification without a progressToken", index)
    elif tokens and _key(token) not in tokens:
        report.add("progress-token", f"progressToken {token!r} was given by no request", index)


def asks(stream: object) -> bool:
    """Whether `stream` is an Interaction whose request speaks JSON-RPC: an MCP session's
    (its `Mcp-Session-Id` header: the GET stream of the server's messages, which may carry
    none) or a JSON-RPC 2.0 body."""
    from replay.model import Interaction

    if not isinstance(stream, Interaction):
        return False
    request = stream.request
    if any(name.lower() == "mcp-session-id" for name, _ in request.headers):
        return True
    return b'"jsonrpc"' in request.body[:200] and bool(_asked(request)[0])
