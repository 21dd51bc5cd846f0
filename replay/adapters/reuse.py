"""Connections opened before a block, refused on reuse (`replay.adapters.network`'s fourth layer).

The audit hook of `replay.adapters.network` refuses a socket that *connects* to a host the
block does not allow, but a connection opened before the block (a pooled keep-alive
connection, a socket `dup`'d from it) connects no more: it only sends. While a block is
active, these patches check the host of each send:

- `http.client.HTTPConnection.putrequest`, which every request of the http.client family
  passes (`http.client`, `urllib.request`, urllib3, requests, botocore): its host, before a
  byte of the request is written, with the request's method and URL;
- `socket.socket` `send`, `sendall`, `sendmsg` (without an address: with one the audit
  hook checks it) and `sendfile`, and `ssl.SSLSocket`'s own (`write` too): the peer of
  the socket (`getpeername`), so a dup of a connected socket, a socket made from its
  descriptor and asyncio's transports are covered too. Its reads (`recv`…) too, once one of
  its sends was refused (see `_RECEIVES`); the reads of other sockets, a server's in this
  process among them, go on.

The patches go on with the first block and come off with the last (`start`, `stop`): no
cost when no block is active. `ssl` is patched if imported (a connection before the block
that used it imported it). Not covered: the descriptor written by other means (`os.write`,
`os.sendfile`, a C-level `_socket.socket` made from it, C extensions).
"""

from __future__ import annotations

import functools
import socket
import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["Refuse", "caller_library", "start", "stop"]

#: `refuse(host, method, url)`: raise the refusal of `method` to `url` if `host` is not
#: allowed by every active block; return if it is.
Refuse = Callable[[str, str, str], None]

_INTERNET = (socket.AF_INET, socket.AF_INET6)
_lock = threading.Lock()
_originals: list[tuple[type, str, Any]] = []
_check: Refuse | None = None
#: The sockets a send was refused on: their reads are refused too.
_refused: weakref.WeakSet[Any] = weakref.WeakSet()


def _peer_check(sock: Any, verb: str) -> None:
    """Refuse a send on `sock` if it is connected to a host no block allows."""
    check = _check
    if check is None or sock.family not in _INTERNET:
        return
    try:
        peer = sock.getpeername()
    except OSError:
        return  # not connected: the send itself fails (or its address was audited)
    host = str(peer[0])
    try:
        check(host, verb, f"{host}:{peer[1]}")
    except BaseException:
        if verb != "RECV":
            _refused.add(sock)
        raise


def _checked(original: Callable[..., Any], verb: str) -> Callable[..., Any]:
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        _peer_check(self, verb)
        return original(self, *args, **kwargs)

    return checked


def _read_checked(original: Callable[..., Any]) -> Callable[..., Any]:
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self in _refused:
            _peer_check(self, "RECV")
        return original(self, *args, **kwargs)

    return checked


def _sendmsg(original: Callable[..., Any]) -> Callable[..., Any]:
    def sendmsg(self: Any, buffers: Any, ancdata: Any = (), flags: int = 0, *address: Any) -> Any:
        if not address:  # with an address, the audit hook checks it
            _peer_check(self, "SENDMSG")
        return original(self, buffers, ancdata, flags, *address)

    return sendmsg


def _putrequest(original: Callable[..., Any]) -> Callable[..., Any]:
    def putrequest(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        check = _check
        if check is not None:
            host = str(self.host)
            shown = f"[{host}]" if ":" in host else host
            target = url if "://" in url else f"http://{shown}:{self.port}{url}"
            check(host, method, target)
        return original(self, method, url, *args, **kwargs)

    return putrequest


def _patch(cls: type, name: str, wrap: Callable[[Any], Any]) -> None:
    original = getattr(cls, name, None)
    if original is None:
        return
    _originals.append((cls, name, cls.__dict__.get(name)))
    setattr(cls, name, wrap(original))


#: The reads refused on a socket whose send was refused: a client that ignores a failed write
#: (as httpcore does, to read a server's early answer) would otherwise wait for an answer to
#: a request never sent. Other sockets read on (a server in this process answering a peer
#: the block does not allow reads its requests; its answers are refused).
_RECEIVES = ("recv", "recv_into", "recvfrom", "recvfrom_into", "recvmsg", "recvmsg_into", "read")


def _patch_all() -> None:
    import http.client

    _patch(http.client.HTTPConnection, "putrequest", _putrequest)
    classes: list[type] = [socket.socket]
    ssl = sys.modules.get("ssl")
    if ssl is not None:
        classes.append(ssl.SSLSocket)
    for cls in classes:
        for name, verb in (
            ("send", "SEND"),
            ("sendall", "SEND"),
            ("sendfile", "SENDFILE"),
            ("write", "SEND"),  # `SSLSocket.write`, its old API (a plain socket has none)
        ):
            _patch(cls, name, functools.partial(_checked, verb=verb))
        for name in _RECEIVES:
            _patch(cls, name, _read_checked)
        _patch(cls, "sendmsg", _sendmsg)


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


def caller_library() -> str | None:
    """The library whose code opened the connection being refused: the innermost frame's
    module that is not plumbing (the stdlib's `http.client` or `urllib.request` by name)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        top = name.partition(".")[0]
        if top and top not in _PLUMBING:
            return name if top in ("http", "urllib") else top
        frame = frame.f_back
    return None


def start(refuse: Refuse) -> None:
    """Check every send with `refuse` (the first block's call; later ones share it)."""
    global _check
    with _lock:
        if _check is None:
            _patch_all()
        _check = refuse


def stop() -> None:
    """Take the patches off (the last block's call)."""
    global _check
    with _lock:
        _check = None
        _refused.clear()
        for cls, name, original in reversed(_originals):
            if original is None:
                delattr(cls, name)
            else:
                setattr(cls, name, original)
        _originals.clear()
