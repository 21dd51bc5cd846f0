"""Virtual time (replay.clock.vtime, `speed="virtual"`): replay skips its waits, and the clocks the
client reads move by exactly the recorded gaps — checked with the real SDKs, sync and
asyncio, on 30-second streams that replay in milliseconds. The limits the module documents
are checked too, so that the documentation stays true."""

from __future__ import annotations

import asyncio
import datetime
import json
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anthropic
import anyio
import httpx
import openai
import pytest
import trio
from pacing import LATE

import replay
from replay import faults
from replay.clock import vtime
from replay.dialects import anthropic as anthropic_dialect
from replay.dialects import responses
from replay.inspect import timing
from replay.run.child import replay_command
from replay.testing import Origin, Script

# The real clocks, bound before any test patches `time`.
REAL_MONOTONIC = time.monotonic
REAL_PERF_COUNTER = time.perf_counter
KEY = "sk-test"
JSON = {"content-type": "application/json"}
LONG_TEXT = " ".join(f"word{number}" for number in range(60))  # 60 tokens at 2/s: ~30 s


@pytest.fixture(scope="module", autouse=True)
def _warm_platform() -> None:
    # The SDKs' first request runs `uname -p` (platform.platform()): a real wait, which
    # virtual time rightly counts. It happens once per process; do it before measuring.
    platform.platform()


@pytest.fixture(scope="module")
def long_stream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, replay.Interaction]:
    """A 30-second Responses API stream (first token at 2.5 s, then 2 tokens a second)."""
    interaction = responses.stream(LONG_TEXT, ttft=2.5, tokens_per_second=2)
    path = tmp_path_factory.mktemp("vtime") / "long.msgpack"
    replay.Cassette([interaction]).save(path)
    return path, interaction


# --- the clock itself -----------------------------------------------------------------------


def readings() -> dict[str, float]:
    return {name: float(getattr(time, name)()) for name in vtime.PATCHED}


def test_virtual_time_patches_the_clocks_and_puts_them_back() -> None:
    originals = {name: getattr(time, name) for name in vtime.PATCHED}
    with replay.VirtualTime():
        assert vtime.is_active()
        assert all(getattr(time, name) is not originals[name] for name in vtime.PATCHED)

    assert not vtime.is_active()
    assert {name: getattr(time, name) for name in vtime.PATCHED} == originals


def test_a_replay_wait_moves_every_clock_by_exactly_its_length() -> None:
    with replay.VirtualTime() as clock:
        before = readings()
        clock.sleep(30.0)
        after = readings()
        skipped = clock.skipped

    for name in vtime.PATCHED:
        scale = 1e9 if name.endswith("_ns") else 1.0
        assert (after[name] - before[name]) / scale == pytest.approx(30.0, abs=1e-3), name
    assert skipped == 30.0  # the wait was skipped, not slept: exactly its length


def test_waiting_passes_time_and_computing_does_not() -> None:
    with replay.VirtualTime():
        started = time.monotonic()
        time.sleep(0.05)
        slept = time.monotonic() - started

        started, real = time.monotonic(), REAL_PERF_COUNTER()
        while REAL_PERF_COUNTER() - real < 0.05:  # 50 ms of pure computation
            pass
        computed = time.monotonic() - started

    assert 0.049 <= slept < 0.5  # a busy machine may oversleep
    assert computed < 0.01


def test_the_virtual_clock_never_goes_back() -> None:
    with replay.VirtualTime() as clock:
        values = []
        for step in range(2000):
            values.append(time.perf_counter())
            if step % 100 == 0:
                clock.sleep(0.5)

    assert values == sorted(values)


def test_nested_sessions_share_the_clock_and_the_last_one_out_restores_it() -> None:
    with replay.VirtualTime() as outer:
        with replay.VirtualTime() as inner:
            inner.sleep(10)
        assert vtime.is_active()
        assert outer.skipped == pytest.approx(10)
    assert not vtime.is_active()


def test_sleeping_needs_virtual_time_active_and_a_positive_time() -> None:
    clock = replay.VirtualTime()
    with pytest.raises(RuntimeError, match="not active"):
        clock.sleep(1)
    with clock, pytest.raises(ValueError, match="negative"):
        clock.sleep(-1)


