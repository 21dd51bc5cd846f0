"""`replay convert`: to and from vcrpy's YAML, checked by vcrpy itself, and the JSON export.

A replay cassette converted to YAML must play back under `vcr.use_cassette`; a cassette
vcrpy recorded must convert, load and replay through `replay.ReplayTransport`.
"""

from __future__ import annotations

import gzip
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import vcr
from commands import replay_text as run_replay
from vcr.serialize import deserialize
from vcr.serializers import yamlserializer

import replay
from replay.convert.files import convert, export_json, import_json
from replay.model import Chunk, Interaction, Request, Response, StreamEnd
from replay.store.cassette import Cassette
from replay.testing import Origin, Script

SSE_BODY = b'event: delta\ndata: {"text":"h\xc3\xa9"}\n\ndata: [DONE]\n\n'
ROUTES = {
    "/v1/responses": Script(chunks=[(0.01, SSE_BODY[:20]), (0.01, SSE_BODY[20:])]),
    "/gz": Script(chunks=[(0.0, b"data: a\n\n"), (0.01, b"data: b\n\n")], gzip=True),
}


@pytest.fixture(scope="module")
def origin() -> Iterator[Origin]:
    """One origin for the module: an SSE route (a character split across chunks) and gzip."""
    with Origin(ROUTES) as server:
        yield server


def requests_to(client: Any, url: str) -> list[bytes]:
    """The requests every test makes (a POST of SSE, a gzip GET), and the bodies read."""
    post = client.post(url + "/v1/responses", json={"input": "hi", "stream": True})
    get = client.get(url + "/gz")
    return [post.content, get.content]


