"""Which recorded WebSocket client frame a frame sent on replay is: JSON-aware keys.

A text frame that is JSON is keyed by its canonical form (keys sorted, spacing gone) without
the fields that differ on every run by design: `IGNORED_KEYS` (a Realtime client's
`event_id`, timestamps), at any depth. Other text frames are keyed by their text, binary
frames by their bytes. `nearest` finds the recorded frame a mismatch names: the same event
`type` first, then the most alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from replay.model.frames import Frame
from replay.redact import deep_json

__all__ = ["IGNORED_KEYS", "differences", "frame_key", "nearest", "shown"]

#: JSON fields left out of a client frame's key, at any depth: ids and times a client makes
#: afresh for each run (OpenAI Realtime / Responses WebSocket `event_id`, timestamps).
IGNORED_KEYS: Final = frozenset({"event_id", "client_event_id", "timestamp", "created_at"})

#: How much of a frame a message shows.
_SHOWN = 160


def _empty(value: Any) -> Any:
    return {} if isinstance(value, dict) else [] if isinstance(value, list) else value


def _stripped(value: Any, ignored: frozenset[str]) -> Any:
    """`value` without the `ignored` fields at any depth (an explicit stack: a frame nested
    past Python's recursion limit is keyed as any other)."""
    result = _empty(value)
    todo = [(value, result)] if isinstance(value, dict | list) else []
    while todo:
        source, copy = todo.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for name, inner in items:
            if isinstance(source, dict) and name in ignored:
                continue
            made = _empty(inner)
            if isinstance(copy, dict):
                copy[name] = made
            else:
                copy.append(made)
            if isinstance(inner, dict | list):
                todo.append((inner, made))
    return result


def frame_key(kind: str, data: bytes, ignored: frozenset[str] = IGNORED_KEYS) -> tuple[str, Any]:
    """The key of a client frame: equal for two frames that match (at any depth)."""
    if kind == "text":
        try:
            value = deep_json.loads(data)
        except ValueError:
            return ("text", data)
        canonical = deep_json.dumps(
            _stripped(value, ignored), sort_keys=True, separators=(",", ":")
        )
        return ("json", canonical)
    return (kind, data)


def shown(frame: Frame) -> str:
    """A frame for a message: its kind and the start of its payload (key shapes hidden)."""
    from replay.redact.shapes import hide_shapes

    if frame.kind == "text":
        text = frame.text
        body = text if len(text) <= _SHOWN else f"{text[:_SHOWN]}… ({len(text)} characters)"
        return hide_shapes(body)
    return f"<{frame.kind} frame, {len(frame.data)} bytes>"


def nearest(frame: Frame, candidates: Iterable[tuple[int, Frame]]) -> tuple[int, Frame] | None:
    """The candidate (position, recorded frame) most like `frame`: of the same kind and
    event type first, then the most alike text; None for no candidates."""
    import difflib  # (here: only a mismatch needs it)

    best: tuple[tuple[bool, bool, float], int, Frame] | None = None
    wanted_type = frame.event_type
    text = frame.text[:2000]
    for position, recorded in candidates:
        same_kind = recorded.kind == frame.kind
        same_type = wanted_type is not None and recorded.event_type == wanted_type
        ratio = difflib.SequenceMatcher(None, text, recorded.text[:2000]).quick_ratio()
        score = (same_type, same_kind, ratio)
        if best is None or score > best[0]:
            best = (score, position, recorded)
    return None if best is None else (best[1], best[2])


def differences(frame: Frame, recorded: Frame, ignored: frozenset[str] = IGNORED_KEYS) -> list[str]:
    """How `frame` differs from `recorded`, field by field when both are JSON objects."""
    sent, kept = frame.json(), recorded.json()
    if not (isinstance(sent, dict) and isinstance(kept, dict)):
        return (
            []
            if frame.kind == recorded.kind
            else [f"kind differs: {frame.kind} vs {recorded.kind}"]
        )
    lines = []
    for name in sorted(set(sent) | set(kept)):
        if name in ignored or _stripped(sent.get(name), ignored) == _stripped(
            kept.get(name), ignored
        ):
            continue
        if name not in kept:
            lines.append(f"field {name!r}: not in the recorded frame")
        elif name not in sent:
            lines.append(f"field {name!r}: missing (the recorded frame has it)")
        else:
            lines.append(f"field {name!r} differs")
    return lines[:8]


def positions(frames: Sequence[Frame]) -> list[int]:
    """The positions of the client's data frames (text, binary): those replay matches."""
    return [
        i for i, f in enumerate(frames) if f.sender == "client" and f.kind in ("text", "binary")
    ]
