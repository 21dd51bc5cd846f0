"""`replay check`: every stream of some cassettes validated, one stable line per rule broken."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from commands import replay_text as run_replay

import replay
from replay.dialects import Violation, anthropic, chat, responses
from replay.inspect.check import (
    UNDECODABLE,
    CheckResult,
    Finding,
    Unreadable,
    check_cassette,
    check_files,
    findings_of,
    interaction_findings,
    is_stream,
)
from replay.model import Chunk, Interaction, Request, Response
from replay.store.cassette import Cassette

TEXT = "Hello there, how may I assist you today?"


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


def with_body(interaction: Interaction, body: bytes) -> Interaction:
    """`interaction` answering `body` in one chunk."""
    response = attrs.evolve(interaction.response, chunks=[Chunk(0.1, body)])
    return attrs.evolve(interaction, response=response)


def role_in_every_delta(interaction: Interaction) -> Interaction:
    """A chat stream whose every delta repeats the role, as some providers send it."""
    body = interaction.response.body
    body = body.replace(b'"delta":{"content"', b'"delta":{"role":"assistant","content"')
    return with_body(interaction, body)


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


def test_one_interactions_findings_are_those_check_cassette_reports_for_it() -> None:
    broken = responses.stream(TEXT, failure="cut")
    cassette = replay.Cassette([responses.stream(TEXT), json_interaction(), broken])
    assert interaction_findings(broken, "c.msgpack", 2) == list(
        check_cassette(cassette, "c.msgpack").findings
    )
    assert interaction_findings(json_interaction()) == []  # not a stream


def test_a_finding_names_cassette_interaction_event_rule_and_severity() -> None:
    # Leaving out event 5 (the delta " there") breaks the sequence numbers at the event
    # after it, and the text no longer adds up in the three events that repeat it.
    broken = with_chunk_dropped(responses.stream(TEXT), 5)
    result = check_cassette(replay.Cassette([json_interaction(), broken]), "c.msgpack")
    found = [(f.interaction, f.first.index, f.rule, f.severity, f.count) for f in result.findings]
    assert found == [
        (1, 5, "responses.sequence-number", "warning", 1),
        (1, 13, "responses.delta-mismatch", "error", 3),
    ]
    assert [str(f) for f in result.findings] == [
        "c.msgpack #1 event 5 responses.sequence-number: warning: sequence_number 6, expected 5",
        "c.msgpack #1 event 13 responses.delta-mismatch: error: response.output_text.done is "
        "'Hello there, how may I assist you today?'; the deltas give "
        "'Hello, how may I assist you today?' (3 times)",
    ]


def test_a_rule_broken_in_every_delta_is_one_finding_with_its_count() -> None:
    result = check_cassette(replay.Cassette([role_in_every_delta(chat.stream(TEXT))]), "c")
    (finding,) = result.findings
    deltas = len(chat.stream(TEXT).response.events()) - 3  # the role chunk, finish, [DONE]
    assert (finding.rule, finding.severity, finding.count) == ("chat.role-first", "error", deltas)
    assert finding.first.index == 1
    assert str(finding) == (
        f"c #0 event 1 chat.role-first: error: choice 0 has its role in a later delta "
        f"({deltas} times)"
    )


def test_verbose_lists_every_occurrence_below_its_finding() -> None:
    result = check_cassette(replay.Cassette([role_in_every_delta(chat.stream(TEXT))]), "c")
    (finding,) = result.findings
    lines = result.report(verbose=True).splitlines()
    assert lines[0] == str(finding)
    assert lines[1:-1] == [
        f"    event {index}: choice 0 has its role in a later delta"
        for index in range(1, finding.count + 1)
    ]
    assert len(result.report().splitlines()) == 2  # the finding and the summary


def test_findings_keep_the_order_of_their_first_occurrence() -> None:
    violations = [Violation("b", "1", 1), Violation("a", "2", 2), Violation("b", "3", 3)]
    findings = findings_of("c", 0, violations)
    assert [(f.rule, [v.index for v in f.violations]) for f in findings] == [
        ("b", [1, 3]),
        ("a", [2]),
    ]


def test_a_whole_stream_violation_has_no_event_index() -> None:
    result = check_cassette(replay.Cassette([responses.stream(TEXT, failure="cut")]), "c")
    (finding,) = result.findings
    assert str(finding).startswith("c #0 event - stream.truncated: error: the stream ended with ")


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
    assert (finding.rule, finding.severity) == (UNDECODABLE, "error")
    assert finding.cassette == "<cassette>"


def test_a_finding_stays_on_one_line() -> None:
    finding = Finding("c", 0, [Violation("stream.utf8", "two\nlines", 3)])
    assert str(finding) == "c #0 event 3 stream.utf8: error: two lines"


def test_a_finding_has_at_least_one_occurrence() -> None:
    with pytest.raises(ValueError, match="violations"):
        Finding("c", 0, [])


def test_the_summary_counts_findings_streams_and_severities() -> None:
    cut = responses.stream(TEXT, failure="cut")
    broken = with_chunk_dropped(responses.stream(TEXT), 5)  # 2 rules, 4 violations
    result = check_cassette(replay.Cassette([cut, broken, chat.stream(TEXT)]), "c")
    assert result.summary() == (
        "checked 3 streams in 1 cassette: 3 findings in 2 streams (2 errors, 1 warning)"
    )
    assert result.report().splitlines()[-1] == result.summary()
    assert not result.ok


def test_notes_alone_leave_the_result_ok() -> None:
    body = chat.stream(TEXT, include_usage=True).response.body
    body = body.replace(b'"total_tokens":', b'"total_tokens":1', 1)
    result = check_cassette(replay.Cassette([with_body(chat.stream(TEXT), body)]), "c")
    assert [(f.rule, f.severity) for f in result.findings] == [("chat.usage-total", "note")]
    assert result.ok
    assert result.summary() == "checked 1 stream in 1 cassette: 1 finding in 1 stream (1 note)"


def test_results_add_up() -> None:
    one = CheckResult(1, 2, [Finding("a", 0, [Violation("r", "m")])], [Unreadable("b", "x")])
    assert one + CheckResult(2, 3) == CheckResult(3, 5, one.findings, one.unreadable)


def test_check_files_names_each_cassette_as_given(tmp_path: Path) -> None:
    good = save(tmp_path / "good.msgpack", responses.stream(TEXT))
    bad = save(tmp_path / "bad.msgpack", json_interaction(), anthropic.stream(TEXT, failure="cut"))
    result = check_files([bad, good])
    assert (result.cassettes, result.streams) == (2, 2)
    assert [(f.cassette, f.interaction) for f in result.findings] == [(str(bad), 1)]


def test_check_files_goes_on_past_unreadable_cassettes(tmp_path: Path) -> None:
    missing = tmp_path / "missing.msgpack"
    corrupt = tmp_path / "corrupt.msgpack"
    corrupt.write_bytes(b"\x85garbage")
    bad = save(tmp_path / "bad.msgpack", anthropic.stream(TEXT, failure="cut"))
    result = check_files([missing, corrupt, bad])
    assert [u.cassette for u in result.unreadable] == [str(missing), str(corrupt)]
    assert [f.cassette for f in result.findings] == [str(bad)]
    assert (result.cassettes, result.streams, result.ok) == (3, 1, False)
    assert str(result.unreadable[0]) == f"{missing}: cannot read: No such file or directory"
    assert str(result.unreadable[1]).startswith(f"{corrupt}: cannot read: the file ends too")
    assert result.summary().endswith("; 2 cassettes could not be read")


def test_an_unreadable_cassette_alone_fails_the_check(tmp_path: Path) -> None:
    good = save(tmp_path / "good.msgpack", responses.stream(TEXT))
    result = check_files([good, tmp_path / "missing.msgpack"])
    assert not result.ok
    assert result.summary() == (
        "checked 1 stream in 2 cassettes: no violations; 1 cassette could not be read"
    )


# --- the command --------------------------------------------------------------------------


def test_the_command_exits_0_when_every_stream_is_valid(tmp_path: Path) -> None:
    one = save(tmp_path / "one.msgpack", responses.stream(TEXT), json_interaction())
    two = save(tmp_path / "two.msgpack", chat.stream(TEXT, include_usage=True))
    result = run_replay("check", str(one), str(two))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "checked 2 streams in 2 cassettes: no violations\n"


def test_the_command_prints_each_finding_and_exits_1(tmp_path: Path) -> None:
    good = save(tmp_path / "good.msgpack", anthropic.stream(TEXT))
    bad = save(tmp_path / "bad.msgpack", with_chunk_dropped(responses.stream(TEXT), 5))
    result = run_replay("check", str(good), str(bad))
    assert (result.returncode, result.stderr) == (1, "")
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"{bad} #0 event 5 responses.sequence-number: warning: sequence_number 6, expected 5"
    )
    assert lines[1].startswith(f"{bad} #0 event 13 responses.delta-mismatch: error: ")
    assert lines[1].endswith(" (3 times)")
    assert lines[2:] == [
        "checked 2 streams in 2 cassettes: 2 findings in 1 stream (1 error, 1 warning)"
    ]


def test_the_command_lists_every_occurrence_with_verbose(tmp_path: Path) -> None:
    bad = save(tmp_path / "bad.msgpack", with_chunk_dropped(responses.stream(TEXT), 5))
    quiet = run_replay("check", str(bad)).stdout.splitlines()
    loud = run_replay("check", "--verbose", str(bad)).stdout.splitlines()
    assert loud[:2] == quiet[:2]
    assert [line.split(":")[0] for line in loud[2:5]] == [
        "    event 13",
        "    event 14",
        "    event 15",
    ]
    assert loud[5:] == quiet[2:]


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_the_command_reports_each_unreadable_cassette_in_one_line_and_goes_on(
    tmp_path: Path, damage: str
) -> None:
    good = save(tmp_path / "good.msgpack", responses.stream(TEXT))
    path = tmp_path / "other.msgpack"
    if damage == "corrupt":
        path.write_bytes(b"\x85garbage")
    result = run_replay("check", str(path), str(good))
    assert (result.returncode, result.stderr) == (1, "")
    unreadable, summary = result.stdout.splitlines()
    assert unreadable.startswith(f"{path}: cannot read: ")
    assert summary == "checked 1 stream in 2 cassettes: no violations; 1 cassette could not be read"


# -- NDJSON streams (Ollama's) -----------------------------------------------------------------

OLLAMA_LINES = (
    b'{"model":"m","message":{"role":"assistant","content":"Hel"},"done":false}\n',
    b'{"model":"m","message":{"role":"assistant","content":"lo"},"done":false}\n',
    b'{"model":"m","done":true,"eval_count":2}\n',
)


def ndjson_cassette(*lines: bytes, content_type: str = "application/x-ndjson") -> Cassette:
    chunks = [Chunk(0.1 * (n + 1), line) for n, line in enumerate(lines)]
    response = Response(status=200, headers=[("content-type", content_type)], chunks=chunks)
    request = Request(method="POST", url="http://127.0.0.1:11434/api/chat")
    return Cassette([Interaction(request, response)])


def test_an_ndjson_stream_is_a_stream_and_checks_clean() -> None:
    result = check_cassette(ndjson_cassette(*OLLAMA_LINES), "ollama")
    assert result.streams == 1
    assert result.findings == ()


def test_an_ndjson_stream_without_a_content_type_is_found_by_its_body() -> None:
    result = check_cassette(ndjson_cassette(*OLLAMA_LINES, content_type=""), "ollama")
    assert result.streams == 1
    assert result.findings == ()


def test_an_ndjson_line_that_is_not_an_object_and_a_cut_last_line_are_caught() -> None:
    broken = (*OLLAMA_LINES[:2], b"[1, 2]\n", b'{"model":"m","do')
    result = check_cassette(ndjson_cassette(*broken), "ollama")
    assert {finding.rule for finding in result.findings} == {"ndjson.json", "stream.truncated"}
