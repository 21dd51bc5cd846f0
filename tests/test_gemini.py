"""Gemini: the JSON-array framing, the Gemini dialect (detect, one corruption per rule,
synthetic streams in both framings), and google-genai recording from a loopback origin that
speaks Gemini's wire format, then replaying with the origin stopped, on each of its
transports (httpx sync; aiohttp and httpx async)."""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from commands import replay_text
from hypothesis import given, settings
from hypothesis import strategies as st
from pacing import EARLY, LATE

import replay
from replay import framing
from replay.dialects import RULES, ToolCall, detect, gemini, validate
from replay.dialects.texts import stream_texts
from replay.framing.jsonarray import JSONArrayParser, parse
from replay.inspect import timing
from replay.testing import Origin, Script

TEXT = "Hello there, how may I assist you today?"
THOUGHT = "A greeting: answer briefly."
CALL = ToolCall("get_weather", {"city": "Paris"})
#: google-genai's path for a model named gemini-test at a base_url of its own (`?alt=sse`).
SSE_PATH = "/v1/models/gemini-test:streamGenerateContent"
#: google-genai subclasses aiohttp's ClientSession, which aiohttp warns about: not ours.
GENAI_SUBCLASSES_SESSION = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession:DeprecationWarning"
)


def body_of(interaction: replay.Interaction) -> bytes:
    return b"".join(interaction.response.chunks.payloads)


def rules(stream: Any) -> set[str]:
    return {violation.rule for violation in validate(stream)}


# --- the JSON-array framing -------------------------------------------------------------

ARRAY = (
    b'\xef\xbb\xbf [{\n  "a": "x]}\\"{,",\n  "b": [1, {"c": "\xc3\xa9"}]\n}\n,\r\n'
    b'{"d": 2}\r\n, 3, "s,t"\n]'
)


def test_a_json_array_is_cut_into_its_elements() -> None:
    assert [event.data for event in parse(ARRAY)] == [
        '{\n  "a": "x]}\\"{,",\n  "b": [1, {"c": "é"}]\n}',
        '{"d": 2}',
        "3",
        '"s,t"',
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(ARRAY)), max_size=12))
def test_chunked_anywhere_it_gives_the_same_events(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(ARRAY)]
    parser = JSONArrayParser()
    events = []
    for start, end in itertools.pairwise(bounds):
        events += parser.feed(ARRAY[start:end])
    assert events + parser.close() == parse(ARRAY)
    assert parser.complete


def test_an_element_is_an_event_once_it_closes_and_a_cut_one_is_none() -> None:
    parser = JSONArrayParser()
    assert parser.feed(b'[{"a": 1') == []
    assert [e.data for e in parser.feed(b'}, {"b"')] == ['{"a": 1}']
    assert parser.close() == []
    assert not parser.complete


def test_the_parser_holds_one_element_at_a_time() -> None:
    # A long stream fed element by element: what is held never grows past one element.
    parser = JSONArrayParser()
    parser.feed(b"[")
    for number in range(2000):
        element = f'{{"n": {number}}}'
        [event] = parser.feed(("," if number else "").encode() + element.encode())
        assert event.data == element
        assert parser._pending == []  # nothing held between elements


def test_a_body_that_is_no_array_has_no_events() -> None:
    assert parse(b'{"a": 1}') == []
    assert framing.sniff(b'[{"a": 1}]') is None  # one object in an array: a plain answer
    assert framing.sniff(b'[{"a": 1},\n{"a": 2}]') == "json-array"
    assert framing.sniff(b"[1, 2]") is None


def test_events_have_the_time_of_the_chunk_that_closed_them() -> None:
    interaction = gemini.stream("One two", framing="json-array")
    response = interaction.response
    assert framing.detect(response) == "json-array"
    events = response.events()
    assert [e.at for e in events] == list(response.chunks.times[:-1])  # (the last: "]")
    assert len(events) == framing.count(response) == 2


# --- the dialect ------------------------------------------------------------------------

FRAMINGS = ["sse", "json-array"]


