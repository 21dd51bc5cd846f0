"""replay.dialects: detect, validate (one corrupted stream per rule), synthetic streams
that pass validation and replay through the official SDKs with strict validation."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic as anthropic_sdk
import attrs
import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from sdk_errors import raises_through_anthropic

import replay
from replay.dialects import (
    RULES,
    SEVERITIES,
    ToolCall,
    Violation,
    anthropic,
    chat,
    detect,
    responses,
    validate,
)
from replay.dialects.common import tokenize
from replay.errors import ConfigurationError
from replay.framing.sse import parse
from replay.model import Chunk, StreamEnd
from replay.testing import streams as _streams

TEXT = "Hello there, how may I assist you today?"
REASONING = "The user greets me; a short, friendly answer fits."
TOOL = ToolCall("get_weather", {"city": "Paris", "unit": "celsius", "days": 3})
OTHER_TOOL = ToolCall("get_time", {"zone": "Europe/Paris"})


def full_responses() -> replay.Interaction:
    return responses.stream(TEXT, reasoning=REASONING, tool_call=TOOL)


def full_chat() -> replay.Interaction:
    return chat.stream(TEXT, tool_calls=[TOOL, OTHER_TOOL], include_usage=True)


def full_anthropic() -> replay.Interaction:
    return anthropic.stream(TEXT, thinking=REASONING, tool_use=TOOL)


BUILDERS = {"responses": full_responses, "chat": full_chat, "anthropic": full_anthropic}


def rules(stream: Any) -> set[str]:
    return {violation.rule for violation in validate(stream)}


# --- detect -----------------------------------------------------------------------------


def _hello(builder: Callable[..., _streams.TimedChunks], **options: Any) -> bytes:
    return b"".join(data for _, data in builder(**options))


@pytest.mark.parametrize("dialect", list(BUILDERS))
def test_detect_tells_each_synthetic_stream_apart(dialect: str) -> None:
    interaction = BUILDERS[dialect]()
    assert detect(interaction) == dialect
    assert detect(interaction.response) == dialect
    assert detect(interaction.response.body) == dialect
    assert detect(interaction.response.events()) == dialect


@pytest.mark.parametrize(
    ("body", "dialect"),
    [
        (_hello(_streams.responses_hello), "responses"),
        (_hello(_streams.chat_hello), "chat"),
        (_hello(_streams.anthropic_hello), "anthropic"),
    ],
    ids=["responses", "chat", "anthropic"],
)
def test_detect_tells_the_hello_streams_apart(body: bytes, dialect: str) -> None:
    assert detect(body) == dialect


@pytest.mark.parametrize(
    "body",
    [b"", b"data: hello\n\n", b'data: {"a": 1}\n\n', b"not an event stream"],
    ids=["empty", "text", "other-json", "garbage"],
)
def test_detect_gives_none_for_other_streams(body: bytes) -> None:
    assert detect(body) is None


# --- validate: what passes --------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        _hello(_streams.responses_hello),
        _hello(_streams.chat_hello),
        _hello(_streams.chat_hello, include_usage=True),
        _hello(_streams.anthropic_hello),
    ],
    ids=["responses", "chat", "chat-usage", "anthropic"],
)
def test_the_hello_streams_pass(body: bytes) -> None:
    assert validate(body) == []


def test_validate_accepts_every_form_of_a_stream() -> None:
    interaction = full_responses()
    body = interaction.response.body
    for stream in (interaction, interaction.response, body, parse(body)):
        assert validate(stream) == []
    assert validate(interaction.response.events(), dialect="responses") == []


def test_validate_checks_only_stream_rules_for_an_unknown_dialect() -> None:
    assert validate(b'data: {"a": 1}\n\n') == []
    assert rules(b'data: {"a": 1}\n') == {"stream.truncated"}


def test_validate_rejects_an_unknown_dialect_name() -> None:
    with pytest.raises(ConfigurationError, match="dialect"):
        validate(b"", dialect="grpc")  # type: ignore[arg-type]


def test_violations_name_rule_event_and_problem() -> None:
    body = full_responses().response.body.replace(b'"sequence_number":3,', b'"sequence_number":9,')
    violation = validate(body)[0]
    assert violation == Violation(
        "responses.sequence-number", "sequence_number 9, expected 3", index=3
    )


# --- validate: one corrupted stream per rule --------------------------------------------


@attrs.define
class Ev:
    """An event being corrupted: its name and its data (parsed JSON, or raw text)."""

    name: str
    data: Any


def explode(interaction: replay.Interaction) -> list[Ev]:
    events = parse(interaction.response.body)
    return [Ev(e.event, e.data if e.data == "[DONE]" else json.loads(e.data)) for e in events]


def implode(events: list[Ev]) -> bytes:
    text = ""
    for ev in events:
        data = ev.data if isinstance(ev.data, str) else json.dumps(ev.data)
        text += ("" if ev.name == "message" else f"event: {ev.name}\n") + f"data: {data}\n\n"
    return text.encode()


def renumber(events: list[Ev]) -> list[Ev]:
    for number, ev in enumerate(events):
        ev.data["sequence_number"] = number
    return events


def where(events: list[Ev], test: Callable[[Ev], bool]) -> list[int]:
    return [index for index, ev in enumerate(events) if test(ev)]


def of_type(kind: str) -> Callable[[Ev], bool]:
    return lambda ev: isinstance(ev.data, dict) and ev.data.get("type") == kind


def without(events: list[Ev], index: int) -> list[Ev]:
    return events[:index] + events[index + 1 :]


# Responses API -------------------------------------------------------------------------


def r_json(events: list[Ev]) -> list[Ev]:
    events[1].data = "{not json"
    return events


def r_event_type(events: list[Ev]) -> list[Ev]:
    events[where(events, of_type("response.output_text.delta"))[0]].name = "message"
    return events


def r_first_created(events: list[Ev]) -> list[Ev]:
    return renumber(events[1:])


def r_sequence(events: list[Ev]) -> list[Ev]:
    events[5].data["sequence_number"] += 7
    return events


def r_sequence_dropped(events: list[Ev]) -> list[Ev]:
    del events[5].data["sequence_number"]
    return events


def r_sequence_late(events: list[Ev]) -> list[Ev]:
    # Unnumbered at first, numbered later: not a stream from before the field existed.
    del events[0].data["sequence_number"]
    return events


def r_terminal_missing(events: list[Ev]) -> list[Ev]:
    return events[:-1]


def r_terminal_twice(events: list[Ev]) -> list[Ev]:
    return renumber([*events, copy.deepcopy(events[-1])])


def r_response_id(events: list[Ev]) -> list[Ev]:
    events[1].data["response"]["id"] = "resp_other"
    return events


def r_status(events: list[Ev]) -> list[Ev]:
    events[-1].data["response"]["status"] = "in_progress"
    return events


def r_usage(events: list[Ev]) -> list[Ev]:
    events[-1].data["response"]["usage"]["total_tokens"] += 1
    return events


def r_item_order(events: list[Ev]) -> list[Ev]:
    added = where(events, of_type("response.output_item.added"))[-1]
    return renumber([*events[: added + 1], copy.deepcopy(events[added]), *events[added + 1 :]])


def r_unclosed(events: list[Ev]) -> list[Ev]:
    return renumber(without(events, where(events, of_type("response.content_part.done"))[-1]))


def r_delta_outside(events: list[Ev]) -> list[Ev]:
    events[where(events, of_type("response.output_text.delta"))[0]].data["item_id"] = "msg_x"
    return events


def r_delta_outside_reasoning(events: list[Ev]) -> list[Ev]:
    # A text delta aimed at the reasoning item's reasoning_text part.
    delta = where(events, of_type("response.output_text.delta"))[0]
    reasoning = events[where(events, of_type("response.reasoning_text.delta"))[0]].data
    moved = copy.deepcopy(events[delta])
    moved.data.update(item_id=reasoning["item_id"], output_index=0, delta="")
    return renumber([*events[:delta], moved, *events[delta:]])


def r_delta_mismatch(events: list[Ev]) -> list[Ev]:
    events[where(events, of_type("response.reasoning_text.done"))[0]].data["text"] += "!"
    return events


def r_arguments_json(events: list[Ev]) -> list[Ev]:
    # Drop the closing brace everywhere, consistently: only the JSON is wrong.
    last_delta = where(events, of_type("response.function_call_arguments.delta"))[-1]
    events[last_delta].data["delta"] = events[last_delta].data["delta"][:-1]
    events[where(events, of_type("response.function_call_arguments.done"))[0]].data["arguments"] = (
        TOOL.arguments_json[:-1]
    )
    events[where(events, of_type("response.output_item.done"))[-1]].data["item"]["arguments"] = (
        TOOL.arguments_json[:-1]
    )
    events[-1].data["response"]["output"][-1]["arguments"] = TOOL.arguments_json[:-1]
    return events


def r_final_output(events: list[Ev]) -> list[Ev]:
    events[-1].data["response"]["output"][1]["content"][0]["text"] = "Something else."
    return events


def reasoning_items(events: list[Ev]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The reasoning item as its output_item.done gives it, and as the final output does."""
    done = next(
        ev.data["item"]
        for ev in events
        if of_type("response.output_item.done")(ev) and ev.data["item"]["type"] == "reasoning"
    )
    final = next(item for item in events[-1].data["response"]["output"] if item is not done)
    return done, final


