"""`replay serve`: a cassette over real HTTP, at its recorded pace.

`ReplayApp` is an ASGI application, run by uvicorn (the optional extra `replay[serve]`) on
127.0.0.1 only, so that any client in any language can use it. It answers each request from a
cassette. The client talks to 127.0.0.1 while the recording was made of another origin, so
requests match on method, path, query and body (`SERVE_MATCH_ON`). The recorded status and
headers leave at their recorded time, each chunk at its absolute deadline as its own
`http.response.body` message, and then the body ends as it did live (`replay.engine.ends`
says what a recorded end means): cleanly; for a cut, by dropping the connection (the app
returns without finishing the response, and uvicorn closes it); for a timeout, by stalling
until the client gives up, as the live client did. It is a shell over the engine: the
`Player` finds the answer and applies the faults (`--fault`), the `Stepper` says what is due
when; a stall fault is a silence the client's own read timeout measures.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

import anyio

from replay.adapters.network import host_names
from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, factor_of, speed_of
from replay.engine import (
    Data,
    End,
    EndKind,
    Head,
    Played,
    Player,
    Stepper,
    end_kind,
    error_kind,
    step_async,
)
from replay.errors import ALREADY_PLAYED, CassetteMismatchError
from replay.faults import FaultLike, coerce
from replay.model import Request, Response
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
from replay.store.cassette import Cassette

__all__ = ["SERVE_MATCH_ON", "ReplayApp", "serve"]

#: What `replay serve` matches on: not scheme, host and port, which are the server's own.
SERVE_MATCH_ON: tuple[str, ...] = ("method", "path", "query", "body", "last_event_id")


#: A header name HTTP/1.1 can carry (RFC 9110 5.1: a token).
_NAME = re.compile(r"[-!#$%&'*+.^_`|~0-9A-Za-z]+")
#: A header value it can carry once trimmed (RFC 9110 5.5): visible or latin-1 characters,
#: spaces and tabs between them; never CR or LF, which would end it (and could begin a
#: header, or a response, of the recording's choosing), nor another control character.
_VALUE = re.compile(r"(?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?")
#: What `_VALUE` trims off a recorded value first: spaces around it are not part of it.
_SPACES = " \t"


def _unservable(response: Response) -> str | None:
    """What in `response`'s head HTTP/1.1 cannot carry, or None: a recording made by a client
    is always servable, but a file may say anything. (Values are never quoted: a header
    value may be a credential.)"""
    if response.status < 200:
        return f"its recorded status {response.status} is interim (1xx): it ends no response"
    for name, value in response.headers:
        if not _NAME.fullmatch(name):
            return f"its recorded header name {_shown(name)} is not a valid HTTP header name"
        if not _VALUE.fullmatch(value.strip(_SPACES)):
            return (
                f"its recorded header {_shown(name)} has a value holding CR, LF or another "
                "control character, which HTTP cannot carry"
            )
    return None


def _shown(name: str, limit: int = 40) -> str:
    return repr(name if len(name) <= limit else name[:limit] + "…")


def _replayed_headers(response: Response) -> list[tuple[bytes, bytes]]:
    """The recorded headers to send again, trimmed (`_unservable` passed them): no
    hop-by-hop ones, and a Content-Length only when each one states exactly the recorded
    body of a response that ended cleanly."""
    headers = [(name, value.strip(_SPACES)) for name, value in response.headers]
    lengths = {value for name, value in headers if name.lower() == "content-length"}
    whole = end_kind(response.end) is EndKind.CLEAN
    if whole and lengths == {str(len(response.body))}:
        return passed_on(headers)
    return passed_on(headers, also_drop=("content-length",))


def _bodiless(method: str, status: int) -> str | None:
    """Why a response to `method` with `status` has no body (RFC 9110 6.4.1), or None."""
    if method.upper() == "HEAD":
        return "a response to HEAD has none"
    if status in (204, 304):
        return f"a {status} response has none"
    return None


def _served_mismatch(mismatch: CassetteMismatchError) -> str:
    """What a client (and the log) is told of a request nothing answers: the request, the
    nearest recorded one and which matchers differ; not how (a recorded body may hold what
    the client must not see), nor where the cassette lives on disk."""
    name = mismatch.cassette_path.name if mismatch.cassette_path else "the cassette"
    lines = [f"{mismatch.method} {mismatch.url} has no match in {name!r}"]
    if mismatch.nearest is None:
        lines.append("The cassette has no recorded interactions.")
    else:
        method, _, url = mismatch.nearest.partition(" ")
        lines.append(f"Nearest recorded request: {method} {_path_of(url)}")
        lines += [
            f"  it matches, but {ALREADY_PLAYED}: --repeat lets it answer again"
            if matcher == ALREADY_PLAYED
            else f"  {matcher} differs"
            for matcher, _ in mismatch.differences
        ]
    return "\n".join(lines)


def _path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


class ReplayApp:
    """An ASGI application answering each request from a cassette, at its recorded pace.

    Args:
        cassette: the interactions to serve, e.g. `Cassette.load(path, match_on=SERVE_MATCH_ON)`.
        speed: 1 = as recorded, 10 = ten times faster, "instant" = no waiting, or a speed
            policy (`replay.clock.policy`).
        redactor: applied to each request before matching, as it was before recording.
        clock: the clock to wait on (default: the real monotonic clock).
        faults: `replay.faults` values or specs applied to what is served.
        allow_hosts: `Host` names to serve besides 127.0.0.1, localhost and ::1; a request
            naming any other host gets a 421 (a web page reaching the server through DNS
            rebinding names its own).
        log: receives one line per request.
    """

    def __init__(
        self,
        cassette: Cassette,
        *,
        speed: SpeedLike = 1.0,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        faults: Iterable[FaultLike] = (),
        allow_hosts: Iterable[str] = (),
        log: Log = stderr,
    ) -> None:
        self.cassette = cassette
        #: Host header names served besides the loopback ones (DNS rebinding is refused).
        self.allow_hosts = host_names(allow_hosts)
        self.speed = speed_of(speed)
        self.clock = clock or MonotonicClock()
        self.player = Player(cassette, redactor=redactor, faults=faults)
        self.log = log
        self.in_flight = InFlight()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI connection scope."""
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            return
        if not host_allowed(scope, self.allow_hosts):
            await refuse_host(scope, send, self.log)
            return
        # The recorded times count from the moment the request was sent.
        schedule = Schedule.starting_now(self.speed, self.clock)
        body = await read_body(receive)
        if body is None:
            return
        host, port = scope.get("server") or ("127.0.0.1", 0)
        request = Request(
            method=scope["method"],
            url=f"http://{host}:{port}{path_and_query(scope)}",
            headers=decoded(scope["headers"]),
            body=body,
        )
        played = await self._take(request, send)
        if played is None:
            return
        stepper = Stepper(played.response, schedule, salt=played.index)
        bodiless = _bodiless(request.method, played.response.status) is not None
        async with anyio.create_task_group() as group:
            with self.in_flight.tracking(group.cancel_scope):
                group.start_soon(cancel_on_disconnect, receive, group.cancel_scope)
                await self._play(stepper, send, bodiless)
                group.cancel_scope.cancel()

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a WebSocket upgrade with a recorded conversation (`replay.server.websocket`)."""
        from replay.server import websocket

        if not host_allowed(scope, self.allow_hosts) or (await receive())["type"] != (
            "websocket.connect"
        ):
            self.log("403: a WebSocket upgrade refused: Host names another server")
            await send({"type": "websocket.close", "code": 1008})
            return
        host, port = scope.get("server") or ("127.0.0.1", 0)
        url = f"ws://{host}:{port}{path_and_query(scope)}"
        request = Request(method="GET", url=url, headers=decoded(scope["headers"]))
        try:
            played = self.player.take(request)
        except CassetteMismatchError as mismatch:
            message = _served_mismatch(mismatch)
            self.log("404: " + message.replace("\n", "\n  "))
            await websocket.refuse(send, 404, message.encode(), [("content-type", "text/plain")])
            return
        response, shown = played.response, _path_of(self.player.redactor.url(url))
        frames = self.cassette.interactions[played.index].frames
        if response.status != 101 or frames is None:
            self.log(f"GET {shown} (WebSocket): interaction {played.index}, {response.status}")
            await websocket.refuse(send, response.status, response.body, response.headers)
            return
        self.log(f"GET {shown} (WebSocket): interaction {played.index}, {count(frames, 'frame')}")
        conversation = await websocket.converse(
            played,
            self.player,
            request,
            receive,
            send,
            speed=factor_of(self.speed),  # (frames: a policy's `rest`)
            clock=self.clock,
            log=self.log,
        )
        left = conversation.leftovers()
        if left:
            self.log(f"GET {shown} (WebSocket) ended: {left.describe()}")

    async def _take(self, request: Request, send: Send) -> Played | None:
        """What answers `request`, logged; None when it was answered already: by a 404 when
        nothing matches, by a 502 when the recorded answer is not one HTTP can carry."""
        try:
            played = self.player.take(request)
        except CassetteMismatchError as mismatch:
            message = _served_mismatch(mismatch)
            self.log("404: " + message.replace("\n", "\n  "))
            error = {"type": "replay_mismatch", "message": message}
            await send_json(send, 404, {"error": error})
            return None
        response = played.response
        shown = _path_of(self.player.redactor.url(request.url))  # a query may carry a key
        problem = _unservable(response)
        if problem is not None:
            message = f"interaction {played.index} cannot be served: {problem}"
            self.log(f"502: {request.method} {shown}: {message}")
            error = {"type": "replay_cassette", "message": message}
            await send_json(send, 502, {"error": error})
            return None
        line = f"{request.method} {shown}: interaction {played.index}, {response.status}, "
        line += count(response.chunks, "chunk")
        unsent = _bodiless(request.method, response.status)
        if unsent is not None and response.body:
            line += f"; its recorded body ({count(response.body, 'byte')}) is not sent: {unsent}"
        self.log(line)
        return played

    async def _play(self, stepper: Stepper, send: Send, bodiless: bool) -> None:
        while True:
            step = await step_async(stepper, self.clock)
            if isinstance(step, Head):
                response = stepper.response
                headers = _replayed_headers(response)
                start = {"type": "http.response.start", "status": response.status}
                await send({**start, "headers": headers})
            elif isinstance(step, Data):
                if bodiless:  # HTTP frames none: a byte sent would be the next answer's
                    continue
                await send({"type": "http.response.body", "body": step.data, "more_body": True})
            elif isinstance(step, End):
                kind = error_kind(step.error)
                if kind is EndKind.CLEAN:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                elif kind is EndKind.TIMEOUT:
                    await anyio.sleep_forever()  # the live client gave up waiting; so will this
                # A cut: leave the body unfinished, so that uvicorn drops the connection.
                return


def serve(
    cassette_path: Path,
    *,
    port: int = 8080,
    speed: SpeedLike = 1.0,
    repeat: bool = False,
    faults: Iterable[FaultLike] = (),
    allow_hosts: Iterable[str] = (),
    log: Log = stderr,
    request_timeout: float = REQUEST_TIMEOUT,
) -> None:
    """Serve a cassette over HTTP on 127.0.0.1 until SIGINT or SIGTERM.

    Args:
        cassette_path: the cassette to answer from.
        port: the port to listen on; 0 picks a free one (the start line tells which).
        speed: 1 = as recorded, 10 = ten times faster, "instant" = no waiting, or a speed
            policy (`replay.clock.policy`).
        repeat: let an interaction answer more than once.
        faults: faults (or specs such as "cut(after_events=3)") applied to what is served.
        allow_hosts: `Host` names served besides the loopback ones.
        log: receives the start line and one line per request (default: stderr).
        request_timeout: seconds a client has to send a whole request; then its
            connection is closed (see `replay.server.guard`).

    Raises:
        ConfigurationError: a bad speed, port, fault or request timeout, or uvicorn is not
            installed.
        CassetteFormatError, OSError: the cassette cannot be read, or the port is taken.
    """
    require_uvicorn()
    factor = speed_of(speed)
    chosen = coerce(faults)
    timeout = check_request_timeout(request_timeout)
    cassette = Cassette.load(cassette_path, match_on=SERVE_MATCH_ON, allow_playback_repeats=repeat)
    app = ReplayApp(cassette, speed=factor, faults=chosen, allow_hosts=allow_hosts, log=log)
    with listen(port) as sock:
        address = f"http://127.0.0.1:{sock.getsockname()[1]}"
        run(app, sock, log, f"serving {cassette_path} on {address}", timeout)
