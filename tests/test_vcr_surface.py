"""pytest-recording's surface as replay serves it with pytest-recording off: the `vcr` mark and
fixture, `vcr_config`'s options and hooks, a migrated cassette's matching (and its move to
replay's on re-recording), what is not honoured, and the `replay_match_on` ini setting."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import replay
from replay.convert.files import save_vcr
from replay.convert.migrate import VCRPY_MATCH_ON, migrate_tree, recorded_under
from replay.model import Chunk, Interaction, Request, Response
from replay.testing import Origin, Script

pytest_plugins = ["pytester"]

ANSWER = Script(chunks=[(0.0, b'{"answer": 42}')], headers=[("content-type", "application/json")])


@pytest.fixture
def origin() -> Iterator[Origin]:
    with Origin({"/v1/ask": ANSWER, "/v1/skip": ANSWER}) as server:
        yield server


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest with pytest-recording off: replay serves its surface."""
    return pytester.runpytest_subprocess("-p", "no:recording", "-p", "no:cacheprovider", *args)


def suite(pytester: pytest.Pytester, origin: str, body: str, conftest: str = "") -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(conftest or "")
    header = f"import json, os\n\nimport httpx\nimport pytest\n\nORIGIN = {origin!r}\n\n"
    pytester.makepyfile(test_suite=header + body)


ASK = """
def ask(path="/v1/ask", tokens=None):
    tokens = tokens or int(os.environ.get("MAX_TOKENS", "8192"))
    response = httpx.post(ORIGIN + path, json={"max_tokens": tokens})
    return response.json()["answer"]
"""


def recorded(path: Path, origin: str) -> None:
    """A replay cassette of `ask()`'s request (made, not recorded: a session in this process
    would outlive the modules pytester forgets after the test)."""
    request = Request(method="POST", url=origin + "/v1/ask", body=b'{"max_tokens":8192}')
    response = Response(status=200, chunks=[Chunk(0.0, b'{"answer": 42}')])
    path.parent.mkdir(parents=True, exist_ok=True)
    replay.Cassette([Interaction(request, response)]).save(path)


def vcrpy_cassette(pytester: pytest.Pytester, origin: str, test: str, tokens: int) -> Path:
    """A vcrpy cassette of `test`, recorded when it sent `tokens`, migrated."""
    folder = pytester.path / "cassettes" / "test_suite"
    folder.mkdir(parents=True, exist_ok=True)
    request = Request(
        method="POST",
        url=origin + "/v1/ask",
        headers=[("content-type", "application/json")],
        body=json.dumps({"max_tokens": tokens}).encode(),
    )
    response = Response(status=200, chunks=[Chunk(0.0, b'{"answer": 7}')])
    save_vcr(folder / f"{test}.yaml", [Interaction(request, response)])
    (done,) = migrate_tree(folder)
    assert done.status == "converted", done
    return done.target


def test_a_migrated_cassette_replays_as_recorded_until_recorded_again(
    pytester: pytest.Pytester, origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite(pytester, origin.url, ASK + "\n@pytest.mark.vcr\ndef test_a():\n    assert ask()\n")
    path = vcrpy_cassette(pytester, origin.url, "test_a", tokens=100)
    assert recorded_under(path) == VCRPY_MATCH_ON

    # The body drifted (8192, recorded with 100): vcrpy's matching still finds the answer.
    replayed = run(pytester)
    replayed.assert_outcomes(passed=1)
    assert origin.requests == []

    # Recorded again: the mark goes, and the summary says the matching moved.
    again = run(pytester, "--record-mode=rewrite")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(
        [
            "replay: cassettes/test_suite/test_a.msgpack recorded again: it now matches on "
            "replay's default (method, scheme, host, port, path, query, body, last_event_id), "
            "no longer on "
            "what vcrpy recorded it under (method, scheme, host, port, path, query)"
        ]
    )
    assert recorded_under(path) is None
    assert len(origin.requests) == 1
    # From now on the body counts: the recording made with 8192 answers 8192 only.
    run(pytester).assert_outcomes(passed=1)
    monkeypatch.setenv("MAX_TOKENS", "64000")
    mismatch = run(pytester)
    mismatch.assert_outcomes(failed=1)
    mismatch.stdout.fnmatch_lines(["*body differs*"])
    assert len(origin.requests) == 1


def test_hooks_filters_and_what_is_not_honoured(pytester: pytest.Pytester, origin: Origin) -> None:
    conftest = """
import pytest

@pytest.fixture
def vcr_config():
    return {
        "before_record_request": lambda r: None if r.path.endswith("/skip") else r,
        "before_record_response": [scrub],
        "filter_post_data_parameters": ["password"],
        "serializer": "yaml",
    }

def scrub(response):
    response["headers"]["x-scrubbed"] = ["yes"]
    return response

def pytest_recording_configure(config, vcr):
    vcr.register_persister(object())
    vcr.filter_headers = [("x-team", "hidden")]  # every cassette's default, as vcrpy's VCR
"""
    body = """
@pytest.mark.vcr
def test_records(vcr):
    headers = {"x-team": "core"}
    assert httpx.post(ORIGIN + "/v1/ask", json={}, headers=headers).json()["answer"] == 42
    assert httpx.post(ORIGIN + "/v1/skip", json={}).json()["answer"] == 42
    assert vcr.record_mode in ("once", "rewrite")
    assert len(vcr.requests) == 1 and vcr.play_count == 0
    assert vcr.responses[0]["headers"]["x-scrubbed"] == ["yes"]

def test_unmarked(vcr):
    assert vcr is None
"""
    suite(pytester, origin.url, body, conftest)
    result = run(pytester, "--record-mode=once")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "replay: warning: not honoured by replay (pytest-recording is not active): "
            "filter_post_data_parameters, vcr.register_persister"
        ]
    )
    cassette = replay.Cassette.load(pytester.path / "cassettes/test_suite/test_records.msgpack")
    (only,) = cassette.interactions
    assert only.request.url.endswith("/v1/ask")
    assert ("x-team", "REDACTED") in only.request.headers
    assert ("x-scrubbed", "yes") in only.response.headers
    assert only.response.body == b'{"answer": 42}'

    # Under pytest-xdist the workers' notes reach the controller's summary.
    workers = run(pytester, "-p", "xdist", "-n", "2", "--record-mode=rewrite")
    workers.assert_outcomes(passed=2)
    workers.stdout.fnmatch_lines(["replay: warning: not honoured by replay *: filter_post_data*"])


