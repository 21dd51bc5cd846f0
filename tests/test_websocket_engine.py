"""The engine's `Conversation`, pure: turns released by matched client frames at their
recorded delays scaled by the speed, JSON-aware matching, a mismatch naming the nearest."""

from __future__ import annotations

import json
import math
import pickle

import pytest

from replay.engine.conversation import Conversation
from replay.errors import FrameMismatchError
from replay.model.frames import Frame


def _text(at: float, sender: str, **event: object) -> Frame:
    return Frame(at, sender, "text", json.dumps(event).encode())


FRAMES = (
    _text(0.1, "server", type="session.created"),
    _text(1.0, "client", type="response.create", event_id="a", response={"instructions": "x"}),
    _text(1.2, "server", type="response.created"),
    _text(1.5, "server", type="response.done"),
    _text(2.0, "client", type="response.create", event_id="b", response={"instructions": "y"}),
    _text(2.1, "server", type="response.created", n=2),
)


def _create(text: str, event_id: str = "new") -> bytes:
    event = {"event_id": event_id, "response": {"instructions": text}, "type": "response.create"}
    return json.dumps(event).encode()


def test_the_opening_turn_is_due_from_the_upgrade_at_the_speed() -> None:
    conversation = Conversation(FRAMES, speed=2.0, start=100.0)
    assert conversation.next(100.0) == pytest.approx(0.05)
    assert conversation.next(100.05) == 0
    assert conversation.next(100.05) is None  # nothing more until the client speaks


def test_a_turn_is_released_by_its_client_frame_at_the_recorded_gaps() -> None:
    conversation = Conversation(FRAMES, speed=1.0, start=0.0)
    conversation.next(1.0)
    conversation.sent("text", _create("x"), 10.0)  # another event_id: ignored
    assert conversation.next(10.0) == pytest.approx(0.2)
    assert conversation.next(10.2) == 2
    assert conversation.next(10.2) == pytest.approx(0.3)  # absolute: 10 + (1.5 - 1.0)
    assert conversation.next(10.6) == 3


def test_the_second_request_gets_its_own_answer_in_any_order() -> None:
    conversation = Conversation(FRAMES, speed=math.inf, start=0.0)
    assert conversation.next(0.0) == 0
    conversation.sent("text", _create("y"), 0.0)
    assert conversation.next(0.0) == 5
    conversation.sent("text", _create("x"), 0.0)
    assert [conversation.next(0.0), conversation.next(0.0)] == [2, 3]


def test_an_unknown_frame_names_the_nearest_and_a_repeat_says_all_was_sent() -> None:
    conversation = Conversation(FRAMES, speed=math.inf, start=0.0, url="ws://h/v1/realtime")
    with pytest.raises(FrameMismatchError) as raised:
        conversation.sent("text", _create("z"), 0.0)
    error = raised.value
    assert error.nearest is not None
    assert error.nearest.startswith("#1 at 1.000 s")
    assert error.differences == ("field 'response' differs",)
    assert "ws://h/v1/realtime" in str(error)
    assert pickle.loads(pickle.dumps(error)).args == error.args
    conversation.sent("text", _create("x"), 0.0)
    conversation.sent("text", _create("y"), 0.0)
    with pytest.raises(FrameMismatchError, match="was sent already"):
        conversation.sent("text", _create("x"), 0.0)


def test_keys_in_a_shown_frame_are_hidden() -> None:
    conversation = Conversation(FRAMES, speed=math.inf, start=0.0)
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    with pytest.raises(FrameMismatchError) as raised:
        conversation.sent("text", json.dumps({"type": "x", "note": key}).encode(), 0.0)
    assert key not in str(raised.value)


def test_control_frames_of_the_client_are_not_matched() -> None:
    conversation = Conversation(FRAMES, speed=math.inf, start=0.0)
    conversation.sent("ping", b"", 0.0)
    conversation.sent("pong", b"", 0.0)
    assert not conversation.closed
    conversation.sent("close", b"\x03\xe8", 0.0)
    assert conversation.closed
