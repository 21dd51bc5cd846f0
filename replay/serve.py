"""`replay serve` and `replay proxy`: a cassette over real HTTP, and recording through a proxy.

Both are ASGI applications, run by uvicorn (the optional extra `replay[serve]`) on
127.0.0.1 only, so that any client in any language can use them.

`ReplayApp` answers each request from a cassette. The client talks to 127.0.0.1 while the
recording was made of another origin, so requests match on method, path, query and body
(`SERVE_MATCH_ON`). The recorded status and headers leave at their recorded time, each
chunk at its absolute deadline as its own `http.response.body` message, and then the body
ends as it did live: cleanly; by dropping the connection (the app returns without finishing
the response, and uvicorn closes it); or, for a recorded timeout, by stalling until the
client gives up, as the live client did.

`ProxyApp` forwards each request to a target and streams the answer back as it arrives,
recording it with `replay.record.Recording`, the timing core the recording transports use.
As there, a pump task reads and stamps the upstream chunks and the client is fed from a
queue, so a slow client does not stretch the recorded gaps. The cassette is saved,
atomically, after each interaction (in a worker thread) and once more at exit.
"""

from __future__ import annotations

import json
import logging
import math
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping, Sized
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import attrs
import httpx
from anyio.streams.memory import MemoryObjectSendStream

from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, parse_speed
from replay.errors import ConfigurationError
from replay.model import Cassette, Interaction, Request, Response
from replay.playback import mismatch_error
from replay.record import Recording
from replay.redact import Redactor
from replay.store import load_interactions, save_interactions

if TYPE_CHECKING:
    import uvicorn

