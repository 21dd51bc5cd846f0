"""An httpcore network backend whose streams read what the stamper forwards: each read is one
network arrival (or part of one), and the stream knows that arrival's time.

`StampedBackend` connects as httpcore's own sync backend does, then hands the socket to the
stamper process (`replay.adapters.stamper`), which reads it; the stream writes to the socket
itself and reads the arrivals. A read never joins two arrivals, so the body chunk httpcore
makes of it has a time: the arrival that completed it (`StampedStream.stamp`). TLS is done
here, through `ssl.SSLObject` and memory BIOs fed one arrival at a time, with the pool's own
SSL context and server name (certificate checks as httpcore's own); the plaintext a read
returns is stamped with the arrival that completed its TLS record.

Used for recordings only (`replay.adapters.netthread` builds the pools that read them), for
httpcore and httpcore2 alike (`backend_for`): their errors are raised. Without a stamper, a
connection is httpcore's own `SyncStream` (stamps then come from the reader, as before).
"""

from __future__ import annotations

import contextlib
import importlib
import socket
import ssl
import time
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any

from replay.adapters import stamper

__all__ = ["StampedBackend", "StampedStream", "backend_for", "stamp_of"]


class _Errors:
    """The exception classes of one httpcore (httpcore or httpcore2)."""

    def __init__(self, core: ModuleType) -> None:
        self.connect_timeout, self.connect = core.ConnectTimeout, core.ConnectError
        self.read_timeout, self.read = core.ReadTimeout, core.ReadError
        self.write_timeout, self.write = core.WriteTimeout, core.WriteError


@contextlib.contextmanager
def _mapped(timeout: type[Exception], error: type[Exception]) -> Iterator[None]:
    """Socket and TLS errors as the httpcore's `timeout` and `error` (as its backend does)."""
    try:
        yield
    except TimeoutError as caught:
        raise timeout(caught) from caught
    except OSError as caught:
        raise error(caught) from caught


class StampedStream:
    """An httpcore network stream: writes to the socket, reads the stamper's arrivals.

    Args:
        sock: the connected TCP socket (this process writes to it).
        arrivals: what the stamper read from it.
        errors: the httpcore exception classes to raise.
    """

    def __init__(self, sock: socket.socket, arrivals: stamper.Arrivals, errors: _Errors) -> None:
        self._sock = sock
        self._arrivals = arrivals
        self._errors = errors
        self._rest = b""  # what is left of the current arrival (plain streams)
        self._tls: ssl.SSLObject | None = None
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()

    @property
    def stamp(self) -> float | None:
        """The time (on `time.monotonic()`) of the arrival the last read came from."""
        return self._arrivals.stamp

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """Up to `max_bytes` of the current arrival, or of the next one (b"": the end)."""
        with _mapped(self._errors.read_timeout, self._errors.read):
            if self._tls is not None:
                return self._read_tls(self._tls, max_bytes, timeout)
            rest = self._rest or self._arrivals.next(timeout)
            if len(rest) <= max_bytes:
                self._rest = b""
                return rest
            self._rest = rest[max_bytes:]
            return rest[:max_bytes]

    def _read_tls(self, tls: ssl.SSLObject, max_bytes: int, timeout: float | None) -> bytes:
        while True:
            try:
                data = tls.read(max_bytes)
            except ssl.SSLWantReadError:
                self._flush(timeout)
                self._feed(timeout)
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):  # as httpcore's ragged EOFs: end
                return b""
            if self._outgoing.pending:
                self._flush(timeout)
            return data

    def _feed(self, timeout: float | None) -> None:
        """Give the TLS object the next arrival (or the end of the stream)."""
        data = self._arrivals.next(timeout)
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()

    def _flush(self, timeout: float | None) -> None:
        data = self._outgoing.read()
        if data:
            self._sock.settimeout(timeout)
            self._sock.sendall(data)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Send all of `buffer` (encrypted, over TLS)."""
        if not buffer:
            return
        with _mapped(self._errors.write_timeout, self._errors.write):
            if self._tls is None:
                self._sock.settimeout(timeout)
                self._sock.sendall(buffer)
                return
            self._tls.write(buffer)
            self._flush(timeout)

    def close(self) -> None:
        """Close the socket (shut down first: the stamper holds a duplicate of it)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._arrivals.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> StampedStream:
        """Do the TLS handshake over the arrivals; this stream, now encrypted."""
        if self._tls is not None:  # TLS in TLS (through an HTTPS proxy): not built here
            self.close()
            raise self._errors.connect("a stamped stream does not carry TLS in TLS")
        tls = ssl_context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_hostname)
        try:
            with _mapped(self._errors.connect_timeout, self._errors.connect):
                while True:
                    try:
                        tls.do_handshake()
                        break
                    except ssl.SSLWantReadError:
                        self._flush(timeout)
                        self._feed(timeout)
                self._flush(timeout)
        except Exception:
            self.close()
            raise
        self._tls = tls
        return self

    def get_extra_info(self, info: str) -> Any:
        """As httpcore's `SyncStream`: the TLS object, the addresses, the socket, and whether
        something (data, or the end) is there to read."""
        if info == "ssl_object":
            return self._tls
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "socket":
            return self._sock
        if info == "is_readable":
            return bool(self._rest) or self._arrivals.pending()
        return None


class StampedBackend:
    """An httpcore sync network backend whose TCP streams are `StampedStream`s.

    Args:
        core: the httpcore module (httpcore or httpcore2) whose pool uses it.
    """

    def __init__(self, core: ModuleType) -> None:
        self._errors = _Errors(core)
        self._fallback: Any = importlib.import_module(f"{core.__name__}._backends.sync")
        self._own: Any = self._fallback.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        """Connect as httpcore's sync backend does; the stream reads through the stamper."""
        source = None if local_address is None else (local_address, 0)
        with _mapped(self._errors.connect_timeout, self._errors.connect):
            sock = socket.create_connection((host, port), timeout, source_address=source)
            try:
                for option in socket_options or ():
                    sock.setsockopt(*option)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                sock.close()
                raise
        arrivals = stamper.attach(sock)
        if arrivals is None:
            return self._fallback.SyncStream(sock)
        return StampedStream(sock, arrivals, self._errors)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        """As httpcore's own (not stamped)."""
        return self._own.connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        """`time.sleep`."""
        time.sleep(seconds)


_BACKENDS: dict[str, StampedBackend] = {}


def backend_for(core_name: str) -> StampedBackend:
    """The stamped backend for pools of `core_name` ("httpcore" or "httpcore2")."""
    backend = _BACKENDS.get(core_name)
    if backend is None:
        backend = _BACKENDS[core_name] = StampedBackend(importlib.import_module(core_name))
    return backend


def stamp_of(upstream: Any) -> float | None:
    """The time of the network arrival that completed what `upstream`'s connection last
    read (on `time.monotonic()`); None when its connection is not stamped."""
    extensions = getattr(upstream, "extensions", None)
    stream = extensions.get("network_stream") if isinstance(extensions, dict) else None
    stamp = getattr(stream, "stamp", None)  # (a `StampedStream`, or another client's kind)
    return stamp if isinstance(stamp, float) else None
