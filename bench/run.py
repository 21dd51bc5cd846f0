"""Benchmarks of replay against its floors (httpx.MockTransport, msgpack) and against vcrpy.

    python bench/run.py             # about five minutes; writes bench/RESULTS.md
    python bench/run.py --quick     # about a minute and a half: fewer repeats, shorter loads
    python bench/run.py --quick --only 8,9 --output /tmp/r.md   # some benchmarks only

Every figure is a ratio against a floor measured in the same run on the same machine, so the
ratios mean something on a loaded laptop as on CI; absolute times are printed beside them.

1. stream   Replay a 10,000-chunk SSE stream at instant speed (`iter_raw`) vs an
            `httpx.MockTransport` yielding the same chunks. Target: ratio <= 1.25.
2. load     `replay.Cassette.load` of that cassette vs `msgpack.unpackb` of the same file
            (target: <= 1.3x) and vcrpy loading its YAML cassette of the same response
            (target: replay >= 5x faster); beside them, the same checks without the load's
            memory bound (reported).
3. match    1,000 requests that differ only by their JSON body, in shuffled order: replay vs
            an `httpx.MockTransport` answering from a dict (the floor; target <= 1.10x) vs
            vcrpy; beside them, a MockTransport keyed by each body's JSON key (reported).
4. timing   A 40-gap stream (gaps of 10-30 ms) replayed at speed 1 on the real clock: gap
            error and end-to-end drift. Targets: median gap error < 1 ms, drift < 5 ms.
5. stamps   Recording while an async client blocks its event loop for 1 s after the headers,
            or a sync client is busy for 1 s with its first event (see `bench/stamps.py`):
            how far each recorded `at` lies from when the origin sent the chunk. Target:
            max < 15 ms.
6. aiohttp  The stream of 1. read by an aiohttp client (`iter_any`), replayed at instant speed
            vs a local `aiohttp.web` server writing the same chunks (see
            `bench/aiohttp_stream.py`). Target: ratio <= 1.0.
7. proxy    `replay proxy` recording 200 concurrent clients (200 requests/s in all) of a
            20 ms streaming origin for 30 s (5 s with --quick) vs the same clients straight
            at the origin (see `bench/proxy_load.py`). Targets: throughput flat (last third
            >= 0.95x the first), p99 latency within 50 ms of the origin's, nothing lost.
8. startup  `pytest --co -q` of a one-test suite with replay's plugin minus with
            `-p no:replay`, fresh processes (see `bench/suite.py`). Target: <= 15 ms.
9. suite    200 generated tests, one cassette each, `--record-mode=none`: replay's marker and
            pytest-recording's `vcr` marker, each over a `MockTransport` floor, in fresh
            pytest processes (`bench/suite.py`). Target: replay <= 0.5 ms a test over the
            floor, and >= 10x less than pytest-recording's.
10. record  `RecordingTransport` vs the same client live, from a local origin
            (`bench/recording.py`): 50 MiB in 16 KiB chunks (target: >= 0.9x the
            throughput), time to first event (target: live + <= 1 ms), CPU per chunk of a
            10,000-event stream (reported).
11. serve   `replay serve` under 200 clients (`bench/serve_load.py`): TTFB at speed 1 vs
            the recorded one (target: p99 within 20 ms); streams per second at instant
            speed vs uvicorn serving a bare ASGI app (reported).

Each timed repeat gets fresh objects (cassette, transport, client) built outside the timed
region; `gc.collect()` runs before each repeat; warm-up runs are discarded; medians reported.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime
import functools
import gc
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import pstats
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import httpx
import msgpack
import yaml  # type: ignore[import-untyped]  # vcrpy's dependency; no stubs installed
from vcrpy_files import save_vcr_cassette  # beside this script

import replay
from replay.adapters.httpx_capture import request_from_httpx
from replay.matching.keys import json_key
from replay.store.validate import quick

URL = "https://api.openai.com/v1/responses"
SSE_HEADERS = [
    ("content-type", "text/event-stream; charset=utf-8"),
    ("cache-control", "no-cache"),
    ("x-request-id", "req_6f1b0c1d2e3f4a5b6c7d8e9f0a1b2c3d"),
]
STREAM_CHUNKS = 10_000
MATCH_INTERACTIONS = 1_000
TIMING_GAPS = 40
SEED = 20250101

Runner = Callable[[], object]


# --- workload -----------------------------------------------------------------------------


def delta_event(number: int, token: str = " token") -> bytes:
    """One Responses API `response.output_text.delta` event as the API sends it (~220 bytes)."""
    payload = {
        "type": "response.output_text.delta",
        "sequence_number": number,
        "item_id": "msg_4b71d12c86d94e719c7e3984a7bb7941",
        "output_index": 0,
        "content_index": 0,
        "delta": token,
        "logprobs": [],
    }
    data = json.dumps(payload, separators=(",", ":"))
    return f"event: response.output_text.delta\ndata: {data}\n\n".encode()


@functools.cache
def _builder() -> httpx.Client:
    # One client: making one per request would time SSL context set-up, not the workload.
    return httpx.Client()


def recorded_request(payload: dict[str, object]) -> replay.Request:
    """The request an httpx client sends for `payload`, as replay records it."""
    built = _builder().build_request("POST", URL, json=payload)
    return request_from_httpx(built)


def stream_payload() -> dict[str, object]:
    return {"model": "gpt-4.1", "input": "Tell me a long story.", "stream": True}


def long_stream(chunks: int) -> replay.Interaction:
    """One response of `chunks` delta events, 20 ms apart."""
    response = replay.Response(
        status=200,
        headers=SSE_HEADERS,
        headers_at=0.3,
        chunks=[replay.Chunk(0.3 + 0.02 * i, delta_event(i)) for i in range(chunks)],
    )
    return replay.Interaction(recorded_request(stream_payload()), response)


def match_payload(number: int) -> dict[str, object]:
    return {"model": "gpt-4.1", "input": f"Question number {number}?", "stream": True}


def short_stream(number: int) -> replay.Response:
    tokens = [f" answer {number}", ",", " done", "."]
    chunks = [replay.Chunk(0.2 + 0.03 * i, delta_event(i, t)) for i, t in enumerate(tokens)]
    return replay.Response(status=200, headers=SSE_HEADERS, headers_at=0.2, chunks=chunks)


def body_distinct(count: int) -> list[replay.Interaction]:
    """`count` interactions whose requests differ only by their JSON body."""
    return [
        replay.Interaction(recorded_request(match_payload(n)), short_stream(n))
        for n in range(count)
    ]


def gapped_stream(gaps: int, rng: random.Random) -> replay.Interaction:
    """A stream of `gaps` + 1 chunks, 10-30 ms apart, after 20 ms to headers and 30 ms to data."""
    at = 0.03
    chunks = [replay.Chunk(at, delta_event(0))]
    for number in range(1, gaps + 1):
        at += rng.uniform(0.010, 0.030)
        chunks.append(replay.Chunk(at, delta_event(number)))
    response = replay.Response(status=200, headers=SSE_HEADERS, headers_at=0.02, chunks=chunks)
    return replay.Interaction(recorded_request(stream_payload()), response)


def mock_stream_class(module: ModuleType) -> type[Any]:
    """A `module.SyncByteStream` yielding a list of chunks: the floor's stream."""

    class ListStream(module.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, chunks: Sequence[bytes]) -> None:
            self.chunks = chunks

        def __iter__(self) -> Iterator[bytes]:
            yield from self.chunks

    return ListStream


