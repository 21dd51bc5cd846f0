"""Small hostile files: a few hundred bytes that once made replay work without end.

A chunk at `1.7976931348623157e308` s made `replay report` loop while its memory grew, and a
time of `1e300` (or `--speed 1e-300`) made every wait overflow. Times are bounded where a
cassette is read (`replay.model.MAX_SECONDS`, a week) and speeds where they are parsed
(`replay.clock.MIN_SPEED`). Each refusal names the field at fault in the library, and is one
`replay: error:` line from every command, within `SECONDS` (the commands take well under a
second; the bound leaves room for a loaded 2-core CI box).
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
import yaml

import replay
from replay import faults
from replay.clock import MIN_SPEED, Schedule, parse_speed
from replay.convert.files import export_json, import_json, read_cassette
from replay.dialects.synth import synthesize
from replay.errors import CassetteFormatError, ConfigurationError
from replay.model import MAX_SECONDS, Chunk, Chunks, Response, StreamEnd
from replay.store.file import load_interactions
from replay.store.load import read_interactions

SECONDS = 20.0
WEEK = 7 * 24 * 3600.0
HUGE = 1.7976931348623157e308  # the chunk time: the largest float
OK = [0.1, 0.2]


def cassette(
    *, headers_at: Any = 0.05, at: list[Any] = OK, end: Any = None, padding: int = 0
) -> bytes:
    """A one-interaction cassette with these times, as msgpack (`padding` bytes of request
    body make it big enough that the loader reads it with its walker, not whole)."""
    end_at = (at[-1] if at else headers_at) if end is None else end
    interaction = {
        "request": {
            "method": "GET",
            "url": "http://127.0.0.1/",
            "headers": [],
            "body": b"x" * padding,
        },
        "response": {
            "status": 200,
            "headers": [["content-type", "text/event-stream"]],
            "headers_at": headers_at,
            "chunks": {"at": at, "data": [b"data: x\n\n"] * len(at)},
            "end": {"at": end_at, "error": None, "message": "", "truncated": False},
        },
    }
    document = {"format": "replay-cassette", "version": 1, "interactions": [interaction]}
    packed: bytes = msgpack.packb(document, use_bin_type=True)
    return packed


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The one `replay: error:` line a command that refused its input wrote."""
    assert done.returncode != 0, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("replay: error: "), done.stderr
    return lines[0]


def replay_command(*args: str) -> subprocess.CompletedProcess[str]:
    """Run `replay ARGS...` as a user would, within `SECONDS` (`TimeoutExpired` past it)
    and `MEGABYTES` of address space (past it, a `MemoryError`: no one-line error)."""
    return subprocess.run(
        [sys.executable, "-m", "replay.cli", *args],
        capture_output=True,
        text=True,
        timeout=SECONDS,
        check=False,
        preexec_fn=_bounded_memory if sys.platform == "linux" else None,
    )


MEGABYTES = 1024


def _bounded_memory() -> None:
    import resource

    limit = MEGABYTES * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


# -- recorded times: bounded where a cassette is read ------------------------------------------

LIMIT = "must be at most 604800 s (one week: past any real recording)"
NOT_FINITE = "must be a finite, non-negative number of seconds"

# (the cassette's times, the message's end: the field, then what is wrong)
BAD_TIMES: dict[str, tuple[dict[str, Any], str]] = {
    "chunk at the largest float": (
        {"at": [0.1, 0.2, 0.3, HUGE], "end": 0.3},
        f"interactions[0].response.chunks[3].at: {LIMIT}, not 1.7976931348623157e+308",
    ),
    "chunk at 1e300": (
        {"at": [1e300]},
        f"interactions[0].response.chunks[0].at: {LIMIT}, not 1e+300",
    ),
    "chunk a moment past a week": (
        {"at": [0.1, WEEK + 0.001]},
        f"interactions[0].response.chunks[1].at: {LIMIT}, not 604800.001",
    ),
    "chunk at -1": ({"at": [0.1, -1.0]}, f"chunks[1].at: {NOT_FINITE}, not -1.0"),
    "chunk at NaN": ({"at": [math.nan, 0.2]}, f"chunks[0].at: {NOT_FINITE}, not nan"),
    "headers at 1e300": (
        {"headers_at": 1e300, "at": []},
        f"interactions[0].response.headers_at: {LIMIT}, not 1e+300",
    ),
    "headers at infinity": (
        {"headers_at": math.inf, "at": []},
        f"interactions[0].response.headers_at: {NOT_FINITE}, not inf",
    ),
    "end at 1e300": ({"end": 1e300}, f"interactions[0].response.end.at: {LIMIT}, not 1e+300"),
    "end at 2**64 - 1": (
        {"end": 2**64 - 1},
        f"interactions[0].response.end.at: {LIMIT}, not 18446744073709551615",
    ),
}


