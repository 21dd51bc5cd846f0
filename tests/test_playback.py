"""Replay transports (replay.adapters.playback): the recorded bytes, on the recorded schedule,
ending as recorded, through httpx and httpx2 clients, sync and async (asyncio and trio).

Exact timing is checked on a VirtualClock: the client stamps each chunk with the clock the
transport sleeps on, so a chunk due at `at / speed` must arrive at exactly that reading.
Real-clock checks keep tolerances a loaded 2-core machine meets.
"""

from __future__ import annotations

import gc
import math
import statistics
import subprocess
import sys
import time
import warnings
import zlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import anyio
import attrs
import pytest
from flavours import ABANDONED_HTTPX_GENERATORS, FLAVOURS, HTTPX_FLAVOURS, LIBRARIES
from pacing import LATE

import replay
from replay import Cassette, Chunk, Interaction, Request, Response, StreamEnd, VirtualClock

URL = "https://api.example.test/v1/responses"
BODY = b'{"model": "m", "input": "hi", "stream": true}'
JSON = {"content-type": "application/json"}

# An SSE stream whose chunks cut an event line in two and "é" (b"\xc3\xa9") between its bytes.
SSE_CHUNKS = (
    b'event: response.created\ndata: {"type":"resp',
    b'onse.created"}\n\n',
    b'event: response.output_text.delta\ndata: {"delta":"H\xc3',
    b'\xa9llo"}\n\nevent: response.completed\n',
    b'data: {"type":"response.completed"}\n\n',
)


def recorded(
    chunks: tuple[tuple[float, bytes], ...],
    *,
    end_at: float | None = None,
    error: str | None = None,
    message: str = "",
    headers_at: float = 0.0,
    status: int = 200,
    headers: tuple[tuple[str, str], ...] = (("content-type", "text/event-stream"),),
) -> Response:
    """A recorded response; the end defaults to the last chunk's time."""
    last = chunks[-1][0] if chunks else headers_at
    return Response(
        status=status,
        headers=headers,
        headers_at=headers_at,
        chunks=[Chunk(at, data) for at, data in chunks],
        end=StreamEnd(at=last if end_at is None else end_at, error=error, message=message),
    )


def cassette_of(*responses: Response) -> Cassette:
    """A cassette answering `POST URL` with BODY by `responses`, in order."""
    request = Request(
        method="POST", url=URL, headers=[("content-type", "application/json")], body=BODY
    )
    return Cassette([Interaction(request, response) for response in responses])


def evenly(count: int, gap: float, *, first: float = 0.0) -> tuple[tuple[float, bytes], ...]:
    """`count` SSE chunks `gap` seconds apart, the first at `first`."""
    return tuple((first + i * gap, b"data: %d\n\n" % i) for i in range(count))


@attrs.define
class Seen:
    """What a client saw of one replayed response, stamped by `stamp`."""

    status: int = 0
    headers: list[tuple[bytes, bytes]] = attrs.Factory(list)
    sent_at: float = math.nan
    headers_at: float = math.nan
    chunks: list[Any] = attrs.Factory(list)
    times: list[float] = attrs.Factory(list)
    end_at: float = math.nan
    error: Exception | None = None


@attrs.frozen
class Play:
    """How to play: the client's library and runner, and what the client does."""

    library: str
    runner: str
    text: bool = False  # iter_text (decoded) rather than iter_raw
    limit: int | None = None  # close after this many chunks
    body: bytes = BODY

    @property
    def module(self) -> ModuleType:
        return LIBRARIES[self.library]


def play(
    flavour: tuple[str, str],
    cassette: Cassette,
    *,
    speed: replay.clock.SpeedLike = "instant",
    clock: replay.clock.Clock | None = None,
    stamp: Callable[[], float] = time.monotonic,
    **how: Any,
) -> Seen:
    """Replay `cassette`'s next answer to a client of `flavour`; return what it saw."""
    plan = Play(*flavour, **how)
    if plan.runner == "sync":
        transport = replay.ReplayTransport(cassette, speed=speed, clock=clock)
        return _play_sync(plan, transport, stamp)
    async_transport = replay.AsyncReplayTransport(cassette, speed=speed, clock=clock)
    return anyio.run(_play_async, plan, async_transport, stamp, backend=plan.runner)