def mock_async_stream_class(module: ModuleType) -> type[Any]:
    """A `module.AsyncByteStream` yielding a list of chunks: the async floor's stream."""

    class AsyncListStream(module.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, chunks: Sequence[bytes]) -> None:
            self.chunks = chunks

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in self.chunks:
                yield chunk

    return AsyncListStream


# --- measuring ------------------------------------------------------------------------------


def measure(
    contenders: Sequence[Callable[[], Runner]], repeats: int, warmup: int
) -> list[list[float]]:
    """Seconds each contender's runner takes, `repeats` times each, after `warmup` rounds.

    A contender is a `prepare` function: it builds fresh state outside the timed region and
    returns what to time. The contenders take turns, round by round, in rotating order, so a
    change of machine load during the run weighs on all of them alike.
    """
    times: list[list[float]] = [[] for _ in contenders]
    for round_number in range(warmup + repeats):
        shift = round_number % len(contenders)
        for index in [*range(shift, len(contenders)), *range(shift)]:
            run = contenders[index]()
            gc.collect()
            start = time.perf_counter()
            run()
            elapsed = time.perf_counter() - start
            if round_number >= warmup:
                times[index].append(elapsed)
    return times


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def spread(values: Sequence[float]) -> str:
    return f"{ms(min(values))} – {ms(max(values))}"


@dataclass
class Row:
    """One line of a results table: a contender's median time and its range."""

    name: str
    times: list[float]

    @property
    def median(self) -> float:
        return median(self.times)


@dataclass
class Verdict:
    """A target and whether this run met it."""

    benchmark: str
    figure: str
    value: str
    target: str
    met: bool | None  # None: reported, the issue sets no goal


@dataclass
class Section:
    title: str
    lines: list[str] = field(default_factory=list)


@dataclass
class Settings:
    """How much to measure: repeats per benchmark, the vcrpy sample, warm-up rounds."""

    stream_repeats: int
    load_repeats: int
    match_repeats: int
    vcrpy_requests: int
    timing_runs: int
    warmup: int
    pure_yaml: bool
    proxy_seconds: float
    startup_repeats: int
    suite_rounds: int
    recording_repeats: int
    first_event_repeats: int
    serve_seconds: float
    serve_instant_seconds: float


def settings(quick: bool, vcrpy_all: bool) -> Settings:
    sample = MATCH_INTERACTIONS if vcrpy_all else 0
    if quick:
        return Settings(
            stream_repeats=40,
            load_repeats=10,
            match_repeats=3,
            vcrpy_requests=sample or 25,
            timing_runs=2,
            warmup=1,
            pure_yaml=False,
            proxy_seconds=5.0,
            startup_repeats=5,
            suite_rounds=2,
            recording_repeats=3,
            first_event_repeats=10,
            serve_seconds=3.0,
            serve_instant_seconds=2.0,
        )
    return Settings(
        stream_repeats=200,
        load_repeats=30,
        match_repeats=7,
        vcrpy_requests=sample or 200,
        timing_runs=5,
        warmup=3,
        pure_yaml=True,
        proxy_seconds=30.0,
        startup_repeats=15,
        suite_rounds=11,
        recording_repeats=7,
        first_event_repeats=30,
        serve_seconds=10.0,
        serve_instant_seconds=5.0,
    )


def short_path(path: str) -> str:
    """`path` from the package root on (`replay/adapters/playback.py`, `httpx/_models.py`)."""
    for marker in ("site-packages/", f"{Path(replay.__file__).parent.parent}/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def hot_spots(prepare: Callable[[], Runner], runs: int, limit: int = 12) -> list[str]:
    """A table of replay's functions taking the most time over `runs` profiled runs.

    Sorted by cumulative time (callees included), so that `len()` and friends called from a
    replay function count towards it; the own-time column shows where the work itself is.
    """
    profiler = cProfile.Profile()
    for _ in range(runs):
        run = prepare()
        profiler.enable()
        run()
        profiler.disable()
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values())
    ours = [
        (f"{short_path(path)}:{line} {name}", entry)
        for (path, line, name), entry in stats.items()
        if short_path(path).startswith("replay/")
    ]
    ranked = sorted(ours, key=lambda item: item[1][3], reverse=True)[:limit]
    ranked = [(where, entry) for where, entry in ranked if entry[3] >= total / 100]
    lines = [
        f"Where the time goes: replay's functions under cProfile, {runs} run(s), by "
        "cumulative time as a share of the whole profiled run (client included); the "
        "profiler inflates small calls, so read the shares, not the milliseconds. Functions "
        "under 1% are left out.",
        "",
        "| function | cumulative | own | calls |",
        "|---|---:|---:|---:|",
    ]
    for where, entry in ranked:
        lines.append(
            f"| `{where}` | {entry[3] / total:.0%} | {entry[2] / total:.0%} | {entry[1]:,} |"
        )
    return [*lines, ""]


def table(rows: Sequence[Row], floor: Row) -> list[str]:
    lines = ["| contender | median | min – max | × floor |", "|---|---:|---:|---:|"]
    for row in rows:
        ratio = row.median / floor.median
        name = f"{row.name} *(floor)*" if row is floor else row.name
        lines.append(f"| {name} | {ms(row.median)} | {spread(row.times)} | {ratio:.2f} |")
    return lines


# --- 1. a 10,000-chunk stream at instant speed --------------------------------------------


def read_raw(client: Any, payload: dict[str, object]) -> int:
    total = 0
    with client.stream("POST", URL, json=payload) as response:
        for chunk in response.iter_raw():
            total += len(chunk)
    return total


def stream_runners(
    module: ModuleType,
    interaction: replay.Interaction,
    loop: asyncio.AbstractEventLoop | None = None,
) -> tuple[Callable[[], Runner], Callable[[], Runner]]:
    """(replay, MockTransport floor) runners reading the whole stream with `module`'s
    client: its sync one, or with `loop` its async one (each read run on `loop`)."""
    payload = stream_payload()
    chunks = [chunk.data for chunk in interaction.response.chunks]
    expected = sum(map(len, chunks))
    if loop is None:
        stream_class, client_class = mock_stream_class(module), module.Client
        replay_class: type[Any] = replay.ReplayTransport

        def read(client: Any) -> int:
            return read_raw(client, payload)

    else:
        stream_class, client_class = mock_async_stream_class(module), module.AsyncClient
        replay_class = replay.AsyncReplayTransport

        def read(client: Any) -> int:
            return loop.run_until_complete(read_raw_async(client, payload))

    def check(client: Any) -> Runner:
        def run() -> None:
            if read(client) != expected:
                raise AssertionError("the stream came back incomplete")

        return run

    def replayed() -> Runner:
        cassette = replay.Cassette([interaction])
        return check(client_class(transport=replay_class(cassette, speed="instant")))

    def mocked() -> Runner:
        def handler(request: Any) -> Any:  # (MockTransport takes it for async clients too)
            return module.Response(200, headers=SSE_HEADERS, stream=stream_class(chunks))

        return check(client_class(transport=module.MockTransport(handler)))

    return replayed, mocked


