"""The worker thread that reads a recording's body from a sync upstream, chunk by chunk.

Both recording paths that read in a thread use it: a sync client's (`replay.record`), and
an async client's whose transport has a sync twin (`replay._netthread`). The thread owns the
upstream body: it notes each chunk on the `Recording` the moment it arrives and queues it
for the client, reads to the end, to an error, or until the client lets go, then closes
the upstream (the connection goes back to the pool) and queues how the body ended. So the
stamps are the network's, however the client paces its reads.

The client takes the queue from its own side: blocking (`get`, a sync client) or on its
event loop (`aget`, woken by `loop.call_soon_threadsafe` or the trio token's `run_sync_soon`,
which never block the thread). A client that closes early makes the thread let go at once:
an HTTP/1 read blocked on the socket is woken by shutting the socket down (closing it from
another thread would not wake it, on Linux). A `before_record` hook that raises when the
recording is stored reaches the client, even one that closes without reading to the end.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable
from typing import Any, Final

import anyio

from replay._httpmod import headers_of, interrupt
from replay.engine.recorder import Recording

__all__ = ["END", "Failed", "Schedule", "ThreadReader"]

#: Runs a callback soon on the client's event loop; callable from any thread, never blocks.
Schedule = Callable[[Callable[[], None]], object]

#: The last item of a body that ended cleanly (or that the client let go of).
END: Final = object()

#: How long closing early waits for the thread to let go of the connection.
_CLOSE_WAIT: Final = 0.5


class Failed:
    """The last item of a body that ended with `error` (or of a send that got no headers)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _HookFailed(Failed):
    """Storing the recording failed (a `before_record` hook raised)."""


class ThreadReader:
    """Reads one upstream body in a worker thread for one client.

    Args:
        recording: notes the chunks and the end.
        upstream: the upstream response, its headers noted already; or None with `send`.
        send: sends the request in the thread and returns the upstream response, whose
            headers the thread then notes; its first item for the client is that response.
        wake: how to wake a client waiting on its event loop (`aget`); None for `get`.
    """

    def __init__(
        self,
        recording: Recording,
        upstream: Any = None,
        *,
        send: Callable[[], Any] | None = None,
        wake: Schedule | None = None,
    ) -> None:
        self._recording = recording
        self._send = send
        self._wake_loop = wake
        self._lock = threading.Condition()
        self._items: collections.deque[object] = collections.deque()
        self._waiter: anyio.Event | None = None  # an async client waiting (loop side)
        self._wake_pending = False
        self._abandoned = False  # the client let go
        self.upstream = upstream
        self._reading = upstream is not None  # the thread may be blocked reading it
        self.over = False  # the client took the last item
        self._thread = threading.Thread(target=self._run, name="replay-recorder", daemon=True)
        self._thread.start()

    # -- the thread --------------------------------------------------------------------------

    def _run(self) -> None:
        upstream = self.upstream
        if self._send is not None:
            try:
                upstream = self._send()
            except BaseException as failure:  # no headers: the client gets the error
                self._put(Failed(failure))
                return
            with self._lock:
                self.upstream, abandoned = upstream, self._abandoned
                self._reading = not abandoned
            if abandoned:  # the client was cancelled while waiting for the headers
                _quietly(upstream.close)
                self._put(END)
                return
            self._recording.got_headers(upstream.status_code, headers_of(upstream))
            self._put(upstream)
        self._put(self._read(upstream))

    def _read(self, upstream: Any) -> object:
        """Read the body to its end, noting each chunk as it arrives; the last item."""
        error: BaseException | None = None
        try:
            for data in upstream.stream:
                if self._abandoned:
                    break
                self._recording.got_chunk(data)
                self._put(data)
        except Exception as caught:  # the body's end: recorded, and the client's too
            error = caught
        with self._lock:  # from here on the connection may go back to the pool
            self._reading = False
        _quietly(upstream.close)
        if self._abandoned:
            return END
        try:
            self._recording.finish(error=error)  # at the network's time of the end
        except Exception as failure:  # a before_record hook raised: the client hears of it
            return _HookFailed(failure)
        return END if error is None else Failed(error)

    def _put(self, item: object) -> None:
        with self._lock:
            self._items.append(item)
            self._lock.notify_all()
            if self._waiter is None or self._wake_pending or self._wake_loop is None:
                return
            self._wake_pending = True
        try:
            self._wake_loop(self._wake)
        except Exception:  # the loop is closed, or the trio run ended: nobody will read
            self._abandoned = True

    # -- the client --------------------------------------------------------------------------

    def _take(self) -> object:
        item = self._items.popleft()
        self.over = item is END or isinstance(item, Failed)
        return item

    def get(self) -> object:
        """The next item, waiting for it (a sync client)."""
        with self._lock:
            while not self._items:
                self._lock.wait()
            return self._take()

    def _wake(self) -> None:
        with self._lock:
            self._wake_pending = False
            waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.set()

    async def aget(self) -> object:
        """The next item, waiting for it on the client's event loop."""
        while True:
            with self._lock:
                if self._items:
                    return self._take()
                waiter = self._waiter = anyio.Event()
            await waiter.wait()

    def abandon(self) -> bool:
        """Make the thread let go (from any thread); False if a read it is blocked in cannot
        be woken (HTTP/2, a custom transport: it stops at its next chunk)."""
        with self._lock:
            self._abandoned = True
            if self.upstream is None or not self._reading:
                return True
            return interrupt(self.upstream)

    def close(self) -> None:
        """The client closed early (sync): stop the recording as the client's, let the
        thread go, and wait (briefly) until it released the connection."""
        stopped = self._stop()
        if self.abandon():
            self._thread.join(_CLOSE_WAIT)
        if self._thread.is_alive() and self.upstream is not None:
            _quietly(self.upstream.close)  # a read nothing can wake: end it from here
        with self._lock:
            remaining = list(self._items)
        _raise_hook_failure(stopped, remaining)

    async def aclose(self) -> None:
        """Async twin of `close`: waits on the client's loop (shielded, briefly)."""
        stopped = self._stop()
        self.abandon()
        remaining: list[object] = []
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_WAIT):
            while not self.over:
                remaining.append(await self.aget())
        _raise_hook_failure(stopped, remaining)

    def _stop(self) -> Exception | None:
        if self.over:
            return None
        try:
            self._recording.finish(stopped_by="client")  # a no-op if it ended meanwhile
        except Exception as failure:
            return failure
        return None


def _raise_hook_failure(stopped: Exception | None, remaining: list[object]) -> None:
    if stopped is not None:
        raise stopped
    for item in remaining:
        if isinstance(item, _HookFailed):
            raise item.error


def _quietly(close: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # the connection is being torn down: nothing to say
        close()
