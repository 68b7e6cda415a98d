"""consolidation_node: runs consolidation and forgetting on timers and on goal events.

It owns no memory: it asks store_node through /brainmem/consolidate and /brainmem/forget, so the
schedule can change (or the node be left out) without touching the store. Its timers run on the
node's clock: with ``use_sim_time`` they follow ``/clock``, as the memory's own time does. It reads
the same parameter file as the other memory nodes and refuses a bad one as they do. Goal events are
latched by the store (transient local), so a consolidation node that starts or restarts after a goal
finished still learns from it; asking twice for the same goal changes nothing.
"""
from __future__ import annotations

import sys
from collections import deque

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from brainmem_ros.core.errors import TimeUnavailable
from brainmem_ros.core.health import Level, ScheduleHealth
from brainmem_ros.nodes import names
from brainmem_ros.nodes.diagnostics import DiagnosticsPublisher
from brainmem_ros.msg import Goal as GoalMsg
from brainmem_ros.nodes.parameters import declare, declare_memory_parameters, guard_parameters
from brainmem_ros.nodes.runtime import node_clock, run
from brainmem_ros.srv import Consolidate, Forget

__all__ = ["ConsolidationNode", "main"]

PENDING_RETRY_S = 0.5  # goal events that came before the store's service was found wait this long


class ConsolidationNode(Node):
    # every callback is in one mutually exclusive group: more threads only wait
    executor_threads = 1

    def __init__(self, **kwargs):
        super().__init__("consolidation_node", **kwargs)
        config = declare_memory_parameters(self)
        consolidate_s, forget_s = config.consolidation.period_s, config.forgetting.period_s
        depth = declare(self, "qos_depth", 100,
                        "goal events queued, and taken from before this node started", 1, 100000)
        group = MutuallyExclusiveCallbackGroup()
        self.consolidate = self.create_client(Consolidate, names.CONSOLIDATE, callback_group=group)
        self.forget = self.create_client(Forget, names.FORGET, callback_group=group)
        qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pending: deque = deque(maxlen=depth)
        self.create_subscription(GoalMsg, names.GOAL_EVENT, self.on_goal_event, qos,
                                 callback_group=group)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(PENDING_RETRY_S, self._ask_pending, callback_group=group, clock=steady)
        self.periods = {"consolidation": consolidate_s, "forgetting": forget_s}
        self.schedule_timers: list = []
        self.group = group
        guard_parameters(self)
        self.calls = {"timer": 0, "goal": 0}
        self.clock = node_clock(self)
        self.starter = self.create_timer(PENDING_RETRY_S, self._start_schedule,
                                         callback_group=group, clock=steady)
        self._start_schedule()
        self.schedule = ScheduleHealth()
        self.diagnostics = DiagnosticsPublisher(self, self._checks, config.health.period_s, group)
        self.get_logger().info(f"consolidating every {consolidate_s:g} s and on finished goals, "
                               f"forgetting every {forget_s:g} s")

    def on_goal_event(self, goal: GoalMsg) -> None:
        if goal.status in (GoalMsg.STATUS_COMPLETED, GoalMsg.STATUS_FAILED):
            reason = "goal_completed" if goal.status == GoalMsg.STATUS_COMPLETED else "goal_failed"
            self.pending.append(
                Consolidate.Request(agent_id=goal.agent_id, reason=reason, goal_id=goal.id))
            self._ask_pending()

    def _ask_pending(self) -> None:
        """Ask for the finished goals' consolidation once the store's service is there.

        Latched events arrive as soon as this node subscribes, often before it has discovered
        the service: they wait here instead of being skipped.
        """
        while self.pending and self.consolidate.service_is_ready():
            self._call(self.consolidate, self.pending.popleft())

    def _start_schedule(self) -> None:
        """Start the consolidation and forgetting timers once the node's time has started.

        On simulated time a timer made before the first ``/clock`` counts from zero, so that first
        message (a simulator's or a recorded run's time, far past zero) would fire both at once: a
        consolidation and a forgetting pass nobody scheduled, taking traces out of working memory
        while a run is still arriving. Made at the first time the node has, each first fires one
        period later.
        """
        if self.schedule_timers or self._now() is None:
            return
        self.schedule_timers = [
            self.create_timer(self.periods["consolidation"],
                              lambda: self._call(self.consolidate,
                                                 Consolidate.Request(reason="timer")),
                              callback_group=self.group),
            self.create_timer(self.periods["forgetting"],
                              lambda: self._call(self.forget, Forget.Request(decay=True)),
                              callback_group=self.group),
        ]
        self.starter.cancel()

    def _checks(self):
        check = self.schedule.check(self._now())
        if not self.schedule_timers:
            check.flag(Level.WARN, "use_sim_time is true and no /clock has arrived: consolidation "
                       "and forgetting wait for it")
        return [check]

    def _now(self):
        try:
            return self.clock()
        except TimeUnavailable:
            return None

    def _call(self, client, request) -> None:
        task = "consolidation" if client is self.consolidate else "forgetting"
        if not client.service_is_ready():
            self._record(task, False, f"{client.srv_name} not available; skipped")
            self.get_logger().warning(f"{client.srv_name} not available; skipped",
                                      throttle_duration_sec=30.0)
            return
        kind = "goal" if getattr(request, "goal_id", "") else "timer"
        future = client.call_async(request)
        future.add_done_callback(lambda f: self._done(task, client.srv_name, f))
        self.calls[kind] += 1

    def _done(self, task, name, future) -> None:
        response = future.result()
        if response is None:
            return
        self._record(task, response.success, response.message)
        if not response.success:
            self.get_logger().error(f"{name} refused: {response.message}",
                                    throttle_duration_sec=30.0)

    def _record(self, task: str, ok: bool, message: str) -> None:
        now = self._now()
        if now is not None:
            self.schedule.record(task, now, ok, message)


def main(args=None) -> int:
    return run([ConsolidationNode], args)


if __name__ == "__main__":
    sys.exit(main())
