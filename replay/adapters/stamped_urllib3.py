"""urllib3 connections whose reads are the stamper's arrivals: requests' recordings stamped by
the network, whatever the client does with its GIL.

A recorded `requests` request goes through the adapter's *twin* (`twin_adapter`): a copy of
the `HTTPAdapter` whose pool manager (same settings: the adapter's `pool_kwargs`, block,
sizes, headers) builds pools of `StampedHTTPConnection` / `StampedHTTPSConnection`. These
connect as urllib3 does, then hand the socket to the stamper process
(`replay.adapters.stamper`) and keep a `StampedSocket` instead: `recv` / `recv_into` return at
most one network arrival (noting its time), `makefile` serves http.client, writes go to the
real socket. TLS is urllib3's own `SSLTransport` (an `ssl.SSLObject` over memory BIOs) over
the stamped socket, with urllib3's own context, SNI, certificate and hostname checks: it
reads the socket only when the TLS object wants more, so a decrypted read's time is the
arrival that completed its TLS record. Without a stamper, a connection keeps its plain socket
(the reader takes the times, and the cassette says so).

A chunk's time is the arrival urllib3's last read of it came from: reading a chunked body's
chunk includes the CRLF after it, so a server that sends that CRLF apart from the chunk (and
later) gives the chunk the CRLF's time.

What goes the ordinary way (cassette: "reader"): requests through a proxy (the adapter's
proxy managers are its own), adapters whose pool manager is not urllib3's `PoolManager` or
whose pool classes are custom, and urllib3 without `SSLTransport` (1.25 and older).
"""

from __future__ import annotations

import io
import socket
import threading
import weakref
from typing import Any

import urllib3.connection
import urllib3.util.ssl_
from urllib3 import PoolManager
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from replay.adapters import stamper

__all__ = ["StampedSocket", "close_twin", "stamp_of_connection", "twin_adapter"]


class StampedSocket:
    """The socket of a recorded urllib3 connection: writes go to the TCP socket, reads are the
    stamper's arrivals (at most one a read).

    Args:
        sock: the connected TCP socket.
        arrivals: what the stamper reads from it.
    """

    def __init__(self, sock: socket.socket, arrivals: stamper.Arrivals) -> None:
        self.sock = sock
        self._arrivals = arrivals
        self._rest = b""
        self._timeout = sock.gettimeout()
        self._io_refs = 0
        self._closed = False

    @property
    def stamp(self) -> float | None:
        """The time (on `time.monotonic()`) of the arrival the last read came from."""
        return self._arrivals.stamp

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        """Up to `bufsize` bytes of the current arrival, or of the next (b"": the end)."""
        rest = self._rest or self._arrivals.next(self._timeout)
        self._rest = rest[bufsize:]
        return rest[:bufsize]

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        """`recv` into `buffer`; the byte count."""
        view = memoryview(buffer).cast("B")
        data = self.recv(nbytes or len(view))
        view[: len(data)] = data
        return len(data)

    def sendall(self, data: Any, flags: int = 0) -> None:
        """Send all of `data` on the TCP socket."""
        self.sock.sendall(data, flags)

    def send(self, data: Any, flags: int = 0) -> int:
        """Send some of `data` on the TCP socket."""
        return self.sock.send(data, flags)

    def settimeout(self, value: float | None) -> None:
        """The timeout of reads (waiting for an arrival) and writes."""
        self._timeout = value
        self.sock.settimeout(value)

    def gettimeout(self) -> float | None:
        """The timeout `settimeout` set."""
        return self._timeout

    def fileno(self) -> int:
        """The stamper channel's descriptor: readable when an arrival or the end is there
        (what urllib3 asks to tell a dropped connection)."""
        return self._arrivals.fileno()

    def setsockopt(self, *args: Any) -> None:
        """On the TCP socket."""
        self.sock.setsockopt(*args)

    def getsockname(self) -> Any:
        """The TCP socket's address."""
        return self.sock.getsockname()

    def getpeername(self) -> Any:
        """The peer's address."""
        return self.sock.getpeername()

    def shutdown(self, how: int) -> None:
        """Shut the TCP socket down (a blocked read then ends: the stamper sees the end)."""
        self.sock.shutdown(how)

    def makefile(self, mode: str = "r", buffering: int | None = None, **_: Any) -> Any:
        """A binary file over the arrivals, as http.client reads a response ("rb")."""
        if mode not in ("r", "rb"):
            raise ValueError(f"a stamped socket reads only (mode {mode!r})")
        raw = socket.SocketIO(self, "rb")  # type: ignore[arg-type]
        self._io_refs += 1
        if buffering == 0:
            return raw
        return io.BufferedReader(raw, buffering or io.DEFAULT_BUFFER_SIZE)

    def _decref_socketios(self) -> None:
        self._io_refs -= 1
        if self._closed and self._io_refs <= 0:
            self._real_close()

    def close(self) -> None:
        """Close (once the files `makefile` made are closed too, as a socket does)."""
        self._closed = True
        if self._io_refs <= 0:
            self._real_close()

    def _real_close(self) -> None:
        self._arrivals.close()  # (the stamper then lets go of its duplicate)
        self.sock.close()


