"""Proactive warnings: past failures that resemble what the agent is about to do, said first.

A failure is announced when it is at least ``warning_similarity`` similar to the query or the
context (the goal), or a little less similar (``warning_overlap_margin``) when it names an entity
of the query or context. Remembered failures come from long-term memory and, not yet consolidated,
from the failed actions in working memory.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from brainmem_ros.core.config import RetrievalSection
from brainmem_ros.core.prompt import said
from brainmem_ros.core.retrieval.candidates import trace_as_entry
from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.trace import Entry, TraceKind, Zone
from brainmem_ros.core.working_memory import AgentWorkingMemory

__all__ = ["warnings_for", "MAX_WARNINGS"]

MAX_WARNINGS = 3


def warnings_for(store: LongTermStore, cfg: RetrievalSection, agent: str, q: np.ndarray,
                 ctx_vec: Optional[np.ndarray], working: Optional[AgentWorkingMemory],
                 entities: set[str], zones: Sequence[Zone]) -> list[Entry]:
    """Return the most similar past failures, most similar first, at most ``MAX_WARNINGS``.

    One per text (the same failure remembered twice is said once).
    """
    pool = store.warnings(agent) if zones else []
    if working is not None:
        pool += [
            trace_as_entry(t) for t in working.traces
            if t.kind is TraceKind.ACTION and t.success is False
        ]
    if not pool:
        return []
    probes = [q] + ([ctx_vec] if ctx_vec is not None else [])
    matrix = np.stack([np.asarray(w.embedding, dtype=np.float32) for w in pool])
    sims = np.max(np.stack([matrix @ p for p in probes]), axis=0)
    hits = []
    for i, w in enumerate(pool):
        overlap = bool(entities & set(w.entities))
        if sims[i] >= cfg.warning_similarity or (overlap and sims[i] >= cfg.warning_similarity -
                                                 cfg.warning_overlap_margin):
            hits.append((float(sims[i]), w))
    hits.sort(key=lambda h: -h[0])
    return list({said(w, cfg.language): w for _, w in reversed(hits)}.values())[::-1][
        :MAX_WARNINGS]