__all__ = ["SERVE_MATCH_ON", "ProxyApp", "ReplayApp", "proxy", "serve"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Log = Callable[[str], None]

#: What `replay serve` matches on: not scheme, host and port, which are the server's own.
SERVE_MATCH_ON: tuple[str, ...] = ("method", "path", "query", "body")

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


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _count(items: Sized, noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


# -- ASGI plumbing -------------------------------------------------------------------------


def _decoded(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers]


def _passed_on(
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


def _path_and_query(scope: Scope) -> str:
    # raw_path keeps the percent-escapes as the client sent them; `path` is decoded.
    path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client left before sending it."""
    parts = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    """Cancel `scope` when the client leaves (uvicorn also says so once a response is done)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _send_json(send: Send, status: int, document: object) -> None:
    body = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _lifespan(
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


class _InFlight:
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


# -- serve -----------------------------------------------------------------------------------


def _replayed_headers(response: Response) -> list[tuple[bytes, bytes]]:
    """The recorded headers to send again: no hop-by-hop ones, and a Content-Length only
    when it states exactly the recorded body of a response that ended cleanly."""
    length = response.header("content-length")
    whole = response.end.is_clean and not response.end.truncated
    if whole and length is not None and length.strip() == str(len(response.body)):
        return _passed_on(response.headers)
    return _passed_on(response.headers, also_drop=("content-length",))


def _without_hint(message: str) -> str:
    # The mismatch error ends with advice about record modes, which a server has none of.
    return "\n".join(line for line in message.splitlines() if not line.startswith("To record it"))


class ReplayApp:
    """An ASGI application answering each request from a cassette, at its recorded pace.

    Args:
        cassette: the interactions to serve, e.g. `Cassette.load(path, match_on=SERVE_MATCH_ON)`.
        speed: 1 = as recorded, 10 = ten times faster, "instant" = no waiting.
        redactor: applied to each request before matching, as it was before recording.
        clock: the clock to wait on (default: the real monotonic clock).
        log: receives one line per request.
    """

    def __init__(
        self,
        cassette: Cassette,
        *,
        speed: SpeedLike = 1.0,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        log: Log = _stderr,
    ) -> None:
        self.cassette = cassette
        self.speed = parse_speed(speed)
        self.redactor = redactor or Redactor()
        self.clock = clock or MonotonicClock()
        self.log = log
        self.in_flight = _InFlight()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI connection scope."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        # The recorded times count from the moment the request was sent.
        schedule = None if math.isinf(self.speed) else Schedule(self.clock.now(), self.speed)
        body = await _read_body(receive)
        if body is None:
            return
        host, port = scope.get("server") or ("127.0.0.1", 0)
        wanted = self.redactor.request(
            Request(
                method=scope["method"],
                url=f"http://{host}:{port}{_path_and_query(scope)}",
                headers=_decoded(scope["headers"]),
                body=body,
            )
        )
        index = self.cassette.find(wanted)
        if index is None:
            message = _without_hint(str(mismatch_error(self.cassette, wanted, "none")))
            self.log("404: " + message.replace("\n", "\n  "))
            error = {"type": "replay_mismatch", "message": message}
            await _send_json(send, 404, {"error": error})
            return
        response = self.cassette.interactions[index].response
        self.log(
            f"{wanted.method} {_path_and_query(scope)}: interaction {index}, "
            f"{response.status}, {_count(response.chunks, 'chunk')}"
        )
        async with anyio.create_task_group() as group:
            with self.in_flight.tracking(group.cancel_scope):
                group.start_soon(_cancel_on_disconnect, receive, group.cancel_scope)
                await self._play(response, schedule, send)
                group.cancel_scope.cancel()

    async def _play(self, response: Response, schedule: Schedule | None, send: Send) -> None:
        await self._until(schedule, response.headers_at)
        headers = _replayed_headers(response)
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        for chunk in response.chunks:
            await self._until(schedule, chunk.at)
            await send({"type": "http.response.body", "body": chunk.data, "more_body": True})
        await self._until(schedule, response.end.at)
        error = response.end.error
        if error is None:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        elif error.endswith("Timeout"):
            await anyio.sleep_forever()  # the live client gave up waiting; so will this one
        # Any other error: leave the body unfinished, so that uvicorn drops the connection.

    async def _until(self, schedule: Schedule | None, at: float) -> None:
        if schedule is not None:
            delay = schedule.delay(at, self.clock.now())
            if delay > 0:
                await self.clock.asleep(delay)


# -- proxy -----------------------------------------------------------------------------------


def _base_url(target: str) -> str:
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise ConfigurationError(
            f"the proxy target must be an http(s) base URL such as https://api.openai.com, "
            f"not {target!r}"
        )
    return target.rstrip("/")


def _summary(interaction: Interaction) -> str:
    request, response = interaction.request, interaction.response
    text = (
        f"{request.method} {request.url}: {response.status}, "
        f"{_count(response.chunks, 'chunk')}, {response.duration:.2f} s"
    )
    if response.end.error is not None:
        text += f", ended by {response.end.error}"
    elif response.end.truncated:
        text += ", cut short"
    return text


class _Keeper:
    """The proxy's recording: redacted interactions in order, saved atomically on demand."""

    def __init__(self, path: Path, redactor: Redactor, log: Log) -> None:
        self.path = path
        self.redactor = redactor
        self.log = log
        self.interactions: list[Interaction] = []
        self._lock = threading.Lock()
        self._saved: int | None = None  # how many interactions the file holds, once written

    def sink(self, interaction: Interaction) -> None:
        """Take a finished interaction (a `Recording` sink)."""
        cleaned = self.redactor.interaction(interaction)
        self.interactions.append(cleaned)
        self.log(f"recorded {_summary(cleaned)}")

    def save(self) -> None:
        """Write the cassette if anything is new; thread-safe. An existing cassette is
        replaced only once something was recorded."""
        with self._lock:
            snapshot = list(self.interactions)
            if self._saved == len(snapshot) or (not snapshot and self.path.exists()):
                return
            save_interactions(self.path, snapshot)
            self._saved = len(snapshot)


@attrs.frozen
class _End:
    error: Exception | None


async def _pump(
    upstream: httpx.Response,
    recording: Recording,
    sender: MemoryObjectSendStream[bytes | _End],
) -> None:
    """Read the upstream body as it arrives, stamping each chunk; then tell how it ended."""
    async with sender:
        error: Exception | None = None
        try:
            async for data in upstream.aiter_raw():
                recording.got_chunk(data)
                sender.send_nowait(data)
        except httpx.TransportError as caught:  # the stream's end, recorded and passed on
            error = caught
        recording.finish(error=error)
        sender.send_nowait(_End(error))


class ProxyApp:
    """An ASGI reverse proxy to `target` that records every interaction into `out`.

    Responses stream through as they arrive. The recorded requests carry the target's URL,
    so the cassette replays for clients of the real service; secrets are redacted.

    Args:
        target: the upstream base URL; the request's path and query are appended to it.
        out: the cassette file, replaced by this recording (saved after each interaction).
        redactor: what to scrub before anything is stored (default: credentials).
        clock: stamps the recorded timeline (default: the real monotonic clock).
        log: receives one line per recorded interaction or failed request.
    """

    def __init__(
        self,
        target: str,
        out: Path,
        *,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        log: Log = _stderr,
    ) -> None:
        self.target = _base_url(target)
        self.clock = clock or MonotonicClock()
        self.log = log
        self.keeper = _Keeper(Path(out), redactor or Redactor(), log)
        self.pending: set[Recording] = set()
        self.in_flight = _InFlight()
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """The upstream client (made at startup, or at first use)."""
        if self._client is None:
            # No read timeout: a stream may pause for long, and the client has its own.
            timeout = httpx.Timeout(30.0, read=None)
            self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        return self._client

    def close(self) -> None:
        """End the recordings still streaming (as cut short) and save the cassette."""
        for recording in list(self.pending):
            recording.finish(truncated=True)
        self.keeper.save()

    async def aclose(self) -> None:
        """`close`, and close the upstream client."""
        if self._client is not None:
            await self._client.aclose()
        self.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Forward one ASGI connection scope."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send, lambda: self.client, self.aclose)
            return
        if scope["type"] != "http":
            return
        start = self.clock.now()
        body = await _read_body(receive)
        if body is None:
            return
        # httpx sets Host and Content-Length for the target; the body is read: no Expect.
        headers = _passed_on(_decoded(scope["headers"]), ("host", "content-length", "expect"))
        url = self.target + _path_and_query(scope)
        outgoing = httpx.Request(scope["method"], url, headers=headers, content=body)
        try:
            upstream = await self.client.send(outgoing, stream=True)
        except httpx.HTTPError as error:
            message = f"{outgoing.method} {outgoing.url}: {type(error).__name__}: {error}"
            self.log(f"not forwarded: {message}")
            await _send_json(send, 502, {"error": {"type": "replay_proxy", "message": message}})
            return
        recording = Recording(
            Request.from_httpx(outgoing), self.clock, start, self.keeper.sink, self.pending
        )
        recording.got_headers(upstream)
        try:
            await self._stream(upstream, recording, receive, send)
        finally:
            recording.finish(truncated=True)  # the client left, or the server is stopping
            with anyio.CancelScope(shield=True):
                await upstream.aclose()
        try:
            await anyio.to_thread.run_sync(self.keeper.save)
        except OSError as error:  # the recording stays in memory: the next save may work
            self.log(f"cannot save {self.keeper.path}: {error}")

    async def _stream(
        self, upstream: httpx.Response, recording: Recording, receive: Receive, send: Send
    ) -> None:
        headers = _passed_on(_decoded(upstream.headers.raw))
        await send(
            {"type": "http.response.start", "status": upstream.status_code, "headers": headers}
        )
        sender, receiver = anyio.create_memory_object_stream[bytes | _End](math.inf)
        async with anyio.create_task_group() as group, receiver:
            with self.in_flight.tracking(group.cancel_scope):
                group.start_soon(_cancel_on_disconnect, receive, group.cancel_scope)
                group.start_soon(_pump, upstream, recording, sender)
                async for item in receiver:
                    if isinstance(item, bytes):
                        body = {"type": "http.response.body", "body": item, "more_body": True}
                        await send(body)
                    elif item.error is None:
                        await send({"type": "http.response.body", "more_body": False})
                    # else the upstream broke: leave the body unfinished; the client's drops too.
                group.cancel_scope.cancel()


# -- running -------------------------------------------------------------------------------


def _require_uvicorn() -> None:
    try:
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise ConfigurationError(
            "replay serve and replay proxy need uvicorn: pip install 'replay[serve]'"
        ) from error


def _listen(port: int) -> socket.socket:
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


def _run(app: ReplayApp | ProxyApp, sock: socket.socket, log: Log, start_line: str) -> None:
    """Serve `app` on `sock` with uvicorn until a signal; log `start_line` once it can stop."""
    import uvicorn

    config = uvicorn.Config(
        app,
        http="h11",
        ws="none",
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


def serve(
    cassette_path: Path,
    *,
    port: int = 8080,
    speed: SpeedLike = 1.0,
    repeat: bool = False,
    log: Log = _stderr,
) -> None:
    """Serve a cassette over HTTP on 127.0.0.1 until SIGINT or SIGTERM.

    Args:
        cassette_path: the cassette to answer from.
        port: the port to listen on; 0 picks a free one (the start line tells which).
        speed: 1 = as recorded, 10 = ten times faster, "instant" = no waiting.
        repeat: let an interaction answer more than once.
        log: receives the start line and one line per request (default: stderr).

    Raises:
        ConfigurationError: a bad speed or port, or uvicorn is not installed.
        CassetteFormatError, OSError: the cassette cannot be read, or the port is taken.
    """
    _require_uvicorn()
    factor = parse_speed(speed)
    cassette = Cassette.load(cassette_path, match_on=SERVE_MATCH_ON, allow_playback_repeats=repeat)
    app = ReplayApp(cassette, speed=factor, log=log)
    with _listen(port) as sock:
        _run(app, sock, log, f"serving {cassette_path} on http://127.0.0.1:{sock.getsockname()[1]}")


def proxy(target: str, out: Path, *, port: int = 8080, log: Log = _stderr) -> None:
    """Run a recording reverse proxy to `target` on 127.0.0.1 until SIGINT or SIGTERM.

    Args:
        target: the upstream base URL, e.g. https://api.openai.com.
        out: the cassette to write; an existing one is replaced once something is recorded.
        port: the port to listen on; 0 picks a free one (the start line tells which).
        log: receives the start line and one line per interaction (default: stderr).

    Raises:
        ConfigurationError: a bad target or port, or uvicorn is not installed.
        CassetteFormatError: `out` exists and is not a cassette (it is left alone).
        OSError: the port is taken.
    """
    _require_uvicorn()
    out = Path(out)
    if out.exists():
        load_interactions(out)  # never overwrite a file that is not a cassette
    app = ProxyApp(target, out, log=log)
    with _listen(port) as sock:
        address = f"http://127.0.0.1:{sock.getsockname()[1]}"
        try:
            _run(app, sock, log, f"proxying {address} -> {app.target}, recording to {out}")
        finally:
            app.close()
