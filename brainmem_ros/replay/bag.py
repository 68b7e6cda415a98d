"""Recorded runs as rosbag2 files (sqlite3 or mcap), read and written with ``rosbags``.

Replay publishes the recorded messages of the package's topics into the running nodes at the
recorded timing (scaled by ``rate``), or as fast as the subscribers take them (``rate`` 0). Every
message is checked by deserializing it before it is published; a malformed bag or message is
reported and skipped, never published half-read. The same bags play with ``ros2 bag play``.

Recorded topic names are replayed relative to the replaying node's namespace (``/brainmem/...`` in
a bag reaches ``/robot1/brainmem/...`` when replayed with namespace ``robot1``). With ``clock``,
``/clock`` follows the bag's time, as ``ros2 bag play --clock`` does: memory nodes on
``use_sim_time`` then stamp, recall and forget in the recorded run's own time.
"""
from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from brainmem_ros.nodes import names
from brainmem_ros.core.errors import BrainMemError

__all__ = [
    "BagError", "ReplayReport", "REPLAY_TOPICS", "package_typestore", "write_bag", "read_bag",
    "replay"
]

# As recorded (absolute); replayed relative to the replaying node's namespace.
REPLAY_TOPICS = {
    f"/{names.OBSERVATION}": "brainmem_ros/msg/Observation",
    f"/{names.ACTION_RESULT}": "brainmem_ros/msg/ActionResult"
}
CLOCK_PERIOD_S = 0.025  # /clock is published at least this often while waiting, as rosbag2 does


class BagError(BrainMemError):
    """A bag that cannot be opened or read (missing, truncated, not a rosbag2, unknown types)."""


@dataclass
class ReplayReport:
    published: int = 0
    skipped: int = 0
    seconds: float = 0.0
    problems: list = field(default_factory=list)


def _msg_folder() -> Path:
    try:
        from ament_index_python.packages import get_package_share_directory

        folder = Path(get_package_share_directory("brainmem_ros")) / "msg"
        if folder.is_dir():
            return folder
    except (ImportError, LookupError, ValueError):
        pass
    return Path(__file__).resolve().parent.parent / "msg"


