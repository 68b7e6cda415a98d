#!/usr/bin/env python3
"""Write bags/kitchen_run: a short recorded kitchen run on the package's topics.

A short recorded kitchen run on the package's topics, for `make demo`, the replay tests and anyone
who wants to try `ros2 bag play` on it. Run from `source scripts/env.sh`:

    python scripts/make_kitchen_bag.py [OUT_DIR] [--storage sqlite3|mcap]
"""
import argparse
import shutil
import sys
from pathlib import Path

from brainmem_ros.nodes import names
from brainmem_ros.replay.bag import write_bag
from brainmem_ros.msg import ActionResult, Observation

AGENT = "robot"
RUN = [
    ("obs", "You are in the kitchen. The fridge is closed."),
    ("obs", "The butter is in the fridge."),
    ("obs", "The bread is in the cupboard."),
    ("obs", "The knife is in the drawer."),
    ("obs", "The tomato is on the left counter."),
    ("obs", "A cat toy is under the sofa in the living room."),
    ("act", "open the fridge", True, "You open the fridge."),
    ("act", "take the butter", True, "You took the butter from the fridge."),
    ("act", "put the butter on the counter", True, "You put the butter on the counter."),
    ("act", "pour water into the coffee machine", False,
     "The coffee machine was on and it short-circuits!"),
    ("obs", "The tomato is on the right-hand counter."),
    ("act", "take the bread", True, "You took the bread from the cupboard."),
]


def messages(start_ns: int = 1_750_000_000_000_000_000, step_ns: int = 200_000_000):
    for i, item in enumerate(RUN):
        stamp = start_ns + i * step_ns
        if item[0] == "obs":
            msg = Observation(agent_id=AGENT, text=item[1], location="kitchen", source="recorded",
                              confidence=1.0)
            topic = f"/{names.OBSERVATION}"  # recorded topics are absolute
        else:
            msg = ActionResult(agent_id=AGENT, action=item[1], success=item[2], result=item[3],
                               location="kitchen")
            topic = f"/{names.ACTION_RESULT}"
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp, 1_000_000_000)
        yield topic, stamp, msg


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path,
                        default=Path(__file__).resolve().parent.parent / "bags" / "kitchen_run")
    parser.add_argument("--storage", choices=("sqlite3", "mcap"), default="sqlite3")
    args = parser.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    count = write_bag(args.out, messages(), storage=args.storage)
    print(f"wrote {count} messages to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
