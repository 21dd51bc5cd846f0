"""The sample cassettes of `cassettes/`: valid, reproducible, and readable by the real SDKs.

Each sample is replayed with `record_mode="none"` through the SDK of its dialect, with its
default base URL (api.openai.com, api.anthropic.com) and a dummy key: mode "none" never
connects, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import replay
from replay.dialects import detect, validate
from replay.inspect.check import check_files

ROOT = Path(__file__).resolve().parents[1]
CASSETTES = ROOT / "cassettes"
SCRIPT = ROOT / "scripts" / "make_cassettes.py"

SAMPLES = {
    "responses-hello.msgpack": "responses",
    "responses-reasoning-tool-call.msgpack": "responses",
    "responses-failed.msgpack": "responses",
    "responses-incomplete.msgpack": "responses",
    "chat-tool-calls-usage.msgpack": "chat",
    "anthropic-thinking-tool-use.msgpack": "anthropic",
}
RECORDED = "responses-hello.msgpack"  # real timing: compared without its times
HELLO = "Hello there, how may I assist you today?"
STORY = "Once upon a time, a small robot learned to paint the sky."
WEATHER_ARGUMENTS = {"city": "Paris", "unit": "celsius"}


def interaction_of(name: str) -> replay.Interaction:
    (interaction,) = replay.Cassette.load(CASSETTES / name).interactions
    return interaction


def make_cassettes(out: Path) -> None:
    subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=60,
    )


# --- what ships ---------------------------------------------------------------------------


def test_the_readme_lists_every_sample_and_nothing_else_ships() -> None:
    assert {path.name for path in CASSETTES.glob("*.msgpack")} == set(SAMPLES)
    readme = (CASSETTES / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in SAMPLES)


@pytest.mark.parametrize("name", SAMPLES)
def test_each_sample_is_a_valid_stream_of_its_dialect(name: str) -> None:
    interaction = interaction_of(name)
    assert detect(interaction) == SAMPLES[name]
    assert validate(interaction) == []


def test_replay_check_passes_on_every_sample() -> None:
    result = check_files(sorted(CASSETTES.glob("*.msgpack")))
    assert (result.ok, result.streams) == (True, len(SAMPLES))


@pytest.mark.parametrize(
    ("name", "last", "status"),
    [
        ("responses-failed.msgpack", "response.failed", "failed"),
        ("responses-incomplete.msgpack", "response.incomplete", "incomplete"),
    ],
)
def test_the_failing_samples_end_as_they_should(name: str, last: str, status: str) -> None:
    events = interaction_of(name).response.events()
    assert events[-1].event == last
    assert json.loads(events[-1].data)["response"]["status"] == status
    assert interaction_of(name).response.end.is_clean  # failed in-band, not cut


# --- the generator ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples made again from nothing (so `responses-hello` is recorded anew)."""
    out = tmp_path_factory.mktemp("fresh")
    make_cassettes(out)
    return out


@pytest.mark.parametrize("name", [*(name for name in SAMPLES if name != RECORDED), "README.md"])
def test_the_generator_gives_the_shipped_bytes(fresh: Path, name: str) -> None:
    assert (fresh / name).read_bytes() == (CASSETTES / name).read_bytes()


def without_times(interaction: replay.Interaction) -> tuple[Any, ...]:
    """What a recording says: every byte that does not depend on when things came."""
    request, response = interaction.request, interaction.response
    events = [(event.event, event.data) for event in response.events()]
    # Request headers are left out: the SDK's own depend on what is installed.
    return (
        (request.method, request.url, request.body),
        (response.status, response.headers, response.body, events),
        (response.end.error, response.end.message, response.end.truncated),
    )


def test_the_generator_records_the_same_stream_again(fresh: Path) -> None:
    (again,) = replay.Cassette.load(fresh / RECORDED).interactions
    assert without_times(again) == without_times(interaction_of(RECORDED))
    assert again.response.events()[0].at > 0.2  # the origin's realistic pause: real timing