def r_final_output_opaque_dropped(events: list[Ev]) -> list[Ev]:
    # Opaque values may differ; an opaque field that vanishes from the final output may not.
    done, _ = reasoning_items(events)
    done["encrypted_content"] = "gAAAAABo-one"
    return events


# Chat Completions ----------------------------------------------------------------------


def delta(ev: Ev) -> dict[str, Any]:
    """The first choice's delta of a chat chunk ({} for [DONE] and the usage chunk)."""
    if ev.data == "[DONE]" or not ev.data["choices"]:
        return {}
    return dict(ev.data["choices"][0]["delta"])


def content_chunks(events: list[Ev]) -> list[int]:
    return where(events, lambda ev: "content" in delta(ev))


def tool_chunks(events: list[Ev], tool: int) -> list[int]:
    return where(
        events, lambda ev: any(call["index"] == tool for call in delta(ev).get("tool_calls", []))
    )


def c_json(events: list[Ev]) -> list[Ev]:
    events[content_chunks(events)[3]].data = "garbage"
    return events


def c_done_missing(events: list[Ev]) -> list[Ev]:
    return events[:-1]


def c_done_twice(events: list[Ev]) -> list[Ev]:
    return [*events[:-1], Ev("message", "[DONE]"), events[-1]]


def c_error_last(events: list[Ev]) -> list[Ev]:
    error = Ev("message", {"error": {"message": "boom", "type": "server_error"}})
    return [*events[:4], error, *events[4:]]


