"""A real streaming HTTP origin on 127.0.0.1 and the LLM streams it serves: for this project's
tests, the demo, and yours.

    from replay.testing import Origin, Script, responses_hello

    with Origin({"/v1/responses": Script(chunks=responses_hello())}) as origin:
        ...  # a client asking origin.url + "/v1/responses" gets the stream with real delays

`Origin` serves each `Script` (its chunks with their delays, status, headers, how it ends);
`responses_hello`, `chat_hello` and `anthropic_hello` build the OpenAI Responses, Chat
Completions and Anthropic Messages streams of a short answer, as the APIs send them.
"""

from replay.testing.origin import Origin, Script, SeenRequest
from replay.testing.streams import (
    FIRST_EVENT_DELAY,
    HELLO_TEXT,
    HELLO_TOKENS,
    SMALL_DELAY,
    TOKEN_DELAY,
    TimedChunks,
    anthropic_hello,
    chat_hello,
    responses_hello,
)

__all__ = [
    "FIRST_EVENT_DELAY",
    "HELLO_TEXT",
    "HELLO_TOKENS",
    "SMALL_DELAY",
    "TOKEN_DELAY",
    "Origin",
    "Script",
    "SeenRequest",
    "TimedChunks",
    "anthropic_hello",
    "chat_hello",
    "responses_hello",
]
