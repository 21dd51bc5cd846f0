"""A WebSocket cassette converted (vcrpy refuses it in one line: it has no frames) and the
session's `websocket_allow` carried by name into child processes."""

from __future__ import annotations

import json
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
