"""The requests shell of a cassette session: `HTTPAdapter.send`, recorded and replayed.

Every requests session (and the SDKs built on requests) goes through the cassette session of
its context. The response is requests' own, from the adapter's own `build_response`, around a
`raw` body of replay's shaped like urllib3's to requests and its users: `stream(amt)` yields
each chunk as it is due (recorded boundaries kept; split to at most `amt` bytes, never
joined), `read`, `read1`, gzip / deflate undone when `decode_content` asks, and a recorded
end raised as urllib3 raises it (`ProtocolError`, which requests turns into
`ChunkedEncodingError`; `ReadTimeoutError`).

Replaying, the body is the engine's (`replay.engine.playing`). Recording, the real send
streams (through the adapter's twin whose connections the stamper reads:
`replay.adapters.stamped_urllib3`) and a `replay.adapters.reader.ThreadReader` reads the
still-encoded body as it arrives (each HTTP chunk whole), stamped with the network arrival
that completed it; the client's `raw` takes what the thread queued. Errors are recorded under
httpx's names (the cassette's vocabulary: `replay.engine.ends`); the client gets urllib3's.
"""

from __future__ import annotations

import functools
import http.client
import socket
import types
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from urllib3._collections import HTTPHeaderDict  # (urllib3 1.x has it there too)
from urllib3.exceptions import DecodeError, ProtocolError, ReadTimeoutError

from replay.adapters import routes
from replay.adapters.netbackend import stamp_of
from replay.adapters.network import refuse_unless_reachable
from replay.adapters.reader import ThreadReader
from replay.adapters.stamped_urllib3 import (
    StampedSocket,
    close_twin,
    stamp_of_connection,
    twin_adapter,
)
from replay.engine.ends import EndKind, error_kind
from replay.engine.exchange import Exchange, Record, Replay, route
from replay.engine.feed import SyncFeed
from replay.errors import hide_for_replay_errors
from replay.framing.decoding import Inflater
from replay.model import Request

__all__ = ["patches"]

#: The Content-Encodings a replayed body undoes (urllib3 passes others through as they are,
#: unless it has a decoder installed for them).
_DECODED = ("gzip", "x-gzip", "deflate")

#: Gives the body's next piece as it arrives (None at its end), or raises how it ended.
Source = Callable[[], bytes | None]


def patches() -> list[tuple[type, str, Any]]:
    """The patches of `HTTPAdapter.send` (see `replay.adapters`) and `close` (its twin's
    connections closed too)."""
    from requests.adapters import HTTPAdapter

    unguarded = HTTPAdapter.send

    def original(self: Any, request: Any, *args: Any, **kw: Any) -> Any:
        # The network guard: a block refuses it by its URL, pooled connection or new.
        __tracebackhide__ = hide_for_replay_errors
        refuse_unless_reachable(request.method or "GET", request.url or "")
        return unguarded(self, request, *args, **kw)

    def send(
        self: Any, request: Any, stream: bool = False, timeout: Any = None, *args: Any, **kw: Any
    ) -> Any:
        __tracebackhide__ = hide_for_replay_errors
        session = routes.routed()
        way = None if session is None else route(session, request.url or "")
        if not isinstance(way, Exchange):  # no session, or an ignored host: live
            return original(self, request, stream, timeout, *args, **kw)
        asked = Request(
            method=request.method or "GET",
            url=request.url or "",
            headers=[(str(name), _text(value)) for name, value in request.headers.items()],
            body=_read_body(request),
        )
        decided = way.decide(asked)
        if isinstance(decided, Record):  # (through the twin whose sockets the stamper reads)
            adapter = twin_adapter(self)
            real = functools.partial(original, adapter, request, True, timeout, *args, **kw)
            response = _record(decided, real)
        else:
            response = self.build_response(request, _replayed(decided, request, timeout))
        if not stream:
            response.content  # noqa: B018 (the whole body read now, as requests' sessions do)
        return response

    original_close = HTTPAdapter.close

    def close(self: Any) -> None:
        original_close(self)
        close_twin(self)  # (the connections its recordings opened)

    return [(HTTPAdapter, "send", send), (HTTPAdapter, "close", close)]


