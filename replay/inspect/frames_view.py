"""A WebSocket conversation read by `replay show`, `replay diff` and `replay report`.

Each frame (`replay.model.frames`) is shown by its direction (`→` the client sent it, `←`
the server did), its time since the upgrade request, its kind, and for a JSON text frame its
event `type` (`response.create`, `response.output_text.delta`, …):

      0.012  ←  text    session.created              {"type":"session.created",…}
      0.015  →  text    response.create              {"type":"response.create",…}
      0.083  ←  text    response.output_text.delta   "You "  {"type":…}

`frame_events` gives the same frames as timed events (`event` the direction and type,
`data` the payload; a binary payload as its size and digest), so that `replay diff`
compares two conversations frame by frame with the code that compares two streams.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Final

from replay.dialects.common import json_object
from replay.framing.timed_event import TimedEvent
from replay.model.frames import Frame

__all__ = [
    "ARROWS",
    "frame_data",
    "frame_events",
    "frame_lines",
    "frame_name",
    "frame_texts",
    "frames_summary",
]

#: The direction of a frame, by its sender.
ARROWS: Final = {"client": "→", "server": "←"}


def frame_name(frame: Frame) -> str:
    """The frame's direction and what it is: `→ response.create`, `← binary`, `← close`."""
    return f"{ARROWS[frame.sender]} {frame.event_type or frame.kind}"


def frame_data(frame: Frame) -> str:
    """The frame's payload as text: a text frame's text; a close's code and reason; other
    payloads (binary, ping, pong) as their size and the start of their SHA-256."""
    if frame.kind == "text":
        return frame.text
    if frame.kind == "close":
        code = "no code" if frame.code is None else str(frame.code)
        return f"{code} {frame.reason}".rstrip()
    if not frame.data:
        return ""
    digest = hashlib.sha256(frame.data).hexdigest()[:12]
    return f"<{len(frame.data)} bytes, sha256 {digest}>"


def frame_events(frames: Sequence[Frame]) -> list[TimedEvent]:
    """The frames as timed events: `event` is `frame_name`, `data` is `frame_data`."""
    return [TimedEvent(at=f.at, event=frame_name(f), data=frame_data(f)) for f in frames]


def _piece(frame: Frame) -> str:
    """What a delta event adds to what a response says (text, a transcript, a tool call's
    arguments), else "" (an audio delta's base64 is no text)."""
    kind = frame.event_type or ""
    if not kind.endswith(".delta") or kind.endswith("audio.delta"):
        return ""
    payload = json_object(frame.text)
    value = None if payload is None else payload.get("delta")
    return value if isinstance(value, str) else ""


def frame_texts(frames: Sequence[Frame]) -> dict[str, str]:
    """What the server's responses say, joined from their deltas, per turn: `text (turn N)`,
    `transcript (turn N)` (an audio transcript's), `arguments (turn N)` (a tool call's), N
    counting the client's messages before (0: none)."""
    texts: dict[str, str] = {}
    turn = 0
    for frame in frames:
        if frame.sender == "client":
            turn += frame.kind in ("text", "binary")
        elif piece := _piece(frame):
            kind = frame.event_type or ""
            what = next((w for w in ("transcript", "arguments") if w in kind), "text")
            name = f"{what} (turn {turn})"
            texts[name] = texts.get(name, "") + piece
    return texts


def frame_lines(frames: Sequence[Frame], cut: Callable[[str], str]) -> list[str]:
    """One line per frame (see the module's docstring): time, direction, kind, event type,
    the piece a delta adds (quoted), then the payload; `cut` shortens what follows the type
    to one line."""
    if not frames:
        return ["  (no frames)"]
    types = [frame.event_type or "" for frame in frames]
    width = min(32, max(len(kind) for kind in types))
    lines = []
    for frame, kind in zip(frames, types, strict=True):
        piece = _piece(frame)
        data = frame_data(frame)
        shown = f"{json.dumps(piece, ensure_ascii=False)}  {data}" if piece else data
        head = f"  {frame.at:8.3f}  {ARROWS[frame.sender]}  {frame.kind:<6}  {kind:<{width}}"
        lines.append(f"{head}  {cut(shown)}".rstrip())
    return lines


def frames_summary(frames: Sequence[Frame]) -> str:
    """How many frames each side sent, and how the conversation closed."""
    sent = {side: sum(f.sender == side for f in frames) for side in ARROWS}
    close = next((f for f in frames if f.kind == "close"), None)
    how = "no close frame" if close is None else f"closed by the {close.sender}"
    if close is not None and close.code is not None:
        how += f" with {close.code}"
    sides = f"{sent['client']} from the client, {sent['server']} from the server"
    return f"{len(frames)} frames: {sides}; {how}"
