"""`use_cassette`: the life of a cassette around a block of code.

On enter: load the cassette (if its file exists), decide what may be replayed and what may
be recorded (the record modes of `replay.modes`), and route the httpx / httpx2 traffic of
this context (task or thread, and the threads it starts: see `replay.patch`) through this
session. Each request is then replayed
(the engine's `Player`), recorded (onto the engine's `Tape`), or refused with
`CassetteMismatchError`. On exit: stop routing, wait (at most `finish_timeout`) for the
recordings still streaming, end what is still open as stopped by the session, and if
anything was recorded, merge it into the file under an inter-process lock
(`replay.store.merge`). A session old enough keeps what it finishes in parts beside the
file meanwhile (`replay._journal`), so that a killed process loses nothing finished: the
next session that records into the file merges them first.

Faults (`faults=[...]`, see `replay.faults`) apply to what is replayed, with attempts
counted per interaction afresh at each enter. `speed="virtual"` replays as recorded on
virtual time (see `replay.vtime`): the session patches the `time` clocks while it is active.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import urlsplit

from replay import patch
from replay._session_args import (
    VIRTUAL,
    clocks_for,
    faults_of,
    finish_async,
    finish_wait,
    host_names_of,
    ignored_hosts,
    on_virtual_time,
)
from replay._suite import current
from replay.adapters import httpx as _httpx
from replay.cassette import Cassette
from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, seconds
from replay.engine.player import Played, Player
from replay.errors import (
    CassetteMismatchError,
    ConfigurationError,
    hide_for_replay_errors,
    raise_bare,
)
from replay.matching import DEFAULT_MATCH_ON, MatchIndex, MatchOn
from replay.model import Interaction, Request
from replay.modes import (
    RECORD_MODES,
    RecordMode,
    forced_record_mode,
    in_force,
    may_replay_and_record,
    why_not_recorded,
)
from replay.modes import check as check_mode
from replay.redact import Redactor
from replay.store import load_interactions, merge

if TYPE_CHECKING:
    from replay._journal import Journal
    from replay.engine.recorder import Recording, Tape
    from replay.faults import Fault, FaultLike, Injector

__all__ = [
    "RECORD_MODES",
    "VIRTUAL",
    "CassetteSession",
    "RecordMode",
    "forced_record_mode",
    "use_cassette",
]

F = TypeVar("F", bound=Callable[..., Any])

#: The redactor of every session that adds nothing to the defaults: what it remembers serves all.
_PLAIN = Redactor()

#: Seconds a session's exit waits, by default, for recordings still streaming.
DEFAULT_FINISH_TIMEOUT = 5.0


class CassetteSession:
    """A cassette in use: a context manager (sync and async) and a function decorator.

    Made by `use_cassette`; see there for the arguments.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        record_mode: RecordMode | str | None = None,
        speed: SpeedLike | None = None,
        match_on: MatchOn = DEFAULT_MATCH_ON,
        allow_playback_repeats: bool = False,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        faults: Iterable[FaultLike] = (),
        finish_timeout: float = DEFAULT_FINISH_TIMEOUT,
        ignore_hosts: Iterable[str] = (),
        ignore_localhost: bool = False,
    ) -> None:
        if record_mode is not None:
            check_mode(record_mode)
        if match_on != DEFAULT_MATCH_ON:  # (the default is known good)
            MatchIndex([], match_on=match_on)  # validates matchers now, not at first request
        self.path = path if isinstance(path, Path) else Path(path)
        self._requested_mode = record_mode
        #: The record mode in force: the one asked for, unless a test run imposes another
        #: (`replay._suite`); "once" when none was asked for.
        self.record_mode = in_force(record_mode)
        self._requested_speed = speed
        self._given_clock = clock
        self._use_speed("instant" if speed is None else speed)
        self.match_on = tuple(match_on)
        self.allow_playback_repeats = allow_playback_repeats
        self.redactor = redactor or Redactor()
        #: The faults applied to what this session replays (the pytest plugin reports them).
        self.faults: tuple[Fault, ...] = faults_of(faults)
        #: Seconds the exit waits for recordings still streaming before it ends them.
        self.finish_timeout = seconds(finish_timeout, "finish_timeout")
        #: Hosts whose requests go live, untouched and unrecorded (vcrpy's `ignore_hosts`).
        self.ignore_hosts = host_names_of(ignore_hosts)
        #: Whether loopback hosts are ignored too (vcrpy's `ignore_localhost`).
        self.ignore_localhost = bool(ignore_localhost)
        self._ignored = ignored_hosts(self.ignore_hosts, self.ignore_localhost)
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
        #: Whether the last exit wrote the cassette file.
        self.saved = False

    def _use_speed(self, speed: SpeedLike) -> None:
        """Set the speed, and the clocks it needs."""
        virtual, self.speed, self.clock, record_clock = clocks_for(speed, self._given_clock)
        #: True when replay runs on virtual time (speed "virtual").
        self.virtual_time = virtual
        #: What recordings stamp chunks with: real time, even in a virtual-time session.
        self.record_clock = record_clock
        self._speed_used = speed

    @property
    def injector(self) -> Injector:
        """The faults with the attempts each interaction had in the current (or last) use."""
        player = self._player or self._last_player
        if player is not None:
            return player.injector
        from replay.faults import Injector

        return Injector(self.faults)

    @property
    def last_used(self) -> tuple[Cassette, int] | None:
        """The cassette of the current (or last) use, and how many of its interactions were
        loaded from the file (the rest were recorded in that use); None before any use."""
        player = self._player or self._last_player
        return None if player is None else (player.cassette, self._loaded)

    @property
    def read_on_loop(self) -> list[str]:
        """The recordings of the current (or last) use whose chunks were stamped on the
        client's event loop, as "METHOD URL": their gaps include any time the client held
        its loop up (see `replay._netthread` for the transports read from a thread)."""
        tape = self._tape or self._last_tape
        return list(tape.read_on_loop) if tape is not None else []

    @property
    def keys_in_responses(self) -> list[str]:
        """The recordings of the current (or last) use whose response body holds a
        well-known key's shape, as "METHOD URL" (redacted): stored as they came, and
        warned of (`KeyInResponseWarning`) when the use ends."""
        tape = self._tape or self._last_tape
        return list(tape.keys_in_responses) if tape is not None else []

    @property
    def mismatches(self) -> list[CassetteMismatchError]:
        """The mismatches raised in the current (or last) use, even if the client swallowed
        them (an SDK may wrap or retry): the pytest plugin reports them on failure."""
        player = self._player or self._last_player
        return player.mismatches if player is not None else []

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Cassette:
        cassette = self._open()
        patch.install(self)
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
        self._leave(finish_wait(self.finish_timeout))

    async def __aenter__(self) -> Cassette:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        patch.uninstall(self)
        await finish_async(self._tape, self.finish_timeout)
        self._leave(0.0)

    def _leave(self, wait: float) -> None:
        """Stop routing, finish the recordings (waiting up to `wait` s), save, forget."""
        patch.uninstall(self)
        if self._tape is not None:
            self._tape.finish(wait)
        self._close()

    def _open(self) -> Cassette:
        if self.cassette is not None:
            raise ConfigurationError(f"cassette {str(self.path)!r} is already in use")
        self.saved = False
        run = current()
        default_speed = run.default_speed
        # A speed chosen here wins over the run's (set already, unless on virtual time: each
        # use gets a fresh one).
        if (
            self._requested_speed is None
            and default_speed is not None
            and (default_speed != self._speed_used or self.virtual_time)
        ):
            self._use_speed(default_speed)
        interactions, existed = _load(self.path)
        self.record_mode = mode = in_force(self._requested_mode)
        self._may_replay, self._may_record = may_replay_and_record(mode, existed)
        if self._may_record and _recover(self.path):  # what a killed session left: merged
            interactions, existed = _load(self.path)
            # "once" goes on with the recording that was killed: what it finished replays,
            # the rest records (recording it all again would store it twice)
            self._may_replay = self._may_replay or mode == "once"
        self._existed = existed
        self._loaded = len(interactions)
        if self._may_record and existed:
            from replay._atomic import check_writable

            check_writable(self.path)  # now, not at exit: what it records would be lost then
        cassette = Cassette(
            interactions,
            path=self.path,
            match_on=self.match_on,
            allow_playback_repeats=self.allow_playback_repeats,
        )
        # Only what was loaded replays: what this session records is not played back to it.
        self._player = Player(
            cassette,
            redactor=self.redactor,
            faults=self.faults,
            record_mode=mode,
            replayable=self._loaded,
            advice=run.advice,
        )
        if self._may_record:  # (only then: the recorder is not even imported for a replay)
            from replay._journal import Journal
            from replay._spool import Spool
            from replay.engine.recorder import Tape

            replacing = self.match_on if mode == "all" else None  # (as the merge at the end)
            self._journal = Journal(self.path, cassette.recorded, replacing=replacing)
            self._tape = Tape(
                cassette,
                self.redactor,
                spool=Spool(self.path.parent),
                on_recorded=self._journal.sync,
            )
        self.cassette = cassette
        if on_virtual_time(self.clock):
            self.clock.__enter__()
        return cassette

    def _close(self) -> None:
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
        if journal is not None:
            journal.stop()
        try:
            if cassette.recorded:
                # "all": re-recorded requests replace their old answers.
                replace = self.match_on if self.record_mode == "all" else None
                merge(self.path, cassette.recorded, replacing=replace)
                self.saved = True
        finally:  # not saved: the parts stay, for the next session to merge
            if journal is not None:
                journal.close(saved=self.saved or not cassette.recorded)
        watcher = current().watcher
        if watcher is not None:
            watcher.left(self)
        tape = self._last_tape
        if tape is not None and tape.keys_in_responses:  # last: all is saved and settled
            _warn_keys_in_responses(self.path, tape.keys_in_responses)

    def after_fork(self) -> None:
        """In a forked child: forget what the parent recorded (the parent saves it) and its
        streams in flight (their threads did not survive the fork)."""
        if self.cassette is not None:
            self.cassette.recorded.clear()
        if self._tape is not None:
            self._tape.forget()

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
        return CassetteSession(
            self.path,
            record_mode=self._requested_mode,
            speed=self._requested_speed,
            match_on=self.match_on,
            allow_playback_repeats=self.allow_playback_repeats,
            redactor=self.redactor,
            clock=self._given_clock,
            faults=self.faults,
            finish_timeout=self.finish_timeout,
            ignore_hosts=self.ignore_hosts,
            ignore_localhost=self.ignore_localhost,
        )

    # -- routing (called by the patched transports) --------------------------------------------

    def ignores(self, url: object) -> bool:
        """Whether a request to `url` goes live, untouched and unrecorded (`ignore_hosts`,
        `ignore_localhost`). `url` is its text, or an object whose `str` is (an httpx URL:
        formatted only when some host is ignored)."""
        if not self._ignored:
            return False
        from replay.network import is_allowed

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
        reason = why_not_recorded(self.record_mode)
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


