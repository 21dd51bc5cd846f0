"""The other Bedrock clients, and what signing changes: aiobotocore (through aiohttp) and
anthropic's `AnthropicBedrock` / `AsyncAnthropicBedrock` (through httpx), each recorded live
from a loopback origin speaking the real wire format and replayed with it stopped: the same
events, 0 hits, at the recorded pace, no key, signature or session token in the cassette; a
request signed again matches its recording, headers matched too.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import boto3
import pytest
from aiobotocore.session import get_session
from anthropic import AnthropicBedrock, APIConnectionError, AsyncAnthropicBedrock
from bedrock_origin import (
    KEY_ID,
    SECRET,
    SECRETS,
    TOKEN,
    assert_at_recorded_times,
    credentials,
    script,
    since,
)

import replay
from replay import faults
from replay.dialects import ToolCall, converse, detect, invoke, validate
from replay.dialects.synth import append
from replay.matching import DEFAULT_MATCH_ON
from replay.matching.keys import URL_KEYS
from replay.testing import Origin

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
QUOTED = "anthropic.claude-3-5-haiku-20241022-v1%3A0"  # as botocore puts it in the path
CONVERSE = f"/model/{QUOTED}/converse-stream"
INVOKE = f"/model/{QUOTED}/invoke-with-response-stream"
INVOKE_AS_ANTHROPIC = f"/model/{MODEL}/invoke-with-response-stream"  # its SDK keeps the `:`
MESSAGES = [{"role": "user", "content": [{"text": "Say hello."}]}]
TOOL = ToolCall("get_weather", {"city": "Paris"})

Timed = list[tuple[float, Any]]


def _routes() -> dict[str, Any]:
    converse_script = script(converse.stream("Hello there, friend.", tool_use=TOOL))
    invoke_script = script(invoke.stream("Hello there, friend."))
    return {CONVERSE: converse_script, INVOKE: invoke_script, INVOKE_AS_ANTHROPIC: invoke_script}


def _stored_events(path: Path) -> list[list[float]]:
    """The times of each recorded interaction's events."""
    interactions = replay.Cassette.load(path).interactions
    for interaction in interactions:
        assert validate(interaction) == [], interaction.request.url
    return [[event.at for event in i.response.events()] for i in interactions]


def _no_secret_in(path: Path) -> None:
    stored = path.read_bytes()
    assert not [secret for secret in SECRETS if secret.encode() in stored]


# --- aiobotocore ------------------------------------------------------------------------


async def _aiobotocore(url: str, signing: str = "") -> tuple[Timed, Timed]:
    session = get_session()
    async with session.create_client(
        "bedrock-runtime", endpoint_url=url, **credentials(signing)
    ) as client:
        start = time.monotonic()
        response = await client.converse_stream(modelId=MODEL, messages=MESSAGES)
        conversed = [(time.monotonic() - start, event) async for event in response["stream"]]
        start = time.monotonic()
        response = await client.invoke_model_with_response_stream(
            modelId=MODEL, body=json.dumps({"messages": MESSAGES})
        )
        invoked = [
            (time.monotonic() - start, json.loads(event["chunk"]["bytes"]))
            async for event in response["body"]
        ]
    return conversed, invoked


def test_aiobotocore_records_and_replays_offline_at_the_recorded_pace(
    cassette_path: Path,
) -> None:
    with Origin(_routes()) as origin:
        url = origin.url
        with replay.use_cassette(cassette_path, record_mode="all"):
            live = asyncio.run(_aiobotocore(url))
        assert len(origin.requests) == 2
    assert [next(iter(event)) for _, event in live[0]][:2] == ["messageStart", "contentBlockDelta"]
    assert live[1][-1][1]["type"] == "message_stop"
    recorded = replay.Cassette.load(cassette_path).interactions
    # (aiobotocore's connector subclasses TCPConnector: read as other connectors of one's
    # own kind are, its times taken on the loop)
    assert [i.response.times for i in recorded] == ["reader"] * 2

    with replay.use_cassette(cassette_path, record_mode="none", speed=1) as cassette:
        replayed = asyncio.run(_aiobotocore(url, signing="2"))  # (the origin is stopped)
    assert cassette.all_played
    for got, wanted, times in zip(replayed, live, _stored_events(cassette_path), strict=True):
        assert [event for _, event in got] == [event for _, event in wanted]
        assert_at_recorded_times(got, times)
    _no_secret_in(cassette_path)


# --- AnthropicBedrock -------------------------------------------------------------------


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Fake AWS credentials in the environment, and no configuration of the machine's."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    for name in ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "ANTHROPIC_BEDROCK_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return


def _ask() -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Say hello."}],
    }


def _anthropic_bedrock(url: str) -> tuple[Timed, str]:
    client = AnthropicBedrock(base_url=url)
    start = time.monotonic()
    with client.messages.stream(**_ask()) as stream:
        events = [(at, e.to_dict()) for at, e in since(start, stream) if e.type != "text"]
        return events, stream.get_final_text()


async def _async_anthropic_bedrock(url: str) -> tuple[Timed, str]:
    client = AsyncAnthropicBedrock(base_url=url)
    start = time.monotonic()
    async with client.messages.stream(**_ask()) as stream:
        events = [
            (time.monotonic() - start, event.to_dict())
            async for event in stream
            if event.type != "text"
        ]
        return events, await stream.get_final_text()


