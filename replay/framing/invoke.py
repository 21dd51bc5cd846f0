"""Bedrock's `InvokeModelWithResponseStream`: `chunk` messages holding the model's own events.

That stream is an AWS event stream (`replay.framing.eventstream`) whose messages are named
`chunk` (or an exception's name); a chunk's payload is `{"bytes": "<base64>"}` (with
Bedrock's `p` padding beside it), and the bytes are the model's own JSON event: for Claude an
Anthropic Messages event (`message_start`, `content_block_delta`, …, `message_stop` with
Bedrock's `amazon-bedrock-invocationMetrics`), for Llama `{"generation": …}`, and so on.

`unwrap` gives each chunk as the event it holds: its data the decoded JSON, named by its
`type` when it has one (so Claude's events read as an Anthropic stream, whose rules then
apply), else still `chunk`. A chunk whose `bytes` are not base64 of UTF-8 JSON is left as
it is. Beside chunks, such a stream holds only exceptions (`modelStreamErrorException`,
`throttlingException`, …): each is read as the `error` event anthropic's `AnthropicBedrock`
makes of it, `{"type": "error", "error": {"type": <its name>, "message": …}}`, which ends
an Anthropic stream as its own `error` event does.

`framing.events` and the dialects' reader both read an event stream through here, so
`events()`, `show --events`, `check`, `diff`, `report` and `ttft` see the inner events; the
bytes (what faults and redaction work on) are untouched.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence

from replay.framing.sse import Event, Row

__all__ = ["CHUNK", "inner", "unwrap", "unwrap_events", "wrap"]

CHUNK = "chunk"
"""The `:event-type` of a message that holds one of the model's events."""


def inner(data: str) -> tuple[str, str] | None:
    """The event a chunk's payload holds, as (name, JSON text); None when it holds none."""
    if '"bytes"' not in data:
        return None
    try:
        payload = json.loads(data)
        encoded = payload.get("bytes") if isinstance(payload, dict) else None
        if not isinstance(encoded, str):
            return None
        text = base64.b64decode(encoded, validate=True).decode("utf-8")
        event = json.loads(text)
    except (ValueError, binascii.Error, RecursionError):  # (and UnicodeDecodeError: a ValueError)
        return None  # (nested past the parser's stack: left as the chunk it came as)
    kind = event.get("type") if isinstance(event, dict) else None
    return (kind if isinstance(kind, str) and kind else CHUNK), text


def unwrap(rows: list[Row]) -> list[Row]:
    """`rows` (an event stream's, `eventstream.scan`) with each chunk as the event it holds,
    and, in a stream holding chunks, each other message (an exception) as an `error`."""
    if not any(row[1] == CHUNK for row in rows):
        return rows
    unwrapped: list[Row] = []
    for row in rows:
        held = inner(row[2]) if row[1] == CHUNK else _error(row[1], row[2])
        unwrapped.append(row if held is None else (row[0], *held, row[3], row[4]))
    return unwrapped


def _error(name: str, data: str) -> tuple[str, str] | None:
    """An exception message as the `error` event anthropic's Bedrock client makes of it
    (`{"type": "error", "error": {"type": name, "message": …}}`)."""
    if name == CHUNK:
        return None
    try:
        payload = json.loads(data)
    except (ValueError, RecursionError):
        payload = None
    message = payload.get("message") if isinstance(payload, dict) else None
    error = {"type": name, "message": message if isinstance(message, str) else data}
    return "error", json.dumps({"type": "error", "error": error}, ensure_ascii=False)


def unwrap_events(events: Sequence[Event]) -> tuple[Event, ...]:
    """`events` with each chunk as the event it holds (see `unwrap`)."""
    rows: list[Row] = [(0, e.event, e.data, e.id, e.retry) for e in events]
    return tuple(Event(*row[1:]) for row in unwrap(rows))


def wrap(event: bytes) -> bytes:
    """The payload of a `chunk` message holding `event` (the model's JSON event, as bytes)."""
    return json.dumps({"bytes": base64.b64encode(event).decode("ascii")}).encode()
