"""Streams that resume: a drop and its resume recorded as one linked scenario and replayed
offline, a resume from the wrong place refused clearly, and the `resume` fault that drops a
stream recorded whole and answers the client's resume from the same recording.

Against a real loopback origin: an SSE stream that drops after event 5 and a real
reconnect loop (httpx + httpx-sse, `Last-Event-ID`); an OpenAI Responses background stream
that drops after sequence 7 and the openai SDK's own resume
(`responses.retrieve(id, stream=True, starting_after=7)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs

import httpx
import httpx_sse
import openai
import pytest
from commands import replay_text

import replay
from replay import faults
from replay.inspect.check import check_files
from replay.matching import MatchIndex
from replay.testing import Origin, Script
from replay.testing.origin import SeenRequest
from replay.testing.streams import HELLO_TEXT, responses_hello

pytest_plugins = ["pytester"]

SSE_WORDS = [f"w{n} " for n in range(1, 11)]
SSE_TEXT = "".join(SSE_WORDS)
RESPONSE_ID = "resp_4b71d12c86d94e719c7e3984a7bb7941"


def _sse_event(number: int) -> tuple[float, bytes]:
    return (0.002, f"id: {number}\ndata: {SSE_WORDS[number - 1]}\n\n".encode())


def _sse_route(drop_after: int | None, repeat: int = 0) -> object:
    """Events 1..10, each with its `id:`; the first connection drops after `drop_after`; a
    resume (`Last-Event-ID: N`) gets the events after N (`repeat`: a faulty server's, which
    sends that many before them again)."""

    def answer(seen: SeenRequest) -> Script:
        last = seen.header("last-event-id")
        first = 1 if last is None else int(last) + 1 - repeat
        end = 10 if last is not None or drop_after is None else drop_after
        chunks = [_sse_event(n) for n in range(first, end + 1)]
        return Script(chunks=chunks, end="eof" if end == 10 else "drop")

    return answer


def read_sse(client: httpx.Client, url: str, *, skip: int = 0) -> tuple[str, int]:
    """A reconnecting SSE client: the text it assembles and how many connections it made.

    `skip`: a buggy client, which resumes from `skip` events before the last one it saw.
    """
    seen: list[tuple[str, str]] = []
    for connection in range(1, 6):
        headers = {}
        if seen:
            headers["Last-Event-ID"] = seen[-1 - skip][0]
            del seen[len(seen) - skip :]
        try:
            with httpx_sse.connect_sse(client, "GET", url, headers=headers) as source:
                for event in source.iter_sse():
                    seen.append((event.id, event.data))
            return "".join(data for _, data in seen), connection
        except httpx.RemoteProtocolError:
            continue
    raise AssertionError("the stream never finished")


def test_an_sse_drop_and_its_resume_replay_offline_as_recorded(tmp_path: Path) -> None:
    cassette = tmp_path / "sse.msgpack"
    with Origin({"/events": _sse_route(drop_after=5)}) as origin:
        url = f"{origin.url}/events"
        with replay.use_cassette(cassette, record_mode="once"), httpx.Client() as client:
            assert read_sse(client, url) == (SSE_TEXT, 2)
        assert [r.header("last-event-id") for r in origin.requests] == [None, "5"]
        hits = len(origin.requests)
        with replay.use_cassette(cassette, record_mode="none") as used, httpx.Client() as client:
            assert read_sse(client, url) == (SSE_TEXT, 2)
        assert len(origin.requests) == hits  # offline: 0 hits
        assert used.all_played


def test_a_resume_from_the_wrong_place_is_a_clear_mismatch(tmp_path: Path) -> None:
    cassette = tmp_path / "sse.msgpack"
    with Origin({"/events": _sse_route(drop_after=5)}) as origin:
        url = f"{origin.url}/events"
        with replay.use_cassette(cassette, record_mode="once"), httpx.Client() as client:
            read_sse(client, url)
    with (
        replay.use_cassette(cassette, record_mode="none"),
        httpx.Client() as client,
        pytest.raises(replay.CassetteMismatchError) as caught,
    ):
        read_sse(client, url, skip=1)  # resumes from event 4
    message = str(caught.value)
    assert "resume point differs: the client resumes after event id '4' (Last-Event-ID: 4); " in (
        message
    )
    assert "the recorded request resumed after event id '5' (Last-Event-ID: 5)" in message


def test_check_follows_the_numbers_across_the_resume(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.msgpack", tmp_path / "bad.msgpack"
    for path, repeat in ((good, 0), (bad, 1)):
        with (
            Origin({"/events": _sse_route(drop_after=5, repeat=repeat)}) as origin,
            replay.use_cassette(path, record_mode="once"),
            httpx.Client() as client,
        ):
            read_sse(client, f"{origin.url}/events")

    checked = replay_text("check", str(good))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{good} #0 event - stream.truncated: note: " in checked.stdout
    assert "(a later request resumes it)" in checked.stdout
    broken = replay_text("check", str(bad))
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert (
        f"{bad} #1 event 0 resume.continues: error: resumed after event id '5' "
        "(Last-Event-ID: 5), the stream starts at 5: it repeats 5..5"
    ) in broken.stdout


def test_the_resume_fault_resumes_an_sse_stream_recorded_whole(tmp_path: Path) -> None:
    cassette = tmp_path / "whole.msgpack"
    with Origin({"/events": _sse_route(drop_after=None)}) as origin:
        url = f"{origin.url}/events"
        with replay.use_cassette(cassette, record_mode="once"), httpx.Client() as client:
            assert read_sse(client, url) == (SSE_TEXT, 1)
    fault = faults.resume(after_events=5)
    with replay.use_cassette(cassette, faults=[fault]) as used, httpx.Client() as client:
        assert read_sse(client, url) == (SSE_TEXT, 2)
    assert used.all_played


# --- OpenAI Responses, background mode -----------------------------------------------------

_EVENTS = responses_hello(scale=0.01)


def _responses_routes(drop_after: int | None) -> dict[str, object]:
    """`POST /v1/responses` streams sequence 0..17 (dropping after `drop_after`); `GET
    /v1/responses/{id}?stream=true&starting_after=N` the events after N."""

    def resumed(seen: SeenRequest) -> Script:
        after = int(parse_qs(seen.query)["starting_after"][0])
        return Script(chunks=_EVENTS[after + 1 :])

    first = _EVENTS if drop_after is None else _EVENTS[: drop_after + 1]
    return {
        "/v1/responses": Script(chunks=first, end="eof" if drop_after is None else "drop"),
        f"/v1/responses/{RESPONSE_ID}": resumed,
    }


def read_background(base_url: str, *, skip: int = 0) -> tuple[str, list[int]]:
    """The openai SDK in background mode, resuming a dropped stream by its sequence number:
    the text and the `starting_after` of each resume."""
    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    text: list[str] = []
    resumes: list[int] = []
    last, response_id = -1, ""
    stream = client.responses.create(model="gpt-4.1", input="hi", background=True, stream=True)
    while True:
        try:
            for event in stream:
                last = event.sequence_number
                if event.type == "response.created":
                    response_id = event.response.id
                if event.type == "response.output_text.delta":
                    text.append(event.delta)
            return "".join(text), resumes
        except (httpx.RemoteProtocolError, openai.APIConnectionError):
            resumes.append(last - skip)
            stream = client.responses.retrieve(response_id, stream=True, starting_after=last - skip)


def test_a_background_stream_drop_and_the_sdk_resume_replay_offline(tmp_path: Path) -> None:
    cassette = tmp_path / "background.msgpack"
    with Origin(_responses_routes(drop_after=7)) as origin:
        base = f"{origin.url}/v1"
        with replay.use_cassette(cassette, record_mode="once"):
            assert read_background(base) == (HELLO_TEXT, [7])
        hits = len(origin.requests)
        assert parse_qs(origin.requests[-1].query)["starting_after"] == ["7"]
        with replay.use_cassette(cassette, record_mode="none") as used:
            assert read_background(base) == (HELLO_TEXT, [7])
        assert len(origin.requests) == hits
        assert used.all_played
        checked = check_files([cassette])  # the resumed stream, as the SDK assembles it
        assert checked.ok, checked.report()
        assert checked.streams == 2
        with (
            replay.use_cassette(cassette, record_mode="none"),
            pytest.raises(replay.CassetteMismatchError) as caught,
        ):
            read_background(base, skip=2)
    message = str(caught.value)
    assert "the client resumes after sequence_number 5 (starting_after=5); " in message
    assert "recorded request resumed after sequence_number 7 (starting_after=7)" in message


def test_check_finds_a_client_resuming_behind_what_it_got(tmp_path: Path) -> None:
    cassette = tmp_path / "behind.msgpack"
    with (
        Origin(_responses_routes(drop_after=7)) as origin,
        replay.use_cassette(cassette, record_mode="once"),
    ):
        text, resumes = read_background(f"{origin.url}/v1", skip=2)
    assert resumes == [5]
    assert text != HELLO_TEXT  # two deltas came twice
    checked = check_files([cassette])
    assert [str(finding) for finding in checked.findings] == [
        f"{cassette} #0 event - stream.truncated: note: the stream ended with "
        "RemoteProtocolError: peer closed connection without sending complete message body "
        "(incomplete chunked read) (a later request resumes it)",
        f"{cassette} #1 event - resume.from: warning: the client resumed after "
        "sequence_number 5 (starting_after=5), but it had got events up to 7: 6..7 come twice",
    ]


def test_the_resume_fault_resumes_a_background_stream_recorded_whole(tmp_path: Path) -> None:
    cassette = tmp_path / "whole.msgpack"
    with Origin(_responses_routes(drop_after=None)) as origin:
        base = f"{origin.url}/v1"
        with replay.use_cassette(cassette, record_mode="once"):
            assert read_background(base) == (HELLO_TEXT, [])
    with replay.use_cassette(cassette, faults=["resume(after_events=8)"]):
        assert read_background(base) == (HELLO_TEXT, [7])


# --- polling a background response costs no time under virtual time ------------------------

REAL_MONOTONIC = time.monotonic  # bound before any virtual session


def _json(status: str) -> Script:
    body = json.dumps({"id": RESPONSE_ID, "object": "response", "status": status})
    return Script(headers=(("content-type", "application/json"),), chunks=((0.0, body.encode()),))


def _polled_routes() -> dict[str, object]:
    """`POST /v1/responses` answers `queued`; each GET of it `in_progress`, the third
    `completed`."""
    polls = itertools.count(1)
    return {
        "/v1/responses": _json("queued"),
        f"/v1/responses/{RESPONSE_ID}": lambda seen: _json(
            "completed" if next(polls) >= 3 else "in_progress"
        ),
    }


def poll(client: httpx.Client, base: str, every: float) -> tuple[str, int]:
    """A client of background mode: create, then poll while queued or in progress."""
    answer = client.post(f"{base}/responses", json={"background": True}).json()
    polls = 0
    while answer["status"] in ("queued", "in_progress"):
        time.sleep(every)
        polls += 1
        answer = client.get(f"{base}/responses/{answer['id']}").json()
    return answer["status"], polls


async def apoll(client: httpx.AsyncClient, base: str, every: float) -> tuple[str, int]:
    """`poll`, on asyncio."""
    answer = (await client.post(f"{base}/responses", json={"background": True})).json()
    polls = 0
    while answer["status"] in ("queued", "in_progress"):
        await asyncio.sleep(every)
        polls += 1
        answer = (await client.get(f"{base}/responses/{answer['id']}")).json()
    return answer["status"], polls


def test_polling_a_background_response_costs_no_time_under_virtual_time(tmp_path: Path) -> None:
    cassette = tmp_path / "poll.msgpack"
    with Origin(_polled_routes()) as origin:
        base = f"{origin.url}/v1"
        with replay.use_cassette(cassette, record_mode="once"), httpx.Client() as client:
            assert poll(client, base, every=0.01) == ("completed", 3)
    # Polled every 10 s in replay: 30 s on the client's clocks, not on the wall's.
    with replay.use_cassette(cassette, speed="virtual"), httpx.Client() as client:
        started, real = time.monotonic(), REAL_MONOTONIC()
        assert poll(client, base, every=10) == ("completed", 3)
        seen, waited = time.monotonic() - started, REAL_MONOTONIC() - real
    assert seen >= 30
    assert waited < 15

    async def main() -> tuple[tuple[str, int], float, float]:
        with replay.use_cassette(cassette, speed="virtual"):
            async with httpx.AsyncClient() as client:
                started, real = time.monotonic(), REAL_MONOTONIC()
                result = await apoll(client, base, every=10)
                return result, time.monotonic() - started, REAL_MONOTONIC() - real

    result, seen, waited = asyncio.run(main())
    assert result == ("completed", 3)
    assert seen >= 30
    assert waited < 15


# --- the resume fault in every shell: the pytest marker, `replay run`, `replay serve` -------

RECONNECT = """
import sys

