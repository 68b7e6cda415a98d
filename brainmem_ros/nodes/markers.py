"""What the robot remembers, as a MarkerArray RViz and Foxglove show with no plugin.

Each landmark (``core.landmarks``) is a sphere where the memory was made and a label above it:
what, the memory, how long ago. Warnings (a failure remembered about the thing) are red, what
working memory holds and has not consolidated yet is bright, the rest blue. Every array starts by
deleting all markers, so a thing that moved or was forgotten leaves no ghost behind. The stamp is
zero: a viewer draws the markers with the newest transform of their frame.
"""
from __future__ import annotations

import zlib
from typing import Sequence

from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from brainmem_ros.core.landmarks import Landmark, label

__all__ = ["landmark_markers", "COLOURS"]

COLOURS = {
    "warning": ColorRGBA(r=0.90, g=0.20, b=0.15, a=0.95),
    "recent": ColorRGBA(r=0.10, g=0.80, b=0.45, a=0.95),
    "remembered": ColorRGBA(r=0.20, g=0.45, b=0.90, a=0.85),
}
WHITE = ColorRGBA(r=1.0, g=1.0, b=1.0, a=0.95)
SPHERE_M = 0.15
LABEL_M = 0.10  # text height
LABEL_ABOVE_M = 0.25


def _kind(mark: Landmark) -> str:
    return "warning" if mark.warning else "recent" if mark.recent else "remembered"


def _id(mark: Landmark) -> int:
    """Give each thing a stable id, so a viewer keeps its selection across updates."""
    return zlib.crc32(mark.entity.encode()) & 0x3FFFFFFF


def landmark_markers(marks: Sequence[Landmark], now: float, fixed_frame: str) -> MarkerArray:
    with_agent = len({m.agent_id for m in marks}) > 1
    out = [Marker(action=Marker.DELETEALL)]
    for mark in marks:
        frame = mark.frame or fixed_frame
        sphere = Marker(ns=f"{mark.agent_id}/things", id=_id(mark), type=Marker.SPHERE,
                        action=Marker.ADD, color=COLOURS[_kind(mark)])
        sphere.header.frame_id = frame
        sphere.pose.position.x, sphere.pose.position.y, sphere.pose.position.z = mark.position
        sphere.pose.orientation.w = 1.0
        sphere.scale.x = sphere.scale.y = sphere.scale.z = SPHERE_M
        text = Marker(ns=f"{mark.agent_id}/labels", id=_id(mark), type=Marker.TEXT_VIEW_FACING,
                      action=Marker.ADD, color=WHITE, text=label(mark, now, with_agent))
        text.header.frame_id = frame
        text.pose.position.x, text.pose.position.y = mark.position.x, mark.position.y
        text.pose.position.z = mark.position.z + LABEL_ABOVE_M
        text.pose.orientation.w = 1.0
        text.scale.z = LABEL_M
        out += [sphere, text]
    return MarkerArray(markers=out)
