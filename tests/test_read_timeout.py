"""Replay honours the client's read timeout: a recorded gap longer than it (scaled by the
speed, as the wait is) ends the body as the client library's own read-timeout error, that
long after the read began, as it would have live; a huge recorded time never hangs a client
that has a timeout. Checked with real httpx (sync, asyncio, trio), aiohttp and requests, on
virtual time (exact, no stopwatch) and once on the real clock (a bound that holds loaded)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import anyio
import httpx
import pytest
import requests

import replay
from replay.model import MAX_SECONDS, Chunk, Interaction, Request, Response, StreamEnd

URL = "http://api.replay.test/stream"
FIRST, SECOND = b"data: one\n\n", b"data: two\n\n"
REAL_MONOTONIC = time.monotonic
WEEK = MAX_SECONDS - 1  # the longest gap a recording holds


def cassette(tmp_path: Path, *, gap: float, headers_at: float = 0.01) -> Path:
    """A response whose second chunk comes `gap` seconds after its first."""
    first = headers_at + 0.01
    response = Response(
        status=200,
        headers=[("content-type", "text/event-stream")],
        headers_at=headers_at,
        chunks=[Chunk(first, FIRST), Chunk(first + gap, SECOND)],
        end=StreamEnd(at=first + gap),
    )
    path = tmp_path / "gap.msgpack"
    replay.Cassette([Interaction(Request(method="GET", url=URL), response)]).save(path)
    return path


def session(path: Path, speed: object = "virtual") -> replay.Session:
    return replay.use_cassette(path, record_mode="none", speed=speed)  # type: ignore[arg-type]


def httpx_sync(path: Path, timeout: float, speed: object = "virtual") -> tuple[list[bytes], float]:
    got: list[bytes] = []
    with session(path, speed), httpx.Client(timeout=timeout) as client:
        started = time.monotonic()
        with pytest.raises(httpx.ReadTimeout), client.stream("GET", URL) as response:
            got.extend(response.iter_raw())
        return got, time.monotonic() - started


async def httpx_async(path: Path, timeout: float) -> tuple[list[bytes], float]:
    got: list[bytes] = []

    async def read(client: httpx.AsyncClient) -> None:
        async with client.stream("GET", URL) as response:
            async for chunk in response.aiter_raw():
                got.append(chunk)

    async with httpx.AsyncClient(timeout=timeout) as client:
        with session(path):
            started = time.monotonic()
            with pytest.raises(httpx.ReadTimeout):
                await read(client)
            return got, time.monotonic() - started


@pytest.mark.parametrize("gap", [6.0, WEEK])
def test_httpx_sync_gets_its_read_timeout_after_its_timeout(tmp_path: Path, gap: float) -> None:
    got, waited = httpx_sync(cassette(tmp_path, gap=gap), timeout=1)

    assert got == [FIRST]
    assert 1.0 <= waited < 1.5  # virtual seconds: the timeout, not the gap


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_httpx_async_gets_its_read_timeout_after_its_timeout(tmp_path: Path, backend: str) -> None:
    path = cassette(tmp_path, gap=6.0)

    got, waited = anyio.run(httpx_async, path, 1.0, backend=backend)

    assert got == [FIRST]
    assert 1.0 <= waited < 1.5


def test_a_gap_within_the_timeout_plays_and_speed_scales_the_gap(tmp_path: Path) -> None:
    path = cassette(tmp_path, gap=6.0)

    with session(path, speed=10), httpx.Client(timeout=1) as client:  # 0.6 s on the clock
        assert list(client.stream("GET", URL).__enter__().iter_raw()) == [FIRST, SECOND]
    with session(path), httpx.Client(timeout=7) as client:
        assert client.get(URL).content == FIRST + SECOND


def test_headers_later_than_the_timeout_time_out_the_send(tmp_path: Path) -> None:
    path = cassette(tmp_path, gap=0.1, headers_at=5.0)

    with session(path), httpx.Client(timeout=1) as client, pytest.raises(httpx.ReadTimeout):
        client.get(URL)
    with session(path), pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(URL, timeout=(1, 1))


def test_aiohttp_gets_its_socket_read_timeout(tmp_path: Path) -> None:
    path = cassette(tmp_path, gap=WEEK)

    async def main() -> tuple[list[bytes], float]:
        got: list[bytes] = []

        async def read(client: aiohttp.ClientSession) -> None:
            async with client.get(URL) as response:
                async for chunk in response.content.iter_any():
                    got.append(chunk)

        timeout = aiohttp.ClientTimeout(sock_read=1)
        async with aiohttp.ClientSession(timeout=timeout) as client:
            with session(path):
                started = time.monotonic()
                with pytest.raises(aiohttp.ServerTimeoutError):
                    await read(client)
                return got, time.monotonic() - started

    got, waited = asyncio.run(main())

    assert got == [FIRST]
    assert 1.0 <= waited < 1.5


def test_requests_gets_its_read_timeout_mid_body_as_requests_raises_it(tmp_path: Path) -> None:
    path = cassette(tmp_path, gap=WEEK)
    got: list[bytes] = []

    with session(path):
        started = time.monotonic()
        response = requests.get(URL, stream=True, timeout=(1, 1))
        with pytest.raises(requests.exceptions.ConnectionError, match="timed out"):
            got.extend(response.iter_content(None))
        waited = time.monotonic() - started

    assert got == [FIRST]
    assert 1.0 <= waited < 1.5


def test_on_the_real_clock_a_week_long_gap_ends_after_the_timeout(tmp_path: Path) -> None:
    started = REAL_MONOTONIC()

    got, _ = httpx_sync(cassette(tmp_path, gap=WEEK), timeout=0.2, speed=1)

    assert got == [FIRST]
    assert REAL_MONOTONIC() - started < 10  # (it hung for a week: any bound says it ended)


def test_httpx2_gets_its_own_read_timeout(tmp_path: Path) -> None:
    httpx2 = pytest.importorskip("httpx2")
    got: list[bytes] = []

    with session(cassette(tmp_path, gap=WEEK)), httpx2.Client(timeout=1) as client:
        started = time.monotonic()
        with pytest.raises(httpx2.ReadTimeout), client.stream("GET", URL) as response:
            got.extend(response.iter_raw())
        waited = time.monotonic() - started

    assert got == [FIRST]
    assert 1.0 <= waited < 1.5