def test_marks_merge_and_the_closest_wins(pytester: pytest.Pytester, origin: Origin) -> None:
    body = (
        ASK
        + """
pytestmark = pytest.mark.vcr(record_mode="once", allow_playback_repeats=True)

@pytest.mark.vcr(record_mode="none")
class TestRepeats:
    def test_repeats(self, vcr):
        assert ask() == ask() == 42
        assert (vcr.record_mode, vcr.play_count) == ("none", 2)
"""
    )
    suite(pytester, origin.url, body)
    recorded(pytester.path / "cassettes/test_suite/TestRepeats.test_repeats.msgpack", origin.url)
    run(pytester).assert_outcomes(passed=1)
    assert origin.requests == []


def test_the_ini_match_on_is_every_cassettes_default(
    pytester: pytest.Pytester, origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = ASK + "\n@pytest.mark.use_cassette\ndef test_a():\n    assert ask() == 42\n"
    suite(pytester, origin.url, body)
    run(pytester, "--record-mode=once").assert_outcomes(passed=1)
    monkeypatch.setenv("MAX_TOKENS", "64000")
    run(pytester, "--record-mode=none").assert_outcomes(failed=1)  # replay's default: the body
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
        "replay_match_on = method scheme host port path query\n"
    )
    run(pytester, "--record-mode=none").assert_outcomes(passed=1)
    assert len(origin.requests) == 1


def test_use_cassette_marks_merge_too(pytester: pytest.Pytester, origin: Origin) -> None:
    body = (
        ASK
        + """
pytestmark = pytest.mark.use_cassette("shared", record_mode="none")

@pytest.mark.use_cassette(allow_playback_repeats=True)
def test_repeats(cassette):
    assert ask() == ask() == 42
    assert cassette.play_count == 2
"""
    )
    suite(pytester, origin.url, body)
    recorded(pytester.path / "cassettes/test_suite/shared.msgpack", origin.url)
    run(pytester).assert_outcomes(passed=1)
    assert origin.requests == []


def test_a_cassette_not_migrated_says_how(pytester: pytest.Pytester, origin: Origin) -> None:
    suite(pytester, origin.url, ASK + "\n@pytest.mark.vcr\ndef test_a():\n    assert ask()\n")
    folder = pytester.path / "cassettes" / "test_suite"
    folder.mkdir(parents=True)
    request = Request(method="POST", url=origin.url + "/v1/ask")
    save_vcr(folder / "test_a.yaml", [Interaction(request, Response(status=200))])
    result = run(pytester, "--record-mode=once")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*CassetteFormatError: cannot read cassette '*test_a.yaml': pytest-recording's "
            "cassette, not migrated (no test_a.msgpack beside it): convert the suite's first "
            f"with `replay migrate {folder}`, or run with -p recording"
        ]
    )
    assert origin.requests == []


def test_the_library_given_a_yaml_file_says_how_to_convert_it(tmp_path: Path) -> None:
    yaml = tmp_path / "old.yaml"
    save_vcr(yaml, [Interaction(Request(method="GET", url="http://x/"), Response(status=200))])
    with pytest.raises(replay.CassetteFormatError) as caught, replay.use_cassette(yaml):
        pass
    assert str(caught.value).endswith(
        f"Convert it first: replay convert {yaml} {tmp_path / 'old.msgpack'} (a "
        f"pytest-recording suite's, all at once: replay migrate {tmp_path})"
    )


@pytest.mark.parametrize(
    ("plugins", "served_by"),
    [
        pytest.param(("-p", "pytest_recording.plugin"), "vcr.cassette", id="pytest-recording"),
        pytest.param((), "replay.convert.vcrpy_options", id="replay"),
    ],
)
def test_the_surface_is_pytest_recordings_whenever_it_is_loaded(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    plugins: tuple[str, ...],
    served_by: str,
) -> None:
    if importlib.util.find_spec("pytest_recording") is None:  # (found, not imported: see
        # test_migrate_suite.py)
        pytest.skip("pytest-recording is not installed: pip install -e '.[test,coexist]'")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    conftest = "def pytest_recording_configure(config, vcr):\n    vcr.register_matcher('m', min)\n"
    body = (
        "@pytest.mark.vcr\n"
        "def test_served(vcr):\n"
        "    assert type(vcr).__module__ == os.environ['SERVED_BY']\n"
    )
    suite(pytester, "http://127.0.0.1:1", body, conftest)
    monkeypatch.setenv("SERVED_BY", served_by)
    result = pytester.runpytest_subprocess(
        *plugins, "-p", "replay.plugin.hooks", "-p", "no:cacheprovider", timeout=120
    )
    result.assert_outcomes(passed=1)
