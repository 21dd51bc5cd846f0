"""What a stream says: its texts, joined from their deltas, whatever its dialect.

    stream_texts(interaction)
    # {"reasoning": "The user wants…", "text": "Let me check.",
    #  "tool call 0": 'get_weather({"city":"Paris"})'}

Each dialect spreads the same few things over differently shaped deltas; this reads them
back (Gemini's thought parts as `reasoning`, Cohere's `tool plan`), Ollama's NDJSON lines
(`message.content`, `response`, `thinking`) included. Nothing is validated here (that is
`validate`): a malformed event is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from replay.dialects import detect
from replay.dialects.common import StreamLike, compact, json_object, read

__all__ = ["additions_and_payloads", "event_additions", "event_pieces", "stream_texts"]


def stream_texts(stream: StreamLike) -> dict[str, str]:
    """What `stream` says, by name, joined from its deltas, in order of first appearance.

    Args:
        stream: body bytes, an Interaction, a Response, or events.

    Returns:
        `text` (and `refusal`), `reasoning` (Responses) or `thinking` (Anthropic), and
        `tool call N` as `name(arguments)` for the Nth tool call; in Chat Completions, the
        texts of a choice other than the first are suffixed ` (choice N)`. A stream of no
        known dialect says nothing (an empty dict).

    Raises:
        ValueError: a compressed body that does not decode.
    """
    texts = _Texts()
    for _ in _read_into(texts, stream):
        pass
    return texts.joined()


def event_pieces(stream: StreamLike) -> list[str]:
    """What each event of `stream` adds to its texts: a delta's text, a tool call's piece of
    arguments; "" for an event that adds nothing (or of a stream of no known dialect).

    Raises:
        ValueError: a compressed body that does not decode.
    """
    return [piece for _, piece in event_additions(stream)]


def event_additions(stream: StreamLike) -> list[tuple[str, str]]:
    """For each event of `stream`: the name of the text it adds to (`text`, `reasoning`,
    `tool call 0`…, as `stream_texts` names them; the first, when it adds to several) and
    what it adds; `("", "")` for an event that adds nothing.

    Raises:
        ValueError: a compressed body that does not decode.
    """
    return [(name, piece) for name, piece, _ in additions_and_payloads(stream)]


def additions_and_payloads(
    stream: StreamLike,
) -> Iterator[tuple[str, str, Mapping[str, object] | None]]:
    """`event_additions`, each with the event's data as parsed (None: not a JSON object),
    for the other readers of the dialects (`kinds`), which then parse nothing again.
    One event at a time: a long stream's parsed data is never all held at once."""
    texts = _Texts()
    for payload in _read_into(texts, stream):
        name = texts.last[0][0] if texts.last else ""
        yield name, "".join(piece for _, piece in texts.last), payload


def _read_into(texts: _Texts, stream: StreamLike) -> Iterator[Mapping[str, object] | None]:
    """Feed `texts` the events of `stream`, one per step; each step gives the event's data,
    parsed."""
    events = read(stream).events
    dialect = detect(events)
    for event in events:
        texts.last = []
        payload = json_object(event.data)
        if payload is None:
            pass
        elif dialect == "responses":
            texts.responses(payload)
        elif dialect == "chat":
            texts.chat(payload)
        elif dialect == "anthropic":
            texts.anthropic(payload)
        elif dialect == "gemini":
            texts.gemini(payload)
        elif dialect == "cohere":
            texts.cohere(payload)
        elif "done" in payload:  # an NDJSON line of Ollama's
            texts.ollama(payload)
        yield payload


def _get(mapping: object, key: str) -> object:
    return mapping.get(key) if isinstance(mapping, Mapping) else None


# Responses API delta events, and the text each one adds to.
_RESPONSES_DELTAS = {
    "response.output_text.delta": "text",
    "response.refusal.delta": "refusal",
    "response.reasoning_text.delta": "reasoning",
}
# Anthropic delta types: the text each adds to, and the field its piece is in.
_ANTHROPIC_DELTAS = {"text_delta": ("text", "text"), "thinking_delta": ("thinking", "thinking")}


