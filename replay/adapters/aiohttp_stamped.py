"""aiohttp connections read by the stamper while a request is recorded: each chunk's time is
its network arrival's, however long the client holds its event loop (or the GIL).

A recorded request runs `stamping()`; the connector's `connect` (patched: `connect_patch`)
then hands the connection it returns, new or pooled, to the stamper process
(`replay.adapters.stamper`): asyncio's socket transport stops reading (it still writes and
closes), and a `StampedTransport` reads the stamper's channel instead, giving the protocol
one arrival at a time and noting its time while it does (`delivering`). Over TLS it goes
under asyncio's own `SSLProtocol` (the `ssl.SSLObject` the handshake set up, the client's
context and server name): the plaintext it hands aiohttp during an arrival's delivery is the
TLS record that arrival completed. aiohttp's parser feeds the body while the arrival is
being delivered, so the recorder takes its time from there (`replay.adapters.aiohttp_record`);
what was fed before the recorder saw the response (the headers, the first chunks) is looked up
in the transport's `log` of the current response's deliveries.

What goes the ordinary way (times taken on the loop; the cassette says "reader"): a connector
other than `aiohttp.TCPConnector` (unix sockets, custom ones), a request through a proxy, an
event loop other than asyncio's selector loops (uvloop, proactor), and data aiohttp held back
and fed later (a paused reader's tail).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import socket
from collections.abc import Iterator
from typing import Any, cast

import aiohttp

from replay.adapters import stamper

__all__ = ["StampedTransport", "connect_patch", "stamped_transport", "stamping"]

_PLAIN = aiohttp.StreamReader
_STAMPING: contextvars.ContextVar[bool] = contextvars.ContextVar("replay_stamping", default=False)


@contextlib.contextmanager
def stamping() -> Iterator[None]:
    """The connections of the requests sent in this context are read by the stamper."""
    token = _STAMPING.set(True)
    try:
        yield
    finally:
        _STAMPING.reset(token)


class StampedTransport(asyncio.Transport):
    """The read side of a connection as the stamper forwards it; writes, flow control of the
    writes and closing are the socket transport's (`inner`).

    Args:
        inner: asyncio's socket transport of the connection (its reading paused here).
        arrivals: what the stamper reads from the connection.
        target: the protocol given the arrivals (aiohttp's, or the `SSLProtocol` over it).
        handler: aiohttp's protocol (its current response is what `log` is about).
        reading: whether `inner` was reading (else this starts paused).
        app: over TLS, the transport aiohttp writes to (asyncio's, over the `SSLProtocol`).
    """

    def __init__(
        self,
        inner: Any,
        arrivals: stamper.Arrivals,
        target: Any,
        handler: Any,
        reading: bool,
        app: Any = None,
    ) -> None:
        super().__init__()
        self._inner = inner
        self._app = app
        self._arrivals = arrivals
        self._target = target
        self._handler = handler
        self._loop = asyncio.get_running_loop()
        self._paused = True
        self._closed = False
        #: The time of the arrival being delivered (None between deliveries).
        self.delivering: float | None = None
        #: For the handler's current response (`logged`): (arrival time, bytes fed so far)
        #: after each delivery.
        self.log: list[tuple[float, int]] = []
        self.logged: Any = None
        if reading:
            self.resume_reading()

    # -- reading -------------------------------------------------------------------------------

    def _ready(self) -> None:
        """Deliver the arrivals there, one at a time, until none is left or reading pauses."""
        while not self._paused and not self._closed:
            try:
                data = self._arrivals.ready()
            except OSError as error:
                self._fail(error)
                return
            if data is None:
                return
            if not data:
                self._eof()
                return
            self._deliver(data)

    def _deliver(self, data: bytes) -> None:
        self.delivering = stamp = self._arrivals.stamp
        try:
            target = self._target
            if isinstance(target, asyncio.BufferedProtocol):
                view = memoryview(data)
                while view:
                    buffer = memoryview(target.get_buffer(len(view))).cast("B")
                    size = min(len(buffer), len(view))
                    buffer[:size] = view[:size]
                    target.buffer_updated(size)
                    view = view[size:]
            else:
                target.data_received(data)
        finally:
            self.delivering = None
        payload = getattr(self._handler, "_payload", None)
        if payload is not self.logged:
            self.logged, self.log = payload, []
        total = getattr(payload, "total_bytes", None)
        if stamp is not None and isinstance(total, int) and type(payload) is _PLAIN:
            self.log.append((stamp, total))  # (until the recorder swaps in its stream class)

    def _eof(self) -> None:
        self._unwatch()
        if not self._target.eof_received():
            self.close()

    def _fail(self, error: OSError) -> None:
        self._force_close(error)

    def _force_close(self, error: BaseException | None) -> None:
        """Close at once, the protocol told of `error` (what asyncio's `SSLProtocol` calls on
        a fatal error or when its shutdown times out)."""
        self._let_go()
        force = getattr(self._inner, "_force_close", None)
        if callable(force):
            force(error)  # (the protocol's connection_lost hears of the error)
        else:
            self._inner.abort()

    def _let_go(self) -> None:
        """Stop delivering, and let go of the stamper's channel (it lets go of the
        connection)."""
        if not self._closed:
            self._closed = True
            self._unwatch()
            self._arrivals.close()

    def _unwatch(self) -> None:
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._arrivals.fileno())

    def is_reading(self) -> bool:
        """Whether arrivals are being delivered."""
        return not self._paused and not self._closed

    def pause_reading(self) -> None:
        """Stop delivering (the stamper keeps reading, the arrivals keep their times)."""
        if not self._paused and not self._closed:
            self._paused = True
            self._unwatch()

    def resume_reading(self) -> None:
        """Deliver again (what is there already, then what comes)."""
        if self._paused and not self._closed:
            self._paused = False
            self._loop.add_reader(self._arrivals.fileno(), self._ready)
            self._loop.call_soon(self._ready)

    # -- the rest: the socket transport's ----------------------------------------------------

    def write(self, data: Any) -> None:
        """Write through the socket transport. Over TLS, what is written once aiohttp closed
        the connection ends the TLS session (its close_notify): the connection is closed
        then, after it, without waiting for the server's (which the stamper would forward a
        moment later, maybe after the event loop has closed)."""
        self._inner.write(data)
        if self._app is not None and self._app.is_closing():
            self._app = None
            self.close()  # (the socket transport sends what it holds, then closes)

    def writelines(self, list_of_data: Any) -> None:
        """Write through the socket transport."""
        self._inner.writelines(list_of_data)

    def can_write_eof(self) -> bool:
        """As the socket transport."""
        return bool(self._inner.can_write_eof())

    def write_eof(self) -> None:
        """As the socket transport."""
        self._inner.write_eof()

    def get_write_buffer_size(self) -> int:
        """As the socket transport."""
        return int(self._inner.get_write_buffer_size())

    def get_write_buffer_limits(self) -> tuple[int, int]:
        """As the socket transport."""
        return cast(tuple[int, int], self._inner.get_write_buffer_limits())

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        """As the socket transport."""
        self._inner.set_write_buffer_limits(high, low)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """As the socket transport."""
        return self._inner.get_extra_info(name, default)

    def is_closing(self) -> bool:
        """As the socket transport."""
        return self._closed or bool(self._inner.is_closing())

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        """The protocol given the arrivals from now on."""
        self._target = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        """The protocol given the arrivals."""
        return cast(asyncio.BaseProtocol, self._target)

    def close(self) -> None:
        """Let go of the stamper's channel (it lets go of the connection), then close the
        socket transport (its protocol hears of it, as from the socket transport)."""
        self._let_go()
        self._inner.close()

    def abort(self) -> None:
        """As `close`, without flushing what is left to write."""
        self._let_go()
        self._inner.abort()


def stamped_transport(protocol: Any) -> StampedTransport | None:
    """The stamped transport under aiohttp's `protocol` (under its TLS, if any); None."""
    transport = getattr(protocol, "transport", None)
    lower = getattr(getattr(transport, "_ssl_protocol", None), "_transport", transport)
    return lower if isinstance(lower, StampedTransport) else None


