"""What a speed (a factor or a policy) and faults will do to each stream, before it is run:
`replay show --timeline --speed SPEC` (`played_timeline`), and the cassette as it will be
played (`played_cassette`: `replay report CASSETTE --speed SPEC` compares it with the file).

For each interaction, two rows on one time scale: the recorded timeline and the played one
(the times the Stepper will wait for, from `replay.engine.stepper.played_times`, the one
function a replay uses), each a sparkline of the chunks' arrivals, then its time to first
byte, time to first token, longest gap and duration in milliseconds. A policy's jitter is
drawn as a replay draws it (its seed and the interaction's position).

A WebSocket conversation's frames are drawn as `replay.engine.conversation` plays them: a
server frame due its recorded gap after the frame that released it (the client's last data
frame, or the upgrade request), scaled by `factor_of(speed)` (a policy's `rest`; its other
keys do not apply to frames); a client frame sent its recorded gap after the frame before it
(the client's own time, which a speed does not change: an estimate).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import attrs

from replay.clock import SpeedLike, factor_of, format_speed, speed_of
from replay.clock.policy import SpeedPolicy
from replay.engine import Player
from replay.engine.stepper import played_times, recorded_steps
from replay.faults import FaultLike
from replay.inspect.describe import SPARK_WIDTH, sparkline
from replay.inspect.printable import printable
from replay.model import Chunks, Frame, Interaction, Response
from replay.store.cassette import Cassette

__all__ = ["played_cassette", "played_timeline"]

_ROW = "{:>3}  {:<8}  {}  {:>9}  {:>9}  {:>9}  {:>11}"


def _policy(speed: SpeedLike) -> SpeedPolicy:
    chosen = speed_of(speed)
    return SpeedPolicy(chosen) if isinstance(chosen, (int, float)) else chosen


def played_timeline(
    cassette: Cassette,
    speed: SpeedLike,
    *,
    faults: Iterable[FaultLike] = (),
    width: int = SPARK_WIDTH,
) -> str:
    """The recorded and the played timeline of each interaction at `speed` (a factor or a
    policy), under `faults`, as text (see the module).

    Raises:
        ConfigurationError: a bad speed or fault.
    """
    policy = _policy(speed)
    player = Player(cassette, faults=faults)
    what = format_speed(speed_of(speed))
    lines = [f"played at speed {what!r}" + (" (faults applied)" if player.faults else "")]
    head = f"{'chunk arrivals, request to end':<{width + 2}}"
    header = _ROW.format("#", "", head, "ttfb_ms", "ttft_ms", "gap_ms", "duration_ms")
    lines.append(header.rstrip())
    for index, interaction in enumerate(cassette.interactions):
        response = player.play(index).response
        if interaction.frames:  # a WebSocket conversation: its frames' times
            at = tuple(frame.at for frame in interaction.frames)
            recorded, ttft = [0.0, *at, at[-1]], None
            played = [0.0, *(moved := frame_times(interaction.frames, policy)), moved[-1]]
        else:
            recorded = recorded_steps(response)
            played = played_times(response, policy, salt=index)
            ttft = _ttft_step(response)
        scale = max(recorded[-1], played[-1])
        for label, times in (("recorded", recorded), ("played", played)):
            row_index = index if label == "recorded" else ""
            lines.append(_row(row_index, label, times, ttft, scale, width, interaction))
        request = interaction.request
        lines.append(f"{'':>3}  {request.method} {request.url}")
    if not cassette.interactions:
        lines.append("(no interactions)")
    return printable("\n".join(lines)) + "\n"


def played_cassette(
    cassette: Cassette, speed: SpeedLike, *, faults: Iterable[FaultLike] = ()
) -> Cassette:
    """`cassette` as it will be played at `speed` under `faults`: each response with the
    times the replay waits for (the requests and bytes as the faults leave them).

    Raises:
        ConfigurationError: a bad speed or fault.
    """
    policy = _policy(speed)
    player = Player(cassette, faults=faults)
    interactions = []
    for index, interaction in enumerate(cassette.interactions):
        response = player.play(index).response
        if interaction.frames:
            at = frame_times(interaction.frames, policy)
            frames = [attrs.evolve(f, at=t) for f, t in zip(interaction.frames, at, strict=True)]
            interactions.append(attrs.evolve(interaction, frames=frames))
            continue
        played = played_times(response, policy, salt=index)
        moved = attrs.evolve(
            response,
            headers_at=played[0],
            chunks=Chunks(played[1:-1], response.chunks.payloads),
            end=attrs.evolve(response.end, at=played[-1]),
        )
        interactions.append(attrs.evolve(interaction, response=moved))
    return Cassette(interactions)


def frame_times(frames: Sequence[Frame], speed: SpeedLike) -> list[float]:
    """The times a conversation's `frames` are played at, at `speed` (see the module)."""
    factor = factor_of(speed_of(speed))
    played: list[float] = []
    before = before_at = anchor = anchor_at = 0.0
    for frame in frames:
        if frame.sender == "server":
            gap = max(0.0, frame.at - anchor_at)
            now = anchor if math.isinf(factor) else anchor + gap / factor
        else:
            now = before + max(0.0, frame.at - before_at)
            if frame.kind in ("text", "binary"):  # it releases the server's answer
                anchor, anchor_at = now, frame.at
        played.append(now)
        before, before_at = now, frame.at
    return played


def _ttft_step(response: Response) -> int | None:
    """The step (0: the headers) of the chunk that completes the first token, if any."""
    from replay.inspect import timing

    try:
        ttft = timing.ttft(response)
    except ValueError:  # a body that does not decode: no events to time
        return None
    if ttft is None:
        return None
    times = response.chunks.times
    return next((n + 1 for n, at in enumerate(times) if at >= ttft), None)


def _row(
    index: int | str,
    label: str,
    times: Sequence[float],
    ttft: int | None,
    scale: float,
    width: int,
    interaction: Interaction,
) -> str:
    """One timeline row: `times` are the steps' (the headers, each chunk or frame, the end)."""
    chunks = times[1:-1]
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    return _ROW.format(
        index,
        label,
        f"|{sparkline(chunks, scale, width)}|",
        _ms(chunks[0]) if chunks and not interaction.frames else "-",
        "-" if ttft is None else _ms(times[ttft]),
        _ms(max(gaps)),
        _ms(times[-1]),
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"
