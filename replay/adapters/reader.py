"""The worker thread that reads a recording's body from a sync upstream, chunk by chunk.

Both recording paths that read in a thread use it: a sync client's (`replay.adapters.record`,
`replay.adapters.requests`), and an async client's whose transport has a sync twin
(`replay.adapters.netthread`). Whoever reads notes each chunk on the `Recording` the moment it
arrives; at the end, or on an error, the reader closes the upstream (the connection goes
back to the pool) and the recording is stored. So the stamps are the network's, however the
client paces its reads. The threads are reused from one body to the next
(`replay.adapters.workers`: see there what a thread started afresh cost).

- An async client's body is read by the thread, to the end, to an error, or until the client
  lets go: the client takes what it queued on its event loop (`aget`, woken by
  `loop.call_soon_threadsafe` or the trio token's `run_sync_soon`, which never block the
  thread), and is woken only when it waits.
- A sync client (`get`) reads its body itself while it keeps up: a chunk read as soon as
  the client asks for it is stamped when it arrives, and handing every chunk from one thread
  to the other cost more than reading it (a switch of threads, and of the GIL, for each; and
  the reader's fresh pages: 0.55x the live throughput in bench 10, against about 0.8x). The
  thread watches meanwhile: once the client has been away for `_AWAY` (busy with a chunk),
  it reads for it, queueing what comes, until the client is back. It sleeps while the
  client reads; the client leaving wakes it.

A client that closes early makes the thread let go at once: an HTTP/1 read blocked on the
socket is woken by shutting the socket down (closing it from another thread would not wake
it, on Linux). A `before_record` hook that raises when the recording is stored reaches the
client, even one that closes without reading to the end.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

import anyio

from replay.adapters import routes
from replay.adapters.httpmod import headers_of, interrupt
from replay.adapters.netbackend import stamp_of
from replay.adapters.workers import WORKERS as _WORKERS
from replay.engine.feed import CLOSE_WAIT, END, Failed, HookFailed, is_last
from replay.engine.recorder import Recording

__all__ = ["END", "Failed", "Schedule", "ThreadReader"]

#: Runs a callback soon on the client's event loop; callable from any thread, never blocks.
Schedule = Callable[[Callable[[], None]], object]

#: How long a sync client may be away with a chunk before the thread reads for it: the most
#: a stamp of a client that dawdles lags the network (the thread's wake-up aside). The thread
#: sleeps while the client waits in a read, and the client leaving wakes it (`_nudge`);
#: while the client comes and goes fast, taking chunk after chunk, it looks less often, up
#: to every `_NAP_MAX` (each wake-up of a thread took the GIL from a client reading at full
#: speed: some 0.2 ms of its time, on a busy 2-core machine): the stamps of a client that
#: dawdles after that lag by `_NAP_MAX` and `_AWAY` at most, some 18 ms. `_SLEEP` bounds a
#: sleep all the same.
_AWAY: Final = 0.002
_NAP_MAX: Final = 0.016
_SLEEP: Final = 0.1


class ThreadReader:
    """Reads one upstream body for one client: in a worker thread, or (a sync client that
    keeps up) in the client's own, the thread watching.

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
        self._waiting = False  # a client waits (in `get` or `aget`): the thread must wake it
        self._abandoned = False  # the client let go
        self.upstream = upstream
        self.over = False  # the client took the last item
        self._done = threading.Event()  # the thread let go of the body (and is idle again)
        # A sync client's body: read by whoever holds `_turn`; the client away since `_left`
        # (0.0: in `get`), its `_gets`-th; the thread, `_sleeping`, is woken by `_nudge`.
        self._shared = send is None and wake is None
        self._reading = not self._shared and upstream is not None  # may be blocked reading it
        self._body: Iterator[bytes] | None = None
        self._turn = threading.Lock()
        self._read_all = False  # the end was read (its item is on the way)
        self._left = time.monotonic()
        self._gets = 0
        self._sleeping = False
        self._nudge: queue.SimpleQueue[None] = queue.SimpleQueue()
        job = self._watch if self._shared else self._run
        # (In the sessions of the client's context: a `before_record` hook that sends runs
        # in the session that recorded, as it did in a thread started for the body.)
        _WORKERS.run(routes.carried(job), self._hand_last, self._done)

    # -- reading (whoever reads) ---------------------------------------------------------------

    def _step(self) -> object:
        """The next item of the body, read now (by the thread; of a shared body, by whoever
        holds `_turn`): a chunk, noted; at the end (or once the client let go), how the body
        ended."""
        try:
            body = self._body
            if body is None:
                body = self._body = iter(self.upstream.stream)
            data = next(body)
        except StopIteration:
            return self._end(None)
        except Exception as caught:  # the body's end: recorded, and the client's too
            return self._end(caught)
        except BaseException:  # the read interrupted (KeyboardInterrupt): the body is over
            self._let_go()  # (a generator that raised)
            raise
        if self._abandoned:
            return self._end(None)
        self._recording.got_chunk(data, moment=stamp_of(self.upstream))
        return data

    def _end(self, error: BaseException | None) -> object:
        """Close the upstream and store the recording: the body's last item for the client."""
        moment = stamp_of(self.upstream) if error is None else None  # (the end's arrival)
        self._let_go()
        if self._abandoned:
            return END
        try:
            self._recording.finish(error=error, moment=moment)  # at the network's time
        except Exception as failure:  # a before_record hook raised: the client hears of it
            return HookFailed(failure)
        return END if error is None else Failed(error)

    def _let_go(self) -> None:
        """The body is read to its end (or its read broke off): close the upstream."""
        with self._lock:  # from here on the connection may go back to the pool: no waking it
            self._read_all = True
            self._reading = False
        self._body = None
        _quietly(self.upstream.close)

    # -- the thread --------------------------------------------------------------------------

    def _run(self) -> object:
        """Send (with `send`), then read the body; the last item for the client."""
        upstream = self.upstream
        if self._send is not None:
            try:
                upstream = self._send()
            except BaseException as failure:  # no headers: the client gets the error
                return Failed(failure)
            with self._lock:
                self.upstream, abandoned = upstream, self._abandoned
                self._reading = not abandoned
            if abandoned:  # the client was cancelled while waiting for the headers
                _quietly(upstream.close)
                return END
            self._recording.got_headers(
                upstream.status_code, headers_of(upstream), stamp_of(upstream)
            )
            self._put(upstream)
        while True:
            item = self._step()
            if is_last(item):
                return item
            self._put(item)

    def _watch(self) -> object:
        """Watch a sync client read its body, and read for it while it is away; the last
        item, if the thread read it (else None: the client did, or let go)."""
        nap, gets = _AWAY, self._gets
        while True:
            if nap == _AWAY:
                self._sleeping = True  # then look: of the two, one sees the other (see `get`)
                if not self._left:  # in a read: sleep until it leaves
                    self._nap(_SLEEP)
                self._sleeping = False
            self._nap(nap)  # away, or coming and going: give it the time to come back
            if self._read_all or self._abandoned:
                return None
            left, cycles = self._left, self._gets - gets
            gets += cycles
            if left and time.monotonic() - left >= _AWAY and self._turn.acquire(False):
                try:
                    item = self._read_away()
                finally:
                    self._turn.release()
                    if self._waiting:  # the client came back to an empty queue: its turn
                        with self._lock:
                            self._lock.notify()
                if item is not None:
                    return item
                nap, gets = _AWAY, self._gets
            else:  # back, or away only just: a client that comes and goes fast, less often
                nap = min(2 * nap, _NAP_MAX) if cycles > 1 else _AWAY

    def _nap(self, seconds: float) -> None:
        """Wait `seconds`, or until the client nudges."""
        with contextlib.suppress(queue.Empty):
            self._nudge.get(timeout=seconds)

    def _read_away(self) -> object:
        """Read while the client is away (holding `_turn`), queueing each chunk; the body's
        last item, if it came (else None: the client is back)."""
        if self._read_all or self._abandoned:  # (`abandon` sees `_turn` taken, or this it)
            return None
        while self._left:
            item = self._step()
            if is_last(item):
                return item  # handed over once the thread is idle (`_hand_last`)
            self._put(item)
        return None

    def _hand_last(self, item: object) -> None:
        if item is not None:
            self._put(item)

    def _put(self, item: object) -> None:
        # The append needs no lock (a deque's is atomic); only a client that said it waits
        # (`_waiting`, set before it looks at the queue a last time; the GIL keeps the two
        # in order) is woken, so a client busy elsewhere costs no notify for each chunk.
        self._items.append(item)
        if not self._waiting:
            return
        with self._lock:
            self._lock.notify()
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
        if type(item) is not bytes:
            self.over = item is END or isinstance(item, Failed)
        return item

    def get(self) -> object:
        """The next item (a sync client): read now, if nobody else reads; else what the
        thread queued, waiting for it."""
        if not self._shared:
            if not self._items:  # the thread only appends: what is there stays there
                self._wait()
            return self._take()
        if self.over:  # (asked again, after the end)
            return END
        self._left = 0.0
        self._gets += 1
        try:
            while not self._items:
                if self._read_all or not self._turn.acquire(False):
                    self._wait()  # the thread reads (or read the end): for what it queues
                    continue
                try:
                    if self._items or self._read_all:  # it queued that before letting go
                        continue
                    item = self._step()
                finally:
                    self._turn.release()
                if self._abandoned:  # closed meanwhile from another thread, which left it here
                    self._close_unread()
                if is_last(item):
                    self.over = True
                    self._nudge.put(None)  # the thread's watch is over
                return item
            return self._take()
        except BaseException:  # interrupted (KeyboardInterrupt), reading or waiting
            self.over = True  # the client stopped there, as if it closed
            _quietly(functools.partial(self._recording.finish, stopped_by="client"))
            self.abandon()  # (the thread may be reading for it)
            self._nudge.put(None)
            raise
        finally:
            self._left = time.monotonic()
            if self._sleeping:  # then look again: one of the two sees the other
                self._sleeping = False
                self._nudge.put(None)

    def _wait(self) -> None:
        """Wait until the thread queued an item, or (a shared body) let go of its turn."""
        with self._lock:
            self._waiting = True
            try:
                while not self._items and (
                    not self._shared or self._read_all or self._turn.locked()
                ):
                    self._lock.wait()
            finally:
                self._waiting = False

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
                self._waiting = True  # before the last look: `_put` appends, then checks it
                if self._items:
                    self._waiting = False
                    return self._take()
                waiter = self._waiter = anyio.Event()
            try:
                await waiter.wait()
            finally:
                self._waiting = False

    def abandon(self) -> bool:
        """Make the thread let go (from any thread); False if a read it is blocked in cannot
        be woken (HTTP/2, a custom transport: it stops at its next chunk). A shared body's
        reader, the thread or another of the client's, is woken alike."""
        with self._lock:
            self._abandoned = True  # then look at `_turn`: a reader takes it, then looks here
            reading = self._reading or (self._shared and not self._read_all and self._turn.locked())
            if self.upstream is None or not reading:
                return True
            return interrupt(self.upstream)

    def close(self) -> None:
        """The client closed early (sync): stop the recording as the client's, let the
        thread go, and wait (briefly) until it released the connection."""
        stopped = self._stop()
        if self.abandon():
            self._nudge.put(None)  # a watching thread: its watch is over
            self._done.wait(CLOSE_WAIT)
        closed = self._shared and self._close_unread()  # nobody reads it: ended here
        if not closed and not self._done.is_set() and self.upstream is not None:
            _quietly(self.upstream.close)  # a read nothing can wake: end it from here
        with self._lock:
            remaining = list(self._items)
        _raise_hook_failure(stopped, remaining)

    def _close_unread(self) -> bool:
        """Close a shared body's upstream that nobody read to its end, unless a reader holds
        `_turn` (False: woken, it ends the body itself)."""
        if not self._turn.acquire(False):
            return False
        try:
            if not self._read_all:
                _quietly(self.upstream.close)
        finally:
            self._turn.release()
        return True

    async def aclose(self) -> None:
        """Async twin of `close`: waits on the client's loop (shielded, briefly)."""
        stopped = self._stop()
        self.abandon()
        remaining: list[object] = []
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_WAIT):
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
        if isinstance(item, HookFailed):
            raise item.error


def _quietly(close: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # the connection is being torn down: nothing to say
        close()
