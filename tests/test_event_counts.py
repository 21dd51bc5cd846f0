"""Every count of events goes by the body's framing: `replay record`'s live progress line
(counted in the program as it reads, `replay.framing.boundaries.EventEnds`) and its closing
summary count NDJSON lines, JSON-array elements and AWS event-stream messages as they count
SSE events.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

import pytest
from commands import read_pty

import replay
from replay.dialects import converse, gemini
from replay.framing import eventstream
from replay.framing.boundaries import EventEnds, event_ends
from replay.run.child import summary_lines
from replay.testing import Origin, Script

NDJSON = [b'{"n": %d, "done": false}\n' % n for n in range(6)] + [b'{"done": true}\n']
_DRAW = re.compile(r"replay: recording: 1 request, (\d+) events?")
PROGRAM = """
import sys
import httpx

with httpx.Client(timeout=30) as client, client.stream("GET", sys.argv[1]) as response:
    for chunk in response.iter_raw():
        pass
print("done")
"""


@pytest.mark.parametrize("kind", ["ndjson", "json-array", "eventstream"])
def test_the_summary_counts_the_events_of_every_framing(kind: str) -> None:
    interaction = {
        "ndjson": lambda: replay.Interaction(
            replay.Request(method="POST", url="http://127.0.0.1/api/chat"),
            replay.Response(
                status=200,
                headers=[("content-type", "application/x-ndjson")],
                chunks=[replay.Chunk(0.1 * (n + 1), line) for n, line in enumerate(NDJSON)],
            ),
        ),
        "json-array": lambda: gemini.stream("One two three", framing="json-array"),
        "eventstream": lambda: converse.stream("One two three"),
    }[kind]()
    count = len(interaction.response.events())
    assert count >= 3
    lines = summary_lines(Path("c.msgpack"), [interaction])
    assert lines[2].split()[3] == str(count)
    assert f", {count} events, " in lines[3]


def _body(kind: str) -> tuple[list[bytes], str]:
    if kind == "sse":
        return [b"data: one\n\n", b"data: two\n\nda", b"ta: three\n\n"], "text/event-stream"
    if kind == "ndjson":
        return NDJSON, "application/x-ndjson"
    if kind == "json-array":  # declared as plain JSON: told by the start of the stream
        array = gemini.stream("One two three four five", framing="json-array").response
        return list(array.chunks.payloads), "application/json; charset=UTF-8"
    body = converse.stream("One two three four five").response.body
    pieces = [body[at : at + 50] for at in range(0, len(body), 50)]  # split inside messages
    return pieces, eventstream.CONTENT_TYPE


@pytest.mark.parametrize("kind", ["ndjson", "json-array", "eventstream"])
def test_the_live_progress_line_counts_lines_elements_and_messages(
    tmp_path: Path, kind: str
) -> None:
    pieces, content_type = _body(kind)
    expected = len(event_ends(_response(pieces, content_type), kind))  # type: ignore[arg-type]
    script = Script(
        chunks=[(0.12, piece) for piece in pieces], headers=[("content-type", content_type)]
    )
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent(PROGRAM))
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    with Origin({"/stream": script}) as origin:
        command = [sys.executable, "-m", "replay.cli", "record", str(tmp_path / "c.msgpack"),
                   "--", sys.executable, str(app), f"{origin.url}/stream"]  # fmt: skip
        process = subprocess.Popen(
            command, stdout=terminal, stderr=terminal, start_new_session=True
        )
        os.close(terminal)
        shown = read_pty(controller, deadline=time.monotonic() + 60)
        process.wait(timeout=30)
    assert process.returncode == 0, shown
    counts = [int(n) for n in _DRAW.findall(shown)]
    assert counts, shown
    assert counts == sorted(counts)
    assert 0 < max(counts) <= expected  # (a last draw may come before the last event)
    assert f", {expected} event" in shown  # the summary, from the cassette


@pytest.mark.parametrize("kind", ["sse", "ndjson", "json-array", "eventstream"])
@pytest.mark.parametrize("size", [1, 7, 100000])
def test_a_counter_without_a_framing_tells_it_from_the_start(kind: str, size: int) -> None:
    pieces, content_type = _body(kind)
    body = b"".join(pieces)
    counter = EventEnds()
    found = [end for at in range(0, len(body), size) for end in counter.feed(body[at : at + size])]
    assert found + counter.close() == event_ends(_response(pieces, content_type))
    assert counter.kind == kind


def test_a_counter_without_a_framing_counts_nothing_in_a_body_that_is_none() -> None:
    counter = EventEnds()
    assert counter.feed(b'{"answer": 42}') == []
    assert counter.close() == []
    assert counter.kind is None


def _response(pieces: list[bytes], content_type: str) -> replay.Response:
    chunks = [replay.Chunk(0.1 * (n + 1), piece) for n, piece in enumerate(pieces)]
    return replay.Response(status=200, headers=[("content-type", content_type)], chunks=chunks)
