"""The importance formula: how much a new trace deserves to be remembered.

    importance = base
               + goal_relevance * G      G: overlap with the active goal, entities and meaning
               + novelty * N             N: 1 for an unknown fact or a contradiction, 0 for a repeat
               + valence * V             V: failure > success > plain observation
               + action_bonus * A        A: 1 for an action result, 0 for a plain state
    clipped to [0, 1]; weights in YAML (``importance.*``).

Afterwards, each retrieval that returns a memory adds ``importance.access`` (access frequency), and
an outcome report raises the memories it involved. Decay over time lives in ``forgetting``.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional

import numpy as np

from brainmem_ros.core.config import ImportanceSection
from brainmem_ros.core.trace import Relation

__all__ = [
    "goal_relevance", "novelty", "valence", "initial_importance", "after_access", "after_outcome"
]

OUTCOME_SUCCESS_BOOST = 0.1
OUTCOME_FAILURE_BOOST = 0.2


def goal_relevance(entities: Iterable[str], embedding: np.ndarray, goal_entities: Iterable[str],
                   goal_embedding: Optional[np.ndarray]) -> float:
    """Score goal relevance: half entity overlap, half cosine similarity.

    Half entity overlap (share of the trace's entities the goal names), half cosine similarity.
    """
    entities, goal_entities = set(entities), set(goal_entities)
    overlap = len(entities & goal_entities) / len(entities) if entities and goal_entities else 0.0
    similarity = float(np.dot(embedding, goal_embedding)) if goal_embedding is not None else 0.0
    return 0.5 * overlap + 0.5 * max(0.0, similarity)


def novelty(relations: Iterable[Relation], known: Mapping[tuple[str, str], str],
            nearest_similarity: float) -> float:
    """1 when a relation is unknown or contradicts what is known; 0 when every one repeats it.

    Without relations, the distance to the most similar thing already in working memory.
    """
    relations = list(relations)
    if not relations:
        return float(np.clip(1.0 - nearest_similarity, 0.0, 1.0))
    return max(0.0 if known.get((r.subject, r.predicate)) == r.object else 1.0 for r in relations)


def valence(success: Optional[bool], weights: ImportanceSection) -> float:
    if success is None:
        return weights.neutral_valence
    return weights.success_valence if success else weights.failure_valence


def initial_importance(weights: ImportanceSection, *, relevance: float, novelty_score: float,
                       success: Optional[bool], is_action: bool) -> float:
    score = (weights.base + weights.goal_relevance * relevance + weights.novelty * novelty_score +
             weights.valence * valence(success, weights) +
             (weights.action_bonus if is_action else 0.0))
    return float(np.clip(score, 0.0, 1.0))


def after_access(importance_now: np.ndarray | float, weights: ImportanceSection):
    """Strengthen what a retrieval returns: the decayed value plus the access increment."""
    return np.clip(np.asarray(importance_now) + weights.access, 0.0, 1.0)


def after_outcome(importance_now: np.ndarray | float, success: bool):
    """Memories involved in an outcome matter more afterwards; a failure's more than a success's."""
    boost = OUTCOME_SUCCESS_BOOST if success else OUTCOME_FAILURE_BOOST
    return np.clip(np.asarray(importance_now) + boost, 0.0, 1.0)
