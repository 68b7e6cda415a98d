"""``/diagnostics`` from a node: its health checks (``core.health``) as a DiagnosticArray.

Published on a steady timer, so a node reports even while simulated time stands still; stamped
with the node's clock, as every message of the node is. Each status is named after the node with
its namespace (``robot1/store_node: memory store``) and carries the namespace as its hardware id,
so an aggregator tells two robots' memories apart.
"""
from __future__ import annotations

from typing import Callable, Sequence

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from brainmem_ros.core.health import Check, Level
from brainmem_ros.nodes import names

__all__ = ["DiagnosticsPublisher", "to_status"]

_LEVELS = {Level.OK: DiagnosticStatus.OK, Level.WARN: DiagnosticStatus.WARN,
           Level.ERROR: DiagnosticStatus.ERROR}


def to_status(check: Check, node_name: str, hardware_id: str) -> DiagnosticStatus:
    return DiagnosticStatus(level=_LEVELS[check.level], name=f"{node_name}: {check.name}",
                            message=check.message, hardware_id=hardware_id,
                            values=[KeyValue(key=k, value=v) for k, v in check.values.items()])


class DiagnosticsPublisher:
    """Publish ``checks()`` every ``period_s`` seconds on ``/diagnostics``."""

    def __init__(self, node, checks: Callable[[], Sequence[Check]], period_s: float,
                 callback_group=None):
        self.node = node
        self.checks = checks
        # Reliable and volatile, the profile diagnostic_updater publishes with.
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
        self.publisher = node.create_publisher(DiagnosticArray, names.DIAGNOSTICS, qos)
        self.name = node.get_fully_qualified_name().lstrip("/")
        self.hardware_id = node.get_namespace().strip("/") or "brainmem"
        self.timer = node.create_timer(period_s, self.publish, callback_group=callback_group,
                                       clock=Clock(clock_type=ClockType.STEADY_TIME))

    def publish(self) -> None:
        try:
            statuses = [to_status(c, self.name, self.hardware_id) for c in self.checks()]
        except Exception as exc:  # a broken check must show up, not stop the reports
            statuses = [DiagnosticStatus(level=DiagnosticStatus.ERROR, name=self.name,
                                         message=f"health check failed: {exc}",
                                         hardware_id=self.hardware_id)]
        array = DiagnosticArray(status=statuses)
        array.header.stamp = self.node.get_clock().now().to_msg()
        self.publisher.publish(array)
