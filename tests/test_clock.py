"""Speed parsing, the replay schedule and the clocks (replay.clock)."""

from __future__ import annotations

import math
import pickle
from fractions import Fraction

import anyio
import pytest

from replay import ConfigurationError, ReplayError
from replay.clock import INSTANT, MonotonicClock, Schedule, VirtualClock, format_speed, parse_speed

# -- parse_speed ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(1, 1.0, id="int-1"),
        pytest.param(10, 10.0, id="int-10"),
        pytest.param(0.5, 0.5, id="float-half"),
        pytest.param("10x", 10.0, id="str-10x"),
        pytest.param("0.5x", 0.5, id="str-0.5x"),
        pytest.param(" 2X ", 2.0, id="str-padded-upper-X"),
        pytest.param("3", 3.0, id="str-bare-number"),
        pytest.param("instant", INSTANT, id="str-instant"),
        pytest.param("INSTANT", INSTANT, id="str-instant-upper"),
        pytest.param(math.inf, INSTANT, id="math-inf"),
        pytest.param(Fraction(3, 2), 1.5, id="fraction"),
        pytest.param(10**400, INSTANT, id="int-beyond-float"),
    ],
)
def test_parse_speed_accepts(value: object, expected: float) -> None:
    assert parse_speed(value) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(0, "positive", id="zero"),
        pytest.param(-1, "positive", id="negative"),
        pytest.param("-2x", "positive", id="negative-str"),
        pytest.param("0x", "positive", id="zero-str"),
        pytest.param(math.nan, "positive", id="nan"),
        pytest.param("nan", "positive", id="nan-str"),
        pytest.param("fast", "not a number", id="word"),
        pytest.param("", "not a number", id="empty"),
        pytest.param("x", "not a number", id="bare-x"),
        pytest.param(True, "number or 'instant'", id="bool"),
        pytest.param(None, "number or 'instant'", id="none"),
        pytest.param([1], "number or 'instant'", id="list"),
    ],
)
def test_parse_speed_rejects_with_readable_message(value: object, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_speed(value)  # type: ignore[arg-type]
    text = str(caught.value)
    assert message in text
    assert repr(value) in text  # names what was given
    assert "speed" in text


def test_configuration_error_is_a_replay_error_and_a_value_error() -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_speed("fast")
    assert isinstance(caught.value, ReplayError)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("speed", "text"),
    [
        pytest.param(1.0, "1x", id="1x"),
        pytest.param(10.0, "10x", id="10x"),
        pytest.param(0.5, "0.5x", id="0.5x"),
        pytest.param(INSTANT, "instant", id="instant"),
    ],
)
def test_format_speed_is_the_inverse_of_parse_speed(speed: float, text: str) -> None:
    assert format_speed(speed) == text
    assert parse_speed(text) == speed


# -- Schedule -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "speed", "at", "deadline"),
    [
        pytest.param(0.0, 1.0, 0.0, 0.0, id="at-0-is-start"),
        pytest.param(100.0, 1.0, 0.25, 100.25, id="1x"),
        pytest.param(100.0, 10.0, 0.5, 100.05, id="10x"),
        pytest.param(100.0, 0.5, 0.5, 101.0, id="half-speed"),
        pytest.param(5.0, 2.0, 3.0, 6.5, id="2x"),
    ],
)
def test_schedule_deadline_is_start_plus_at_over_speed(
    start: float, speed: float, at: float, deadline: float
) -> None:
    assert Schedule(start=start, speed=speed).deadline(at) == pytest.approx(deadline, abs=1e-12)


@pytest.mark.parametrize(
    ("now", "delay"),
    [
        pytest.param(10.0, 0.5, id="at-start"),
        pytest.param(10.2, 0.3, id="part-way"),
        pytest.param(10.5, 0.0, id="on-time"),
        pytest.param(11.0, 0.0, id="late-never-negative"),
    ],
)
def test_schedule_delay_is_the_time_left_to_the_deadline(now: float, delay: float) -> None:
    schedule = Schedule(start=10.0, speed=2.0)
    assert schedule.delay(1.0, now) == pytest.approx(delay, abs=1e-12)


def test_schedule_delay_depends_on_the_deadline_not_on_past_lateness() -> None:
    schedule = Schedule(start=0.0, speed=1.0)
    # Woken 30 ms late for the chunk at 1.0 s, the wait for 2.0 s is still 1.0 - 0.03 s.
    assert schedule.delay(2.0, 1.03) == pytest.approx(0.97, abs=1e-12)


@pytest.mark.parametrize("speed", [0.0, -1.0, math.nan], ids=["zero", "negative", "nan"])
def test_schedule_rejects_a_non_positive_speed(speed: float) -> None:
    with pytest.raises(ValueError, match="speed"):
        Schedule(start=0.0, speed=speed)


def test_a_schedule_is_an_immutable_value() -> None:
    schedule = Schedule(start=1.0, speed=2.0)
    assert schedule == Schedule(1.0, 2.0)
    assert hash(schedule) == hash(Schedule(1.0, 2.0))
    assert schedule != Schedule(1.0, 3.0)
    assert repr(schedule) == "Schedule(start=1.0, speed=2.0, policy=None)"
    assert pickle.loads(pickle.dumps(schedule)) == schedule
    with pytest.raises(AttributeError):
        schedule.speed = 3.0


# -- clocks ---------------------------------------------------------------------------------------


def test_virtual_clock_starts_at_zero_and_stands_still() -> None:
    clock = VirtualClock()
    assert clock.now() == 0.0
    assert clock.now() == 0.0
    assert clock.sleeps == []


def test_virtual_clock_sleep_advances_time_at_once_and_logs_it() -> None:
    clock = VirtualClock(time=5.0)
    clock.sleep(0.25)
    clock.sleep(0.0)
    clock.sleep(1.5)
    assert clock.now() == pytest.approx(6.75)
    assert clock.sleeps == [0.25, 0.0, 1.5]


def test_virtual_clock_rejects_a_negative_sleep() -> None:
    clock = VirtualClock()
    with pytest.raises(ValueError, match="negative"):
        clock.sleep(-0.1)
    assert clock.now() == 0.0


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_virtual_clock_asleep_advances_time_and_yields_to_the_loop(backend: str) -> None:
    clock = VirtualClock()
    order: list[str] = []

    async def sleeper() -> None:
        await clock.asleep(2.0)
        order.append(f"slept at {clock.now():g}")

    async def other() -> None:
        order.append("other ran")

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(sleeper)
            group.start_soon(other)

    anyio.run(main, backend=backend)
    assert clock.sleeps == [2.0]
    assert sorted(order) == ["other ran", "slept at 2"]


def test_monotonic_clock_never_goes_back() -> None:
    clock = MonotonicClock()
    readings = [clock.now() for _ in range(1000)]
    assert readings == sorted(readings)


def test_monotonic_clock_sleep_waits_at_least_as_asked() -> None:
    clock = MonotonicClock()
    before = clock.now()
    clock.sleep(0.01)
    assert clock.now() - before >= 0.009  # 1 ms of slack for the clock's resolution


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_monotonic_clock_asleep_waits_at_least_as_asked(backend: str) -> None:
    clock = MonotonicClock()

    async def main() -> float:
        before = clock.now()
        await clock.asleep(0.01)
        return clock.now() - before

    assert anyio.run(main, backend=backend) >= 0.009  # event loops may wake a hair early
