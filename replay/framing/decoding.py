"""A recorded body with its Content-Encoding undone, chunk by chunk, keeping each chunk's time.

Owns content decoding for the value types (`Response.decoded_chunks`, `Response.events`),
the framings and the dialects: every coding HTTP clients send (gzip, deflate, br, zstd, and
a list of them, undone last first), decoded incrementally so that each piece keeps the
arrival time of the chunk it came from.

Decoding is bounded: a cassette is untrusted input, and 1 MB of gzip can inflate to
gigabytes. Each decoder is asked for at most `MAX_DECODED_BYTES + 1` bytes per call (zlib's
`max_length`, brotli's `output_buffer_limit`, a zstd sink that stops the decompressor), so
no more than about the limit is ever held before the body is refused.

br and zstd need optional packages (the `brotli` and `zstd` extras); zstd uses the standard
library's `compression.zstd` where Python has it. They are imported only when a body needs
them, and their absence is a `DecoderMissingError` naming the extra to install.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from replay.errors import (
    DecodedTooLargeError,
    DecoderMissingError,
    DecodingError,
    install_hint,
)

__all__ = [
    "MAX_DECODED_BYTES",
    "Body",
    "DecodedTooLargeError",
    "DecoderMissingError",
    "DecodingError",
    "Inflater",
    "decoded_chunks",
    "encodings",
]

#: The most bytes a body may decode to; past it the body is refused (a decompression bomb).
MAX_DECODED_BYTES = 64 * 1024 * 1024

_SUPPORTED = "gzip, deflate, br and zstd"


class _Columns(Protocol):
    """A body's chunks as columns (`replay.model.Chunks`)."""

    @property
    def times(self) -> Sequence[float]: ...
    @property
    def payloads(self) -> Sequence[bytes]: ...
    def __len__(self) -> int: ...


class _End(Protocol):
    @property
    def at(self) -> float: ...


class Body(Protocol):
    """What decoding and framing read of a response (`replay.model.Response`): taken by its
    shape, so that neither imports the model, whose methods call them."""

    @property
    def chunks(self) -> _Columns: ...
    @property
    def end(self) -> _End: ...
    def header(self, name: str) -> str | None: ...


def encodings(response: Body) -> list[str]:
    """The codings of `response`'s Content-Encoding, in the order they were applied."""
    header = response.header("content-encoding") or ""
    names = (name.strip().lower() for name in header.split(","))
    return [name for name in names if name not in ("", "identity")]


def decoded_chunks(response: Body, *, limit: int | None = None) -> Iterator[tuple[float, bytes]]:
    """The body as (arrival time, bytes) pairs with its Content-Encoding undone.

    An encoded body gives one piece per chunk, then what the decoders still held, at the
    time of the end. Lazy: a caller that stops early decodes no further.

    Args:
        response: the response.
        limit: the most bytes the body may decode to (default `MAX_DECODED_BYTES`).

    Raises:
        DecodingError: an unsupported or damaged encoding, or a body past the limit
            (`DecodedTooLargeError`); a missing optional package (`DecoderMissingError`).
    """
    names = encodings(response)
    if not names:
        # The columns themselves: no `Chunk` made per chunk (a million of them is a second).
        return zip(response.chunks.times, response.chunks.payloads, strict=True)
    pipeline = _Pipeline(names, MAX_DECODED_BYTES if limit is None else limit)
    return pipeline.run(response)


class _TooLarge(Exception):
    """A decoder was about to produce more than its limit (the pipeline names the coding)."""


class _Decoder(Protocol):
    """One coding undone incrementally: `decode` and `flush` return what they decoded, and
    raise `_TooLarge` rather than produce more than `limit` bytes."""

    def decode(self, data: bytes, limit: int) -> bytes: ...
    def flush(self, limit: int) -> bytes: ...


class _Pipeline:
    """Several codings undone in turn, each stage's total output held under the limit."""

    def __init__(self, names: list[str], limit: int) -> None:
        self._stages = [(name, _decoder(name)) for name in reversed(names)]
        self._totals = [0] * len(self._stages)
        self._limit = limit

    def run(self, response: Body) -> Iterator[tuple[float, bytes]]:
        for at, data in zip(response.chunks.times, response.chunks.payloads, strict=True):
            yield at, self._through(data, final=False)
        yield response.end.at, self._through(b"", final=True)

    def _through(self, data: bytes, *, final: bool) -> bytes:
        for number, (name, decoder) in enumerate(self._stages):
            budget = self._limit - self._totals[number]
            try:
                out = decoder.decode(data, budget) if data else b""
                if final:
                    out += decoder.flush(budget - len(out))
            except _TooLarge:
                raise DecodedTooLargeError(name, self._limit) from None
            self._totals[number] += len(out)
            data = out
        return data


def _decoder(name: str) -> _Decoder:
    if name in ("gzip", "x-gzip", "deflate"):
        return _ZlibDecoder(name)
    if name == "br":
        return _BrotliDecoder()
    if name == "zstd":
        return _ZstdDecoder()
    raise DecodingError(name, f"replay decodes {_SUPPORTED} only")


