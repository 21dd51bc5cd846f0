"""`replay synth converse` and `replay synth anthropic-bedrock`, run as the command: what
they write passes `replay check` and replays through boto3 (its own event-stream decoder,
which checks every CRC), with no network."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pytest
from bedrock_origin import credentials
from commands import replay_text

import replay
from replay.dialects import converse, invoke

ENDPOINT = "https://bedrock-runtime.us-east-1.amazonaws.com"  # never reached: replayed


def _client() -> Any:
    return boto3.client("bedrock-runtime", endpoint_url=ENDPOINT, **credentials())


def _synth(out: Path, *arguments: str) -> None:
    made = replay_text("synth", *arguments[:1], str(out), *arguments[1:])
    assert made.returncode == 0, made.stderr
    events = len(replay.Cassette.load(out).interactions[-1].response.events())
    index = len(replay.Cassette.load(out).interactions) - 1
    assert made.stderr == f"{out}: #{index}: {arguments[0]} stream, {events} events\n"


def test_synth_converse_writes_a_stream_boto3_replays(tmp_path: Path) -> None:
    out = tmp_path / "converse.msgpack"
    _synth(
        out, "converse", "--text", "Hi there!", "--tool-call", "get_weather", '{"city": "Paris"}'
    )
    checked = replay_text("check", str(out))
    assert checked.returncode == 0, checked.stdout
    with replay.use_cassette(out, record_mode="none") as cassette:
        response = _client().converse_stream(
            modelId=converse.MODEL,
            messages=[{"role": "user", "content": [{"text": "Say hello."}]}],
        )
        events = list(response["stream"])
    assert cassette.all_played
    text = "".join(
        e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e
    )
    assert text == "Hi there!"
    tool = next(e for e in events if "contentBlockStart" in e)["contentBlockStart"]
    assert tool["start"]["toolUse"]["name"] == "get_weather"
    assert events[-2]["messageStop"]["stopReason"] == "tool_use"


def _invoke(out: Path) -> list[dict[str, Any]]:
    body = {
        "anthropic_version": invoke.VERSION,
        "max_tokens": 2048,
        "messages": [{"role": "user", "content": "Say hello."}],
    }
    with replay.use_cassette(out, record_mode="none"):
        response = _client().invoke_model_with_response_stream(
            modelId=invoke.MODEL, body=json.dumps(body)
        )
        return [json.loads(event["chunk"]["bytes"]) for event in response["body"]]


def test_synth_anthropic_bedrock_writes_a_stream_boto3_replays(tmp_path: Path) -> None:
    out = tmp_path / "invoke.msgpack"
    _synth(out, "anthropic-bedrock", "--text", "Hi there!")
    assert replay_text("check", str(out)).returncode == 0
    events = _invoke(out)
    assert next(e["type"] for e in events) == "message_start"
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert text == "Hi there!"

    failing = tmp_path / "failing.msgpack"
    _synth(failing, "anthropic-bedrock", "--text", "One two three", "--failure", "exception")
    assert replay_text("check", str(failing)).returncode == 0  # an error event ends it
    with pytest.raises(botocore.exceptions.EventStreamError, match="modelStreamErrorException"):
        _invoke(failing)


def test_a_synthetic_converse_stream_cut_short_is_reported(tmp_path: Path) -> None:
    out = tmp_path / "cut.msgpack"
    _synth(out, "converse", "--text", "One two three four", "--failure", "cut")
    checked = replay_text("check", str(out))
    assert checked.returncode == 1
    assert checked.stdout.startswith(f"{out} #0 event - stream.truncated: ")
    refused = replay_text("synth", "converse", str(out), "--reasoning", "Hmm.")
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        "replay: error: a synthetic converse stream carries no reasoning"
    ]