def c_id(events: list[Ev]) -> list[Ev]:
    events[3].data["id"] = "chatcmpl-other"
    return events


def c_model(events: list[Ev]) -> list[Ev]:
    events[3].data["model"] = "gpt-other"
    return events


def c_role(events: list[Ev]) -> list[Ev]:
    events[2].data["choices"][0]["delta"]["role"] = "assistant"
    return events


def c_role_every_delta(events: list[Ev]) -> list[Ev]:
    # As OpenRouter and others send it; the openai SDK joins it into "assistantassistant…".
    for ev in events[1:]:
        if ev.data != "[DONE]" and ev.data["choices"]:
            ev.data["choices"][0]["delta"]["role"] = "assistant"
    return events


def c_role_missing(events: list[Ev]) -> list[Ev]:
    del events[0].data["choices"][0]["delta"]["role"]
    return events


def c_finish(events: list[Ev]) -> list[Ev]:
    events[content_chunks(events)[2]].data["choices"][0]["finish_reason"] = "stop"
    return events


def c_finish_missing(events: list[Ev]) -> list[Ev]:
    finish = where(events, lambda ev: ev.data != "[DONE]" and ev.data["choices"][:1] != [])[-1]
    events[finish].data["choices"][0]["finish_reason"] = None
    return events


def c_finish_twice(events: list[Ev]) -> list[Ev]:
    finish = where(events, lambda ev: ev.data != "[DONE]" and ev.data["choices"][:1] != [])[-1]
    return [*events[: finish + 1], copy.deepcopy(events[finish]), *events[finish + 1 :]]


def c_tool_start(events: list[Ev]) -> list[Ev]:
    del events[tool_chunks(events, 0)[0]].data["choices"][0]["delta"]["tool_calls"][0]["id"]
    return events


def c_tool_json(events: list[Ev]) -> list[Ev]:
    return without(events, tool_chunks(events, 1)[-1])


def c_tool_index(events: list[Ev]) -> list[Ev]:
    # The second call's fragments without `index`: the openai SDK's accumulator crashes.
    for index in tool_chunks(events, 1):
        del events[index].data["choices"][0]["delta"]["tool_calls"][0]["index"]
    return events


def c_usage_missing(events: list[Ev]) -> list[Ev]:
    # The chunks say "usage": null (include_usage was asked), but the usage chunk is gone.
    return without(events, len(events) - 2)


def c_usage_last(events: list[Ev]) -> list[Ev]:
    events[-3].data["usage"] = events[-2].data["usage"]
    return events


def c_usage_total(events: list[Ev]) -> list[Ev]:
    events[-2].data["usage"]["total_tokens"] += 1
    return events


# Anthropic Messages --------------------------------------------------------------------