import httpx, httpx_sse


def read_sse(url):
    seen = []
    for connection in range(1, 6):
        headers = {"Last-Event-ID": seen[-1][0]} if seen else {}
        try:
            with httpx.Client() as client, httpx_sse.connect_sse(
                client, "GET", url, headers=headers
            ) as source:
                for event in source.iter_sse():
                    seen.append((event.id, event.data))
            return "".join(data for _, data in seen), connection
        except httpx.RemoteProtocolError:
            continue
"""


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """An SSE stream and a Responses background stream, each recorded without a drop: the
    SSE cassette, its URL, and the Responses cassette."""
    folder = tmp_path_factory.mktemp("whole")
    sse, responses = folder / "sse.msgpack", folder / "responses.msgpack"
    with Origin({"/events": _sse_route(drop_after=None)}) as origin:
        url = f"{origin.url}/events"
        with replay.use_cassette(sse), httpx.Client() as client:
            read_sse(client, url)
    with Origin(_responses_routes(drop_after=None)) as origin, replay.use_cassette(responses):
        read_background(f"{origin.url}/v1")
    return sse, url, responses


def test_the_resume_fault_in_the_pytest_marker(
    pytester: pytest.Pytester, whole: tuple[Path, str, Path]
) -> None:
    sse, url, _ = whole
    pytester.makepyfile(
        RECONNECT
        + textwrap.dedent(f"""
        import pytest

        @pytest.mark.use_cassette({str(sse)!r}, faults=["resume(after_events=5)"])
        def test_resumes():
            assert read_sse({url!r}) == ({SSE_TEXT!r}, 2)
        """)
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=60)
    result.assert_outcomes(passed=1)


def test_the_resume_fault_in_replay_run(tmp_path: Path, whole: tuple[Path, str, Path]) -> None:
    sse, url, _ = whole
    app = tmp_path / "app.py"
    app.write_text(RECONNECT + "print(*read_sse(sys.argv[1]), sep='|')\n")
    fault = "resume(after_events=5)"
    result = replay_text("run", str(sse), "--fault", fault, "--", sys.executable, str(app), url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{SSE_TEXT}|2"


@contextlib.contextmanager
def serving(cassette: Path, fault: str) -> Iterator[str]:
    """`replay serve CASSETTE --fault FAULT` at instant speed: its URL, while it runs."""
    command = [sys.executable, "-m", "replay.cli", "serve", str(cassette), "--port", "0"]
    command += ["--speed", "instant", "--fault", fault]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as server:
        try:
            assert server.stdout is not None
            found = None
            for line in server.stdout:
                found = re.search(rb"http://127\.0\.0\.1:\d+", line)
                if found:
                    break
            assert found, "replay serve did not start"
            yield found[0].decode()
        finally:
            server.terminate()
            server.wait(timeout=30)


def test_the_resume_fault_in_replay_serve(whole: tuple[Path, str, Path]) -> None:
    sse, _, responses = whole
    with serving(responses, "resume(after_events=8)") as url:
        assert read_background(f"{url}/v1") == (HELLO_TEXT, [7])
    with serving(sse, "resume(after_events=5)") as url, httpx.Client() as client:
        assert read_sse(client, f"{url}/events") == (SSE_TEXT, 2)


# --- the pieces -------------------------------------------------------------------------------


def test_the_resume_fault_is_a_spec() -> None:
    fault = faults.parse("resume(after_events=5)")
    assert fault == faults.resume(after_events=5)
    assert repr(fault) == "resume(after_events=5)"
    assert fault.describe() == (
        "drop after 5 events, and answer the resume from the recording (every interaction)"
    )
    with pytest.raises(replay.ConfigurationError, match="after_events must be a whole number"):
        faults.parse("resume(after_events=-1)")


def test_a_match_on_without_last_event_id_does_not_compare_it() -> None:
    url = "http://127.0.0.1:1/events"
    recorded = [
        replay.Request(method="GET", url=url),
        replay.Request(method="GET", url=url, headers=[("Last-Event-ID", "5")]),
    ]
    resumed_from_4 = replay.Request(method="GET", url=url, headers=[("last-event-id", "4")])
    by_default = MatchIndex(recorded, match_on=replay.DEFAULT_MATCH_ON)
    assert by_default.take(resumed_from_4, [1, 0]) is None
    assert by_default.take(recorded[1], [1, 0]) == 1
    assert by_default.take(replay.Request(method="GET", url=url), [0, 0]) == 0
    without = MatchIndex(recorded, match_on=("method", "path"))
    assert without.take(resumed_from_4, [1, 0]) == 1


def test_a_resume_the_cassette_never_recorded_points_at_the_fault(
    whole: tuple[Path, str, Path],
) -> None:
    sse, url, _ = whole
    with (
        replay.use_cassette(sse, record_mode="none"),
        httpx.Client() as client,
        pytest.raises(replay.CassetteMismatchError) as caught,
    ):
        client.get(url, headers={"Last-Event-ID": "5"})
    assert (
        "resume point differs: the client resumes after event id '5' (Last-Event-ID: 5); the "
        "recorded request resumed no stream (to resume a stream recorded whole, drop it with "
        "the resume fault)"
    ) in str(caught.value)


def test_the_resume_fault_resumes_the_async_sdk(whole: tuple[Path, str, Path]) -> None:
    _, _, responses = whole
    recorded = replay.Cassette.load(responses).interactions[0].request.url
    base = recorded.removesuffix("/responses")

    async def main() -> tuple[str, list[int]]:
        client = openai.AsyncOpenAI(base_url=base, api_key="sk-test", max_retries=0)
        text: list[str] = []
        resumes: list[int] = []
        last, response_id = -1, ""
        with replay.use_cassette(
            responses, record_mode="none", faults=[faults.resume(after_events=3)]
        ):
            stream = await client.responses.create(
                model="gpt-4.1", input="hi", background=True, stream=True
            )
            while True:
                try:
                    async for event in stream:
                        last = event.sequence_number
                        if event.type == "response.created":
                            response_id = event.response.id
                        if event.type == "response.output_text.delta":
                            text.append(event.delta)
                    return "".join(text), resumes
                except openai.APIConnectionError:
                    resumes.append(last)
                    stream = await client.responses.retrieve(
                        response_id, stream=True, starting_after=last
                    )

    assert asyncio.run(main()) == (HELLO_TEXT, [2])


def test_a_resume_the_fault_cannot_answer_says_why(whole: tuple[Path, str, Path]) -> None:
    sse, url, _ = whole
    with (
        replay.use_cassette(sse, faults=["resume(after_events=5)"]),
        httpx.Client() as client,
        pytest.raises(replay.CassetteMismatchError) as caught,
    ):
        client.get(url, headers={"Last-Event-ID": "99"})
    assert (
        "It resumes a stream after event id '99' (Last-Event-ID: 99), but no stream played so "
        "far that the resume fault targets holds that event, for this request."
    ) in str(caught.value)
