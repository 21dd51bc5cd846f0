"""The LLM streaming dialects replay understands: tell them apart, check them, make them.

    replay.dialects.detect(interaction)            # "responses" | "chat" | "anthropic" | None
    replay.dialects.validate(interaction)          # [Violation(rule, message, index), ...]
    replay.dialects.responses.stream("Hi there")   # a synthetic Interaction, validated

A stream is raw body bytes, an `Interaction`, a `Response`, or a sequence of events
(`replay.sse.Event` or `TimedEvent`). Rule names are `<dialect>.<rule>` or `stream.<rule>`
and stable; `RULES` lists them all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Literal

from replay.dialects import anthropic, chat, responses
from replay.dialects._common import (
    EventLike,
    StreamLike,
    ToolCall,
    Violation,
    read,
    without_truncation,
)
from replay.errors import ConfigurationError

__all__ = [
    "RULES",
    "Dialect",
    "StreamLike",
    "ToolCall",
    "Violation",
    "anthropic",
    "chat",
    "detect",
    "responses",
    "validate",
]

Dialect = Literal["responses", "chat", "anthropic"]

RULES: dict[str, str] = {
    "stream.utf8": "the body is valid UTF-8",
    "stream.truncated": "the body ends after a complete event, without a transport error",
    "responses.json": "every event's data is a JSON object",
    "responses.event-type": "the `event:` name equals data.type",
    "responses.first-event-created": "the first event is response.created",
    "responses.sequence-number": "sequence_number counts from 0 up by exactly 1",
    "responses.terminal-event": "exactly one terminal event (completed, failed, incomplete, "
    "error), and it is last",
    "responses.response-id": "every lifecycle event carries the same response id",
    "responses.status": "a terminal event's response has the status its name says",
    "responses.usage-total": "usage total_tokens = input_tokens + output_tokens",
    "responses.item-order": "output items are added in index order, once, and done once; "
    "content parts belong to an open item",
    "responses.unclosed": "every output_item.added and content_part.added gets its done "
    "(not required before response.failed or error)",
    "responses.delta-outside": "text, reasoning and argument deltas (and their done) come "
    "inside an open part or function call of the right type",
    "responses.delta-mismatch": "the joined deltas equal the done event, the done part and "
    "the done item",
    "responses.arguments-json": "function-call arguments parse as JSON",
    "responses.final-output": "the terminal response's output repeats the done items",
    "chat.json": "every data line is a JSON object, except [DONE]",
    "chat.done-last": "exactly one [DONE], and it is last (not required after an error)",
    "chat.error-last": "an in-band error chunk ends the stream",
    "chat.id-constant": "every chunk has the same id",
    "chat.model-constant": "every chunk has the same model",
    "chat.role-first": "each choice's role comes once, in its first delta",
    "chat.finish-reason": "each choice gets exactly one finish_reason, and nothing after it",
    "chat.tool-call-start": "each tool call's first fragment carries its id and name",
    "chat.tool-arguments-json": "each tool call's argument fragments join to JSON",
    "chat.usage-last": "with usage, only the final chunk carries it",
    "chat.usage-total": "usage total_tokens = prompt_tokens + completion_tokens",
    "anthropic.json": "every event's data is a JSON object",
    "anthropic.event-type": "the `event:` name equals data.type",
    "anthropic.message-start-first": "message_start comes first, and only first",
    "anthropic.block-order": "content blocks start, delta and stop in index order, one open "
    "at a time",
    "anthropic.delta-type": "a delta's type fits its block's type",
    "anthropic.partial-json": "a tool_use block's partial_json joins to JSON",
    "anthropic.signature": "a thinking block has its signature",
    "anthropic.message-delta": "one message_delta, with a stop_reason, before message_stop",
    "anthropic.message-stop-last": "message_stop comes once, and last",
    "anthropic.error-last": "an error event ends the stream",
}
"""Every rule `validate` checks, by name, with what it requires."""

_CHECKS: dict[str, Callable[..., list[Violation]]] = {
    "responses": responses.check,
    "chat": chat.check,
    "anthropic": anthropic.check,
}
_ANTHROPIC_TYPES = {
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
}


def detect(stream: StreamLike) -> Dialect | None:
    """Which dialect `stream` speaks, from its first telling event; None if none fits."""
    return _detect(read(stream).events)


def _detect(events: Sequence[EventLike]) -> Dialect | None:
    for event in events:
        if event.data == "[DONE]":
            return "chat"
        try:
            data = json.loads(event.data)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        kind = data.get("type")
        if isinstance(kind, str) and kind.startswith("response."):
            return "responses"
        if kind in _ANTHROPIC_TYPES:
            return "anthropic"
        if data.get("object") == "chat.completion.chunk":
            return "chat"
    return None


def validate(stream: StreamLike, dialect: Dialect | None = None) -> list[Violation]:
    """Every rule `stream` breaks, in event order (those of the whole stream last).

    Args:
        stream: body bytes, an Interaction, a Response, or events.
        dialect: which rules to apply; detected when None. A stream of no known dialect
            is checked against the `stream.*` rules only.

    Raises:
        ConfigurationError: `dialect` is not one of "responses", "chat", "anthropic".
    """
    if dialect is not None and dialect not in _CHECKS:
        raise ConfigurationError(f"dialect must be one of {', '.join(_CHECKS)}, not {dialect!r}")
    parsed = read(stream)
    dialect = dialect or _detect(parsed.events)
    violations = list(parsed.violations)
    if dialect is not None:
        check = _CHECKS[dialect]
        found = check(parsed.events, truncated=parsed.truncated)
        if parsed.client_stop:
            # A client that closed after the stream's last event (before the chunked
            # terminator, as many do after `[DONE]`) stopped a whole stream: if the rules of
            # its end hold, nothing was cut.
            whole = check(parsed.events, truncated=False)
            if len(whole) == len(found):
                violations, found = list(without_truncation(parsed)), whole
        violations += found
    return sorted(violations, key=lambda v: (v.index is None, v.index or 0))