def deltas_of(kind: str) -> Callable[[Ev], bool]:
    return lambda ev: of_type("content_block_delta")(ev) and ev.data["delta"]["type"] == kind


def a_json(events: list[Ev]) -> list[Ev]:
    events[where(events, of_type("ping"))[0]].data = "garbage"
    return events


def a_event_type(events: list[Ev]) -> list[Ev]:
    events[where(events, deltas_of("text_delta"))[0]].name = "message"
    return events


def a_start_first(events: list[Ev]) -> list[Ev]:
    ping = where(events, of_type("ping"))[0]
    return [events[ping], *without(events, ping)]


def a_block_order(events: list[Ev]) -> list[Ev]:
    return without(events, where(events, of_type("content_block_stop"))[1])


def a_block_index(events: list[Ev]) -> list[Ev]:
    for index in where(events, lambda ev: ev.data.get("index") == 2):
        events[index].data["index"] = 3
    return events


def a_delta_type(events: list[Ev]) -> list[Ev]:
    events[where(events, deltas_of("text_delta"))[0]].data["delta"]["type"] = "thinking_delta"
    return events


def a_partial_json(events: list[Ev]) -> list[Ev]:
    return without(events, where(events, deltas_of("input_json_delta"))[-1])


def a_signature(events: list[Ev]) -> list[Ev]:
    return without(events, where(events, deltas_of("signature_delta"))[0])


def a_message_delta(events: list[Ev]) -> list[Ev]:
    return without(events, where(events, of_type("message_delta"))[0])


def a_stop_missing(events: list[Ev]) -> list[Ev]:
    return events[:-1]


def a_error_last(events: list[Ev]) -> list[Ev]:
    error = Ev("error", {"type": "error", "error": {"type": "api_error", "message": "x"}})
    return [*events[:5], error, *events[5:]]


# Any stream ----------------------------------------------------------------------------


def s_utf8(events: list[Ev]) -> bytes:
    return b": \xff\n\n" + implode(events)


def s_truncated(events: list[Ev]) -> bytes:
    return implode(events)[:-10]


CORRUPTIONS = [
    ("responses", r_json, "responses.json"),
    ("responses", r_event_type, "responses.event-type"),
    ("responses", r_first_created, "responses.first-event-created"),
    ("responses", r_sequence, "responses.sequence-number"),
    ("responses", r_sequence_dropped, "responses.sequence-number"),
    ("responses", r_sequence_late, "responses.sequence-number"),
    ("responses", r_terminal_missing, "responses.terminal-event"),
    ("responses", r_terminal_twice, "responses.terminal-event"),
    ("responses", r_response_id, "responses.response-id"),
    ("responses", r_status, "responses.status"),
    ("responses", r_usage, "responses.usage-total"),
    ("responses", r_item_order, "responses.item-order"),
    ("responses", r_unclosed, "responses.unclosed"),
    ("responses", r_delta_outside, "responses.delta-outside"),
    ("responses", r_delta_outside_reasoning, "responses.delta-outside"),
    ("responses", r_delta_mismatch, "responses.delta-mismatch"),
    ("responses", r_arguments_json, "responses.arguments-json"),
    ("responses", r_final_output, "responses.final-output"),
    ("responses", r_final_output_opaque_dropped, "responses.final-output"),
    ("chat", c_json, "chat.json"),
    ("chat", c_done_missing, "chat.done-last"),
    ("chat", c_done_twice, "chat.done-last"),
    ("chat", c_error_last, "chat.error-last"),
    ("chat", c_id, "chat.id-constant"),
    ("chat", c_model, "chat.model-constant"),
    ("chat", c_role, "chat.role-first"),
    ("chat", c_role_every_delta, "chat.role-first"),
    ("chat", c_role_missing, "chat.role-first"),
    ("chat", c_finish, "chat.finish-reason"),
    ("chat", c_finish_twice, "chat.finish-reason"),
    ("chat", c_finish_missing, "chat.finish-reason"),
    ("chat", c_tool_start, "chat.tool-call-start"),
    ("chat", c_tool_json, "chat.tool-arguments-json"),
    ("chat", c_tool_index, "chat.tool-call-index"),
    ("chat", c_usage_missing, "chat.usage-missing"),
    ("chat", c_usage_last, "chat.usage-last"),
    ("chat", c_usage_total, "chat.usage-total"),
    ("anthropic", a_json, "anthropic.json"),
    ("anthropic", a_event_type, "anthropic.event-type"),
    ("anthropic", a_start_first, "anthropic.message-start-first"),
    ("anthropic", a_block_order, "anthropic.block-order"),
    ("anthropic", a_block_index, "anthropic.block-order"),
    ("anthropic", a_delta_type, "anthropic.delta-type"),
    ("anthropic", a_partial_json, "anthropic.partial-json"),
    ("anthropic", a_signature, "anthropic.signature"),
    ("anthropic", a_message_delta, "anthropic.message-delta"),
    ("anthropic", a_stop_missing, "anthropic.message-stop-last"),
    ("anthropic", a_error_last, "anthropic.error-last"),
    *[(dialect, s_utf8, "stream.utf8") for dialect in BUILDERS],
    *[(dialect, s_truncated, "stream.truncated") for dialect in BUILDERS],
]