def _text(value: str | bytes) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def _read_body(request: Any) -> bytes:
    """The request body as bytes. A file or generator body is read whole, and the request
    then carries those bytes (it is sent as read, if it is recorded)."""
    body = request.body
    if body is None or isinstance(body, (str, bytes, bytearray, memoryview)):
        return _bytes(body or b"")
    data = _bytes(body.read()) if hasattr(body, "read") else b"".join(map(_bytes, body))
    request.body = data
    return data


def _bytes(data: str | bytes | bytearray | memoryview) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)  # as urllib3 sends


def _read_timeout(timeout: Any) -> float | None:
    """The read timeout of requests' `timeout=`: seconds, (connect, read), or urllib3's."""
    if isinstance(timeout, tuple):
        timeout = timeout[1] if len(timeout) == 2 else None
    else:
        timeout = getattr(timeout, "read_timeout", timeout)  # a urllib3 Timeout
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        return float(timeout)
    return None


def _replayed(replay: Replay, request: Any, timeout: Any) -> _Raw:
    """The body of `replay`, once its headers are due, as requests reads urllib3's; headers
    later than the read timeout raise requests' `ReadTimeout`, as its adapter's send does."""
    url = request.url or ""
    body = replay.body(functools.partial(_end_error, url), _read_timeout(timeout))
    try:
        body.head()
    except ReadTimeoutError as error:
        from requests.exceptions import ReadTimeout

        raise ReadTimeout(error, request=request) from None
    pieces = functools.partial(next, iter(body), None)
    response = replay.played.response
    return _Raw(response.status, response.headers, pieces, body.close)


def _end_error(url: str, name: str, message: str) -> Exception:
    """The recorded end as urllib3 raises it mid-body (requests translates it): a timeout
    (`replay.engine.ends`) as its ReadTimeoutError, a cut as its ProtocolError."""
    if error_kind(name) is EndKind.TIMEOUT:
        return ReadTimeoutError(None, url, message or "Read timed out.")  # type: ignore[arg-type]
    return ProtocolError(message or f"Connection broken: {name}")


