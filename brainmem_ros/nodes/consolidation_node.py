"""consolidation_node: runs consolidation and forgetting on timers and on goal events.

It owns no memory: it asks store_node through /brainmem/consolidate and /brainmem/forget, so the
schedule can change (or the node be left out) without touching the store.
"""
from __future__ import annotations

import sys

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from brainmem_ros.nodes import names
from brainmem_ros.msg import Goal as GoalMsg
from brainmem_ros.nodes.parameters import declare
from brainmem_ros.nodes.runtime import run
from brainmem_ros.srv import Consolidate, Forget

__all__ = ["ConsolidationNode", "main"]


class ConsolidationNode(Node):
    # every callback is in one mutually exclusive group: more threads only wait
    executor_threads = 1

    def __init__(self, **kwargs):
        super().__init__("consolidation_node", **kwargs)
        consolidate_s = declare(self, "consolidation.period_s", 10.0,
                                "consolidation timer period, seconds", 0.1, 86400.0)
        forget_s = declare(self, "forgetting.period_s", 60.0, "forgetting timer period, seconds",
                           0.1, 86400.0)
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
        self.calls = {"timer": 0, "goal": 0}

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
            self.get_logger().error(f"{name} refused: {response.message}")


def main(args=None) -> int:
    return run([ConsolidationNode], args)


if __name__ == "__main__":
    sys.exit(main())
