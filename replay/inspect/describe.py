"""Human views of a cassette, for `replay show` and `replay play`.

`table` is the diff view (also a git `textconv`): one line per interaction, each line built
from that interaction alone with fixed column widths, so that changing one interaction
changes one line. Its `digest` column is a hash of the interaction as stored, so that a
change no other column shows (a reworded prompt, a moved chunk) still shows in a diff.
`events` and `raw` are reading views; `timeline` draws when each interaction's chunks came,
in one line each; `to_json` is the machine-readable export (`replay.convert.files` reads it back);
`play` writes a body to a stream at its recorded pace.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import BinaryIO

import attrs

from replay import framing
from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, speed_of
from replay.dialects import closed_after_end
from replay.dialects.texts import event_pieces
from replay.engine import Data, End, Player, Stepper, step_sync
from replay.engine.ends import CLOSED_AFTER_END, CLOSED_AFTER_END_TEXT
from replay.errors import ConfigurationError
from replay.faults import FaultLike
from replay.inspect.frames_view import frame_lines, frames_summary
from replay.inspect.printable import printable
from replay.inspect.provenance import times_note
from replay.model import Chunks, Interaction, Response, TimedEvent
from replay.store.cassette import Cassette
from replay.store.file import dumps

__all__ = [
    "DATA_WIDTH",
    "SPARK_WIDTH",
    "events",
    "play",
    "raw",
    "sparkline",
    "table",
    "timeline",
    "to_json",
]

#: Event data longer than this is cut (with "...") in the `events` view.
DATA_WIDTH = 100
#: Characters of the sparkline in the `timeline` view.
SPARK_WIDTH = 40

_ROW = "{:>3}  {:<7}  {:>6}  {:>6}  {:>9}  {:>9}  {:>11}  {:>6}  {:<20}  {:<12}  {}"
#: The width of the `end` column: the longest error names of the libraries served fit
#: (`ChunkedEncodingError`); a longer one is cut, its end shown by "~".
_END_WIDTH = 20
_HEADER = _ROW.format(
    "#", "method", "status", "chunks", "bytes", "ttfb_ms", "duration_ms", "events", "end",
    "digest", "url",
)  # fmt: skip

# C0 controls and DEL, shown escaped so that each event stays on one line.
_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(32), 127)}
_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def table(cassette: Cassette) -> str:
    """One aligned line per interaction, under a header line; ends with a newline.

    Columns: index, method, status, chunks, body bytes (as recorded, still compressed if
    the body was), time to first byte and duration in milliseconds, events (0 when the
    response is not a stream, SSE or NDJSON, see `replay.framing.detect`; `?` when its body
    cannot be decoded, and a note under the table says why), how the body ended (`eof`,
    `truncated` or the error's class name), a digest of the whole interaction, and the URL.
    Nothing depends on the run or the file name: the same cassette always gives the same
    text.
    """
    lines = [_HEADER]
    notes: list[str] = []
    for index, interaction in enumerate(cassette.interactions):
        count, problem = _event_count(interaction.response)
        if interaction.frames is not None:  # a WebSocket conversation: its frames
            count = str(len(interaction.frames))
        lines.append(_row(index, interaction, count))
        if problem is not None:
            notes.append(f"#{index}: events ?: {_one_line(problem, 2 * DATA_WIDTH)}")
    if not cassette.interactions:
        lines.append("(no interactions)")
    notes.extend(times_note(cassette.interactions))
    return printable("\n".join([*lines, *notes])) + "\n"


def _row(index: int, interaction: Interaction, events: str) -> str:
    request, response = interaction.request, interaction.response
    ttfb = "-" if response.ttfb is None else _ms(response.ttfb)
    return _ROW.format(
        index,
        request.method,
        response.status,
        len(response.chunks),
        len(response.body),
        ttfb,
        _ms(response.duration),
        events,
        _end_name(interaction),
        _digest(interaction),
        request.url,
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def _event_count(response: Response) -> tuple[str, str | None]:
    """The `events` column, and why it is `?` (a body that does not decode) or None."""
    kind = framing.detect(response)
    if kind is None:
        return "0", None
    try:
        return str(framing.count(response, kind)), None
    except ValueError as error:  # damaged, unknown, missing its extra, past the limit
        return "?", str(error)


def _end_name(interaction: Interaction) -> str:
    end = interaction.response.end
    if end.error is not None:
        return end.error if len(end.error) <= _END_WIDTH else end.error[: _END_WIDTH - 1] + "~"
    stop = CLOSED_AFTER_END if closed_after_end(interaction) else "truncated"
    return stop if end.truncated else "eof"


def _digest(interaction: Interaction) -> str:
    return hashlib.sha256(dumps([interaction])).hexdigest()[:12]


def events(cassette: Cassette, width: int = DATA_WIDTH) -> str:
    """Each interaction's line, then its events (SSE or NDJSON): time (s), name, data.

    An event that adds to the stream's text (a delta of an LLM dialect: text, reasoning, a
    tool call's arguments) shows that piece first, quoted, then its data. What follows the
    name is cut at `width` characters (0: never); line breaks and control characters are
    shown escaped (`\\n`). The last line of each interaction tells how and when it ended.
    """
    lines: list[str] = []
    for index, interaction in enumerate(cassette.interactions):
        lines.extend(_interaction_events(index, interaction, width))
    if not cassette.interactions:
        lines.append("(no interactions)")
    return printable("\n".join(lines)) + "\n"


def _interaction_events(index: int, interaction: Interaction, width: int) -> list[str]:
    request, response = interaction.request, interaction.response
    lines = [f"#{index} {request.method} {request.url} -> {response.status}"]
    kind = framing.detect(response)
    if interaction.frames is not None:
        lines += frame_lines(interaction.frames, lambda text: _one_line(text, width))
        return [*lines, f"  ({frames_summary(interaction.frames)})"]
    if kind is None:
        content_type = response.header("content-type") or "none"
        lines.append(f"  (not an event stream: content-type {content_type})")
    else:
        try:
            timed = framing.events(response, kind)
        except ValueError as error:
            lines.append(f"  (the body cannot be decoded: {error})")
        else:
            lines.extend(_event_lines(timed, width))
    lines.append(f"  {response.end.at:8.3f}  ({_end_description(interaction)})")
    return lines


def _event_lines(timed: list[TimedEvent], width: int) -> list[str]:
    if not timed:
        return ["  (no events)"]
    names = min(32, max(len(event.event) for event in timed))
    pieces = event_pieces(timed)
    lines = []
    for event, piece in zip(timed, pieces, strict=True):
        shown = f"{json.dumps(piece, ensure_ascii=False)}  {event.data}" if piece else event.data
        lines.append(f"  {event.at:8.3f}  {event.event:<{names}}  {_one_line(shown, width)}")
    return [line.rstrip() for line in lines]


def _one_line(text: str, limit: int) -> str:
    escaped = text.translate(_ESCAPES)
    return escaped if not limit or len(escaped) <= limit else escaped[: limit - 3] + "..."


def _end_description(interaction: Interaction) -> str:
    end = interaction.response.end
    if end.error is not None:
        message = _one_line(end.message, DATA_WIDTH)
        return f"end: {end.error}: {message}" if message else f"end: {end.error}"
    if not end.truncated:
        return "end: eof"
    closed = closed_after_end(interaction)
    return f"end: {CLOSED_AFTER_END_TEXT if closed else f'truncated by the {end.stopped_by}'}"


_SPARKS = " \u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
_TIMELINE_ROW = "{:>3}  {}  {:>9}  {:>9}  {:>11}  {:<20}  {}"


def timeline(cassette: Cassette, width: int = SPARK_WIDTH) -> str:
    """One line per interaction: a sparkline of its chunks' arrivals, then its figures.

    The sparkline spreads the stream's duration (from the request to the end of the body)
    over `width` characters, each a block as high as the number of chunks that arrived in
    its time (a blank: none). Then time to first byte, time to first token
    (`replay.inspect.timing.ttft`; `-` without events) and duration in milliseconds, how the body
    ended (as in `table`), and the request.
    """
    head = f"{'chunk arrivals, request to end':<{width + 2}}"
    header = _TIMELINE_ROW.format("#", head, "ttfb_ms", "ttft_ms", "duration_ms", "end", "url")
    lines = [header.rstrip()]
    for index, interaction in enumerate(cassette.interactions):
        lines.append(_timeline_row(index, interaction, width))
    if not cassette.interactions:
        lines.append("(no interactions)")
    return printable("\n".join(lines)) + "\n"


def _timeline_row(index: int, interaction: Interaction, width: int) -> str:
    from replay.inspect import timing

    request, response = interaction.request, interaction.response
    try:
        ttft = timing.summary(response).ttft
    except ValueError:  # a body that does not decode: no events to time
        ttft = None
    times, duration = response.chunks.times, response.duration
    if interaction.frames:  # a WebSocket conversation: when its frames came
        times = tuple(frame.at for frame in interaction.frames)
        duration = max(duration, times[-1])
    return _TIMELINE_ROW.format(
        index,
        f"|{sparkline(times, duration, width)}|",
        "-" if response.ttfb is None else _ms(response.ttfb),
        "-" if ttft is None else _ms(ttft),
        _ms(duration),
        _end_name(interaction),
        f"{request.method} {request.url}",
    )


def sparkline(times: Iterable[float], duration: float, width: int = SPARK_WIDTH) -> str:
    """`width` Unicode blocks, each as high as the share of `times` that falls in its slice
    of [0, `duration`] (relative to the fullest slice; a blank for none)."""
    counts = [0] * width
    for at in times:
        slot = int(at / duration * width) if duration > 0 else 0
        counts[min(max(slot, 0), width - 1)] += 1
    most = max(counts) or 1
    levels = len(_SPARKS) - 1
    return "".join(_SPARKS[-(-count * levels // most)] for count in counts)


def raw(cassette: Cassette) -> str:
    """Each request and response as text: request line, headers, body; status, headers, body.

    Lines starting `>` are the request, `<` the response, `==` notes of replay's. Bodies are
    decoded as UTF-8 (bytes that are not are shown as `\\xNN`). A response body sent with
    Content-Encoding (gzip, deflate, br, zstd) is shown decompressed, and the note before it says
    so; the cassette itself keeps the compressed bytes.
    """
    lines: list[str] = []
    for index, interaction in enumerate(cassette.interactions):
        lines.extend(_raw_interaction(index, interaction))
    if not cassette.interactions:
        lines.append("(no interactions)")
    return printable("\n".join(lines)) + "\n"


def _raw_interaction(index: int, interaction: Interaction) -> list[str]:
    request, response = interaction.request, interaction.response
    lines = [f"== interaction {index} =="]
    lines.append(f"> {request.method} {request.url}")
    lines.extend(f"> {name}: {value}" for name, value in request.headers)
    lines.append(">")
    if request.body:
        lines.extend(_body_text(request.body, "request body"))
    times = f"; times: {response.times}" if response.times else ""
    lines.append(f"< {response.status}  (headers at {response.headers_at:.3f} s{times})")
    lines.extend(f"< {name}: {value}" for name, value in response.headers)
    lines.append("<")
    lines.extend(_response_body(response))
    if interaction.frames is not None:
        lines.append(f"== {frames_summary(interaction.frames)} ==")
        lines += frame_lines(interaction.frames, lambda text: _one_line(text, 0))
    lines.append(f"== {_end_description(interaction)} at {response.end.at:.3f} s ==")
    return lines


def _response_body(response: Response) -> list[str]:
    recorded = response.body
    encoding = (response.header("content-encoding") or "identity").strip().lower()
    if encoding in ("", "identity"):
        return _body_text(recorded, "body", chunks=len(response.chunks))
    try:
        decoded = b"".join(data for _, data in response.decoded_chunks())
    except ValueError as error:
        note = f"== body: {len(recorded)} bytes, shown as recorded ({error}) =="
        return [note, *_text_lines(recorded)]
    note = (
        f"== body: {len(response.chunks)} chunks, {len(recorded)} bytes of {encoding}, "
        f"shown decompressed ({len(decoded)} bytes) =="
    )
    return [note, *_text_lines(decoded)]


def _body_text(data: bytes, what: str, chunks: int | None = None) -> list[str]:
    pieces = f"{chunks} chunks, " if chunks is not None else ""
    return [f"== {what}: {pieces}{len(data)} bytes ==", *_text_lines(data)]


def _text_lines(data: bytes) -> list[str]:
    if not data:
        return []
    text = data.decode("utf-8", errors="backslashreplace")
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")


def to_json(cassette: Cassette) -> str:
    """The cassette as JSON (see `replay.convert.files.export_json`): every byte, every time."""
    from replay.convert.files import export_json

    return export_json(cassette.interactions)


def play(
    cassette: Cassette,
    index: int,
    speed: SpeedLike,
    out: BinaryIO,
    *,
    clock: Clock | None = None,
    decode: bool = True,
    faults: Iterable[FaultLike] = (),
) -> None:
    """Write interaction `index`'s response body to `out`, chunk by chunk, at recorded pace.

    Each chunk is written and flushed at its absolute deadline `start + at / speed`, then
    this waits until the recorded end of the body. A body that ended with an error simply
    stops there (the error is not raised).

    Args:
        cassette: the cassette.
        index: which interaction (0 is the first).
        speed: 1 = as recorded, 10 or "10x" = ten times faster, "instant" = no waiting.
        out: a binary stream (`sys.stdout.buffer`).
        clock: what to wait on (default: the real monotonic clock).
        decode: undo a gzip / deflate Content-Encoding, so the text is readable (default);
            with False, or an encoding replay cannot undo, the bytes are written as recorded.
        faults: faults (or specs) applied to what is played, as at replay: a cut stops
            the output there, a stall is a silence.

    Raises:
        ConfigurationError: no interaction `index`, a bad speed or fault.
    """
    _interaction_at(cassette, index)
    factor = speed_of(speed)
    response = (played := Player(cassette, faults=faults).play(index)).response
    if decode:
        response = _decoded(response)
    clock = MonotonicClock() if clock is None else clock
    stepper = Stepper(response, Schedule.starting_now(factor, clock), salt=played.index)
    while True:
        step = step_sync(stepper, clock)
        if isinstance(step, Data):
            if step.data:
                out.write(step.data)
                out.flush()
        elif isinstance(step, End):
            return


def _interaction_at(cassette: Cassette, index: int) -> Interaction:
    count = len(cassette.interactions)
    if count == 0:
        raise ConfigurationError("the cassette has no interactions to play")
    if not 0 <= index < count:
        raise ConfigurationError(
            f"there is no interaction {index}: the cassette has {count} (choose 0 to {count - 1})"
        )
    return cassette.interactions[index]


def _decoded(response: Response) -> Response:
    """`response` with its Content-Encoding undone, each piece at its chunk's time; as it
    is when replay cannot undo it (an unknown encoding, damaged data)."""
    try:
        pieces = response.decoded_chunks()
    except ValueError:
        return response
    times = [at for at, _ in pieces]
    payloads = [data for _, data in pieces]
    return attrs.evolve(response, chunks=Chunks(times, payloads))
