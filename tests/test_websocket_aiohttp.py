"""aiohttp's `ClientSession.ws_connect`: a conversation recorded from a loopback
Realtime-like origin and replayed with it stopped, on the same core as `websockets`'."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

import replay
from replay.errors import FrameMismatchError
from replay.store.cassette import Cassette
from replay.testing.realtime import RealtimeOrigin, answer

aiohttp = pytest.importorskip("aiohttp")
pytest.importorskip("websockets")

HEADERS = {"Authorization": "Bearer sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"}


def _create(text: str) -> str:
    return json.dumps({"type": "response.create", "response": {"instructions": text}})


async def _talk(url: str, texts: tuple[str, ...] = ("hello aiohttp",)) -> list[str]:
    seen = []
    async with aiohttp.ClientSession() as session, session.ws_connect(url, headers=HEADERS) as ws:
        seen.append(json.loads(await ws.receive_str())["type"])
        for text in texts:
            await ws.send_str(_create(text))
            while seen[-1] != "response.done" or len(seen) < 2:
                event = json.loads(await ws.receive_str())
                seen.append(event.get("delta") or event["type"])
            seen.append("|")
    return seen


def test_ws_connect_records_and_replays_with_the_origin_stopped(tmp_path: Path) -> None:
    path = tmp_path / "aiohttp.msgpack"
    with RealtimeOrigin() as origin, replay.use_cassette(path):
        live = asyncio.run(_talk(origin.url))
    assert live[2:-2] == answer("hello aiohttp")
    [interaction] = Cassette.load(path).interactions
    assert interaction.response.status == 101
    assert interaction.frames
    assert b"sk-proj-abcdefghij" not in path.read_bytes()
    with replay.use_cassette(path, record_mode="none") as cassette:
        started = time.monotonic()
        again = asyncio.run(asyncio.wait_for(_talk(origin.url), 10))
        assert time.monotonic() - started < 0.5  # instant (loose: a loaded machine)
    assert again == live
    assert cassette.unconsumed == {}


def test_ws_connect_replays_a_conversation_and_refuses_an_unknown_frame(tmp_path: Path) -> None:
    path = tmp_path / "two.msgpack"
    with RealtimeOrigin() as origin, replay.use_cassette(path):
        asyncio.run(_talk(origin.url, ("one thing", "another thing")))
    with replay.use_cassette(path, record_mode="none"):
        again = asyncio.run(asyncio.wait_for(_talk(origin.url, ("another thing",)), 10))
    assert again[2:-2] == answer("another thing")
    with (
        replay.use_cassette(path, record_mode="none"),
        pytest.raises(FrameMismatchError, match="Nearest recorded client frame"),
    ):
        asyncio.run(asyncio.wait_for(_talk(origin.url, ("never said",)), 10))


def test_ws_connect_that_stops_reading_early_ends_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "early.msgpack"
    with RealtimeOrigin() as origin, replay.use_cassette(path):
        asyncio.run(_talk(origin.url))

    async def early() -> str:
        async with aiohttp.ClientSession() as session, session.ws_connect(origin.url) as ws:
            await ws.receive_str()
            await ws.send_str(_create("hello aiohttp"))
            return str(json.loads(await ws.receive_str())["type"])

    with replay.use_cassette(path, record_mode="none", speed=1) as cassette:
        assert asyncio.run(asyncio.wait_for(early(), 10)) == "response.created"
    assert "server frames never read" in cassette.unconsumed[0]
