"""What `replay report` draws of one interaction: `StreamView`, gathered from the library.

Below `replay.inspect.report` (which lays out the page and exports these) and the modules that draw
(`replay.inspect.report_svg`, `_report_growth`, `_report_table`), so that they all read one value
without importing the page.
"""

from __future__ import annotations

import attrs

from replay import framing
from replay.dialects import closed_after_end, detect
from replay.dialects.kinds import EventKind, event_kinds, output_tokens
from replay.dialects.realtime import detect_frames
from replay.inspect import timing
from replay.inspect.check import Finding, interaction_findings
from replay.inspect.frames_view import frame_events
from replay.model import Interaction, StreamEnd, TimedEvent
from replay.redact.redactor import Redactor

__all__ = ["StreamView", "view"]


@attrs.frozen(kw_only=True)
class StreamView:
    """One interaction as the report draws it: what the library computed of it.

    Args:
        label: which cassette it is from ("" for a report of one cassette, else its name).
        index: its index in that cassette.
        method, url: the request's; the URL redacted.
        status: the response's status.
        framing: "sse", "ndjson", "json-array", "websocket" (a conversation, its frames the
            events: `replay.inspect.frames_view`), or None for a response that is no stream.
        dialect: `replay.dialects.detect`'s answer (None: none, or not a stream).
        events: the events (`replay.framing.events`).
        kinds: what each event is (`replay.dialects.kinds.event_kinds`).
        chunk_times, chunk_sizes: each chunk's arrival (seconds) and bytes, as recorded.
        headers_at: when the response headers came.
        timing: `replay.inspect.timing.summary`.
        gaps: `replay.inspect.timing.gaps`: gap `i` follows event `i`.
        end: how the body ended.
        closed_after_end: the client closed it after its dialect's terminal event: complete
            (`replay.dialects.closed_after_end`).
        findings: `replay check`'s findings.
        output_tokens: the tokens the stream's usage reports, if it does.
        problem: why the body's events could not be read (None when they could).
    """

    label: str
    index: int
    method: str
    url: str
    status: int
    framing: str | None
    dialect: str | None
    events: tuple[TimedEvent, ...]
    kinds: tuple[EventKind, ...]
    chunk_times: tuple[float, ...]
    chunk_sizes: tuple[int, ...]
    headers_at: float
    timing: timing.Timing
    gaps: tuple[float, ...]
    end: StreamEnd
    findings: tuple[Finding, ...]
    output_tokens: int | None
    problem: str | None
    closed_after_end: bool = False

    @property
    def body_bytes(self) -> int:
        """The body's size as recorded (compressed if it was)."""
        return sum(self.chunk_sizes)


_REDACTOR = Redactor()


def view(interaction: Interaction, index: int = 0, label: str = "") -> StreamView:
    """What the report draws of `interaction` (interaction `index` of cassette `label`)."""
    request, response = interaction.request, interaction.response
    detected = framing.detect(response)
    kind: str | None = detected
    events: list[TimedEvent] = []
    problem = None
    if interaction.frames is not None:  # a WebSocket conversation: its frames are its events
        kind, events = "websocket", frame_events(interaction.frames)
    elif detected is not None:
        try:
            events = framing.events(response, detected)
        except ValueError as error:  # damaged, unknown, missing its extra, past the limit
            problem = str(error)
    return StreamView(
        label=label,
        index=index,
        method=request.method,
        url=_REDACTOR.url(request.url),
        status=response.status,
        framing=kind,
        dialect=detect_frames(interaction.frames)
        if kind == "websocket"
        else detect(events)
        if kind in ("sse", "json-array", "eventstream")
        else None,
        events=tuple(events),
        kinds=tuple(event_kinds(events)),
        chunk_times=response.chunks.times,
        chunk_sizes=tuple(map(len, response.chunks.payloads)),
        headers_at=response.headers_at,
        timing=timing.summary(response, events=events),
        gaps=tuple(timing.gaps(response, events=events)),
        end=response.end,
        findings=tuple(interaction_findings(interaction, label or "cassette", index)),
        output_tokens=output_tokens(events),
        problem=problem,
        closed_after_end=closed_after_end(interaction),
    )
