"""WebSocket conversations through the `websockets` clients (asyncio and sync): recorded from
a loopback Realtime-like origin, replayed with the origin stopped, as a conversation."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest

import replay
from replay.errors import FrameMismatchError
from replay.store.cassette import Cassette
from replay.testing.realtime import DELTA_DELAY, RealtimeOrigin, answer

websockets = pytest.importorskip("websockets")
from websockets.asyncio.client import connect as aconnect  # noqa: E402
from websockets.sync.client import connect as sconnect  # noqa: E402

HEADERS = {"Authorization": "Bearer sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"}
UPDATE = {"type": "session.update", "session": {"instructions": "be brief"}}


def _create(text: str, event_id: str = "evt_a") -> str:
    return json.dumps(
        {"type": "response.create", "event_id": event_id, "response": {"instructions": text}}
    )


async def _turn(ws: Any, text: str, event_id: str = "evt_a") -> list[tuple[float, dict[str, Any]]]:
    """Send a response.create, read until its response.done: (seconds since sent, event)."""
    sent = time.monotonic()  # (before: the replay's turn starts inside `send`)
    await ws.send(_create(text, event_id))
    events = []
    while True:
        event = json.loads(await ws.recv())
        events.append((time.monotonic() - sent, event))
        if event["type"] == "response.done":
            return events


async def _talk(url: str, texts: tuple[str, ...] = ("hello there",)) -> list[Any]:
    """A Realtime-like session: session.update, then one response.create per text."""
    async with aconnect(url, additional_headers=HEADERS) as ws:
        created = json.loads(await ws.recv())
        await ws.send(json.dumps({**UPDATE, "event_id": "evt_u"}))
        updated = json.loads(await ws.recv())
        turns = [await _turn(ws, text, f"evt_{i}") for i, text in enumerate(texts)]
    return [created, updated, turns]


def _types(talk: list[Any]) -> list[str]:
    created, updated, turns = talk
    return [created["type"], updated["type"]] + [e["type"] for turn in turns for _, e in turn]


def _record(path: Path, texts: tuple[str, ...] = ("hello there",)) -> list[Any]:
    with RealtimeOrigin() as origin, replay.use_cassette(path, record_mode="once"):
        talk = asyncio.run(_talk(origin.url, texts))
    assert origin.connections == 1
    return talk


def _replay(path: Path, texts: tuple[str, ...] = ("hello there",), **options: Any) -> Any:
    with replay.use_cassette(path, record_mode="none", **options) as cassette:
        return asyncio.run(_talk(_url(path), texts)), cassette


def _url(path: Path) -> str:
    return Cassette.load(path).interactions[0].request.url


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, list[Any]]:
    path = tmp_path / "realtime.msgpack"
    return path, _record(path)


def test_a_conversation_is_recorded_as_one_interaction_with_its_frames(recorded: Any) -> None:
    path, talk = recorded
    [interaction] = Cassette.load(path).interactions
    assert interaction.request.method == "GET"
    assert interaction.request.url.startswith("ws://127.0.0.1:")
    assert interaction.response.status == 101
    frames = interaction.frames
    assert frames is not None
    sent = [f.event_type for f in frames if f.sender == "client" and f.kind == "text"]
    assert sent == ["session.update", "response.create"]
    got = [f.event_type for f in frames if f.sender == "server" and f.kind == "text"]
    assert got == _types(talk)
    assert [f.kind for f in frames][-2:] == ["close", "close"]
    deltas = [f.at for f in frames if f.event_type == "response.output_text.delta"]
    gaps = [b - a for a, b in itertools.pairwise(deltas)]
    assert len(gaps) >= 2
    assert (
        sum(gaps) >= DELTA_DELAY * len(gaps) * 0.8
    )  # (one late stamp can shorten a gap)  # the origin's real delays, recorded


def test_no_credential_of_the_upgrade_request_is_in_the_cassette(recorded: Any) -> None:
    path, _ = recorded
    assert b"sk-proj-abcdefghij" not in path.read_bytes()
    [interaction] = Cassette.load(path).interactions
    assert interaction.request.header("Authorization") is not None  # kept, redacted
    assert "sk-proj" not in (interaction.request.header("Authorization") or "")


def test_replays_the_same_frames_in_order_with_the_origin_stopped(recorded: Any) -> None:
    path, talk = recorded
    again, cassette = _replay(path)
    assert _types(again) == _types(talk)
    assert [e for _, e in again[2][0]] == [e for _, e in talk[2][0]]  # byte for byte: ids too
    assert cassette.play_count == 1
    assert cassette.unconsumed == {}


def test_instant_replay_is_fast(recorded: Any) -> None:
    path, _ = recorded
    started = time.monotonic()
    _replay(path, speed="instant")
    assert time.monotonic() - started < 0.2 + 0.3  # (loose: a loaded machine; see below)


def test_instant_replay_of_the_conversation_itself_takes_under_0_2_s(recorded: Any) -> None:
    path, _ = recorded
    with replay.use_cassette(path, record_mode="none", speed="instant"):

        async def timed() -> float:
            started = time.monotonic()
            await _talk(_url(path))
            return time.monotonic() - started

        assert asyncio.run(timed()) < 0.2


def _delta_gaps(turn: list[tuple[float, dict[str, Any]]]) -> list[float]:
    times = [at for at, e in turn if e["type"] == "response.output_text.delta"]
    return [b - a for a, b in itertools.pairwise(times)]


def _recorded_gaps(path: Path) -> list[float]:
    frames = Cassette.load(path).interactions[0].frames or ()
    times = [f.at for f in frames if f.event_type == "response.output_text.delta"]
    return [b - a for a, b in itertools.pairwise(times)]


def test_gaps_at_1x_on_virtual_time_are_the_recorded_ones_within_10_percent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "slow.msgpack"
    # Gaps of 0.15 s: 10% of them is more than what a loaded machine adds in waiting (which
    # virtual time counts as time passing).
    with RealtimeOrigin(delay=0.15) as origin, replay.use_cassette(path):
        asyncio.run(_talk(origin.url))
    again, _ = _replay(path, speed="virtual")
    for replayed, recorded_gap in zip(_delta_gaps(again[2][0]), _recorded_gaps(path), strict=True):
        assert replayed == pytest.approx(recorded_gap, rel=0.1)


def test_a_background_tasks_long_sleep_does_not_jump_virtual_time_past_frames(
    tmp_path: Path,
) -> None:
    # A library's keepalive task sleeps 20 s beside the client: virtual time's skipping
    # sleeps would move the clocks past frames the peer thread sends on its own waits.
    path = tmp_path / "slow.msgpack"
    with RealtimeOrigin(delay=0.15) as origin, replay.use_cassette(path):
        asyncio.run(_talk(origin.url))

    async def beside_a_keepalive() -> list[Any]:
        keepalive = asyncio.create_task(asyncio.sleep(20))
        try:
            return await _talk(_url(path))
        finally:
            keepalive.cancel()

    with replay.use_cassette(path, record_mode="none", speed="virtual"):
        again = asyncio.run(beside_a_keepalive())
    for replayed, recorded_gap in zip(_delta_gaps(again[2][0]), _recorded_gaps(path), strict=True):
        assert replayed == pytest.approx(recorded_gap, rel=0.1)


def test_frames_at_1x_on_the_real_clock_are_never_early(recorded: Any) -> None:
    path, _ = recorded
    frames = Cassette.load(path).interactions[0].frames or ()
    create = next(f.at for f in frames if f.event_type == "response.create")
    offsets = [f.at - create for f in frames if f.event_type == "response.output_text.delta"]
    again, _ = _replay(path, speed=1)
    seen = [at for at, e in again[2][0] if e["type"] == "response.output_text.delta"]
    for replayed, recorded_offset in zip(seen, offsets, strict=True):
        assert replayed >= recorded_offset * 0.99  # absolute deadlines: never early
        assert replayed < recorded_offset + 1.0  # (loose: holds with CPU hogs beside)


def test_a_different_second_response_create_gets_its_own_answer(tmp_path: Path) -> None:
    path = tmp_path / "two.msgpack"
    talk = _record(path, ("first question", "second question"))
    again, _ = _replay(path, ("second question", "first question"))  # the other order
    words = [
        "".join(e["delta"] for _, e in turn if e["type"] == "response.output_text.delta")
        for turn in again[2]
    ]
    assert words == ["".join(answer("second question")), "".join(answer("first question"))]
    assert len(talk[2]) == 2


def test_an_unknown_client_frame_raises_naming_the_nearest(recorded: Any) -> None:
    path, _ = recorded

    async def unknown() -> None:
        async with aconnect(_url(path)) as ws:
            await ws.recv()
            await ws.send(json.dumps({**UPDATE, "event_id": "evt_u"}))
            await ws.recv()
            with pytest.raises(FrameMismatchError) as raised:
                await ws.send(_create("never recorded"))
            message = str(raised.value)
            assert "never recorded" in message
            assert "Nearest recorded client frame not yet sent: #" in message
            assert "hello there" in message
            assert "field 'response' differs" in message

    with replay.use_cassette(path, record_mode="none"):
        asyncio.run(asyncio.wait_for(unknown(), 10))


def test_a_client_that_stops_reading_early_ends_cleanly(recorded: Any) -> None:
    path, _ = recorded

    async def early() -> str:
        async with aconnect(_url(path)) as ws:
            await ws.recv()
            await ws.send(json.dumps({**UPDATE, "event_id": "evt_u"}))
            await ws.recv()
            await ws.send(_create("hello there"))
            return str(json.loads(await ws.recv())["type"])  # and leaves

    with replay.use_cassette(path, record_mode="none", speed=1) as cassette:
        assert asyncio.run(asyncio.wait_for(early(), 10)) == "response.created"
    assert "server frames never read" in cassette.unconsumed[0]


def test_the_sync_client_records_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "sync.msgpack"

    def talk(url: str) -> list[str]:
        with sconnect(url, additional_headers=HEADERS) as ws:
            seen = [json.loads(ws.recv())["type"]]
            ws.send(_create("sync hello"))
            while seen[-1] != "response.done":
                seen.append(json.loads(ws.recv())["type"])
        return seen

    with RealtimeOrigin() as origin, replay.use_cassette(path, record_mode="once"):
        live = talk(origin.url)
    with replay.use_cassette(path, record_mode="none") as cassette:
        assert talk(_url(path)) == live
    assert cassette.unconsumed == {}
    assert b"sk-proj-abcdefghij" not in path.read_bytes()


def test_new_episodes_works_per_socket(tmp_path: Path) -> None:
    path = tmp_path / "episodes.msgpack"
    with RealtimeOrigin() as origin:
        with replay.use_cassette(path, record_mode="new_episodes"):
            asyncio.run(_talk(origin.url))
        assert origin.connections == 1
        with replay.use_cassette(path, record_mode="new_episodes") as cassette:
            first = asyncio.run(_talk(origin.url))  # replayed: the recorded socket
            assert origin.connections == 1
            second = asyncio.run(_talk(origin.url))  # a socket more: recorded
            assert origin.connections == 2
    assert _types(first) == _types(second)
    assert (cassette.play_count, len(cassette.recorded)) == (1, 1)
    assert len(Cassette.load(path).interactions) == 2


def test_a_blocked_network_refuses_a_live_websocket(tmp_path: Path) -> None:
    from replay.adapters.network import block_network

    with block_network(allowed_hosts=()), pytest.raises(replay.errors.NetworkBlockedError):
        asyncio.run(aconnect("ws://127.0.0.1:9/x").__aenter__())


def test_replay_makes_no_connection_to_the_origin(recorded: Any) -> None:
    path, talk = recorded
    with RealtimeOrigin() as origin:  # up, on another port: nothing must reach it
        with replay.use_cassette(path, record_mode="none"):
            again = asyncio.run(_talk(_url(path)))
        assert origin.connections == 0
    assert _types(again) == _types(talk)


def test_a_secret_in_a_client_frame_is_redacted_and_still_matches(tmp_path: Path) -> None:
    path = tmp_path / "secret.msgpack"
    secret = "sk-proj-zyxwvutsrqponmlkjihgfedcba9876543210"
    update = json.dumps({"type": "session.update", "session": {"api_key": secret}})

    async def talk(url: str) -> str:
        async with aconnect(url) as ws:
            await ws.recv()
            await ws.send(update)
            return str(json.loads(await ws.recv())["type"])

    with (
        RealtimeOrigin() as origin,
        pytest.warns(replay.errors.KeyInResponseWarning),  # the origin echoes it back
        replay.use_cassette(path),
    ):
        assert asyncio.run(talk(origin.url)) == "session.updated"
    frames = Cassette.load(path).interactions[0].frames or ()
    sent = [f.data for f in frames if f.sender == "client" and f.kind == "text"]
    assert sent
    assert all(secret.encode() not in data for data in sent)  # (server frames are stored as
    # they came, as response bodies are, and warned of)
    with replay.use_cassette(path, record_mode="none"):
        assert asyncio.run(asyncio.wait_for(talk(_url(path)), 10)) == "session.updated"


def test_a_compressed_conversation_is_recorded_uncompressed_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "deflate.msgpack"
    with RealtimeOrigin(compression="deflate") as origin, replay.use_cassette(path):
        talk = asyncio.run(_talk(origin.url))
    [interaction] = Cassette.load(path).interactions
    assert "permessage-deflate" in (interaction.response.header("Sec-WebSocket-Extensions") or "")
    assert [f.event_type for f in interaction.frames or () if f.kind == "text"][:2] == [
        "session.created",
        "session.update",
    ]
    again, _ = _replay(path)
    assert _types(again) == _types(talk)


def test_a_refused_upgrade_is_recorded_and_replayed_refused(tmp_path: Path) -> None:
    from websockets.exceptions import InvalidStatus

    path = tmp_path / "refused.msgpack"

    async def refused(url: str) -> int:
        with pytest.raises(InvalidStatus) as raised:
            async with aconnect(url):
                pass
        return int(raised.value.response.status_code)

    with RealtimeOrigin(require_key=True) as origin, replay.use_cassette(path):
        assert asyncio.run(refused(origin.url)) == 401
    [interaction] = Cassette.load(path).interactions
    assert interaction.response.status == 401
    assert interaction.response.body == b"no key\n"
    with replay.use_cassette(path, record_mode="none"):
        assert asyncio.run(asyncio.wait_for(refused(_url(path)), 10)) == 401


def test_the_sync_client_on_virtual_time_sees_the_recorded_gaps(tmp_path: Path) -> None:
    path = tmp_path / "sync-virtual.msgpack"

    def talk(url: str) -> list[float]:
        with sconnect(url) as ws:
            ws.recv()
            ws.send(_create("one two three"))
            times = []
            while json.loads(ws.recv())["type"] != "response.done":
                times.append(time.monotonic())
        return [b - a for a, b in itertools.pairwise(times)]

    with RealtimeOrigin(delay=0.15) as origin, replay.use_cassette(path):
        talk(origin.url)
    with replay.use_cassette(path, record_mode="none", speed="virtual"):
        gaps = talk(_url(path))
    assert gaps[1:] == pytest.approx(_recorded_gaps(path), rel=0.1)  # (the first: created)


def test_a_server_that_closes_is_replayed_closing_with_its_code(tmp_path: Path) -> None:
    path = tmp_path / "closes.msgpack"

    async def talk(url: str) -> tuple[list[str], int | None]:
        async with aconnect(url) as ws:
            await ws.send(_create("bye now"))
            seen = [json.loads(message)["type"] async for message in ws]
            return seen, ws.close_code

    with RealtimeOrigin(close_after=1) as origin, replay.use_cassette(path):
        live = asyncio.run(talk(origin.url))
    assert live[1] == 1000
    with replay.use_cassette(path, record_mode="none") as cassette:
        assert asyncio.run(asyncio.wait_for(talk(_url(path)), 10)) == live
    assert cassette.unconsumed == {}
