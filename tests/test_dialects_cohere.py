"""Dialects told apart by what they are: Cohere v2's chat stream is Cohere (not Chat
Completions because it ends with `data: [DONE]`), with one corruption per rule; a stream of
no known dialect is "unknown" and breaks no dialect's rules; `replay check` on Cohere
streams, as a user runs it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from commands import replay_text

import replay
from replay.dialects import RULES, ToolCall, anthropic, chat, cohere, detect, gemini, responses
from replay.dialects import validate as validate_stream
from replay.dialects.texts import stream_texts
from replay.framing.sse import parse
from replay.inspect import timing

TEXT = "Hello there, how may I assist you today?"
THINKING = "A greeting: answer briefly."
CALL = ToolCall("get_weather", {"city": "Paris"})


def rules(stream: Any) -> set[str]:
    return {violation.rule for violation in validate_stream(stream)}


def full() -> replay.Interaction:
    return cohere.stream(TEXT, thinking=THINKING, tool_call=CALL)


# --- telling the dialects apart ---------------------------------------------------------

SYNTHETIC = {
    "responses": lambda: responses.stream(TEXT, tool_call=CALL),
    "chat": lambda: chat.stream(TEXT, tool_calls=[CALL], include_usage=True),
    "anthropic": lambda: anthropic.stream(TEXT, tool_use=CALL),
    "gemini": lambda: gemini.stream(TEXT, function_call=CALL),
    "gemini-array": lambda: gemini.stream(TEXT, function_call=CALL, framing="json-array"),
    "cohere": full,
}


@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_each_dialect_is_told_by_the_shape_of_its_events(name: str) -> None:
    interaction = SYNTHETIC[name]()
    assert detect(interaction) == name.removesuffix("-array")
    assert detect(interaction.response.events()) == name.removesuffix("-array")


def test_a_cohere_stream_ending_with_done_gets_no_chat_findings() -> None:
    interaction = full()
    assert b"data: [DONE]" in interaction.response.body
    assert detect(interaction) == "cohere"
    assert rules(interaction) == set()
    assert not any(rule.startswith("chat.") for rule in rules(interaction.response.body))


def test_a_stream_of_no_known_dialect_is_unknown_and_breaks_no_dialect_rule() -> None:
    body = b'data: {"text": "Hi"}\n\ndata: {"text": " there"}\n\ndata: [DONE]\n\n'
    assert detect(body) is None
    assert validate_stream(body) == []
    assert stream_texts(body) == {}


def test_done_alone_tells_nothing() -> None:
    assert detect(b"data: [DONE]\n\n") is None


def test_one_odd_event_does_not_change_the_dialect() -> None:
    # A chat stream with one event shaped like Cohere's is still chat, its odd event flagged.
    events = parse(chat.stream(TEXT).response.body)
    odd = replay.dialects.common.sse(None, json.dumps({"type": "content-delta", "index": 0}))
    body = b"".join(
        (odd if n == 3 else b"") + f"data: {e.data}\n\n".encode() for n, e in enumerate(events)
    )
    assert detect(body) == "chat"


def test_a_tie_is_unknown() -> None:
    chat_chunk = {"object": "chat.completion.chunk", "choices": []}
    body = b"".join(
        f"data: {json.dumps(p)}\n\n".encode() for p in (chat_chunk, {"type": "message-start"})
    )
    assert detect(body) is None


def test_the_texts_read_back() -> None:
    assert stream_texts(full()) == {
        "thinking": THINKING,
        "text": TEXT,
        "tool plan": "I will call get_weather.",
        "tool call 0": 'get_weather({"city":"Paris"})',
    }


@pytest.mark.parametrize("failure", cohere.FAILURES)
def test_every_synthetic_stream_is_valid(failure: Any) -> None:
    interaction = cohere.stream(TEXT, tool_call=CALL, failure=failure)
    assert detect(interaction) == "cohere"
    assert rules(interaction) == ({"stream.truncated"} if failure == "cut" else set())


# --- one corruption per rule ------------------------------------------------------------

Ev = tuple[str, Any]  # (event name, data: parsed JSON, or raw text)


def explode(interaction: replay.Interaction) -> list[Ev]:
    events = parse(interaction.response.body)
    return [(e.event, e.data if e.data == "[DONE]" else json.loads(e.data)) for e in events]


def implode(events: list[Ev]) -> bytes:
    text = ""
    for name, data in events:
        raw = data if isinstance(data, str) else json.dumps(data)
        text += ("" if name == "message" else f"event: {name}\n") + f"data: {raw}\n\n"
    return text.encode()


def at(events: list[Ev], kind: str, nth: int = 0) -> int:
    return [
        n
        for n, (_, data) in enumerate(events)
        if isinstance(data, dict) and data.get("type") == kind
    ][nth]


def c_json(events: list[Ev]) -> list[Ev]:
    events[at(events, "content-delta", 1)] = ("content-delta", "garbage")
    return events


def c_event_type(events: list[Ev]) -> list[Ev]:
    index = at(events, "content-delta", 1)
    events[index] = ("text-delta", events[index][1])
    return events


def c_start_first(events: list[Ev]) -> list[Ev]:
    return events[1:]


def c_block_order(events: list[Ev]) -> list[Ev]:
    del events[at(events, "content-start", 1)]
    return events


def c_block_unclosed(events: list[Ev]) -> list[Ev]:
    del events[at(events, "tool-call-end")]
    return events


def c_tool_start(events: list[Ev]) -> list[Ev]:
    del events[at(events, "tool-call-start")][1]["delta"]["message"]["tool_calls"]["id"]
    return events


def c_tool_json(events: list[Ev]) -> list[Ev]:
    del events[at(events, "tool-call-end") - 1]  # the closing `"}`
    return events


def c_finish(events: list[Ev]) -> list[Ev]:
    del events[at(events, "message-end")][1]["delta"]["finish_reason"]
    return events


def c_end_missing(events: list[Ev]) -> list[Ev]:
    del events[at(events, "message-end")]
    return events


def c_after_done(events: list[Ev]) -> list[Ev]:
    return [*events, events[-2]]


CORRUPTIONS: list[tuple[Callable[[list[Ev]], list[Ev]], str]] = [
    (c_json, "cohere.json"),
    (c_event_type, "cohere.event-type"),
    (c_start_first, "cohere.message-start-first"),
    (c_block_order, "cohere.block-order"),
    (c_block_unclosed, "cohere.block-order"),
    (c_tool_start, "cohere.tool-call-start"),
    (c_tool_json, "cohere.tool-arguments-json"),
    (c_finish, "cohere.finish-reason"),
    (c_end_missing, "cohere.message-end-last"),
    (c_after_done, "cohere.message-end-last"),
]


@pytest.mark.parametrize(("corrupt", "rule"), CORRUPTIONS, ids=[c.__name__ for c, _ in CORRUPTIONS])
def test_a_corrupted_stream_trips_exactly_its_rule(
    corrupt: Callable[[list[Ev]], list[Ev]], rule: str
) -> None:
    body = implode(corrupt(copy.deepcopy(explode(full()))))
    assert rules(body) == {rule}


def test_the_round_trip_changes_nothing_by_itself() -> None:
    assert rules(implode(explode(full()))) == set()


def test_every_cohere_rule_has_a_corruption() -> None:
    assert {rule for _, rule in CORRUPTIONS} == {r for r in RULES if r.startswith("cohere.")}


# --- the command line -------------------------------------------------------------------


def test_check_passes_a_valid_stream_and_catches_a_corrupted_one(tmp_path: Path) -> None:
    good = tmp_path / "good.msgpack"
    made = replay_text("synth", "cohere", str(good), "--text", "Hi there", "--reasoning", "Hm.")
    assert made.returncode == 0, made.stderr
    passed = replay_text("check", str(good))
    assert passed.returncode == 0, passed.stdout
    assert "checked 1 stream in 1 cassette: no violations" in passed.stdout
    interaction = full()
    body = implode(c_block_order(explode(interaction)))
    response = replay.Response(
        status=200,
        headers=interaction.response.headers,
        chunks=[replay.Chunk(0.1, body)],
        end=replay.StreamEnd(0.2),
    )
    bad = tmp_path / "bad.msgpack"
    replay.Cassette([replay.Interaction(interaction.request, response)]).save(bad)
    failed = replay_text("check", str(bad))
    assert failed.returncode == 1
    assert "cohere.block-order: error: content-delta for content 1, not open" in failed.stdout
    assert "chat." not in failed.stdout


def test_ttft_is_the_first_text_delta() -> None:
    interaction = cohere.stream("Hi there", thinking="Hmm")
    texts = [e for e in interaction.response.events() if e.event == "content-delta"][
        1:
    ]  # (the first: thinking)
    assert timing.ttft(interaction) == texts[0].at


def test_check_gives_an_unknown_stream_no_dialect_findings(tmp_path: Path) -> None:
    body = b'data: {"text": "Hi", "id": null}\n\ndata: {"text": "!", "id": 2}\n\ndata: [DONE]\n\n'
    response = replay.Response(
        status=200,
        headers=[("content-type", "text/event-stream")],
        chunks=[replay.Chunk(0.1, body)],
        end=replay.StreamEnd(0.2),
    )
    path = tmp_path / "unknown.msgpack"
    request = replay.Request(method="POST", url="https://llm.example.test/v1/stream")
    replay.Cassette([replay.Interaction(request, response)]).save(path)
    checked = replay_text("check", str(path))
    assert checked.returncode == 0, checked.stdout
    assert "checked 1 stream in 1 cassette: no violations" in checked.stdout
