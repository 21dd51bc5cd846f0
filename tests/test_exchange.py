"""The engine's exchange, its one replayed body and its one reader feed, on their own: a real
cassette session as the desk, the virtual clock for time."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import replay
from replay.clock import Schedule, VirtualClock
from replay.engine import LIVE, Exchange, Player, Record, Replay, Tape, route
from replay.engine.feed import END, AsyncFeed, Failed, SyncFeed
from replay.errors import CassetteMismatchError
from replay.model import Chunk, Interaction, Request, Response, StreamEnd
from replay.store.cassette import Cassette

URL = "https://api.example.test/v1/stream"
CHUNKS = [Chunk(0.2, b"data: one\n\n"), Chunk(0.5, b"data: two\n\n")]
CUT = StreamEnd(at=0.6, error="RemoteProtocolError", message="peer closed")


class Cut(Exception):
    """The shell's own exception for a recorded end (its name and message)."""


def fail(name: str, message: str) -> BaseException:
    return Cut(f"{name}: {message}")


def asked(url: str = URL) -> Request:
    return Request(method="GET", url=url, headers=[], body=b"")


def replay_of(end: StreamEnd, schedule: Schedule | None, clock: VirtualClock) -> Replay:
    response = Response(status=200, headers_at=0.1, chunks=CHUNKS, end=end)
    player = Player(Cassette([Interaction(request=asked(), response=response)]))
    return Replay(player.take(asked()), schedule, clock)


def read_sync(replay_: Replay) -> tuple[list[bytes], str]:
    body = replay_.body(fail, None)
    body.head()
    seen: list[bytes] = []
    try:
        seen.extend(body)
    except Cut as error:
        return seen, str(error)
    return seen, ""


async def read_async(replay_: Replay) -> tuple[list[bytes], str]:
    body = replay_.body(fail, None)
    await body.ahead()
    seen: list[bytes] = []
    try:
        async for data in body:
            seen.append(data)
    except Cut as error:
        return seen, str(error)
    finally:
        await body.aclose()
    return seen, ""


@pytest.mark.parametrize("end", [CUT, StreamEnd(at=0.6)], ids=["cut", "clean"])
@pytest.mark.parametrize("speed", [None, 1.0], ids=["instant", "1x"])
def test_one_body_plays_alike_sync_and_async_at_every_speed(
    end: StreamEnd, speed: float | None
) -> None:
    expected = ([c.data for c in CHUNKS], "RemoteProtocolError: peer closed" if end.error else "")
    sync_clock, async_clock = VirtualClock(), VirtualClock()
    sync_schedule = None if speed is None else Schedule.starting_now(speed, sync_clock)
    async_schedule = None if speed is None else Schedule.starting_now(speed, async_clock)

    assert read_sync(replay_of(end, sync_schedule, sync_clock)) == expected
    assert anyio.run(read_async, replay_of(end, async_schedule, async_clock)) == expected
    # At 1x the body took its recorded time on the clock; at instant speed none at all.
    assert sync_clock.now() == async_clock.now() == (0.0 if speed is None else 0.6)


@pytest.mark.parametrize("speed", [None, 1.0], ids=["instant", "1x"])
def test_a_closed_body_hands_out_nothing_more_and_no_end(speed: float | None) -> None:
    clock = VirtualClock()
    schedule = None if speed is None else Schedule.starting_now(speed, clock)
    body = replay_of(CUT, schedule, clock).body(fail, None)
    body.head()
    chunks = iter(body)
    assert next(chunks) == CHUNKS[0].data
    body.close()
    assert list(chunks) == []  # neither the second chunk nor the recorded cut


def test_route_sends_an_ignored_host_live_and_decides_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "c.msgpack"
    response = Response(status=200, chunks=CHUNKS, end=StreamEnd(at=0.6))
    Cassette([Interaction(request=asked(), response=response)]).save(path)
    session = replay.use_cassette(
        path, record_mode="none", speed="instant", ignore_hosts=["live.example.test"]
    )
    with session:
        assert route(session, "https://live.example.test/x") is LIVE
        way = route(session, URL)
        assert isinstance(way, Exchange)
        decided = way.decide(asked())
        assert isinstance(decided, Replay)
        assert decided.played.response.chunks.payloads == tuple(c.data for c in CHUNKS)
        with pytest.raises(CassetteMismatchError):
            way.decide(asked("https://api.example.test/v1/other"))

    recording = replay.use_cassette(tmp_path / "new.msgpack", record_mode="all")
    with recording as cassette:
        way = route(recording, URL)
        assert isinstance(way, Exchange)
        decided = way.decide(asked())
        assert isinstance(decided, Record)
        decided.recording.got_headers(200, [])
        decided.recording.finish()
    assert [i.request.url for i in cassette.interactions] == [URL]


def test_a_send_that_fails_ends_its_recording_and_records_nothing() -> None:
    cassette = Cassette()
    tape = Tape(cassette)
    clock = VirtualClock()
    record = Record(tape.start(asked(), clock, clock.now()))

    def refuse() -> object:
        raise ConnectionRefusedError("refused")

    with pytest.raises(ConnectionRefusedError):
        record.sent(refuse)
    assert tape.open == 0
    assert cassette.interactions == []


class Items:
    """A reader that hands out fixed items, as a recording reader would."""

    def __init__(self, items: list[object]) -> None:
        self.items = list(items)
        self.over = False
        self.closed = 0

    def get(self) -> object:
        item = self.items.pop(0) if self.items else END
        self.over = not isinstance(item, bytes)
        return item

    async def aget(self) -> object:
        return self.get()

    def abandon(self) -> bool:
        return True

    def close(self) -> None:
        self.closed += 1

    async def aclose(self) -> None:
        self.closed += 1


def test_one_feed_reads_a_reader_s_items_alike_sync_and_async() -> None:
    items: list[object] = [b"a", b"b", Failed(Cut("cut"))]
    sync_seen: list[bytes] = []
    with pytest.raises(Cut):
        sync_seen.extend(SyncFeed(Items(items)))

    async def read() -> list[bytes]:
        seen: list[bytes] = []

        async def collect() -> None:
            async for data in AsyncFeed(Items(items)):
                seen.append(data)

        with pytest.raises(Cut):
            await collect()
        return seen

    assert sync_seen == anyio.run(read) == [b"a", b"b"]
    clean = SyncFeed(Items([b"a", END, b"never"]))
    assert list(clean) == [b"a"]


def test_a_feed_closes_its_reader_once() -> None:
    reader = Items([b"a"])
    feed = SyncFeed(reader)
    feed.close()
    feed.close()
    async_reader = Items([b"a"])
    async_feed = AsyncFeed(async_reader)

    async def close_twice() -> None:
        await async_feed.aclose()
        await async_feed.aclose()

    anyio.run(close_twice)
    assert reader.closed == async_reader.closed == 1
