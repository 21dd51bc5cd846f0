"""Value types of a cassette: what was asked, what came back, chunk by chunk, and when.

Every value is a frozen attrs class (or, for the chunk columns, an immutable sequence);
times are seconds (floats) since the moment the request was sent. The stateful cassette
(interactions plus play bookkeeping) lives in `replay.cassette`, the file in `replay.store`,
content decoding in `replay._decoding`, framings (SSE, NDJSON) in `replay.framing`.

The reprs of a request and a response show no value that may be a secret (a traceback's
locals print them): no header value, no query value, no body, no user information, no
key-shaped path segment.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, overload
from urllib.parse import urlsplit, urlunsplit

import attrs

if TYPE_CHECKING:
    from replay._timed_event import TimedEvent

__all__ = [
    "MAX_SECONDS",
    "Chunk",
    "Chunks",
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
            raise ValueError(f"header {index} must be a (name, value) pair, not a {_kind(pair)}")
        name, value = pair
        if not isinstance(name, str) or not isinstance(value, str):
            raise TypeError(
                f"header {index}: name and value must be str, not {_kind(name)} and {_kind(value)}"
            )
        try:
            name.encode("latin-1")
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise ValueError(f"header {name!r} is not latin-1 text") from None
        headers.append(pair if type(pair) is tuple else (name, value))  # no copy
    return tuple(headers)


def _kind(value: object) -> str:
    if isinstance(value, (str, bytes, tuple, list)):
        return f"{type(value).__name__} of length {len(value)}"
    return type(value).__name__


#: The latest a recorded time may be: one week after the request was sent, far past any real
#: recording. Every time a cassette holds is bounded so, in the file and in code alike: a
#: crafted file's `1e300` would otherwise overflow each wait and each axis drawn from it.
MAX_SECONDS = 7 * 24 * 3600.0


def time_problem(value: float) -> str | None:
    """What is wrong with the number `value` as a recorded time; None if nothing."""
    if 0 <= value <= MAX_SECONDS:
        return None
    shown = _shown_number(value)
    if 0 <= value < math.inf:
        return f"must be at most {MAX_SECONDS:g} s (one week: past any real recording), not {shown}"
    return f"must be a finite, non-negative number of seconds, not {shown}"  # NaN too


def _shown_number(value: float) -> str:
    """`value` for a message: as it is, unless it is an integer of many digits."""
    try:
        text = repr(value)
    except ValueError:  # an int past `sys.get_int_max_str_digits`
        return "an integer of thousands of digits"
    return text if len(text) <= 24 else f"an integer of {len(text)} digits"


def _seconds(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{attribute.name} must be a number of seconds, not {value!r}")
    if not 0 <= value <= MAX_SECONDS:  # also rejects NaN
        raise ValueError(f"{attribute.name} {time_problem(value)}")


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

    at: float = attrs.field(validator=_seconds)
    data: bytes = attrs.field(validator=attrs.validators.instance_of(bytes))


@attrs.frozen(kw_only=True)
class Request:
    """A recorded request: method, full URL, headers as ordered pairs, body bytes."""

    method: str = attrs.field(validator=attrs.validators.instance_of(str))
    url: str = attrs.field(validator=attrs.validators.instance_of(str))
    headers: Headers = attrs.field(default=(), converter=_to_headers)
    body: bytes = attrs.field(default=b"", validator=attrs.validators.instance_of(bytes))

    @classmethod
    def from_httpx(cls, request: _HttpxRequest) -> Request:
        """Capture an httpx or httpx2 request whose body has been read."""
        method, url, body = request.method, _url_text(request.url), request.content
        headers = _headers_of(request.headers)
        if not isinstance(method, str) or not isinstance(body, bytes):
            return cls(method=method, url=url, headers=headers, body=body)  # the error says why
        # Valid by construction (str pairs decoded from latin-1 bytes): the validators and the
        # header converter, half of this call's cost once per replayed request, are skipped.
        return _request_of(method, url, headers, body, cls)

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
    import `replay.redact`, which imports this module), and a name is no secret."""
    from replay._secret_shapes import hide_shapes  # (it imports nothing of replay)

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


