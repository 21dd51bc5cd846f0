"""block_network: requests no cassette answers fail at once, recording included."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import replay
from replay._origin import Origin, Script
from replay.network import block_network, is_allowed


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
