"""`replay record` stopped at its worst moments, as a user's shell or a supervisor stops it.

Real processes throughout: `replay record` (a subprocess) runs a program (its subprocess)
that records from a local origin, and is sent real signals. What must hold: a SIGTERM
while replay merges lets the merge finish (OUT whole, nothing left beside it); a SIGKILL of
replay takes the program down with it (Linux), and the next run into the same OUT finishes
what the killed one left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import replay
from replay.model import Chunk, Interaction, Request, Response
from replay.store.file import save_interactions
from replay.testing import Origin, Script

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux signals")

MEGABYTE = 1024 * 1024

# Downloads the big body, recorded, then ends: replay merges as soon as it is gone.
DOWNLOAD = """
import os, sys
import httpx

with httpx.stream("GET", sys.argv[1] + "/big") as response:
    size = sum(len(chunk) for chunk in response.iter_bytes())
print(os.getpid(), size, flush=True)
"""

# Makes a request, writes its pid where argv[2] says, then waits to be stopped.
REQUEST_THEN_WAIT = """
import os, sys, time
import httpx

httpx.get(sys.argv[1] + "/small")
with open(sys.argv[2] + ".new", "w") as file:
    file.write(str(os.getpid()))
os.rename(sys.argv[2] + ".new", sys.argv[2])
time.sleep(60)
"""


@pytest.fixture
def big_origin() -> Iterator[Origin]:
    """/big: 24 MiB in 64 KiB chunks, at once; /small: one short chunk."""
    binary = (("content-type", "application/octet-stream"),)
    block = b"\x5a" * (64 * 1024)
    routes = {
        "/big": Script(chunks=[(0.0, block)] * 384, headers=binary),
        "/small": Script(chunks=[(0.0, b"hello")], headers=binary),
    }
    with Origin(routes) as server:
        yield server


def program(tmp_path: Path, source: str) -> str:
    path = tmp_path / "app.py"
    path.write_text(textwrap.dedent(source))
    return str(path)


def start_record(out: Path, *command: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "replay.cli", "record", str(out), "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # out of the terminal's foreground: signals are ours only
    )


def is_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def wait_until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.002)
    return False


def leftovers(out: Path) -> list[str]:
    return sorted(path.name for path in out.parent.iterdir() if path != out)


def big_cassette(path: Path) -> None:
    """A cassette of 48 MiB, so that merging into it takes a while."""
    chunk = b"\xa5" * (64 * 1024)
    save_interactions(
        path,
        [
            Interaction(
                Request(method="GET", url=f"http://earlier.example/{n}"),
                Response(status=200, chunks=[Chunk(i / 1000, chunk) for i in range(384)]),
            )
            for n in range(2)
        ],
    )


def test_sigterm_while_merging_lets_the_merge_finish(tmp_path: Path, big_origin: Origin) -> None:
    out = tmp_path / "cassettes" / "big.msgpack"
    out.parent.mkdir()
    big_cassette(out)
    app = program(tmp_path, DOWNLOAD)
    process = start_record(out, sys.executable, app, big_origin.url)
    try:
        assert process.stdout is not None
        pid, size = map(int, process.stdout.readline().split())
        assert size == 384 * 64 * 1024
        # Gone, not a zombie: replay has reaped it, and merges ~70 MiB from now on.
        assert wait_until(lambda: not is_alive(pid), 30)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
        held_for = time.monotonic() - started
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr  # held back, not killed by it
    assert held_for > 0.05  # a merge still went on when the signal came
    urls = [interaction.request.url for interaction in replay.Cassette.load(out).interactions]
    assert urls == ["http://earlier.example/0", "http://earlier.example/1", big_origin.url + "/big"]
    assert leftovers(out) == []
    assert "recorded 1 interaction" in stderr


def test_sigkill_of_replay_takes_the_program_down_and_the_next_run_merges_its_recording(
    tmp_path: Path, big_origin: Origin
) -> None:
    out = tmp_path / "cassettes" / "killed.msgpack"
    pid_file = tmp_path / "program.pid"
    app = program(tmp_path, REQUEST_THEN_WAIT)
    process = start_record(out, sys.executable, app, big_origin.url, str(pid_file))
    pid = None
    try:
        assert wait_until(pid_file.exists, 30), "the program never got to its request"
        pid = int(pid_file.read_text())
        process.kill()
        process.wait(timeout=10)
        assert wait_until(lambda: not is_alive(pid), 10), "the program outlived replay"
    finally:
        process.kill()
        if pid is not None and is_alive(pid):
            os.kill(pid, signal.SIGKILL)  # it holds replay's output pipes open
        process.communicate(timeout=30)
    assert [path[: len(".killed.msgpack.replay-")] for path in leftovers(out)] == [
        ".killed.msgpack.replay-"
    ]

    again = start_record(out, sys.executable, "-c", "pass")
    _, stderr = again.communicate(timeout=60)

    assert again.returncode == 0, stderr
    assert stderr.splitlines()[0] == (
        f"replay: {out}: merged the 1 interaction an interrupted run (pid {process.pid}) "
        "had recorded"
    )
    urls = [interaction.request.url for interaction in replay.Cassette.load(out).interactions]
    assert urls == [big_origin.url + "/small"]
    assert leftovers(out) == []
