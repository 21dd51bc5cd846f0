"""The Anthropic Messages stream (`messages.create(stream=True)`): validator and builder.

`message_start`, then content blocks one at a time (`content_block_start`, its deltas,
`content_block_stop`, indexes 0, 1, 2…), then `message_delta` with the stop reason and
`message_stop`. `ping` may come anywhere; an `error` event ends the stream at once.
"""

from __future__ import annotations

import base64
import hashlib
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
    json_request,
    json_schema,
    payloads,
    sse,
    stable_id,
    tokenize,
    truncate,
)
from replay.model import Interaction, Request
from replay.redact import deep_json

__all__ = ["FAILURES", "MODEL", "URL", "check", "stream"]

URL = "https://api.anthropic.com/v1/messages"
MODEL = "claude-sonnet-4-20250514"
FAILURES: tuple[str | None, ...] = (None, "max_tokens", "refusal", "cut", "error")
"""`stream(failure=...)`: None; `max_tokens` / `refusal` (that `stop_reason`); `cut` (the
connection drops mid-event: `validate` reports `stream.truncated`); `error` (an in-band
`error` event, `overloaded_error`)."""

# block type -> the delta types it accepts
_DELTAS = {
    "text": {"text_delta", "citations_delta"},
    "thinking": {"thinking_delta", "signature_delta"},
    "tool_use": {"input_json_delta"},
    "server_tool_use": {"input_json_delta"},
    "redacted_thinking": set(),
}


# --- validation -------------------------------------------------------------------------


@attrs.define
class _Block:
    index: object
    kind: object
    signature: str = ""
    json: list[str] = attrs.Factory(list)


class _Walker:
    def __init__(self, report: Report) -> None:
        self.report = report
        self.block: _Block | None = None  # the open block
        self.next_index = 0
        self.message_delta = False
        self.end: tuple[str, int] | None = None  # ("message_stop" | "error", its index)

    def walk(self, events: Sequence[EventLike], truncated: bool) -> None:
        add = self.report.add
        for index, (event, payload) in enumerate(
            zip(events, payloads(events, self.report), strict=True)
        ):
            if self.end is not None and self.end[1] == index - 1:
                rule = "message-stop-last" if self.end[0] == "message_stop" else "error-last"
                add(rule, f"an event follows {self.end[0]}", index)
            if payload is None:
                continue
            kind = payload.get("type")
            if event.event != kind:
                add("event-type", f"event name {event.event!r} differs from type {kind!r}", index)
            if (index == 0) != (kind == "message_start"):
                add("message-start-first", f"{kind!r} at event {index}", index)
            if kind == "content_block_start":
                self.start(index, payload)
            elif kind == "content_block_delta":
                self.delta(index, payload)
            elif kind == "content_block_stop":
                self.stop(index, payload)
            elif kind == "message_delta":
                self.message(index, payload)
            elif kind in ("message_stop", "error"):
                if kind == "message_stop":
                    self.message_stop(index)
                self.end = (str(kind), index)
        if self.end is None and not truncated:
            add("message-stop-last", "the stream has no message_stop")

    def start(self, index: int, payload: Mapping[str, object]) -> None:
        number, block = payload.get("index"), payload.get("content_block")
        fields = block if isinstance(block, Mapping) else {}
        if self.block is not None:
            self.report.add(
                "block-order", f"block {number!r} starts while {self.block.index!r} is open", index
            )
        elif number != self.next_index:
            self.report.add(
                "block-order", f"block {number!r} starts, expected {self.next_index}", index
            )
        self.next_index = (number if isinstance(number, int) else self.next_index) + 1
        self.block = _Block(number, fields.get("type"), str(fields.get("signature") or ""))

    def delta(self, index: int, payload: Mapping[str, object]) -> None:
        block, number = self.block, payload.get("index")
        if block is None or block.index != number:
            self.report.add(
                "block-order", f"a delta for block {number!r}, which is not open", index
            )
            return
        delta = payload.get("delta")
        fields = delta if isinstance(delta, Mapping) else {}
        kind = fields.get("type")
        if kind not in _DELTAS.get(str(block.kind), {kind}):
            self.report.add("delta-type", f"{kind!r} in a {block.kind!r} block", index)
        if kind == "signature_delta":
            block.signature += str(fields.get("signature") or "")
        elif kind == "input_json_delta":
            block.json.append(str(fields.get("partial_json") or ""))

    def stop(self, index: int, payload: Mapping[str, object]) -> None:
        block, number = self.block, payload.get("index")
        if block is None or block.index != number:
            self.report.add("block-order", f"block {number!r} stops but is not open", index)
            return
        self.block = None
        if block.kind == "thinking" and not block.signature:
            self.report.add("signature", f"thinking block {number!r} has no signature", index)
        joined = "".join(block.json)
        try:
            if joined:
                deep_json.loads(joined)
        except ValueError:
            self.report.add("partial-json", f"block {number!r} input {joined!r} is not JSON", index)

    def message(self, index: int, payload: Mapping[str, object]) -> None:
        self.close_open(index)
        delta = payload.get("delta")
        if self.message_delta:
            self.report.add("message-delta", "a second message_delta", index)
        elif not isinstance(delta, Mapping) or delta.get("stop_reason") is None:
            self.report.add("message-delta", "message_delta without a stop_reason", index)
        self.message_delta = True

    def message_stop(self, index: int) -> None:
        self.close_open(index)
        if not self.message_delta:
            self.report.add("message-delta", "the message stops without message_delta", index)

    def close_open(self, index: int) -> None:
        if self.block is not None:
            self.report.add("block-order", f"block {self.block.index!r} was never stopped", index)
            self.block = None


