"""`SessionOptions`: what a cassette session was asked for, as one frozen value.

`use_cassette` keeps its keyword arguments (the public spelling); they become one of these,
checked and normalised once, and a session (and each fresh session a decorated function
runs in) holds it as it is. What a session derives from it for one use (the record mode a
test run imposes, the speed's clocks) lives on the session, not here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import attrs

from replay.clock import Clock, SpeedLike, seconds
from replay.engine.conversation import ALLOWED_LEFTOVERS
from replay.engine.modes import RecordMode
from replay.engine.modes import check as check_mode
from replay.errors import ConfigurationError
from replay.matching import DEFAULT_MATCH_ON, Matcher, MatchIndex, MatchOn
from replay.model import Interaction
from replay.redact.redactor import Redactor
from replay.session.args import faults_of, host_names_of, session_speed

if TYPE_CHECKING:
    from replay.faults import Fault, FaultLike

__all__ = ["DEFAULT_FINISH_TIMEOUT", "SessionOptions", "redactor_for"]

#: Seconds a session's exit waits, by default, for recordings still streaming.
DEFAULT_FINISH_TIMEOUT = 5.0

#: The redactor of every session that adds nothing to the defaults: what it remembers serves all.
_PLAIN = Redactor()


def redactor_for(
    headers: Sequence[str],
    query_parameters: Sequence[str],
    before_record: Callable[[Interaction], Interaction | None] | None,
) -> Redactor:
    """The redactor of `use_cassette`'s redaction arguments (the shared plain one for none)."""
    if not headers and not query_parameters and before_record is None:
        return _PLAIN
    return Redactor(headers, query_parameters, before_record)


def _record_mode(value: RecordMode | str | None) -> RecordMode | str | None:
    return value if value is None else check_mode(value)


def _speed(value: SpeedLike | None) -> SpeedLike | None:
    """`value` as given, once it is known to be a speed (None: the run's default)."""
    if value is not None:
        session_speed(value)
    return value


def _match_on(value: MatchOn) -> tuple[Matcher, ...]:
    if value != DEFAULT_MATCH_ON:  # (the default is known good)
        MatchIndex([], match_on=value)  # validates matchers now, not at first request
    return tuple(value)


def _finish_timeout(value: object) -> float:
    return seconds(value, "finish_timeout")


def _allowed(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise ConfigurationError(f"websocket_allow must be strings, not {value!r}")
    return ALLOWED_LEFTOVERS | frozenset(value)


def _faults(value: Iterable[FaultLike]) -> tuple[Fault, ...]:
    return faults_of(value)


@attrs.frozen(kw_only=True)
class SessionOptions:
    """The options of a cassette session, checked: `use_cassette`'s arguments, with the
    redaction ones made into `redactor`. Each is documented here, once.

    Raises:
        ConfigurationError: a bad record mode, speed, matcher, fault or finish timeout (the
            session checks the clock against the speed: it makes the speed's clocks).
    """

    #: "none", "once" (default), "new_episodes" or "all": vcrpy's meanings. Under pytest,
    #: `--record-mode` overrides it, and the ini file's mode is the default.
    record_mode: RecordMode | str | None = attrs.field(default=None, converter=_record_mode)
    #: Matcher names or vcrpy-style callables (default: method, scheme, host, port, path,
    #: query, body).
    match_on: tuple[Matcher, ...] = attrs.field(default=DEFAULT_MATCH_ON, converter=_match_on)
    #: Replay speed: 1 = as recorded, 10 = ten times faster, "instant" (the default; under
    #: pytest, `--replay-speed` or the ini file's is the default); "virtual": as recorded on
    #: virtual time — no waiting, yet `time.monotonic`, `perf_counter`, `time` and asyncio's
    #: loop time move by the recorded gaps while the session is active (see `replay.clock.vtime`
    #: for how, and its limits); or a speed policy: "ttft=recorded,rest=instant", a mapping of
    #: its keys, a `SpeedPolicy` (`replay.clock.policy`), "virtual,..." for one on virtual time.
    speed: SpeedLike | None = attrs.field(default=None, converter=_speed)
    #: The clock replay waits on (a `VirtualClock` in tests of timing logic).
    clock: Clock | None = None
    #: Let one recorded interaction answer several requests.
    allow_playback_repeats: bool = False
    #: What redacts each recording before it is stored, and each request before matching
    #: (`use_cassette` makes it of `redact_headers`, `redact_query_parameters`, `before_record`).
    redactor: Redactor = _PLAIN
    #: `replay.faults` values (or specs such as "cut(after_events=5)") applied to every
    #: replayed interaction they target, e.g. `[faults.status(429, times=1)]`.
    faults: tuple[Fault, ...] = attrs.field(default=(), converter=_faults)
    #: How long (seconds, default 5) leaving the session waits for recordings still
    #: streaming (another thread or task reading them). What ends in time is saved whole;
    #: the rest is saved as far as it got, its end marked `stopped_by="session"`.
    finish_timeout: float = attrs.field(default=DEFAULT_FINISH_TIMEOUT, converter=_finish_timeout)
    #: Hosts whose requests go live, untouched and unrecorded (telemetry, a model-cost map,
    #: a local database), as vcrpy's `ignore_hosts`.
    ignore_hosts: frozenset[str] = attrs.field(default=frozenset(), converter=host_names_of)
    #: Ignore the loopback hosts too (localhost, 127.0.0.0/8, ::1).
    ignore_localhost: bool = attrs.field(default=False, converter=bool)
    #: What a replayed WebSocket conversation may leave unconsumed unreported, besides pings,
    #: pongs and closes (always allowed): frame kinds or JSON event types ("rate_limits.updated").
    websocket_allow: frozenset[str] = attrs.field(default=ALLOWED_LEFTOVERS, converter=_allowed)
