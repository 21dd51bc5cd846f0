"""requests (and urllib3 under it) through a cassette session, against a real local origin.

Each test records live through `use_cassette(record_mode="all")`, then stops the origin and
replays with `record_mode="none"`: the client must see what it saw live (the same chunks,
the same requests exception after the same bytes), and nothing may reach the network.
"""

from __future__ import annotations

import signal
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import requests.adapters
from pacing import LATE, assert_paced, due_times

import replay
from replay import faults
from replay.clock.vtime import RealClock
from replay.testing import Origin, Script

EVENTS = (b"data: one\n\n", b"data: two\n\n", b"data: three\n\n")
GAP = 0.03  # seconds between scripted chunks

ROUTES = {
    "/sse": Script(chunks=[(GAP, event) for event in EVENTS]),
    "/gzip": Script(chunks=[(GAP, event) for event in EVENTS], gzip=True),
    "/drop": Script(chunks=[(GAP, event) for event in EVENTS[:2]], end="drop"),
    "/hang": Script(chunks=[(GAP, event) for event in EVENTS[:2]], end="hang"),
    "/json": Script(chunks=[(0.0, b'{"answer": '), (GAP, b"42}")], headers=[("x-kind", "json")]),
    "/echo": Script(echo=True),
    "/moved": Script(status=302, headers=[("location", "/sse")]),
}

Read = Callable[[requests.Session, str], Any]


def get_stream(session: requests.Session, url: str) -> requests.Response:
    return session.get(url, stream=True)


def chunks_of(session: requests.Session, url: str) -> list[bytes]:
    return list(get_stream(session, url).iter_content(chunk_size=None))


def record(path: Path, read: Read, route: str = "/sse") -> tuple[Any, str]:
    """What `read` gave live while it was recorded, and the URL it read (the origin is gone
    when this returns)."""
    with Origin(ROUTES) as origin, requests.Session() as session:
        url = origin.url + route
        with replay.use_cassette(path, record_mode="all"):
            live = read(session, url)
        assert origin.requests
    return live, url


def play(path: Path, url: str, read: Read, **options: Any) -> Any:
    """What `read` gives replayed from `path` (record mode "none" unless told)."""
    options.setdefault("record_mode", "none")
    with replay.use_cassette(path, **options), requests.Session() as session:
        return read(session, url)


def record_then_replay(
    path: Path, read: Read, route: str = "/sse", **options: Any
) -> tuple[Any, Any, replay.Cassette]:
    """What `read` gave live while recording, what it gave replayed with the origin gone,
    and the cassette as saved."""
    live, url = record(path, read, route)
    return live, play(path, url, read, **options), replay.Cassette.load(path)


def test_a_stream_replays_with_the_recorded_chunks_and_times_and_no_network(
    cassette_path: Path,
) -> None:
    with Origin(ROUTES) as origin, requests.Session() as session:
        url = origin.url + "/sse"
        with replay.use_cassette(cassette_path, record_mode="all"):
            live = chunks_of(session, url)
        recorded_hits = len(origin.requests)
        with replay.use_cassette(cassette_path, record_mode="none") as cassette:
            replayed = chunks_of(session, url)
        assert len(origin.requests) == recorded_hits == 1

    assert live == replayed == list(EVENTS)
    assert cassette.all_played
    # Stamped as the origin sent them (a busy reader may get two events in one read).
    stamped = [(chunk.at, chunk.data) for chunk in cassette.interactions[0].response.chunks]
    assert_paced(stamped, due_times(ROUTES["/sse"].chunks, gaps=True))


def test_virtual_speed_moves_the_clock_by_the_recorded_gaps_without_waiting(
    cassette_path: Path,
) -> None:
    def gaps(session: requests.Session, url: str) -> tuple[float, float]:
        real, seen = RealClock().now(), time.monotonic()
        list(get_stream(session, url).iter_content(None))
        return time.monotonic() - seen, RealClock().now() - real

    _, url = record(cassette_path, chunks_of)
    seen, real = play(cassette_path, url, gaps, speed="virtual")

    at = replay.Cassette.load(cassette_path).interactions[0].response.end.at
    assert seen == pytest.approx(at, abs=0.02)
    assert real < at / 2