def test_c_level_clocks_are_not_moved() -> None:
    """A documented limit: `datetime.now()` reads the system clock itself."""
    with replay.VirtualTime() as clock:
        clock.sleep(3600)
        wall = time.time()
        now = datetime.datetime.now(datetime.timezone.utc).timestamp()

    assert wall - now == pytest.approx(3600, abs=5)


def test_virtual_speed_brings_its_own_clock(tmp_path: Path) -> None:
    with pytest.raises(replay.ConfigurationError, match="virtual"):
        replay.use_cassette(tmp_path / "c.msgpack", speed="virtual", clock=replay.VirtualClock())


# --- TTFT with the real SDKs ------------------------------------------------------------------


def openai_ttfts(path: Path, body: dict[str, Any], runs: int) -> list[tuple[float, float]]:
    """Time to the first text delta and to the end, as an openai client measures them, in
    `runs` runs after a warm-up run (whose thread hop and first parse are real work)."""
    measured = []
    with openai.OpenAI(api_key=KEY, max_retries=0) as client:
        for _ in range(runs + 1):
            with replay.use_cassette(path, record_mode="none", speed="virtual"):
                started = time.perf_counter()
                first = None
                with client.responses.create(**body) as stream:
                    for event in stream:
                        if first is None and event.type == "response.output_text.delta":
                            first = time.perf_counter() - started
                assert first is not None
                measured.append((first, time.perf_counter() - started))
    return measured[1:]


async def openai_ttfts_async(
    path: Path, body: dict[str, Any], runs: int
) -> list[tuple[float, float]]:
    """`openai_ttfts` with the async client, timed on asyncio's loop clock."""
    loop = asyncio.get_running_loop()
    measured = []
    async with openai.AsyncOpenAI(api_key=KEY, max_retries=0) as client:
        for _ in range(runs + 1):
            async with replay.use_cassette(path, record_mode="none", speed="virtual"):
                started = loop.time()
                first = None
                async with await client.responses.create(**body) as stream:
                    async for event in stream:
                        if first is None and event.type == "response.output_text.delta":
                            first = loop.time() - started
                assert first is not None
                measured.append((first, loop.time() - started))
    return measured[1:]


@pytest.mark.parametrize("runner", ["sync", "asyncio"])
def test_virtual_time_gives_the_recorded_ttft_every_time_in_milliseconds(
    long_stream: tuple[Path, replay.Interaction], runner: str
) -> None:
    path, interaction = long_stream
    body = json.loads(interaction.request.body)
    recorded_ttft = timing.ttft(interaction)
    assert recorded_ttft is not None

    started = REAL_MONOTONIC()
    if runner == "sync":
        measured = openai_ttfts(path, body, runs=3)
    else:
        measured = asyncio.run(openai_ttfts_async(path, body, runs=3))
    real = REAL_MONOTONIC() - started

    assert interaction.response.duration > 30
    for ttft, total in measured:
        assert ttft == pytest.approx(recorded_ttft, abs=1e-3)
        assert total == pytest.approx(interaction.response.duration, abs=1e-3)
    assert real < 3.0  # four 30-second streams


def test_anthropic_sees_the_recorded_gaps_between_its_deltas(tmp_path: Path) -> None:
    interaction = anthropic_dialect.stream("Hello there, friend.", ttft=1.5, tokens_per_second=4)
    path = tmp_path / "a.msgpack"
    replay.Cassette([interaction]).save(path)
    body = json.loads(interaction.request.body)
    body.pop("stream")
    expected = [event.at for event in timing.token_events(interaction)]

    with (
        anthropic.Anthropic(api_key=KEY, max_retries=0) as client,
        replay.use_cassette(path, record_mode="none", speed="virtual"),
    ):
        started = time.monotonic()
        with client.messages.stream(**body) as stream:
            seen = [time.monotonic() - started for _ in stream.text_stream]

    assert seen == pytest.approx(expected, abs=1e-3)


# --- asyncio timers on virtual time -----------------------------------------------------------


def test_asyncio_sleep_passes_its_time_without_waiting_it() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        with replay.VirtualTime():
            started, real = loop.time(), REAL_MONOTONIC()
            await asyncio.sleep(30)
            return loop.time() - started, REAL_MONOTONIC() - real

    virtual, real = asyncio.run(main())

    assert virtual >= 30
    assert real < 15


