"""`replay convert` reads the cassette variants real projects commit, and names the one it read.

vcrpy YAML and JSON, gzip-compressed (`.yaml.gz`, `.json.gz`), and pydantic-ai's serializer
(JSON bodies stored parsed as `parsed_body`, other bodies as YAML literal text). Each case is a
small synthetic cassette built here, converted by the library and by the real command line,
and must keep every body, status, header and content-coding byte for byte.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_convert import run_replay

import replay
from replay.convert.files import convert, read_cassette

SSE = b'event: delta\ndata: {"text":"h\xc3\xa9"}\n\ndata: [DONE]\n\n'
SSE_CRLF = b"data: 1\r\n\r\ndata: 2  \r\n\r\n"  # no YAML literal can hold it: quoted instead
GZIPPED = gzip.compress(b'{"ok":true}', mtime=0)
REQUEST_JSON = {"model": "m", "stream": True, "input": [{"role": "user", "content": "hé"}]}
ERROR_JSON = {"error": {"message": "bad", "type": "invalid_request_error"}}
SSE_HEADERS = {"content-type": ["text/event-stream"], "x-seen": ["1", "2"]}


def vcr_request(body: Any, **extra: Any) -> dict[str, Any]:
    headers = {"content-type": ["application/json"]}
    return {"method": "POST", "uri": "https://api.test/v1/x", "headers": headers, **extra} | (
        {} if body is None else {"body": body}
    )


def vcr_response(code: int, headers: dict[str, list[str]], body: Any) -> dict[str, Any]:
    return {"status": {"code": code, "message": ""}, "headers": headers, "body": {"string": body}}


def vcrpy_document(*, binary: bool) -> dict[str, Any]:
    """A stream, an HTTP 400 and (YAML only: JSON holds no bytes) a gzip body, as vcrpy has them."""
    body = json.dumps(REQUEST_JSON)
    items = [
        {"request": vcr_request(body), "response": vcr_response(200, SSE_HEADERS, SSE.decode())},
        {
            "request": vcr_request(body),
            "response": vcr_response(
                400, {"content-type": ["application/json"]}, json.dumps(ERROR_JSON)
            ),
        },
    ]
    if binary:
        headers = {"content-encoding": ["gzip"], "content-type": ["application/json"]}
        items.append(
            {"request": vcr_request(body), "response": vcr_response(200, headers, GZIPPED)}
        )
    return {"interactions": items, "version": 1}


class LiteralDumper(yaml.SafeDumper):
    """Multi-line strings as YAML literal blocks, the way pydantic-ai's serializer writes."""


LiteralDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def pydantic_ai_text() -> str:
    """pydantic-ai's layout: JSON bodies parsed (`parsed_body`), the rest literal text."""

    def request() -> dict[str, Any]:
        return vcr_request(None, parsed_body=REQUEST_JSON)

    error = vcr_response(400, {"content-type": ["application/json"]}, None)
    del error["body"]
    error["parsed_body"] = ERROR_JSON
    items = [
        {"request": request(), "response": vcr_response(200, SSE_HEADERS, SSE.decode())},
        {"request": request(), "response": vcr_response(200, SSE_HEADERS, SSE_CRLF.decode())},
        {"request": request(), "response": error},
    ]
    document = {"interactions": items, "version": 1}
    return yaml.dump(document, Dumper=LiteralDumper, allow_unicode=True, width=120)


def expected(*, binary: bool = False, pydantic_ai: bool = False) -> list[tuple[Any, ...]]:
    """What each interaction must hold: request line and body, status, headers, body bytes."""
    # pydantic-ai replays `json.dumps(parsed_body)`, keys sorted as its YAML stores them
    request_body = json.dumps(REQUEST_JSON, sort_keys=pydantic_ai).encode()
    sse = [("content-type", "text/event-stream"), ("x-seen", "1"), ("x-seen", "2")]
    json_type = [("content-type", "application/json")]
    rows = [(request_body, 200, sse, SSE)]
    if pydantic_ai:
        rows.append((request_body, 200, sse, SSE_CRLF))
    rows.append((request_body, 400, json_type, json.dumps(ERROR_JSON).encode()))
    if binary:
        rows.append((request_body, 200, [("content-encoding", "gzip"), *json_type], GZIPPED))
    return [("POST", "https://api.test/v1/x", *row) for row in rows]


