"""Make the sample cassettes of `cassettes/`, and their README:

    python scripts/make_cassettes.py [--out DIR]

Every sample but one is synthetic, built by `replay.dialects` with realistic timing: the
same code always gives the same bytes. `responses-hello.msgpack` is a real recording: the
openai SDK streams the reference response from the local origin (`replay.testing.origin`, on
127.0.0.1) through `use_cassette`, the real recording path. Its `before_record` stores it
as if it came from api.openai.com (so an SDK with its default base URL replays it) and
leaves out the headers that change with the day and the machine (Date, the SDK's platform
headers). Its timing is real, so each recording differs a little: when a new recording
says the same as the one already in DIR (see `without_times`), the one in DIR is kept, so
that running this script again changes nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

import replay
from replay.dialects import ToolCall, anthropic, chat, responses
from replay.model import Interaction
from replay.redact.redactor import Redactor
from replay.store.cassette import Cassette

CASSETTES = Path(__file__).resolve().parents[1] / "cassettes"

WEATHER = ToolCall("get_weather", {"city": "Paris", "unit": "celsius"})
TIME = ToolCall("get_time", {"timezone": "Europe/Paris"})


@attrs.frozen
class Sample:
    """One sample cassette: its file name, what it shows, and how it is made."""

    name: str
    about: str
    make: Callable[[], Interaction]
    recorded: bool = False


# --- the recorded sample ------------------------------------------------------------------

RESPONSES_URL = "https://api.openai.com/v1/responses"
# What varies between runs and machines, not between answers: left out of the recording.
VOLATILE_HEADERS = frozenset(
    {
        "date",
        "user-agent",
        "x-stainless-arch",
        "x-stainless-os",
        "x-stainless-package-version",
        "x-stainless-runtime",
        "x-stainless-runtime-version",
    }
)


def as_if_from_openai(interaction: Interaction) -> Interaction:
    """`interaction` as if api.openai.com had answered it, without volatile headers."""
    request, response = interaction.request, interaction.response
    headers = [
        (name, "api.openai.com" if name.lower() == "host" else value)
        for name, value in request.headers
        if name.lower() not in VOLATILE_HEADERS
    ]
    return replay.Interaction(
        attrs.evolve(request, url=RESPONSES_URL, headers=headers),
        attrs.evolve(
            response,
            headers=[(n, v) for n, v in response.headers if n.lower() not in VOLATILE_HEADERS],
        ),
    )


def record_hello() -> Interaction:
    """Record the reference Responses stream from the local origin, through the openai SDK."""
    import openai

    from replay.testing import Origin

    with tempfile.TemporaryDirectory() as scratch, Origin() as origin:
        client = openai.OpenAI(api_key="sk-dummy", base_url=f"{origin.url}/v1", max_retries=0)
        path = Path(scratch) / "hello.msgpack"
        with replay.use_cassette(path, record_mode="all", before_record=as_if_from_openai):
            stream = client.responses.create(model="gpt-4.1", input="Say hello.", stream=True)
            for _ in stream:
                pass
        (interaction,) = Cassette.load(path).interactions
    return interaction


def without_times(interaction: Interaction) -> tuple[object, ...]:
    """What a recording says, times aside: two recordings of one answer agree on it.

    The request's headers are left out too: the SDK's depend on what is installed.
    """
    request, response, end = interaction.request, interaction.response, interaction.response.end
    chunks = tuple(chunk.data for chunk in response.chunks)
    return (
        (request.method, request.url, request.body),
        (response.status, response.headers, chunks),
        (end.error, end.message, end.truncated),
    )


# --- the samples --------------------------------------------------------------------------

SAMPLES = (
    Sample(
        "responses-hello.msgpack",
        'OpenAI Responses: the reference stream, "Hello there, how may I assist you today?"',
        record_hello,
        recorded=True,
    ),
    Sample(
        "responses-reasoning-tool-call.msgpack",
        "OpenAI Responses: reasoning, a message, then a function call (get_weather)",
        lambda: responses.stream(
            "Let me look up the weather in Paris.",
            reasoning="The user asks about the weather in Paris. I should call get_weather.",
            tool_call=WEATHER,
            input="What is the weather in Paris?",
            ttft=0.45,
            tokens_per_second=55,
        ),
    ),
    Sample(
        "responses-failed.msgpack",
        "OpenAI Responses: the server fails mid-answer (response.failed, server_error)",
        lambda: responses.stream(
            "Once upon a time, a small robot learned to paint the sky.",
            failure="failed",
            input="Tell me a story.",
        ),
    ),
    Sample(
        "responses-incomplete.msgpack",
        "OpenAI Responses: cut short by max_output_tokens (response.incomplete)",
        lambda: responses.stream(
            "Once upon a time, a small robot learned to paint the sky.",
            failure="incomplete",
            input="Tell me a story.",
        ),
    ),
    Sample(
        "chat-tool-calls-usage.msgpack",
        "OpenAI Chat Completions: text, two tool calls, and the usage chunk",
        lambda: chat.stream(
            "Let me check both for you.",
            tool_calls=[WEATHER, TIME],
            include_usage=True,
            prompt="What are the weather and the time in Paris?",
            ttft=0.25,
            tokens_per_second=70,
        ),
    ),
    Sample(
        "anthropic-thinking-tool-use.msgpack",
        "Anthropic Messages: a signed thinking block, text, then a tool_use block",
        lambda: anthropic.stream(
            "I'll check the current weather in Paris.",
            thinking="The user wants the weather in Paris; the get_weather tool gives it.",
            tool_use=WEATHER,
            prompt="What is the weather in Paris?",
            ttft=0.6,
            tokens_per_second=60,
        ),
    ),
)


def make(sample: Sample, out: Path) -> Interaction:
    """Write `sample` into `out` (keeping a recording that says the same); its interaction."""
    target = out / sample.name
    interaction = Redactor().interaction(sample.make())  # stored as a recording would be
    if sample.recorded and target.exists():
        try:
            kept = Cassette.load(target).interactions
        except replay.CassetteFormatError:  # a format this version no longer reads
            kept = []
        if len(kept) == 1 and without_times(kept[0]) == without_times(interaction):
            interaction = kept[0]
    Cassette([interaction]).save(target)
    return interaction


# --- the README ---------------------------------------------------------------------------

README_HEAD = """\
# Sample cassettes

