"""Virtual time keeps the order of everything due: a timer the client set that falls inside
a gap the replay skips fires, at its virtual time, before the next chunk is delivered — so a
debounce (deltas grouped by a 0.1 s timer, as pydantic-ai's `debounce_by`) groups under
virtual time as the recording's times group, on asyncio and on trio."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import anyio
import httpx
import pytest
import trio

import replay
from replay.model import Chunk, Interaction, Request, Response, StreamEnd

URL = "http://api.replay.test/deltas"
DEBOUNCE = 0.1
# Delta arrival times, each at least 20 ms from any group's end (its first item + 0.1 s).
TIMES = [0.20, 0.23, 0.26, 0.33, 0.36, 0.41, 0.47, 0.58, 0.61, 0.64, 0.90, 1.20]
REAL_MONOTONIC = time.monotonic


def expected_groups() -> list[list[int]]:
    """The groups the recorded times make: a group ends `DEBOUNCE` after its first item."""
    groups: list[list[int]] = []
    for index, at in enumerate(TIMES):
        if groups and at < TIMES[groups[-1][0]] + DEBOUNCE:
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


@pytest.fixture
def deltas(tmp_path: Path) -> Path:
    response = Response(
        status=200,
        headers_at=0.1,
        chunks=[Chunk(at, f"{index};".encode()) for index, at in enumerate(TIMES)],
        end=StreamEnd(at=TIMES[-1] + 0.01),
    )
    path = tmp_path / "deltas.msgpack"
    replay.Cassette([Interaction(Request(method="GET", url=URL), response)]).save(path)
    return path


def numbers(chunks: list[bytes]) -> list[int]:
    return [int(part) for part in b"".join(chunks).decode().split(";") if part]


async def grouped_asyncio(path: Path) -> list[list[int]]:
    """Deltas grouped by an asyncio timer: `asyncio.wait(timeout=...)` on the next read."""
    groups: list[list[int]] = []
    async with httpx.AsyncClient() as client:
        with replay.use_cassette(path, record_mode="none", speed="virtual"):
            async with client.stream("GET", URL) as response:
                chunks = response.aiter_raw()
                pending: asyncio.Task[bytes] | None = None
                group: list[bytes] = []
                group_end = 0.0
                loop = asyncio.get_running_loop()
                while True:
                    if pending is None:
                        pending = asyncio.ensure_future(chunks.__anext__())
                    timeout = group_end - loop.time() if group else None
                    done, _ = await asyncio.wait({pending}, timeout=timeout)
                    if not done:  # the debounce timer: the group is complete
                        groups.append(numbers(group))
                        group = []
                        continue
                    try:
                        chunk = pending.result()
                    except StopAsyncIteration:
                        break
                    pending = None
                    if not group:
                        group_end = loop.time() + DEBOUNCE
                    group.append(chunk)
                if group:
                    groups.append(numbers(group))
    return groups


async def grouped_trio(path: Path) -> list[list[int]]:
    """Deltas grouped by a trio deadline (`move_on_at`) over a channel fed by a reader task."""
    groups: list[list[int]] = []
    send, receive = trio.open_memory_channel[bytes](100)

    async def read(client: httpx.AsyncClient) -> None:
        async with send, client.stream("GET", URL) as response:
            async for chunk in response.aiter_raw():
                await send.send(chunk)

    async with httpx.AsyncClient() as client:
        with replay.use_cassette(path, record_mode="none", speed="virtual"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read, client)
                group: list[bytes] = []
                group_end = 0.0
                async with receive:
                    while True:
                        with trio.move_on_at(group_end if group else float("inf")) as scope:
                            try:
                                chunk = await receive.receive()
                            except trio.EndOfChannel:
                                break
                        if scope.cancelled_caught:
                            groups.append(numbers(group))
                            group = []
                            continue
                        if not group:
                            group_end = trio.current_time() + DEBOUNCE
                        group.append(chunk)
                if group:
                    groups.append(numbers(group))
    return groups


def test_an_asyncio_debounce_groups_under_virtual_time_as_recorded(deltas: Path) -> None:
    started = REAL_MONOTONIC()

    groups = asyncio.run(grouped_asyncio(deltas))

    assert groups == expected_groups()
    assert REAL_MONOTONIC() - started < 1.0  # (skipped, not waited: 1.2 s recorded)


def test_a_trio_debounce_groups_under_virtual_time_as_recorded(deltas: Path) -> None:
    groups = anyio.run(grouped_trio, deltas, backend="trio")

    assert groups == expected_groups()


def test_a_timer_inside_a_skipped_gap_fires_at_its_virtual_time() -> None:
    async def main() -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        seen: list[tuple[str, float]] = []
        with replay.VirtualTime() as clock:
            start = loop.time()
            for delay in (3.0, 1.0, 2.0):
                loop.call_later(delay, lambda: seen.append(("timer", loop.time() - start)))
            await clock.asleep(5.0)
            seen.append(("chunk", loop.time() - start))
        return seen

    seen = asyncio.run(main())

    assert [name for name, _ in seen] == ["timer", "timer", "timer", "chunk"]
    assert [at for _, at in seen] == pytest.approx([1.0, 2.0, 3.0, 5.0], abs=0.05)
