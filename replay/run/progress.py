"""Progress of a `replay record` run, counted in the program and shown by the parent.

A router placed in front of the session (`patch.set_front`) counts requests as they are
made, and events (of any framing: the one its Content-Type declares, else the one its start
shows; `replay.framing.boundaries`) and body bytes as the program reads the bodies; the
running total goes to the parent on the status pipe as one ASCII line,
`"<requests> <events> <bytes>\\n"`, at most ten times a second. The parent draws it as its
live status line.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs

from replay.adapters import patch
from replay.adapters.httpmod import async_stream, module_of, sync_stream
from replay.errors import hide_for_replay_errors
from replay.framing import framing_of_type
from replay.framing.boundaries import EventEnds
from replay.session.lifecycle import CassetteSession

__all__ = ["REPORT_INTERVAL", "Progress", "ProgressReporter"]

#: The least time between two progress lines, in seconds.
REPORT_INTERVAL = 0.1


@attrs.frozen
class Progress:
    """What a recording has caught so far: requests, events and body bytes."""

    requests: int = 0
    events: int = 0
    body_bytes: int = 0

    def __add__(self, other: Progress) -> Progress:
        return Progress(
            self.requests + other.requests,
            self.events + other.events,
            self.body_bytes + other.body_bytes,
        )

    def encode(self) -> bytes:
        """The line written on the status pipe."""
        return f"{self.requests} {self.events} {self.body_bytes}\n".encode("ascii")

    @classmethod
    def decode(cls, line: bytes) -> Progress | None:
        """Read a status line back; None if it is not one (never trust a pipe blindly)."""
        try:
            requests, events, size = (int(field) for field in line.split())
        except ValueError:
            return None
        return cls(requests, events, size)


class _Tally:
    """Counts the events and bytes of one response body as the program reads it."""

    def __init__(self, reporter: ProgressReporter, headers: Any) -> None:
        self.reporter = reporter
        encoded = (headers.get("content-encoding") or "identity").lower() != "identity"
        # A compressed body's events would need decoding first: its bytes alone are counted.
        self.ends = None if encoded else EventEnds(framing_of_type(headers.get("content-type")))

    def feed(self, data: bytes) -> bytes:
        events = 0
        if self.ends is not None:
            try:
                events = len(self.ends.feed(data))
            except ValueError:  # a damaged event stream: its bytes alone are counted from here
                self.ends = None
        self.reporter.add(Progress(0, events, len(data)))
        return data

    def finish(self) -> None:
        """The body's end: count what it completes (a last line without its LF, a short
        stream whose framing only its whole body shows)."""
        with contextlib.suppress(ValueError):
            events = len(self.ends.close()) if self.ends is not None else 0
            if events:
                self.reporter.add(Progress(0, events, 0))


class _CountedSync:
    """A sync body source that tallies each chunk on its way to the program."""

    def __init__(self, stream: Any, tally: _Tally) -> None:
        self.stream = stream
        self.tally = tally

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.stream:
            yield self.tally.feed(chunk)
        self.tally.finish()

    def close(self) -> None:
        self.stream.close()


class _CountedAsync:
    """Async twin of `_CountedSync`."""

    def __init__(self, stream: Any, tally: _Tally) -> None:
        self.stream = stream
        self.tally = tally

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            yield self.tally.feed(chunk)
        self.tally.finish()

    async def aclose(self) -> None:
        await self.stream.aclose()


class ProgressReporter:
    """A router in front of the session: tallies requests, events and body bytes as the
    program reads them, and writes the running total on the status pipe, at most once per
    `REPORT_INTERVAL` (and once more at `flush`).

    Writing happens in the program's own threads, a few bytes at a time, on a non-blocking
    descriptor: a parent that stops reading loses lines, it never stalls the program.
    """

    def __init__(self, session: CassetteSession, status_fd: int) -> None:
        self.session = session
        self.status_fd: int | None = status_fd
        self._progress = Progress()
        self._sent = Progress()
        self._sent_at = -math.inf
        self._lock = threading.Lock()
        with contextlib.suppress(OSError):
            os.set_blocking(status_fd, False)

    def handle(self, request: Any, send: patch.Send) -> Any:
        """Count the request, let the session answer it, count its body as it is read."""
        __tracebackhide__ = hide_for_replay_errors
        self.add(Progress(requests=1))
        response = self.session.handle(request, send)
        tally = _Tally(self, response.headers)
        response.stream = sync_stream(module_of(response), _CountedSync(response.stream, tally))
        return response

    async def ahandle(self, request: Any, send: patch.AsyncSend) -> Any:
        """Async twin of `handle`."""
        __tracebackhide__ = hide_for_replay_errors
        self.add(Progress(requests=1))
        response = await self.session.ahandle(request, send)
        tally = _Tally(self, response.headers)
        response.stream = async_stream(module_of(response), _CountedAsync(response.stream, tally))
        return response

    def add(self, progress: Progress) -> None:
        """Add to the running total; report it if the last report is old enough."""
        with self._lock:
            self._progress += progress
            if time.monotonic() - self._sent_at >= REPORT_INTERVAL:
                self._send()

    def flush(self) -> None:
        """Report the running total if it changed since the last report."""
        with self._lock:
            self._send()

    def forget_fork(self) -> None:
        """In a forked child: no reporting (only the direct child reports), a fresh lock."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self.status_fd = None

    def _send(self) -> None:
        if self.status_fd is None or self._progress == self._sent:
            return
        self._sent, self._sent_at = self._progress, time.monotonic()
        try:
            os.write(self.status_fd, self._progress.encode())
        except BlockingIOError:  # the pipe is full: this line is dropped, the next one counts
            pass
        except OSError:  # the parent is gone: stop talking
            self.status_fd = None
