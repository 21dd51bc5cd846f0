"""Speed policies and the re-split fault at the command line, as a user runs it.

`replay show --timeline --speed SPEC` draws what a policy will do before any run; `play`,
`run` and `serve` take the same specs; a bad one is one line.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import openai
import pytest

import replay
from replay.inspect import timing
from replay.testing import HELLO_TEXT, Origin, Script, responses_hello
from tests.commands import replay_bytes, replay_text


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A Responses stream recorded through the openai SDK from a loopback origin."""
    path = tmp_path_factory.mktemp("speed-cli") / "c.msgpack"
    with Origin({"/v1/responses": Script(chunks=responses_hello(scale=0.2))}) as origin:
        client = openai.OpenAI(api_key="sk-test-key", base_url=f"{origin.url}/v1", max_retries=0)
        with client, replay.use_cassette(path):
            events = list(client.responses.create(model="m", input="hi", stream=True))
        assert events[-1].response.output_text == HELLO_TEXT  # type: ignore[union-attr]
        return origin.url, path


def _columns(output: str, label: str) -> list[str]:
    rows = [line.split("|") for line in output.splitlines() if "|" in line]
    return next(row[-1].split() for row in rows if label in row[0].split())


def test_show_timeline_draws_the_recorded_and_the_played_times(
    recorded: tuple[str, Path],
) -> None:
    _, path = recorded
    response = replay.Cassette.load(path).interactions[0].response
    ttft = timing.ttft(response)
    assert ttft is not None

    result = replay_text("show", "--timeline", "--speed", "ttft=recorded,rest=instant", str(path))

    assert result.returncode == 0, result.stderr
    assert "played at speed 'ttft=recorded,rest=instant'" in result.stdout
    ttfb, first_token, _, duration = _columns(result.stdout, "recorded")
    assert float(duration) == pytest.approx(response.duration * 1000, abs=0.1)
    played = _columns(result.stdout, "played")
    assert played[0] == ttfb
    assert played[1] == first_token == f"{ttft * 1000:.1f}"
    assert played[3] == first_token  # nothing waits after the first token


def test_show_timeline_with_a_cap_and_a_fault(recorded: tuple[str, Path]) -> None:
    _, path = recorded
    result = replay_text(
        "show", "--timeline", "--speed", "max_gap=0.002", "--fault", "resplit(seed=4)", str(path)
    )
    assert result.returncode == 0, result.stderr
    assert "(faults applied)" in result.stdout
    assert float(_columns(result.stdout, "played")[2]) <= 2.0  # the longest gap, in ms


@pytest.mark.parametrize(
    "args",
    [
        ("show", "--timeline", "--speed", "ttft=fast"),
        ("play", "--speed", "ttft=fast"),
        ("serve", "--port", "0", "--speed", "ttft=fast"),
        ("run", "--speed", "ttft=fast"),
    ],
)
def test_a_bad_policy_is_one_line(recorded: tuple[str, Path], args: tuple[str, ...]) -> None:
    _, path = recorded
    verb, *options = args
    extra = ["--", sys.executable, "-c", "pass"] if verb == "run" else []
    result = replay_text(verb, str(path), *options, *extra)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "replay: error: speed policy ttft='fast': not a factor: 'recorded', 1, '10x' or 'instant'"
    ]


def test_virtual_plays_as_recorded_in_show_and_play(recorded: tuple[str, Path]) -> None:
    _, path = recorded
    plain = replay_text("show", "--timeline", "--speed", "ttft=recorded", str(path))
    virtual = replay_text("show", "--timeline", "--speed", "virtual,ttft=recorded", str(path))
    assert virtual.returncode == 0, virtual.stderr
    assert _columns(virtual.stdout, "played") == _columns(plain.stdout, "played")
    played = replay_bytes("play", str(path), "--speed", "virtual,instant")
    assert played.returncode == 0, played.stderr
    assert played.stdout == replay.Cassette.load(path).interactions[0].response.body


def test_show_speed_without_timeline_is_a_usage_error(recorded: tuple[str, Path]) -> None:
    _, path = recorded
    result = replay_text("show", "--speed", "10x", str(path))
    assert result.returncode == 2
    assert result.stderr == (
        "replay: error: --speed and --fault go with --timeline (see replay show --help)\n"
    )


