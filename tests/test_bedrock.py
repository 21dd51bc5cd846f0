"""AWS event streams and Bedrock's Converse stream: the framing, the dialect, and boto3.

boto3's `bedrock-runtime` `converse_stream` records live from a loopback origin that speaks
the real wire format (event-stream messages split at odd places, with gaps), then replays
with the origin stopped: botocore's own decoder (which checks the CRCs) reads the same
events, a second, differently signed request matches, and no signature, session token or
date is in the cassette.
"""

from __future__ import annotations

import itertools
import json
import zlib
from pathlib import Path
from typing import Any

import boto3
import pytest
from commands import replay_text

import replay
from replay import framing
from replay.dialects import RULES, ToolCall, converse, detect, validate
from replay.errors import EventStreamError
from replay.framing import eventstream
from replay.framing.sse import Event
from replay.redact.redactor import PLACEHOLDER
from replay.testing import Origin, Script

MODEL = "amazon.nova-micro-v1"
PATH = f"/model/{MODEL}/converse-stream"
TOKEN = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _body(**kwargs: Any) -> bytes:
    interaction = converse.stream("Hello there, how are you today?", **kwargs)
    return b"".join(interaction.response.chunks.payloads)


def _odd_pieces(body: bytes) -> list[bytes]:
    """The body cut at odd places: inside preludes, headers, payloads and CRCs."""
    cuts = [0, 5, 13, 40, 41, 97, 150, 151, 152, 300, len(body)]
    cuts = sorted({min(cut, len(body)) for cut in cuts})
    return [body[a:b] for a, b in itertools.pairwise(cuts) if b > a]


# --- the framing ------------------------------------------------------------------------


def test_messages_split_anywhere_read_the_same() -> None:
    body = _body(tool_use=ToolCall("get_weather", {"city": "Paris"}))
    whole = eventstream.parse(body)
    for size in (1, 3, 7, 64):
        parser = eventstream.EventStreamParser()
        events = [e for at in range(0, len(body), size) for e in parser.feed(body[at : at + size])]
        assert events == whole
        assert parser.complete
    names = [event.event for event in whole]
    assert names[0] == "messageStart"
    assert names[-2:] == ["messageStop", "metadata"]
    assert json.loads(whole[-1].data)["usage"]["totalTokens"] > 0


def test_headers_of_every_type_are_skipped_by_their_sizes() -> None:
    def header(name: str, kind: int, value: bytes) -> bytes:
        return bytes([len(name)]) + name.encode() + bytes([kind]) + value

    raw = b"".join(
        [
            header("t", 0, b""),
            header("b", 2, b"\x01"),
            header("s", 3, b"\x00\x02"),
            header("i", 4, b"\x00\x00\x00\x03"),
            header("l", 5, b"\x00" * 8),
            header("x", 6, b"\x00\x02ab"),
            header("d", 8, b"\x00" * 8),
            header("u", 9, b"\x11" * 16),
            header(":event-type", 7, b"\x00\x05chunk"),
        ]
    )
    assert eventstream.headers_of(raw)["i"] == 3
    prelude = (16 + len(raw) + 2).to_bytes(4, "big") + len(raw).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    message = prelude + raw + b"{}"
    message += zlib.crc32(message).to_bytes(4, "big")
    assert [(e.event, e.data) for e in eventstream.parse(message)] == [("chunk", "{}")]


@pytest.mark.parametrize("where", [2, 20, -2])
def test_a_damaged_message_is_a_clear_error(where: int) -> None:
    body = bytearray(_body())
    body[where] ^= 0x40
    with pytest.raises(EventStreamError, match=r"the message at byte \d+ has a"):
        eventstream.parse(bytes(body))


def test_a_length_no_message_can_have_is_refused() -> None:
    prelude = (2**31).to_bytes(4, "big") + (0).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    with pytest.raises(EventStreamError, match="claims"):
        eventstream.EventStreamParser().feed(prelude)


def test_detected_by_content_type_or_by_a_valid_prelude() -> None:
    interaction = converse.stream("Hi there")
    assert framing.detect(interaction.response) == "eventstream"
    assert framing.sniff(b"".join(interaction.response.chunks.payloads)) == "eventstream"
    assert framing.sniff(b'{"a": 1}\n{"b": 2}\n') == "ndjson"
    events = interaction.response.events()
    assert [e.at for e in events] == list(interaction.response.chunks.times)


# --- the dialect ------------------------------------------------------------------------


@pytest.mark.parametrize("failure", converse.FAILURES)
def test_synthetic_streams_are_converse_and_valid(failure: Any) -> None:
    interaction = converse.stream("One two three four", failure=failure)
    assert detect(interaction) == "converse"
    rules = [v.rule for v in validate(interaction)]
    assert rules == (["stream.truncated"] if failure == "cut" else [])


def test_a_corrupted_stream_is_caught() -> None:
    body = bytearray(_body())
    body[60] ^= 1
    assert [v.rule for v in validate(bytes(body), "converse")] == ["stream.eventstream"]
    events = eventstream.parse(_body(tool_use=ToolCall("f", {"a": 1})))
    broken = [e for e in events if e.event != "messageStop"]
    swapped = [events[1], events[0], *events[2:]]
    assert "converse.message-stop" in [v.rule for v in validate(broken, "converse")]
    assert "converse.first-event" in [v.rule for v in validate(swapped, "converse")]


