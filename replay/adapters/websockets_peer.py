"""The replayed server of a WebSocket conversation: a thread at the far end of a socket pair.

A replayed socket is a real one: the client library gets one end of a `socket.socketpair()`
and runs as it would over the network (its handshake, its reader, its keepalive, its closing
handshake), with no TLS and no connection anywhere. The `Peer` holds the other end:

- it reads the upgrade request and answers it with the recorded response: for a 101, its
  headers with `Sec-WebSocket-Accept` made for this request's key and no extension (so no
  compression is negotiated: frames are sent as recorded, uncompressed); another status
  (a refused upgrade) with its body, then the connection ends;
- it then sends each server frame of the `Conversation` as it falls due, waiting on the
  session's clock (the real clock waits on the socket, so a client frame that releases an
  earlier frame wakes it; another clock's `sleep` skips the wait in one step);
- the client's frames reach the conversation from the client's side (the shell's hooks on
  the library's send), before their bytes reach the socket; the peer only drains them, and
  answers a ping with a pong and a close with a close, then ends the connection.

Library-neutral: it speaks RFC 6455 itself (a server's frames are unmasked), so every
client shell (websockets asyncio and sync, aiohttp) replays through the same peer.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http
import math
import select
import socket
import struct
import threading
from collections.abc import Callable

from replay.clock import Clock, MonotonicClock, vtime
from replay.engine.conversation import Conversation
from replay.model import Response
from replay.model.frames import OPCODE_OF
from replay.redact.redactor import Redactor
from replay.redact.shapes import PLACEHOLDER, hide_subprotocols

__all__ = ["Peer", "accept_key", "frame_bytes"]

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_DROPPED = {"sec-websocket-accept", "sec-websocket-extensions"}
_MAX_HANDSHAKE = 64 * 1024
#: On a clock that skips (virtual time), the longest real time a wait waits for the client
#: to read what it was sent before it moves the clock on.
_READ_WAIT = 1.0


def accept_key(key: str) -> str:
    """The `Sec-WebSocket-Accept` of a request's `Sec-WebSocket-Key` (RFC 6455, 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()


def _subprotocol(recorded: str, sent: dict[str, str]) -> str:
    """The subprotocol a replayed 101 names: the recorded one, or, where the recording hid a
    credential in it (`hide_subprotocols`), the client's own item it stood for."""
    if PLACEHOLDER not in recorded:
        return recorded
    offered = [item.strip() for item in sent.get("sec-websocket-protocol", "").split(",")]
    hidden = hide_subprotocols(", ".join(offered)).split(", ")
    return next((a for a, b in zip(offered, hidden, strict=False) if b == recorded), recorded)


def frame_bytes(kind: str, data: bytes) -> bytes:
    """A server's frame on the wire: final, unmasked, uncompressed."""
    size = len(data)
    head = bytes((0x80 | OPCODE_OF[kind],))
    if size < 126:
        return head + bytes((size,)) + data
    if size < 1 << 16:
        return head + bytes((126,)) + size.to_bytes(2, "big") + data
    return head + bytes((127,)) + size.to_bytes(8, "big") + data


