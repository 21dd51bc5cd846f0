"""Blocking as a user meets it: `pytest --block-network` and `replay run` / `replay record`, as
real subprocesses, against a loopback origin that counts every request it gets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from commands import replay_text

import replay
from replay.testing import Origin

pytest_plugins = ["pytester"]

PATH = "/v1/responses"

# -- pytest: blocked from pytest_configure to pytest_unconfigure ---------------------------------

# Opened while conftest.py is imported, before pytest_configure: a pooled connection.
CONFTEST = """
import http.client, os
from urllib.parse import urlsplit

_url = urlsplit(os.environ["ORIGIN_URL"])
POOLED = http.client.HTTPConnection(_url.hostname, _url.port, timeout=10)
POOLED.request("GET", "/v1/responses")
POOLED.getresponse().read()
"""

SUITE = """
import os, socket, urllib.request
import pytest, replay
from conftest import POOLED

def _fetch():
    try:
        urllib.request.urlopen(os.environ["ORIGIN_URL"] + "/v1/responses", timeout=5).read()
    except Exception as error:
        return type(getattr(error, "reason", error)).__name__
    return "reached"

AT_IMPORT = _fetch()

@pytest.mark.parametrize("at_collection", [_fetch()])
def test_a_request_at_import_or_collection_is_refused(at_collection):
    assert (AT_IMPORT, at_collection) == ("NetworkBlockedError", "NetworkBlockedError")

def test_a_pooled_connection_opened_before_the_block_is_refused():
    with pytest.raises(replay.NetworkBlockedError, match="opened by http.client"):
        POOLED.request("GET", "/v1/responses")

def test_a_dup_of_it_is_refused():
    with POOLED.sock.dup() as copy, pytest.raises(replay.NetworkBlockedError):
        copy.sendall(b"GET /v1/responses HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
"""


@pytest.mark.parametrize(
    ("ini", "flags"),
    [
        ("", ["--block-network"]),
        ("replay_block_network = true", []),
        ("", ["--block-network", "-n", "2"]),  # xdist: each worker blocks itself
    ],
    ids=["option", "ini", "xdist"],
)
def test_pytest_blocks_from_configure_to_unconfigure(
    pytester: pytest.Pytester,
    origin: Origin,
    monkeypatch: pytest.MonkeyPatch,
    ini: str,
    flags: list[str],
) -> None:
    monkeypatch.setenv("ORIGIN_URL", origin.url)
    pytester.makeini(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\nfilterwarnings = error\n"
        f"replay_allowed_hosts =\n{ini}\n"
    )
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_blocked=SUITE)
    result = pytester.runpytest_subprocess("-p", "no:recording", *flags, timeout=120)
    result.assert_outcomes(passed=3)
    imports = 3 if "-n" in flags else 1  # xdist: the controller and each worker
    assert len(origin.requests) == imports  # conftest's own request, before the block


# -- replay run / replay record ------------------------------------------------------------------

# Every way out a program may try; each prints what it met.
ESCAPES = """
import http.client, os, socket, subprocess, sys, urllib.request
from urllib.parse import urlsplit
import httpcore, httpx, urllib3

url = sys.argv[1]
parts = urlsplit(url)

def attempt(name, call):
    print("--", name, file=sys.stderr, flush=True)
    try:
        call()
    except Exception as error:
        kinds, todo = set(), [error]
        while todo:  # what the error wraps (urllib3 and httpcore wrap theirs)
            reason = todo.pop()
            if isinstance(reason, BaseException) and type(reason).__name__ not in kinds:
                kinds.add(type(reason).__name__)
                todo += [*reason.args, getattr(reason, "reason", None), reason.__cause__]
        print(name, "NetworkBlockedError" if "NetworkBlockedError" in kinds else kinds)
    else:
        print(name, "reached")

def http_client():
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    connection.request("GET", "/v1/responses")
    connection.getresponse().read()

def putrequest():  # http.client's low-level calls: not routed
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
    connection.putrequest("GET", "/v1/responses")
    connection.endheaders()
    connection.getresponse().read()

def raw_socket():
    socket.create_connection((parts.hostname, parts.port), timeout=5).close()

# (a raw socket: a request of a client replay routes would be answered by the cassette)
CHILD = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)"

def python_child(env=None):
    done = subprocess.run([sys.executable, "-c", CHILD, parts.hostname, str(parts.port)],
                          capture_output=True, text=True, timeout=60, env=env)
    refused = done.returncode != 0 and "NetworkBlockedError" in done.stderr
    print("child", "NetworkBlockedError" if refused else done.stderr.strip()[-200:])