def _events() -> list[Event]:
    return eventstream.parse(_body(tool_use=ToolCall("f", {"a": 1})))


def _at(events: list[Event], name: str, nth: int = 0) -> int:
    return [i for i, e in enumerate(events) if e.event == name][nth]


def _with(events: list[Event], index: int, **payload: Any) -> list[Event]:
    index %= len(events)
    data = {**json.loads(events[index].data), **payload}
    return [*events[:index], Event(events[index].event, json.dumps(data)), *events[index + 1 :]]


def c_json(ev: list[Event]) -> list[Event]:
    return [ev[0], Event("contentBlockDelta", "not json"), *ev[1:]]


def c_first(ev: list[Event]) -> list[Event]:
    return [ev[1], ev[0], *ev[2:]]


def c_block_order(ev: list[Event]) -> list[Event]:
    stop = _at(ev, "contentBlockStop")
    return [*ev[:1], ev[stop], *ev[1:stop], *ev[stop + 1 :]]


def c_delta(ev: list[Event]) -> list[Event]:
    return _with(ev, 1, delta={"text": "a", "toolUse": {"input": "{}"}})


def c_message_stop(ev: list[Event]) -> list[Event]:
    return [e for e in ev if e.event != "messageStop"]


def c_metadata(ev: list[Event]) -> list[Event]:
    return [e for e in ev if e.event != "metadata"]


def c_usage_total(ev: list[Event]) -> list[Event]:
    return _with(ev, -1, usage={"inputTokens": 1, "outputTokens": 1, "totalTokens": 5})


def c_exception_last(ev: list[Event]) -> list[Event]:
    return [*ev[:2], Event("throttlingException", '{"message": "slow down"}'), *ev[2:]]


CORRUPTIONS = {
    "converse.json": c_json,
    "converse.first-event": c_first,
    "converse.block-order": c_block_order,
    "converse.delta": c_delta,
    "converse.message-stop": c_message_stop,
    "converse.metadata": c_metadata,
    "converse.usage-total": c_usage_total,
    "converse.exception-last": c_exception_last,
}


@pytest.mark.parametrize("rule", list(CORRUPTIONS))
def test_a_corrupted_stream_trips_exactly_its_rule(rule: str) -> None:
    assert {v.rule for v in validate(CORRUPTIONS[rule](_events()), "converse")} == {rule}


def test_every_converse_rule_has_a_corruption() -> None:
    assert {rule for rule in RULES if rule.startswith("converse.")} == set(CORRUPTIONS)


# --- boto3 ------------------------------------------------------------------------------


def _client(url: str, signing: str) -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIDEXAMPLE" + signing,
        aws_secret_access_key=SECRET,
        aws_session_token=TOKEN,
    )


def _converse(url: str, signing: str = "") -> list[tuple[str, dict[str, Any]]]:
    response = _client(url, signing).converse_stream(
        modelId=MODEL, messages=[{"role": "user", "content": [{"text": "Say hello."}]}]
    )
    return [(name, value) for event in response["stream"] for name, value in event.items()]


def test_boto3_converse_stream_records_and_replays_offline(cassette_path: Path) -> None:
    body = _body(tool_use=ToolCall("get_weather", {"city": "Paris"}))
    chunks = [(0.02, piece) for piece in _odd_pieces(body)]
    script = Script(chunks=chunks, headers=[("content-type", eventstream.CONTENT_TYPE)])
    with Origin({PATH: script}) as origin:
        url = origin.url
        with replay.use_cassette(cassette_path, record_mode="all"):
            live = _converse(url)
        assert len(origin.requests) == 1
    assert [name for name, _ in live][:2] == ["messageStart", "contentBlockDelta"]
    assert live[-1][1]["usage"]["totalTokens"] > 0

    with replay.use_cassette(cassette_path, record_mode="none", speed="virtual") as cassette:
        replayed = _converse(url, signing="2")  # another key id: another signature
    assert replayed == live
    assert cassette.all_played

    stored = cassette_path.read_bytes()
    for secret in (TOKEN, SECRET, "Signature=", "AKIDEXAMPLE"):
        assert secret.encode() not in stored
    recorded = replay.Cassette.load(cassette_path).interactions[0]
    for name in ("authorization", "x-amz-security-token", "x-amz-date"):
        assert recorded.request.header(name) in (None, PLACEHOLDER), name
    assert validate(recorded) == []
    assert detect(recorded) == "converse"


def test_cli_reads_a_recorded_event_stream(cassette_path: Path) -> None:
    script = Script(
        chunks=[(0.01, piece) for piece in _odd_pieces(_body())],
        headers=[("content-type", eventstream.CONTENT_TYPE)],
    )
    with Origin({PATH: script}) as origin, replay.use_cassette(cassette_path, record_mode="all"):
        _converse(origin.url)
    for verb in (["show", "--events"], ["check"], ["report"]):
        done = replay_text(*verb, str(cassette_path), cwd=cassette_path.parent)
        assert done.returncode == 0, (verb, done.stdout, done.stderr)
        if verb[0] == "show":
            assert "contentBlockDelta" in done.stdout
