"""Faults on a replayed WebSocket conversation: `replay.faults`' vocabulary, read for frames.

    import replay
    from replay import faults
    from replay.engine.frame_faults import close, delay

    with replay.use_cassette("realtime.msgpack", faults=[close(after_events=3, code=1011)]):
        ...  # the server closes with 1011 after its third message

An "event" of a conversation is a message of the server (a text or binary frame), counted
from 1 (`after_events=0`: before the first). What each fault does to one:

    cut(after_events=N)                  the connection drops after the server's Nth message:
                                         no close frame (the client sees code 1006)
    stall(after_events=N, seconds=S)     S seconds of silence after it: what follows, later
    slow(factor)                         every recorded time multiplied by `factor`
    close(after_events=N, code=, reason=) the server closes with `code` after its Nth message
    delay(event=N, seconds=S)            the Nth message comes S seconds late; those after it
                                         come as recorded, but never before it
    status(code, ...)                    the upgrade is answered `code` (no conversation)

`rechunk` and `jitter` leave a conversation as it is. `close` and `delay` are `Fault`s (they
leave an HTTP response as it is; their values live in `replay.faults.frames`, so that
`replay run --fault "close(after_events=3, code=1011)"` specs name them too). `faulted` is the
pure transform; the peer (and `replay serve`) plays its result.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from replay.faults.frames import Close, Delay, close, delay
from replay.faults.types import Cut, Fault, Slow, Stall
from replay.model import Request
from replay.model.chunks import MAX_SECONDS
from replay.model.frames import Frame

__all__ = ["Close", "Delay", "close", "delay", "faulted", "targeted"]


def targeted(
    frames: Sequence[Frame], faults: Sequence[Fault], index: int, request: Request
) -> tuple[tuple[Frame, ...], int]:
    """`faulted` by those of `faults` that target interaction `index` (its upgrade
    `request`): what a replayed conversation plays, and where its connection drops."""
    return faulted(frames, [fault for fault in faults if fault.applies_to(index, request)])


def _after(frames: Sequence[Frame], events: int) -> int:
    """The position after which `events` server messages have gone (-1: before any)."""
    if events == 0:
        return -1
    seen = 0
    for position, frame in enumerate(frames):
        if frame.sender == "server" and frame.kind in ("text", "binary"):
            seen += 1
            if seen == events:
                return position
    return len(frames) - 1


def _shifted(frames: Sequence[Frame], start: int, seconds: float) -> list[Frame]:
    """`frames`, those from `start` on `seconds` later (bounded by the model's limit)."""
    return [
        f if i < start else attrs.evolve(f, at=min(f.at + seconds, MAX_SECONDS))
        for i, f in enumerate(frames)
    ]


def _delayed(frames: list[Frame], position: int, seconds: float) -> list[Frame]:
    """The frame at `position` `seconds` late, and the rest of its turn (up to the client's
    next message) never before it."""
    late = min(frames[position].at + seconds, MAX_SECONDS)
    result = frames[:position]
    for i in range(position, len(frames)):
        frame = frames[i]
        if frame.sender == "client" and frame.kind in ("text", "binary"):
            return result + frames[i:]
        result.append(attrs.evolve(frame, at=max(frame.at, late)))
    return result


def faulted(frames: Sequence[Frame], faults: Sequence[Fault]) -> tuple[tuple[Frame, ...], int]:
    """The frames `faults` make of `frames` (applied in order), and the position after
    which the connection drops (`len(frames)`: it does not)."""
    result, drop = list(frames), len(frames)
    for fault in faults:
        if isinstance(fault, Slow):
            result = [attrs.evolve(f, at=min(f.at * fault.factor, MAX_SECONDS)) for f in result]
        elif isinstance(fault, Stall):
            result = _shifted(result, _after(result, fault.after_events) + 1, fault.seconds)
        elif isinstance(fault, Delay) and result:
            result = _delayed(result, _after(result, fault.event), fault.seconds)
        elif isinstance(fault, (Cut, Close)):
            events = fault.after_events if fault.after_events is not None else 0
            position = _after(result, events)
            at = result[position].at if position >= 0 else 0.0
            result = result[: position + 1]
            if isinstance(fault, Close):
                result.append(Frame.close(at, "server", fault.code, fault.reason))
            drop = len(result) - 1 if isinstance(fault, Cut) else len(result)
    return _in_order(result), drop


def _in_order(frames: list[Frame]) -> tuple[Frame, ...]:
    """`frames` with no time going back (a delayed message holds the client's next one back
    in time, never in order)."""
    last, ordered = 0.0, []
    for frame in frames:
        if frame.at < last:
            frame = attrs.evolve(frame, at=last)
        ordered.append(frame)
        last = frame.at
    return tuple(ordered)