print("httpx", httpx.get(url + "/v1/responses").status_code)
attempt("urllib", lambda: urllib.request.urlopen(url + "/v1/responses", timeout=5).read())
attempt("http.client", http_client)
attempt("urllib3", lambda: urllib3.PoolManager(retries=False).request("GET", url + "/x"))
attempt("putrequest", putrequest)
attempt("socket", raw_socket)
attempt("httpcore", lambda: httpcore.request("GET", url + "/v1/chat/completions"))
python_child()
"""

#: The clients replay routes (a request the cassette cannot answer fails in the program),
#: then those it does not (the block refuses them); httpcore, routed, comes after them.
ROUTED = ["urllib", "http.client", "urllib3"]
NAMES = ["putrequest", "socket"]


@pytest.fixture
def recorded(tmp_path: Path, origin: Origin) -> Path:
    """A cassette holding the program's one httpx request (the origin's first hit)."""
    cassette = tmp_path / "c.msgpack"
    with replay.use_cassette(cassette):
        httpx.get(origin.url + PATH)
    return cassette


def _run(tmp_path: Path, origin: Origin, *args: str, status: int = 0) -> tuple[list[str], str]:
    program = tmp_path / "escapes.py"
    program.write_text(ESCAPES)
    done = replay_text(*args, "--", sys.executable, str(program), origin.url)
    assert done.returncode == status, done.stderr
    return done.stdout.splitlines(), done.stderr


def test_replay_run_mode_none_refuses_every_escape(
    tmp_path: Path, origin: Origin, recorded: Path
) -> None:
    lines, stderr = _run(tmp_path, origin, "run", str(recorded))
    assert lines[0] == "httpx 200"  # the cassette answered
    # Through the cassette, unrecorded: the program's own error, nothing sent.
    assert lines[1:4] == [f"{name} {{'CassetteMismatchError'}}" for name in ROUTED]
    assert lines[4:6] == [f"{name} NetworkBlockedError" for name in NAMES]
    assert "CassetteMismatchError" in lines[6]  # httpcore: through the cassette too
    assert lines[7] == "child NetworkBlockedError"
    assert len(origin.requests) == 1  # the recording's, nothing since
    # Each refusal said on stderr as it happened (before the next attempt):
    said = stderr.split("-- ")[1:]
    assert [part.split()[0] for part in said] == [*ROUTED, *NAMES, "httpcore"]
    for part in said[3:5]:
        assert "\nreplay: " in part
        assert "was refused: the network is blocked" in part
    assert f"replay: GET {origin.url}{PATH} was refused" in said[3]


def test_allow_host_and_ignored_hosts_let_loopback_through(
    tmp_path: Path, origin: Origin, recorded: Path
) -> None:
    for flags, routed in (
        (["--allow-host", "127.0.0.1"], "{'CassetteMismatchError'}"),  # allowed, not ignored
        (["--ignore-localhost"], "reached"),
    ):
        before = len(origin.requests)
        lines, stderr = _run(tmp_path, origin, "run", str(recorded), *flags)
        assert lines[1:4] == [f"{name} {routed}" for name in ROUTED], stderr
        assert lines[4:6] == [f"{name} reached" for name in NAMES], stderr
        assert len(origin.requests) > before


def test_replay_record_block_network_allows_loopback_unless_told(
    tmp_path: Path, origin: Origin
) -> None:
    out = tmp_path / "out.msgpack"
    lines, _ = _run(tmp_path, origin, "record", str(out), "--block-network")
    assert lines[:3] == ["httpx 200", "urllib reached", "http.client reached"]
    # The recordings (httpx's, urllib's, http.client's, urllib3's, httpcore's) went through
    # the block:
    assert len(replay.Cassette.load(out).interactions) == 5
    hits = len(origin.requests)
    lines, stderr = _run(
        tmp_path,
        origin,
        "record",
        str(out),
        "--block-network",
        "--allow-host",
        "api.test",
        status=1,
    )
    assert lines == []  # refused: the program stopped at its first request
    assert "NetworkBlockedError" in stderr
    assert len(origin.requests) == hits


def test_allow_host_without_a_block_is_a_usage_error(tmp_path: Path, recorded: Path) -> None:
    done = replay_text("run", str(recorded), "--mode", "once", "--allow-host", "x", "--", "true")
    assert done.returncode != 0
    assert "--allow-host needs --block-network" in done.stderr


# -- Python children given an environment of their own ------------------------------------------

CHILD = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)"
OWN_ENVIRONMENTS = """
import os, subprocess, sys
url = sys.argv[1] + "/v1/responses"
from urllib.parse import urlsplit
parts = urlsplit(url)
# (a raw socket: a request of a client replay routes would be answered by the cassette)
CHILD = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)"
for env in ({**os.environ, "PYTHONPATH": "src"}, {"PATH": os.environ["PATH"]}):
    done = subprocess.run(
        [sys.executable, "-c", CHILD, parts.hostname, str(parts.port)],
        capture_output=True, text=True, env=env, timeout=60,
    )
    print("NetworkBlockedError" in done.stderr and done.returncode != 0)
"""


def test_replay_run_blocks_children_given_their_own_environment(
    tmp_path: Path, origin: Origin
) -> None:
    cassette = tmp_path / "c.msgpack"
    with replay.use_cassette(cassette):
        httpx.get(origin.url + PATH)
    program = tmp_path / "p.py"
    program.write_text(OWN_ENVIRONMENTS)
    done = replay_text("run", str(cassette), "--", sys.executable, str(program), origin.url)
    assert done.stdout.split() == ["True", "True"], done.stderr
    assert len(origin.requests) == 1  # the recording's only


def test_block_network_blocks_children_given_their_own_environment(origin: Origin) -> None:
    with replay.block_network(allowed_hosts=()):
        for env in ({**os.environ, "PYTHONPATH": "src"}, {"PATH": os.environ["PATH"]}):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, origin.url + PATH],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
            assert "NetworkBlockedError" in done.stderr
            assert done.returncode != 0
    assert origin.requests == []