@pytest.mark.parametrize("padding", [0, 100_000], ids=["read whole", "read by the walker"])
@pytest.mark.parametrize(("times", "message"), BAD_TIMES.values(), ids=BAD_TIMES.keys())
def test_a_time_out_of_bounds_is_a_format_error_naming_its_field(
    tmp_path: Path, times: dict[str, Any], message: str, padding: int
) -> None:
    path = tmp_path / "times.msgpack"
    path.write_bytes(cassette(**times, padding=padding))
    with pytest.raises(CassetteFormatError) as caught:
        load_interactions(path)
    assert str(caught.value).endswith(message)


def test_a_time_of_exactly_a_week_is_read() -> None:
    loaded = read_interactions(cassette(headers_at=0.0, at=[0.1, WEEK]))
    assert loaded[0].response.end.at == MAX_SECONDS == WEEK


def test_a_time_out_of_bounds_in_a_json_export_is_a_format_error_naming_its_field() -> None:
    text = export_json(read_interactions(cassette())).replace('"at": 0.2,', '"at": 1e300,', 1)
    assert "1e300" in text
    with pytest.raises(CassetteFormatError) as caught:
        import_json(text)
    assert str(caught.value).endswith(f"interactions[0].response.chunks[1].at: {LIMIT}, not 1e+300")


MADE_IN_CODE: dict[str, tuple[Callable[[], object], str]] = {
    "Chunk": (lambda: Chunk(1e300, b""), f"at {LIMIT}, not 1e+300"),
    "Chunks": (lambda: Chunks([0.1, HUGE], [b"", b""]), f"chunk 1: at {LIMIT}"),
    "StreamEnd": (lambda: StreamEnd(at=WEEK * 2), f"at {LIMIT}, not 1209600.0"),
    "Response": (lambda: Response(status=200, headers_at=1e300), f"headers_at {LIMIT}"),
    "StreamEnd at a 5,000-digit integer": (
        lambda: StreamEnd(at=10**5000),
        f"at {LIMIT}, not an integer of thousands of digits",
    ),
}


