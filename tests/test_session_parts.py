"""What a recording session has finished survives its process being killed (`replay.store.journal`).

A real subprocess records from a real local origin inside `use_cassette` and is SIGKILLed
while a stream is mid-way; the next session, `replay show` and `replay record` see what it
had finished.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from replay import use_cassette
from replay.store.file import load_interactions
from replay.store.journal import DURABLE_AFTER
from replay.testing import Origin, Script
from tests.commands import replay_text

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the parts' locks are flock's")

KEY = "sk-live-0123456789abcdefSECRET"
TOKEN = "Bearer tok-9876543210zyxwvuSECRET"

# Records 3 short streams (each with a key in its query and a token in its headers), the
# third once the session is old enough to write parts (so the first two are written then),
# says "3" on the pipe, then starts a 4th that never ends and says "4" once it is under way.
CHILD = textwrap.dedent(
    """
    import os, sys, time
    import httpx
    from replay import use_cassette
    from replay.store.journal import DURABLE_AFTER

    cassette, url, fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
    headers = {"Authorization": sys.argv[5]}
    with use_cassette(cassette, record_mode=sys.argv[6]), httpx.Client() as client:
        for n in range(3):
            if n == 2:
                time.sleep(DURABLE_AFTER)
            query = {"api_key": sys.argv[4], "n": str(n)}
            client.get(url + "/short", params=query, headers=headers).raise_for_status()
        os.write(fd, b"3")
        with client.stream("GET", url + "/endless", headers=headers) as response:
            for line in response.iter_lines():
                os.write(fd, b"4")
    """
)


@pytest.fixture
def origin() -> Iterator[Origin]:
    routes = {
        "/short": Script(chunks=[(0.0, b"data: a\n\n"), (0.01, b"data: b\n\n")]),
        "/endless": Script(chunks=[(0.0, b"data: first\n\n")], end="hang"),
    }
    with Origin(routes) as server:
        yield server


def _killed_mid_stream(cassette: Path, origin: Origin, mode: str = "all") -> list[Path]:
    """Run CHILD (recording in `mode`) until its 4th stream is mid-way, SIGKILL it; the
    files beside `cassette` just before the kill."""
    read, write = os.pipe()
    argv = [sys.executable, "-c", CHILD, str(cassette), origin.url, str(write), KEY, TOKEN, mode]
    errors = cassette.parent.parent / "child.stderr"
    with errors.open("wb") as stderr:
        child = subprocess.Popen(argv, pass_fds=(write,), stderr=stderr)
    os.close(write)
    said = b""
    try:
        while b"4" not in said:
            ready, _, _ = select.select([read], [], [], 30)
            chunk = os.read(read, 16) if ready else b""
            assert chunk, f"the child never got to its 4th stream: {errors.read_text()}"
            said += chunk
        beside = [path for path in cassette.parent.rglob("*") if path.is_file()]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        os.close(read)
    assert child.returncode == -signal.SIGKILL
    return beside


def test_what_a_killed_session_finished_is_merged_by_the_next(
    tmp_path: Path, origin: Origin
) -> None:
    cassette = tmp_path / "cassettes" / "c.msgpack"

    beside = _killed_mid_stream(cassette, origin)

    parts = [path for path in beside if path.suffix == ".msgpack"]
    assert len(parts) == 3
    assert not cassette.exists()  # nothing merged: the session never ended
    shown = replay_text("show", str(cassette))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("/short") == 3
    assert "/endless" not in shown.stdout
    assert "the last 3 interactions shown are not in" in shown.stderr

    with use_cassette(cassette, record_mode="new_episodes") as loaded:
        assert [i.request.url.split("?")[0] for i in loaded.interactions] == [
            f"{origin.url}/short"
        ] * 3
    stored = load_interactions(cassette)  # complete and valid
    assert sorted(i.request.url.rsplit("=", 1)[1] for i in stored) == ["0", "1", "2"]
    assert all(i.response.body == b"data: a\n\ndata: b\n\n" for i in stored)
    assert sorted(path.name for path in cassette.parent.iterdir()) == ["c.msgpack"]
    checked = replay_text("check", str(cassette))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_once_session_goes_on_with_the_recording_a_killed_one_left(
    tmp_path: Path, origin: Origin
) -> None:
    # It merged the parts, then recorded every request again: each stored twice.
    cassette = tmp_path / "cassettes" / "c.msgpack"
    _killed_mid_stream(cassette, origin, "once")

    with use_cassette(cassette, record_mode="once") as session, httpx.Client() as client:
        for n in range(4):
            client.get(origin.url + "/short", params={"api_key": KEY, "n": str(n)})
        assert session.play_count == 3  # what the killed session finished replays

    stored = load_interactions(cassette)
    assert sorted(i.request.url.rsplit("=", 1)[1] for i in stored) == ["0", "1", "2", "3"]


def test_no_part_holds_a_secret_of_the_requests(tmp_path: Path, origin: Origin) -> None:
    cassette = tmp_path / "cassettes" / "c.msgpack"

    beside = _killed_mid_stream(cassette, origin)

    assert len(beside) >= 3
    for path in beside:
        data = path.read_bytes()
        assert KEY.encode() not in data, path
        assert b"tok-9876543210" not in data, path
    assert b"REDACTED" in b"".join(path.read_bytes() for path in beside)


def parts_beside(cassette: Path) -> list[Path]:
    return [path for path in cassette.parent.rglob("*.msgpack") if path != cassette]


def test_an_ended_session_leaves_no_parts(tmp_path: Path, origin: Origin) -> None:
    cassette = tmp_path / "c.msgpack"

    with use_cassette(cassette, record_mode="all"), httpx.Client() as client:
        client.get(f"{origin.url}/short").raise_for_status()
        assert parts_beside(cassette) == []  # a short session writes none
        time.sleep(DURABLE_AFTER)
        client.get(f"{origin.url}/short").raise_for_status()
        assert len(parts_beside(cassette)) == 2

    assert len(load_interactions(cassette)) == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["c.msgpack"]


# Under `replay record`: records twice (the second once its session writes parts), writes its
# pid where argv[2] says, then waits to be killed.
RECORD_THEN_WAIT = textwrap.dedent(
    """
    import os, sys, time
    import httpx
    from replay.store.journal import DURABLE_AFTER

    httpx.get(sys.argv[1] + "/short", params={"n": "0"})
    time.sleep(DURABLE_AFTER)
    httpx.get(sys.argv[1] + "/short", params={"n": "1"})
    with open(sys.argv[2] + ".new", "w") as file:
        file.write(str(os.getpid()))
    os.rename(sys.argv[2] + ".new", sys.argv[2])
    time.sleep(60)
    """
)


def test_replay_record_keeps_what_its_killed_program_had_recorded(
    tmp_path: Path, origin: Origin
) -> None:
    out = tmp_path / "cassettes" / "app.msgpack"
    pid_file = tmp_path / "program.pid"
    argv = [sys.executable, "-c", RECORD_THEN_WAIT, origin.url, str(pid_file)]
    record = subprocess.Popen(
        [sys.executable, "-m", "replay.cli", "record", str(out), "--", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        _, stderr = record.communicate(timeout=60)
    finally:
        record.kill()

    assert stderr.splitlines()[0] == f"replay: recorded 2 interactions into {out}"
    assert "no request went through" not in stderr
    urls = [i.request.url.rsplit("=", 1)[1] for i in load_interactions(out)]
    assert urls == ["0", "1"]
    assert sorted(path.name for path in out.parent.iterdir()) == ["app.msgpack"]


# Records one request with its own matchers once its parts are written, then kills itself.
KILLED_WITH_MATCHERS = textwrap.dedent(
    """
    import os, signal, sys, time
    import httpx
    from replay import use_cassette
    from replay.store.journal import DURABLE_AFTER

    cassette, url = sys.argv[1], sys.argv[2]
    with use_cassette(cassette, record_mode="all", match_on=("method", "path")):
        time.sleep(DURABLE_AFTER)
        httpx.get(url + "/short", params={"v": "2"}).raise_for_status()
        time.sleep(0.1)  # (the part is written as the recording finishes, on its thread)
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_what_a_killed_all_session_left_replaces_by_its_own_matchers(
    tmp_path: Path, origin: Origin
) -> None:
    # Recovery replaced by the default matchers: the answer recorded for `?v=1` stayed, first.
    cassette = tmp_path / "c.msgpack"
    with use_cassette(cassette, record_mode="all", match_on=("method", "path")):
        httpx.get(origin.url + "/short", params={"v": "1"})
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_WITH_MATCHERS, str(cassette), origin.url],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    with use_cassette(cassette, record_mode="all", match_on=("method", "path")):
        pass  # a recording session: it merges what the killed one left

    assert [i.request.url.rsplit("?", 1)[1] for i in load_interactions(cassette)] == ["v=2"]
