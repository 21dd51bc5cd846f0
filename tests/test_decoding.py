"""Content decoding (`replay.framing.decoding`): every coding clients send, bounded.

gzip, deflate, br and zstd bodies (and a list of codings) decode chunk by chunk, each piece
at its chunk's time, however finely the body was cut; a missing optional package is an
error naming the extra to install; a decompression bomb is refused at the limit, and
`replay show` and `replay check` refuse it in one line, quickly and in little memory.
"""

from __future__ import annotations

import gzip
import json
import struct
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Callable
from pathlib import Path

import brotli
import httpx
import pytest
import zstandard

import replay
from replay.framing.decoding import (
    MAX_DECODED_BYTES,
    DecodedTooLargeError,
    DecoderMissingError,
    DecodingError,
    decoded_chunks,
)
from replay.inspect import describe
from replay.model import Chunk, Interaction, Request, Response, StreamEnd
from replay.testing import Origin, Script

EVENTS = [f'data: {{"n": {n}, "text": "{"é" * n}"}}\n\n'.encode() for n in range(6)]
BODY = b"".join(EVENTS)


def brotli_pieces(events: list[bytes]) -> list[bytes]:
    compressor = brotli.Compressor()
    pieces = [compressor.process(event) + compressor.flush() for event in events]
    pieces[-1] += compressor.finish()
    return pieces


def zstd_pieces(events: list[bytes]) -> list[bytes]:
    compressor = zstandard.ZstdCompressor().compressobj()
    flush = zstandard.COMPRESSOBJ_FLUSH_BLOCK
    pieces = [compressor.compress(event) + compressor.flush(flush) for event in events]
    pieces[-1] += compressor.flush()
    return pieces


def gzip_pieces(events: list[bytes]) -> list[bytes]:
    compressor = zlib.compressobj(wbits=31)
    pieces = [compressor.compress(event) + compressor.flush(zlib.Z_SYNC_FLUSH) for event in events]
    pieces[-1] += compressor.flush()
    return pieces


ENCODERS: dict[str, Callable[[list[bytes]], list[bytes]]] = {
    "gzip": gzip_pieces,
    "br": brotli_pieces,
    "zstd": zstd_pieces,
}


def encoded(
    encoding: str, pieces: list[bytes], content_type: str = "text/event-stream"
) -> Response:
    chunks = [Chunk(round(0.1 * (n + 1), 6), piece) for n, piece in enumerate(pieces)]
    headers = [("content-type", content_type), ("content-encoding", encoding)]
    end = StreamEnd(at=max(1.0, chunks[-1].at))
    return Response(status=200, headers=headers, chunks=chunks, end=end)


@pytest.mark.parametrize("encoding", ENCODERS)
def test_each_event_keeps_the_time_of_its_compressed_chunk(encoding: str) -> None:
    stream = encoded(encoding, ENCODERS[encoding](EVENTS))
    events = stream.events()
    assert [event.at for event in events] == [round(0.1 * (n + 1), 6) for n in range(6)]
    assert events[5].data == '{"n": 5, "text": "ééééé"}'


@pytest.mark.parametrize("size", [1, 3, 1000])
@pytest.mark.parametrize("encoding", ENCODERS)
def test_a_body_cut_anywhere_decodes_the_same(encoding: str, size: int) -> None:
    data = b"".join(ENCODERS[encoding](EVENTS))
    stream = encoded(encoding, [data[at : at + size] for at in range(0, len(data), size)])
    assert b"".join(piece for _, piece in stream.decoded_chunks()) == BODY


def test_a_list_of_codings_is_undone_last_first() -> None:
    stream = encoded("gzip, br", [brotli.compress(gzip.compress(BODY))])
    assert b"".join(piece for _, piece in decoded_chunks(stream)) == BODY
    assert len(stream.events()) == 6


def test_one_piece_per_chunk_then_the_flush_at_the_end() -> None:
    stream = encoded("zstd", zstd_pieces(EVENTS))
    times = [at for at, _ in stream.decoded_chunks()]
    assert times == [*(chunk.at for chunk in stream.chunks), 1.0]


@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip", "deflate"])
def test_damaged_data_is_a_decoding_error(encoding: str) -> None:
    stream = encoded(encoding, [b"\xff" * 64])
    with pytest.raises(DecodingError, match=f"not valid {encoding} data"):
        stream.events()


def test_an_unknown_coding_is_a_decoding_error() -> None:
    with pytest.raises(DecodingError, match=r"'compress'.*gzip, deflate, br and zstd"):
        encoded("compress", [b"x"]).events()


@pytest.mark.parametrize(
    ("encoding", "modules", "extra"),
    [("br", ["brotli"], "brotli"), ("zstd", ["zstandard", "compression.zstd"], "zstd")],
)
def test_a_missing_package_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, encoding: str, modules: list[str], extra: str
) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)  # importing it now fails
    with pytest.raises(
        DecoderMissingError, match=rf"pip install 'replay-http\[{extra}\]'"
    ) as caught:
        encoded(encoding, [b"x"]).events()
    assert isinstance(caught.value, ValueError)
    assert caught.value.extra == extra


