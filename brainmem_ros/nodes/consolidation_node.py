"""consolidation_node: runs consolidation and forgetting on timers and on goal events.

It owns no memory: it asks store_node through /brainmem/consolidate and /brainmem/forget, so the
schedule can change (or the node be left out) without touching the store. Its timers run on the
node's clock: with ``use_sim_time`` they follow ``/clock``, as the memory's own time does. It reads
the same parameter file as the other memory nodes and refuses a bad one as they do.
"""
from __future__ import annotations

import sys

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from brainmem_ros.nodes import names
from brainmem_ros.msg import Goal as GoalMsg
from brainmem_ros.nodes.parameters import declare, declare_memory_parameters, guard_parameters
from brainmem_ros.nodes.runtime import run
from brainmem_ros.srv import Consolidate, Forget

__all__ = ["ConsolidationNode", "main"]


class ConsolidationNode(Node):
    # every callback is in one mutually exclusive group: more threads only wait
    executor_threads = 1

    def __init__(self, **kwargs):
        super().__init__("consolidation_node", **kwargs)
        config = declare_memory_parameters(self)
        consolidate_s, forget_s = config.consolidation.period_s, config.forgetting.period_s
        depth = declare(self, "qos_depth", 100, "goal event queue depth", 1, 100000)
        group = MutuallyExclusiveCallbackGroup()
        self.consolidate = self.create_client(Consolidate, names.CONSOLIDATE, callback_group=group)
        self.forget = self.create_client(Forget, names.FORGET, callback_group=group)
        qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
        self.create_subscription(GoalMsg, names.GOAL_EVENT, self.on_goal_event, qos,
                                 callback_group=group)
        self.create_timer(consolidate_s,
                          lambda: self._call(self.consolidate, Consolidate.Request(reason="timer")),
                          callback_group=group)
        self.create_timer(forget_s, lambda: self._call(self.forget, Forget.Request(decay=True)),
                          callback_group=group)
        guard_parameters(self)
        self.calls = {"timer": 0, "goal": 0}
        self.get_logger().info(f"consolidating every {consolidate_s:g} s and on finished goals, "
                               f"forgetting every {forget_s:g} s")

    def on_goal_event(self, goal: GoalMsg) -> None:
        if goal.status in (GoalMsg.STATUS_COMPLETED, GoalMsg.STATUS_FAILED):
            reason = "goal_completed" if goal.status == GoalMsg.STATUS_COMPLETED else "goal_failed"
            self._call(self.consolidate,
                       Consolidate.Request(agent_id=goal.agent_id, reason=reason, goal_id=goal.id))

    def _call(self, client, request) -> None:
        if not client.service_is_ready():
            self.get_logger().warning(f"{client.srv_name} not available; skipped",
                                      throttle_duration_sec=30.0)
            return
        kind = "goal" if getattr(request, "goal_id", "") else "timer"
        future = client.call_async(request)
        future.add_done_callback(lambda f: self._done(client.srv_name, f))
        self.calls[kind] += 1

    def _done(self, name, future) -> None:
        response = future.result()
        if response is not None and not response.success:
            self.get_logger().error(f"{name} refused: {response.message}",
                                    throttle_duration_sec=30.0)


def main(args=None) -> int:
    return run([ConsolidationNode], args)


if __name__ == "__main__":
    sys.exit(main())
