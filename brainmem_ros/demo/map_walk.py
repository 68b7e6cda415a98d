"""``brainmem-ros demo --map PNG``: a robot walks a kitchen captioning what it sees, then its map.

Starts the memory nodes and caption_node (``bringup --captions``) on a fresh store, publishes the
robot's pose and a caption at each stop of a short walk (the butter seen in the fridge, later on the
counter), consolidates half-way so both long-term and working memories show, stores one remembered
hazard at the stove, then takes the latched markers store_node publishes and draws them
(``inspection.map_view``): the picture RViz or Foxglove would show, made headless.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from brainmem_ros.bringup.run import stop_process_groups

__all__ = ["run_map_demo", "WALK"]

NAMESPACE = "mapdemo"
# (x, y, caption) at each stop, in the map frame, metres.
WALK = [
    (0.5, 3.0, "the butter is in the fridge"),
    (0.6, 2.2, "a carton of milk is in the fridge"),
    (2.0, 3.4, "a red mug is on the shelf"),
    (3.2, 3.1, "the kettle is on the stove"),
    None,  # consolidate here
    (4.5, 1.2, "a loaf of bread is on the counter"),
    (4.8, 0.6, "the butter is on the counter"),
    (2.5, 0.4, "the knife is in the drawer"),
    (1.0, 0.8, "two plates are on the table"),
]
HAZARD = (3.5, 3.8, "the stove's left burner stays hot after it is turned off (failure)")


def run_map_demo(png: Path, timeout_s: float = 120.0) -> int:
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import String

    from brainmem_ros.inspection.map_view import draw_markers, latest_markers
    from brainmem_ros.msg import MemoryEntry
    from brainmem_ros.nodes.runtime import call_spinning
    from brainmem_ros.srv import Consolidate, StoreMemory

    folder = Path(tempfile.mkdtemp(prefix="brainmem-map-"))
    ready = folder / "ready"
    child = subprocess.Popen([
        sys.executable, "-m", "brainmem_ros.cli", "bringup", "--captions", "--namespace",
        NAMESPACE, "--store", str(folder / "memory.db"), "--ready-file", str(ready), "--ros-args",
        "-p", "agent_id:=robot", "-p", "consolidation.period_s:=3600.0", "-p",
        "consolidation.every_n_traces:=0", "-p", "pose_max_age_s:=5.0"
    ], start_new_session=True)
    rclpy.init()
    node = rclpy.create_node("brainmem_map_demo", namespace=f"/{NAMESPACE}")
    pose_out = node.create_publisher(PoseStamped, "pose", 10)
    caption_out = node.create_publisher(String, "caption", 10)
    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)

    def call(srv, name, request):
        client = node.create_client(srv, name)
        if not client.wait_for_service(timeout_sec=30.0):
            raise TimeoutError(f"{name} did not come up")
        return call_spinning(executor, client, request, 30.0, resend_s=5.0)

    try:
        deadline = time.monotonic() + timeout_s
        while not ready.exists():
            if child.poll() is not None or time.monotonic() > deadline:
                print("[map] the memory nodes did not start", file=sys.stderr)
                return 1
            time.sleep(0.2)
        while caption_out.get_subscription_count() == 0 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        for stop in WALK:
            if stop is None:
                time.sleep(1.0)  # the encoder hands its batch over first
                call(Consolidate, "brainmem/consolidate", Consolidate.Request(reason="demo"))
                continue
            x, y, caption = stop
            pose = PoseStamped()
            pose.header.frame_id = "map"
            pose.header.stamp = node.get_clock().now().to_msg()
            pose.pose.position.x, pose.pose.position.y = x, y
            pose_out.publish(pose)
            time.sleep(0.3)  # the pose arrives before the caption made there
            caption_out.publish(String(data=caption))
            print(f"[map] at ({x:.1f}, {y:.1f}): {caption}", flush=True)
            time.sleep(0.7)
        hazard = MemoryEntry(agent_id="robot", zone="episodic", content=HAZARD[2], warning=True,
                             has_position=True, source="outcome")
        hazard.position.x, hazard.position.y = HAZARD[0], HAZARD[1]
        call(StoreMemory, "brainmem/store_memory", StoreMemory.Request(entries=[hazard]))
        time.sleep(2.5)  # the markers are redrawn at most once a second
        markers = latest_markers(f"/{NAMESPACE}", timeout_s=10.0)
        print(f"[map] {sum(m.type == 2 for m in markers)} remembered things drawn: "
              f"{draw_markers(markers, png)}", flush=True)
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        stop_process_groups([child])