#: The setters of `Request`'s slots, for `Request.from_httpx` and `_request_of`.
_REQUEST_SLOTS: tuple[Callable[[Request, Any], None], ...] = tuple(
    getattr(Request, name).__set__ for name in ("method", "url", "headers", "body")
)


def _request_of(
    method: str, url: str, headers: Headers, body: bytes, cls: type[Request] = Request
) -> Request:
    """`Request(...)` of values its validators and converter would leave as they are (the
    loader checked them, or httpx made them): made without running them again, by the
    slots' own setters, as attrs' own `__init__` does on a frozen class. (Unrolled here and
    below: a loop over the setters cost loading a test's cassette 20k instructions more.)"""
    made = object.__new__(cls)
    set_method, set_url, set_headers, set_body = _REQUEST_SLOTS
    set_method(made, method)
    set_url(made, url)
    set_headers(made, headers)
    set_body(made, body)
    return made


def _url_text(url: Any) -> str:
    """`str(url)` of an httpx / httpx2 URL. Their `__str__` formats the URL's parts anew
    (a third of `from_httpx`'s cost), and a client sends the same few URLs: the text is
    looked up by those parts (the named tuple `__str__` formats)."""
    parts = getattr(url, "_uri_reference", None)  # private: any other URL is formatted
    if not isinstance(parts, tuple):
        return str(url)
    text = _URL_TEXTS.get(parts)
    if text is None:
        if len(_URL_TEXTS) >= _DECODED_LIMIT:
            _URL_TEXTS.clear()
        text = _URL_TEXTS[parts] = str(url)
    return text


#: URL texts by their httpx / httpx2 parts, for `_url_text`.
_URL_TEXTS: dict[tuple[object, ...], str] = {}


#: Header lists as `Request.from_httpx` decodes them, by their raw bytes: a client sends the
#: same few lists (only Content-Length changes with the body), so one lookup replaces two
#: decodes a header, and the same tuple comes back (the redactor looks it up in a dict).
_DECODED_HEADERS: dict[tuple[tuple[bytes, bytes], ...], Headers] = {}
_DECODED_LIMIT = 256


def _headers_of(headers: Any) -> Headers:
    """The pairs of httpx / httpx2 `headers`, decoded. Their `raw` is a list made anew from
    their (name, lower-case name, value) triples: the decoded pairs are looked up by those
    triples instead (half the cost of `raw`)."""
    triples = getattr(headers, "_list", None)  # private: any other headers give `raw`
    if isinstance(triples, list):
        try:
            key = tuple(triples)
            found = _DECODED_TRIPLES.get(key)
        except TypeError:  # not hashable triples after all
            pass
        else:
            if found is None:
                if len(_DECODED_TRIPLES) >= _DECODED_LIMIT:
                    _DECODED_TRIPLES.clear()
                found = _DECODED_TRIPLES[key] = _decoded(tuple(headers.raw))
            return found
    raw = tuple(headers.raw)
    return _DECODED_HEADERS.get(raw) or _decoded(raw)


#: `_DECODED_HEADERS` by httpx's triples, for `_headers_of`.
_DECODED_TRIPLES: dict[tuple[object, ...], Headers] = {}


