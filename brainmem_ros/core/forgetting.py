"""Forgetting: the rule that decides what memory lets go of.

decay        importance(t) = importance_at_last_access * exp(-(t - last_access) / decay_tau_s).
             Computed, never written back: the stored value is the one at the last access, so a
             forgetting pass is one vectorised evaluation over the whole store, and decay cannot
             compound by running the pass more often.
supersession a newer fact about the same subject and functional predicate closes the older one's
             validity interval (``store/supersession.py``); history is kept, retrieval skips it.
pruning      entries whose decayed importance falls below ``archive_below`` move to the archive
             (or are deleted when ``hard_delete``); warnings and procedures age like anything else.
capacity     beyond ``capacity_per_agent`` entries, an agent's least important are evicted.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from brainmem_ros.core.config import ForgettingSection

__all__ = ["decayed_importance", "ForgettingReport", "forget"]


def decayed_importance(importance, last_access, now: float, tau_s: float):
    elapsed = np.maximum(0.0, now - np.asarray(last_access, dtype=np.float64))
    return np.asarray(importance, dtype=np.float64) * np.exp(-elapsed / tau_s)


@dataclass
class ForgettingReport:
    decayed: int = 0
    archived: int = 0
    deleted: int = 0
    evicted: int = 0
    seconds: float = 0.0


def forget(store, settings: ForgettingSection, now: float, agent_id: str = "") -> ForgettingReport:
    """One pass over the store (or one agent's part of it): decay, prune, cap."""
    start = time.perf_counter()
    rowids, importance, last_access, agent_index, agents = store.decay_inputs()
    if agent_id:
        if agent_id not in agents:
            return ForgettingReport(seconds=time.perf_counter() - start)
        mine = agent_index == agents.index(agent_id)
        rowids, importance, last_access, agent_index = rowids[mine], importance[mine], last_access[
            mine], agent_index[mine]
    current = decayed_importance(importance, last_access, now, settings.decay_tau_s)
    prune = current < settings.archive_below
    evict = np.zeros(len(rowids), dtype=bool)
    counts = np.bincount(agent_index[~prune], minlength=len(agents)) if len(rowids) else np.zeros(
        0, int)
    for index in np.flatnonzero(counts > settings.capacity_per_agent):
        members = np.flatnonzero((agent_index == index) & ~prune)
        excess = len(members) - settings.capacity_per_agent
        evict[members[np.argsort(current[members], kind="stable")[:excess]]] = True
    report = ForgettingReport(decayed=len(rowids))
    pruned = rowids[prune]
    evicted = rowids[evict]
    store.archive_rows(pruned.tolist(), "decayed", settings.hard_delete)
    store.archive_rows(evicted.tolist(), "capacity", settings.hard_delete)
    if settings.hard_delete:
        report.deleted = len(pruned) + len(evicted)
    else:
        report.archived = len(pruned) + len(evicted)
    report.evicted = len(evicted)
    report.seconds = time.perf_counter() - start
    return report
