"""The `websockets` shell: WebSocket conversations recorded and replayed, asyncio and sync.

`patches()` replaces the one place each client of the `websockets` library (its new
implementation, 14+; the openai SDK's realtime client uses the asyncio one) opens its
connection: `websockets.asyncio.client.connect.open_tcp_connection` and
`websockets.sync.client.reconnect.open_connection` (what `websockets.sync.client.connect`
runs). The upgrade request crosses the engine's exchange as a GET of the `ws://` / `wss://`
URL with the connect's headers, before any connection is made:

- an ignored host, or no session: the connection opens as usual (the network guard refuses
  it under a block, as it refuses an HTTP request);
- replayed: the client gets one end of a socket pair whose other end is the recorded
  server (`replay.adapters.websockets_peer`); the client's frames are matched as it sends
  them (`replay.engine.conversation`): a frame the recording never saw raises
  `FrameMismatchError` from the client's `send`, the connection left as it was;
- recorded: the connection opens as usual, and the library's sans-I/O protocol object is
  watched (`replay.adapters.websockets_record`): the upgrade request as sent, the
  response, each frame both ways, the end; one interaction with `frames`.
"""

from __future__ import annotations

import socket
from typing import Any

from replay.adapters import routes as _routes
from replay.adapters.network import refuse_unless_reachable
from replay.adapters.websockets_peer import Peer
from replay.adapters.websockets_record import watch, watch_replayed
from replay.engine.conversation import ALLOWED_LEFTOVERS, Conversation
from replay.engine.exchange import Desk, Live, Record, Replay, route
from replay.errors import hide_for_replay_errors
from replay.model import Frame, Request
from replay.redact.redactor import Redactor

__all__ = ["decided", "patches", "peer", "request_of"]


def patches() -> list[tuple[type, str, Any]]:
    """The patch of the asyncio client (`websockets.sync.client`'s: `websockets_sync`)."""
    from websockets.asyncio.client import connect

    return [(connect, "open_tcp_connection", _async_open(connect.open_tcp_connection))]


def request_of(uri: str, headers: Any, user_agent: str | None) -> Request:
    """The upgrade request a connect to `uri` sends (as far as it is known before it is
    made): a GET of the URI with the connect's additional headers and its User-Agent."""
    pairs: list[tuple[str, str]] = []
    if headers is not None:
        items = headers.raw_items() if hasattr(headers, "raw_items") else headers
        items = items.items() if hasattr(items, "items") else items
        pairs = [(str(name), str(value)) for name, value in items]
    if user_agent is not None and not any(n.lower() == "user-agent" for n, _ in pairs):
        pairs.append(("User-Agent", user_agent))
    return Request(method="GET", url=uri, headers=pairs)


def decided(connecter: Any) -> tuple[Desk, Replay | Record] | None:
    """The session's decision for the connect `connecter` is about to make; None: live."""
    __tracebackhide__ = hide_for_replay_errors
    uri = str(connecter.uri)
    desk = _routes.routed()
    if desk is None:
        refuse_unless_reachable("GET", uri)
        return None
    way = route(desk, uri)
    if isinstance(way, Live):
        return None
    request = request_of(uri, connecter.additional_headers, connecter.user_agent_header)
    decided = way.decide(request)
    if isinstance(decided, Record):
        refuse_unless_reachable("GET", uri)
    return desk, decided


def peer(desk: Desk, replay: Replay, uri: str) -> tuple[socket.socket, Peer]:
    """A socket pair: the client's end, and the recorded server at the other."""
    played = replay.played
    cassette = getattr(desk, "cassette", None)
    interaction = None if cassette is None else cassette.interactions[played.index]
    frames = () if interaction is None or interaction.frames is None else interaction.frames
    frames, drop = _faulted(desk, played.index, frames, uri)
    schedule = replay.schedule
    clock = replay.clock
    conversation = Conversation(
        frames,
        speed=float("inf") if schedule is None else schedule.speed,
        start=clock.now() if schedule is None else schedule.start,
        url=_shown(uri),
        cassette_path=getattr(cassette, "path", None),
        drop=drop,
        allowed=getattr(getattr(desk, "options", None), "websocket_allow", ALLOWED_LEFTOVERS),
    )
    if cassette is not None:
        cassette.conversations[played.index] = conversation
    client_end, peer_end = socket.socketpair()
    redactor = getattr(getattr(desk, "options", None), "redactor", None)
    peer = Peer(peer_end, played.response, conversation, clock, redactor=redactor or _REDACTOR)
    peer.start()
    return client_end, peer


def _faulted(
    desk: Desk, index: int, frames: tuple[Frame, ...], uri: str
) -> tuple[tuple[Frame, ...], int]:
    """The frames the session's faults targeting interaction `index` make of `frames`, and
    where the connection drops (`replay.engine.frame_faults`)."""
    faults = getattr(getattr(desk, "options", None), "faults", ())
    if not faults:
        return frames, len(frames)
    from replay.engine.frame_faults import targeted
    from replay.faults import coerce

    return targeted(frames, coerce(faults), index, Request(method="GET", url=_shown(uri)))


#: What redacts without a session's own (a replay transport's): credentials by their look.
_REDACTOR = Redactor()


def _shown(uri: str) -> str:
    return _REDACTOR.request(Request(method="GET", url=uri)).url


def _async_open(original: Any) -> Any:
    async def open_tcp_connection(self: Any) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        found = decided(self)
        if found is None:
            return await original(self)
        desk, way = found
        if isinstance(way, Record):
            connection = await way.asent(original(self))
            watch(connection, way.recording, str(self.uri))
            return connection
        import asyncio

        client_end, server = peer(desk, way, str(self.uri))
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(
            lambda: self.factory(self.ws_uri), sock=client_end
        )
        watch_replayed(connection, server)
        return connection

    return open_tcp_connection
