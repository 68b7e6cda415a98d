"""``brainmem-ros map``: what a robot remembers, drawn from the markers store_node publishes.

The same MarkerArray RViz and Foxglove show, taken from the latched ``brainmem/markers`` topic and
drawn top-down with matplotlib, so a headless machine (CI, a robot over ssh) can look too. Spheres
are the remembered things, in the markers' colours; labels are the markers' texts.
"""
from __future__ import annotations

import time
from pathlib import Path

__all__ = ["draw_markers", "latest_markers"]

SPHERE, TEXT = 2, 9  # visualization_msgs/Marker types drawn here
LEGEND = {"remembered": "long-term memory", "recent": "working memory (recent)",
          "warning": "a failure remembered"}  # the colours of nodes/markers.py, in words


def draw_markers(markers, path: Path, title: str = "what the robot remembers") -> Path:
    """Draw the spheres and labels of ``markers`` (a MarkerArray's list) seen from above."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spheres = [m for m in markers if m.type == SPHERE]
    labels = [m for m in markers if m.type == TEXT]
    frames = sorted({m.header.frame_id for m in spheres}) or ["map"]
    fig, ax = plt.subplots(figsize=(9, 6.5), dpi=110)
    for m in spheres:
        ax.scatter(m.pose.position.x, m.pose.position.y, s=260,
                   color=(m.color.r, m.color.g, m.color.b), alpha=m.color.a, edgecolors="black",
                   linewidths=0.6, zorder=3)
    for m in labels:
        ax.annotate(m.text, (m.pose.position.x, m.pose.position.y), xytext=(9, 7),
                    textcoords="offset points", fontsize=7.5, zorder=4,
                    bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "0.7", "alpha": 0.9})
    if spheres:
        xs = [m.pose.position.x for m in spheres]
        ys = [m.pose.position.y for m in spheres]
        ax.set_xlim(min(xs) - 1.0, max(xs) + 3.0)
        ax.set_ylim(min(ys) - 1.0, max(ys) + 1.0)
    from matplotlib.lines import Line2D

    from brainmem_ros.nodes.markers import COLOURS

    ax.legend(handles=[
        Line2D([], [], marker="o", ls="", ms=10, mfc=(COLOURS[k].r, COLOURS[k].g, COLOURS[k].b),
               mec="black", label=text) for k, text in LEGEND.items()
    ], loc="lower right", fontsize=8, framealpha=0.9)
    ax.set_aspect("equal")
    ax.grid(True, alpha=0.3)
    ax.set_xlabel(f"x (m, frame {', '.join(frames)})")
    ax.set_ylabel("y (m)")
    ax.set_title(f"{title}: {len(spheres)} things")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def latest_markers(namespace: str = "", timeout_s: float = 10.0):
    """Return the markers store_node last published (the latched topic), or raise TimeoutError."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from visualization_msgs.msg import MarkerArray

    from brainmem_ros.nodes import names

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("brainmem_map", namespace=namespace or "/", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    got = []
    try:
        node.create_subscription(
            MarkerArray, names.MARKERS, got.append,
            QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL))
        deadline = time.monotonic() + timeout_s
        while not got and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        if not got:
            raise TimeoutError(f"no markers on {node.resolve_topic_name(names.MARKERS)} within "
                               f"{timeout_s:g} s (is store_node running and active?)")
        return got[-1].markers
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
