"""The Cohere v2 chat stream (`ClientV2.chat_stream`, `POST /v2/chat` with `stream: true`):
validator and builder.

Every event has an `event:` line naming its `type` and one `data:` line: `message-start`
(the message id and role), then blocks one at a time, each opened, filled and closed at
its `index`: text or thinking content (`content-start`, `content-delta`, `content-end`),
tool calls (`tool-call-start` with the call's id and name, `tool-call-delta` with pieces of
its arguments, `tool-call-end`), citations (`citation-start`, `citation-end`); a
`tool-plan-delta` before the calls; `message-end` with the `finish_reason` (`COMPLETE`,
`MAX_TOKENS`, `TOOL_CALL`, `ERROR`…, an `error` message with `ERROR`) and the usage; then
`data: [DONE]`. `debug` events may come anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import attrs

from replay.dialects.common import (
    EventLike,
    Report,
    Step,
    ToolCall,
    Violation,
    build,
    check_failure,
    compact,
    json_object,
    json_request,
    json_schema,
    sse,
    stable_id,
    tokenize,
    truncate,
)
from replay.model import Interaction
from replay.redact import deep_json

__all__ = ["FAILURES", "MODEL", "URL", "check", "stream"]

URL = "https://api.cohere.com/v2/chat"
MODEL = "command-a-03-2025"
FAILURES: tuple[str | None, ...] = (None, "max_tokens", "cut", "error")
"""`stream(failure=...)`: None; `max_tokens` (that `finish_reason`); `cut` (the connection
drops mid-event: `validate` reports `stream.truncated`); `error` (`message-end` with the
`ERROR` finish reason and its message)."""

_DONE = "[DONE]"
#: Each kind of block: the types that open, fill and close it.
_BLOCKS = {
    "content-start": ("content", "content-delta", "content-end"),
    "tool-call-start": ("tool call", "tool-call-delta", "tool-call-end"),
    "citation-start": ("citation", None, "citation-end"),
}
_FILLS = {fill: kind for kind, fill, _ in _BLOCKS.values() if fill}
_CLOSES = {close: kind for kind, _, close in _BLOCKS.values()}


# --- validation -------------------------------------------------------------------------


@attrs.define
class _Block:
    kind: str
    index: object
    arguments: list[str] = attrs.Factory(list)


class _Walker:
    def __init__(self, report: Report) -> None:
        self.report = report
        self.open: _Block | None = None
        self.end_at: int | None = None  # where message-end came
        self.done_at: int | None = None

    def walk(self, events: Sequence[EventLike], truncated: bool) -> None:
        add = self.report.add
        for index, event in enumerate(events):
            if self.done_at is not None:
                add("message-end-last", "an event follows [DONE]", index)
            if event.data == _DONE:
                self.done_at = index
                continue
            if self.end_at is not None:
                add("message-end-last", "an event follows message-end", index)
            payload = json_object(event.data)
            if payload is None:
                add("json", f"the data is not a JSON object: {event.data[:60]!r}", index)
                continue
            kind = payload.get("type")
            named = event.event not in ("", "message")
            if named and event.event != kind:
                add("event-type", f"event name {event.event!r} differs from type {kind!r}", index)
            if (index == 0) != (kind == "message-start"):
                add("message-start-first", f"{kind!r} at event {index}", index)
            self.event(index, str(kind), payload)
        if truncated:
            return
        if self.end_at is None:
            self.report.add("message-end-last", "the stream has no message-end")

    def event(self, index: int, kind: str, payload: Mapping[str, object]) -> None:
        number = payload.get("index")
        if kind in _BLOCKS:
            if self.open is not None:
                message = f"{kind} {number!r} while {self.open.kind} {self.open.index!r} is open"
                self.report.add("block-order", message, index)
            self.open = _Block(_BLOCKS[kind][0], number)
            if kind == "tool-call-start":
                self.tool_start(index, payload)
        elif kind in _FILLS or kind in _CLOSES:
            block = self.open
            expected = _FILLS.get(kind) or _CLOSES[kind]
            if block is None or block.kind != expected or block.index != number:
                self.report.add("block-order", f"{kind} for {expected} {number!r}, not open", index)
                return
            if kind == "tool-call-delta":
                block.arguments.append(str(_call(payload).get("arguments") or ""))
            elif kind in _CLOSES:
                self.open = None
                self.close(index, block)
        elif kind == "message-end":
            self.message_end(index, payload)

    def tool_start(self, index: int, payload: Mapping[str, object]) -> None:
        call = _tool_call(payload)
        function = call.get("function")
        if not (call.get("id") and isinstance(function, Mapping) and function.get("name")):
            self.report.add("tool-call-start", f"tool call {call!r} has no id and name", index)
        elif self.open is not None:
            self.open.arguments.append(str(function.get("arguments") or ""))

    def close(self, index: int, block: _Block) -> None:
        joined = "".join(block.arguments)
        if block.kind == "tool call":
            try:
                deep_json.loads(joined)
            except ValueError:
                message = f"tool call {block.index!r} arguments {joined!r} are not JSON"
                self.report.add("tool-arguments-json", message, index)

    def message_end(self, index: int, payload: Mapping[str, object]) -> None:
        if self.open is not None:
            message = f"{self.open.kind} {self.open.index!r} was never closed"
            self.report.add("block-order", message, index)
            self.open = None
        self.end_at = index
        delta = payload.get("delta")
        if not isinstance(delta, Mapping) or not delta.get("finish_reason"):
            self.report.add("finish-reason", "message-end carries no finish_reason", index)


def _tool_call(payload: Mapping[str, object]) -> Mapping[str, object]:
    delta = payload.get("delta")
    message = delta.get("message") if isinstance(delta, Mapping) else None
    call = message.get("tool_calls") if isinstance(message, Mapping) else None
    return call if isinstance(call, Mapping) else {}


def _call(payload: Mapping[str, object]) -> Mapping[str, object]:
    function = _tool_call(payload).get("function")
    return function if isinstance(function, Mapping) else {}


def check(events: Sequence[EventLike], *, truncated: bool = False) -> list[Violation]:
    """The Cohere v2 rules `events` break (end-of-stream rules skipped if truncated)."""
    report = Report("cohere")
    _Walker(report).walk(events, truncated)
    return report.violations


# --- synthetic streams ------------------------------------------------------------------


def stream(
    text: str,
    *,
    thinking: str | None = None,
    tool_call: ToolCall | None = None,
    ttft: float = 0.3,
    tokens_per_second: float = 40.0,
    failure: Literal["max_tokens", "cut", "error"] | None = None,
    model: str = MODEL,
    prompt: str = "Say hello.",
) -> Interaction:
    """A Cohere v2 chat stream: `thinking`, `text`, then a `tool_call` (with its plan).

    The request's JSON body is what `client.chat_stream(**body)` sends. See `FAILURES` for
    `failure`; `max_tokens` and `error` keep the first half of the text and drop the call.

    Raises:
        ConfigurationError: an unknown failure, or timing that makes no sense.
    """
    check_failure(failure, FAILURES)
    pieces = tokenize(text)
    finish = "TOOL_CALL" if tool_call else "COMPLETE"
    if failure in ("max_tokens", "error"):
        pieces, tool_call = pieces[: (len(pieces) + 1) // 2], None
        finish = failure.upper() if failure == "error" else "MAX_TOKENS"
    key = (text, thinking, tool_call and tool_call.arguments_json, model, prompt)
    message = {
        "role": "assistant",
        "content": [],
        "tool_plan": "",
        "tool_calls": [],
        "citations": [],
    }
    steps = [Step("message-start", {"id": stable_id("", *key)[:32], "delta": {"message": message}})]
    blocks = [("thinking", thinking)] if thinking is not None else []
    blocks += [("text", "".join(pieces))] if pieces or tool_call is None else []
    for index, (kind, content) in enumerate(blocks):
        steps += _content(index, kind, tokenize(content or ""))
    if tool_call is not None:
        steps += _tool(len(blocks), tool_call)
    output = sum(step.is_delta for step in steps)
    tokens = {"input_tokens": len(tokenize(prompt)), "output_tokens": output}
    delta: dict[str, object] = {"finish_reason": finish}
    if failure == "error":
        delta["error"] = "internal server error, this has been reported to our developers"
    delta["usage"] = {"billed_units": tokens, "tokens": tokens}
    steps += [Step("message-end", {"delta": delta}), Step(_DONE, {})]
    cut = False
    if failure == "cut":
        steps, cut = truncate(steps, None)
    body: dict[str, object] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
    }
    if tool_call is not None:
        function = {"name": tool_call.name, "parameters": json_schema(tool_call.arguments)}
        body["tools"] = [{"type": "function", "function": function}]
    request = json_request(URL, body, {"authorization": "Bearer co-synthetic"})
    return build(request, steps, _encode, ttft=ttft, tokens_per_second=tokens_per_second, cut=cut)


def _content(index: int, kind: str, pieces: list[str]) -> list[Step]:
    """A text or thinking block: its start, a delta per piece, its end."""
    start = {"index": index, "delta": {"message": {"content": {"type": kind, kind: ""}}}}
    steps = [Step("content-start", start)]
    steps += [
        Step("content-delta", {"index": index, "delta": {"message": {"content": {kind: p}}}}, True)
        for p in pieces
    ]
    return [*steps, Step("content-end", {"index": index})]


def _tool(index: int, call: ToolCall) -> list[Step]:
    """The plan, then the call: its start (id, name), its arguments piece by piece, its end."""
    plan = tokenize(f"I will call {call.name}.")
    steps = [Step("tool-plan-delta", {"delta": {"message": {"tool_plan": p}}}, True) for p in plan]
    function = {"name": call.name, "arguments": ""}
    first = {"id": call.call_id(call.name + "_"), "type": "function", "function": function}
    steps.append(
        Step("tool-call-start", {"index": index, "delta": {"message": {"tool_calls": first}}})
    )
    steps += [
        Step(
            "tool-call-delta",
            {"index": index, "delta": {"message": {"tool_calls": {"function": {"arguments": p}}}}},
            True,
        )
        for p in tokenize(call.arguments_json)
    ]
    return [*steps, Step("tool-call-end", {"index": index})]


def _encode(_number: int, step: Step) -> bytes:
    if step.name == _DONE:
        return sse(None, _DONE)
    return sse(step.name, compact({"type": step.name, **step.payload}))