@pytest.mark.parametrize(("make", "message"), MADE_IN_CODE.values(), ids=MADE_IN_CODE.keys())
def test_a_time_out_of_bounds_made_in_code_is_refused_where_it_is_made(
    make: Callable[[], object], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


# -- speeds, faults and synthetic streams: no wait can overflow --------------------------------


@pytest.mark.parametrize("speed", [1e-300, "1e-300x", 0.0009, 5e-324])
def test_a_speed_slower_than_the_slowest_is_a_configuration_error_saying_the_range(
    speed: object,
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_speed(speed)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"speed {speed!r} is too slow: a speed is from 0.001 (a thousand times slower than "
        "recorded) up, or 'instant'"
    )


def test_the_slowest_speed_is_taken_and_a_schedule_slower_is_refused() -> None:
    assert parse_speed(MIN_SPEED) == parse_speed("0.001x") == 0.001
    # The longest wait there is: a week's time at the slowest speed, well within time.sleep.
    assert Schedule(start=0.0, speed=MIN_SPEED).delay(MAX_SECONDS, 0.0) < 2**63 / 1e9
    with pytest.raises(ValueError, match="speed"):
        Schedule(start=0.0, speed=1e-300)


def test_use_cassette_refuses_a_speed_too_slow(tmp_path: Path) -> None:
    with (
        pytest.raises(ConfigurationError, match="too slow"),
        replay.use_cassette(tmp_path / "c.msgpack", speed=1e-300),
    ):
        pass  # pragma: no cover - refused on entry


def test_a_stall_or_jitter_past_a_week_is_refused_when_made() -> None:
    with pytest.raises(ConfigurationError, match=r"seconds must be at most 604800 \(one week"):
        faults.stall(after_events=0, seconds=1e300)
    with pytest.raises(ConfigurationError, match=r"ms must be at most 6.048e\+08 \(one week"):
        faults.parse("jitter(1e300)")


def test_a_fault_that_moves_a_time_past_a_week_is_a_configuration_error_naming_it() -> None:
    interaction = read_interactions(cassette())[0]
    injector = faults.Injector([faults.slow(1e300)])
    with pytest.raises(ConfigurationError) as caught:
        injector.outcome(0, interaction.request, interaction.response)
    assert str(caught.value).startswith("fault slow(1e+300) on interaction 0: ")
    assert LIMIT in str(caught.value)


@pytest.mark.parametrize(
    ("timing", "message"),
    [
        ({"ttft": 1e300}, "ttft must be a number of seconds from 0 to 604800 (a week)"),
        ({"tokens_per_second": 1e-300}, "the stream would last 1e+300 s, past the 604800 s"),
    ],
    ids=["ttft", "pace"],
)
def test_a_synthetic_stream_past_a_week_is_a_configuration_error(
    timing: dict[str, float], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        synthesize("chat", "hi there", **timing)


# -- every command, given such a file: one line, at once ---------------------------------------

COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "show": lambda bad, _out: ["show", str(bad)],
    "diff": lambda bad, out: ["diff", str(bad), str(good_cassette(out))],
    "report": lambda bad, out: ["report", str(bad), "-o", str(out / "report.html")],
    "play": lambda bad, _out: ["play", str(bad), "--speed", "1"],
    "convert": lambda bad, out: ["convert", str(bad), str(out / "out.json")],
    "serve": lambda bad, _out: ["serve", str(bad), "--port", "0"],
    "synth": lambda bad, _out: ["synth", "chat", str(bad), "--text", "hi"],
}


def good_cassette(folder: Path) -> Path:
    path = folder / "good.msgpack"
    path.write_bytes(cassette())
    return path


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_every_command_refuses_a_small_file_of_a_huge_time_in_one_line(
    tmp_path: Path, command: Callable[[Path, Path], list[str]]
) -> None:
    bad = tmp_path / "huge.msgpack"
    bad.write_bytes(cassette(at=[0.1, 0.2, 0.3, HUGE], end=HUGE))
    assert len(bad.read_bytes()) < 400
    line = one_line_error(replay_command(*command(bad, tmp_path)))
    assert line == (
        f"replay: error: cannot read cassette {str(bad)!r}: "
        f"interactions[0].response.chunks[3].at: {LIMIT}, not 1.7976931348623157e+308"
    )
    assert not (tmp_path / "report.html").exists()
    assert not (tmp_path / "out.json").exists()


def test_replay_check_says_in_its_own_line_that_such_a_file_cannot_be_read(tmp_path: Path) -> None:
    # `check` reads many cassettes: one that cannot be read is a line of its report.
    bad = tmp_path / "huge.msgpack"
    bad.write_bytes(cassette(at=[0.1, 0.2, 0.3, HUGE], end=HUGE))
    done = replay_command("check", str(bad))
    assert done.returncode == 1
    assert done.stderr == ""
    assert done.stdout.splitlines()[0] == (
        f"{bad}: cannot read: interactions[0].response.chunks[3].at: {LIMIT}, "
        "not 1.7976931348623157e+308"
    )


SLOW: dict[str, list[str]] = {
    "play": ["play", "{good}", "--speed", "1e-300"],
    "serve": ["serve", "{good}", "--speed", "1e-300", "--port", "0"],
    "run": ["run", "{good}", "--speed", "1e-300x", "--", sys.executable, "-c", "pass"],
}


@pytest.mark.parametrize("arguments", SLOW.values(), ids=SLOW.keys())
def test_a_speed_too_slow_is_one_line_from_every_command_that_takes_one(
    tmp_path: Path, arguments: list[str]
) -> None:
    good = str(good_cassette(tmp_path))
    line = one_line_error(replay_command(*[a.format(good=good) for a in arguments]))
    assert line.startswith("replay: error: speed '1e-300")
    assert line.endswith(
        "is too slow: a speed is from 0.001 (a thousand times slower than "
        "recorded) up, or 'instant'"
    )


def test_replay_play_of_a_time_of_1e300_made_by_a_fault_is_one_line(tmp_path: Path) -> None:
    good = str(good_cassette(tmp_path))
    done = replay_command("play", good, "--speed", "1", "--fault", "slow(1e300)")
    line = one_line_error(done)
    assert line.startswith("replay: error: fault slow(1e+300) on interaction 0: ")
    assert "Traceback" not in done.stderr


# -- YAML and JSON: what a parser would expand, or recurse into, without end -------------------


def vcrpy_yaml(body: str, *, before: str = "", status: str = "200") -> str:
    """A vcrpy cassette of one GET whose request body is the YAML `body` (flow style),
    with the lines `before` ahead of it (where anchors are defined)."""
    return (
        f"{before}interactions:\n"
        "- request:\n"
        f"    body: {body}\n"
        "    headers: {}\n"
        "    method: GET\n"
        "    uri: http://127.0.0.1/\n"
        "  response:\n"
        "    body: {string: ''}\n"
        "    headers: {}\n"
        f"    status: {{code: {status}, message: OK}}\n"
        "version: 1\n"
    )


def laughs(levels: int) -> str:
    """A "billion laughs": each level a list of ten aliases of the one below; the body is
    the top one, 300 * 10**(levels - 1) characters once its pieces are joined."""
    lines = ['a0: &a0 "' + "lol" * 100 + '"\n']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]\n")
    return vcrpy_yaml(f"*a{levels - 1}", before="".join(lines))


