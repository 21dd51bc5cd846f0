"""`replay check`: every stream of some cassettes validated, one stable line per violation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import attrs
import pytest

import replay
from replay.check import UNDECODABLE, CheckResult, Finding, check_cassette, check_files, is_stream
from replay.dialects import Violation, anthropic, chat, responses
from replay.model import Chunk, Interaction, Request, Response

TEXT = "Hello there, how may I assist you today?"


def run_replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replay.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def save(path: Path, *interactions: Interaction) -> Path:
    replay.Cassette(list(interactions)).save(path)
    return path


def json_interaction() -> Interaction:
    """A plain JSON answer: not a stream, so never checked."""
    return Interaction(
        Request(method="GET", url="https://api.openai.com/v1/models"),
        Response(
            status=200,
            headers=[("content-type", "application/json")],
            chunks=[Chunk(0.1, b'{"object": "list", "data": []}')],
        ),
    )


def with_chunk_dropped(interaction: Interaction, index: int) -> Interaction:
    """`interaction` with one body chunk (one event, for synthetic streams) left out."""
    chunks = [chunk for number, chunk in enumerate(interaction.response.chunks) if number != index]
    return attrs.evolve(interaction, response=attrs.evolve(interaction.response, chunks=chunks))


# --- which interactions are streams ----------------------------------------------------


def test_an_event_stream_content_type_makes_a_stream() -> None:
    assert is_stream(responses.stream(TEXT).response)


def test_a_dialect_stream_without_its_content_type_is_still_a_stream() -> None:
    response = attrs.evolve(chat.stream(TEXT).response, headers=[("content-type", "text/plain")])
    assert is_stream(response)


@pytest.mark.parametrize(
    "response",
    [json_interaction().response, Response(status=204)],
    ids=["json", "empty"],
)
def test_other_responses_are_not_streams(response: Response) -> None:
    assert not is_stream(response)


# --- the library --------------------------------------------------------------------------


def test_valid_streams_give_no_findings() -> None:
    cassette = replay.Cassette(
        [responses.stream(TEXT), json_interaction(), chat.stream(TEXT), anthropic.stream(TEXT)]
    )
    result = check_cassette(cassette, "c.msgpack")
    assert result == CheckResult(cassettes=1, streams=3, findings=())
    assert result.ok
    assert result.report() == "checked 3 streams in 1 cassette: no violations\n"


def test_a_finding_names_cassette_interaction_event_and_rule() -> None:
    # Leaving out event 5 (the delta " there") breaks the sequence numbers at the event
    # after it, and the text no longer adds up in the three events that repeat it.
    broken = with_chunk_dropped(responses.stream(TEXT), 5)
    result = check_cassette(replay.Cassette([json_interaction(), broken]), "c.msgpack")
    assert [(f.interaction, f.violation.index, f.violation.rule) for f in result.findings] == [
        (1, 5, "responses.sequence-number"),
        (1, 13, "responses.delta-mismatch"),
        (1, 14, "responses.delta-mismatch"),
        (1, 15, "responses.delta-mismatch"),
    ]
    assert str(result.findings[0]) == (
        "c.msgpack #1 event 5 responses.sequence-number: sequence_number 6, expected 5"
    )


def test_a_whole_stream_violation_has_no_event_index() -> None:
    result = check_cassette(replay.Cassette([responses.stream(TEXT, failure="cut")]), "c")
    (finding,) = result.findings
    assert str(finding).startswith("c #0 event - stream.truncated: the stream ended with ")


def test_a_body_that_cannot_be_decoded_is_one_finding() -> None:
    response = Response(
        status=200,
        headers=[("content-type", "text/event-stream"), ("content-encoding", "gzip")],
        chunks=[Chunk(0.1, b"data: {} -- but not gzip at all\n\n")],
    )
    result = check_cassette(
        replay.Cassette([Interaction(Request(method="GET", url="u"), response)])
    )
    (finding,) = result.findings
    assert finding.violation.rule == UNDECODABLE
    assert finding.cassette == "<cassette>"


def test_a_finding_stays_on_one_line() -> None:
    finding = Finding("c", 0, Violation("stream.utf8", "two\nlines", 3))
    assert str(finding) == "c #0 event 3 stream.utf8: two lines"


def test_the_summary_counts_violations_and_broken_streams() -> None:
    cut = responses.stream(TEXT, failure="cut")
    broken = with_chunk_dropped(responses.stream(TEXT), 5)  # 4 violations
    result = check_cassette(replay.Cassette([cut, broken, chat.stream(TEXT)]), "c")
    assert result.summary() == "checked 3 streams in 1 cassette: 5 violations in 2 streams"
    assert result.report().splitlines()[-1] == result.summary()
    assert not result.ok


def test_results_add_up() -> None:
    one = CheckResult(1, 2, [Finding("a", 0, Violation("r", "m"))])
    assert one + CheckResult(2, 3) == CheckResult(3, 5, one.findings)


def test_check_files_names_each_cassette_as_given(tmp_path: Path) -> None:
    good = save(tmp_path / "good.msgpack", responses.stream(TEXT))
    bad = save(tmp_path / "bad.msgpack", json_interaction(), anthropic.stream(TEXT, failure="cut"))
    result = check_files([bad, good])
    assert (result.cassettes, result.streams) == (2, 2)
    assert [(f.cassette, f.interaction) for f in result.findings] == [(str(bad), 1)]


def test_check_files_loads_every_cassette_before_checking(tmp_path: Path) -> None:
    good = save(tmp_path / "good.msgpack", responses.stream(TEXT))
    with pytest.raises(FileNotFoundError):
        check_files([good, tmp_path / "missing.msgpack"])
    (tmp_path / "broken.msgpack").write_bytes(b"\x85garbage")
    with pytest.raises(replay.CassetteFormatError):
        check_files([good, tmp_path / "broken.msgpack"])


# --- the command --------------------------------------------------------------------------


def test_the_command_exits_0_when_every_stream_is_valid(tmp_path: Path) -> None:
    one = save(tmp_path / "one.msgpack", responses.stream(TEXT), json_interaction())
    two = save(tmp_path / "two.msgpack", chat.stream(TEXT, include_usage=True))
    result = run_replay("check", str(one), str(two))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "checked 2 streams in 2 cassettes: no violations\n"


def test_the_command_prints_each_violation_and_exits_1(tmp_path: Path) -> None:
    good = save(tmp_path / "good.msgpack", anthropic.stream(TEXT))
    bad = save(tmp_path / "bad.msgpack", with_chunk_dropped(responses.stream(TEXT), 5))
    result = run_replay("check", str(good), str(bad))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"{bad} #0 event 5 responses.sequence-number: sequence_number 6, expected 5"
    assert all(line.startswith(f"{bad} #0 event ") for line in lines[:-1])
    assert lines[-1] == "checked 2 streams in 2 cassettes: 4 violations in 1 stream"


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_the_command_reports_an_unreadable_cassette_in_one_line(
    tmp_path: Path, damage: str
) -> None:
    good = save(tmp_path / "good.msgpack", responses.stream(TEXT))
    path = tmp_path / "other.msgpack"
    if damage == "corrupt":
        path.write_bytes(b"\x85garbage")
    result = run_replay("check", str(good), str(path))
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("replay: error: ")
    assert str(path) in line
