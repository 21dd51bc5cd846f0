"""What `replay record` and `replay run` show on stderr, beside the program's own output.

Owns the live status line while a program records (the child's `Progress` lines on a pipe,
redrawn as one terminal line) and the summary of what a run recorded, printed at its end.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from replay.framing import is_stream
from replay.inspect.frames_view import frame_events
from replay.inspect.timing import ttft
from replay.model import Interaction, TimedEvent
from replay.run.progress import Progress

__all__ = ["Reach", "StatusLine", "is_terminal", "summary_lines"]


# -- the summary -------------------------------------------------------------------------------


def summary_lines(path: Path, recorded: Sequence[Interaction]) -> list[str]:
    """What a run recorded: a headline, one row per interaction, a total line.

    Each row: method, URL, status, events (of any framing, a WebSocket conversation's frames;
    "-" for a body that is no stream),
    time to first token (`replay.inspect.timing.ttft`: the first text delta, else the first event;
    "-" for none) and duration. Reads only what the cassette holds, which is already
    redacted.
    """
    if not recorded:
        return [f"replay: nothing recorded into {path}"]
    rows = [("method", "url", "status", "events", "ttft", "duration")]
    total_events = total_bytes = 0
    for interaction in recorded:
        request, response = interaction.request, interaction.response
        events = _events(interaction)
        total_events += len(events or ())
        total_bytes += len(response.body) + sum(len(f.data) for f in interaction.frames or ())
        first = ttft(response) if events and interaction.frames is None else None
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
    if interaction.frames is not None:
        return frame_events(interaction.frames)
    response = interaction.response
    if not is_stream(response):
        return None
    try:
        return list(response.events())
    except ValueError:  # a body that is not valid gzip / deflate
        return []


# -- whether the program's requests reached the cassette -----------------------------------------


class Reach:
    """Tells whether any request of the program went through the cassette, and if none did,
    why that may be: a program that is not Python, or runs Python in isolated mode, never
    loads replay; a Python program may use a client replay does not serve.

    Each process of the program that loaded replay writes its count into `path` as it ends
    (`replay.run.site.ENV_REACH_DIR`). Use as a context manager: the directory is removed
    at the end.
    """

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="replay-reach-"))

    def __enter__(self) -> Reach:
        return self

    def __exit__(self, *exc_info: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def verdict(self) -> str | None:
        """The line to print when no request went through the cassette; None otherwise."""
        counts = []
        for report in self.path.iterdir():
            with contextlib.suppress(OSError, ValueError):
                counts.append(int(report.read_text()))
        if not counts:
            return (
                "replay: no request went through the cassette: no process of CMD loaded replay "
                "(CMD is not a Python program, or runs Python with -I, -S or -E, or a Python "
                "without replay installed)"
            )
        if sum(counts) == 0:
            return (
                "replay: no request went through the cassette: CMD sent none through httpx, "
                "httpx2, httpcore, aiohttp, requests, urllib3 or http.client (the clients replay "
                "serves)"
            )
        return None


# -- the live status line ----------------------------------------------------------------------


def is_terminal(stream: TextIO) -> bool:
    """True when `stream` is a terminal (False for a closed stream or one without isatty)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


class StatusLine:
    """Shows the child's progress on the terminal's last row, out of the program's way.

    The program writes to the same terminal, often a token at a time with no line break, so
    the status line cannot share the program's line: it would erase what the program wrote.
    As apt does, the terminal's scrolling region is set to every row but the last; the
    program's output scrolls above, and each redraw saves the cursor, writes on the last
    row and puts the cursor back, in one write. At the end the region is reset and the row
    cleared. A terminal too small for this (fewer than 3 rows) gets no status line.

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
        self._rows = 0

    def start(self) -> None:
        """Keep the last row for the status, and start drawing; the child now holds the
        write end of the pipe (ours is closed)."""
        os.close(self.write_fd)
        self.write_fd = -1
        rows, _ = self._size()
        if rows >= 3:
            self._rows = rows
            # A line break first, so that the row given up is not one with text on it; then
            # the region (which homes the cursor), and the cursor back where it was.
            self._write(f"\n\x1b[1A\x1b7\x1b[1;{rows - 1}r\x1b8")
        self._thread.start()

    def close(self) -> None:
        """Stop drawing, erase the line, release the pipe."""
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._rows:  # clear the status row, give it back, and put the cursor back
            self._write(f"\x1b7\x1b[{self._rows};1H\x1b[K\x1b[r\x1b8")
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
        if not self._rows:
            return
        width = self._size()[1] or 80  # a terminal of unknown size says 0
        shown = text[: max(width - 1, 10)]
        self._write(f"\x1b7\x1b[{self._rows};1H{shown}\x1b[K\x1b8")

    def _size(self) -> tuple[int, int]:
        """The terminal's rows and columns; (0, 0) when unknown."""
        try:
            size = os.get_terminal_size(self.stream.fileno())
        except (OSError, ValueError):
            return 0, 0
        return size.lines, size.columns

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
