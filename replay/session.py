"""`use_cassette`: the record-mode policy and the life of a cassette around a block of code.

On enter: load the cassette (if its file exists), decide what may be replayed and what may
be recorded, and route every httpx / httpx2 transport through this session. Each request is
then replayed, recorded, or refused with `CassetteMismatchError`. On exit: restore the
transports, and if anything was recorded, save under an inter-process lock, merging with
what other processes saved meanwhile.

Record modes (vcrpy's):
    none          replay only; an unmatched request raises before any connection is attempted.
    once          record if the cassette file does not exist yet, else replay only.
    new_episodes  replay what matches, record the rest.
    all           record everything, replay nothing; re-recorded requests replace old ones.

Faults (`faults=[...]`, see `replay.faults`) apply to what is replayed, with attempts
counted per interaction afresh at each enter. `speed="virtual"` replays as recorded on
virtual time (see `replay.vtime`): the session patches the `time` clocks while it is active.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar, cast

from replay import patch
from replay.cassette import Cassette
from replay.clock import Clock, MonotonicClock, Schedule, SpeedLike, parse_speed
from replay.errors import CassetteMismatchError, ConfigurationError
from replay.faults import Fault, FaultLike, Injector, Outcome, coerce
from replay.matching import DEFAULT_MATCH_ON, MatchIndex, MatchOn
from replay.model import Interaction, Request, Response
from replay.playback import mismatch_error, play_async, play_sync, played_for
from replay.record import Recording, record_async, record_sync
from replay.redact import Redactor
from replay.store import file_lock, load_interactions, save_interactions
from replay.vtime import RealClock, VirtualTime

__all__ = [
    "RECORD_MODES",
    "VIRTUAL",
    "CassetteSession",
    "RecordMode",
    "forced_record_mode",
    "use_cassette",
]

#: The speed that replays as recorded on virtual time.
VIRTUAL = "virtual"

RecordMode = Literal["none", "once", "new_episodes", "all"]
RECORD_MODES: tuple[str, ...] = ("none", "once", "new_episodes", "all")

F = TypeVar("F", bound=Callable[..., Any])

# A record mode imposed on every session of the process (pytest's --record-mode), so that
# `--record-mode=none` holds for the decorator form and direct library calls too.
_forced_mode: list[str] = []


@contextlib.contextmanager
def forced_record_mode(record_mode: str) -> Iterator[None]:
    """Within the block, every cassette session uses `record_mode`, whatever it was given.

    Raises:
        ConfigurationError: an unknown record mode.
    """
    if record_mode not in RECORD_MODES:
        raise ConfigurationError(
            f"unknown record mode {record_mode!r}: use one of {', '.join(RECORD_MODES)}"
        )
    _forced_mode.append(record_mode)
    try:
        yield
    finally:
        _forced_mode.pop()


_WHY_NOT_RECORDED = {
    "none": "Record mode 'none' only replays: it never records.",
    "once": "Record mode 'once' only replays, because the cassette file already existed.",
}


class CassetteSession:
    """A cassette in use: a context manager (sync and async) and a function decorator.

    Made by `use_cassette`; see there for the arguments.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        record_mode: RecordMode | str = "once",
        speed: SpeedLike = "instant",
        match_on: MatchOn = DEFAULT_MATCH_ON,
        allow_playback_repeats: bool = False,
        redactor: Redactor | None = None,
        clock: Clock | None = None,
        faults: Iterable[FaultLike] = (),
    ) -> None:
        if record_mode not in RECORD_MODES:
            raise ConfigurationError(
                f"unknown record mode {record_mode!r}: use one of {', '.join(RECORD_MODES)}"
            )
        MatchIndex([], match_on=match_on)  # validates matcher names now, not at first request
        self.path = Path(path)
        self._requested_mode = record_mode
        #: The record mode in force: the one asked for, unless `forced_record_mode` says else.
        self.record_mode = record_mode
        #: True when replay runs on virtual time (speed "virtual").
        self.virtual_time = isinstance(speed, str) and speed.strip().lower() == VIRTUAL
        if self.virtual_time and clock is not None:
            raise ConfigurationError("speed 'virtual' brings its own clock: do not pass clock=")
        self.speed = 1.0 if self.virtual_time else parse_speed(speed)
        self.match_on = tuple(match_on)
        self.allow_playback_repeats = allow_playback_repeats
        self.redactor = redactor or Redactor()
        self.clock: Clock = VirtualTime() if self.virtual_time else (clock or MonotonicClock())
        # What recordings stamp chunks with: real time, even in a virtual-time session.
        self._record_clock: Clock | None = RealClock() if self.virtual_time else None
        #: The faults applied to what this session replays (the pytest plugin reports them).
        self.faults: tuple[Fault, ...] = coerce(faults)
        #: The faults with the attempts each interaction had in the current (or last) use.
        self.injector = Injector(self.faults)
        self._answered: set[int] = set()  # interactions a status fault answered
        self.cassette: Cassette | None = None
        self._may_replay = False
        self._may_record = False
        self._loaded = 0
        self._lock = threading.Lock()
        self._pending: set[Recording] = set()
        #: Whether the last exit wrote the cassette file.
        self.saved = False
        #: The mismatches raised in the current (or last) use, even if the client swallowed
        #: them (an SDK may wrap or retry): the pytest plugin reports them on failure.
        self.mismatches: list[CassetteMismatchError] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> Cassette:
        if self.cassette is not None:
            raise ConfigurationError(f"cassette {str(self.path)!r} is already in use")
        self.saved = False
        self.mismatches = []
        self.injector = Injector(self.faults)
        self._answered = set()
        existed = self.path.exists()
        interactions = load_interactions(self.path) if existed else []
        self._loaded = len(interactions)
        self.record_mode = _forced_mode[-1] if _forced_mode else self._requested_mode
        mode = self.record_mode
        self._may_replay = mode in ("none", "new_episodes") or (mode == "once" and existed)
        self._may_record = mode in ("new_episodes", "all") or (mode == "once" and not existed)
        self.cassette = Cassette(
            interactions,
            path=self.path,
            match_on=self.match_on,
            allow_playback_repeats=self.allow_playback_repeats,
        )
        if isinstance(self.clock, VirtualTime):
            self.clock.__enter__()
        patch.install(self)
        return self.cassette

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        patch.uninstall(self)
        if isinstance(self.clock, VirtualTime):
            self.clock.__exit__(None, None, None)
        try:
            for recording in list(self._pending):
                # A request that never got its headers (connection refused, or still waiting
                # in another thread) has nothing to record; a body still streaming ends here.
                if recording.status:
                    recording.finish(truncated=True)
                else:
                    self._pending.discard(recording)
        finally:
            cassette, self.cassette = self.cassette, None
        assert cassette is not None
        for index in self._answered:  # asked for, answered by a fault: not stale
            cassette.play_counts[index] = max(1, cassette.play_counts[index])
        if cassette.recorded:
            self._save(cassette)
            self.saved = True

    async def __aenter__(self) -> Cassette:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, traceback)

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
            speed=VIRTUAL if self.virtual_time else self.speed,
            match_on=self.match_on,
            allow_playback_repeats=self.allow_playback_repeats,
            redactor=self.redactor,
            clock=None if self.virtual_time else self.clock,
            faults=self.faults,
        )

    def _save(self, cassette: Cassette) -> None:
        recorded = list(cassette.recorded)
        with file_lock(self.path):
            # Re-read: another process (an xdist worker) may have saved since we loaded.
            base = load_interactions(self.path) if self.path.exists() else []
            if self.record_mode == "all":  # re-recorded requests replace their old answers
                index = MatchIndex([], match_on=self.match_on)
                fresh = {index.key(interaction.request) for interaction in recorded}
                base = [i for i in base if index.key(i.request) not in fresh]
            save_interactions(self.path, [*base, *recorded])

    # -- routing (called by the patched transports) --------------------------------------------

    def _lookup(self, request: Any) -> Response | Outcome | None:
        """What replays `request` (with faults: this attempt's outcome), None to record it;
        or raise a mismatch."""
        if not self._may_replay:  # record mode "all", or "once" without a file
            return None
        cassette = self.cassette
        assert cassette is not None
        wanted = self.redactor.request(Request.from_httpx(request))
        with self._lock:
            # Only what was loaded replays: what this session records is not played back to it.
            index = cassette.find(wanted, among_first=self._loaded)
        if index is not None:
            return self._played(cassette, index, wanted)
        if not self._may_record:
            reason = _WHY_NOT_RECORDED.get(self.record_mode, "")
            error = mismatch_error(cassette, wanted, self.record_mode, reason)
            self.mismatches.append(error)
            raise error
        return None

    def _played(self, cassette: Cassette, index: int, wanted: Request) -> Response | Outcome:
        played = played_for(cassette, index, wanted, self.injector, self._lock)
        if isinstance(played, Outcome) and played.answered_by is not None:
            self._answered.add(index)  # asked for and answered: counts as played at exit
        return played

    def _sink(self, interaction: Interaction) -> None:
        cleaned = self.redactor.interaction(interaction)
        if cleaned is None:  # the before_record hook dropped it
            return
        with self._lock:
            if self.cassette is not None:
                self.cassette.append(cleaned)

    def handle(self, request: Any, send: patch.Send) -> Any:
        """Replay, record or refuse a sync request (see the record modes)."""
        schedule = Schedule.starting_now(self.speed, self.clock)
        request.read()
        played = self._lookup(request)
        if played is not None:
            return play_sync(request, played, schedule, self.clock)
        return record_sync(
            request, send, self._sink, clock=self._record_clock, pending=self._pending
        )

    async def ahandle(self, request: Any, send: patch.AsyncSend) -> Any:
        """Replay, record or refuse an async request (see the record modes)."""
        schedule = Schedule.starting_now(self.speed, self.clock)
        await request.aread()
        played = self._lookup(request)
        if played is not None:
            return await play_async(request, played, schedule, self.clock)
        return await record_async(
            request, send, self._sink, clock=self._record_clock, pending=self._pending
        )


