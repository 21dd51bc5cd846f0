"""Sans-IO, incremental parser for Server-Sent Events (WHATWG HTML, "event stream interpretation").

Design: bytes go through an incremental UTF-8 decoder (errors="replace"), so a multi-byte
character split across ``feed()`` calls decodes whole. The decoded text is cut into lines
with one C-level regex scan; only the trailing partial line is kept, as a list of pieces
joined once when its terminator arrives, so total work stays linear however the stream is
chunked. A CR ends its line at once (an event it completes is returned by that very
``feed()``); ``_skip_lf`` then swallows an LF opening the next chunk, so a CRLF split
across two chunks is still one line ending. Each complete line is interpreted exactly as
the spec says; nothing is ever held back once its terminator has been seen.
"""

from __future__ import annotations

import codecs
import re

import attrs

__all__ = ["Event", "SSEParser", "parse"]

_EOL = re.compile(r"\r\n?|\n")
_BOM = "\ufeff"


@attrs.frozen
class Event:
    """One dispatched server-sent event.

    ``id`` is the last event ID buffer at dispatch time (it persists across events);
    ``retry`` is the value set by a valid ``retry:`` field in this event's block, else None.
    """

    event: str = "message"
    data: str = ""
    id: str = ""
    retry: int | None = None


#: The most digits a `retry:` field may have to be used; the spec says to ignore a field a
#: client cannot use, and Python refuses to convert strings of over 4,300 digits.
_RETRY_DIGITS = 18


class SSEParser:
    """Incremental event-stream parser: ``feed()`` bytes, get back the events they complete.

    One parser interprets one stream; call ``close()`` at end of stream.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False  # True once the first character (maybe a BOM) was seen
        self._closed = False
        self._skip_lf = False  # previous chunk ended with CR: drop one LF opening the next
        self._pending: list[str] = []  # pieces of the current, unterminated line
        self._data: list[str] = []  # data field values of the current block
        self._event_type = ""
        self._last_id_buffer = ""
        self._last_event_id = ""
        self._retry: int | None = None

    @property
    def last_event_id(self) -> str:
        """The spec's "last event ID string": the last event ID buffer as of the last
        blank line (what a client would send as ``Last-Event-ID`` when reconnecting)."""
        return self._last_event_id

    def feed(self, data: bytes) -> list[Event]:
        """Consume the next chunk of the stream; return the events it completes, in order."""
        if self._closed:
            raise RuntimeError("feed() called after close()")
        text = self._decoder.decode(data)
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == _BOM:
                text = text[1:]
        if self._skip_lf and text:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        events: list[Event] = []
        start = 0
        for match in _EOL.finditer(text):
            line = text[start : match.start()]
            if self._pending:
                self._pending.append(line)
                line = "".join(self._pending)
                self._pending.clear()
            self._process_line(line, events)
            start = match.end()
        if start < len(text):
            self._pending.append(text[start:])
        elif text.endswith("\r"):
            self._skip_lf = True
        return events

    def close(self) -> list[Event]:
        """Signal end of stream. Any incomplete line and undispatched event are discarded,
        as the spec requires, so this returns ``[]``. Idempotent."""
        if not self._closed:
            self._closed = True
            self._decoder.decode(b"", final=True)
            self._pending.clear()
            self._data.clear()
            self._event_type = ""
            self._retry = None
        return []

    def _process_line(self, line: str, events: list[Event]) -> None:
        if not line:
            self._dispatch(events)
            return
        if line[0] == ":":
            return  # comment
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event_type = value
        elif name == "id":
            if "\0" not in value:  # an id containing NULL is ignored
                self._last_id_buffer = value
        elif (
            name == "retry" and value.isascii() and value.isdigit() and len(value) <= _RETRY_DIGITS
        ):
            self._retry = int(value)  # (a longer one is a value no client can use: ignored)
        # any other field name is ignored

    def _dispatch(self, events: list[Event]) -> None:
        self._last_event_id = self._last_id_buffer
        if self._data:
            events.append(
                Event(
                    event=self._event_type or "message",
                    data="\n".join(self._data),
                    id=self._last_id_buffer,
                    retry=self._retry,
                )
            )
            self._data.clear()
        self._event_type = ""
        self._retry = None


def parse(data: bytes) -> list[Event]:
    """Parse a complete stream at once: feed everything, then close."""
    parser = SSEParser()
    events = parser.feed(data)
    events.extend(parser.close())
    return events