READERS: dict[str, Read] = {
    "iter_content(None)": chunks_of,
    "iter_content(4)": lambda s, url: list(get_stream(s, url).iter_content(4)),
    "iter_lines": lambda s, url: list(get_stream(s, url).iter_lines()),
    "raw.stream(None)": lambda s, url: list(get_stream(s, url).raw.stream(None)),
    "raw.read(5)": lambda s, url: [get_stream(s, url).raw.read(5)],
    "raw.read1": lambda s, url: list(iter(get_stream(s, url).raw.read1, b"")),
    "text": lambda s, url: s.get(url).text,
    "content, not streamed": lambda s, url: s.get(url).content,
}


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_every_way_of_reading_sees_what_it_saw_live(cassette_path: Path, read: Read) -> None:
    live, replayed, _ = record_then_replay(cassette_path, read)

    assert replayed == live
    assert replayed  # (not two empty reads)


def test_json_status_and_headers_replay(cassette_path: Path) -> None:
    def seen(session: requests.Session, url: str) -> Any:
        response = session.get(url)
        return response.status_code, response.reason, response.headers["x-kind"], response.json()

    live, replayed, _ = record_then_replay(cassette_path, seen, "/json")

    assert replayed == live == (200, "OK", "json", {"answer": 42})


def test_iter_content_4_splits_chunks_without_joining_them(cassette_path: Path) -> None:
    _, replayed, _ = record_then_replay(cassette_path, READERS["iter_content(4)"])

    assert replayed[:3] == [b"data", b": on", b"e\n\n"]


def test_a_gzip_body_is_decoded_chunk_by_chunk_and_kept_encoded(cassette_path: Path) -> None:
    def both(session: requests.Session, url: str) -> tuple[list[bytes], bytes]:
        decoded = chunks_of(session, url)
        encoded = b"".join(get_stream(session, url).raw.stream(None, decode_content=False))
        return decoded, zlib.decompress(encoded, wbits=31)

    live, replayed, cassette = record_then_replay(cassette_path, both, "/gzip")

    assert replayed == live == (list(EVENTS), b"".join(EVENTS))
    assert cassette.interactions[0].response.header("content-encoding") == "gzip"


def test_a_dropped_stream_replays_as_chunked_encoding_error_after_the_same_bytes(
    cassette_path: Path,
) -> None:
    def until_error(session: requests.Session, url: str) -> tuple[list[bytes], type]:
        got: list[bytes] = []
        with pytest.raises(requests.exceptions.ChunkedEncodingError) as caught:
            got.extend(get_stream(session, url).iter_content(None))
        return got, type(caught.value)

    live, replayed, cassette = record_then_replay(cassette_path, until_error, "/drop")

    assert replayed == live == (list(EVENTS[:2]), requests.exceptions.ChunkedEncodingError)
    assert cassette.interactions[0].response.end.error == "RemoteProtocolError"


def test_a_cut_fault_ends_the_body_after_two_events(cassette_path: Path) -> None:
    def lines(session: requests.Session, url: str) -> list[bytes]:
        got: list[bytes] = []
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            got.extend(line for line in get_stream(session, url).iter_lines() if line)
        return got

    _, url = record(cassette_path, chunks_of)

    cut = faults.cut(after_events=2)
    assert play(cassette_path, url, lines, faults=[cut]) == [b"data: one", b"data: two"]


def test_a_stall_longer_than_the_read_timeout_fails_as_requests_does(cassette_path: Path) -> None:
    def until_timeout(session: requests.Session, url: str) -> list[bytes]:
        response = session.get(url, stream=True, timeout=(1, 0.5))
        got: list[bytes] = []
        with pytest.raises(requests.exceptions.ConnectionError, match="timed out"):
            got.extend(response.iter_content(None))
        return got

    _, url = record(cassette_path, chunks_of)

    stall = faults.stall(after_events=1, seconds=5)
    assert play(cassette_path, url, until_timeout, faults=[stall]) == [EVENTS[0]]


def test_speed_1_replays_chunks_at_their_recorded_times(cassette_path: Path) -> None:
    def timed(session: requests.Session, url: str) -> list[float]:
        start = time.monotonic()
        return [time.monotonic() - start for _ in get_stream(session, url).iter_content(None)]

    _, replayed, cassette = record_then_replay(cassette_path, timed, speed=1)

    recorded = cassette.interactions[0].response.chunks.times
    for got, at in zip(replayed, recorded, strict=True):
        assert at - 0.01 <= got <= at + LATE


def test_closing_early_while_recording_stops_the_recording_at_once(cassette_path: Path) -> None:
    with Origin(ROUTES) as origin, requests.Session() as session:
        with replay.use_cassette(cassette_path, record_mode="all"):
            response = get_stream(session, origin.url + "/hang")
            first = next(response.iter_content(None))
            start = time.monotonic()
            response.close()
            closing = time.monotonic() - start
        end = replay.Cassette.load(cassette_path).interactions[0].response.end

    assert first == EVENTS[0]
    assert closing < 0.45  # under the 0.5 s a close waits for a recording it cannot stop
    assert end.stopped_by == "client"


