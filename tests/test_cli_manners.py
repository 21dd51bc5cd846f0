"""The `replay` command's manners (issue 32): a missing file, usage errors, several files to
show, the convert hint on every verb that reads a cassette, an output not replaced without
--force, a check that read nothing, and help that names every argument and client."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from commands import replay_text as run_replay

VERBS_READING = {
    "show": (),
    "play": (),
    "report": ("-o", "-"),
    "diff": ("SAME",),
    "check": (),
}


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    cassette = tmp_path / "r.msgpack"
    assert run_replay("synth", "responses", str(cassette), "--text", "Hi").returncode == 0
    return cassette


def test_a_missing_file_is_one_readable_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.msgpack"
    for verb in ("show", "play", "report", "diff"):
        extra = (str(missing),) if verb == "diff" else ()
        result = run_replay(verb, str(missing), *extra)
        assert result.returncode == 1, verb
        assert result.stderr.splitlines() == [
            f"replay: error: {missing}: no such file or directory"
        ], verb


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (["show"], ["run", str(tmp_path / "c.msgpack")], ["report", "a", "b", "c"]):
        result = run_replay(*args)
        assert result.returncode == 2, args
        (line,) = result.stderr.splitlines()
        assert line.startswith("replay: error: "), line


def test_show_takes_several_cassettes(synthetic: Path, tmp_path: Path) -> None:
    other = tmp_path / "c.msgpack"
    assert run_replay("synth", "chat", str(other), "--text", "Yo").returncode == 0

    result = run_replay("show", str(synthetic), str(other))

    assert result.returncode == 0, result.stderr
    assert f"==> {synthetic} <==" in result.stdout.splitlines()
    assert f"==> {other} <==" in result.stdout.splitlines()
    assert result.stdout.index(str(synthetic)) < result.stdout.index(str(other))


@pytest.mark.parametrize("verb", sorted(VERBS_READING))
def test_every_verb_says_how_to_convert_a_yaml_cassette(tmp_path: Path, verb: str) -> None:
    yaml_cassette = tmp_path / "chat.yaml"
    yaml_cassette.write_text("interactions: []\nversion: 1\n")
    extra = [str(yaml_cassette) if arg == "SAME" else arg for arg in VERBS_READING[verb]]

    result = run_replay(verb, str(yaml_cassette), *extra)

    assert result.returncode == 1
    hint = f"Convert it first: replay convert {yaml_cassette} {tmp_path / 'chat.msgpack'}"
    assert hint in result.stderr + result.stdout, verb


def test_report_does_not_replace_a_file_without_force(synthetic: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text("mine")

    refused = run_replay("report", str(synthetic), "-o", str(page))

    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"replay: error: {page} already exists: add --force to replace it"
    ]
    assert page.read_text() == "mine"
    assert run_replay("report", str(synthetic), "-o", str(page), "--force").returncode == 0
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_a_check_that_read_nothing_says_so_and_fails(tmp_path: Path) -> None:
    result = run_replay("check", str(tmp_path / "none.msgpack"))
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "checked nothing: 1 cassette, none could be read"


def test_help_names_every_argument_and_every_client() -> None:
    for verb in ("show", "play", "report", "check", "diff", "run", "serve"):
        text = run_replay(verb, "--help").stdout
        arguments = text.split("positional arguments:")[1].split("options:")[0]
        for match in re.finditer(r"^  ([A-Z_]+)(.*)$", arguments, re.M):
            assert match[2].strip(), f"replay {verb}: {match[1]} has no help"
    for args in (["record", "--help"], ["--help"]):
        text = " ".join(run_replay(*args).stdout.split())
        assert "httpx/httpx2" not in text
        for client in ("aiohttp", "requests", "urllib3", "http.client"):
            assert client in text, (args, client)


def test_help_says_what_the_verbs_do_with_websockets_and_policies(tmp_path: Path) -> None:
    import subprocess
    import sys

    from replay.matching import DEFAULT_MATCH_ON

    for args in (["--help"], ["serve", "--help"], ["show", "--help"]):
        assert "WebSocket" in " ".join(run_replay(*args).stdout.split()), args
    show = " ".join(run_replay("show", "--help").stdout.split())
    assert "--fault SPEC --timeline: a fault" in show
    helped = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    text = " ".join(helped.stdout.split())
    assert "ttft=recorded,rest=instant" in text
    assert f"(default: {' '.join(DEFAULT_MATCH_ON)})" in text
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    assert f"| `{' '.join(DEFAULT_MATCH_ON)}` |" in readme