def use_cassette(
    path: str | Path,
    *,
    record_mode: RecordMode | str = "once",
    speed: SpeedLike = "instant",
    match_on: Sequence[str | Callable[[Any, Any], Any]] = DEFAULT_MATCH_ON,
    allow_playback_repeats: bool = False,
    redact_headers: Sequence[str] = (),
    redact_query_parameters: Sequence[str] = (),
    before_record: Callable[[Interaction], Interaction | None] | None = None,
    clock: Clock | None = None,
    faults: Iterable[FaultLike] = (),
) -> CassetteSession:
    """Record to or replay from the cassette at `path` every httpx / httpx2 request made inside.

    Use as `with use_cassette(...) as cassette:`, `async with`, or as a decorator of sync and
    async functions.

    Args:
        path: the cassette file (msgpack).
        record_mode: "none", "once" (default), "new_episodes" or "all" — vcrpy's meanings.
        speed: replay speed: 1 = as recorded, 10 = ten times faster, "instant" (default);
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

    Raises:
        ConfigurationError: a bad record mode, speed, matcher or fault.
        CassetteFormatError: the cassette file exists but cannot be read.
    """
    return CassetteSession(
        path,
        record_mode=record_mode,
        speed=speed,
        match_on=match_on,
        allow_playback_repeats=allow_playback_repeats,
        redactor=Redactor(redact_headers, redact_query_parameters, before_record),
        clock=clock,
        faults=faults,
    )
