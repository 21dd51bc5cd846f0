"""The OpenAI Responses API stream (`responses.create(stream=True)`): validator and builder.

The validator walks the events as the SDK's stream state does: output items keyed by
`output_index`, content parts by `content_index`, each opened by an `added` event and
closed by its `done`; deltas accumulate into the part (or the function call) they name,
and every `done` is compared with what the deltas built. The builder's JSON shapes live in
`_responses_shapes`.

What real streams do beyond that: those recorded before the API sent `sequence_number`
(spring 2025) carry none at all, which is fine, while a stream that numbers its events must
number every one; a reasoning item's `encrypted_content` is opaque and re-encrypted between
its `output_item.done` and the terminal response, so only its presence is compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import attrs

from replay.dialects.common import (
    EventLike,
    Report,
    Step,
    ToolCall,
    Violation,
    adds_up,
    build,
    check_failure,
    json_request,
    payloads,
    stable_id,
    tokenize,
    truncate,
)
from replay.dialects.responses_shapes import Shapes, encode, usage_of
from replay.model import Interaction
from replay.redact import deep_json

__all__ = ["FAILURES", "MODEL", "URL", "check", "stream"]

URL = "https://api.openai.com/v1/responses"
MODEL = "gpt-4.1-2025-04-14"
FAILURES: tuple[str | None, ...] = (None, "failed", "incomplete", "cut", "error")
"""`stream(failure=...)`: None; `failed` / `incomplete` (terminal events); `cut` (the
connection drops mid-event: `validate` reports `stream.truncated`); `error` (an in-band
`error` event)."""

_TERMINAL_STATUS = {
    "response.completed": "completed",
    "response.failed": "failed",
    "response.incomplete": "incomplete",
    "error": None,
}
_LIFECYCLE = {"response.created", "response.queued", "response.in_progress", *_TERMINAL_STATUS}
# delta event family -> (the content part type it writes to, the field its text is in)
_TEXTS = {
    "response.output_text": ("output_text", "text"),
    "response.reasoning_text": ("reasoning_text", "text"),
    "response.refusal": ("refusal", "refusal"),
}
# Item fields whose value is opaque and may change between the done item and the final output.
_OPAQUE = ("encrypted_content",)


# --- validation -------------------------------------------------------------------------


@attrs.define
class _Part:
    kind: object
    pieces: list[str] = attrs.Factory(list)
    is_open: bool = True
    text_done: bool = False


@attrs.define
class _Item:
    kind: object
    id: object
    parts: dict[object, _Part] = attrs.Factory(dict)
    arguments: list[str] = attrs.Factory(list)
    arguments_done: bool = False
    is_open: bool = True


class _Walker:
    def __init__(self, report: Report) -> None:
        self.report = report
        self.items: dict[object, _Item] = {}
        self.finished: dict[object, object] = {}  # output_index -> the item its done gave
        self.next_sequence = 0
        self.numbered: bool | None = None  # whether the stream numbers its events at all
        self.response_id: object = None
        self.terminal: int | None = None

    def walk(self, events: Sequence[EventLike], truncated: bool) -> None:
        for index, (event, payload) in enumerate(
            zip(events, payloads(events, self.report), strict=True)
        ):
            if payload is None:
                self.next_sequence += 1
                continue
            kind = payload.get("type")
            self.common(index, event, payload, kind)
            family, _, stage = str(kind).rpartition(".")
            if kind in _LIFECYCLE:
                self.lifecycle(index, payload, kind)
            elif kind == "response.output_item.added":
                self.item_added(index, payload)
            elif kind == "response.output_item.done":
                self.item_done(index, payload)
            elif kind == "response.content_part.added":
                self.part_added(index, payload)
            elif kind == "response.content_part.done":
                self.part_done(index, payload)
            elif family in _TEXTS and stage in ("delta", "done"):
                self.text(index, payload, family, stage)
            elif family == "response.function_call_arguments" and stage in ("delta", "done"):
                self.arguments(index, payload, stage)
        if self.terminal is None and not truncated:
            self.report.add("terminal-event", "the stream has no terminal event")

    def common(
        self, index: int, event: EventLike, payload: Mapping[str, object], kind: object
    ) -> None:
        add = self.report.add
        if index == 0 and kind != "response.created":
            add("first-event-created", f"the first event is {kind!r}, not response.created", 0)
        if event.event != kind:
            add("event-type", f"event name {event.event!r} differs from type {kind!r}", index)
        self.sequence(index, payload)
        if self.terminal is not None and self.terminal == index - 1:
            add("terminal-event", f"{kind!r} follows the terminal event", index)

    def sequence(self, index: int, payload: Mapping[str, object]) -> None:
        number = payload.get("sequence_number")
        if self.numbered is None:  # the first event says whether the stream numbers them
            self.numbered = "sequence_number" in payload
        if not self.numbered:
            if "sequence_number" in payload:
                message = f"sequence_number {number!r}, but the first event had none"
                self.report.add("sequence-number", message, index)
            return
        if number != self.next_sequence:
            message = f"sequence_number {number!r}, expected {self.next_sequence}"
            self.report.add("sequence-number", message, index)
        self.next_sequence = (number if isinstance(number, int) else self.next_sequence) + 1

    def lifecycle(self, index: int, payload: Mapping[str, object], kind: str) -> None:
        response = payload.get("response")
        if isinstance(response, Mapping):
            if self.response_id is None:
                self.response_id = response.get("id")
            elif response.get("id") != self.response_id:
                self.report.add("response-id", f"response id {response.get('id')!r} changed", index)
        if kind not in _TERMINAL_STATUS:
            return
        if self.terminal is not None and self.terminal != index - 1:
            self.report.add("terminal-event", f"a second terminal event, {kind!r}", index)
        self.terminal = index
        if not isinstance(response, Mapping):
            return
        status = response.get("status")
        if status != _TERMINAL_STATUS[kind]:
            self.report.add("status", f"{kind} carries status {status!r}", index)
        self.usage(index, response.get("usage"))
        if kind != "response.failed":
            self.unclosed(index)
            self.final_output(index, response.get("output"))

    def usage(self, index: int, usage: object) -> None:
        if not isinstance(usage, Mapping):
            return
        if not adds_up(usage, "input_tokens", "output_tokens", "total_tokens"):
            self.report.add("usage-total", f"input + output tokens != total in {usage}", index)

    def unclosed(self, index: int) -> None:
        for output_index, item in self.items.items():
            if item.is_open:
                self.report.add("unclosed", f"output item {output_index} was never done", index)

    def final_output(self, index: int, output: object) -> None:
        if not isinstance(output, list) or not output:
            return  # the SDK rebuilds an empty output from the done items
        for output_index, item in self.finished.items():
            at = output_index if isinstance(output_index, int) else -1
            if not 0 <= at < len(output) or _comparable(output[at]) != _comparable(item):
                self.report.add(
                    "final-output", f"output {output_index} differs from its done item", index
                )

    def item_added(self, index: int, payload: Mapping[str, object]) -> None:
        output_index, item = payload.get("output_index"), payload.get("item")
        if output_index in self.items or output_index != len(self.items):
            self.report.add("item-order", f"output item {output_index!r} added out of turn", index)
            return
        fields = item if isinstance(item, Mapping) else {}
        self.items[output_index] = _Item(kind=fields.get("type"), id=fields.get("id"))

    def item_done(self, index: int, payload: Mapping[str, object]) -> None:
        output_index, done = payload.get("output_index"), payload.get("item")
        item = self.items.get(output_index)
        fields = done if isinstance(done, Mapping) else {}
        if item is None or not item.is_open or fields.get("id") != item.id:
            self.report.add("item-order", f"output item {output_index!r} done but not open", index)
            return
        item.is_open = False
        self.finished[output_index] = done
        for content_index, part in item.parts.items():
            if part.is_open:
                self.report.add("unclosed", f"content part {content_index} was never done", index)
        content = fields.get("content")
        for content_index, part in item.parts.items():
            field = "refusal" if part.kind == "refusal" else "text"
            got = _nth(content, content_index).get(field)
            self.mismatch(index, "".join(part.pieces), got, f"the done item's part {content_index}")
        if item.kind == "function_call":
            joined = "".join(item.arguments)
            self.mismatch(index, joined, fields.get("arguments"), "the done item's arguments")
            if not item.arguments_done:
                self.json_arguments(index, fields.get("arguments"))

    def part_added(self, index: int, payload: Mapping[str, object]) -> None:
        item = self.items.get(payload.get("output_index"))
        content_index, part = payload.get("content_index"), payload.get("part")
        if item is None or not item.is_open or payload.get("item_id") != item.id:
            self.report.add("item-order", "content part added to an item not open", index)
            return
        if content_index in item.parts:
            self.report.add("item-order", f"content part {content_index!r} added twice", index)
            return
        kind = part.get("type") if isinstance(part, Mapping) else None
        item.parts[content_index] = _Part(kind=kind)

    def part_done(self, index: int, payload: Mapping[str, object]) -> None:
        part = self.find_part(payload)
        if part is None or not part.is_open:
            self.report.add("item-order", "content part done but not open", index)
            return
        part.is_open = False
        field = "refusal" if part.kind == "refusal" else "text"
        got = _nth([payload.get("part")], 0).get(field)
        self.mismatch(index, "".join(part.pieces), got, "the done part")

    def text(self, index: int, payload: Mapping[str, object], family: str, stage: str) -> None:
        part_kind, field = _TEXTS[family]
        part = self.find_part(payload)
        item = self.items.get(payload.get("output_index"))
        if part is None or not part.is_open or part.text_done or part.kind != part_kind:
            self.report.add("delta-outside", f"{family}.{stage} outside an open {part_kind}", index)
        elif item is None or payload.get("item_id") != item.id:
            self.report.add(
                "delta-outside", f"item_id {payload.get('item_id')!r} is not open", index
            )
        if part is None:
            return
        if stage == "delta":
            part.pieces.append(str(payload.get("delta", "")))
        else:
            part.text_done = True
            self.mismatch(index, "".join(part.pieces), payload.get(field), f"{family}.done")

    def arguments(self, index: int, payload: Mapping[str, object], stage: str) -> None:
        item = self.items.get(payload.get("output_index"))
        valid = item is not None and item.is_open and item.kind == "function_call"
        if not valid or item is None or item.arguments_done or payload.get("item_id") != item.id:
            self.report.add(
                "delta-outside", f"function-call arguments {stage} outside a call", index
            )
        if item is None:
            return
        if stage == "delta":
            item.arguments.append(str(payload.get("delta", "")))
            return
        item.arguments_done = True
        self.mismatch(index, "".join(item.arguments), payload.get("arguments"), "arguments done")
        self.json_arguments(index, payload.get("arguments"))

    def json_arguments(self, index: int, arguments: object) -> None:
        try:
            deep_json.loads(str(arguments))
        except ValueError:
            self.report.add("arguments-json", f"arguments {arguments!r} are not JSON", index)

    def mismatch(self, index: int, joined: str, got: object, what: str) -> None:
        if joined != got:
            self.report.add(
                "delta-mismatch", f"{what} is {got!r}; the deltas give {joined!r}", index
            )

    def find_part(self, payload: Mapping[str, object]) -> _Part | None:
        item = self.items.get(payload.get("output_index"))
        return None if item is None else item.parts.get(payload.get("content_index"))


def _comparable(item: object) -> object:
    """`item` with each opaque field's value reduced to its presence."""
    if not isinstance(item, Mapping):
        return item
    return {key: "<opaque>" if key in _OPAQUE else value for key, value in item.items()}


