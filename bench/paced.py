"""Many concurrent streaming clients, paced, on one event loop (benchmarks 7 and 11).

Each client is an `httpx.AsyncClient` of its own. It POSTs `payload` every `period`
seconds (staggered across the clients, so the load is even; `period=0` asks back to back),
reads the whole answer, checks it, and notes how long the first body byte and the whole
answer took. A client answered late starts its next request at once (no catch-up burst): a
server that slows down shows as fewer requests per second. Requests sent in the first
`warmup` seconds, while the connections open, are not counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import ssl
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx


@dataclass
class Load:
    """What the clients saw in one run."""

    seconds: float
    latencies: list[float] = field(default_factory=list)  # sending to the stream's end
    first_bytes: list[float] = field(default_factory=list)  # sending to the first body byte
    done_at: list[float] = field(default_factory=list)  # seconds since the run began
    errors: list[str] = field(default_factory=list)
    answered: int = 0  # requests answered in full, warm-up included

    @property
    def per_second(self) -> list[int]:
        """Requests finished in each whole second of the run."""
        counts = [0] * int(self.seconds)
        for at in self.done_at:
            if int(at) < len(counts):
                counts[int(at)] += 1
        return counts

    @property
    def flatness(self) -> float:
        """Requests per second in the last third of the run over those in the first."""
        counts = self.per_second
        third = max(1, len(counts) // 3)
        return statistics.mean(counts[-third:]) / max(1e-9, statistics.mean(counts[:third]))

    @property
    def rate(self) -> float:
        """Requests answered in full per second (warm-up left out)."""
        return len(self.latencies) / self.seconds

    def quantile(self, q: float, values: list[float] | None = None) -> float:
        ordered = sorted(self.latencies if values is None else values)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass(frozen=True)
class Ask:
    """One kind of request and the answer it must get."""

    url: str
    payload: Mapping[str, object]
    expected: bytes


async def _ask(client: httpx.AsyncClient, ask: Ask) -> tuple[str | None, float]:
    """Send one request and read its whole answer: what went wrong, if anything, and when
    (`perf_counter`) its first body byte came."""
    first = math.inf
    body = bytearray()
    try:
        async with client.stream("POST", ask.url, json=dict(ask.payload)) as response:
            async for chunk in response.aiter_raw():
                if first == math.inf:
                    first = time.perf_counter()
                body += chunk
    except httpx.HTTPError as error:
        return f"{type(error).__name__}: {error}", first
    if response.status_code != 200 or body != ask.expected:
        return f"status {response.status_code}, {len(body)} bytes", first
    return None, first


async def _client(
    client: httpx.AsyncClient,
    ask: Ask,
    first: float,
    period: float,
    load: Load,
    window: tuple[float, float, float],
) -> None:
    """One client's requests; `window`: (warm-up start, counted start, end), `perf_counter`."""
    warm, began, until = window
    start = warm + first
    while start < until:
        await asyncio.sleep(max(0.0, start - time.perf_counter()))
        sent = time.perf_counter()
        error, first_byte = await _ask(client, ask)
        done = time.perf_counter()
        if error is not None:
            load.errors.append(error)
        else:
            load.answered += 1
            if sent >= began:  # not a warm-up request
                load.latencies.append(done - sent)
                load.first_bytes.append(first_byte - sent)
                load.done_at.append(done - began)
        start = max(start + period, time.perf_counter())


async def _drive(ask: Ask, clients: int, seconds: float, period: float, warmup: float) -> Load:
    load = Load(seconds)
    tls = ssl.create_default_context()  # one for all: each client making its own takes long
    async with contextlib.AsyncExitStack() as stack:
        made = [
            await stack.enter_async_context(httpx.AsyncClient(timeout=30.0, verify=tls))
            for _ in range(clients)
        ]
        warm = time.perf_counter()
        window = (warm, warm + warmup, warm + warmup + seconds)
        await asyncio.gather(
            *(
                _client(client, ask, period * n / clients, period, load, window)
                for n, client in enumerate(made)
            )
        )
    return load


def drive(ask: Ask, clients: int, seconds: float, period: float, warmup: float) -> Load:
    """Run `clients` clients asking `ask` every `period` seconds each, for `warmup` seconds
    not counted and then `seconds` counted."""
    return asyncio.run(_drive(ask, clients, seconds, period, warmup))
