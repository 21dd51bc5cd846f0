"""WebSocket conversations read by `replay show`, `check` and `diff` (real subprocesses), and
the Realtime and Responses-WebSocket dialect validators on valid and corrupted ones."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from commands import replay_text

from replay import framing
from replay.dialects import RULES, responses
from replay.dialects.realtime import check_frames, detect_frames
from replay.model import Interaction, Request, Response
from replay.model.frames import Frame
from replay.store.file import save_interactions

Events = list[tuple[str, dict[str, Any]]]


def _realtime_events(answers: tuple[str, ...] = ("Hi there",)) -> Events:
    events: Events = [("server", {"type": "session.created", "session": {"id": "sess_1"}})]
    events.append(("client", {"type": "session.update", "session": {"instructions": "x"}}))
    events.append(("server", {"type": "session.updated", "session": {"instructions": "x"}}))
    for number, text in enumerate(answers, start=1):
        rid = f"resp_{number}"
        events.append(("client", {"type": "response.create", "response": {"instructions": text}}))
        events.append(("server", {"type": "response.created", "response": {"id": rid}}))
        for word in text.split():
            delta = {"type": "response.output_text.delta", "response_id": rid, "delta": word}
            events.append(("server", delta))
        transcript = {"type": "response.output_audio_transcript.delta", "response_id": rid}
        events.append(("server", {**transcript, "delta": text}))
        done = {"type": "response.done", "response": {"id": rid, "status": "completed"}}
        events.append(("server", done))
    return events


def _frames(events: Events, close: bool = True) -> tuple[Frame, ...]:
    frames = []
    for i, (sender, event) in enumerate(events):
        if sender == "server" and "event_id" not in event:
            event = {**event, "event_id": f"event_{i}"}
        frames.append(Frame(0.01 * (i + 1), sender, "text", json.dumps(event).encode()))
    if close:
        at = 0.01 * (len(events) + 1)
        frames += [Frame.close(at, "client", 1000), Frame.close(at, "server", 1000)]
    return tuple(frames)


def _responses_ws_events(texts: tuple[str, ...] = ("Hi there", "Bye")) -> Events:
    events: Events = []
    for text in texts:
        events.append(("client", {"type": "response.create", "model": "gpt-4.1", "input": text}))
        stream = responses.stream(text).response
        for event in framing.events(stream, "sse"):
            events.append(("server", json.loads(event.data)))
    return events


def _rules(frames: tuple[Frame, ...]) -> set[str]:
    return {violation.rule for violation in check_frames(frames)}


def test_valid_conversations_break_no_rule() -> None:
    assert detect_frames(_frames(_realtime_events(("a b", "c")))) == "realtime"
    assert check_frames(_frames(_realtime_events(("a b", "c")))) == []
    assert detect_frames(_frames(_responses_ws_events())) == "responses-ws"
    assert check_frames(_frames(_responses_ws_events())) == []


def _drop_type(events: Events, kind: str, nth: int = 0) -> Events:
    places = [i for i, (_, e) in enumerate(events) if e["type"] == kind]
    return events[: places[nth]] + events[places[nth] + 1 :]


def _delta_after_done(events: Events) -> Events:
    done = next(i for i, (_, e) in enumerate(events) if e["type"] == "response.done")
    late = ("server", {"type": "response.output_text.delta", "response_id": "resp_1", "delta": "x"})
    return [*events[: done + 1], late, *events[done + 1 :]]


def _set(kind: str, **fields: Any) -> Callable[[Events], Events]:
    def change(events: Events) -> Events:
        return [(s, {**e, **fields} if e["type"] == kind else e) for s, e in events]

    return change


def _sequence_gap(events: Events) -> Events:
    return _drop_type(events, "response.output_text.delta")


def _unanswered(events: Events) -> Events:
    return [*events, ("client", {"type": "response.create", "input": "more"})]


REALTIME_CORRUPTIONS: list[tuple[Callable[[Events], Events], str]] = [
    (_delta_after_done, "realtime.response-order"),
    (lambda events: _drop_type(events, "response.done"), "realtime.response-done"),
    (lambda events: events[1:], "realtime.session-created-first"),
    (_set("response.output_text.delta", response_id="resp_9"), "realtime.response-id"),
    (_set("response.done", response={"id": "resp_1", "status": "bogus"}), "realtime.done-status"),
    (_set("session.updated", event_id=None), "realtime.event-id"),
    (lambda events: [*events, ("server", {"type": "error", "oops": 1})], "realtime.error-event"),
]


@pytest.mark.parametrize(("corrupt", "rule"), REALTIME_CORRUPTIONS)
def test_a_corrupted_realtime_conversation_trips_its_rule(
    corrupt: Callable[[Events], Events], rule: str
) -> None:
    assert _rules(_frames(corrupt(_realtime_events()))) == {rule}


def test_a_responses_ws_conversation_is_checked_turn_by_turn() -> None:
    gap = _frames(_sequence_gap(_responses_ws_events()))
    assert "responses.sequence-number" in _rules(gap)
    no_end = _frames(_drop_type(_responses_ws_events(), "response.completed", 1))
    assert "responses.terminal-event" in _rules(no_end)
    assert _rules(_frames(_unanswered(_responses_ws_events()))) == {"responses-ws.turn"}


def test_a_text_frame_that_is_no_event_and_an_abnormal_close_are_found() -> None:
    frames = (*_frames(_realtime_events(), close=False), Frame(1.0, "server", "text", b"nope"))
    frames += (Frame.close(1.1, "server", 1011, "overloaded"),)
    assert _rules(frames) == {"realtime.json", "websocket.close-code"}


def test_every_websocket_rule_is_listed_and_tripped() -> None:
    listed = {r for r in RULES if r.startswith(("realtime.", "responses-ws.", "websocket."))}
    tripped = {rule for _, rule in REALTIME_CORRUPTIONS}
    assert listed == tripped | {"realtime.json", "responses-ws.turn", "websocket.close-code"}


# --- the CLI --------------------------------------------------------------------------------


def _cassette(path: Path, frames: tuple[Frame, ...]) -> Path:
    request = Request(method="GET", url="wss://api.openai.com/v1/realtime?model=gpt-realtime")
    response = Response(status=101, headers=[("Upgrade", "websocket")], headers_at=0.004)
    save_interactions(path, [Interaction(request, response, frames=frames)])
    return path


def test_show_lists_each_frame_with_its_direction_time_and_type(tmp_path: Path) -> None:
    path = _cassette(tmp_path / "rt.msgpack", _frames(_realtime_events()))
    table = replay_text("show", str(path))
    assert table.returncode == 0, table.stderr
    assert " 101 " in table.stdout
    assert " 11 " in table.stdout  # 11 frames
    shown = replay_text("show", "--events", str(path))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1].split()[:4] == ["0.010", "←", "text", "session.created"]
    assert lines[2].split()[:4] == ["0.020", "→", "text", "session.update"]
    assert any(re.search(r'response\.output_text\.delta +"Hi"', line) for line in lines)
    assert lines[-1] == (
        "  (11 frames: 3 from the client, 8 from the server; closed by the client with 1000)"
    )
    timeline = replay_text("show", "--timeline", str(path))
    assert timeline.returncode == 0, timeline.stderr


def _played_ms(path: Path, speed: str) -> float:
    """The played duration `show --timeline --speed` draws for the conversation (ms)."""
    shown = replay_text("show", "--timeline", "--speed", speed, str(path))
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if " played " in line)
    sparks = row.split("|")[1]
    assert sparks.strip(), row  # the frames are drawn
    return float(row.split("|")[-1].split()[-1])


def test_show_timeline_plays_frames_as_a_conversation_replays_them(tmp_path: Path) -> None:
    opening = Frame(0.01, "server", "text", b'{"type": "session.created"}')
    create = Frame(0.02, "client", "text", b'{"type": "response.create"}')
    answer = [Frame(at, "server", "text", b'{"type": "response.done"}') for at in (0.06, 0.1)]
    path = _cassette(tmp_path / "rt.msgpack", (opening, create, *answer))
    # The client sends 10 ms after the opening frame (its own time); the answer is scaled.
    assert _played_ms(path, "1") == 100.0
    assert _played_ms(path, "max_gap=0.01") == 100.0  # frames go by the policy's rest
    assert _played_ms(path, "10x") == 1.0 + 10.0 + 8.0
    assert _played_ms(path, "ttft=recorded,rest=instant") == 10.0

    played = replay_text("play", str(path))
    assert played.returncode == 1
    assert played.stderr == (
        "replay: error: interaction 0 is a WebSocket conversation (no body to play): "
        f"replay show --events {path} shows its frames\n"
    )


def test_check_passes_a_valid_conversation_and_fails_a_corrupted_one(tmp_path: Path) -> None:
    good = _cassette(tmp_path / "good.msgpack", _frames(_realtime_events()))
    bad = _cassette(tmp_path / "bad.msgpack", _frames(_delta_after_done(_realtime_events())))
    passed = replay_text("check", str(good))
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "checked 1 stream in 1 cassette: no violations" in passed.stdout
    failed = replay_text("check", str(bad))
    assert failed.returncode == 1
    assert f"{bad} #0 event 9 realtime.response-order: error:" in failed.stdout
    assert "'response.output_text.delta' comes after response.done" in failed.stdout


def test_diff_compares_two_conversations_frame_by_frame(tmp_path: Path) -> None:
    a = _cassette(tmp_path / "a.msgpack", _frames(_realtime_events(("one two",))))
    same = _cassette(tmp_path / "same.msgpack", _frames(_realtime_events(("one two",))))
    b = _cassette(tmp_path / "b.msgpack", _frames(_realtime_events(("one three",))))
    assert replay_text("diff", str(a), str(same)).returncode == 0
    differs = replay_text("diff", str(a), str(b))
    assert differs.returncode == 1, differs.stderr
    assert "← response.output_text.delta" in differs.stdout
    assert "→ response.create" in differs.stdout
    assert "transcript (turn 2) differs:\n    A: 'one two'\n    B: 'one three'" in differs.stdout
    assert "total            100.0    100.0" in differs.stdout  # to the last frame


def test_report_draws_a_conversation_with_its_frames_as_events(tmp_path: Path) -> None:
    path = _cassette(tmp_path / "rt.msgpack", _frames(_realtime_events()))
    page = tmp_path / "rt.html"
    written = replay_text("report", str(path), "-o", str(page))
    assert written.returncode == 0, written.stderr
    html = page.read_text()
    assert "<td>101</td><td>realtime</td><td>11</td>" in html  # status, dialect, frames
    assert 'data-type="← response.output_text.delta"' in html
    assert 'data-type="→ response.create"' in html


def test_texts_join_text_and_transcript_deltas_never_audio() -> None:
    from replay.inspect.frames_view import frame_lines, frame_texts

    audio = {"type": "response.output_audio.delta", "response_id": "resp_1", "delta": "UklGRg=="}
    events = _realtime_events(("a b",))
    events.insert(-1, ("server", audio))
    frames = _frames(events)
    assert frame_texts(frames) == {"text (turn 2)": "ab", "transcript (turn 2)": "a b"}
    [line] = [line for line in frame_lines(frames, str) if "output_audio.delta" in line]
    assert '"UklGRg=="  {' not in line  # the payload is shown, but as no text piece
    assert _rules(frames) == set()