def _nth(items: object, index: object) -> Mapping[str, object]:
    if isinstance(items, list) and isinstance(index, int) and 0 <= index < len(items):
        found = items[index]
        if isinstance(found, Mapping):
            return found
    return {}


def check(events: Sequence[EventLike], *, truncated: bool = False) -> list[Violation]:
    """The Responses API rules `events` break (end-of-stream rules skipped if truncated)."""
    report = Report("responses")
    _Walker(report).walk(events, truncated)
    return report.violations


# --- synthetic streams ------------------------------------------------------------------


def stream(
    text: str,
    *,
    reasoning: str | None = None,
    tool_call: ToolCall | None = None,
    ttft: float = 0.3,
    tokens_per_second: float = 40.0,
    failure: Literal["failed", "incomplete", "cut", "error"] | None = None,
    model: str = MODEL,
    input: str = "Say hello.",
) -> Interaction:
    """A Responses API stream of `text`, optionally after `reasoning` and before `tool_call`.

    Output items in order: a reasoning item (`reasoning_text` deltas), the message (skipped
    when `text` is empty and there is a tool call), a function call. The request's JSON body
    is what `client.responses.create(**body)` sends. See `FAILURES` for `failure`;
    `incomplete` keeps the first half of the text and drops the tool call.
    """
    check_failure(failure, FAILURES)
    pieces = tokenize(text)
    if failure == "incomplete":
        pieces, tool_call = pieces[: (len(pieces) + 1) // 2], None
    key = (text, reasoning, tool_call and tool_call.arguments_json, model, input)
    shapes = Shapes(stable_id("resp_", *key), model, tool_call, reasoning is not None)
    steps: list[Step] = [
        Step("response.created", {"response": shapes.response("in_progress", [])}),
        Step("response.in_progress", {"response": shapes.response("in_progress", [])}),
    ]
    status = "incomplete" if failure == "incomplete" else "completed"
    reasoning_pieces = tokenize(reasoning or "")
    if reasoning is not None:
        steps += shapes.content_item("reasoning", reasoning_pieces, "completed")
    if text or tool_call is None:
        steps += shapes.content_item("message", pieces, status)
    if tool_call is not None:
        steps += shapes.function_call(tool_call)
    output_tokens = len(reasoning_pieces) + len(pieces)
    output_tokens += len(tokenize(tool_call.arguments_json)) if tool_call else 0
    usage = usage_of(len(tokenize(input)), output_tokens, len(reasoning_pieces))
    cut = False
    if failure in ("failed", "error", "cut"):
        steps, cut = truncate(steps, shapes.failure(failure))
    elif failure == "incomplete":
        details = {"reason": "max_output_tokens"}
        done = shapes.response("incomplete", shapes.done, usage, incomplete_details=details)
        steps.append(Step("response.incomplete", {"response": done}))
    else:
        done = shapes.response("completed", shapes.done, usage)
        steps.append(Step("response.completed", {"response": done}))
    body: dict[str, object] = {"model": model, "input": input, "stream": True}
    if reasoning is not None:
        body["reasoning"] = {"effort": "medium"}
    if tool_call is not None:
        body["tools"] = shapes.tools
    request = json_request(URL, body, {"authorization": "Bearer sk-synthetic"})
    return build(request, steps, encode, ttft=ttft, tokens_per_second=tokens_per_second, cut=cut)
