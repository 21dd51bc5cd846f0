"""`replay check` across connections: a stream resumed after a drop continues it.

A linked scenario is a stream that dropped and the request that resumed it, later in the same
cassette (`replay.matching.resume`: an SSE client's `Last-Event-ID`, a Responses client's
`starting_after`). The resumed stream is checked as its client assembles it: the dropped
stream's events up to the resume point, then the resumed stream's (so a Responses stream
resumed at sequence 8 is not taken for one that forgot `response.created`); and its numbers
must continue (Responses `sequence_number`, SSE numeric `id:`s):

- `resume.continues` (error): the resumed stream starts right after the point the client
  named; one that starts earlier repeats events, one that starts later skips them.
- `resume.from` (warning): the client resumed from the last event it got; resuming from an
  earlier one has the events in between delivered twice.

The dropped stream's `stream.truncated` is then a note: the drop is what the scenario tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from replay import framing
from replay.dialects import Violation
from replay.faults import reshape
from replay.faults.resuming import response_id, resumed_after, sequence_numbers
from replay.framing.boundaries import event_ends
from replay.framing.timed_event import TimedEvent
from replay.matching.resume import ResumePoint, resume_point
from replay.model import Chunks, Interaction

__all__ = ["Link", "assembled", "links", "violations"]


@attrs.frozen
class Link:
    """Interaction `resuming` resumes the stream of interaction `dropped` at `point`."""

    dropped: int
    resuming: int
    point: ResumePoint


def _events(interaction: Interaction) -> list[TimedEvent]:
    response = interaction.response
    if not framing.is_stream(response):
        return []
    try:
        return framing.events(response)
    except ValueError:  # undecodable: `check` says so on its own
        return []


def _resumes(earlier: Interaction, events: list[TimedEvent], later: Interaction) -> bool:
    """Whether `later` (which resumes a stream) resumes the stream of `earlier`."""
    point = resume_point(later.request)
    if point is None or resumed_after(events, point) is None:
        return False
    if point.kind == "Last-Event-ID":
        before, after = earlier.request, later.request
        return before.method == after.method and before.url == after.url
    own = resume_point(earlier.request)
    return response_id(events) == point.response_id or (
        own is not None and own.response_id == point.response_id
    )


def links(interactions: Sequence[Interaction]) -> list[Link]:
    """Each interaction that resumes an earlier stream, linked to the latest one it resumes."""
    found: list[Link] = []
    events: dict[int, list[TimedEvent]] = {}
    for index, interaction in enumerate(interactions):
        point = resume_point(interaction.request)
        if point is None:
            continue
        for earlier in range(index - 1, -1, -1):
            if earlier not in events:
                events[earlier] = _events(interactions[earlier])
            if _resumes(interactions[earlier], events[earlier], interaction):
                found.append(Link(earlier, index, point))
                break
    return found


def _numbers(events: list[TimedEvent], point: ResumePoint) -> list[int | None]:
    """Each event's number: its `sequence_number`, or its SSE `id:` as a whole number."""
    if point.kind == "starting_after":
        return [n if isinstance(n, int) else None for n in sequence_numbers(events)]
    return [int(e.id) if e.id.isdigit() else None for e in events]


def violations(dropped: Interaction, resuming: Interaction, point: ResumePoint) -> list[Violation]:
    """How the numbers of `resuming` fail to continue those of `dropped` from `point`."""
    before, after = _events(dropped), _events(resuming)
    numbers, resumed = _numbers(before, point), _numbers(after, point)
    try:
        named = int(point.after)
    except ValueError:
        return []
    found = []
    last = next((n for n in reversed(numbers) if n is not None), None)
    if last is not None and named < last:
        message = f"the client resumed {point}, but it had got events up to {last}: "
        message += f"{named + 1}..{last} come twice"
        found.append(Violation("resume.from", message, None))
    first = next((n for n in resumed if n is not None), None)
    if first is not None and first != named + 1:
        how = f"repeats {first}..{named}" if first <= named else f"skips {named + 1}..{first - 1}"
        message = f"resumed {point}, the stream starts at {first}: it {how}"
        found.append(Violation("resume.continues", message, 0))
    return found


def assembled(dropped: Interaction, resuming: Interaction, point: ResumePoint) -> Interaction:
    """`resuming` as its client assembles it: the events of `dropped` up to `point`, then
    its own (its times after those); `resuming` itself when that cannot be told."""
    kept = resumed_after(_events(dropped), point)
    ends = event_ends(dropped.response) if kept is not None else []
    encoded = reshape._is_encoded(dropped.response) or reshape._is_encoded(resuming.response)
    if kept is None or kept >= len(ends) or encoded:
        return resuming
    head = reshape.cut_at(dropped.response, ends[kept]).chunks
    last = head.times[-1] if head.times else dropped.response.headers_at
    rest = resuming.response.chunks
    chunks = Chunks(
        [*head.times, *(last + t for t in rest.times)], [*head.payloads, *rest.payloads]
    )
    end = attrs.evolve(resuming.response.end, at=last + resuming.response.end.at)
    at = dropped.response.headers_at
    response = attrs.evolve(resuming.response, headers_at=at, chunks=chunks, end=end)
    return attrs.evolve(resuming, response=response)
