"""What a replayed WebSocket conversation leaves unconsumed: reported like unplayed
interactions (`--strict-cassettes` fails on them), with an allow-list for trailing frames."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import replay
from replay.engine.conversation import Conversation
from replay.model.frames import Frame
from replay.testing.realtime import RealtimeOrigin

pytest_plugins = ["pytester"]

FRAMES = (
    Frame(0.01, "server", "text", b'{"type":"session.created"}'),
    Frame(0.02, "client", "text", b'{"type":"response.create","event_id":"a"}'),
    Frame(0.03, "server", "text", b'{"type":"response.done"}'),
    Frame(0.04, "server", "text", b'{"type":"rate_limits.updated"}'),
    Frame(0.05, "server", "ping", b""),
)


def _played(conversation: Conversation) -> None:
    """Deliver and read what is due now."""
    while isinstance(step := conversation.next(1e9), int):
        conversation.delivered(step)
        conversation.read()


def test_a_fully_consumed_conversation_leaves_nothing() -> None:
    conversation = Conversation(FRAMES, speed=float("inf"), start=0.0)
    conversation.sent("text", b'{"event_id": "other", "type": "response.create"}', 0.0)
    _played(conversation)
    assert not conversation.leftovers()


def test_unread_server_frames_and_unsent_client_frames_are_left() -> None:
    conversation = Conversation(FRAMES, speed=1.0, start=0.0)
    _played(conversation)  # the opening turn only: the client never asked
    left = conversation.leftovers()
    assert [f.event_type for f in left.server] == ["response.done", "rate_limits.updated"]
    assert [f.event_type for f in left.client] == ["response.create"]
    assert left.describe() == (
        "WebSocket: 2 server frames never read (first: response.done), "
        "1 client frame never sent (first: response.create)"
    )


def test_the_allow_list_takes_kinds_and_event_types() -> None:
    allowed = frozenset({"ping", "session.created", "rate_limits.updated", "response.done"})
    conversation = Conversation(FRAMES, speed=1.0, start=0.0, allowed=allowed)
    conversation.sent("text", b'{"type":"response.create"}', 0.0)
    assert not conversation.leftovers()  # nothing read, but all of it allowed


def test_strict_cassettes_fail_on_an_unconsumed_conversation(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    with RealtimeOrigin() as origin:
        pytester.makepyfile(
            test_ws=textwrap.dedent(
                f"""
                import json, os
                import pytest
                from websockets.sync.client import connect

                URL = {origin.url!r}

                @pytest.mark.use_cassette
                def test_talk():
                    with connect(URL) as ws:
                        ws.recv()
                        ws.send(json.dumps({{"type": "response.create",
                                            "response": {{"instructions": "hi you"}}}}))
                        if os.environ.get("EARLY"):
                            return
                        while json.loads(ws.recv())["type"] != "response.done":
                            pass
                """
            )
        )
        run = ("-p", "no:recording")
        pytester.runpytest_subprocess(*run, timeout=120).assert_outcomes(passed=1)
    full = pytester.runpytest_subprocess(
        *run, "--record-mode=none", "--strict-cassettes", timeout=120
    )
    assert full.ret == 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EARLY", "1")
        early = pytester.runpytest_subprocess(
            *run, "--record-mode=none", "--strict-cassettes", timeout=120
        )
    early.assert_outcomes(passed=1)
    assert early.ret == pytest.ExitCode.TESTS_FAILED
    early.stdout.fnmatch_lines(
        [
            "unplayed interactions: 1",
            "*ws://127.0.0.1:*/v1/realtime?model=gpt-realtime (WebSocket: * server frames never"
            " read (first: response.*",
        ]
    )


def test_use_cassette_takes_the_allow_list(tmp_path: Path) -> None:
    from websockets.sync.client import connect

    path = tmp_path / "early.msgpack"

    def talk(url: str, early: bool) -> None:
        with connect(url) as ws:
            ws.recv()
            ws.send(json.dumps({"type": "response.create", "response": {"instructions": "a b"}}))
            while not early and json.loads(ws.recv())["type"] != "response.done":
                pass

    with RealtimeOrigin() as origin, replay.use_cassette(path):
        talk(origin.url, early=False)
    with replay.use_cassette(path, record_mode="none") as cassette:
        talk(origin.url, early=True)
    assert list(cassette.unconsumed) == [0]
    kinds = {"response.created", "response.output_text.delta", "response.done"}
    with replay.use_cassette(path, record_mode="none", websocket_allow=kinds) as cassette:
        talk(origin.url, early=True)
    assert cassette.unconsumed == {}
    with pytest.raises(replay.errors.ConfigurationError):
        replay.use_cassette(path, websocket_allow="ping")
