"""Timing of a recorded (or faulted) stream, for assertions in tests.

    from replay.inspect import timing

    response = cassette.interactions[0].response
    assert timing.ttft(response) < 0.5                 # seconds from the send
    assert timing.tokens_per_second(response) > 20
    assert max(timing.gaps(response)) < 2.0

Times are seconds since the request was sent, as recorded. The functions take a `Response`
or an `Interaction`; a fault's `apply(response)` gives the timing a client sees under it.
Events are those of the stream's framing (SSE, NDJSON lines, or a JSON array's elements:
`replay.framing`).
"Token" events are the text deltas of the stream's dialect (`replay.dialects.detect`):
`response.output_text.delta` (Responses API), a chunk with `choices[].delta.content` (Chat
Completions), a `content_block_delta` of type `text_delta` (Anthropic Messages), a chunk with a
candidate's text part, thoughts aside (Gemini), a `content-delta` of text (Cohere v2); in an
NDJSON stream of Ollama's, a line with `message.content` (`/api/chat`) or `response`
(`/api/generate`) text. A stream of none of these has no token events: `ttft` then falls
back to the first event.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import attrs

from replay.model import Interaction, Response, TimedEvent
from replay.redact import deep_json

__all__ = [
    "Timing",
    "first_event",
    "gaps",
    "summary",
    "token_events",
    "tokens_per_second",
    "ttfb",
    "ttft",
]

ResponseLike = Response | Interaction


def _response(stream: ResponseLike) -> Response:
    return stream.response if isinstance(stream, Interaction) else stream


def _data(event: TimedEvent) -> dict[str, object]:
    if not event.data.lstrip(" \t\n\r").startswith("{"):
        return {}  # no JSON object: spare the parser's exception (seconds for 1M events)
    try:
        data = deep_json.loads(event.data)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _is_responses_delta(event: TimedEvent) -> bool:
    return _data(event).get("type") == "response.output_text.delta"


def _is_chat_delta(event: TimedEvent) -> bool:
    choices = _data(event).get("choices")
    if not isinstance(choices, list):
        return False
    return any(
        isinstance(choice, dict)
        and isinstance(choice.get("delta"), dict)
        and bool(choice["delta"].get("content"))
        for choice in choices
    )


def _is_anthropic_delta(event: TimedEvent) -> bool:
    data = _data(event)
    delta = data.get("delta")
    return (
        data.get("type") == "content_block_delta"
        and isinstance(delta, dict)
        and delta.get("type") == "text_delta"
    )


def _no_token(event: TimedEvent) -> bool:
    """A JSON-RPC stream (MCP) carries messages, no text deltas: its ttft is its first event."""
    return False


_TOKEN_TESTS: dict[str, Callable[[TimedEvent], bool]] = {
    "responses": _is_responses_delta,
    "chat": _is_chat_delta,
    "anthropic": _is_anthropic_delta,
    "jsonrpc": _no_token,
}


def ttfb(stream: ResponseLike) -> float | None:
    """Seconds to the first body byte; None for an empty body."""
    return _response(stream).ttfb


def first_event(stream: ResponseLike) -> float | None:
    """Seconds to the first complete event (SSE or NDJSON); None if there is none."""
    events = _response(stream).events()
    return events[0].at if events else None


def _is_ollama_delta(event: TimedEvent) -> bool:
    data = _data(event)
    message = data.get("message")
    text = message.get("content") if isinstance(message, dict) else data.get("response")
    return "done" in data and isinstance(text, str) and bool(text)


def _events(stream: ResponseLike, events: Sequence[TimedEvent] | None) -> Sequence[TimedEvent]:
    return _response(stream).events() if events is None else events


def _tokens(events: Sequence[TimedEvent]) -> list[TimedEvent]:
    from replay import dialects  # only when asked: the dialects are heavier to import

    dialect = dialects.detect(events)
    if dialect is not None and dialect not in _TOKEN_TESTS:  # as `texts` reads them
        from replay.dialects.texts import event_additions

        additions = event_additions(events)
        return [
            e
            for e, (name, piece) in zip(events, additions, strict=True)
            if name == "text" and piece
        ]
    is_token = _is_ollama_delta if dialect is None else _TOKEN_TESTS[dialect]
    return [event for event in events if is_token(event)]


def token_events(stream: ResponseLike) -> list[TimedEvent]:
    """The text delta events of the stream's dialect, in order ([] for an unknown one)."""
    return _tokens(_response(stream).events())


def ttft(stream: ResponseLike) -> float | None:
    """Seconds to the first token (text delta); the first event if the dialect is unknown."""
    tokens = token_events(stream)
    return tokens[0].at if tokens else first_event(stream)


def gaps(stream: ResponseLike, *, events: Sequence[TimedEvent] | None = None) -> list[float]:
    """The seconds between consecutive events ([] for fewer than two): gap `i` is the
    silence between event `i` and event `i + 1`.

    Args:
        stream: the response (or its interaction).
        events: its events, when they are already parsed (they are not parsed again).
    """
    times = [event.at for event in _events(stream, events)]
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def tokens_per_second(stream: ResponseLike) -> float | None:
    """Text deltas per second from the first to the last: (count - 1) / their time span.

    None with fewer than two deltas; infinity when they all arrived at once.
    """
    return _rate(token_events(stream))


def _rate(tokens: Sequence[TimedEvent]) -> float | None:
    if len(tokens) < 2:
        return None
    span = tokens[-1].at - tokens[0].at
    return (len(tokens) - 1) / span if span > 0 else math.inf


@attrs.frozen(kw_only=True)
class Timing:
    """The timing of one stream at a glance (seconds since the send)."""

    ttfb: float | None
    first_event: float | None
    ttft: float | None
    duration: float
    events: int
    tokens: int
    max_gap: float | None
    tokens_per_second: float | None

    def describe(self) -> str:
        """One line: ttfb, ttft, duration, events, tokens, the longest gap and the rate."""

        def seconds(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}s"

        rate = "-" if self.tokens_per_second is None else f"{self.tokens_per_second:.1f}/s"
        return (
            f"ttfb {seconds(self.ttfb)}, ttft {seconds(self.ttft)}, "
            f"duration {seconds(self.duration)}, {self.events} events, {self.tokens} tokens, "
            f"max gap {seconds(self.max_gap)}, {rate}"
        )


def summary(stream: ResponseLike, *, events: Sequence[TimedEvent] | None = None) -> Timing:
    """Every figure of this module for `stream`, parsing it once.

    Args:
        stream: the response (or its interaction).
        events: its events, when they are already parsed (they are not parsed again).
    """
    response = _response(stream)
    events = _events(response, events)
    tokens = _tokens(events)
    times = [event.at for event in events]
    spaces = [later - earlier for earlier, later in itertools.pairwise(times)]
    first = times[0] if times else None
    return Timing(
        ttfb=response.ttfb,
        first_event=first,
        ttft=tokens[0].at if tokens else first,
        duration=response.duration,
        events=len(events),
        tokens=len(tokens),
        max_gap=max(spaces) if spaces else None,
        tokens_per_second=_rate(tokens),
    )