@pytest.mark.parametrize(
    ("dialect", "corrupt", "rule"),
    CORRUPTIONS,
    ids=[f"{rule}-{corrupt.__name__}-{dialect}" for dialect, corrupt, rule in CORRUPTIONS],
)
def test_a_corrupted_stream_trips_exactly_its_rule(
    dialect: str, corrupt: Callable[[list[Ev]], list[Ev] | bytes], rule: str
) -> None:
    corrupted = corrupt(explode(BUILDERS[dialect]()))
    body = corrupted if isinstance(corrupted, bytes) else implode(corrupted)
    assert rules(body) == {rule}
    assert validate(body, dialect=dialect)  # type: ignore[arg-type]


def test_every_rule_has_a_corruption() -> None:
    # NDJSON's rules are not about server-sent events: tests/test_check.py covers them;
    # Gemini's and Cohere's corruptions are in tests/test_gemini.py and test_dialects_cohere.py;
    # JSON-RPC's need the request too: tests/test_mcp.py.
    # Converse's (and damaged event streams) are in tests/test_bedrock.py; resume's need two
    # interactions: tests/test_resume.py.
    skipped = (
        "ndjson.",
        "gemini.",
        "cohere.",
        "jsonrpc.",
        "converse.",
        "stream.eventstream",
        "resume.",
    )
    skipped += ("realtime.", "responses-ws.", "websocket.")  # tests/test_websocket_inspect.py
    sse_rules = {rule for rule in RULES if not rule.startswith(skipped)}
    assert {rule for _, _, rule in CORRUPTIONS} == sse_rules


def test_the_corruption_round_trip_changes_nothing_by_itself() -> None:
    for build in BUILDERS.values():
        assert validate(implode(explode(build()))) == []


def test_an_interaction_ended_by_an_error_is_truncated() -> None:
    interaction = full_chat()
    end = replay.StreamEnd(interaction.response.end.at, error="ReadTimeout", message="timed out")
    broken = attrs.evolve(interaction.response, end=end)
    [violation] = validate(broken)
    assert violation.rule == "stream.truncated"
    assert "ReadTimeout: timed out" in violation.message


def test_a_client_that_closed_after_the_last_event_stopped_a_whole_stream() -> None:
    interaction = full_anthropic()
    end = attrs.evolve(interaction.response.end, truncated=True)
    assert rules(attrs.evolve(interaction.response, end=end)) == set()


@pytest.mark.parametrize("stopped_by", ["client", "session"])
def test_an_interaction_stopped_before_its_last_event_is_truncated(stopped_by: str) -> None:
    response = full_anthropic().response
    events = response.body.split(b"\n\n")
    cut = b"\n\n".join(events[:4]) + b"\n\n"
    end = StreamEnd(at=response.end.at, truncated=True, stopped_by=stopped_by)
    stopped = attrs.evolve(response, chunks=[Chunk(response.end.at, cut)], end=end)
    assert rules(stopped) == {"stream.truncated"}


def test_the_utf8_violation_names_the_event_holding_the_bad_byte() -> None:
    body = full_responses().response.body.replace(b"Hello", b"Hell\xff", 1)
    utf8 = [v for v in validate(body) if v.rule == "stream.utf8"]
    index = next(i for i, e in enumerate(parse(body)) if "Hell" in e.data)
    assert [v.index for v in utf8] == [index]


# --- validate: what real providers document passes ----------------------------------------


def v_azure_filter_preamble(events: list[Ev]) -> list[Ev]:
    # Azure OpenAI: the prompt's content-filter results first, with empty choices, id and
    # model; then each choice carries its own content_filter_results.
    for ev in events:
        if ev.data != "[DONE]":
            for choice in ev.data["choices"]:
                choice["content_filter_results"] = {"hate": {"filtered": False}}
    results = [{"prompt_index": 0, "content_filter_results": {"hate": {"filtered": False}}}]
    preamble = {"choices": [], "created": 0, "id": "", "model": "", "object": ""}
    return [Ev("message", {**preamble, "prompt_filter_results": results}), *events]


