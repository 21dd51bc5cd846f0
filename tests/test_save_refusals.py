"""A cassette that could not be saved is refused when its session starts, before any request.

A new cassette whose directory cannot take a file (read-only, under a regular file, in /proc)
is a `CassetteWriteError` naming the path at `use_cassette`'s enter, and the origin sees no
request; a session that only replays an existing cassette needs no write access.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from commands import replay_text

from replay import use_cassette
from replay.errors import CassetteWriteError
from replay.testing import Origin, Script

_SCRIPT = Script(chunks=[(0.0, b"data: hi\n\n")])


@pytest.fixture
def origin() -> Iterator[Origin]:
    with Origin({"/s": _SCRIPT}) as server:
        yield server


def _refused_at_enter(path: Path, origin: Origin) -> CassetteWriteError:
    session = use_cassette(path, record_mode="all")
    with pytest.raises(CassetteWriteError) as caught:
        session.__enter__()  # (the block's requests would come next: none is sent)
    assert len(origin.requests) == 0
    assert str(path) in str(caught.value)
    return caught.value


def test_a_new_cassette_under_a_regular_file_is_refused_before_any_request(
    tmp_path: Path, origin: Origin
) -> None:
    (tmp_path / "afile").write_text("not a directory")
    error = _refused_at_enter(tmp_path / "afile" / "deeper" / "new.msgpack", origin)
    assert "not a directory" in str(error)


def test_a_new_cassette_where_no_file_can_be_made_is_refused_even_for_root(
    origin: Origin,
) -> None:
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc")
    _refused_at_enter(Path("/proc/replay-no-such-dir/new.msgpack"), origin)


def test_a_new_cassette_in_a_read_only_directory_is_refused_before_any_request(
    tmp_path: Path, origin: Origin
) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(directory, os.W_OK):
            pytest.skip("running as root: chmod does not stop the writes")
        error = _refused_at_enter(directory / "new.msgpack", origin)
        assert error.errno is not None
        assert list(directory.iterdir()) == []  # no probe left behind
    finally:
        directory.chmod(stat.S_IRWXU)


def test_replaying_an_existing_cassette_in_a_read_only_place_needs_no_write_access(
    tmp_path: Path, origin: Origin
) -> None:
    path = tmp_path / "c.msgpack"
    with use_cassette(path, record_mode="once"):
        httpx.get(f"{origin.url}/s").read()
    assert len(origin.requests) == 1
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with use_cassette(path, record_mode="none"):
            assert httpx.get(f"{origin.url}/s").text == "data: hi\n\n"
    finally:
        tmp_path.chmod(stat.S_IRWXU)
    assert len(origin.requests) == 1


def test_replay_record_into_an_unwritable_place_is_one_line_and_exit_1(
    tmp_path: Path, origin: Origin
) -> None:
    (tmp_path / "afile").write_text("not a directory")
    out = tmp_path / "afile" / "out.msgpack"
    marker = tmp_path / "ran"
    program = f"import pathlib; pathlib.Path({str(marker)!r}).touch()"
    done = replay_text("record", str(out), "--", sys.executable, "-c", program)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("replay: error:")
    assert str(out) in lines[0]
    assert not marker.exists()
