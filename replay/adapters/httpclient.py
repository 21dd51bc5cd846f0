"""The http.client shell (and so `urllib.request`'s): `HTTPConnection.request` and
`getresponse`, recorded and replayed.

`request` is where a request is whole (method, URL, headers, body), so it is routed there:
replayed, it does not touch the network and the connection's next `getresponse` hands back
the replay; recorded, it is sent for real (the routing bypassed) and `getresponse` reads the
real answer, its body read chunk by chunk as it arrives by a `replay.adapters.reader.ThreadReader`
that stamps it. Either way the client gets a real `http.client.HTTPResponse`, its headers
parsed, reading from a file of the body's pieces (`replay.adapters.filebody`), so
`read`, `read(n)`, `read1`, `readinto`, `readline`, iteration and `urllib.request`'s
handlers (redirects, errors) behave as on a socket, at the recorded pace.

Not routed: a request written with the low-level calls (`putrequest`, `putheader`,
`endheaders`, `send`): it goes live. urllib3's connections subclass `HTTPConnection` with
their own `request`; urllib3 is routed a level up (`replay.adapters.urllib3`), so its
`getresponse` passes through here untouched.
"""

from __future__ import annotations

import functools
import http.client
import importlib
import socket
from collections.abc import Callable, Iterator
from typing import Any

from replay.adapters import routes
from replay.adapters.filebody import (
    SocketStream,
    Source,
    body_file,
    recorded_source,
    replayed_source,
    request_body,
)
from replay.engine.exchange import Exchange, Record, Replay, route
from replay.errors import hide_for_replay_errors
from replay.model import Request

__all__ = ["patches"]

#: The attribute of a connection holding the exchange its next `getresponse` answers.
_PENDING = "_replay_pending"


def patches() -> list[tuple[type, str, Any]]:
    """The patches of `HTTPConnection.request` and `getresponse` (see `replay.adapters`)."""
    # (by its module: patched as http.client's import ends, `http.client` is not set yet)
    cls = importlib.import_module("http.client").HTTPConnection
    request, getresponse = cls.__dict__["request"], cls.__dict__["getresponse"]

    def routed_request(
        self: Any,
        method: str,
        url: str,
        body: Any = None,
        headers: Any = None,
        *,
        encode_chunked: bool = False,
    ) -> None:
        __tracebackhide__ = hide_for_replay_errors
        self.__dict__.pop(_PENDING, None)
        headers = {} if headers is None else headers
        session = routes.routed()
        full = _url(self, url)
        way = None if session is None else route(session, full)
        if not isinstance(way, Exchange):  # no session, or an ignored host: live
            return request(self, method, url, body, headers, encode_chunked=encode_chunked)  # type: ignore[no-any-return]
        data = request_body(body)
        asked = Request(
            method=method,
            url=full,
            headers=[(str(k), _text(v)) for k, v in headers.items()],
            body=data,
        )
        decided = way.decide(asked)
        if isinstance(decided, Record):
            real = functools.partial(
                request, self, method, url, data, headers, encode_chunked=encode_chunked
            )
            with routes.bypassed():
                decided.sent(real)
        self.__dict__[_PENDING] = (decided, method)
        return None

    def routed_getresponse(self: Any) -> http.client.HTTPResponse:
        __tracebackhide__ = hide_for_replay_errors
        pending = self.__dict__.pop(_PENDING, None)
        if pending is None:
            return getresponse(self)  # type: ignore[no-any-return]
        decided, method = pending
        if isinstance(decided, Replay):
            source, stop = replayed_source(decided, _read_timeout(self.timeout))
            played = decided.played.response
            return _response(method, played.status, list(played.headers), source, stop)
        with routes.bypassed():
            real = decided.sent(functools.partial(getresponse, self))
        headers = list(real.getheaders())
        source, stop = recorded_source(decided, _Upstream(real, self.sock), real.status, headers)
        return _response(method, real.status, headers, source, stop, real.reason)

    return [(cls, "request", routed_request), (cls, "getresponse", routed_getresponse)]


def _text(value: str | bytes | int) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _url(connection: Any, target: str) -> str:
    """The absolute URL of `target` (a path, or a proxy's absolute URL) on `connection`."""
    if "://" in target:
        return target
    https = isinstance(connection, getattr(http.client, "HTTPSConnection", ()))
    scheme, default = ("https", 443) if https else ("http", 80)
    host = connection.host
    host = f"[{host}]" if ":" in host else host
    port = "" if connection.port in (None, default) else f":{connection.port}"
    return f"{scheme}://{host}{port}{target}"


def _read_timeout(timeout: object) -> float | None:
    """A connection's timeout, in seconds (None: the socket default, none)."""
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        return float(timeout)
    return None


def _response(
    method: str,
    status: int,
    headers: list[tuple[str, str]],
    source: Source,
    stop: Callable[[], None],
    reason: str | None = None,
) -> http.client.HTTPResponse:
    """An `http.client.HTTPResponse` whose status line and headers are given, its body read
    from `source` (already un-chunked: the response reads it to its end)."""
    response = http.client.HTTPResponse(_FileSocket(body_file(source, stop)), method=method)  # type: ignore[arg-type]
    message = http.client.HTTPMessage()
    for name, value in headers:
        message[name] = value
    response.version = 11
    response.code = response.status = status  # type: ignore[attr-defined]
    response.reason = http.client.responses.get(status, "") if reason is None else reason
    response.headers = response.msg = message
    response.chunked = False
    response.will_close = True
    length = message.get("content-length")
    chunked = "chunked" in (message.get("transfer-encoding") or "").lower()
    response.length = int(length) if length and length.isdigit() and not chunked else None
    if status in (204, 304) or 100 <= status < 200 or method == "HEAD":
        response.length = 0
    return response


class _FileSocket:
    """What `http.client.HTTPResponse` asks of its socket: the file it reads."""

    def __init__(self, file: Any) -> None:
        self.file = file

    def makefile(self, mode: str) -> Any:
        return self.file


class _Upstream:
    """A real http.client response as the reader reads it: `stream` yields its body as it
    arrives, `extensions` offer the socket to wake a read the client gave up on."""

    def __init__(self, real: http.client.HTTPResponse, sock: socket.socket | None) -> None:
        self.real = real
        self.extensions: dict[str, Any] = {}
        if sock is not None:
            self.extensions["network_stream"] = SocketStream(sock)

    @property
    def stream(self) -> Iterator[bytes]:
        """The body's pieces as they arrive (each read: what the socket has, one chunk at most)."""
        while data := self.real.read1(2**16):
            yield data

    def close(self) -> None:
        """Let go of the response."""
        self.real.close()
