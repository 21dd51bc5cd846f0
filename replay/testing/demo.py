"""`replay demo`: record a streaming Responses API call from a local origin, then replay it.

Everything stays on 127.0.0.1: a local origin streams the Responses API events of the
reference stream ("Hello there, how may I assist you today?") with realistic timing; an
httpx client reads it live through `use_cassette` (the real recording path), then replays
it at 1x, 10x and instant. Each run is measured the way a client would: the time each SSE
event was complete, from sending the request.

The live run is measured after a warm-up request through the same path (into a scratch
cassette): a process's first request pays once for what every later one reuses (imports,
the recording's helper process, the first connection), which the replays, later in the same
process, never pay: measured cold, live would look slower than its own replay at 1x.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import httpx

from replay.framing.sse import SSEParser
from replay.session.lifecycle import use_cassette
from replay.testing.origin import Origin

__all__ = ["LEGEND", "DemoRun", "format_report", "run_demo"]

#: The runs of the demo: the live recording, then replays at these speeds.
SPEEDS: tuple[tuple[str, str], ...] = (("1x", "1"), ("10x", "10"), ("instant", "instant"))


@attrs.frozen
class DemoRun:
    """One pass over the stream: its label, each event's type and time, the text, the total."""

    label: str
    events: tuple[tuple[str, float], ...]
    text: str
    total: float

    @property
    def first_event(self) -> float:
        """Seconds from sending the request to the first complete event."""
        return self.events[0][1] if self.events else float("nan")


def _stream(client: httpx.Client, url: str, label: str) -> DemoRun:
    parser = SSEParser()
    events: list[tuple[str, float]] = []
    text: list[str] = []
    body = {"model": "demo", "input": "Say hello", "stream": True}
    start = time.perf_counter()
    with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        for chunk in response.iter_raw():
            now = time.perf_counter() - start
            for event in parser.feed(chunk):
                events.append((event.event, now))
                if event.event == "response.output_text.delta":
                    text.append(json.loads(event.data)["delta"])
    total = time.perf_counter() - start
    return DemoRun(label, tuple(events), "".join(text), total)


def run_demo(
    cassette: Path | None = None, progress: Callable[[str], None] | None = None
) -> list[DemoRun]:
    """Record the local origin's stream into `cassette` (a temporary file by default) and
    replay it at 1x, 10x and instant; return the four measured runs."""
    say = progress or (lambda _message: None)
    with tempfile.TemporaryDirectory() as scratch:
        path = cassette or Path(scratch) / "demo.msgpack"
        with Origin() as origin, httpx.Client(timeout=10) as client:
            url = f"{origin.url}/v1/responses"
            say("warming up: one request through the recording path, not measured")
            with use_cassette(Path(scratch) / "warm-up.msgpack", record_mode="all"):
                _stream(client, url, "warm-up")
            say(f"recording POST {url} into {path}")
            with use_cassette(path, record_mode="all"):
                runs = [_stream(client, url, "live")]
        # The origin is gone: from here on, every byte comes from the cassette.
        for label, speed in SPEEDS:
            say(f"replaying at {label}")
            with use_cassette(path, record_mode="none", speed=speed), httpx.Client() as client:
                runs.append(_stream(client, url, label))
    return runs


def format_report(runs: list[DemoRun]) -> str:
    """The runs side by side: each event's time in each run, then TTFE, total and the text."""
    names = [f"{run.label:>9}" for run in runs]
    lines = [f"{'event':<30}{''.join(names)}   (seconds since the request was sent)"]
    for index, (kind, _) in enumerate(runs[0].events):
        times = "".join(
            f"{run.events[index][1]:9.3f}" if index < len(run.events) else f"{'-':>9}"
            for run in runs
        )
        lines.append(f"{kind:<30}{times}")
    lines.append(f"{'time to first event':<30}{''.join(f'{r.first_event:9.3f}' for r in runs)}")
    lines.append(f"{'total':<30}{''.join(f'{r.total:9.3f}' for r in runs)}")
    same = all(r.text == runs[0].text and len(r.events) == len(runs[0].events) for r in runs)
    lines.append("")
    lines.append(f"text: {runs[0].text!r}")
    verdict = "the same events and text" if same else "DIFFERENT events or text"
    lines.append(f"every replay gave {verdict} as the live stream, with no network")
    lines.append("")
    lines.extend(LEGEND)
    return "\n".join(lines)


#: What the columns of the report mean.
LEGEND = (
    "columns: seconds from sending the request to each complete SSE event, as the client saw it",
    "  live     the local origin's stream, recorded through replay (after one warm-up request,",
    "           so that neither it nor the replays pay a process's first-request setup)",
    "  1x       the cassette replayed at the recorded pace: live's times, give or take a few ms",
    "  10x      ten times faster; instant: no waiting at all (the client's own parsing only)",
)
