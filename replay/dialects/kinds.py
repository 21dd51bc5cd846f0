"""What each event of a stream is: its type, its kind, and what it adds to the texts.

    [(e.type, e.kind) for e in event_kinds(events)]
    # [("response.created", "other"), ("response.output_item.added", "item"),
    #  ("response.output_text.delta", "text"), ..., ("response.completed", "terminal")]

An event's `type` is what its stream calls it: the SSE `event:` name, else the `type` of its
JSON data (the `object` of a Chat Completions chunk, `[DONE]`), else the NDJSON line's name
(`replay.framing.ndjson.event_name`). Its `kind` groups the types of every dialect in a few
families, for people to tell apart at a glance (`replay report` colours them): a delta of `text`, of
`reasoning`, or of a tool call's arguments (`tool`), as `replay.dialects.texts` reads them;
an `item` (the Responses API's output items and content parts, Anthropic's and Cohere's
content blocks); an `error`; the `terminal` event; `other` for the rest (lifecycle, usage,
pings).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import attrs

from replay.dialects.common import EventLike
from replay.dialects.texts import additions_and_payloads
from replay.redact import deep_json

__all__ = ["KINDS", "EventKind", "Kind", "event_kinds", "output_tokens"]

Kind = Literal["text", "reasoning", "tool", "item", "error", "terminal", "other"]
KINDS: tuple[Kind, ...] = ("text", "reasoning", "tool", "item", "error", "terminal", "other")
"""Every kind, in the order `replay report`'s legend shows them."""

_TERMINAL = {
    "response.completed",
    "response.incomplete",
    "message_stop",
    "message-end",
    "[DONE]",
    "done",
}
_ERROR = {"error", "response.failed", "response.error"}
_ITEM_PREFIXES = (
    "response.output_item.",
    "response.content_part.",
    "response.reasoning_summary_part.",
    "content_block_start",
    "content_block_stop",
    "content-start",
    "content-end",
    "tool-call-start",
    "tool-call-end",
    "citation-",
)
_ITEM_DONES = ("text.done", "arguments.done", "summary_text.done", "refusal.done")
# What a delta that adds nothing `texts` reads adds to, by a word of its type: an empty text
# delta, Responses' reasoning summaries and other tools' inputs, Anthropic's signatures.
_DELTA_WORDS: dict[str, Kind] = {
    "text": "text",
    "refusal": "text",
    "reasoning": "reasoning",
    "thinking": "reasoning",
    "signature": "reasoning",
    "arguments": "tool",
    "input": "tool",
}


@attrs.frozen
class EventKind:
    """What one event is.

    Args:
        type: what the stream calls it (`response.output_text.delta`, `content_block_delta`,
            `chat.completion.chunk`, `[DONE]`, `done`…).
        kind: its family (see the module's docstring).
        text: the text it adds to, as `stream_texts` names it (`text`, `reasoning`,
            `tool call 0`…); "" when it adds to none.
        piece: what it adds to that text ("" for none).
    """

    type: str
    kind: Kind
    text: str = ""
    piece: str = ""


def event_kinds(events: Sequence[EventLike]) -> list[EventKind]:
    """What each of `events` (of one stream, in order) is; see `EventKind`."""
    additions = additions_and_payloads(events)
    return [
        _kind_of(event, text, piece, payload or {})
        for event, (text, piece, payload) in zip(events, additions, strict=True)
    ]


def _payload(data: str) -> Mapping[str, object]:
    if not data.startswith("{"):
        return {}
    try:
        value = deep_json.loads(data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _kind_of(event: EventLike, text: str, piece: str, payload: Mapping[str, object]) -> EventKind:
    named = bool(event.event) and event.event != "message"
    kind_type = event.event if named else _type_of(event, payload)
    if kind_type in _ERROR or payload.get("error") not in (None, "", {}):
        family: Kind = "error"
    elif kind_type in _TERMINAL:
        family = "terminal"
    elif piece or text.startswith("tool call"):  # a call's first chunk: its name
        family = _text_family(text)
    elif kind_type.startswith(_ITEM_PREFIXES) or kind_type.endswith(_ITEM_DONES):
        family = "item"
    else:
        family = _delta_family(kind_type, payload)
    return EventKind(kind_type, family, text, piece)


def _type_of(event: EventLike, payload: Mapping[str, object]) -> str:
    for key in ("type", "object"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    return "[DONE]" if event.data.strip() == "[DONE]" else event.event or "message"


def _delta_family(kind_type: str, payload: Mapping[str, object]) -> Kind:
    """The family of a delta `texts` does not read, by a word of its type; else `other`."""
    if kind_type.endswith(".delta"):  # Responses: `response.reasoning_summary_text.delta`
        words = kind_type.split(".")[-2].split("_")
    elif kind_type == "content_block_delta":  # Anthropic: `signature_delta`
        delta = payload.get("delta")
        delta_type = delta.get("type") if isinstance(delta, Mapping) else None
        words = delta_type.split("_") if isinstance(delta_type, str) else []
    else:
        return "other"
    return next((_DELTA_WORDS[word] for word in words if word in _DELTA_WORDS), "other")


def _text_family(text: str) -> Kind:
    if text.startswith("tool call"):
        return "tool"
    if text.startswith(("reasoning", "thinking")):
        return "reasoning"
    return "text"


_TOKEN_FIELDS = ("output_tokens", "completion_tokens", "candidatesTokenCount")


def _get(value: object, key: str) -> object:
    return value.get(key) if isinstance(value, Mapping) else None


def output_tokens(events: Sequence[EventLike]) -> int | None:
    """How many tokens the stream's usage says were generated, from the last event that says
    (`usage.output_tokens`, Chat Completions' `usage.completion_tokens`, a Responses terminal
    event's `response.usage`, Cohere's `message-end` usage `tokens`, Gemini's `usageMetadata`
    `candidatesTokenCount`, Ollama's `eval_count`); None when none says."""
    for event in reversed(events):
        if "sage" not in event.data and "eval_count" not in event.data:
            continue
        payload = _payload(event.data)
        response = payload.get("response")
        cohere = _get(_get(payload.get("delta"), "usage"), "tokens")
        gemini = payload.get("usageMetadata")
        for usage in (payload.get("usage"), _usage_of(response), cohere, gemini, payload):
            count = _count(usage)
            if count is not None:
                return count
    return None


def _usage_of(value: object) -> object:
    return value.get("usage") if isinstance(value, Mapping) else None


def _count(usage: object) -> int | None:
    if not isinstance(usage, Mapping):
        return None
    for field in (*_TOKEN_FIELDS, "eval_count"):
        value = usage.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None
