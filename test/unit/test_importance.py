"""The importance formula ranks what matters.

The importance formula ranks what matters: failures over successes over plain states, goal-relevant
over irrelevant, new or contradicting facts over repeats.
"""
import numpy as np

from brainmem_ros.core.config import ImportanceSection
from brainmem_ros.core.importance import (after_access, after_outcome, goal_relevance,
                                          initial_importance, novelty)
from brainmem_ros.core.trace import Relation

W = ImportanceSection()


def score(**kw):
    base = dict(relevance=0.5, novelty_score=0.5, success=None, is_action=False)
    base.update(kw)
    return initial_importance(W, **base)


def test_valence_orders_failure_success_neutral():
    assert score(success=False, is_action=True) > score(success=True, is_action=True) > score()


def test_action_results_weigh_more_than_states():
    assert score(is_action=True) > score(is_action=False)


def test_goal_relevance_and_novelty_raise_importance_and_result_is_bounded():
    assert score(relevance=1.0) > score(relevance=0.0)
    assert score(novelty_score=1.0) > score(novelty_score=0.0)
    assert 0.0 <= score(relevance=1, novelty_score=1, success=False, is_action=True) <= 1.0


def test_novelty_of_relations():
    known = {("butter", "location"): "fridge"}
    assert novelty([Relation("butter", "location", "fridge")], known, 0.0) == 0.0
    assert novelty([Relation("butter", "location", "counter")], known, 0.0) == 1.0  # contradiction
    assert novelty([Relation("knife", "location", "drawer")], known, 0.0) == 1.0  # unknown
    assert abs(novelty([], known, nearest_similarity=0.9) - 0.1) < 1e-9


def test_goal_relevance_uses_entities_and_meaning():
    v = np.zeros(4, dtype=np.float32)
    v[0] = 1
    assert goal_relevance(["butter"], v, {"butter", "bread"}, v) == 1.0
    assert goal_relevance(["sponge"], v, {"butter"}, None) == 0.0


def test_access_and_outcome_strengthen_within_bounds():
    assert after_access(0.5, W) == 0.5 + W.access
    assert after_outcome(0.5, success=False) > after_outcome(0.5, success=True) > 0.5
    assert after_outcome(0.95, success=False) == 1.0
