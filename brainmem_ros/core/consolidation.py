"""Consolidation: what moves from working memory into long-term memory, and in which form.

  threshold   working traces at or above ``consolidation.threshold`` importance are kept long-term;
              the rest stay in (bounded) working memory until they fall out of it.
  episodes    each kept trace becomes an episodic memory (when, where, what, outcome).
  facts       each location/state relation becomes a semantic fact; a fact equal to the current one
              strengthens it, a different one supersedes it (see ``long_term``).
  warnings    a failed action or goal becomes a high-importance episodic warning; a repeat of the
              same warning strengthens it instead of piling up.
  procedures  a completed goal's successful action sequence becomes a procedural memory; a later
              success of a similar goal strengthens that procedure (keeping the shorter sequence)
              instead of adding another.
  goals       completed and failed goals are recorded in the goal zone.
Everything derived from one call is stored in one transaction.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from brainmem_ros.core.clock import Clock, wall_clock
from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.embedding import Embedder
from brainmem_ros.core.extraction import HELD
from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.trace import (Entry, Goal, GoalStatus, Relation, Trace, TraceKind, Zone,
                                     new_id)
from brainmem_ros.core.working_memory import AgentWorkingMemory

__all__ = ["ConsolidationReport", "Consolidator", "fact_sentence", "goal_key", "COMPLETED_GOAL"]


@dataclass
class ConsolidationReport:
    promoted: int = 0
    facts: int = 0
    superseded: int = 0
    procedures: int = 0
    warnings: int = 0


def fact_sentence(rel: Relation) -> str:
    if rel.predicate == "location":
        if rel.object == HELD:
            return f"you are holding the {rel.subject}"
        return f"the {rel.subject} is in/on the {rel.object}"
    return f"the {rel.subject} is {rel.object}"


def goal_key(description: str) -> str:
    return re.sub(r"\W+", " ", description.lower()).strip()


# How the record of a completed goal begins (the fleet shares these by default).
COMPLETED_GOAL = "goal completed:"


def _new_id(zone: Zone) -> str:
    return new_id(zone.value[:3])


class Consolidator:

    def __init__(self, config: MemoryConfig, store: LongTermStore, embedder: Embedder,
                 clock: Clock = wall_clock):
        self.clock = clock
        self.config = config
        self.store = store
        self.embedder = embedder

    def consolidate(self, wm: AgentWorkingMemory, goal: Optional[Goal] = None,
                    now: Optional[float] = None) -> ConsolidationReport:
        """Promote what matters from ``wm`` into long-term memory.

        Promote what matters from ``wm``; with a finished ``goal``, also learn from its outcome.
        """
        cfg = self.config.consolidation
        now = now or self.clock()
        report = ConsolidationReport()
        keep = [t for t in wm.traces if t.importance >= cfg.threshold]
        entries: list[Entry] = []
        strengthen: list[tuple[str, float]] = []
        texts_to_embed: list[tuple[Entry, str]] = []
        known = self.store.current_facts(wm.agent_id,
                                         sorted({r.subject
                                                 for t in keep
                                                 for r in t.relations}))
        functional = set(self.config.encoding.functional_predicates)
        existing_warnings = {w.content: w for w in self.store.warnings(wm.agent_id)}

        for trace in keep:
            episode = self._episode(trace)
            if episode.warning and episode.content in existing_warnings:
                strengthen.append((existing_warnings[episode.content].id, cfg.warning_importance))
            else:
                entries.append(episode)
                report.warnings += int(episode.warning)
            report.promoted += 1
            for rel in trace.relations:
                if rel.predicate not in functional:
                    continue
                current = known.get((rel.subject, rel.predicate))
                if current and current[0] == rel.object:
                    strengthen.append((current[1], max(trace.importance, 0.5)))
                    continue
                if current:
                    report.superseded += 1
                fact = Entry(agent_id=wm.agent_id, zone=Zone.SEMANTIC, content=fact_sentence(rel),
                             embedding=None,
                             entities=[rel.subject] + ([rel.object] if rel.object != HELD else []),
                             relations=[rel], importance=max(trace.importance,
                                                             0.5), created=trace.timestamp,
                             source="consolidation", confidence=trace.confidence,
                             location=trace.location, position=trace.position, frame=trace.frame,
                             derived_from=[episode.id], id=_new_id(Zone.SEMANTIC))
                known[(rel.subject, rel.predicate)] = (rel.object, fact.id)
                entries.append(fact)
                texts_to_embed.append((fact, fact.content))
                report.facts += 1

        if goal is not None:
            report.procedures, report.warnings = self._learn_from_goal(
                wm, goal, entries, strengthen, texts_to_embed, existing_warnings, report.warnings,
                now)

        if texts_to_embed:
            vectors = self.embedder.embed([text for _, text in texts_to_embed])
            for (entry, _), vector in zip(texts_to_embed, vectors):
                entry.embedding = vector
        promoted = [t.id for t in keep]
        if entries:
            self.store.add(entries, supersede=tuple(functional), journal_remove=promoted)
        else:
            self.store.journal_write(remove=promoted)
        for entry_id, importance in strengthen:
            self.store.strengthen(entry_id, importance)
        wm.take(set(promoted))
        wm.new_since_consolidation = 0
        return report

    def _episode(self, trace: Trace) -> Entry:
        cfg = self.config.consolidation
        failed = trace.kind is TraceKind.ACTION and trace.success is False
        content, relations = trace.text, list(trace.relations)
        if trace.kind is TraceKind.ACTION:
            # An action episode records what was done; the state it caused is carried by the facts,
            # so the episode itself never becomes stale.
            relations = []
            action = trace.action or trace.text
            result = trace.text[len(action) + 2:] if trace.text.startswith(action + ": ") else ""
            if failed:
                content = f"{action} failed" + (f": {result}" if result else "")
            else:
                content = (f"{action}: {result.rstrip('.')}" if result else f"you did: {action}") \
                    + " (success)"
        return Entry(agent_id=trace.agent_id, zone=Zone.EPISODIC, content=content,
                     embedding=trace.embedding, entities=list(trace.entities), relations=relations,
                     importance=cfg.warning_importance if failed else trace.importance,
                     created=trace.timestamp, source=trace.source, confidence=trace.confidence,
                     location=trace.location, position=trace.position, frame=trace.frame,
                     warning=failed,
                     id=_new_id(Zone.EPISODIC))

    def _learn_from_goal(self, wm, goal, entries, strengthen, texts_to_embed, existing_warnings,
                         warnings, now) -> tuple[int, int]:
        cfg = self.config.consolidation
        procedures = 0
        steps = _dedupe_steps(wm.done_steps(goal.id))
        if goal.status is GoalStatus.COMPLETED and steps:
            content = f"to {goal.description.rstrip('.')}: " + "; ".join(
                f"{i}. {s}" for i, s in enumerate(steps, 1))
            existing = self._similar_procedure(wm.agent_id, goal.description)
            if existing is not None:
                old_steps = existing.content.count("; ") + 1
                new_content = content if len(steps) <= old_steps else None
                self.store.strengthen(
                    existing.id, min(1.0, existing.importance + 0.1), content=new_content,
                    embedding=self.embedder.embed([content])[0] if new_content else None)
            else:
                proc = Entry(
                    agent_id=wm.agent_id, zone=Zone.PROCEDURAL, content=content, embedding=None,
                    entities=sorted({
                        e
                        for t in wm.traces
                        for e in t.entities if t.goal_id == goal.id
                    })[:32], importance=0.8, created=now, source="consolidation",
                    goal_key=goal_key(goal.description), id=_new_id(Zone.PROCEDURAL))
                entries.append(proc)
                texts_to_embed.append((proc, content))
            procedures = 1
        if goal.status is GoalStatus.FAILED:
            failed_steps = [a for a, ok in wm.goal_actions.get(goal.id, []) if not ok]
            detail = f" (last failed step: {failed_steps[-1]})" if failed_steps else ""
            why = [
                t.text for t in wm.traces
                if t.kind is TraceKind.ACTION and t.success is False and t.goal_id in (
                    "", goal.id) and failed_steps and (t.action or "") == failed_steps[-1]
            ]
            if why:  # what the world said when it failed: the lesson, not just the name of the step
                detail = f" (last failed step: {why[-1][:300]})"
            text = f"last attempt at '{goal.description.rstrip('.')}' failed{detail}"
            if text in existing_warnings:
                strengthen.append((existing_warnings[text].id, cfg.warning_importance))
            else:
                warn = Entry(agent_id=wm.agent_id, zone=Zone.EPISODIC, content=text, embedding=None,
                             importance=cfg.warning_importance, created=now, source="consolidation",
                             warning=True, id=_new_id(Zone.EPISODIC))
                entries.append(warn)
                texts_to_embed.append((warn, f"{goal.description}. {text}"))
                warnings += 1
        if goal.status in (GoalStatus.COMPLETED, GoalStatus.FAILED):
            said = COMPLETED_GOAL if goal.status is GoalStatus.COMPLETED else "goal failed:"
            record = Entry(agent_id=wm.agent_id, zone=Zone.GOAL,
                           content=f"{said} {goal.description}", embedding=None,
                           importance=0.6, created=now, source="goal",
                           goal_key=goal_key(goal.description), id=_new_id(Zone.GOAL))
            entries.append(record)
            texts_to_embed.append((record, record.content))
        return procedures, warnings

    def _similar_procedure(self, agent_id: str, description: str) -> Optional[Entry]:
        exact = self.store.procedure_for(agent_id, goal_key(description))
        if exact is not None:
            return exact
        procedures = [p for p in self.store.procedures(agent_id) if p.agent_id == agent_id]
        if not procedures:
            return None
        probe = self.embedder.embed([f"to {description}"])[0]
        sims = np.stack([p.embedding for p in procedures]) @ probe
        best = int(np.argmax(sims))
        return procedures[best] if sims[
            best] >= self.config.consolidation.procedure_similarity else None


def _dedupe_steps(steps: list[str]) -> list[str]:
    out: list[str] = []
    for step in steps:
        if not out or out[-1] != step:
            out.append(step)
    return out