def _both_anthropic_bedrock(url: str) -> list[tuple[Timed, str]]:
    return [_anthropic_bedrock(url), asyncio.run(_async_anthropic_bedrock(url))]


@pytest.mark.usefixtures("aws_env")
def test_anthropic_bedrock_sync_and_async_record_and_replay_offline(cassette_path: Path) -> None:
    with Origin(_routes()) as origin:
        url = origin.url
        with replay.use_cassette(cassette_path, record_mode="all"):
            live = _both_anthropic_bedrock(url)
        assert len(origin.requests) == 2
        assert origin.requests[0].header("x-amz-security-token") == TOKEN
    assert [text for _, text in live] == ["Hello there, friend."] * 2

    with replay.use_cassette(cassette_path, record_mode="none", speed=1) as cassette:
        replayed = _both_anthropic_bedrock(url)  # (the origin is stopped)
    assert cassette.all_played
    interactions = replay.Cassette.load(cassette_path).interactions
    for (got, text), (wanted, _), interaction in zip(replayed, live, interactions, strict=True):
        assert text == "Hello there, friend."
        assert [event for _, event in got] == [event for _, event in wanted]
        assert detect(interaction) == "anthropic"
        assert validate(interaction) == []
        events = interaction.response.events()  # (anthropic's client skips the pings)
        assert_at_recorded_times(got, [e.at for e in events if e.event != "ping"])
    _no_secret_in(cassette_path)
    match_on = [*DEFAULT_MATCH_ON, "headers"]  # signed again, at another time: still a match
    with replay.use_cassette(cassette_path, record_mode="none", match_on=match_on) as cassette:
        again = _both_anthropic_bedrock(url)
    assert cassette.all_played
    assert [[e for _, e in events] for events, _ in again] == [
        [e for _, e in events] for events, _ in live
    ]


# --- signing ----------------------------------------------------------------------------


def _boto3(url: str, signing: str) -> list[dict[str, Any]]:
    client = boto3.client("bedrock-runtime", endpoint_url=url, **credentials(signing))
    response = client.converse_stream(modelId=MODEL, messages=MESSAGES)
    return list(response["stream"])


def test_a_request_signed_again_matches_with_headers_matched_too(cassette_path: Path) -> None:
    with Origin(_routes()) as origin:
        url = origin.url
        with replay.use_cassette(cassette_path, record_mode="all"):
            live = _boto3(url, "")
    recorded = replay.Cassette.load(cassette_path).interactions[0].request
    assert recorded.header("amz-sdk-invocation-id")  # kept: it is no secret
    match_on = [*DEFAULT_MATCH_ON, "headers"]
    with replay.use_cassette(cassette_path, record_mode="none", match_on=match_on) as cassette:
        assert _boto3(url, "2") == live  # another key id, date, signature and invocation id
    assert cassette.all_played


# --- a synthetic stream, through each client, and a fault ---------------------------------


def test_a_path_escape_of_what_a_path_holds_as_it_is_matches_it() -> None:
    def path(url: str) -> object:
        return URL_KEYS["path"](urlsplit(url))

    assert path(f"http://h{INVOKE}") == path(f"http://h{INVOKE_AS_ANTHROPIC}")
    assert path("http://h/a%3a%40b") == path("http://h/a:@b")
    assert path("http://h/a%2Fb") != path("http://h/a/b")  # an escaped slash stays one
    assert path("http://h/a%2fb%20") == path("http://h/a%2Fb%20")


async def _aiobotocore_invoke(url: str, body: dict[str, Any]) -> list[str]:
    session = get_session()
    async with session.create_client("bedrock-runtime", endpoint_url=url, **credentials()) as c:
        response = await c.invoke_model_with_response_stream(
            modelId=invoke.MODEL, body=json.dumps(body)
        )
        return [json.loads(event["chunk"]["bytes"])["type"] async for event in response["body"]]


@pytest.mark.usefixtures("aws_env")
def test_a_synthetic_invoke_stream_replays_through_each_client_and_faults_reach_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "synthetic.msgpack"
    append(path, invoke.stream("Hello there, friend."))
    body = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 2048}
    ask = {"model": invoke.MODEL, "extra_body": {"anthropic_version": invoke.VERSION}, **body}
    as_boto = {"anthropic_version": invoke.VERSION, **body}
    url = "https://bedrock-runtime.us-east-1.amazonaws.com"  # never reached: replayed
    with replay.use_cassette(path, record_mode="none", allow_playback_repeats=True):
        with AnthropicBedrock(base_url=url).messages.stream(**ask) as stream:
            assert stream.get_final_text() == "Hello there, friend."
        assert asyncio.run(_aiobotocore_invoke(url, as_boto))[-1] == "message_stop"
    cut = [faults.cut(after_bytes=900)]
    with (
        replay.use_cassette(path, record_mode="none", faults=cut),
        pytest.raises(APIConnectionError, match="peer closed connection"),
        AnthropicBedrock(base_url=url).messages.stream(**ask) as stream,
    ):
        stream.get_final_text()
    with (
        replay.use_cassette(path, record_mode="none", faults=cut),
        pytest.raises(aiohttp.ClientPayloadError),
    ):
        asyncio.run(_aiobotocore_invoke(url, as_boto))
