"""Bedrock's `InvokeModelWithResponseStream`: `chunk` messages read as the model's own events.

Each `chunk` holds base64 `bytes` of one of the model's JSON events (Anthropic Messages
events for Claude): `events()`, `check`, `show --events`, `report` and `ttft` read those;
boto3's `invoke_model_with_response_stream` records live from a loopback origin that speaks
the real wire format, and replays with the origin stopped at the recorded pace.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pytest
from bedrock_origin import SECRETS, assert_at_recorded_times, credentials, script, since
from commands import replay_text

import replay
from replay.dialects import ToolCall, anthropic, detect, invoke, validate
from replay.framing import eventstream
from replay.framing.invoke import inner, unwrap_events, wrap
from replay.framing.sse import Event
from replay.inspect import timing
from replay.testing import Origin

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
PATH = "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/invoke-with-response-stream"
TOOL = ToolCall("get_weather", {"city": "Paris"})


def _chunk(event: dict[str, Any]) -> bytes:
    headers = {":event-type": "chunk", ":message-type": "event"}
    return eventstream.encode(headers, wrap(json.dumps(event).encode()))


def test_a_chunk_reads_as_the_event_it_holds() -> None:
    made = invoke.stream("Hello there, friend.", tool_use=TOOL)
    events = made.response.events()
    plain = anthropic.stream("Hello there, friend.", tool_use=TOOL).response.events()
    assert [e.event for e in events] == [e.event for e in plain]
    assert [e.at for e in events] == [e.at for e in plain]
    assert json.loads(events[-1].data)["amazon-bedrock-invocationMetrics"]["outputTokenCount"]
    assert timing.ttft(made) == timing.ttft(anthropic.stream("Hello there, friend."))
    assert timing.token_events(made)[0].event == "content_block_delta"


def test_a_chunk_of_a_model_without_event_types_stays_a_chunk() -> None:
    body = _chunk({"generation": "Hi", "stop_reason": None}) + _chunk({"generation": "!"})
    events = eventstream.parse(body)
    assert [e.event for e in unwrap_events(events)] == ["chunk", "chunk"]
    assert json.loads(unwrap_events(events)[0].data) == {"generation": "Hi", "stop_reason": None}
    assert inner('{"bytes": "not base64!"}') is None
    assert inner(json.dumps({"bytes": base64.b64encode(b"\xff").decode()})) is None
    assert inner('{"p": "abc"}') is None


def test_an_exception_reads_as_the_error_anthropics_client_makes_of_it() -> None:
    made = invoke.stream("One two three four five", failure="exception")
    last = made.response.events()[-1]
    assert last.event == "error"
    assert json.loads(last.data)["error"]["type"] == "modelStreamErrorException"
    assert validate(made) == []
    alone = [Event("throttlingException", '{"message": "slow"}')]
    assert unwrap_events(alone) == tuple(alone)  # no chunk: not an invoke stream


@pytest.mark.parametrize("failure", invoke.FAILURES)
def test_synthetic_streams_are_anthropic_and_valid(failure: Any) -> None:
    made = invoke.stream("One two three four", failure=failure)
    assert detect(made) == "anthropic"
    rules = [v.rule for v in validate(made)]
    assert rules == (["stream.truncated"] if failure == "cut" else [])


def test_a_corrupted_invoke_stream_is_caught() -> None:
    messages = list(invoke.stream("One two three").response.chunks.payloads)  # one each
    without_stop = b"".join(messages[:-1])
    assert [v.rule for v in validate(without_stop)] == ["anthropic.message-stop-last"]
    swapped = b"".join([messages[1], messages[0], *messages[2:]])
    assert "anthropic.message-start-first" in [v.rule for v in validate(swapped)]
    damaged = bytearray(b"".join(messages))
    damaged[30] ^= 1
    assert [v.rule for v in validate(bytes(damaged))] == ["stream.eventstream"]


# --- boto3 ------------------------------------------------------------------------------


def _invoke(url: str, signing: str = "") -> list[tuple[float, dict[str, Any]]]:
    client = boto3.client("bedrock-runtime", endpoint_url=url, **credentials(signing))
    body = {
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Say hello."}],
    }
    start = time.monotonic()
    response = client.invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(body))
    return [
        (at, json.loads(event["chunk"]["bytes"])) for at, event in since(start, response["body"])
    ]


def test_boto3_invoke_stream_records_and_replays_offline_at_the_recorded_pace(
    cassette_path: Path,
) -> None:
    with Origin({PATH: script(invoke.stream("Hello there, friend.", tool_use=TOOL))}) as origin:
        url = origin.url
        with replay.use_cassette(cassette_path, record_mode="all"):
            live = _invoke(url)
        assert len(origin.requests) == 1
    kinds = [event["type"] for _, event in live]
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"

    with replay.use_cassette(cassette_path, record_mode="none", speed=1) as cassette:
        replayed = _invoke(url, signing="2")  # (the origin is stopped; another signature)
    assert cassette.all_played
    assert [event for _, event in replayed] == [event for _, event in live]
    [recorded] = replay.Cassette.load(cassette_path).interactions
    assert_at_recorded_times(replayed, [e.at for e in recorded.response.events()])

    stored = cassette_path.read_bytes()
    assert not [secret for secret in SECRETS if secret.encode() in stored]
    assert [json.loads(e.data) for e in recorded.response.events()] == [e for _, e in live]
    assert detect(recorded) == "anthropic"
    assert validate(recorded) == []
    assert (
        timing.ttft(recorded) == recorded.response.events()[kinds.index("content_block_delta")].at
    )


def test_boto3_sees_a_replayed_exception_as_its_own_error(cassette_path: Path) -> None:
    failing = invoke.stream("One two three four five", failure="exception")
    with Origin({PATH: script(failing)}) as origin, replay.use_cassette(cassette_path):
        with pytest.raises(botocore.exceptions.EventStreamError, match="modelStreamError"):
            _invoke(origin.url)
        url = origin.url
    with (
        replay.use_cassette(cassette_path, record_mode="none"),
        pytest.raises(botocore.exceptions.EventStreamError, match="modelStreamError"),
    ):
        _invoke(url)


def test_the_cli_reads_the_inner_events(cassette_path: Path) -> None:
    with (
        Origin({PATH: script(invoke.stream("Hello there."))}) as origin,
        replay.use_cassette(cassette_path, record_mode="all"),
    ):
        _invoke(origin.url)
    shown = replay_text("show", "--events", str(cassette_path), cwd=cassette_path.parent)
    assert shown.returncode == 0, shown.stderr
    assert "content_block_delta" in shown.stdout
    assert "Hello" in shown.stdout
    for verb in ("check", "report"):
        done = replay_text(verb, str(cassette_path), cwd=cassette_path.parent)
        assert done.returncode == 0, (verb, done.stdout, done.stderr)
