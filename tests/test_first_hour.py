"""The first hour of a new user with the pytest plugin (issue 32): one rule for cassette paths,
the advice a mismatch gives, what is reported unplayed, the hints, and replay's error put
first when an SDK wraps it. Each through pytester, in a subprocess, as a user runs pytest."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

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

