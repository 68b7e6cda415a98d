"""A small rclpy client for tests and measurements: bounded waits only, its own context."""
from __future__ import annotations

import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from brainmem_ros.nodes.runtime import call_spinning


class Client:

    def __init__(self, name: str = "test_client"):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.clients = {}
        self.publishers = {}
        self.qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                              durability=DurabilityPolicy.VOLATILE)

    def call(self, srv_type, name: str, request, timeout: float = 20.0, resend_s: float = 5.0):
        """Call and wait at most ``timeout``, sending again after ``resend_s`` without an answer.

        A server drops its first answer to a client it has not fully discovered (see
        ``brainmem_ros.nodes.runtime.call_and_wait``); 0 sends once, for requests that must not be
        received twice.
        """
        client = self.clients.get(name)
        if client is None:
            client = self.clients[name] = self.node.create_client(srv_type, name)
        if not client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f"{name} not available within {timeout}s")
        answer = call_spinning(self.executor, client, request, timeout, resend_s)
        if answer is None:
            raise TimeoutError(f"{name} gave no answer within {timeout}s")
        return answer

    def publish(self, msg_type, topic: str, msg, wait_s: float = 20.0) -> None:
        pub = self.publishers.get(topic)
        if pub is None:
            pub = self.publishers[topic] = self.node.create_publisher(msg_type, topic, self.qos)
            deadline = time.monotonic() + wait_s
            while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
                self.executor.spin_once(timeout_sec=0.05)
            if pub.get_subscription_count() < 1:
                raise TimeoutError(f"nobody subscribed to {topic} within {wait_s}s")
        pub.publish(msg)

    def wait_until(self, check, timeout: float = 30.0, every: float = 0.2):
        """Poll ``check()`` until it returns something truthy, and return that.

        Poll ``check()`` until it returns something truthy; return that, or raise TimeoutError.
        """
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = check()
            if last:
                return last
            time.sleep(every)
        raise TimeoutError(f"condition not met within {timeout}s; last value: {last!r}")

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


class Watch:
    """The newest /diagnostics status per name and the newest markers, spun while waiting."""

    def __init__(self, client, namespace: str):
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from visualization_msgs.msg import MarkerArray

        self.client = client
        self.namespace = namespace
        self.status = {}
        self.markers = []
        client.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        self.latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                  durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.subscription = None
        self.MarkerArray = MarkerArray

    def _on_diagnostics(self, array) -> None:
        for status in array.status:
            self.status[status.name] = status

    def subscribe_markers(self) -> None:
        self.subscription = self.client.node.create_subscription(
            self.MarkerArray, f"/{self.namespace}/brainmem/markers", self.markers.append,
            self.latched)

    def until(self, check, timeout: float = 30.0, what: str = "condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.client.executor.spin_once(timeout_sec=0.05)
            found = check()
            if found:
                return found
        raise TimeoutError(f"{what} not seen within {timeout}s; statuses: "
                           f"{ {n: (s.level, s.message) for n, s in self.status.items()} }")

    def level(self, node: str, level: bytes, contains: str = "", timeout: float = 30.0):
        name = f"{self.namespace}/{node}"

        def seen():
            for status_name, status in self.status.items():
                if status_name.startswith(name) and status.level == level and \
                        contains in status.message:
                    return status
            return None

        return self.until(seen, timeout, f"{name} at level {level!r} saying {contains!r}")
