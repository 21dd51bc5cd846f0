"""Secrets inside the messages of an AWS event stream (`application/vnd.amazon.eventstream`,
Bedrock's `ConverseStream`): each message's payload is redacted as a JSON body is, and a
message that changed is encoded anew, with fresh prelude and message CRCs, so that the
client's own checksum check (botocore's) still passes on the replayed bytes.

`InvokeModelWithResponseStream`'s `chunk` messages carry the model's own JSON event as base64
in the payload's `bytes` field: that JSON is redacted too, and encoded back into base64.

Only the payload changes: the headers (`:event-type`, …) are kept byte for byte. A message
whose CRC does not match is left as recorded (re-encoding it would hide the damage), as is
a compressed body (Content-Encoding) and one cut inside a message (its last part).

Chunks: each keeps its arrival time. A rewritten message is usually shorter (the placeholder
replaces a longer key) or longer by a few bytes, so the chunk that carries it carries that
many bytes fewer or more. Chunk boundaries stay where they were relative to the messages:
one between messages moves with them (by the bytes changed before it); one inside a
rewritten message keeps its distance from the message's start (a split in its prelude or
headers stays exactly there), up to the new message's last byte at most (a split in a
payload that got shorter than it). A chunk that is left with no bytes at all (its bytes
were all in the part of a payload that went) is dropped, with its time.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import zlib
from collections.abc import Callable, Iterable, Sequence

import attrs

from replay.framing import eventstream
from replay.model import Chunks, Response
from replay.redact import deep_json

__all__ = ["is_event_stream", "redact_payloads"]

_PRELUDE = 12
_Edit = tuple[int, int, bytes]  # a message's old start and end, and its new bytes


def is_event_stream(response: Response) -> bool:
    """Whether `response` declares an AWS event stream, its body sent as is (no encoding)."""
    media_type = (response.header("content-type") or "").split(";")[0].strip().lower()
    encoding = (response.header("content-encoding") or "identity").strip().lower()
    return media_type == eventstream.CONTENT_TYPE and encoding in ("", "identity")


def redact_payloads(response: Response, clean: Callable[[bytes], bytes]) -> Response:
    """`response` with `clean` applied to each message's payload (it returns the payload
    itself when it has nothing to hide), the messages it changed re-encoded with fresh CRCs
    and the chunks cut as the module says; `response` itself when nothing changed."""
    body = response.body
    edits: list[_Edit] = []
    for start, total, headers in eventstream.spans(body):
        message = body[start : start + total]
        if zlib.crc32(message[:-4]) != int.from_bytes(message[-4:], "big"):
            continue  # damaged: left as recorded
        payload = message[_PRELUDE + headers : -4]
        cleaned = _inner(clean(payload), clean)
        if cleaned is not payload and cleaned != payload:
            edits.append((start, start + total, eventstream.reencode(message, cleaned)))
    if not edits:
        return response
    return attrs.evolve(response, chunks=_rechunked(response.chunks, body, edits))


def _inner(payload: bytes, clean: Callable[[bytes], bytes]) -> bytes:
    """`payload` with `clean` applied to the JSON its `bytes` field holds as base64 too; the
    same object when that is clean, or there is none."""
    if b'"bytes"' not in payload:
        return payload
    try:
        outer = deep_json.loads(payload)
        encoded = outer["bytes"]
        inner = base64.b64decode(encoded, validate=True)
    except (ValueError, TypeError, KeyError, binascii.Error):
        return payload
    cleaned = clean(inner)
    if cleaned is inner or cleaned == inner:
        return payload
    outer["bytes"] = base64.b64encode(cleaned).decode("ascii")
    separators = (", ", ": ") if b": " in payload else (",", ":")
    return deep_json.dumps(outer, separators=separators).encode()


def _rechunked(chunks: Chunks, body: bytes, edits: Sequence[_Edit]) -> Chunks:
    """The chunks of `body` with `edits` made, each boundary moved as the module says."""
    pieces: list[bytes] = []
    position = 0
    for start, end, new in edits:
        pieces += [body[position:start], new]
        position = end
    pieces.append(body[position:])
    edited = b"".join(pieces)
    ends = _moved(itertools.accumulate(map(len, chunks.payloads)), edits)
    times: list[float] = []
    payloads: list[bytes] = []
    previous = 0
    for at, old, end in zip(chunks.times, chunks.payloads, ends, strict=True):
        end = max(end, previous)
        if end > previous or not old:  # (a chunk recorded empty stays)
            times.append(at)
            payloads.append(edited[previous:end])
        previous = end
    return Chunks(times, payloads)


def _moved(boundaries: Iterable[int], edits: Sequence[_Edit]) -> list[int]:
    """Where each old body offset of `boundaries` (ascending) lands once `edits` are made:
    one walk over both."""
    moved: list[int] = []
    index = shift = 0
    for boundary in boundaries:
        while index < len(edits) and edits[index][1] <= boundary:
            start, end, new = edits[index]
            shift += len(new) - (end - start)
            index += 1
        if index < len(edits) and edits[index][0] < boundary:  # inside a rewritten message
            start, _, new = edits[index]
            moved.append(start + shift + min(boundary - start, len(new) - 1))
        else:
            moved.append(boundary + shift)
    return moved
