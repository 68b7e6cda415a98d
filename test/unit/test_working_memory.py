"""Working memory: bounded, task stack kept straight, resumed after a restart.

Working memory stays bounded, keeps the task stack straight through interruptions, and resumes from
its snapshot after a restart.
"""
import json

import numpy as np
import pytest

from brainmem_ros.core.config import WorkingSection
from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.trace import Goal, GoalStatus, Relation, Trace, TraceKind
from brainmem_ros.core.working_memory import WorkingMemory


def trace(i, kind=TraceKind.OBSERVATION, relations=(), success=None, goal_id=""):
    return Trace("a", kind, f"event {i}", np.full(384, i, dtype=np.float32), [], list(relations),
                 0.5, float(i), success=success, action=f"step {i}", goal_id=goal_id)


def test_everything_is_bounded():
    wm = WorkingMemory(WorkingSection(max_traces=10, max_actions=3, max_entities=5)).agent("a")
    for i in range(50):
        wm.add(
            trace(i, TraceKind.ACTION, [Relation(f"thing{i}", "location", "table")], success=True))
    assert len(wm.traces) == 10 and len(wm.actions) == 3 and len(wm.environment) == 5
    assert [t.text for t in wm.actions] == ["event 47", "event 48", "event 49"]
    assert list(wm.environment) == [f"thing{i}" for i in range(45, 50)]


def test_the_steps_of_finished_goals_are_bounded_and_the_current_goals_kept():
    """The steps of finished goals are bounded; the current goals' are kept.

    A robot that works for weeks finishes thousands of goals; working memory keeps the steps of the
    goals on its stack and of the 64 most recently finished ones, and a reader's view holds the
    stack's alone.
    """
    wm = WorkingMemory(WorkingSection()).agent("a")
    main = wm.push(Goal("", "tidy the house", "a"))
    wm.add(trace(0, TraceKind.ACTION, success=True))
    for i in range(1, 301):
        wm.push(Goal("", f"chore {i}", "a"))
        wm.add(trace(i, TraceKind.ACTION, success=True))
        wm.finish("", GoalStatus.COMPLETED)
    assert len(wm.goal_actions) == 64 + 1
    assert wm.done_steps(main.id) == ["step 0"]
    assert list(wm.goal_actions)[-1] != main.id and wm.done_steps(list(
        wm.goal_actions)[-1]) == ["step 300"]
    assert wm.view().goal_actions == {main.id: [("step 0", True)]}


def test_interruption_suspends_and_resumes_the_main_task():
    wm = WorkingMemory(WorkingSection()).agent("a")
    main = wm.push(Goal("", "make a sandwich", "a"))
    timer = wm.push(Goal("", "turn off the timer", "a", temporary=True))
    assert main.status is GoalStatus.SUSPENDED and wm.active_goal() is timer
    assert timer.parent_id == main.id and wm.temporary_goals() == [timer]
    done = wm.finish("", GoalStatus.COMPLETED)
    assert done is timer and wm.active_goal() is main and main.status is GoalStatus.ACTIVE


def test_goal_errors_are_clear():
    wm = WorkingMemory(WorkingSection()).agent("a")
    with pytest.raises(InvalidRequest, match="no goal"):
        wm.finish("", GoalStatus.COMPLETED)
    wm.push(Goal("g1", "x", "a"))
    with pytest.raises(InvalidRequest, match="not on agent"):
        wm.finish("nope", GoalStatus.FAILED)
    with pytest.raises(InvalidRequest, match="already on the stack"):
        wm.push(Goal("g1", "y", "a"))
    with pytest.raises(InvalidRequest, match="description"):
        wm.push(Goal("", "  ", "a"))


def test_a_push_sent_again_is_answered_with_the_goal_it_made():
    wm = WorkingMemory(WorkingSection()).agent("a")
    first = wm.push(Goal("g1", "make a sandwich", "a"))
    assert wm.push(Goal("g1", "make a sandwich", "a")) is first and wm.stack == [first]
    wm.push(Goal("g2", "turn off the timer", "a", temporary=True))
    with pytest.raises(InvalidRequest, match="already on the stack"):
        wm.push(Goal("g1", "make a sandwich", "a"))  # no longer the newest: not a resend


def test_snapshot_round_trip(tmp_path):
    path = tmp_path / "wm.json"
    memory = WorkingMemory(WorkingSection(), path)
    wm = memory.agent("a")
    goal = wm.push(Goal("", "make coffee", "a"))
    wm.add(
        trace(1, TraceKind.ACTION, [Relation("mug", "location", "hand")], success=True,
              goal_id=goal.id))
    wm.add(trace(2, relations=[Relation("fridge", "state", "open")]))
    memory.save()
    again = WorkingMemory(WorkingSection(), path).agent("a")
    assert again.to_dict() == wm.to_dict()
    assert np.array_equal(again.traces[0].embedding, wm.traces[0].embedding)
    assert again.holding() == ["mug"] and again.done_steps(goal.id) == ["step 1"]


def test_damaged_snapshot_starts_empty_and_keeps_the_file(tmp_path):
    path = tmp_path / "wm.json"
    path.write_text("{not json")
    memory = WorkingMemory(WorkingSection(), path)
    assert memory.agents == {}
    assert (tmp_path / "wm.damaged").read_text() == "{not json"
    memory.agent("a").push(Goal("", "x", "a"))
    memory.save()
    assert json.loads(path.read_text())["agents"][0]["agent_id"] == "a"


def test_a_late_older_observation_does_not_overwrite_the_environment():
    wm = WorkingMemory(WorkingSection()).agent("a")
    wm.add(trace(5, relations=[Relation("butter", "location", "counter")]))
    wm.add(trace(2, relations=[Relation("butter", "location", "fridge")]))
    assert wm.environment["butter"].location == "counter"
