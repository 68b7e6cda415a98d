"""Working memory: what the agent is doing right now, bounded, and snapshotted for a restart.

Per agent: the task stack (main task, subtasks, temporary goals pushed by interruptions), the
environment snapshot (latest place and state of each entity seen), the action history (last N
actions with their outcome) and the traces not yet consolidated. Everything is bounded, so a robot
running for weeks keeps a constant footprint here; long-term memory is where things accumulate.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict, deque
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Optional

import numpy as np

from brainmem_ros.core.clock import Clock, wall_clock
from brainmem_ros.core.config import WorkingSection
from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.extraction import HELD
from brainmem_ros.core.trace import Goal, GoalStatus, Position, Relation, Trace, TraceKind, new_id

__all__ = ["EntityState", "AgentWorkingMemory", "WorkingMemory"]

_FINISHED_GOALS_KEPT = 64  # finished goals whose steps stay in working memory, most recent first


@dataclass
class EntityState:
    entity: str
    location: str = ""
    state: str = ""
    stamp: float = 0.0
    entry_id: str = ""


class AgentWorkingMemory:
    """One agent's working memory."""

    def __init__(self, agent_id: str, limits: WorkingSection, clock: Clock = wall_clock):
        self.agent_id = agent_id
        self.limits = limits
        self.clock = clock
        self.traces: deque[Trace] = deque(maxlen=limits.max_traces)
        self.actions: deque[Trace] = deque(maxlen=limits.max_actions)
        self.environment: OrderedDict[str, EntityState] = OrderedDict()
        self.stack: list[Goal] = []
        self.goal_actions: dict[str, list[tuple[str, bool]]] = {}
        self.new_since_consolidation = 0
        self.newest = 0.0  # stamp of the newest trace taken, kept when consolidation moves it

    def view(self) -> "AgentWorkingMemory":
        """Copy this working memory for a reader that works without the lock.

        A copy for a reader that works without the lock (retrieval: a consolidation may hold the
        lock for tens of milliseconds). Each container is copied by one call into C, which no other
        thread interleaves with while it holds the interpreter lock, so an ingest meanwhile cannot
        break the reader's walk ('deque mutated during iteration'). The traces and goals themselves
        are shared, not copied.
        """
        copy = AgentWorkingMemory.__new__(AgentWorkingMemory)
        copy.agent_id, copy.limits, copy.clock = self.agent_id, self.limits, self.clock
        copy.traces = deque(self.traces, maxlen=self.traces.maxlen)
        copy.actions = deque(self.actions, maxlen=self.actions.maxlen)
        copy.environment = OrderedDict(self.environment)
        copy.stack = list(self.stack)
        # Only the goals on the stack: the prompt lists the done steps of those alone.
        copy.goal_actions = {g.id: list(self.goal_actions.get(g.id, ())) for g in copy.stack}
        copy.new_since_consolidation = self.new_since_consolidation
        copy.newest = self.newest
        return copy

    # -- traces --------------------------------------------------------------------------------
    def add(self, trace: Trace) -> None:
        trace.id = trace.id or new_id("wrk")
        self.traces.append(trace)
        self.new_since_consolidation += 1
        self.newest = max(self.newest, trace.timestamp)
        if trace.kind is TraceKind.ACTION:
            self.actions.append(trace)
            goal_id = trace.goal_id or (self.active_goal().id if self.active_goal() else "")
            if goal_id:
                if goal_id not in self.goal_actions:
                    self._forget_old_goal_actions()
                steps = self.goal_actions.setdefault(goal_id, [])
                steps.append((trace.action or trace.text, bool(trace.success)))
                del steps[:-200]
        for rel in trace.relations:
            self._observe(rel, trace)

    def _forget_old_goal_actions(self) -> None:
        """Keep the steps of the goals on the stack and of the most recently finished ones.

        Keep the steps of the goals on the stack and of the most recent others (a finished goal's
        steps are read once more, when its outcome is consolidated): without a bound a robot that
        runs for weeks keeps every goal's steps in working memory.
        """
        on_stack = {g.id for g in self.stack}
        finished = [goal for goal in self.goal_actions if goal not in on_stack]
        for goal in finished[:max(0, len(finished) - _FINISHED_GOALS_KEPT + 1)]:
            del self.goal_actions[goal]

    def _observe(self, rel: Relation, trace: Trace) -> None:
        if rel.predicate not in ("location", "state"):
            return
        known = self.environment.get(rel.subject)
        if known is not None and known.stamp > trace.timestamp:
            return  # an older event delivered late does not overwrite what was seen after it
        state = self.environment.pop(rel.subject, None) or EntityState(rel.subject)
        if rel.predicate == "location":
            state.location = rel.object
        else:
            state.state = rel.object
        state.stamp, state.entry_id = trace.timestamp, trace.id
        self.environment[rel.subject] = state
        while len(self.environment) > self.limits.max_entities:
            self.environment.popitem(last=False)

    def take(self, ids: set[str]) -> list[Trace]:
        """Remove and return the traces with these ids (after consolidation moved them)."""
        taken = [t for t in self.traces if t.id in ids]
        kept = [t for t in self.traces if t.id not in ids]
        self.traces.clear()
        self.traces.extend(kept)
        return taken

    def known_facts(self) -> dict[tuple[str, str], str]:
        facts = {}
        for name, s in self.environment.items():
            if s.location:
                facts[(name, "location")] = s.location
            if s.state:
                facts[(name, "state")] = s.state
        return facts

    def holding(self) -> list[str]:
        return [name for name, s in self.environment.items() if s.location == HELD]

    # -- goals ---------------------------------------------------------------------------------
    def active_goal(self) -> Optional[Goal]:
        return self.stack[-1] if self.stack else None

    def main_goal(self) -> Optional[Goal]:
        return self.stack[0] if self.stack else None

    def push(self, goal: Goal) -> Goal:
        if not goal.description.strip():
            raise InvalidRequest("a goal needs a description")
        if len(self.stack) >= 64:
            raise InvalidRequest("the goal stack is full (64 goals); complete or pop some first")
        goal.id = goal.id or f"goal-{uuid.uuid4().hex[:12]}"
        if self.stack and self.stack[-1].id == goal.id and \
                self.stack[-1].description == goal.description:
            return self.stack[-1]  # the same push again (a resent request): answered, not repeated
        if any(g.id == goal.id for g in self.stack):
            raise InvalidRequest(f"goal {goal.id!r} is already on the stack")
        if self.stack:
            self.stack[
                -1].status = GoalStatus.SUSPENDED if goal.temporary else self.stack[-1].status
            goal.parent_id = goal.parent_id or self.stack[-1].id
        goal.agent_id, goal.status, goal.stamp = self.agent_id, GoalStatus.ACTIVE, self.clock()
        self.stack.append(goal)
        return goal

    def finish(self, goal_id: str, status: Optional[GoalStatus]) -> Goal:
        """Complete, fail (status) or pop (None) a goal; the one below becomes active again."""
        if not self.stack:
            raise InvalidRequest(f"agent {self.agent_id!r} has no goal on its stack")
        index = len(self.stack) - 1
        if goal_id:
            matches = [i for i, g in enumerate(self.stack) if g.id == goal_id]
            if not matches:
                raise InvalidRequest(f"goal {goal_id!r} is not on agent {self.agent_id!r}'s stack")
            index = matches[0]
        goal = self.stack.pop(index)
        # Subgoals of a finished goal finish with it.
        self.stack = [g for g in self.stack if g.parent_id != goal.id]
        goal.status = status if status is not None else goal.status
        goal.stamp = self.clock()
        if self.stack and self.stack[-1].status is GoalStatus.SUSPENDED:
            self.stack[-1].status = GoalStatus.ACTIVE
        return goal

    def temporary_goals(self) -> list[Goal]:
        return [g for g in self.stack if g.temporary]

    def done_steps(self, goal_id: str) -> list[str]:
        return [action for action, ok in self.goal_actions.get(goal_id, []) if ok]

    # -- snapshot ------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "agent_id": self.agent_id,
            "traces": [_trace_to_dict(t) for t in self.traces],
            "actions": [t.id for t in self.actions],
            "environment": [asdict(s) for s in self.environment.values()],
            "stack": [{
                **asdict(g), "status": int(g.status)
            } for g in self.stack],
            "goal_actions": self.goal_actions,
        }

    @classmethod
    def from_dict(cls, data: dict, limits: WorkingSection,
                  clock: Clock = wall_clock) -> "AgentWorkingMemory":
        wm = cls(data["agent_id"], limits, clock)
        by_id = {}
        for t in data.get("traces", []):
            trace = _trace_from_dict(t)
            wm.traces.append(trace)
            by_id[trace.id] = trace
        wm.actions.extend(by_id[i] for i in data.get("actions", []) if i in by_id)
        for s in data.get("environment", []):
            wm.environment[s["entity"]] = EntityState(**s)
        wm.stack = [Goal(**{**g, "status": GoalStatus(g["status"])}) for g in data.get("stack", [])]
        wm.goal_actions = {
            k: [tuple(step) for step in v]
            for k, v in data.get("goal_actions", {}).items()
        }
        return wm


