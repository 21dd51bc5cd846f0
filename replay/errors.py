"""The exceptions replay raises.

    ReplayError
    ├── AmbiguousSessionError (RuntimeError) a request no single active session can claim
    ├── CassetteFormatError (ValueError)    a cassette file that cannot be read
    ├── CassetteMismatchError (LookupError) a request the cassette cannot answer
    ├── FrameMismatchError (LookupError)    a WebSocket frame the recorded conversation never saw
    ├── CassetteWriteError (OSError)        a cassette file that cannot be saved
    ├── ConfigurationError (ValueError)     a bad argument: speed, record mode, matcher…
    ├── DecodingError (ValueError)          a body whose Content-Encoding cannot be undone
    │   ├── DecoderMissingError                 its decoder (an optional extra) is missing
    │   └── DecodedTooLargeError                it decodes past the limit (a bomb)
    ├── NetworkBlockedError (ConnectionError) a request the blocked network refused
    ├── UnplayedInteractionsWarning (UserWarning) a cassette left interactions unplayed
    └── KeyInResponseWarning (UserWarning)  a recorded response body holds a key's shape

Each constructor takes typed fields and builds its message; no message ever echoes a
secret: a request reaches a constructor already redacted (its caller's job: the player, the
network block, the matcher's explanation), since this module imports nothing of replay's
(every module may raise these, so they sit below them all).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, NoReturn, Protocol

__all__ = [
    "ALREADY_PLAYED",
    "DISTRIBUTION",
    "AdviceWording",
    "AmbiguousSessionError",
    "CassetteFormatError",
    "CassetteMismatchError",
    "CassetteWriteError",
    "ConfigurationError",
    "DecodedTooLargeError",
    "DecoderMissingError",
    "DecodingError",
    "EventStreamError",
    "FrameMismatchError",
    "KeyInResponseWarning",
    "LibraryAdvice",
    "NetworkBlockedError",
    "ReplayError",
    "UnplayedInteractionsWarning",
    "hide_for_replay_errors",
    "install_hint",
    "raise_bare",
]


#: The "matcher" named in `CassetteMismatchError.differences` when every matcher passes but
#: the nearest interaction has already played.
ALREADY_PLAYED = "already played"


class ReplayError(Exception):
    """Base class of every error replay raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Constructors take typed fields, not the message: rebuild from the message and the
        # fields as they are, so that an error crosses processes (a multiprocessing pool).
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


def raise_bare(error: BaseException) -> NoReturn:
    """Raise `error` from a frame that holds nothing else: the frame a test report shows with
    its arguments, the redacted error alone (those before it: `hide_for_replay_errors`)."""
    raise error


def hide_for_replay_errors(excinfo: Any) -> bool:
    """Whether pytest leaves a frame of replay's out of a test's traceback (the
    `__tracebackhide__` of each frame a request passes through, given the `ExceptionInfo`):
    when the error is replay's own, whose message says all it knows (redacted), where the
    frames would add the request as sent, secrets and all. Any other error (a bug) shows
    them. A hidden frame never raises a replay error itself: `raise_bare` does."""
    return isinstance(getattr(excinfo, "value", None), ReplayError)


