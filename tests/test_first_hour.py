"""The first hour of a new user with the pytest plugin (issue 32): one rule for cassette paths,
the advice a mismatch gives, what is reported unplayed, the hints, and replay's error put
first when an SDK wraps it. Each through pytester, in a subprocess, as a user runs pytest."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator

import pytest

import replay
from replay.testing import Origin, Script, responses_hello

pytest_plugins = ["pytester"]

FAST = Script(chunks=responses_hello(scale=0.01))


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in a subprocess, pytest-recording left out (it shares replay's flags)."""
    return pytester.runpytest_subprocess("-p", "no:recording", *args, timeout=120)


@pytest.fixture(autouse=True)
def _quiet_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


@pytest.fixture
def origin() -> Iterator[Origin]:
    with Origin({"/v1/responses": FAST, "/echo": Script(echo=True)}) as server:
        yield server


def module(origin_url: str, body: str) -> str:
    """A test module's source: httpx, pytest, replay, ORIGIN, and `body`."""
    header = f"import httpx, pytest, replay\nORIGIN = {origin_url!r}\n"
    return header + textwrap.dedent(body)


# --- 1: one rule for a cassette path, whichever form names it -------------------------------

PATHS = """
def post(text):
    return httpx.post(ORIGIN + "/echo", content=text).content

@replay.use_cassette("cassettes/decorated.msgpack")
def test_decorator():
    assert post("a") == b"a"

@pytest.mark.use_cassette("cassettes/marked.msgpack")
def test_marker():
    assert post("b") == b"b"

def test_with():
    with replay.use_cassette("cassettes/with.msgpack"):
        assert post("c") == b"c"

@replay.use_cassette("bare")
def test_bare_name():
    assert post("d") == b"d"

@pytest.mark.use_cassette("bare_marked")
def test_bare_marked():
    assert post("e") == b"e"
"""


def test_every_form_resolves_a_relative_path_against_the_test_file(
    pytester: pytest.Pytester, origin: Origin
) -> None:
    tests = pytester.mkpydir("suite")
    (tests / "test_paths.py").write_text(module(origin.url, PATHS), encoding="utf-8")
    elsewhere = pytester.mkdir("elsewhere")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(elsewhere)  # CI runs pytest from another directory
        result = pytester.runpytest_subprocess(
            "-p", "no:recording", "--rootdir", str(pytester.path), str(tests), timeout=120
        )
    result.assert_outcomes(passed=5)
    found = sorted(str(p.relative_to(pytester.path)) for p in pytester.path.rglob("*.msgpack"))
    assert found == [
        "suite/cassettes/decorated.msgpack",
        "suite/cassettes/marked.msgpack",
        "suite/cassettes/test_paths/bare.msgpack",
        "suite/cassettes/test_paths/bare_marked.msgpack",
        "suite/cassettes/with.msgpack",
    ]
    # And from the rootdir, offline: every form finds the same files again.
    hits = len(origin.requests)
    result = run(pytester, "--record-mode=none", "--block-network", str(tests))
    result.assert_outcomes(passed=5)
    assert len(origin.requests) == hits


# --- 3: a changed prompt is advised to record again, not to add beside ---------------------

PROMPT = """
import os

@pytest.mark.use_cassette
def test_prompt():
    httpx.post(ORIGIN + "/echo", json={"input": os.environ.get("PROMPT", "hi")})
"""


def test_a_body_only_difference_advises_rewrite_and_says_why(
    pytester: pytest.Pytester, origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_llm=module(origin.url, PROMPT))
    run(pytester).assert_outcomes(passed=1)
    monkeypatch.setenv("PROMPT", "a changed prompt")

    result = run(pytester, "--record-mode=none")

    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "Only the body differs: the recording is stale" in output
    assert "To record it again: pytest --record-mode=rewrite 'test_llm.py::test_prompt'" in output
    assert "new_episodes would keep it, unplayed" in output
    assert "--record-mode=new_episodes 'test_llm.py" not in output
    # Followed, the advice leaves nothing stale behind.
    run(pytester, "--record-mode=rewrite", "test_llm.py::test_prompt").assert_outcomes(passed=1)
    result = run(pytester, "--record-mode=none", "--strict-cassettes")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    cassette = pytester.path / "cassettes" / "test_llm" / "test_prompt.msgpack"
    assert [i.request.body for i in replay.Cassette.load(cassette).interactions] == [
        b'{"input":"a changed prompt"}'
    ]


