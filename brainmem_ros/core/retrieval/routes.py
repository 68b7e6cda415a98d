"""The recall routes: where candidates come from, and the evidence each route gives for them.

Over long-term memory, each route filtered by agent, zone and time range before it takes its best:
  vector    FAISS nearest neighbours of the query (evidence: the similarity, see ``rerank``);
  lexical   FTS5 bm25 over words rare among the caller's memories (exact names embeddings blur);
  graph     memories of the entities of the query (hop 0) and of the context (hop 1), then of
            entities one or two hops out through current location facts (butter -> fridge);
  spatial   memories within ``radius`` of a given position.
Over working memory (what was seen a moment ago, not yet consolidated):
  temporal  the most recent actions, newest strongest;
  working   the traces most similar to the query, and the same lexical and spatial evidence.

Evidence is a number in [0, 1]; every formula is written once, here.
"""
from __future__ import annotations

import heapq
import math
from typing import Callable, Sequence

import numpy as np

from brainmem_ros.core.config import RetrievalSection
from brainmem_ros.core.extraction import HELD
from brainmem_ros.core.retrieval.candidates import (Candidate, query_terms, trace_as_entry,
                                                    trace_terms)
from brainmem_ros.core.retrieval.request import RetrievalRequest
from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.trace import Trace, Zone
from brainmem_ros.core.working_memory import AgentWorkingMemory

__all__ = [
    "long_term_candidates", "working_candidates", "lexical_evidence", "spatial_evidence",
    "temporal_evidence", "GRAPH_EVIDENCE"
]

# Graph evidence by hop: the query's own entities, the context's (and first neighbours), further
# out.
GRAPH_EVIDENCE = {0: 0.8, 1: 0.62, 2: 0.48}


def lexical_evidence(share: float) -> float:
    """Lexical evidence from the share of the best match (bm25 score, or words in common)."""
    return 0.35 + 0.45 * share


def spatial_evidence(distance: float, radius: float) -> float:
    """Spatial evidence: strongest at the query's position, weakest at the radius."""
    return 0.45 + 0.45 * (1.0 - distance / radius)


def temporal_evidence(age: int) -> float:
    """Temporal evidence of the ``age``-th most recent action (0: the last one)."""
    return 0.3 + 0.3 * math.exp(-age / 3.0)


def long_term_candidates(store: LongTermStore, cfg: RetrievalSection, q: np.ndarray,
                         req: RetrievalRequest, zones: Sequence[Zone],
                         query_entities: Sequence[str], context_entities: Sequence[str],
                         lap: Callable[[str], None]) -> dict[object, Candidate]:
    """Candidates from the four long-term routes, keyed ("lt", rowid); ``lap`` times each route."""
    found: dict[int, dict] = {}

    def add(rowid: int, route: str, value: float) -> None:
        evidence = found.setdefault(rowid, {})
        evidence[route] = max(evidence.get(route, 0.0), value)

    agent = req.agent_id
    if cfg.vector_candidates:
        for rowid, sim in store.vector_search(q, agent, zones, cfg.vector_candidates, req.since,
                                              req.until, req.include_superseded):
            add(rowid, "vector", sim)
    lap("vector")
    lexical = store.lexical_search(query_terms(req.query), agent, zones, cfg.lexical_candidates,
                                   req.include_superseded, cfg.lexical_max_df, req.since, req.until)
    if lexical:
        best = max(s for _, s in lexical) or 1.0
        for rowid, s in lexical:
            add(rowid, "lexical", lexical_evidence(max(0.0, s) / best))
    lap("lexical")
    for rowid, hop in _graph(store, cfg, agent, zones, query_entities, context_entities, req):
        add(rowid, "graph", GRAPH_EVIDENCE[min(hop, 2)])
    lap("graph")
    if req.position is not None:
        for rowid, d in store.spatial_search(agent, zones, req.position, req.frame, req.radius,
                                             cfg.vector_candidates, req.include_superseded,
                                             req.since, req.until):
            add(rowid, "spatial", spatial_evidence(d, req.radius))
    candidates: dict[object, Candidate] = {}
    rowids, vectors, scoring = store.scoring_inputs(list(found))
    for rowid, vector, values in zip(rowids, vectors, scoring):
        created = values[2]
        if (req.since and created < req.since) or (req.until and created > req.until):
            continue
        candidates[("lt", rowid)] = Candidate(None, dict(found[rowid]), rowid, vector,
                                              tuple(values))
    lap("fetch")
    return candidates