def v_usage_on_the_finish_chunk(events: list[Ev]) -> list[Ev]:
    # DeepSeek: with include_usage, the usage rides on the chunk with the finish_reason.
    usage = events[-2].data["usage"]
    events = without(events, len(events) - 2)
    events[-2].data["usage"] = usage
    return events


def v_error_chunk_with_choices(events: list[Ev]) -> list[Ev]:
    # OpenRouter: the in-band error chunk still carries choice 0 and usage, and [DONE] follows.
    error = copy.deepcopy(events[2])
    error.data["error"] = {"code": 400, "message": "Token limit reached"}
    error.data["choices"][0]["delta"] = {"content": ""}
    error.data["usage"] = events[-2].data["usage"]
    return [*events[:3], error, events[-1]]


def v_unnumbered(events: list[Ev]) -> list[Ev]:
    # Responses streams recorded before the API sent sequence_number (March 2025).
    for ev in events:
        del ev.data["sequence_number"]
    return events


def v_reencrypted_reasoning(events: list[Ev]) -> list[Ev]:
    # The reasoning item's opaque encrypted_content is re-encrypted for the final output.
    done, final = reasoning_items(events)
    done["encrypted_content"], final["encrypted_content"] = "gAAAAABo-one", "gAAAAABo-two"
    return events


VARIANTS = [
    ("chat", v_azure_filter_preamble),
    ("chat", v_usage_on_the_finish_chunk),
    ("chat", v_error_chunk_with_choices),
    ("responses", v_unnumbered),
    ("responses", v_reencrypted_reasoning),
]


@pytest.mark.parametrize(("dialect", "vary"), VARIANTS, ids=[vary.__name__ for _, vary in VARIANTS])
def test_a_documented_provider_variant_passes(
    dialect: str, vary: Callable[[list[Ev]], list[Ev]]
) -> None:
    body = implode(vary(explode(BUILDERS[dialect]())))
    assert detect(body) == dialect
    assert validate(body) == []


def test_a_provider_variant_hides_no_real_deviation() -> None:
    azure = c_id(v_azure_filter_preamble(explode(full_chat())))
    assert rules(implode(azure)) == {"chat.id-constant"}
    reencrypted = r_final_output(v_reencrypted_reasoning(explode(full_responses())))
    assert rules(implode(reencrypted)) == {"responses.final-output"}


def test_every_rule_has_a_severity() -> None:
    assert set(SEVERITIES) == set(RULES)
    assert set(SEVERITIES.values()) == {"error", "warning", "note"}


def test_a_violation_carries_its_rule_s_severity() -> None:
    body = implode(c_role_every_delta(explode(full_chat())))
    assert {(v.rule, v.severity) for v in validate(body)} == {("chat.role-first", "error")}
    assert Violation("chat.usage-total", "m").severity == "note"
    assert Violation("stream.encoding", "m").severity == "error"  # not a dialect rule


def sdk_accumulates(stream_body: bytes) -> ChatCompletionStreamState:
    """What the openai SDK's own accumulator makes of a Chat Completions stream."""
    interaction = full_chat()
    response = attrs.evolve(interaction.response, chunks=[Chunk(0.1, stream_body)])
    client = openai.OpenAI(
        api_key="x",
        base_url="https://api.openai.com/v1",
        http_client=http_client(attrs.evolve(interaction, response=response)),
    )
    state = ChatCompletionStreamState()
    for chunk in client.chat.completions.create(**body(interaction)):
        state.handle_chunk(chunk)
    return state


def test_a_role_in_every_delta_is_an_error_because_the_sdk_joins_it() -> None:
    state = sdk_accumulates(implode(c_role_every_delta(explode(full_chat()))))
    assert state.current_completion_snapshot.choices[0].message.role.startswith("assistantas")
    assert SEVERITIES["chat.role-first"] == "error"


def test_a_tool_call_without_index_is_an_error_because_the_sdk_crashes() -> None:
    with pytest.raises(RuntimeError, match="`index`"):
        sdk_accumulates(implode(c_tool_index(explode(full_chat()))))
    assert SEVERITIES["chat.tool-call-index"] == "error"


# --- synthetic streams: every option combination validates ------------------------------


def combinations(**options: list[Any]) -> Iterator[dict[str, Any]]:
    for values in itertools.product(*options.values()):
        yield dict(zip(options, values, strict=True))


