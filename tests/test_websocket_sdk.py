"""The openai SDK's realtime client (`client.realtime.connect`, on `websockets`' asyncio
client) recorded against a loopback Realtime-like origin and replayed with it stopped."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import replay
from replay.testing.realtime import RealtimeOrigin, answer

openai = pytest.importorskip("openai")
pytest.importorskip("websockets")

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


async def _talk(base_url: str, text: str) -> list[str]:
    client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY)
    seen = []
    async with client.realtime.connect(model="gpt-realtime") as connection:
        await connection.session.update(session={"type": "realtime", "instructions": "brief"})
        await connection.response.create(response={"instructions": text})
        async for event in connection:
            seen.append(event.type if event.type != "response.output_text.delta" else event.delta)
            if event.type == "response.done":
                return seen
    return seen


def test_the_openai_realtime_client_records_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "realtime.msgpack"
    with RealtimeOrigin() as origin:
        base_url = origin.url.split("/v1/")[0].replace("ws://", "http://") + "/v1"
        with replay.use_cassette(path):
            live = asyncio.run(_talk(base_url, "hello sdk"))
    assert live[3:-1] == answer("hello sdk")
    with replay.use_cassette(path, record_mode="none") as cassette:
        assert asyncio.run(asyncio.wait_for(_talk(base_url, "hello sdk"), 10)) == live
    assert cassette.unconsumed == {}
    assert KEY.encode() not in path.read_bytes()
