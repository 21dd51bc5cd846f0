"""Values the loader checked, made without their validators.

`replay.store.validate.quick` checks every value of a file against what the model's validators
would refuse; each validator then costs as much again, once per field of every cassette
loaded (most of loading a test's cassette). These make the same objects by the slots' own
setters, as attrs' `__init__` does on a frozen class. (Unrolled: a loop over the setters
cost loading a test's cassette 20k instructions more.) tests/test_model.py pins them to the
constructors. The httpx capture (`replay.adapters.httpx_capture`) makes its requests here
too: httpx made their values valid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from replay.model import Chunks, Headers, Interaction, Request, Response, StreamEnd

__all__ = ["end_of", "interaction_of", "request_of"]


def _setters(cls: type[Any]) -> tuple[Callable[[Any, Any], None], ...]:
    return tuple(getattr(cls, field.name).__set__ for field in attrs.fields(cls))


_REQUEST_SLOTS = _setters(Request)
_END_SLOTS = _setters(StreamEnd)
_RESPONSE_SLOTS = _setters(Response)
_INTERACTION_SLOTS = _setters(Interaction)


def request_of(
    method: str, url: str, headers: Headers, body: bytes, cls: type[Request] = Request
) -> Request:
    """`cls(method=..., url=..., headers=..., body=...)` of values its validators and
    converter would leave as they are (the loader checked them, or httpx made them)."""
    made = object.__new__(cls)
    set_method, set_url, set_headers, set_body = _REQUEST_SLOTS
    set_method(made, method)
    set_url(made, url)
    set_headers(made, headers)
    set_body(made, body)
    return made


def end_of(
    at: float, error: str | None, message: str, truncated: bool, stopped_by: str | None
) -> StreamEnd:
    """`StreamEnd(...)` of valid values (with `stopped_by` set exactly when `truncated`)."""
    made = object.__new__(StreamEnd)
    set_at, set_error, set_message, set_truncated, set_stopped_by = _END_SLOTS
    set_at(made, at)
    set_error(made, error)
    set_message(made, message)
    set_truncated(made, truncated)
    set_stopped_by(made, stopped_by)
    return made


def interaction_of(
    request: Request,
    status: int,
    headers: Headers,
    headers_at: float,
    chunks: Chunks,
    end: StreamEnd,
    times: str | None = None,
) -> Interaction:
    """`Interaction(request, Response(...))` of valid values: the chunks after the headers,
    the end after both."""
    response = object.__new__(Response)
    set_status, set_headers, set_headers_at, set_chunks, set_end, set_times = _RESPONSE_SLOTS
    set_status(response, status)
    set_headers(response, headers)
    set_headers_at(response, headers_at)
    set_chunks(response, chunks)
    set_end(response, end)
    set_times(response, times)
    made = object.__new__(Interaction)
    set_request, set_response, set_frames = _INTERACTION_SLOTS
    set_request(made, request)
    set_response(made, response)
    set_frames(made, None)
    return made
