"""block_network refuses connections opened before it: pooled keep-alive ones, dups, raw sends.

Each connection is opened (and used once) before the block, against a real loopback origin
that counts its requests; inside a block that allows no host, reusing it must be refused
with `NetworkBlockedError` and the origin must see nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import httpcore
import httpx
import pytest
import requests
import urllib3
import urllib3.exceptions
from certs import self_signed

import replay
from replay.testing import Origin

PATH = "/v1/responses"


def _address(origin: Origin) -> tuple[str, int]:
    parts = urlsplit(origin.url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


def _refusal(error: BaseException) -> replay.NetworkBlockedError:
    """The `NetworkBlockedError` `error` is or wraps (urllib3 and requests wrap it)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, replay.NetworkBlockedError):
            return current
        todo.extend([current.__cause__, current.__context__])
        todo.extend(arg for arg in current.args if isinstance(arg, BaseException))
        todo.append(getattr(current, "reason", None))
    raise AssertionError(f"not a refusal: {error!r}")


def _refused_on_reuse(origin: Origin, use: Callable[[], object]) -> replay.NetworkBlockedError:
    use()  # opens the connection, which the pool keeps
    hits = len(origin.requests)
    refused = (replay.NetworkBlockedError, urllib3.exceptions.HTTPError)  # urllib3 wraps it
    with replay.block_network(allowed_hosts=()), pytest.raises(refused) as caught:
        use()
    assert len(origin.requests) == hits
    return _refusal(caught.value)


def test_http_client_keep_alive_connection(origin: Origin) -> None:
    connection = http.client.HTTPConnection(*_address(origin), timeout=10)

    def use() -> None:
        connection.request("GET", PATH)
        connection.getresponse().read()

    with contextlib.closing(connection):
        refused = _refused_on_reuse(origin, use)
        assert connection.sock is not None  # the open connection, not a new one
    assert refused.method == "GET"
    assert refused.url == origin.url + PATH
    assert refused.library == "http.client"


def test_urllib3_pool(origin: Origin) -> None:
    with urllib3.PoolManager(retries=False) as pool:
        refused = _refused_on_reuse(origin, lambda: pool.request("GET", origin.url + PATH))
    assert refused.library == "urllib3"


def test_requests_session(origin: Origin) -> None:
    with requests.Session() as session:
        refused = _refused_on_reuse(origin, lambda: session.get(origin.url + PATH, timeout=10))
    assert refused.method == "GET"
    assert refused.url == origin.url + PATH


def test_httpx_client(origin: Origin) -> None:
    with httpx.Client() as client:
        refused = _refused_on_reuse(origin, lambda: client.get(origin.url + PATH))
    assert refused.url == origin.url + PATH


def test_httpcore_pool(origin: Origin) -> None:
    with httpcore.ConnectionPool() as pool:

        def use() -> None:
            pool.request("GET", origin.url + PATH)

        refused = (replay.NetworkBlockedError, httpcore.NetworkError)  # httpcore wraps it
        use()
        hits = len(origin.requests)
        with replay.block_network(allowed_hosts=()), pytest.raises(refused) as caught:
            use()
        assert len(origin.requests) == hits
    assert "127.0.0.1:" in _refusal(caught.value).url  # by its request, or its socket


def test_aiohttp_session(origin: Origin) -> None:
    async def main() -> replay.NetworkBlockedError:
        async with aiohttp.ClientSession() as session:

            async def use() -> None:
                async with session.get(origin.url + PATH) as response:
                    await response.read()

            await use()
            hits = len(origin.requests)
            with (
                replay.block_network(allowed_hosts=()),
                pytest.raises(replay.NetworkBlockedError) as caught,
            ):
                await use()
            assert len(origin.requests) == hits
            return _refusal(caught.value)

    assert asyncio.run(main()).url == origin.url + PATH


# -- the socket layer ---------------------------------------------------------------------------


@pytest.fixture
def connected(origin: Origin) -> Iterator[socket.socket]:
    """A TCP connection to the origin, opened before any block."""
    with socket.create_connection(_address(origin), timeout=10) as sock:
        yield sock


def _write_through_a_file(sock: socket.socket) -> None:
    with sock.makefile("wb", buffering=0) as file:
        file.write(REQUEST)


REQUEST = f"GET {PATH} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()


