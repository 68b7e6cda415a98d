"""store_node: owns working and long-term memory and serves every memory service.

A managed (lifecycle) node, as the servers of a nav2 stack are: configure opens the store and the
model, activate starts serving, deactivate stops serving and flushes what lives only in RAM, cleanup
closes the store, shutdown from any state loses nothing acknowledged. With ``autostart`` (the
default) it configures and activates itself at start, so plain ``ros2 launch`` and ``brainmem-ros
bringup`` need no lifecycle manager; a failure then stops the process with the reason. Without it,
a failed transition leaves the node up in its previous state, saying why on ``/diagnostics``.

Each service answers ``success: false`` with a message for a bad request, and while the node is not
active; nothing a caller sends can raise through rclpy or stop the node. It publishes its health on
``/diagnostics`` and what the robot remembers on the map as latched markers.
"""
from __future__ import annotations

import sys
import threading
import time
import traceback

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import MarkerArray

from brainmem_ros.core.embedding import Embedder
from brainmem_ros.core.errors import (BrainMemError, InvalidRequest, NotServing, StoreUnavailable,
                                      TimeUnavailable)
from brainmem_ros.core.health import StoreHealth
from brainmem_ros.core.landmarks import landmarks
from brainmem_ros.core.memory import BrainMemory
from brainmem_ros.core.retrieval import trace_as_entry
from brainmem_ros.core.trace import GoalStatus
from brainmem_ros.msg import Goal as GoalMsg
from brainmem_ros.nodes import conversions as cv
from brainmem_ros.nodes import names
from brainmem_ros.nodes.diagnostics import DiagnosticsPublisher
from brainmem_ros.nodes.markers import landmark_markers
from brainmem_ros.nodes.parameters import declare, declare_memory_parameters, guard_parameters
from brainmem_ros.nodes.runtime import BoundedCallbackGroup, node_clock, run
from brainmem_ros.nodes.serving import ServingGate
from brainmem_ros.srv import (Consolidate, Forget, GetWorkingMemory, IngestTraces, ReportOutcome,
                              RetrieveMemory, StoreMemory, UpdateGoal)

__all__ = ["StoreNode", "main"]

SUCCESS, FAILURE = TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE
# Labels carry "how long ago": drawn again this often even when nothing changed.
MARKER_REFRESH_S = 10.0
# Refusals a sender should simply send again later.
_TRY_AGAIN = (NotServing, StoreUnavailable, TimeUnavailable)


