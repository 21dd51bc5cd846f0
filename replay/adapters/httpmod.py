"""Which HTTP library (httpx or httpx2) an object belongs to, and its stream types.

httpx2 is a fork of httpx with the same names; one code path serves both by asking each
request which module it came from, and building the response, its stream and errors from
that module. The clients check `isinstance(response.stream, SyncByteStream)` of their own
module, hence one thin stream class per module, made once.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any, Protocol

from replay.engine.ends import CUT_NAME, stored_name

__all__ = [
    "AsyncSource",
    "SyncSource",
    "async_stream",
    "error_class",
    "headers_of",
    "interrupt",
    "module_of",
    "sync_stream",
]


class SyncSource(Protocol):
    """A body being served: iterate for the chunks, close to stop early."""

    def __iter__(self) -> Iterator[bytes]: ...
    def close(self) -> None: ...


class AsyncSource(Protocol):
    """Async twin of `SyncSource`."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


def module_of(obj: Any) -> ModuleType:
    """The top-level module (`httpx` or `httpx2`) that defines `obj`'s class."""
    return sys.modules[type(obj).__module__.partition(".")[0]]


def error_class(module: ModuleType, name: str | None) -> type[Exception]:
    """The class of `module` (httpx or httpx2) that replays the recorded error `name`.

    The end vocabulary (`replay.engine.ends`) says which: an error of httpx's own as itself,
    any other by what it means (`ReadTimeout` for a timeout, `RemoteProtocolError` for a cut,
    as for a name nobody knows).
    """
    found = getattr(module, stored_name(name or CUT_NAME), None)
    if isinstance(found, type) and issubclass(found, module.RequestError):
        return found
    fallback: type[Exception] = module.RemoteProtocolError
    return fallback


@functools.cache
def _stream_classes(module: ModuleType) -> tuple[type[Any], type[Any]]:
    class SyncStream(module.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, source: SyncSource) -> None:
            self.source = source

        def __iter__(self) -> Iterator[bytes]:
            return iter(self.source)

        def close(self) -> None:
            self.source.close()

    class AsyncStream(module.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, source: AsyncSource) -> None:
            self.source = source

        def __aiter__(self) -> AsyncIterator[bytes]:
            return self.source.__aiter__()

        async def aclose(self) -> None:
            await self.source.aclose()

    return SyncStream, AsyncStream


def sync_stream(module: ModuleType, source: SyncSource) -> Any:
    """`source` as a `module.SyncByteStream`."""
    return _stream_classes(module)[0](source)


def async_stream(module: ModuleType, source: AsyncSource) -> Any:
    """`source` as a `module.AsyncByteStream`."""
    return _stream_classes(module)[1](source)


def headers_of(response: Any) -> list[tuple[str, str]]:
    """The raw headers of an httpx / httpx2 response, as (name, value) pairs of str."""
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw]


def interrupt(upstream: Any) -> bool:
    """Shut down the socket of `upstream`'s HTTP/1 connection; False if it has none.

    A read blocked on a socket is not woken by another thread closing it (Linux), but it is
    by a shutdown. Only HTTP/1 connections qualify: an HTTP/2 socket carries other streams.
    """
    extensions = upstream.extensions
    if extensions.get("http_version", b"HTTP/1.1") not in (b"HTTP/1.0", b"HTTP/1.1"):
        return False
    network_stream = extensions.get("network_stream")
    sock = None if network_stream is None else network_stream.get_extra_info("socket")
    if not isinstance(sock, socket.socket):
        return False
    with contextlib.suppress(OSError):  # already shut down or closed: the read is over anyway
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    return True