async def read_raw_async(client: Any, payload: dict[str, object]) -> int:
    total = 0
    async with client.stream("POST", URL, json=payload) as response:
        async for chunk in response.aiter_raw():
            total += len(chunk)
    return total


def bench_stream(config: Settings, verdicts: list[Verdict]) -> Section:
    section = Section(f"1. A {STREAM_CHUNKS:,}-chunk SSE stream replayed at instant speed")
    interaction = long_stream(STREAM_CHUNKS)
    size = len(interaction.response.body)
    section.lines += [
        f"{STREAM_CHUNKS:,} `response.output_text.delta` events ({size / 1e6:.2f} MB), read "
        "with `iter_raw` through `Client(transport=ReplayTransport(cassette, "
        'speed="instant"))` vs `Client(transport=MockTransport(handler))` whose handler '
        "returns `Response(200, stream=<SyncByteStream yielding the same chunk list>)`; and "
        "the same with `AsyncClient`, `AsyncReplayTransport`, an `AsyncByteStream` and "
        "`aiter_raw` (each read on one event loop). "
        f"Median of {config.stream_repeats} repeats, after {config.warmup} warm-up round(s).",
        "",
    ]
    modules: list[tuple[str, ModuleType]] = [("httpx", httpx)]
    try:
        import httpx2
    except ImportError:
        section.lines += ["httpx2 is not installed: its variant was skipped.", ""]
    else:
        modules.append(("httpx2", httpx2))
    loop = asyncio.new_event_loop()
    profiled: set[bool] = set()  # one profile a kind will do: both libraries share the code
    try:
        for name, module in modules:
            for flavour in (name, f"{name}, async"):
                lines = _stream_variant(
                    config, verdicts, interaction, module, flavour, loop, profiled
                )
                section.lines += lines
    finally:
        loop.close()
    return section


def _stream_variant(
    config: Settings,
    verdicts: list[Verdict],
    interaction: replay.Interaction,
    module: ModuleType,
    flavour: str,
    loop: asyncio.AbstractEventLoop,
    profiled: set[bool],
) -> list[str]:
    """One library's sync or async (`flavour` "httpx, async") variant of benchmark 1; a
    profile if it misses, unless `profiled` has one of its kind (async or not) already."""
    is_async = flavour.endswith("async")
    replayed, mocked = stream_runners(module, interaction, loop if is_async else None)
    transport = "AsyncReplayTransport" if is_async else "ReplayTransport"
    floor_times, our_times = measure([mocked, replayed], config.stream_repeats, config.warmup)
    floor = Row(f"{module.__name__}.MockTransport", floor_times)
    ours = Row(f"replay.{transport} ({flavour})", our_times)
    ratio = ours.median / floor.median
    per_chunk = (ours.median - floor.median) / STREAM_CHUNKS
    lines = [f"**{flavour}**", "", *table([floor, ours], floor), ""]
    lines += [f"Overhead over the floor: {per_chunk * 1e9:.0f} ns per chunk.", ""]
    met = ratio <= 1.25
    verdicts.append(
        Verdict("1. stream", f"replay / MockTransport ({flavour})", f"{ratio:.2f}", "≤ 1.25", met)
    )
    if not met and is_async not in profiled:
        lines += hot_spots(replayed, runs=10)
        profiled.add(is_async)
    return lines


# --- 2. loading the 10,000-chunk cassette -------------------------------------------------


def pure_python_yaml_load(path: Path) -> float:
    """Seconds PyYAML's pure-Python SafeLoader takes on `path` (vcrpy without libyaml)."""
    text = path.read_text()
    start = time.perf_counter()
    yaml.load(text, Loader=yaml.SafeLoader)
    return time.perf_counter() - start


def unbounded_load(path: Path) -> list[replay.Interaction]:
    """`Cassette.load`'s interactions of `path` without its memory bound: one `unpackb` of
    the file read, then the checks and objects of `Cassette.load` (`_validate.quick`)."""
    document = msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
    built = [quick(value) for value in document["interactions"]]
    if None in built:
        raise AssertionError(f"{path}: refused by the checks `Cassette.load` makes")
    return cast("list[replay.Interaction]", built)


def bench_load(config: Settings, workdir: Path, verdicts: list[Verdict]) -> Section:
    import vcr.cassette

    section = Section(f"2. Loading the {STREAM_CHUNKS:,}-chunk cassette")
    interaction = long_stream(STREAM_CHUNKS)
    ours_path, vcr_path = workdir / "long.msgpack", workdir / "long.yaml"
    replay.Cassette([interaction]).save(ours_path)
    save_vcr_cassette(vcr_path, [interaction])

    def replay_load() -> Runner:
        return lambda: replay.Cassette.load(ours_path)

    def vcrpy_load() -> Runner:
        return lambda: vcr.cassette.Cassette.load(path=str(vcr_path))

    def msgpack_file() -> Runner:  # what any loader of the file does: read it, unpack it
        return lambda: msgpack.unpackb(ours_path.read_bytes(), raw=False, strict_map_key=False)

    def msgpack_bytes() -> Runner:  # context: the unpacking alone, of bytes already read
        data = ours_path.read_bytes()
        return lambda: msgpack.unpackb(data, raw=False, strict_map_key=False)

    def unbounded() -> Runner:  # context: what the memory bound costs `Cassette.load`
        return lambda: unbounded_load(ours_path)

    repeats, warmup = config.load_repeats, config.warmup
    floor_times, bytes_times, unbounded_times, our_times = measure(
        [msgpack_file, msgpack_bytes, unbounded, replay_load], repeats, warmup
    )
    # vcrpy takes turns with replay in rounds of their own: among the others, the memory its
    # load frees (handed back to the system) made the next contender's read fault its pages
    # in again, and the floor's median moved from about 0.7 ms to 2 ms, run to run.
    beside_vcrpy, vcrpy_times = measure([replay_load, vcrpy_load], repeats, warmup)
    floor = Row("`msgpack.unpackb(path.read_bytes())` of the same file", floor_times)
    unpacked = Row("`msgpack.unpackb` alone, of the file's bytes already read", bytes_times)
    checked = Row(
        "the floor and `Cassette.load`'s checks, without its memory bound", unbounded_times
    )
    ours = Row("`replay.Cassette.load`", our_times)
    vcrpy = Row("vcrpy `Cassette.load(path=…)` (in rounds of its own with replay's)", vcrpy_times)
    speedup = vcrpy.median / median(beside_vcrpy)
    libyaml = "libyaml (CSafeLoader)" if yaml.__with_libyaml__ else "pure-Python PyYAML"
    section.lines += [
        f"replay's msgpack file: {ours_path.stat().st_size / 1e6:.2f} MB, "
        f"{STREAM_CHUNKS:,} timed chunks. vcrpy's YAML file, written by vcrpy's own "
        "`FilesystemPersister.save_cassette` + `yamlserializer` from the dict its httpx stub "
        f"records (`_serialize_response`): {vcr_path.stat().st_size / 1e6:.2f} MB, the body "
        f"joined into one string (vcrpy keeps no chunks). vcrpy parses with {libyaml}: "
        "one long scalar, parsed in C, where replay checks and builds one `Chunk` per "
        "chunk. "
        f"Median of {repeats} repeats.",
        "The floor reads the file and unpacks it, as `Cassette.load` and vcrpy do; "
        "the unpacking alone, from bytes already read, is shown beside it. The third row "
        "checks what the floor built as `Cassette.load` checks it (every payload's type, the "
        "times' order, sign and finiteness) and builds the same objects: `Cassette.load` "
        "less its memory bound, which reads the payload column element by element (one "
        "`unpackb` of a damaged file can allocate a thousand times its size). vcrpy takes "
        "turns with replay in rounds of their own (its × floor is against this floor; "
        "its speed-up against replay's median in those rounds).",
        "",
        *table([floor, unpacked, checked, ours, vcrpy], floor),
        "",
        f"**replay loads {speedup:.2f}× faster than vcrpy** (target ≥ 5×).",
        "",
    ]
    if config.pure_yaml:
        seconds = pure_python_yaml_load(vcr_path)
        section.lines += [
            "For context: without libyaml, vcrpy falls back to PyYAML's pure-Python loader, "
            f"which takes {ms(seconds)} on the same file (one run; "
            f"{seconds / ours.median:.0f}× replay's load).",
            "",
        ]
    over_msgpack = ours.median / floor.median
    verdicts += [
        Verdict("2. load", "vcrpy load / replay load", f"{speedup:.2f}×", "≥ 5×", speedup >= 5),
        Verdict(
            "2. load",
            "`Cassette.load` / `msgpack.unpackb` of the file read",
            f"{over_msgpack:.2f}×",
            "≤ 1.3×",
            over_msgpack <= 1.3,
        ),
        Verdict(
            "2. load",
            "the same checks without the memory bound / `msgpack.unpackb` of the file read",
            f"{checked.median / floor.median:.2f}×",
            "reported",
            None,
        ),
    ]
    if speedup < 5 or over_msgpack > 1.3:
        section.lines += hot_spots(replay_load, runs=10)
    return section