def vcrpy_json(body: str) -> str:
    """A vcrpy JSON cassette of one GET whose request body is the JSON `body`."""
    request = f'{{"body": {body}, "headers": {{}}, "method": "GET", "uri": "http://127.0.0.1/"}}'
    response = '{"body": {"string": ""}, "headers": {}, "status": {"code": 200, "message": "OK"}}'
    return f'{{"interactions": [{{"request": {request}, "response": {response}}}], "version": 1}}'


NESTED = "not a cassette: values nested more than 200 deep"

# (file name, text, what the one line ends with)
TEXTS: dict[str, tuple[str, str, str]] = {
    "billion laughs": (
        "laughs.yaml",
        laughs(9),
        "not a cassette: its aliases would expand it past 4,194,304 characters, at line 6 "
        '(a "billion laughs"): not read',
    ),
    "YAML alias inside its own anchor": (
        "loop.yaml",
        vcrpy_yaml("&loop [*loop]"),
        "not a cassette: the alias *loop at line 3 is inside the node it names (a value that "
        "contains itself)",
    ),
    "YAML nested 900 deep": (
        "deep.yaml",
        vcrpy_yaml("[" * 900 + "x" + "]" * 900),
        f"{NESTED}, line 3",
    ),
    "YAML of a 5,000-digit integer": (
        "digits.yaml",
        vcrpy_yaml("''", status="9" * 5000),
        "not a cassette: Exceeds the limit (4300 digits) for integer string conversion: "
        "value has 5000 digits",
    ),
    "JSON nested 100,000 deep": ("deep.json", "[" * 100_000 + "]" * 100_000, NESTED),
    "JSON body nested 900 deep": ("body.json", vcrpy_json("[" * 900 + "]" * 900), NESTED),
    "JSON of a 5,000-digit integer": (
        "digits.json",
        vcrpy_json("9" * 5000),
        "not a cassette: a JSON number of more than 4300 digits",
    ),
}


@pytest.mark.parametrize(("name", "text", "ending"), TEXTS.values(), ids=TEXTS.keys())
def test_replay_convert_refuses_a_text_that_expands_or_nests_without_end_in_one_line(
    tmp_path: Path, name: str, text: str, ending: str
) -> None:
    source = tmp_path / name
    source.write_text(text)
    assert len(text) < 300_000
    line = one_line_error(replay_command("convert", str(source), str(tmp_path / "out.msgpack")))
    assert line == f"replay: error: cannot read cassette {str(source)!r}: {ending}"
    assert not (tmp_path / "out.msgpack").exists()


# In this process, a billion laughs of some 30 MB (past the bound, and harmless if it were not).
IN_PROCESS = {**TEXTS, "billion laughs": ("laughs.yaml", laughs(6), TEXTS["billion laughs"][2])}


