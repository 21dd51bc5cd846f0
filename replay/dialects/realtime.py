"""The WebSocket dialects: OpenAI's Realtime API and the Responses API's WebSocket mode.

    replay.dialects.realtime.detect_frames(interaction.frames)   # "realtime" | "responses-ws"
                                                                 # | None
    replay.dialects.realtime.check_frames(interaction.frames)    # [Violation(rule, ...), ...]

A WebSocket conversation is its frames both ways (`replay.model.frames`); each text frame of
these dialects is one JSON event with a `type`. Which dialect a conversation speaks is told by
its events: Realtime's server opens with `session.created` and ends each response with
`response.done`; the Responses WebSocket mode's client sends a `response.create` per turn and
its server answers each with the Responses stream's own events (`response.created` …
`response.completed`).

- Realtime (`realtime.*` rules): every text frame a JSON event with a `type`; the server's
  first event `session.created`; every server event with an `event_id`; a response's events
  (`response.output_text.delta`, `response.output_audio_transcript.delta`, …) only between
  its `response.created` and its `response.done`, naming its id; each response done once,
  with a final status; an `error` event carrying an `error` with its `type` and `message`.
- Responses WebSocket mode: the server's events of each turn (those after a client
  `response.create`, up to the next) are a Responses stream, checked by the Responses rules
  themselves (`replay.dialects.responses.check`: sequence numbers, one terminal event last,
  …); a turn with no server event breaks `responses-ws.turn`.
- Either: a close frame's code is a normal one (`websocket.close-code`).

A violation's index is the frame's position in the conversation (0-based).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

from replay.dialects import responses
from replay.dialects.common import Report, Violation, json_object
from replay.framing.timed_event import TimedEvent
from replay.model.frames import Frame

__all__ = ["FrameDialect", "check_frames", "detect_frames"]

FrameDialect = Literal["realtime", "responses-ws"]

#: The statuses a Realtime `response.done` may report.
_FINAL: Final = frozenset({"completed", "cancelled", "failed", "incomplete"})
#: Close codes of a conversation that ended as it should (RFC 6455 7.4.1; 1005: no code).
_NORMAL_CLOSES: Final = frozenset({1000, 1001, 1005})
#: Server events of the Responses stream that Realtime never sends.
_RESPONSES_ONLY: Final = frozenset(
    {"response.completed", "response.in_progress", "response.failed", "response.incomplete"}
)


def _events(frames: Sequence[Frame]) -> list[tuple[int, Frame, dict[str, object] | None]]:
    """Each text frame: its position, itself, its JSON object (None: not one)."""
    return [(i, f, json_object(f.text)) for i, f in enumerate(frames) if f.kind == "text"]


def detect_frames(frames: Sequence[Frame] | None) -> FrameDialect | None:
    """Which dialect the conversation `frames` speaks (see the module's docstring); None
    when neither fits (or there are no frames)."""
    if not frames:
        return None
    types = {(f.sender, p.get("type")) for _, f, p in _events(frames) if p is not None}
    server = {kind for sender, kind in types if sender == "server"}
    if "session.created" in server or "response.done" in server:
        return "realtime"
    if ("client", "response.create") in types and server & _RESPONSES_ONLY:
        return "responses-ws"
    return None


def check_frames(
    frames: Sequence[Frame] | None, dialect: FrameDialect | None = None
) -> list[Violation]:
    """Every rule the conversation `frames` breaks, in frame order (those of the whole
    conversation last); `dialect` detected when None (no dialect: the close code only)."""
    frames = tuple(frames or ())
    dialect = dialect or detect_frames(frames)
    found: list[Violation] = []
    if dialect == "realtime":
        found = _realtime(frames)
    elif dialect == "responses-ws":
        found = _responses_ws(frames)
    found += _close_codes(frames)
    return sorted(found, key=lambda v: (v.index is None, v.index or 0))


def _close_codes(frames: Sequence[Frame]) -> list[Violation]:
    report = Report("websocket")
    for position, frame in enumerate(frames):
        if frame.kind == "close" and (frame.code or 1005) not in _NORMAL_CLOSES:
            why = f": {frame.reason}" if frame.reason else ""
            report.add("close-code", f"the {frame.sender} closed with {frame.code}{why}", position)
    return report.violations


# --- Realtime ----------------------------------------------------------------------------


class _Realtime:
    def __init__(self) -> None:
        self.report = Report("realtime")
        self.open: tuple[int, object] | None = None  # (position, id) of the open response
        self.done: set[object] = set()
        self.first_server = True

    def walk(self, frames: Sequence[Frame]) -> None:
        for position, frame, payload in _events(frames):
            kind = None if payload is None else payload.get("type")
            if payload is None or not isinstance(kind, str):
                what = "not a JSON object" if payload is None else "a JSON object without a type"
                self.report.add("json", f"the {frame.sender}'s text frame is {what}", position)
                continue
            if frame.sender == "server":
                self.server(position, payload, kind)
            elif kind == "response.cancel" or kind == "output_audio_buffer.clear":
                self.open = None  # (a cancelled response need not be done)
        if self.open is not None:
            self.report.add("response-done", "the last response has no response.done", None)

    def server(self, position: int, payload: Mapping[str, object], kind: str) -> None:
        add = self.report.add
        if self.first_server and kind != "session.created":
            add(
                "session-created-first",
                f"the first event is {kind!r}, not session.created",
                position,
            )
        self.first_server = False
        if not isinstance(payload.get("event_id"), str):
            add("event-id", f"{kind!r} carries no event_id", position)
        if kind == "response.created":
            if self.open is not None:
                add(
                    "response-done",
                    "a response.created comes before the last one's response.done",
                    position,
                )
            self.open = (position, _get(payload.get("response"), "id"))
        elif kind == "response.done":
            self.finished(position, payload)
        elif kind == "error":
            error = payload.get("error")
            if not (isinstance(error, Mapping) and {"type", "message"} <= error.keys()):
                add("error-event", "the error event has no error with a type and message", position)
        elif kind.startswith("response.") and kind != "response.cancel":
            self.part_of_response(position, payload, kind)

    def finished(self, position: int, payload: Mapping[str, object]) -> None:
        add = self.report.add
        response = payload.get("response")
        response_id = _get(response, "id")
        if self.open is None:
            again = response_id is not None and response_id in self.done
            what = "a second response.done" if again else "a response.done with no response.created"
            add("response-order", f"{what} for {response_id!r}", position)
        elif response_id != self.open[1]:
            add(
                "response-id",
                f"response.done names {response_id!r}, not {self.open[1]!r}",
                position,
            )
        status = _get(response, "status")
        if status not in _FINAL:
            add("done-status", f"response.done's status is {status!r}, not a final one", position)
        self.done.add(response_id)
        self.open = None

    def part_of_response(self, position: int, payload: Mapping[str, object], kind: str) -> None:
        if self.open is None:
            after = "after response.done" if self.done else "before response.created"
            self.report.add("response-order", f"{kind!r} comes {after}", position)
            return
        named = payload.get("response_id")
        if named is not None and self.open[1] is not None and named != self.open[1]:
            message = f"{kind!r} names response {named!r}, not the open {self.open[1]!r}"
            self.report.add("response-id", message, position)


def _get(mapping: object, key: str) -> object:
    return mapping.get(key) if isinstance(mapping, Mapping) else None


def _realtime(frames: Sequence[Frame]) -> list[Violation]:
    walker = _Realtime()
    walker.walk(frames)
    return walker.report.violations


# --- the Responses WebSocket mode --------------------------------------------------------


def _responses_ws(frames: Sequence[Frame]) -> list[Violation]:
    """Each turn's server events checked as a Responses stream, indices made positions."""
    report = Report("responses-ws")
    found: list[Violation] = []
    turns: list[tuple[int, list[tuple[int, TimedEvent]]]] = []
    for position, frame, payload in _events(frames):
        kind = None if payload is None else payload.get("type")
        if frame.sender == "client":
            if kind == "response.create":
                turns.append((position, []))
            continue
        if turns:
            turns[-1][1].append(
                (position, TimedEvent(at=frame.at, event=str(kind or ""), data=frame.text))
            )
    for opening, events in turns:
        if not events:
            report.add("turn", "the response.create has no answer", opening)
            continue
        places = [position for position, _ in events]
        for violation in responses.check([e for _, e in events]):
            index = places[0] if violation.index is None else places[violation.index]
            found.append(Violation(violation.rule, violation.message, index))
    return found + report.violations
