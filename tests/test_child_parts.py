"""The parts directory of `replay record`, and what the next run does with a killed run's.

A killed run is played here by a `PartsDirectory` let go of (`close`): the kernel drops a
dead process's lock the same way. The end-to-end kills are in test_cli_record_signals.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replay.model import Chunk, Interaction, Request, Response
from replay.run.site import part_path
from replay.run.site.parts import PartsDirectory, hold, recover
from replay.store.file import load_interactions, save_interactions

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the locks are flock's")


def interaction(path: str, body: bytes = b"data: 1\n\n") -> Interaction:
    return Interaction(
        Request(method="GET", url=f"http://h{path}"),
        Response(status=200, chunks=[Chunk(0.1, body)]),
    )


def killed_run(out: Path, *parts: list[Interaction]) -> Path:
    """The parts directory a run killed before its merge leaves beside `out`."""
    directory = PartsDirectory.create(out)
    for recorded in parts:
        save_interactions(part_path(directory.path), recorded)
    directory.close()
    return directory.path


def beside(out: Path) -> list[str]:
    return sorted(path.name for path in out.parent.iterdir())


def test_a_parts_directory_lies_beside_out_named_after_it(tmp_path: Path) -> None:
    out = tmp_path / "new" / "app.msgpack"
    directory = PartsDirectory.create(out)
    try:
        assert directory.path.parent == out.parent
        assert directory.path.name.startswith(f".app.msgpack.replay-{os.getpid()}-")
    finally:
        assert directory.remove_if_unused()
    assert beside(out) == []


def test_nothing_left_means_nothing_said(tmp_path: Path) -> None:
    out = tmp_path / "app.msgpack"
    save_interactions(out, [interaction("/a")])
    assert recover(out) is None
    assert recover(tmp_path / "missing" / "app.msgpack") is None


def test_a_killed_runs_parts_are_merged_and_removed(tmp_path: Path) -> None:
    out = tmp_path / "app.msgpack"
    save_interactions(out, [interaction("/kept"), interaction("/again", b"old")])
    leftover = killed_run(out, [interaction("/again", b"new")], [interaction("/more")])

    said = recover(out)

    assert said is not None
    assert said == (
        f"replay: {out}: merged the 2 interactions an interrupted run (pid {os.getpid()}) "
        "had recorded"
    )
    urls = [(i.request.url, i.response.chunks[0].data) for i in load_interactions(out)]
    assert urls == [("http://h/kept", b"data: 1\n\n"), ("http://h/again", b"new"),
                    ("http://h/more", b"data: 1\n\n")]  # fmt: skip
    assert not leftover.exists()
    assert beside(out) == ["app.msgpack"]


def test_merging_parts_a_second_time_adds_nothing(tmp_path: Path) -> None:
    # A run killed after saving OUT, before deleting its parts: they are merged again.
    out = tmp_path / "app.msgpack"
    save_interactions(out, [interaction("/a"), interaction("/b")])
    killed_run(out, [interaction("/a"), interaction("/b")])
    recover(out)
    assert [i.request.url for i in load_interactions(out)] == ["http://h/a", "http://h/b"]


def test_a_directory_still_in_use_is_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "app.msgpack"
    running = PartsDirectory.create(out)  # the lock of a run still going
    save_interactions(part_path(running.path), [interaction("/a")])
    try:
        said = recover(out)
        assert said is not None
        assert (
            said
            == f"replay: {out}: left {running.path.name} alone: a run is still recording into it"
        )
        assert running.path.is_dir()
        assert not out.exists()
    finally:
        running.close()
    assert recover(out) is not None
    assert len(load_interactions(out)) == 1


def test_a_process_of_the_program_holds_the_directory_too(tmp_path: Path) -> None:
    out = tmp_path / "app.msgpack"
    leftover = killed_run(out, [interaction("/a")])
    fd = hold(leftover)  # as a process of the program that outlived replay does
    assert fd is not None
    try:
        assert "alone" in (recover(out) or "")
        assert leftover.is_dir()
    finally:
        os.close(fd)


def test_a_run_that_ends_with_its_program_still_recording_keeps_the_directory(
    tmp_path: Path,
) -> None:
    out = tmp_path / "app.msgpack"
    directory = PartsDirectory.create(out)
    survivor = hold(directory.path)
    assert survivor is not None
    save_interactions(part_path(directory.path), [interaction("/a")])
    assert [i.request.url for i in directory.merge_into(out)] == ["http://h/a"]
    assert not directory.remove_if_unused()
    os.close(survivor)
    assert directory.path.is_dir()
    said = recover(out)  # merges nothing more, removes it
    assert (
        said == f"replay: {out}: removed what an interrupted run (pid {os.getpid()}) left "
        "(it had recorded nothing)"
    )
    assert beside(out) == ["app.msgpack"]
    assert len(load_interactions(out)) == 1


def test_unfinished_saves_of_out_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "app.msgpack"
    save_interactions(out, [interaction("/a")])
    (tmp_path / ".app.msgpack.0123456789ab.tmp").write_bytes(b"half a cassette")
    (tmp_path / ".other.msgpack.0123456789ab.tmp").write_bytes(b"not ours")

    said = recover(out)

    assert said == f"replay: {out}: removed 1 unfinished save of an interrupted run"
    assert beside(out) == [".other.msgpack.0123456789ab.tmp", "app.msgpack"]


def test_parts_that_cannot_be_merged_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "app.msgpack"
    leftover = killed_run(out)
    (leftover / "1-00000000.msgpack").write_bytes(b"garbage")

    said = recover(out)

    assert said is not None
    assert "cannot merge what an interrupted run (pid" in said
    assert f"kept in {leftover}" in said
    assert (leftover / "1-00000000.msgpack").exists()
    assert not out.exists()


def test_show_lists_what_parts_hold_and_skips_a_damaged_one(tmp_path: Path) -> None:
    from replay.run.site.parts import left_behind

    out = tmp_path / "app.msgpack"
    assert left_behind(out) == ([], None)
    directory = killed_run(out, [interaction("/a")], [interaction("/b")])
    (directory / "damaged.msgpack").write_bytes(b"\x93not a cassette")

    held, note = left_behind(out)

    assert sorted(i.request.url for i in held) == ["http://h/a", "http://h/b"]
    assert note is not None
    assert note.startswith(f"replay: note: the last 2 interactions shown are not in {out} yet")


def test_a_killed_sessions_parts_of_an_appending_mode_are_added(tmp_path: Path) -> None:
    # A session of record mode "new_episodes" that recorded a request the cassette already
    # answered (its answer used up): the merge at its end would have added it, so does this.
    from replay.run.site.parts import APPENDED

    out = tmp_path / "app.msgpack"
    save_interactions(out, [interaction("/again", b"old")])
    directory = PartsDirectory.create(out)
    (directory.path / APPENDED).touch()
    save_interactions(directory.path / "1-000001.msgpack", [interaction("/again", b"new")])
    directory.close()

    assert recover(out) is not None

    bodies = [i.response.chunks[0].data for i in load_interactions(out)]
    assert bodies == [b"old", b"new"]
    assert beside(out) == ["app.msgpack"]
