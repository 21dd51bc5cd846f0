"""MCP's Streamable HTTP transport: a whole `mcp` client session records beside an LLM call
and replays offline with the MCP server stopped.

The server is the mcp SDK's own (`MCPServer.streamable_http_app()` under uvicorn on
127.0.0.1, in a thread), in both its answer modes (SSE streams, JSON bodies); its tool
reports progress with small real delays. The client is the SDK's `streamable_http_client`
(httpx2): initialize, notifications/initialized, tools/list, tool calls whose answers
stream progress notifications then the result, the GET stream, the DELETE at the end.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

import replay
from replay import timing
from replay.dialects import RULES, detect, validate
from replay.matching import MatchIndex
from replay.model import Chunk, Interaction, Request, Response
from replay.testing import HELLO_TEXT, Origin

mcp_server = pytest.importorskip("mcp.server.mcpserver")
uvicorn = pytest.importorskip("uvicorn")
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

KEY = "sk-test-mcp-0000000000000000"


def _server() -> Any:
    server = mcp_server.MCPServer("counter")

    @server.tool()
    async def count(n: int, ctx: mcp_server.Context) -> str:
        """Count to n, reporting each step."""
        for step in range(1, n + 1):
            await asyncio.sleep(0.03)
            await ctx.report_progress(step, n, f"step {step}")
        return f"counted to {n}"

    return server


class McpOrigin:
    """The mcp SDK's server on 127.0.0.1, in a thread, counting the requests it gets."""

    def __init__(self, *, json_response: bool) -> None:
        app = _server().streamable_http_app(json_response=json_response)
        self.hits = 0

        async def counted(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.hits += 1
            await app(scope, receive, send)

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(counted, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/mcp"

    def __enter__(self) -> McpOrigin:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self._server.started
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(30)
        self._sock.close()


async def _session(url: str, order: tuple[int, ...], pause: float = 0.0) -> dict[str, Any]:
    """One whole MCP session: what the client got, and the session ids it sent."""
    sent_ids: list[str | None] = []
    progress: dict[int, list[tuple[float, str | None]]] = {}

    async def note(request: httpx2.Request) -> None:
        sent_ids.append(request.headers.get("mcp-session-id"))

    def on_progress(n: int) -> Any:
        async def noted(done: float, total: float | None, message: str | None) -> None:
            progress.setdefault(n, []).append((done, message))

        return noted

    async with (
        httpx2.AsyncClient(event_hooks={"request": [note]}, timeout=30) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        tools = await session.list_tools()
        await asyncio.sleep(pause)
        calls = [
            session.call_tool("count", {"n": n}, progress_callback=on_progress(n)) for n in order
        ]
        results = await asyncio.gather(*calls)
    return {
        "server": init.server_info.name,
        "tools": [tool.name for tool in tools.tools],
        "results": {n: result.content[0].text for n, result in zip(order, results, strict=True)},
        "progress": progress,
        "session_ids": {i for i in sent_ids if i is not None},
    }


def _llm(url: str) -> str:
    client = openai.OpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0)
    with client:
        events = list(client.responses.create(model="m", input="hi", stream=True))
    return str(events[-1].response.output_text)


def _both(mcp_url: str, llm_url: str, order: tuple[int, ...], pause: float = 0.0) -> Any:
    return _llm(llm_url), asyncio.run(_session(mcp_url, order, pause))


@pytest.fixture
def recorded(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str, str, Any]:
    """A cassette of an MCP session (tool calls 2 then 3) beside an openai Responses stream;
    both servers stopped once it is recorded."""
    path = tmp_path / ("json.msgpack" if request.param else "sse.msgpack")
    with McpOrigin(json_response=request.param) as server, Origin() as llm:
        with replay.use_cassette(path):
            live = _both(server.url, llm.url, (2, 3))
        assert server.hits >= 5
        assert len(llm.requests) == 1
        urls = server.url, llm.url
    return path, *urls, live


@pytest.mark.parametrize("recorded", [False, True], ids=["sse", "json"], indirect=True)
def test_a_whole_session_replays_offline(recorded: tuple[Path, str, str, Any]) -> None:
    path, mcp_url, llm_url, live = recorded
    text, session = live
    assert text == HELLO_TEXT
    assert session["results"] == {2: "counted to 2", 3: "counted to 3"}
    if not path.name.startswith("json"):  # a JSON answer carries the result alone
        assert session["progress"][3] == [(1.0, "step 1"), (2.0, "step 2"), (3.0, "step 3")]
    (live_id,) = session["session_ids"]

    player = replay.use_cassette(path, record_mode="none")
    with player as cassette:
        again = _both(mcp_url, llm_url, (2, 3))
    assert again == live
    # The server's recorded session id was served, and the client sent that one back.
    assert again[1]["session_ids"] == {live_id}
    assert player.mismatches == []
    assert cassette.all_played


@pytest.mark.parametrize("recorded", [False, True], ids=["sse", "json"], indirect=True)
def test_a_fresh_session_under_other_ids_gets_its_own_answers(
    recorded: tuple[Path, str, str, Any],
) -> None:
    """Calls made in the other order carry each other's JSON-RPC ids and progress tokens:
    each matches its recording by what it asks, and gets its answer under its own id (at
    the recorded pace: the GET stream ends at its recorded end, nothing waits on it)."""
    path, mcp_url, llm_url, live = recorded
    with replay.use_cassette(path, record_mode="none", speed=1):
        text, session = _both(mcp_url, llm_url, (3, 2))
    assert text == live[0]
    assert session["results"] == live[1]["results"]
    assert session["progress"] == live[1]["progress"]


@pytest.mark.parametrize("recorded", [False], ids=["sse"], indirect=True)
def test_the_get_stream_reopened_on_replay_is_answered_offline(
    recorded: tuple[Path, str, str, Any],
) -> None:
    """At instant speed the recorded GET stream ends at once; the client opens it again
    a second later, and gets the recording's headers and end again, not a mismatch."""
    path, mcp_url, llm_url, live = recorded
    session = replay.use_cassette(path, record_mode="none")
    with session as cassette:
        _, got = _both(mcp_url, llm_url, (2, 3), pause=1.3)
    assert got["results"] == live[1]["results"]
    assert sum(1 for i in cassette.interactions if i.request.method == "GET") == 1
    assert session.mismatches == []


def test_check_reads_jsonrpc_streams(tmp_path: Path) -> None:
    path = tmp_path / "mcp.msgpack"
    with McpOrigin(json_response=False) as server, replay.use_cassette(path):
        asyncio.run(_session(server.url, (2,)))
    cassette = replay.Cassette.load(path)
    streams = [
        i for i in cassette.interactions if i.response.header("content-type") == "text/event-stream"
    ]
    assert streams
    assert all(validate(i) == [] for i in streams)
    assert detect(streams[0]) == "jsonrpc"
    # No text deltas in a JSON-RPC stream: its ttft is its first event (the first progress).
    (call,) = [i.response for i in streams if b"tools/call" in i.request.body]
    assert timing.ttft(call) == call.events()[0].at
    result = subprocess.run(
        [sys.executable, "-m", "replay.cli", "check", str(path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no violations" in result.stdout
    # The GET stream the client closed at the end of its session is complete, in show too.
    shown = subprocess.run(
        [sys.executable, "-m", "replay.cli", "show", str(path)], capture_output=True, text=True
    ).stdout
    (get_row,) = [line for line in shown.splitlines() if "  GET  " in line]
    assert "truncated" not in shown, shown
    assert "closed after end" in get_row or "eof" in get_row, get_row


def _stream(request_id: object, *messages: dict[str, Any]) -> Interaction:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
    body["params"] = {"name": "count", "_meta": {"progressToken": request_id}}
    data = b"".join(f"event: message\ndata: {json.dumps(m)}\n\n".encode() for m in messages)
    response = Response(
        status=200,
        headers=[("content-type", "text/event-stream")],
        chunks=[Chunk(0.01, data)],
    )
    return Interaction(
        Request(method="POST", url="http://h/mcp", body=json.dumps(body).encode()), response
    )


def _progress(token: object) -> dict[str, Any]:
    params = {"progress": 1, "total": 2}
    if token is not None:
        params["progressToken"] = token
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


RULE_CASES = [
    pytest.param(*case)
    for case in [
        ([_progress(7), {"jsonrpc": "2.0", "id": 7, "result": {}}], None),
        ([{"jsonrpc": "2.0", "id": 8, "result": {}}], "jsonrpc.id-answers jsonrpc.unanswered"),
        ([{"jsonrpc": "2.0", "id": 7, "result": {}, "error": {}}], "jsonrpc.result-or-error"),
        ([{"jsonrpc": "2.0", "id": 7}], "jsonrpc.result-or-error"),
        ([_progress(None), {"jsonrpc": "2.0", "id": 7, "result": {}}], "jsonrpc.progress-token"),
        ([_progress(9), {"jsonrpc": "2.0", "id": 7, "result": {}}], "jsonrpc.progress-token"),
        ([_progress(7)], "jsonrpc.unanswered"),
        (
            [_progress(7), {"jsonrpc": "1.0", "id": 7, "result": {}}],
            "jsonrpc.json jsonrpc.unanswered",
        ),
    ]
]


@pytest.mark.parametrize(("messages", "rule"), RULE_CASES)
def test_jsonrpc_rules(messages: list[dict[str, Any]], rule: str | None) -> None:
    found = {violation.rule for violation in validate(_stream(7, *messages))}
    assert found == set(rule.split() if rule else ())


def test_every_jsonrpc_rule_is_tripped_above() -> None:
    tripped = {rule for case in RULE_CASES for rule in (case.values[1] or "").split()}
    tripped.add("jsonrpc.message")  # below
    assert tripped == {rule for rule in RULES if rule.startswith("jsonrpc.")}
    neither = _stream(
        7, {"jsonrpc": "2.0", "result": {}}, {"jsonrpc": "2.0", "id": 7, "result": {}}
    )
    assert {v.rule for v in validate(neither)} == {"jsonrpc.message"}


def test_body_matcher_ignores_jsonrpc_ids_and_progress_tokens() -> None:
    def post(request_id: object, n: int) -> Request:
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {
                "name": "count",
                "arguments": {"n": n},
                "_meta": {"progressToken": request_id},
            },
        }
        return Request(method="POST", url="http://h/mcp", body=json.dumps(body).encode())

    index = MatchIndex([post(3, 2)], match_on=replay.DEFAULT_MATCH_ON)
    assert index.key(post(11, 2)) == index.key(post(3, 2))
    assert index.key(post(3, 5)) != index.key(post(3, 2))
    raw = MatchIndex([post(3, 2)], match_on=("raw_body",))
    assert raw.key(post(11, 2)) != raw.key(post(3, 2))
