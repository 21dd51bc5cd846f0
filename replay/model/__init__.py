"""Value types of a cassette: what was asked, what came back, chunk by chunk, and when.

Every value is a frozen attrs class (or, for the chunk columns, an immutable sequence:
`Chunk` and `Chunks` live in `replay.model.chunks`, re-exported here); times are seconds
(floats) since the moment the request was sent. Values only: capturing a client's request
is its adapter's (`replay.adapters.httpx_capture`), and the loader makes the values it
checked past their validators (`replay.store.prechecked`). The stateful cassette
(interactions plus play bookkeeping) lives in `replay.store.cassette`, the file in
`replay.store.file`, content decoding in `replay.framing.decoding`, framings (SSE, NDJSON)
in `replay.framing`.

The reprs of a request and a response show no value that may be a secret (a traceback's
locals print them): no header value, no query value, no body, no user information, no
key-shaped path segment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import attrs

from replay.model.chunks import MAX_SECONDS, Chunk, Chunks, kind_of, seconds
from replay.model.frames import Frame, frames_in_order

if TYPE_CHECKING:
    from replay.framing.timed_event import TimedEvent

__all__ = [
    "MAX_SECONDS",
    "TIMES",
    "Chunk",
    "Chunks",
    "Frame",
    "Interaction",
    "Request",
    "Response",
    "StreamEnd",
    "TimedEvent",
]

Headers = tuple[tuple[str, str], ...]


def _to_headers(pairs: Iterable[Sequence[str]] | Mapping[str, str]) -> Headers:
    """Ordered (name, value) pairs of str; a mapping is taken as its items.

    Both must be latin-1 text (what HTTP/1.1 carries and what playback encodes them as).
    """
    # Messages name types, never values: a header value may be a credential.
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    headers = []
    for index, pair in enumerate(items):
        if isinstance(pair, (str, bytes)) or len(pair) != 2:
            raise ValueError(f"header {index} must be a (name, value) pair, not a {kind_of(pair)}")
        name, value = pair
        if not isinstance(name, str) or not isinstance(value, str):
            kinds = f"{kind_of(name)} and {kind_of(value)}"
            raise TypeError(f"header {index}: name and value must be str, not {kinds}")
        try:
            name.encode("latin-1")
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError(f"header {name!r} is not latin-1 text") from None
        headers.append(pair if type(pair) is tuple else (name, value))  # no copy
    return tuple(headers)


@attrs.frozen(kw_only=True)
class Request:
    """A recorded request: method, full URL, headers as ordered pairs, body bytes."""

    method: str = attrs.field(validator=attrs.validators.instance_of(str))
    url: str = attrs.field(validator=attrs.validators.instance_of(str))
    headers: Headers = attrs.field(default=(), converter=_to_headers)
    body: bytes = attrs.field(default=b"", validator=attrs.validators.instance_of(bytes))

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        return _header(self.headers, name)

    def __repr__(self) -> str:
        return (
            f"Request(method={self.method!r}, url={_shown_url(self.url)!r}, "
            f"headers={_shown_headers(self.headers)}, body=<{len(self.body)} bytes>)"
        )


#: What a repr shows in place of a value it hides.
_HIDDEN = "…"


def _shown_url(url: str) -> str:
    """`url` as a repr shows it: scheme, host and path (key-shaped segments hidden), and the
    names of its query fields; their values, the fragment and the user information hidden.

    Hidden, not redacted: a repr cannot know the names a session was told to redact (nor
    import `replay.redact.redactor`, which imports this module), and a name is no secret."""
    from replay.redact.shapes import hide_shapes  # (it imports nothing of replay)

    try:
        parts = urlsplit(url)
    except ValueError:  # (a bad IPv6 host): nothing of it is shown
        return f"<{len(url)} characters>"
    _, at, host = parts.netloc.rpartition("@")
    netloc = f"{_HIDDEN}@{host}" if at else parts.netloc
    fields = parts.query.split("&") if parts.query else []
    query = "&".join(_shown_field(field, hide_shapes) for field in fields)
    fragment = _HIDDEN if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, hide_shapes(parts.path), query, fragment))


def _shown_field(field: str, hide_shapes: Callable[[str], str]) -> str:
    """A query field as a repr shows it: its name (unless key-shaped), never its value."""
    name, equals, value = field.partition("=")
    if not equals:
        return _HIDDEN if field else field  # a value without a name (`?sk-…`)
    return f"{hide_shapes(name)}={_HIDDEN if value else ''}"


def _shown_headers(headers: Headers) -> str:
    """Headers as a repr shows them: their names, each value hidden."""
    return repr([f"{name}: {_HIDDEN}" for name, _ in headers])


def _header(headers: Headers, name: str) -> str | None:
    wanted = name.lower()
    return next((value for key, value in headers if key.lower() == wanted), None)


#: Where a recording's times came from (`Response.times`): "network", each the time its
#: bytes arrived (read by the stamper process, which the client cannot hold up); "reader",
#: when replay's reader in the client's process read them (a client holding the GIL delays
#: those); None: not said (recorded before this was written down, or made by hand).
TIMES = (None, "network", "reader")

#: Who may stop a recording before its body ends (`StreamEnd.stopped_by`).
STOPPERS = (None, "client", "session")


@attrs.frozen
class StreamEnd:
    """How a response body ended, and when.

    Args:
        at: seconds from sending the request to the end.
        error: None for a clean end; else the name of the error that ended it, in httpx's
            words (`"ReadTimeout"`, `"RemoteProtocolError"`, …: `replay.engine.ends`).
        message: the exception's message.
        truncated: the recording stopped before the body's end; nothing was recorded after.
        stopped_by: who stopped it: "client" (it closed the response early) or "session"
            (it ended while the body was still streaming); None when not truncated.
            A server that cut the stream is an `error`, not a stop.
    """

    at: float = attrs.field(validator=seconds)
    error: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    message: str = attrs.field(default="", validator=attrs.validators.instance_of(str))
    truncated: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    stopped_by: str | None = attrs.field(
        default=attrs.Factory(lambda self: "client" if self.truncated else None, takes_self=True),
        validator=attrs.validators.in_(STOPPERS),
    )

    def __attrs_post_init__(self) -> None:
        if self.truncated and self.stopped_by is None:  # e.g. attrs.evolve(end, truncated=True)
            object.__setattr__(self, "stopped_by", "client")
        elif self.stopped_by is not None and not self.truncated:
            raise ValueError(
                f"stopped_by {self.stopped_by!r} needs truncated=True: only a recording that "
                "stopped before the body's end was stopped by someone"
            )

    @property
    def is_clean(self) -> bool:
        """True when the body ended without an error."""
        return self.error is None


def _to_chunks(chunks: Iterable[Chunk]) -> Chunks:
    return Chunks.of(chunks)


def _chunks_in_order(instance: Response, _attribute: object, chunks: Chunks) -> None:
    # A body cannot arrive before the headers; `Chunks` keeps the chunks themselves in order.
    if chunks.times and chunks.times[0] < instance.headers_at:
        raise ValueError(
            f"chunk 0 arrives at {chunks.times[0]} s, before the headers ({instance.headers_at} s)"
        )


def _end_after_body(instance: Response, _attribute: object, end: StreamEnd) -> None:
    if not isinstance(end, StreamEnd):
        raise TypeError(f"end must be a StreamEnd, not {end!r}")
    times = instance.chunks.times
    last = times[-1] if times else instance.headers_at
    if end.at < last:
        raise ValueError(f"the body ends at {end.at} s, before its last byte or header ({last} s)")


def _default_end(response: Response) -> StreamEnd:
    """A clean end at the last byte (or at the headers, for no body)."""
    try:
        return StreamEnd(at=response.chunks[-1].at if response.chunks else response.headers_at)
    except (AttributeError, TypeError, ValueError):
        return StreamEnd(at=0.0)  # a bad chunk or headers_at: its own validator says so


def _valid_status(_instance: Response, _attribute: object, status: int) -> None:
    if isinstance(status, bool) or not isinstance(status, int):
        raise TypeError(f"status must be an int, not {status!r}")
    if not 100 <= status <= 599:
        raise ValueError(f"status must be 100-599, not {status!r}")


@attrs.frozen(kw_only=True)
class Response:
    """A recorded response: status and headers, then the body as timed chunks, then its end.

    Args:
        status: the HTTP status code.
        headers: ordered (name, value) pairs, duplicates kept.
        headers_at: seconds from sending the request to the status line and headers.
        chunks: the body, chunk by chunk, in arrival order.
        end: how and when the body ended.
        times: where the times came from (`TIMES`): "network", "reader", or None.
    """

    status: int = attrs.field(validator=_valid_status)
    headers: Headers = attrs.field(default=(), converter=_to_headers)
    headers_at: float = attrs.field(default=0.0, validator=seconds)
    chunks: Chunks = attrs.field(factory=Chunks, converter=_to_chunks, validator=_chunks_in_order)
    end: StreamEnd = attrs.field(
        default=attrs.Factory(lambda self: _default_end(self), takes_self=True),
        validator=_end_after_body,
    )
    times: str | None = attrs.field(default=None, validator=attrs.validators.in_(TIMES))

    @property
    def body(self) -> bytes:
        """All chunks joined (still encoded as sent: gzip stays gzip)."""
        return b"".join(self.chunks.payloads)

    @property
    def ttfb(self) -> float | None:
        """Seconds from sending the request to the first body byte, or None for no body."""
        return self.chunks[0].at if self.chunks else None

    @property
    def duration(self) -> float:
        """Seconds from sending the request to the end of the body."""
        return self.end.at

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        return _header(self.headers, name)

    def __repr__(self) -> str:
        # The body as its size: it may echo a key, and a stream's chunks fill a screen.
        count, size = len(self.chunks), sum(map(len, self.chunks.payloads))
        chunks = f"<{count} chunk{'' if count == 1 else 's'}, {size} bytes>"
        return (
            f"Response(status={self.status!r}, headers={_shown_headers(self.headers)}, "
            f"headers_at={self.headers_at!r}, chunks={chunks}, end={self.end!r})"
        )

    def decoded_chunks(self) -> list[tuple[float, bytes]]:
        """The body as (arrival time, bytes) pairs with its Content-Encoding undone.

        gzip, deflate, br and zstd (br and zstd need the `brotli` / `zstd` extras).

        Raises:
            DecodingError: (a ValueError) an unsupported or damaged encoding, a missing
                extra, or a body that decodes past `replay.framing.decoding.MAX_DECODED_BYTES`.
        """
        from replay.framing.decoding import decoded_chunks

        return list(decoded_chunks(self))

    def events(self) -> list[TimedEvent]:
        """The body's events (SSE, or NDJSON lines), each at the arrival time of its last chunk.

        The framing is the one `replay.framing.detect` finds (by content type, then body);
        a body of neither is read as SSE. A compressed body is decoded first.

        Raises:
            DecodingError: (a ValueError) the body cannot be decoded (see `decoded_chunks`).
        """
        from replay import framing

        return framing.events(self)


def _to_frames(frames: Iterable[Frame] | None) -> tuple[Frame, ...] | None:
    return None if frames is None else frames_in_order(frames)


@attrs.frozen
class Interaction:
    """One request and the response it got.

    `frames`: for a WebSocket conversation (the request is its upgrade request, the response
    the server's answer), the frames both ways after it (`replay.model.frames`); None for
    plain HTTP.
    """

    request: Request = attrs.field(validator=attrs.validators.instance_of(Request))
    response: Response = attrs.field(validator=attrs.validators.instance_of(Response))
    frames: tuple[Frame, ...] | None = attrs.field(default=None, converter=_to_frames, kw_only=True)

    def __repr__(self) -> str:
        # A plain exchange shows as one (no `frames=None`); a conversation's frames as a count.
        frames = "" if self.frames is None else f", frames=<{len(self.frames)} frames>"
        return f"Interaction(request={self.request!r}, response={self.response!r}{frames})"


def __getattr__(name: str) -> Any:
    # `TimedEvent` is made when first asked for (reading a body's events): a suite that only
    # replays never needs it, and making an attrs class costs its first cassette ~0.5 ms.
    if name == "TimedEvent":
        from replay.framing.timed_event import TimedEvent

        return TimedEvent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
