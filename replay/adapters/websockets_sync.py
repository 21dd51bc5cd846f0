"""The `websockets` shell's sync client: `websockets.sync.client.connect` recorded and replayed.

`patches()` replaces `websockets.sync.client.reconnect.open_connection` (what `connect`
runs: it opens the socket and shakes hands in one call). The decision and the replayed
peer are `replay.adapters.websockets`'; see there.
"""

from __future__ import annotations

from typing import Any

from replay.adapters.websockets import decided, peer
from replay.adapters.websockets_record import watch, watch_replayed
from replay.engine.exchange import Record
from replay.errors import hide_for_replay_errors

__all__ = ["patches"]


def patches() -> list[tuple[type, str, Any]]:
    """The patch of the sync client (websockets 16+; before, it goes live)."""
    from websockets.sync import client

    reconnect = getattr(client, "reconnect", None)
    if reconnect is None:  # pragma: no cover - websockets before 16
        return []
    return [(reconnect, "open_connection", _sync_open(reconnect.open_connection))]


def _sync_open(original: Any) -> Any:
    def open_connection(self: Any, deadline: Any) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        found = decided(self)
        if found is None:
            return original(self, deadline)
        desk, way = found
        if isinstance(way, Record):
            return _recorded_sync(self, deadline, way, original)
        from websockets.client import ClientProtocol

        client_end, server = peer(desk, way, str(self.uri))
        protocol = ClientProtocol(self.ws_uri, **self.protocol_kwargs)
        connection = self.create_connection(client_end, protocol, **self.connection_kwargs)
        watch_replayed(connection, server)
        try:
            connection.handshake(
                self.additional_headers, self.user_agent_header, deadline.timeout()
            )
        except Exception:
            connection.close_socket()
            connection.recv_events_thread.join()
            raise
        return connection

    return open_connection


def _recorded_sync(connecter: Any, deadline: Any, way: Record, original: Any) -> Any:
    """A sync connect recorded: its protocol watched from before its handshake (the sync
    client makes the connection and shakes hands in one call)."""
    make = connecter.create_connection

    def create_connection(sock: Any, protocol: Any, **kwargs: Any) -> Any:
        connection = make(sock, protocol, **kwargs)
        watch(connection, way.recording, str(connecter.uri))
        return connection

    connecter.create_connection = create_connection
    try:
        return way.sent(lambda: original(connecter, deadline))
    finally:
        connecter.create_connection = make
