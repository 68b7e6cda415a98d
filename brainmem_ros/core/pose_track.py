"""Which position goes with a caption: the robot's newest pose, if it is recent and usable.

A captioning or vision-language node says what the robot sees, with no position; the robot's pose
comes on another topic. A caption is placed at the newest pose no older than ``max_age_s`` (the
robot may have moved since an older one), and stored without a position when there is none. Poses
with NaN, or in a frame the store does not keep positions in, are refused: there is no tf2 here to
transform them, and a wrong position is worse than none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.trace import Position
from brainmem_ros.core.validation import check_frame

__all__ = ["Fix", "PoseTrack"]


@dataclass(frozen=True)
class Fix:
    position: Position
    frame: str
    stamp: float


class PoseTrack:

    def __init__(self, max_age_s: float, fixed_frame: str, frames: Sequence[str] = ()):
        self.max_age_s = max_age_s
        self.fixed_frame = fixed_frame
        self.frames = {fixed_frame, *frames}
        self.newest: Optional[Fix] = None

    def update(self, x: float, y: float, z: float, frame: str, stamp: float, now: float) -> Fix:
        """Take a pose; raise InvalidRequest (and keep the previous one) when it is unusable.

        An empty frame is the fixed frame; a zero stamp means "now", as for observations.
        """
        if not all(math.isfinite(c) for c in (x, y, z)):
            raise InvalidRequest(f"pose ({x}, {y}, {z}) has NaN or infinite coordinates")
        frame = check_frame(frame) or self.fixed_frame
        if frame not in self.frames:
            raise InvalidRequest(
                f"pose in frame {frame!r}: positions are kept in {', '.join(sorted(self.frames))}"
                " and nothing is transformed here (no tf2); publish the pose in that frame or add"
                " its frame to store.frames")
        if not math.isfinite(stamp) or stamp < 0:
            raise InvalidRequest(f"pose stamp must be a time in seconds, got {stamp!r}")
        fix = Fix(Position(float(x), float(y), float(z)), frame, stamp or now)
        if self.newest is None or fix.stamp >= self.newest.stamp:
            self.newest = fix
        return fix

    def at(self, now: float) -> Optional[Fix]:
        """Return the pose to place something seen at ``now``, or None when none is recent."""
        if self.newest is None or now - self.newest.stamp > self.max_age_s:
            return None
        return self.newest