def _play_sync(plan: Play, transport: Any, stamp: Callable[[], float]) -> Seen:
    seen = Seen()
    module = plan.module
    with module.Client(transport=transport) as client:
        seen.sent_at = stamp()
        with client.stream("POST", URL, content=plan.body, headers=JSON) as response:
            seen.headers_at = stamp()
            seen.status, seen.headers = response.status_code, list(response.headers.raw)
            try:
                for piece in response.iter_text() if plan.text else response.iter_raw():
                    seen.chunks.append(piece)
                    seen.times.append(stamp())
                    if len(seen.chunks) == plan.limit:
                        break
            except module.TransportError as error:
                seen.error = error
            seen.end_at = stamp()
    return seen


async def _play_async(plan: Play, transport: Any, stamp: Callable[[], float]) -> Seen:
    seen = Seen()
    module = plan.module
    async with module.AsyncClient(transport=transport) as client:
        seen.sent_at = stamp()
        async with client.stream("POST", URL, content=plan.body, headers=JSON) as response:
            seen.headers_at = stamp()
            seen.status, seen.headers = response.status_code, list(response.headers.raw)
            try:
                async for piece in response.aiter_text() if plan.text else response.aiter_raw():
                    seen.chunks.append(piece)
                    seen.times.append(stamp())
                    if len(seen.chunks) == plan.limit:
                        break
            except module.TransportError as error:
                seen.error = error
            seen.end_at = stamp()
    return seen


class RaisingClock:
    """A clock that fails the test on any use: instant replay must never read or wait."""

    def now(self) -> float:
        raise AssertionError("instant replay read the clock")

    def sleep(self, seconds: float) -> None:
        raise AssertionError("instant replay slept")

    async def asleep(self, seconds: float) -> None:
        raise AssertionError("instant replay slept")


@attrs.define
class OversleepingClock(VirtualClock):
    """A virtual clock whose every sleep overshoots by 3 ms, like a busy machine's."""

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds + 0.003)


# -- bytes and boundaries -------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_replay_yields_exactly_the_recorded_chunks(flavour: tuple[str, str]) -> None:
    chunks = tuple((0.01 * i, data) for i, data in enumerate(SSE_CHUNKS))
    seen = play(flavour, cassette_of(recorded(chunks)))
    assert seen.chunks == list(SSE_CHUNKS)
    assert seen.error is None


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_replay_answers_with_the_recorded_status_and_headers_in_order(
    flavour: tuple[str, str],
) -> None:
    headers = (("content-type", "text/event-stream"), ("x-trace", "a"), ("X-Trace", "b"))
    seen = play(flavour, cassette_of(recorded(evenly(1, 0.0), status=201, headers=headers)))
    assert seen.status == 201
    assert seen.headers == [(k.encode(), v.encode()) for k, v in headers]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_replay_keeps_latin1_header_values_beyond_ascii(flavour: tuple[str, str]) -> None:
    headers = (("content-type", "text/event-stream"), ("x-name", "caf\xe9"))
    seen = play(flavour, cassette_of(recorded(evenly(1, 0.0), headers=headers)))
    assert seen.headers == [(b"content-type", b"text/event-stream"), (b"x-name", b"caf\xe9")]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_replay_of_an_empty_body_ends_at_once(flavour: tuple[str, str]) -> None:
    seen = play(flavour, cassette_of(recorded(())))
    assert seen.chunks == []
    assert seen.error is None


# -- schedule ------------------------------------------------------------------------------------

TIMED = recorded(
    tuple(zip((0.5, 0.52, 0.9, 1.4, 1.4), SSE_CHUNKS, strict=True)), headers_at=0.3, end_at=1.5
)


@pytest.mark.parametrize("speed", [1, 10, 0.5, "10x"], ids=["1x", "10x", "0.5x", "str-10x"])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_each_chunk_arrives_exactly_at_start_plus_at_over_speed(
    flavour: tuple[str, str], speed: float | str
) -> None:
    clock = VirtualClock(time=100.0)
    factor = replay.parse_speed(speed)
    seen = play(flavour, cassette_of(TIMED), speed=speed, clock=clock, stamp=clock.now)
    expected = [100.0 + chunk.at / factor for chunk in TIMED.chunks]
    assert seen.times == pytest.approx(expected, abs=1e-9)
    assert seen.chunks == [chunk.data for chunk in TIMED.chunks]