def test_time_sleep_passes_its_time_without_waiting_it_in_the_virtual_thread() -> None:
    with replay.VirtualTime():
        started, real = time.monotonic(), REAL_MONOTONIC()
        time.sleep(30)
        virtual, real = time.monotonic() - started, REAL_MONOTONIC() - real
        waited: list[float] = []

        def other() -> None:  # another thread's sleep is a real one
            begun = REAL_MONOTONIC()
            time.sleep(0.05)
            waited.append(REAL_MONOTONIC() - begun)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()

    assert virtual >= 30
    assert real < 15
    assert waited[0] >= 0.049


def test_an_asyncio_timeout_fires_when_the_replay_skips_past_it(
    long_stream: tuple[Path, replay.Interaction],
) -> None:
    path, interaction = long_stream
    body = json.loads(interaction.request.body)
    stall = faults.stall(after_events=5, seconds=60)

    async def main() -> float:
        loop = asyncio.get_running_loop()
        async with (
            openai.AsyncOpenAI(api_key=KEY, max_retries=0) as client,
            replay.use_cassette(path, record_mode="none", speed="virtual", faults=[stall]),
        ):
            started = loop.time()

            async def consume() -> None:
                async for _ in await client.responses.create(**body):
                    pass

            with pytest.raises(TimeoutError):
                await asyncio.wait_for(consume(), 10)
            return loop.time() - started

    started = REAL_MONOTONIC()
    virtual = asyncio.run(main())

    assert REAL_MONOTONIC() - started < 5.0  # (the stall is 10 s long)
    assert virtual >= 10  # at the next turn of the loop after the skip (a documented limit)


def test_under_trio_the_skipped_time_moves_trio_s_clock_too(
    long_stream: tuple[Path, replay.Interaction],
) -> None:
    """trio bound `perf_counter` before the patch: the skips move its clock's offset."""
    path, interaction = long_stream
    cassette = replay.Cassette.load(path)

    async def main() -> float:
        with replay.VirtualTime() as clock:
            transport = replay.AsyncReplayTransport(cassette, speed=1, clock=clock)
            async with httpx.AsyncClient(transport=transport) as client:
                started = trio.current_time()
                request = cassette.interactions[0].request
                response = await client.post(request.url, content=request.body, headers=JSON)
                assert response.status_code == 200
                return trio.current_time() - started

    real = REAL_MONOTONIC()
    seen = anyio.run(main, backend="trio")

    assert REAL_MONOTONIC() - real < 5.0  # (the stream is 30 s long)
    assert interaction.response.duration <= seen < interaction.response.duration + 5.0


# --- `replay run --speed virtual` --------------------------------------------------------------

PROGRAM = """
import json, sys, time, httpx
request = json.loads(sys.argv[1])
with httpx.Client() as client:
    started = time.perf_counter()
    client.post(request["url"], json=json.loads(request["body"]))
    print(round(time.perf_counter() - started, 3))
"""


def test_replay_run_at_virtual_speed_gives_the_program_the_recorded_time(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], long_stream: tuple[Path, replay.Interaction]
) -> None:
    path, interaction = long_stream
    program = tmp_path / "app.py"
    program.write_text(PROGRAM)
    request = {"url": interaction.request.url, "body": interaction.request.body.decode()}

    code = replay_command(
        path, [sys.executable, str(program), json.dumps(request)], speed="virtual"
    )

    assert code == 0
    elapsed = float(capfd.readouterr().out)
    assert elapsed == pytest.approx(interaction.response.duration, abs=0.002)


def test_a_recording_in_a_virtual_session_keeps_real_time(tmp_path: Path) -> None:
    path = tmp_path / "new.msgpack"
    script = Script(chunks=[(0.05, b"data: one\n\n"), (0.05, b"data: two\n\n")])
    with Origin({"/sse": script}) as origin:
        url = origin.url
        with replay.use_cassette(path, speed="virtual"), httpx.Client() as client:
            client.get(f"{url}/sse").read()

    times = replay.Cassette.load(path).interactions[0].response.chunks.times
    assert 0.045 <= times[0] < 0.05 + LATE
    assert 0.095 <= times[1] < 0.1 + LATE
