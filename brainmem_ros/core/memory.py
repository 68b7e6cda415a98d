"""BrainMemory: the whole memory cycle behind one object, with no ROS in sight.

Encode -> (working memory) -> consolidate -> (long-term memory) -> retrieve -> forget. The ROS
nodes hold one of these and only translate messages; tests and replay tools use it directly.
Thread-safe: one lock (working memory's) guards every agent's working memory, the store has its own.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from brainmem_ros.core.clock import Clock, wall_clock
from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.consolidation import ConsolidationReport, Consolidator
from brainmem_ros.core.embedding import Embedder, MiniLMEmbedder
from brainmem_ros.core.encoding import Encoder, EncodingContext, Event
from brainmem_ros.core.errors import InvalidRequest, StoreUnavailable
from brainmem_ros.core.extraction import Vocabulary, extract
from brainmem_ros.core.fleet import FleetSync, SharePolicy
from brainmem_ros.core.forgetting import ForgettingReport, decayed_importance, forget
from brainmem_ros.core.importance import after_outcome
from brainmem_ros.core.latency import LatencyWindow
from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.retrieval import RetrievalRequest, RetrievalResult, Retriever
from brainmem_ros.core.trace import Entry, Goal, GoalStatus, Trace, TraceKind, Zone
from brainmem_ros.core.store import IndexSettings
from brainmem_ros.core.validation import (check_agent, check_embedding, check_text,
                                          check_unit)
from brainmem_ros.core.working_memory import (AgentWorkingMemory, WorkingMemory, trace_from_json,
                                              trace_to_json)

__all__ = ["BrainMemory"]

log = logging.getLogger("brainmem_ros.core.memory")


class BrainMemory:

    def __init__(self, config: MemoryConfig | None = None, embedder: Embedder | None = None,
                 store_path: str | Path | None = None, clock: Clock = wall_clock):
        """Open the memory: the store, working memory and its journal, the model.

        ``clock`` is the robot's time (a node's clock under ROS); every stamp, recency and decay
        reads it.
        """
        self.config = config or MemoryConfig()
        self.clock = clock
        if store_path is not None:
            self.config = self.config.replace(**{"store.path": str(store_path)})
        self.embedder = embedder or MiniLMEmbedder.configured(self.config.embedding)
        s, fleet = self.config.store, self.config.fleet
        shares = SharePolicy(fleet.kinds, fleet.agents) if fleet.dsn else None
        self.store = LongTermStore(
            s.path, dim=self.embedder.dim,
            index=IndexSettings(self.embedder.dim, s.exact_below, s.hnsw_m, s.hnsw_ef_construction,
                                s.hnsw_ef_search, s.regraph_share, s.hnsw_ef_reference_rows,
                                s.hnsw_history_m, s.hnsw_history_ef_construction, s.hnsw_large_rows,
                                s.hnsw_large_m, s.ram_precision, s.rescore_factor),
            synchronous=s.synchronous,
            index_save_every=s.index_save_every, model_name=self.embedder.name,
            embedding_precision=s.embedding_precision, clock=clock, fixed_frame=s.fixed_frame,
            shares=shares)
        self.vocabulary = Vocabulary.with_extra(self.config.encoding.entities,
                                                self.config.encoding.places)
        snapshot = self.config.working.snapshot_path or f"{self.store.path}.working.json"
        self.working = WorkingMemory(self.config.working, Path(snapshot).expanduser(), clock)
        self._resume_traces()
        self.encoder = Encoder(self.embedder, self.vocabulary, self.config, clock)
        self.retriever = Retriever(self.config, self.store, self.embedder, self.vocabulary, clock)
        self.consolidator = Consolidator(self.config, self.store, self.embedder, clock)
        self._goal_vectors: dict[str, tuple[str, np.ndarray]] = {}
        self._finished: dict[str, Goal] = {}
        self._learned: dict[str, None] = {}  # ids of finished goals already learned from
        # What health reports: how long retrievals took lately, and when each pass last ran (the
        # robot's time) with what it did.
        self.retrieval_latency = LatencyWindow()
        self.passes: dict[str, tuple[float, dict]] = {}
        # Shared memories go to the fleet's server and come from it on a thread of their own.
        self.fleet: Optional[FleetSync] = None
        if fleet.dsn:
            self.fleet = FleetSync(self.store, fleet, self.embedder.name, self.embedder.dim, clock,
                                   self.config.encoding.functional_predicates,
                                   self.config.encoding.max_future_s)
            self.fleet.start()
        # The same lock as working memory's own: readers (the snapshot, get_working_memory) iterate
        # an agent's traces under it, so ingest and consolidation must change them under it too.
        self._lock = self.working.lock

    def _resume_traces(self) -> None:
        """Bring working traces back from the journal at start.

        Working traces come back from the journal (complete up to the last acknowledged ingest), not
        from the snapshot (which may lag); a store from before the journal adopts the snapshot's.
        """
        rows = self.store.journal()
        if not rows:
            legacy = [t for wm in self.working.agents.values() for t in wm.traces]
            self.store.journal_write([(t.id, t.agent_id, t.timestamp, trace_to_json(t))
                                      for t in legacy])
            return
        by_agent: dict[str, list[Trace]] = {}
        for _id, agent, text in rows:
            by_agent.setdefault(agent, []).append(trace_from_json(text))
        for wm in self.working.agents.values():
            if wm.agent_id not in by_agent:
                wm.traces.clear()
        for agent, traces in by_agent.items():
            wm = self.working.agent(agent)
            known = {t.id for t in wm.traces}
            wm.traces.clear()
            wm.traces.extend(traces)
            for trace in traces:  # what the snapshot missed updates the entity states too
                if trace.id not in known:
                    for rel in trace.relations:
                        wm._observe(rel, trace)

    # -- encoding ------------------------------------------------------------------------------
    def encode(self, events: Sequence[Event]) -> list[Trace]:
        """Encode events into working memory (one batched embedding call); returns the traces."""
        return self.ingest(self.encoder.prepare(events))

    def ingest(self, traces: Sequence[Trace]) -> list[Trace]:
        """Take traces encoded elsewhere (encoder_node): score their importance, add them.

        A trace already held (same agent, stamp and text: a batch sent again because its
        acknowledgement was lost) is answered with the one held, not added twice.
        """
        for trace in traces:
            self._validate_trace(trace)
        with self._lock:
            held = {(t.agent_id, t.timestamp, t.text): t
                    for agent in {t.agent_id for t in traces}
                    for t in self.working.agent(agent).traces}
            again = [held.get((t.agent_id, t.timestamp, t.text)) for t in traces]
            if all(again):
                return again
            traces = [t for t, old in zip(traces, again) if old is None]
            traces = self.encoder.score(traces, self._context_for)
            evicted: list[str] = []
            for trace in traces:
                wm = self.working.agent(trace.agent_id)
                if len(wm.traces) == wm.traces.maxlen:
                    evicted.append(wm.traces[0].id)
                wm.add(trace)
            try:  # on disk before it is acknowledged
                self.store.journal_write([(t.id, t.agent_id, t.timestamp, trace_to_json(t))
                                          for t in traces], evicted)
            except StoreUnavailable:
                for trace in traces:
                    self.working.agent(trace.agent_id).take({trace.id})
                raise
            due = {
                t.agent_id
                for t in traces if self.config.consolidation.every_n_traces and self.working.agent(
                    t.agent_id).new_since_consolidation >= self.config.consolidation.every_n_traces
            }
        for agent_id in due:
            self.consolidate(agent_id)
        added = iter(traces)
        return [old or next(added) for old in again]

    def _validate_trace(self, trace: Trace) -> None:
        check_agent(trace.agent_id)
        check_text(trace.text, "text", self.config.encoding.max_text_chars)
        check_embedding(trace.embedding, self.embedder.dim)
        check_unit(trace.confidence, "confidence")
        now = self.clock()
        self.encoder.check_place_and_time(trace.position, trace.frame, trace.timestamp, now)
        trace.timestamp = trace.timestamp or now
        if trace.position is not None and not trace.frame:
            trace.frame = self.config.store.fixed_frame

    def observe(self, agent_id: str, text: str, **fields) -> Trace:
        return self.encode([Event(agent_id, TraceKind.OBSERVATION, text, **fields)])[0]

    def act(self, agent_id: str, action: str, success: bool, result: str = "", **fields) -> Trace:
        text = f"{action}: {result}" if result else action
        return self.encode(
            [Event(agent_id, TraceKind.ACTION, text, action=action, success=success, **fields)])[0]

    def _context_for(self, agent_id: str) -> EncodingContext:
        wm = self.working.agent(agent_id)
        goal = wm.active_goal()
        goal_entities, goal_vec = set(), None
        if goal is not None:
            goal_entities = set(extract(goal.description, self.vocabulary).entities)
            goal_vec = self._goal_vector(goal)
        known = self.store.current_facts(agent_id, list(wm.environment)[-64:])
        facts = {k: v[0] for k, v in known.items()}
        facts.update(wm.known_facts())
        recent = np.stack([t.embedding for t in list(wm.traces)[-50:]]) if wm.traces else None
        return EncodingContext(goal_entities, goal_vec, facts, recent)

    def _goal_vector(self, goal: Goal) -> np.ndarray:
        cached = self._goal_vectors.get(goal.id)
        if cached is None or cached[0] != goal.description:
            cached = (goal.description, self.embedder.embed([goal.description])[0])
            self._goal_vectors[goal.id] = cached
        return cached[1]

    # -- direct storage ------------------------------------------------------------------------
    def store_entries(self, entries: Sequence[Entry]) -> list[str]:
        """Store facts, procedures or goals directly; entries without an embedding are embedded."""
        if not entries:
            raise InvalidRequest("no entries to store")
        missing = []
        now = self.clock()
        for entry in entries:
            check_agent(entry.agent_id)
            check_text(entry.content, "content", self.config.encoding.max_text_chars)
            self.encoder.check_place_and_time(entry.position, entry.frame, entry.created, now)
            if entry.position is not None and not entry.frame:
                entry.frame = self.config.store.fixed_frame
            if not isinstance(entry.zone, Zone) or entry.zone is Zone.WORKING:
                raise InvalidRequest(
                    f"zone must be one of episodic, semantic, procedural, goal; got {entry.zone!r}")
            if entry.embedding is None or len(entry.embedding) == 0:
                missing.append(entry)
            if not entry.entities or not entry.relations:
                found = extract(entry.content, self.vocabulary)
                entry.entities = entry.entities or found.entities
                entry.relations = entry.relations or found.relations
        if missing:
            for entry, vector in zip(missing, self.embedder.embed([e.content for e in missing])):
                entry.embedding = vector
        return self.store.add(entries, supersede=tuple(self.config.encoding.functional_predicates))

    # -- retrieval -----------------------------------------------------------------------------
    def retrieve(self, request: RetrievalRequest,
                 query_vectors: Optional[np.ndarray] = None) -> RetrievalResult:
        started = time.perf_counter()
        wm = self.working.agents.get(request.agent_id) if request.agent_id else None
        result = self.retriever.retrieve(request, wm.view() if wm is not None else None,
                                         query_vectors)
        self.retrieval_latency.add(time.perf_counter() - started)
        return result

    # -- consolidation and forgetting ----------------------------------------------------------
    def consolidate(self, agent_id: str = "", goal: Optional[Goal] = None,
                    goal_id: str = "") -> ConsolidationReport:
        """Consolidate one agent (or all).

        With a finished goal (or its id), learn from its outcome.
        """
        if goal_id and goal is None:
            goal = self._finished.get(goal_id)
            if goal is None and goal_id in self._learned:
                return ConsolidationReport()  # asked twice (a planner and consolidation_node)
            if goal is None:
                raise InvalidRequest(f"goal {goal_id!r} has not finished")
            agent_id = agent_id or goal.agent_id
        if goal is not None:
            self._finished.pop(goal.id, None)
            self._learned[goal.id] = None
            while len(self._learned) > 1024:
                self._learned.pop(next(iter(self._learned)))
        total = ConsolidationReport()
        agents = [agent_id] if agent_id else list(self.working.agents)
        for agent in agents:
            with self._lock:
                wm = self.working.agent(agent)
                report = self.consolidator.consolidate(
                    wm, goal if goal and goal.agent_id == agent else None)
            for name in vars(total):
                setattr(total, name, getattr(total, name) + getattr(report, name))
        self.working.save()
        self.passes["consolidation"] = (self.clock(), dict(vars(total)))
        return total

    def forget(self, agent_id: str = "", decay: bool = True, ids: Sequence[str] = (),
               entities: Sequence[str] = ()) -> ForgettingReport:
        report = ForgettingReport()
        if ids or entities:
            check_agent(agent_id)
            report.deleted = self.store.delete(agent_id, ids=ids, entities=entities)
        if decay:
            swept = forget(self.store, self.config.forgetting, self.clock(), agent_id=agent_id)
            report.decayed, report.archived = swept.decayed, swept.archived
            report.evicted = swept.evicted
            report.deleted += swept.deleted
            report.seconds = swept.seconds
            self.passes["forgetting"] = (self.clock(), dict(vars(report)))
        return report

    # -- goals and outcomes --------------------------------------------------------------------
    def push_goal(self, agent_id: str, description: str, temporary: bool = False, goal_id: str = "",
                  parent_id: str = "", fresh_world: bool = False) -> Goal:
        """Push a goal.

        ``fresh_world``: the world was reset under the agent (a new episode): the entity snapshot
        (where things are, what is held) goes; long-term memory stays.
        """
        check_agent(agent_id)
        check_text(description, "goal description", self.config.encoding.max_text_chars)
        with self._lock:
            if fresh_world:
                self.working.agent(agent_id).environment.clear()
            goal = self.working.agent(agent_id).push(
                Goal(goal_id, description, agent_id, parent_id, temporary=temporary))
        self.store.upsert_goal(goal)
        self.working.save()
        return goal

    def finish_goal(self, agent_id: str, goal_id: str = "",
                    status: Optional[GoalStatus] = GoalStatus.COMPLETED,
                    consolidate: bool = True) -> tuple[Goal, ConsolidationReport]:
        """Complete, fail or (status None) pop a goal.

        Completion and failure trigger consolidation.
        """
        check_agent(agent_id)
        with self._lock:
            goal = self.working.agent(agent_id).finish(goal_id, status)
        self.store.upsert_goal(goal)
        report = ConsolidationReport()
        if status in (GoalStatus.COMPLETED, GoalStatus.FAILED):
            if consolidate:
                report = self.consolidate(agent_id, goal)
            else:  # someone else (the consolidation node) will ask for it by id
                self._finished[goal.id] = goal
                while len(self._finished) > 256:
                    self._finished.pop(next(iter(self._finished)))
        self.working.save()
        return goal, report

    def report_outcome(self, agent_id: str, success: bool, detail: str = "", action: str = "",
                       goal_id: str = "", entities: Sequence[str] = ()) -> tuple[int, str]:
        """Raise the importance of memories about the involved entities; remember a failure."""
        check_agent(agent_id)
        if not (detail or action or goal_id or entities):
            raise InvalidRequest(
                "an outcome report needs a detail, an action, a goal_id or entities")
        names = list(entities) + extract(f"{action}. {detail}", self.vocabulary).entities
        names = list(dict.fromkeys(n for n in names if n))
        updated = 0
        if names:
            hits = self.store.entity_entries(names, agent_id,
                                             [Zone.EPISODIC, Zone.SEMANTIC, Zone.PROCEDURAL], 200)
            found = self.store.entries_by_rowid([r for r, _ in hits])
            mine = [e for e in found.values() if e.agent_id == agent_id]
            if mine:
                now_values = decayed_importance(np.array([e.importance for e in mine]),
                                                np.array([e.last_access for e in mine]),
                                                self.clock(), self.config.forgetting.decay_tau_s)
                updated = self.store.set_importance([e.id for e in mine],
                                                    after_outcome(now_values, success).tolist())
        warning_id = ""
        if not success:
            text = (f"{action} failed" if action else "a step failed") + (f": {detail}"
                                                                          if detail else "")
            vector = self.embedder.embed([text])[0]
            warning_id = self.store.add([
                Entry(agent_id=agent_id, zone=Zone.EPISODIC, content=text, embedding=vector,
                      entities=names, importance=self.config.consolidation.warning_importance,
                      source="outcome", warning=True)
            ])[0]
        return updated, warning_id

    def working_memory(self, agent_id: str) -> AgentWorkingMemory:
        check_agent(agent_id)
        return self.working.agent(agent_id)

    @property
    def revision(self) -> int:
        """Changes written so far (long-term memory and the working-memory journal)."""
        return self.store.revision

    def flush(self) -> None:
        """Put on disk what lives only in RAM: access counts, the vector graphs, working memory."""
        self.working.save()
        self.store.flush()
        self.store.save_index()

    def close(self) -> None:
        if self.fleet is not None:
            self.fleet.stop()
        self.working.save()
        self.store.close()

    def __enter__(self) -> "BrainMemory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
