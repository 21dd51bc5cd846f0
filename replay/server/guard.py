"""What a hostile client or recording costs `replay serve` and `replay proxy`: a closed
connection and one log line, never a held socket or a traceback.

- A request must arrive whole (its line, headers and body) within `REQUEST_TIMEOUT` seconds
  of its connection opening, or, on a kept-alive connection, of its first byte; else the
  connection is closed, with a 408 when nothing was answered yet. uvicorn has no such bound:
  its keep-alive timeout only runs between requests, and each byte received stops it, so a
  client sending a header byte a second (slowloris) held a connection for ever. ASGI cannot
  help: an app is called once the headers are in. So the bound lives in the protocol:
  `timed_protocol` is uvicorn's h11 protocol with a timer, handed to uvicorn through its
  public `Config(http=<protocol class>)`; it reads the request's progress from h11's own
  state (`their_state`), and changes nothing of uvicorn's.
- `Guarded` answers an error an app did not expect with a 500 (or, once the answer has begun,
  by dropping the connection) and one log line, in place of uvicorn's traceback.
"""

from __future__ import annotations

import json
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from replay.errors import ConfigurationError, ReplayError
from replay.server.asgi_base import send_json

if TYPE_CHECKING:
    import asyncio

    from replay.server.asgi_base import App, Log, Message, Receive, Scope, Send

# (The CLI reads `REQUEST_TIMEOUT` for its help: asyncio, anyio and uvicorn are imported
# where they are used, once a server starts.)

__all__ = ["REQUEST_TIMEOUT", "Guarded", "check_request_timeout", "timed_protocol", "unexpected"]

#: Seconds a client has to send a whole request: from connecting for the first, from its
#: first byte for a later one on the same connection. Clients on 127.0.0.1 send theirs in
#: milliseconds; a person typing one into `nc` may want `--request-timeout`.
REQUEST_TIMEOUT = 5.0


def check_request_timeout(seconds: float) -> float:
    """`seconds`, checked as a request timeout.

    Raises:
        ConfigurationError: not a number of seconds above 0 (and within what a timer takes).
    """
    if not 0 < seconds <= threading.TIMEOUT_MAX:
        raise ConfigurationError(f"the request timeout must be more than 0 seconds, not {seconds}")
    return float(seconds)


def _timed_out_answer(timeout: float) -> bytes:
    message = f"the request was not sent whole within {timeout:g} s (--request-timeout)"
    body = json.dumps({"error": {"type": "replay_timeout", "message": message}}).encode()
    head = (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body)
    )
    return head + body


def timed_protocol(timeout: float, log: Log) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request is not all in within
    `timeout` seconds (see the module's docstring); one line goes to `log` when a request
    had begun."""
    import asyncio

    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    answer = _timed_out_answer(timeout)
    arriving = (h11.IDLE, h11.SEND_BODY)  # the request's line, headers or body still due
    unanswered = (h11.IDLE, h11.SEND_RESPONSE)

    class TimedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _transport: asyncio.Transport | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._transport = transport  # type: ignore[assignment]
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            upgraded = self.transport.get_protocol() is not self  # a WebSocket's now
            if self.conn.their_state in arriving and not upgraded:
                self._arm()  # (if not armed yet: the bound counts from the request's start)
            else:
                self._disarm()  # all in (or refused): what follows is the answer's time

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is None:
                loop = asyncio.get_running_loop()
                self._deadline = loop.call_later(timeout, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            transport = self._transport
            if transport is None or transport.is_closing():
                return
            if self.conn.their_state is h11.SEND_BODY or self.conn.trailing_data[0]:
                log(f"408: a request was not sent whole within {timeout:g} s: connection closed")
                if self.conn.our_state in unanswered:
                    transport.write(answer)
            transport.close()  # (a connection that sent nothing goes silently, as when idle)

    return TimedH11Protocol


def unexpected(error: BaseException) -> str:
    """One line on an error nothing expected: a replay error says what is wrong; any other
    is named by its type and place only, since its message may quote a header or a body."""
    error = _innermost(error)
    if isinstance(error, ReplayError):
        return f"{type(error).__name__}: {error}"
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(error).__name__}{where}"


def _innermost(error: BaseException) -> BaseException:
    """The first error a task group's exception group holds (nested ones too), else `error`.
    (`ExceptionGroup` is read by its `exceptions`: Python 3.10 has it from a backport.)"""
    inner = getattr(error, "exceptions", None)
    while isinstance(inner, tuple) and inner and isinstance(inner[0], BaseException):
        error = inner[0]
        inner = getattr(error, "exceptions", None)
    return error


class Guarded:
    """`app`, answering an error it raises with one log line and a 500 (or, when the answer
    had begun, a dropped connection) instead of uvicorn's traceback."""

    def __init__(self, app: App, log: Log) -> None:
        self.app = app
        self.log = log
        self.in_flight = app.in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run `app` on one ASGI connection scope."""
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"  # even if it fails
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as error:
            if scope["type"] != "http":
                raise
            # The path as sent, escapes kept: decoded, a %0A would begin a line of its own.
            path = (scope.get("raw_path") or b"").decode("latin-1")
            line = f"{scope['method']} {path}: internal error: {unexpected(error)}"
            self.log(f"500: {line}")
            if not started:
                await send_json(send, 500, {"error": {"type": "replay_internal", "message": line}})