def trace_to_json(t: Trace) -> str:
    return json.dumps(_trace_to_dict(t))


def trace_from_json(text: str) -> Trace:
    return _trace_from_dict(json.loads(text))


_TRACE_FIELDS = tuple(f.name for f in fields(Trace))


def _trace_to_dict(t: Trace) -> dict:
    # A shallow copy: dataclasses.asdict deep-copies the embedding only for it to be encoded, and
    # the snapshot runs on every consolidation, under load several times a second.
    d = {name: getattr(t, name) for name in _TRACE_FIELDS}
    d["entities"] = list(t.entities)
    d["kind"] = t.kind.value
    d["embedding"] = base64.b64encode(np.asarray(t.embedding, dtype=np.float32).tobytes()).decode()
    d["relations"] = [list(r) for r in t.relations]
    d["position"] = list(t.position) if t.position else None
    return d


def _trace_from_dict(d: dict) -> Trace:
    d = dict(d)
    d["kind"] = TraceKind(d["kind"])
    d["embedding"] = np.frombuffer(base64.b64decode(d["embedding"]), dtype=np.float32).copy()
    d["relations"] = [Relation(*r) for r in d["relations"]]
    d["position"] = Position(*d["position"]) if d.get("position") else None
    return Trace(**d)


class WorkingMemory:
    """Every agent's working memory, with an atomic JSON snapshot on disk."""

    def __init__(self, limits: WorkingSection, snapshot_path: Optional[Path] = None,
                 clock: Clock = wall_clock):
        self.limits = limits
        self.clock = clock
        self.snapshot_path = snapshot_path
        self.lock = threading.RLock()
        # Writers are serialised so that two threads never share the partial file and a later
        # snapshot can never be overwritten by an earlier one.
        self._save_lock = threading.Lock()
        self.agents: dict[str, AgentWorkingMemory] = {}
        if snapshot_path and snapshot_path.exists():
            self.restore()

    def agent(self, agent_id: str) -> AgentWorkingMemory:
        with self.lock:
            if agent_id not in self.agents:
                self.agents[agent_id] = AgentWorkingMemory(agent_id, self.limits, self.clock)
            return self.agents[agent_id]

    def save(self) -> None:
        """Write the snapshot atomically: a crash mid-write leaves the previous snapshot intact."""
        if not self.snapshot_path:
            return
        with self._save_lock:
            # json.dumps, not json.dump: dump streams through the pure-Python encoder, which under
            # load (a save after every consolidation) holds the interpreter lock long enough for
            # retrievals in the same process to wait it out. Encoded under the lock: goal_actions
            # is the live dict.
            with self.lock:
                text = json.dumps({
                    "version": 1,
                    "saved": time.time(),  # the file's own stamp, on this machine's clock
                    "agents": [wm.to_dict() for wm in self.agents.values()]
                })
            partial = self.snapshot_path.with_suffix(f".{os.getpid()}.partial")
            partial.parent.mkdir(parents=True, exist_ok=True)
            with open(partial, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(partial, self.snapshot_path)

    def restore(self) -> None:
        try:
            data = json.loads(self.snapshot_path.read_text(encoding="utf-8"))
            agents = {
                a["agent_id"]: AgentWorkingMemory.from_dict(a, self.limits, self.clock)
                for a in data["agents"]
            }
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # A damaged snapshot must not stop the robot: start empty and keep the file for a human.
            damaged = self.snapshot_path.with_suffix(".damaged")
            os.replace(self.snapshot_path, damaged)
            logging.getLogger("brainmem_ros.core.working_memory").warning(
                "working-memory snapshot unreadable (%s); kept as %s, starting empty", exc, damaged)
            return
        with self.lock:
            self.agents = agents
