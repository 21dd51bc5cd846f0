"""`replay proxy` recording a WebSocket upgrade: the conversation relayed and recorded.

The proxy opens the same upgrade upstream with the `websockets` library's asyncio client
(the target's scheme made `ws` or `wss`; the client's headers passed on but for those of the
connection and of the handshake, which the library makes itself), and records that connection
as the library shell records any (`replay.adapters.websockets_record.watch`: the upgrade
request as sent, the answer, each frame both ways with its time, the end) onto the proxy's
tape: redacted as every recording is, saved as its HTTP interactions are. Then it relays: each
message of the client upstream, each of the target back, and the close of either side to the
other with its code. An upgrade the target refuses is answered with its status and body.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import anyio.abc

from replay.clock import Clock
from replay.engine.recorder import Tape
from replay.model import Request
from replay.server.asgi import Log, Receive, Send, passed_on
from replay.server.websocket import refuse

__all__ = ["relay"]

#: Request headers the upstream client makes itself (or that name this hop only).
_MADE_THERE = (
    "host",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "sec-websocket-protocol",
    "content-length",
)


def _ws_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return ("wss" if scheme == "https" else "ws") + "://" + rest


async def relay(
    url: str,
    headers: list[tuple[str, str]],
    subprotocols: list[str],
    receive: Receive,
    send: Send,
    *,
    tape: Tape,
    clock: Clock,
    log: Log,
) -> None:
    """Open `url`'s upgrade upstream, recorded onto `tape`, and relay it (see the module's
    docstring)."""
    from websockets.asyncio.client import ClientConnection, connect
    from websockets.exceptions import InvalidStatus

    from replay.adapters.websockets_record import watch

    uri = _ws_url(url)
    passed = [(k.decode(), v.decode()) for k, v in passed_on(headers, _MADE_THERE)]
    recording = tape.start(Request(method="GET", url=uri, headers=passed), clock, clock.now())

    class Recorded(ClientConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            watch(self, recording, uri)

    try:
        upstream = await connect(
            uri,
            additional_headers=passed,
            subprotocols=subprotocols or None,  # type: ignore[arg-type]
            create_connection=Recorded,
            user_agent_header=None,
            max_size=None,
        )
    except InvalidStatus as refused:
        answer = refused.response
        log(f"recorded GET {tape.redactor.url(uri)}: refused upstream with {answer.status_code}")
        await refuse(send, answer.status_code, bytes(answer.body), answer.headers.raw_items())
        return
    except (OSError, TimeoutError, ValueError) as error:
        recording.finish(error=error)
        log(f"not forwarded: GET {tape.redactor.url(uri)}: {type(error).__name__}")
        await send({"type": "websocket.close", "code": 1011})
        return
    await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
    async with upstream, anyio.create_task_group() as group:
        group.start_soon(_downstream, upstream, send, group)
        await _upstream(upstream, receive)
        group.cancel_scope.cancel()


async def _upstream(upstream: Any, receive: Receive) -> None:
    """Each message of the client, sent upstream; its close, passed on."""
    from websockets.exceptions import ConnectionClosed

    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            with contextlib.suppress(ConnectionClosed):
                await upstream.close(message.get("code", 1000), message.get("reason") or "")
            return
        text, data = message.get("text"), message.get("bytes")
        try:
            await upstream.send(text if text is not None else data or b"")
        except ConnectionClosed:
            return


async def _downstream(upstream: Any, send: Send, group: anyio.abc.TaskGroup) -> None:
    """Each message of the target, sent to the client; its close, passed on."""
    from websockets.exceptions import ConnectionClosed

    with contextlib.suppress(ConnectionClosed):
        async for message in upstream:
            key = "text" if isinstance(message, str) else "bytes"
            await send({"type": "websocket.send", key: message})
    code = upstream.close_code or 1000
    with contextlib.suppress(OSError, RuntimeError):
        await send({"type": "websocket.close", "code": code, "reason": upstream.close_reason or ""})
    group.cancel_scope.cancel()
