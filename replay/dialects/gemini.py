"""The Gemini stream (`models.generate_content_stream`, `:streamGenerateContent`): validator
and builder.

Each event is one `GenerateContentResponse`: `candidates` (each with its `index`, a
`content` of role `model` whose `parts` carry one kind of data each: a `text` delta, a
`thought` text, a `functionCall`…), `usageMetadata`, `modelVersion` and `responseId`, the
same on every chunk. A candidate's `finishReason` comes on its last chunk, and the stream's
last chunk carries the whole usage. No `[DONE]` ends it. With `alt=sse` (google-genai
always asks for it) each chunk is one `data:` line, events ending with CR LF CR LF;
without, the chunks are the elements of one JSON array (`replay.framing.jsonarray`). An
error mid-stream is an `{"error": {...}}` object, and ends it. A blocked prompt's chunk
carries `promptFeedback` and no candidates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Literal

from replay.dialects.common import (
    EventLike,
    Report,
    Step,
    ToolCall,
    Violation,
    build,
    check_failure,
    compact,
    json_request,
    json_schema,
    payloads,
    stable_id,
    tokenize,
    truncate,
)
from replay.model import Interaction

__all__ = ["FAILURES", "FRAMINGS", "MODEL", "URL", "check", "stream"]

URL = "https://generativelanguage.googleapis.com/v1beta/models/{model}:streamGenerateContent"
MODEL = "gemini-2.5-flash"
FAILURES: tuple[str | None, ...] = (None, "max_tokens", "safety", "cut", "error")
"""`stream(failure=...)`: None; `max_tokens` / `safety` (that `finishReason`); `cut` (the
connection drops mid-event: `validate` reports `stream.truncated`); `error` (an in-band
`{"error": ...}` chunk, 503 UNAVAILABLE)."""
FRAMINGS = ("sse", "json-array")
"""`stream(framing=...)`: `sse` (`?alt=sse`, what google-genai asks for) or `json-array`."""

#: The fields of a part, one of which says what it carries.
_PART_DATA = (
    "text",
    "functionCall",
    "functionResponse",
    "inlineData",
    "fileData",
    "executableCode",
    "codeExecutionResult",
    "thoughtSignature",
)
_HEADERS = {"x-goog-api-key": "gm-synthetic"}
_TOKEN_COUNTS = ("promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount")


# --- validation -------------------------------------------------------------------------


class _Walker:
    def __init__(self, report: Report, events: Sequence[EventLike]) -> None:
        self.report = report
        self.chunks = payloads(events, report)
        self.last = max((i for i, c in enumerate(self.chunks) if c is not None), default=None)
        self.finished: dict[object, int] = {}  # candidate index -> where it finished
        self.seen: set[object] = set()  # candidate indexes
        self.texts: dict[object, str] = {}
        self.first: Mapping[str, object] | None = None
        self.error_at: int | None = None

    def walk(self, truncated: bool) -> None:
        for index, chunk in enumerate(self.chunks):
            if self.error_at is not None and self.error_at == index - 1:
                self.report.add("error-last", "an event follows the error chunk", index)
            if chunk is None:
                continue
            if chunk.get("error"):
                self.error_at = index
                continue
            self.constant(index, chunk)
            candidates = chunk.get("candidates")
            if not isinstance(candidates, list) or not all(
                isinstance(c, Mapping) for c in candidates
            ):
                if "promptFeedback" not in chunk and not _usage_only(chunk, index == self.last):
                    message = f"the chunk has no list of candidates: {candidates!r}"
                    self.report.add("candidates", message[:200], index)
                continue
            for candidate in candidates:
                self.candidate(index, candidate)
        if truncated or self.error_at is not None or self.last is None:
            return
        self.end(self.chunks[self.last] or {}, self.last)

    def constant(self, index: int, chunk: Mapping[str, object]) -> None:
        if self.first is None:
            self.first = chunk
        for field, rule in (("modelVersion", "model-constant"), ("responseId", "response-id")):
            found, first = chunk.get(field), self.first.get(field)
            if found is not None and first is not None and found != first:
                self.report.add(rule, f"{field} {found!r}, was {first!r}", index)

    def candidate(self, index: int, candidate: Mapping[str, object]) -> None:
        number = candidate.get("index", 0)
        self.seen.add(number)
        if number in self.finished:
            self.report.add("finish-reason", f"candidate {number!r} goes on after finishing", index)
        if candidate.get("finishReason") is not None:
            self.finished.setdefault(number, index)
        content = candidate.get("content")
        if content is None and candidate.get("finishReason") is not None:
            return  # a candidate stopped (safety, recitation) may carry no content
        parts = content.get("parts") if isinstance(content, Mapping) else None
        if not isinstance(content, Mapping) or content.get("role", "model") != "model":
            self.report.add("content", f"candidate {number!r} content {content!r}"[:200], index)
        if not isinstance(parts, list):
            if parts is not None or candidate.get("finishReason") is None:
                self.report.add("parts", f"candidate {number!r} has no list of parts", index)
            return
        for part in parts:
            self.part(index, number, part)

    def part(self, index: int, number: object, part: object) -> None:
        fields = part if isinstance(part, Mapping) else {}
        if not any(field in fields for field in _PART_DATA):
            self.report.add(
                "parts", f"candidate {number!r} has a part with no data: {part!r}"[:200], index
            )
            return
        text = fields.get("text")
        if "text" in fields and not isinstance(text, str):
            self.report.add("parts", f"candidate {number!r} has a text that is {text!r}", index)
        call = fields.get("functionCall")
        if "functionCall" in fields and not (
            isinstance(call, Mapping)
            and call.get("name")
            and isinstance(call.get("args", {}), Mapping)
        ):
            self.report.add("parts", f"candidate {number!r} functionCall {call!r}"[:200], index)
        if isinstance(text, str) and not fields.get("thought"):
            self.text(index, number, text)

    def text(self, index: int, number: object, text: str) -> None:
        so_far = self.texts.get(number, "")
        if len(so_far) >= 4 and len(text) > len(so_far) and text.startswith(so_far):
            message = f"candidate {number!r} repeats the text so far ({len(so_far)} characters)"
            self.report.add("text-delta", message + ": a whole text, not a delta", index)
        self.texts[number] = so_far + text

    def end(self, last: Mapping[str, object], index: int) -> None:
        for number in sorted(self.seen, key=str):
            if number not in self.finished:
                self.report.add("finish-reason", f"candidate {number!r} has no finishReason")
        usage = last.get("usageMetadata")
        if not isinstance(usage, Mapping):
            self.report.add("usage", "the last chunk carries no usageMetadata", index)
            return
        total = usage.get("totalTokenCount")
        counts = [usage.get(name, 0) for name in (*_TOKEN_COUNTS, "toolUsePromptTokenCount")]
        numbers = [count for count in counts if isinstance(count, int)]
        if isinstance(total, int) and len(numbers) == len(counts) and sum(numbers) != total:
            message = f"the counts do not add up to totalTokenCount in {usage}"
            self.report.add("usage-total", message, index)


def _usage_only(chunk: Mapping[str, object], last: bool) -> bool:
    """A last chunk that only reports usage (sent after the finishReason by some models)."""
    return last and "candidates" not in chunk and isinstance(chunk.get("usageMetadata"), Mapping)


def check(events: Sequence[EventLike], *, truncated: bool = False) -> list[Violation]:
    """The Gemini rules `events` break (end-of-stream rules skipped if truncated)."""
    report = Report("gemini")
    _Walker(report, events).walk(truncated)
    return report.violations


# --- synthetic streams ------------------------------------------------------------------


def stream(
    text: str,
    *,
    thinking: str | None = None,
    function_call: ToolCall | None = None,
    ttft: float = 0.3,
    tokens_per_second: float = 40.0,
    failure: Literal["max_tokens", "safety", "cut", "error"] | None = None,
    model: str = MODEL,
    prompt: str = "Say hello.",
    framing: Literal["sse", "json-array"] = "sse",
) -> Interaction:
    """A Gemini stream: `thinking` (thought parts), `text`, then a `function_call`.

    One chunk per piece, each with the usage so far, the last with the `finishReason` and
    the whole usage. The request is what `client.models.generate_content_stream` sends
    (`framing="sse"`, to `?alt=sse`) or a REST client without `alt=sse`, answered by one
    JSON array (`framing="json-array"`). See `FAILURES` for `failure`; `max_tokens` and
    `safety` keep the first half of the text and drop the function call.

    Raises:
        ConfigurationError: an unknown failure, or timing that makes no sense.
    """
    check_failure(failure, FAILURES)
    check_failure(framing, FRAMINGS)
    pieces = tokenize(text)
    finish = "STOP"
    if failure in ("max_tokens", "safety"):
        pieces, function_call, finish = pieces[: (len(pieces) + 1) // 2], None, failure.upper()
    key = (text, thinking, function_call and function_call.arguments_json, model, prompt)
    chunk = _Chunks(stable_id("", *key)[:22], model, len(tokenize(prompt)))
    steps = [chunk.step({"text": piece, "thought": True}) for piece in tokenize(thinking or "")]
    steps += [chunk.step({"text": piece}) for piece in pieces]
    if function_call is not None:
        call = {"name": function_call.name, "args": dict(function_call.arguments)}
        steps.append(chunk.step({"functionCall": call}))
    if not steps:
        steps.append(chunk.step({"text": ""}))
    last = steps.pop()
    steps.append(chunk.step(dict(_parts(last)[0]), finish=finish))
    cut = False
    if failure in ("cut", "error"):
        error = {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
        steps, cut = truncate(
            steps, Step("error", {"error": error}) if failure == "error" else None
        )
    if framing == "json-array" and not cut:
        steps.append(Step("]", {}))
    url = URL.format(model=model) + ("?alt=sse" if framing == "sse" else "")
    request = json_request(url, _request(prompt, thinking, function_call), _HEADERS)
    sse = framing == "sse"
    media = "text/event-stream" if sse else "application/json; charset=UTF-8"
    timing = {"ttft": ttft, "tokens_per_second": tokens_per_second}
    return build(request, steps, _sse if sse else _element, cut=cut, content_type=media, **timing)


def _parts(step: Step) -> list[Mapping[str, object]]:
    candidates = step.payload["candidates"]
    assert isinstance(candidates, list)
    return candidates[0]["content"]["parts"]  # type: ignore[no-any-return]


def _request(prompt: str, thinking: str | None, call: ToolCall | None) -> dict[str, object]:
    """The JSON body google-genai sends for one user `prompt`."""
    body: dict[str, object] = {"contents": [{"parts": [{"text": prompt}], "role": "user"}]}
    if thinking is not None:
        body["generationConfig"] = {"thinkingConfig": {"includeThoughts": True}}
    if call is not None:
        declaration = {"name": call.name, "parameters": json_schema(call.arguments)}
        body["tools"] = [{"functionDeclarations": [declaration]}]
    return body


def _sse(_number: int, step: Step) -> bytes:
    return f"data: {compact(step.payload)}\r\n\r\n".encode()


def _element(number: int, step: Step) -> bytes:
    """A JSON array's element as Google sends it: pretty-printed, after `[` or `,` CR LF."""
    if step.name == "]":
        return b"]"
    text = json.dumps(step.payload, indent=2, ensure_ascii=False)
    return (("[" if number == 0 else ",\r\n") + text + "\n").encode()


class _Chunks:
    """Makes the chunks of one response: the same responseId and modelVersion, the usage
    counted so far."""

    def __init__(self, response_id: str, model: str, prompt_tokens: int) -> None:
        self.response_id, self.model = response_id, model
        self.prompt_tokens = prompt_tokens
        self.output = self.thoughts = 0

    def step(self, part: Mapping[str, object], finish: str | None = None) -> Step:
        """A chunk with one candidate carrying `part` (and finishing, with `finish`)."""
        if finish is None:  # (the last chunk repeats a part already counted)
            self.thoughts += bool(part.get("thought"))
            self.output += not part.get("thought")
        candidate: dict[str, object] = {
            "content": {"parts": [dict(part)], "role": "model"},
            "index": 0,
        }
        usage: dict[str, object] = {"promptTokenCount": self.prompt_tokens}
        if finish is not None:
            candidate["finishReason"] = finish
            usage["candidatesTokenCount"] = self.output
            if self.thoughts:
                usage["thoughtsTokenCount"] = self.thoughts
        total = self.prompt_tokens + (self.output + self.thoughts if finish else 0)
        usage["totalTokenCount"] = total
        payload = {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": self.model,
            "responseId": self.response_id,
        }
        return Step("chunk", payload, is_delta=True)