@pytest.fixture(scope="module")
def recorded(origin: Origin, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A replay cassette of `requests_to` against the origin."""
    path = tmp_path_factory.mktemp("recorded") / "recorded.msgpack"
    with replay.use_cassette(path), httpx.Client() as client:
        requests_to(client, origin.url)
    return path


def hand_built() -> list[Interaction]:
    """Bodies that YAML could get wrong: binary, CRLF, trailing spaces, gzip, empty."""
    get = Request(method="GET", url="http://example.com/a?b=1", headers=[("X-Two", "1")])
    return [
        Interaction(
            Request(method="POST", url="http://example.com/bin", body=b"\x00\xff binary"),
            Response(status=200, chunks=[Chunk(0.1, b"\xff\xfe"), Chunk(0.2, b"\x00")]),
        ),
        Interaction(
            get,
            Response(
                status=201,
                headers=[
                    ("Link", "<a>; rel=1"),
                    ("content-type", "text/plain"),
                    ("link", "<b>; rel=2"),
                ],
                chunks=[Chunk(0.0, b"line  \r\nnext \n\n  indented\ttab\n")],
            ),
        ),
        Interaction(
            get,
            Response(
                status=200,
                headers=[("content-encoding", "gzip")],
                chunks=[Chunk(0.0, gzip.compress(b"zipped", mtime=0))],
            ),
        ),
        Interaction(get, Response(status=204)),
    ]


def messages(interactions: list[Interaction]) -> list[tuple[str, str, bytes, int, bytes]]:
    """What survives any conversion: the request line and body, the status and body bytes."""
    return [
        (i.request.method, i.request.url, i.request.body, i.response.status, i.response.body)
        for i in interactions
    ]


# -- replay -> vcrpy --------------------------------------------------------------------------


@pytest.mark.parametrize("module_name", ["httpx", "httpx2"])
def test_a_converted_cassette_plays_back_under_vcrpy(
    recorded: Path, origin: Origin, tmp_path: Path, module_name: str
) -> None:
    module: ModuleType = importlib.import_module(module_name)
    yaml_path = tmp_path / "converted.yaml"
    assert convert(recorded, yaml_path).source_format == "replay msgpack"
    with (
        vcr.use_cassette(str(yaml_path), record_mode="none") as cassette,
        module.Client() as client,
    ):
        bodies = requests_to(client, origin.url)
        assert cassette.all_played
    assert bodies == [SSE_BODY, b"data: a\n\ndata: b\n\n"]
    assert len(origin.requests) == 2  # only the recording reached the network


def test_the_yaml_is_laid_out_as_vcrpy_records_httpx(tmp_path: Path) -> None:
    convert_to = tmp_path / "out.yml"
    replay.Cassette(hand_built()).save(tmp_path / "in.msgpack")
    convert(tmp_path / "in.msgpack", convert_to)
    document = yamlserializer.deserialize(convert_to.read_text())
    assert document["version"] == 1
    second = document["interactions"][1]
    assert second["request"] == {
        "method": "GET",
        "uri": "http://example.com/a?b=1",
        "body": "",
        "headers": {"x-two": ["1"]},
    }
    assert second["response"] == {
        "status": {"code": 201, "message": "Created"},
        "headers": {"link": ["<a>; rel=1", "<b>; rel=2"], "content-type": ["text/plain"]},
        "body": {"string": "line  \r\nnext \n\n  indented\ttab\n"},
    }
    gzipped = document["interactions"][2]["response"]
    assert gzipped["body"]["string"] == gzip.compress(b"zipped", mtime=0)  # as sent, like vcrpy
    assert gzipped["headers"]["content-encoding"] == ["gzip"]


def test_round_trip_through_yaml_keeps_every_request_and_response_byte(tmp_path: Path) -> None:
    Cassette(hand_built()).save(tmp_path / "a.msgpack")
    convert(tmp_path / "a.msgpack", tmp_path / "b.yaml")
    convert(tmp_path / "b.yaml", tmp_path / "c.msgpack")
    back = Cassette.load(tmp_path / "c.msgpack").interactions
    assert messages(back) == messages(hand_built())
    assert [i.response.header("content-encoding") for i in back] == [None, None, "gzip", None]


# -- vcrpy -> replay --------------------------------------------------------------------------


def test_a_cassette_vcrpy_recorded_replays_through_replay(origin: Origin, tmp_path: Path) -> None:
    yaml_path = tmp_path / "vcr.yaml"
    with vcr.use_cassette(str(yaml_path), record_mode="once"), httpx.Client() as client:
        live = requests_to(client, origin.url)
    assert convert(yaml_path, tmp_path / "vcr.msgpack").source_format == "vcrpy YAML"
    cassette = Cassette.load(tmp_path / "vcr.msgpack")
    assert all(
        [(c.at, c.data) for c in i.response.chunks] == [(0.0, i.response.body)]
        and i.response.end == StreamEnd(at=0.0)
        for i in cassette.interactions
    )
    with httpx.Client(transport=replay.ReplayTransport(cassette, speed="instant")) as client:
        assert requests_to(client, origin.url) == live
    assert cassette.all_played
    assert [e.data for e in cassette.interactions[0].response.events()] == [
        '{"text":"hé"}',
        "[DONE]",
    ]


def test_older_vcrpy_httpx_cassettes_convert(tmp_path: Path) -> None:
    src = tmp_path / "old.yaml"
    src.write_text(
        "interactions:\n"
        "- request: {body: null, headers: {}, method: GET, uri: 'http://example.com/'}\n"
        "  response:\n"
        "    status_code: 200\n"
        "    headers: {content-type: [text/plain]}\n"
        "    content: hello\n"
        "version: 1\n"
    )
    convert(src, tmp_path / "old.msgpack")
    (interaction,) = Cassette.load(tmp_path / "old.msgpack").interactions
    assert (interaction.response.status, interaction.response.body) == (200, b"hello")


def test_vcrpy_json_cassettes_are_read_too(tmp_path: Path) -> None:
    src = tmp_path / "vcr.json"
    src.write_text(
        json.dumps(
            {
                "version": 1,
                "interactions": [
                    {
                        "request": {
                            "method": "GET",
                            "uri": "http://x/",
                            "body": None,
                            "headers": {},
                        },
                        "response": {
                            "status": {"code": 200, "message": "OK"},
                            "headers": {"Content-Type": ["text/event-stream"]},
                            "body": {"string": "data: 1\n\n"},
                        },
                    }
                ],
            }
        )
    )
    assert convert(src, tmp_path / "out.msgpack").source_format == "vcrpy JSON"
    (interaction,) = Cassette.load(tmp_path / "out.msgpack").interactions
    assert [e.data for e in interaction.response.events()] == ["1"]


# -- JSON export ------------------------------------------------------------------------------


def test_json_export_converts_back_without_losing_anything(recorded: Path, tmp_path: Path) -> None:
    original = Cassette.load(recorded).interactions + hand_built()
    Cassette(original).save(tmp_path / "a.msgpack")
    assert len(convert(tmp_path / "a.msgpack", tmp_path / "a.json").interactions) == 6
    read = convert(tmp_path / "a.json", tmp_path / "b.msgpack")
    assert (len(read.interactions), read.source_format) == (6, "replay JSON export")
    assert Cassette.load(tmp_path / "b.msgpack").interactions == original
    assert (tmp_path / "b.msgpack").read_bytes() == (tmp_path / "a.msgpack").read_bytes()


def test_json_export_keeps_one_header_or_chunk_per_line() -> None:
    lines = export_json(hand_built()[:2]).splitlines()
    assert '        "chunks": [' in lines
    assert '          {"at": 0.1, "data_base64": "//4="},' in lines
    assert '          ["Link", "<a>; rel=1"],' in lines
    assert '        "end": {"at": 0.2, "error": null, "message": "", "truncated": false}' in lines


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not JSON"),
        ("[]", "document: expected an object, found list"),
        ('{"format": "other", "version": 1}', "not a replay JSON export (format 'other'"),
        (
            '{"format": "replay-cassette-json", "version": 2}',
            "export version 2 is newer than this replay reads",
        ),
        (
            '{"format": "replay-cassette-json", "version": 1, "interactions": [{"response": {}}]}',
            "interactions[0]: missing field 'request'",
        ),
        (
            '{"format": "replay-cassette-json", "version": 1, "interactions": [{"request": '
            '{"method": "GET", "url": "u", "headers": [], "body": ""}, "response": {}}]}',
            "interactions[0].response: missing field 'status'",
        ),
    ],
    ids=["not-json", "not-object", "other-format", "newer", "no-request", "no-status"],
)
def test_a_damaged_json_export_is_a_format_error_naming_the_place(text: str, problem: str) -> None:
    with pytest.raises(replay.CassetteFormatError) as caught:
        import_json(text, "x.json")
    assert str(caught.value).startswith("cannot read cassette 'x.json': ")
    assert problem in str(caught.value)


def test_json_export_rejects_bad_base64() -> None:
    document = json.loads(export_json(hand_built()[:1]))
    document["interactions"][0]["request"]["body_base64"] = "not base64!"
    with pytest.raises(replay.CassetteFormatError, match=r"request\.body_base64: not base64"):
        import_json(json.dumps(document))


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "dst", "named"),
    [("a.txt", "b.yaml", "'.txt'"), ("a.msgpack", "b.xml", "'.xml'"), ("a", "b.json", "'(none)'")],
    ids=["source", "destination", "no-suffix"],
)
def test_an_unknown_suffix_is_a_configuration_error(
    tmp_path: Path, src: str, dst: str, named: str
) -> None:
    Cassette(hand_built()).save(tmp_path / "a.msgpack")
    with pytest.raises(replay.ConfigurationError, match=r"\.msgpack \(replay\), \.yaml") as caught:
        convert(tmp_path / src, tmp_path / dst)
    assert named in str(caught.value)
    assert not (tmp_path / dst).exists()


@pytest.mark.parametrize("suffix", [".msgpack", ".yaml", ".json"])
def test_a_missing_source_is_file_not_found(tmp_path: Path, suffix: str) -> None:
    with pytest.raises(FileNotFoundError):
        convert(tmp_path / f"nope{suffix}", tmp_path / "out.msgpack")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "the file is empty"),
        (b"\xff\xfe", "not UTF-8 text"),
        (b"interactions: [\n", "node content, line 2)"),
        (b"- just\n- a list\n", "expected a mapping of 'interactions', found list"),
        (b"!!python/object/apply:os.system ['true']\n", "refused: the YAML tag !!python/"),
        (
            b"interactions:\n- request: {method: GET}\n  response: {}\nversion: 1\n",
            "interactions[0]: request: missing field 'uri'",
        ),
        (
            b"interactions:\n- request: {method: GET, uri: 'http://x/', body: null, headers: {}}\n"
            b"  response: {status: {code: 999}, headers: {}, body: {string: ''}}\nversion: 1\n",
            "interactions[0]: status must be 100-599, not 999",
        ),
    ],
    ids=["empty", "not-utf8", "bad-yaml", "not-a-cassette", "unsafe-tag", "bad-request", "status"],
)
def test_an_unreadable_vcrpy_cassette_is_a_format_error_naming_the_file(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    src = tmp_path / "in.yaml"
    src.write_bytes(content)
    with pytest.raises(replay.CassetteFormatError) as caught:
        convert(src, tmp_path / "out.msgpack")
    assert str(caught.value).startswith(f"cannot read cassette {str(src)!r}: ")
    assert problem in str(caught.value)
    assert not (tmp_path / "out.msgpack").exists()


def test_a_corrupt_replay_cassette_is_not_converted(tmp_path: Path) -> None:
    (tmp_path / "in.msgpack").write_bytes(b"\x85garbage")
    with pytest.raises(replay.CassetteFormatError):
        convert(tmp_path / "in.msgpack", tmp_path / "out.yaml")
    assert list(tmp_path.iterdir()) == [tmp_path / "in.msgpack"]


def test_vcrpy_reads_what_it_loads_before_conversion(tmp_path: Path) -> None:
    """The YAML written is what vcrpy's own loader returns, request by request."""
    Cassette(hand_built()).save(tmp_path / "a.msgpack")
    convert(tmp_path / "a.msgpack", tmp_path / "a.yaml")
    requests, responses = deserialize((tmp_path / "a.yaml").read_text(), yamlserializer)
    assert [(r.method, r.uri, r.body) for r in requests] == [
        (i.request.method, i.request.url, i.request.body) for i in hand_built()
    ]
    assert [r["body"]["string"] for r in responses] == [i.response.body for i in hand_built()]


# -- the command line -------------------------------------------------------------------------


def test_convert_command_reports_what_it_did(recorded: Path, tmp_path: Path) -> None:
    result = run_replay("convert", str(recorded), str(tmp_path / "out.yaml"))
    assert result.returncode == 0, result.stderr
    assert result.stderr == (
        f"{recorded} -> {tmp_path / 'out.yaml'}: 2 interactions, read replay msgpack\n"
    )
    assert len(deserialize((tmp_path / "out.yaml").read_text(), yamlserializer)[0]) == 2


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("in.yaml", None, "replay: error: {directory}/in.yaml: no such file or directory"),
        ("in.yaml", "- a\n", "replay: error: cannot read cassette "),
        ("in.txt", "", "replay: error: cannot tell the format of "),
    ],
    ids=["missing", "corrupt", "suffix"],
)
def test_convert_errors_are_one_line(
    tmp_path: Path, name: str, content: str | None, message: str
) -> None:
    if content is not None:
        (tmp_path / name).write_text(content)
    result = run_replay("convert", str(tmp_path / name), str(tmp_path / "out.msgpack"))
    assert result.returncode == 1
    assert result.stderr.startswith(message.format(directory=tmp_path))
    assert result.stderr.count("\n") == 1
    assert "Convert it first" not in result.stderr  # (it is converting)
    assert "Traceback" not in result.stderr


