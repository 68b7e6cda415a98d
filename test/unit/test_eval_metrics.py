"""The evaluation's figures, checked on hand-built episodes.

The evaluation's figures, checked on hand-built episodes (their definitions, not their values).
"""
import pytest

from brainmem_ros.evaluation.episode import EpisodeRecord
from brainmem_ros.evaluation.metrics import (interruption_recovery_rate, repeat_failure_rate,
                                             success_rate, summarise)
from brainmem_ros.evaluation.runner import parse_seeds, table


def ep(seed=0, attempt=0, success=False, failure="", steps=10, interrupted=False, retrieve_ms=()):
    return EpisodeRecord("kitchen", "brainmem", seed, attempt, "task", success,
                         bool(failure), failure, steps, interrupted, interrupted and success,
                         list(retrieve_ms), [])


def test_success_rate_counts_every_attempt():
    assert success_rate(
        [ep(success=True),
         ep(attempt=1),
         ep(seed=1, success=True),
         ep(seed=1, attempt=1)]) == 0.5
    assert success_rate([]) == 0.0


def test_recovery_is_measured_on_interrupted_episodes_only():
    episodes = [
        ep(interrupted=True, success=True),
        ep(seed=1, interrupted=True, failure="timer_ignored"),
        ep(seed=2, success=False),
        ep(seed=3, success=True)
    ]
    assert interruption_recovery_rate(episodes) == 0.5
    assert interruption_recovery_rate([ep(success=True)]) is None


def test_repeat_failure_needs_the_same_cause_at_a_later_attempt_of_the_same_seed():
    episodes = [
        ep(0, 0, failure="short_circuit"),
        ep(0, 1, failure="short_circuit"),
        ep(0, 2, success=True),
        ep(1, 0, failure="layering"),
        ep(1, 1, failure="timer_ignored"),
        ep(1, 2, failure="layering"),
        ep(2, 0, failure="layering"),
        ep(2, 1),
        ep(2, 2, success=True)
    ]
    # later attempts: 6; repeats: seed 0 attempt 1, seed 1 attempt 2 (layering met at attempt 0)
    assert repeat_failure_rate(episodes) == pytest.approx(2 / 6)
    # a failure another seed met does not count, nor does running out of steps
    assert repeat_failure_rate(
        [ep(0, 0, failure="layering"),
         ep(1, 0), ep(1, 1, failure="layering")]) == 0.0
    assert repeat_failure_rate([ep(0, 0, failure="x")]) is None


def test_summary_and_table():
    s = summarise([ep(success=True, steps=20, retrieve_ms=[1.0, 3.0, 5.0]), ep(seed=1, steps=40)])
    assert s["episodes"] == 2 and s["success_rate"] == 0.5 and s["mean_steps"] == 30
    assert s["retrieve_p50_ms"] == 3.0 and s["repeat_failure_rate"] is None
    text = table({"conditions": {"brainmem": s}})
    assert "brainmem" in text and "50%" in text and "3.0 ms" in text


@pytest.mark.parametrize("text, seeds", [("0-3", [0, 1, 2, 3]), ("1,4,7", [1, 4, 7]),
                                         ("0-1,9", [0, 1, 9])])
def test_seed_ranges(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a-b", "-3", "3-x"])
def test_bad_seed_ranges(text):
    with pytest.raises(ValueError):
        parse_seeds(text)


def test_the_fleet_repeat_rate_counts_a_robots_failure_another_robot_had_already_met():
    from brainmem_ros.evaluation.fleet import fleet_repeat_failure_rate

    def turn(seed, robot, failure=""):
        return EpisodeRecord("kitchen", "fleet", seed, robot, "t", not failure, bool(failure),
                             failure, 5, False, False)

    episodes = [
        turn(0, 0, "hazard:stove"), turn(0, 1, "hazard:stove"), turn(0, 2),  # 1 of 2 repeats
        turn(1, 0), turn(1, 1, "hazard:sink"),  # nobody had failed on seed 1 before: not counted
        turn(2, 0, "hazard:oven"), turn(2, 1, "hazard:knife"),  # a new failure is no repeat
    ]
    assert fleet_repeat_failure_rate(episodes) == 1 / 3
    assert fleet_repeat_failure_rate([turn(0, 0)]) is None
