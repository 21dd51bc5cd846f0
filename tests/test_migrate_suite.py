"""A pytest-recording suite migrates as it is: recorded under pytest-recording, converted by
one `replay migrate`, then run by replay with pytest-recording off, with the same results
and no edit to its test files."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay.testing import Origin, Script, responses_hello
from tests.commands import replay_text

pytest_plugins = ["pytester"]

# Found, not imported: importing pytest-recording in this run (which never loads it:
# `-p no:recording`) asks pytest to rewrite vcr.matchers, imported already.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pytest_recording") is None,
    reason="pytest-recording is not installed: pip install -e '.[test,coexist]'",
)

FAST = Script(chunks=responses_hello(scale=0.01))

CONFTEST = """
import json

import pytest
from vcr.serializers import yamlserializer


@pytest.fixture(scope="module")
def vcr_config():
    return {"filter_headers": ["authorization"], "filter_query_parameters": ["api_key"]}


def same_model(new, recorded):
    assert json.loads(new.body)["model"] == json.loads(recorded.body)["model"]


def pytest_recording_configure(config, vcr):
    vcr.register_serializer("yaml", yamlserializer)
    vcr.register_matcher("same_model", same_model)
"""

SUITE = """
import os

import httpx
import pytest

ORIGIN = {origin!r}
pytestmark = pytest.mark.vcr


def ask(text, model="m-1", path="/v1/responses"):
    # The suite's code moved on since the cassettes were recorded: MAX_TOKENS differs.
    body = {{"model": model, "input": text, "max_tokens": int(os.environ["MAX_TOKENS"])}}
    response = httpx.post(
        ORIGIN + path + "?api_key=k-123",
        json=body,
        headers={{"Authorization": "Bearer sk-test-0123456789abcdef"}},
    )
    assert response.status_code == 200
    return response.text


def test_answer():
    assert "response.completed" in ask("hi")


def test_reads_the_cassette(vcr):
    ask("again")
    if vcr.record_mode == "none":
        assert vcr.play_count == 1
        assert vcr.all_played
    assert [request.method for request in vcr.requests] == ["POST"]
    assert vcr.responses[0]["status"]["code"] == 200
    assert vcr.record_mode == os.environ["EXPECTED_MODE"]


@pytest.mark.parametrize("topic", ["a/b", "hello world"])
def test_named_oddly(topic):
    assert "response.completed" in ask(topic)


@pytest.mark.vcr(match_on=["method", "path", "same_model"])
class TestModels:
    @pytest.mark.vcr(allow_playback_repeats=True)
    def test_repeats_under_its_class_matching(self):
        assert ask("one", path="/v1/other") == ask("two", path="/v1/other")


def test_without_network():
    assert 1 + 1 == 2
