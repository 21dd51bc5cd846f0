"""What `replay record` and `replay run` show on stderr, beside the program's own output.

Owns the live status line while a program records (the child's `Progress` lines on a pipe,
redrawn as one terminal line) and the summary of what a run recorded, printed at its end.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from replay._progress import Progress, is_event_stream
from replay.model import Interaction, TimedEvent

__all__ = ["StatusLine", "is_terminal", "summary_lines"]


# -- the summary -------------------------------------------------------------------------------


def summary_lines(path: Path, recorded: Sequence[Interaction]) -> list[str]:
    """What a run recorded: a headline, one row per interaction, a total line.

    Each row: method, URL, status, SSE events ("-" for a body that is not an event stream),
    time to first token (the first event, else the first body byte) and duration. Reads
    only what the cassette holds, which is already redacted.
    """
    if not recorded:
        return [
            f"replay: nothing recorded into {path} (no httpx or httpx2 request reached replay; "
            "is CMD a Python program with replay installed?)"
        ]
    rows = [("method", "url", "status", "events", "ttft", "duration")]
    total_events = total_bytes = 0
    for interaction in recorded:
        request, response = interaction.request, interaction.response
        events = _events(interaction)
        total_events += len(events or ())
        total_bytes += len(response.body)
        first = events[0].at if events else response.ttfb
        rows.append(
            (
                request.method,
                request.url,
                str(response.status),
                "-" if events is None else str(len(events)),
                "-" if first is None else _seconds(first),
                _seconds(response.duration),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = [f"replay: recorded {_count(len(recorded), 'interaction')} into {path}"]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append(("  " + "  ".join(cells)).rstrip())
    lines.append(
        f"  total: {_count(len(recorded), 'interaction')}, {_count(total_events, 'event')}, "
        f"{_size(total_bytes)}"
    )
    return lines


def _events(interaction: Interaction) -> list[TimedEvent] | None:
    response = interaction.response
    if not is_event_stream(response):
        return None
    try:
        return list(response.events())
    except ValueError:  # a body that is not valid gzip / deflate
        return []


# -- the live status line ----------------------------------------------------------------------


def is_terminal(stream: TextIO) -> bool:
    """True when `stream` is a terminal (False for a closed stream or one without isatty)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


class StatusLine:
    """Shows the child's progress lines as one terminal line, rewritten in place.

    The child writes `Progress` lines on a pipe (`write_fd`, inherited by the child only);
    a thread reads them and redraws. Reading polls with a timeout rather than waiting for
    the end of the pipe, which a forked grandchild could keep open after the child exits.
    """

    POLL_SECONDS = 0.05

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.read_fd, self.write_fd = os.pipe()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="replay-status", daemon=True)
        self._drawn = False

    def start(self) -> None:
        """Start drawing; the child now holds the write end (ours is closed)."""
        os.close(self.write_fd)
        self.write_fd = -1
        self._thread.start()

    def close(self) -> None:
        """Stop drawing, erase the line, release the pipe."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._drawn:
            self._write("\r\x1b[K")
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _pump(self) -> None:
        pending = b""
        for data in self._reads():
            pending += data
            *lines, pending = pending.split(b"\n")
            latest = next(filter(None, map(Progress.decode, reversed(lines))), None)
            if latest is not None:
                self._draw(latest)

    def _reads(self) -> Iterator[bytes]:
        while not self._stopped.is_set():
            ready, _, _ = select.select([self.read_fd], [], [], self.POLL_SECONDS)
            if not ready:
                continue
            data = os.read(self.read_fd, 4096)
            if not data:
                return
            yield data

    def _draw(self, progress: Progress) -> None:
        text = (
            f"replay: recording: {_count(progress.requests, 'request')}, "
            f"{_count(progress.events, 'event')}, {_size(progress.body_bytes)}"
        )
        try:
            width = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError):
            width = 0
        width = width or 80  # a terminal of unknown size says 0
        self._write(f"\r{text[: max(width - 1, 10)]}\x1b[K")
        self._drawn = True

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.write(text)
            self.stream.flush()


# -- numbers and units -------------------------------------------------------------------------


def _seconds(value: float) -> str:
    return f"{value:.3f} s"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _size(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"
