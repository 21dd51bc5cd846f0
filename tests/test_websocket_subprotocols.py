"""Credentials a browser's WebSocket client carries in `Sec-WebSocket-Protocol` (OpenAI's
`openai-insecure-api-key.<key>`, Deepgram's `token, <key>`) never reach the cassette, even
when the server answers with the item that holds one; and a replay still answers the
client with the subprotocol it offered, so the client accepts the upgrade."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import serve
from websockets.sync.client import connect

import replay
from replay.model import Interaction, Request, Response
from replay.redact.redactor import Redactor

KEY = "sk-proj-0123456789abcdefABCDEF0123456789"
EPHEMERAL = "ek_68af1c2b3d4e5f60718293a4b5c6d7e8"
TOKEN = "3f8a9c2b1d4e5f60718293a4b5c6d7e8f9a0b1c2"


@pytest.fixture
def origin() -> Iterator[tuple[str, list[int]]]:
    """A server choosing the last subprotocol offered (the one that holds the key)."""
    ready, stop, where, hits = threading.Event(), threading.Event(), [], [0]

    async def echo(ws: Any) -> None:
        hits[0] += 1
        async for message in ws:
            await ws.send(f"you sent {message}")

    def choose(connection: Any, offered: list[str]) -> str | None:
        return offered[-1] if offered else None

    async def main() -> None:
        async with serve(echo, "127.0.0.1", 0, select_subprotocol=choose) as server:
            where.append(f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/listen")
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.02)

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    ready.wait(10)
    yield where[0], hits
    stop.set()
    thread.join(10)


@pytest.mark.parametrize(
    "offered",
    [
        ["realtime", f"openai-insecure-api-key.{KEY}"],
        ["realtime", f"openai-insecure-api-key.{EPHEMERAL}"],
        ["token", TOKEN],
    ],
    ids=["openai-key", "openai-ephemeral", "deepgram-token"],
)
def test_a_key_in_the_subprotocols_is_not_stored_and_the_replay_is_accepted(
    origin: tuple[str, list[int]], offered: list[str], tmp_path: Path
) -> None:
    url, hits = origin
    path = tmp_path / "ws.msgpack"

    def talk() -> tuple[str | None, str]:
        with connect(url, subprotocols=offered) as ws:  # type: ignore[arg-type]
            ws.send("hello")
            return ws.subprotocol, str(ws.recv())

    with replay.use_cassette(path, record_mode="all"):
        live = talk()
    stored = path.read_bytes()
    for secret in (KEY, EPHEMERAL, TOKEN):
        assert secret.encode() not in stored
    with replay.use_cassette(path, record_mode="none"):
        assert talk() == live == (offered[-1], "you sent hello")
    assert hits[0] == 1


def test_subprotocols_offered_without_spaces_keep_the_one_the_server_chose() -> None:
    offered = "realtime,chat"  # (no key: nothing to hide, nothing hidden)
    interaction = Interaction(
        Request(method="GET", url="ws://h/v1", headers=[("Sec-WebSocket-Protocol", offered)]),
        Response(status=101, headers=[("Sec-WebSocket-Protocol", "realtime")]),
        frames=(),
    )
    cleaned = Redactor().interaction(interaction)
    assert cleaned is not None
    assert cleaned.response.header("Sec-WebSocket-Protocol") == "realtime"
    assert cleaned.request.header("Sec-WebSocket-Protocol") == offered
