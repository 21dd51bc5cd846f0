"""The ASGI plumbing `replay serve` and `replay proxy` share, and their uvicorn runner.

Both apps are plain ASGI callables; these helpers read a request, pass headers on without the
hop-by-hop ones, end responses at once when the server stops (`InFlight`), and run an app
under uvicorn on 127.0.0.1 only (the optional extra `replay[serve]`), stopping gracefully on
SIGINT or SIGTERM.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import TYPE_CHECKING

import anyio

from replay.errors import ConfigurationError, install_hint
from replay.server.asgi_base import App, InFlight, Log, Message, Receive, Scope, Send, send_json

if TYPE_CHECKING:
    import uvicorn

__all__ = [
    "App",
    "InFlight",
    "Log",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "cancel_on_disconnect",
    "count",
    "decoded",
    "host_allowed",
    "lifespan",
    "listen",
    "passed_on",
    "path_and_query",
    "read_body",
    "refuse_host",
    "require_uvicorn",
    "run",
    "send_json",
    "stderr",
]

#: Headers that describe one connection, not the message (RFC 9110 7.6.1): never passed on.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)

#: What uvicorn logs when an app leaves a response unfinished: here, a deliberate drop.
_DROPPED = "ASGI callable returned without completing response."

#: Seconds a stopping server waits for a request still arriving before cancelling it.
_GRACE = 1


#: The `Host` names a server on 127.0.0.1 answers to by default.
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def host_allowed(scope: Scope, allowed: frozenset[str]) -> bool:
    """Whether the request's `Host` names this loopback server (or one of `allowed`).

    A web page that reaches 127.0.0.1 through DNS rebinding sends its own domain as `Host`:
    refusing every other name keeps such pages out. A request without `Host` (HTTP/1.0)
    cannot come from a browser and is served.
    """
    value = next((v for k, v in decoded(scope["headers"]) if k.lower() == "host"), None)
    if value is None:
        return True
    host = value.strip().lower()
    host = (
        host[1 : host.index("]")]
        if host.startswith("[") and "]" in host
        else host.rsplit(":", 1)[0]
    )
    return host in _LOOPBACK_NAMES or host in allowed


async def refuse_host(scope: Scope, send: Send, log: Log) -> None:
    """Answer 421 to a request whose `Host` names another server."""
    message = (
        "this replay server answers only for 127.0.0.1, localhost and [::1] "
        "(and the names given with --allow-host)"
    )
    log(f"421: {scope['method']} refused: Host names another server")
    await send_json(send, 421, {"error": {"type": "replay_host", "message": message}})


def stderr(line: str) -> None:
    # One write per line: `print` writes the line and its newline apart, and the lines of
    # threads logging at once would interleave.
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()


def count(items: Sized, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


# -- ASGI plumbing -------------------------------------------------------------------------


def decoded(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers]


def passed_on(
    headers: Iterable[tuple[str, str]], also_drop: Iterable[str] = ()
) -> list[tuple[bytes, bytes]]:
    """`headers` without hop-by-hop ones (including those the Connection header names)."""
    pairs = list(headers)
    named = {
        token.strip().lower()
        for name, value in pairs
        if name.lower() == "connection"
        for token in value.split(",")
    }
    drop = _HOP_BY_HOP | named | set(also_drop)
    return [
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in pairs
        if name.lower() not in drop
    ]


def path_and_query(scope: Scope) -> str:
    # raw_path keeps the percent-escapes as the client sent them; `path` is decoded.
    path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client left before sending it."""
    parts = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


async def cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel `scope` when the client leaves (uvicorn also says so once a response is done)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def lifespan(
    receive: Receive,
    send: Send,
    startup: Callable[[], object] = lambda: None,
    shutdown: Callable[[], Awaitable[None]] | None = None,
) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            startup()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if shutdown is not None:
                await shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return


# -- running -------------------------------------------------------------------------------


def require_uvicorn() -> None:
    try:
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise ConfigurationError(
            f"replay serve and replay proxy need uvicorn: {install_hint('serve')}"
        ) from error


def listen(port: int) -> socket.socket:
    """A TCP socket listening on 127.0.0.1:`port` (0: any free port)."""
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"port must be 0-65535 (0 = any free port), not {port}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
    except OSError as error:
        sock.close()
        raise OSError(error.errno, f"cannot listen on 127.0.0.1:{port}: {error.strerror}") from None
    return sock


def _websocket_protocol() -> str:
    """uvicorn's WebSocket implementation to use: the `websockets` library's (sans-I/O), else
    wsproto's, else none (an upgrade is then answered as a plain request)."""
    import importlib.util

    from uvicorn.config import WS_PROTOCOLS

    if importlib.util.find_spec("websockets") is not None:
        return "websockets-sansio" if "websockets-sansio" in WS_PROTOCOLS else "websockets"
    return "wsproto" if importlib.util.find_spec("wsproto") is not None else "none"


def _not_a_drop_report(record: logging.LogRecord) -> bool:
    return record.getMessage() != _DROPPED


@contextmanager
def _stop_on_signals(server: uvicorn.Server) -> Iterator[None]:
    """Let SIGINT and SIGTERM stop `server` gracefully, and then return normally.

    uvicorn catches both while it serves, then raises the signal again under the handlers it
    found: with the defaults, SIGTERM would kill the process before the proxy's last save.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_signal: int, _frame: object) -> None:
        server.should_exit = True

    previous = {number: signal.signal(number, stop) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run(app: App, sock: socket.socket, log: Log, start_line: str, request_timeout: float) -> None:
    """Serve `app` on `sock` with uvicorn until a signal; log `start_line` once it can stop.

    A request not sent whole within `request_timeout` seconds has its connection closed; an
    error `app` did not expect is one line of `log` (see `replay.server.guard`).
    """
    import uvicorn

    from replay.server.guard import Guarded, timed_protocol

    config = uvicorn.Config(
        Guarded(app, log),
        http=timed_protocol(request_timeout, log),  # h11 (pure Python; httptools is not used)
        ws=_websocket_protocol(),  # WebSocket upgrades: `replay.server.websocket`
        lifespan="on",
        interface="asgi3",
        log_level="warning",
        access_log=False,
        server_header=False,  # the recorded headers go out as recorded, without additions
        date_header=False,
        proxy_headers=False,
        timeout_graceful_shutdown=_GRACE,
    )
    logging.getLogger("uvicorn.error").addFilter(_not_a_drop_report)

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            app.in_flight.stop()  # before uvicorn waits for the responses to finish
            await super().shutdown(sockets)

    server = Server(config)
    with _stop_on_signals(server):
        log(start_line)  # only now: a signal sent on seeing it must stop the server cleanly
        server.run(sockets=[sock])
