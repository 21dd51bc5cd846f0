"""Faults on a replayed WebSocket conversation: close with a code after N messages, drop the
connection, stall, delay a message, slow; and the pure transform under them."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

import replay
from replay import faults
from replay.engine.frame_faults import close, delay, faulted
from replay.errors import ConfigurationError
from replay.model.frames import Frame
from replay.store.cassette import Cassette
from replay.testing.realtime import RealtimeOrigin

websockets = pytest.importorskip("websockets")
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosedError  # noqa: E402

CREATE = json.dumps({"type": "response.create", "response": {"instructions": "one two three"}})


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ws") / "realtime.msgpack"
    with RealtimeOrigin() as origin, replay.use_cassette(path, record_mode="once"):
        asyncio.run(_talk(origin.url))
    return path


async def _talk(url: str) -> list[tuple[float, str]]:
    """session.created, then a response.create; (seconds since it was sent, event type)
    until response.done."""
    async with connect(url) as ws:
        await ws.recv()
        sent = time.monotonic()  # (before: the replay's turn starts inside `send`)
        await ws.send(CREATE)
        seen: list[tuple[float, str]] = []
        while not seen or seen[-1][1] != "response.done":
            kind = json.loads(await ws.recv())["type"]
            seen.append((time.monotonic() - sent, kind))
        return seen


def _replayed(path: Path, *fault: Any, speed: Any = "instant") -> Any:
    url = Cassette.load(path).interactions[0].request.url
    with replay.use_cassette(path, record_mode="none", speed=speed, faults=fault):
        return asyncio.run(asyncio.wait_for(_talk(url), 10))


def _with_closed(path: Path, *fault: Any) -> tuple[list[str], Any]:
    url = Cassette.load(path).interactions[0].request.url
    seen: list[str] = []

    async def talk() -> None:
        async with connect(url) as ws:
            await ws.recv()
            await ws.send(CREATE)
            while True:
                seen.append(json.loads(await ws.recv())["type"])

    closed = websockets.exceptions.ConnectionClosed
    with (
        replay.use_cassette(path, record_mode="none", faults=fault),
        pytest.raises(closed) as raised,
    ):
        asyncio.run(asyncio.wait_for(talk(), 10))
    return seen, raised.value


def test_close_with_a_code_after_n_messages(recorded: Path) -> None:
    seen, closed = _with_closed(recorded, close(after_events=3, code=1011, reason="overloaded"))
    assert seen == ["response.created", "response.output_text.delta"]  # 3 with session.created
    assert isinstance(closed, ConnectionClosedError)
    assert closed.rcvd is not None
    assert (closed.rcvd.code, closed.rcvd.reason) == (1011, "overloaded")


def test_cut_drops_the_connection_without_a_close_frame(recorded: Path) -> None:
    seen, closed = _with_closed(recorded, faults.cut(after_events=2))
    assert seen == ["response.created"]
    assert isinstance(closed, ConnectionClosedError)
    assert closed.rcvd is None  # no close frame: code 1006


def test_a_stall_holds_what_follows_back(recorded: Path) -> None:
    seen = _replayed(recorded, faults.stall(after_events=2, seconds=0.5), speed=1)
    times = dict((kind, at) for at, kind in reversed(seen))
    assert times["response.created"] < 0.3
    assert seen[1][0] >= 0.5  # the first delta, after the stall
    assert seen[-1][1] == "response.done"


def test_a_delayed_message_comes_late_and_the_rest_never_before_it(recorded: Path) -> None:
    seen = _replayed(recorded, delay(event=3, seconds=0.4), speed=1)
    kinds = [kind for _, kind in seen]
    assert kinds[0] == "response.created"
    assert seen[1][0] >= 0.4  # message 3 of the server: the first delta
    assert all(at >= seen[1][0] for at, _ in seen[2:])
    assert kinds[-1] == "response.done"


def test_faults_on_frames_are_pure_and_keep_the_order() -> None:
    frames = (
        Frame(0.0, "server", "text", b"a"),
        Frame(0.1, "client", "text", b"q"),
        Frame(0.2, "server", "text", b"b"),
        Frame(0.3, "server", "text", b"c"),
        Frame(0.4, "client", "text", b"r"),
        Frame(0.5, "server", "text", b"d"),
    )
    slowed, drop = faulted(frames, [faults.slow(2.0)])
    assert [f.at for f in slowed] == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert drop == len(frames)
    late, _ = faulted(frames, [delay(event=2, seconds=1.0)])
    assert [f.at for f in late] == [0.0, 0.1, 1.2, 1.2, 1.2, 0.5 + 0.0 + 0.7]
    cut, drop = faulted(frames, [faults.cut(after_events=3)])
    assert [f.data for f in cut] == [b"a", b"q", b"b", b"c"]
    assert drop == 3
    closed, _ = faulted(frames, [close(after_events=1, code=4000)])
    assert [(f.kind, f.code) for f in closed] == [("text", None), ("close", 4000)]


def test_bad_fault_arguments_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        close(after_events=1, code=99)
    with pytest.raises(ConfigurationError):
        delay(event=0, seconds=1)
    assert repr(close(after_events=2, code=1011)) == "close(after_events=2, code=1011)"
