"""Which dialect a stream speaks, told by the shape of its events, never by one marker.

Each dialect has a shape its events fit (`SHAPES`): a Responses event's `type` starts with
`response.`; an Anthropic or a Cohere v2 event's `type` is one of their event names; a Chat
Completions chunk is a `chat.completion.chunk` object, or carries `choices` of deltas; a
Gemini chunk carries `candidates`, or the `usageMetadata` of a `modelVersion`; a JSON-RPC
message (MCP) says `"jsonrpc": "2.0"`; a Converse event (Bedrock) carries a
`contentBlockIndex`, a `stopReason`, `inputTokens` usage or a lone `role`. Events that
fit no dialect, or that several share (`data: [DONE]`, which Chat Completions and Cohere
both send; an `{"error": ...}` chunk; Anthropic's `ping`), say nothing. The dialect that
the most of the stream's first telling events fit is the answer; a stream none fit, or two
fit as well, is of no known dialect (None): it is checked against no dialect's rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from replay.dialects import jsonrpc
from replay.dialects.common import EventLike, json_object

__all__ = ["DIALECTS", "SHAPES", "Dialect", "detect_events"]

Dialect = Literal["responses", "chat", "anthropic", "gemini", "cohere", "jsonrpc", "converse"]
DIALECTS: tuple[Dialect, ...] = (
    "responses",
    "chat",
    "anthropic",
    "gemini",
    "cohere",
    "jsonrpc",
    "converse",
)
"""Every dialect replay knows."""

_ANTHROPIC_TYPES = {
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
}
_COHERE_TYPES = {
    "message-start",
    "content-start",
    "content-delta",
    "content-end",
    "tool-plan-delta",
    "tool-call-start",
    "tool-call-delta",
    "tool-call-end",
    "citation-start",
    "citation-end",
    "message-end",
}
#: How many telling events decide (the first ones), and how many events are looked at.
_TELLING = 16
_LOOKED_AT = 256


def _responses(payload: Mapping[str, object]) -> bool:
    kind = payload.get("type")
    return isinstance(kind, str) and kind.startswith("response.")


def _anthropic(payload: Mapping[str, object]) -> bool:
    return payload.get("type") in _ANTHROPIC_TYPES


def _cohere(payload: Mapping[str, object]) -> bool:
    return payload.get("type") in _COHERE_TYPES


def _chat(payload: Mapping[str, object]) -> bool:
    if payload.get("object") == "chat.completion.chunk":
        return True
    choices = payload.get("choices")
    return (
        "type" not in payload
        and isinstance(choices, list)
        and bool(choices)
        and all(isinstance(choice, Mapping) and "delta" in choice for choice in choices)
    )


def _gemini(payload: Mapping[str, object]) -> bool:
    if isinstance(payload.get("candidates"), list):
        return True
    return isinstance(payload.get("usageMetadata"), Mapping) and (
        "modelVersion" in payload or "responseId" in payload
    )


def _converse(payload: Mapping[str, object]) -> bool:
    """A Converse payload (no `type`): a block's `contentBlockIndex`, a `stopReason`, the
    `usage` in `inputTokens`, or a `messageStart`'s lone `role` (beside Bedrock's `p`)."""
    if "type" in payload:
        return False
    usage = payload.get("usage")
    return (
        isinstance(payload.get("contentBlockIndex"), int)
        or isinstance(payload.get("stopReason"), str)
        or (isinstance(usage, Mapping) and "inputTokens" in usage)
        or (isinstance(payload.get("role"), str) and set(payload) <= {"role", "p"})
    )


SHAPES: dict[Dialect, Callable[[Mapping[str, object]], bool]] = {
    "responses": _responses,
    "chat": _chat,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "cohere": _cohere,
    "jsonrpc": jsonrpc.is_message,
    "converse": _converse,
}
"""For each dialect, whether an event's data (a JSON object) has the shape of its events."""


def detect_events(events: Sequence[EventLike]) -> Dialect | None:
    """The dialect most of the first telling `events` fit; None when none, or a tie."""
    fits = dict.fromkeys(DIALECTS, 0)
    telling = 0
    for event in events[:_LOOKED_AT]:
        payload = json_object(event.data)
        if payload is None:
            continue
        matched = [name for name, shape in SHAPES.items() if shape(payload)]
        if len(matched) != 1:
            continue  # fits none, or several: says nothing
        fits[matched[0]] += 1
        telling += 1
        if telling == _TELLING:
            break
    best = max(fits.values())
    winners = [name for name, count in fits.items() if count == best]
    return winners[0] if best and len(winners) == 1 else None