# --- 3. 1,000 body-distinct interactions in shuffled order --------------------------------


Asked = Sequence[tuple[dict[str, object], bytes]]
"""Requests to send, as (JSON payload, the body the answer must have)."""


def post_all(client: Any, asked: Asked) -> None:
    """POST each payload and check the answer (a bytes comparison: ~0.1 µs)."""
    for payload, body in asked:
        if client.post(URL, json=payload).read() != body:
            raise AssertionError(f"wrong answer to {payload}")


def match_contenders(
    interactions: list[replay.Interaction], asked: Asked, path: Path
) -> list[Callable[[], Runner]]:
    """The floor, replay's transport, and replay's `use_cassette` answering `asked`."""
    answers = {i.request.body: [c.data for c in i.response.chunks] for i in interactions}
    stream_class = mock_stream_class(httpx)

    def mocked() -> Runner:
        def handler(request: httpx.Request) -> httpx.Response:
            chunks = answers[request.content]
            return httpx.Response(200, headers=SSE_HEADERS, stream=stream_class(chunks))

        client = httpx.Client(transport=httpx.MockTransport(handler))
        return lambda: post_all(client, asked)

    def keyed() -> Runner:  # context: what matching by JSON costs, and no more
        client = httpx.Client(transport=httpx.MockTransport(json_keyed_handler(answers)))
        return lambda: post_all(client, asked)

    def replayed() -> Runner:
        transport = replay.ReplayTransport(replay.Cassette(interactions), speed="instant")
        client = httpx.Client(transport=transport)
        return lambda: post_all(client, asked)

    def session() -> Runner:
        client = httpx.Client()

        def run() -> None:
            with replay.use_cassette(path, record_mode="none", speed="instant"):
                post_all(client, asked)

        return run

    return [mocked, keyed, replayed, session]


def json_keyed_handler(answers: dict[bytes, list[bytes]]) -> Callable[[httpx.Request], Any]:
    """A MockTransport handler answering by the body's JSON key (`json_key`, as replay's
    index keys a body), its index built on the first request, as replay's is; a body sent
    byte for byte as recorded is looked up by its bytes, as replay's index does."""
    stream_class = mock_stream_class(httpx)
    index: dict[object, list[bytes]] = {}
    by_bytes: dict[bytes, tuple[str, object]] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        if not index:
            for body, chunks in answers.items():
                key = by_bytes[body] = json_key(body)
                index.setdefault(key, chunks)
        content = request.content
        key = by_bytes.get(content)
        chunks = index[json_key(content) if key is None else key]
        return httpx.Response(200, headers=SSE_HEADERS, stream=stream_class(chunks))

    return handler


def time_vcrpy(path: Path, asked: Asked) -> tuple[float, float]:
    """Seconds (wall, CPU) vcrpy takes to answer `asked` from its cassette, body matched."""
    import vcr

    match_on = ["method", "scheme", "host", "port", "path", "query", "body"]
    with vcr.use_cassette(str(path), record_mode="none", match_on=match_on):
        post_all(httpx.Client(), asked[:3])  # warm-up, in a cassette of its own
    with vcr.use_cassette(str(path), record_mode="none", match_on=match_on):
        client = httpx.Client()
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        post_all(client, asked)
        return time.perf_counter() - start, time.process_time() - cpu


