"""The LLM streaming dialects replay understands: tell them apart, check them, make them.

    replay.dialects.detect(interaction)            # "responses" | "chat" | "anthropic" |
                                                   # "gemini" | "cohere" | "jsonrpc" |
                                                   # "converse" | None
    replay.dialects.validate(interaction)          # [Violation(rule, message, index), ...]
    replay.dialects.closed_after_end(interaction)  # True: the client closed it after its end
    replay.dialects.responses.stream("Hi there")   # a synthetic Interaction, validated
    replay.dialects.invoke.stream("Hi there")      # Claude on Bedrock (read as "anthropic")

A stream is raw body bytes, an `Interaction`, a `Response`, or a sequence of events
(`replay.framing.sse.Event` or `TimedEvent`); a body that is a JSON array (Gemini without
`alt=sse`) is read element by element, an AWS event stream (Bedrock)
message by message. Which dialect it speaks is told by the shape of its
events (`replay.dialects.detection`): a stream of no known dialect breaks none of their
rules. Rule names are `<dialect>.<rule>` or `stream.<rule>`
and stable; `RULES` lists them all, `SEVERITIES` says how much breaking each matters
(`error`, `warning`, `note`). The validators know real providers: what a provider
documents (an Azure content-filter preamble, re-encrypted reasoning, a stream recorded
before a field existed) breaks no rule; a quirk the official SDK mis-assembles does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from replay.dialects import anthropic, chat, cohere, converse, gemini, invoke, jsonrpc, responses
from replay.dialects.common import (
    EventLike,
    Parsed,
    StreamLike,
    ToolCall,
    Violation,
    read,
    without_truncation,
)
from replay.dialects.detection import Dialect, detect_events
from replay.dialects.rules import RULES, SEVERITIES, Severity
from replay.errors import ConfigurationError
from replay.model import Interaction, Response

__all__ = [
    "RULES",
    "SEVERITIES",
    "Dialect",
    "Severity",
    "StreamLike",
    "ToolCall",
    "Violation",
    "anthropic",
    "chat",
    "closed_after_end",
    "cohere",
    "converse",
    "detect",
    "gemini",
    "invoke",
    "jsonrpc",
    "responses",
    "validate",
]

_CHECKS: dict[str, Callable[..., list[Violation]]] = {
    "responses": responses.check,
    "chat": chat.check,
    "anthropic": anthropic.check,
    "gemini": gemini.check,
    "cohere": cohere.check,
    "jsonrpc": jsonrpc.check,
    "converse": converse.check,
}


def detect(stream: StreamLike) -> Dialect | None:
    """Which dialect `stream` speaks, by the shape of its first telling events
    (`replay.dialects.detection`); None when none fits, or two fit as well."""
    return _detect(read(stream).events)


def _detect(events: Sequence[EventLike]) -> Dialect | None:
    return detect_events(events)


def validate(stream: StreamLike, dialect: Dialect | None = None) -> list[Violation]:
    """Every rule `stream` breaks, in event order (those of the whole stream last).

    Args:
        stream: body bytes, an Interaction, a Response, or events.
        dialect: which rules to apply; detected when None. A stream of no known dialect
            is checked against the `stream.*` rules only.

    Raises:
        ConfigurationError: `dialect` is not one of "responses", "chat", "anthropic",
            "gemini", "cohere", "jsonrpc", "converse".
    """
    if dialect is not None and dialect not in _CHECKS:
        raise ConfigurationError(f"dialect must be one of {', '.join(_CHECKS)}, not {dialect!r}")
    parsed = read(stream)
    dialect = dialect or _detect(parsed.events) or ("jsonrpc" if jsonrpc.asks(stream) else None)
    violations = list(parsed.violations)
    if dialect is not None:
        check = _CHECKS[dialect]
        if dialect == "jsonrpc" and isinstance(stream, Interaction):  # the ids it answers
            check = functools.partial(check, request=stream.request)
        found = check(parsed.events, truncated=parsed.truncated)
        whole = _whole(parsed, check)
        if whole is not None:  # the client closed it after its end: nothing was cut
            violations, found = list(without_truncation(parsed)), whole
        violations += found
    return sorted(violations, key=lambda v: (v.index is None, v.index or 0))


def closed_after_end(stream: StreamLike) -> bool:
    """Whether the client closed `stream` (a recording) after its dialect's terminal event
    (`[DONE]`, `response.completed` / `failed` / `incomplete`, `message_stop`, Cohere's
    `message-end`, Gemini's chunk with its `finishReason`, Converse's `metadata`): the stream is
    complete, though its recording stopped there (`replay.engine.ends.CLOSED_AFTER_END`).
    A stream of no known dialect has no terminal event to tell: never."""
    response = stream.response if isinstance(stream, Interaction) else stream
    if isinstance(response, Response) and (
        response.end.error is not None or response.end.stopped_by != "client"
    ):
        return False  # (the usual answer, without reading the body)
    parsed = read(stream)
    dialect = _detect(parsed.events) or ("jsonrpc" if jsonrpc.asks(stream) else None)
    return dialect is not None and _whole(parsed, _CHECKS[dialect]) is not None


def _whole(parsed: Parsed, check: Callable[..., list[Violation]]) -> list[Violation] | None:
    """The rules broken by a stream the client closed after its last complete event, read
    as whole (the chunked terminator many clients do not wait for after `[DONE]`); None when
    the client did not close it so, or when the rules of its end show something missing."""
    if not parsed.client_stop:
        return None
    whole = check(parsed.events, truncated=False)
    return whole if len(whole) == len(check(parsed.events, truncated=True)) else None