class _Raw:
    """A response body as requests reads urllib3's: what it touches, and what users do.

    Args:
        status: the status code.
        headers: the headers as ordered (name, value) pairs.
        source: gives each piece of the (still encoded) body as it arrives.
        stop: called when the client closes the body before its end.
        reason: the reason phrase (default: the standard one for `status`).
    """

    #: What `read` decodes by default: requests builds urllib3 responses with False.
    decode_content = False
    version = 11

    def __init__(
        self,
        status: int,
        headers: Iterable[tuple[str, str]],
        source: Source,
        stop: Callable[[], None],
        reason: str | None = None,
    ) -> None:
        self.status = status
        self.reason = http.client.responses.get(status, "") if reason is None else reason
        self.headers = HTTPHeaderDict()
        message = http.client.HTTPMessage()  # what requests reads cookies from
        for name, value in headers:
            self.headers.add(name, value)
            message[name] = value
        self._original_response = types.SimpleNamespace(msg=message)
        self._source = source
        self._stop = stop
        self._ended = self._closed = False
        self._left = b""  # taken from the source, not handed out yet
        self._inflater: Inflater | None = None
        self._body: bytes | None = None

    @property
    def closed(self) -> bool:
        """True once the body was read to its end, or closed."""
        return self._closed or (self._ended and not self._left)

    def isclosed(self) -> bool:
        """urllib3's (and http.client's) spelling of `closed`."""
        return self.closed

    @property
    def data(self) -> bytes:
        """The whole body (read now if it was not)."""
        if self._body is None:
            self._body = self.read()
        return self._body

    def stream(
        self, amt: int | None = 2**16, decode_content: bool | None = None
    ) -> Iterator[bytes]:
        """Each piece of the body as it is due, at most `amt` bytes (None: whole chunks)."""
        while (data := self._pull(decode_content)) is not None:
            if amt and len(data) > amt:
                data, self._left = data[:amt], data[amt:]
            yield data

    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
        """`amt` bytes (fewer at the end), or the rest of the body; b"" at its end."""
        parts, size = [], 0
        while amt is None or amt < 0 or size < amt:
            data = self._pull(decode_content)
            if data is None:
                break
            parts.append(data)
            size += len(data)
        body = b"".join(parts)
        if amt is not None and 0 <= amt < len(body):
            body, self._left = body[:amt], body[amt:]
        return body

    def read1(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
        """What is there, or the next piece to arrive (at most `amt` bytes); b"" at the end."""
        data = self._pull(decode_content) or b""
        if amt is not None and 0 <= amt < len(data):
            data, self._left = data[:amt], data[amt:]
        return data

    def close(self) -> None:
        """Stop reading: the rest of the body is not wanted."""
        if not self._closed:
            self._closed = True
            if not self._ended:
                self._ended = True
                self._stop()

    def release_conn(self) -> None:
        """Nothing to release: the connection (if any) belongs to the recording's reader."""

    def _pull(self, decode_content: bool | None) -> bytes | None:
        """The next non-empty piece, decoded if asked (urllib3's rule); None at the end."""
        if self._left:
            data, self._left = self._left, b""
            return data
        decoding = self._decoding(decode_content)
        while not self._ended:
            try:
                piece = self._source()
            except BaseException:
                self._ended = True
                raise
            if piece is None:
                self._ended = True
                piece = self._inflate(b"", final=True) if decoding else b""
            elif decoding:
                piece = self._inflate(piece)
            if piece:
                return piece
        return None

    def _decoding(self, decode_content: bool | None) -> bool:
        if not (self.decode_content if decode_content is None else decode_content):
            return False
        if self._inflater is None:
            encoding = (self.headers.get("content-encoding") or "").strip().lower()
            if encoding not in _DECODED:
                return False
            self._inflater = Inflater(encoding)
        return True

    def _inflate(self, data: bytes, *, final: bool = False) -> bytes:
        assert self._inflater is not None
        try:
            return self._inflater.flush() if final else self._inflater.decode(data)
        except zlib.error as error:
            encoding = self.headers.get("content-encoding")
            raise DecodeError(
                f"Received response with content-encoding: {encoding}, but failed to decode it."
            ) from error


# -- recording -------------------------------------------------------------------------------


def _record(record: Record, send: Callable[[], Any]) -> Any:
    """Send for real (streaming) and hand back the response, its body recorded as it comes."""
    recording = record.recording
    with routes.bypassed():
        response = record.sent(send)
    upstream = response.raw
    headers = list(upstream.headers.iteritems())
    source = _Upstream(upstream)
    recording.got_headers(upstream.status, headers, stamp_of(source))
    feed = SyncFeed(ThreadReader(recording, source))
    response.raw = _Raw(upstream.status, headers, _queued(feed), feed.close, upstream.reason)
    return response


def _queued(feed: SyncFeed) -> Source:
    """The recorded body's pieces as the client's `raw` takes them; an upstream error is
    raised as urllib3 raised it (the recording names it)."""
    return functools.partial(next, iter(feed), None)


class _Upstream:
    """A urllib3 response as the `ThreadReader` reads it: `stream` yields the still-encoded
    body as it arrives (each HTTP chunk whole), `extensions` offer the socket to wake a read
    the client gave up on."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        connection = getattr(raw, "connection", None)
        stamped = stamp_of_connection(connection)  # (read by the stamper: its arrivals' times)
        sock = getattr(connection, "sock", None) if stamped is None else stamped.sock
        self.extensions: dict[str, Any] = {}
        if sock is not None:
            self.extensions["network_stream"] = _Socket(sock, stamped)
        if getattr(raw, "version", 11) not in (10, 11):
            self.extensions["http_version"] = b"HTTP/2"  # its socket is not this body's alone

    @property
    def stream(self) -> Iterator[bytes]:
        """The body's pieces as they arrive; a cut or timeout raised as urllib3 raised it."""
        raw = self.raw
        if raw.chunked and raw.supports_chunked_reads():
            yield from raw.stream(None, decode_content=False)
        elif hasattr(raw, "read1"):  # not buffered up to a size, as read(amt) is
            while data := raw.read1(2**16, decode_content=False):
                yield data
        else:  # urllib3 1.x
            yield from raw.stream(2**14, decode_content=False)

    def close(self) -> None:
        """Let go of the connection (back to the pool if the body was read to its end)."""
        self.raw.close()
        self.raw.release_conn()


class _Socket:
    """What `replay.adapters.httpmod.interrupt` asks a network stream for: its socket; and
    what `stamp_of` asks: the time of the arrival last read (None: not stamped)."""

    def __init__(self, sock: socket.socket, stamped: StampedSocket | None) -> None:
        self.sock = sock
        self._stamped = stamped

    @property
    def stamp(self) -> float | None:
        return None if self._stamped is None else self._stamped.stamp

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else None
