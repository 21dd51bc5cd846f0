"""`replay synth`: a synthetic stream of any dialect, written into a cassette.

The three builders of `replay.dialects` name the same things differently (`reasoning` /
`thinking`, `tool_call` / `tool_calls` / `tool_use`, `input` / `prompt`); `synthesize` gives
them one signature, the one the command line offers. `append` stores an interaction the way
a recording would: secrets redacted, added to the cassette under its lock, saved atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replay.dialects import ToolCall, anthropic, chat, cohere, converse, gemini, invoke, responses
from replay.errors import ConfigurationError
from replay.model import Interaction
from replay.redact import deep_json
from replay.redact.redactor import Redactor
from replay.store.file import merge

__all__ = ["DIALECTS", "FAILURES", "append", "synthesize", "tool_call"]

DIALECTS: tuple[str, ...] = (
    "responses",
    "chat",
    "anthropic",
    "gemini",
    "cohere",
    "converse",
    "anthropic-bedrock",
)
"""The dialects `synthesize` builds (JSON-RPC's streams answer requests: none here);
`anthropic-bedrock` is Claude on Bedrock's `InvokeModelWithResponseStream`
(`replay.dialects.invoke`), whose events are Anthropic's."""
FAILURES: dict[str, tuple[str, ...]] = {
    name: tuple(f for f in module.FAILURES if f is not None)
    for name, module in (
        ("responses", responses),
        ("chat", chat),
        ("anthropic", anthropic),
        ("gemini", gemini),
        ("cohere", cohere),
        ("converse", converse),
        ("anthropic-bedrock", invoke),
    )
}
"""The failures each dialect's stream can end with (see each module's `FAILURES`)."""


def tool_call(name: str, arguments_json: str) -> ToolCall:
    """A tool call from its name and its arguments as a JSON object.

    Raises:
        ConfigurationError: the arguments are not a JSON object.
    """
    try:
        arguments = deep_json.loads(arguments_json)
    except ValueError as error:
        raise ConfigurationError(
            f"the arguments of tool call {name!r} are not JSON ({error}): "
            'give a JSON object, like \'{"city": "Paris"}\''
        ) from None
    if not isinstance(arguments, dict):
        raise ConfigurationError(
            f"the arguments of tool call {name!r} must be a JSON object, "
            f"not {type(arguments).__name__}"
        )
    return ToolCall(name, arguments)


def synthesize(
    dialect: str,
    text: str = "",
    *,
    reasoning: str | None = None,
    tool_calls: Sequence[ToolCall] = (),
    usage: bool = False,
    failure: str | None = None,
    ttft: float = 0.3,
    tokens_per_second: float = 40.0,
    model: str | None = None,
    prompt: str | None = None,
) -> Interaction:
    """A synthetic stream of `dialect` (one of `DIALECTS`; Gemini's in SSE, as google-genai
    asks for it: `replay.dialects.gemini.stream` makes the JSON-array one; `converse` and
    `anthropic-bedrock` as AWS event streams, which boto3 reads).

    Args:
        text: what the assistant says.
        reasoning: the reasoning before it (Anthropic: a signed thinking block; Gemini:
            thought parts; Cohere: a thinking block; Converse: none).
        tool_calls: the calls made after the text (one at most, except in chat).
        usage: chat only: add the usage chunk (`stream_options.include_usage`); the other
            dialects always report usage.
        failure: how the stream fails, one of `FAILURES[dialect]`; None for success.
        ttft: seconds until the first event.
        tokens_per_second: the pace of the deltas.
        model: the model named (default: the dialect's `MODEL`).
        prompt: the user's message in the request (default: "Say hello.").

    Raises:
        ConfigurationError: an unknown dialect, an option it does not take, a failure it
            does not know, or timing that makes no sense.
    """
    if dialect not in DIALECTS:
        raise ConfigurationError(f"dialect must be one of {', '.join(DIALECTS)}, not {dialect!r}")
    if failure is not None and failure not in FAILURES[dialect]:
        raise ConfigurationError(
            f"a {dialect} stream fails with one of {', '.join(FAILURES[dialect])}, not {failure!r}"
        )
    if dialect != "chat" and len(tool_calls) > 1:
        raise ConfigurationError(f"a {dialect} stream makes one tool call at most here")
    if dialect != "chat" and usage:
        raise ConfigurationError(f"usage is for chat streams: a {dialect} stream always has it")
    common: dict[str, Any] = {"ttft": ttft, "tokens_per_second": tokens_per_second}
    common["failure"] = failure
    if model is not None:
        common["model"] = model
    if prompt is not None:
        common["input" if dialect == "responses" else "prompt"] = prompt
    if dialect == "chat":
        if reasoning is not None:
            raise ConfigurationError("Chat Completions streams carry no reasoning")
        return chat.stream(text, tool_calls=tool_calls, include_usage=usage, **common)
    return _one_call(dialect, text, reasoning, tool_calls[0] if tool_calls else None, common)


def _one_call(
    dialect: str, text: str, reasoning: str | None, call: ToolCall | None, common: dict[str, Any]
) -> Interaction:
    """A stream of a dialect that makes one tool call at most, each builder with its names."""
    if dialect == "responses":
        return responses.stream(text, reasoning=reasoning, tool_call=call, **common)
    if dialect == "gemini":
        return gemini.stream(text, thinking=reasoning, function_call=call, **common)
    if dialect == "cohere":
        return cohere.stream(text, thinking=reasoning, tool_call=call, **common)
    if dialect == "converse":
        if reasoning is not None:
            raise ConfigurationError("a synthetic converse stream carries no reasoning")
        return converse.stream(text, tool_use=call, **common)
    builder = invoke.stream if dialect == "anthropic-bedrock" else anthropic.stream
    return builder(text, thinking=reasoning, tool_use=call, **common)


def append(path: str | Path, interaction: Interaction) -> int:
    """Add `interaction` to the cassette at `path` (created if missing); its index there.

    It is stored as a recording would be: secret headers redacted. The read, append and
    atomic save happen under the cassette's inter-process lock.

    Raises:
        CassetteFormatError: the file exists but is not a cassette this version reads.
    """
    cleaned = Redactor().interaction(interaction)  # no hook: never None
    assert cleaned is not None
    return merge(Path(path), [cleaned]) - 1
