"""aiohttp's `ClientSession.ws_connect`: WebSocket conversations recorded and replayed, a
thin shell on the `websockets` shell's core (`replay.adapters.websockets`).

`patches()` replaces `ClientSession._ws_connect` (what `ws_connect` runs) and
`TCPConnector._create_connection`. The upgrade request crosses the exchange as the
`websockets` clients' does (a GET of the URL, with the call's and the session's headers):

- replayed: the connection aiohttp makes for the upgrade is one end of a socket pair (the
  connector's `_create_connection`, told so by a context variable: no connection anywhere,
  no TLS), whose other end is the `Peer`; aiohttp shakes hands and frames as over the
  network. Each message is matched as the code sends it (`send_frame`, through which
  `send_str`, `send_bytes`, `send_json`, `ping` and `close` go), each message the code
  `receive`s is counted as read;
- recorded: the real connection, watched at the response's `send_frame` (the client's
  frames) and `receive` (the server's, stamped when the code receives them: aiohttp parses
  frames in C, out of reach; pings answered by `autoping` are not seen).
"""

from __future__ import annotations

import contextvars
import socket
from typing import Any

import aiohttp

from replay.adapters import routes as _routes
from replay.adapters.network import refuse_unless_reachable
from replay.adapters.websockets import peer
from replay.adapters.websockets_peer import Peer
from replay.engine.exchange import Live, Record, route
from replay.engine.recorder import Recording
from replay.errors import hide_for_replay_errors
from replay.model import Request
from replay.model.frames import OPCODES

__all__ = ["patches", "replayed_socket"]

#: The client's end of the socket pair of the upgrade being replayed in this context.
_SOCKET: contextvars.ContextVar[socket.socket | None] = contextvars.ContextVar(
    "replay_websocket_socket", default=None
)


def replayed_socket() -> socket.socket | None:
    """The socket a replayed upgrade connects through in this context (None: none)."""
    return _SOCKET.get()


def patches() -> list[tuple[type, str, Any]]:
    """The patches of `ws_connect` and of the connector's connection making."""
    ws_connect = aiohttp.ClientSession._ws_connect
    create = aiohttp.TCPConnector._create_connection
    return [
        (aiohttp.ClientSession, "_ws_connect", _ws_connect_patch(ws_connect)),
        (aiohttp.TCPConnector, "_create_connection", _create_patch(create)),
    ]


def _create_patch(original: Any) -> Any:
    async def _create_connection(self: Any, req: Any, traces: Any, timeout: Any) -> Any:
        sock = _SOCKET.get()
        if sock is None:
            return await original(self, req, traces, timeout)
        _SOCKET.set(None)  # (one connection: the upgrade's)
        loop = self._loop
        _, protocol = await loop.create_connection(self._factory, sock=sock)
        return protocol

    return _create_connection


def _request_of(client: aiohttp.ClientSession, url: Any, kwargs: dict[str, Any]) -> Request:
    target = str(client._build_url(url)) if hasattr(client, "_build_url") else str(url)
    pairs = [(str(k), str(v)) for k, v in client.headers.items()]
    extra = kwargs.get("headers") or {}
    pairs += [(str(k), str(v)) for k, v in (extra.items() if hasattr(extra, "items") else extra)]
    return Request(method="GET", url=target, headers=pairs)


def _ws_connect_patch(original: Any) -> Any:
    async def _ws_connect(self: aiohttp.ClientSession, url: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        desk = _routes.routed()
        if desk is None:
            return await original(self, url, **kwargs)
        request = _request_of(self, url, kwargs)
        way = route(desk, request.url)
        if isinstance(way, Live):
            return await original(self, url, **kwargs)
        decided = way.decide(request)
        if isinstance(decided, Record):
            refuse_unless_reachable("GET", request.url)
            ws = await decided.asent(original(self, url, **kwargs))
            _watch(ws, decided.recording, request.url)
            return ws
        client_end, server = peer(desk, decided, request.url)
        token = _SOCKET.set(client_end)
        try:
            ws = await original(self, url, **kwargs)
        finally:
            _SOCKET.reset(token)
        _watch_replayed(ws, server)
        return ws

    return _ws_connect


def _kind_data(message: Any, opcode: int) -> tuple[str, bytes] | None:
    kind = OPCODES.get(int(opcode))
    if kind is None:
        return None
    return kind, message.encode() if isinstance(message, str) else bytes(message)


def _watch_replayed(ws: Any, server: Peer) -> None:
    writer = ws._writer
    send_frame, receive = writer.send_frame, ws.receive

    async def matched(message: Any, opcode: int, compress: int | None = None) -> None:
        __tracebackhide__ = hide_for_replay_errors
        frame = _kind_data(message, opcode)
        if frame is not None:
            server.client_sent(*frame)
        await send_frame(message, opcode, compress)

    async def counted(*args: Any, **kwargs: Any) -> Any:
        server.client_reads()
        message = await receive(*args, **kwargs)
        if int(message.type) in (1, 2):
            server.client_read()
        return message

    writer.send_frame = matched
    ws.receive = counted


def _watch(ws: Any, recording: Recording, url: str) -> None:
    response = ws._response
    headers = [(str(k), str(v)) for k, v in response.request_info.headers.items()]
    recording.request = Request(method="GET", url=url, headers=headers)
    recording.got_headers(response.status, [(str(k), str(v)) for k, v in response.headers.items()])
    recording.frames = []
    writer = ws._writer
    send_frame, receive, close = writer.send_frame, ws.receive, ws.close

    async def noted_sent(message: Any, opcode: int, compress: int | None = None) -> None:
        frame = _kind_data(message, opcode)
        if frame is not None:
            data = recording.tape.redactor.frame(frame[1]) if frame[0] == "text" else frame[1]
            recording.got_frame("client", frame[0], data)
        await send_frame(message, opcode, compress)

    async def noted_received(*args: Any, **kwargs: Any) -> Any:
        message = await receive(*args, **kwargs)
        kind = int(message.type)
        if kind == 8:  # a close: its code and reason, as on the wire
            code = message.data if isinstance(message.data, int) else None
            reason = message.extra if isinstance(message.extra, str) else ""
            data = b"" if code is None else code.to_bytes(2, "big") + reason.encode()
            recording.got_frame("server", "close", data)
        elif kind in OPCODES:
            recording.got_frame("server", *(_kind_data(message.data, kind) or ("binary", b"")))
        elif kind >= 256:  # CLOSING, CLOSED, ERROR: the end
            recording.finish()
        return message

    async def noted_close(*args: Any, **kwargs: Any) -> Any:
        try:
            return await close(*args, **kwargs)
        finally:
            recording.finish()

    writer.send_frame = noted_sent
    ws.receive = noted_received
    ws.close = noted_close
