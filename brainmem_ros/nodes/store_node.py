"""store_node: owns working and long-term memory and serves every memory service.

Each service answers ``success: false`` with a message for a bad request; nothing a caller sends can
raise through rclpy or stop the node. Working memory is snapshotted on a timer and at shutdown.
"""
from __future__ import annotations

import sys
import traceback

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from brainmem_ros.nodes import names
from brainmem_ros.core.embedding import Embedder
from brainmem_ros.core.errors import BrainMemError, InvalidRequest
from brainmem_ros.core.memory import BrainMemory
from brainmem_ros.msg import Goal as GoalMsg
from brainmem_ros.nodes import conversions as cv
from brainmem_ros.nodes.parameters import declare, declare_memory_parameters, guard_parameters
from brainmem_ros.nodes.runtime import BoundedCallbackGroup, node_clock, run
from brainmem_ros.core.retrieval import trace_as_entry
from brainmem_ros.srv import (Consolidate, Forget, GetWorkingMemory, IngestTraces, ReportOutcome,
                              RetrieveMemory, StoreMemory, UpdateGoal)
from brainmem_ros.core.trace import GoalStatus

__all__ = ["StoreNode", "main"]


class StoreNode(Node):

    def __init__(self, embedder: Embedder | None = None, **kwargs):
        super().__init__("store_node", **kwargs)
        self.config = declare_memory_parameters(self)
        depth = declare(self, "qos_depth", 100, "queue depth of the goal event topic", 1, 100000)
        service_depth = declare(
            self, "service_qos_depth", 100,
            "request/response queue depth of every service: under KEEP_LAST a response "
            "overwritten before a slow "
            "client took it is lost, so this must exceed the calls in flight from all clients", 1,
            100000)
        snapshot_s = declare(self, "snapshot_period_s", 5.0,
                             "working-memory snapshot period, seconds", 0.1, 3600.0)
        concurrent = declare(
            self, "concurrent_retrievals", 2, "retrievals served side by side; the executor gets "
            "two threads more, for writes and working-memory views", 1, 16, read_only=True)
        self.executor_threads = concurrent + 2
        self.memory = BrainMemory(self.config, embedder=embedder, clock=node_clock(self))
        # Up to `concurrent_retrievals` readers (2 by default) and one writer at a time. A retrieval
        # of a new question spends most of its time in the model, outside the interpreter lock, so a
        # second one runs its Python meanwhile; more would crowd two cores and starve the writes
        # (ingest). Working-memory views get their own group: converting a few hundred traces to
        # messages takes tens of ms, which retrievals queued behind it used to wait out in full.
        reads = BoundedCallbackGroup(concurrent)
        writes, views = MutuallyExclusiveCallbackGroup(), MutuallyExclusiveCallbackGroup()
        qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
        served = QoSProfile(depth=service_depth, reliability=ReliabilityPolicy.RELIABLE,
                            durability=DurabilityPolicy.VOLATILE)
        self.goal_events = self.create_publisher(GoalMsg, names.GOAL_EVENT, qos)
        self.create_service(RetrieveMemory, names.RETRIEVE_MEMORY, self._guard(self.on_retrieve),
                            qos_profile=served, callback_group=reads)
        self.create_service(GetWorkingMemory, names.GET_WORKING_MEMORY,
                            self._guard(self.on_get_working), qos_profile=served,
                            callback_group=views)
        for srv, name, handler in [
            (StoreMemory, names.STORE_MEMORY, self.on_store),
            (IngestTraces, names.INGEST_TRACES, self.on_ingest),
            (Consolidate, names.CONSOLIDATE, self.on_consolidate),
            (Forget, names.FORGET, self.on_forget),
            (UpdateGoal, names.UPDATE_GOAL, self.on_update_goal),
            (ReportOutcome, names.REPORT_OUTCOME, self.on_report_outcome),
        ]:
            self.create_service(srv, name, self._guard(handler), qos_profile=served,
                                callback_group=writes)
        # Snapshots are upkeep, not memory: on the steady clock, so they run whatever /clock does.
        self.create_timer(snapshot_s, self._snapshot, callback_group=writes,
                          clock=Clock(clock_type=ClockType.STEADY_TIME))
        store = self.memory.store
        opened = ("created a new, empty"
                  if store.created_new else f"opened, {len(store)} long-term memories in the")
        rebuilt = (f"; rebuilt the vector index of {', '.join(store.rebuilt_partitions)}"
                   if store.rebuilt_partitions else "")
        self.get_logger().info(
            f"{opened} memory store {store.path}{rebuilt}; embedder {self.memory.embedder.name}")
        guard_parameters(self, self.config, self._apply)

    def _apply(self, config) -> None:
        self.config = config
        self.memory.config = config
        self.memory.retriever.config = config

    def _guard(self, handler):
        """Every service answer carries success + message; no exception escapes into rclpy."""

        def call(request, response):
            try:
                handler(request, response)
                response.success, response.message = True, ""
            except BrainMemError as exc:
                response.success, response.message = False, str(exc)
                self.get_logger().warning(f"{handler.__name__}: refused: {exc}")
            except Exception as exc:
                response.success = False
                response.message = f"internal error: {type(exc).__name__}: {exc}"
                self.get_logger().error(f"{handler.__name__} failed:\n{traceback.format_exc()}")
            return response

        return call

    # -- services -------------------------------------------------------------------------------
    def on_retrieve(self, request, response):
        result = self.memory.retrieve(cv.retrieval_request(request))
        response.memories = [cv.entry_to_msg(r.entry, r) for r in result.recalls]
        response.memory_prompt = result.prompt
        response.warnings = result.warnings

    def on_store(self, request, response):
        response.ids = self.memory.store_entries([cv.entry_from_msg(m) for m in request.entries])

    def on_ingest(self, request, response):
        own = self.memory.embedder.name
        if request.embedding_model and request.embedding_model != own:
            raise InvalidRequest(
                f"these traces were embedded with {request.embedding_model!r} and this store "
                "embeds "
                f"with {own!r}: give encoder_node and store_node the same embedding.backend")
        traces = [cv.trace_from_msg(m) for m in request.traces]
        response.ids = [t.id for t in self.memory.ingest(traces)]

    def on_consolidate(self, request, response):
        report = self.memory.consolidate(request.agent_id, goal_id=request.goal_id)
        response.promoted, response.facts = report.promoted, report.facts
        response.superseded = report.superseded
        response.procedures, response.warnings = report.procedures, report.warnings
        # A timer pass that found nothing to move is routine: no log line every period.
        moved = report.promoted or report.facts or report.procedures or report.warnings
        log = self.get_logger().info if moved else self.get_logger().debug
        log(f"consolidated ({request.reason or 'manual'}): {report}")

    def on_forget(self, request, response):
        report = self.memory.forget(request.agent_id, request.decay, list(request.ids),
                                    list(request.entities))
        response.decayed, response.archived = report.decayed, report.archived
        response.deleted, response.evicted = report.deleted, report.evicted

    def on_update_goal(self, request, response):
        op, g = request.operation, request.goal
        if op == UpdateGoal.Request.OP_PUSH:
            goal = self.memory.push_goal(g.agent_id, g.description, g.temporary, g.id, g.parent_id,
                                         fresh_world=request.fresh_world)
        elif op in (UpdateGoal.Request.OP_COMPLETE, UpdateGoal.Request.OP_FAIL,
                    UpdateGoal.Request.OP_POP):
            status = {
                UpdateGoal.Request.OP_COMPLETE: GoalStatus.COMPLETED,
                UpdateGoal.Request.OP_FAIL: GoalStatus.FAILED
            }.get(op)
            goal, _ = self.memory.finish_goal(g.agent_id, g.id, status, consolidate=False)
        else:
            raise BrainMemError(
                f"unknown goal operation {op}; use OP_PUSH, OP_COMPLETE, OP_FAIL or OP_POP")
        response.goal = cv.goal_to_msg(goal)
        response.stack = [cv.goal_to_msg(x) for x in self.memory.working_memory(g.agent_id).stack]
        self.goal_events.publish(response.goal)

    def on_report_outcome(self, request, response):
        response.updated, response.warning_id = self.memory.report_outcome(
            request.agent_id, request.success, request.detail, request.action, request.goal_id,
            list(request.entities))

    def on_get_working(self, request, response):
        """Answer GetWorkingMemory from a copy of the agent's working memory.

        Messages are built from a copy taken under the working-memory lock, not under it: a full
        working memory is a few hundred messages, tens of ms of Python that ingest would wait on.
        """
        wm = self.memory.working_memory(request.agent_id)
        with self.memory.working.lock:
            wm = wm.view()
        traces = list(reversed(wm.traces))
        if request.max_traces:
            traces = traces[:request.max_traces]
        response.task_stack = [cv.goal_to_msg(g) for g in wm.stack]
        response.temporary_goals = [cv.goal_to_msg(g) for g in wm.temporary_goals()]
        response.environment = [cv.entity_state_to_msg(s) for s in wm.environment.values()]
        response.recent_actions = [cv.action_to_msg(t) for t in wm.actions]
        response.traces = [cv.entry_to_msg(trace_as_entry(t)) for t in traces]

    def _snapshot(self) -> None:
        try:
            self.memory.working.save()
        except OSError as exc:
            self.get_logger().error(f"working-memory snapshot failed: {exc}")

    def close(self) -> None:
        self.memory.close()


def main(args=None) -> int:
    return run([StoreNode], args)


if __name__ == "__main__":
    sys.exit(main())
