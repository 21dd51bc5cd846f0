"""Claude on Bedrock's `InvokeModelWithResponseStream`: Anthropic events in AWS `chunk`s.

What boto3's `invoke_model_with_response_stream` and anthropic's `AnthropicBedrock`
`messages.stream` read: an AWS event stream (`replay.framing.eventstream`) of `chunk`
messages, each `{"bytes": "<base64>"}` holding one Anthropic Messages event, the last one
(`message_stop`) with Bedrock's `amazon-bedrock-invocationMetrics`. An error mid-stream is an
exception message (`modelStreamErrorException`, …), and ends the stream.

Reading it needs nothing here: `replay.framing.invoke` gives each chunk as the event it
holds (and an exception as the `error` event anthropic's client makes of it), so the stream
is detected and checked as `anthropic`. This module builds one (`stream`).
"""

from __future__ import annotations

import json
from typing import Any, Literal
from urllib.parse import quote

import attrs

from replay.dialects import anthropic
from replay.dialects.common import ToolCall, check_failure, compact, json_request
from replay.dialects.converse import cut_last
from replay.framing import eventstream, invoke
from replay.framing.sse import Event, parse
from replay.model import Chunk, Interaction, Response

__all__ = ["FAILURES", "MODEL", "URL", "VERSION", "stream"]

URL = "https://bedrock-runtime.us-east-1.amazonaws.com/model/{model}/invoke-with-response-stream"
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
VERSION = "bedrock-2023-05-31"
"""The `anthropic_version` a request to Claude on Bedrock names."""
FAILURES: tuple[str | None, ...] = (None, "max_tokens", "refusal", "cut", "exception")
"""`stream(failure=...)`: None; `max_tokens` / `refusal` (that `stop_reason`); `cut` (the
connection drops mid-message: `validate` reports `stream.truncated`); `exception` (an
in-band `modelStreamErrorException`)."""


def stream(
    text: str,
    *,
    thinking: str | None = None,
    tool_use: ToolCall | None = None,
    ttft: float = 0.3,
    tokens_per_second: float = 40.0,
    failure: Literal["max_tokens", "refusal", "cut", "exception"] | None = None,
    model: str = MODEL,
    prompt: str = "Say hello.",
    max_tokens: int = 2048,
) -> Interaction:
    """`anthropic.stream`'s events (same arguments, same timing) as Bedrock sends them.

    The request is the body AWS documents for Claude (`anthropic_version` `VERSION`,
    `max_tokens`, `messages`), sent as boto3's `invoke_model_with_response_stream` sends
    it (the model quoted in the path, `:` as `%3A`). See `FAILURES` for `failure`.

    Raises:
        ConfigurationError: an unknown failure, or timing that makes no sense.
    """
    check_failure(failure, FAILURES)
    common: dict[str, Any] = {
        "thinking": thinking,
        "tool_use": tool_use,
        "ttft": ttft,
        "tokens_per_second": tokens_per_second,
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
    }
    failing = failure in ("cut", "exception")
    plain: Any = None if failing else failure  # (max_tokens, refusal: anthropic's own)
    made = anthropic.stream(text, failure=plain, **common)
    response = made.response
    if failing:  # the messages up to where anthropic's in-band error comes, then the failure
        errored = anthropic.stream(text, failure="error", **common).response
        kept = len(errored.chunks)
        response = errored if failure == "exception" else response
        response = attrs.evolve(response, chunks=list(response.chunks)[:kept])
    events = [event for chunk in response.chunks for event in parse(chunk.data)]
    metrics = _metrics(events, response)
    body = json.loads(made.request.body)
    del body["model"], body["stream"]
    url = URL.format(model=quote(model, safe=""))  # as botocore quotes it
    wrapped = Interaction(
        json_request(url, {"anthropic_version": VERSION, **body}, {}),
        attrs.evolve(
            response,
            headers=[
                ("content-type", eventstream.CONTENT_TYPE),
                ("x-amzn-bedrock-content-type", "application/json"),
            ],
            chunks=[
                Chunk(chunk.at, _message(event, metrics))
                for chunk, event in zip(response.chunks, events, strict=True)
            ],
        ),
    )
    return cut_last(wrapped) if failure == "cut" else wrapped


def _metrics(events: list[Event], response: Response) -> dict[str, int]:
    """Bedrock's `amazon-bedrock-invocationMetrics` for the stream made of `events`."""
    counts = {"input_tokens": 0, "output_tokens": 0}
    for event in events:
        data = json.loads(event.data)
        usage = data.get("usage") or data.get("message", {}).get("usage") or {}
        counts.update({name: usage[name] for name in counts if name in usage})
    return {
        "inputTokenCount": counts["input_tokens"],
        "outputTokenCount": counts["output_tokens"],
        "invocationLatency": round(response.end.at * 1000),
        "firstByteLatency": round(response.chunks.times[0] * 1000) if response.chunks else 0,
    }


def _message(event: Event, metrics: dict[str, int]) -> bytes:
    """The `chunk` message holding one Anthropic event (for an `error`, the exception)."""
    if event.event == "error":
        headers = {":exception-type": "modelStreamErrorException", ":message-type": "exception"}
        payload = json.dumps({"message": "The model stream failed: Overloaded."}).encode()
    else:
        data = json.loads(event.data)
        if event.event == "message_stop":
            data["amazon-bedrock-invocationMetrics"] = metrics
        payload = invoke.wrap(compact(data).encode())
        headers = {":event-type": invoke.CHUNK, ":message-type": "event"}
    return eventstream.encode({**headers, ":content-type": "application/json"}, payload)