class Interrupted(BaseException):
    """Raised by a signal handler in the middle of a read, as KeyboardInterrupt is."""


def _interrupt(*_: object) -> None:
    raise Interrupted


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
@pytest.mark.parametrize("dawdle", [0.0, 0.05], ids=["reading", "waiting"])
def test_a_read_interrupted_while_recording_is_recorded_as_the_client_stopping(
    cassette_path: Path, dawdle: float
) -> None:
    # Reading itself, or waiting for the thread that read on while it dawdled: either way
    # the client stopped there (requests does not close the body after an error).
    previous = signal.signal(signal.SIGALRM, _interrupt)
    try:
        with (
            Origin(ROUTES) as origin,
            requests.Session() as session,
            replay.use_cassette(cassette_path, record_mode="all"),
        ):
            response = get_stream(session, origin.url + "/hang")
            pieces = response.iter_content(None)
            assert next(pieces) == EVENTS[0]
            assert next(pieces) == EVENTS[1]
            time.sleep(dawdle)
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            with pytest.raises(Interrupted):
                next(pieces)  # blocks: the origin sends nothing more
            time.sleep(0.1)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    end = replay.Cassette.load(cassette_path).interactions[0].response.end
    assert (end.truncated, end.stopped_by, end.error) == (True, "client", None)


def test_an_empty_cassette_in_mode_none_refuses_before_connecting(cassette_path: Path) -> None:
    with Origin(ROUTES) as origin:
        with (
            replay.use_cassette(cassette_path, record_mode="none"),
            pytest.raises(replay.CassetteMismatchError),
        ):
            requests.get(origin.url + "/sse")
        assert origin.requests == []


def test_ignored_hosts_go_live_and_nothing_is_recorded(cassette_path: Path) -> None:
    with Origin(ROUTES) as origin:
        with replay.use_cassette(cassette_path, ignore_hosts=["127.0.0.1"]) as cassette:
            assert requests.get(origin.url + "/sse").content == b"".join(EVENTS)
        assert len(origin.requests) == 1
    assert cassette.interactions == []
    assert not cassette_path.exists()


def test_requests_and_httpx_land_in_one_cassette(cassette_path: Path) -> None:
    def both(session: requests.Session, url: str) -> tuple[bytes, bytes]:
        return session.post(url, data=b"from requests").content, httpx.post(
            url, content=b"from httpx"
        ).content

    live, replayed, cassette = record_then_replay(cassette_path, both, "/echo")

    assert replayed == live == (b"from requests", b"from httpx")
    assert [i.request.body for i in cassette.interactions] == [b"from requests", b"from httpx"]


def test_a_generator_body_is_sent_and_matched_as_its_bytes(cassette_path: Path) -> None:
    def post(session: requests.Session, url: str) -> Any:
        return session.post(url, data=(part for part in [b'{"a": ', b"1}"])).json()

    live, replayed, cassette = record_then_replay(cassette_path, post, "/echo")

    assert replayed == live == {"a": 1}
    assert cassette.interactions[0].request.body == b'{"a": 1}'


def test_a_redirect_replays_hop_by_hop(cassette_path: Path) -> None:
    def follow(session: requests.Session, url: str) -> tuple[list[int], bytes]:
        response = session.get(url)
        return [r.status_code for r in response.history], response.content

    live, replayed, cassette = record_then_replay(cassette_path, follow, "/moved")

    assert replayed == live == ([302], b"".join(EVENTS))
    assert [i.response.status for i in cassette.interactions] == [302, 200]


def test_the_patch_is_only_there_while_a_session_is(cassette_path: Path) -> None:
    original = vars(requests.adapters.HTTPAdapter)["send"]
    with replay.use_cassette(cassette_path, record_mode="none"):
        assert vars(requests.adapters.HTTPAdapter)["send"] is not original
    assert vars(requests.adapters.HTTPAdapter)["send"] is original


@pytest.mark.parametrize("speed", ["instant", 1000], ids=["instant", "stepped"])
def test_a_body_closed_early_hands_out_nothing_more(cassette_path: Path, speed: Any) -> None:
    def first_then_close(session: requests.Session, url: str) -> tuple[bytes, bytes, bool]:
        response = get_stream(session, url)
        first = next(response.iter_content(None))
        response.close()
        return first, response.raw.read(), response.raw.closed

    live, replayed, _ = record_then_replay(cassette_path, first_then_close, speed=speed)

    assert replayed == live == (EVENTS[0], b"", True)