SYNTHETIC = [
    *(
        ("responses", options)
        for options in combinations(
            text=[TEXT, ""],
            reasoning=[None, REASONING],
            tool_call=[None, TOOL],
            failure=list(responses.FAILURES),
        )
    ),
    *(
        ("chat", options)
        for options in combinations(
            text=[TEXT, ""],
            tool_calls=[(), (TOOL,), (TOOL, OTHER_TOOL)],
            include_usage=[False, True],
            failure=list(chat.FAILURES),
        )
    ),
    *(
        ("anthropic", options)
        for options in combinations(
            text=[TEXT, ""],
            thinking=[None, REASONING],
            tool_use=[None, TOOL],
            failure=list(anthropic.FAILURES),
        )
    ),
]
MODULES = {"responses": responses, "chat": chat, "anthropic": anthropic}


@pytest.mark.parametrize(("dialect", "options"), SYNTHETIC)
def test_every_synthetic_stream_validates(dialect: str, options: dict[str, Any]) -> None:
    options = dict(options)
    interaction = MODULES[dialect].stream(options.pop("text"), **options)
    expected = {"stream.truncated"} if options["failure"] == "cut" else set()
    assert rules(interaction) == expected
    assert detect(interaction) == dialect


JSON_VALUES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
)
TOOL_CALLS = st.builds(
    ToolCall,
    name=st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
    arguments=st.dictionaries(
        st.text(st.characters(exclude_categories=("Cs",)), max_size=8), JSON_VALUES, max_size=4
    ),
)


@settings(max_examples=40, deadline=None)
@given(
    text=st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
    reasoning=st.none() | st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
    tool=st.none() | TOOL_CALLS,
    cut=st.booleans(),
)
def test_any_text_and_tool_call_make_valid_streams(
    text: str, reasoning: str | None, tool: ToolCall | None, cut: bool
) -> None:
    failure: Any = "cut" if cut else None
    expected = {"stream.truncated"} if cut else set()
    built = [
        responses.stream(text, reasoning=reasoning, tool_call=tool, failure=failure),
        chat.stream(text, tool_calls=[tool] if tool else (), failure=failure),
        anthropic.stream(text, thinking=reasoning, tool_use=tool, failure=failure),
    ]
    assert [rules(interaction) for interaction in built] == [expected] * 3


@given(st.text(st.characters(exclude_categories=("Cs",))))
def test_tokenize_loses_nothing(text: str) -> None:
    assert "".join(tokenize(text)) == text


@pytest.mark.parametrize("dialect", list(BUILDERS))
def test_synthetic_streams_are_reproducible(dialect: str) -> None:
    assert BUILDERS[dialect]() == BUILDERS[dialect]()


@pytest.mark.parametrize("dialect", list(BUILDERS))
def test_synthetic_streams_keep_the_requested_pace(dialect: str) -> None:
    interaction = MODULES[dialect].stream(TEXT, ttft=0.5, tokens_per_second=20)
    times = [chunk.at for chunk in interaction.response.chunks]
    assert times[0] == 0.5
    assert times == sorted(times)
    gaps = [round(b - a, 6) for a, b in itertools.pairwise(times)]
    assert gaps.count(0.05) == len(_streams.HELLO_TOKENS)  # one delta per word-ish piece
    assert set(gaps) <= {0.05, 0.005}


def test_text_is_cut_into_word_pieces() -> None:
    deltas = [
        json.loads(event.data)["delta"]
        for event in responses.stream(TEXT).response.events()
        if event.event == "response.output_text.delta"
    ]
    assert deltas == list(_streams.HELLO_TOKENS)


def test_a_cut_stream_ends_with_a_transport_error_mid_event() -> None:
    response = responses.stream(TEXT, failure="cut").response
    assert response.end.error == "RemoteProtocolError"
    assert not response.chunks[-1].data.endswith(b"\n\n")


@pytest.mark.parametrize(
    "options",
    [{"failure": "boom"}, {"tokens_per_second": 0}, {"ttft": -1.0}],
    ids=["failure", "tokens_per_second", "ttft"],
)
def test_a_bad_option_is_a_configuration_error(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        responses.stream(TEXT, **options)


# --- synthetic streams through the real SDKs --------------------------------------------


def http_client(interaction: replay.Interaction) -> httpx2.Client:
    cassette = replay.Cassette([interaction])
    return httpx2.Client(transport=replay.ReplayTransport(cassette, speed="instant"))


def openai_client(interaction: replay.Interaction) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="x",
        base_url="https://api.openai.com/v1",
        http_client=http_client(interaction),
        _strict_response_validation=True,
    )


