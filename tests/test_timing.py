"""Timing helpers (replay.inspect.timing) on recorded and faulted streams of every dialect."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path

import attrs
import httpx
import pytest
from pacing import LATE

import replay
from replay import Chunk, Response, StreamEnd, faults
from replay.dialects import anthropic, chat, responses
from replay.inspect import timing
from replay.model import Chunks
from replay.testing import Origin, Script, chat_hello

BUILDERS: dict[str, Callable[..., replay.Interaction]] = {
    "responses": responses.stream,
    "chat": chat.stream,
    "anthropic": anthropic.stream,
}
TEXT = "Hello there, friend. How are you today?"


@pytest.mark.parametrize("dialect", BUILDERS)
def test_ttft_is_the_first_text_delta_and_the_rate_is_the_recorded_one(dialect: str) -> None:
    interaction = BUILDERS[dialect](TEXT, ttft=0.4, tokens_per_second=25)
    deltas = timing.token_events(interaction)

    assert len(deltas) == len(responses_tokens(TEXT))
    assert timing.ttft(interaction) == deltas[0].at
    assert 0.4 <= deltas[0].at < 0.5  # bookkeeping events come first, a few ms apart
    assert timing.tokens_per_second(interaction) == pytest.approx(25)
    assert timing.first_event(interaction) == pytest.approx(0.4)
    assert timing.ttfb(interaction) == pytest.approx(0.4)


def responses_tokens(text: str) -> list[str]:
    """The tokens the synthetic builders split `text` into."""
    return [e.data for e in timing.token_events(responses.stream(text))]


def test_gaps_are_the_seconds_between_events() -> None:
    response = Response(
        status=200,
        chunks=[
            Chunk(0.5, b"data: a\n\n"),
            Chunk(0.75, b"data: b\n\ndata: c\n\n"),
            Chunk(2.0, b"data: d\n\n"),
        ],
    )

    assert timing.gaps(response) == [0.25, 0.0, 1.25]
    assert timing.first_event(response) == 0.5


def test_a_stream_of_no_known_dialect_has_no_tokens_and_ttft_falls_back() -> None:
    response = Response(status=200, chunks=[Chunk(0.2, b"data: plain\n\n")])

    assert timing.token_events(response) == []
    assert timing.ttft(response) == 0.2
    assert timing.tokens_per_second(response) is None


def test_an_empty_body_has_no_figures() -> None:
    response = Response(status=204)

    assert timing.ttfb(response) is None
    assert timing.ttft(response) is None
    assert timing.gaps(response) == []
    assert timing.summary(response).describe() == (
        "ttfb -, ttft -, duration 0.000s, 0 events, 0 tokens, max gap -, -"
    )


def test_events_already_parsed_give_the_same_figures_without_parsing_again() -> None:
    response = chat.stream("One two three.", include_usage=True).response
    events = response.events()
    assert timing.summary(response, events=events) == timing.summary(response)
    assert timing.gaps(response, events=events) == timing.gaps(response)
    assert timing.summary(response, events=events[:2]).events == 2  # taken as given


def test_deltas_arriving_at_once_have_an_infinite_rate() -> None:
    recorded = responses.stream(TEXT).response
    at_once = attrs.evolve(
        recorded,
        chunks=Chunks([1.0] * len(recorded.chunks), recorded.chunks.payloads),
        end=StreamEnd(1.0),
    )

    assert timing.tokens_per_second(at_once) == math.inf


def test_timing_of_a_faulted_stream_is_what_the_client_sees() -> None:
    response = responses.stream(TEXT, ttft=0.3, tokens_per_second=20).response

    assert timing.ttft(faults.slow(2).apply(response)) == pytest.approx(2 * timing.ttft(response))
    assert timing.tokens_per_second(faults.slow(2).apply(response)) == pytest.approx(10)
    stalled = faults.stall(after_events=5, seconds=3).apply(response)
    assert max(timing.gaps(stalled)) == pytest.approx(3 + 1 / 20)
    assert timing.ttft(faults.rechunk(1).apply(response)) == timing.ttft(response)


def test_summary_gathers_every_figure() -> None:
    interaction = anthropic.stream(TEXT, ttft=0.25, tokens_per_second=50)
    summary = timing.summary(interaction)

    assert summary.ttft == timing.ttft(interaction)
    assert summary.first_event == timing.first_event(interaction)
    assert summary.tokens == len(timing.token_events(interaction))
    assert summary.tokens_per_second == pytest.approx(50)
    assert summary.max_gap == max(timing.gaps(interaction))
    assert summary.duration == interaction.response.duration
    assert "ttft 0.2" in summary.describe()


def test_a_recorded_stream_reads_as_the_origin_sent_it(tmp_path: Path) -> None:
    """Recorded from a real origin through httpx: the helpers read the recorded timing."""
    script = chat_hello(scale=0.2)
    path = tmp_path / "chat.msgpack"
    with Origin({"/v1/chat/completions": Script(chunks=script)}) as origin:
        url = origin.url
        with replay.use_cassette(path), httpx.Client() as client:
            client.post(f"{url}/v1/chat/completions", json={"stream": True}).read()
    response = replay.Cassette.load(path).interactions[0].response
    # The origin waits each delay before its chunk: the first token is due at the sum of the
    # delays up to the first chunk with content.
    due = list(itertools.accumulate(delay for delay, _ in script))
    first_token = next(
        i for i, (_, data) in enumerate(script) if b'"content":"' in data.replace(b'""', b"")
    )

    assert first_token == 1  # the role chunk (empty content) comes first
    # Real time: never early, maybe late on a busy machine.
    assert due[first_token] - 0.005 <= (timing.ttft(response) or 0) < due[first_token] + LATE
    assert due[0] - 0.005 <= (timing.first_event(response) or 0) < due[0] + LATE
    assert timing.summary(response).tokens == len(timing.token_events(response)) > 3