@pytest.mark.parametrize("speed", [1, 10, 0.5], ids=["1x", "10x", "0.5x"])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_headers_arrive_after_the_recorded_header_delay(
    flavour: tuple[str, str], speed: float
) -> None:
    clock = VirtualClock()
    seen = play(flavour, cassette_of(TIMED), speed=speed, clock=clock, stamp=clock.now)
    assert seen.headers_at == pytest.approx(TIMED.headers_at / speed, abs=1e-9)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_body_ends_at_the_recorded_end_time(flavour: tuple[str, str]) -> None:
    clock = VirtualClock()
    seen = play(flavour, cassette_of(TIMED), speed=2, clock=clock, stamp=clock.now)
    assert seen.end_at == pytest.approx(TIMED.end.at / 2, abs=1e-9)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_late_wakeups_do_not_accumulate_into_drift(flavour: tuple[str, str]) -> None:
    clock = OversleepingClock()
    response = recorded(evenly(30, 0.1, first=0.1))
    seen = play(flavour, cassette_of(response), speed=1, clock=clock, stamp=clock.now)
    lateness = [t - chunk.at for t, chunk in zip(seen.times, response.chunks, strict=True)]
    # Every chunk is 3 ms late (its own oversleep), never 3 ms per chunk before it.
    assert lateness == pytest.approx([0.003] * 30, abs=1e-9)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_instant_replay_never_reads_the_clock_nor_sleeps(flavour: tuple[str, str]) -> None:
    response = recorded(
        tuple(zip((0.5, 1.0, 2.0, 3.0, 4.0), SSE_CHUNKS, strict=True)),
        headers_at=0.4,
        end_at=5.0,
        error="RemoteProtocolError",
    )
    seen = play(flavour, cassette_of(response), speed="instant", clock=RaisingClock())
    assert seen.chunks == list(SSE_CHUNKS)
    assert isinstance(seen.error, LIBRARIES[flavour[0]].RemoteProtocolError)


@pytest.mark.parametrize("speed", ["instant", math.inf], ids=["str", "inf"])
def test_instant_replay_of_a_long_recording_takes_no_time(speed: str | float) -> None:
    response = recorded(evenly(200, 1.0, first=10.0), headers_at=10.0)  # 210 s as recorded
    before = time.monotonic()
    seen = play(("httpx", "sync"), cassette_of(response), speed=speed)
    assert len(seen.chunks) == 200
    assert time.monotonic() - before < 5.0  # 210 s if it waited; a busy machine adds a little


# -- the recorded end ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded_error", "raised"),
    [
        pytest.param("RemoteProtocolError", "RemoteProtocolError", id="dropped"),
        pytest.param("ReadTimeout", "ReadTimeout", id="read-timeout"),
        pytest.param("ReadError", "ReadError", id="read-error"),
        pytest.param("ConnectionResetError", "RemoteProtocolError", id="foreign-error"),
        pytest.param("HTTPStatusError", "RemoteProtocolError", id="not-a-request-error"),
    ],
)
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_recorded_error_is_raised_as_the_clients_own_class_after_all_bytes(
    flavour: tuple[str, str], recorded_error: str, raised: str
) -> None:
    response = recorded(
        tuple((0.0, data) for data in SSE_CHUNKS),
        end_at=0.1,
        error=recorded_error,
        message="peer closed connection without sending complete message body",
    )
    seen = play(flavour, cassette_of(response))
    assert seen.chunks == list(SSE_CHUNKS)
    assert type(seen.error) is getattr(LIBRARIES[flavour[0]], raised)
    assert str(seen.error) == "peer closed connection without sending complete message body"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_recorded_error_is_raised_at_its_recorded_time(flavour: tuple[str, str]) -> None:
    clock = VirtualClock()
    response = recorded(evenly(2, 0.1), end_at=0.75, error="ReadTimeout")
    seen = play(flavour, cassette_of(response), speed=1, clock=clock, stamp=clock.now)
    assert isinstance(seen.error, LIBRARIES[flavour[0]].ReadTimeout)
    assert seen.end_at == pytest.approx(0.75, abs=1e-9)


# -- compression ---------------------------------------------------------------------------------

