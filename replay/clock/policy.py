"""Speed policies: how a recorded timeline is played, phase by phase.

A replayed response is a sequence of steps, each at a recorded time since the send: its
headers, each body chunk, its end. A policy maps those times to the times they are played
at, gap by gap (a gap: from one step to the next; the first from the send to the headers):

    ttft=recorded,rest=instant    the time to the first token as recorded, the rest at once
    rest=10x,max_gap=0.05         ten times faster, and no gap longer than 50 ms
    headers=1,first=1,body=20x    per phase: the headers, the first body chunk, the rest
    jitter=0.02,seed=7            up to 20 ms more in each gap, drawn from seed 7

Keys (the same in `use_cassette(speed=...)`, `SpeedPolicy(...)`, the pytest marker and
`--replay-speed`, and `replay run / play / serve --speed`):

- `rest`: the factor of every gap no other key names (1 = as recorded, "10x", "instant");
  a bare factor among the items is `rest` ("10x,max_gap=0.05").
- `headers`, `first`, `body`: the factor of the gap before the headers, of the gaps from
  the headers to the first complete event (`replay.inspect.timing.first_event`; the first
  body chunk when there is none), and of every later gap (the end's too).
- `ttft`: the factor of every gap up to the first token (the chunk that completes the
  stream's first text delta, `replay.inspect.timing.ttft`; the first event when the
  dialect has no text deltas): "recorded" keeps the time to first token exactly. It wins
  over the phase keys, and the gaps it covers are played exactly (no cap, no jitter).
- `max_gap`: no gap (outside `ttft`) is played longer than this many seconds.
- `jitter`: each gap (outside `ttft`) gets a random extra delay of up to this many seconds,
  drawn from `seed` and the interaction's position: the same seed plays the same times.
- `seed`: a whole number (default 0), or "random": one drawn when the policy is read, and
  written in its spec (reports show it, and `seed=N` replays it).

Played times only move forward: the order of the steps is kept. A factor is
"recorded" (1), a positive number, "Nx" or "instant"; seconds are numbers, "50ms" or "0.05s".
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

from replay.clock.frozen import Frozen
from replay.errors import ConfigurationError

__all__ = ["FACTOR_KEYS", "KEYS", "SpeedPolicy", "parse_policy"]

#: The keys whose values are speed factors.
FACTOR_KEYS = ("rest", "headers", "first", "body", "ttft")
#: Every key of a policy, in the order its spec writes them.
KEYS = (*FACTOR_KEYS, "max_gap", "jitter", "seed")

_INSTANT = math.inf
_MIN_FACTOR = 0.001  # replay.clock.MIN_SPEED (not imported: the clock package imports this)
_MAX_SECONDS = 7 * 24 * 3600.0  # replay.model.MAX_SECONDS: a recorded time is at most a week


def _factor(key: str, value: object) -> float | None:
    """A factor from "recorded", "instant", "10x", 10 or None (not given)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "recorded":
            return 1.0
        if text in ("instant", "inf", "max"):
            return _INSTANT
        try:
            number = float(text[:-1] if text.endswith("x") else text)
        except ValueError:
            raise _bad(key, value, "a factor: 'recorded', 1, '10x' or 'instant'") from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        raise _bad(key, value, "a factor: 'recorded', 1, '10x' or 'instant'")
    if not number >= _MIN_FACTOR:  # (NaN too)
        raise _bad(key, value, f"a factor from {_MIN_FACTOR:g} up, or 'instant'")
    return number


def _seconds(key: str, value: object) -> float | None:
    """Seconds from 0.05, "0.05", "0.05s", "50ms" or None (not given)."""
    if value is None:
        return None
    number: float
    if isinstance(value, str):
        text = value.strip().lower()
        scale = 1.0
        if text.endswith("ms"):
            text, scale = text[:-2], 0.001
        elif text.endswith("s"):
            text = text[:-1]
        try:
            number = float(text) * scale
        except ValueError:
            raise _bad(key, value, "seconds, e.g. 0.05 or '50ms'") from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        raise _bad(key, value, "seconds, e.g. 0.05 or '50ms'")
    if not 0 <= number <= _MAX_SECONDS:
        raise _bad(key, value, "seconds from 0 up to a week")
    return number


def _seed(value: object) -> int:
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "random":
            return random.SystemRandom().randrange(1_000_000)
        if text.isdigit():
            return int(text)
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise _bad("seed", value, "a whole number >= 0, or 'random'")


def _bad(key: str, value: object, wanted: str) -> ConfigurationError:
    return ConfigurationError(f"speed policy {key}={value!r}: not {wanted}")


def _text(factor: float) -> str:
    return "instant" if math.isinf(factor) else f"{factor:g}x"


