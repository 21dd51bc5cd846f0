"""A loopback WebSocket origin speaking a Realtime-like protocol, with real delays.

    from replay.testing.realtime import RealtimeOrigin

    with RealtimeOrigin() as origin:
        ...  # a client connecting to origin.url gets `session.created` at once; then each
             # `session.update` → `session.updated`; each `response.create` → `response.created`,
             # `response.output_text.delta` events (one per word of the answer, `delay` apart),
             # `response.done`

The answer to a `response.create` is `answer(instructions)`: its `response.instructions`
echoed back as "You said: …", so two different requests get two different answers. Every
server event has a fresh `event_id`. `connections` counts the upgrades it accepted;
`headers` holds the upgrade requests' headers. Needs the `websockets` library (14+).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from types import TracebackType
from typing import Any

__all__ = ["DELTA_DELAY", "RealtimeOrigin", "answer"]

#: Seconds between two `response.output_text.delta` events (and before the first).
DELTA_DELAY = 0.06


def answer(instructions: str) -> list[str]:
    """The deltas the origin streams for `instructions`."""
    return [f"{word} " for word in f"You said: {instructions}".split()]


class RealtimeOrigin:
    """The origin, served from a thread of its own while the block runs.

    Args:
        delay: seconds between deltas.
        close_after: close the connection with code 1000 after this many responses (None:
            never; the client closes).
        compression: "deflate" to offer permessage-deflate (None: frames go uncompressed).
        require_key: refuse an upgrade without an Authorization header (401).
    """

    def __init__(
        self,
        delay: float = DELTA_DELAY,
        close_after: int | None = None,
        compression: str | None = None,
        require_key: bool = False,
    ) -> None:
        self.require_key = require_key
        self.delay = delay
        self.close_after = close_after
        self.compression = compression
        self.connections = 0
        self.headers: list[dict[str, str]] = []
        self.received: list[Any] = []
        self.url = ""
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Future[None] | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="realtime-origin", daemon=True)

    def __enter__(self) -> RealtimeOrigin:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the realtime origin did not start")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            loop.call_soon_threadsafe(_finish, stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        from websockets.asyncio.server import serve

        self._loop = asyncio.get_running_loop()
        self._stop = self._loop.create_future()
        async with serve(
            self._handle,
            "127.0.0.1",
            0,
            compression=self.compression,
            process_request=self._refused,
        ) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            self.url = f"ws://127.0.0.1:{port}/v1/realtime?model=gpt-realtime"
            self._ready.set()
            await self._stop

    def _refused(self, connection: Any, request: Any) -> Any:
        if self.require_key and "Authorization" not in request.headers:
            return connection.respond(401, "no key\n")
        return None

    def _event(self, kind: str, **fields: Any) -> str:
        return json.dumps({"type": kind, "event_id": f"event_{next(self._ids)}", **fields})

    async def _handle(self, websocket: Any) -> None:
        self.connections += 1
        self.headers.append(dict(websocket.request.headers.raw_items()))
        await websocket.send(self._event("session.created", session={"id": "sess_1"}))
        answered = 0
        async for message in websocket:
            event = json.loads(message)
            self.received.append(event)
            if event.get("type") == "session.update":
                await websocket.send(self._event("session.updated", session=event["session"]))
            elif event.get("type") == "response.create":
                answered += 1
                await self._respond(websocket, event, answered)
                if self.close_after is not None and answered >= self.close_after:
                    await websocket.close(1000, "done")
                    return

    async def _respond(self, websocket: Any, event: dict[str, Any], number: int) -> None:
        response_id = f"resp_{number}"
        instructions = str(event.get("response", {}).get("instructions", ""))
        await websocket.send(self._event("response.created", response={"id": response_id}))
        for delta in answer(instructions):
            await asyncio.sleep(self.delay)
            await websocket.send(
                self._event("response.output_text.delta", response_id=response_id, delta=delta)
            )
        await websocket.send(
            self._event("response.done", response={"id": response_id, "status": "completed"})
        )


def _finish(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
