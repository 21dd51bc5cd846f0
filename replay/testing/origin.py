"""A real HTTP/1.1 origin on 127.0.0.1 that streams scripted chunks with real delays.

The demo records from it and the tests check recording against it, so it must behave like a
streaming API over a real socket: each scripted chunk is one HTTP chunk (h11 hands each to
httpx as its own piece, whatever the TCP reads were), written with one ``sendall`` with Nagle
off so it leaves on time; keep-alive; gzip that keeps boundaries (a sync flush per chunk); and
the ways streams end badly (dropped, hanging).

Delays are absolute deadlines from the moment the headers left, so timing does not drift, and
every wait is on one ``threading.Event`` so leaving the context manager ends streams at once.
"""

from __future__ import annotations

import contextlib
import select
import socket
import socketserver
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Union
from urllib.parse import urlsplit

import attrs

from replay.testing.streams import anthropic_hello, chat_hello, responses_hello

__all__ = ["Origin", "Route", "Script", "SeenRequest"]


def _to_chunks(value: Iterable[tuple[float, bytes]]) -> tuple[tuple[float, bytes], ...]:
    return tuple((float(delay), bytes(data)) for delay, data in value)


def _to_headers(value: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(name), str(val)) for name, val in value)


def _non_negative_delays(
    instance: object, attribute: attrs.Attribute[Any], value: tuple[tuple[float, bytes], ...]
) -> None:
    if any(delay < 0 for delay, _ in value):
        raise ValueError(f"{attribute.name}: delays must be >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class Script:
    """What the origin answers on one route.

    Attributes:
        chunks: ``(seconds to wait before the chunk, bytes)`` pairs; each is one HTTP chunk.
        status: the response status.
        headers: response headers; ``transfer-encoding: chunked`` is always added.
        header_delay: seconds to wait before sending the status line and headers.
        end: ``"eof"`` ends the body properly; ``"drop"`` closes the socket with no final
            chunk (the client sees an incomplete body); ``"hang"`` sends nothing more until
            the client leaves or the origin shuts down (an endless stream).
        gzip: send the body gzip-compressed (``content-encoding: gzip``), flushed at each
            chunk so boundaries and timing survive compression.
        echo: ignore ``chunks`` and answer with the request body as one JSON chunk.
        echo_headers: request headers sent back, each as the response header
            ``x-echo-<name>`` (a server that echoes a key where it should not).
    """

    chunks: tuple[tuple[float, bytes], ...] = attrs.field(
        default=(), converter=_to_chunks, validator=_non_negative_delays
    )
    status: int = attrs.field(default=200, validator=attrs.validators.in_(range(100, 600)))
    headers: tuple[tuple[str, str], ...] = attrs.field(
        default=(("content-type", "text/event-stream"),), converter=_to_headers
    )
    header_delay: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    end: Literal["eof", "drop", "hang"] = attrs.field(
        default="eof", validator=attrs.validators.in_(("eof", "drop", "hang"))
    )
    gzip: bool = False
    echo: bool = False
    echo_headers: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@attrs.frozen(kw_only=True)
class SeenRequest:
    """One request as it reached the origin."""

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    client_port: int
    """The client's TCP port: equal ports mean a reused (keep-alive) connection."""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)


#: What answers a path: a script, or a function choosing one for each request (a server that
#: answers a resume, `Last-Event-ID` or `starting_after`, with the rest of a stream).
Route = Union[Script, Callable[[SeenRequest], Script]]  # noqa: UP007 - a runtime alias

_NOT_FOUND = Script(
    status=404,
    headers=(("content-type", "application/json"),),
    chunks=((0.0, b'{"error":{"message":"no route on the replay origin","type":"not_found"}}'),),
)


