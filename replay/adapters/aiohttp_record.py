"""Recording an aiohttp response: its headers noted, its body stamped as aiohttp is fed it.

The real `_request` sends (`raise_for_status` deferred until the headers are
noted); the response's `StreamReader` then gets a subclass swapped in as its class (its
`__slots__` forbid instance-level wrappers) that stamps each chunk aiohttp feeds it and ends
the recording at its EOF or error; a client releasing or closing it first ends it as
`stopped_by="client"`. Limits: the stamps are taken on the event loop, as aiohttp parses what
the socket delivered: a client blocking its loop delays them (`Recording.read_on_loop` is
set). aiohttp feeds a body decoded when it decompresses (the default): it is recorded so,
under the headers minus Content-Encoding and Content-Length (a self-consistent cassette).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

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
    """Await the real send, noting the headers, then stamp the body as aiohttp is fed it."""
    response = await record.asent(sending)
    recording = record.recording
    recording.read_on_loop = True
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers]
    encoding = (response.headers.get(aiohttp.hdrs.CONTENT_ENCODING) or "").strip().lower()
    if decoded and encoding in _AIOHTTP_DECODES:  # aiohttp feeds the body decoded
        dropped = {"content-encoding", "content-length"}
        headers = [(name, value) for name, value in headers if name.lower() not in dropped]
    recording.got_headers(response.status, headers)
    content = response.content
    # What aiohttp parsed along with the headers was fed before `_request` returned.
    for data in tuple(getattr(content, "_buffer", ())):
        recording.got_chunk(bytes(data))
    if content.exception() is not None:
        recording.finish(error=content.exception())
    elif content.is_eof():  # (a body-less response's is aiohttp's shared empty one)
        recording.finish()
    else:
        _RECORDINGS[id(content)] = recording
        content.__class__ = _Stamped
        for name in ("release", "close"):
            setattr(response, name, functools.partial(_left, recording, getattr(response, name)))
    return response


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
            _RECORDINGS[id(self)].got_chunk(data)
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
    stream.__class__ = aiohttp.StreamReader
    if recording is not None:
        try:
            recording.finish(error=error)
        except Exception as failure:
            return failure
    return None