def _decoded(raw: tuple[tuple[bytes, bytes], ...]) -> Headers:
    if len(_DECODED_HEADERS) >= _DECODED_LIMIT:
        _DECODED_HEADERS.clear()
    decoded = tuple([(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw])
    _DECODED_HEADERS[raw] = decoded
    return decoded


def _header(headers: Headers, name: str) -> str | None:
    wanted = name.lower()
    return next((value for key, value in headers if key.lower() == wanted), None)


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

    at: float = attrs.field(validator=_seconds)
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


class Chunks(Sequence[Chunk]):
    """A body's chunks, kept as two columns: arrival times and payloads.

    A sequence of `Chunk` values to its readers; underneath, two tuples, so a 10,000-chunk
    cassette loads and replays without building 10,000 objects (each `Chunk` is made when
    asked for). The columns are validated at once, with C-level passes over them.

    Args:
        times: seconds from sending the request to each chunk's arrival; finite,
            non-negative and non-decreasing.
        payloads: each chunk's bytes.
    """

    __slots__ = ("payloads", "times")

    def __init__(self, times: Sequence[float] = (), payloads: Sequence[bytes] = ()) -> None:
        self._fill(tuple(times), tuple(payloads), floats=False)

    @classmethod
    def _of_floats(cls, times: tuple[float, ...], payloads: tuple[Any, ...]) -> Chunks:
        """`Chunks(times, payloads)` when every time is known to be a float (the loader's
        msgpack float64s): one pass over the column the fewer."""
        chunks = cls.__new__(cls)
        chunks._fill(times, payloads, floats=True)
        return chunks

    @classmethod
    def _kept(cls, times: tuple[float, ...], payloads: Sequence[bytes]) -> Chunks:
        """`Chunks(times, payloads)` of a recording's payloads kept elsewhere than in memory
        (`replay._spool.SpooledPayloads`: bytes each, read when asked for), as they are."""
        chunks = cls.__new__(cls)
        if len(times) != len(payloads):
            raise ValueError(f"{len(times)} chunk times for {len(payloads)} payloads")
        if times:
            _check_times(times)
        chunks.times = times
        chunks.payloads = payloads
        return chunks

    def _fill(self, times: tuple[float, ...], payloads: tuple[Any, ...], *, floats: bool) -> None:
        if len(times) != len(payloads):
            raise ValueError(f"{len(times)} chunk times for {len(payloads)} payloads")
        if times:
            _check_times(times, floats=floats)
        # (counting types by identity is a third cheaper than collecting them in a set)
        if operator.countOf(map(type, payloads), bytes) != len(payloads):
            index = next(i for i, p in enumerate(payloads) if type(p) is not bytes)
            raise TypeError(f"chunk {index}: data must be bytes, not {_kind(payloads[index])}")
        self.times: tuple[float, ...] = times
        #: A tuple, but for a long recording's (see `_kept`).
        self.payloads: Sequence[bytes] = payloads

    @classmethod
    def of(cls, chunks: Iterable[Chunk]) -> Chunks:
        """The columns of `chunks` (a `Chunks` is returned as it is)."""
        if isinstance(chunks, Chunks):
            return chunks
        items = tuple(chunks)
        for index, chunk in enumerate(items):
            if not isinstance(chunk, Chunk):
                raise TypeError(f"chunk {index} must be a Chunk, not {_kind(chunk)}")
        return cls(tuple(c.at for c in items), tuple(c.data for c in items))

    def __len__(self) -> int:
        return len(self.times)

    @overload
    def __getitem__(self, index: int) -> Chunk: ...
    @overload
    def __getitem__(self, index: slice) -> Chunks: ...
    def __getitem__(self, index: int | slice) -> Chunk | Chunks:
        if isinstance(index, slice):
            return Chunks(self.times[index], self.payloads[index])
        return Chunk(self.times[index], self.payloads[index])

    def __iter__(self) -> Iterator[Chunk]:
        return map(Chunk, self.times, self.payloads)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chunks):
            return self.times == other.times and self.payloads == other.payloads
        if isinstance(other, (tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.times, self.payloads))

    def __repr__(self) -> str:
        return f"Chunks({list(self)!r})"


def _check_times(times: tuple[float, ...], *, floats: bool = False) -> None:
    """Raise unless `times` are numbers with 0 <= t0 <= t1 <= ... <= `MAX_SECONDS`.

    C-level passes only: sorting a column already in order finds one run; the first time
    bounds them all below, the last above; a finite sum rules out NaN (a sum that overflows
    only sends a good column down the slow path). Only a failure walks the column, to name
    the chunk at fault. Messages may show times, never payloads.
    """
    if not floats and not set(map(type, times)) <= {float, int}:  # bool (an int) is refused
        index = next(i for i, t in enumerate(times) if type(t) not in (float, int))
        raise TypeError(f"chunk {index}: at must be a number of seconds, not {_kind(times[index])}")
    if (
        tuple(sorted(times)) == times
        and times[0] >= 0
        and times[-1] <= MAX_SECONDS
        and sum(times) < math.inf
    ):
        return
    index, problem = first_bad_time(times)
    if problem is not None:
        raise ValueError(f"chunk {index}: at {problem}")
    raise ValueError(
        f"chunk {index} arrives at {times[index]} s, before chunk {index - 1} "
        f"({times[index - 1]} s)"
    )