def check(events: Sequence[EventLike], *, truncated: bool = False) -> list[Violation]:
    """The Anthropic Messages rules `events` break (end-of-stream rules skipped if truncated)."""
    report = Report("anthropic")
    _Walker(report).walk(events, truncated)
    return report.violations


# --- synthetic streams ------------------------------------------------------------------


def stream(
    text: str,
    *,
    thinking: str | None = None,
    tool_use: ToolCall | None = None,
    ttft: float = 0.3,
    tokens_per_second: float = 40.0,
    failure: Literal["max_tokens", "refusal", "cut", "error"] | None = None,
    model: str = MODEL,
    prompt: str = "Say hello.",
    max_tokens: int = 2048,
) -> Interaction:
    """An Anthropic Messages stream: a `thinking` block (signed), `text`, a `tool_use` block.

    The text block is skipped when `text` is empty and there is a tool use. The request's
    JSON body is what `client.messages.create(**body)` sends (thinking enabled with a
    budget of half `max_tokens`). See `FAILURES` for `failure`; `max_tokens` and `refusal`
    keep the first half of the text and drop the tool use.
    """
    check_failure(failure, FAILURES)
    pieces = tokenize(text)
    stop_reason = "tool_use" if tool_use else "end_turn"
    if failure in ("max_tokens", "refusal"):
        pieces, tool_use, stop_reason = pieces[: (len(pieces) + 1) // 2], None, failure
    key = (text, thinking, tool_use and tool_use.arguments_json, model, prompt)
    message = _message(stable_id("msg_", *key), model, len(tokenize(prompt)))
    steps = _steps(message, _blocks(pieces, thinking, tool_use), stop_reason)
    cut = False
    if failure in ("cut", "error"):
        error = {"type": "overloaded_error", "message": "Overloaded"}
        steps, cut = truncate(
            steps, Step("error", {"error": error}) if failure == "error" else None
        )
    request = _request(prompt, model, max_tokens, thinking, tool_use)
    return build(request, steps, _encode, ttft=ttft, tokens_per_second=tokens_per_second, cut=cut)


#: A content block as it starts, and the deltas that fill it.
_Content = tuple[dict[str, object], list[dict[str, str]]]


def _blocks(pieces: list[str], thinking: str | None, tool_use: ToolCall | None) -> list[_Content]:
    """The content blocks of a message: thinking (signed), the text `pieces`, a tool use."""
    blocks: list[_Content] = []
    if thinking is not None:
        signature = base64.b64encode(hashlib.sha256(thinking.encode()).digest() * 3).decode()
        deltas = [{"type": "thinking_delta", "thinking": p} for p in tokenize(thinking)]
        deltas.append({"type": "signature_delta", "signature": signature})
        blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
    if pieces or tool_use is None:
        deltas = [{"type": "text_delta", "text": piece} for piece in pieces]
        blocks.append(({"type": "text", "text": ""}, deltas))
    if tool_use is not None:
        start = {"type": "tool_use", "id": tool_use.call_id("toolu_"), "name": tool_use.name}
        deltas = [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in ["", *tokenize(tool_use.arguments_json)]
        ]
        blocks.append(({**start, "input": {}}, deltas))  # the API sends "" first
    return blocks


def _steps(message: dict[str, object], blocks: list[_Content], stop_reason: str) -> list[Step]:
    """The events of a whole stream: the message's start, its blocks, its delta and stop."""
    steps = [Step("message_start", {"message": message})]
    for index, (block, deltas) in enumerate(blocks):
        steps.append(Step("content_block_start", {"index": index, "content_block": block}))
        if index == 0:
            steps.append(Step("ping", {}))  # the API pings once, after the first block starts
        steps += [
            Step(
                "content_block_delta",
                {"index": index, "delta": delta},
                delta["type"] != "signature_delta",
            )
            for delta in deltas
        ]
        steps.append(Step("content_block_stop", {"index": index}))
    output_tokens = sum(step.is_delta for step in steps)
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    steps.append(Step("message_delta", {"delta": delta, "usage": {"output_tokens": output_tokens}}))
    steps.append(Step("message_stop", {}))
    return steps


def _request(
    prompt: str, model: str, max_tokens: int, thinking: str | None, tool_use: ToolCall | None
) -> Request:
    """What `client.messages.create(**body)` sends (thinking with half `max_tokens`)."""
    body: dict[str, object] = {
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": prompt}],
        "model": model,
        "stream": True,
    }
    if thinking is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": max_tokens // 2}
    if tool_use is not None:
        body["tools"] = [{"name": tool_use.name, "input_schema": json_schema(tool_use.arguments)}]
    headers = {"x-api-key": "sk-ant-synthetic", "anthropic-version": "2023-06-01"}
    return json_request(URL, body, headers)


def _encode(_number: int, step: Step) -> bytes:
    return sse(step.name, compact({"type": step.name, **step.payload}))


def _message(message_id: str, model: str, input_tokens: int) -> dict[str, object]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1,
            "service_tier": "standard",
        },
    }