def _graph(store: LongTermStore, cfg: RetrievalSection, agent: str, zones: Sequence[Zone],
           query_entities: Sequence[str], context_entities: Sequence[str],
           req: RetrievalRequest) -> list[tuple[int, int]]:
    """(rowid, hop) of the memories graph recall reaches, nearest entities first."""
    if cfg.graph_hops < 0 or cfg.graph_candidates <= 0:
        return []
    hop_of: dict[str, int] = {}
    for name in query_entities:
        hop_of.setdefault(name, 0)
    for name in context_entities:
        hop_of.setdefault(name, 1)
    frontier = list(hop_of)[:cfg.graph_fanout]
    for hop in range(1, cfg.graph_hops + 1):
        if not frontier:
            break
        nxt = store.neighbours(frontier, agent, exclude=[HELD, *hop_of], fanout=cfg.graph_fanout)
        frontier = [n for n in nxt if n not in hop_of]
        for name in frontier:
            hop_of[name] = hop
    if not hop_of:
        return []
    # Nearest entities first (dicts keep insertion order: query, context, hop 1, hop 2).
    reached = list(hop_of)[:2 * cfg.graph_fanout]
    return [(rowid, hop_of[entity]) for rowid, entity in store.entity_entries(
        reached, agent, zones, cfg.graph_candidates, req.include_superseded, cfg.graph_per_entity,
        req.since, req.until)]


def working_candidates(working: AgentWorkingMemory, cfg: RetrievalSection, q: np.ndarray,
                       req: RetrievalRequest, use_working: bool, temporal: bool,
                       candidates: dict[object, Candidate]) -> None:
    """Add working memory's candidates, keyed ("wm", trace id), to ``candidates``."""

    def candidate(trace: Trace) -> Candidate:
        return candidates.setdefault(("wm", trace.id), Candidate.of_entry(trace_as_entry(trace)))

    if temporal and cfg.temporal_actions:
        recent = list(working.actions)[-cfg.temporal_actions:]
        for age, trace in enumerate(reversed(recent)):
            if _in_time(trace, req):
                candidate(trace).add("temporal", temporal_evidence(age))
    if not use_working or not working.traces:
        return
    traces = [t for t in working.traces if _in_time(t, req)]
    if not traces:
        return
    matrix = np.stack([t.embedding for t in traces])
    sims = matrix @ q
    for index in np.argsort(-sims)[:cfg.vector_candidates]:
        candidate(traces[int(index)]).add("working", float(sims[index]))
    terms = set(query_terms(req.query))
    if terms and cfg.lexical_candidates:
        # As many as long-term lexical recall offers, most words in common first, then the newest:
        # a working memory full of one kind of observation shares a word with nearly every query
        # and would otherwise enter every trace into the rerank.
        overlaps = [(len(hit), age, trace) for age, trace in enumerate(reversed(traces))
                    if (hit := terms & trace_terms(trace.text))]
        for shared, _, trace in heapq.nsmallest(cfg.lexical_candidates, overlaps, key=lambda o:
                                                (-o[0], o[1])):
            candidate(trace).add("lexical", lexical_evidence(shared / len(terms)))
    if req.position is not None:
        for trace in traces:
            if trace.position is not None and trace.frame == req.frame:
                d = math.dist(trace.position, req.position)
                if d <= req.radius:
                    candidate(trace).add("spatial", spatial_evidence(d, req.radius))


def _in_time(trace: Trace, req: RetrievalRequest) -> bool:
    return not (req.since and trace.timestamp < req.since) and not (req.until
                                                                    and trace.timestamp > req.until)
