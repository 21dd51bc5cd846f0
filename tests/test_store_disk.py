"""Saving a cassette on a real disk: through symlinks, into read-only files, out of space.

A symlinked cassette is written through (the link stays a link, its target is replaced); a
read-only cassette is refused, not silently replaced; and any failure of the disk is one
`CassetteWriteError` naming the cassette and the cause, never the temporary file, which is
gone. The failures here are real: a full disk is `RLIMIT_FSIZE` in a child process (the
kernel then fails the write with EFBIG), and the `replay` command runs as a user runs it,
recording a real program against a local origin.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import replay
from replay import Cassette, CassetteWriteError, Chunk, Interaction, Request, Response
from replay.store.file import file_lock, load_interactions, merge, save_interactions
from replay.testing import Origin, Script, responses_hello

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def interaction(marker: str, size: int = 10) -> Interaction:
    chunks = [Chunk(0.1, b"x" * size)]
    return Interaction(
        Request(method="GET", url=f"http://h/{marker}"), Response(status=200, chunks=chunks)
    )


def leftovers(*directories: Path) -> list[str]:
    """Temporary files of saves, in `directories`."""
    return sorted(p.name for d in directories for p in d.iterdir() if p.name.endswith(".tmp"))


# -- symlinks --------------------------------------------------------------------------------


def test_a_symlinked_cassette_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    target = tmp_path / "store" / "real.msgpack"
    save_interactions(target, [interaction("old")])
    target.chmod(0o640)
    link = tmp_path / "cassettes" / "c.msgpack"
    link.parent.mkdir()
    link.symlink_to(target)
    save_interactions(link, [interaction("new")])
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    assert load_interactions(target) == [interaction("new")]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert leftovers(link.parent, target.parent) == []


def test_a_dangling_symlink_gets_its_target_written(tmp_path: Path) -> None:
    link = tmp_path / "c.msgpack"
    link.symlink_to(tmp_path / "elsewhere" / "real.msgpack")
    save_interactions(link, [interaction("new")])
    assert link.is_symlink()
    assert load_interactions(tmp_path / "elsewhere" / "real.msgpack") == [interaction("new")]


def test_merge_through_a_symlink_keeps_what_the_target_held(tmp_path: Path) -> None:
    target = tmp_path / "real.msgpack"
    save_interactions(target, [interaction("old")])
    link = tmp_path / "c.msgpack"
    link.symlink_to(target.name)  # relative, as `ln -s real.msgpack c.msgpack` makes it
    assert merge(link, [interaction("new")]) == 2
    assert link.is_symlink()
    assert load_interactions(target) == [interaction("old"), interaction("new")]


def test_a_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "c.msgpack"
    link.symlink_to(os.devnull)
    with pytest.raises(CassetteWriteError, match="it is not a regular file"):
        save_interactions(link, [interaction("new")])
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


# -- read-only cassettes ---------------------------------------------------------------------


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A cassette with mode 0444 (made writable again afterwards, for the cleanup)."""
    path = tmp_path / "c.msgpack"
    save_interactions(path, [interaction("old")])
    path.chmod(0o444)
    yield path
    path.chmod(0o644)


def test_a_read_only_cassette_is_refused_and_left_as_it_was(read_only: Path) -> None:
    before = read_only.read_bytes()
    with pytest.raises(CassetteWriteError) as caught:
        save_interactions(read_only, [interaction("new")])
    assert str(caught.value) == (
        f"cannot save cassette {str(read_only)!r}: it is read-only (mode 444); "
        "make it writable to save into it"
    )
    assert caught.value.path == read_only
    assert read_only.read_bytes() == before
    assert stat.S_IMODE(read_only.stat().st_mode) == 0o444
    assert leftovers(read_only.parent) == []


def test_a_read_only_cassette_is_refused_when_its_lock_is_taken(read_only: Path) -> None:
    # Before anything is recorded for it: `replay record` fails before the program runs.
    with pytest.raises(CassetteWriteError, match="read-only"), file_lock(read_only):
        pass


def test_a_symlink_to_a_read_only_cassette_is_refused(read_only: Path) -> None:
    link = read_only.parent / "link.msgpack"
    link.symlink_to(read_only)
    with pytest.raises(CassetteWriteError, match=f"cannot save cassette {str(link)!r}: it is"):
        Cassette([interaction("new")]).save(link)


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Path]:
    """A directory no file can be created in: one without write permission; as root (whom
    permissions do not stop), sysfs, which refuses new files to root too."""
    if AS_ROOT:
        assert Path("/sys").is_dir(), "a Linux with sysfs mounted"
        yield Path("/sys")
        return
    directory = tmp_path / "locked"
    directory.mkdir()
    directory.chmod(0o555)
    try:
        yield directory
    finally:
        directory.chmod(0o755)


def test_a_directory_that_cannot_be_written_is_named(unwritable: Path) -> None:
    with pytest.raises(CassetteWriteError) as caught:
        save_interactions(unwritable / "c.msgpack", [interaction("new")])
    assert str(caught.value).endswith(
        f": cannot create a file in {str(unwritable)!r}: Permission denied"
    )
    assert caught.value.errno == errno.EACCES