def bench_match(config: Settings, workdir: Path, verdicts: list[Verdict]) -> Section:
    count = MATCH_INTERACTIONS
    section = Section(f"3. {count:,} interactions differing only by JSON body, shuffled")
    interactions = body_distinct(count)
    asked = [(match_payload(n), i.response.body) for n, i in enumerate(interactions)]
    random.Random(SEED).shuffle(asked)
    ours_path, vcr_path = workdir / "many.msgpack", workdir / "many.yaml"
    replay.Cassette(interactions).save(ours_path)
    save_vcr_cassette(vcr_path, interactions)

    contenders = match_contenders(interactions, asked, ours_path)
    floor_times, keyed_times, our_times, session_times = measure(
        contenders, config.match_repeats, 1
    )
    floor = Row("httpx.MockTransport, dict lookup by body", floor_times)
    keyed = Row("httpx.MockTransport, lookup by the body's JSON key", keyed_times)
    ours = Row("replay.ReplayTransport (in-memory cassette)", our_times)
    patched = Row("replay.use_cassette + httpx.Client(), incl. loading the file", session_times)
    sample = config.vcrpy_requests
    sampled, cpu = time_vcrpy(vcr_path, asked[:sample])
    vcrpy = Row(
        "vcrpy use_cassette(match_on=[…, body]) + httpx.Client()", [sampled * count / sample]
    )
    ratio, slower = ours.median / floor.median, vcrpy.median / ours.median
    section.lines += [
        "Each request is `client.post(url, json=…)` then `.read()`; the bodies differ only "
        f"in one string; the order is shuffled (seed {SEED}), the same for every contender; "
        "each answer is a 4-chunk SSE stream. The floor's handler finds the answer with one "
        "dict lookup on the raw body. replay's figures include building its match index "
        "on the first request. The second row is what matching by JSON costs, and no more: "
        "its handler keys every recorded body as replay's index does (`json_key`: key order, "
        "spacing, escapes and number forms do not count), on the first request, and finds "
        "the answer by the key (a body sent as recorded, by its bytes). Median of "
        f"{config.match_repeats} repeats of all {count:,} requests (vcrpy: see below).",
        "",
        *table([floor, keyed, ours, patched, vcrpy], floor),
        "",
        f"Per request: floor {floor.median / count * 1e6:.0f} µs, replay "
        f"{ours.median / count * 1e6:.0f} µs, vcrpy {vcrpy.median / count * 1e3:.1f} ms.",
        "",
    ]
    section.lines += [
        f"vcrpy's run took {ms(sampled)} of wall time and {ms(cpu)} of CPU time (they differ "
        "when other work competes for the cores).",
        "",
    ]
    if sample < count:
        section.lines += [
            f"vcrpy was timed on the first {sample} requests of the shuffled order only "
            f"(one run) and the time multiplied by {count / sample:.4g} "
            f"(`--vcrpy-all` times all {count:,}). That extrapolation is fair: vcrpy "
            "compares each request with the recorded ones in order until one matches, played "
            "or not, so in a shuffled order every request costs the same on average, however "
            "many were played before it.",
            "",
        ]
    section.lines += [
        f"**replay: {ratio:.2f}× the floor; vcrpy: {slower:.0f}× slower than replay.**",
        "",
    ]
    verdicts += [
        Verdict(
            "3. match",
            "1,000 body-distinct, shuffled: replay / MockTransport's dict lookup",
            f"{ratio:.2f}×",
            "≤ 1.10×",
            ratio <= 1.10,
        ),
        Verdict(
            "3. match",
            "matching by JSON alone: MockTransport keyed by JSON / its dict lookup",
            f"{keyed.median / floor.median:.2f}×",
            "reported",
            None,
        ),
        Verdict("3. match", "vcrpy / replay", f"{slower:.0f}×", "> 1", slower > 1),
    ]
    if ratio > 1.10:
        section.lines += hot_spots(contenders[2], runs=1)
    return section


# --- 4. timing fidelity at speed 1 ---------------------------------------------------------


@dataclass
class Trace:
    """When the client saw each chunk and the end, in seconds since it started the request."""

    arrivals: list[float]
    end: float


def trace_sync(interaction: replay.Interaction) -> Trace:
    cassette = replay.Cassette([interaction])
    client = httpx.Client(transport=replay.ReplayTransport(cassette, speed=1))
    arrivals = []
    start = time.perf_counter()
    with client.stream("POST", URL, json=stream_payload()) as response:
        for _ in response.iter_raw():
            arrivals.append(time.perf_counter() - start)
    return Trace(arrivals, time.perf_counter() - start)


async def _trace_async(interaction: replay.Interaction) -> Trace:
    cassette = replay.Cassette([interaction])
    transport = replay.AsyncReplayTransport(cassette, speed=1)
    arrivals = []
    async with httpx.AsyncClient(transport=transport) as client:
        start = time.perf_counter()
        async with client.stream("POST", URL, json=stream_payload()) as response:
            chunks: AsyncIterator[bytes] = response.aiter_raw()
            async for _ in chunks:
                arrivals.append(time.perf_counter() - start)
        return Trace(arrivals, time.perf_counter() - start)


def trace_async(interaction: replay.Interaction) -> Trace:
    return asyncio.run(_trace_async(interaction))


@dataclass
class Fidelity:
    gap_errors: list[float] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)
    drifts: list[float] = field(default_factory=list)


def fidelity(
    trace: Callable[[replay.Interaction], Trace], runs: int, rng: random.Random
) -> Fidelity:
    result = Fidelity()
    trace(gapped_stream(3, rng))  # warm-up
    for _ in range(runs):
        interaction = gapped_stream(TIMING_GAPS, rng)
        recorded = [chunk.at for chunk in interaction.response.chunks]
        seen = trace(interaction)
        if len(seen.arrivals) != len(recorded):
            raise AssertionError(f"{len(seen.arrivals)} chunks seen, {len(recorded)} recorded")
        for i in range(1, len(recorded)):
            gap = seen.arrivals[i] - seen.arrivals[i - 1]
            result.gap_errors.append(abs(gap - (recorded[i] - recorded[i - 1])))
        result.lateness += [s - r for s, r in zip(seen.arrivals, recorded, strict=True)]
        result.drifts.append(seen.end - interaction.response.end.at)
    return result


def distribution(values: Sequence[float]) -> str:
    return " | ".join(ms(v) for v in (median(values), quantile(values, 0.9), max(values)))


def bench_timing(config: Settings, verdicts: list[Verdict]) -> Section:
    section = Section(f"4. Timing fidelity: a {TIMING_GAPS}-gap stream at speed 1, real clock")
    rng = random.Random(SEED)
    runs = config.timing_runs
    section.lines += [
        f"{TIMING_GAPS + 1} chunks 10–30 ms apart (uniform, seeded), headers after 20 ms, "
        f"first chunk after 30 ms; {runs} runs, each a fresh stream, {runs * TIMING_GAPS} "
        "gaps in all. Times are taken by the client with `perf_counter` when `iter_raw` "
        "hands it each chunk, from just before it sends the request. *Gap error*: "
        "|seen gap − recorded gap|. *Lateness*: seen arrival − recorded arrival. *Drift*: "
        "seen end of stream − recorded end.",
        "",
        "| client | figure | median | p90 | max |",
        "|---|---|---:|---:|---:|",
    ]
    twins = [("sync (ReplayTransport)", trace_sync), ("async (AsyncReplayTransport)", trace_async)]
    for name, trace in twins:
        result = fidelity(trace, runs, rng)
        section.lines += [
            f"| {name} | gap error | {distribution(result.gap_errors)} |",
            f"| {name} | lateness | {distribution(result.lateness)} |",
            f"| {name} | drift (per run) | {distribution(result.drifts)} |",
        ]
        gap = median(result.gap_errors)
        drift = median(result.drifts)
        verdicts.append(
            Verdict("4. timing", f"median gap error, {name}", ms(gap), "< 1 ms", gap < 1e-3)
        )
        verdicts.append(
            Verdict("4. timing", f"median drift, {name}", ms(drift), "< 5 ms", abs(drift) < 5e-3)
        )
    section.lines.append("")
    return section


