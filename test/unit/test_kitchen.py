"""Our kitchen: layouts, partial observability, distractors, hazards, bad input.

Our kitchen: layouts by seed, partial observability, distractors, moved objects, hazards, bad input.
"""
import pytest

from brainmem_ros.kitchen import Interruptions, KitchenWorld, TASKS
from brainmem_ros.kitchen.base import EnvironmentError_
from brainmem_ros.planning.base import PlanningContext
from brainmem_ros.planning.scripted import ScriptedPlanner


def play(env, seed, max_steps=150):
    """Play an episode with the scripted planner and its whole history.

    The scripted planner with its whole history: a solution path (not an optimal one).
    """
    planner = ScriptedPlanner(seed)
    state = env.reset(seed)
    history = [("", state.observation)]
    for _ in range(max_steps):
        if state.done:
            break
        action = planner.decide(
            PlanningContext(state.task, state.observation, state.valid_actions, history, ""))
        state = env.step(action)
        history.append((action, state.observation))
    return state, history


def test_three_tasks_each_need_fifteen_steps_or_more():
    env = KitchenWorld(hazard_rate=0.0)
    names = set()
    for seed in range(3):
        state, history = play(env, seed)
        names.add(state.info["task_name"])
        assert state.success, history[-3:]
        assert len(history) - 1 >= 15
    assert names == set(TASKS)


def test_layout_is_random_by_seed_and_reproducible():
    env = KitchenWorld()
    env.reset(3)
    first = (dict(env.exits), env.room, [s.action for s in env.order])
    env.reset(6)  # same task (seeds cycle the three tasks), another layout
    other = (dict(env.exits), env.room)
    env.reset(3)
    assert (dict(env.exits), env.room, [s.action for s in env.order]) == first
    assert other != first[:2]


def test_closed_containers_hide_what_is_inside():
    env = KitchenWorld()
    env.reset(0)
    env.room = "kitchen"
    fridge = env.fixtures["fridge"]
    fridge.items = ["butter"]
    assert "a fridge that is closed" in env.step("look around").observation
    assert "take butter" not in env.valid_actions()
    opened = env.step("open fridge").observation
    assert "contains some butter" in opened and "take butter" in env.valid_actions()


def test_distractors_are_placed():
    env = KitchenWorld(distractors=6)
    env.reset(1)
    needed = set(env.task.ingredients) | {"knife"}
    items = [i for f in env.fixtures.values() for i in f.items]
    assert len([i for i in items if i not in needed]) == 6


def test_someone_moves_an_ingredient_mid_episode():
    env = KitchenWorld(move_rate=1.0)
    env.reset(4)
    for _ in range(env.move_at):
        env.step("look around")
    assert env.moved and env.moved.split(":")[0] in env.task.ingredients


def _coffee_world():
    env = KitchenWorld(tasks=("coffee_and_counter", ))
    env.reset(0)
    env.room = "kitchen"
    env.held = ["water jug", "mug", "coffee beans"]
    return env


def test_water_into_a_switched_on_coffee_machine_fails_the_episode():
    env = _coffee_world()
    env.step("switch on coffee machine")
    state = env.step("fill coffee machine with water")
    assert state.failed and state.done and state.info["failure"] == "short_circuit"
    assert "while it is switched on" in state.observation
    assert state.valid_actions == []


def test_filling_first_is_safe():
    env = _coffee_world()
    assert not env.step("fill coffee machine with water").failed
    assert not env.step("switch on coffee machine").failed


def test_tomato_before_cheese_makes_the_sandwich_fall_apart():
    env = KitchenWorld(tasks=("sandwich", ))
    env.reset(0)
    env.room = "kitchen"
    env.held = ["bread", "butter", "tomato", "cheese", "knife"]
    env.done = ["slice bread", "spread butter on bread"]
    state = env.step("put tomato on bread")
    assert state.failed and state.info[
        "failure"] == "layering" and "before the cheese" in state.observation


def test_hazardous_recipe_order_follows_the_rate():
    always = KitchenWorld(tasks=("coffee_and_counter", ), hazard_rate=1.0)
    never = KitchenWorld(tasks=("coffee_and_counter", ), hazard_rate=0.0)
    for seed in range(5):
        always.reset(seed)
        order = [s.action for s in always.order]
        assert order.index("switch on coffee machine") < order.index(
            "fill coffee machine with water")
        never.reset(seed)
        order = [s.action for s in never.order]
        assert order.index("switch on coffee machine") > order.index(
            "fill coffee machine with water")


def test_bad_actions_change_nothing_and_stepping_before_reset_is_refused():
    with pytest.raises(EnvironmentError_, match="reset"):
        KitchenWorld().step("look around")
    env = KitchenWorld()
    env.reset(2)
    before = ([list(f.items) for f in env.fixtures.values()], list(env.held), env.room)
    for action in ["", "x" * 10000, "take the moon", "move up", "\x00; DROP TABLE"]:
        assert env.step(action).observation == "You can't do that here."
    assert ([list(f.items) for f in env.fixtures.values()], list(env.held), env.room) == before


@pytest.mark.parametrize("params, ok", [("hazard_rate=1.0,rooms=5", True),
                                        ("tasks=sandwich+salad", True), ("hazard_rate=2", False),
                                        ("colour=red", False), ("rooms=x", False),
                                        ("rooms=9", False), ("tasks=pizza", False)])
def test_game_parameters(params, ok):
    if ok:
        KitchenWorld.from_params(params)
    else:
        with pytest.raises(EnvironmentError_):
            KitchenWorld.from_params(params)


def test_interruption_wrapper_rings_once_and_must_be_handled():
    env = Interruptions(KitchenWorld(hazard_rate=0.0), earliest=2, latest=2, patience=5)
    state = env.reset(0)
    state = env.step("look around")
    assert "timer" not in state.observation
    state = env.step("look around")
    assert "A timer rings in the" in state.observation and state.info["interrupted"]
    assert "switch off timer" not in state.valid_actions  # it rings in another room
    for _ in range(4):
        state = env.step("look around")
    assert not state.done
    state = env.step("look around")  # the fifth step of ringing: patience is up
    assert state.failed and state.info["failure"] == "timer_ignored"


def test_interruption_handled_in_its_room():
    env = Interruptions(KitchenWorld(hazard_rate=0.0), earliest=1, latest=1, patience=50)
    env.reset(0)
    state = env.step("look around")
    room = env.timer_room
    from brainmem_ros.planning.scripted import _path

    for direction in _path(env.env.exits, env.env.room, room):
        state = env.step(f"move {direction}")
    assert "switch off timer" in state.valid_actions
    state = env.step("switch off timer")
    assert "ringing stops" in state.observation and state.info["timer_handled"]
    assert "switch off timer" not in state.valid_actions
