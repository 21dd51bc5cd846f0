"""`replay diff`: two cassettes compared event by event, in text, and in timing."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from commands import replay_text as run_replay

import replay
from replay.dialects import ToolCall, anthropic, chat, responses
from replay.dialects.texts import stream_texts
from replay.inspect.diff import (
    HIDDEN,
    CassetteDiff,
    EventChange,
    TextDiff,
    Timing,
    diff,
    diff_files,
    format_diff,
    pairs,
)
from replay.model import Chunk, Interaction, Request, Response, StreamEnd

TEXT = "Hello there, how may I assist you today?"
OTHER_TEXT = "Hello there, how can I help you today?"  # tokens 8 and 10 differ
TOOL = ToolCall("get_weather", {"city": "Paris"})


def cassette(*interactions: Interaction) -> replay.Cassette:
    return replay.Cassette(list(interactions))


def compare(a: Interaction, b: Interaction) -> CassetteDiff:
    return diff(cassette(a), cassette(b))


def with_chunks(interaction: Interaction, chunks: list[Chunk]) -> Interaction:
    return attrs.evolve(interaction, response=attrs.evolve(interaction.response, chunks=chunks))


def with_ids_renamed(interaction: Interaction) -> Interaction:
    """The same stream as another recording of it would be: every id different."""
    first = json.loads(interaction.response.events()[0].data)
    digest = first["response"]["id"].removeprefix("resp_").encode()
    chunks = [
        Chunk(chunk.at, chunk.data.replace(digest, b"0" * len(digest)))
        for chunk in interaction.response.chunks
    ]
    return with_chunks(interaction, chunks)


def json_interaction(body: bytes, status: int = 200) -> Interaction:
    return Interaction(
        Request(method="GET", url="https://api.openai.com/v1/models"),
        Response(
            status=status,
            headers=[("content-type", "application/json")],
            chunks=[Chunk(0.1, body)],
        ),
    )


# --- what counts as a difference ----------------------------------------------------------


def test_a_cassette_does_not_differ_from_itself() -> None:
    result = compare(responses.stream(TEXT), responses.stream(TEXT))
    (item,) = result.interactions
    assert (item.notes, item.changes, item.texts) == ((), (), ())
    assert not result.differs
    assert not result.timing_differs


def test_timing_alone_is_reported_but_is_no_difference() -> None:
    result = compare(responses.stream(TEXT), responses.stream(TEXT, ttft=0.5))
    (item,) = result.interactions
    assert not result.differs
    assert result.timing_differs
    assert item.timing_a is not None
    assert item.timing_b is not None
    assert (item.timing_a.first, item.timing_b.first) == (0.3, 0.5)
    assert item.timing_b.total - item.timing_a.total == pytest.approx(0.2)


def test_ids_and_timestamps_are_not_compared_by_default() -> None:
    interaction = responses.stream(TEXT, tool_call=TOOL)
    result = compare(interaction, with_ids_renamed(interaction))
    assert not result.differs
    assert f'"item_id":"{HIDDEN}"' in result.interactions[0].events_a[4].data


def test_ids_are_compared_when_no_field_is_ignored() -> None:
    interaction = responses.stream(TEXT)
    renamed = with_ids_renamed(interaction)
    result = diff(cassette(interaction), cassette(renamed), ignore_fields=())
    count = len(interaction.response.events())
    assert result.interactions[0].changes == (EventChange("changed", 0, count, 0, count),)
    assert result.interactions[0].texts == ()


def test_changed_events_and_texts_are_found() -> None:
    (item,) = compare(responses.stream(TEXT), responses.stream(OTHER_TEXT)).interactions
    assert item.changes == (
        EventChange("changed", 8, 9, 8, 9),  # " may" / " can"
        EventChange("changed", 10, 11, 10, 11),  # " assist" / " help"
        EventChange("changed", 14, 18, 14, 18),  # the done events and the final response
    )
    assert item.texts == (TextDiff("text", TEXT, OTHER_TEXT),)
    assert item.differs


def test_an_added_and_a_removed_event_are_found() -> None:
    full = anthropic.stream(TEXT)
    chunks = list(full.response.chunks)
    shorter = with_chunks(full, chunks[:5] + chunks[6:])  # without the delta ","
    (added,) = compare(shorter, full).interactions
    assert added.changes == (EventChange("added", 5, 5, 5, 6),)
    assert added.texts == (TextDiff("text", TEXT.replace(",", ""), TEXT),)
    (removed,) = compare(full, shorter).interactions
    assert removed.changes == (EventChange("removed", 5, 6, 5, 5),)


def test_an_interaction_only_one_cassette_has_differs() -> None:
    one, two = responses.stream(TEXT), chat.stream(TEXT)
    result = diff(cassette(one), cassette(one, two))
    assert [item.differs for item in result.interactions] == [False, True]
    assert (result.interactions[1].a, result.interactions[1].b) == (None, two)
    assert "#1 POST https://api.openai.com/v1/chat/completions: only in B" in format_diff(result)


def test_the_end_of_a_stream_is_compared() -> None:
    clean = responses.stream(TEXT)
    end = StreamEnd(clean.response.end.at, error="RemoteProtocolError", message="peer closed")
    broken = attrs.evolve(clean, response=attrs.evolve(clean.response, end=end))
    (item,) = compare(clean, broken).interactions
    assert item.notes == ("end: eof in A, RemoteProtocolError in B",)
    assert item.changes == ()


@pytest.mark.parametrize(
    ("old", "new", "notes"),
    [
        ("ClientPayloadError", "RemoteProtocolError", ()),  # aiohttp's name, stored before
        ("SocketTimeoutError", "ReadTimeout", ()),
        (
            "ReadTimeoutError",
            "RemoteProtocolError",
            ("end: ReadTimeout in A, RemoteProtocolError in B",),
        ),
    ],
)
def test_ends_compare_by_the_name_they_are_stored_under_now(
    old: str, new: str, notes: tuple[str, ...]
) -> None:
    clean = responses.stream(TEXT)
    at = clean.response.end.at
    a, b = (
        attrs.evolve(clean, response=attrs.evolve(clean.response, end=StreamEnd(at, error=name)))
        for name in (old, new)
    )
    (item,) = compare(a, b).interactions
    assert item.notes == notes


def test_a_response_that_is_no_stream_is_compared_by_status_and_body() -> None:
    (item,) = compare(json_interaction(b"{}"), json_interaction(b'{"a": 1}', 500)).interactions
    assert item.notes == ("status: 200 in A, 500 in B", "body differs: 2 bytes in A, 8 in B")
    assert (item.events_a, item.changes) == ((), ())


def test_requests_are_compared_by_method_url_and_body_as_json() -> None:
    a = chat.stream(TEXT)
    b = attrs.evolve(a, request=attrs.evolve(a.request, url=a.request.url + "?x=1"))
    reordered = json.dumps(dict(reversed(json.loads(a.request.body).items()))).encode()
    c = attrs.evolve(a, request=attrs.evolve(a.request, body=reordered))
    assert compare(a, b).interactions[0].notes == (
        f"request: POST {a.request.url} in A, POST {a.request.url}?x=1 in B",
    )
    assert not compare(a, c).differs
    # Only the request differs: the verdict says so, not "response".
    assert f"#0 POST {a.request.url}: differs: request" in format_diff(compare(a, b)).splitlines()


@pytest.mark.parametrize("depth", [3_000, 100_000])
def test_request_bodies_and_events_nested_past_the_parser_are_compared(depth: int) -> None:
    def nested(tail: bytes) -> bytes:
        return b'{"n": ' + b"[" * depth + tail + b"]" * depth + b"}"

    a = json_interaction(nested(b"1"))
    a = attrs.evolve(a, request=attrs.evolve(a.request, method="POST", body=nested(b"1")))
    b = attrs.evolve(a, request=attrs.evolve(a.request, body=nested(b"2")))
    event = Chunk(0.1, b"data: " + nested(b"1") + b"\n\n")
    sse = with_chunks(attrs.evolve(a, response=attrs.evolve(a.response, headers=[])), [event])
    # a RecursionError before: comparing the bodies, then reading the events' JSON
    assert compare(a, b).interactions[0].notes == ("request body differs",)
    assert not compare(a, a).differs
    assert not compare(sse, sse).differs


def test_interactions_are_paired_by_position_the_longer_cassette_alone_at_its_end() -> None:
    one, two, three = responses.stream("1"), responses.stream("2"), responses.stream("3")
    assert pairs(replay.Cassette([one, two]), replay.Cassette([three])) == [
        (0, one, three),
        (1, two, None),
    ]
    assert [
        item.index
        for item in diff(replay.Cassette([one]), replay.Cassette([two, three])).interactions
    ] == [0, 1]


# --- timing and texts ---------------------------------------------------------------------


def test_timing_is_that_of_the_events() -> None:
    body = [Chunk(0.1, b"data: 1\n\n"), Chunk(0.2, b"data: 2\n\ndata: 3"), Chunk(0.5, b"\n\n")]
    response = Response(
        status=200, headers=[("content-type", "text/event-stream")], chunks=body, end=StreamEnd(0.6)
    )
    assert Timing.of(response, response.events()) == Timing(0.1, 0.6, 0.2, 0.3)


def test_timing_of_a_response_that_is_no_stream_is_that_of_its_chunks() -> None:
    response = json_interaction(b"{}").response
    assert Timing.of(response, None) == Timing(0.1, 0.1, None, None)


@pytest.mark.parametrize(
    ("interaction", "expected"),
    [
        (
            responses.stream(TEXT, reasoning="Think.", tool_call=TOOL),
            {"reasoning": "Think.", "text": TEXT, "tool call 0": TOOL.name + '({"city":"Paris"})'},
        ),
        (
            chat.stream(TEXT, tool_calls=[TOOL, ToolCall("get_time", {})], include_usage=True),
            {
                "text": TEXT,
                "tool call 0": 'get_weather({"city":"Paris"})',
                "tool call 1": "get_time({})",
            },
        ),
        (
            anthropic.stream(TEXT, thinking="Think.", tool_use=TOOL),
            {"thinking": "Think.", "text": TEXT, "tool call 0": 'get_weather({"city":"Paris"})'},
        ),
        (json_interaction(b"{}"), {}),
    ],
    ids=["responses", "chat", "anthropic", "no-dialect"],
)
def test_stream_texts_join_each_dialects_deltas(
    interaction: Interaction, expected: dict[str, str]
) -> None:
    assert stream_texts(interaction) == expected
    assert list(stream_texts(interaction)) == list(expected)  # in order of appearance


# --- the text form ------------------------------------------------------------------------


def test_the_text_form_shows_events_texts_and_timing() -> None:
    result = compare(responses.stream(TEXT), responses.stream(OTHER_TEXT, ttft=0.5))
    lines = format_diff(result, "old.msgpack", "new.msgpack").splitlines()
    assert lines[:3] == [
        "--- A: old.msgpack",
        "+++ B: new.msgpack",
        "#0 POST https://api.openai.com/v1/responses: differs: events, texts",
    ]
    assert lines[3] == "  @@ changed: A event 8, B event 8 @@"
    assert lines[4].startswith("  -    8 response.output_text.delta")
    assert lines[4].endswith('"delta":" may","logprobs":[]}')
    assert lines[5].endswith('"delta":" can","logprobs":[]}')
    assert f"    A: {TEXT!r}" in lines
    assert f"    B: {OTHER_TEXT!r}" in lines
    timing = lines.index("  timing (ms)          A        B    B - A")
    assert lines[timing + 1] == "  first event      300.0    500.0   +200.0"
    assert lines[-1] == "1 of 1 interaction differs; timing differs in 1"


def test_the_text_form_of_equal_cassettes_is_short() -> None:
    text = format_diff(compare(responses.stream(TEXT), responses.stream(TEXT)))
    assert text.splitlines()[2].endswith(": same events and texts")
    assert text.endswith("1 interaction: no differences in events or texts; timing differs in 0\n")


# --- the command --------------------------------------------------------------------------


def save(path: Path, *interactions: Interaction) -> str:
    cassette(*interactions).save(path)
    return str(path)


def test_the_command_exits_0_when_only_timing_differs(tmp_path: Path) -> None:
    a = save(tmp_path / "a.msgpack", responses.stream(TEXT))
    b = save(tmp_path / "b.msgpack", with_ids_renamed(responses.stream(TEXT, ttft=0.5)))
    result = run_replay("diff", a, b)
    assert (result.returncode, result.stderr) == (0, "")
    assert ": same events and texts, different timing" in result.stdout
    assert result.stdout.endswith("timing differs in 1\n")
    assert diff_files(a, b) == diff(replay.Cassette.load(a), replay.Cassette.load(b))


def test_the_command_exits_1_when_streams_differ(tmp_path: Path) -> None:
    a = save(tmp_path / "a.msgpack", responses.stream(TEXT))
    b = save(tmp_path / "b.msgpack", responses.stream(OTHER_TEXT))
    result = run_replay("diff", a, b)
    assert result.returncode == 1
    assert "  text differs:" in result.stdout.splitlines()


def test_the_command_compares_ids_with_exact(tmp_path: Path) -> None:
    a = save(tmp_path / "a.msgpack", responses.stream(TEXT))
    b = save(tmp_path / "b.msgpack", with_ids_renamed(responses.stream(TEXT)))
    assert run_replay("diff", a, b).returncode == 0
    assert run_replay("diff", "--exact", a, b).returncode == 1


def test_the_command_reports_a_missing_cassette_in_one_line(tmp_path: Path) -> None:
    a = save(tmp_path / "a.msgpack", responses.stream(TEXT))
    result = run_replay("diff", a, str(tmp_path / "missing.msgpack"))
    assert (result.returncode, result.stdout) == (1, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith("replay: error: ")
    assert "missing.msgpack" in line
