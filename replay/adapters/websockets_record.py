"""Watching a `websockets` connection's sans-I/O protocol: to record it, or to match what
a replayed one sends.

Every byte a `websockets` connection sends or receives goes through its `ClientProtocol`
(asyncio and sync alike): `send_request` (the upgrade request, as sent), `process_response`
(the server's answer), `send_frame` and `recv_frame` (each frame, uncompressed: extensions
are undone before and applied after them), `receive_eof` (the end). `watch` wraps those of
one connection's protocol (attributes of that object only, not of the class) to note them
on a `Recording`; a message sent in fragments is noted as one frame when its last fragment
goes. `watch_replayed` wraps a replayed connection's `send` to match each message before it
is sent (a mismatch raises from `send`, the connection untouched), and its protocol's
`send_frame` to tell the peer of pings, pongs and the close.
"""

from __future__ import annotations

import inspect
from typing import Any

from replay.adapters.websockets_peer import Peer
from replay.engine.recorder import Recording
from replay.errors import hide_for_replay_errors
from replay.model import Request
from replay.model.frames import OPCODES

__all__ = ["message_frame", "watch", "watch_replayed"]


class _Assembler:
    """Folds a fragmented message into one frame (kind, data); others pass through."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.parts: list[bytes] = []

    def add(self, opcode: int, data: bytes, fin: bool) -> tuple[str, bytes] | None:
        if opcode == 0:  # a continuation
            self.parts.append(data)
            if not fin or self.kind is None:
                return None
            first: str = self.kind
            self.kind = None
            joined, self.parts = b"".join(self.parts), []
            return first, joined
        kind = OPCODES.get(opcode)
        if kind is None:
            return None
        if not fin and kind in ("text", "binary"):
            self.kind, self.parts = kind, [data]
            return None
        return kind, data


def watch(connection: Any, recording: Recording, uri: str) -> None:
    """Note what `connection` (a `websockets` client connection, its handshake not yet made)
    sends and receives on `recording`, and finish it when the connection ends."""
    protocol = connection.protocol
    sent, received = _Assembler(), _Assembler()
    send_request, process_response = protocol.send_request, protocol.process_response
    send_frame, recv_frame, receive_eof = (
        protocol.send_frame,
        protocol.recv_frame,
        protocol.receive_eof,
    )

    def noted_request(request: Any) -> None:
        headers = [(str(name), str(value)) for name, value in request.headers.raw_items()]
        recording.request = Request(method="GET", url=uri, headers=headers)
        send_request(request)

    def noted_response(response: Any) -> None:
        headers = [(str(name), str(value)) for name, value in response.headers.raw_items()]
        recording.got_headers(response.status_code, headers)
        if response.body:
            recording.got_chunk(bytes(response.body))
        try:
            process_response(response)
        except Exception:  # a refused upgrade: the interaction is the answer
            recording.finish()
            raise
        recording.frames = []  # a conversation, frames or none

    def noted_sent(frame: Any) -> None:
        whole = sent.add(int(frame.opcode), bytes(frame.data), frame.fin)
        if whole is not None and whole[0] == "text":  # secrets replaced, as in JSON bodies
            whole = ("text", recording.tape.redactor.frame(whole[1]))
        _note(recording, "client", whole)
        send_frame(frame)

    def noted_received(frame: Any) -> None:
        _note(recording, "server", received.add(int(frame.opcode), bytes(frame.data), frame.fin))
        recv_frame(frame)

    def noted_eof() -> None:
        receive_eof()
        recording.finish()

    protocol.send_request = noted_request
    protocol.process_response = noted_response
    protocol.send_frame = noted_sent
    protocol.recv_frame = noted_received
    protocol.receive_eof = noted_eof


def _note(recording: Recording, sender: str, frame: tuple[str, bytes] | None) -> None:
    if frame is not None:
        recording.got_frame(sender, *frame)


def message_frame(message: Any, text: bool | None) -> tuple[str, bytes] | None:
    """The frame `send(message, text)` sends: (kind, data); None for a fragmented message
    (an iterable: matched as its last fragment goes)."""
    if isinstance(message, str):
        return ("binary" if text is False else "text", message.encode())
    if isinstance(message, (bytes, bytearray, memoryview)):
        return ("text" if text else "binary", bytes(message))
    return None


def watch_replayed(connection: Any, peer: Peer) -> None:
    """Match what the replayed `connection` sends against the recording, through `peer`."""
    protocol = connection.protocol
    send, send_frame = connection.send, protocol.send_frame
    assembler = _Assembler()
    matched = [0]  # messages matched by `send`, their frames not yet gone

    def matched_first(message: Any, text: bool | None) -> None:
        __tracebackhide__ = hide_for_replay_errors
        frame = message_frame(message, text)
        if frame is not None:
            peer.client_sent(*frame)
            matched[0] += 1

    if inspect.iscoroutinefunction(send):

        async def asend(message: Any, text: bool | None = None) -> None:
            __tracebackhide__ = hide_for_replay_errors
            matched_first(message, text)
            await send(message, text=text)

        connection.send = asend
    else:

        def ssend(message: Any, text: bool | None = None) -> None:
            __tracebackhide__ = hide_for_replay_errors
            matched_first(message, text)
            send(message, text=text)

        connection.send = ssend

    _watch_reads(connection, peer)

    def told(frame: Any) -> None:
        whole = assembler.add(int(frame.opcode), bytes(frame.data), frame.fin)
        if whole is not None:
            if whole[0] not in ("text", "binary"):
                peer.client_sent(*whole)
            elif matched[0]:
                matched[0] -= 1
            else:
                peer.client_sent(*whole)
        send_frame(frame)

    protocol.send_frame = told


def _watch_reads(connection: Any, peer: Peer) -> None:
    """Tell `peer` of each message the client's code reads (`recv`, and so iteration)."""
    recv = connection.recv
    if inspect.iscoroutinefunction(recv):

        async def arecv(*args: Any, **kwargs: Any) -> Any:
            peer.client_reads()
            message = await recv(*args, **kwargs)
            peer.client_read()
            return message

        connection.recv = arecv
    else:

        def srecv(*args: Any, **kwargs: Any) -> Any:
            peer.client_reads()
            message = recv(*args, **kwargs)
            peer.client_read()
            return message

        connection.recv = srecv