Made by `python scripts/make_cassettes.py` (do not edit them, nor this file, by hand: change
the script and run it again). Each holds one streamed interaction. The tests
(`tests/test_cassettes.py`) check that each passes `replay check`, that the script gives
these very bytes, and that each replays through the SDK of its dialect.

```bash
replay check cassettes/*.msgpack
replay show cassettes/responses-hello.msgpack --events
replay diff cassettes/responses-failed.msgpack cassettes/responses-incomplete.msgpack
```

```python
with replay.use_cassette("cassettes/responses-hello.msgpack", record_mode="none", speed=1):
    for event in openai.OpenAI(api_key="unused").responses.create(
        model="gpt-4.1", input="Say hello.", stream=True
    ):
        print(event.type)
```

All but `responses-hello.msgpack` are synthetic (`replay.dialects`), with realistic timing.
`responses-hello.msgpack` was recorded through the real recording path: the openai SDK
streaming from the local origin (`replay.testing.origin`), stored as if from api.openai.com.

| file | what it holds | made | events | ends with |
|---|---|---|---:|---|
"""


def readme(made: Sequence[tuple[Sample, Interaction]]) -> str:
    """The README of the samples: how to use them, then a table of them."""
    rows = []
    for sample, interaction in made:
        events = interaction.response.events()
        how = "recorded" if sample.recorded else "synthetic"
        last = "-" if not events else events[-1].event
        if last == "message":  # an event with no name (Chat Completions): show its data
            last = f"data: {events[-1].data}"[:40]
        rows.append(f"| `{sample.name}` | {sample.about} | {how} | {len(events)} | `{last}` |\n")
    return README_HEAD + "".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Write every sample and the README into `--out` (default: the repository's)."""
    parser = argparse.ArgumentParser(description="Make the sample cassettes of cassettes/.")
    parser.add_argument("--out", type=Path, default=CASSETTES, help="default: cassettes/")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    made = [(sample, make(sample, args.out)) for sample in SAMPLES]
    (args.out / "README.md").write_text(readme(made), encoding="utf-8")
    for sample, _ in made:
        print(args.out / sample.name, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
