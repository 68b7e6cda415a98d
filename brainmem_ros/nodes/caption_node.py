"""caption_node: captions and the robot's pose in, observations out.

A captioning or vision-language node says what the robot sees as ``std_msgs/String``; the robot's
pose comes as ``geometry_msgs/PoseStamped`` (a localiser) or ``nav_msgs/Odometry``. Each caption
becomes an Observation for encoder_node, placed at the newest pose no older than
``pose_max_age_s`` (``core.pose_track``), so spatial recall can find it by where it was seen; with
no recent pose it is stored without a position. Empty or oversized captions, and poses with NaN or
in a frame the store does not keep positions in, are dropped with a warning saying why.
"""
from __future__ import annotations

import math
import sys
import time

from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from std_msgs.msg import String

from brainmem_ros.core.errors import InvalidRequest, TimeUnavailable
from brainmem_ros.core.pose_track import PoseTrack
from brainmem_ros.core.validation import check_agent, check_text
from brainmem_ros.msg import Observation
from brainmem_ros.nodes import names
from brainmem_ros.nodes.parameters import declare, declare_memory_parameters, guard_parameters
from brainmem_ros.nodes.runtime import node_clock, run

__all__ = ["CaptionNode", "main"]

SAY_AGAIN_S = 10.0  # the same reason for dropping poses is logged at most this often


class CaptionNode(Node):
    executor_threads = 1  # light callbacks; one thread keeps poses and captions in order

    def __init__(self, **kwargs):
        super().__init__("caption_node", **kwargs)
        config = declare_memory_parameters(self)
        caption_topic = declare(self, "caption_topic", names.CAPTION,
                                "std_msgs/String captions of what the robot sees", read_only=True)
        pose_topic = declare(self, "pose_topic", names.POSE,
                             "geometry_msgs/PoseStamped robot pose; empty: not subscribed",
                             read_only=True)
        odom_topic = declare(self, "odom_topic", names.ODOM,
                             "nav_msgs/Odometry robot pose; empty: not subscribed", read_only=True)
        self.agent_id = check_agent(
            declare(self, "agent_id", "robot", "the agent whose memory the captions go to"))
        max_age_s = declare(self, "pose_max_age_s", 1.0,
                            "a caption is placed at a pose at most this old, seconds", 0.0, 3600.0)
        self.confidence = declare(self, "confidence", 0.8,
                                  "confidence of a caption (a model's words, not a fact)", 0.0, 1.0)
        self.max_chars = config.encoding.max_text_chars
        self.clock = node_clock(self)
        self.track = PoseTrack(max_age_s, config.store.fixed_frame, config.store.frames)
        self.counts = {"captions": 0, "captions dropped": 0, "poses dropped": 0}
        self._said: dict[str, float] = {}
        # Poses are a stream: the sensor profile (best effort, shallow) matches any publisher.
        if pose_topic:
            self.create_subscription(PoseStamped, pose_topic,
                                     lambda m: self._pose(m.header, m.pose.position),
                                     qos_profile_sensor_data)
        if odom_topic:
            self.create_subscription(Odometry, odom_topic,
                                     lambda m: self._pose(m.header, m.pose.pose.position),
                                     qos_profile_sensor_data)
        events = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                            durability=DurabilityPolicy.VOLATILE)
        self.create_subscription(String, caption_topic, self.on_caption, events)
        self.observations = self.create_publisher(Observation, names.OBSERVATION, events)
        guard_parameters(self)
        self.get_logger().info(
            f"captions from {self.resolve_topic_name(caption_topic)}, placed at poses from "
            f"{', '.join(self.resolve_topic_name(t) for t in (pose_topic, odom_topic) if t)}")

    def _now(self):
        try:
            return self.clock()
        except TimeUnavailable:
            return None

    def _pose(self, header, point) -> None:
        now = self._now()
        if now is None:
            return
        stamp = header.stamp.sec + header.stamp.nanosec * 1e-9
        try:
            self.track.update(point.x, point.y, point.z, header.frame_id, stamp, now)
        except InvalidRequest as exc:
            self.counts["poses dropped"] += 1
            # A pose stream repeats one fault many times a second: each reason said once in a while.
            reason = str(exc)
            if time.monotonic() - self._said.get(reason, -math.inf) >= SAY_AGAIN_S:
                self._said[reason] = time.monotonic()
                self.get_logger().warning(f"pose dropped: {reason}")

    def on_caption(self, msg: String) -> None:
        now = self._now()
        try:
            if now is None:
                raise TimeUnavailable("use_sim_time is true and no /clock message has arrived")
            text = check_text(msg.data.strip(), "caption", self.max_chars)
        except (InvalidRequest, TimeUnavailable) as exc:
            self.counts["captions dropped"] += 1
            self.get_logger().warning(f"caption dropped: {exc}")
            return
        observation = Observation(agent_id=self.agent_id, text=text, source="caption",
                                  confidence=self.confidence)
        observation.header.stamp = self.get_clock().now().to_msg()
        fix = self.track.at(now)
        if fix is not None:
            observation.header.frame_id = fix.frame
            observation.position.x, observation.position.y, observation.position.z = fix.position
            observation.has_position = True
        self.observations.publish(observation)
        self.counts["captions"] += 1


def main(args=None) -> int:
    return run([CaptionNode], args)


if __name__ == "__main__":
    sys.exit(main())
