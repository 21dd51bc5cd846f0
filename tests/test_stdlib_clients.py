"""urllib3 used directly, `urllib.request` and `http.client` through a cassette session,
against a real local origin.

Each client records live through `use_cassette(record_mode="all")`, then the origin stops
and it replays with `record_mode="none"`: the same chunks at the recorded pace, 0 hits, a
request nobody recorded refused, a fault reaching the client as its library's own error.
"""

from __future__ import annotations

import http.client
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3
from pacing import assert_paced, due_times

import replay
from replay import faults
from replay.clock.vtime import RealClock
from replay.testing import Origin, Script

EVENTS = (b"data: one\n\n", b"data: two\n\n", b"data: three\n\n")
GAP = 0.05  # seconds between scripted chunks

ROUTES = {
    "/sse": Script(chunks=[(GAP, event) for event in EVENTS]),
    "/drop": Script(chunks=[(GAP, event) for event in EVENTS[:2]], end="drop"),
    "/echo": Script(echo=True),
}

#: Opens a streamed response to a URL and yields each piece of its body as it is read.
Pieces = Callable[[str], Iterator[bytes]]


def _urllib3(url: str) -> Iterator[bytes]:
    response = urllib3.PoolManager().request("GET", url, preload_content=False)
    yield from response.stream()


def _urllib_request(url: str) -> Iterator[bytes]:
    with urllib.request.urlopen(url) as response:
        yield from iter(lambda: response.read1(2**16), b"")


def _http_client(url: str) -> Iterator[bytes]:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
    try:
        connection.request("GET", parts.path)
        response = connection.getresponse()
        yield from iter(lambda: response.read1(2**16), b"")
    finally:
        connection.close()


CLIENTS: dict[str, tuple[Pieces, type[BaseException]]] = {
    "urllib3": (_urllib3, urllib3.exceptions.ProtocolError),
    "urllib.request": (_urllib_request, http.client.IncompleteRead),
    "http.client": (_http_client, http.client.IncompleteRead),
}


@pytest.fixture(params=list(CLIENTS))
def client(request: pytest.FixtureRequest) -> tuple[Pieces, type[BaseException]]:
    return CLIENTS[request.param]


def timed(pieces: Pieces, url: str) -> list[tuple[float, bytes]]:
    start = time.monotonic()
    return [(time.monotonic() - start, piece) for piece in pieces(url)]


def until_error(pieces: Pieces, url: str, error: type[BaseException]) -> list[bytes]:
    got: list[bytes] = []
    with pytest.raises(error):
        got.extend(pieces(url))
    return got


def record(path: Path, read: Callable[[str], Any], route: str = "/sse") -> tuple[Any, str, int]:
    """What `read` gave live while recorded, the URL, and the origin's hits (it is gone after)."""
    with Origin(ROUTES) as origin:
        url = origin.url + route
        with replay.use_cassette(path, record_mode="all"):
            live = read(url)
        return live, url, len(origin.requests)


def test_records_then_replays_at_the_recorded_pace_with_no_network(
    cassette_path: Path, client: tuple[Pieces, type[BaseException]]
) -> None:
    pieces, _ = client
    live, url, hits = record(cassette_path, lambda url: timed(pieces, url))
    assert hits == 1
    stamped = [
        (chunk.at, chunk.data)
        for chunk in replay.Cassette.load(cassette_path).interactions[0].response.chunks
    ]
    assert_paced(stamped, due_times(ROUTES["/sse"].chunks, gaps=True))

    with replay.use_cassette(cassette_path, record_mode="none", speed=1) as cassette:
        replayed = timed(pieces, url)  # (the origin is stopped: a live request would fail)
    assert cassette.all_played
    assert b"".join(data for _, data in live) == b"".join(data for _, data in replayed)
    assert [data for _, data in replayed] == list(EVENTS)
    assert_paced(replayed, stamped)


def test_an_unrecorded_request_is_refused_before_connecting(
    cassette_path: Path, client: tuple[Pieces, type[BaseException]]
) -> None:
    pieces, _ = client
    with Origin(ROUTES) as origin:
        with (
            replay.use_cassette(cassette_path, record_mode="none"),
            pytest.raises(replay.CassetteMismatchError),
        ):
            list(pieces(origin.url + "/sse"))
        assert origin.requests == []


def test_a_cut_fault_reaches_the_client_as_its_library_error(
    cassette_path: Path, client: tuple[Pieces, type[BaseException]]
) -> None:
    pieces, error = client
    _, url, _ = record(cassette_path, lambda url: list(pieces(url)))
    with replay.use_cassette(
        cassette_path, record_mode="none", faults=[faults.cut(after_events=2)]
    ):
        assert until_error(pieces, url, error) == list(EVENTS[:2])


