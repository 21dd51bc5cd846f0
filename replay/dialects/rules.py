"""Every rule the dialect validators check: its stable name, what it requires, how much a
break matters.

The severity says what a client suffers when a stream breaks the rule:

- `error`: the client breaks. The official SDK raises, or assembles something the stream
  did not say (the openai SDK concatenates a role repeated in every delta into
  "assistantassistant"; a tool-call fragment without `index` crashes its accumulator), or
  the bytes themselves are cut or undecodable. A provider quirk is no excuse.
- `warning`: the stream breaks its dialect's contract, yet the official SDK assembles what
  it says; a stricter client (or a test asserting on the contract) may not.
- `note`: bookkeeping no client assembles is inconsistent (token counts that do not add up).

Documented provider behaviour is not a rule broken: the validators accept it (an Azure
content-filter preamble chunk, re-encrypted reasoning, streams recorded before a field
existed), so it is never reported at all.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["RULES", "SEVERITIES", "Severity", "severity_of"]

Severity = Literal["error", "warning", "note"]

_RULES: dict[str, tuple[Severity, str]] = {
    "stream.utf8": ("error", "the body is valid UTF-8"),
    "ndjson.json": ("error", "every line of an NDJSON stream is a JSON object"),
    "stream.eventstream": (
        "error",
        "every message of an AWS event stream has matching CRCs and possible lengths",
    ),
    "converse.json": ("error", "every event's payload is a JSON object"),
    "converse.first-event": ("error", "messageStart comes first, once"),
    "converse.block-order": (
        "error",
        "a content block's start and deltas come before its stop, each block stopped once",
    ),
    "converse.delta": (
        "error",
        "a contentBlockDelta's delta holds one of text, toolUse, reasoningContent, citation",
    ),
    "converse.message-stop": (
        "error",
        "one messageStop with a stopReason, after every content block, before metadata",
    ),
    "converse.metadata": ("warning", "the stream ends with a metadata event carrying usage"),
    "converse.usage-total": (
        "note",
        "totalTokens = inputTokens + outputTokens (+ the cache read and write tokens)",
    ),
    "converse.exception-last": ("error", "an exception event ends the stream"),
    "stream.truncated": (
        "error",
        "the body ends after a complete event, without a transport error",
    ),
    "resume.continues": (
        "error",
        "a resumed stream starts right after the event the client resumed from (its "
        "sequence_number or numeric SSE id), repeating and skipping none",
    ),
    "resume.from": (
        "warning",
        "a client resumes from the last event it got (else the events between come twice)",
    ),
    "jsonrpc.json": ("error", "every event's data is a JSON-RPC 2.0 message (or a batch)"),
    "jsonrpc.message": ("error", "a message is a request, a notification or a response"),
    "jsonrpc.result-or-error": ("error", "a response has exactly one of result and error"),
    "jsonrpc.id-answers": ("error", "a response answers a request of the request's body, once"),
    "jsonrpc.progress-token": (
        "error",
        "a progress notification carries a progressToken (string or integer) a request gave",
    ),
    "jsonrpc.unanswered": ("error", "a stream that ends cleanly answered every request it carried"),
    "responses.json": ("error", "every event's data is a JSON object"),
    "responses.event-type": ("warning", "the `event:` name equals data.type"),
    "responses.first-event-created": ("error", "the first event is response.created"),
    "responses.sequence-number": (
        "warning",
        "sequence_number counts from 0 up by exactly 1 (streams recorded before the API "
        "sent it carry none at all)",
    ),
    "responses.terminal-event": (
        "error",
        "exactly one terminal event (completed, failed, incomplete, error), and it is last",
    ),
    "responses.response-id": ("warning", "every lifecycle event carries the same response id"),
    "responses.status": ("warning", "a terminal event's response has the status its name says"),
    "responses.usage-total": ("note", "usage total_tokens = input_tokens + output_tokens"),
    "responses.item-order": (
        "error",
        "output items are added in index order, once, and done once; content parts belong "
        "to an open item",
    ),
    "responses.unclosed": (
        "warning",
        "every output_item.added and content_part.added gets its done (not required before "
        "response.failed or error)",
    ),
    "responses.delta-outside": (
        "error",
        "text, reasoning and argument deltas (and their done) come inside an open part or "
        "function call of the right type",
    ),
    "responses.delta-mismatch": (
        "error",
        "the joined deltas equal the done event, the done part and the done item",
    ),
    "responses.arguments-json": ("warning", "function-call arguments parse as JSON"),
    "responses.final-output": (
        "warning",
        "the terminal response's output repeats the done items (opaque encrypted_content "
        "may differ: it is re-encrypted)",
    ),
    "chat.json": ("error", "every data line is a JSON object, except [DONE]"),
    "chat.done-last": (
        "warning",
        "exactly one [DONE], and it is last (not required after an error)",
    ),
    "chat.error-last": ("warning", "an in-band error chunk ends the stream"),
    "chat.id-constant": (
        "warning",
        "every chunk has the same id (an Azure content-filter preamble with empty id, model "
        "and choices aside)",
    ),
    "chat.model-constant": ("warning", "every chunk has the same model (the preamble aside)"),
    "chat.role-first": ("error", "each choice's role comes once, in its first delta"),
    "chat.finish-reason": (
        "warning",
        "each choice gets exactly one finish_reason, and nothing after it",
    ),
    "chat.tool-call-start": ("error", "each tool call's first fragment carries its id and name"),
    "chat.tool-call-index": ("error", "every tool-call fragment carries its integer index"),
    "chat.tool-arguments-json": ("warning", "each tool call's argument fragments join to JSON"),
    "chat.usage-last": ("warning", "with usage, only the final chunk carries it"),
    "chat.usage-missing": (
        "warning",
        'chunks that carry "usage": null (stream_options.include_usage) are followed by a '
        "final chunk with the usage",
    ),
    "chat.usage-total": ("note", "usage total_tokens = prompt_tokens + completion_tokens"),
    "anthropic.json": ("error", "every event's data is a JSON object"),
    "anthropic.event-type": ("error", "the `event:` name equals data.type"),
    "anthropic.message-start-first": ("error", "message_start comes first, and only first"),
    "anthropic.block-order": (
        "error",
        "content blocks start, delta and stop in index order, one open at a time",
    ),
    "anthropic.delta-type": ("error", "a delta's type fits its block's type"),
    "anthropic.partial-json": ("warning", "a tool_use block's partial_json joins to JSON"),
    "anthropic.signature": ("warning", "a thinking block has its signature"),
    "anthropic.message-delta": (
        "warning",
        "one message_delta, with a stop_reason, before message_stop",
    ),
    "anthropic.message-stop-last": ("warning", "message_stop comes once, and last"),
    "anthropic.error-last": ("warning", "an error event ends the stream"),
    "gemini.json": ("error", "every event's data is a JSON object (no [DONE])"),
    "gemini.candidates": (
        "error",
        "every chunk carries a list of candidate objects (a blocked prompt's promptFeedback "
        "chunk, and a last chunk of usage only, aside)",
    ),
    "gemini.content": ("error", "a candidate's content is an object of role model"),
    "gemini.parts": (
        "error",
        "a candidate's content has a list of parts, each carrying data (a text string, a "
        "functionCall with its name and args, inlineData…)",
    ),
    "gemini.text-delta": (
        "warning",
        "each chunk's text is a delta: it does not repeat the text so far",
    ),
    "gemini.finish-reason": (
        "warning",
        "each candidate gets a finishReason on its last chunk, and nothing after it",
    ),
    "gemini.usage": ("warning", "the last chunk carries the usageMetadata"),
    "gemini.usage-total": (
        "note",
        "usageMetadata totalTokenCount = prompt + candidates + thoughts + tool-use prompt counts",
    ),
    "gemini.model-constant": ("warning", "every chunk has the same modelVersion"),
    "gemini.response-id": ("warning", "every chunk has the same responseId"),
    "gemini.error-last": ("warning", "an in-band error chunk ends the stream"),
    "cohere.json": ("error", "every event's data is a JSON object, except a last [DONE]"),
    "cohere.event-type": ("error", "the `event:` name equals data.type"),
    "cohere.message-start-first": ("error", "message-start comes first, and only first"),
    "cohere.block-order": (
        "error",
        "content, tool-call and citation blocks start, fill and end at their index, one open "
        "at a time, all closed before message-end",
    ),
    "cohere.tool-call-start": ("error", "each tool-call-start carries the call's id and name"),
    "cohere.tool-arguments-json": ("warning", "each tool call's argument pieces join to JSON"),
    "cohere.finish-reason": ("warning", "message-end carries a finish_reason"),
    "cohere.message-end-last": (
        "warning",
        "message-end comes once, last (a [DONE] may follow it, and nothing after that)",
    ),
    # WebSocket conversations (`replay.dialects.realtime`): the index is a frame's position.
    "realtime.json": ("error", "every text frame is a JSON object with a type"),
    "realtime.session-created-first": ("error", "the server's first event is session.created"),
    "realtime.event-id": ("warning", "every server event carries an event_id"),
    "realtime.response-order": (
        "error",
        "a response's events come between its response.created and its one response.done",
    ),
    "realtime.response-done": ("error", "every response.created is answered by a response.done"),
    "realtime.response-id": ("warning", "a response's events name the open response's id"),
    "realtime.done-status": (
        "warning",
        "response.done's status is completed, cancelled, failed or incomplete",
    ),
    "realtime.error-event": ("warning", "an error event carries an error with type and message"),
    "responses-ws.turn": ("error", "each client response.create gets server events of its own"),
    "websocket.close-code": ("warning", "a close frame carries a normal code (1000 or 1001)"),
}

RULES: dict[str, str] = {name: text for name, (_, text) in _RULES.items()}
"""Every rule `validate` checks, by name, with what it requires."""

SEVERITIES: dict[str, Severity] = {name: severity for name, (severity, _) in _RULES.items()}
"""How much breaking each rule matters (see the module's docstring for the scale)."""


def severity_of(rule: str) -> Severity:
    """The severity of `rule`; `error` for a rule not listed (a body that cannot be read)."""
    return SEVERITIES.get(rule, "error")