class _Texts:
    """Texts accumulating as one stream's events are read."""

    def __init__(self) -> None:
        self.pieces: dict[str, list[str]] = {}
        self.calls: dict[object, tuple[str, list[str]]] = {}  # key -> (name, argument pieces)
        #: The pieces the last event added, each with the name of its text.
        self.last: list[tuple[str, str]] = []

    def add(self, name: str, piece: object) -> None:
        if isinstance(piece, str):
            self.pieces.setdefault(name, []).append(piece)
            self.last.append((name, piece))

    def call(self, key: object, name: object = None, piece: object = None) -> None:
        if key not in self.calls:
            self.calls[key] = (str(name or "?"), [])
            self.pieces.setdefault(f"tool call {len(self.calls) - 1}", [])  # keeps the order
        if isinstance(piece, str):
            self.calls[key][1].append(piece)
            self.last.append((f"tool call {list(self.calls).index(key)}", piece))

    def responses(self, payload: Mapping[str, object]) -> None:
        kind = payload.get("type")
        if kind in _RESPONSES_DELTAS:
            self.add(_RESPONSES_DELTAS[str(kind)], payload.get("delta"))
        item = payload.get("item")
        if kind == "response.output_item.added" and _get(item, "type") == "function_call":
            self.call(payload.get("output_index"), _get(item, "name"))
        elif kind == "response.function_call_arguments.delta":
            self.call(payload.get("output_index"), piece=payload.get("delta"))

    def chat(self, payload: Mapping[str, object]) -> None:
        choices = payload.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            number, delta = _get(choice, "index"), _get(choice, "delta")
            suffix = "" if number == 0 else f" (choice {number})"
            self.add(f"text{suffix}", _get(delta, "content"))
            self.add(f"refusal{suffix}", _get(delta, "refusal"))
            # DeepSeek's and OpenRouter's reasoning, beside the content.
            self.add(f"reasoning{suffix}", _get(delta, "reasoning_content"))
            self.add(f"reasoning{suffix}", _get(delta, "reasoning"))
            calls = _get(delta, "tool_calls")
            for call in calls if isinstance(calls, list) else []:
                function = _get(call, "function")
                key = (number, _get(call, "index"))
                self.call(key, _get(function, "name"), _get(function, "arguments"))

    def anthropic(self, payload: Mapping[str, object]) -> None:
        index, block = payload.get("index"), payload.get("content_block")
        if payload.get("type") == "content_block_start" and _get(block, "type") == "tool_use":
            self.call(index, _get(block, "name"))
        delta = payload.get("delta")
        kind = _get(delta, "type")
        if kind in _ANTHROPIC_DELTAS:
            name, field = _ANTHROPIC_DELTAS[str(kind)]
            self.add(name, _get(delta, field))
        elif kind == "input_json_delta":
            self.call(index, piece=_get(delta, "partial_json"))

    def gemini(self, payload: Mapping[str, object]) -> None:
        candidates = payload.get("candidates")
        for candidate in candidates if isinstance(candidates, list) else []:
            number = _get(candidate, "index") or 0
            suffix = "" if number == 0 else f" (candidate {number})"
            parts = _get(_get(candidate, "content"), "parts")
            for part in parts if isinstance(parts, list) else []:
                thought = _get(part, "thought") is True
                self.add(("reasoning" if thought else "text") + suffix, _get(part, "text"))
                call = _get(part, "functionCall")
                if isinstance(call, Mapping):  # a whole call in one part
                    key = (number, len(self.calls))
                    self.call(key, call.get("name"), compact(call.get("args") or {}))

    def cohere(self, payload: Mapping[str, object]) -> None:
        kind, index = payload.get("type"), payload.get("index")
        message = _get(payload.get("delta"), "message")
        content = _get(message, "content")
        if kind == "content-delta":
            self.add("text", _get(content, "text"))
            self.add("thinking", _get(content, "thinking"))
        elif kind == "tool-plan-delta":
            self.add("tool plan", _get(message, "tool_plan"))
        elif kind in ("tool-call-start", "tool-call-delta"):
            function = _get(_get(message, "tool_calls"), "function")
            self.call(index, _get(function, "name"), _get(function, "arguments") or None)

    def ollama(self, payload: Mapping[str, object]) -> None:
        message = payload.get("message")
        if isinstance(message, Mapping):  # /api/chat
            self.add("thinking", _get(message, "thinking") or None)
            self.add("text", _get(message, "content") or None)
        else:  # /api/generate
            self.add("thinking", payload.get("thinking") or None)
            self.add("text", payload.get("response") or None)

    def joined(self) -> dict[str, str]:
        texts = {name: "".join(pieces) for name, pieces in self.pieces.items()}
        for number, (name, pieces) in enumerate(self.calls.values()):
            texts[f"tool call {number}"] = f"{name}({''.join(pieces)})"
        return texts
