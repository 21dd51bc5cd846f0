"""`use_cassette`: the life of a cassette around a block of code.

On enter: load the cassette (if its file exists), decide what may be replayed and what may
be recorded (the record modes of `replay.engine.modes`), route the httpx / httpx2 traffic of
this context (task or thread, and the threads it starts: see `replay.adapters.patch`) through
this session, and carry it into the processes started inside (`replay.run.settings`). Each
request is then replayed (the engine's `Player`), recorded (onto the engine's `Tape`), or
refused with `CassetteMismatchError`. On exit: stop routing, wait (at most `finish_timeout`)
for the recordings still streaming, end what is still open as stopped by the session, and
merge what was recorded (with what child processes left) into the file under an
inter-process lock (`replay.session.file.save`). A session old enough (a child process's at
once) keeps what it finishes in parts beside the file meanwhile (`replay.store.journal`).

Faults (`faults=[...]`, see `replay.faults`) apply to what is replayed, with attempts
counted per interaction afresh at each enter. `speed="virtual"` replays as recorded on
virtual time (see `replay.clock.vtime`): the session patches the `time` clocks while it is active.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlsplit

from replay.adapters import httpx as _httpx
from replay.adapters import patch
from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, format_speed
from replay.engine.conversation import ALLOWED_LEFTOVERS
from replay.engine.modes import (
    RECORD_MODES,
    RecordMode,
    forced_record_mode,
    in_force,
    why_not_recorded,
)
from replay.engine.player import Played, Player
from replay.errors import (
    ConfigurationError,
    hide_for_replay_errors,
    raise_bare,
)
from replay.matching import DEFAULT_MATCH_ON, Matcher
from replay.model import Interaction, Request
from replay.run.settings import carry_session
from replay.session.args import (
    VIRTUAL,
    clocks_for,
    finish_async,
    finish_wait,
    ignored_hosts,
    on_virtual_time,
)
from replay.session.descendant import ChildProcessSide
from replay.session.file import load_for, open_tape, save, warn_keys_in_responses
from replay.session.imposed import current
from replay.session.options import DEFAULT_FINISH_TIMEOUT, SessionOptions, redactor_for
from replay.session.seen import SeenInUse
from replay.store.cassette import Cassette

if TYPE_CHECKING:
    from replay.engine.recorder import Recording, Tape
    from replay.faults import FaultLike
    from replay.run.descendants import Carrier
    from replay.store.journal import Journal

__all__ = [
    "RECORD_MODES",
    "VIRTUAL",
    "CassetteSession",
    "RecordMode",
    "SessionOptions",
    "forced_record_mode",
    "use_cassette",
]

F = TypeVar("F", bound=Callable[..., Any])


class CassetteSession(SeenInUse, ChildProcessSide):
    """A cassette in use: a context manager (sync and async) and a function decorator.

    Made by `use_cassette` (see there for the arguments), or from a `SessionOptions`.
    """

    def __init__(self, path: str | Path, options: SessionOptions | None = None) -> None:
        self.path = self._asked = path if isinstance(path, Path) else Path(path)
        #: What the session was asked for (`use_cassette`'s arguments), as one frozen value.
        self.options = options = SessionOptions() if options is None else options
        #: The record mode in force: the one asked for, unless a test run imposes another
        #: (`replay.session.imposed`); "once" when none was asked for.
        self.record_mode = in_force(options.record_mode)
        self._use_speed("instant" if options.speed is None else options.speed)
        self._ignored = ignored_hosts(options.ignore_hosts, options.ignore_localhost)
        self.cassette: Cassette | None = None
        self._player: Player | None = None
        self._tape: Tape | None = None
        self._may_replay = False
        self._may_record = False
        self._loaded = 0
        self._existed = False
        self._last_player: Player | None = None
        self._last_tape: Tape | None = None
        self._journal: Journal | None = None
        self._carrier: Carrier | None = None
        self.carries = True  #: into the processes started inside it
        #: Whether the last exit wrote the cassette file.
        self.saved = False

    def _use_speed(self, speed: SpeedLike) -> None:
        """Set the speed, and the clocks it needs."""
        virtual, self.speed, self.clock, record_clock = clocks_for(speed, self.options.clock)
        #: True when replay runs on virtual time (speed "virtual").
        self.virtual_time = virtual
        #: What recordings stamp chunks with: real time, even in a virtual-time session.
        self.record_clock = record_clock
        # (a policy's spec: a seed drawn at random is carried into child processes as drawn)
        policy = not virtual and not isinstance(self.speed, (int, float))
        self._speed_used = format_speed(self.speed) if policy else speed

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Cassette:
        cassette = self._open()
        patch.install(self)
        if self.carries:  # into the processes started inside (`replay.run.descendants`)
            self._carrier = carry_session(
                self.path, self.record_mode, self._speed_used, self.options, self.after_fork
            )
        watcher = current().watcher
        if watcher is not None:
            watcher.entered(self)
        return cassette

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.note_failure(exc)
        self._leave(finish_wait(self.options.finish_timeout))

    async def __aenter__(self) -> Cassette:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.note_failure(exc)
        patch.uninstall(self)
        await finish_async(self._tape, self.options.finish_timeout)
        self._leave(0.0)

    def _leave(self, wait: float) -> None:
        """Stop routing, finish the recordings (waiting up to `wait` s), save, forget.

        A session that may record holds SIGINT and SIGTERM back meanwhile (in the main
        thread), and delivers them once the cassette is saved: a Ctrl-C as the block ends
        does not lose what it recorded (`replay.store.atomic.HeldSignals`).
        """
        patch.uninstall(self)
        if self._tape is None:
            self._close()
            return
        from replay.store.atomic import HeldSignals  # (here: replaying never writes)

        with HeldSignals():
            self._tape.finish(wait)
            self._close()

    def _open(self) -> Cassette:
        if self.cassette is not None:
            raise ConfigurationError(f"cassette {str(self.path)!r} is already in use")
        self.saved = False
        default_speed = current().default_speed
        # A speed chosen here wins over the run's (set already, unless on virtual time: each
        # use gets a fresh one).
        if (
            self.options.speed is None
            and default_speed is not None
            and (default_speed != self._speed_used or self.virtual_time)
        ):
            self._use_speed(default_speed)
        self.record_mode = mode = in_force(self.options.record_mode)
        resolve = current().resolve  # (pytest: a relative path is the test file's)
        if resolve is not None:
            self.path = resolve(self._asked)
        interactions, existed, self._may_replay, self._may_record = load_for(
            self.path, mode, recover_left=not self._descendant
        )
        if self._refusal is not None and self._may_record:
            self._may_replay, self._may_record = True, False  # refused: see `refuse_recording`
        self._existed = existed
        self._loaded = len(interactions)
        cassette = self._start(interactions)
        if on_virtual_time(self.clock):
            self.clock.__enter__()
        return cassette

    def _start(self, interactions: list[Interaction]) -> Cassette:
        """The cassette of this use, its player and (if it may record) its tape."""
        options = self.options
        cassette = Cassette(
            interactions,
            path=self.path,
            match_on=options.match_on,
            allow_playback_repeats=options.allow_playback_repeats,
        )
        if self._may_record:  # (only then: the recorder is not even imported for a replay)
            self._journal, self._tape = open_tape(
                self.path, cassette, options.redactor, self._replacing(), self._existed
            )
            if self._descendant:
                self._journal.make_immediate()
        # Only what was loaded replays: what this session records is not played back to it.
        self._player = Player(
            cassette,
            redactor=options.redactor,
            faults=options.faults,
            record_mode=self.record_mode,
            replayable=self._loaded,
            advice=current().advice,
        )
        self.cassette = cassette
        return cassette

    def _replacing(self) -> tuple[Matcher, ...] | None:
        """The matchers by which what "all" records replaces the old answers (else None)."""
        return self.options.match_on if self.record_mode == "all" else None

    def _close(self) -> None:
        carrier, self._carrier = self._carrier, None
        if carrier is not None:
            carrier.end()
        if on_virtual_time(self.clock):
            self.clock.__exit__(None, None, None)
        cassette, player = self.cassette, self._player
        self._last_tape = self._tape
        self.cassette, self._player, self._tape = None, None, None
        assert cassette is not None
        assert player is not None
        self._last_player = player
        player.settle()
        journal, self._journal = self._journal, None
        self.saved = save(self.path, cassette, journal, self._replacing(), self._descendant)
        watcher = current().watcher
        if watcher is not None:
            watcher.left(self)
        tape = self._last_tape
        if tape is not None and tape.keys_in_responses:  # last: all is saved and settled
            warn_keys_in_responses(self.path, tape.keys_in_responses)

    def __call__(self, function: F) -> F:
        """Decorate a sync or async function: each call runs inside a fresh session."""
        make = functools.partial(self._fresh)
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                async with make():
                    return await function(*args, **kwargs)

            return cast(F, async_wrapper)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with make():
                return function(*args, **kwargs)

        return cast(F, wrapper)

    def _fresh(self) -> CassetteSession:
        return CassetteSession(self._asked, self.options)

    # -- routing (called by the patched transports) --------------------------------------------

    def ignores(self, url: object) -> bool:
        """Whether a request to `url` goes live, untouched and unrecorded (`ignore_hosts`,
        `ignore_localhost`). `url` is its text, or an object whose `str` is (an httpx URL:
        formatted only when some host is ignored)."""
        if not self._ignored:
            return False
        from replay.adapters.network import is_allowed

        return is_allowed(urlsplit(str(url)).hostname, self._ignored)

    def answer(self, request: Request) -> Played | None:
        """What replays `request` (as sent), or None: record it (the record mode allows it).

        The library-neutral half of routing, for every adapter (httpx, aiohttp, requests).

        Raises:
            CassetteMismatchError: nothing replays it and the record mode does not record.
        """
        __tracebackhide__ = hide_for_replay_errors
        if not self._may_replay:  # record mode "all", or "once" without a file
            return None
        player = self._player
        if player is None:  # the session ended while this request was on its way
            raise_bare(ConfigurationError(f"cassette {str(self.path)!r} is no longer in use"))
        if self._may_record:
            return player.find(request)
        reason = self._refusal or why_not_recorded(self.record_mode)
        if not self._existed:  # a typo in the path, most likely: say so before anything else
            reason = f"The cassette file {str(self.path)!r} does not exist. {reason}"
        return player.take(request, reason=reason)

    def schedule(self) -> Schedule | None:
        """The deadlines of a response whose request is sent now (None at instant speed)."""
        return Schedule.starting_now(self.speed, self.clock)

    def tape(self) -> Tape:
        """Where this session's recordings go.

        Raises:
            ConfigurationError: the session is not (or no longer) in use.
        """
        tape = self._tape
        if tape is None:  # the session ended while a request was on its way
            raise ConfigurationError(f"cassette {str(self.path)!r} is no longer in use")
        return tape

    def start_recording(self, request: Request) -> Recording:
        """A recording of the response to `request`, sent now, onto this session's tape.

        The caller must finish it (`Recording.finish`) however the request ends.
        """
        clock = self.record_clock or MonotonicClock()
        return self.tape().start(request, clock, clock.now())

    def handle(self, request: Any, send: patch.Send) -> Any:
        """Replay, record or refuse a sync httpx / httpx2 request (see the record modes)."""
        __tracebackhide__ = hide_for_replay_errors
        return _httpx.handle(self, request, send)

    async def ahandle(self, request: Any, send: patch.AsyncSend) -> Any:
        """Replay, record or refuse an async httpx / httpx2 request (see the record modes)."""
        __tracebackhide__ = hide_for_replay_errors
        return await _httpx.ahandle(self, request, send)


def use_cassette(
    path: str | Path,
    *,
    record_mode: RecordMode | str | None = None,
    speed: SpeedLike | None = None,
    match_on: Sequence[str | Callable[[Any, Any], Any]] = DEFAULT_MATCH_ON,
    allow_playback_repeats: bool = False,
    redact_headers: Sequence[str] = (),
    redact_query_parameters: Sequence[str] = (),
    before_record: Callable[[Interaction], Interaction | None] | None = None,
    clock: Clock | None = None,
    faults: Iterable[FaultLike] = (),
    finish_timeout: float = DEFAULT_FINISH_TIMEOUT,
    ignore_hosts: Iterable[str] = (),
    ignore_localhost: bool = False,
    websocket_allow: Iterable[str] = ALLOWED_LEFTOVERS,
) -> CassetteSession:
    """Record to or replay from the cassette at `path` every httpx / httpx2 request made inside.

    Use as `with use_cassette(...) as cassette:`, `async with`, or as a decorator of sync and
    async functions.

    Args:
        path: the cassette file (msgpack).
        redact_headers: header names to redact, besides Authorization, api keys and cookies.
        redact_query_parameters: query parameters to redact, besides key, api_key, token…
        before_record: a callable that may rewrite each interaction before it is stored;
            returning None drops it.
        record_mode, speed, match_on, allow_playback_repeats, clock, faults, finish_timeout,
            ignore_hosts, ignore_localhost, websocket_allow: the session's options, each
            documented where it is held: `SessionOptions`
            (`help(replay.session.lifecycle.SessionOptions)`).

    Raises:
        ConfigurationError: a bad record mode, speed, matcher or fault.
        CassetteFormatError: the cassette file exists but cannot be read.
    """
    options = SessionOptions(
        record_mode=record_mode,
        speed=speed,
        match_on=match_on,
        allow_playback_repeats=allow_playback_repeats,
        redactor=redactor_for(redact_headers, redact_query_parameters, before_record),
        clock=clock,
        faults=faults,
        finish_timeout=finish_timeout,
        ignore_hosts=ignore_hosts,
        ignore_localhost=ignore_localhost,
        websocket_allow=websocket_allow,
    )
    return CassetteSession(path, options)
