"""Specification of `replay.store.file`: the cassette file format, version 1.

A cassette saved and loaded again is the same cassette, byte for byte in its bodies. Any file
that is not a complete, well-formed cassette of a version this replay reads — empty,
truncated anywhere, garbage, the wrong shape in any one field, newer, followed by stray
bytes — fails with one `CassetteFormatError` naming the file and the problem, and nothing
else. Saving is atomic even under SIGKILL, and `file_lock` serialises writers across
processes. The golden file `tests/golden/v1.msgpack` pins the format byte for byte.
"""

from __future__ import annotations

import math
import os
import random
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import replay
from replay import Cassette, CassetteFormatError, Chunk, Interaction, Request, Response, StreamEnd
from replay.store.file import (
    FORMAT_NAME,
    FORMAT_VERSION,
    dumps,
    file_lock,
    load_interactions,
    save_interactions,
)
from replay.store.load import LoadError, read_interactions, read_mapped
from replay.store.spool import SpooledPayloads

GOLDEN = Path(__file__).parent / "golden"


# --- sample interactions -------------------------------------------------------------------


def sse_interaction(marker: str = "1") -> Interaction:
    return Interaction(
        Request(
            method="POST",
            url=f"https://api.example.com/v1/responses?marker={marker}",
            headers=[("Content-Type", "application/json"), ("Accept", "text/event-stream")],
            body=b'{"stream":true}',
        ),
        Response(
            status=200,
            headers=[("content-type", "text/event-stream")],
            headers_at=0.1,
            chunks=[Chunk(0.2, b"data: one\n\n"), Chunk(0.35, b"data: two\n\n")],
            end=StreamEnd(at=0.4),
        ),
    )


ROUND_TRIPS = {
    "empty cassette": [],
    "sse stream with timing": [sse_interaction()],
    "non-utf8 bytes everywhere": [
        Interaction(
            Request(method="PUT", url="http://h/x", body=b"\xff\x00\xc3("),
            Response(status=200, chunks=[Chunk(0.0, b"\x80\x81"), Chunk(0.0, b"\xc3")]),
        )
    ],
    "duplicate headers kept in order": [
        Interaction(
            Request(method="GET", url="http://h/", headers=[("X-A", "1"), ("x-a", "2"), ("B", "")]),
            Response(
                status=200,
                headers=[("Set-Cookie", "b=2"), ("Date", "x"), ("set-cookie", "a=1")],
            ),
        )
    ],
    "latin-1 header text": [
        Interaction(
            Request(method="GET", url="http://h/", headers=[("X-Name", "caf\xe9")]),
            Response(status=200),
        )
    ],
    "error end": [
        Interaction(
            Request(method="GET", url="http://h/"),
            Response(
                status=200,
                chunks=[Chunk(1.0, b"data: partial")],
                end=StreamEnd(at=2.5, error="RemoteProtocolError", message="peer closed"),
            ),
        )
    ],
    "timeout end": [
        Interaction(
            Request(method="GET", url="http://h/"),
            Response(status=200, end=StreamEnd(at=30.0, error="ReadTimeout", message="")),
        )
    ],
    "truncated end": [
        Interaction(
            Request(method="GET", url="http://h/"),
            Response(status=200, chunks=[Chunk(0.5, b"x")], end=StreamEnd(at=0.6, truncated=True)),
        )
    ],
    "empty body, error status": [
        Interaction(
            Request(method="GET", url="http://h/missing"),
            Response(status=404, headers_at=0.25),
        )
    ],
    "integer times": [
        Interaction(
            Request(method="GET", url="http://h/"),
            Response(status=204, headers_at=1, chunks=[Chunk(2, b"")], end=StreamEnd(at=3)),
        )
    ],
    "identical requests": [sse_interaction("same"), sse_interaction("same")],
}


