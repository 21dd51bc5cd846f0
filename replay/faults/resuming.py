"""The `resume` fault's arithmetic: which recorded stream a resume request asks for, and the
rest of it, from the event after the one the client names.

A stream the fault cut is resumed the way its client resumes it: by an SSE client's
`Last-Event-ID` (the `id:` of the last event it saw; the request otherwise the one that
opened the stream) or by OpenAI Responses' `GET /v1/responses/{id}?stream=true&starting_after=N`
(the `sequence_number` of the last event it saw, in the stream of response `id`). The answer
is the recording's own: its headers, then the body bytes after that event, each chunk as
long after the headers as it came after that event, then the recorded end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from replay import framing
from replay.faults import reshape
from replay.framing.boundaries import event_ends
from replay.matching.resume import ResumePoint
from replay.model import Chunks, Interaction, Response
from replay.redact import deep_json

if TYPE_CHECKING:
    from replay.framing.timed_event import TimedEvent
    from replay.model import Request

__all__ = ["answer", "response_id", "resumed_after", "sequence_numbers"]


def _payload(event: TimedEvent) -> dict[str, object] | None:
    try:
        parsed = deep_json.loads(event.data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def sequence_numbers(events: list[TimedEvent]) -> list[object]:
    """Each event's Responses `sequence_number` (None where it has none)."""
    return [(_payload(event) or {}).get("sequence_number") for event in events]


def response_id(events: list[TimedEvent]) -> str | None:
    """The id of the Responses response whose stream `events` are (its first lifecycle
    event's `response.id`), or None."""
    for event in events[:3]:
        response = (_payload(event) or {}).get("response")
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            return str(response["id"])
    return None


def resumed_after(events: list[TimedEvent], point: ResumePoint) -> int | None:
    """The index of the event `point` names in `events` (the last one the client saw), or
    None when the stream has none such: for `Last-Event-ID`, the first event whose `id:`
    is that id; for `starting_after`, the event of that `sequence_number`."""
    if point.kind == "starting_after":
        try:
            wanted: object = int(point.after)
        except ValueError:
            return None
        numbers = sequence_numbers(events)
        return numbers.index(wanted) if wanted in numbers else None
    return next((i for i, event in enumerate(events) if event.id == point.after), None)


def _rest(response: Response, offset: int, since: float) -> Response:
    """The response's body from byte `offset` on, each time counted from `since` (when the
    event the client saw last came) on from the headers."""
    times, payloads, index = reshape._split(response, offset)
    at = response.headers_at
    kept = [max(at, at + t - since) for t in times[index:]]
    end_at = max(at, at + response.end.at - since, *kept[-1:])
    return attrs.evolve(
        response,
        chunks=Chunks(kept, payloads[index:]),
        end=attrs.evolve(response.end, at=end_at),
    )


def answer(
    interaction: Interaction,
    wanted: Request,
    point: ResumePoint,
    same: Callable[[Request, Request], bool],
) -> Response | None:
    """The rest of `interaction`'s recorded stream for `wanted`, which resumes it at `point`;
    None when `wanted` does not resume this stream (for `Last-Event-ID`, a request that
    `same(wanted, recorded)` does not find the same; another response id; no event of that
    id or sequence number)."""
    response = interaction.response
    if not framing.is_stream(response):
        return None
    if point.kind == "Last-Event-ID" and not same(wanted, interaction.request):
        return None
    events = framing.events(response)
    if point.kind == "starting_after" and response_id(events) != point.response_id:
        return None
    index = resumed_after(events, point)
    ends = event_ends(response)
    if index is None or index >= len(ends):
        return None
    return _rest(response, ends[index], events[index].at)
