"""Retrieval: everything the planner should know right before its next action, in one call.

The pipeline, in order:
  1. validate  refuse a bad request before anything is read (``request``);
  2. embed     the query and the context (the goal, when the caller gives none), cached;
  3. recall    candidates from the routes over what the caller may see: vector, lexical, graph and
               spatial over long-term memory, temporal and working over working memory (``routes``);
  4. rank      fuse each memory's evidence into one score, filter, drop duplicates (``rerank``);
  5. warn      past failures resembling the current goal or query (``warnings``);
  6. record    access counts and importance of what is returned;
  7. format    the memory prompt (``prompt``).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Optional

import numpy as np

from brainmem_ros.core.clock import Clock, wall_clock
from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.embedding import Embedder
from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.extraction import Vocabulary, extract
from brainmem_ros.core.importance import after_access
from brainmem_ros.core.prompt import TaskState, render, said
from brainmem_ros.core.retrieval.candidates import Candidate
from brainmem_ros.core.retrieval.request import RetrievalRequest, RetrievalResult, validate
from brainmem_ros.core.retrieval.rerank import rank
from brainmem_ros.core.retrieval.routes import long_term_candidates, working_candidates
from brainmem_ros.core.retrieval.warnings import warnings_for
from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.trace import Zone
from brainmem_ros.core.working_memory import AgentWorkingMemory

__all__ = ["Retriever"]

_EMBEDDING_CACHE = 512  # texts: a planner asks with the same context (its goal) again and again


class Retriever:
    """The retrieval pipeline over one store; safe to call from several threads at once."""

    def __init__(self, config: MemoryConfig, store: LongTermStore, embedder: Embedder,
                 vocabulary: Vocabulary,
                 clock: Clock = wall_clock):
        self.clock = clock
        self.config = config
        self.store = store
        self.embedder = embedder
        self.vocabulary = vocabulary
        self._pattern = vocabulary.pattern()
        self._cache: dict[str, np.ndarray] = {}
        self._cache_lock = threading.Lock()

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embed with a small cache."""
        with self._cache_lock:
            found = {t: self._cache[t] for t in texts if t in self._cache}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            vectors = self.embedder.embed(missing)
            with self._cache_lock:
                for text, vector in zip(missing, vectors):
                    self._cache[text] = found[text] = vector
                while len(self._cache) > _EMBEDDING_CACHE:
                    self._cache.pop(next(iter(self._cache)))
        return np.stack([found[t] for t in texts])

    def validate(self, req: RetrievalRequest) -> tuple[list[Zone], bool, int]:
        return validate(req, self.config)

    def retrieve(self, req: RetrievalRequest, working: Optional[AgentWorkingMemory],
                 query_vectors: Optional[np.ndarray] = None,
                 now: Optional[float] = None) -> RetrievalResult:
        zones, use_working, top_k = validate(req, self.config)
        cfg = self.config.retrieval
        now = now or self.clock()
        req = dataclasses.replace(req, frame=req.frame or self.config.store.fixed_frame)
        if req.position is not None:
            self._check_frame_known(req.agent_id, req.frame, working)
        clock = _Laps()
        if not req.context and working is not None and working.active_goal() is not None:
            req = dataclasses.replace(req, context=working.active_goal().description)
        if query_vectors is None:
            query_vectors = self._embed([req.query] + ([req.context] if req.context else []))
        q = query_vectors[0]
        ctx_vec = query_vectors[1] if len(query_vectors) > 1 else None
        clock.lap("embed")

        query_entities = extract(req.query, self.vocabulary, self._pattern).entities
        context_entities = extract(req.context, self.vocabulary,
                                   self._pattern).entities if req.context else []
        candidates: dict[object, Candidate] = {}
        if zones:
            candidates = long_term_candidates(self.store, cfg, q, req, zones, query_entities,
                                              context_entities, clock.lap)
        # Temporal recall (recent actions) belongs to working memory: skipped when the caller named
        # zones without it.
        temporal = not req.zones or Zone.WORKING.value in req.zones
        if working is not None:
            working_candidates(working, cfg, q, req, use_working, temporal, candidates)
        clock.lap("working")

        ranked = rank(candidates, q, ctx_vec, working, req, top_k, now, self.config, self.store)
        recalls = [recall for recall, _ in ranked]
        clock.lap("rank")
        warned = warnings_for(self.store, cfg, req.agent_id, q, ctx_vec, working,
                              set(query_entities) | set(context_entities), zones)
        warnings = [said(w, cfg.language) for w in warned]
        clock.lap("warn")

        stored = [(rowid, recall.importance_now) for recall, rowid in ranked if rowid is not None]
        if stored:
            self.store.record_access([r for r, _ in stored],
                                     after_access(np.array([v for _, v in stored]),
                                                  self.config.importance).tolist(), now)
        prompt = render(recalls, warnings, self.task_state(working), now, cfg.language)
        clock.lap("format")
        return RetrievalResult(recalls, prompt, warnings, clock.laps, warned)

    def _check_frame_known(self, agent_id: str, frame: str,
                           working: Optional[AgentWorkingMemory]) -> None:
        """Refuse a spatial query in a frame nothing was remembered in.

        There is no tf2 here, so positions are compared only within one frame; a query in a frame
        no memory has would silently find nothing.
        """
        store = self.config.store
        if frame == store.fixed_frame or frame in store.frames:
            return
        known = self.store.frames(agent_id)
        if working is not None:
            known |= {t.frame for t in working.traces if t.position is not None}
        if frame not in known:
            frames = ", ".join(sorted({store.fixed_frame, *store.frames, *known} - {""}))
            raise InvalidRequest(f"unknown frame {frame!r}: no memory has a position in it (frames "
                                 f"known: {frames}); positions are compared only within one frame")

    def task_state(self, working: Optional[AgentWorkingMemory]) -> TaskState:
        """Build the prompt's task section from working memory.

        The prompt's task section: the main goal, the interruption, the steps done, what is held.
        """
        if working is None or not working.stack:
            return TaskState(holding=working.holding() if working else ())
        main, active = working.main_goal(), working.active_goal()
        temporary = [g for g in working.stack if g.temporary]
        resume = next((g for g in reversed(working.stack) if not g.temporary), main)
        return TaskState(
            main_goal=main.description,
            active_goal=resume.description if temporary else active.description,
            interruption=temporary[-1].description if temporary else "",
            done_steps=self._progress(working.done_steps(resume.id if temporary else active.id)),
            holding=working.holding())

    def _progress(self, steps: list[str]) -> list[str]:
        cfg = self.config.working
        shown = [s for s in steps if s.split() and s.split()[0].lower() not in cfg.routine_verbs]
        return shown[-cfg.done_shown:] if cfg.done_shown else []


class _Laps:
    """Milliseconds spent in each stage of one retrieval (``RetrievalResult.timings_ms``)."""

    def __init__(self):
        self.t = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + (now - self.t) * 1000.0
        self.t = now
