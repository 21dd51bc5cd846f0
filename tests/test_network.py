"""block_network: requests no cassette answers fail at once, recording included."""

from __future__ import annotations

import _socket
import contextlib
import json
import multiprocessing
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

import replay
from replay.adapters.network import ENV_BLOCK_NETWORK, block_network, is_allowed
from replay.run.site import HOOK_DIRECTORY
from replay.testing import Origin, Script

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    ("host", "allowed", "expected"),
    [
        ("127.0.0.1", ("127.0.0.1",), True),
        ("127.5.6.7", ("127.0.0.1",), True),
        ("::1", ("::1",), True),
        ("localhost", ("localhost",), True),
        ("example.com", ("127.0.0.1", "::1", "localhost"), False),
        ("10.0.0.1", ("127.0.0.1",), False),
        ("127.0.0.1", (), False),
        ("::ffff:127.0.0.1", ("127.0.0.1",), True),
        ("::ffff:203.0.113.1", ("127.0.0.1",), False),
    ],
    ids=lambda value: str(value),
)
def test_which_hosts_are_allowed(host: str, allowed: tuple[str, ...], expected: bool) -> None:
    assert is_allowed(host, allowed) is expected


def test_a_session_that_would_record_is_blocked_too(origin: Origin, tmp_path: Path) -> None:
    # Loopback blocked as well: proves the block without a packet leaving the machine.
    with (
        block_network(allowed_hosts=()),
        replay.use_cassette(tmp_path / "c.msgpack"),
        pytest.raises(replay.ReplayError, match=r"GET .*/v1/responses"),
    ):
        httpx.get(origin.url + "/v1/responses")
    assert origin.requests == []
    assert not (tmp_path / "c.msgpack").exists()


def test_a_replayed_request_needs_no_network(origin: Origin, tmp_path: Path) -> None:
    path = tmp_path / "c.msgpack"
    with replay.use_cassette(path):
        live = httpx.get(origin.url + "/v1/responses").content
    with block_network(allowed_hosts=()), replay.use_cassette(path, record_mode="none"):
        assert httpx.get(origin.url + "/v1/responses").content == live
    assert len(origin.requests) == 1


def test_without_a_session_unlisted_hosts_are_refused(origin: Origin) -> None:
    with block_network(allowed_hosts=()), pytest.raises(replay.ReplayError):
        httpx.get(origin.url + "/v1/responses")
    assert origin.requests == []


def test_a_connection_replay_does_not_route_names_its_library() -> None:
    import urllib.error
    import urllib.request

    with (
        Origin({"/x": Script(chunks=[(0.0, b"live")])}) as origin,
        replay.block_network(allowed_hosts=()),
        pytest.raises(urllib.error.URLError) as caught,
    ):
        urllib.request.urlopen(origin.url + "/x", timeout=5)
    refused = caught.value.reason
    assert isinstance(refused, replay.NetworkBlockedError)
    assert refused.library == "http.client"
    assert "opened by http.client" in str(refused)
    assert origin.requests == []


# -- below the HTTP layer: raw sockets and child processes ----------------------------------------
#
# Nothing here may leave the machine: a refusal that failed would aim at TEST-NET-3
# (203.0.113.0/24, documentation only, routed nowhere), with short timeouts.

UNROUTED = ("203.0.113.1", 9)


def _refused(call: Callable[[], object]) -> replay.NetworkBlockedError:
    with pytest.raises(replay.NetworkBlockedError) as caught:
        call()
    return caught.value


def test_a_raw_socket_connect_is_refused_before_any_packet() -> None:
    with block_network(), contextlib.closing(_socket.socket()) as raw:
        raw.settimeout(2)
        refused = _refused(lambda: raw.connect(UNROUTED))
        assert isinstance(refused, ConnectionError)
        assert refused.url == "203.0.113.1:9"
        assert refused.method == "CONNECT"
        assert "203.0.113.1:9 was refused" in str(refused)
        assert _refused(lambda: raw.connect_ex(UNROUTED)).method == "CONNECT"


