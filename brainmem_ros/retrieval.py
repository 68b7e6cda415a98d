"""Retrieval: everything the planner should know right before its next action, in one call.

The pipeline, in order:
  1. recall   candidates from five routes over what the caller may see (its own and shared entries),
              each filtered by zone, agent and time range before it takes its best:
              vector (FAISS), lexical (FTS5 bm25: exact names and words rare among those entries),
              graph (entities of query and context, then 1-2 hops through current facts),
              temporal (recent actions in working memory), spatial (distance to a given position),
              and working memory itself when asked (what was seen a second ago, not yet consolidated);
  2. fuse     one candidate per memory, with every route's evidence; relevance is the strongest
              evidence plus a bonus for each further route that agrees;
  3. filter   superseded facts out (in long-term memory, and facts contradicted by what working memory
              has seen since), relevance threshold, caller's min_score;
  4. rerank   score = weighted relevance, decayed importance, recency and source confidence;
  5. dedup    near-duplicates of a better candidate dropped;
  6. warn     past failures resembling the current goal or query announced first;
  7. record   access counts and importance of what is returned;
  8. format   the memory prompt.
"""
from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from brainmem_ros.config import MemoryConfig
from brainmem_ros.embedding import Embedder
from brainmem_ros.errors import InvalidRequest
from brainmem_ros.extraction import HELD, Vocabulary, extract
from brainmem_ros.forgetting import decayed_importance
from brainmem_ros.importance import after_access
from brainmem_ros.long_term import LongTermStore
from brainmem_ros.prompt import TaskState, render
from brainmem_ros.trace import LONG_TERM_ZONES, Entry, Position, Recall, Trace, TraceKind, Zone
from brainmem_ros.validation import check_agent, check_text
from brainmem_ros.working_memory import AgentWorkingMemory

__all__ = ["RetrievalRequest", "RetrievalResult", "Retriever", "parse_zones"]

_STOPWORDS = frozenset(
    "a an the is are was were be been am do does did i you we it its of in on at to from for with and or "
    "what where which who how when why next step now my your there here this that these those should "
    "can could would will shall me us them they he she his her have has had not no yes any some all "
    "after before then than into onto out up down about go get".split())
ROUTE_GRAPH_WEIGHT = {0: 0.8, 1: 0.62, 2: 0.48}
_ROUTES = ("vector", "working", "graph", "lexical", "temporal", "spatial")  # similarity-based routes first
_ROUTE_INDEX = {name: i for i, name in enumerate(_ROUTES)}


@dataclass
class RetrievalRequest:
    agent_id: str
    query: str
    context: str = ""
    zones: Sequence[str] = ()
    top_k: int = 0
    min_score: float = 0.0
    include_working: bool = True
    include_superseded: bool = False
    since: float = 0.0
    until: float = 0.0
    position: Optional[Position] = None
    radius: float = 0.0


@dataclass
class RetrievalResult:
    recalls: list[Recall]
    prompt: str
    warnings: list[str]
    timings_ms: dict = field(default_factory=dict)


@dataclass
class _Candidate:
    """One memory under consideration. Long-term ones carry only what scoring needs (from RAM);
    their entry is read from SQLite only if they make it to the final list."""

    entry: Optional[Entry]
    evidence: dict = field(default_factory=dict)
    rowid: Optional[int] = None
    vector: Optional[np.ndarray] = None
    scoring: tuple = ()  # importance, last_access, created, confidence

    @classmethod
    def of_entry(cls, entry: Entry) -> "_Candidate":
        return cls(entry, {}, None, np.asarray(entry.embedding, dtype=np.float32),
                   (entry.importance, entry.last_access, entry.created, entry.confidence))

    def add(self, route: str, value: float) -> None:
        self.evidence[route] = max(self.evidence.get(route, 0.0), float(value))


def parse_zones(zones: Sequence[str]) -> tuple[list[Zone], bool]:
    """Long-term zones to search, and whether working memory was named."""
    if not zones:
        return list(LONG_TERM_ZONES), False
    parsed = []
    for name in zones:
        try:
            parsed.append(Zone(name))
        except ValueError:
            raise InvalidRequest(f"unknown zone {name!r}; zones are "
                                 f"{', '.join(z.value for z in Zone)}") from None
    return [z for z in parsed if z is not Zone.WORKING], Zone.WORKING in parsed