def test_a_recording_the_session_stopped_survives_the_json_export() -> None:
    end = StreamEnd(at=0.6, truncated=True, stopped_by="session")
    response = Response(status=200, chunks=[Chunk(0.5, b"x")], end=end)
    interaction = Interaction(Request(method="GET", url="https://a.test/"), response)
    assert import_json(export_json([interaction])) == [interaction]


def test_an_existing_destination_is_kept_unless_overwrite(tmp_path: Path) -> None:
    # A timed cassette must not be replaced, unasked, by one converted from untimed YAML.
    Cassette(hand_built()).save(tmp_path / "a.msgpack")
    convert(tmp_path / "a.msgpack", tmp_path / "a.yaml")
    timed = (tmp_path / "a.msgpack").read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        convert(tmp_path / "a.yaml", tmp_path / "a.msgpack")
    assert (tmp_path / "a.msgpack").read_bytes() == timed
    convert(tmp_path / "a.yaml", tmp_path / "a.msgpack", overwrite=True)
    assert (tmp_path / "a.msgpack").read_bytes() != timed


def test_the_cli_refuses_an_existing_destination_without_force(tmp_path: Path) -> None:
    Cassette(hand_built()).save(tmp_path / "a.msgpack")
    (tmp_path / "a.yaml").write_text("kept")
    command = [sys.executable, "-m", "replay.cli", "convert", "a.msgpack", "a.yaml"]
    refused = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert refused.returncode == 1
    assert refused.stderr == "replay: error: a.yaml already exists: add --force to replace it\n"
    assert (tmp_path / "a.yaml").read_text() == "kept"
    forced = subprocess.run(
        [*command, "--force"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "a.yaml").read_text() != "kept"


def test_a_vcrpy_cassettes_credentials_are_redacted_as_it_converts(tmp_path: Path) -> None:
    # vcrpy keeps what it is not told to filter: the converted cassette must not.
    key = "sk-proj-Convert0123456789abcdefXYZ"
    src = tmp_path / "leaky.yaml"
    src.write_text(
        "interactions:\n"
        "- request:\n"
        "    body: null\n"
        f"    headers: {{authorization: ['Bearer {key}']}}\n"
        "    method: GET\n"
        f"    uri: 'https://api.example.com/v1/models?api_key={key}'\n"
        "  response:\n"
        "    status: {code: 200, message: OK}\n"
        "    headers: {content-type: [text/plain]}\n"
        "    body: {string: hello}\n"
        "version: 1\n"
    )
    for target in ("out.msgpack", "out.json", "out.yaml"):
        convert(src, tmp_path / target)
        assert key.encode() not in (tmp_path / target).read_bytes(), target
    (interaction,) = Cassette.load(tmp_path / "out.msgpack").interactions
    assert interaction.request.header("authorization") == "REDACTED"
    assert interaction.response.body == b"hello"


@pytest.mark.parametrize("times", ["network", "reader", None])
def test_json_export_keeps_where_the_times_came_from(times: str | None) -> None:
    interaction = Interaction(
        request=Request(method="GET", url="http://127.0.0.1/x"),
        response=Response(status=200, times=times, chunks=[Chunk(0.1, b"data: 1\n\n")]),
    )
    text = export_json([interaction])
    assert ('"times"' in text) == (times is not None)
    assert import_json(text) == [interaction]


def test_json_import_refuses_an_unknown_source_of_times() -> None:
    interaction = Interaction(
        request=Request(method="GET", url="http://127.0.0.1/x"), response=Response(status=200)
    )
    document = json.loads(export_json([interaction]))
    document["interactions"][0]["response"]["times"] = "guessed"
    with pytest.raises(replay.CassetteFormatError, match=r"response: times must be"):
        import_json(json.dumps(document))