class StoreNode(LifecycleNode):

    def __init__(self, embedder: Embedder | None = None, **kwargs):
        super().__init__("store_node", **kwargs)
        self.config = declare_memory_parameters(self)
        depth = declare(self, "qos_depth", 100,
                        "goal events kept for late subscribers (transient local)", 1, 100000)
        service_depth = declare(
            self, "service_qos_depth", 100,
            "request/response queue depth of every service: under KEEP_LAST a response "
            "overwritten before a slow client took it is lost, so this must exceed the calls in "
            "flight from all clients", 1, 100000)
        snapshot_s = declare(self, "snapshot_period_s", 5.0,
                             "working-memory snapshot period, seconds", 0.1, 3600.0)
        concurrent = declare(
            self, "concurrent_retrievals", 2, "retrievals served side by side; the executor gets "
            "three threads more, for writes, working-memory views and upkeep", 1, 16,
            read_only=True)
        autostart = declare(self, "autostart", True,
                            "configure and activate at start; false: wait for lifecycle "
                            "change_state, as under a lifecycle manager", read_only=True)
        self.transition_timeout_s = declare(
            self, "transition_timeout_s", 10.0,
            "a transition waits this long for the requests being served", 0.1, 600.0)
        marker_period_s = declare(self, "marker_period_s", 1.0,
                                  "at most one MarkerArray per this many seconds", 0.1, 3600.0)
        self.marker_limit = declare(self, "marker_max_things", 500,
                                    "most remembered things drawn on the map", 1, 100000)
        self.executor_threads = concurrent + 3
        self._embedder = embedder
        self.memory: BrainMemory | None = None
        self.failure = ""  # why the last transition failed, until one succeeds
        self.gate = ServingGate(self.get_name())
        self._state_lock = threading.RLock()  # transitions against health checks
        self._drawn = (-1, -float("inf"))  # (revision, steady time) of the last markers
        # Up to `concurrent_retrievals` readers (2 by default) and one writer at a time. A retrieval
        # of a new question spends most of its time in the model, outside the interpreter lock, so a
        # second one runs its Python meanwhile; more would crowd two cores and starve the writes
        # (ingest). Working-memory views get their own group: converting a few hundred traces to
        # messages takes tens of ms, which retrievals queued behind it used to wait out in full.
        reads = BoundedCallbackGroup(concurrent)
        writes, views = MutuallyExclusiveCallbackGroup(), MutuallyExclusiveCallbackGroup()
        upkeep = MutuallyExclusiveCallbackGroup()
        # Goal events are kept for a consolidation node that starts (or restarts) later.
        latched = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        served = QoSProfile(depth=service_depth, reliability=ReliabilityPolicy.RELIABLE,
                            durability=DurabilityPolicy.VOLATILE)
        self.goal_events = self.create_publisher(GoalMsg, names.GOAL_EVENT, latched)
        # The map of what is remembered: the newest one kept for a viewer that opens later.
        self.markers = self.create_lifecycle_publisher(
            MarkerArray, names.MARKERS,
            QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL))
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
        # Upkeep runs on the steady clock, so it goes on whatever /clock does.
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(snapshot_s, self._snapshot, callback_group=writes, clock=steady)
        self.create_timer(marker_period_s, self._draw_markers, callback_group=upkeep, clock=steady)
        self.health = StoreHealth(self.config.health)
        self.diagnostics = DiagnosticsPublisher(self, self._checks, self.config.health.period_s,
                                                upkeep)
        guard_parameters(self, self.config, self._apply)
        if autostart:
            if self.trigger_configure() != SUCCESS:
                raise BrainMemError(self.failure or "configure failed (see the log)")
            if self.trigger_activate() != SUCCESS:
                raise BrainMemError(self.failure or "activate failed (see the log)")

    # -- lifecycle ------------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._state_lock:
            try:
                self.memory = BrainMemory(self.config, embedder=self._embedder,
                                          clock=node_clock(self))
            except Exception as exc:  # the model, the file: the node stays up and says why
                return self._failed("configure", exc)
            self.failure, self.gate.state = "", "inactive"
        store = self.memory.store
        opened = ("created a new, empty"
                  if store.created_new else f"opened, {len(store)} long-term memories in the")
        rebuilt = (f"; rebuilt the vector index of {', '.join(store.rebuilt_partitions)}"
                   if store.rebuilt_partitions else "")
        self.get_logger().info(
            f"{opened} memory store {store.path}{rebuilt}; embedder {self.memory.embedder.name}")
        return SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.gate.open()
        self._drawn = (-1, -float("inf"))
        self.get_logger().info("active: serving")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._close_gate("inactive")
        with self._state_lock:
            try:
                self.memory.flush()
            except Exception as exc:
                return self._failed("deactivate", exc)
        self.get_logger().info("inactive: not serving; access counts, index and snapshot flushed")
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release("unconfigured")
        self.get_logger().info("cleaned up: the memory store is closed")
        return SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release("finalized")
        return SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release("unconfigured")
        return SUCCESS

    def _failed(self, transition: str, exc: Exception) -> TransitionCallbackReturn:
        self.failure = f"{transition} failed: {exc}"
        self.get_logger().error(self.failure)
        return FAILURE

    def _close_gate(self, state: str) -> None:
        if not self.gate.close(state, self.transition_timeout_s):
            self.get_logger().warning(
                f"requests still running after {self.transition_timeout_s:g} s; going on")

    def _release(self, state: str) -> None:
        """Stop serving and close the store (flushing it); safe to call in any state, twice."""
        self._close_gate(state)
        with self._state_lock:
            memory, self.memory = self.memory, None
            if memory is not None:
                try:
                    memory.close()
                except Exception as exc:
                    self.get_logger().error(f"closing the memory store: {exc}")

    # -- upkeep ---------------------------------------------------------------------------------
    def _checks(self):
        with self._state_lock:
            try:
                now = self.memory.clock() if self.memory is not None else None
            except TimeUnavailable:
                now = None
            checks = [self.health.check(self.memory, self.gate.state, self.failure, now)]
            if self.memory is not None and self.memory.fleet is not None:
                checks.append(self.memory.fleet.check())
            return checks

    def _draw_markers(self) -> None:
        if self.markers.get_subscription_count() == 0:
            return  # nobody looks: drawn when someone subscribes
        try:
            with self.gate.enter():
                revision, tick = self.memory.revision, time.monotonic()
                if revision == self._drawn[0] and tick - self._drawn[1] < MARKER_REFRESH_S:
                    return
                marks = landmarks(self.memory, self.marker_limit)
                self.markers.publish(
                    landmark_markers(marks, self.memory.clock(), self.config.store.fixed_frame))
                self._drawn = (revision, tick)
        except BrainMemError:  # not active, or no time yet: drawn later
            return
        except Exception:
            self.get_logger().error(f"drawing the markers failed:\n{traceback.format_exc()}",
                                    throttle_duration_sec=30.0)

    def _snapshot(self) -> None:
        try:
            with self.gate.enter():
                self.memory.working.save()
        except NotServing:
            return
        except OSError as exc:
            self.get_logger().error(f"working-memory snapshot failed: {exc}",
                                    throttle_duration_sec=30.0)

    def _apply(self, config) -> None:
        with self._state_lock:
            self.config = config
            if self.memory is not None:
                self.memory.config = config
                self.memory.retriever.config = config

    def _guard(self, handler):
        """Every service answer carries success + message; no exception escapes into rclpy."""

        def call(request, response):
            try:
                with self.gate.enter():
                    handler(request, response)
                response.success, response.message = True, ""
            except BrainMemError as exc:
                response.success, response.message = False, str(exc)
                if hasattr(response, "retry"):
                    response.retry = isinstance(exc, _TRY_AGAIN)
                if isinstance(exc, NotServing):  # every caller, every call, until activated
                    self.get_logger().warning(f"refused: {exc}", throttle_duration_sec=5.0)
                else:
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
        response.newest_event = cv.to_time(wm.newest)

    def close(self) -> None:
        """At process end: the shutdown transition (the store closes, nothing is lost)."""
        if self.gate.state != "finalized":
            try:
                self.trigger_shutdown()
            except Exception as exc:  # no transition from here: close the store all the same
                self.get_logger().warning(f"shutdown transition: {exc}")
        self._release("finalized")


def main(args=None) -> int:
    return run([StoreNode], args)


if __name__ == "__main__":
    sys.exit(main())