def _terms(text: str) -> list[str]:
    words = re.findall(r"[\w'-]+", text.lower())
    return list(dict.fromkeys(w for w in words if len(w) > 1 and w not in _STOPWORDS))


@functools.lru_cache(maxsize=8192)
def _term_set(text: str) -> frozenset[str]:
    """Working-memory traces are matched against every query; their words are worked out once."""
    return frozenset(_terms(text))


def trace_as_entry(trace: Trace) -> Entry:
    return Entry(id=trace.id, agent_id=trace.agent_id, zone=Zone.WORKING, content=trace.text,
                 embedding=trace.embedding, entities=list(trace.entities), relations=list(trace.relations),
                 importance=trace.importance, created=trace.timestamp, last_access=trace.timestamp,
                 source=trace.source, confidence=trace.confidence, location=trace.location,
                 position=trace.position, warning=trace.success is False)


class Retriever:
    def __init__(self, config: MemoryConfig, store: LongTermStore, embedder: Embedder, vocabulary: Vocabulary):
        self.config = config
        self.store = store
        self.embedder = embedder
        self.vocabulary = vocabulary
        self._pattern = vocabulary.pattern()
        self._cache: dict[str, np.ndarray] = {}
        self._cache_lock = threading.Lock()

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embed with a small cache: a planner asks with the same context (its goal) again and again."""
        with self._cache_lock:  # the store node serves retrievals from several threads
            found = {t: self._cache[t] for t in texts if t in self._cache}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            vectors = self.embedder.embed(missing)
            with self._cache_lock:
                for text, vector in zip(missing, vectors):
                    self._cache[text] = found[text] = vector
                while len(self._cache) > 512:
                    self._cache.pop(next(iter(self._cache)))
        return np.stack([found[t] for t in texts])

    # -- validation ----------------------------------------------------------------------------
    def validate(self, req: RetrievalRequest) -> tuple[list[Zone], bool, int]:
        cfg = self.config.retrieval
        check_agent(req.agent_id)
        check_text(req.query, "query", self.config.encoding.max_text_chars)
        if req.context and len(req.context) > self.config.encoding.max_text_chars:
            raise InvalidRequest(f"context is longer than {self.config.encoding.max_text_chars} characters")
        top_k = req.top_k or cfg.top_k
        if not isinstance(top_k, int) or top_k < 1 or top_k > cfg.max_top_k:
            raise InvalidRequest(f"top_k must be within 1..{cfg.max_top_k} (0 means {cfg.top_k}), got {req.top_k}")
        if not (math.isfinite(req.min_score) and 0.0 <= req.min_score <= 1.0):
            raise InvalidRequest(f"min_score must be within [0, 1], got {req.min_score}")
        for name in ("since", "until"):
            value = getattr(req, name)
            if not math.isfinite(value) or value < 0:
                raise InvalidRequest(f"{name} must be a non-negative time, got {value}")
        if req.until and req.since and req.until < req.since:
            raise InvalidRequest("until must not be earlier than since")
        if req.position is not None:
            if not all(math.isfinite(c) for c in req.position):
                raise InvalidRequest("position contains NaN or infinite values")
            if not (math.isfinite(req.radius) and req.radius > 0):
                raise InvalidRequest(f"radius must be a positive distance when a position is given, got {req.radius}")
        zones, named_working = parse_zones(req.zones)
        return zones, named_working or (req.include_working and not req.zones), top_k

    # -- the pipeline --------------------------------------------------------------------------
    def retrieve(self, req: RetrievalRequest, working: Optional[AgentWorkingMemory],
                 query_vectors: Optional[np.ndarray] = None, now: Optional[float] = None) -> RetrievalResult:
        zones, use_working, top_k = self.validate(req)
        cfg = self.config.retrieval
        now = now or time.time()
        clock = _Clock()
        if not req.context and working is not None and working.active_goal() is not None:
            req = dataclasses.replace(req, context=working.active_goal().description)
        if query_vectors is None:
            query_vectors = self._embed([req.query] + ([req.context] if req.context else []))
        q = query_vectors[0]
        ctx_vec = query_vectors[1] if len(query_vectors) > 1 else None
        clock.lap("embed")

        query_entities = extract(req.query, self.vocabulary, self._pattern).entities
        context_entities = extract(req.context, self.vocabulary, self._pattern).entities if req.context else []
        candidates: dict[object, _Candidate] = {}
        long_term: dict[int, dict] = {}

        def lt(rowid: int, route: str, value: float) -> None:
            long_term.setdefault(rowid, {})
            long_term[rowid][route] = max(long_term[rowid].get(route, 0.0), value)

        agent = req.agent_id
        if zones:
            for rowid, sim in self.store.vector_search(q, agent, zones, cfg.vector_candidates, req.since,
                                                       req.until, req.include_superseded):
                lt(rowid, "vector", sim)
            clock.lap("vector")
            lexical = self.store.lexical_search(_terms(req.query), agent, zones, cfg.lexical_candidates,
                                                req.include_superseded, cfg.lexical_max_df, req.since, req.until)
            if lexical:
                best = max(s for _, s in lexical) or 1.0
                for rowid, s in lexical:
                    lt(rowid, "lexical", 0.35 + 0.45 * max(0.0, s) / best)
            clock.lap("lexical")
            self._graph(agent, zones, query_entities, context_entities, req, lt)
            clock.lap("graph")
            if req.position is not None:
                for rowid, d in self.store.spatial_search(agent, zones, req.position, req.radius,
                                                          cfg.vector_candidates, req.include_superseded,
                                                          req.since, req.until):
                    lt(rowid, "spatial", 0.45 + 0.45 * (1.0 - d / req.radius))
            rowids, vectors, scoring = self.store.scoring_inputs(list(long_term))
            for rowid, vector, values in zip(rowids, vectors, scoring):
                created = values[2]
                if (req.since and created < req.since) or (req.until and created > req.until):
                    continue
                candidates[("lt", rowid)] = _Candidate(None, dict(long_term[rowid]), rowid, vector, tuple(values))
            clock.lap("fetch")

        # Temporal recall (recent actions) belongs to working memory: skipped when the caller named
        # zones without it.
        temporal = not req.zones or Zone.WORKING.value in req.zones
        if working is not None:
            self._working(working, q, req, use_working, temporal, candidates, now)
        clock.lap("working")

        ranked = self._rank(candidates, q, ctx_vec, working, req, top_k, now)
        recalls = [recall for recall, _ in ranked]
        clock.lap("rank")
        warnings = self._warnings(agent, q, ctx_vec, working, set(query_entities) | set(context_entities), zones)
        clock.lap("warn")

        stored = [(rowid, recall.importance_now) for recall, rowid in ranked if rowid is not None]
        if stored:
            self.store.record_access([r for r, _ in stored],
                                     after_access(np.array([v for _, v in stored]), self.config.importance).tolist(),
                                     now)
        prompt = render(recalls, warnings, self.task_state(working), now, cfg.language)
        clock.lap("format")
        return RetrievalResult(recalls, prompt, warnings, clock.laps)

    def _graph(self, agent, zones, query_entities, context_entities, req, lt) -> None:
        cfg = self.config.retrieval
        if cfg.graph_hops < 0 or cfg.graph_candidates <= 0:
            return
        hop_of: dict[str, int] = {}
        for name in query_entities:
            hop_of.setdefault(name, 0)
        for name in context_entities:
            hop_of.setdefault(name, 1)
        frontier = list(hop_of)[: cfg.graph_fanout]
        for hop in range(1, cfg.graph_hops + 1):
            if not frontier:
                break
            nxt = self.store.neighbours(frontier, agent, exclude=[HELD, *hop_of], fanout=cfg.graph_fanout)
            frontier = [n for n in nxt if n not in hop_of]
            for name in frontier:
                hop_of[name] = hop
        if not hop_of:
            return
        # Nearest entities first (dicts keep insertion order: query, context, hop 1, hop 2).
        reached = list(hop_of)[: 2 * cfg.graph_fanout]
        for rowid, entity in self.store.entity_entries(reached, agent, zones, cfg.graph_candidates,
                                                       req.include_superseded, cfg.graph_per_entity,
                                                       req.since, req.until):
            lt(rowid, "graph", ROUTE_GRAPH_WEIGHT[min(hop_of[entity], 2)])

    def _working(self, working: AgentWorkingMemory, q, req, use_working, temporal, candidates, now) -> None:
        cfg = self.config.retrieval
        if temporal and cfg.temporal_actions:
            recent = list(working.actions)[-cfg.temporal_actions:]
            for age, trace in enumerate(reversed(recent)):
                if self._in_time_trace(trace, req):
                    cand = candidates.setdefault(("wm", trace.id), _Candidate.of_entry(trace_as_entry(trace)))
                    cand.add("temporal", 0.3 + 0.3 * math.exp(-age / 3.0))
        if not use_working or not working.traces:
            return
        traces = [t for t in working.traces if self._in_time_trace(t, req)]
        if not traces:
            return
        matrix = np.stack([t.embedding for t in traces])
        sims = matrix @ q
        for index in np.argsort(-sims)[: cfg.vector_candidates]:
            trace = traces[int(index)]
            cand = candidates.setdefault(("wm", trace.id), _Candidate.of_entry(trace_as_entry(trace)))
            cand.add("working", float(sims[index]))
        terms = set(_terms(req.query))
        if terms and cfg.lexical_candidates:
            # As many as long-term lexical recall offers, most words in common first, then the newest:
            # a working memory full of one kind of observation shares a word with nearly every query
            # and would otherwise enter every trace into the rerank (80 of 200 in the load test).
            overlaps = [(len(hit), age, trace) for age, trace in enumerate(reversed(traces))
                        if (hit := terms & _term_set(trace.text))]
            for shared, _, trace in heapq.nsmallest(cfg.lexical_candidates, overlaps, key=lambda o: (-o[0], o[1])):
                cand = candidates.setdefault(("wm", trace.id), _Candidate.of_entry(trace_as_entry(trace)))
                cand.add("lexical", 0.35 + 0.45 * shared / len(terms))
        if req.position is not None:
            for trace in traces:
                if trace.position is not None:
                    d = math.dist(trace.position, req.position)
                    if d <= req.radius:
                        cand = candidates.setdefault(("wm", trace.id), _Candidate.of_entry(trace_as_entry(trace)))
                        cand.add("spatial", 0.45 + 0.45 * (1.0 - d / req.radius))

    @staticmethod
    def _in_time_trace(trace: Trace, req: RetrievalRequest) -> bool:
        return not (req.since and trace.timestamp < req.since) and not (req.until and trace.timestamp > req.until)

    def _contradicted(self, entry: Entry, working: Optional[AgentWorkingMemory]) -> bool:
        """A fact (or working trace) all of whose functional relations something seen later replaced."""
        if working is None or entry.zone is Zone.PROCEDURAL or entry.zone is Zone.GOAL:
            return False
        functional = self.config.encoding.functional_predicates
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

    def _rank(self, candidates, q, ctx_vec, working, req, top_k, now) -> list[tuple[Recall, Optional[int]]]:
        if not candidates:
            return []
        cfg = self.config.retrieval
        cands = list(candidates.values())
        matrix = np.stack([c.vector for c in cands])
        values = np.array([c.scoring for c in cands], dtype=np.float64)
        sims = matrix @ q
        ctx_sims = matrix @ ctx_vec if ctx_vec is not None else np.zeros(len(cands), dtype=np.float32)
        imp = decayed_importance(values[:, 0], values[:, 1], now, self.config.forgetting.decay_tau_s)
        recency = np.exp(-np.maximum(0.0, now - values[:, 2]) / cfg.recency_tau_s)
        # Relevance: the strongest route's evidence (similarity-based routes count the similarity;
        # the others their own evidence, nudged up by similarity), plus a bonus per agreeing route.
        sim = np.maximum(sims, 0.8 * ctx_sims).astype(np.float64)
        evidence = np.full((len(cands), len(_ROUTES)), np.nan)
        for i, c in enumerate(cands):
            for route, value in c.evidence.items():
                evidence[i, _ROUTE_INDEX[route]] = value
        present = ~np.isnan(evidence)
        by_similarity = np.where(present[:, :2], sim[:, None], np.nan)
        nudged = evidence[:, 2:] + 0.25 * np.maximum(0.0, sim)[:, None] * (1.0 - evidence[:, 2:])
        strongest = np.fmax(np.nanmax(np.concatenate([by_similarity, nudged], axis=1), axis=1), sim)
        relevance = np.minimum(1.0, strongest + cfg.multi_route_bonus * (present.sum(axis=1) - 1))
        weights = np.array([cfg.w_relevance, cfg.w_importance, cfg.w_recency, cfg.w_confidence])
        weights = weights / weights.sum()
        score = weights[0] * relevance + weights[1] * imp + weights[2] * recency + weights[3] * values[:, 3]
        keep = relevance >= cfg.min_relevance
        if req.min_score:
            keep &= score >= req.min_score
        # Ties (common with old recorded runs, where recency is ~0 for everything) go to the newer memory.
        order = [int(i) for i in np.lexsort((-values[:, 2], -np.round(score, 6))) if keep[i]]

        chosen: list[int] = []
        seen_text = set()
        step = max(2 * top_k, 8)
        for start in range(0, len(order), step):
            window = order[start:start + step]
            missing = [cands[i].rowid for i in window if cands[i].entry is None]
            if missing:
                fetched = self.store.entries_by_rowid(missing)
                for i in window:
                    if cands[i].entry is None:
                        cands[i].entry = fetched.get(cands[i].rowid)
            for i in window:
                entry = cands[i].entry
                if entry is None or (not req.include_superseded and self._contradicted(entry, working)):
                    continue
                text = re.sub(r"\W+", " ", entry.content.lower()).strip()
                if text in seen_text:
                    continue
                if chosen and float(np.max(matrix[chosen] @ matrix[i])) >= cfg.duplicate_similarity:
                    continue
                chosen.append(i)
                seen_text.add(text)
                if len(chosen) == top_k:
                    break
            if len(chosen) == top_k:
                break
        return [(Recall(cands[i].entry, float(score[i]), float(relevance[i]), sorted(cands[i].evidence),
                        float(imp[i])), cands[i].rowid) for i in chosen]

    def _warnings(self, agent, q, ctx_vec, working, entities, zones) -> list[str]:
        """Past failures resembling what the agent is about to do, most similar first, at most 3."""
        cfg = self.config.retrieval
        pool = self.store.warnings(agent) if zones else []
        if working is not None:
            pool += [trace_as_entry(t) for t in working.traces if t.kind is TraceKind.ACTION and t.success is False]
        if not pool:
            return []
        probes = [q] + ([ctx_vec] if ctx_vec is not None else [])
        matrix = np.stack([np.asarray(w.embedding, dtype=np.float32) for w in pool])
        sims = np.max(np.stack([matrix @ p for p in probes]), axis=0)
        hits = []
        for i, w in enumerate(pool):
            overlap = bool(entities & set(w.entities))
            if sims[i] >= cfg.warning_similarity or (overlap and sims[i] >= cfg.warning_similarity - 0.15):
                hits.append((float(sims[i]), w.content))
        hits.sort(key=lambda h: -h[0])
        return list(dict.fromkeys(text for _, text in hits))[:3]

    def task_state(self, working: Optional[AgentWorkingMemory]) -> TaskState:
        if working is None or not working.stack:
            return TaskState(holding=working.holding() if working else ())
        main, active = working.main_goal(), working.active_goal()
        temporary = [g for g in working.stack if g.temporary]
        resume = next((g for g in reversed(working.stack) if not g.temporary), main)
        return TaskState(main_goal=main.description,
                         active_goal=resume.description if temporary else active.description,
                         interruption=temporary[-1].description if temporary else "",
                         done_steps=self._progress(working.done_steps(resume.id if temporary else active.id)),
                         holding=working.holding())


    def _progress(self, steps: list[str]) -> list[str]:
        cfg = self.config.working
        shown = [s for s in steps if s.split() and s.split()[0].lower() not in cfg.routine_verbs]
        return shown[-cfg.done_shown:] if cfg.done_shown else []


class _Clock:
    def __init__(self):
        self.t = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + (now - self.t) * 1000.0
        self.t = now