def test_a_udp_datagram_is_refused_by_sendto_and_sendmsg() -> None:
    with block_network(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        assert _refused(lambda: udp.sendto(b"x", UNROUTED)).method == "SENDTO"
        assert _refused(lambda: udp.sendmsg([b"x"], [], 0, UNROUTED)).method == "SENDMSG"


@pytest.mark.skipif(not hasattr(socket, "MSG_FASTOPEN"), reason="no TCP Fast Open")
def test_a_tcp_fast_open_sendto_is_refused() -> None:
    with block_network(), socket.socket() as tcp:
        tcp.settimeout(2)
        refused = _refused(lambda: tcp.sendto(b"x", socket.MSG_FASTOPEN, UNROUTED))
        assert refused.url == "203.0.113.1:9"


def test_loopback_sockets_still_work_under_the_block() -> None:
    with block_network(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.settimeout(5)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sender.sendto(b"ping", receiver.getsockname())
        assert receiver.recv(16) == b"ping"
        with (
            Origin({"/x": Script(chunks=[(0.0, b"live")])}) as origin,
            contextlib.closing(_socket.socket()) as raw,
        ):
            raw.settimeout(5)
            raw.connect(("127.0.0.1", urlsplit(origin.url).port))


def test_the_socket_layer_is_idle_once_the_block_ends() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.settimeout(5)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            with block_network(allowed_hosts=()):  # loopback refused only inside
                _refused(lambda: sender.sendto(b"inside", receiver.getsockname()))
            sender.sendto(b"after", receiver.getsockname())
        assert receiver.recv(16) == b"after"  # the refused datagram never left


def test_nested_blocks_allow_only_what_all_of_them_allow() -> None:
    with (
        block_network(),
        block_network(allowed_hosts=()),
        contextlib.closing(_socket.socket()) as raw,
    ):
        _refused(lambda: raw.connect(("127.0.0.1", 9)))
        assert os.environ[ENV_BLOCK_NETWORK] == "[]"


URLOPEN = """
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=3)
except Exception as error:
    reason = getattr(error, "reason", error)
    print(type(reason).__name__, reason)
else:
    print("reached")
"""


def _python(*args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", URLOPEN, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_python_subprocess_is_blocked_too(origin: Origin) -> None:
    with block_network():
        assert _python("http://203.0.113.1:9/").startswith(
            "NetworkBlockedError GET http://203.0.113.1:9/ was refused"
        )
        assert _python(origin.url + "/v1/responses") == "reached\n"  # loopback still allowed


def test_a_subprocess_without_replay_is_blocked_by_the_standard_library_alone(
    tmp_path: Path,
) -> None:
    shadow = tmp_path / "replay"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('not installed here')\n")
    with block_network():
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HOOK_DIRECTORY), str(tmp_path)])}
        shown = _python("http://203.0.113.1:9/", env=env)
    assert shown.startswith("ConnectionRefusedError 203.0.113.1 was refused")


def _connect_unrouted() -> str:
    """Run in a spawned worker: what connecting to TEST-NET-3 raises there."""
    try:
        socket.create_connection(UNROUTED, timeout=2).close()
    except OSError as error:
        return type(error).__name__
    return "connected"


def test_a_multiprocessing_spawn_worker_is_blocked_too() -> None:
    with block_network(), multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_connect_unrouted) == "NetworkBlockedError"


def test_the_environment_is_restored_when_the_block_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.delenv(ENV_BLOCK_NETWORK, raising=False)
    with block_network(allowed_hosts=["api.example.com"]):
        assert os.environ["PYTHONPATH"] == os.pathsep.join([str(HOOK_DIRECTORY), "/somewhere"])
        assert json.loads(os.environ[ENV_BLOCK_NETWORK]) == ["api.example.com"]
    assert os.environ["PYTHONPATH"] == "/somewhere"
    assert ENV_BLOCK_NETWORK not in os.environ


def test_a_blocked_program_under_replay_run_keeps_its_session(
    tmp_path: Path, origin: Origin
) -> None:
    # `replay run` puts the same hook first on PYTHONPATH: the two share it.
    cassette = tmp_path / "c.msgpack"
    with replay.use_cassette(cassette):
        httpx.get(origin.url + "/v1/responses")
    program = (
        "import httpx, socket, sys\n"
        "print(httpx.get(sys.argv[1] + '/v1/responses').status_code)\n"
        "try:\n"
        "    socket.create_connection(('203.0.113.1', 9), timeout=2)\n"
        "except OSError as error:\n"
        "    print(type(error).__name__)\n"
    )
    with block_network():
        result = subprocess.run(
            [sys.executable, "-m", "replay.cli", "run", str(cassette), "--",
             sys.executable, "-c", program, origin.url],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["200", "NetworkBlockedError"]
    assert len(origin.requests) == 1  # the second answer came from the cassette


BLOCKED_SUITE = """
import _socket, contextlib, subprocess, sys
import pytest, replay

RAW_CONNECT = (
    "import _socket\\ns = _socket.socket()\\ns.settimeout(2)\\ns.connect(('203.0.113.1', 9))"
)

def test_a_subprocess():
    result = subprocess.run([sys.executable, "-c", RAW_CONNECT], capture_output=True,
                            text=True, timeout=60)
    assert "NetworkBlockedError: CONNECT 203.0.113.1:9 was refused" in result.stderr

def test_a_raw_socket():
    with contextlib.closing(_socket.socket()) as raw, pytest.raises(replay.NetworkBlockedError):
        raw.settimeout(2)
        raw.connect(("203.0.113.1", 9))
"""


def test_block_network_option_reaches_subprocesses_and_raw_sockets(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_blocked=BLOCKED_SUITE)
    result = pytester.runpytest_subprocess("-p", "no:recording", "--block-network", timeout=120)
    result.assert_outcomes(passed=2)