def test_a_changed_url_still_advises_new_episodes(
    pytester: pytest.Pytester, origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = PROMPT.replace('"/echo"', 'os.environ.get("WHERE", "/echo")')
    pytester.makepyfile(test_llm=module(origin.url, source))
    run(pytester).assert_outcomes(passed=1)
    monkeypatch.setenv("WHERE", "/echo/other")

    result = run(pytester, "--record-mode=none")

    result.assert_outcomes(failed=1)
    assert "To record it: pytest --record-mode=new_episodes 'test_llm.py::test_prompt'" in (
        result.stdout.str()
    )
    assert "stale" not in result.stdout.str()


# --- 6: replay's error first when an SDK wraps it ------------------------------------------

WRAPPED = """
import anthropic

@pytest.mark.use_cassette(record_mode="none")
def test_sdk():
    client = anthropic.Anthropic(base_url=ORIGIN, api_key="sk-ant-test", max_retries=0)
    client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
"""


def test_an_sdk_wrapped_mismatch_shows_replays_error_first_and_once(
    pytester: pytest.Pytester, origin: Origin
) -> None:
    pytester.makepyfile(test_llm=module(origin.url, WRAPPED))

    result = run(pytester)

    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    failure = output[output.index("___ test_sdk ___") : output.index("short test summary")]
    assert failure.index("CassetteMismatchError") < failure.index("APIConnectionError")
    assert failure.count("has no match in cassette") == 1
    assert "anthropic.APIConnectionError: Connection error." in failure
    assert "To record it: pytest --record-mode=new_episodes 'test_llm.py::test_sdk'" in failure
    # The test's own frame and the one replay raised in: no SDK or httpx frame.
    assert "site-packages" not in failure, failure
    frames = [line for line in failure.splitlines() if re.match(r"\S+\.py:\d+: in ", line)]
    assert len(frames) == 2, failure


# --- 4: a cassette tests share, recorded by this run, is not reported unplayed --------------

SHARED = """
@pytest.mark.parametrize("n", range(6))
@pytest.mark.use_cassette("shared")
def test_shared(n):
    assert httpx.post(ORIGIN + "/echo", json={"n": n}).content == b'{"n":%d}' % n
"""


def test_a_shared_cassette_recorded_by_this_run_is_not_unplayed(
    pytester: pytest.Pytester, origin: Origin
) -> None:
    pytester.makepyfile(test_llm=module(origin.url, SHARED))

    first = run(pytester, "--record-mode=new_episodes", "--strict-cassettes")

    first.assert_outcomes(passed=6)
    assert first.ret == 0
    first.stdout.fnmatch_lines(["unplayed interactions: 0"])
    # A later run that leaves some: each listed with its index and its body.
    second = run(pytester, "--record-mode=none", "-k", "not 3")
    second.assert_outcomes(passed=5, deselected=1)
    second.stdout.fnmatch_lines(
        ["unplayed interactions: 1", '  cassettes/test_llm/shared.msgpack #3 POST */echo {"n":3}']
    )


# --- 5: hints that fit: a test with its marker, a missing file --------------------------------

BLOCKED = """
@pytest.mark.use_cassette
def test_marked():
    httpx.post("http://api.example.test/v1/responses", json={"input": "hi"})
"""


def test_a_blocked_recording_is_told_to_record_with_the_network_not_to_add_a_marker(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_llm=module("http://unused.test", BLOCKED))

    result = run(pytester, "--block-network")

    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "NetworkBlockedError" in output
    assert "test_marked.msgpack' was recording it" in output
    assert "Record it once with the network open" in output
    assert "Record it in a cassette" not in output  # (it has one: the marker's)


def test_under_record_mode_none_the_missing_file_comes_first(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_llm=module("http://unused.test", BLOCKED))

    result = run(pytester, "--record-mode=none")

    result.assert_outcomes(failed=1)
    lines = [line for line in result.stdout.lines if line.startswith("E   ")]
    assert "has no match in cassette" in lines[0]
    assert "test_marked.msgpack' does not exist" in lines[1]
    assert "let it go live with ignore_hosts" in lines[2]  # (after the cause)


def test_a_mismatch_reaching_the_test_shows_its_frame_and_replays_only(
    pytester: pytest.Pytester,
) -> None:
    source = BLOCKED.replace(
        "@pytest.mark.use_cassette", '@pytest.mark.use_cassette(record_mode="none")'
    )
    pytester.makepyfile(test_llm=module("http://unused.test", source))

    result = run(pytester)

    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    failure = output[output.index("___ test_marked ___") : output.index("short test summary")]
    frames = [line for line in failure.splitlines() if re.match(r"\S+\.py:\d+: in ", line)]
    assert [frame.split(":")[0].rsplit("/", 1)[-1] for frame in frames] == [
        "test_llm.py",
        "errors.py",
    ]
    assert failure.count("has no match in cassette") == 1
