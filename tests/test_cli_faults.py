"""`replay run --fault` and the faults section of the pytest failure report."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import replay
from replay.cli import main
from replay.testing import Origin, Script

pytest_plugins = ["pytester"]

URL = "https://api.example.test/v1/stream"
BODY = (b"data: one\n\n", b"data: two\n\n", b"data: three\n\n")


def saved_cassette(path: Path) -> Path:
    chunks = [replay.Chunk(0.1 * (i + 1), data) for i, data in enumerate(BODY)]
    response = replay.Response(
        status=200, headers=[("content-type", "text/event-stream")], chunks=chunks
    )
    replay.Cassette([replay.Interaction(replay.Request(method="GET", url=URL), response)]).save(
        path
    )
    return path


APP = f"""
import httpx
with httpx.Client() as client, client.stream("GET", {URL!r}) as response:
    try:
        for chunk in response.iter_raw():
            print(chunk)
    except httpx.RemoteProtocolError as error:
        print("dropped")
"""


def test_replay_run_takes_repeatable_faults(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = saved_cassette(tmp_path / "c.msgpack")
    app = tmp_path / "app.py"
    app.write_text(APP)

    code = main(
        [
            "run",
            str(path),
            "--fault",
            "rechunk(4)",
            "--fault",
            "cut(after_bytes=6)",
            "--",
            sys.executable,
            str(app),
        ]
    )

    assert code == 0
    assert capfd.readouterr().out.splitlines() == ["b'data'", "b': '", "dropped"]


def test_replay_run_names_a_bad_fault(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    path = saved_cassette(tmp_path / "c.msgpack")

    code = main(["run", str(path), "--fault", "cut(after=1)", "--", sys.executable, "-c", "pass"])

    assert code == 1
    assert capfd.readouterr().err.startswith("replay: error: bad fault 'cut(after=1)': ")


def test_a_failure_report_lists_the_faults_of_the_session(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    path = saved_cassette(tmp_path / "c.msgpack")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        textwrap.dedent(f"""
        import httpx, pytest

        @pytest.mark.use_cassette({str(path)!r}, record_mode="none", faults=["cut(after_events=2)"])
        def test_reads_everything():
            with httpx.Client() as client:
                client.get({URL!r})
        """)
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*replay: faults injected*",
            "cut(after_events=2): cut the connection after 2 events (every interaction)",
            "attempts per interaction: #0: 1",
        ]
    )


def test_a_failure_report_says_no_fault_was_injected_into_a_recording(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    with Origin({"/v1/stream": Script(chunks=[(0.0, data) for data in BODY])}) as origin:
        pytester.makepyfile(
            textwrap.dedent(f"""
            import httpx, pytest

            CASSETTE = {str(tmp_path / "new.msgpack")!r}

            @pytest.mark.use_cassette(CASSETTE, faults=["cut(after_events=1)"])
            def test_sees_the_cut():
                with httpx.Client() as client, pytest.raises(httpx.RemoteProtocolError):
                    client.get({origin.url + "/v1/stream"!r})
            """)
        )
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*replay: faults not injected*",
            "cut(after_events=1): cut the connection after 1 events (every interaction): "
            "not injected (nothing it targets was replayed)",
            "1 interaction(s) recorded by this test, live and untouched: faults break what is "
            "replayed, so the next run replays them with the faults",
        ]
    )
    assert "faults injected" not in result.stdout.str()
