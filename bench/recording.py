"""What recording costs a client (benchmark 10 of `run.py`).

A local origin (`replay.testing.origin.Origin`, in a process of its own, so that its CPU is not
counted) serves three streams; a sync `httpx.Client` reads each with `iter_raw`, either live
(the floor: `httpx.HTTPTransport()`) or through `replay.RecordingTransport(cassette,
httpx.HTTPTransport())`, which stamps and stores every chunk (read by the client's thread
while it keeps up, by a worker thread that watches it while it is away):

- throughput: a body of `BIG` bytes in `BLOCK`-byte HTTP chunks, sent as fast as the origin
  can; the figure is live time / recording time (≥ 0.9 is the goal);
- time to first event: from sending the request (on an open keep-alive connection) to the
  first chunk in the client's hands, the origin sending it at once after the headers;
- CPU per recorded chunk: the process's CPU time (every thread: the watching thread's too) to
  read a stream of `EVENTS` SSE events, recording minus live, divided by `EVENTS`.

Each contender gets a fresh client (and cassette) per run, opened outside the timed region;
the contenders take turns; medians.
"""

from __future__ import annotations

import gc
import json
import resource
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx
import servers  # beside this script

import replay
from replay.testing import Script

BLOCK = 16 * 1024
BIG = 50 * 1024 * 1024
EVENTS = 10_000
OCTETS = (("content-type", "application/octet-stream"),)


def event(number: int) -> bytes:
    payload = {"type": "response.output_text.delta", "sequence_number": number, "delta": " tok"}
    return f"event: response.output_text.delta\ndata: {json.dumps(payload)}\n\n".encode()