def test_running_the_generator_over_the_samples_changes_no_byte(tmp_path: Path) -> None:
    out = tmp_path / "cassettes"
    shutil.copytree(CASSETTES, out)
    make_cassettes(out)  # keeps the recording already there: it says the same
    for path in CASSETTES.iterdir():
        assert (out / path.name).read_bytes() == path.read_bytes(), path.name


# --- through the real SDKs ----------------------------------------------------------------


@pytest.fixture
def sample(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The sample named by the test's parameter, in use: yields its request's JSON body."""
    name = request.param
    with replay.use_cassette(CASSETTES / name, record_mode="none") as cassette:
        yield json.loads(cassette.interactions[0].request.body)
    assert cassette.all_played


def openai_client() -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-dummy", base_url="https://api.openai.com/v1", max_retries=0)


def anthropic_client() -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="sk-ant-dummy", base_url="https://api.anthropic.com", max_retries=0
    )


def without_stream(body: dict[str, Any]) -> dict[str, Any]:
    """The arguments of an SDK's stream helper (it adds `stream` itself)."""
    return {key: value for key, value in body.items() if key != "stream"}


@pytest.mark.parametrize("sample", ["responses-hello.msgpack"], indirect=True)
def test_openai_reads_the_recorded_reference_stream(sample: dict[str, Any]) -> None:
    events = list(openai_client().responses.create(**sample))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == HELLO
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == HELLO


@pytest.mark.parametrize("sample", ["responses-reasoning-tool-call.msgpack"], indirect=True)
def test_openai_reads_reasoning_and_a_function_call(sample: dict[str, Any]) -> None:
    with openai_client().responses.stream(**without_stream(sample)) as stream:
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]
    assert final.output_text == "Let me look up the weather in Paris."
    call = final.output[-1]
    assert call.type == "function_call"
    assert (call.name, json.loads(call.arguments)) == ("get_weather", WEATHER_ARGUMENTS)


@pytest.mark.parametrize("sample", ["responses-failed.msgpack"], indirect=True)
def test_openai_reads_the_failed_response(sample: dict[str, Any]) -> None:
    events = list(openai_client().responses.create(**sample))
    last = events[-1]
    assert last.type == "response.failed"
    assert last.response.error is not None
    assert last.response.error.code == "server_error"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert STORY.startswith(text)
    assert 0 < len(text) < len(STORY)


@pytest.mark.parametrize("sample", ["responses-incomplete.msgpack"], indirect=True)
def test_openai_reads_the_incomplete_response(sample: dict[str, Any]) -> None:
    events = list(openai_client().responses.create(**sample))
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details is not None
    assert last.response.incomplete_details.reason == "max_output_tokens"
    assert last.response.output_text == "Once upon a time, a small"


@pytest.mark.parametrize("sample", ["chat-tool-calls-usage.msgpack"], indirect=True)
def test_openai_reads_chat_tool_calls_and_usage(sample: dict[str, Any]) -> None:
    with openai_client().chat.completions.stream(**without_stream(sample)) as stream:
        completion = stream.get_final_completion()
    choice = completion.choices[0]
    assert choice.message.content == "Let me check both for you."
    calls = [
        (call.function.name, json.loads(call.function.arguments))
        for call in choice.message.tool_calls or []
        if call.type == "function"
    ]
    assert calls == [("get_weather", WEATHER_ARGUMENTS), ("get_time", {"timezone": "Europe/Paris"})]
    assert choice.finish_reason == "tool_calls"
    assert completion.usage is not None
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )


@pytest.mark.parametrize("sample", ["anthropic-thinking-tool-use.msgpack"], indirect=True)
def test_anthropic_reads_thinking_and_tool_use(sample: dict[str, Any]) -> None:
    with anthropic_client().messages.stream(**without_stream(sample)) as stream:
        message = stream.get_final_message()
    thinking, text, tool_use = message.content
    assert thinking.type == "thinking"
    assert thinking.thinking.startswith("The user wants the weather in Paris")
    assert thinking.signature
    assert text.type == "text"
    assert text.text == "I'll check the current weather in Paris."
    assert tool_use.type == "tool_use"
    assert (tool_use.name, tool_use.input) == ("get_weather", WEATHER_ARGUMENTS)
    assert message.stop_reason == "tool_use"
