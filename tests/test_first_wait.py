"""Every wait is on time from the first one: the first async replay at 1x in a fresh process
imports nothing between its request and its last chunk (the clock waits through the running
loop's own library; the Stepper is imported when the session starts), so its first chunk is
not late and its span is the recorded one. Run in a fresh subprocess, asyncio and trio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pacing import LATE

import replay
from replay.model import Chunk, Interaction, Request, Response, StreamEnd

URL = "http://api.replay.test/first"
TIMES = [0.08 + 0.03 * n for n in range(8)]  # recorded: headers at 0.05, a chunk every 30 ms

PROGRAM = """
import json, sys, time
import anyio, httpx, replay

async def main(path):
    async with httpx.AsyncClient() as client:
        with replay.use_cassette(path, record_mode="none", speed=1):
            before = set(sys.modules)
            started = time.monotonic()
            async with client.stream("GET", sys.argv[3]) as response:
                times = [time.monotonic() - started async for _ in response.aiter_raw()]
            imported = sorted(set(sys.modules) - before)
    return {"times": times, "imported": imported}

print(json.dumps(anyio.run(main, sys.argv[1], backend=sys.argv[2])))
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_first_async_replay_of_a_process_imports_nothing_and_keeps_its_span(
    tmp_path: Path, backend: str
) -> None:
    response = Response(
        status=200,
        headers_at=0.05,
        chunks=[Chunk(at, b"data: x\n\n") for at in TIMES],
        end=StreamEnd(at=TIMES[-1]),
    )
    path = tmp_path / "first.msgpack"
    replay.Cassette([Interaction(Request(method="GET", url=URL), response)]).save(path)

    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(path), backend, URL],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(done.stdout.splitlines()[-1])

    assert seen["imported"] == []
    times = seen["times"]
    assert len(times) == len(TIMES)
    assert all(at >= due - 0.002 for at, due in zip(times, TIMES, strict=True))  # never early
    # A loaded machine may make any chunk late (by up to `LATE`), the first one too: what
    # the import check above rules out is the cause that was always there.
    span, recorded = times[-1] - times[0], TIMES[-1] - TIMES[0]
    assert span >= recorded - LATE
    assert times[0] - TIMES[0] < LATE
