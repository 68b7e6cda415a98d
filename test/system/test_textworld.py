"""Microsoft TextWorld's cooking games: an environment nobody here wrote, and the memory test.

A game made by TextWorld's own generator is played by the scripted planner from its texts alone,
and a seeded walk through another feeds the memory test, whose answers come from the engine's facts.
"""
import pytest

pytest.importorskip("textworld", reason="requirements/python.txt installs textworld")

from brainmem_ros.core.errors import BrainMemError  # noqa: E402
from brainmem_ros.kitchen.base import EnvironmentError_  # noqa: E402


def test_the_scripted_planner_cooks_a_textworld_meal_from_its_texts_alone():
    from brainmem_ros.evaluation.episode import run_episode
    from brainmem_ros.kitchen.textworld_cooking import TextWorldCooking
    from brainmem_ros.planning.scripted import ScriptedPlanner

    env = TextWorldCooking("recipe=3,take=2,go=6,open=1,cook=1,cut=1,drop=1")
    try:
        gold = env.gold_path(1)
        record = run_episode(env, ScriptedPlanner(), "full", 1, 5, 100)
    finally:
        env.close()
    assert gold and record.success, record.actions
    assert record.actions[-1] == "eat meal"


def test_bad_textworld_parameters_and_seeds_are_refused_with_the_reason():
    from brainmem_ros.kitchen.textworld_cooking import TextWorldCooking

    with pytest.raises(EnvironmentError_, match="name=integer"):
        TextWorldCooking("recipe=three")
    with pytest.raises(EnvironmentError_, match="name=integer"):
        TextWorldCooking("rooms=3")
    env = TextWorldCooking("")
    with pytest.raises(EnvironmentError_, match="seed"):
        env.reset(-1)
    with pytest.raises(EnvironmentError_, match="reset"):
        env.step("look")


def test_the_memory_test_scores_every_method_against_the_engines_facts():
    from brainmem_ros.core.embedding import MiniLMEmbedder
    from brainmem_ros.evaluation.recall_test import METHODS, ask_walk
    from brainmem_ros.evaluation.textworld_walk import make_game, walk_game

    embedder = MiniLMEmbedder()
    walk = walk_game(make_game(2), 2, steps=40)
    step = walk.steps[-1]
    assert step.place and step.state and step.room  # the truth, from EnvInfos(facts=True)
    rows = ask_walk(walk, embedder, k=5, seed=2)
    assert len(rows) >= 10
    for row in rows:
        q = row["question"]
        if q["kind"] == "where":
            assert q["truth"] == walk.steps[q["step"]].place[q["subject"]]
        assert set(METHODS) <= set(row["scores"])
        assert all(len(texts) <= 5 for texts in row["answers"].values())
    found = {m: sum(r["scores"][m]["found"] for r in rows) for m in ("pipeline", "last-k")}
    assert found["pipeline"] > found["last-k"], found


def test_an_unknown_tw_make_option_is_refused():
    from brainmem_ros.evaluation.textworld_walk import make_game

    with pytest.raises(BrainMemError, match="unknown tw-cooking option"):
        make_game(0, {"rooms": 3})


def test_the_game_says_where_the_player_is_from_its_own_facts():
    from brainmem_ros.kitchen.textworld_cooking import TextWorldCooking

    def titled(text):  # the room a TextWorld answer is titled with: "-= Bathroom =-"
        return text.split("=-")[0].strip("-= \n").lower()

    env = TextWorldCooking("recipe=1,take=0,go=6,open=0,cook=0,cut=0,drop=0")
    try:
        state = env.reset(3)
        first = state.info["location"]
        assert first and first == titled(state.observation)
        way = next(a for a in state.valid_actions if a.startswith("go "))
        state = env.step(way)
    finally:
        env.close()
    assert state.info["location"] not in ("", first)
    assert state.info["location"] == titled(state.observation)
