"""`replay serve` answering WebSocket upgrades from a cassette, and `replay proxy` recording
them, as subprocesses on 127.0.0.1: the `websockets` client and a raw socket speaking RFC
6455 by hand as clients, a loopback Realtime-like origin behind (stopped for the replays)."""

from __future__ import annotations

import base64
import itertools
import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from test_serve import running

import replay
from replay.store.cassette import Cassette
from replay.testing.realtime import RealtimeOrigin, answer

websockets = pytest.importorskip("websockets")
from websockets.exceptions import ConnectionClosedError, InvalidStatus  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
TEXTS = ("hello there", "bye now")
PATH = "/v1/realtime?model=gpt-realtime"


def _create(text: str) -> str:
    return json.dumps({"type": "response.create", "response": {"instructions": text}})


def _talk(url: str, texts: tuple[str, ...] = TEXTS) -> list[Any]:
    """session.created, then per text: its answer and the gaps between its deltas."""
    with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        said: list[Any] = [json.loads(ws.recv())["type"]]
        for text in texts:
            ws.send(_create(text))
            words, times = [], []
            while (event := json.loads(ws.recv()))["type"] != "response.done":
                if event["type"] == "response.output_text.delta":
                    words.append(event["delta"])
                    times.append(time.monotonic())
            said.append(("".join(words), [b - a for a, b in itertools.pairwise(times)]))
    return said


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ws") / "realtime.msgpack"
    with RealtimeOrigin(delay=0.1) as origin, replay.use_cassette(path, record_mode="once"):
        _talk(origin.url)
    return path


def test_serve_replays_the_conversation_to_the_websockets_client(recorded: Path) -> None:
    with running("serve", str(recorded)) as server:
        said = _talk(server.url.replace("http://", "ws://") + PATH)
        line = server.wait_for("(WebSocket)")
    assert said[0] == "session.created"
    assert [words for words, _ in said[1:]] == ["".join(answer(text)) for text in TEXTS]
    assert all(gap >= 0.09 for _, gaps in said[1:] for gap in gaps)  # 1x: the recorded 0.1 s
    assert "interaction 0" in line
    assert "frames" in line


def test_a_second_response_create_gets_its_own_answer_in_any_order(recorded: Path) -> None:
    with running("serve", str(recorded), "--speed", "instant") as server:
        said = _talk(server.url.replace("http://", "ws://") + PATH, TEXTS[::-1])
    assert [words for words, _ in said[1:]] == ["".join(answer(text)) for text in TEXTS[::-1]]


def test_a_message_the_recording_never_saw_closes_with_1008_naming_the_nearest(
    recorded: Path,
) -> None:
    with running("serve", str(recorded), "--speed", "instant") as server:
        with connect(server.url.replace("http://", "ws://") + PATH) as ws:
            ws.recv()
            ws.send(_create("something else"))
            with pytest.raises(ConnectionClosedError) as closed:
                ws.recv()
        line = server.wait_for("has no match")
        nearest = server.wait_for("Nearest recorded client frame")
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1008
    assert "response.create" in line
    assert "hello there" in nearest


def test_an_unrecorded_path_is_refused_with_a_404(recorded: Path) -> None:
    with running("serve", str(recorded), "--speed", "instant") as server:
        with pytest.raises(InvalidStatus) as refused:
            connect(server.url.replace("http://", "ws://") + "/v1/other").close()
        server.wait_for("404:")
    assert refused.value.response.status_code == 404


def test_a_close_fault_spec_closes_with_its_code(recorded: Path) -> None:
    fault = "close(after_events=3, code=1011, reason='overloaded')"
    with running("serve", str(recorded), "--speed", "instant", "--fault", fault) as server:  # noqa: SIM117
        with connect(server.url.replace("http://", "ws://") + PATH) as ws:
            ws.recv()
            ws.send(_create(TEXTS[0]))
            got = [json.loads(ws.recv())["type"], json.loads(ws.recv())["type"]]
            with pytest.raises(ConnectionClosedError) as closed:
                ws.recv()
    assert got == ["response.created", "response.output_text.delta"]
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1011, "overloaded")


# --- a client that is not the websockets library: RFC 6455 by hand on a raw socket ---------


def _raw_frame(sock: socket.socket) -> tuple[int, bytes]:
    def exactly(size: int) -> bytes:
        data = b""
        while len(data) < size:
            more = sock.recv(size - len(data))
            assert more, "the server closed the connection"
            data += more
        return data

    first, second = exactly(2)
    size = second & 0x7F
    if size == 126:
        size = struct.unpack("!H", exactly(2))[0]
    elif size == 127:
        size = struct.unpack("!Q", exactly(8))[0]
    return first & 0x0F, exactly(size)