@pytest.mark.parametrize("kind", FRAMINGS)
@pytest.mark.parametrize("failure", gemini.FAILURES)
def test_every_synthetic_stream_is_gemini_and_valid(kind: Any, failure: Any) -> None:
    interaction = gemini.stream(
        TEXT, thinking=THOUGHT, function_call=CALL, failure=failure, framing=kind
    )
    assert detect(interaction) == "gemini"
    assert rules(interaction) == ({"stream.truncated"} if failure == "cut" else set())


@pytest.mark.parametrize("kind", FRAMINGS)
def test_the_texts_read_back(kind: Any) -> None:
    interaction = gemini.stream(TEXT, thinking=THOUGHT, function_call=CALL, framing=kind)
    assert stream_texts(interaction) == {
        "reasoning": THOUGHT,
        "text": TEXT,
        "tool call 0": 'get_weather({"city":"Paris"})',
    }


def chunks_of(kind: str) -> list[Any]:
    interaction = gemini.stream(TEXT, thinking=THOUGHT, function_call=CALL, framing=kind)
    events = framing.events(interaction.response)
    return [json.loads(event.data) for event in events]


def encode(chunks: list[Any], kind: str) -> bytes:
    """The chunks as a body: SSE (raw text kept as it is) or a JSON array."""
    texts = [c if isinstance(c, str) else json.dumps(c) for c in chunks]
    if kind == "sse":
        return b"".join(f"data: {text}\r\n\r\n".encode() for text in texts)
    return ("[" + ",\r\n".join(texts) + "]").encode()


def candidate(chunk: Any) -> Any:
    return chunk["candidates"][0]


def g_json(chunks: list[Any]) -> list[Any]:
    chunks[2] = "garbage" if isinstance(chunks[2], dict) else chunks[2]
    return chunks


def g_candidates(chunks: list[Any]) -> list[Any]:
    chunks[2]["candidates"] = {"index": 0}
    return chunks


def g_content(chunks: list[Any]) -> list[Any]:
    candidate(chunks[3])["content"]["role"] = "user"
    return chunks


def g_parts(chunks: list[Any]) -> list[Any]:
    candidate(chunks[3])["content"]["parts"] = [{"txt": "oops"}]
    return chunks


def g_text_delta(chunks: list[Any]) -> list[Any]:
    parts = [candidate(chunk)["content"]["parts"][0] for chunk in chunks]
    so_far = ""
    for part in parts:
        if "text" in part and not part.get("thought"):
            so_far += part["text"]
            part["text"] = so_far  # each chunk the whole text so far
    return chunks


def g_finish_missing(chunks: list[Any]) -> list[Any]:
    del candidate(chunks[-1])["finishReason"]
    return chunks


def g_finish_early(chunks: list[Any]) -> list[Any]:
    candidate(chunks[3])["finishReason"] = "STOP"
    return chunks


def g_usage(chunks: list[Any]) -> list[Any]:
    del chunks[-1]["usageMetadata"]
    return chunks


def g_usage_total(chunks: list[Any]) -> list[Any]:
    chunks[-1]["usageMetadata"]["totalTokenCount"] += 7
    return chunks


def g_model(chunks: list[Any]) -> list[Any]:
    chunks[4]["modelVersion"] = "gemini-other"
    return chunks


def g_response_id(chunks: list[Any]) -> list[Any]:
    chunks[4]["responseId"] = "other"
    return chunks


def g_error_last(chunks: list[Any]) -> list[Any]:
    error = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    return [*chunks[:4], error, *chunks[4:]]


CORRUPTIONS: list[tuple[Callable[[list[Any]], list[Any]], str]] = [
    (g_json, "gemini.json"),
    (g_candidates, "gemini.candidates"),
    (g_content, "gemini.content"),
    (g_parts, "gemini.parts"),
    (g_text_delta, "gemini.text-delta"),
    (g_finish_missing, "gemini.finish-reason"),
    (g_finish_early, "gemini.finish-reason"),
    (g_usage, "gemini.usage"),
    (g_usage_total, "gemini.usage-total"),
    (g_model, "gemini.model-constant"),
    (g_response_id, "gemini.response-id"),
    (g_error_last, "gemini.error-last"),
]


