"""The scripted planner: general, stateless, the same on both environments.

The scripted planner: what it reads from text, that it keeps nothing between steps, and that it
works unchanged on both environments without reading either's internals.
"""
import ast
import shutil
from pathlib import Path

import pytest

from brainmem_ros.kitchen import KitchenWorld
from brainmem_ros.kitchen.base import EnvState
from brainmem_ros.planning.base import PlanningContext, detect_interruption, detect_resolution
from brainmem_ros.planning.reading import Event, memory_events, read_belief
from brainmem_ros.planning.scripted import ScriptedPlanner

RECIPE = (
    "Recipe card.\n\nIngredients:\n  bread\n  cheese\n  tomato\n\nDirections:\n  slice bread\n"
    "  put tomato on bread\n  put cheese on bread\n  serve sandwich on dining table")
ROOM = (
    "You are in the kitchen. You see a fridge that contains some cheese, a counter that has a "
    "bread and a knife "
    "on it, a cupboard that is closed, and a recipe card pinned to the wall. To the North you see "
    "the hallway. "
    "To the West you see the dining room.")


def test_reads_plan_rooms_places_and_hand():
    b = read_belief("Make a sandwich.", [
        Event(ROOM),
        Event(RECIPE, action="read recipe card"),
        Event("You take the bread from the counter.", action="take bread")
    ], wanted=["knife"])
    assert b.plan[0] == "slice bread" and b.ingredients == ["bread", "cheese", "tomato"]
    assert b.room == "kitchen" and b.exits["kitchen"] == {"north": "hallway", "west": "dining room"}
    assert b.where["cheese"] == ("kitchen", "fridge") and b.where["knife"] == ("kitchen", "counter")
    assert "bread" in b.held and "bread" not in b.where
    assert b.closed["kitchen"] == {"cupboard"} and b.read_room == "kitchen"


def test_a_room_seen_again_without_the_thing_forgets_where_it_was():
    gone = ROOM.replace("a counter that has a bread and a knife on it",
                        "a counter that has nothing on it")
    b = read_belief("t", [Event(RECIPE), Event(ROOM), Event(gone)], wanted=["knife"])
    assert "bread" not in b.where and "knife" not in b.where and b.where["cheese"] == ("kitchen",
                                                                                       "fridge")


@pytest.mark.parametrize("failure, expected_first", [
    ("put tomato on bread failed: You put the tomato on the bread before the cheese. It falls "
     "apart!", "put cheese on bread"),
    ("Warning: last attempt at 'make a sandwich' failed (last failed step: put tomato on bread: "
     "You put the tomato "
     "on the bread before the cheese. The sandwich falls apart!)", "put cheese on bread"),
])
def test_a_remembered_failure_reorders_the_plan(failure, expected_first):
    event = Event(failure, warning=True, failed=True) if failure.startswith("Warning") else \
        Event(failure.split(" failed: ")[1], action="put tomato on bread", failed=True)
    if event.warning:
        event.text = failure[len("Warning: "):]
    b = read_belief("t", [Event(RECIPE), event])
    assert b.plan.index(expected_first) < b.plan.index("put tomato on bread")


def test_switched_on_failure_puts_the_step_before_switching_on():
    recipe = ("Ingredients:\n  water jug\n\nDirections:\n  switch on coffee machine\n"
              "  fill coffee machine with water\n  brew coffee")
    b = read_belief("t", [
        Event(recipe),
        Event(
            "You fill the coffee machine with water while it is switched on. It "
            "short-circuits!", action="fill coffee machine with water", failed=True)
    ])
    assert b.plan == ["fill coffee machine with water", "switch on coffee machine", "brew coffee"]


def test_memory_prompt_is_read_oldest_first_and_recalled_alarms_are_history():
    prompt = (
        "## Relevant memories\n- Warning: open oven failed: it is locked.\n"
        "- just now: You take the cheese from the fridge (success)\n"
        "- just now: You open the fridge. The fridge contains some cheese.\nA timer rings in the "
        "hallway! "
        "Switch off the timer, then carry on (success)\n"
        "## Current task and state\nGoal: make a sandwich. Done: 1. slice bread 2. put cheese on "
        "bread. "
        "Holding: knife, bread.\n## Plan the next action, using both the memories above and the "
        "current observation.")
    events = memory_events(prompt)
    texts = [e.text for e in events]
    assert texts.index(
        "You open the fridge. The fridge contains some cheese.\nA timer rings in the hallway! "
        "Switch off "
        "the timer, then carry on") < texts.index("You take the cheese from the fridge")
    b = read_belief("make a sandwich", events, wanted=["knife"])
    assert b.alarm is None  # an alarm inside a recalled memory is not news
    assert "open oven" in b.avoid and {"slice bread", "put cheese on bread"} <= set(b.done_actions)
    assert b.held == {"knife",
                      "bread"}  # the store's snapshot of the hand is newer than any episode


def test_alarm_detection_is_generic():
    assert detect_interruption("You take it. A timer rings in the laundry room! Switch off the "
                               "timer, then carry on.") \
        == "Switch off the timer in the laundry room"
    assert detect_interruption(
        "The alarm goes off in the hallway.") == "switch off the alarm in the hallway"
    assert detect_interruption("You open the fridge.") == ""
    assert detect_resolution("You switch off the timer. The ringing stops.")
    assert not detect_resolution("You switch on the coffee machine.")


def test_decisions_depend_only_on_what_it_is_shown():
    env = KitchenWorld()
    state = env.reset(5)
    history = [("", state.observation)]
    for _ in range(12):
        context = PlanningContext(state.task, state.observation, state.valid_actions, list(history),
                                  "")
        a, b = ScriptedPlanner(1), ScriptedPlanner(1)
        for _ in range(3):  # asking again, or asking a fresh planner, gives the same answer
            assert a.decide(context) == b.decide(context)
        state = env.step(a.decide(context))
        history.append((a.decide(context), state.observation))


def test_planning_code_imports_no_environment():
    folder = Path(__file__).resolve().parents[2] / "brainmem_ros" / "planning"
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n
                    for n in names if "kitchen" in n or "textworld" in n or "evaluation" in n], path


class TextOnly:
    """Hands the planner's loop nothing but the three texts: no info, no object tree."""

    def __init__(self, env):
        self.env = env

    def reset(self, seed):
        s = self.env.reset(seed)
        return EnvState(s.task, s.observation, list(s.valid_actions), s.done, s.success, s.failed)

    def step(self, action):
        s = self.env.step(action)
        return EnvState(s.task, s.observation, list(s.valid_actions), s.done, s.success, s.failed)


def _solve(env, seed):
    planner = ScriptedPlanner(seed)
    state = env.reset(seed)
    history = [("", state.observation)]
    for _ in range(120):
        if state.done:
            break
        action = planner.decide(
            PlanningContext(state.task, state.observation, state.valid_actions, history, ""))
        state = env.step(action)
        history.append((action, state.observation))
    return state.success


def test_the_same_planner_solves_our_kitchen_from_text_alone():
    assert all(_solve(TextOnly(KitchenWorld(hazard_rate=0.0)), seed) for seed in range(3))


@pytest.mark.skipif(shutil.which("java") is None, reason="CookingWorld needs Java 17")
def test_the_same_planner_solves_cookingworld_from_text_alone():
    from brainmem_ros.kitchen.cookingworld import CookingWorld

    env = CookingWorld(fold="train")
    try:
        assert sum(_solve(TextOnly(env), seed) for seed in range(3)) >= 2
    finally:
        env.close()
