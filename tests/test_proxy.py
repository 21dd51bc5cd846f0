"""`replay proxy` saving and concurrency, as a user runs it: a subprocess on 127.0.0.1 in
front of a local origin, its cassette read back from disk (the rest of its behaviour is in
`test_serve.py`)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_serve import run_replay, running

import replay
from replay.store.file import dumps
from replay.testing import Origin, Script

EVENT = b"data: one\n\n"
QUICK = Script(chunks=[(0.0, EVENT), (0.01, EVENT)])
HANG = Script(chunks=[(0.0, EVENT)], end="hang")


@pytest.fixture(scope="module")
def upstream() -> Iterator[Origin]:
    with Origin({"/quick": QUICK, "/hang": HANG}) as server:
        yield server


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "proxied.msgpack"


def ask_at_once(url: str, count: int) -> list[int]:
    """Send `count` requests to `url` at the same time (`?n=0`, `?n=1`, ...); the statuses."""

    async def ask_all() -> list[int]:
        limits = httpx.Limits(max_connections=count)
        async with httpx.AsyncClient(limits=limits, timeout=30) as client:
            answers = await asyncio.gather(
                *(client.get(url, params={"n": n}) for n in range(count))
            )
        return [answer.status_code for answer in answers]

    return asyncio.run(ask_all())


def queries(path: Path) -> list[str]:
    return sorted(
        httpx.URL(i.request.url).params["n"] for i in replay.Cassette.load(path).interactions
    )


def held(path: Path) -> int:
    return len(replay.Cassette.load(path).interactions) if path.exists() else 0


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_a_stopped_proxy_has_saved_every_interaction_it_finished(
    upstream: Origin, out: Path, how: signal.Signals
) -> None:
    args = ("proxy", "--target", upstream.url, "-o", str(out), "--save-interval", "60")
    with running(*args) as proxy:
        assert ask_at_once(f"{proxy.url}/quick", 40) == [200] * 40
        assert proxy.stop(how) == 0
    assert queries(out) == sorted(str(n) for n in range(40))


def test_the_proxy_saves_a_burst_together_not_one_interaction_at_a_time(
    upstream: Origin, out: Path
) -> None:
    args = ("proxy", "--target", upstream.url, "-o", str(out), "--save-interval", "60")
    with running(*args) as proxy, httpx.Client() as client:
        client.get(f"{proxy.url}/quick", params={"n": 0})
        deadline = time.monotonic() + 10
        while held(out) < 1:  # after a quiet spell an interaction is saved at once
            assert time.monotonic() < deadline, "the first interaction was not saved"
            time.sleep(0.02)
        first_save = out.stat().st_ino
        for n in range(1, 11):
            client.get(f"{proxy.url}/quick", params={"n": n})
        proxy.wait_for("?n=10")  # recorded, and its save is due within the interval
        assert (held(out), out.stat().st_ino) == (1, first_save)  # the file was not rewritten
        assert proxy.stop() == 0
    assert queries(out) == sorted(str(n) for n in range(11))


def test_the_proxy_saves_while_it_runs_within_the_save_interval(
    upstream: Origin, out: Path
) -> None:
    args = ("proxy", "--target", upstream.url, "-o", str(out), "--save-interval", "0.2")
    with running(*args) as proxy:
        for _ in range(3):  # bursts, saved in batches; the last within the interval
            assert ask_at_once(f"{proxy.url}/quick", 10) == [200] * 10
        deadline = time.monotonic() + 10
        while held(out) < 30:
            assert time.monotonic() < deadline, "the cassette was not saved while running"
            time.sleep(0.02)
        assert proxy.process.poll() is None


def test_the_proxys_file_is_the_cassette_the_store_writes(upstream: Origin, out: Path) -> None:
    with running("proxy", "--target", upstream.url, "-o", str(out)) as proxy:
        assert ask_at_once(f"{proxy.url}/quick", 20) == [200] * 20
        assert proxy.stop() == 0
    assert out.read_bytes() == dumps(replay.Cassette.load(out).interactions)


def test_the_proxy_logs_each_interaction_on_a_line_of_its_own(upstream: Origin, out: Path) -> None:
    with running("proxy", "--target", upstream.url, "-o", str(out)) as proxy:
        assert ask_at_once(f"{proxy.url}/quick", 40) == [200] * 40
        assert proxy.stop() == 0
    recorded = [line for line in proxy.lines if "recorded" in line]
    assert len(recorded) == 40
    assert all(line.startswith("recorded GET ") for line in recorded)


def test_the_proxy_warns_of_a_key_in_a_response_body_without_showing_it(out: Path) -> None:
    key = "sk-proj-EchoedByTheUpstreamUnique0123456789"
    with (
        Origin({"/key": Script(chunks=[(0.0, f"data: {key}\n\n".encode())])}) as origin,
        running("proxy", "--target", origin.url, "-o", str(out)) as proxy,
    ):
        httpx.get(f"{proxy.url}/key?token=opaque-1")
        assert proxy.stop() == 0

    (warning,) = [line for line in proxy.lines if "shaped like a key" in line]
    assert "GET " in warning
    assert "/key?token=REDACTED" in warning
    assert key not in "\n".join(proxy.lines)


def test_the_proxy_streams_to_more_clients_at_once_than_a_default_pool_holds(
    upstream: Origin, out: Path
) -> None:
    streams = 130  # httpx's pools hold 100 connections by default

    async def first_events(url: str) -> int:
        arrived = 0

        async def one(client: httpx.AsyncClient) -> None:
            nonlocal arrived
            async with client.stream("GET", url) as response:
                async for _ in response.aiter_raw():
                    arrived += 1
                    await asyncio.sleep(60)  # the stream stays open, as a long answer's would

        limits = httpx.Limits(max_connections=streams)
        async with httpx.AsyncClient(limits=limits, timeout=30) as client:
            tasks = [asyncio.create_task(one(client)) for _ in range(streams)]
            deadline = time.monotonic() + 20
            while arrived < streams and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return arrived

    with running("proxy", "--target", upstream.url, "-o", str(out)) as proxy:
        assert asyncio.run(first_events(f"{proxy.url}/hang")) == streams


def test_the_proxy_refuses_a_negative_save_interval(upstream: Origin, out: Path) -> None:
    result = run_replay(
        "proxy", "--target", upstream.url, "-o", str(out), "--port", "0", "--save-interval", "-1"
    )
    assert result.returncode == 1
    assert result.stderr.startswith("replay: error: the save interval must be 0 or more seconds")
    assert not out.exists()


def test_the_proxy_refuses_a_read_only_cassette_before_it_serves(tmp_path: Path) -> None:
    path = tmp_path / "kept.msgpack"
    replay.Cassette().save(path)
    path.chmod(0o444)
    args = ("proxy", "--target", "http://127.0.0.1:9", "-o", str(path), "--port", "0")
    result = run_replay(*args, "--overwrite")
    assert result.returncode == 1
    assert "read-only" in result.stderr
    assert "proxying" not in result.stderr


def test_the_proxy_refuses_an_existing_cassette_without_overwrite(
    upstream: Origin, out: Path
) -> None:
    with running("proxy", "--target", upstream.url, "-o", str(out)) as proxy:
        assert ask_at_once(f"{proxy.url}/quick", 3) == [200] * 3
        assert proxy.stop(signal.SIGTERM) == 0
    before = out.read_bytes()
    assert held(out) == 3
    result = run_replay("proxy", "--target", upstream.url, "-o", str(out), "--port", "0")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert str(out) in result.stderr
    assert "--overwrite" in result.stderr
    assert "proxying" not in result.stderr
    assert out.read_bytes() == before


def test_the_proxy_replaces_an_existing_cassette_with_overwrite(
    upstream: Origin, out: Path
) -> None:
    with running("proxy", "--target", upstream.url, "-o", str(out)) as proxy:
        assert ask_at_once(f"{proxy.url}/quick", 3) == [200] * 3
        assert proxy.stop(signal.SIGTERM) == 0
    args = ("proxy", "--target", upstream.url, "-o", str(out), "--overwrite")
    with running(*args) as proxy:
        assert ask_at_once(f"{proxy.url}/quick", 1) == [200]
        assert proxy.stop(signal.SIGTERM) == 0
    assert held(out) == 1


def test_the_proxys_help_says_an_existing_cassette_needs_overwrite() -> None:
    result = run_replay("proxy", "--help")
    assert "--overwrite" in result.stdout
    assert "never merged" in " ".join(result.stdout.split())


def test_the_proxy_refuses_a_cassette_its_directory_cannot_take(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    out = tmp_path / "afile" / "new.msgpack"
    result = run_replay("proxy", "--target", "http://127.0.0.1:9", "-o", str(out), "--port", "0")
    assert result.returncode == 1
    assert "not a directory" in result.stderr
    assert "proxying" not in result.stderr
