"""A WebSocket cassette converted (vcrpy refuses it in one line: it has no frames) and the
session's `websocket_allow` carried by name into child processes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from commands import replay_text

from replay.model import Interaction, Request, Response
from replay.model.frames import Frame
from replay.run.settings import ENV_WEBSOCKET_ALLOW, options_from
from replay.store.file import save_interactions


def _conversation(path: Path) -> Path:
    frames = (Frame(0.01, "server", "text", b'{"type":"session.created","event_id":"e"}'),)
    request = Request(method="GET", url="wss://api.openai.com/v1/realtime")
    save_interactions(path, [Interaction(request, Response(status=101), frames=frames)])
    return path


def test_converting_a_conversation_to_vcrpy_is_refused_in_one_line(tmp_path: Path) -> None:
    source = _conversation(tmp_path / "rt.msgpack")
    refused = replay_text("convert", str(source), str(tmp_path / "rt.yaml"))
    assert refused.returncode != 0
    assert refused.stderr.strip().count("\n") == 0
    assert "WebSocket conversation: a vcrpy cassette has no frames" in refused.stderr
    assert not (tmp_path / "rt.yaml").exists()
    exported = replay_text("convert", str(source), str(tmp_path / "rt.json"))
    assert exported.returncode == 0, exported.stderr


def test_websocket_allow_is_carried_by_name() -> None:
    environ = {ENV_WEBSOCKET_ALLOW: json.dumps(["rate_limits.updated", "ping"])}
    assert "rate_limits.updated" in options_from(environ, None).websocket_allow
    assert options_from({}, None).websocket_allow == {"ping", "pong", "close"}


APP = """
import json, sys
from websockets.sync.client import connect
from websockets.exceptions import ConnectionClosed

with connect(sys.argv[1]) as ws:
    ws.recv()
    ws.send(json.dumps({"type": "response.create", "response": {"instructions": "a b c"}}))
    try:
        while True:
            print(json.loads(ws.recv())["type"])
    except ConnectionClosed as closed:
        print("closed", closed.rcvd.code, closed.rcvd.reason)
"""


def test_a_close_fault_spec_reaches_the_program_under_replay_run(tmp_path: Path) -> None:
    from replay.testing.realtime import RealtimeOrigin

    app, out = tmp_path / "app.py", tmp_path / "rt.msgpack"
    app.write_text(APP)
    with RealtimeOrigin(close_after=1) as origin:
        recorded = replay_text("record", str(out), "--", sys.executable, str(app), origin.url)
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout.splitlines()[-1] == "closed 1000 done"
    fault = "close(after_events=3, code=1011, reason='overloaded')"  # session.created is 1
    command = ("run", str(out), "--mode", "none", "--fault", fault)
    replayed = replay_text(*command, "--", sys.executable, str(app), origin.url)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.splitlines() == [
        "response.created",
        "response.output_text.delta",
        "closed 1011 overloaded",
    ]