@pytest.mark.parametrize("kind", FRAMINGS)
@pytest.mark.parametrize(("corrupt", "rule"), CORRUPTIONS, ids=[c.__name__ for c, _ in CORRUPTIONS])
def test_a_corrupted_stream_trips_exactly_its_rule(
    kind: str, corrupt: Callable[[list[Any]], list[Any]], rule: str
) -> None:
    body = encode(corrupt(copy.deepcopy(chunks_of(kind))), kind)
    assert rules(body) == {rule}
    assert validate(body, dialect="gemini")


def test_the_round_trip_changes_nothing_by_itself() -> None:
    for kind in FRAMINGS:
        assert rules(encode(chunks_of(kind), kind)) == set()


def test_every_gemini_rule_has_a_corruption() -> None:
    assert {rule for _, rule in CORRUPTIONS} == {r for r in RULES if r.startswith("gemini.")}


def test_a_blocked_prompt_breaks_no_rule() -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {}}
    assert rules(encode([blocked], "sse")) == set()


def test_a_json_array_cut_short_is_truncated() -> None:
    body = body_of(gemini.stream(TEXT, framing="json-array"))
    assert rules(body[:-1]) == {"stream.truncated"}  # (the closing `]` missing)


# --- the command line -------------------------------------------------------------------


def cassette(path: Path, *interactions: replay.Interaction) -> str:
    replay.Cassette(list(interactions)).save(path)
    return str(path)


@pytest.mark.parametrize("kind", FRAMINGS)
def test_check_passes_a_valid_stream_and_catches_a_corrupted_one(tmp_path: Path, kind: Any) -> None:
    good = gemini.stream(TEXT, function_call=CALL, framing=kind)
    passed = replay_text("check", cassette(tmp_path / "good.msgpack", good))
    assert passed.returncode == 0, passed.stdout
    assert "checked 1 stream in 1 cassette: no violations" in passed.stdout
    body = encode(g_finish_missing(chunks_of(kind)), kind)
    response = replay.Response(
        status=200,
        headers=good.response.headers,
        chunks=[replay.Chunk(0.1, body)],
        end=replay.StreamEnd(0.2),
    )
    bad = replay.Interaction(good.request, response)
    failed = replay_text("check", cassette(tmp_path / "bad.msgpack", bad))
    assert failed.returncode == 1
    assert "gemini.finish-reason: warning: candidate 0 has no finishReason" in failed.stdout