def _optional(module: str, encoding: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise DecoderMissingError(encoding, module, extra) from None


class Inflater:
    """Incremental gzip / deflate decoder (deflate: zlib-wrapped, or raw as some servers send).

    Raises `zlib.error` on damaged data (the replay adapters map it to their client's error).
    """

    def __init__(self, encoding: str) -> None:
        if encoding in ("gzip", "x-gzip"):
            wbits = zlib.MAX_WBITS | 16
        elif encoding == "deflate":
            wbits = zlib.MAX_WBITS
        else:
            raise DecodingError(encoding, "gzip and deflate are supported here")
        self._decompressor = zlib.decompressobj(wbits)
        self._may_be_raw = encoding == "deflate"

    @property
    def unconsumed_tail(self) -> bytes:
        """The input a `decode` with `max_length` left for the next call."""
        return self._decompressor.unconsumed_tail

    def decode(self, data: bytes, max_length: int = 0) -> bytes:
        """The bytes `data` decodes to so far, at most `max_length` of them (0: no limit);
        a raw deflate stream is detected here."""
        if self._may_be_raw and data:
            self._may_be_raw = False
            try:
                return self._decompressor.decompress(data, max_length)
            except zlib.error:
                self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._decompressor.decompress(data, max_length)

    def flush(self) -> bytes:
        """What the decoder still holds, at the end of the body."""
        return self._decompressor.flush()


# Output asked of a decoder per call: memory grows by steps this size, so a bomb is refused
# holding about the limit, never the limit again in a decoder's buffer.
_STEP = 1024 * 1024


class _Pieces:
    """Output gathered step by step, refused as soon as it passes the limit."""

    def __init__(self, limit: int) -> None:
        self.parts: list[bytes] = []
        self.left = limit

    def add(self, data: bytes) -> None:
        self.left -= len(data)
        if self.left < 0:
            raise _TooLarge
        self.parts.append(data)

    def joined(self) -> bytes:
        return b"".join(self.parts)


class _ZlibDecoder:
    def __init__(self, encoding: str) -> None:
        self._encoding = encoding
        self._inflater = Inflater(encoding)

    def decode(self, data: bytes, limit: int) -> bytes:
        pieces = _Pieces(limit)
        try:
            while True:
                asked = min(_STEP, pieces.left + 1)
                piece = self._inflater.decode(data, asked)
                pieces.add(piece)
                data = self._inflater.unconsumed_tail
                if not data and len(piece) < asked:  # all input in, no output held back
                    return pieces.joined()
        except zlib.error as exc:
            raise self._damaged(exc) from None

    def flush(self, limit: int) -> bytes:
        try:
            out = self._inflater.flush()
        except zlib.error as exc:
            raise self._damaged(exc) from None
        if len(out) > limit:
            raise _TooLarge
        return out

    def _damaged(self, exc: zlib.error) -> DecodingError:
        return DecodingError(self._encoding, f"the body is not valid {self._encoding} data: {exc}")


class _BrotliDecoder:
    def __init__(self) -> None:
        self._brotli = _optional("brotli", "br", "brotli")
        self._decompressor = self._brotli.Decompressor()

    def decode(self, data: bytes, limit: int) -> bytes:
        pieces = _Pieces(limit)
        try:
            while True:
                pieces.add(self._decompressor.process(data, output_buffer_limit=_STEP))
                data = b""  # the rest of the output comes from calls with no input
                if self._decompressor.can_accept_more_data():
                    return pieces.joined()
        except TypeError:  # brotli < 1.2: no output_buffer_limit, so no bound
            raise DecodingError(
                "br", f"bounded decoding needs brotli >= 1.2 ({install_hint('brotli')})"
            ) from None
        except self._brotli.error as exc:
            raise DecodingError("br", f"the body is not valid br data: {exc}") from None

    def flush(self, limit: int) -> bytes:
        return b""


class _Sink:
    """Where zstandard's stream writer puts its output; raising stops it mid-call."""

    def __init__(self) -> None:
        self.pieces = _Pieces(0)

    def write(self, data: bytes) -> int:
        self.pieces.add(bytes(data))
        return len(data)


_STDLIB_ZSTD = "compression.zstd"  # Python 3.14 on


class _ZstdDecoder:
    def __init__(self) -> None:
        try:
            stdlib = importlib.import_module(_STDLIB_ZSTD)
        except ImportError:
            stdlib = None
        self._stdlib: Any = stdlib
        if stdlib is not None:
            self._decompressor = stdlib.ZstdDecompressor()
            self._errors: tuple[type[Exception], ...] = (stdlib.ZstdError, EOFError)
        else:
            zstandard = _optional("zstandard", "zstd", "zstd")
            self._sink = _Sink()
            self._writer = zstandard.ZstdDecompressor().stream_writer(self._sink, closefd=False)
            self._errors = (zstandard.ZstdError,)

    def decode(self, data: bytes, limit: int) -> bytes:
        try:
            if self._stdlib is not None:
                return self._decode_stdlib(data, limit)
            self._sink.pieces = _Pieces(limit)
            self._writer.write(data)
            return self._sink.pieces.joined()
        except self._errors as exc:
            raise DecodingError("zstd", f"the body is not valid zstd data: {exc}") from None

    def _decode_stdlib(self, data: bytes, limit: int) -> bytes:
        pieces = _Pieces(limit)
        while True:
            if self._decompressor.eof:  # a frame ended: what follows is the next frame
                data = self._decompressor.unused_data + data
                if not data:
                    return pieces.joined()
                self._decompressor = self._stdlib.ZstdDecompressor()
            pieces.add(self._decompressor.decompress(data, max_length=_STEP))
            data = b""
            if self._decompressor.needs_input:
                return pieces.joined()

    def flush(self, limit: int) -> bytes:
        return b""