def package_typestore():
    """Make a rosbags typestore that knows ROS 2 Kilted's types and this package's messages."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    types = {}
    for path in sorted(_msg_folder().glob("*.msg")):
        types.update(get_types_from_msg(path.read_text(), f"brainmem_ros/msg/{path.stem}"))
    store.register(types)
    return store


def _ros_type(msgtype: str):
    package, _, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


def write_bag(path: Path, messages: Iterable[tuple[str, int, object]],
              storage: str = "sqlite3") -> int:
    """Write (topic, time_ns, rclpy message) triples to a new bag; returns the count."""
    from rclpy.serialization import serialize_message
    from rosbags.rosbag2 import StoragePlugin, Writer

    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    store = package_typestore()
    connections = {}
    count = 0
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        for topic, stamp_ns, msg in messages:
            msgtype = f"{type(msg).__module__.split('.')[0]}/msg/{type(msg).__name__}"
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=store)
            writer.write(connections[topic], int(stamp_ns), serialize_message(msg))
            count += 1
    return count


def read_bag(path: Path, topics: Optional[Sequence[str]] = None):
    """Yield (topic, time_ns, rclpy message) from a bag, skipping messages that do not deserialize.

    Raises BagError when the bag itself cannot be opened or read.
    """
    from rclpy.serialization import deserialize_message
    from rosbags.rosbag2 import Reader

    path = Path(path)
    if not path.exists():
        raise BagError(f"no bag at {path}")
    try:
        reader = Reader(path)
        reader.open()
    except Exception as exc:  # rosbags raises several types for damaged metadata or storage
        raise BagError(f"cannot open bag {path}: {exc}") from exc
    try:
        chosen = {t if t.startswith("/") else f"/{t}" for t in (topics or REPLAY_TOPICS)}
        wanted = [c for c in reader.connections
                  if c.topic in chosen and c.msgtype == REPLAY_TOPICS.get(c.topic, c.msgtype)]
        types = {c.id: _ros_type(c.msgtype) for c in wanted}
        typestore = package_typestore()
        try:
            for connection, stamp, raw in reader.messages(connections=wanted):
                try:
                    # rclpy's C deserializer trusts its input (garbage can crash the process), so
                    # each message is first decoded by rosbags' pure-Python CDR reader, which raises
                    # instead.
                    typestore.deserialize_cdr(bytes(raw), connection.msgtype)
                    yield connection.topic, stamp, deserialize_message(
                        bytes(raw), types[connection.id])
                except Exception as exc:
                    yield connection.topic, stamp, BagError(
                        f"message at {stamp} on {connection.topic} is malformed: {exc}")
        except BagError:
            raise
        except Exception as exc:
            raise BagError(f"bag {path} is damaged: {exc}") from exc
    finally:
        reader.close()


def replay(node, path: Path, rate: float = 1.0, topics: Optional[Sequence[str]] = None,
           wait_subscribers_s: float = 10.0, qos_depth: int = 1000, restamp: bool = False,
           clock: bool = False) -> ReplayReport:
    """Publish a bag's messages from ``node``; bounded waits only.

    ``restamp`` shifts every header stamp by the same offset so the run starts now (the memory then
    sees a recent run); without it the memory sees the recorded times, as a replayed study should.
    ``clock`` publishes ``/clock`` from the bag's time (for nodes on ``use_sim_time``).
    """
    from rclpy.duration import Duration
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from brainmem_ros.nodes.runtime import wait_for_subscriber

    if rate < 0:
        raise BagError("rate must be >= 0 (0: as fast as possible)")
    if restamp and clock:
        raise BagError("--restamp and --clock contradict each other: with --clock the nodes take "
                       "the recorded time as theirs")
    qos = QoSProfile(depth=qos_depth, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.VOLATILE)
    ticker = _ClockTicker(node, wait_subscribers_s) if clock else None
    publishers = {}
    report = ReplayReport()
    start_wall = time.monotonic()
    first_stamp = None
    for topic, stamp, msg in read_bag(path, topics):
        if isinstance(msg, BagError):
            report.skipped += 1
            report.problems.append(str(msg))
            continue
        if topic not in publishers:
            publishers[topic] = node.create_publisher(type(msg), topic.lstrip("/"), qos)
            if not wait_for_subscriber(publishers[topic], wait_subscribers_s):
                report.problems.append(f"nobody subscribed to {topic} within "
                                       f"{wait_subscribers_s:.0f} s: its messages went nowhere")
        first_stamp = stamp if first_stamp is None else first_stamp
        if restamp and hasattr(msg, "header"):
            shifted = time.time_ns() - int(
                (time.monotonic() - start_wall) * 1e9) + (msg.header.stamp.sec * 1_000_000_000 +
                                                          msg.header.stamp.nanosec - first_stamp)
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(shifted, 1_000_000_000)
        due = start_wall + (stamp - first_stamp) / 1e9 / rate if rate > 0 else time.monotonic()
        while (delay := due - time.monotonic()) > 0:
            if ticker:  # the clock keeps running between messages
                ticker.tick(stamp - int(delay * rate * 1e9))
            time.sleep(min(delay, CLOCK_PERIOD_S) if ticker else delay)
        if ticker:
            ticker.tick(stamp)
        publishers[topic].publish(msg)
        report.published += 1
    # A reliable message is only delivered once acknowledged: a process that exits before then takes
    # the unacknowledged ones with it (the tail of a fast replay, on a loaded machine).
    for topic, publisher in publishers.items():
        if not publisher.wait_for_all_acked(Duration(seconds=wait_subscribers_s)):
            report.problems.append(f"{topic}: not every message was acknowledged within "
                                   f"{wait_subscribers_s:.0f} s")
    report.seconds = time.monotonic() - start_wall
    return report


class _ClockTicker:
    """Publishes ``/clock`` (absolute: the clock is global, never namespaced)."""

    def __init__(self, node, wait_subscribers_s: float):
        from rosgraph_msgs.msg import Clock

        from brainmem_ros.nodes.runtime import wait_for_subscriber

        self._message = Clock
        self._publisher = node.create_publisher(Clock, "/clock", 10)
        self._last = -1
        wait_for_subscriber(self._publisher, wait_subscribers_s)

    def tick(self, stamp_ns: int) -> None:
        if stamp_ns <= self._last:
            return
        self._last = stamp_ns
        msg = self._message()
        msg.clock.sec, msg.clock.nanosec = divmod(int(stamp_ns), 1_000_000_000)
        self._publisher.publish(msg)