def test_show_events_reads_a_json_array(tmp_path: Path) -> None:
    path = cassette(tmp_path / "array.msgpack", gemini.stream("Hi there", framing="json-array"))
    shown = replay_text("show", "--events", path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count('"candidates"') == 2


# --- google-genai, recorded from a loopback origin and replayed offline --------------------


def gemini_script(**options: Any) -> Script:
    """Gemini's SSE answer, as the API sends it, each event 0.1 s after the one before."""
    interaction = gemini.stream("Hello there, friend.", model="gemini-test", **options)
    chunks = [(0.1, data) for data in interaction.response.chunks.payloads]
    return Script(chunks=chunks, headers=[("content-type", "text/event-stream")])


def client(base_url: str, transport: str) -> Any:
    from google import genai
    from google.genai import types

    options: dict[str, Any] = {"base_url": base_url}
    if transport == "httpx-async":
        options["httpx_async_client"] = httpx.AsyncClient()
    return genai.Client(api_key="gm-key-unique-9Qz", http_options=types.HttpOptions(**options))


def generate_sync(base_url: str, transport: str) -> list[tuple[float, str]]:
    genai = client(base_url, transport)  # (held: a client collected closes its connections)
    started = time.monotonic()
    stream = genai.models.generate_content_stream(model="gemini-test", contents="hi")
    return [(time.monotonic() - started, chunk.text or "") for chunk in stream]


async def _generate_async(base_url: str, transport: str) -> list[tuple[float, str]]:
    genai = client(base_url, transport)  # (held: a client collected closes its connections)
    started = time.monotonic()
    stream = await genai.aio.models.generate_content_stream(model="gemini-test", contents="hi")
    return [(time.monotonic() - started, chunk.text or "") async for chunk in stream]


def generate_async(base_url: str, transport: str) -> list[tuple[float, str]]:
    return anyio.run(_generate_async, base_url, transport)


TRANSPORTS = {"httpx": generate_sync, "aiohttp": generate_async, "httpx-async": generate_async}


def assert_at_recorded_times(arrived: list[tuple[float, str]], times: list[float]) -> None:
    """Each chunk came no earlier than recorded, and no more than LATE after."""
    assert len(arrived) == len(times)
    for index, ((at, _), due) in enumerate(zip(arrived, times, strict=True)):
        assert -EARLY <= at - due <= LATE, f"chunk {index}: {at - due:+.3f} s off"


@GENAI_SUBCLASSES_SESSION
@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_google_genai_records_and_replays_offline_at_the_recorded_pace(
    tmp_path: Path, transport: str
) -> None:
    if transport == "aiohttp":
        pytest.importorskip("aiohttp")  # genai's async client uses it when installed
    generate = TRANSPORTS[transport]
    path = tmp_path / "gemini.msgpack"
    with Origin({SSE_PATH: gemini_script()}) as origin:
        base_url = origin.url
        with replay.use_cassette(path, record_mode="all"):
            live = generate(base_url, transport)
        hits = len(origin.requests)
        sent = origin.requests[0]
    assert hits == 1
    assert sent.header("x-goog-api-key") == "gm-key-unique-9Qz"
    [interaction] = replay.Cassette.load(path).interactions
    assert "gm-key-unique-9Qz" not in repr(interaction)
    assert "alt=sse" in interaction.request.url
    assert detect(interaction) == "gemini"
    assert validate(interaction) == []
    with replay.use_cassette(path, record_mode="none", speed=1) as played:
        replayed = generate(base_url, transport)  # (the origin is stopped)
    assert played.all_played
    assert [text for _, text in replayed] == [text for _, text in live]
    assert "".join(text for _, text in replayed) == "Hello there, friend."
    assert_at_recorded_times(replayed, list(interaction.response.chunks.times))


def fetch_array(url: str) -> Iterator[bytes]:
    with httpx.Client() as http, http.stream("POST", url, json={"contents": []}) as response:
        yield from response.iter_raw()


def test_a_json_array_stream_records_with_its_key_redacted_and_checks(tmp_path: Path) -> None:
    interaction = gemini.stream(TEXT, model="gemini-test", framing="json-array")
    chunks = [(0.05, data) for data in interaction.response.chunks.payloads]
    script = Script(chunks=chunks, headers=[("content-type", "application/json; charset=UTF-8")])
    path = tmp_path / "array.msgpack"
    with Origin({SSE_PATH: script}) as origin:
        url = f"{origin.url}{SSE_PATH}?key=AIzaSyUniqueKey0123456789abcdefghijkl"
        with replay.use_cassette(path, record_mode="all"):
            live = b"".join(fetch_array(url))
    assert live == body_of(interaction)
    text = path.read_bytes()
    assert b"AIzaSyUniqueKey0123456789abcdefghijkl" not in text
    [recorded] = replay.Cassette.load(path).interactions
    assert framing.detect(recorded.response) == "json-array"
    assert len(recorded.response.events()) == len(interaction.response.events())
    checked = replay_text("check", str(path))
    assert checked.returncode == 0, checked.stdout
    with replay.use_cassette(path, record_mode="none"):
        assert b"".join(fetch_array(url)) == live


@pytest.mark.parametrize("kind", FRAMINGS)
def test_ttft_is_the_first_text_not_the_first_thought(kind: Any) -> None:
    interaction = gemini.stream("Hi there", thinking="Hmm now", framing=kind)
    events = interaction.response.events()
    assert timing.first_event(interaction) == events[0].at
    assert timing.ttft(interaction) == events[2].at  # after the two thought chunks
    assert len(timing.token_events(interaction)) == 2


def test_report_reads_a_json_array(tmp_path: Path) -> None:
    path = cassette(tmp_path / "array.msgpack", gemini.stream("Hi there", framing="json-array"))
    made = replay_text("report", path, "-o", str(tmp_path / "report.html"))
    assert made.returncode == 0, made.stderr
    page = (tmp_path / "report.html").read_text()
    assert "gemini" in page