def routes(big: int) -> dict[str, Script]:
    block = bytes(range(256)) * (BLOCK // 256)
    return {
        "/big": Script(chunks=((0.0, block),) * (big // BLOCK), headers=OCTETS),
        "/first": Script(chunks=((0.0, event(0)), (0.005, event(1)), (0.005, event(2)))),
        "/events": Script(chunks=tuple((0.0, event(n)) for n in range(EVENTS))),
        "/warm": Script(chunks=((0.0, b"data: ok\n\n"),)),
    }


@dataclass
class Client:
    """A client, live or recording, with its connection open; the cassette it records into."""

    client: httpx.Client
    cassette: replay.Cassette | None
    keep: bool  # keep every chunk, as a recording must (in a list)


LIVE, KEPT, RECORDING = "live", "kept", "recording"


def open_client(base: str, mode: str) -> Client:
    inner = httpx.HTTPTransport()
    cassette = replay.Cassette() if mode == RECORDING else None
    transport = inner if cassette is None else replay.RecordingTransport(cassette, inner)
    client = httpx.Client(transport=transport, base_url=base, timeout=60)
    client.get("/warm").read()  # the connection is open before the clock starts
    return Client(client, cassette, keep=mode == KEPT)


@dataclass
class Reading:
    """One read of a stream: wall seconds to the first chunk and to the end, CPU seconds,
    bytes."""

    first: float
    wall: float
    cpu: float
    client_cpu: float  # the client's thread alone (`time.thread_time`)
    size: int
    faults: int  # minor page faults of the process (fresh memory touched)


def read(opened: Client, path: str) -> Reading:
    gc.collect()
    size, first = 0, 0.0
    kept: list[bytes] = []
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
    with opened.client.stream("GET", path) as response:
        for chunk in response.iter_raw():
            if not size:
                first = time.perf_counter() - start
            size += len(chunk)
            if opened.keep:
                kept.append(chunk)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    own = time.thread_time() - own
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    opened.client.close()  # the recording is complete once the body ended; this frees it
    if opened.cassette is not None and len(opened.cassette.interactions) != 2:
        raise AssertionError("the recording transport did not record the stream")
    return Reading(first, wall, cpu, own, size, faults)


def interleaved(
    base: str, path: str, repeats: int, warmup: int, modes: Sequence[str] = (LIVE, RECORDING)
) -> dict[str, list[Reading]]:
    """Readings of `path` by mode (`LIVE`, `KEPT`, `RECORDING`), taking turns in rotating
    order, a fresh client each run."""
    found: dict[str, list[Reading]] = {mode: [] for mode in modes}
    for number in range(warmup + repeats):
        shift = number % len(modes)
        for mode in [*modes[shift:], *modes[:shift]]:
            reading = read(open_client(base, mode), path)
            if number >= warmup:
                found[mode].append(reading)
    return found


@dataclass
class Result:
    big: int
    throughput: dict[str, list[Reading]]
    first: dict[str, list[Reading]]
    events: dict[str, list[Reading]]


def run(big: int, repeats: int, first_repeats: int) -> Result:
    """Every figure: the big body, the first event, the 10,000 events."""
    with servers.origin(routes(big)) as base:
        return Result(
            big,
            interleaved(base, "/big", repeats, 1, (LIVE, KEPT, RECORDING)),
            interleaved(base, "/first", first_repeats, 3),
            interleaved(base, "/events", repeats, 1),
        )


def median_of(readings: Sequence[Reading], figure: Callable[[Reading], float]) -> float:
    return statistics.median(figure(r) for r in readings)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _wall(r: Reading) -> float:
    return r.wall


def _first(r: Reading) -> float:
    return r.first


def _cpu(r: Reading) -> float:
    return r.cpu


def pair(found: dict[str, list[Reading]], figure: Callable[[Reading], float]) -> list[float]:
    """The median `figure` of each mode, in the order the modes were measured."""
    return [median_of(readings, figure) for readings in found.values()]


def rows(result: Result) -> list[str]:
    """The results as Markdown tables: the figures, then where the big body's time goes."""
    mb = result.big / 1e6
    live, kept, rec = pair(result.throughput, _wall)
    first, cpu, ev_wall = (
        pair(result.first, _first),
        pair(result.events, _cpu),
        pair(result.events, _wall),
    )
    return [
        "| figure | live *(floor)* | recording | recording vs live |",
        "|---|---:|---:|---:|",
        f"| {mb:.0f} MB in {BLOCK // 1024} KB chunks: wall time | {ms(live)} | {ms(rec)} "
        f"| {live / rec:.2f}× the throughput |",
        f"| same: throughput | {mb / live:.0f} MB/s | {mb / rec:.0f} MB/s | |",
        f"| same, the live client keeping every chunk | {ms(kept)} | {ms(rec)} "
        f"| {kept / rec:.2f}× the throughput |",
        f"| time to first event | {ms(first[0])} | {ms(first[1])} "
        f"| {(first[1] - first[0]) * 1e3:+.2f} ms |",
        f"| {EVENTS:,} events: CPU time (all threads) | {ms(cpu[0])} | {ms(cpu[1])} "
        f"| {(cpu[1] - cpu[0]) / EVENTS * 1e6:+.1f} µs per chunk |",
        f"| same: wall time | {ms(ev_wall[0])} | {ms(ev_wall[1])} "
        f"| {ev_wall[1] / ev_wall[0]:.2f}× |",
        "",
        *breakdown(result),
    ]


def breakdown(result: Result) -> list[str]:
    """Wall and CPU time (by thread) of the big body: live, live keeping every chunk (as a
    recording must), recording; per chunk over live."""
    chunks = result.big // BLOCK
    figures: list[tuple[str, Callable[[Reading], float]]] = [
        ("wall time", _wall),
        ("CPU, every thread", _cpu),
        ("CPU, the client's thread", lambda r: r.client_cpu),
        ("CPU, other threads (replay's watcher)", lambda r: r.cpu - r.client_cpu),
    ]
    lines = [
        f"Where the time of the {result.big / 1e6:.0f} MB body goes ({chunks:,} chunks), "
        "medians; *kept*: the live client appending each chunk to a list, as a recording "
        "must keep them (fresh memory for every chunk instead of the same reused buffer):",
        "",
        "| part | live | live, kept | recording | kept − live, per chunk "
        "| recording − kept, per chunk |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, figure in figures:
        live, kept, rec = pair(result.throughput, figure)
        lines.append(
            f"| {name} | {ms(live)} | {ms(kept)} | {ms(rec)} "
            f"| {(kept - live) / chunks * 1e6:+.1f} µs | {(rec - kept) / chunks * 1e6:+.1f} µs |"
        )
    live, kept, rec = pair(result.throughput, lambda r: r.faults)
    lines.append(
        f"| page faults (fresh memory touched) | {live:,.0f} | {kept:,.0f} | {rec:,.0f} "
        f"| {(kept - live) / chunks:+.1f} | {(rec - kept) / chunks:+.1f} |"
    )
    return lines


@dataclass
class Figures:
    throughput: float  # live wall time / recording wall time
    throughput_kept: float  # the same, the live client keeping every chunk
    first_event: float  # extra seconds to the first event
    cpu_per_chunk: float  # extra CPU seconds per chunk


def figures(result: Result) -> Figures:
    """The figures the targets judge."""
    live, kept, rec = pair(result.throughput, _wall)
    first = pair(result.first, _first)
    cpu = pair(result.events, _cpu)
    return Figures(live / rec, kept / rec, first[1] - first[0], (cpu[1] - cpu[0]) / EVENTS)


if __name__ == "__main__":
    print("\n".join(rows(run(BIG, 3, 10))))