@pytest.mark.parametrize("encoding", ENCODERS)
def test_decoding_stops_at_the_limit(encoding: str) -> None:
    stream = encoded(encoding, ENCODERS[encoding]([bytes(4096)] * 4))
    assert len(b"".join(piece for _, piece in decoded_chunks(stream, limit=16384))) == 16384
    with pytest.raises(DecodedTooLargeError, match="more than 16383 bytes"):
        list(decoded_chunks(stream, limit=16383))


def test_the_default_limit_refuses_a_bomb_of_each_coding() -> None:
    size = MAX_DECODED_BYTES + 1024 * 1024
    for encoding, data in [
        ("br", brotli.compress(bytes(size), quality=1)),
        ("zstd", zstandard.ZstdCompressor().compress(bytes(size))),
    ]:
        with pytest.raises(DecodedTooLargeError, match="decompression bomb"):
            encoded(encoding, [data]).events()


@pytest.mark.parametrize("encoding", ["br", "zstd"])
def test_br_and_zstd_bodies_recorded_from_the_origin_decode_in_events_and_show(
    tmp_path: Path, encoding: str
) -> None:
    pieces = ENCODERS[encoding](EVENTS)
    headers = [("content-type", "text/event-stream"), ("content-encoding", encoding)]
    script = Script(chunks=[(0.01, piece) for piece in pieces], headers=headers)
    path = tmp_path / f"{encoding}.msgpack"
    with Origin({"/stream": script}) as origin, replay.use_cassette(path):
        assert httpx.get(origin.url + "/stream").content == BODY  # httpx decodes it too
    cassette = replay.Cassette.load(path)
    assert len(cassette.interactions[0].response.events()) == 6
    assert describe.table(cassette).splitlines()[1].split()[7] == "6"
    assert '{"n": 3' in describe.events(cassette)


# --- a decompression bomb, through the command line ------------------------------------------


def gzip_bomb(mebibytes: int) -> bytes:
    """A valid gzip member of `mebibytes` MiB of zeros, in about 1 KB per MiB.

    Each MiB is compressed once and repeated: a full flush makes each piece independent.
    """
    mib = bytes(1024 * 1024)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = compressor.compress(mib) + compressor.flush(zlib.Z_FULL_FLUSH)
    piece = compressor.compress(mib) + compressor.flush(zlib.Z_FULL_FLUSH)
    last = compressor.flush()[:-8]  # the final block, without the trailer it computed
    crc = 0
    for _ in range(mebibytes):
        crc = zlib.crc32(mib, crc)
    trailer = struct.pack("<II", crc, (mebibytes * len(mib)) & 0xFFFFFFFF)
    return head + piece * (mebibytes - 1) + last + trailer


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = gzip_bomb(1024)  # 1 MB that inflates to 1 GiB of zeros
    assert len(data) < 1100 * 1000
    response = Response(
        status=200,
        headers=[("content-type", "text/event-stream"), ("content-encoding", "gzip")],
        chunks=[Chunk(0.1, data)],
    )
    path = tmp_path_factory.mktemp("bomb") / "bomb.msgpack"
    request = Request(method="POST", url="https://api.example.com/v1/responses")
    replay.Cassette([Interaction(request, response)]).save(path)
    return path


# Runs the command in a child of its own, so that RUSAGE_CHILDREN measures only the command.
# CPU seconds, not wall seconds: two CPU hogs on 2 cores stretch the wall clock 1.5x and
# more, not the CPU time of a command that does not wait.
MEASURE = textwrap.dedent(
    """
    import json, resource, subprocess, sys
    done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=60)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu, peak = used.ru_utime + used.ru_stime, used.ru_maxrss * 1024
    print(json.dumps([done.returncode, done.stdout, done.stderr, cpu, peak]))
    """
)


def measure(*args: str) -> tuple[int, str, float, int]:
    """Run `replay ARGS`: its exit status, output, CPU seconds and peak memory in bytes."""
    command = [sys.executable, "-c", MEASURE, sys.executable, "-m", "replay.cli", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    status, stdout, stderr, cpu, peak = json.loads(done.stdout)
    return status, stdout + stderr, cpu, peak


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cassette of one small gzip stream: what the same command costs without a bomb."""
    response = Response(
        status=200,
        headers=[("content-type", "text/event-stream"), ("content-encoding", "gzip")],
        chunks=[Chunk(0.1, gzip.compress(b"data: hi\n\n"))],
    )
    path = tmp_path_factory.mktemp("plain") / "plain.msgpack"
    request = Request(method="POST", url="https://api.example.com/v1/responses")
    replay.Cassette([Interaction(request, response)]).save(path)
    return path


@pytest.mark.parametrize(
    "verb", [["show"], ["show", "--events"], ["check"]], ids=["show", "show-events", "check"]
)
def test_a_gzip_bomb_is_refused_in_one_line_quickly_and_in_little_memory(
    bomb: Path, plain: Path, verb: list[str]
) -> None:
    status, output, cpu, peak = measure(*verb, str(bomb))
    refusals = [line for line in output.splitlines() if "decompression bomb" in line]
    assert len(refusals) == 1, output
    assert status == (1 if verb == ["check"] else 0), output
    # Inflating the whole GiB, even a piece at a time in little memory, costs 0.7 s of CPU
    # more than the same command on a small stream; stopping early costs next to nothing.
    floor = measure(*verb, str(plain))[2]
    assert cpu < floor + 0.4, (cpu, floor)
    assert peak < 200 * 1024 * 1024, peak
