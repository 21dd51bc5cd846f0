"""Value types of a cassette: what was asked, what came back, chunk by chunk, and when.

Every value is a frozen attrs class; times are seconds (floats) since the moment the
request was sent. `Cassette` is the one stateful object: the interactions plus the
bookkeeping of which were played, and the index that answers requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from replay.matching import DEFAULT_MATCH_ON, MatchIndex, MatchOn

if TYPE_CHECKING:
    from replay.sse import Event

__all__ = [
    "Cassette",
    "Chunk",
    "Interaction",
    "Request",
    "Response",
    "StreamEnd",
    "TimedEvent",
]

Headers = tuple[tuple[str, str], ...]


def _to_headers(pairs: Iterable[Sequence[str]]) -> Headers:
    return tuple((str(name), str(value)) for name, value in pairs)


def _non_negative(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value >= 0:  # also rejects NaN
        raise ValueError(
            f"{attribute.name} must be a non-negative number of seconds, not {value!r}"
        )


class _HttpxRequest(Protocol):
    """What `Request.from_httpx` reads of an httpx or httpx2 request."""

    @property
    def method(self) -> str: ...
    @property
    def url(self) -> Any: ...
    @property
    def headers(self) -> Any: ...
    @property
    def content(self) -> bytes: ...


@attrs.frozen
class Chunk:
    """One piece of a response body as the network delivered it.

    Args:
        at: seconds from sending the request to this chunk's arrival.
        data: the raw bytes (still compressed, if the response was).
    """

    at: float = attrs.field(validator=_non_negative)
    data: bytes = attrs.field(validator=attrs.validators.instance_of(bytes))


@attrs.frozen(kw_only=True)
class Request:
    """A recorded request: method, full URL, headers as ordered pairs, body bytes."""

    method: str
    url: str
    headers: Headers = attrs.field(default=(), converter=_to_headers)
    body: bytes = b""

    @classmethod
    def from_httpx(cls, request: _HttpxRequest) -> Request:
        """Capture an httpx or httpx2 request whose body has been read."""
        return cls(
            method=request.method,
            url=str(request.url),
            headers=[
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, value in request.headers.raw
            ],
            body=request.content,
        )

    def header(self, name: str) -> str | None:
        """The first value of header `name` (case-insensitive), or None."""
        return _header(self.headers, name)


def _header(headers: Headers, name: str) -> str | None:
    wanted = name.lower()
    return next((value for key, value in headers if key.lower() == wanted), None)


@attrs.frozen
class StreamEnd:
    """How a response body ended, and when.

    Args:
        at: seconds from sending the request to the end.
        error: None for a clean end; else the name of the client library's exception class
            that ended it (`"RemoteProtocolError"`, `"ReadTimeout"`, …).
        message: the exception's message.
        truncated: the client closed the stream before its end; nothing was recorded after.
    """

    at: float = attrs.field(validator=_non_negative)
    error: str | None = None
    message: str = ""
    truncated: bool = False

    @property
    def is_clean(self) -> bool:
        """True when the body ended without an error."""
        return self.error is None


def _to_chunks(chunks: Iterable[Chunk]) -> tuple[Chunk, ...]:
    return tuple(chunks)


def _to_interactions(interactions: Iterable[Interaction]) -> list[Interaction]:
    return list(interactions)


def _chunks_in_order(_instance: Response, _attribute: object, chunks: tuple[Chunk, ...]) -> None:
    previous = 0.0
    for index, chunk in enumerate(chunks):
        if chunk.at < previous:
            raise ValueError(f"chunk {index} arrives at {chunk.at} s, before its predecessor")
        previous = chunk.at


def _valid_status(_instance: Response, _attribute: object, status: int) -> None:
    if not 100 <= status <= 599:
        raise ValueError(f"status must be 100-599, not {status!r}")


@attrs.frozen(kw_only=True)
class TimedEvent:
    """A server-sent event and the time its completing chunk arrived."""

    at: float
    event: str
    data: str
    id: str = ""
    retry: int | None = None


@attrs.frozen(kw_only=True)
class Response:
    """A recorded response: status and headers, then the body as timed chunks, then its end.

    Args:
        status: the HTTP status code.
        headers: ordered (name, value) pairs, duplicates kept.
        headers_at: seconds from sending the request to the status line and headers.
        chunks: the body, chunk by chunk, in arrival order.
        end: how and when the body ended.
    """

    status: int = attrs.field(validator=_valid_status)
    headers: Headers = attrs.field(default=(), converter=_to_headers)
    headers_at: float = attrs.field(default=0.0, validator=_non_negative)
    chunks: tuple[Chunk, ...] = attrs.field(
        default=(), converter=_to_chunks, validator=_chunks_in_order
    )
    end: StreamEnd = attrs.field(
        default=attrs.Factory(
            lambda self: StreamEnd(at=self.chunks[-1].at if self.chunks else self.headers_at),
            takes_self=True,
        )
    )

    @property
    def body(self) -> bytes:
        """All chunks joined (still encoded as sent: gzip stays gzip)."""
        return b"".join(chunk.data for chunk in self.chunks)

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

    def events(self) -> list[TimedEvent]:
        """The body parsed as server-sent events, each with the arrival time of its last chunk.

        A compressed body (Content-Encoding) is decoded first.
        """
        from replay.sse import SSEParser

        parser = SSEParser()
        timed: list[TimedEvent] = []
        for at, data in _decoded_chunks(self):
            timed.extend(_timed(at, event) for event in parser.feed(data))
        timed.extend(_timed(self.end.at, event) for event in parser.close())
        return timed


def _timed(at: float, event: Event) -> TimedEvent:
    return TimedEvent(at=at, event=event.event, data=event.data, id=event.id, retry=event.retry)


def _decoded_chunks(response: Response) -> Iterable[tuple[float, bytes]]:
    encoding = (response.header("content-encoding") or "identity").strip().lower()
    if encoding in ("", "identity"):
        return ((chunk.at, chunk.data) for chunk in response.chunks)
    import httpx

    decoders = {"gzip": httpx._decoders.GZipDecoder, "deflate": httpx._decoders.DeflateDecoder}
    if encoding not in decoders:
        raise ValueError(f"cannot decode a body with content-encoding {encoding!r}")
    decoder = decoders[encoding]()
    pieces = [(chunk.at, decoder.decode(chunk.data)) for chunk in response.chunks]
    pieces.append((response.end.at, decoder.flush()))
    return pieces


@attrs.frozen
class Interaction:
    """One request and the response it got."""

    request: Request
    response: Response


@attrs.define(eq=False)
class Cassette:
    """Recorded interactions, and which of them this session has played.

    `Cassette()` is an empty cassette; `Cassette.load(path)` reads one from disk.

    Args:
        interactions: the recorded interactions, in recording order.
        path: the file it was loaded from or will be saved to, if any.
        match_on: matcher names (vcrpy's: method, scheme, host, port, path, query, body,
            headers, uri…) or vcrpy-style callables deciding which request an interaction answers.
        allow_playback_repeats: let an interaction answer more than once.
    """

    interactions: list[Interaction] = attrs.field(factory=list, converter=_to_interactions)
    path: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    match_on: MatchOn = attrs.field(default=DEFAULT_MATCH_ON, kw_only=True)
    allow_playback_repeats: bool = attrs.field(default=False, kw_only=True)
    play_counts: list[int] = attrs.field(init=False)
    recorded: list[Interaction] = attrs.field(init=False, factory=list)
    _index: MatchIndex | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        self.play_counts = [0] * len(self.interactions)

    @classmethod
    def load(cls, path: str | Path, **options: Any) -> Cassette:
        """Read a cassette file (raises `CassetteFormatError` on anything unreadable)."""
        from replay.store import load_interactions

        return cls(load_interactions(path), path=path, **options)

    def save(self, path: str | Path | None = None) -> Path:
        """Write every interaction to `path` (default: `self.path`) atomically."""
        from replay.store import save_interactions

        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("this cassette has no path: pass one to save()")
        save_interactions(target, self.interactions)
        return target

    @property
    def play_count(self) -> int:
        """How many responses this cassette has played back."""
        return sum(self.play_counts)

    @property
    def all_played(self) -> bool:
        """True when every interaction was played back (or recorded) at least once."""
        recorded = {id(interaction) for interaction in self.recorded}
        return all(
            count > 0 or id(interaction) in recorded
            for interaction, count in zip(self.interactions, self.play_counts, strict=False)
        )

    @property
    def unplayed(self) -> list[Interaction]:
        """The interactions neither played back nor recorded in this session."""
        recorded = {id(interaction) for interaction in self.recorded}
        return [
            interaction
            for interaction, count in zip(self.interactions, self.play_counts, strict=False)
            if count == 0 and id(interaction) not in recorded
        ]

    def find(self, request: Request) -> int | None:
        """Take the interaction that answers `request`: its index, counted as played; or None."""
        index = self._match_index().take(request, self.play_counts)
        if index is not None:
            self.play_counts[index] += 1
        return index

    def explain(self, request: Request) -> tuple[str | None, list[tuple[str, str]]]:
        """The nearest recorded request ("METHOD URL") and how each failing matcher differs."""
        return self._match_index().explain(request, self.play_counts)

    def append(self, interaction: Interaction) -> None:
        """Add a newly recorded interaction (it counts as used, not as played)."""
        self.interactions.append(interaction)
        self.play_counts.append(0)
        self.recorded.append(interaction)
        if self._index is not None:
            self._index.add(len(self.interactions) - 1, interaction.request)

    def _match_index(self) -> MatchIndex:
        if self._index is None:
            self._index = MatchIndex(
                [interaction.request for interaction in self.interactions],
                match_on=self.match_on,
                allow_playback_repeats=self.allow_playback_repeats,
            )
        return self._index
