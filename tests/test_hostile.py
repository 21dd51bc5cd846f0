"""Crafted cassettes: each is refused in bounded time and memory, whatever it declares.

Every file here is about 20 MB of msgpack made to cost a naive reader far more than its size:
a byte per empty map (some 70 bytes once built), lengths declared far past the end, lists of
millions of tiny values, nesting past any stack. Each is loaded in a fresh Python process,
which reports how long it took and how much its peak memory grew; each must end in one
`CassetteFormatError` (one `replay: error:` line from the CLI) within `SECONDS` and
`MEGABYTES`. The targets are 1 s and 200 MB on a quiet machine; `SECONDS` leaves room for a
loaded 2-core CI box.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest

from replay import Interaction, Request, Response
from replay.store.file import dumps

SIZE = 20_000_000
SECONDS = 3.0
MEGABYTES = 200


def pack(value: object) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def array32(count: int) -> bytes:
    return b"\xdd" + count.to_bytes(4, "big")


def document(interactions: bytes, count: int, *, version: object = 1) -> bytes:
    """A cassette document whose interactions list holds the raw `interactions`."""
    head = b"\x83" + pack("format") + pack("replay-cassette") + pack("version") + pack(version)
    return head + pack("interactions") + array32(count) + interactions


def interaction(*, headers: bytes = b"\x90", at: bytes = b"\x90", data: bytes = b"\x90") -> bytes:
    """One interaction, raw, with the request headers and the chunk columns given raw."""
    request = b"\x84" + b"".join(
        pack(key) + value
        for key, value in [
            ("method", pack("GET")),
            ("url", pack("http://h/")),
            ("headers", headers),
            ("body", pack(b"")),
        ]
    )
    end = pack({"at": 0.0, "error": None, "message": "", "truncated": False})
    response = b"\x85" + b"".join(
        pack(key) + value
        for key, value in [
            ("status", pack(200)),
            ("headers", b"\x90"),
            ("headers_at", pack(0.0)),
            ("chunks", b"\x82" + pack("at") + at + pack("data") + data),
            ("end", end),
        ]
    )
    return b"\x82" + pack("request") + request + pack("response") + response


def empty_maps() -> bytes:  # the file: 1.4 GB and 7.5 s to reject, before
    return document(b"\x80" * SIZE, SIZE)


def empty_lists() -> bytes:  # tracked by the garbage collector: seconds of collections
    return document(b"\x90" * SIZE, SIZE)


def deep_nesting() -> bytes:
    return document(b"\x91" * SIZE, 1)


def header_pairs() -> bytes:  # millions of ["", ""]: a tuple and two slots each
    count = SIZE // 3
    return document(interaction(headers=array32(count) + b"\x92\xa0\xa0" * count), 1)


def tiny_chunks() -> bytes:  # a byte each for a time (0) and two for a payload (b"")
    count = SIZE // 3
    at, data = array32(count) + b"\x00" * count, array32(count) + b"\xc4\x00" * count
    return document(interaction(at=at, data=data), 1)


def lengths_past_the_end() -> bytes:  # a list of 2**31 nils, a 4 GiB body: 20 MB given
    unknown = pack("extra") + b"\xc6\xff\xff\xff\xff"
    return document(b"\xc0" * SIZE, 2**31) + unknown


def format_of_two_char_strings() -> bytes:  # about 60 bytes of object for 3 of file
    count = SIZE // 3
    head = b"\x83" + pack("format") + array32(count) + b"\xa2ab" * count
    return head + pack("version") + pack(1) + pack("interactions") + b"\x90"


def millions_of_keys() -> bytes:
    count = SIZE // 2
    return b"\xdf" + count.to_bytes(4, "big") + b"\x00\xc0" * count


def interactions_before_the_format() -> bytes:
    head = b"\x83" + pack("interactions") + array32(SIZE) + b"\x80" * SIZE
    return head + pack("format") + pack("vcrpy") + pack("version") + pack(1)


HOSTILE: dict[str, tuple[Callable[[], bytes], str]] = {
    "20M empty maps": (empty_maps, "interactions[0]: missing field 'request'"),
    "20M empty lists": (empty_lists, "interactions[0]: expected dict, found list"),
    "nested 20M deep": (deep_nesting, "nested too deeply"),
    "6.7M header pairs": (header_pairs, "request.headers: loading the file would take more"),
    "6.7M tiny chunks": (tiny_chunks, "chunks.at: loading the file would take more"),
    "lengths past the end": (lengths_past_the_end, "the file ends too early"),
    "format of 6.7M strings": (format_of_two_char_strings, "format a list"),
    "10M keys": (millions_of_keys, "10000000 fields"),
    "interactions before format": (interactions_before_the_format, "format 'vcrpy'"),
}

MEASURE = textwrap.dedent(
    """
    import json, sys, time
    from replay.store.file import load_interactions
    from replay.errors import CassetteFormatError

    def peak_kib():  # of this process image: ru_maxrss would count the parent's, pre-exec
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

    before = peak_kib()
    start = time.perf_counter()
    try:
        outcome = f"loaded {len(load_interactions(sys.argv[1]))}"
    except CassetteFormatError as error:
        outcome = f"CassetteFormatError: {error}"
    seconds = time.perf_counter() - start
    grown = (peak_kib() - before) / 1024
    print(json.dumps({"outcome": outcome, "seconds": seconds, "megabytes": grown}))
    """
)


def measured_load(path: Path) -> dict[str, object]:
    """Load `path` in a fresh process: what came of it, in how long, with how much memory."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.skipif(sys.platform != "linux", reason="peak memory from /proc")