def _stamp(handler: Any) -> None:
    """Have the stamper read the connection of aiohttp's protocol `handler` from now on."""
    transport = handler.transport
    if transport is None or stamped_transport(handler) is not None:
        return  # (closed, or stamped already: a pooled connection)
    ssl_protocol = getattr(transport, "_ssl_protocol", None)
    inner: Any = transport if ssl_protocol is None else getattr(ssl_protocol, "_transport", None)
    selector_transport = getattr(asyncio.selector_events, "_SelectorSocketTransport", None)
    if selector_transport is None or type(inner) is not selector_transport or inner.is_closing():
        return  # another event loop's transport (uvloop, proactor): read as before
    sock = inner.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    arrivals = stamper.attach(sock)
    if arrivals is None:
        return
    reading = inner.is_reading()
    inner.pause_reading()
    target = handler if ssl_protocol is None else ssl_protocol
    app = None if ssl_protocol is None else transport
    ours = StampedTransport(inner, arrivals, target, handler, reading, app)
    if ssl_protocol is None:
        handler.transport = ours
    else:
        ssl_protocol._transport = ours


def connect_patch() -> tuple[type, str, Any]:
    """The patch of `aiohttp.BaseConnector.connect`: in `stamping()`, a `TCPConnector`'s
    connection (not through a proxy) is read by the stamper."""
    original = aiohttp.BaseConnector.connect

    async def connect(self: Any, req: Any, *args: Any, **kwargs: Any) -> Any:
        connection = await original(self, req, *args, **kwargs)
        if _STAMPING.get() and type(self) is aiohttp.TCPConnector and not req.proxy:
            handler = connection.protocol
            if handler is not None and stamper.available():
                _stamp(handler)
        return connection

    return (aiohttp.BaseConnector, "connect", connect)
