"""Where a request resumes a dropped stream: the point a reconnecting client names.

Two ways of resuming are known. A Server-Sent Events client sends the `id:` of the last event
it saw as the `Last-Event-ID` header (the `last_event_id` matcher, in the default `match_on`,
keys a request by it: a client resuming from event 4 does not get the answer recorded for a
resume from 5). OpenAI's Responses API in background mode resumes with
`GET /v1/responses/{id}?stream=true&starting_after=N` (the `query` matcher compares it).
`resume_point` reads either; `difference` words how two resume points differ, for a
mismatch message.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import parse_qsl, urlsplit

if TYPE_CHECKING:
    from replay.model import Request

__all__ = [
    "LAST_EVENT_ID",
    "ResumePoint",
    "difference",
    "last_event_id",
    "resume_point",
    "vcr_last_event_id",
]

#: The header an SSE client resumes with, lowercased.
LAST_EVENT_ID = "last-event-id"

#: A Responses resume: the response's id in the path.
_RESPONSE_PATH = re.compile(r"/responses/([^/]+)$")


class ResumePoint(NamedTuple):
    """Where a request resumes a stream.

    Attributes:
        kind: "Last-Event-ID" (an SSE client's header) or "starting_after" (a Responses
            background stream's query).
        after: the event id, or the sequence number, the client saw last.
        response_id: a Responses resume: the id of the response it resumes (else None).
    """

    kind: str
    after: str
    response_id: str | None = None

    def __str__(self) -> str:
        if self.kind == "starting_after":
            return f"after sequence_number {self.after} (starting_after={self.after})"
        return f"after event id {self.after!r} (Last-Event-ID: {self.after})"


def last_event_id(request: Request) -> str | None:
    """The request's `Last-Event-ID` header, or None (the `last_event_id` matcher's key)."""
    for name, value in request.headers:
        if len(name) == 13 and name.lower() == LAST_EVENT_ID:
            return value
    return None


def resume_point(request: Request) -> ResumePoint | None:
    """Where `request` resumes a stream, or None when it resumes none."""
    event_id = last_event_id(request)
    if event_id is not None:
        return ResumePoint("Last-Event-ID", event_id)
    if request.method.upper() != "GET" or "starting_after" not in request.url:
        return None
    parts = urlsplit(request.url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    found = _RESPONSE_PATH.search(parts.path)
    if "starting_after" not in query or found is None:
        return None
    return ResumePoint("starting_after", query["starting_after"], found.group(1))


def difference(wanted: Request, recorded: Request) -> str | None:
    """How the resume points of `wanted` and `recorded` differ, in words; None when equal."""
    mine, theirs = resume_point(wanted), resume_point(recorded)
    if mine == theirs:
        return None
    said = "does not resume a stream" if mine is None else f"resumes {mine}"
    was = "resumed no stream" if theirs is None else f"resumed {theirs}"
    if theirs is None:  # a drop the cassette does not hold
        was += " (to resume a stream recorded whole, drop it with the resume fault)"
    return f"the client {said}; the recorded request {was}"


def vcr_last_event_id(r1: Any, r2: Any) -> None:
    """vcrpy's form of the `last_event_id` matcher, for its explanation of a miss."""
    mine, theirs = _vcr_header(r1), _vcr_header(r2)
    if mine != theirs:
        raise AssertionError(f"Last-Event-ID {mine!r} != {theirs!r}")


vcr_last_event_id.__name__ = "last_event_id"


def _vcr_header(request: Any) -> str | None:
    headers = request.headers
    return next((v for k, v in headers.items() if k.lower() == LAST_EVENT_ID), None)
