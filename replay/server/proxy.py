"""`replay proxy`: recording any client through a local reverse proxy.

`ProxyApp` is an ASGI application, run by uvicorn (the optional extra `replay[serve]`) on
127.0.0.1 only. It forwards each request to a target and streams the answer back as it arrives.
Its upstream client sends through `AsyncRecordingTransport`, the recording shell every async
httpx client records through: the body is read eagerly and stamped there, so a slow client
does not stretch the recorded gaps, and the recording lands on the engine's `Tape`.

The cassette is saved by a thread of its own (`replay.server.saver`), never by a request: at
once when an interaction finishes after a quiet spell, then at most every `save_interval` seconds
while more keep finishing, all of them in one atomic rewrite; at exit (SIGINT, SIGTERM) the streams
still open are ended and everything is saved. A crash loses at most what finished
during the last interval and the save under way.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx

from replay.adapters.record import AsyncRecordingTransport
from replay.clock import Clock, MonotonicClock
from replay.errors import CassetteWriteError, ConfigurationError
from replay.model import Interaction
from replay.redact.redactor import Redactor
from replay.server.asgi import (
    InFlight,
    Log,
    Receive,
    Scope,
    Send,
    cancel_on_disconnect,
    count,
    decoded,
    host_allowed,
    lifespan,
    listen,
    passed_on,
    path_and_query,
    read_body,
    refuse_host,
    require_uvicorn,
    run,
    send_json,
    stderr,
)
from replay.server.guard import REQUEST_TIMEOUT, check_request_timeout
from replay.server.saver import SAVE_INTERVAL, Outbox, Saver
from replay.store.atomic import check_saveable
from replay.store.file import load_interactions

__all__ = ["ProxyApp", "proxy", "upstream_url"]


def _base_url(target: str) -> str:
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
        raise ConfigurationError(
            f"the proxy target must be an http(s) base URL such as https://api.openai.com, "
            f"not {target!r}"
        )
    return target.rstrip("/")


def upstream_url(target: str, request_target: str) -> httpx.URL:
    """The upstream URL of a request: `target`'s scheme, host and port, always; its base path
    followed by the request-target's path and query.

    The request-target is read as a path even when it is not one (`0:8080/x`, or an absolute
    URL): pasted after the target's text, such a string could name another host and port.
    """
    base = httpx.URL(target)
    path, _, query = request_target.partition("?")
    if not path.startswith("/"):
        path = "/" + path
    raw_path = (base.raw_path.decode("ascii").partition("?")[0].rstrip("/") + path).encode()
    if query:
        raw_path += b"?" + query.encode("latin-1")
    return base.copy_with(raw_path=raw_path)


def _summary(interaction: Interaction) -> str:
    request, response = interaction.request, interaction.response
    text = (
        f"{request.method} {request.url}: {response.status}, "
        f"{count(response.chunks, 'chunk')}, {response.duration:.2f} s"
    )
    if interaction.frames is not None:
        text += f", {count(interaction.frames, 'frame')}"
    if response.end.error is not None:
        text += f", ended by {response.end.error}"
    elif response.end.truncated:
        text += ", cut short"
    return text


#: Where an error's text begins quoting what the target sent, as h11's "illegal header
#: line: bytearray(b'...')" does: a header line may hold a credential.
_QUOTED = re.compile(r"""(?::\s*)?(?:bytearray\()?\bb['"]""")


def _reason(error: Exception) -> str:
    """`error`'s text up to any bytes it quotes from the target's answer."""
    text = str(error)
    quoted = _QUOTED.search(text)
    return text if quoted is None else f"{text[: quoted.start()]} (the line is not shown)"


#: The upstream pool's limits: as many connections as there are clients (the default 100
#: would hold the 101st stream back until one of the others ended).
_UNLIMITED = httpx.Limits(max_connections=None, max_keepalive_connections=None)


class ProxyApp:
    """An ASGI reverse proxy to `target` that records every interaction into `out`.

    Responses stream through as they arrive. The recorded requests carry the target's URL,
    so the cassette replays for clients of the real service; secrets are redacted.

    Args:
        target: the upstream base URL; the request's path and query are appended to it.
        out: the cassette file, replaced by this recording (saved in batches, see
            `replay.server.saver`).
        redactor: what to scrub before anything is stored (default: credentials).
        clock: stamps the recorded timeline (default: the real monotonic clock).
        log: receives one line per recorded interaction, failed request or failed save.
        save_interval: the most seconds between two saves while interactions keep
            finishing (0: save whenever the last save is done).
    """

    def __init__(
        self,
        target: str,
        out: Path,
        *,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        log: Log = stderr,
        save_interval: float = SAVE_INTERVAL,
    ) -> None:
        if not 0 <= save_interval <= threading.TIMEOUT_MAX:
            raise ConfigurationError(
                f"the save interval must be 0 or more seconds, not {save_interval}"
            )
        self.target = _base_url(target)
        self.clock = clock or MonotonicClock()
        self.log = log
        self.path = Path(out)
        self._redactor = redactor
        self._saver = Saver(self.path, save_interval, log)
        self.in_flight = InFlight()
        self._transport: AsyncRecordingTransport | None = None
        self._client: httpx.AsyncClient | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """The upstream client, recording all it receives (made at startup, or at first use)."""
        if self._client is None:
            self._transport = AsyncRecordingTransport(
                Outbox(self._saver),
                httpx.AsyncHTTPTransport(limits=_UNLIMITED),
                redactor=self._redactor,
                clock=self.clock,
                on_recorded=self._recorded,
            )
            # No read timeout: a stream may pause for long, and the client has its own.
            timeout = httpx.Timeout(30.0, read=None)
            self._client = httpx.AsyncClient(
                transport=self._transport, timeout=timeout, follow_redirects=False
            )
        return self._client

    def _recorded(self, interaction: Interaction) -> None:
        self.log(f"recorded {_summary(interaction)}")
        if (self._redactor or Redactor()).response_holds_key(interaction.response):
            request = interaction.request  # (redacted: the value is never shown)
            self.log(
                f"warning: the response to {request.method} {request.url} holds a value "
                "shaped like a key, stored as it came (response bodies are not redacted)"
            )

    def close(self) -> None:
        """End the recordings still streaming (as stopped by the session) and save them all."""
        if self._transport is not None:
            self._transport.tape.finish(0.0)
        self._saver.close()

    async def aclose(self) -> None:
        """`close`, and close the upstream client."""
        if self._client is not None:
            await self._client.aclose()
        self.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Forward one ASGI connection scope."""
        if scope["type"] == "lifespan":
            await lifespan(receive, send, lambda: self.client, self.aclose)
            return
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        if not host_allowed(scope, frozenset()):  # a page through DNS rebinding: refused
            await refuse_host(scope, send, self.log)
            return
        body = await read_body(receive)
        if body is None:
            return
        # httpx sets Host and Content-Length for the target; the body is read: no Expect.
        headers = passed_on(decoded(scope["headers"]), ("host", "content-length", "expect"))
        url = upstream_url(self.target, path_and_query(scope))
        outgoing = httpx.Request(scope["method"], url, headers=headers, content=body)
        try:
            upstream = await self.client.send(outgoing, stream=True)
        except httpx.HTTPError as error:
            shown = Redactor().url(str(outgoing.url))  # a query may carry an API key
            message = f"{outgoing.method} {shown}: {type(error).__name__}: {_reason(error)}"
            self.log(f"not forwarded: {message}")
            await send_json(send, 502, {"error": {"type": "replay_proxy", "message": message}})
            return
        try:
            await self._stream(upstream, receive, send)
        finally:  # the client left, or the server is stopping: the recording stops here
            with anyio.CancelScope(shield=True):
                await upstream.aclose()

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Relay a WebSocket upgrade and record it (`replay.server.websocket_proxy`)."""
        from replay.server.websocket_proxy import relay

        if not host_allowed(scope, frozenset()) or (await receive())["type"] != (
            "websocket.connect"
        ):
            await send({"type": "websocket.close", "code": 1008})
            return
        url = str(upstream_url(self.target, path_and_query(scope)))
        _ = self.client  # (made at startup: its transport holds the tape)
        if self._transport is None:
            return
        tape, subprotocols = self._transport.tape, list(scope.get("subprotocols") or [])
        headers = decoded(scope["headers"])
        await relay(
            url, headers, subprotocols, receive, send, tape=tape, clock=self.clock, log=self.log
        )

    async def _stream(self, upstream: httpx.Response, receive: Receive, send: Send) -> None:
        headers = passed_on(decoded(upstream.headers.raw))
        await send(
            {"type": "http.response.start", "status": upstream.status_code, "headers": headers}
        )
        async with anyio.create_task_group() as group:
            with self.in_flight.tracking(group.cancel_scope):
                group.start_soon(cancel_on_disconnect, receive, group.cancel_scope)
                try:
                    async for data in upstream.aiter_raw():
                        body = {"type": "http.response.body", "body": data, "more_body": True}
                        await send(body)
                except httpx.TransportError:
                    pass  # the upstream broke: leave the body unfinished; the client's drops too
                else:
                    await send({"type": "http.response.body", "more_body": False})
                group.cancel_scope.cancel()


def proxy(
    target: str,
    out: Path,
    *,
    port: int = 8080,
    log: Log = stderr,
    save_interval: float = SAVE_INTERVAL,
    request_timeout: float = REQUEST_TIMEOUT,
    overwrite: bool = False,
) -> None:
    """Run a recording reverse proxy to `target` on 127.0.0.1 until SIGINT or SIGTERM.

    Args:
        target: the upstream base URL, e.g. https://api.openai.com.
        out: the cassette to write. An existing one is refused unless `overwrite`: the
            proxy's recording replaces it (once something is recorded), it is never merged.
        port: the port to listen on; 0 picks a free one (the start line tells which).
        log: receives the start line and one line per interaction (default: stderr).
        save_interval: the most seconds a finished interaction waits to be saved while
            others keep finishing (they are saved together); at exit all are saved.
        request_timeout: seconds a client has to send a whole request; then its
            connection is closed (see `replay.server.guard`).
        overwrite: let the recording replace an existing `out`.

    Raises:
        ConfigurationError: a bad target, port or request timeout, or uvicorn is not
            installed.
        CassetteFormatError: `out` exists and is not a cassette (it is left alone).
        CassetteWriteError: `out` exists (without `overwrite`), is read-only or cannot be
            created, or the last save failed.
        OSError: the port is taken.
    """
    require_uvicorn()
    timeout = check_request_timeout(request_timeout)
    out = Path(out)
    if os.path.lexists(out):
        load_interactions(out)  # never overwrite a file that is not a cassette
    check_saveable(out)  # found out now, not at the first save
    if os.path.lexists(out) and not overwrite:
        raise CassetteWriteError(
            out, "it exists, and the proxy's recording replaces it: pass --overwrite to let it"
        )
    app = ProxyApp(target, out, log=log, save_interval=save_interval)
    with listen(port) as sock, _long_lived():
        address = f"http://127.0.0.1:{sock.getsockname()[1]}"
        try:
            run(app, sock, log, f"proxying {address} -> {app.target}, recording to {out}", timeout)
        finally:
            app.close()


@contextlib.contextmanager
def _long_lived() -> Iterator[None]:
    """Leave what exists now (modules, the app) out of the garbage collector's full passes
    while the proxy serves: under load one runs every few seconds, and walking it all held
    every request up for tens of milliseconds. (A process that froze objects itself is left
    as it is.)"""
    if gc.get_freeze_count():
        yield
        return
    gc.collect()  # nothing that is garbage already is kept for good
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