# -- a full disk: RLIMIT_FSIZE makes the kernel fail the write -------------------------------

# Run by a child whose files may not grow past LIMIT bytes; it ignores SIGXFSZ, so that the
# write fails with EFBIG instead of the signal killing the process.
LIMITED = textwrap.dedent(
    """
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
    sys.argv = sys.argv[2:]
    exec(compile(open(sys.argv[0]).read(), sys.argv[0], "exec"), {"__name__": "__main__"})
    """
)
LIMIT = 64 * 1024

SAVE = textwrap.dedent(
    """
    import json, sys
    from replay.errors import CassetteWriteError
    from replay.model import Chunk, Interaction, Request, Response
    from replay.store.file import save_interactions

    big = Response(status=200, chunks=[Chunk(0.1, b"x" * 100_000)])
    try:
        save_interactions(sys.argv[1], [Interaction(Request(method="GET", url="http://h/"), big)])
    except CassetteWriteError as error:
        print(json.dumps({"message": str(error), "errno": error.errno}))
    """
)


def limited(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Run a Python script (with `arguments`) in a child whose files stop at LIMIT bytes."""
    wrapper = tmp_path / "limited.py"
    wrapper.write_text(LIMITED)
    return subprocess.run(
        [sys.executable, str(wrapper), str(LIMIT), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and EFBIG as Linux has them")
def test_a_write_the_disk_refuses_names_the_cassette_and_the_cause(tmp_path: Path) -> None:
    path = tmp_path / "c.msgpack"
    save_interactions(path, [interaction("old")])
    before = path.read_bytes()
    script = tmp_path / "save.py"
    script.write_text(SAVE)
    result = json.loads(limited(tmp_path, str(script), str(path)).stdout)
    assert result == {
        "message": f"cannot save cassette {str(path)!r}: File too large",
        "errno": errno.EFBIG,
    }
    assert path.read_bytes() == before
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and EFBIG as Linux has them")
def test_replay_convert_onto_a_full_disk_is_one_error_line(tmp_path: Path) -> None:
    source, destination = tmp_path / "src.msgpack", tmp_path / "dst.msgpack"
    save_interactions(source, [interaction("new", size=100_000)])
    save_interactions(destination, [interaction("old")])
    before = destination.read_bytes()
    cli = tmp_path / "cli.py"
    cli.write_text("import sys\nfrom replay.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    result = limited(tmp_path, str(cli), "convert", "--force", str(source), str(destination))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"replay: error: cannot save cassette {str(destination)!r}: File too large"
    ]
    assert destination.read_bytes() == before
    assert leftovers(tmp_path) == []


# -- `replay record`, as a user runs it ------------------------------------------------------

STREAM = """
import sys
import httpx

with httpx.stream("POST", sys.argv[1] + "/v1/responses", json={"input": "hi"}) as response:
    print(response.status_code, sum(len(chunk) for chunk in response.iter_bytes()))
"""


@pytest.fixture
def quick_origin() -> Iterator[Origin]:
    with Origin({"/v1/responses": Script(chunks=responses_hello(scale=0.05))}) as server:
        yield server


def record(tmp_path: Path, out: Path, url: str) -> subprocess.CompletedProcess[str]:
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(STREAM))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "replay.cli",
            "record",
            str(out),
            "--",
            sys.executable,
            str(app),
            url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_replay_record_into_a_symlink_writes_its_target(
    tmp_path: Path, quick_origin: Origin
) -> None:
    target = tmp_path / "store" / "real.msgpack"
    save_interactions(target, [])
    out = tmp_path / "out.msgpack"
    out.symlink_to(target)
    result = record(tmp_path, out, quick_origin.url)
    assert result.returncode == 0, result.stderr
    assert out.is_symlink()
    recorded = load_interactions(target)
    assert [i.request.url for i in recorded] == [f"{quick_origin.url}/v1/responses"]
    assert leftovers(tmp_path, target.parent) == []


def test_replay_record_into_a_read_only_cassette_is_one_error_line(
    tmp_path: Path, read_only: Path, quick_origin: Origin
) -> None:
    before = read_only.read_bytes()
    result = record(tmp_path, read_only, quick_origin.url)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"replay: error: cannot save cassette {str(read_only)!r}: it is read-only (mode 444); "
        "make it writable to save into it"
    ]
    assert quick_origin.requests == []  # refused before the program ran
    assert read_only.read_bytes() == before


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and EFBIG as Linux has them")
def test_replay_record_that_cannot_merge_fails_and_keeps_what_it_recorded(
    tmp_path: Path, quick_origin: Origin
) -> None:
    # OUT already holds nearly LIMIT bytes: the program's own part (a few KB) is written, the
    # merged OUT is not. The run must not pass for a success, and nothing may be lost.
    out = tmp_path / "out.msgpack"
    save_interactions(out, [interaction("old", size=LIMIT - 4096)])
    before = out.read_bytes()
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(STREAM))
    cli = tmp_path / "cli.py"
    cli.write_text("import sys\nfrom replay.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    result = limited(tmp_path, str(cli), "record", str(out), "--", sys.executable, str(app),
                     quick_origin.url)  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert f"replay: error: cannot save into {out}: " in result.stderr
    assert "File too large" in result.stderr
    assert out.read_bytes() == before
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(".out.msgpack.replay-")]
    assert len(kept) == 1
    assert sum(len(load_interactions(part)) for part in kept[0].glob("*.msgpack")) == 1


def test_a_session_that_may_record_refuses_a_read_only_cassette_as_it_enters(
    read_only: Path,
) -> None:
    # At exit, what it recorded could not be saved: refuse before anything is recorded.
    with (
        pytest.raises(CassetteWriteError, match="it is read-only"),
        replay.use_cassette(read_only, record_mode="new_episodes"),
    ):
        pytest.fail("entered")
    # Replaying only needs to read it.
    with replay.use_cassette(read_only, record_mode="none") as cassette:
        assert len(cassette.interactions) == 1


# -- memory ----------------------------------------------------------------------------------

# A program that records (or replays) COUNT streams of SIZE bytes each in 64 KiB HTTP chunks
# from a local origin in one `use_cassette` session, through httpx, and prints its peak RSS
# over what it held before the session (the interpreter, httpx, the origin, a client made
# once). The peak is reset before the session: what importing took does not hide it.
MEASURED = """
    import gc, json, sys
    import httpx
    import replay
    from replay.testing import Origin, Script

    def kib(field):
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith(field))

    mode, path, url = sys.argv[1], sys.argv[2], sys.argv[3]
    size, count = int(sys.argv[4]), int(sys.argv[5])
    block = bytes(range(256)) * 256
    script = Script(chunks=((0.0, block),) * (size // len(block)))
    with Origin({"/big": script}) as origin:
        url = url or f"{origin.url}/big"
        with httpx.Client():
            pass
        gc.collect()
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # VmHWM := VmRSS
        before = kib("VmHWM:")
        got = 0
        with replay.use_cassette(path, record_mode=mode), httpx.Client() as client:
            for _ in range(count):
                with client.stream("GET", url) as response:
                    for part in response.iter_raw():
                        got += len(part)
        peak = kib("VmHWM:")
    print(json.dumps({"growth": (peak - before) * 1024, "got": got, "url": url}))
"""

BIG = 64 * 1024 * 1024


def measured(
    tmp_path: Path, mode: str, url: str = "", size: int = BIG, count: int = 1
) -> dict[str, Any]:
    """What the program above printed, run as a process of its own (recording into, or
    replaying, `tmp_path / "big-COUNT.msgpack"`)."""
    program = tmp_path / "measured.py"
    program.write_text(textwrap.dedent(MEASURED))
    cassette = str(tmp_path / f"big-{count}.msgpack")
    result = subprocess.run(
        [sys.executable, str(program), mode, cassette, url, str(size), str(count)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    figures: dict[str, Any] = json.loads(result.stdout)
    assert figures["got"] == size * count
    return figures


@pytest.mark.skipif(sys.platform != "linux", reason="peak memory from /proc")
def test_recording_a_long_stream_takes_little_more_memory_than_its_body(tmp_path: Path) -> None:
    # The cassette is written a piece at a time: packing it whole took three times the body.
    recorded = measured(tmp_path, "all")
    assert recorded["growth"] < 1.5 * BIG, recorded


@pytest.mark.skipif(sys.platform != "linux", reason="peak memory from /proc")
def test_replaying_a_long_stream_takes_little_more_memory_than_its_body(tmp_path: Path) -> None:
    # The file is mapped and read a piece at a time: reading it whole held its bytes beside
    # the payloads built from them (twice the body).
    url = measured(tmp_path, "all")["url"]
    replayed = measured(tmp_path, "none", url)
    assert replayed["growth"] < 1.5 * BIG, replayed


@pytest.mark.skipif(sys.platform != "linux", reason="peak memory from /proc")
def test_a_session_recording_long_streams_takes_no_more_memory_for_more_of_them(
    tmp_path: Path,
) -> None:
    # Each stream's payloads go to the spool as they come: the session held all of them.
    # Replayed, they are read from the cassette as they are played: it held them all too.
    size = BIG // 2
    recorded = measured(tmp_path, "all", size=size, count=4)
    assert recorded["growth"] < 1.5 * size, recorded
    assert len(load_interactions(tmp_path / "big-4.msgpack")) == 4
    replayed = measured(tmp_path, "none", recorded["url"], size=size, count=4)
    assert replayed["growth"] < 1.5 * size, replayed


@pytest.mark.skipif(sys.platform != "linux", reason="peak memory from /proc")
def test_a_session_recording_short_streams_takes_no_more_memory_for_more_of_them(
    tmp_path: Path,
) -> None:
    # Past `KEPT_IN_MEMORY` (8 MiB), what finishes goes to the spool: 48 streams of 512 KiB
    # more took 24 MiB more (about 1 now).
    size = 512 * 1024
    fewer = measured(tmp_path, "all", size=size, count=16)
    more = measured(tmp_path, "all", size=size, count=64)
    assert more["growth"] - fewer["growth"] < 8 * size, (fewer, more)