PLAIN = ("data: héllo\n\n", "data: wörld\n\n", "data: [DONE]\n\n")


def gzip_chunks(pieces: tuple[str, ...]) -> tuple[bytes, ...]:
    """`pieces` gzip-compressed as a streaming server sends them: one sync flush per piece."""
    deflate = zlib.compressobj(wbits=31)
    out = [deflate.compress(p.encode()) + deflate.flush(zlib.Z_SYNC_FLUSH) for p in pieces]
    return (*out, deflate.flush())


GZIPPED = recorded(
    tuple((0.01 * i, data) for i, data in enumerate(gzip_chunks(PLAIN))),
    headers=(("content-type", "text/event-stream"), ("content-encoding", "gzip")),
)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_compressed_body_replays_compressed(flavour: tuple[str, str]) -> None:
    seen = play(flavour, cassette_of(GZIPPED))
    assert seen.chunks == [chunk.data for chunk in GZIPPED.chunks]
    assert seen.chunks[0].startswith(b"\x1f\x8b")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_compressed_body_is_decoded_by_the_client(flavour: tuple[str, str]) -> None:
    seen = play(flavour, cassette_of(GZIPPED), text=True)
    assert "".join(seen.chunks) == "".join(PLAIN)


# -- matching ------------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_unmatched_request_raises_cassette_mismatch_naming_it(
    flavour: tuple[str, str],
) -> None:
    cassette = cassette_of(recorded(evenly(1, 0.0)))
    with pytest.raises(replay.CassetteMismatchError) as caught:
        play(flavour, cassette, body=b'{"model": "other"}')
    assert f"POST {URL}" in str(caught.value)
    assert cassette.play_count == 0


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_each_interaction_answers_once(flavour: tuple[str, str]) -> None:
    cassette = cassette_of(recorded(evenly(1, 0.0)))
    assert play(flavour, cassette).chunks == [b"data: 0\n\n"]
    assert cassette.play_count == 1
    assert cassette.all_played
    with pytest.raises(replay.CassetteMismatchError):
        play(flavour, cassette)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_interactions_for_the_same_request_answer_in_recorded_order(
    flavour: tuple[str, str],
) -> None:
    cassette = cassette_of(recorded(((0.0, b"first"),)), recorded(((0.0, b"second"),)))
    assert play(flavour, cassette).chunks == [b"first"]
    assert play(flavour, cassette).chunks == [b"second"]


# -- early close ---------------------------------------------------------------------------------


@ABANDONED_HTTPX_GENERATORS
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_client_closing_early_stops_the_replay(flavour: tuple[str, str]) -> None:
    clock = VirtualClock()
    response = recorded(evenly(5, 0.1, first=0.1), end_at=0.6)
    seen = play(flavour, cassette_of(response), speed=1, clock=clock, stamp=clock.now, limit=2)
    assert seen.chunks == [b"data: 0\n\n", b"data: 1\n\n"]
    # Only the waits for the two chunks read: nothing was waited for after the close.
    assert len(clock.sleeps) == 2
    assert clock.now() == pytest.approx(0.2, abs=1e-9)


@ABANDONED_HTTPX_GENERATORS
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_client_closing_early_at_instant_speed_gets_no_recorded_error(
    flavour: tuple[str, str],
) -> None:
    response = recorded(evenly(5, 0.1), end_at=0.5, error="RemoteProtocolError")
    seen = play(flavour, cassette_of(response), limit=2)
    assert seen.chunks == [b"data: 0\n\n", b"data: 1\n\n"]
    assert seen.error is None


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("library", list(LIBRARIES))
def test_an_async_instant_body_let_go_half_read_leaves_nothing_to_finalize(
    library: str, backend: str
) -> None:
    """Its stream read directly (as a wrapping transport would) and closed after one chunk:
    nothing is left for the event loop to finalize, so trio has nothing to warn of."""
    module = LIBRARIES[library]
    response = recorded(evenly(5, 0.1), end_at=0.5, error="RemoteProtocolError")
    transport = replay.AsyncReplayTransport(cassette_of(response), speed="instant")

    async def read_one() -> list[bytes]:
        answer = await transport.handle_async_request(module.Request("POST", URL, content=BODY))
        taken = []
        async for chunk in answer.stream:
            taken.append(chunk)
            break
        await answer.aclose()
        del answer
        gc.collect()  # in the run: an async generator left unfinished is finalized now
        return taken

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert anyio.run(read_one, backend=backend) == [b"data: 0\n\n"]
    # (Only replay's: the collection may finalize what earlier tests of the process left.)
    assert [str(w.message) for w in caught if "replay.adapters.playback" in str(w.message)] == []