@pytest.mark.parametrize(("craft", "fragment"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_crafted_file_is_refused_in_bounded_time_and_memory(
    tmp_path: Path, craft: Callable[[], bytes], fragment: str
) -> None:
    path = tmp_path / "hostile.msgpack"
    path.write_bytes(craft())
    assert len(path.read_bytes()) >= SIZE
    result = measured_load(path)
    assert str(result["outcome"]).startswith("CassetteFormatError: "), result
    assert fragment in str(result["outcome"])
    assert len(str(result["outcome"])) < 400
    assert float(str(result["seconds"])) < SECONDS, result
    assert float(str(result["megabytes"])) < MEGABYTES, result


@pytest.mark.skipif(sys.platform != "linux", reason="peak memory from /proc")
def test_an_unknown_field_of_20m_empty_maps_is_skipped_unbuilt(tmp_path: Path) -> None:
    # Readers ignore unknown keys: the file is a cassette, its extra field never built.
    valid = dumps([Interaction(Request(method="GET", url="http://h/"), Response(status=200))])
    path = tmp_path / "extra.msgpack"
    path.write_bytes(b"\x84" + valid[1:] + pack("extra") + array32(SIZE) + b"\x80" * SIZE)
    result = measured_load(path)
    assert result["outcome"] == "loaded 1"
    assert float(str(result["seconds"])) < SECONDS, result
    assert float(str(result["megabytes"])) < MEGABYTES, result


@pytest.mark.skipif(sys.platform != "linux", reason="peak memory from /proc")
@pytest.mark.parametrize("declared", [1024, 10_000])
def test_a_small_file_of_long_lists_nested_deep_is_refused_in_a_few_megabytes(
    tmp_path: Path, declared: int
) -> None:
    # msgpack allocates a list's declared length before reading it (up to 10,000 slots),
    # 1,024 lists deep: some 80 MB from 60 KB, unless the lists a slice built whole may
    # declare are bounded (`replay.store.load._ARRAY_MAX`).
    nested = (b"\xdc" + declared.to_bytes(2, "big")) * 1100
    padded = b"\x84" + document(nested, 1)[1:] + pack("extra") + pack(b"x" * 60_000)
    path = tmp_path / "nested.msgpack"
    path.write_bytes(padded)
    assert len(padded) < 64 * 1024  # built whole, as a small file is
    result = measured_load(path)
    assert "nested too deeply" in str(result["outcome"]), result
    assert float(str(result["megabytes"])) < 16, result


def test_replay_show_of_a_crafted_file_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "hostile.msgpack"
    path.write_bytes(empty_maps())
    shown = subprocess.run(
        [sys.executable, "-m", "replay.cli", "show", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode != 0
    assert shown.stdout == ""
    assert shown.stderr.splitlines() == [
        f"replay: error: cannot read cassette {str(path)!r}: "
        "interactions[0]: missing field 'request'"
    ]
