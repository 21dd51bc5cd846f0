"""The httpx family's other paths go through the cassette: httpcore (and httpcore2) pools and
connections used directly, and a duck-typed transport handed to an httpx client.

Each records against a real loopback origin with its chunk timing, replays with the origin
seeing nothing more, refuses an unrecorded request in replay mode, and is refused by a
network block, as httpx's own requests are.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpcore
import httpx
import pytest

import replay
from replay.errors import CassetteMismatchError, NetworkBlockedError
from replay.testing import Origin, Script

GAP = 0.2  # seconds between the origin's two chunks
TWO = Script(chunks=[(0.0, b"data: a\n\n"), (GAP, b"data: b\n\n")])
CUT = Script(chunks=[(0.0, b"data: a\n\n")], end="drop")
BODY = b"data: a\n\ndata: b\n\n"


def _cores() -> list[ModuleType]:
    cores = [httpcore]
    with contextlib.suppress(ImportError):
        cores.append(importlib.import_module("httpcore2"))
    return cores


@pytest.fixture(params=_cores(), ids=lambda core: core.__name__)
def core(request: pytest.FixtureRequest) -> ModuleType:
    module: ModuleType = request.param
    return module


@pytest.fixture
def origin() -> Iterator[Origin]:
    with Origin({"/two": TWO, "/cut": CUT}) as server:
        yield server


def _timed_stream(core: ModuleType, url: str) -> list[tuple[float, bytes]]:
    start = time.monotonic()
    with core.ConnectionPool() as pool, pool.stream("GET", url) as response:
        assert response.status == 200
        return [(time.monotonic() - start, piece) for piece in response.iter_stream()]


def test_an_httpcore_pool_records_with_timing_and_replays_offline(
    core: ModuleType, origin: Origin, tmp_path: Path
) -> None:
    path = tmp_path / "core.msgpack"
    with replay.use_cassette(path, record_mode="all"):
        recorded = _timed_stream(core, f"{origin.url}/two")
        posted = core.request("POST", f"{origin.url}/two?n=2", content=b"hello")
    assert b"".join(piece for _, piece in recorded) == BODY
    assert posted.content == BODY
    assert len(origin.requests) == 2
    stored = replay.Cassette.load(path).interactions
    assert [i.request.method for i in stored] == ["GET", "POST"]
    assert stored[1].request.body == b"hello"
    times = stored[0].response.chunks.times
    assert times[-1] - times[0] >= GAP * 0.9

    with replay.use_cassette(path, record_mode="none", speed=1):
        replayed = _timed_stream(core, f"{origin.url}/two")
        assert core.request("POST", f"{origin.url}/two?n=2", content=b"hello").content == BODY
        with pytest.raises(CassetteMismatchError):
            core.request("GET", f"{origin.url}/two?unrecorded")
    assert len(origin.requests) == 2
    assert b"".join(piece for _, piece in replayed) == BODY
    assert replayed[-1][0] - replayed[0][0] >= GAP * 0.9  # waited as recorded (a lower bound)


def test_an_async_httpcore_pool_records_and_replays_offline(
    core: ModuleType, origin: Origin, tmp_path: Path
) -> None:
    path = tmp_path / "acore.msgpack"

    async def ask() -> list[bytes]:
        async with core.AsyncConnectionPool() as pool:
            whole = await pool.request("GET", f"{origin.url}/two")
            async with pool.stream("GET", f"{origin.url}/two?n=2") as response:
                pieces = [piece async for piece in response.aiter_stream()]
        return [whole.content, b"".join(pieces)]

    with replay.use_cassette(path, record_mode="all"):
        assert asyncio.run(ask()) == [BODY, BODY]
    with replay.use_cassette(path, record_mode="none"):
        assert asyncio.run(ask()) == [BODY, BODY]
    assert len(origin.requests) == 2
    assert len(replay.Cassette.load(path).interactions) == 2


def test_an_httpcore_connection_used_directly_is_routed(origin: Origin, tmp_path: Path) -> None:
    path = tmp_path / "conn.msgpack"
    port = int(origin.url.rsplit(":", 1)[1])
    target = httpcore.Origin(b"http", b"127.0.0.1", port)
    for mode in ("all", "none"):
        with replay.use_cassette(path, record_mode=mode), httpcore.HTTPConnection(target) as conn:
            assert conn.request("GET", f"{origin.url}/two").content == BODY
    assert len(origin.requests) == 1


def test_a_recorded_cut_replays_as_httpcores_own_error(
    core: ModuleType, origin: Origin, tmp_path: Path
) -> None:
    path = tmp_path / "cut.msgpack"
    for mode in ("all", "none"):
        with (
            replay.use_cassette(path, record_mode=mode),
            pytest.raises(core.RemoteProtocolError),
        ):
            core.request("GET", f"{origin.url}/cut")
    assert len(origin.requests) == 1


def test_a_network_block_refuses_httpcore_used_directly(core: ModuleType, origin: Origin) -> None:
    with replay.block_network(allowed_hosts=()):
        with pytest.raises(NetworkBlockedError):
            core.request("GET", f"{origin.url}/two")
        with pytest.raises(NetworkBlockedError):
            asyncio.run(core.AsyncConnectionPool().request("GET", f"{origin.url}/two"))
    assert len(origin.requests) == 0


def test_what_goes_live_through_the_routing_is_sent_whole(
    core: ModuleType, origin: Origin, tmp_path: Path
) -> None:
    """An ignored host under a cassette, and an allowed one under a block: the request (a POST
    with a body) reaches the origin as it was made, sync and async."""

    async def apost() -> Any:
        async with core.AsyncConnectionPool() as pool:
            return await pool.request("POST", f"{origin.url}/two", content=b'{"a": 1}')

    with replay.use_cassette(tmp_path / "c.msgpack", ignore_localhost=True):
        assert core.request("POST", f"{origin.url}/two", content=b'{"a": 1}').content == BODY
        assert asyncio.run(apost()).content == BODY
    with replay.block_network():  # loopback allowed
        assert core.request("POST", f"{origin.url}/two", content=b'{"a": 1}').content == BODY
        assert asyncio.run(apost()).content == BODY
    assert [seen.body for seen in origin.requests] == [b'{"a": 1}'] * 4
    assert not (tmp_path / "c.msgpack").exists()  # nothing recorded


class DuckTransport:
    """A transport that is no `httpx.BaseTransport`: it sends through httpcore itself."""

    def __init__(self) -> None:
        self.pool = httpcore.ConnectionPool()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        sent = self.pool.request(
            request.method, str(request.url), headers=request.headers.raw, content=request.read()
        )
        return httpx.Response(sent.status, headers=sent.headers, content=sent.content)


class AsyncDuckTransport:
    """Async twin of `DuckTransport`."""

    def __init__(self) -> None:
        self.pool = httpcore.AsyncConnectionPool()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sent = await self.pool.request(
            request.method, str(request.url), headers=request.headers.raw, content=request.read()
        )
        return httpx.Response(sent.status, headers=sent.headers, content=sent.content)


def test_a_duck_typed_transport_records_and_replays_offline(origin: Origin, tmp_path: Path) -> None:
    path = tmp_path / "duck.msgpack"

    def ask() -> list[str]:
        duck, aduck = DuckTransport(), AsyncDuckTransport()
        client: Any = httpx.Client(transport=duck)  # type: ignore[arg-type]
        aclient: Any = httpx.AsyncClient(transport=aduck)  # type: ignore[arg-type]

        async def aget() -> str:
            text: str = (await aclient.get(origin.url)).text
            await aduck.pool.aclose()
            return text

        with duck.pool:
            return [client.get(f"{origin.url}/two").text, asyncio.run(aget())]

    with replay.use_cassette(path, record_mode="all"):
        recorded = ask()
    with replay.use_cassette(path, record_mode="none"):
        assert ask() == recorded
        duck = DuckTransport()
        client: Any = httpx.Client(transport=duck)  # type: ignore[arg-type]
        with duck.pool, pytest.raises(CassetteMismatchError):
            client.get(f"{origin.url}/two?unrecorded")
    assert recorded[0] == BODY.decode()
    assert len(origin.requests) == 2
    assert len(replay.Cassette.load(path).interactions) == 2
