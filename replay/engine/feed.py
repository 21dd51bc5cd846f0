"""What a recording's reader hands its client, and the client's side of it: one of each.

A body being recorded is read by a reader (`replay.adapters.reader.ThreadReader`, in a worker
thread; `replay.adapters.record`'s task on the client's loop), which notes each chunk on the
`Recording` and hands the client items: each chunk (bytes) as it came, then how the body
ended, `END` or `Failed` (the error the client gets). Every shell that records (httpx and
httpx2, sync and async; requests) reads those items through `SyncFeed` or `AsyncFeed`.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Final, Protocol, cast

__all__ = [
    "CLOSE_WAIT",
    "END",
    "AsyncFeed",
    "Failed",
    "HookFailed",
    "Reader",
    "SyncFeed",
    "is_last",
]

#: The last item of a body that ended cleanly (or that the client let go of).
END: Final = object()

#: How long closing early waits (at most) for the reader to let go of the connection.
CLOSE_WAIT: Final = 0.5


class Failed:
    """The last item of a body that ended with `error` (or of a send that got no headers)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class HookFailed(Failed):
    """Storing the recording failed (a `before_record` hook raised)."""


def is_last(item: object) -> bool:
    """Whether `item` ends a body (a chunk is bytes, as a rule: looked at first)."""
    return type(item) is not bytes and (item is END or isinstance(item, Failed))


class Reader(Protocol):
    """What a feed asks of the reader of one body."""

    @property
    def over(self) -> bool:
        """True once the client took the last item."""
        ...

    def get(self) -> object:
        """The next item (a sync client), waiting for it."""
        ...

    async def aget(self) -> object:
        """The next item, waiting for it on the client's event loop."""
        ...

    def abandon(self) -> bool:
        """Make the reader let go (from any thread)."""
        ...

    def close(self) -> None:
        """The client closed early (sync)."""
        ...

    async def aclose(self) -> None:
        """The client closed early (async)."""
        ...


class SyncFeed:
    """A sync client's body: the chunks its reader hands out; the end raised if it failed."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        # A generator, not `return self`: httpx2 iterates its stream with `yield from`, which
        # calls the iterator's `close` when the client abandons it; that must not be ours.
        get = self._reader.get
        while True:
            item = get()
            if type(item) is bytes:
                yield item
            elif item is END:
                return
            elif isinstance(item, Failed):
                raise item.error
            else:  # a chunk of a subclass of bytes
                yield cast(bytes, item)

    def close(self) -> None:
        """Stop reading (once): the recording ends as the client left it."""
        if not self._closed:
            self._closed = True
            self._reader.close()


class AsyncFeed:
    """An async client's body (an iterator class: nothing for the event loop to finalize);
    dropped unclosed, it lets the reader go."""

    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._closed = False
        weakref.finalize(self, reader.abandon)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self._reader.over:
            raise StopAsyncIteration
        item = await self._reader.aget()
        if isinstance(item, Failed):
            raise item.error
        if item is END:
            raise StopAsyncIteration
        assert isinstance(item, bytes)
        return item

    async def aclose(self) -> None:
        """Stop reading (once): the recording ends as the client left it."""
        if not self._closed:
            self._closed = True
            await self._reader.aclose()
