"""What each event of a stream is (`replay.dialects.kinds`), and what it adds to the texts
(`replay.dialects.texts.event_additions`), for every dialect, Ollama's NDJSON and streams of
no known dialect."""

from __future__ import annotations

import json

import pytest

from replay.dialects import ToolCall, anthropic, chat, responses
from replay.dialects.kinds import KINDS, EventKind, event_kinds, output_tokens
from replay.dialects.texts import event_additions, event_pieces, stream_texts
from replay.framing.sse import Event
from replay.model import Interaction, TimedEvent

TOOL = ToolCall("get_weather", {"city": "Paris"})


def kinds_of(events: list[TimedEvent]) -> list[tuple[str, str]]:
    return [(kind.type, kind.kind) for kind in event_kinds(events)]


def runs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`pairs` with each run of equal pairs shown once."""
    return [pair for n, pair in enumerate(pairs) if n == 0 or pairs[n - 1] != pair]


def test_a_responses_stream_has_items_each_kind_of_delta_and_a_terminal_event() -> None:
    events = responses.stream("Hi there.", reasoning="Think.", tool_call=TOOL).response.events()
    assert runs(kinds_of(events)) == [
        ("response.created", "other"),
        ("response.in_progress", "other"),
        ("response.output_item.added", "item"),
        ("response.content_part.added", "item"),
        ("response.reasoning_text.delta", "reasoning"),
        ("response.reasoning_text.done", "item"),
        ("response.content_part.done", "item"),
        ("response.output_item.done", "item"),
        ("response.output_item.added", "item"),
        ("response.content_part.added", "item"),
        ("response.output_text.delta", "text"),
        ("response.output_text.done", "item"),
        ("response.content_part.done", "item"),
        ("response.output_item.done", "item"),
        ("response.output_item.added", "item"),
        ("response.function_call_arguments.delta", "tool"),
        ("response.function_call_arguments.done", "item"),
        ("response.output_item.done", "item"),
        ("response.completed", "terminal"),
    ]


def test_chat_chunks_are_told_apart_by_what_their_delta_carries() -> None:
    events = chat.stream("Hi.", tool_calls=[TOOL], include_usage=True).response.events()
    assert runs(kinds_of(events)) == [
        ("chat.completion.chunk", "other"),  # the role, with an empty content
        ("chat.completion.chunk", "text"),
        ("chat.completion.chunk", "tool"),  # the call's name, then its arguments
        ("chat.completion.chunk", "other"),  # its finish_reason, then usage
        ("[DONE]", "terminal"),
    ]


def test_anthropic_blocks_are_items_and_their_deltas_are_what_they_add() -> None:
    events = anthropic.stream("Hi.", thinking="Think.", tool_use=TOOL).response.events()
    assert runs(kinds_of(events)) == [
        ("message_start", "other"),
        ("content_block_start", "item"),
        ("ping", "other"),
        ("content_block_delta", "reasoning"),  # thinking, then its signature
        ("content_block_stop", "item"),
        ("content_block_start", "item"),
        ("content_block_delta", "text"),
        ("content_block_stop", "item"),
        ("content_block_start", "item"),
        ("content_block_delta", "tool"),
        ("content_block_stop", "item"),
        ("message_delta", "other"),
        ("message_stop", "terminal"),
    ]


ANTHROPIC_ERROR = '{"type":"error","error":{"type":"overloaded_error"}}'
SUMMARY = "response.reasoning_summary_text.delta"
MCP = "response.mcp_call_arguments.delta"
CHUNK = "chat.completion.chunk"


@pytest.mark.parametrize(
    ("event", "data", "expected"),
    [
        ("error", ANTHROPIC_ERROR, ("error", "error")),
        ("response.failed", '{"type":"response.failed"}', ("response.failed", "error")),
        ("message", '{"error":{"message":"rate limited"}}', ("message", "error")),
        ("message", f'{{"object":"{CHUNK}","error":null}}', (CHUNK, "other")),
        (SUMMARY, '{"delta":"x"}', (SUMMARY, "reasoning")),
        (MCP, '{"delta":"{"}', (MCP, "tool")),
        ("response.audio.delta", '{"delta":"AAA"}', ("response.audio.delta", "other")),
        ("response.output_text.delta", '{"delta":""}', ("response.output_text.delta", "text")),
        ("message", "not json", ("message", "other")),
        ("message", "[DONE]", ("[DONE]", "terminal")),
    ],
    ids=[
        "anthropic-error", "responses-failed", "chat-error", "chat-no-error", "summary-delta",
        "mcp-arguments", "audio", "empty-text-delta", "not-json", "done",
    ],
)  # fmt: skip
def test_errors_terminal_events_and_unread_deltas_are_told_by_their_type(
    event: str, data: str, expected: tuple[str, str]
) -> None:
    assert kinds_of([TimedEvent(at=0.0, event=event, data=data)]) == [expected]


OLLAMA: list[dict[str, object]] = [
    {"message": {"role": "assistant", "content": "", "thinking": "Hm."}, "done": False},
    {"message": {"role": "assistant", "content": "Hel"}, "done": False},
    {"message": {"role": "assistant", "content": "lo"}, "done": False},
    {"message": {"role": "assistant", "content": ""}, "done": True, "eval_count": 3},
]


def ollama_events(lines: list[dict[str, object]]) -> list[Event]:
    return [
        Event(event="done" if line["done"] else "message", data=json.dumps(line)) for line in lines
    ]


def test_an_ollama_stream_says_its_thinking_and_text_and_its_usage() -> None:
    events = ollama_events(OLLAMA)
    assert stream_texts(events) == {"thinking": "Hm.", "text": "Hello"}
    assert event_additions(events) == [
        ("thinking", "Hm."),
        ("text", "Hel"),
        ("text", "lo"),
        ("", ""),
    ]
    assert [kind.kind for kind in event_kinds(events)] == ["reasoning", "text", "text", "terminal"]
    assert output_tokens(events) == 3


def test_an_ollama_generate_stream_says_its_response() -> None:
    lines = [{"response": "Hi", "done": False}, {"response": "!", "done": True}]
    assert stream_texts(ollama_events(lines)) == {"text": "Hi!"}


def test_chat_reasoning_fields_are_read_as_reasoning() -> None:
    def chunk(delta: dict[str, object]) -> Event:
        choice = {"index": 0, "delta": delta}
        return Event(data=json.dumps({"object": "chat.completion.chunk", "choices": [choice]}))

    events = [chunk({"reasoning_content": "Think."}), chunk({"content": "Hi."})]
    assert stream_texts(events) == {"reasoning": "Think.", "text": "Hi."}
    assert [kind.kind for kind in event_kinds(events)] == ["reasoning", "text"]


def test_additions_name_the_text_each_piece_goes_to_and_agree_with_the_pieces() -> None:
    interaction = chat.stream("Hi.", tool_calls=[TOOL, ToolCall("get_time", {})])
    events = interaction.response.events()
    additions = event_additions(events)
    assert [piece for _, piece in additions] == event_pieces(events)
    assert {name for name, _ in additions} == {"", "text", "tool call 0", "tool call 1"}
    kinds = event_kinds(events)
    assert all(isinstance(kind, EventKind) and kind.kind in KINDS for kind in kinds)
    assert [(kind.text, kind.piece) for kind in kinds] == additions


@pytest.mark.parametrize(
    ("interaction", "expected"),
    [
        (responses.stream("One two three."), 4),
        (chat.stream("One two three.", include_usage=True), 4),
        (chat.stream("One two three."), None),  # no usage chunk
        (anthropic.stream("One two three."), 4),
        (responses.stream("One two three.", failure="cut"), None),  # cut before its usage
    ],
    ids=["responses", "chat-usage", "chat", "anthropic", "cut"],
)
def test_output_tokens_are_the_usages_last_word(
    interaction: Interaction, expected: int | None
) -> None:
    events = interaction.response.events()
    assert output_tokens(events) == expected
