"""Which pose goes with a caption: the newest usable one, if it is recent."""
import math

import pytest

from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.pose_track import PoseTrack


def test_a_recent_pose_places_a_caption_and_an_old_one_does_not():
    track = PoseTrack(max_age_s=1.0, fixed_frame="map")
    assert track.at(10.0) is None
    track.update(1.0, 2.0, 0.0, "map", 10.0, now=10.0)
    assert track.at(10.5).position == (1.0, 2.0, 0.0)
    assert track.at(11.5) is None


def test_an_empty_frame_is_the_fixed_frame_and_a_zero_stamp_is_now():
    track = PoseTrack(1.0, "map")
    fix = track.update(1.0, 1.0, 0.0, "", 0.0, now=42.0)
    assert (fix.frame, fix.stamp) == ("map", 42.0)


@pytest.mark.parametrize("x, frame, stamp, reason", [
    (math.nan, "map", 1.0, "NaN"),
    (math.inf, "map", 1.0, "NaN or infinite"),
    (1.0, "odom", 1.0, "pose in frame 'odom'"),
    (1.0, "has space", 1.0, "not a frame name"),
    (1.0, "map", -1.0, "stamp"),
])
def test_unusable_poses_are_refused_and_the_previous_one_is_kept(x, frame, stamp, reason):
    track = PoseTrack(5.0, "map")
    track.update(1.0, 1.0, 0.0, "map", 10.0, now=10.0)
    with pytest.raises(InvalidRequest, match=reason):
        track.update(x, 2.0, 0.0, frame, stamp, now=10.0)
    assert track.at(10.0).position == (1.0, 1.0, 0.0)


def test_frames_listed_in_the_store_are_accepted_and_an_older_pose_does_not_replace_a_newer():
    track = PoseTrack(5.0, "map", frames=["odom"])
    track.update(1.0, 1.0, 0.0, "odom", 10.0, now=10.0)
    track.update(9.0, 9.0, 0.0, "map", 8.0, now=10.0)
    assert track.at(10.0).frame == "odom"