@pytest.mark.parametrize("interactions", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_save_then_load_gives_equal_interactions(
    cassette_path: Path, interactions: list[Interaction]
) -> None:
    save_interactions(cassette_path, interactions)
    assert load_interactions(cassette_path) == interactions


@pytest.mark.parametrize("interactions", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_dumps_of_loaded_interactions_is_stable(
    cassette_path: Path, interactions: list[Interaction]
) -> None:
    save_interactions(cassette_path, interactions)
    assert dumps(load_interactions(cassette_path)) == cassette_path.read_bytes()


def test_the_file_written_a_piece_at_a_time_is_what_packb_makes_of_it_whole(
    cassette_path: Path,
) -> None:
    # Payloads of each bin header's size and either side of the sizes written straight from
    # their bytes, and enough small ones to flush the packer's buffer midway.
    sizes = [0, 1, 255, 256, 65535, 65536, 70000, *[3000] * 400, 2**20]
    chunks = [Chunk(i / 1000, bytes([i % 256]) * size) for i, size in enumerate(sizes)]
    request = Request(method="POST", url="http://h/up", body=b"b" * 100_000)
    interactions = [
        Interaction(request, Response(status=200, chunks=chunks)),
        *ROUND_TRIPS["error end"],
        sse_interaction(),
    ]
    save_interactions(cassette_path, interactions)
    written = cassette_path.read_bytes()
    assert msgpack.packb(msgpack.unpackb(written), use_bin_type=True) == written
    assert dumps(interactions) == written
    assert load_interactions(cassette_path) == interactions


def test_cassette_save_and_load_round_trip(cassette_path: Path) -> None:
    Cassette([sse_interaction("a"), sse_interaction("b")]).save(cassette_path)
    loaded = Cassette.load(cassette_path)
    assert loaded.interactions == [sse_interaction("a"), sse_interaction("b")]
    assert loaded.path == cassette_path


def test_bytes_are_msgpack_bin_and_text_is_msgpack_str(cassette_path: Path) -> None:
    # raw=False maps msgpack bin to bytes and msgpack str to str, so the types tell which
    # msgpack type was written (raw=True would show both as bytes).
    save_interactions(cassette_path, [sse_interaction()])
    document = msgpack.unpackb(cassette_path.read_bytes(), raw=False)
    request = document["interactions"][0]["request"]
    response = document["interactions"][0]["response"]
    assert type(request["body"]) is bytes
    assert [type(data) for data in response["chunks"]["data"]] == [bytes, bytes]
    assert type(request["method"]) is str
    assert type(request["url"]) is str


def test_chunks_are_written_as_two_columns(cassette_path: Path) -> None:
    save_interactions(cassette_path, [sse_interaction()])
    response = msgpack.unpackb(cassette_path.read_bytes(), raw=False)["interactions"][0]["response"]
    assert list(response["chunks"]) == ["at", "data"]
    assert response["chunks"] == {"at": [0.2, 0.35], "data": [b"data: one\n\n", b"data: two\n\n"]}


def test_empty_body_is_two_empty_columns(cassette_path: Path) -> None:
    save_interactions(cassette_path, ROUND_TRIPS["empty body, error status"])
    response = msgpack.unpackb(cassette_path.read_bytes(), raw=False)["interactions"][0]["response"]
    assert response["chunks"] == {"at": [], "data": []}


def test_header_pairs_are_ordered_two_item_lists(cassette_path: Path) -> None:
    save_interactions(cassette_path, ROUND_TRIPS["duplicate headers kept in order"])
    document = msgpack.unpackb(cassette_path.read_bytes(), raw=False)
    interaction = document["interactions"][0]
    assert interaction["request"]["headers"] == [["X-A", "1"], ["x-a", "2"], ["B", ""]]
    assert interaction["response"]["headers"] == [
        ["Set-Cookie", "b=2"],
        ["Date", "x"],
        ["set-cookie", "a=1"],
    ]


def test_document_opens_with_format_name_and_version(cassette_path: Path) -> None:
    save_interactions(cassette_path, [])
    document = msgpack.unpackb(cassette_path.read_bytes(), raw=False)
    assert list(document) == ["format", "version", "interactions"]
    assert document == {"format": FORMAT_NAME, "version": FORMAT_VERSION, "interactions": []}


def test_times_are_written_as_float64(cassette_path: Path) -> None:
    save_interactions(cassette_path, ROUND_TRIPS["integer times"])
    response = msgpack.unpackb(cassette_path.read_bytes(), raw=False)["interactions"][0]["response"]
    assert [type(response["headers_at"]), type(response["chunks"]["at"][0])] == [float, float]
    assert b"\xcb" in cassette_path.read_bytes()  # msgpack float 64 marker


def test_unknown_keys_are_ignored_by_readers(cassette_path: Path) -> None:
    document = valid_document()
    document["written_by"] = "a later replay"
    document["interactions"][0]["response"]["trailers"] = []
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(msgpack.packb(document, use_bin_type=True))
    assert load_interactions(cassette_path) == [sse_interaction()]


@pytest.mark.parametrize("padding", [0, 100_000], ids=["small file", "large file"])
def test_keys_written_as_str_8_are_read(cassette_path: Path, padding: int) -> None:
    # A writer may encode a short string in a longer format (str 8): the key is the same,
    # for a file built whole as for one walked.
    document = valid_document()
    document["padding"] = b"x" * padding
    packed = msgpack.packb(document, use_bin_type=True)
    for key in ("format", "version", "interactions", "request", "response", "chunks"):
        packed = packed.replace(msgpack.packb(key), b"\xd9" + bytes([len(key)]) + key.encode())
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(packed)
    assert load_interactions(cassette_path) == [sse_interaction()]


def test_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        Cassette.load(tmp_path / "nowhere.msgpack")


# --- unreadable files: one CassetteFormatError, naming the file and the problem -----------


def assert_format_error(path: Path, *fragments: str) -> CassetteFormatError:
    """Load `path`; it must fail with CassetteFormatError naming the path and each fragment."""
    with pytest.raises(CassetteFormatError) as caught:
        Cassette.load(path)
    error = caught.value
    assert isinstance(error, ValueError)
    assert isinstance(error, replay.ReplayError)
    assert error.path == path
    message = str(error)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message
    return error


def small_cassette_bytes() -> bytes:
    return dumps([ROUND_TRIPS["error end"][0], sse_interaction()])


def test_empty_file_is_a_format_error(cassette_path: Path) -> None:
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(b"")
    assert_format_error(cassette_path, "empty")


def test_file_cut_at_any_byte_is_a_format_error_saying_truncated(cassette_path: Path) -> None:
    data = small_cassette_bytes()
    cassette_path.parent.mkdir(parents=True)
    for cut in range(1, len(data)):
        cassette_path.write_bytes(data[:cut])
        assert_format_error(cassette_path, "truncated")


def test_large_file_cut_is_a_format_error(cassette_path: Path) -> None:
    big = Response(status=200, chunks=[Chunk(i / 1000, b"data: %d\n\n" % i) for i in range(5000)])
    data = dumps([Interaction(Request(method="GET", url="http://h/"), big)])
    cassette_path.parent.mkdir(parents=True)
    for cut in random.Random(7).sample(range(1, len(data)), 100):
        cassette_path.write_bytes(data[:cut])
        assert_format_error(cassette_path, "truncated")


def test_trailing_bytes_are_a_format_error(cassette_path: Path) -> None:
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(small_cassette_bytes() + b"\x00")
    assert_format_error(cassette_path, "unexpected bytes after")


def test_two_concatenated_cassettes_are_a_format_error(cassette_path: Path) -> None:
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(small_cassette_bytes() * 2)
    assert_format_error(cassette_path, "unexpected bytes after")


GARBAGE = {
    "text file": (b"interactions:\n- request: {}\n", "does not start with a msgpack map"),
    "json": (b'{"format": "replay-cassette"}', "does not start with a msgpack map"),
    "reserved byte 0xc1": (b"\xc1", "does not start with a msgpack map"),
    "map then reserved byte": (b"\x81\xc1", "not a msgpack document"),
    "invalid utf-8 str": (b"\x81\xa2\xff\xfe\x01", "UTF-8"),
    "deep nesting": (b"\x81\x00" + b"\x91" * 100_000, "nested too deeply"),
    "huge map header": (b"\xdf\xff\xff\xff\xff", "truncated"),
    "huge bin header": (b"\x81\x00\xc6\xff\xff\xff\xff", "truncated"),
    "nul bytes": (b"\x00" * 64, "does not start with a msgpack map"),
    "gzip of a cassette": (b"\x1f\x8b\x08\x00" + bytes(20), "does not start with a msgpack map"),
    "map with list key": (b"\x81\x91\x01\x02", "no 'format' field"),  # an unknown key
    "map then stray bytes": (b"\x80\x00", "unexpected bytes after"),
    "timestamp ext": (b"\xd6\xff\x00\x00\x00\x01", "expected dict, found Timestamp"),
    "ext type": (b"\xc7\x01\x05a", "expected dict, found ExtType"),
}


@pytest.mark.parametrize(("data", "fragment"), GARBAGE.values(), ids=GARBAGE.keys())
def test_garbage_is_a_format_error(cassette_path: Path, data: bytes, fragment: str) -> None:
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(data)
    assert_format_error(cassette_path, fragment)


def outcome(read: Any, *args: Any) -> object:
    """What `read(*args)` gives: the interactions, or the LoadError's message."""
    try:
        return read(*args)
    except LoadError as error:
        return f"LoadError: {error}"


def mapped_documents() -> dict[str, bytes]:
    big = Response(status=200, chunks=[Chunk(i / 1000, b"data: %d\n\n" % i) for i in range(5000)])
    long = dumps([Interaction(Request(method="GET", url="http://h/"), big), sse_interaction()])
    documents = {f"saved: {name}": dumps(value) for name, value in ROUND_TRIPS.items()}
    documents |= {f"garbage: {name}": data for name, (data, _) in GARBAGE.items()}
    cuts = random.Random(7).sample(range(1, len(long)), 30)
    documents |= {f"cut at {cut}": long[:cut] for cut in cuts}
    documents["trailing bytes"] = long + b"\x00"
    documents["long"] = long  # past `_load._PROBE_MAX`: walked
    assert len(long) > 64 * 1024
    # Long payloads: left in the file when it is mapped (`_walk.Walker.places`).
    chunks = [Chunk(i / 1000, bytes([i]) * 4000) for i in range(40)]
    payloads = dumps(
        [Interaction(Request(method="GET", url="http://h/"), Response(status=200, chunks=chunks))]
    )
    documents["long payloads"] = payloads
    documents["long payloads, in bin 32"] = payloads.replace(b"\xc5\x0f\xa0", b"\xc6\0\0\x0f\xa0")
    cuts = random.Random(8).sample(range(1, len(payloads)), 30)
    documents |= {f"long payloads cut at {cut}": payloads[:cut] for cut in cuts}
    document = msgpack.unpackb(payloads)
    document["interactions"][0]["response"]["chunks"]["data"][30] = "x" * 4000
    documents["long payloads, one a str"] = msgpack.packb(document, use_bin_type=True)
    return documents


def test_a_file_read_mapped_loads_as_it_does_read_into_memory(tmp_path: Path) -> None:
    # (Files past `MAPPED_FROM` are mapped: these small ones are mapped here by hand.)
    path = tmp_path / "c.msgpack"
    for name, data in mapped_documents().items():
        path.write_bytes(data)
        with path.open("rb") as file:
            mapped = outcome(read_mapped, file.fileno())
        assert mapped == outcome(read_interactions, data), name


def test_long_payloads_of_a_mapped_file_are_left_in_it_and_read_when_asked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.msgpack"
    path.write_bytes(mapped_documents()["long payloads"])
    with path.open("rb") as file:
        [interaction] = read_mapped(file.fileno())
    path.unlink()  # (read from the descriptor kept: as when a save replaces the file)
    payloads = interaction.response.chunks.payloads
    assert isinstance(payloads, SpooledPayloads)
    assert list(payloads) == [bytes([i]) * 4000 for i in range(40)]


@pytest.mark.parametrize("how", ["written over", "truncated"])
def test_a_mapped_file_written_over_in_place_is_refused_not_read_as_other_bytes(
    tmp_path: Path, how: str
) -> None:
    # It played the new file's bytes at the old offsets (garbage, with no error), or raised
    # a bare OSError past its end.
    path = tmp_path / "c.msgpack"
    path.write_bytes(mapped_documents()["long payloads"])
    with path.open("rb") as file:
        [interaction] = read_mapped(file.fileno())
    other = mapped_documents()["long payloads"].replace(b"\x05" * 4000, b"\x06" * 4000)
    if how == "written over":
        with path.open("r+b") as file:  # as `cp` onto it does: the same file, other bytes
            file.write(other)
    else:
        with path.open("r+b") as file:
            file.truncate(100)
    with pytest.raises(CassetteFormatError, match="written over in place while it was in use"):
        list(interaction.response.chunks.payloads)


def valid_document() -> Any:
    """A valid cassette document as plain msgpack data (a fresh copy each call)."""
    return msgpack.unpackb(dumps([sse_interaction()]), raw=False)


DELETE = object()
NAN = float("nan")

# (path into the document, replacement or DELETE, fragments the message must contain)
CORRUPTIONS: dict[str, tuple[tuple[Any, ...], Any, tuple[str, ...]]] = {
    "top level list": ((), [], ("document: expected dict, found list",)),
    "top level str": ((), "replay-cassette", ("document: expected dict, found str",)),
    "missing format": (("format",), DELETE, ("no 'format' field",)),
    "wrong format name": (("format",), "vcrpy", ("not a replay cassette", "'vcrpy'")),
    "format as bytes": (("format",), b"replay-cassette", ("not a replay cassette",)),
    "missing version": (("version",), DELETE, ("missing field 'version'",)),
    "version as str": (("version",), "1", ("document.version: expected int, found str",)),
    "version as bool": (("version",), True, ("document.version", "boolean")),
    "version as float": (("version",), 1.0, ("document.version: expected int",)),
    "version 0": (("version",), 0, ("unknown format version 0",)),
    "missing interactions": (("interactions",), DELETE, ("missing field 'interactions'",)),
    "interactions as map": (("interactions",), {}, ("expected list, found dict",)),
    "interaction as list": (("interactions", 0), [], ("interactions[0]: expected dict",)),
    "missing request": (("interactions", 0, "request"), DELETE, ("missing field 'request'",)),
    "request as nil": (("interactions", 0, "request"), None, ("interactions[0].request",)),
    "missing method": (
        ("interactions", 0, "request", "method"),
        DELETE,
        ("interactions[0].request: missing field 'method'",),
    ),
    "method as int": (
        ("interactions", 0, "request", "method"),
        1,
        ("interactions[0].request.method: expected str, found int",),
    ),
    "url as bytes": (
        ("interactions", 0, "request", "url"),
        b"http://h/",
        ("request.url: expected str, found bytes",),
    ),
    "request body as str": (
        ("interactions", 0, "request", "body"),
        "{}",
        ("request.body: expected bytes, found str",),
    ),
    "request headers as map": (
        ("interactions", 0, "request", "headers"),
        {"a": "b"},
        ("request.headers: expected list, found dict",),
    ),
    "header not a pair": (
        ("interactions", 0, "request", "headers", 0),
        ["Content-Type"],
        ("request.headers[0]: expected a [name, value] pair",),
    ),
    "header triple": (
        ("interactions", 0, "request", "headers", 0),
        ["a", "b", "c"],
        ("request.headers[0]: expected a [name, value] pair",),
    ),
    "header as str": (
        ("interactions", 0, "request", "headers", 0),
        "a: b",
        ("request.headers[0]: expected list, found str",),
    ),
    "header value as int": (
        ("interactions", 0, "request", "headers", 1, 1),
        5,
        ("request.headers[1][1]: expected str, found int",),
    ),
    "header name as bytes": (
        ("interactions", 0, "response", "headers", 0, 0),
        b"content-type",
        ("response.headers[0][0]: expected str, found bytes",),
    ),
    "header not latin-1": (
        ("interactions", 0, "response", "headers", 0, 1),
        "text/€",
        ("interactions[0]", "latin-1"),
    ),
    "missing response": (("interactions", 0, "response"), DELETE, ("missing field 'response'",)),
    "missing status": (
        ("interactions", 0, "response", "status"),
        DELETE,
        ("response: missing field 'status'",),
    ),
    "status as str": (
        ("interactions", 0, "response", "status"),
        "200",
        ("response.status: expected int, found str",),
    ),
    "status as float": (
        ("interactions", 0, "response", "status"),
        200.0,
        ("response.status: expected int, found float",),
    ),
    "status as bool": (("interactions", 0, "response", "status"), True, ("boolean",)),
    "status 700": (("interactions", 0, "response", "status"), 700, ("status must be 100-599",)),
    "status 99": (("interactions", 0, "response", "status"), 99, ("status must be 100-599",)),
    "status 2**64-1": (
        ("interactions", 0, "response", "status"),
        2**64 - 1,
        ("status must be 100-599",),
    ),
    "headers_at negative": (
        ("interactions", 0, "response", "headers_at"),
        -0.5,
        ("response.headers_at: must be a finite, non-negative number",),
    ),
    "headers_at NaN": (("interactions", 0, "response", "headers_at"), NAN, ("headers_at",)),
    "headers_at infinite": (
        ("interactions", 0, "response", "headers_at"),
        math.inf,
        ("response.headers_at: must be a finite",),
    ),
    "headers_at as str": (
        ("interactions", 0, "response", "headers_at"),
        "0.1",
        ("response.headers_at: expected int or float, found str",),
    ),
    "chunks as bytes": (
        ("interactions", 0, "response", "chunks"),
        b"data: x\n\n",
        ("response.chunks: expected dict, found bytes",),
    ),
    "chunks as list of pairs": (  # the layout before columns: refused, not misread
        ("interactions", 0, "response", "chunks"),
        [[0.2, b"data: one\n\n"], [0.35, b"data: two\n\n"]],
        ("response.chunks: expected dict, found list",),
    ),
    "missing chunk times": (
        ("interactions", 0, "response", "chunks", "at"),
        DELETE,
        ("response.chunks: missing field 'at'",),
    ),
    "missing chunk data": (
        ("interactions", 0, "response", "chunks", "data"),
        DELETE,
        ("response.chunks: missing field 'data'",),
    ),
    "chunk times as map": (
        ("interactions", 0, "response", "chunks", "at"),
        {"0": 0.2},
        ("response.chunks.at: expected list, found dict",),
    ),
    "chunk data as bytes": (
        ("interactions", 0, "response", "chunks", "data"),
        b"data: one\n\ndata: two\n\n",
        ("response.chunks.data: expected list, found bytes",),
    ),
    "one time too many": (
        ("interactions", 0, "response", "chunks", "at"),
        [0.2, 0.35, 0.4],
        ("response.chunks: the columns differ in length", "3 in 'at', 2 in 'data'"),
    ),
    "one payload too few": (
        ("interactions", 0, "response", "chunks", "data"),
        [b"data: one\n\n"],
        ("response.chunks: the columns differ in length", "2 in 'at', 1 in 'data'"),
    ),
    "chunk at as str": (
        ("interactions", 0, "response", "chunks", "at", 0),
        "0.2",
        ("response.chunks: chunk 0: at must be a number of seconds, not str",),
    ),
    "chunk at as nil": (
        ("interactions", 0, "response", "chunks", "at", 0),
        None,
        ("response.chunks: chunk 0: at must be a number of seconds, not NoneType",),
    ),
    "chunk at as bool": (
        ("interactions", 0, "response", "chunks", "at", 1),
        False,
        ("response.chunks: chunk 1: at must be a number of seconds, not bool",),
    ),
    "chunk at as pair": (
        ("interactions", 0, "response", "chunks", "at", 1),
        [0.35, b"data: two\n\n"],
        ("chunk 1: at must be a number of seconds, not list of length 2",),
    ),
    "chunk at negative": (
        ("interactions", 0, "response", "chunks", "at", 0),
        -1.0,
        ("response.chunks[0].at: must be a finite, non-negative number of seconds, not -1.0",),
    ),
    "chunk at NaN": (
        ("interactions", 0, "response", "chunks", "at", 0),
        NAN,
        ("response.chunks[0].at: must be a finite, non-negative number of seconds, not nan",),
    ),
    "last chunk at NaN": (
        ("interactions", 0, "response", "chunks", "at", 1),
        NAN,
        ("response.chunks[1].at: must be a finite, non-negative number of seconds, not nan",),
    ),
    "last chunk at infinite": (
        ("interactions", 0, "response", "chunks", "at", 1),
        math.inf,
        ("response.chunks[1].at: must be a finite, non-negative number of seconds, not inf",),
    ),
    "chunk data as str": (
        ("interactions", 0, "response", "chunks", "data", 1),
        "data: two\n\n",
        ("response.chunks: chunk 1: data must be bytes, not str",),
    ),
    "chunk data as nil": (
        ("interactions", 0, "response", "chunks", "data", 0),
        None,
        ("response.chunks: chunk 0: data must be bytes, not NoneType",),
    ),
    "chunks out of order": (
        ("interactions", 0, "response", "chunks", "at", 1),
        0.15,
        ("response.chunks: chunk 1 arrives at 0.15 s, before chunk 0 (0.2 s)",),
    ),
    "chunk before headers": (
        ("interactions", 0, "response", "chunks", "at", 0),
        0.05,
        ("interactions[0]: chunk 0 arrives at 0.05 s, before the headers (0.1 s)",),
    ),
    "missing end": (("interactions", 0, "response", "end"), DELETE, ("missing field 'end'",)),
    "end as list": (
        ("interactions", 0, "response", "end"),
        [0.4, None, "", False],
        ("response.end: expected dict, found list",),
    ),
    "missing end at": (
        ("interactions", 0, "response", "end", "at"),
        DELETE,
        ("response.end: missing field 'at'",),
    ),
    "end at negative": (("interactions", 0, "response", "end", "at"), -1, ("end.at: must be",)),
    "end before last chunk": (
        ("interactions", 0, "response", "end", "at"),
        0.3,
        ("the body ends at 0.3 s, before its last byte",),
    ),
    "missing end error": (
        ("interactions", 0, "response", "end", "error"),
        DELETE,
        ("response.end: missing field 'error'",),
    ),
    "end error as int": (
        ("interactions", 0, "response", "end", "error"),
        1,
        ("response.end.error: expected str or NoneType, found int",),
    ),
    "end message as bytes": (
        ("interactions", 0, "response", "end", "message"),
        b"peer closed",
        ("response.end.message: expected str, found bytes",),
    ),
    "missing end message": (
        ("interactions", 0, "response", "end", "message"),
        DELETE,
        ("missing field 'message'",),
    ),
    "end truncated as int": (
        ("interactions", 0, "response", "end", "truncated"),
        1,
        ("response.end.truncated: expected bool, found int",),
    ),
    "missing end truncated": (
        ("interactions", 0, "response", "end", "truncated"),
        DELETE,
        ("missing field 'truncated'",),
    ),
}


def corrupt(document: Any, path: tuple[Any, ...], replacement: Any) -> Any:
    """`document` with the value at `path` replaced (or deleted, for DELETE)."""
    if not path:
        return replacement
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    if replacement is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return document


@pytest.mark.parametrize(
    ("path", "replacement", "fragments"), CORRUPTIONS.values(), ids=CORRUPTIONS.keys()
)
def test_one_wrong_field_is_a_format_error_naming_it(
    cassette_path: Path, path: tuple[Any, ...], replacement: Any, fragments: tuple[str, ...]
) -> None:
    document = corrupt(valid_document(), path, replacement)
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(msgpack.packb(document, use_bin_type=True))
    assert_format_error(cassette_path, *fragments)


SECRETS = {
    "chunk data as str": (("interactions", 0, "response", "chunks", "data", 1), "sk-secret"),
    "request body as str": (("interactions", 0, "request", "body"), "sk-secret"),
    "header value as bytes": (("interactions", 0, "request", "headers", 0, 1), b"sk-secret"),
}


@pytest.mark.parametrize(("path", "secret"), SECRETS.values(), ids=SECRETS.keys())
def test_format_errors_never_echo_a_secret(
    cassette_path: Path, path: tuple[Any, ...], secret: str | bytes
) -> None:
    document = corrupt(valid_document(), path, secret)
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(msgpack.packb(document, use_bin_type=True))
    error = assert_format_error(cassette_path, type(secret).__name__)
    assert "sk-secret" not in str(error)


def test_error_in_a_later_interaction_names_its_index(cassette_path: Path) -> None:
    document = msgpack.unpackb(dumps([sse_interaction()] * 3), raw=False)
    document["interactions"][2]["response"]["status"] = "ok"
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(msgpack.packb(document, use_bin_type=True))
    assert_format_error(cassette_path, "interactions[2].response.status")


def test_newer_version_asks_to_upgrade(cassette_path: Path) -> None:
    document = valid_document()
    document["version"] = 99
    document["interactions"] = "a layout this reader knows nothing about"
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(msgpack.packb(document, use_bin_type=True))
    error = assert_format_error(cassette_path, "version 99", "upgrade")
    assert error.problem.startswith("format version 99 is newer")


def test_format_error_chains_the_cause(cassette_path: Path) -> None:
    cassette_path.parent.mkdir(parents=True)
    cassette_path.write_bytes(small_cassette_bytes()[:-3])
    error = assert_format_error(cassette_path)
    assert error.__cause__ is not None


# --- fuzzing: anything either loads or raises CassetteFormatError -------------------------

msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
            | st.integers(-(2**63), 2**63 - 1),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)

FIELD_NAMES = [
    "format",
    "version",
    "interactions",
    "request",
    "response",
    "chunks",
    "at",
    "data",
    "end",
]


def all_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    paths = [prefix]
    if isinstance(value, (dict, list)):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            paths.extend(all_paths(child, (*prefix, key)))
    return paths


@st.composite
def damaged_documents(draw: st.DrawFn) -> Any:
    """A valid document with one value anywhere replaced by an arbitrary one, or deleted."""
    document = valid_document()
    path = draw(st.sampled_from(all_paths(document)))
    replacement = draw(msgpack_values | st.just(DELETE) if path else msgpack_values)
    return corrupt(document, path, replacement)


def load_or_format_error(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    problem = None
    try:
        Cassette.load(path)
    except CassetteFormatError as error:
        problem = str(error)
    assert problem is None or str(path) in problem


FUZZ = settings(
    max_examples=150,
    deadline=None,
    # Generating values is not under test: a busy machine must not fail it for being slow.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_load_or_raise_format_error(tmp_path: Path, data: bytes) -> None:
    load_or_format_error(tmp_path / "fuzz.msgpack", data)


@FUZZ
@given(value=msgpack_values | st.dictionaries(st.sampled_from(FIELD_NAMES), msgpack_values))
def test_arbitrary_msgpack_values_load_or_raise_format_error(tmp_path: Path, value: Any) -> None:
    load_or_format_error(tmp_path / "fuzz.msgpack", msgpack.packb(value, use_bin_type=True))


@FUZZ
@given(document=damaged_documents())
def test_damaged_documents_load_or_raise_format_error(tmp_path: Path, document: Any) -> None:
    load_or_format_error(tmp_path / "fuzz.msgpack", msgpack.packb(document, use_bin_type=True))


@FUZZ
@given(data=st.data())
def test_bit_flipped_cassettes_load_or_raise_format_error(
    tmp_path: Path, data: st.DataObject
) -> None:
    damaged = bytearray(small_cassette_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        damaged[data.draw(st.integers(0, len(damaged) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    load_or_format_error(tmp_path / "fuzz.msgpack", bytes(damaged))


def _many(value: bytes) -> st.SearchStrategy[bytes]:
    """A list of many copies of a small msgpack `value` (one byte per empty map...)."""
    return st.integers(1_000, 30_000).map(lambda n: b"\xdd" + n.to_bytes(4, "big") + value * n)


# Raw msgpack that asks much of a reader: deep nesting, lengths declared far past the end of
# the file, and lists of many tiny values, each a much larger object once built.
HOSTILE_VALUES = st.one_of(
    st.integers(100, 5_000).map(lambda depth: b"\x91" * depth + b"\xc0"),
    st.integers(100, 5_000).map(lambda depth: b"\x81\xc0" * depth + b"\xc0"),
    st.sampled_from([b"\xdd", b"\xdf", b"\xc6", b"\xdb", b"\xc9"]).flatmap(  # 32-bit lengths
        lambda head: st.integers(2**16, 2**32 - 1).map(lambda n: head + n.to_bytes(4, "big"))
    ),
    st.sampled_from([b"\x80", b"\x90", b"\xc0", b"\xa2ab", b"\xd0\x80", b"\x92\xa0\xa0"]).flatmap(
        _many
    ),
)
MARKER = msgpack.ExtType(99, b"marker")


@st.composite
def amplified_documents(draw: st.DrawFn) -> bytes:
    """A valid document with one value anywhere (the document itself too) replaced by raw
    hostile msgpack."""
    path = draw(st.sampled_from(all_paths(valid_document())))
    packed = msgpack.packb(corrupt(valid_document(), path, MARKER), use_bin_type=True)
    return packed.replace(msgpack.packb(MARKER), draw(HOSTILE_VALUES), 1)


@FUZZ
@given(data=amplified_documents())
def test_deep_or_amplified_documents_load_or_raise_format_error(
    tmp_path: Path, data: bytes
) -> None:
    load_or_format_error(tmp_path / "fuzz.msgpack", data)


# --- atomic save ---------------------------------------------------------------------------


def leftovers(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


def test_save_leaves_no_temporary_file(cassette_path: Path) -> None:
    save_interactions(cassette_path, [sse_interaction()])
    save_interactions(cassette_path, [sse_interaction()])
    assert leftovers(cassette_path) == []


def test_save_creates_missing_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "c.msgpack"
    save_interactions(path, [])
    assert load_interactions(path) == []


def test_save_replaces_an_existing_cassette(cassette_path: Path) -> None:
    save_interactions(cassette_path, [sse_interaction("old"), sse_interaction("old")])
    save_interactions(cassette_path, [sse_interaction("new")])
    assert load_interactions(cassette_path) == [sse_interaction("new")]


def test_new_cassette_gets_the_umask_default_permissions(cassette_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        save_interactions(cassette_path, [])
    finally:
        os.umask(umask)
    assert stat.S_IMODE(cassette_path.stat().st_mode) == 0o644


def test_save_keeps_the_permissions_of_the_replaced_cassette(cassette_path: Path) -> None:
    save_interactions(cassette_path, [])
    cassette_path.chmod(0o640)
    save_interactions(cassette_path, [sse_interaction()])
    assert stat.S_IMODE(cassette_path.stat().st_mode) == 0o640


def failing(*_args: object) -> None:
    raise OSError(28, "No space left on device", ".test.msgpack.0123456789ab.tmp")


@pytest.mark.parametrize("function", ["fsync", "replace"])
def test_failed_save_keeps_the_old_cassette_and_no_temporary(
    cassette_path: Path, monkeypatch: pytest.MonkeyPatch, function: str
) -> None:
    save_interactions(cassette_path, [sse_interaction("old")])
    before = cassette_path.read_bytes()
    monkeypatch.setattr(os, function, failing)
    with pytest.raises(replay.CassetteWriteError) as caught:
        save_interactions(cassette_path, [sse_interaction("new")] * 3)
    monkeypatch.undo()
    # The cassette and the cause, never the temporary file the OSError named.
    assert str(caught.value) == (
        f"cannot save cassette {str(cassette_path)!r}: No space left on device"
    )
    assert caught.value.errno == 28
    assert cassette_path.read_bytes() == before
    assert leftovers(cassette_path) == []


def test_unserialisable_interactions_leave_the_old_cassette(cassette_path: Path) -> None:
    save_interactions(cassette_path, [sse_interaction("old")])
    with pytest.raises(AttributeError):
        save_interactions(cassette_path, [object()])  # type: ignore[list-item]
    assert load_interactions(cassette_path) == [sse_interaction("old")]
    assert leftovers(cassette_path) == []


SAVER = textwrap.dedent(
    """
    import sys
    from replay.model import Chunk, Interaction, Request, Response
    from replay.store.file import save_interactions

    path, generation = sys.argv[1], int(sys.argv[2])
    chunks = [Chunk(i / 1000, b"data: %d %s\\n\\n" % (i, b"x" * 150)) for i in range(20_000)]

    def cassette(generation):
        count = 1 + generation % 2
        share = len(chunks) // count
        return [
            Interaction(
                Request(method="GET", url=f"http://h/?generation={generation}"),
                Response(status=200, chunks=chunks[i * share : (i + 1) * share]),
            )
            for i in range(count)
        ]

    print("ready", flush=True)
    while True:
        generation += 1
        save_interactions(path, cassette(generation))
    """
)


def big() -> Response:
    chunks = [Chunk(i / 1000, b"data: %d %s\n\n" % (i, b"x" * 150)) for i in range(20_000)]
    return Response(status=200, chunks=chunks)


def generation_of(path: Path) -> int:
    """Load `path` and check it is one whole generation the saver wrote; return its number."""
    interactions = Cassette.load(path).interactions
    generations = {interaction.request.url.rpartition("=")[2] for interaction in interactions}
    assert len(generations) == 1
    generation = int(generations.pop())
    assert len(interactions) == 1 + generation % 2
    assert sum(len(i.response.chunks) for i in interactions) == 20_000
    return generation


def test_sigkill_during_saves_leaves_the_old_or_the_new_cassette(cassette_path: Path) -> None:
    save_interactions(
        cassette_path, [Interaction(Request(method="GET", url="http://h/?generation=0"), big())]
    )
    generation = generation_of(cassette_path)
    rng = random.Random(2024)
    for _ in range(10):
        saver = subprocess.Popen(
            [sys.executable, "-c", SAVER, str(cassette_path), str(generation)],
            stdout=subprocess.PIPE,
        )
        try:
            assert saver.stdout is not None
            assert saver.stdout.readline() == b"ready\n"
            time.sleep(rng.uniform(0, 0.15))
        finally:
            saver.kill()
            saver.wait()
            assert saver.stdout is not None
            saver.stdout.close()
        assert saver.returncode == -9
        newer = generation_of(cassette_path)
        assert newer >= generation
        generation = newer
    assert generation > 0  # the saver did replace the cassette at least once


# --- file_lock -----------------------------------------------------------------------------


def test_file_lock_creates_the_directory_and_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "new" / "c.msgpack"
    with file_lock(path):
        assert (tmp_path / "new").is_dir()
    assert list((tmp_path / "new").iterdir()) == []


class Contender:
    """Another writer taking `file_lock(path)`, in a thread: the lock is taken on each
    opening of the directory, so a second one in this process waits as a process would."""

    def __init__(self, path: Path) -> None:
        self.acquired = threading.Event()
        self._thread = threading.Thread(target=self._take, args=(path,), daemon=True)
        self._thread.start()

    def _take(self, path: Path) -> None:
        with file_lock(path):
            self.acquired.set()

    def held_off(self) -> bool:
        """Whether it is still waiting half a second on (a no-op lock is taken at once)."""
        return not self.acquired.wait(0.5)

    def took_it(self) -> bool:
        """Whether it gets the lock now (it waits until it does, 30 s at most)."""
        taken = self.acquired.wait(30)
        self._thread.join(30)
        return taken


def test_file_lock_can_be_taken_again_after_release(cassette_path: Path) -> None:
    with file_lock(cassette_path):
        contender = Contender(cassette_path)
        assert contender.held_off()
    assert contender.took_it()
    with file_lock(cassette_path):
        again = Contender(cassette_path)
        assert again.held_off()
    assert again.took_it()


def raise_holding(path: Path, contenders: list[Contender]) -> None:
    """Raise inside `file_lock(path)`, once a contender is seen waiting on it."""
    with file_lock(path):
        contenders.append(Contender(path))
        assert contenders[0].held_off()
        raise RuntimeError("boom")


def test_file_lock_is_released_when_the_body_raises(cassette_path: Path) -> None:
    contenders: list[Contender] = []
    with pytest.raises(RuntimeError, match="boom"):
        raise_holding(cassette_path, contenders)
    assert contenders[0].took_it()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from replay.store.file import file_lock

    with file_lock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(0.4)
        print(time.time(), flush=True)
    """
)


def run_python(script: str, *args: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )


def test_file_lock_waits_for_the_other_process_to_release(cassette_path: Path) -> None:
    holder = run_python(HOLDER, cassette_path)
    assert holder.stdout is not None
    assert holder.stdout.readline() == b"locked\n"
    with file_lock(cassette_path):
        acquired = time.time()
    released = float(holder.stdout.readline())  # stamped just before the holder let go
    holder.communicate()
    assert acquired >= released


COUNTER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from replay.store.file import file_lock

    path = Path(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()  # both start together
    for _ in range(50):
        with file_lock(path):
            value = int(path.read_text())
            time.sleep(0.0005)  # widen the read-modify-write window
            path.write_text(str(value + 1))
    """
)


def test_file_lock_makes_read_modify_write_exclusive(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    workers = [run_python(COUNTER, counter) for _ in range(2)]
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline() == b"ready\n"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(b"go\n")
        worker.stdin.flush()
    for worker in workers:
        worker.communicate(timeout=30)
        assert worker.returncode == 0
    assert counter.read_text() == "100"


# --- the golden file of format version 1 ---------------------------------------------------

GOLDEN_V1 = [
    Interaction(
        Request(
            method="POST",
            url="https://api.example.com/v1/chat/completions",
            headers=[
                ("Host", "api.example.com"),
                ("Content-Type", "application/json"),
                ("Authorization", "REDACTED"),
                ("Accept", "text/event-stream"),
            ],
            body=b'{"model":"m","stream":true}',
        ),
        Response(
            status=200,
            headers=[
                ("content-type", "text/event-stream; charset=utf-8"),
                ("set-cookie", "a=1"),
                ("Set-Cookie", "b=2"),
            ],
            headers_at=0.125,
            chunks=[
                Chunk(0.25, b'data: {"delta":"h\xc3'),
                Chunk(0.5, b'\xa9"}\n\n'),
                Chunk(0.75, b"data: [DONE]\n\n"),
            ],
            end=StreamEnd(at=0.75),
        ),
    ),
    Interaction(
        Request(method="GET", url="http://127.0.0.1:8080/stream?n=2"),
        Response(
            status=200,
            headers=[("content-type", "application/octet-stream")],
            chunks=[Chunk(1.0, b"\xff\xfe\x00raw")],
            end=StreamEnd(
                at=1.5,
                error="RemoteProtocolError",
                message="peer closed connection without sending complete message body",
            ),
        ),
    ),
    Interaction(
        Request(
            method="DELETE",
            url="https://api.example.com/v1/items/1",
            headers=[("X-Trace", "1"), ("x-trace", "2")],
        ),
        Response(status=404, headers_at=2.0, end=StreamEnd(at=2.0, truncated=True)),
    ),
]


def test_golden_v1_loads_to_its_exact_content() -> None:
    assert load_interactions(GOLDEN / "v1.msgpack") == GOLDEN_V1


def test_golden_v1_is_written_byte_for_byte() -> None:
    assert dumps(GOLDEN_V1) == (GOLDEN / "v1.msgpack").read_bytes()


def test_golden_v1_events_keep_their_timing() -> None:
    events = load_interactions(GOLDEN / "v1.msgpack")[0].response.events()
    assert [(e.at, e.data) for e in events] == [(0.5, '{"delta":"hé"}'), (0.75, "[DONE]")]


def test_format_version_is_still_1() -> None:
    # A new version needs tests/golden/v2.msgpack, a reader for v1 files, and this test updated.
    assert FORMAT_VERSION == 1


@pytest.mark.parametrize("stopped_by", ["client", "session"])
def test_who_stopped_a_recording_survives_the_file(tmp_path: Path, stopped_by: str) -> None:
    end = StreamEnd(at=0.6, truncated=True, stopped_by=stopped_by)
    response = Response(status=200, chunks=[Chunk(0.5, b"x")], end=end)
    interaction = Interaction(Request(method="GET", url="https://a.test/"), response)
    path = tmp_path / "stopped.msgpack"
    Cassette([interaction]).save(path)
    assert Cassette.load(path).interactions[0].response.end.stopped_by == stopped_by


def test_a_stopped_by_that_contradicts_truncated_is_a_format_error(tmp_path: Path) -> None:
    document = msgpack.unpackb(dumps([sse_interaction()]), raw=False)
    document["interactions"][0]["response"]["end"]["stopped_by"] = "session"  # not truncated
    path = tmp_path / "bad.msgpack"
    path.write_bytes(msgpack.packb(document, use_bin_type=True))
    with pytest.raises(CassetteFormatError, match="stopped_by 'session' does not fit"):
        Cassette.load(path)


def _nested(depth: int) -> object:
    value: object = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("field", ["format", "version", "interactions"])
def test_a_value_nested_a_thousand_deep_is_a_format_error(tmp_path: Path, field: str) -> None:
    document = {"format": "replay-cassette", "version": 1, "interactions": []}
    document[field] = _nested(1000)
    path = tmp_path / "deep.msgpack"
    path.write_bytes(msgpack.packb(document, use_bin_type=True))
    with pytest.raises(CassetteFormatError) as caught:
        Cassette.load(path)
    assert len(str(caught.value)) < 300