@pytest.mark.parametrize(
    "send",
    [
        lambda sock: sock.send(REQUEST),
        lambda sock: sock.sendall(REQUEST),
        lambda sock: sock.sendmsg([REQUEST]),
        lambda sock: _write_through_a_file(sock),
    ],
    ids=["send", "sendall", "sendmsg", "makefile"],
)
def test_a_socket_connected_before_the_block_cannot_send(
    origin: Origin, connected: socket.socket, send: Callable[[socket.socket], object]
) -> None:
    with (
        replay.block_network(allowed_hosts=()),
        pytest.raises(replay.NetworkBlockedError) as caught,
    ):
        send(connected)
    assert caught.value.method.startswith("SEND")
    assert caught.value.url == "{}:{}".format(*_address(origin))
    connected.sendall(REQUEST)  # the block is over: the same socket sends again
    assert connected.recv(12).startswith(b"HTTP/1.")
    assert len(origin.requests) == 1  # that one only


def test_nor_read_what_it_might_have_sent(origin: Origin, connected: socket.socket) -> None:
    # (a client that goes on after a failed write, as httpcore does, would wait forever)
    refused = pytest.raises(replay.NetworkBlockedError, match=r"^RECV 127\.0\.0\.1:")
    with replay.block_network(allowed_hosts=()):
        with pytest.raises(replay.NetworkBlockedError, match=r"^SEND "):
            connected.sendall(REQUEST)
        with refused:
            connected.recv(16)
        with refused:
            connected.recv_into(bytearray(16))
    assert origin.requests == []


def test_a_socket_whose_send_was_not_refused_reads_on() -> None:
    # (a server in this process reads what a peer the block does not allow sent it)
    with (
        socket.create_server(("127.0.0.1", 0)) as server,
        socket.create_connection(server.getsockname()[:2], timeout=10) as client,
    ):
        accepted, _ = server.accept()
        with accepted:
            client.sendall(b"ping")
            with replay.block_network(allowed_hosts=()):
                assert accepted.recv(4) == b"ping"
                with pytest.raises(replay.NetworkBlockedError, match=r"^SEND "):
                    accepted.sendall(b"pong")


def test_sendfile_on_a_socket_connected_before_the_block(
    origin: Origin, connected: socket.socket
) -> None:
    with tempfile.TemporaryFile() as file:
        file.write(REQUEST)
        file.seek(0)
        with replay.block_network(allowed_hosts=()), pytest.raises(replay.NetworkBlockedError):
            connected.sendfile(file)
    connected.sendall(b"")
    connected.shutdown(socket.SHUT_WR)
    assert connected.recv(16) == b""  # the origin read nothing and closed
    assert origin.requests == []


def test_a_socket_dupd_inside_the_block_cannot_send(
    origin: Origin, connected: socket.socket
) -> None:
    with replay.block_network(allowed_hosts=()):
        with connected.dup() as copy, pytest.raises(replay.NetworkBlockedError):
            copy.sendall(REQUEST)
        with (
            socket.socket(fileno=os.dup(connected.fileno())) as made,
            pytest.raises(replay.NetworkBlockedError),
        ):
            made.send(REQUEST)
    connected.shutdown(socket.SHUT_WR)
    assert connected.recv(16) == b""
    assert origin.requests == []


def test_allowed_peers_still_send(origin: Origin, connected: socket.socket) -> None:
    with replay.block_network():  # loopback allowed
        connected.sendall(REQUEST)
        assert connected.recv(12).startswith(b"HTTP/1.")
    assert len(origin.requests) == 1


def test_the_send_patches_come_off_with_the_last_block() -> None:
    original = http.client.HTTPConnection.putrequest
    with replay.block_network(), replay.block_network(allowed_hosts=()):
        assert "send" in socket.socket.__dict__
    assert http.client.HTTPConnection.putrequest is original
    for name in ("send", "sendall", "sendmsg"):
        assert name not in socket.socket.__dict__  # the C methods again: no cost


def test_an_ssl_socket_connected_before_the_block_cannot_send(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    received: list[bytes] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:
            with server_context.wrap_socket(listener.accept()[0], server_side=True) as conn:
                while data := conn.recv(1024):
                    received.append(data)

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        client_context = ssl.create_default_context(cafile=str(cert))
        with client_context.wrap_socket(
            socket.create_connection(listener.getsockname(), timeout=10),
            server_hostname="127.0.0.1",
        ) as client:
            client.sendall(b"before")
            with replay.block_network(allowed_hosts=()):
                for send in (client.send, client.sendall, client.write):
                    with pytest.raises(replay.NetworkBlockedError):
                        send(b"inside")
            client.sendall(b"after")
        server.join(timeout=10)
    assert b"".join(received) == b"beforeafter"