class Peer:
    """The server end of a replayed socket (see the module's docstring).

    Args:
        sock: the peer's end of the socket pair.
        response: the recorded answer to the upgrade request.
        conversation: the recorded frames, replayed as a conversation.
        clock: the session's clock.
        on_end: called once the connection has ended.
        redactor: what the client's text frames were redacted with when recorded.
    """

    def __init__(
        self,
        sock: socket.socket,
        response: Response,
        conversation: Conversation,
        clock: Clock,
        on_end: Callable[[Conversation], None] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.sock = sock
        self.response = response
        self.conversation = conversation
        self.clock = clock
        self.on_end = on_end
        self.redactor = redactor
        self.start_at = conversation.start
        self.lock = threading.Lock()
        self._changed = threading.Condition(self.lock)  # the client asks for a message
        self._wanted = 0  # messages the client's code asked for
        self._sent = 0  # messages sent to it
        self._pongs: list[bytes] = []
        self._close_reply: bytes | None = None
        self._closing = False  # a close went to the client: only draining is left
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replay-websocket-peer", daemon=True)

    def start(self) -> None:
        """Start serving in a thread of its own (the client's sleeps wait in real time
        meanwhile: `replay.clock.vtime.hold_sleeps`)."""
        vtime.hold_sleeps()
        try:
            self._thread.start()
        except BaseException:
            vtime.release_sleeps()
            raise

    def client_sent(self, kind: str, data: bytes) -> None:
        """The client is sending a frame (called before its bytes reach the socket).

        Raises:
            FrameMismatchError: a data frame the recording has no match for.
        """
        if kind == "text" and self.redactor is not None:  # as it was stored
            data = self.redactor.frame(data)
        with self.lock:
            self.conversation.sent(kind, data, self.clock.now())
            if kind == "ping":
                self._pongs.append(data)
            elif kind == "close" and self._close_reply is None:
                self._close_reply = data[:2]  # echo the code, as servers do

    def client_reads(self) -> None:
        """The client's code asks for a message (it is done with the ones before)."""
        with self.lock:
            self._wanted += 1
            self._changed.notify_all()

    def client_read(self) -> None:
        """The client's code has read a message."""
        with self.lock:
            self.conversation.read()

    def join(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the connection to end; whether it has."""
        return self._ended.wait(timeout)

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            if self._handshake():
                if self.conversation.drop < 0:  # a `cut` before the server's first message
                    self.sock.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    return
                self._converse()
        except OSError:
            pass  # the client went away: what it did not read is a leftover
        finally:
            with contextlib.suppress(OSError):
                self.sock.close()
            with self.lock:
                self.conversation.closed = True
            vtime.release_sleeps()
            self._ended.set()
            if self.on_end is not None:
                self.on_end(self.conversation)

    def _handshake(self) -> bool:
        """Read the upgrade request, answer it as recorded; whether the socket is open now."""
        request = b""
        while b"\r\n\r\n" not in request:
            data = self.sock.recv(4096)
            if not data or len(request) > _MAX_HANDSHAKE:
                return False
            request += data
        sent: dict[str, str] = {}
        for line in request.split(b"\r\n")[1:]:
            name, _, value = line.decode("latin-1").partition(":")
            sent[name.strip().lower()] = value.strip()
        key = sent.get("sec-websocket-key", "")
        self._wait_until(self.response.headers_at)
        response = self.response
        phrase = _phrase(response.status)
        lines = [f"HTTP/1.1 {response.status} {phrase}"]
        lines += [
            f"{n}: {_subprotocol(v, sent) if n.lower() == 'sec-websocket-protocol' else v}"
            for n, v in response.headers
            if n.lower() not in _DROPPED
        ]
        if response.status == 101:
            lines.append(f"Sec-WebSocket-Accept: {accept_key(key)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if response.status != 101:
            self.sock.sendall(head + response.body)
            return False
        self.sock.sendall(head)
        return True

    def _wait_until(self, at: float) -> None:
        """Wait for recorded time `at` (since the upgrade request), at the speed."""
        speed = self.conversation.speed
        if math.isinf(speed):
            return
        delay = self.start_at + at / speed - self.clock.now()
        if delay > 0:
            self._sleep(delay, message=False)

    def _sleep(self, seconds: float, *, message: bool = True) -> None:
        """Wait `seconds` on the clock (before a `message`, or the handshake's answer): on the
        real one, woken early by the client's bytes."""
        if type(self.clock) is MonotonicClock:
            readable, _, _ = select.select([self.sock], [], [], seconds)
            if readable:
                self._drain()
            return
        if message:  # a clock that skips: not before the client waits for the next message
            # (it reads the clock once it has one: skipped sooner, the skip would count for it)
            with self.lock:
                self._changed.wait_for(self._caught_up, _READ_WAIT)
        self.clock.sleep(seconds)

    def _caught_up(self) -> bool:
        return self._wanted > self._sent or self.conversation.closed

    def _drain(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionResetError("the client closed the connection")

    def _converse(self) -> None:
        """Send what falls due, answer pings and the close; until the client's EOF."""
        while True:
            with self.lock:
                step = None if self._closing else self.conversation.next(self.clock.now())
                pongs, self._pongs = self._pongs, []
                reply, self._close_reply = self._close_reply, None
            for data in pongs if not self._closing else ():
                self.sock.sendall(frame_bytes("pong", data))
            if reply is not None and not self._closing:
                self._send_close(reply)
            elif isinstance(step, int):
                self._send(step)
            elif step is None:  # nothing released: wait for the client's next bytes
                readable, _, _ = select.select([self.sock], [], [], 0.5)
                if readable:
                    self._drain()
            else:
                self._sleep(step)

    def _send(self, position: int) -> None:
        frame = self.conversation.frames[position]
        with self.lock:  # (first: the client may read it before `sendall` returns)
            self.conversation.delivered(position)
            self._sent += frame.kind in ("text", "binary")
        self.sock.sendall(frame_bytes(frame.kind, frame.data))
        if position >= self.conversation.drop:  # a `cut` fault: gone, with no close frame
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            raise ConnectionAbortedError("the connection drops here (a cut fault)")
        if frame.kind == "close":
            self._closing = True
            self.sock.shutdown(socket.SHUT_WR)

    def _send_close(self, data: bytes) -> None:
        self.sock.sendall(frame_bytes("close", data))
        self._closing = True
        self.sock.shutdown(socket.SHUT_WR)


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