"""

PASSED = re.compile(r"^PASSED (\S+)", re.MULTILINE)


@pytest.fixture
def origin() -> Iterator[Origin]:
    with Origin({"/v1/responses": FAST, "/v1/other": FAST}) as server:
        yield server


def _run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, plugin: str, **env: str
) -> tuple[dict[str, int], list[str]]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = pytester.runpytest_subprocess(
        "-p", plugin, "-p", "no:cacheprovider", "-rA", "-W", "ignore::DeprecationWarning",
        timeout=120,
    )  # fmt: skip
    return result.parseoutcomes(), sorted(PASSED.findall(result.stdout.str()))


def test_a_pytest_recording_suite_runs_under_replay_after_one_migrate(
    pytester: pytest.Pytester, origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(CONFTEST)
    test_file = pytester.makepyfile(test_llm=SUITE.format(origin=origin.url))
    written = {path: path.read_bytes() for path in (test_file, pytester.path / "conftest.py")}

    # Recorded under pytest-recording, when the suite sent max_tokens 8192.
    recorded = _run(
        pytester, monkeypatch, "recording", MAX_TOKENS="8192", EXPECTED_MODE="once",
        PYTEST_ADDOPTS="--record-mode=once",
    )  # fmt: skip
    assert recorded[0] == {"passed": 6}, recorded
    hits = len(origin.requests)
    cassettes = pytester.path / "cassettes" / "test_llm"
    yamls = sorted(path.name for path in cassettes.glob("*.yaml"))
    assert "test_named_oddly[a-b].yaml" in yamls, yamls
    assert "sk-test" not in (cassettes / "test_answer.yaml").read_text()

    # Today the suite sends 64000; pytest-recording (vcrpy: method and URI) still replays.
    monkeypatch.delenv("PYTEST_ADDOPTS")
    before = _run(pytester, monkeypatch, "recording", MAX_TOKENS="64000", EXPECTED_MODE="none")
    assert before[0] == {"passed": 6}, before

    done = replay_text("migrate", str(pytester.path))
    assert done.returncode == 0, done.stderr
    assert "5 converted" in done.stdout, done.stdout
    assert "matching on method, scheme, host, port, path, query" in done.stdout

    after = _run(pytester, monkeypatch, "no:recording", MAX_TOKENS="64000", EXPECTED_MODE="none")
    assert after == before
    assert len(origin.requests) == hits  # offline: every answer came from a migrated cassette
    assert {path: path.read_bytes() for path in written} == written


def test_migrate_reports_each_file_and_marks_the_matching(tmp_path: Path) -> None:
    from replay.convert import migrate
    from replay.convert.files import save_vcr
    from replay.model import Chunk, Interaction, Request, Response

    folder = tmp_path / "tests" / "cassettes" / "test_x"
    folder.mkdir(parents=True)
    interaction = Interaction(
        Request(method="GET", url="http://127.0.0.1:1/a"),
        Response(status=200, chunks=[Chunk(0.0, b"ok")]),
    )
    save_vcr(folder / "test_one.yaml", [interaction])
    (folder / "notes.yml").write_text("title: not a cassette\n")
    (folder / "broken.yaml").write_text("interactions:\n- request: 3\n")

    done = replay_text("migrate", str(tmp_path), "--match-on", "method,uri")
    assert done.returncode == 1, done.stdout  # one vcrpy cassette could not be read
    lines = done.stdout.splitlines()
    assert any(
        line.endswith("broken.yaml: failed: interactions[0]: missing field 'response'")
        for line in lines
    ), lines
    assert any("notes.yml: skipped: not a vcrpy cassette" in line for line in lines), lines
    assert any("test_one.yaml -> test_one.msgpack: 1 interaction," in line for line in lines)
    assert lines[-1] == f"replay migrate: 1 converted, 1 failed, 1 skipped under {tmp_path}"
    assert migrate.recorded_under(folder / "test_one.msgpack") == ("method", "uri")

    again = replay_text("migrate", str(tmp_path))
    assert "test_one.msgpack exists, kept (--force replaces it)" in again.stdout
    assert "match_on.json" not in again.stdout  # its own marks are not looked at
    missing = replay_text("migrate", str(tmp_path / "nowhere"))
    assert missing.stderr == f"replay: error: {tmp_path / 'nowhere'}: no such file or directory\n"
    unknown = replay_text("migrate", str(tmp_path), "--match-on", "methd")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("replay: error: unknown matcher 'methd'"), unknown.stderr


def test_migrate_leaves_a_replay_cassette_alone_and_fails_on_broken_yaml(tmp_path: Path) -> None:
    from replay.convert.files import save_vcr
    from replay.model import Chunk, Interaction, Request, Response

    interaction = Interaction(
        Request(method="GET", url="http://127.0.0.1:1/a"),
        Response(status=200, chunks=[Chunk(0.0, b"ok")]),
    )
    save_vcr(tmp_path / "test_one.yaml", [interaction])
    assert replay_text("migrate", str(tmp_path)).returncode == 0
    native = tmp_path / "test_one.msgpack"
    (tmp_path / "test_one.match_on.json").unlink()  # as after a recording by replay
    before = native.read_bytes()

    forced = replay_text("migrate", "--force", str(native))
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.splitlines()[0] == f"{native}: skipped: not a vcrpy cassette"
    assert native.read_bytes() == before
    assert not (tmp_path / "test_one.match_on.json").exists()  # its matching is not downgraded

    (tmp_path / "bad.yaml").write_text("not: [yaml\n")
    broken = replay_text("migrate", str(tmp_path))
    assert broken.returncode == 1, broken.stdout
    assert any("bad.yaml: failed: " in line for line in broken.stdout.splitlines())
