"""Bedrock's Converse stream (`bedrock-runtime` `ConverseStream`): validator and builder.

The body is an AWS event stream (`replay.framing.eventstream`); each message is named by
its `:event-type` and carries one JSON payload: `messageStart` (`role`), then per content
block an optional `contentBlockStart` (a tool use's `toolUseId` and `name`), its
`contentBlockDelta`s (`delta` holding one of `text`, `toolUse.input` (a JSON fragment),
`reasoningContent`, `citation`) and its `contentBlockStop`, each with `contentBlockIndex`;
then `messageStop` (`stopReason`) and `metadata` (`usage`, `metrics`). Bedrock pads
payloads with a `p` field. An error mid-stream is an exception message (`:message-type`
`exception`, named by `:exception-type`: `throttlingException`, `modelStreamErrorException`
…), and ends the stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Literal
from urllib.parse import quote

from replay.dialects.common import (
    CUT_MESSAGE,
    EventLike,
    Report,
    Step,
    ToolCall,
    Violation,
    build,
    check_failure,
    compact,
    json_request,
    payloads,
    tokenize,
    truncate,
)
from replay.engine.ends import CUT_NAME
from replay.framing import eventstream
from replay.model import Interaction, Response, StreamEnd

__all__ = ["EVENTS", "FAILURES", "MODEL", "URL", "check", "cut_last", "stream"]

URL = "https://bedrock-runtime.us-east-1.amazonaws.com/model/{model}/converse-stream"
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
EVENTS = frozenset(
    {
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    }
)
"""The event types of a Converse stream (anything else is an exception)."""
FAILURES: tuple[str | None, ...] = (None, "max_tokens", "cut", "exception")
"""`stream(failure=...)`: None; `max_tokens` (that `stopReason`); `cut` (the connection
drops mid-message: `validate` reports `stream.truncated`); `exception` (an in-band
`modelStreamErrorException`)."""
_DELTAS = ("text", "toolUse", "reasoningContent", "citation")
_USAGE = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheWriteInputTokens")


# --- validation -------------------------------------------------------------------------


class _Walker:
    def __init__(self, report: Report, events: Sequence[EventLike]) -> None:
        self.report = report
        self.events = events
        self.payloads = payloads(events, report)
        self.open: set[object] = set()  # block indexes started (or given deltas), not stopped
        self.stopped: set[object] = set()
        self.stop_at: int | None = None
        self.metadata_at: int | None = None
        self.exception_at: int | None = None

    def walk(self, truncated: bool) -> None:
        for index, (event, payload) in enumerate(zip(self.events, self.payloads, strict=True)):
            if self.exception_at is not None:
                self.report.add("exception-last", "an event follows the exception", index)
            if event.event not in EVENTS:
                self.exception_at = index  # (an exception, whatever its name)
                continue
            if index == 0 and event.event != "messageStart":
                self.report.add("first-event", f"the first event is {event.event}", index)
            if payload is not None:
                self.event(index, event.event, payload)
        if truncated or self.exception_at is not None or not self.events:
            return
        if self.stop_at is None:
            self.report.add("message-stop", "the stream has no messageStop")
        if self.open:
            blocks = ", ".join(map(str, sorted(self.open, key=str)))
            self.report.add("block-order", f"content blocks {blocks} are never stopped")
        if self.metadata_at is None:
            self.report.add("metadata", "the stream has no metadata event with its usage")

    def event(self, index: int, name: str, payload: Mapping[str, object]) -> None:
        if self.stop_at is not None and name != "metadata":
            self.report.add("message-stop", f"{name} follows messageStop", index)
        if name == "messageStart" and index:
            self.report.add("first-event", "a second messageStart", index)
        elif name.startswith("contentBlock"):
            self.block(index, name, payload)
        elif name == "messageStop":
            if self.stop_at is not None or not isinstance(payload.get("stopReason"), str):
                self.report.add("message-stop", f"messageStop {compact(payload)[:160]}", index)
            self.stop_at = index
        elif name == "metadata":
            self.metadata_at = index
            self.usage(index, payload.get("usage"))

    def block(self, index: int, name: str, payload: Mapping[str, object]) -> None:
        number = payload.get("contentBlockIndex")
        if not isinstance(number, int):
            self.report.add("block-order", f"{name} has no contentBlockIndex", index)
            return
        if number in self.stopped:
            self.report.add("block-order", f"{name} for block {number} after its stop", index)
        elif name == "contentBlockStart" and number in self.open:
            self.report.add("block-order", f"block {number} starts twice", index)
        if name == "contentBlockStop":
            self.open.discard(number)
            self.stopped.add(number)
            return
        self.open.add(number)
        if name == "contentBlockDelta":
            delta = payload.get("delta")
            kinds = [k for k in _DELTAS if isinstance(delta, Mapping) and k in delta]
            if len(kinds) != 1:
                self.report.add("delta", f"block {number} delta {delta!r}"[:200], index)

    def usage(self, index: int, usage: object) -> None:
        if not isinstance(usage, Mapping):
            self.report.add("metadata", f"metadata without usage: {usage!r}"[:200], index)
            return
        counts = [usage.get(name, 0) for name in _USAGE]
        total = usage.get("totalTokens")
        numbers = [count for count in counts if isinstance(count, int)]
        if len(numbers) == len(counts) and isinstance(total, int) and sum(numbers) != total:
            self.report.add("usage-total", f"the counts do not add up in {usage}", index)


def check(events: Sequence[EventLike], *, truncated: bool = False) -> list[Violation]:
    """The Converse rules `events` break (end-of-stream rules skipped if truncated)."""
    report = Report("converse")
    _Walker(report, events).walk(truncated)
    return report.violations


# --- synthetic streams ------------------------------------------------------------------


def stream(
    text: str,
    *,
    tool_use: ToolCall | None = None,
    ttft: float = 0.3,
    tokens_per_second: float = 40.0,
    failure: Literal["max_tokens", "cut", "exception"] | None = None,
    model: str = MODEL,
    prompt: str = "Say hello.",
) -> Interaction:
    """A Converse stream: a text block, then a `tool_use` block, as a real event stream.

    The request is what boto3's `converse_stream` sends (the model quoted in the path as
    botocore quotes it: `:` as `%3A`); each event is one message with
    its CRCs (botocore's decoder accepts it). See `FAILURES` for `failure`; `max_tokens`
    keeps the first half of the text and drops the tool use.

    Raises:
        ConfigurationError: an unknown failure, or timing that makes no sense.
    """
    check_failure(failure, FAILURES)
    pieces = tokenize(text)
    reason = "tool_use" if tool_use is not None else "end_turn"
    if failure == "max_tokens":
        pieces, tool_use, reason = pieces[: (len(pieces) + 1) // 2], None, "max_tokens"
    steps = [Step("messageStart", {"role": "assistant"})]
    steps += [_delta(0, {"text": piece}) for piece in pieces]
    steps.append(Step("contentBlockStop", {"contentBlockIndex": 0}))
    if tool_use is not None:
        start = {"toolUse": {"toolUseId": tool_use.call_id("tooluse_"), "name": tool_use.name}}
        steps.append(Step("contentBlockStart", {"contentBlockIndex": 1, "start": start}))
        steps.append(_delta(1, {"toolUse": {"input": tool_use.arguments_json}}))
        steps.append(Step("contentBlockStop", {"contentBlockIndex": 1}))
    steps.append(Step("messageStop", {"stopReason": reason}))
    used = {"inputTokens": len(tokenize(prompt)), "outputTokens": len(pieces)}
    usage = {**used, "totalTokens": sum(used.values())}
    steps.append(Step("metadata", {"usage": usage, "metrics": {"latencyMs": int(ttft * 1000)}}))
    cut = False
    if failure in ("cut", "exception"):
        error = Step("modelStreamErrorException", {"message": "The model stream failed."})
        steps, cut = truncate(steps, error if failure == "exception" else None)
    body = {"messages": [{"role": "user", "content": [{"text": prompt}]}]}
    request = json_request(URL.format(model=quote(model, safe="")), body, {})  # as botocore
    made = build(
        request,
        steps,
        _message,
        ttft=ttft,
        tokens_per_second=tokens_per_second,
        content_type=eventstream.CONTENT_TYPE,
    )
    return cut_last(made) if cut else made


def _delta(number: int, delta: Mapping[str, object]) -> Step:
    return Step("contentBlockDelta", {"contentBlockIndex": number, "delta": dict(delta)}, True)


def _message(_number: int, step: Step) -> bytes:
    payload = json.dumps(step.payload, separators=(",", ":")).encode()
    if step.name in EVENTS:
        kind = {":event-type": step.name, ":message-type": "event"}
    else:
        kind = {":exception-type": step.name, ":message-type": "exception"}
    return eventstream.encode({**kind, ":content-type": "application/json"}, payload)


def cut_last(interaction: Interaction) -> Interaction:
    """The stream with only the first half of its last chunk, ended by a dropped
    connection (what `build(cut=True)` does to a text stream)."""

    response = interaction.response
    *chunks, last = response.chunks
    half = type(last)(last.at, last.data[: len(last.data) // 2])
    end = StreamEnd(round(last.at + 0.005, 6), error=CUT_NAME, message=CUT_MESSAGE)
    cut = Response(
        status=response.status,
        headers=list(response.headers),
        headers_at=response.headers_at,
        chunks=[*chunks, half],
        end=end,
    )
    return Interaction(interaction.request, cut)
