"""A program's WebSocket conversations under `replay record` and `replay run --mode none`,
as real subprocesses: recorded from a loopback origin, replayed with it stopped."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from commands import replay_text

from replay.store.cassette import Cassette
from replay.testing.realtime import RealtimeOrigin

pytest.importorskip("websockets")

APP = textwrap.dedent(
    """
    import json, sys
    from websockets.sync.client import connect

    with connect(sys.argv[1]) as ws:
        print(json.loads(ws.recv())["type"])
        ws.send(json.dumps({"type": "response.create", "response": {"instructions": "a b"}}))
        while (kind := json.loads(ws.recv())["type"]) != "response.done":
            print(kind)
        print(kind)
    """
)


def test_a_program_records_and_replays_its_websocket(tmp_path: Path) -> None:
    app, out = tmp_path / "app.py", tmp_path / "out.msgpack"
    app.write_text(APP)
    with RealtimeOrigin() as origin:
        recorded = replay_text("record", str(out), "--", sys.executable, str(app), origin.url)
    assert recorded.returncode == 0, recorded.stderr
    [interaction] = Cassette.load(out).interactions
    assert interaction.frames
    replayed = replay_text(
        "run", str(out), "--mode", "none", "--", sys.executable, str(app), origin.url
    )
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert replayed.stdout.splitlines()[-1] == "response.done"