def bench_stamps(config: Settings, verdicts: list[Verdict]) -> Section:
    import stamps  # beside this script

    section = Section("5. Recording stamps while the client blocks its event loop")
    runs = config.timing_runs
    section.lines += [
        f"A {stamps.EVENTS}-event stream, one event every {stamps.GAP * 1000:.0f} ms, from a "
        f"local origin; the async client holds its loop up for {stamps.BLOCK:.0f} s once the "
        f"headers arrived, then reads on; the sync client is busy for {stamps.BLOCK:.0f} s "
        f"with the first event. {runs} recordings per row. *Stamp error*: "
        "|recorded `at` − the moment the origin sent the chunk| (scripted time after the "
        "recorded headers), over every event.",
        "",
        "| client | transport | median | p90 | max |",
        "|---|---|---:|---:|---:|",
    ]
    contenders: list[tuple[str, str, type[Any] | None]] = [
        (runner, name, transport)
        for runner in ("asyncio", "trio")
        for name, transport in (
            ("httpx.AsyncHTTPTransport (read in a thread)", None),
            ("a subclass of it (read on the loop)", stamps.CustomTransport),
        )
    ]
    contenders.append(("sync", "httpx.HTTPTransport, busy 1 s after the first event", None))
    for runner, name, transport in contenders:
        errors = stamps.stamp_errors(runs, runner, transport)
        section.lines.append(f"| {runner} | {name} | {distribution(errors)} |")
        if transport is None:
            worst = max(errors)
            blocked = "client busy 1 s" if runner == "sync" else "loop blocked 1 s"
            figure = f"max stamp error, {runner}, {blocked}"
            verdicts.append(Verdict("5. stamps", figure, ms(worst), "< 15 ms", worst < 0.015))
    section.lines.append("")
    section.lines += held_gil_lines(runs, verdicts)
    return section


def held_gil_lines(runs: int, verdicts: list[Verdict]) -> list[str]:
    """Benchmark 5, second part: the client holds its GIL (`network_stamps.py`)."""
    import network_stamps  # beside this script

    found = network_stamps.run(runs)
    worst = network_stamps.worst_with_stamper(found)
    figure = f"max stamp error, GIL held {network_stamps.HOLD * 1000:.0f} ms (stamper)"
    verdicts.append(Verdict("5. stamps", figure, ms(worst), "< 5 ms", worst < 0.005))
    return [
        f"The client holds its GIL (a C call) for {network_stamps.HOLD * 1000:.0f} ms after "
        f"the first of {network_stamps.EVENTS} events {network_stamps.GAP * 1000:.0f} ms "
        "apart, sent by an origin in its own process that writes its send time into each "
        f"event; {runs} recordings per row. *Stamp error*: the largest |recorded gap − sent "
        "gap| of a recording. The reader rows are replay with `REPLAY_STAMPER=off` (times "
        "taken in the client's process, as before issue 28).",
        "",
        *network_stamps.rows(found),
        "",
    ]


