"""Blocking the network: requests no cassette handles fail at once, loopback excepted.

Two layers. At the HTTP layer, a router at the bottom of the patch stack refuses every
httpx / httpx2 request that no cassette session took, with an error naming the request.
Below it, `socket.socket.connect` refuses other clients (urllib, raw sockets) to hosts not
allowed. Loopback stays allowed unless `allowed_hosts` says otherwise, since tests talk to
local servers.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import sys
from collections.abc import Collection, Iterable, Iterator
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from replay import patch
from replay.errors import NetworkBlockedError

__all__ = ["LOOPBACK", "block_network", "host_names", "is_allowed"]

#: Hosts allowed by default: the loopback interface.
LOOPBACK: frozenset[str] = frozenset({"localhost", "127.0.0.1", "::1"})


def host_names(hosts: Iterable[str]) -> frozenset[str]:
    """Host names as `is_allowed` compares them: lower case, without IPv6 brackets; a
    single string is one host, not its letters."""
    if isinstance(hosts, str):
        hosts = (hosts,)
    return frozenset(host.strip().strip("[]").lower() for host in hosts if host.strip())


def is_allowed(host: str | None, allowed_hosts: Collection[str]) -> bool:
    """Whether `host` may be reached: listed, or loopback when loopback hosts are listed."""
    if host is None:
        return True  # a Unix socket or the like: not the network
    host = host.strip("[]").lower()
    if host in allowed_hosts:
        return True
    if "127.0.0.1" in allowed_hosts or "::1" in allowed_hosts:
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return False


class _Guard:
    """The router at the bottom of the stack: passes allowed hosts, refuses the rest."""

    def __init__(self, allowed_hosts: Collection[str]) -> None:
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)

    def _check(self, request: Any) -> None:
        url = str(request.url)
        host = urlsplit(url).hostname
        if not is_allowed(host, self.allowed_hosts):
            raise NetworkBlockedError(method=request.method, url=url)

    def handle(self, request: Any, send: patch.Send) -> Any:
        """Send an allowed request; refuse the rest."""
        self._check(request)
        return send(request)

    async def ahandle(self, request: Any, send: patch.AsyncSend) -> Any:
        """Send an allowed request; refuse the rest."""
        self._check(request)
        return await send(request)


#: Modules a connection passes through that are not the client library making it.
_PLUMBING = frozenset(
    {
        "socket",
        "ssl",
        "asyncio",
        "selectors",
        "concurrent",
        "threading",
        "contextlib",
        "functools",
        "anyio",
        "sniffio",
        "replay",
        "trio",
        "uvloop",
        "_pytest",
        "pluggy",
    }
)


def _caller_library() -> str | None:
    """The library whose code opened the connection being refused: the innermost frame's
    module that is not plumbing (the stdlib's `http.client` or `urllib.request` by name)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        top = name.partition(".")[0]
        if top and top not in _PLUMBING:
            return name if top in ("http", "urllib") else top
        frame = frame.f_back
    return None


@contextlib.contextmanager
def block_network(allowed_hosts: Collection[str] = LOOPBACK) -> Iterator[None]:
    """Within the block, only `allowed_hosts` (and cassettes) answer requests.

    Raises (from the refused request):
        NetworkBlockedError: a request or connection to a host not allowed.
    """
    guard = _Guard(allowed_hosts)
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex

    def _refuse(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            host = str(address[0])
            if not is_allowed(host, guard.allowed_hosts):
                url = f"{host}:{address[1]}"
                raise NetworkBlockedError(method="CONNECT", url=url, library=_caller_library())

    def connect(sock: socket.socket, address: Any) -> None:
        _refuse(sock, address)
        original_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        _refuse(sock, address)
        return original_connect_ex(sock, address)

    patch.install_bottom(guard)
    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        socket.socket.connect = original_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = original_connect_ex  # type: ignore[method-assign]
        patch.uninstall(guard)
