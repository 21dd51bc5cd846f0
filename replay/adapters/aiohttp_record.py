"""Recording an aiohttp response: its headers noted, its body stamped as aiohttp is fed it.

The real `_request` sends (`raise_for_status` deferred until the headers are noted), its
connections read by the stamper (`replay.adapters.aiohttp_stamped`); the response's
`StreamReader` then gets a subclass swapped in as its class (its `__slots__` forbid
instance-level wrappers) that stamps each chunk aiohttp feeds it, with the time of the network
arrival being delivered, and ends the recording at its EOF or error; a client releasing or
closing it first ends it as `stopped_by="client"`. What was fed before (the headers and the
first chunks) takes its times from the connection's log. Without a stamper (see there), the
stamps are taken on the event loop as aiohttp parses what the socket delivered: a client
blocking its loop delays them (`Recording.read_on_loop` is set; the cassette says "reader").
aiohttp feeds a body decoded when it decompresses (the default): it is recorded so, under the
headers minus Content-Encoding and Content-Length (a self-consistent cassette).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from replay.adapters.aiohttp_stamped import stamped_transport, stamping
from replay.engine.exchange import Record
from replay.engine.recorder import Recording

__all__ = ["record", "unchecked"]

_AIOHTTP_DECODES = frozenset({"gzip", "deflate", "br", "zstd"})  # decoded by aiohttp itself
_RECORDINGS: dict[int, Recording] = {}  # id(stream being recorded) -> its recording


async def unchecked(response: aiohttp.ClientResponse) -> None:
    """The `raise_for_status` handed to the real send: the check comes once recorded."""


async def record(
    record: Record, sending: Awaitable[aiohttp.ClientResponse], decoded: bool
) -> aiohttp.ClientResponse:
    """Await the real send (its connection read by the stamper), noting the headers, then
    stamp the body as aiohttp is fed it."""
    with stamping():
        response = await record.asent(sending)
    recording = record.recording
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers]
    encoding = (response.headers.get(aiohttp.hdrs.CONTENT_ENCODING) or "").strip().lower()
    if decoded and encoding in _AIOHTTP_DECODES:  # aiohttp feeds the body decoded
        dropped = {"content-encoding", "content-length"}
        headers = [(name, value) for name, value in headers if name.lower() not in dropped]
    content = response.content
    fed = _fed(content)
    recording.read_on_loop = fed is None
    recording.got_headers(response.status, headers, fed[0][0] if fed else None)
    # What aiohttp parsed along with the headers was fed before `_request` returned.
    buffered = [bytes(data) for data in getattr(content, "_buffer", ())]
    end = getattr(content, "total_bytes", 0) - sum(map(len, buffered))
    for data in buffered:
        end += len(data)
        recording.got_chunk(data, moment=_arrival(fed, end))
    if content.exception() is not None:
        recording.finish(error=content.exception())
    elif content.is_eof():  # (a body-less response's is aiohttp's shared empty one)
        recording.finish(moment=fed[-1][0] if fed else None)
    else:
        _RECORDINGS[id(content)] = recording
        content.__class__ = _Stamped
        for name in ("release", "close"):
            setattr(response, name, functools.partial(_left, recording, getattr(response, name)))
    return response


def _fed(content: aiohttp.StreamReader) -> list[tuple[float, int]] | None:
    """The deliveries of the stamped connection `content` came from: (arrival time, bytes fed
    to it after that arrival); None when no stamper read it."""
    transport = stamped_transport(getattr(content, "_protocol", None))
    if transport is None:
        return None
    return list(transport.log) if transport.logged is content else []


def _arrival(fed: list[tuple[float, int]] | None, end: int) -> float | None:
    """The time of the arrival after which `end` bytes had been fed (None: not known)."""
    for stamp, total in fed or ():
        if total >= end:
            return stamp
    return None


def _now(stream: aiohttp.StreamReader) -> float | None:
    """The time of the arrival being delivered to `stream`'s connection; None: not stamped."""
    transport = stamped_transport(getattr(stream, "_protocol", None))
    return None if transport is None else transport.delivering


def _left(recording: Recording, method: Callable[[], Any]) -> Any:
    """The client released or closed the response: the recording ends as it left it."""
    try:
        recording.finish(stopped_by="client")
    finally:
        result = method()
    return result


class _Stamped(aiohttp.StreamReader):
    """aiohttp's StreamReader of a response being recorded (its class swapped in): each chunk
    fed, the end and the error are noted on the recording; then the class is swapped back."""

    __slots__ = ()

    def feed_data(self, data: bytes, *args: Any) -> Any:
        if data:
            _RECORDINGS[id(self)].got_chunk(data, moment=_now(self))
        return super().feed_data(data, *args)

    def feed_eof(self) -> None:
        failure = _unhook(self)
        if failure is None:
            aiohttp.StreamReader.feed_eof(self)
        else:  # a before_record hook raised: the client hears of it
            aiohttp.StreamReader.set_exception(self, failure)

    def set_exception(self, exc: BaseException, *args: Any, **kwargs: Any) -> None:
        _unhook(self, exc)
        aiohttp.StreamReader.set_exception(self, exc, *args, **kwargs)


def _unhook(stream: aiohttp.StreamReader, error: BaseException | None = None) -> Exception | None:
    """Finish the recording of `stream` and give it its class back; the finish's failure."""
    recording = _RECORDINGS.pop(id(stream), None)
    moment = _now(stream) if error is None else None
    stream.__class__ = aiohttp.StreamReader
    if recording is not None:
        try:
            recording.finish(error=error, moment=moment)
        except Exception as failure:
            return failure
    return None
