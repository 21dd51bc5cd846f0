"""A recorded body with its Content-Encoding undone, chunk by chunk, keeping each chunk's time.

Owns content decoding for the value types (`Response.decoded_chunks` and `Response.events`)
and for the dialects: gzip and deflate, decoded incrementally so that each piece keeps the
arrival time of the chunk it came from.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replay.model import Response

__all__ = ["Inflater", "decoded_chunks"]


def decoded_chunks(response: Response) -> Iterable[tuple[float, bytes]]:
    """The body as (arrival time, bytes) pairs with its Content-Encoding undone.

    Raises:
        ValueError: an unsupported encoding, or data that does not decode.
    """
    encoding = (response.header("content-encoding") or "identity").strip().lower()
    if encoding in ("", "identity"):
        return ((chunk.at, chunk.data) for chunk in response.chunks)
    decoder = Inflater(encoding)
    try:
        pieces = [(chunk.at, decoder.decode(chunk.data)) for chunk in response.chunks]
        pieces.append((response.end.at, decoder.flush()))
    except zlib.error as exc:
        raise ValueError(f"the body is not valid {encoding} data: {exc}") from exc
    return pieces


class Inflater:
    """Incremental gzip / deflate decoder (deflate: zlib-wrapped, or raw as some servers send)."""

    def __init__(self, encoding: str) -> None:
        if encoding in ("gzip", "x-gzip"):
            wbits = zlib.MAX_WBITS | 16
        elif encoding == "deflate":
            wbits = zlib.MAX_WBITS
        else:
            raise ValueError(
                f"cannot decode a body with content-encoding {encoding!r} "
                "(gzip and deflate are supported)"
            )
        self._decompressor = zlib.decompressobj(wbits)
        self._may_be_raw = encoding == "deflate"

    def decode(self, data: bytes) -> bytes:
        """The bytes `data` decodes to so far (a raw deflate stream is detected here)."""
        if self._may_be_raw and data:
            self._may_be_raw = False
            try:
                return self._decompressor.decompress(data)
            except zlib.error:
                self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._decompressor.decompress(data)

    def flush(self) -> bytes:
        """What the decoder still holds, at the end of the body."""
        return self._decompressor.flush()
