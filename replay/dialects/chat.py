"""The OpenAI Chat Completions stream (`chat.completions.create(stream=True)`): validator
and builder.

Chunks carry no `event:` name; each choice is followed by its `index` through the deltas
(role first, content or tool-call fragments, one `finish_reason`), an optional usage chunk
with no choices comes last, and `data: [DONE]` ends the stream. An error mid-stream is a
chunk `{"error": {...}}` that ends it (no `[DONE]` follows; OpenRouter's error chunk also
carries choices, and a `[DONE]`).

What real providers do beyond that: Azure OpenAI opens with the prompt's content-filter
results, a chunk with empty `choices`, `id` and `model` (documented, and read correctly by
the SDK: not checked); chunks that carry `"usage": null` were asked for usage
(`stream_options.include_usage`), so the final usage chunk must come; some providers repeat
the role in every delta, or leave out a tool call's `index` (the SDK concatenates the
roles, and crashes on the missing index: errors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import attrs

from replay.dialects.common import (
    CREATED,
    EventLike,
    Report,
    Step,
    ToolCall,
    Violation,
    adds_up,
    build,
    check_failure,
    compact,
    json_request,
    json_schema,
    payload,
    sse,
    stable_id,
    tokenize,
    truncate,
)
from replay.model import Interaction
from replay.redact import deep_json

__all__ = ["FAILURES", "MODEL", "URL", "check", "stream"]

URL = "https://api.openai.com/v1/chat/completions"
MODEL = "gpt-4o-mini-2024-07-18"
FAILURES: tuple[str | None, ...] = (None, "length", "content_filter", "cut", "error")
"""`stream(failure=...)`: None; `length` / `content_filter` (that `finish_reason`); `cut`
(the connection drops mid-event: `validate` reports `stream.truncated`); `error` (an
in-band `{"error": ...}` chunk)."""

_DONE = "[DONE]"


# --- validation -------------------------------------------------------------------------


@attrs.define
class _Choice:
    deltas: int = 0
    finished: bool = False
    tools: dict[object, list[str]] = attrs.Factory(dict)


class _Walker:
    def __init__(self, report: Report, last_chunk: int | None) -> None:
        self.report = report
        self.last_chunk = last_chunk  # index of the last JSON chunk: the only one with usage
        self.choices: dict[object, _Choice] = {}
        self.first: Mapping[str, object] | None = None
        self.done_at: int | None = None
        self.error_at: int | None = None
        self.usage_asked = False  # a chunk carried "usage": null
        self.usage_given = False

    def walk(self, events: Sequence[EventLike], truncated: bool) -> None:
        for index, event in enumerate(events):
            if self.done_at is not None:
                self.report.add("done-last", "an event follows [DONE]", index)
            if event.data == _DONE:
                self.done_at = index if self.done_at is None else self.done_at
                continue
            if self.error_at == index - 1:
                self.report.add("error-last", "an event follows the error chunk", index)
            chunk = payload(event, index, self.report)
            if chunk is None:
                continue
            if chunk.get("error"):  # the SDK raises on it, whatever else it carries
                self.error_at = index
                continue
            self.chunk(index, chunk)
        if truncated or self.error_at is not None:
            return
        if self.done_at is None:
            self.report.add("done-last", "the stream does not end with [DONE]")
        for number, choice in self.choices.items():
            if not choice.finished:
                self.report.add("finish-reason", f"choice {number!r} has no finish_reason")
        if self.usage_asked and not self.usage_given:
            message = 'the chunks carry "usage": null (include_usage), but no usage chunk follows'
            self.report.add("usage-missing", message)

    def chunk(self, index: int, chunk: Mapping[str, object]) -> None:
        if _is_filter_preamble(chunk):
            return
        if self.first is None:
            self.first = chunk
        for field in ("id", "model"):
            if chunk.get(field) != self.first.get(field):
                found, first = chunk.get(field), self.first.get(field)
                self.report.add(f"{field}-constant", f"{field} {found!r}, was {first!r}", index)
        usage = chunk.get("usage")
        self.usage_asked = self.usage_asked or ("usage" in chunk and usage is None)
        if isinstance(usage, Mapping):
            self.usage_given = True
            if index != self.last_chunk:
                self.report.add("usage-last", "usage on a chunk that is not the last", index)
            if not adds_up(usage, "prompt_tokens", "completion_tokens", "total_tokens"):
                self.report.add("usage-total", f"prompt + completion != total in {usage}", index)
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else []:
            if isinstance(choice, Mapping):
                self.choice(index, choice)

    def choice(self, index: int, choice: Mapping[str, object]) -> None:
        number = choice.get("index")
        state = self.choices.setdefault(number, _Choice())
        delta = choice.get("delta")
        delta = delta if isinstance(delta, Mapping) else {}
        if state.finished:
            again = choice.get("finish_reason")
            what = "goes on after finishing" if again is None else f"finishes again ({again!r})"
            self.report.add("finish-reason", f"choice {number!r} {what}", index)
        has_role = bool(delta.get("role"))  # "" adds nothing to the role the SDK joins
        if has_role != (state.deltas == 0):
            where = "a later delta" if has_role else "its first delta"
            self.report.add("role-first", f"choice {number!r} has its role in {where}", index)
        state.deltas += 1
        tool_calls = delta.get("tool_calls")
        for call in tool_calls if isinstance(tool_calls, list) else []:
            self.tool_call(index, number, state, call if isinstance(call, Mapping) else {})
        if choice.get("finish_reason") is not None:
            state.finished = True
            for tool, pieces in state.tools.items():
                try:
                    deep_json.loads("".join(pieces))
                except ValueError:
                    message = f"tool call {tool!r} arguments {''.join(pieces)!r} are not JSON"
                    self.report.add("tool-arguments-json", message, index)

    def tool_call(
        self, index: int, number: object, state: _Choice, call: Mapping[str, object]
    ) -> None:
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        tool = call.get("index")
        if not isinstance(tool, int) or isinstance(tool, bool):
            message = f"choice {number!r} has a tool-call fragment without an index"
            self.report.add("tool-call-index", message, index)
            # A fragment with an id starts a call; one without goes on with the last.
            tool = call.get("id") or next(reversed(state.tools), None)
        if tool not in state.tools:
            if not (call.get("id") and function.get("name")):
                message = f"choice {number!r} tool call {tool!r} starts without id and name"
                self.report.add("tool-call-start", message, index)
            state.tools[tool] = []
        state.tools[tool].append(str(function.get("arguments") or ""))


def _is_filter_preamble(chunk: Mapping[str, object]) -> bool:
    """Whether `chunk` is Azure OpenAI's prompt content-filter results before the stream.

    It has no choices, an empty `id` and `model`, and no usage.
    """
    return (
        chunk.get("choices") == []
        and not chunk.get("id")
        and not chunk.get("model")
        and chunk.get("usage") is None
    )


def check(events: Sequence[EventLike], *, truncated: bool = False) -> list[Violation]:
    """The Chat Completions rules `events` break (end-of-stream rules skipped if truncated)."""
    report = Report("chat")
    chunks = [index for index, event in enumerate(events) if event.data != _DONE]
    _Walker(report, chunks[-1] if chunks else None).walk(events, truncated)
    return report.violations


# --- synthetic streams ------------------------------------------------------------------


def stream(
    text: str,
    *,
    tool_calls: Sequence[ToolCall] = (),
    include_usage: bool = False,
    ttft: float = 0.3,
    tokens_per_second: float = 40.0,
    failure: Literal["length", "content_filter", "cut", "error"] | None = None,
    model: str = MODEL,
    prompt: str = "Say hello.",
) -> Interaction:
    """A Chat Completions stream of `text`, then `tool_calls`, then (optionally) usage.

    The request's JSON body is what `client.chat.completions.create(**body)` sends. See
    `FAILURES` for `failure`; `length` and `content_filter` keep the first half of the
    text and drop the tool calls.
    """
    check_failure(failure, FAILURES)
    pieces = tokenize(text)
    finish_reason = "tool_calls" if tool_calls else "stop"
    if failure in ("length", "content_filter"):
        pieces, tool_calls, finish_reason = pieces[: (len(pieces) + 1) // 2], (), failure
    key = (text, [call.arguments_json for call in tool_calls], model, prompt)
    chunk = _Chunks(stable_id("chatcmpl-", *key), model, include_usage)
    content = "" if pieces or not tool_calls else None
    steps = [chunk.step({"role": "assistant", "content": content, "refusal": None})]
    steps += [chunk.step({"content": piece}, is_delta=True) for piece in pieces]
    completion_tokens = len(pieces)
    for number, call in enumerate(tool_calls):
        arguments = tokenize(call.arguments_json)
        completion_tokens += len(arguments)
        function = {"name": call.name, "arguments": ""}
        first = {"index": number, "id": call.call_id("call_"), "type": "function"}
        steps.append(chunk.step({"tool_calls": [{**first, "function": function}]}, True))
        steps += [
            chunk.step({"tool_calls": [{"index": number, "function": {"arguments": piece}}]}, True)
            for piece in arguments
        ]
    steps.append(chunk.step({}, finish_reason=finish_reason))
    if include_usage:
        steps.append(chunk.usage(len(tokenize(prompt)), completion_tokens))
    steps.append(Step(_DONE, {}))
    cut = False
    if failure in ("cut", "error"):
        message = "The server had an error while processing your request."
        error = {"message": message, "type": "server_error", "param": None, "code": None}
        steps, cut = truncate(
            steps, Step("error", {"error": error}) if failure == "error" else None
        )
    body: dict[str, object] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
    }
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    if tool_calls:
        body["tools"] = [_tool(call) for call in tool_calls]
    request = json_request(URL, body, {"authorization": "Bearer sk-synthetic"})
    return build(request, steps, _encode, ttft=ttft, tokens_per_second=tokens_per_second, cut=cut)


def _encode(_number: int, step: Step) -> bytes:
    return sse(None, _DONE if step.name == _DONE else compact(step.payload))


def _tool(call: ToolCall) -> dict[str, object]:
    parameters = json_schema(call.arguments)
    return {"type": "function", "function": {"name": call.name, "parameters": parameters}}


class _Chunks:
    """Makes the chunks of one completion: same id, model and fields on every one."""

    def __init__(self, completion_id: str, model: str, include_usage: bool) -> None:
        self.head: dict[str, object] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "service_tier": "default",
            "system_fingerprint": "fp_" + completion_id[-10:],
        }
        self.include_usage = include_usage

    def step(
        self, delta: Mapping[str, object], is_delta: bool = False, finish_reason: str | None = None
    ) -> Step:
        """A chunk with one choice carrying `delta`."""
        choice = {
            "index": 0,
            "delta": dict(delta),
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        return self._chunk([choice], None, is_delta)

    def usage(self, prompt_tokens: int, completion_tokens: int) -> Step:
        """The closing chunk `stream_options.include_usage` adds: no choices, the usage."""
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        return self._chunk([], usage, False)

    def _chunk(self, choices: list[dict[str, object]], usage: object, is_delta: bool) -> Step:
        chunk: dict[str, object] = {**self.head, "choices": choices}
        # With `include_usage` every chunk carries `usage`, null until the last.
        if self.include_usage:
            chunk["usage"] = usage
        return Step("chunk", chunk, is_delta)
