"""Recorded runs as real rosbag2 files: written, read back, damaged ones refused.

Recorded runs as real rosbag2 files: written with rosbags (the package's own .msg definitions
registered), read back, and malformed or truncated bags refused with a clear error.
"""

import pytest

from brainmem_ros.nodes import names
from brainmem_ros.replay.bag import BagError, read_bag, write_bag


def run():
    from brainmem_ros.msg import ActionResult, Observation

    yield f"/{names.OBSERVATION}", 1_000_000_000, Observation(agent_id="r",
                                                              text="The milk is in the fridge.",
                                                              confidence=1.0)
    yield f"/{names.ACTION_RESULT}", 1_500_000_000, ActionResult(agent_id="r", action="open fridge",
                                                                 success=True,
                                                                 result="You open the fridge.")
    yield "/other/topic", 1_700_000_000, Observation(agent_id="r", text="not replayed")


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_written_bag_reads_back_message_for_message(tmp_path, storage):
    assert write_bag(tmp_path / "bag", run(), storage=storage) == 3
    got = list(read_bag(tmp_path / "bag"))
    assert [(t, s) for t, s, _ in got] == [(f"/{names.OBSERVATION}", 1_000_000_000),
                                           (f"/{names.ACTION_RESULT}", 1_500_000_000)]
    assert got[0][2].text == "The milk is in the fridge." and got[1][2].action == "open fridge"
    assert len(list(read_bag(tmp_path / "bag", topics=["/other/topic"]))) == 1


def test_the_shipped_bag_is_the_generated_one(repo_root, tmp_path):
    import runpy
    import sys

    sys.argv = ["make_kitchen_bag.py", str(tmp_path / "again")]
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(repo_root / "scripts" / "make_kitchen_bag.py"), run_name="__main__")
    assert done.value.code == 0
    shipped = [(t, s, m) for t, s, m in read_bag(repo_root / "bags" / "kitchen_run")]
    regenerated = [(t, s, m) for t, s, m in read_bag(tmp_path / "again")]
    assert len(shipped) == 12 and shipped == regenerated


def test_missing_and_damaged_bags_raise_bag_error(tmp_path):
    with pytest.raises(BagError, match="no bag at"):
        list(read_bag(tmp_path / "nothing"))
    write_bag(tmp_path / "bag", run())
    (tmp_path / "bag" / "metadata.yaml").write_text("rosbag2_bagfile_information: [broken")
    with pytest.raises(BagError, match="cannot open bag"):
        list(read_bag(tmp_path / "bag"))
    write_bag(tmp_path / "trunc", run())
    db = next((tmp_path / "trunc").glob("*.db3"))
    db.write_bytes(db.read_bytes()[:600])
    with pytest.raises(BagError):
        list(read_bag(tmp_path / "trunc"))


def test_a_malformed_message_is_skipped_and_reported(tmp_path):
    import sqlite3

    write_bag(tmp_path / "bag", run())
    db = next((tmp_path / "bag").glob("*.db3"))
    con = sqlite3.connect(db)
    con.execute("UPDATE messages SET data = x'00010203' WHERE timestamp = 1000000000")
    con.commit()
    con.close()
    got = list(read_bag(tmp_path / "bag"))
    assert isinstance(got[0][2], BagError) and "malformed" in str(got[0][2])
    assert got[1][2].action == "open fridge"
