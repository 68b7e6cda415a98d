"""Fusion and rerank: one score per candidate memory, then the best few that say different things.

    sim        = max(cos(query, m), context_weight * cos(context, m))
    evidence_r = sim                                             for vector and working recall
               = e_r + route_similarity_nudge * max(0, sim) * (1 - e_r)   for the other routes r,
                                                                 e_r their own evidence (routes.py)
    relevance  = min(1, max(sim, max_r evidence_r) + multi_route_bonus * (routes that found m - 1))
    score      = (w_relevance * relevance + w_importance * importance(now)
                  + w_recency * exp(-(now - created) / recency_tau_s) + w_confidence * confidence)
                 / (w_relevance + w_importance + w_recency + w_confidence)

importance(now) is the decayed importance (``forgetting.decayed_importance``); every constant is a
``retrieval.*`` parameter. Then, best score first (ties to the newer memory): candidates below
``min_relevance`` or the request's ``min_score`` are dropped, so are facts something seen since in
working memory contradicts (unless history is asked for), and near-duplicates of a better candidate
(the same words, or cosine at least ``duplicate_similarity``).
"""
from __future__ import annotations

import re
from typing import Optional

import numpy as np

from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.forgetting import decayed_importance
from brainmem_ros.core.retrieval.candidates import ROUTES, Candidate
from brainmem_ros.core.retrieval.request import RetrievalRequest
from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.trace import Entry, Recall, Zone
from brainmem_ros.core.working_memory import AgentWorkingMemory

__all__ = ["rank", "contradicted"]

_ROUTE_INDEX = {name: i for i, name in enumerate(ROUTES)}


def rank(candidates: dict[object, Candidate], q: np.ndarray, ctx_vec: Optional[np.ndarray],
         working: Optional[AgentWorkingMemory], req: RetrievalRequest, top_k: int, now: float,
         config: MemoryConfig, store: LongTermStore) -> list[tuple[Recall, Optional[int]]]:
    """Return the ``top_k`` best candidates as recalls, with their rowids (None for working)."""
    if not candidates:
        return []
    cfg = config.retrieval
    cands = list(candidates.values())
    matrix = np.stack([c.vector for c in cands])
    values = np.array([c.scoring for c in cands], dtype=np.float64)
    sims = matrix @ q
    ctx_sims = matrix @ ctx_vec if ctx_vec is not None else np.zeros(len(cands), dtype=np.float32)
    imp = decayed_importance(values[:, 0], values[:, 1], now, config.forgetting.decay_tau_s)
    recency = np.exp(-np.maximum(0.0, now - values[:, 2]) / cfg.recency_tau_s)
    sim = np.maximum(sims, cfg.context_weight * ctx_sims).astype(np.float64)
    evidence = np.full((len(cands), len(ROUTES)), np.nan)
    for i, c in enumerate(cands):
        for route, value in c.evidence.items():
            evidence[i, _ROUTE_INDEX[route]] = value
    present = ~np.isnan(evidence)
    by_similarity = np.where(present[:, :2], sim[:, None], np.nan)
    nudged = evidence[:, 2:] + cfg.route_similarity_nudge * np.maximum(
        0.0, sim)[:, None] * (1.0 - evidence[:, 2:])
    strongest = np.fmax(np.nanmax(np.concatenate([by_similarity, nudged], axis=1), axis=1), sim)
    relevance = np.minimum(1.0, strongest + cfg.multi_route_bonus * (present.sum(axis=1) - 1))
    weights = np.array([cfg.w_relevance, cfg.w_importance, cfg.w_recency, cfg.w_confidence])
    weights = weights / weights.sum()
    score = weights[0] * relevance + weights[1] * imp + weights[2] * recency + weights[
        3] * values[:, 3]
    keep = relevance >= cfg.min_relevance
    if req.min_score:
        keep &= score >= req.min_score
    # Ties (common with old recorded runs, where recency is ~0 for everything) go to the newer
    # memory.
    order = [int(i) for i in np.lexsort((-values[:, 2], -np.round(score, 6))) if keep[i]]
    chosen = _distinct(cands, order, matrix, working, req, top_k, config, store)
    return [(Recall(cands[i].entry, float(score[i]), float(relevance[i]), sorted(cands[i].evidence),
                    float(imp[i])), cands[i].rowid) for i in chosen]


def _distinct(cands: list[Candidate], order: list[int], matrix: np.ndarray,
              working: Optional[AgentWorkingMemory], req: RetrievalRequest, top_k: int,
              config: MemoryConfig, store: LongTermStore) -> list[int]:
    """Keep the best candidates that are neither contradicted nor near-duplicates.

    Walk ``order`` a window at a time (reading only those entries from SQLite), keeping candidates
    that are not contradicted and not near-duplicates of one already kept.
    """
    chosen: list[int] = []
    seen_text = set()
    step = max(2 * top_k, 8)
    for start in range(0, len(order), step):
        window = order[start:start + step]
        missing = [cands[i].rowid for i in window if cands[i].entry is None]
        if missing:
            fetched = store.entries_by_rowid(missing)
            for i in window:
                if cands[i].entry is None:
                    cands[i].entry = fetched.get(cands[i].rowid)
        for i in window:
            entry = cands[i].entry
            if entry is None or (not req.include_superseded
                                 and contradicted(entry, working, config)):
                continue
            text = re.sub(r"\W+", " ", entry.content.lower()).strip()
            if text in seen_text:
                continue
            if chosen and float(np.max(
                    matrix[chosen] @ matrix[i])) >= config.retrieval.duplicate_similarity:
                continue
            chosen.append(i)
            seen_text.add(text)
            if len(chosen) == top_k:
                return chosen
    return chosen


def contradicted(entry: Entry, working: Optional[AgentWorkingMemory], config: MemoryConfig) -> bool:
    """Tell whether something seen later replaced every functional relation of ``entry``."""
    if working is None or entry.zone is Zone.PROCEDURAL or entry.zone is Zone.GOAL:
        return False
    functional = config.encoding.functional_predicates
    relations = [r for r in entry.relations if r.predicate in functional]
    if not relations:
        return False
    for rel in relations:
        state = working.environment.get(rel.subject)
        if state is None or state.stamp <= entry.created:
            return False
        current = state.location if rel.predicate == "location" else state.state
        if not current or current == rel.object:
            return False
    return True