def _raw_send(sock: socket.socket, text: str) -> None:
    data, mask = text.encode(), os.urandom(4)
    head = bytes((0x81, 0x80 | 126)) + struct.pack("!H", len(data)) if len(data) > 125 else None
    head = head or bytes((0x81, 0x80 | len(data)))
    sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def test_a_raw_socket_client_speaking_rfc_6455_replays_too(recorded: Path) -> None:
    with running("serve", str(recorded), "--speed", "instant") as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            key = base64.b64encode(os.urandom(16)).decode()
            sock.sendall(
                (
                    f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n"
                ).encode()
            )
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(1)
            assert head.startswith(b"HTTP/1.1 101")
            opcode, data = _raw_frame(sock)
            assert (opcode, json.loads(data)["type"]) == (1, "session.created")
            _raw_send(sock, _create(TEXTS[0]))
            types = []
            while not types or types[-1] != "response.done":
                opcode, data = _raw_frame(sock)
                types.append(json.loads(data)["type"])
    assert types[0] == "response.created"
    assert types.count("response.output_text.delta") == len(answer(TEXTS[0]))


# --- replay proxy ---------------------------------------------------------------------------


def test_the_proxy_records_a_conversation_that_serve_then_replays(tmp_path: Path) -> None:
    out = tmp_path / "proxied.msgpack"
    with RealtimeOrigin(delay=0.02) as origin:
        target = "http://" + origin.url.split("://", 1)[1].split("/", 1)[0]
        with running("proxy", "--target", target, "-o", str(out)) as proxy:
            live = _talk(proxy.url.replace("http://", "ws://") + PATH)
            proxy.wait_for("recorded GET ws://")
    assert origin.connections == 1
    sent = {name.lower(): value for name, value in origin.headers[0].items()}
    assert sent["authorization"] == f"Bearer {KEY}"  # passed on
    [interaction] = Cassette.load(out).interactions
    assert interaction.frames is not None
    assert interaction.response.status == 101
    assert KEY.encode() not in out.read_bytes()
    with running("serve", str(out), "--speed", "instant") as server:
        replayed = _talk(server.url.replace("http://", "ws://") + PATH)
    assert [said for said, _ in replayed[1:]] == [said for said, _ in live[1:]]


def test_a_conversation_outlives_the_request_timeout(recorded: Path) -> None:
    # The request timeout bounds the upgrade request's arrival, not the conversation after.
    with running("serve", str(recorded), "--request-timeout", "0.2") as server:
        said = _talk(server.url.replace("http://", "ws://") + PATH)
    assert [words for words, _ in said[1:]] == ["".join(answer(text)) for text in TEXTS]
    assert "408" not in server.stderr


def test_what_a_client_left_unsent_is_logged_when_it_leaves(recorded: Path) -> None:
    with running("serve", str(recorded), "--speed", "instant") as server:
        said = _talk(server.url.replace("http://", "ws://") + PATH, TEXTS[:1])
        line = server.wait_for("ended:")
    assert said[1][0] == "".join(answer(TEXTS[0]))
    assert "1 client frame never sent (first: response.create)" in line


def test_the_proxy_passes_a_refused_upgrade_on_and_records_it(tmp_path: Path) -> None:
    out = tmp_path / "refused.msgpack"
    with RealtimeOrigin(require_key=True) as origin:
        target = "http://" + origin.url.split("://", 1)[1].split("/", 1)[0]
        with running("proxy", "--target", target, "-o", str(out)) as proxy:
            with pytest.raises(InvalidStatus) as refused:
                connect(proxy.url.replace("http://", "ws://") + PATH).close()
            proxy.wait_for("recorded GET ws://")
    assert refused.value.response.status_code == 401
    [interaction] = Cassette.load(out).interactions
    assert interaction.response.status == 401
    assert interaction.response.body == b"no key\n"


def test_the_openai_realtime_client_replays_through_serve(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    import asyncio

    async def talk(base_url: str) -> list[str]:
        client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY)
        seen = []
        async with client.realtime.connect(model="gpt-realtime") as connection:
            await connection.response.create(response={"instructions": "hi sdk"})
            async for event in connection:
                seen.append(event.type)
                if event.type == "response.done":
                    break
        return seen

    path = tmp_path / "sdk.msgpack"
    with RealtimeOrigin(delay=0.01) as origin, replay.use_cassette(path):
        live = asyncio.run(talk(origin.url.split("/v1/")[0].replace("ws://", "http://") + "/v1"))
    with running("serve", str(path), "--speed", "instant") as server:
        replayed = asyncio.run(asyncio.wait_for(talk(server.url + "/v1"), 20))
    assert replayed == live
    assert live[-1] == "response.done"


def test_a_cut_fault_spec_closes_with_1011_after_its_messages(recorded: Path) -> None:
    cut = ("--fault", "cut(after_events=2)")
    with running("serve", str(recorded), "--speed", "instant", *cut) as server:  # noqa: SIM117
        with connect(server.url.replace("http://", "ws://") + PATH) as ws:
            ws.recv()
            ws.send(_create(TEXTS[0]))
            got = json.loads(ws.recv())["type"]
            with pytest.raises(ConnectionClosedError) as closed:
                ws.recv()
    assert got == "response.created"
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1011
