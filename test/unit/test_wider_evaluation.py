"""The wider evaluation's pieces that need no engine: the grid, the memory test's judge, scoring.

The memory test's judge decides what a remembered text says about the world, so a wrong judge would
make every figure of ``eval-recall`` wrong: its cases are the engines' own phrasings.
"""
import sqlite3

import pytest

from brainmem_ros.evaluation.grid import PARAMETER_VALUES, TW_VALUES, grid_cells
from brainmem_ros.evaluation.recall_claims import place_claims, state_claims
from brainmem_ros.evaluation.recall_test import Question, _bm25, _judge, summarise_answers
from brainmem_ros.kitchen.cookingworld import ENGINE_DEFAULTS
from brainmem_ros.planning.base import PlannerError, PlanningContext
from brainmem_ros.planning.llm import LLMPlanner, mean_logprob, scoring_prompt

HOLDERS = {"fridge", "counter", "table", "sofa"}


def test_the_cookingworld_grid_has_every_value_of_every_parameter_and_the_defaults_first():
    cells = grid_cells()
    assert cells[0] == ENGINE_DEFAULTS
    for name, values in PARAMETER_VALUES.items():
        assert {c[name] for c in cells} == set(values), name
        # one parameter at a time: every other cell differs from the defaults in one place
    assert all(sum(c[k] != ENGINE_DEFAULTS[k] for k in c) == 1 for c in cells[1:])


def test_the_textworld_grid_never_asks_to_take_more_than_the_recipe_has():
    cells = grid_cells("textworld")
    assert all(c["take"] <= c["recipe"] for c in cells)
    for name, values in TW_VALUES.items():
        assert set(values) <= {c[name] for c in cells} | {4}, name  # take=4 > recipe=3


@pytest.mark.parametrize("text, thing, claims", [
    ("You take the carrot from the fridge.", "carrot", {"held"}),
    ("You drop the knife on the ground.", "knife", {"floor"}),
    ("You see a fridge. On the counter you can see a carrot and a knife.", "carrot", {"counter"}),
    ("You open the fridge, revealing a raw pork chop and a carrot.", "pork chop", {"fridge"}),
    ("You are carrying: a knife and a tomato.", "tomato", {"held"}),
    ("The sofa is comfy. There is a carrot on the floor.", "carrot", {"floor"}),
    ("You see a counter.", "carrot", set()),
])
def test_a_text_claims_the_place_its_sentence_gives_the_thing(text, thing, claims):
    assert place_claims(thing, text, HOLDERS) == claims


@pytest.mark.parametrize("name, text, claims", [
    ("fridge", "You can see a closed fridge in the room.", {"closed"}),
    ("fridge", "You open the fridge, revealing a carrot.", {"open"}),
    ("plain door", "the plain door leading north is closed", {"closed"}),
    ("fridge", "You have to open the fridge first.", {"closed"}),
    ("fridge", "You close the fridge.", {"closed"}),
    ("fridge", "The fridge is locked.", {"locked"}),
    ("fridge", "You see a table.", set()),
])
def test_a_text_claims_the_state_it_gives_a_container(name, text, claims):
    assert state_claims(name, text) == claims


def test_the_judge_scores_found_first_stale_and_precision():
    q = Question("g", 10, "where", "where is the carrot now?", "carrot", "held")
    texts = ["the carrot is in/on the counter", "You take the carrot from the counter (success)",
             "You open the oven (success)"]
    score = _judge(q, texts, HOLDERS)
    assert score["found"] and not score["first"] and score["stale"]
    assert score["precision"] == pytest.approx(2 / 3)
    none = _judge(q, [], HOLDERS)
    assert not none["found"] and none["precision"] == 0.0


def test_a_failure_question_names_an_older_failure_stale():
    q = Question("g", 20, "failure", "what went wrong last time I tried to go?", "go north",
                 "go north", ("go west", ))
    score = _judge(q, ["go west failed: You can't go that way.",
                       "go north failed: You can't go that way."], HOLDERS)
    assert score["found"] and score["stale"] and not score["first"]


def test_bm25_is_sqlite_fts5_and_ranks_the_rare_word_first():
    assert sqlite3.connect(":memory:").execute(
        "SELECT sqlite_compileoption_used('ENABLE_FTS5')").fetchone()[0] == 1
    texts = ["the kitchen is large", "the carrot is on the counter", "the kitchen has a fridge"]
    assert _bm25(texts, "where is the carrot now?", 2)[0] == "the carrot is on the counter"
    assert _bm25(texts, "", 2) == [] and _bm25([], "carrot", 2) == []


def test_the_summary_averages_per_method_and_per_kind():
    row = {"question": {"kind": "where"}, "scores": {
        "pipeline": {"found": True, "first": True, "stale": False, "precision": 1.0},
        "vector": {"found": False, "first": False, "stale": True, "precision": 0.0}}}
    summary = summarise_answers([row, dict(row, question={"kind": "state"})])
    assert summary["pipeline"]["all"]["found"] == 1.0 and summary["vector"]["all"]["stale"] == 1.0
    assert summary["pipeline"]["where"]["questions"] == 1


def test_mean_logprob_counts_only_the_actions_tokens():
    logprobs = {"tokens": ["A", "CTION:", " take", " knife"],
                "token_logprobs": [None, -9.0, -1.0, -3.0], "text_offset": [0, 1, 7, 12]}
    assert mean_logprob(logprobs, 7, 18) == pytest.approx(-2.0)
    with pytest.raises(PlannerError):
        mean_logprob(logprobs, 30, 40)


def test_score_mode_takes_the_action_the_endpoint_finds_most_likely():
    from fake_chat_server import FakeChatServer

    context = PlanningContext("fetch the milk", "You are in the kitchen.",
                              ["look", "open fridge", "move north"])
    assert scoring_prompt(context).endswith("ACTION:")
    with FakeChatServer(favourite="open fridge") as fake:  # FAKE: not a model, made-up numbers
        planner = LLMPlanner(base_url=fake.url, model="fake", choose="score")
        assert planner.decide(context) == "open fridge"
        assert len(fake.requests) == 3 and all(r["echo"] for r in fake.requests)
    with pytest.raises(PlannerError, match="generate or score"):
        LLMPlanner(base_url="http://127.0.0.1:9", model="m", choose="guess")