def test_a_dropped_stream_records_and_replays_as_the_same_error(
    cassette_path: Path, client: tuple[Pieces, type[BaseException]]
) -> None:
    pieces, error = client
    live, url, _ = record(cassette_path, lambda url: until_error(pieces, url, error), "/drop")
    with replay.use_cassette(cassette_path, record_mode="none"):
        replayed = until_error(pieces, url, error)
    assert live == replayed == list(EVENTS[:2])
    end = replay.Cassette.load(cassette_path).interactions[0].response.end
    assert end.error == "RemoteProtocolError"


def test_virtual_speed_moves_the_clock_by_the_recorded_gaps_without_waiting(
    cassette_path: Path, client: tuple[Pieces, type[BaseException]]
) -> None:
    pieces, _ = client
    _, url, _ = record(cassette_path, lambda url: list(pieces(url)))
    with replay.use_cassette(cassette_path, record_mode="none", speed="virtual"):
        real, seen = RealClock().now(), time.monotonic()
        assert list(pieces(url)) == list(EVENTS)
        seen, real = time.monotonic() - seen, RealClock().now() - real
    at = replay.Cassette.load(cassette_path).interactions[0].response.end.at
    assert seen == pytest.approx(at, abs=0.02)
    assert real < at / 2


def test_a_post_body_is_sent_and_matched(cassette_path: Path) -> None:
    def post(url: str) -> bytes:
        request = urllib.request.Request(url, data=b"question", method="POST")
        with urllib.request.urlopen(request) as response:
            return response.read()  # type: ignore[no-any-return]

    live, url, _ = record(cassette_path, post, "/echo")
    with replay.use_cassette(cassette_path, record_mode="none", allow_playback_repeats=True):
        assert post(url) == live
        pool = urllib3.PoolManager()
        assert pool.request("POST", url, body=b"question").data == live
        with pytest.raises(replay.CassetteMismatchError):
            pool.request("POST", url, body=b"another question")


def test_requests_and_urllib3_under_it_record_once(cassette_path: Path) -> None:
    live, url, hits = record(cassette_path, lambda url: requests.get(url).content)
    assert hits == 1
    assert len(replay.Cassette.load(cassette_path).interactions) == 1
    with replay.use_cassette(cassette_path, record_mode="none"):
        assert requests.get(url).content == live == b"".join(EVENTS)


TIMEOUTS: dict[str, tuple[Pieces, type[BaseException]]] = {
    "urllib3": (
        lambda url: (
            urllib3.PoolManager().request("GET", url, preload_content=False, timeout=0.5).stream()
        ),
        urllib3.exceptions.ReadTimeoutError,
    ),
    "urllib.request": (
        lambda url: iter(urllib.request.urlopen(url, timeout=0.5).read1, b""),
        TimeoutError,
    ),
}


@pytest.mark.parametrize("name", list(TIMEOUTS))
def test_a_stall_longer_than_the_read_timeout_fails_as_the_library_does(
    cassette_path: Path, name: str
) -> None:
    pieces, error = TIMEOUTS[name]
    _, url, _ = record(cassette_path, lambda url: list(pieces(url)))
    stall = faults.stall(after_events=1, seconds=5)
    with replay.use_cassette(cassette_path, record_mode="none", faults=[stall]):
        assert until_error(pieces, url, error) == [EVENTS[0]]


def test_urllib3_decodes_a_gzip_body_as_it_streams(cassette_path: Path) -> None:
    routes = {"/gzip": Script(chunks=[(GAP, event) for event in EVENTS], gzip=True)}
    with Origin(routes) as origin:
        url = origin.url + "/gzip"
        with replay.use_cassette(cassette_path, record_mode="all"):
            live = urllib3.request("GET", url).data
    with replay.use_cassette(cassette_path, record_mode="none"):
        response = urllib3.request("GET", url, preload_content=False)
        assert b"".join(response.stream()) == live == b"".join(EVENTS)


def test_a_body_closed_early_while_recording_stops_the_recording(cassette_path: Path) -> None:
    def first(url: str) -> bytes:
        with urllib.request.urlopen(url) as response:
            return response.read1(2**16)  # type: ignore[no-any-return]

    live, _, _ = record(cassette_path, first)
    assert live == EVENTS[0]
    end = replay.Cassette.load(cassette_path).interactions[0].response.end
    assert (end.truncated, end.stopped_by) == (True, "client")
