"""A Ctrl-C or SIGTERM while `use_cassette` saves does not lose the recording.

A real Python process records one request into a large cassette (so that the merge at the
end of its block rewrites many megabytes) and is signalled at several moments of that save,
each found by polling (its line saying it leaves the block; the temporary file appearing;
the temporary file half written), never by sleeping. Afterwards the cassette loads and is
the old one or the complete new one; once the save had begun, it is the new one: the
session held the signal back and delivered it after the save.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import replay
from replay.model import Chunks, Interaction, Request, Response
from replay.store.file import save_interactions
from replay.testing import Origin, Script

OLD = 48  # interactions in the cassette before
PIECE = b"x" * (1 << 20)
TIMEOUT = 60.0

CHILD = """
import sys
import httpx
import replay

path, url = sys.argv[1], sys.argv[2]
with replay.use_cassette(path, record_mode="new_episodes"):
    httpx.get(url).read()
    print("leaving", flush=True)
print("saved", flush=True)
"""


@pytest.fixture(scope="module")
def origin() -> Iterator[Origin]:
    with Origin({"/new": Script(chunks=[(0.0, b"data: new\n\n")])}) as server:
        yield server


def _old_cassette(path: Path) -> int:
    interactions = [
        Interaction(
            request=Request(method="GET", url=f"http://127.0.0.1:9/old?n={n}"),
            response=Response(status=200, chunks=Chunks([0.0, 0.1], [PIECE, PIECE])),
        )
        for n in range(OLD)
    ]
    save_interactions(path, interactions)
    return path.stat().st_size


def _temporaries(path: Path) -> list[Path]:
    return list(path.parent.glob(f".{path.name}.*.tmp"))


def _wait_for(condition: object, process: subprocess.Popen[str]) -> bool:
    """Poll `condition()` until it holds (True) or the process has ended (False)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.001)
    raise AssertionError("the child neither got there nor ended")


def _half_written(path: Path, size: int) -> bool:
    for temporary in _temporaries(path):
        try:
            if temporary.stat().st_size >= size // 2:
                return True
        except FileNotFoundError:
            pass
    return False


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
@pytest.mark.parametrize("when", ["leaving", "temporary", "half"])
def test_a_signal_during_the_save_leaves_the_old_or_the_whole_new_cassette(
    tmp_path: Path, origin: Origin, how: signal.Signals, when: str
) -> None:
    path = tmp_path / "big.msgpack"
    size = _old_cassette(path)
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), f"{origin.url}/new"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "leaving\n"
        if when == "temporary":
            during = _wait_for(lambda: bool(_temporaries(path)), process)
        elif when == "half":
            during = _wait_for(lambda: _half_written(path, size), process)
        else:
            during = False
        process.send_signal(how)
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    held = len(replay.Cassette.load(path).interactions)
    assert held in (OLD, OLD + 1), err
    assert not _temporaries(path)
    if during:  # signalled while the save was under way: it ended, then the signal came
        assert held == OLD + 1, err
        assert "saved" not in out
        if how == signal.SIGTERM:
            assert process.returncode == -signal.SIGTERM
        else:
            assert "KeyboardInterrupt" in err