def _rebuilt(cls: type[ReplayError], args: tuple[object, ...], state: dict[str, Any]) -> Any:
    """An error of type `cls` with `args` and attributes `state`, made without `__init__`."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class AmbiguousSessionError(ReplayError, RuntimeError):
    """A request was made where several cassette sessions are active, and none of them
    belongs to its context (task or thread), so nothing can tell which one it is for.

    Attributes:
        candidates: the cassette paths of the active sessions.
    """

    def __init__(self, candidates: Sequence[str]) -> None:
        self.candidates = tuple(candidates)
        names = ", ".join(repr(name) for name in self.candidates)
        super().__init__(
            f"a request was made outside every cassette session's context while "
            f"{len(self.candidates)} sessions are active ({names}): replay will not guess "
            "which one it is for. Make it inside the session it belongs to (in the task or "
            "thread that entered it, or a thread started from there)."
        )


class CassetteFormatError(ReplayError, ValueError):
    """A cassette file is truncated, garbled, of the wrong shape, or of a newer format."""

    def __init__(self, path: Path | str | None, problem: str) -> None:
        self.path = None if path is None else Path(path)
        self.problem = problem
        where = "cassette" if path is None else f"cassette {str(path)!r}"
        super().__init__(f"cannot read {where}: {problem}")


class CassetteWriteError(ReplayError, OSError):
    """A cassette file cannot be saved: it is read-only, the disk is full, its directory
    cannot be written... The file is left as it was, and no temporary file behind.

    Attributes:
        path: the cassette (as given: a symlink is written through, and named as given).
        problem: what stopped the save (for an OSError, its description, no file name).
        errno: the OSError's errno, if one stopped it.
    """

    def __init__(self, path: Path | str, problem: str, errno: int | None = None) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"cannot save cassette {str(path)!r}: {problem}")
        self.errno = errno  # after OSError.__init__, which would otherwise reset it

    def __reduce__(self) -> Any:
        return (type(self), (self.path, self.problem, self.errno))  # errno is no attribute


class ConfigurationError(ReplayError, ValueError):
    """An argument replay was given makes no sense (a speed of 0, an unknown record mode…)."""


class AdviceWording(Protocol):
    """How a mismatch's advice is worded where its error is read (`replay.engine.advice.Advice`).

    Attributes:
        record: how to record the request that had no match.
        repeat: how to let an interaction answer again.
        ignore_host: how to let a host's requests go live (`{host}` is filled in).
    """

    @property
    def record(self) -> str: ...
    @property
    def repeat(self) -> str: ...
    @property
    def ignore_host(self) -> str: ...
    @property
    def rewrite(self) -> str: ...


class LibraryAdvice:
    """The library's wording of a mismatch's advice, in its keywords: the default of
    `CassetteMismatchError` and of `replay.engine.advice.Advice`."""

    record: Final = "use record_mode='new_episodes' (or 'all' to record everything again)"
    repeat: Final = "allow_playback_repeats=True lets it answer again"
    ignore_host: Final = "ignore_hosts=[{host!r}]"
    rewrite: Final = "delete the cassette and record it again (record_mode='new_episodes' \
would add it beside the stale one, which no run then plays)"


_LIBRARY_ADVICE: AdviceWording = LibraryAdvice()


class CassetteMismatchError(ReplayError, LookupError):
    """No recorded interaction answers a request, and the record mode forbids recording.

    Attributes:
        method, url: the request that found no answer, redacted by the caller.
        cassette_path: the cassette file, if it has one.
        nearest: the nearest recorded request as "METHOD URL" (redacted by the caller), or
            None for an empty cassette.
        differences: for the nearest request, (matcher name, how it differs) pairs.
        unseen_host: the request's host, when no recorded request went to it.
    """

    def __init__(
        self,
        *,
        method: str,
        url: str,
        cassette_path: Path | str | None,
        record_mode: str,
        nearest: str | None = None,
        differences: Sequence[tuple[str, str]] = (),
        reason: str = "",
        unseen_host: str | None = None,
        advice: AdviceWording = _LIBRARY_ADVICE,
    ) -> None:
        self.method, self.url, self.record_mode, self.nearest = method, url, record_mode, nearest
        self.cassette_path = None if cassette_path is None else Path(cassette_path)
        self.differences = tuple(differences)
        where = _where(cassette_path)
        lines = [f"{method} {self.url} has no match in {where} (record mode {record_mode!r})"]
        if reason:  # first: a missing file is the cause of all that follows
            lines.append(reason)
        #: The request's host, when the cassette holds no request to it at all.
        self.unseen_host = unseen_host
        #: Whether the nearest recorded request differs in its body alone: a stale recording.
        self.body_only = bool(differences) and {n for n, _ in differences} <= {"body", "raw_body"}
        if unseen_host is not None:
            lines.append(
                f"The cassette holds no request to {unseen_host} at all. If this is a "
                "library's background request (telemetry, a model-cost map, a local "
                f"service), let it go live with {advice.ignore_host.format(host=unseen_host)}."
            )
        if nearest is None:
            lines.append("The cassette has no recorded interactions.")
        else:
            lines.append(f"Nearest recorded request: {nearest}")
            for name, how in self.differences:
                how_lines = how.splitlines() or [""]
                if name == ALREADY_PLAYED:
                    lines.append(f"  it matches, but {ALREADY_PLAYED}: {advice.repeat}")
                else:
                    lines.append(f"  {name} differs: {how_lines[0]}")
                lines.extend(f"    {line}" for line in how_lines[1:])
        if self.body_only:
            lines.append(
                "Only the body differs: the recording is stale (the request changed since). "
                f"To record it again, {advice.rewrite}."
            )
        else:
            lines.append(f"To record it, {advice.record}.")
        super().__init__("\n".join(lines))


class FrameMismatchError(ReplayError, LookupError):
    """A WebSocket client frame the replayed conversation never recorded (or sent already).

    Attributes: `url` (the upgrade URL), `frame` (the frame sent, shown short), `nearest`
    (the nearest recorded client frame not yet sent, shown so, or None), `differences` (how
    it differs, lines), `cassette_path`; each redacted by the caller.
    """

    def __init__(
        self,
        *,
        url: str,
        frame: str,
        cassette_path: Path | str | None,
        nearest: str | None = None,
        differences: Sequence[str] = (),
    ) -> None:
        self.url, self.frame, self.nearest = url, frame, nearest
        self.differences = tuple(differences)
        self.cassette_path = None if cassette_path is None else Path(cassette_path)
        lines = [f"WebSocket frame sent on {url} has no match in {_where(cassette_path)}: {frame}"]
        if nearest is None:
            lines.append("Every client frame the recording holds was sent already.")
        else:
            lines.append(f"Nearest recorded client frame not yet sent: {nearest}")
            lines.extend(f"  {line}" for line in self.differences)
        lines.append("To record the conversation again, use record mode 'all'.")
        super().__init__("\n".join(lines))


def _where(path: Path | str | None) -> str:
    return "the in-memory cassette" if path is None else f"cassette {str(path)!r}"


def _first_five(lines: Sequence[str]) -> str:
    """The first five of `lines`, each on a line of its own, indented; then how many more."""
    shown = [f"\n  {line}" for line in lines[:5]]
    if len(lines) > len(shown):
        shown.append(f"\n  … and {len(lines) - len(shown)} more")
    return "".join(shown)


#: The name replay is published under on the package index (the import name is `replay`).
DISTRIBUTION = "replay-http"


def install_hint(extra: str) -> str:
    """The command that installs the optional `extra`, as the user would type it."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class DecodingError(ReplayError, ValueError):
    """A body whose Content-Encoding replay cannot undo: unknown, damaged, or too large."""

    def __init__(self, encoding: str, problem: str) -> None:
        self.encoding, self.problem = encoding, problem
        super().__init__(f"cannot decode a body with content-encoding {encoding!r}: {problem}")