@pytest.mark.parametrize(("name", "text", "ending"), IN_PROCESS.values(), ids=IN_PROCESS.keys())
def test_reading_such_a_text_is_a_format_error(
    tmp_path: Path, name: str, text: str, ending: str
) -> None:
    source = tmp_path / name
    source.write_text(text)
    with pytest.raises(CassetteFormatError) as caught:
        read_cassette(source)
    assert str(caught.value).endswith(ending)


def test_a_cassette_that_shares_its_headers_through_anchors_still_reads(tmp_path: Path) -> None:
    # PyYAML writes an object met twice once, anchored, then as aliases: a cassette whose
    # interactions share a headers dict (as a recorder may) has them.
    headers = {"content-type": ["text/plain"], "x-shared": ["yes"]}
    interaction = {
        "request": {"body": "", "headers": headers, "method": "GET", "uri": "http://127.0.0.1/"},
        "response": {
            "body": {"string": "hello"},
            "headers": headers,
            "status": {"code": 200, "message": "OK"},
        },
    }
    text = yaml.safe_dump({"interactions": [interaction, interaction], "version": 1})
    assert "&id001" in text
    assert "*id001" in text
    source = tmp_path / "anchors.yaml"
    source.write_text(text)
    read = read_cassette(source).interactions
    assert [i.response.header("x-shared") for i in read] == ["yes", "yes"]
    assert [i.response.body for i in read] == [b"hello", b"hello"]


def test_a_few_levels_of_aliases_read_as_their_expansion(tmp_path: Path) -> None:
    # 300 * 10**2 characters from fewer than 700: within the bound (4 MiB, or 4x the file).
    source = tmp_path / "aliases.yaml"
    source.write_text(laughs(3))
    (read,) = read_cassette(source).interactions
    assert read.request.body == b"lol" * 100 * 100


def test_replay_convert_refuses_yaml_nested_100000_deep_in_one_line(tmp_path: Path) -> None:
    # libyaml stops at its own depth (1,000) while scanning; PyYAML's Python parser, at ours.
    source = tmp_path / "deep.yaml"
    source.write_text(vcrpy_yaml("[" * 100_000 + "x" + "]" * 100_000))
    line = one_line_error(replay_command("convert", str(source), str(tmp_path / "out.msgpack")))
    assert line.startswith(f"replay: error: cannot read cassette {str(source)!r}: ")
    assert "nest" in line


# -- streams nested past the JSON parser: read as any other, at any depth ----------------------

DEEP = 5_000
NESTED = b"[" * DEEP + b"]" * DEEP
DEEP_STREAMS: dict[str, tuple[str, bytes]] = {
    "sse-event": (
        "text/event-stream",
        b'data: {"type":"response.output_text.delta","delta":"x","n":' + NESTED + b"}\n\n",
    ),
    "ndjson-line": ("application/x-ndjson", b'{"message":{"content":"x"},"n":' + NESTED + b"}\n"),
    "tool-arguments": (
        "text/event-stream",
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c",'
        b'"type":"function","function":{"name":"f","arguments":"' + NESTED + b'"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
        b"data: [DONE]\n\n",
    ),
}


@pytest.mark.parametrize("verb", ["show", "show --events", "check", "diff", "report"])
@pytest.mark.parametrize("stream", DEEP_STREAMS.values(), ids=DEEP_STREAMS.keys())
def test_a_stream_nested_past_the_parser_is_read_by_every_verb(
    tmp_path: Path, stream: tuple[str, bytes], verb: str
) -> None:
    # Each raised RecursionError from a json.loads of an event's data (a traceback).
    content_type, body = stream
    response = Response(
        status=200, headers=[("content-type", content_type)], chunks=[Chunk(0.1, body)]
    )
    path = tmp_path / "deep.msgpack"
    request = replay.Request(method="POST", url="http://127.0.0.1/v1", body=b"{}")
    replay.Cassette([replay.Interaction(request, response)]).save(path)
    extra = {"diff": [str(path)], "report": ["-o", str(tmp_path / "page.html")]}
    done = replay_command(*verb.split(), str(path), *extra.get(verb, []))
    assert done.returncode in (0, 1), done.stderr  # 1: check's findings on a made-up stream
    assert "Traceback" not in done.stderr
    assert "Error" not in done.stdout + done.stderr
