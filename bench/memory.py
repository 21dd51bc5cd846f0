"""Peak memory of recording and replaying a long stream through `use_cassette` (issue 25).

A local origin (`replay.testing.origin.Origin`, in a process of its own) serves a body of `--mib`
MiB in 64 KiB HTTP chunks; a fresh Python process records `--streams` such streams into a
new cassette in one session (record mode "all"), through httpx, reading each with
`iter_raw`; another fresh process replays them (record mode "none"). Each process resets
its peak RSS (`VmHWM`, through `/proc/self/clear_refs`) once httpx, replay and a client are
loaded, and reports how far the session took it above what it held then: the figure is
that growth over one body's size (the goal: under 1.5x, whatever the number of streams).
Linux only.

    python bench/memory.py                 # 1 GiB, one stream
    python bench/memory.py --mib 256 --streams 4
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import servers  # beside this script

from replay.testing import Script

BLOCK = 64 * 1024

CHILD = textwrap.dedent(
    """
    import gc, json, sys, time
    import httpx
    import replay

    def kib(field):
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith(field))

    mode, path, url, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with httpx.Client():
        pass
    gc.collect()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # VmHWM := VmRSS
    before = kib("VmHWM:")
    start = time.perf_counter()
    got = 0
    with replay.use_cassette(path, record_mode=mode), httpx.Client(timeout=120) as client:
        for _ in range(count):
            with client.stream("GET", url) as response:
                for part in response.iter_raw():
                    got += len(part)
    seconds = time.perf_counter() - start
    print(json.dumps({"before": before, "peak": kib("VmHWM:"), "got": got, "seconds": seconds}))
    """
)


def run(mode: str, cassette: Path, url: str, streams: int) -> dict[str, float]:
    """What a fresh process recording (or replaying) in `mode` reported."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(cassette), url, str(streams)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the {mode!r} process failed:\n{done.stderr}")
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="the body's size (1024)")
    parser.add_argument("--streams", type=int, default=1, help="streams in the session (1)")
    options = parser.parse_args()
    size = options.mib * 1024 * 1024
    block = bytes(range(256)) * (BLOCK // 256)
    route = Script(chunks=((0.0, block),) * (size // BLOCK), headers=(("x-bench", "1"),))
    with tempfile.TemporaryDirectory() as directory, servers.origin({"/big": route}) as origin:
        cassette = Path(directory) / "big.msgpack"
        print(f"{options.streams} stream(s) of {options.mib} MiB, {BLOCK // 1024} KiB chunks")
        for mode, doing in (("all", "record"), ("none", "replay")):
            figures = run(mode, cassette, f"{origin}/big", options.streams)
            assert figures["got"] == size * options.streams, figures
            growth = (figures["peak"] - figures["before"]) * 1024
            file_mib = cassette.stat().st_size / 2**20
            print(
                f"{doing:7} peak RSS +{growth / 2**20:7.0f} MiB = {growth / size:.2f}x the body"
                f"  ({figures['seconds']:.1f} s; cassette {file_mib:.0f} MiB)"
            )


if __name__ == "__main__":
    main()