class EventStreamError(ReplayError, ValueError):
    """An AWS event stream (`application/vnd.amazon.eventstream`) whose bytes are damaged:
    a CRC that does not match, or a length no message can have."""


class DecoderMissingError(DecodingError):
    """The package that decodes this Content-Encoding (an optional extra) is not installed."""

    def __init__(self, encoding: str, package: str, extra: str) -> None:
        self.package, self.extra = package, extra
        super().__init__(
            encoding, f"the {package!r} package is not installed ({install_hint(extra)})"
        )


class DecodedTooLargeError(DecodingError):
    """The body decodes to more than the limit: refused, as a decompression bomb would be."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.limit = limit
        super().__init__(
            encoding,
            f"it decodes to more than {_size(limit)} (replay.framing.decoding.MAX_DECODED_BYTES), "
            "so it is refused as a likely decompression bomb",
        )


def _size(count: int) -> str:
    return f"{count // (1024 * 1024)} MiB" if count % (1024 * 1024) == 0 else f"{count} bytes"


class NetworkBlockedError(ReplayError, ConnectionError):
    """The network is blocked and no cassette answered a request (or a socket connect).

    Attributes:
        method, url: the refused request (redacted by the caller); `CONNECT` and
            `host:port` for a raw socket connection.
        library: for a raw connection, the library that opened it (one replay does not
            route through cassettes), if it could be told.
        cassette: the cassette that was recording the request, if one was.
    """

    def __init__(
        self, *, method: str, url: str, library: str | None = None, cassette: str | None = None
    ) -> None:
        self.method, self.url, self.library, self.cassette = method, url, library, cassette
        by = ""
        if library is not None:
            by = (
                f" The connection was opened by {library}, which replay does not route "
                "through cassettes (see the README's 'Which clients' table)."
            )
        fix = (
            f", and cassette {cassette!r} was recording it (its record mode records what it "
            "cannot replay). Record it once with the network open (without --block-network, or "
            "with its host allowed: "
            if cassette is not None  # a test that has its cassette: recording needs the network
            else " and no cassette answered it." + by + " Record it in a cassette (use_cassette"
            " / @pytest.mark.use_cassette), or allow its host ("
        )
        super().__init__(
            f"{method} {self.url} was refused: the network is blocked{fix}"
            "replay_allowed_hosts; replay run / record: --allow-host)"
            + (", then replay it blocked." if cassette is not None else ".")
        )


class UnplayedInteractionsWarning(ReplayError, UserWarning):
    """A cassette session ended with recorded interactions it never played.

    Usually a request the code no longer makes, or makes differently enough not to match.
    """

    @classmethod
    def describe(cls, path: Path | str | None, requests: Sequence[str]) -> str:
        """The message for the unplayed interactions of the cassette at `path`, whose
        requests are `requests` ("METHOD URL", each redacted by the caller)."""
        count = len(requests)
        plural = "" if count == 1 else "s"
        return f"{count} unplayed interaction{plural} in {_where(path)}:" + _first_five(requests)


class KeyInResponseWarning(ReplayError, UserWarning):
    """Recorded response bodies hold a value shaped like a well-known key (`sk-…`, `AIza…`).

    Response bodies are stored as they came (the replay plays them byte for byte), so the
    value is in the cassette: scrub it with a `before_record` hook, or make sure it is no
    live key. The message names the interactions, never the value.
    """

    @classmethod
    def describe(cls, path: Path | str | None, requests: Sequence[str]) -> str:
        """The message for the recorded `requests` ("METHOD URL", redacted) whose response
        body holds a key's shape, in the cassette at `path`."""
        count = len(requests)
        bodies = "body holds" if count == 1 else "bodies hold"
        return (
            f"{count} recorded response {bodies} a value shaped like a key (sk-…, AIza…, "
            f"a JWT…), stored as it came in {_where(path)} (response bodies are not redacted): "
            "scrub it with a before_record hook, or make sure it is no live key:"
        ) + _first_five(requests)