def test_play_takes_a_policy(recorded: tuple[str, Path]) -> None:
    _, path = recorded
    response = replay.Cassette.load(path).interactions[0].response
    result = replay_bytes("play", str(path), "--speed", "max_gap=0.001")
    assert result.returncode == 0
    assert result.stdout == response.body


def test_run_keeps_the_time_to_first_token_on_virtual_time(
    recorded: tuple[str, Path], tmp_path: Path
) -> None:
    url, path = recorded
    ttft = timing.ttft(replay.Cassette.load(path).interactions[0].response)
    assert ttft is not None
    program = tmp_path / "app.py"
    program.write_text(
        textwrap.dedent(f"""
            import time, openai
            client = openai.OpenAI(api_key="sk-test-key", base_url="{url}/v1", max_retries=0)
            started = time.monotonic()
            stream = client.responses.create(model="m", input="hi", stream=True)
            times = [(event.type, time.monotonic() - started) for event in stream]
            print(next(at for kind, at in times if kind.endswith(".delta")), times[-1][1])
        """)
    )
    spec = "virtual,ttft=recorded,rest=instant"
    result = replay_text("run", str(path), "--speed", spec, "--", sys.executable, str(program))
    assert result.returncode == 0, result.stderr
    first, last = map(float, result.stdout.split())
    assert last == pytest.approx(first, abs=0.005)  # nothing waits after the first token
    # Virtual time: only the waits pass (and the child's own waiting, a few ms at most).
    assert ttft <= first < ttft + 0.05


def test_the_played_cassette_is_what_the_report_compares(recorded: tuple[str, Path]) -> None:
    from replay.inspect.played import played_cassette
    from replay.inspect.report import report

    _, path = recorded
    cassette = replay.Cassette.load(path)
    response = cassette.interactions[0].response
    ttft = timing.ttft(response)
    played = played_cassette(cassette, "ttft=recorded,rest=instant").interactions[0].response
    assert played.body == response.body
    assert timing.ttft(played) == ttft
    assert played.duration == ttft
    page = report(cassette, played_cassette(cassette, "ttft=recorded,rest=instant"))
    assert page.startswith("<!DOCTYPE html>") or "<html" in page


def test_a_failed_run_says_the_seeds_that_replay_it(
    recorded: tuple[str, Path], tmp_path: Path
) -> None:
    url, path = recorded
    program = tmp_path / "fragile.py"
    program.write_text(
        textwrap.dedent(f"""
            import httpx
            with httpx.Client() as client:
                body = {{"input": "hi", "model": "m", "stream": True}}
                with client.stream("POST", "{url}/v1/responses", json=body) as response:
                    for chunk in response.iter_raw():
                        assert chunk.endswith(b"\\n\\n"), "an event split across reads"
        """)
    )
    result = replay_text(
        "run", str(path), "--speed", "rest=instant,jitter=0.001,seed=random",
        "--fault", "resplit(seed=3)", "--", sys.executable, str(program),
    )  # fmt: skip
    assert result.returncode != 0
    assert "an event split across reads" in result.stderr
    said = result.stderr.strip().splitlines()[-1]
    assert said.startswith(
        "replay run: the program failed under --speed rest=instant,jitter=0.001,seed="
    )
    assert said.endswith("--fault 'resplit(seed=3)'")
    seed = said.split("seed=")[1].split()[0]
    assert seed.isdigit()


def test_report_compares_a_cassette_with_itself_as_played(
    recorded: tuple[str, Path], tmp_path: Path
) -> None:
    _, path = recorded
    out = tmp_path / "report.html"
    spec = "ttft=recorded,rest=instant"
    result = replay_text("report", str(path), "--speed", spec, "-o", str(out))
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    assert "played at speed" in page
    assert "ttft=recorded,rest=instant" in page
    again = replay_text("report", str(path), str(path), "--speed", spec, "-o", "-")
    assert again.returncode != 0
    assert again.stderr.strip().splitlines() == [
        "replay: error: --speed and --fault compare CASSETTE with itself as played: give one "
        "cassette"
    ]