@ABANDONED_HTTPX_GENERATORS
@pytest.mark.parametrize("flavour", HTTPX_FLAVOURS)
def test_a_client_closing_early_returns_without_waiting_for_the_rest(
    flavour: tuple[str, str],
) -> None:
    response = recorded(((0.0, b"data: now\n\n"), (60.0, b"data: in a minute\n\n")))
    before = time.monotonic()
    seen = play(flavour, cassette_of(response), speed=1, limit=1)
    assert seen.chunks == [b"data: now\n\n"]
    assert time.monotonic() - before < 5.0  # 60 s if it waited for the rest


# -- real clock ------------------------------------------------------------------------------------

HALF_SECOND = recorded(evenly(10, 0.05, first=0.05), headers_at=0.02, end_at=0.5)


@pytest.mark.parametrize("speed", [1, 10], ids=["1x", "10x"])
@pytest.mark.parametrize("flavour", HTTPX_FLAVOURS)
def test_real_clock_replay_takes_the_recorded_time_over_speed(
    flavour: tuple[str, str], speed: float
) -> None:
    seen = play(flavour, cassette_of(HALF_SECOND), speed=speed)
    expected = HALF_SECOND.end.at / speed
    # Never early (deadlines are absolute); late only by what a busy machine adds, which
    # at 10x must stay well under the 0.45 s that playing it at 1x would add.
    late = LATE if speed == 1 else 0.2
    assert expected - 0.002 <= seen.end_at - seen.sent_at <= expected + late
    errors = [
        (t - seen.sent_at) - chunk.at / speed
        for t, chunk in zip(seen.times, HALF_SECOND.chunks, strict=True)
    ]
    assert min(errors) >= -0.002
    assert statistics.median(errors) < 0.05  # most wake-ups are prompt, busy or not
    assert max(errors) < late


def test_an_instant_replay_never_imports_the_stepper_nor_compiles_key_shapes() -> None:
    """What a test suite's replay imports and compiles, it pays for in every run: sync or
    async, an instant replay without a stall runs without a Stepper. Said without naming a
    module: a paced replay afterwards still imports what pacing needs, and redacting a key
    afterwards still compiles the key shapes (neither was done ahead of need)."""
    code = f"""
import asyncio
import re
import sys
import httpx
import replay
compiled = []
compile = re.compile
re.compile = lambda *args, **kwargs: compiled.append(args[0]) or compile(*args, **kwargs)
cassette = replay.Cassette([replay.Interaction(
    replay.Request(method="POST", url={URL!r}, headers=[("content-type", "application/json")],
                   body={BODY!r}),
    replay.Response(status=200, chunks=[replay.Chunk(0.1, b"data: x\\n\\n")]))],
    allow_playback_repeats=True)
def play(speed):
    with httpx.Client(transport=replay.ReplayTransport(cassette, speed=speed)) as client:
        with client.stream("POST", {URL!r}, content={BODY!r}, headers={JSON!r}) as response:
            assert list(response.iter_bytes()) == [b"data: x\\n\\n"]
async def main():
    transport = replay.AsyncReplayTransport(cassette, speed="instant")
    async with httpx.AsyncClient(transport=transport) as client:
        async with client.stream("POST", {URL!r}, content={BODY!r}, headers={JSON!r}) as response:
            assert [chunk async for chunk in response.aiter_bytes()] == [b"data: x\\n\\n"]
play("instant")
asyncio.run(main())
instant = set(sys.modules)
play(1000)
assert set(sys.modules) - instant, "a paced replay imported nothing the instant one had not"
before = len(compiled)
keyed = replay.Request(method="POST", url={URL!r}, headers=[("content-type", "application/json")],
                       body=b'{{"input": "sk-proj-0123456789abcdefghijklmnop"}}')
assert b"sk-proj" not in replay.Redactor().request(keyed).body
assert len(compiled) > before, "the key shapes were compiled before a key was looked for"
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