def _stamped(connection: Any, sock: socket.socket) -> socket.socket:
    """`sock` as the stamper reads it (noted on `connection`: http.client lets go of its
    socket when the response will close the connection); `sock` itself without a stamper."""
    arrivals = stamper.attach(sock)
    stamped = None if arrivals is None else StampedSocket(sock, arrivals)
    connection.stamped_socket = stamped
    return sock if stamped is None else stamped  # type: ignore[return-value]


class StampedHTTPConnection(urllib3.connection.HTTPConnection):
    """urllib3's HTTP connection, its socket read by the stamper."""

    def _new_conn(self) -> socket.socket:
        return _stamped(self, super()._new_conn())


class StampedHTTPSConnection(urllib3.connection.HTTPSConnection):
    """urllib3's HTTPS connection, its socket read by the stamper; TLS over its arrivals."""

    def _new_conn(self) -> socket.socket:
        return _stamped(self, super()._new_conn())


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = StampedHTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = StampedHTTPSConnection


_original_wrap = urllib3.util.ssl_.ssl_wrap_socket  # (what urllib3.connection imported)


def _wrap(sock: Any, *args: Any, **kwargs: Any) -> Any:
    """urllib3's `ssl_wrap_socket`; a stamped socket gets its `SSLTransport` (TLS over the
    socket's reads, as urllib3 does TLS in TLS), everything else as urllib3 does it."""
    if isinstance(sock, StampedSocket):
        kwargs["tls_in_tls"] = True
    return _original_wrap(sock, *args, **kwargs)


def _usable(manager: Any) -> bool:
    if type(manager) is not PoolManager or getattr(urllib3.util.ssl_, "SSLTransport", None) is None:
        return False
    classes = manager.pool_classes_by_scheme
    return classes.get("http") is HTTPConnectionPool and classes.get("https") is (
        HTTPSConnectionPool
    )


_TWINS: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def twin_adapter(adapter: Any) -> Any:
    """The twin of the requests `adapter` whose connections the stamper reads; `adapter`
    itself when there is no stamper or its pool manager cannot be copied."""
    manager: Any = getattr(adapter, "poolmanager", None)
    if not stamper.available() or not _usable(manager):
        return adapter
    with _LOCK:
        found = _TWINS.get(adapter)
        if found is None or found[0] is not manager:  # (a new pool manager: a new twin)
            pools = PoolManager(
                num_pools=manager.pools._maxsize,
                headers=manager.headers,
                **manager.connection_pool_kw,
            )
            pools.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
            found = _TWINS[adapter] = (manager, object.__new__(type(adapter)))
            weakref.finalize(adapter, pools.clear)
            found[1].poolmanager = pools
        twin = found[1]
        state = dict(adapter.__dict__)  # (its settings as they are now: max_retries…)
        state["poolmanager"] = twin.poolmanager
        twin.__dict__.update(state)
        if getattr(urllib3.connection, "ssl_wrap_socket", None) is _original_wrap:
            setattr(urllib3.connection, "ssl_wrap_socket", _wrap)  # (see `_wrap`)  # noqa: B010
        return twin


def close_twin(adapter: Any) -> None:
    """Close the connections of the twin of `adapter` (when it has one)."""
    with _LOCK:
        found = _TWINS.pop(adapter, None)
    if found is not None:
        found[1].poolmanager.clear()


def stamp_of_connection(connection: Any) -> StampedSocket | None:
    """The stamped socket of a urllib3 `connection` (under its TLS, if any); None if it has
    none."""
    sock = getattr(connection, "stamped_socket", None)
    return sock if isinstance(sock, StampedSocket) else None