def _load(path: Path) -> tuple[list[Interaction], bool]:
    """The interactions of the cassette at `path`, and whether its file exists."""
    try:  # (one system call, where asking first whether it exists took two)
        return load_interactions(path), True
    except (FileNotFoundError, NotADirectoryError):
        return [], False


def _recover(path: Path) -> bool:
    """Merge into the cassette at `path` what killed sessions recording into it left beside
    it (`replay._journal`), and say so (a warning); whether anything was left."""
    from replay._child._parts import leftovers, recover

    if not leftovers(path):  # (the usual case: one listing of the directory)
        return False
    said = recover(path, note_busy=False)
    if said is None:
        return False
    import logging

    logging.getLogger("replay").warning("%s", said.removeprefix("replay: "))
    return True


def _warn_keys_in_responses(path: Path, requests: Sequence[str]) -> None:
    import warnings

    from replay.errors import KeyInResponseWarning

    message = KeyInResponseWarning.describe(path, requests)
    warnings.warn(KeyInResponseWarning(message), stacklevel=4)  # (the `with` that ended)


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
) -> CassetteSession:
    """Record to or replay from the cassette at `path` every httpx / httpx2 request made inside.

    Use as `with use_cassette(...) as cassette:`, `async with`, or as a decorator of sync and
    async functions.

    Args:
        path: the cassette file (msgpack).
        record_mode: "none", "once" (default), "new_episodes" or "all" — vcrpy's meanings.
            Under pytest, `--record-mode` overrides it, and the ini file's mode is the
            default.
        speed: replay speed: 1 = as recorded, 10 = ten times faster, "instant" (the
            default; under pytest, `--replay-speed` or the ini file's is the default);
            "virtual": as recorded on virtual time — no waiting, yet `time.monotonic`,
            `perf_counter`, `time` and asyncio's loop time move by the recorded gaps while
            the session is active (see `replay.vtime` for how, and its limits).
        match_on: matcher names or vcrpy-style callables (default: method, scheme, host,
            port, path, query, body).
        allow_playback_repeats: let one recorded interaction answer several requests.
        redact_headers: header names to redact, besides Authorization, api keys and cookies.
        redact_query_parameters: query parameters to redact, besides key, api_key, token…
        before_record: a callable that may rewrite each interaction before it is stored;
            returning None drops it.
        clock: the clock replay waits on (a `VirtualClock` in tests of timing logic).
        faults: `replay.faults` values (or specs such as "cut(after_events=5)") applied to
            every replayed interaction they target, e.g. `[faults.status(429, times=1)]`.
        finish_timeout: how long (seconds, default 5) leaving the session waits for
            recordings still streaming (another thread or task reading them). What ends in
            time is saved whole; the rest is saved as far as it got, its end marked
            `stopped_by="session"`.
        ignore_hosts: hosts whose requests go live, untouched and unrecorded (telemetry, a
            model-cost map, a local database), as vcrpy's `ignore_hosts`.
        ignore_localhost: ignore the loopback hosts too (localhost, 127.0.0.0/8, ::1).

    Raises:
        ConfigurationError: a bad record mode, speed, matcher or fault.
        CassetteFormatError: the cassette file exists but cannot be read.
    """
    plain = not redact_headers and not redact_query_parameters and before_record is None
    redactor = _PLAIN if plain else Redactor(redact_headers, redact_query_parameters, before_record)
    return CassetteSession(
        path,
        record_mode=record_mode,
        speed=speed,
        match_on=match_on,
        allow_playback_repeats=allow_playback_repeats,
        redactor=redactor,
        clock=clock,
        faults=faults,
        finish_timeout=finish_timeout,
        ignore_hosts=ignore_hosts,
        ignore_localhost=ignore_localhost,
    )