class SpeedPolicy(Frozen):
    """How the gaps of a recorded stream are played (see the module's docstring for the keys).

    Factors are "recorded" (1), a positive number, "10x" or "instant"; seconds are numbers
    (or "50ms"); `seed` a whole number or "random". `str(policy)` is its spec, which
    `parse_policy` reads back.

    Raises:
        ConfigurationError: a value out of range, in one line.
    """

    __slots__ = KEYS
    FIELDS = KEYS

    rest: float
    headers: float | None
    first: float | None
    body: float | None
    ttft: float | None
    max_gap: float | None
    jitter: float | None
    seed: int

    def __init__(
        self,
        rest: object = 1.0,
        *,
        headers: object = None,
        first: object = None,
        body: object = None,
        ttft: object = None,
        max_gap: object = None,
        jitter: object = None,
        seed: object = 0,
    ) -> None:
        factors = {"headers": headers, "first": first, "body": body, "ttft": ttft}
        object.__setattr__(self, "rest", _factor("rest", rest))
        for key, value in factors.items():
            object.__setattr__(self, key, _factor(key, value))
        object.__setattr__(self, "max_gap", _seconds("max_gap", max_gap))
        object.__setattr__(self, "jitter", _seconds("jitter", jitter))
        object.__setattr__(self, "seed", _seed(seed))

    @property
    def factor(self) -> float | None:
        """The one factor of a policy that is only a factor (every gap the same); else None."""
        named = (self.headers, self.first, self.body, self.ttft, self.max_gap, self.jitter)
        return self.rest if all(value is None for value in named) else None

    @property
    def needs_ttft(self) -> bool:
        """Whether `timeline` needs the stream's time to first token."""
        return self.ttft is not None

    @property
    def needs_first_event(self) -> bool:
        """Whether `timeline` needs the time of the stream's first complete event."""
        return self.first is not None

    def __str__(self) -> str:
        items = []
        for key in ("ttft", "headers", "first", "body"):
            value = getattr(self, key)
            if value is not None:
                items.append(f"{key}={'recorded' if value == 1.0 else _text(value)}")
        if self.rest != 1.0 or self.factor is not None:
            items.append(f"rest={_text(self.rest)}")
        for key in ("max_gap", "jitter"):
            value = getattr(self, key)
            if value is not None:
                items.append(f"{key}={value:g}")
        if self.jitter is not None:
            items.append(f"seed={self.seed}")
        return ",".join(items)

    def timeline(
        self,
        times: Sequence[float],
        *,
        ttft: float | None = None,
        first_event: float | None = None,
        salt: int = 0,
    ) -> list[float]:
        """The played times of steps recorded at `times` (seconds since the send, in order:
        the headers, each chunk, the end), given the recorded times of the first token
        `ttft` and of the first complete event `first_event` (None: unknown, the first
        chunk's) and `salt` (the interaction's position: what the jitter draws from, with
        the seed)."""
        if len(times) > 1:
            ttft = times[1] if ttft is None else ttft
            first_event = times[1] if first_event is None else first_event
        rng = random.Random(f"{self.seed}/{salt}") if self.jitter else None
        played: list[float] = []
        now = before = 0.0
        for step, at in enumerate(times):
            gap = max(0.0, at - before)
            before = max(before, at)
            if self.ttft is not None and ttft is not None and at <= ttft:
                now += gap / self.ttft
                played.append(now)
                continue
            gap /= self._phase(step, at <= (first_event or 0.0))
            if rng is not None and self.jitter is not None:
                gap += rng.uniform(0.0, self.jitter)
            if self.max_gap is not None:
                gap = min(gap, self.max_gap)
            now += gap
            played.append(now)
        return played

    def _phase(self, step: int, first: bool) -> float:
        """The factor of the gap before step `step` (0: the headers), `first` when it comes
        no later than the first complete event."""
        named = self.headers if step == 0 else self.first if first else self.body
        return self.rest if named is None else named


def parse_policy(spec: str | Mapping[str, object]) -> SpeedPolicy:
    """The policy of a spec such as "ttft=recorded,rest=instant" or "10x,max_gap=0.05" (a bare
    factor is `rest`), or of a mapping of the same keys.

    Raises:
        ConfigurationError: an unknown key, a key given twice, or a bad value: one line.
    """
    if isinstance(spec, Mapping):
        items = dict(spec)
    else:
        items = {}
        for item in spec.split(","):
            key, equals, value = item.partition("=")
            key = key.strip().lower().replace("-", "_")
            if not equals:
                key, value = "rest", item
            if not key or key in items:
                raise ConfigurationError(
                    f"speed policy {spec!r}: write key=value items, each key once, e.g. "
                    "'ttft=recorded,rest=instant'"
                )
            items[key] = value.strip()
    unknown = sorted(set(items) - set(KEYS))
    if unknown:
        raise ConfigurationError(
            f"speed policy: unknown key {unknown[0]!r}: use {', '.join(KEYS)} "
            "(e.g. 'ttft=recorded,rest=instant')"
        )
    rest = items.pop("rest", 1.0)
    return SpeedPolicy(rest, **items)
