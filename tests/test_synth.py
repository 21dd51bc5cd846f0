"""`replay synth`: one signature for the three stream builders, and writing into a cassette."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from commands import replay_text as run_replay

import replay
from replay.dialects import ToolCall, validate
from replay.dialects.synth import DIALECTS, FAILURES, append, synthesize, tool_call
from replay.dialects.texts import stream_texts

TOOL = ToolCall("get_weather", {"city": "Paris"})


@pytest.mark.parametrize(
    ("dialect", "reasoning_name"),
    [("responses", "reasoning"), ("anthropic", "thinking")],
)
def test_reasoning_and_a_tool_call_reach_each_builder(dialect: str, reasoning_name: str) -> None:
    interaction = synthesize(dialect, "Hi.", reasoning="Hmm.", tool_calls=[TOOL])
    assert stream_texts(interaction) == {
        reasoning_name: "Hmm.",
        "text": "Hi.",
        "tool call 0": 'get_weather({"city":"Paris"})',
    }


def test_chat_takes_several_tool_calls_and_usage() -> None:
    interaction = synthesize("chat", "Hi.", tool_calls=[TOOL, TOOL], usage=True)
    assert list(stream_texts(interaction)) == ["text", "tool call 0", "tool call 1"]
    last_chunk = json.loads(interaction.response.events()[-2].data)
    assert last_chunk["usage"]["total_tokens"] > 0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_prompt_model_and_timing_reach_each_builder(dialect: str) -> None:
    interaction = synthesize(dialect, "Hi.", model="m-1", prompt="Hello?", ttft=1.5)
    body = json.loads(interaction.request.body)
    if dialect == "gemini":  # Gemini and Bedrock name the model in the URL
        assert "/models/m-1:streamGenerateContent" in interaction.request.url
    elif dialect in ("converse", "anthropic-bedrock"):
        assert "/model/m-1/" in interaction.request.url
    else:
        assert body["model"] == "m-1"
    assert "Hello?" in json.dumps(body)
    assert interaction.response.events()[0].at == 1.5


@pytest.mark.parametrize(
    ("dialect", "failure"),
    [(dialect, failure) for dialect in DIALECTS for failure in FAILURES[dialect]],
)
def test_every_failure_of_every_dialect_builds(dialect: str, failure: str) -> None:
    violations = validate(synthesize(dialect, "Hello there, friend.", failure=failure))
    assert [v.rule for v in violations] == (["stream.truncated"] if failure == "cut" else [])


@pytest.mark.parametrize(
    ("dialect", "options", "complaint"),
    [
        ("mistral", {}, "dialect must be one of"),
        ("chat", {"failure": "failed"}, "a chat stream fails with one of length"),
        ("responses", {"tool_calls": [TOOL, TOOL]}, "one tool call at most"),
        ("anthropic", {"usage": True}, "usage is for chat streams"),
        ("chat", {"reasoning": "Hmm."}, "carry no reasoning"),
        ("responses", {"tokens_per_second": 0}, "tokens_per_second must be a positive"),
    ],
    ids=["dialect", "failure", "tool-calls", "usage", "reasoning", "timing"],
)
def test_an_option_the_dialect_cannot_take_is_refused(
    dialect: str, options: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(replay.ConfigurationError, match=complaint):
        synthesize(dialect, "Hi.", **options)


def test_a_tool_call_takes_its_arguments_as_a_json_object() -> None:
    assert tool_call("f", '{"a": [1, 2]}') == ToolCall("f", {"a": [1, 2]})
    with pytest.raises(replay.ConfigurationError, match="not JSON"):
        tool_call("f", "{a: 1}")
    with pytest.raises(replay.ConfigurationError, match="must be a JSON object, not list"):
        tool_call("f", "[1]")


def test_append_creates_then_grows_a_cassette_with_secrets_redacted(tmp_path: Path) -> None:
    path = tmp_path / "new" / "synthetic.msgpack"
    assert append(path, synthesize("responses", "One.")) == 0
    assert append(path, synthesize("anthropic", "Two.")) == 1
    first, second = replay.Cassette.load(path).interactions
    assert stream_texts(second) == {"text": "Two."}
    assert first.request.header("authorization") == "REDACTED"
    assert second.request.header("x-api-key") == "REDACTED"


def test_append_leaves_a_file_that_is_no_cassette_alone(tmp_path: Path) -> None:
    path = tmp_path / "broken.msgpack"
    path.write_bytes(b"\x85garbage")
    with pytest.raises(replay.CassetteFormatError):
        append(path, synthesize("chat", "Hi."))
    assert path.read_bytes() == b"\x85garbage"


def test_the_command_writes_streams_that_pass_check(tmp_path: Path) -> None:
    out = str(tmp_path / "out.msgpack")
    made = run_replay(
        "synth", "responses", out, "--text", "Hi!", "--reasoning", "Hmm.",
        "--tool-call", "get_weather", '{"city": "Paris"}', "--ttft", "0.5",
    )  # fmt: skip
    assert made.returncode == 0
    made_too = run_replay("synth", "chat", out, "--text", "Yo", "--usage", "--tool-call", "f", "{}")
    assert made_too.returncode == 0
    first, second = replay.Cassette.load(out).interactions
    assert made.stderr == f"{out}: #0: responses stream, {len(first.response.events())} events\n"
    assert made_too.stderr == f"{out}: #1: chat stream, {len(second.response.events())} events\n"
    assert first.response.events()[0].at == 0.5
    assert stream_texts(first) == {
        "reasoning": "Hmm.",
        "text": "Hi!",
        "tool call 0": 'get_weather({"city":"Paris"})',
    }
    assert run_replay("check", out).returncode == 0


def test_the_command_writes_a_cut_stream_that_check_reports(tmp_path: Path) -> None:
    out = str(tmp_path / "out.msgpack")
    assert (
        run_replay("synth", "anthropic", out, "--text", "Hi there.", "--failure", "cut").returncode
        == 0
    )
    checked = run_replay("check", out)
    assert checked.returncode == 1
    assert checked.stdout.startswith(f"{out} #0 event - stream.truncated: ")


@pytest.mark.parametrize(
    "arguments",
    [["--failure", "failed"], ["--tool-call", "f", "[1]"], ["--ttft", "-1"]],
    ids=["failure", "tool-call", "ttft"],
)
def test_the_command_reports_a_bad_option_in_one_line(tmp_path: Path, arguments: list[str]) -> None:
    out = tmp_path / "out.msgpack"
    result = run_replay("synth", "chat", str(out), *arguments)
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert line.startswith("replay: error: ")
    assert not out.exists()
