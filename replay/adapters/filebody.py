"""A response body as a file, for the shells whose libraries read one: http.client's
`HTTPResponse` reads its socket's file, urllib3's reads http.client's (`replay.adapters.urllib3`,
`replay.adapters.httpclient`).

`body_file` makes a buffered binary file (as `socket.makefile("rb")` is) of a source of
pieces: a replayed body (`replayed_source`, the engine's `replay.engine.playing.Playing`)
or a recording's queue (`recorded_source`, a `replay.adapters.reader.ThreadReader` reading
the real response). Each raw read hands out at most one piece, when it is due, so `read1`
and `readinto` give the chunks as they arrive and `read(n)` waits for `n` bytes, as on a
socket. A replayed end is raised as the standard library raises it (`stdlib_error`): a
timeout as `TimeoutError` (`socket.timeout`), a cut as `http.client.IncompleteRead`; urllib3
turns both into its own, as it does live.
"""

from __future__ import annotations

import functools
import http.client
import io
import socket
from collections.abc import Callable, Iterable
from typing import Any

from replay.engine.ends import EndKind, error_kind
from replay.engine.exchange import Record, Replay
from replay.engine.feed import SyncFeed

__all__ = [
    "SocketStream",
    "Source",
    "body_file",
    "recorded_source",
    "replayed_source",
    "request_body",
    "stdlib_error",
]

#: Gives the body's next piece as it arrives (None at its end), or raises how it ended.
Source = Callable[[], bytes | None]


def stdlib_error(name: str, message: str) -> BaseException:
    """The recorded end `name` as the standard library raises it mid-body."""
    if error_kind(name) is EndKind.TIMEOUT:
        return TimeoutError(message or "timed out")
    return http.client.IncompleteRead(b"")


def replayed_source(
    replay: Replay, read_timeout: float | None
) -> tuple[Source, Callable[[], None]]:
    """The body of `replay` once its headers are due (waited for now: a read timeout first
    raises `TimeoutError`), and how to stop it."""
    body = replay.body(stdlib_error, read_timeout)
    body.head()
    return functools.partial(next, iter(body), None), body.close


def recorded_source(
    record: Record, upstream: Any, status: int, headers: list[tuple[str, str]]
) -> tuple[Source, Callable[[], None]]:
    """The body of the real response `upstream` (with `stream`, `close` and `extensions`, as
    the reader reads it), recorded chunk by chunk as it arrives; and how to stop it."""
    from replay.adapters.reader import ThreadReader  # (its worker threads: only if recording)

    record.recording.got_headers(status, headers)
    feed = SyncFeed(ThreadReader(record.recording, upstream))
    return functools.partial(next, iter(feed), None), feed.close


def body_file(source: Source, stop: Callable[[], None]) -> io.BufferedReader:
    """A buffered binary file of the pieces of `source`; closed before its end, it calls
    `stop` (the rest is not wanted)."""
    return io.BufferedReader(_Pieces(source, stop))


def request_body(body: Any) -> bytes:
    """A request body (None, str, bytes-like, a file, or an iterable of those) as the bytes
    the library sends: a file or iterable is read whole (then sent as those bytes)."""
    if body is None or isinstance(body, (str, bytes, bytearray, memoryview)):
        return _bytes(body or b"")
    if hasattr(body, "read"):
        return _bytes(body.read())
    return b"".join(map(_bytes, body if isinstance(body, Iterable) else [body]))


def _bytes(data: Any) -> bytes:
    if isinstance(data, str):
        return data.encode("iso-8859-1")  # as http.client encodes a str body
    return bytes(data)


class _Pieces(io.RawIOBase):
    """The raw file under `body_file`: each read hands out (part of) one piece."""

    def __init__(self, source: Source, stop: Callable[[], None]) -> None:
        super().__init__()
        self._source = source
        self._stop = stop
        self._left = b""
        self._ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left and not self._ended:
            try:
                piece = self._source()
            except BaseException:
                self._ended = True
                raise
            if piece is None:
                self._ended = True
            else:
                self._left = piece
        size = min(len(buffer), len(self._left))
        buffer[:size] = self._left[:size]
        self._left = self._left[size:]
        return size

    def close(self) -> None:
        if not self.closed and not self._ended:
            self._ended = True
            self._stop()
        super().close()


class SocketStream:
    """A socket as `replay.adapters.httpmod.interrupt` asks a network stream for it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_extra_info(self, name: str) -> Any:
        """The socket (`name` "socket"), else None."""
        return self.sock if name == "socket" else None