class Origin:
    """A streaming HTTP server on 127.0.0.1 for tests and the demo; use as a context manager.

    Without ``routes`` it serves ``/v1/responses``, ``/v1/chat/completions`` (with usage)
    and ``/v1/messages`` at realistic speed. Any method is accepted; the query is ignored for
    routing; unknown paths get a 404 with a small JSON body.
    """

    def __init__(self, routes: Mapping[str, Route] | None = None) -> None:
        if routes is None:
            routes = {
                "/v1/responses": Script(chunks=responses_hello()),
                "/v1/chat/completions": Script(chunks=chat_hello(include_usage=True)),
                "/v1/messages": Script(chunks=anthropic_hello()),
            }
        self._routes = dict(routes)
        self.requests: list[SeenRequest] = []
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``; the port is chosen by the OS on ``__enter__``."""
        if self._server is None:
            raise RuntimeError("the origin is not running; use it as `with Origin() as origin:`")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def route(self, path: str, script: Route) -> None:
        """Answer requests to exactly ``path`` (query ignored), any method, with ``script``
        (or the script it chooses for each request)."""
        self._routes[path] = script

    def _script_for(self, seen: SeenRequest) -> Script:
        """The script that answers ``seen`` (a 404 script when no route matches its path)."""
        route = self._routes.get(seen.path, _NOT_FOUND)
        return route if isinstance(route, Script) else route(seen)

    def __enter__(self) -> Origin:
        if self._server is not None:
            raise RuntimeError("the origin is already running")
        self._stopping.clear()
        self._server = _Server(self)
        # A short poll interval keeps `shutdown()` (which waits for the loop) fast.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="replay-origin",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._stopping.set()  # ends delays and "hang" waits in every handler
        server.shutdown()
        server.close_connections()  # wakes handlers blocked reading a next keep-alive request
        server.server_close()
        thread.join()
        self._server = self._thread = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.stopping = origin._stopping
        self._live: set[socket.socket] = set()
        self._live_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, a DNS query we neither need nor
        # want (it can stall for seconds in sandboxes); the name is only used for CGI.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        # Without this, Nagle's algorithm may hold a small chunk back until the previous one
        # is acknowledged (delayed ACKs: up to 40 ms), which would skew the scripted timing.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._live_lock:
            self._live.add(sock)
        return sock, address

    def shutdown_request(self, request: Any) -> None:
        with self._live_lock:
            self._live.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._live_lock:
            live = list(self._live)
        for sock in live:
            with contextlib.suppress(OSError):  # already closed by its handler
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client leaving early is routine here, not an error worth a traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "replay-origin"
    sys_version = ""
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test and demo output clean

    def handle_one_request(self) -> None:
        # BaseHTTPRequestHandler dispatches to `do_<METHOD>`; answering every method from
        # one place is simpler than defining each.
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.send_error(414)
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            self._serve()
        except OSError:  # the client left (reset, broken pipe) or the origin is closing
            self.close_connection = True

    def _serve(self) -> None:
        body = self._read_body()
        parts = urlsplit(self.path)
        seen = SeenRequest(
            method=self.command,
            path=parts.path,
            query=parts.query,
            headers=tuple(self.headers.items()),
            body=body,
            client_port=self.client_address[1],
        )
        self.server.origin.requests.append(seen)
        script = self.server.origin._script_for(seen)
        if script.echo:
            script = attrs.evolve(
                script,
                chunks=((0.0, body),),
                headers=(("content-type", "application/json"),),
                gzip=False,
            )
        if script.echo_headers:
            echoed = [
                (f"x-echo-{name.lower()}", value)
                for name in script.echo_headers
                if (value := self.headers.get(name)) is not None
            ]
            script = attrs.evolve(script, headers=(*script.headers, *echoed))
        self._answer(script)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return b"".join(self._read_chunked())
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _read_chunked(self) -> Iterator[bytes]:
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                # Skip trailers up to the blank line that ends the body.
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return
            yield self.rfile.read(size)
            self.rfile.readline()  # the CRLF after the chunk data

    def _answer(self, script: Script) -> None:
        stopping = self.server.stopping
        if stopping.wait(script.header_delay):
            self.close_connection = True
            return
        self.send_response(script.status)
        for name, value in script.headers:
            self.send_header(name, value)
        if script.gzip:
            self.send_header("content-encoding", "gzip")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        if self.command == "HEAD":
            return
        deflate = zlib.compressobj(wbits=31) if script.gzip else None  # 31: gzip container
        finished = self._send_chunks(script.chunks, deflate)
        if not finished or script.end == "drop":
            # Closing without the final 0-chunk is what a dropped stream looks like.
            self.close_connection = True
        elif script.end == "hang":
            self._wait_until_client_leaves()
            self.close_connection = True
        else:
            self._send_end(deflate)

    def _send_chunks(
        self, chunks: Iterable[tuple[float, bytes]], deflate: zlib._Compress | None
    ) -> bool:
        """Send ``chunks`` on time; False if the origin is shutting down."""
        deadline = time.monotonic()
        for delay, data in chunks:
            deadline += delay
            if self.server.stopping.wait(max(0.0, deadline - time.monotonic())):
                return False
            if deflate is not None:
                data = deflate.compress(data) + deflate.flush(zlib.Z_SYNC_FLUSH)
            self._write_chunk(data)
        return True

    def _send_end(self, deflate: zlib._Compress | None) -> None:
        tail = b""
        if deflate is not None:
            # The gzip trailer leaves together with the terminating chunk: no extra read.
            tail = _chunk(deflate.flush())
        self.wfile.write(tail + b"0\r\n\r\n")
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        if not data:
            return  # an empty chunk would be the terminating one
        # One write is one sendall, so a chunk's size line and data never leave apart.
        self.wfile.write(_chunk(data))
        self.wfile.flush()

    def _wait_until_client_leaves(self) -> None:
        sock = self.connection
        while not self.server.stopping.wait(0.02):
            readable, _, _ = select.select([sock], [], [], 0)
            # Readable with nothing to read means the peer closed its end.
            if readable and not sock.recv(1, socket.MSG_PEEK):
                return


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)