def anthropic_client(interaction: replay.Interaction) -> anthropic_sdk.Anthropic:
    return anthropic_sdk.Anthropic(
        api_key="x",
        base_url="https://api.anthropic.com",
        http_client=http_client(interaction),
        _strict_response_validation=True,
    )


def body(interaction: replay.Interaction) -> dict[str, Any]:
    """The request's JSON body: the SDK call that sends it takes these as arguments."""
    return dict(json.loads(interaction.request.body))


def test_openai_reads_a_responses_stream_with_reasoning_and_a_function_call() -> None:
    interaction = full_responses()
    events = list(openai_client(interaction).responses.create(**body(interaction)))
    texts = {
        kind: "".join(e.delta for e in events if e.type == f"response.{kind}.delta")
        for kind in ("output_text", "reasoning_text", "function_call_arguments")
    }
    assert texts == {
        "output_text": TEXT,
        "reasoning_text": REASONING,
        "function_call_arguments": TOOL.arguments_json,
    }
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response.output_text == TEXT
    call = final.response.output[-1]
    assert call.type == "function_call"
    assert (call.name, json.loads(call.arguments)) == (TOOL.name, TOOL.arguments)


def test_openai_stream_helper_accumulates_a_responses_stream() -> None:
    interaction = full_responses()
    arguments = {k: v for k, v in body(interaction).items() if k != "stream"}
    with openai_client(interaction).responses.stream(**arguments) as stream:
        final = stream.get_final_response()
    assert final.output_text == TEXT
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]


@pytest.mark.parametrize(
    ("failure", "last"),
    [("failed", "response.failed"), ("incomplete", "response.incomplete"), ("error", "error")],
)
def test_openai_reads_a_failing_responses_stream(failure: str, last: str) -> None:
    interaction = responses.stream(TEXT, failure=failure)  # type: ignore[arg-type]
    events = list(openai_client(interaction).responses.create(**body(interaction)))
    assert events[-1].type == last


def test_openai_reports_a_cut_responses_stream_as_a_connection_error() -> None:
    interaction = responses.stream(TEXT, failure="cut")
    seen = []
    with pytest.raises(openai.APIConnectionError):  # noqa: PT012
        for event in openai_client(interaction).responses.create(**body(interaction)):
            seen.append(event.type)
    assert "response.output_text.delta" in seen


def test_openai_reads_a_chat_stream_with_tool_calls_and_usage() -> None:
    interaction = full_chat()
    arguments = {k: v for k, v in body(interaction).items() if k != "stream"}
    with openai_client(interaction).chat.completions.stream(**arguments) as stream:
        completion = stream.get_final_completion()
    message = completion.choices[0].message
    assert message.content == TEXT
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
    assert calls == [(TOOL.name, TOOL.arguments), (OTHER_TOOL.name, OTHER_TOOL.arguments)]
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage is not None
    assert completion.usage.total_tokens > completion.usage.completion_tokens > 0


def test_openai_raises_the_in_band_chat_error() -> None:
    interaction = chat.stream(TEXT, failure="error")
    with pytest.raises(openai.APIError, match="The server had an error"):
        list(openai_client(interaction).chat.completions.create(**body(interaction)))


def test_anthropic_reads_a_stream_with_thinking_and_tool_use() -> None:
    interaction = full_anthropic()
    arguments = {k: v for k, v in body(interaction).items() if k != "stream"}
    with anthropic_client(interaction).messages.stream(**arguments) as stream:
        message = stream.get_final_message()
    thinking, text, tool_use = message.content
    assert thinking.type == "thinking"
    assert (thinking.thinking, bool(thinking.signature)) == (REASONING, True)
    assert text.type == "text"
    assert text.text == TEXT
    assert tool_use.type == "tool_use"
    assert (tool_use.name, tool_use.input) == (TOOL.name, TOOL.arguments)
    assert message.stop_reason == "tool_use"


def test_anthropic_raises_the_in_band_error() -> None:
    interaction = anthropic.stream(TEXT, failure="error")
    with pytest.raises(anthropic_sdk.APIStatusError, match="overloaded_error"):
        list(anthropic_client(interaction).messages.create(**body(interaction)))


def test_anthropic_lets_the_transport_error_of_a_cut_stream_through() -> None:
    # anthropic 0.x lets it through; 2.x wraps it in APIConnectionError, as openai does.
    interaction = anthropic.stream(TEXT, failure="cut")
    with raises_through_anthropic(httpx2.RemoteProtocolError):
        list(anthropic_client(interaction).messages.create(**body(interaction)))
