"""The JSON shapes of the Responses API: the response object, output items, content parts,
usage, as the openai SDK validates them with `_strict_response_validation=True`.

Fields the SDK requires although the reference stream omits them are marked; the rest
mirrors what the API sends.
"""

from __future__ import annotations

from collections.abc import Sequence

from replay.dialects.common import CREATED, Step, ToolCall, compact, json_schema, sse, tokenize

__all__ = ["Shapes", "encode", "part", "usage_of"]


def encode(number: int, step: Step) -> bytes:
    """The SSE event of `step`, numbered `number`."""
    # `type` first and `sequence_number` second, as the API orders them.
    return sse(step.name, compact({"type": step.name, "sequence_number": number, **step.payload}))


def usage_of(input_tokens: int, output_tokens: int, reasoning_tokens: int) -> dict[str, object]:
    """A response's `usage`, adding up."""
    return {
        "input_tokens": input_tokens,
        # `cache_write_tokens` is required by openai 3.x.
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens,
    }


def part(kind: str, text: str) -> dict[str, object]:
    """An `output_text` or `reasoning_text` content part."""
    if kind == "output_text":
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "reasoning_text", "text": text}


class Shapes:
    """The pieces of one synthetic response; `done` collects the finished output items."""

    def __init__(self, response_id: str, model: str, tool: ToolCall | None, reasons: bool) -> None:
        self.id, self.model, self.reasons = response_id, model, reasons
        self.done: list[dict[str, object]] = []
        self.tools: list[dict[str, object]] = []
        if tool is not None:
            parameters = json_schema(tool.arguments)
            self.tools = [
                {"type": "function", "name": tool.name, "parameters": parameters, "strict": True}
            ]

    def response(
        self, status: str, output: list[dict[str, object]], usage: object = None, **extra: object
    ) -> dict[str, object]:
        # `parallel_tool_calls`, `tool_choice` and `tools` are required by the SDK's model.
        return {
            "id": self.id,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": self.model,
            "output": list(output),
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": "medium" if self.reasons else None, "summary": None},
            "service_tier": "default",
            "store": True,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": self.tools,
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": {},
            **extra,
        }

    def content_item(self, kind: str, pieces: Sequence[str], status: str) -> list[Step]:
        """The events of a message (`output_text`) or reasoning (`reasoning_text`) item."""
        index, text = len(self.done), "".join(pieces)
        part_kind, family = (
            ("output_text", "response.output_text")
            if kind == "message"
            else ("reasoning_text", "response.reasoning_text")
        )
        prefix = "msg_" if kind == "message" else "rs_"
        item_id = prefix + self.id.removeprefix("resp_")
        fields: dict[str, object] = {"id": item_id, "type": kind}
        if kind == "message":
            fields["role"] = "assistant"
        else:
            fields["summary"] = []
        added = {**fields, "status": "in_progress", "content": []}
        done = {**fields, "status": status, "content": [part(part_kind, text)]}
        self.done.append(done)
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        logprobs: dict[str, object] = {"logprobs": []} if kind == "message" else {}
        return [
            Step("response.output_item.added", {"output_index": index, "item": added}),
            Step("response.content_part.added", {**where, "part": part(part_kind, "")}),
            *(
                Step(f"{family}.delta", {**where, "delta": piece, **logprobs}, is_delta=True)
                for piece in pieces
            ),
            Step(f"{family}.done", {**where, "text": text, **logprobs}),
            Step("response.content_part.done", {**where, "part": part(part_kind, text)}),
            Step("response.output_item.done", {"output_index": index, "item": done}),
        ]

    def function_call(self, tool: ToolCall) -> list[Step]:
        """The events of a function call item streaming its arguments."""
        index, arguments = len(self.done), tool.arguments_json
        item_id = "fc_" + self.id.removeprefix("resp_")
        fields: dict[str, object] = {
            "id": item_id,
            "type": "function_call",
            "call_id": tool.call_id("call_"),
        }
        added = {**fields, "name": tool.name, "arguments": "", "status": "in_progress"}
        done = {**fields, "name": tool.name, "arguments": arguments, "status": "completed"}
        self.done.append(done)
        where = {"item_id": item_id, "output_index": index}
        return [
            Step("response.output_item.added", {"output_index": index, "item": added}),
            *(
                Step("response.function_call_arguments.delta", {**where, "delta": p}, True)
                for p in tokenize(arguments)
            ),
            Step(
                "response.function_call_arguments.done",
                {**where, "name": tool.name, "arguments": arguments},
            ),
            Step("response.output_item.done", {"output_index": index, "item": done}),
        ]

    def failure(self, failure: str) -> Step | None:
        """The event an in-band failure ends the stream with (None: the stream is cut)."""
        message = "The server had an error while processing your request."
        if failure == "error":
            return Step("error", {"code": "server_error", "message": message, "param": None})
        if failure == "failed":
            error = {"code": "server_error", "message": message}
            return Step("response.failed", {"response": self.response("failed", [], error=error)})
        return None
