"""aiohttp `ClientSession` traffic inside `use_cassette`: recorded from a real local origin with
each chunk's arrival time, then replayed offline through aiohttp's own response API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from pacing import assert_paced, due_times

import replay
from replay import faults
from replay.testing import Origin, Script

pytestmark = pytest.mark.anyio

GAP = 0.04
EVENTS = [f"data: {n}\n\n".encode() for n in range(5)]
ROUTES = {
    "/stream": Script(chunks=[(GAP, event) for event in EVENTS]),
    "/dropped": Script(chunks=[(GAP, event) for event in EVENTS[:3]], end="drop"),
    "/gzip": Script(chunks=[(GAP, event) for event in EVENTS], gzip=True),
    "/endless": Script(chunks=[(0.0, EVENTS[0])], end="hang"),
    "/echo": Script(echo=True),
    "/missing": Script(status=404, chunks=[(0.0, b"no")]),
}

Reader = Callable[[aiohttp.ClientResponse], Awaitable[list[bytes]]]


@pytest.fixture
def anyio_backend() -> str:
    """aiohttp runs on asyncio only."""
    return "asyncio"


@pytest.fixture
def origin() -> Iterator[Origin]:
    with Origin(ROUTES) as server:
        yield server


async def any_chunks(response: aiohttp.ClientResponse) -> list[bytes]:
    return [chunk async for chunk in response.content.iter_any()]


async def fetch(url: str, read: Reader = any_chunks, **options: Any) -> list[bytes]:
    """POST to `url` through a fresh aiohttp session; what `read` made of the body."""
    async with aiohttp.ClientSession() as client, client.post(url, **options) as response:
        return await read(response)


async def record(path: Path, url: str, **options: Any) -> list[bytes]:
    with replay.use_cassette(path, record_mode="all"):
        return await fetch(url, **options)


def only_response(path: Path) -> replay.Response:
    [interaction] = replay.Cassette.load(path).interactions
    return interaction.response


async def test_records_timed_chunks_then_replays_the_same_bytes_offline(
    cassette_path: Path,
) -> None:
    with Origin(ROUTES) as origin:
        url = f"{origin.url}/stream"
        live = await record(cassette_path, url, json={"q": 1})
    recorded = only_response(cassette_path)

    with replay.use_cassette(cassette_path, record_mode="none") as cassette:
        replayed = await fetch(url, json={"q": 1})

    assert b"".join(replayed) == b"".join(live) == b"".join(EVENTS)
    # Stamped as the origin sent them: no chunk before its time, none more than late.
    stamped = [(chunk.at, chunk.data) for chunk in recorded.chunks]
    assert_paced(stamped, due_times(ROUTES["/stream"].chunks, gaps=True))
    assert len(origin.requests) == 1  # the recording; the replay ran with the origin stopped
    assert cassette.all_played


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ({"json": {"q": 1}}, "application/json"),
        ({"data": {"q": "a b", "n": 2}}, "application/x-www-form-urlencoded"),
        ({"data": b"\x00raw"}, "application/octet-stream"),
        ({"data": "text"}, "text/plain; charset=utf-8"),
    ],
    ids=["json", "form", "bytes", "text"],
)
async def test_the_request_is_recorded_as_sent_with_the_session_headers(
    origin: Origin, cassette_path: Path, body: dict[str, Any], content_type: str
) -> None:
    with replay.use_cassette(cassette_path, record_mode="all"):
        async with (
            aiohttp.ClientSession(headers={"X-Team": "blue"}) as client,
            client.post(f"{origin.url}/echo", params={"page": "2"}, **body) as response,
        ):
            await response.read()

    [interaction] = replay.Cassette.load(cassette_path).interactions
    request, [sent] = interaction.request, origin.requests
    assert request.url == f"{origin.url}/echo?page=2"
    assert request.header("x-team") == sent.header("x-team") == "blue"
    assert request.header("content-type") == sent.header("content-type") == content_type
    assert request.body == sent.body


async def read_all(response: aiohttp.ClientResponse) -> list[bytes]:
    return [await response.read()]


async def text(response: aiohttp.ClientResponse) -> list[bytes]:
    return [(await response.text()).encode()]


async def lines(response: aiohttp.ClientResponse) -> list[bytes]:
    return [line async for line in response.content]


async def readlines(response: aiohttp.ClientResponse) -> list[bytes]:
    found = []
    while line := await response.content.readline():
        found.append(line)
    return found


async def threes(response: aiohttp.ClientResponse) -> list[bytes]:
    return [chunk async for chunk in response.content.iter_chunked(3)]


async def http_chunks(response: aiohttp.ClientResponse) -> list[bytes]:
    # (live, a last empty item may mark the final HTTP chunk, when it came on its own)
    return [chunk async for chunk, _ in response.content.iter_chunks() if chunk]


@pytest.mark.parametrize(
    "read",
    [any_chunks, threes, lines, readlines, read_all, text, http_chunks],
    ids=["iter_any", "iter_chunked", "async-for", "readline", "read", "text", "iter_chunks"],
)
async def test_every_reading_api_replays_the_recorded_body(
    origin: Origin, cassette_path: Path, read: Reader
) -> None:
    live = await record(cassette_path, f"{origin.url}/stream", read=read)

    with replay.use_cassette(cassette_path, record_mode="none"):
        replayed = await fetch(f"{origin.url}/stream", read=read)

    assert replayed == live
    assert b"".join(replayed) == b"".join(EVENTS)


async def test_json_replays(origin: Origin, cassette_path: Path) -> None:
    async def decoded(response: aiohttp.ClientResponse) -> list[bytes]:
        return [repr(await response.json()).encode()]

    await record(cassette_path, f"{origin.url}/echo", json={"q": [1, 2]}, read=decoded)

    with replay.use_cassette(cassette_path, record_mode="none"):
        assert await fetch(f"{origin.url}/echo", json={"q": [1, 2]}, read=decoded) == [
            b"{'q': [1, 2]}"
        ]
    assert len(origin.requests) == 1


@pytest.mark.parametrize("speed", [1, "instant"])
async def test_iter_any_gets_the_recorded_chunks_one_by_one(
    origin: Origin, cassette_path: Path, speed: float | str
) -> None:
    await record(cassette_path, f"{origin.url}/stream")

    with replay.use_cassette(cassette_path, record_mode="none", speed=speed):
        replayed = await fetch(f"{origin.url}/stream")

    assert replayed == list(only_response(cassette_path).chunks.payloads) == EVENTS


async def test_a_dropped_stream_replays_as_client_payload_error_after_the_same_bytes(
    origin: Origin, cassette_path: Path
) -> None:
    got: list[bytes] = []

    async def until_error(response: aiohttp.ClientResponse) -> list[bytes]:
        async for chunk in response.content.iter_any():
            got.append(chunk)
        return got

    with pytest.raises(aiohttp.ClientPayloadError):
        await record(cassette_path, f"{origin.url}/dropped", read=until_error)
    live, got[:] = list(got), []
    assert only_response(cassette_path).end.error == "RemoteProtocolError"  # httpx's name

    with (
        replay.use_cassette(cassette_path, record_mode="none"),
        pytest.raises(aiohttp.ClientPayloadError, match="not completed"),
    ):
        await fetch(f"{origin.url}/dropped", read=until_error)

    assert got == live == EVENTS[:3]


async def test_a_cut_fault_gives_two_events_then_client_payload_error(
    origin: Origin, cassette_path: Path
) -> None:
    await record(cassette_path, f"{origin.url}/stream")
    got: list[bytes] = []

    async def until_error(response: aiohttp.ClientResponse) -> list[bytes]:
        async for line in response.content:
            got.append(line)
        return got

    with (
        replay.use_cassette(cassette_path, record_mode="none", faults=[faults.cut(after_events=2)]),
        pytest.raises(aiohttp.ClientPayloadError),
    ):
        await fetch(f"{origin.url}/stream", read=until_error)

    assert b"".join(got) == b"".join(EVENTS[:2])


async def test_a_stall_longer_than_sock_read_replays_as_aiohttps_read_timeout(
    origin: Origin, cassette_path: Path
) -> None:
    await record(cassette_path, f"{origin.url}/stream")
    stall = faults.stall(after_events=1, seconds=30)
    timeout = aiohttp.ClientTimeout(sock_read=5)

    with (
        replay.use_cassette(cassette_path, record_mode="none", speed="virtual", faults=[stall]),
        pytest.raises(aiohttp.SocketTimeoutError),
    ):
        await fetch(f"{origin.url}/stream", timeout=timeout)


async def test_speed_1_replays_roughly_on_the_recorded_schedule(
    origin: Origin, cassette_path: Path
) -> None:
    await record(cassette_path, f"{origin.url}/stream")
    recorded = [chunk.at for chunk in only_response(cassette_path).chunks]
    arrivals = []

    with replay.use_cassette(cassette_path, record_mode="none", speed=1):
        start = time.monotonic()
        async with aiohttp.ClientSession() as client, client.post(f"{origin.url}/stream") as r:
            async for _ in r.content.iter_any():
                arrivals.append(time.monotonic() - start)

    assert len(arrivals) == len(recorded)
    for seen, at in zip(arrivals, recorded, strict=True):
        assert at - 0.005 <= seen <= at + 0.1  # never early; late by at most a busy loop turn


async def test_gzip_is_recorded_as_aiohttp_decoded_it(origin: Origin, cassette_path: Path) -> None:
    live = await record(cassette_path, f"{origin.url}/gzip")
    recorded = only_response(cassette_path)

    with replay.use_cassette(cassette_path, record_mode="none", allow_playback_repeats=True):
        assert await fetch(f"{origin.url}/gzip", read=read_all) == [b"".join(EVENTS)]
        assert httpx.post(f"{origin.url}/gzip").content == b"".join(EVENTS)

    assert b"".join(live) == recorded.body == b"".join(EVENTS)
    assert recorded.header("content-encoding") is None


@pytest.mark.parametrize("auto_decompress", [True, False], ids=["decoded", "raw"])
async def test_a_body_recorded_compressed_replays_as_aiohttp_would_read_it(
    origin: Origin, cassette_path: Path, auto_decompress: bool
) -> None:
    with replay.use_cassette(cassette_path, record_mode="all"):
        httpx.post(f"{origin.url}/gzip")  # httpx records the body as it came: gzip
    recorded = only_response(cassette_path)
    assert recorded.header("content-encoding") == "gzip"

    with replay.use_cassette(cassette_path, record_mode="none"):
        body = await fetch(f"{origin.url}/gzip", read=read_all, auto_decompress=auto_decompress)

    assert body == [b"".join(EVENTS) if auto_decompress else recorded.body]


async def test_a_client_leaving_early_ends_the_recording_there(
    origin: Origin, cassette_path: Path
) -> None:
    async def first(response: aiohttp.ClientResponse) -> list[bytes]:
        return [await response.content.readany()]

    live = await record(cassette_path, f"{origin.url}/endless", read=first)

    recorded = only_response(cassette_path)
    assert recorded.end.stopped_by == "client"
    assert recorded.body == b"".join(live) == EVENTS[0]


class HookFailed(Exception):
    pass


def failing_hook(interaction: replay.Interaction) -> replay.Interaction:
    raise HookFailed("the hook could not scrub this")


async def test_a_failing_before_record_hook_reaches_the_client(
    origin: Origin, cassette_path: Path
) -> None:
    with (
        pytest.raises(HookFailed),
        replay.use_cassette(cassette_path, record_mode="all", before_record=failing_hook),
    ):
        await fetch(f"{origin.url}/stream")


async def test_leaving_a_replay_early_stops_it_at_once(origin: Origin, cassette_path: Path) -> None:
    await record(cassette_path, f"{origin.url}/stream")
    tasks = asyncio.all_tasks()

    with replay.use_cassette(cassette_path, record_mode="none", speed=1):
        async with aiohttp.ClientSession() as client:
            response = await client.post(f"{origin.url}/stream")
            assert await response.content.readany() == EVENTS[0]
            await asyncio.sleep(GAP / 4)  # the task now waits for the next chunk's time
            feeding = asyncio.all_tasks() - tasks
            response.release()
            await asyncio.sleep(0)  # a cancelled task ends at its next turn
            left = asyncio.all_tasks() - tasks

    assert len(feeding) == 1  # the task feeding the body at speed 1...
    assert not left  # ...is gone at once, not at the next chunk's time


async def test_raise_for_status_applies_to_recorded_and_replayed_responses(
    origin: Origin, cassette_path: Path
) -> None:
    with pytest.raises(aiohttp.ClientResponseError, match="404"):
        await record(cassette_path, f"{origin.url}/missing", raise_for_status=True)
    assert only_response(cassette_path).status == 404

    with (
        replay.use_cassette(cassette_path, record_mode="none"),
        pytest.raises(aiohttp.ClientResponseError, match="404"),
    ):
        await fetch(f"{origin.url}/missing", raise_for_status=True)


async def test_an_empty_cassette_in_mode_none_refuses_before_connecting(
    origin: Origin, cassette_path: Path
) -> None:
    cassette_path.parent.mkdir(parents=True)
    replay.Cassette().save(cassette_path)

    with (
        replay.use_cassette(cassette_path, record_mode="none"),
        pytest.raises(replay.CassetteMismatchError),
    ):
        await fetch(f"{origin.url}/stream")

    assert origin.requests == []


async def test_ignored_hosts_go_live_and_are_not_recorded(
    origin: Origin, cassette_path: Path
) -> None:
    with replay.use_cassette(cassette_path, record_mode="none", ignore_hosts=["127.0.0.1"]):
        assert await fetch(f"{origin.url}/stream") == EVENTS

    assert len(origin.requests) == 1
    assert not cassette_path.exists()


async def test_aiohttp_and_httpx_traffic_land_in_one_cassette(
    origin: Origin, cassette_path: Path
) -> None:
    with replay.use_cassette(cassette_path, record_mode="all"):
        await fetch(f"{origin.url}/stream")
        async with httpx.AsyncClient() as client:
            await client.post(f"{origin.url}/echo", content=b"hi")
    origin.requests.clear()

    with replay.use_cassette(cassette_path, record_mode="none") as cassette:
        assert await fetch(f"{origin.url}/stream") == EVENTS
        async with httpx.AsyncClient() as client:
            assert (await client.post(f"{origin.url}/echo", content=b"hi")).content == b"hi"

    assert len(cassette.interactions) == 2
    assert cassette.all_played
    assert origin.requests == []


@pytest.mark.timeout(10)  # the failure this guards against is a wait that never ends
async def test_waiting_for_the_end_of_an_unread_replayed_body_does_not_hang(
    origin: Origin, cassette_path: Path
) -> None:
    await record(cassette_path, f"{origin.url}/stream")

    async def wait_then_read(response: aiohttp.ClientResponse) -> list[bytes]:
        await response.content.wait_eof()
        return [await response.content.read()]

    with replay.use_cassette(cassette_path, record_mode="none"):
        replayed = await fetch(f"{origin.url}/stream", read=wait_then_read)
    assert replayed == [b"".join(EVENTS)]
