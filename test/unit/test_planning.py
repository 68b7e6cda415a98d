"""The planner interface and the LLM backend's plumbing, against a FAKE chat server (not an LLM)."""
import pytest

from brainmem_ros.planning.base import PlannerError, PlanningContext, closest_action
from brainmem_ros.planning.llm import LLMPlanner, build_messages
from fake_chat_server import FakeChatServer

ACTIONS = ["open fridge", "take milk from fridge", "go to living room", "look"]


@pytest.mark.parametrize("answer, expected", [
    ("open fridge", "open fridge"),
    ("Open Fridge.", "open fridge"),
    ("I will take milk from fridge now", "take milk from fridge"),
    ("go to the living room", "go to living room"),
    ("opn fridge", "open fridge"),
])
def test_answers_map_to_a_valid_action(answer, expected):
    assert closest_action(answer, ACTIONS) == expected


def test_unmappable_answers_raise():
    with pytest.raises(PlannerError, match="matches no valid action"):
        closest_action("dance a waltz", ACTIONS)
    with pytest.raises(PlannerError, match="no valid action"):
        closest_action("look", [])


def context():
    return PlanningContext("fetch the milk", "You are in the kitchen. The fridge is closed.",
                           ACTIONS, [("look", "You see a fridge.")],
                           "## Relevant memories\n- Fact: the milk is in the fridge.")


def test_prompt_carries_memory_window_observation_and_actions():
    text = build_messages(context())[-1]["content"]
    for part in ("## Relevant memories", "Task: fetch the milk", "> look", "The fridge is closed.",
                 "- take milk from fridge"):
        assert part in text


def test_llm_planner_against_the_fake_server_with_retries():
    with FakeChatServer(fail_first=1) as fake:
        planner = LLMPlanner(fake.url, "fake-model", timeout_s=5, retries=2)
        assert planner.decide(context()) == "open fridge"
        assert len(fake.requests) == 2 and fake.requests[0]["model"] == "fake-model"


def test_llm_planner_gives_up_with_a_clear_error():
    with FakeChatServer(reply="ACTION: dance") as fake:
        with pytest.raises(PlannerError, match="no usable action after 2 tries"):
            LLMPlanner(fake.url, "m", timeout_s=5, retries=1).decide(context())
    with pytest.raises(PlannerError, match="gave no usable action"):
        LLMPlanner("http://127.0.0.1:9/v1", "m", timeout_s=1, retries=0).decide(context())
    with pytest.raises(PlannerError, match="needs a base URL"):
        LLMPlanner("", "")
