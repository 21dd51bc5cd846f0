"""Realistic SSE byte streams as timed chunk scripts, for the demo origin and the tests.

Each builder returns ``[(delay_seconds, event_bytes), ...]``: one complete SSE event per
element, preceded by the pause a real server leaves before it (time to first event, then a
steady token rate). The JSON carries every field the official SDKs require, so
``openai`` and ``anthropic`` parse each event into its typed class even with strict response
validation. Ids and timestamps are fixed so recordings of these streams are reproducible.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

__all__ = [
    "HELLO_TEXT",
    "HELLO_TOKENS",
    "TimedChunks",
    "anthropic_hello",
    "chat_hello",
    "responses_hello",
]

TimedChunks = list[tuple[float, bytes]]
"""``(seconds to wait before this chunk, the chunk's bytes)`` in sending order."""

HELLO_TOKENS: tuple[str, ...] = (
    "Hello",
    " there",
    ",",
    " how",
    " may",
    " I",
    " assist",
    " you",
    " today",
    "?",
)
HELLO_TEXT = "".join(HELLO_TOKENS)

# Typical latencies of the hosted APIs: a pause while the prompt is processed, then tokens
# at ~33/s, with bookkeeping events sent back to back.
FIRST_EVENT_DELAY = 0.3
TOKEN_DELAY = 0.03
SMALL_DELAY = 0.005

_CREATED = 1735722153
_INPUT_TOKENS = 9


def _json(payload: Mapping[str, object]) -> str:
    # Compact and on one line, as the APIs send it; UTF-8 text is not \u-escaped.
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def _event(event: str, payload: Mapping[str, object]) -> bytes:
    return f"event: {event}\ndata: {_json(payload)}\n\n".encode()


def _data(payload: Mapping[str, object]) -> bytes:
    return f"data: {_json(payload)}\n\n".encode()


def _timed(scale: float, items: Sequence[tuple[float, bytes]]) -> TimedChunks:
    return [(delay * scale, data) for delay, data in items]


# --- OpenAI Responses API ---------------------------------------------------------------

_RESP_ID = "resp_4b71d12c86d94e719c7e3984a7bb7941"
_MSG_ID = "msg_4b71d12c86d94e719c7e3984a7bb7941"
_RESP_MODEL = "gpt-4.1-2025-04-14"


def _output_text(text: str) -> dict[str, object]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message(status: str, content: list[dict[str, object]]) -> dict[str, object]:
    return {
        "id": _MSG_ID,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _response(
    status: str, output: list[dict[str, object]], usage: dict[str, object] | None
) -> dict[str, object]:
    # `parallel_tool_calls`, `tool_choice` and `tools` are required by the SDK's Response
    # model although the reference stream omits them; the rest mirrors what the API sends.
    return {
        "id": _RESP_ID,
        "object": "response",
        "created_at": _CREATED,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": _RESP_MODEL,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


def responses_hello(*, scale: float = 1.0, tokens: Sequence[str] = HELLO_TOKENS) -> TimedChunks:
    """The OpenAI Responses API stream (``responses.create(stream=True)``) of one message.

    Args:
        scale: multiplier for every delay (``0`` sends everything at once).
        tokens: the text deltas; their concatenation is the message text.
    """
    text = "".join(tokens)
    where = {"item_id": _MSG_ID, "output_index": 0, "content_index": 0}
    usage = {
        "input_tokens": _INPUT_TOKENS,
        # `cache_write_tokens` is required by openai 3.x although the reference omits it.
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": len(tokens),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": _INPUT_TOKENS + len(tokens),
    }
    done_message = _message("completed", [_output_text(text)])
    steps: list[tuple[float, str, dict[str, object]]] = [
        (FIRST_EVENT_DELAY, "response.created", {"response": _response("in_progress", [], None)}),
        (SMALL_DELAY, "response.in_progress", {"response": _response("in_progress", [], None)}),
        (
            SMALL_DELAY,
            "response.output_item.added",
            {"output_index": 0, "item": _message("in_progress", [])},
        ),
        (SMALL_DELAY, "response.content_part.added", {**where, "part": _output_text("")}),
    ]
    steps += [
        (TOKEN_DELAY, "response.output_text.delta", {**where, "delta": token, "logprobs": []})
        for token in tokens
    ]
    steps += [
        (SMALL_DELAY, "response.output_text.done", {**where, "text": text, "logprobs": []}),
        (SMALL_DELAY, "response.content_part.done", {**where, "part": _output_text(text)}),
        (SMALL_DELAY, "response.output_item.done", {"output_index": 0, "item": done_message}),
        (
            SMALL_DELAY,
            "response.completed",
            {"response": _response("completed", [done_message], usage)},
        ),
    ]
    # `type` first and `sequence_number` second, as the API orders them.
    return _timed(
        scale,
        [
            (delay, _event(kind, {"type": kind, "sequence_number": number, **fields}))
            for number, (delay, kind, fields) in enumerate(steps)
        ],
    )


# --- OpenAI Chat Completions ------------------------------------------------------------

_CHAT_ID = "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
_CHAT_MODEL = "gpt-4o-mini-2024-07-18"


def _chat_chunk(
    choices: list[dict[str, object]], usage: dict[str, object] | None, include_usage: bool
) -> bytes:
    chunk: dict[str, object] = {
        "id": _CHAT_ID,
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": _CHAT_MODEL,
        "service_tier": "default",
        "system_fingerprint": "fp_06737a9306",
        "choices": choices,
    }
    # With `stream_options.include_usage` every chunk carries `usage` (null until the last).
    if include_usage:
        chunk["usage"] = usage
    return _data(chunk)


def _choice(delta: dict[str, object], finish_reason: str | None = None) -> dict[str, object]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def chat_hello(
    *, scale: float = 1.0, include_usage: bool = False, tokens: Sequence[str] = HELLO_TOKENS
) -> TimedChunks:
    """The Chat Completions stream (``chat.completions.create(stream=True)``) of one message.

    The first chunk carries the role, the last content-free chunk ``finish_reason: "stop"``;
    with ``include_usage`` a chunk with no choices and the token usage follows; ``[DONE]`` ends.

    Args:
        scale: multiplier for every delay (``0`` sends everything at once).
        include_usage: add the usage chunk, as ``stream_options={"include_usage": True}`` does.
        tokens: the content deltas; their concatenation is the message text.
    """
    items: list[tuple[float, bytes]] = [
        (
            FIRST_EVENT_DELAY,
            _chat_chunk(
                [_choice({"role": "assistant", "content": "", "refusal": None})],
                None,
                include_usage,
            ),
        )
    ]
    items += [
        (TOKEN_DELAY, _chat_chunk([_choice({"content": token})], None, include_usage))
        for token in tokens
    ]
    items.append((TOKEN_DELAY, _chat_chunk([_choice({}, "stop")], None, include_usage)))
    if include_usage:
        usage = {
            "prompt_tokens": _INPUT_TOKENS,
            "completion_tokens": len(tokens),
            "total_tokens": _INPUT_TOKENS + len(tokens),
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        items.append((SMALL_DELAY, _chat_chunk([], usage, include_usage)))
    items.append((SMALL_DELAY, b"data: [DONE]\n\n"))
    return _timed(scale, items)


# --- Anthropic Messages -----------------------------------------------------------------

_ANTHROPIC_ID = "msg_01XFDUDYJgAACzvnptvVoYEL"
_ANTHROPIC_MODEL = "claude-sonnet-4-20250514"


def anthropic_hello(*, scale: float = 1.0, tokens: Sequence[str] = HELLO_TOKENS) -> TimedChunks:
    """The Anthropic Messages stream (``messages.create(stream=True)``) of one text block.

    Includes the ``ping`` event the API sends after the first block starts; the SDK skips it.

    Args:
        scale: multiplier for every delay (``0`` sends everything at once).
        tokens: the text deltas; their concatenation is the message text.
    """
    message: dict[str, object] = {
        "id": _ANTHROPIC_ID,
        "type": "message",
        "role": "assistant",
        "model": _ANTHROPIC_MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": _INPUT_TOKENS,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1,
            "service_tier": "standard",
        },
    }
    steps: list[tuple[float, str, dict[str, object]]] = [
        (FIRST_EVENT_DELAY, "message_start", {"message": message}),
        (
            SMALL_DELAY,
            "content_block_start",
            {"index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (SMALL_DELAY, "ping", {}),
    ]
    steps += [
        (
            TOKEN_DELAY,
            "content_block_delta",
            {"index": 0, "delta": {"type": "text_delta", "text": token}},
        )
        for token in tokens
    ]
    steps += [
        (SMALL_DELAY, "content_block_stop", {"index": 0}),
        (
            SMALL_DELAY,
            "message_delta",
            {
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": len(tokens)},
            },
        ),
        (SMALL_DELAY, "message_stop", {}),
    ]
    return _timed(
        scale,
        [(delay, _event(kind, {"type": kind, **fields})) for delay, kind, fields in steps],
    )