def held(interactions: Any) -> list[tuple[Any, ...]]:
    return [
        (
            i.request.method,
            i.request.url,
            i.request.body,
            i.response.status,
            list(i.response.headers),
            i.response.body,
        )
        for i in interactions
    ]


Variant = tuple[str, Callable[[], bytes], str, list[tuple[Any, ...]]]
"""A file name, its bytes, the variant `convert` must name, and what it must hold."""


def gzipped(variant: Variant, name: str) -> Variant:
    _name, build, source_format, want = variant
    return (name, lambda: gzip.compress(build()), f"gzip-compressed {source_format}", want)


VCRPY_YAML: Variant = (
    "c.yaml",
    lambda: yaml.safe_dump(vcrpy_document(binary=True)).encode(),
    "vcrpy YAML",
    expected(binary=True),
)
VCRPY_JSON: Variant = (
    "c.json",
    lambda: json.dumps(vcrpy_document(binary=False), indent=4).encode(),
    "vcrpy JSON",
    expected(),
)
PYDANTIC_AI: Variant = (
    "c.yaml",
    lambda: pydantic_ai_text().encode(),
    "vcrpy YAML (pydantic-ai serializer)",
    expected(pydantic_ai=True),
)
VARIANTS: dict[str, Variant] = {
    "vcrpy-yaml": VCRPY_YAML,
    "vcrpy-json": VCRPY_JSON,
    "pydantic-ai": PYDANTIC_AI,
    "yaml-gz": gzipped(VCRPY_YAML, "c.yaml.gz"),
    "json-gz": gzipped(VCRPY_JSON, "c.json.gz"),
    "pydantic-ai-gz": gzipped(PYDANTIC_AI, "c.yaml.gz"),
    "gzip-named-yml": gzipped(VCRPY_YAML, "c.yml"),  # compressed, yet not named so
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_each_variant_converts_byte_exact_and_is_named(tmp_path: Path, variant: str) -> None:
    name, build, source_format, want = VARIANTS[variant]
    src, dst = tmp_path / name, tmp_path / "out.msgpack"
    src.write_bytes(build())
    read = convert(src, dst)
    assert read.source_format == source_format
    assert held(read.interactions) == want
    assert held(replay.Cassette.load(dst).interactions) == want


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_command_names_the_variant_it_read(tmp_path: Path, variant: str) -> None:
    name, build, source_format, want = VARIANTS[variant]
    src, dst = tmp_path / name, tmp_path / "out.msgpack"
    src.write_bytes(build())
    result = run_replay("convert", str(src), str(dst))
    assert result.returncode == 0, result.stderr
    count = f"{len(want)} interactions"
    assert result.stderr == f"{src} -> {dst}: {count}, read {source_format}\n"
    assert held(replay.Cassette.load(dst).interactions) == want


def test_pydantic_ai_bodies_are_literal_text_and_parsed_json() -> None:
    """The synthetic cassette really has the two forms pydantic-ai writes."""
    text = pydantic_ai_text()
    assert "string: |" in text
    assert text.count("parsed_body:") == 4  # three requests and the HTTP 400
    assert text.count(" body:") == 2  # the two streams


def test_a_gzip_body_stays_gzip_bytes_and_plays_decoded(tmp_path: Path) -> None:
    (tmp_path / "c.yaml.gz").write_bytes(VARIANTS["yaml-gz"][1]())
    convert(tmp_path / "c.yaml.gz", tmp_path / "c.msgpack")
    gzipped = replay.Cassette.load(tmp_path / "c.msgpack").interactions[2]
    assert gzipped.response.body == GZIPPED
    assert gzipped.response.header("content-encoding") == "gzip"


@pytest.mark.parametrize("suffix", [".yaml.gz", ".json.gz", ".yml"])
def test_a_cassette_written_compressed_reads_back_the_same(tmp_path: Path, suffix: str) -> None:
    (tmp_path / "a.yaml").write_bytes(VCRPY_YAML[1]())
    convert(tmp_path / "a.yaml", tmp_path / "a.msgpack")
    convert(tmp_path / "a.msgpack", tmp_path / f"b{suffix}")
    back = convert(tmp_path / f"b{suffix}", tmp_path / "c.msgpack")
    assert held(back.interactions) == expected(binary=True)
    if suffix.endswith(".gz"):
        assert (tmp_path / f"b{suffix}").read_bytes().startswith(b"\x1f\x8b")
        assert back.source_format.startswith("gzip-compressed ")


# -- refusals: one line, naming why -----------------------------------------------------------

BAD_CRC = gzip.compress(b"{}", mtime=0)[:-8] + bytes(4) + gzip.compress(b"{}")[-4:]
UNREADABLE = {
    "gz-not-gzip": ("c.yaml.gz", b"interactions: []\n", "named .gz, but not gzip-compressed"),
    "truncated-gzip": ("c.yaml.gz", gzip.compress(b"x" * 1000)[:-12], "ends too early"),
    "damaged-gzip": ("c.json.gz", BAD_CRC, "damaged gzip data (CRC check failed"),
    "ruby-vcr": ("c.yml", b"http_interactions: []\nrecorded_with: VCR 6\n", "Ruby VCR or Betamax"),
    "vcrpy-0": ("c.yaml", b"- request: {}\n  response: {}\n", "`python -m vcr.migration`"),
    "parsed-date": (
        "c.yaml",
        b"interactions:\n- request: {method: GET, uri: 'http://x/', headers: {}, "
        b"parsed_body: 2024-01-02}\n  response: {status: {code: 200}, headers: {}, "
        b"body: {string: ''}}\nversion: 1\n",
        "interactions[0].request.parsed_body: not JSON",
    ),
    "unknown-field": (
        "c.yaml",
        b"interactions:\n- request: {method: GET, uri: 'http://x/', headers: {}, body: '', "
        b"form: 1}\n  response: {status: {code: 200}, headers: {}, body: {string: ''}}\n",
        "interactions[0]: request: unknown field 'form'",
    ),
    "other-json": ("c.json", b'{"log": {"entries": []}}', "neither a replay JSON export"),
    "gz-msgpack": ("c.msgpack.gz", gzip.compress(b"\x80"), "from its suffix '.msgpack.gz'"),
    "bare-gz": ("c.gz", gzip.compress(b"\x80"), "from its suffix '.gz'"),
}


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_what_cannot_be_read_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    name, content, why = UNREADABLE[case]
    (tmp_path / name).write_bytes(content)
    result = run_replay("convert", str(tmp_path / name), str(tmp_path / "out.msgpack"))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("replay: error: ")
    assert why in result.stderr
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "out.msgpack").exists()


def test_a_gzip_bomb_is_refused_before_it_inflates(tmp_path: Path) -> None:
    compressor = zlib.compressobj(wbits=31)
    bomb = b"".join(compressor.compress(bytes(2**20)) for _ in range(4)) + compressor.flush()
    (tmp_path / "bomb.yaml.gz").write_bytes(bomb)
    assert len(bomb) < 2**20 // 8
    with pytest.raises(replay.CassetteFormatError, match=r"inflates past 1,000,000 bytes"):
        read_cassette(tmp_path / "bomb.yaml.gz", max_inflated_bytes=1_000_000)
