"""Pure reshapings of a recorded `Response`, the arithmetic beneath `replay.faults`.

Every function takes a response and returns a new one (the recording is never changed):
where its body's events end (any framing) and the points inside them, the body cut at a
byte, a silence inserted at a byte, the bytes re-split into other chunks (by size, or at
events), the timeline stretched or disturbed. Offsets are raw body
bytes (still compressed, for a compressed body); times are recorded seconds since the send.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Iterator, Sequence

import attrs

from replay.engine.ends import CUT_NAME
from replay.framing import boundaries, detect
from replay.model import Chunks, Response, StreamEnd

__all__ = [
    "CUT_ERROR",
    "CUT_MESSAGE",
    "INSIDE",
    "chunk_at_offset",
    "cut_at",
    "event_ends",
    "inside_events",
    "jitter",
    "offset_after_events",
    "rechunk",
    "rechunk_at",
    "rechunk_events",
    "scale",
    "silence_at",
]

#: How a dropped connection ends the body: the end vocabulary's name for a cut (httpx's), and
#: the message httpx gives it.
CUT_ERROR = CUT_NAME
CUT_MESSAGE = (
    "peer closed connection without sending complete message body (incomplete chunked read)"
)


def _is_encoded(response: Response) -> bool:
    encoding = (response.header("content-encoding") or "identity").strip().lower()
    return encoding not in ("", "identity")


#: Where inside an event a fault may fall: an AWS event-stream message's prelude, headers or
#: payload (`inside_events`).
INSIDE = ("prelude", "headers", "payload")
_PRELUDE = 12  # an event-stream message's prelude: total length, headers length, CRC


def event_ends(response: Response) -> list[int]:
    """The raw body offset just past each event, whatever the body's framing (SSE events,
    NDJSON lines, JSON-array elements, AWS event-stream messages): `replay.framing.boundaries`.

    Exact for a body as sent; for a compressed one an event ends at the end of the raw chunk
    whose decoding completed it (chunk granularity).
    """
    return boundaries.event_ends(response)


def offset_after_events(response: Response, count: int, inside: str | None = None) -> int:
    """The body offset just past event `count` (0: the start; past the last: the end), or,
    with `inside`, a point inside event `count + 1` (see `inside_events`)."""
    if count == 0 and inside is None:
        return 0
    ends = event_ends(response)
    if inside is not None:
        if count >= len(ends):
            return len(response.body)
        start = ends[count - 1] if count else 0
        return inside_events(response, [(start, ends[count])], inside)[0]
    return ends[count - 1] if count <= len(ends) else len(response.body)


def inside_events(response: Response, spans: Sequence[tuple[int, int]], inside: str) -> list[int]:
    """For each event whose bytes are [start, end) in `spans`, the body offset inside it that
    `inside` names.

    In an AWS event-stream message: "prelude", its sixth byte (halfway through the lengths
    and CRC); "headers", halfway through its headers (where the payload starts, without
    headers); "payload", halfway through its payload (where its CRC starts, without one).
    In any other framing, each is the middle of the event's bytes (an SSE event, an NDJSON
    line, a JSON-array element with the comma or `[` before it). A compressed body has no
    such point in its raw bytes: the event's end is taken (chunk granularity).
    """
    if inside not in INSIDE:
        raise ValueError(f"inside must be one of {', '.join(INSIDE)}, not {inside!r}")
    if _is_encoded(response):
        return [end for _, end in spans]
    body = response.body if detect(response) == "eventstream" else None
    return [_inside(body, start, end, inside) for start, end in spans]


def _inside(messages: bytes | None, start: int, end: int, inside: str) -> int:
    """The point of [`start`, `end`) that `inside` names (`messages`: the body, when its
    events are event-stream messages)."""
    if end - start < 2:
        return end
    if messages is None or end - start < _PRELUDE + 4:
        return start + max(1, (end - start) // 2)
    headers = int.from_bytes(messages[start + 4 : start + 8], "big")
    payload = max(0, end - start - _PRELUDE - 4 - headers)
    point = {"prelude": _PRELUDE // 2, "headers": _PRELUDE + headers // 2}.get(
        inside, _PRELUDE + headers + payload // 2
    )
    return start + min(point, end - start - 1)


def _starts(chunks: Chunks) -> list[int]:
    return list(itertools.accumulate((len(p) for p in chunks.payloads), initial=0))


def chunk_at_offset(response: Response, offset: int) -> int:
    """The index of the chunk holding body byte `offset`; the chunk count for the end."""
    starts = _starts(response.chunks)
    if offset >= starts[-1]:
        return len(response.chunks)
    return bisect.bisect_right(starts, offset) - 1


def _split(response: Response, offset: int) -> tuple[list[float], list[bytes], int]:
    """The chunk columns with a boundary at `offset`, and the index of the chunk after it."""
    times, payloads = list(response.chunks.times), list(response.chunks.payloads)
    index = chunk_at_offset(response, offset)
    if index < len(payloads):
        inside = offset - _starts(response.chunks)[index]
        if inside:
            data = payloads[index]
            payloads[index : index + 1] = [data[:inside], data[inside:]]
            times.insert(index, times[index])
            index += 1
    return times, payloads, index


def cut_at(response: Response, offset: int) -> Response:
    """The body up to byte `offset`, then the connection drops (`CUT_ERROR`).

    The drop comes with the last byte kept (at the headers, for an empty body).
    """
    times, payloads, index = _split(response, min(offset, len(response.body)))
    times, payloads = times[:index], payloads[:index]
    dropped_at = times[-1] if times else response.headers_at
    return attrs.evolve(
        response,
        chunks=Chunks(times, payloads),
        end=StreamEnd(at=dropped_at, error=CUT_ERROR, message=CUT_MESSAGE),
    )


def silence_at(response: Response, offset: int, seconds: float) -> tuple[Response, int]:
    """`seconds` of silence before body byte `offset`: later bytes and the end come later.

    Returns the new response and the index of the chunk delivered after the silence (the
    chunk count when the silence comes before the end of the body).
    """
    times, payloads, index = _split(response, offset)
    times[index:] = [at + seconds for at in times[index:]]
    end = attrs.evolve(response.end, at=response.end.at + seconds)
    return attrs.evolve(response, chunks=Chunks(times, payloads), end=end), index


def _sizes(size: int | str, seed: int, payloads: Sequence[bytes]) -> Iterator[int]:
    if isinstance(size, int):
        return itertools.repeat(size)
    rng = random.Random(seed)
    mean = sum(map(len, payloads)) / max(1, len(payloads))
    upper = max(1, round(2 * mean))  # splits most recorded chunks and merges some
    return (rng.randint(1, upper) for _ in itertools.count())


def rechunk(response: Response, size: int | str, seed: int = 0) -> Response:
    """The same bytes in chunks of `size` bytes (or "random" sizes, from `seed`).

    Timing as `rechunk_at`'s: each recorded chunk still completes at its recorded time.
    """
    payloads = response.chunks.payloads
    total = sum(map(len, payloads))
    cuts = itertools.takewhile(total.__gt__, itertools.accumulate(_sizes(size, seed, payloads)))
    return rechunk_at(response, list(cuts))


def rechunk_events(response: Response, inside: str | None = None) -> Response:
    """One chunk per event (what comes after the last event, e.g. a JSON array's `]`, is one
    more), whatever the framing; with `inside`, each event in two chunks, split at that point
    of it (`inside_events`: an event-stream message's prelude, headers or payload)."""
    ends = event_ends(response)
    if inside is None:
        return rechunk_at(response, ends)
    spans = list(zip([0, *ends], ends, strict=False))
    points = inside_events(response, spans, inside)
    return rechunk_at(response, [c for pair in zip(points, ends, strict=True) for c in pair])


def rechunk_at(response: Response, cuts: Sequence[int]) -> Response:
    """The same bytes in other chunks: a new one ends at each offset of `cuts` (ascending;
    those outside the body, or repeated, are ignored) and at the end of the body.

    Timing: the bytes of each recorded chunk are spread evenly over the gap before it (from
    the previous chunk, or the headers), so each recorded chunk still completes at its
    recorded time; a new chunk arrives with its last byte. No byte comes later than it did:
    a new chunk ending inside a recorded one comes earlier, with its share of the gap.
    """
    payloads = response.chunks.payloads
    if not payloads:
        return response
    body = b"".join(payloads)
    starts = _starts(response.chunks)
    new_times: list[float] = []
    new_payloads: list[bytes] = []
    position, chunk = 0, 0
    for cut in (*cuts, len(body)):
        if not position < cut <= len(body):
            continue
        last = cut - 1  # the piece's last byte
        while starts[chunk + 1] <= last:
            chunk += 1
        new_times.append(_arrival(response, chunk, last - starts[chunk], starts))
        new_payloads.append(body[position:cut])
        position = cut
    return attrs.evolve(response, chunks=Chunks(new_times, new_payloads))


def _arrival(response: Response, chunk: int, byte: int, starts: list[int]) -> float:
    """When byte `byte` of recorded chunk `chunk` arrives, its bytes spread over the gap."""
    times = response.chunks.times
    length = starts[chunk + 1] - starts[chunk]
    at = times[chunk]
    if byte == length - 1:
        return at
    before = times[chunk - 1] if chunk else response.headers_at
    return min(at, before + (at - before) * (byte + 1) / length)


def scale(response: Response, factor: float) -> Response:
    """Every time (headers, chunks, end) multiplied by `factor`."""
    chunks = response.chunks
    return attrs.evolve(
        response,
        headers_at=response.headers_at * factor,
        chunks=Chunks([at * factor for at in chunks.times], chunks.payloads),
        end=attrs.evolve(response.end, at=response.end.at * factor),
    )


def jitter(response: Response, seconds: float, seed: int = 0) -> Response:
    """Each chunk moved by a random time in [-seconds, +seconds] (from `seed`), kept in order.

    A chunk never comes before the headers nor before the chunk ahead of it; the end keeps
    its distance from the last chunk.
    """
    times = response.chunks.times
    if not times:
        return response
    rng = random.Random(seed)
    moved: list[float] = []
    floor = response.headers_at
    for at in times:
        floor = max(floor, at + rng.uniform(-seconds, seconds))
        moved.append(floor)
    end_at = max(moved[-1], response.end.at + moved[-1] - times[-1])
    return attrs.evolve(
        response,
        chunks=Chunks(moved, response.chunks.payloads),
        end=attrs.evolve(response.end, at=end_at),
    )
