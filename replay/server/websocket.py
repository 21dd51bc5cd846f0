"""`replay serve` answering a WebSocket upgrade: a recorded conversation over ASGI.

uvicorn (with the `websockets` library, or `wsproto`) makes the handshake, the framing, the
pings and the closing handshake; this plays the engine's `Conversation`
(`replay.engine.conversation`, the one the client shells replay through their peer): the
upgrade request is matched as an HTTP request is (`Player.take`), its recorded answer given
(a 101 with its recorded headers, or, for a refused upgrade, its status and body); then each
client message is matched as it comes (a message the recording never saw closes the
connection with 1008 and one log line naming the nearest recorded frame), and each server
frame is sent when due: the recorded gap after the client frame that released it, scaled by
the speed. The server's recorded close closes with its code and reason.

What ASGI cannot say is said as near as it can: a recorded ping or pong of the server is
skipped (uvicorn answers pings itself), and a `cut` fault (a connection dropped with no close)
closes with 1011.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable

import anyio
import anyio.abc

from replay.clock import Clock
from replay.engine import Played, Player
from replay.engine.conversation import ALLOWED_LEFTOVERS, Conversation
from replay.engine.frame_faults import targeted
from replay.errors import FrameMismatchError
from replay.model import Request
from replay.redact.redactor import Redactor
from replay.server.asgi import Log, Receive, Send, passed_on

__all__ = ["converse", "refuse"]

#: Recorded headers of the answer to an upgrade that the ASGI server makes itself.
_MADE_HERE = ("sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-protocol")
#: The close code of a connection that a `cut` fault drops (ASGI cannot drop one bare).
_CUT_CODE = 1011


async def refuse(send: Send, status: int, body: bytes, headers: Iterable[tuple[str, str]]) -> None:
    """Answer an upgrade with an HTTP response (`status`, `body`): the recorded refusal."""
    head = passed_on(headers, also_drop=("content-length",))
    await send({"type": "websocket.http.response.start", "status": status, "headers": head})
    await send({"type": "websocket.http.response.body", "body": body, "more_body": False})


class _Wake:
    """What the sender waits on: set when the client's message released frames."""

    def __init__(self) -> None:
        self.event = anyio.Event()

    def set(self) -> None:
        self.event.set()
        self.event = anyio.Event()


async def converse(
    played: Played,
    player: Player,
    request: Request,
    receive: Receive,
    send: Send,
    *,
    speed: float,
    clock: Clock,
    log: Log,
) -> Conversation:
    """Accept the upgrade as recorded and play the conversation `played` (of `player`'s
    cassette, with its faults) until either side closes; the conversation, for what it left
    (see the module's docstring)."""
    response, redactor = played.response, player.redactor
    recorded = player.cassette.interactions[played.index].frames or ()
    frames, drop = targeted(recorded, player.faults, played.index, request)
    conversation = Conversation(
        frames,
        speed=speed,
        start=clock.now(),
        url=redactor.url(request.url),
        cassette_path=player.cassette.path,
        drop=drop,
        allowed=ALLOWED_LEFTOVERS,
    )
    protocol = response.header("sec-websocket-protocol")
    accept = {"type": "websocket.accept", "headers": passed_on(response.headers, _MADE_HERE)}
    await send({**accept, **({"subprotocol": protocol} if protocol else {})})
    wake = _Wake()
    listening = _Listener(conversation, receive, clock, redactor, wake)
    code: tuple[int, str] | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(listening.listen, group)
        code = await _speak(conversation, send, clock, wake)
        group.cancel_scope.cancel()
    if listening.failure is not None:
        log("WebSocket: " + listening.failure.replace("\n", "\n  "))
        await _close(send, 1008, "replay: no recorded frame matches this message")
    elif code is not None:
        await _close(send, *code)
    return conversation


class _Listener:
    """The client's side: each message matched as it comes; the first mismatch kept."""

    def __init__(
        self,
        conversation: Conversation,
        receive: Receive,
        clock: Clock,
        redactor: Redactor,
        wake: _Wake,
    ) -> None:
        self.conversation, self.receive, self.clock = conversation, receive, clock
        self.redactor, self.wake = redactor, wake
        self.failure: str | None = None

    async def listen(self, group: anyio.abc.TaskGroup) -> None:
        """Until the client leaves or sends what the recording never saw; then end `group`."""
        while True:
            message = await self.receive()
            if message["type"] == "websocket.disconnect":
                self.conversation.closed = True
                break
            text, data = message.get("text"), message.get("bytes")
            kind, payload = ("text", text.encode()) if text is not None else ("binary", data or b"")
            if kind == "text":
                payload = self.redactor.frame(payload)  # as it was stored
            try:
                self.conversation.sent(kind, payload, self.clock.now())
            except FrameMismatchError as mismatch:
                self.failure = str(mismatch)
                break
            self.wake.set()
        group.cancel_scope.cancel()


async def _speak(
    conversation: Conversation, send: Send, clock: Clock, wake: _Wake
) -> tuple[int, str] | None:
    """Send the server frames as they fall due; the close to end with (None: the client
    left, or the recording has no close of the server's)."""
    while not conversation.closed:
        step = conversation.next(clock.now())
        if isinstance(step, int):
            frame = conversation.frames[step]
            conversation.delivered(step)
            conversation.read()  # (the client's code is not ours to watch)
            if step >= conversation.drop:
                await _send(send, frame.kind, frame.data)
                return (_CUT_CODE, "")
            if frame.kind == "close":
                return (frame.code or 1000, frame.reason)
            await _send(send, frame.kind, frame.data)
            continue
        event = wake.event
        with anyio.move_on_after(math.inf if step is None else step):
            await event.wait()
    return None


async def _send(send: Send, kind: str, data: bytes) -> None:
    if kind == "text":
        await send({"type": "websocket.send", "text": data.decode("utf-8", "replace")})
    elif kind == "binary":
        await send({"type": "websocket.send", "bytes": data})
    # (a ping or pong: uvicorn keeps the connection alive itself)


async def _close(send: Send, code: int, reason: str) -> None:
    with contextlib.suppress(OSError, RuntimeError):  # (the client may have gone already)
        await send({"type": "websocket.close", "code": code, "reason": reason})
