"""A real small language model (SmolLM2-135M, llama.cpp in this process) choosing by scoring.

No figure here is a planning result: these check that scoring with the real model always yields
one of the valid actions, is deterministic, reuses the prompt it already evaluated, and refuses a
prompt its context cannot hold.
"""
import math

import pytest

from brainmem_ros.planning.base import PlannerError, PlanningContext

pytest.importorskip("llama_cpp", reason="make llm installs llama-cpp-python")


@pytest.fixture(scope="module")
def planner():
    from brainmem_ros.planning.llm_local import LocalScoringPlanner

    return LocalScoringPlanner("smollm2-135m", context=1024)


CONTEXT = PlanningContext(
    "Fetch the milk.", "You are in the kitchen. You see a fridge that is closed.",
    ["open fridge", "move north", "look around", "take milk from fridge"],
    [("", "You are in the kitchen.")], "## Relevant memories\n- the milk is in the fridge")


def test_every_valid_action_gets_a_finite_score_and_the_choice_is_one_of_them(planner):
    scores = planner.score(CONTEXT)
    assert set(scores) == set(CONTEXT.valid_actions)
    assert all(math.isfinite(v) and v < 0 for v in scores.values())
    assert planner.decide(CONTEXT) == max(scores, key=scores.get)


def test_the_same_step_scores_the_same_from_its_cached_prompt(planner):
    first = planner.score(CONTEXT)
    again = planner.score(CONTEXT)  # the whole prompt is in the cache now
    assert again == pytest.approx(first, abs=1e-4)


def test_a_prompt_longer_than_the_context_is_refused_with_a_clear_error(planner):
    huge = PlanningContext("t", "word " * 3000, ["look"])
    with pytest.raises(PlannerError, match="does not fit"):
        planner.decide(huge)
    assert planner.decide(CONTEXT) in CONTEXT.valid_actions  # and it still works afterwards