def first_bad_time(times: Sequence[float]) -> tuple[int, str | None]:
    """The first chunk of the numbers `times` that a column cannot hold, and what is wrong
    with its time (`time_problem`), or None: it comes before the time ahead of it.

    On the way to an error only: some chunk must be at fault.
    """
    for index, at in enumerate(times):
        problem = time_problem(at)
        if problem is not None:
            return index, problem
        if index and at < times[index - 1]:
            return index, None
    raise AssertionError("no chunk time is at fault")  # pragma: no cover


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
    """

    status: int = attrs.field(validator=_valid_status)
    headers: Headers = attrs.field(default=(), converter=_to_headers)
    headers_at: float = attrs.field(default=0.0, validator=_seconds)
    chunks: Chunks = attrs.field(factory=Chunks, converter=_to_chunks, validator=_chunks_in_order)
    end: StreamEnd = attrs.field(
        default=attrs.Factory(lambda self: _default_end(self), takes_self=True),
        validator=_end_after_body,
    )

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
                extra, or a body that decodes past `replay._decoding.MAX_DECODED_BYTES`.
        """
        from replay._decoding import decoded_chunks

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


@attrs.frozen
class Interaction:
    """One request and the response it got."""

    request: Request = attrs.field(validator=attrs.validators.instance_of(Request))
    response: Response = attrs.field(validator=attrs.validators.instance_of(Response))


# -- values the loader checked, made without their validators ---------------------------------
#
# `_validate.quick` checks every value of a file against what the validators below would
# refuse; each validator then costs as much again, once per field of every cassette loaded
# (most of loading a test's cassette). These make the same objects by the slots' own setters,
# as attrs' `__init__` does on a frozen class. tests/test_model.py pins them to the
# constructors.


def _setters(cls: type[Any]) -> tuple[Callable[[Any, Any], None], ...]:
    return tuple(getattr(cls, field.name).__set__ for field in attrs.fields(cls))


_END_SLOTS = _setters(StreamEnd)
_RESPONSE_SLOTS = _setters(Response)
_INTERACTION_SLOTS = _setters(Interaction)


def _end_of(
    at: float, error: str | None, message: str, truncated: bool, stopped_by: str | None
) -> StreamEnd:
    """`StreamEnd(...)` of valid values (with `stopped_by` set exactly when `truncated`)."""
    made = object.__new__(StreamEnd)
    set_at, set_error, set_message, set_truncated, set_stopped_by = _END_SLOTS
    set_at(made, at)
    set_error(made, error)
    set_message(made, message)
    set_truncated(made, truncated)
    set_stopped_by(made, stopped_by)
    return made


def _interaction_of(
    request: Request,
    status: int,
    headers: Headers,
    headers_at: float,
    chunks: Chunks,
    end: StreamEnd,
) -> Interaction:
    """`Interaction(request, Response(...))` of valid values: the chunks after the headers,
    the end after both."""
    response = object.__new__(Response)
    set_status, set_headers, set_headers_at, set_chunks, set_end = _RESPONSE_SLOTS
    set_status(response, status)
    set_headers(response, headers)
    set_headers_at(response, headers_at)
    set_chunks(response, chunks)
    set_end(response, end)
    made = object.__new__(Interaction)
    set_request, set_response = _INTERACTION_SLOTS
    set_request(made, request)
    set_response(made, response)
    return made


def __getattr__(name: str) -> Any:
    # `TimedEvent` is made when first asked for (reading a body's events): a suite that only
    # replays never needs it, and making an attrs class costs its first cassette ~0.5 ms.
    if name == "TimedEvent":
        from replay._timed_event import TimedEvent

        return TimedEvent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
