"""The ASGI vocabulary `replay serve`, `replay proxy` and their guard share: the message
and app types, the responses in flight a stopping server ends, and a JSON answer.

Kept below both `replay.server.asgi` (the plumbing and the uvicorn runner) and `replay.server.guard`
(what a hostile client costs), which the runner wraps each app in; importing it costs no
more than the CLI's help may pay (anyio is needed only by what runs a server).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import anyio

__all__ = ["App", "InFlight", "Log", "Message", "Receive", "Scope", "Send", "send_json"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Log = Callable[[str], None]


async def send_json(send: Send, status: int, document: object) -> None:
    """Answer with `status` and `document` as a JSON body."""
    body = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class InFlight:
    """The responses being sent, each a cancel scope, so that a stopping server can end them
    at once (their clients see the connection drop) instead of waiting for endless streams."""

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()

    @contextmanager
    def tracking(self, scope: anyio.CancelScope) -> Iterator[None]:
        self._scopes.add(scope)
        try:
            yield
        finally:
            self._scopes.discard(scope)

    def stop(self) -> None:
        for scope in list(self._scopes):
            scope.cancel()


class App(Protocol):
    """What `run` serves: an ASGI application whose responses in flight can be ended."""

    in_flight: InFlight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...