def bench_aiohttp(config: Settings, verdicts: list[Verdict]) -> Section:
    section = Section(f"6. The {STREAM_CHUNKS:,}-chunk stream through aiohttp, instant speed")
    try:
        import aiohttp_stream  # beside this script
    except ImportError:
        section.lines += ["aiohttp is not installed: this benchmark was skipped.", ""]
        return section
    repeats = max(5, config.stream_repeats // 10)  # a run takes about 0.1 s, not 5 ms
    section.lines += [
        "The stream of benchmark 1, POSTed and read with `response.content.iter_any()` by an "
        "aiohttp client (a fresh `ClientSession` per run), answered by `use_cassette(..., "
        'speed="instant")` vs a local `aiohttp.web` server (127.0.0.1, in a process of its '
        "own) that writes each chunk with `StreamResponse.write`. Replay stands in "
        "for that network and does less (no socket, no HTTP parsing, no loop turn: at "
        "instant speed the client's read takes the next chunk itself) while it hands the "
        "client every recorded chunk on its own; the server's client reads what has "
        "arrived, joined. Hence the target: no slower than the server "
        f"(ratio ≤ 1.0). Median of {repeats} repeats, after {config.warmup} warm-up round(s).",
        "",
    ]
    with aiohttp_stream.contenders(long_stream(STREAM_CHUNKS)) as found:
        floor_times, our_times = measure([found.served, found.replayed], repeats, config.warmup)
    floor = Row("aiohttp.web server on 127.0.0.1", floor_times)
    ours = Row("replay, instant speed", our_times)
    ratio = ours.median / floor.median
    reads = {name: median(counts) for name, counts in found.reads.items()}
    section.lines += [
        *table([floor, ours], floor),
        "",
        f"Reads per run (`iter_any` items): replay {reads['replayed']:,.0f}, "
        f"server {reads['served']:,.0f}.",
        "",
    ]
    verdicts.append(
        Verdict("6. aiohttp", "replay / aiohttp.web server", f"{ratio:.2f}", "≤ 1.0", ratio <= 1.0)
    )
    return section


def _skipped_without(section: Section, module: str) -> bool:
    """Whether `module` is missing (and `section` says the benchmark was skipped for it)."""
    if importlib.util.find_spec(module) is not None:
        return False
    section.lines += [f"{module} is not installed: this benchmark was skipped.", ""]
    return True


def bench_proxy(config: Settings, verdicts: list[Verdict]) -> Section:
    import proxy_load  # beside this script

    seconds = config.proxy_seconds
    section = Section(f"7. `replay proxy` under {proxy_load.CLIENTS} concurrent clients")
    if _skipped_without(section, "uvicorn"):
        return section
    section.lines += [
        f"{proxy_load.CLIENTS} clients (an `httpx.AsyncClient` each, one event loop) send a "
        f"request every {proxy_load.PERIOD:g} s each, staggered "
        f"({proxy_load.CLIENTS / proxy_load.PERIOD:.0f} requests/s in all), to a local origin "
        "(its own process) whose answer is a 3-event SSE stream taking 20 ms, and read it "
        f"whole; {seconds:.0f} s straight at the origin (the floor), then {seconds:.0f} s "
        "through `replay proxy` (a subprocess, recording to a temporary cassette), after "
        f"{proxy_load.WARMUP:.0f} s of warm-up each (not counted). A client answered late "
        "starts its next request at once, so a proxy that slows down shows as fewer "
        "requests per second. *Flat*: requests per second in the last third of the run over "
        "the first. Latency: from sending to the stream's end. Then SIGTERM, and the "
        "cassette is read back.",
        "",
    ]
    result = proxy_load.run(seconds)
    floor, proxied = result.floor, result.proxied
    section.lines += [*proxy_load.rows(result), "", *proxy_load.summary(result), ""]
    flat = proxied.flatness
    verdicts.append(
        Verdict("7. proxy", "throughput, last third / first", f"{flat:.2f}", "≥ 0.95", flat >= 0.95)
    )
    extra = proxied.quantile(0.99) - floor.quantile(0.99)
    verdicts.append(
        Verdict("7. proxy", "p99 latency, proxy − origin", ms(extra), "≤ 50 ms", extra <= 0.05)
    )
    lost = proxied.answered - result.saved
    verdicts.append(
        Verdict(
            "7. proxy", "answered but not in the cassette after SIGTERM", f"{lost}", "0", lost <= 0
        )
    )
    return section


# --- 8. the plugin's start-up ---------------------------------------------------------------


def bench_startup(config: Settings, workdir: Path, verdicts: list[Verdict]) -> Section:
    import suite  # beside this script

    section = Section("8. What the installed plugin adds to every pytest run")
    repeats = config.startup_repeats
    without, with_plugin = suite.startup_times(workdir, repeats)
    floor = Row("`-p no:replay`", without)
    ours = Row("replay's plugin loaded", with_plugin)
    added = ours.median - floor.median
    cpu = [median(suite.CPU_SECONDS[row.name]) for row in (floor, ours)]
    total, children = suite.plugin_imports()
    section.lines += [
        "`python -m pytest --co -q -p no:cacheprovider -p no:recording` of a one-test suite "
        "(a folder of its own with an empty `pytest.ini`), with replay's plugin and with "
        f"`-p no:replay`: fresh processes, taking turns, {repeats} of each after 2 warm-up "
        "rounds; medians of the whole process's wall time. The other plugins installed "
        "here (hypothesis, xdist, asyncio, timeout) load in both.",
        "",
        *table([floor, ours], floor),
        "",
        f"**Added by replay's plugin: {ms(added)}** (goal ≤ 15 ms). The difference of two "
        "medians, each of a whole process: read a few milliseconds either way as noise. In "
        f"CPU time (user + system, from `getrusage`): {ms(cpu[0])} without, {ms(cpu[1])} "
        f"with: {ms(cpu[1] - cpu[0])} added.",
        "",
        'Measured directly (`python -X importtime -c "import pytest, replay.plugin.hooks"`; '
        "pytest itself imports plugins through `importlib`, which `-X importtime` does not "
        f"see): importing the plugin once pytest is imported takes {ms(total)}; what it "
        "imports itself: "
        + (", ".join(f"`{name}` {ms(seconds)}" for name, seconds in children) or "nothing")
        + ".",
        "",
    ]
    verdicts.append(
        Verdict(
            "8. start-up",
            "added to `pytest --co` by the plugin",
            ms(added),
            "≤ 15 ms",
            added <= 0.015,
        )
    )
    return section


# --- 9. a suite of 200 tests ---------------------------------------------------------------


def bench_suite(config: Settings, workdir: Path, verdicts: list[Verdict]) -> Section:
    import suite  # beside this script

    tests = suite.TESTS
    section = Section(f"9. A suite of {tests} tests: replay's marker vs pytest-recording")
    folders = suite.write_suite(workdir / "suite")
    contenders = suite.suite_contenders(folders)
    rounds = config.suite_rounds
    times = suite.rounds(contenders, rounds, warmup=1)
    rows = [Row(c.name, t) for c, t in zip(contenders, times, strict=True)]
    floor, ours, vcr_floor, vcr = rows
    ours_each = (ours.median - floor.median) / tests
    vcr_each = (vcr.median - vcr_floor.median) / tests
    less = vcr_each / ours_each if ours_each > 0 else math.inf

    def cpu_each(row: Row, under: Row) -> float:
        spent = suite.CPU_SECONDS
        return (median(spent[row.name]) - median(spent[under.name])) / tests

    section.lines += [
        f"A generated module of {tests} tests, each POSTing its own JSON body and reading a "
        f"{suite.EVENTS}-event SSE answer (`iter_lines`) through a module-level "
        "`httpx.Client`, one cassette per test (at the default path of each plugin: "
        "`cassettes/test_suite/test_NNN.msgpack` for replay, written by "
        "`Cassette.save`; `.yaml` for pytest-recording, written by vcrpy's own persister), "
        "`--record-mode=none`. The floor's module builds the same `httpx.Client()`, with an "
        "`httpx.MockTransport` mounted for every URL whose handler builds the same answer "
        "(20 chunks). Each contender is a fresh `python -m pytest -q "
        "-p no:cacheprovider` process; the floor and replay run with `-p no:recording`; "
        "pytest-recording runs with replay's plugin loaded too (as a project with both "
        "installed has it; they share `--record-mode`), against a floor with both plugins "
        f"loaded. Taking turns, {rounds} round(s) after 1 warm-up round; medians of the "
        "process's wall time (start-up included: it is the same within each pair, and "
        "replay's first-use import of its library counts, once per run).",
        "",
        "| contender | median | min – max | CPU (user + system), median |",
        "|---|---:|---:|---:|",
        *(
            f"| {row.name} | {ms(row.median)} | {spread(row.times)} "
            f"| {ms(median(suite.CPU_SECONDS[row.name]))} |"
            for row in rows
        ),
        "",
        f"**Overhead per test over its floor: replay {ours_each * 1e3:.2f} ms, "
        f"pytest-recording {vcr_each * 1e3:.2f} ms ({less:.1f}× replay's).** Goal: replay "
        "≤ 0.5 ms and ≥ 10× less than pytest-recording. In CPU time: replay "
        f"{cpu_each(ours, floor) * 1e3:.2f} ms, pytest-recording "
        f"{cpu_each(vcr, vcr_floor) * 1e3:.2f} ms a test.",
        "",
    ]
    verdicts += [
        Verdict(
            "9. suite",
            f"replay's overhead per test ({tests} tests)",
            f"{ours_each * 1e3:.2f} ms",
            "≤ 0.5 ms",
            ours_each <= 0.0005,
        ),
        Verdict(
            "9. suite",
            "pytest-recording's overhead / replay's",
            f"{less:.1f}×",
            "≥ 10×",
            less >= 10,
        ),
    ]
    if ours_each > 0.0005 or less < 10:
        stats = suite.profile_replay_suite(folders["use_cassette"], workdir / "suite.prof")
        imports = suite.first_use_imports(workdir / "first-use")
        section.lines += [
            "What the first cassette of a run imports (`replay.session.lifecycle`, "
            "`replay.session.naming` and what they pull in, in a pytest process run as the "
            "suite's, after its plugins and "
            f"httpx; `-X importtime`): {ms(imports)} "
            f"once, {imports / tests * 1e6:.0f} µs of each test's share.",
            "",
            "Where replay's time goes: one run of replay's suite under cProfile (which "
            "inflates small calls: read the shares), per test. Own time: in replay's "
            "functions themselves, summed by part; cumulative: callees included, stdlib and "
            "msgpack too.",
            "",
            *suite.breakdown(stats, tests),
            "",
        ]
    return section


# --- 10. what recording costs ---------------------------------------------------------------


def bench_recording(config: Settings, verdicts: list[Verdict]) -> Section:
    import recording  # beside this script

    section = Section("10. Recording overhead: throughput, first event, CPU per chunk")
    repeats, first = config.recording_repeats, config.first_event_repeats
    result = recording.run(recording.BIG, repeats, first)
    section.lines += [
        "A sync `httpx.Client` reads with `iter_raw` from a local origin (`replay.testing.origin."
        "Origin`, a process of its own), live (`httpx.HTTPTransport()`, the floor) or through "
        "`replay.RecordingTransport(cassette, httpx.HTTPTransport())`. A fresh client per "
        "run, its keep-alive connection opened before the clock starts; taking turns; "
        f"medians of {repeats} runs ({first} for the first event). CPU: `time.process_time` "
        "of the whole process (the origin's is not in it), the client's thread alone by "
        "`time.thread_time`.",
        "",
        *recording.rows(result),
        "",
    ]
    found = recording.figures(result)
    ratio, extra_first, per_chunk = found.throughput, found.first_event, found.cpu_per_chunk
    verdicts += [
        Verdict(
            "10. recording",
            f"throughput, {recording.BIG // 2**20} MiB in 16 KiB chunks: recording / live",
            f"{ratio:.2f}×",
            "≥ 0.9×",
            ratio >= 0.9,
        ),
        Verdict(
            "10. recording",
            "the same, over a live client keeping every chunk",
            f"{found.throughput_kept:.2f}×",
            "reported",
            None,
        ),
        Verdict(
            "10. recording",
            "time to first event, recording − live",
            ms(extra_first),
            "≤ 1 ms",
            extra_first <= 0.001,
        ),
        Verdict(
            "10. recording",
            f"CPU per recorded chunk ({recording.EVENTS:,} events), over live",
            f"{per_chunk * 1e6:.1f} µs",
            "reported",
            None,
        ),
    ]
    return section


# --- 11. replay serve under load --------------------------------------------------------------


def bench_serve(config: Settings, verdicts: list[Verdict]) -> Section:
    import serve_load  # beside this script

    clients = serve_load.CLIENTS
    section = Section(f"11. `replay serve` under {clients} concurrent clients")
    if _skipped_without(section, "uvicorn"):
        return section
    seconds, instant = config.serve_seconds, config.serve_instant_seconds
    result = serve_load.run(seconds, instant)
    served = result.served_timed
    p50 = served.quantile(0.5, served.first_bytes) - serve_load.FIRST_AT
    p99 = served.quantile(0.99, served.first_bytes) - serve_load.FIRST_AT
    rate, floor = result.served_instant.rate, result.origin_instant.rate
    section.lines += [
        f"A cassette of one {serve_load.EVENTS}-event SSE stream, its headers recorded at "
        f"{serve_load.HEADERS_AT * 1e3:.0f} ms and its first event (the recorded time to "
        f"first byte) at {serve_load.FIRST_AT * 1e3:.0f} ms, events "
        f"{serve_load.GAP * 1e3:.0f} ms apart, served by `replay serve --repeat` (a "
        f"subprocess). {clients} clients (`bench/paced.py`: an `httpx.AsyncClient` each, one "
        "event loop) POST the recorded request. Speed 1: once a second each, staggered, "
        f"for {seconds:.0f} s after {serve_load.WARMUP:.0f} s of warm-up; TTFB is from "
        "sending to the first body byte; beside replay, the same clients against a local "
        "origin scripted with the same timing show what the clients and the machine add "
        f"anyway. Instant speed: back to back, for {instant:.0f} s after 1 s of warm-up; the "
        "floor is uvicorn (the server `replay serve` runs on) serving a bare ASGI app that "
        "sends the same chunks.",
        "",
        *serve_load.rows(result),
        "",
    ]
    verdicts += [
        Verdict("11. serve", "TTFB p50 at speed 1, over the recorded", ms(p50), "reported", None),
        Verdict(
            "11. serve", "TTFB p99 at speed 1, over the recorded", ms(p99), "≤ 20 ms", p99 <= 0.02
        ),
        Verdict(
            "11. serve",
            "streams/s at instant speed: replay serve / bare uvicorn app",
            f"{rate:.0f}/s ({rate / floor:.2f}×)",
            "reported",
            None,
        ),
    ]
    return section


# --- report ---------------------------------------------------------------------------------


def version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> str:
    if not hasattr(os, "getloadavg"):
        return "unknown"
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def machine(quick: bool) -> list[str]:
    """The run's circumstances, taken before it starts."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    packages = ", ".join(
        f"{name} {version(name)}"
        for name in ("httpx", "httpx2", "aiohttp", "vcrpy", "msgpack", "PyYAML")
    )
    return [
        f"- date: {now}; mode: {'`--quick`' if quick else 'default'}",
        f"- CPU: {os.cpu_count()} × {cpu_model()}; load average at start: {load_average()}",
        f"- OS: {platform.platform()}",
        f"- Python {platform.python_version()} ({platform.python_implementation()})",
        f"- replay {replay.__version__}; {packages}",
    ]


def render(
    circumstances: Sequence[str], verdicts: Sequence[Verdict], sections: Sequence[Section]
) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Written by `python bench/run.py` (see `bench/README.md`); every figure below comes "
        "from one run on the machine described here. Ratios are against a floor measured in "
        "the same run.",
        "",
        *circumstances,
        "",
        "## Targets",
        "",
        "| benchmark | figure | this run | target | met |",
        "|---|---|---:|---:|:---:|",
    ]
    for v in verdicts:
        met = "—" if v.met is None else "yes" if v.met else "**NO — missed**"
        lines.append(f"| {v.benchmark} | {v.figure} | {v.value} | {v.target} | {met} |")
    lines += [
        "",
        "—: reported; the issue sets no goal for it.",
        "",
    ]
    for section in sections:
        lines += [f"## {section.title}", "", *section.lines]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--quick", action="store_true", help="fewer repeats (about 40 s)")
    parser.add_argument(
        "--vcrpy-all",
        action="store_true",
        help=f"time vcrpy on all {MATCH_INTERACTIONS:,} requests, not a sample (about a minute)",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit with status 1 if a target was missed"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=Path(__file__).resolve().parent / "RESULTS.md",
        help="where to write the results (default: bench/RESULTS.md)",
    )
    parser.add_argument(
        "--only",
        type=lambda text: {int(n) for n in text.split(",")},
        default=None,
        metavar="N,N",
        help="run only these benchmarks (by number, e.g. 8,9); the report says so",
    )
    args = parser.parse_args(argv)
    config = settings(args.quick, args.vcrpy_all)
    verdicts: list[Verdict] = []
    sections: list[Section] = []
    circumstances = machine(args.quick)
    if args.only is not None:
        chosen = ", ".join(str(n) for n in sorted(args.only))
        circumstances.append(f"- only benchmarks {chosen} (`--only`)")
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
        workdir = Path(tmp)
        steps: list[Callable[[], Section]] = [
            lambda: bench_stream(config, verdicts),
            lambda: bench_load(config, workdir, verdicts),
            lambda: bench_match(config, workdir, verdicts),
            lambda: bench_timing(config, verdicts),
            lambda: bench_stamps(config, verdicts),
            lambda: bench_aiohttp(config, verdicts),
            lambda: bench_proxy(config, verdicts),
            lambda: bench_startup(config, workdir, verdicts),
            lambda: bench_suite(config, workdir, verdicts),
            lambda: bench_recording(config, verdicts),
            lambda: bench_serve(config, verdicts),
        ]
        for number, step in enumerate(steps, start=1):
            if args.only is not None and number not in args.only:
                continue
            section = step()
            sections.append(section)
            print(f"{section.title}: done ({time.perf_counter() - began:.1f} s)", file=sys.stderr)
    circumstances = [
        *circumstances,
        f"- the run took {time.perf_counter() - began:.0f} s; load average at the end: "
        f"{load_average()} (other work on the machine shows up here)",
    ]
    report = render(circumstances, verdicts, sections)
    args.output.write_text(report)
    print(report)
    print(f"wrote {args.output} in {time.perf_counter() - began:.1f} s", file=sys.stderr)
    missed = [v for v in verdicts if v.met is False]
    for v in missed:
        print(
            f"target missed: {v.benchmark}: {v.figure} = {v.value} (target {v.target})",
            file=sys.stderr,
        )
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
