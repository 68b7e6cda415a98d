"""The verbs for a robot's surroundings: ``fleet-db`` (the fleet's server) and ``map``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_robot_verbs"]


def _cmd_fleet_db(args: argparse.Namespace) -> int:
    from brainmem_ros.bringup import fleet_db
    from brainmem_ros.core.errors import BrainMemError

    try:
        if args.action == "start":
            dsn = fleet_db.start(args.data, args.port)
            print(f"fleet server running in {args.data.resolve()} (stop: brainmem-ros fleet-db "
                  f"stop --data {args.data}); its administrator connects with:")
            print(dsn)
        elif args.action == "robot":
            if not args.name:
                raise BrainMemError("fleet-db robot needs the robot's NAME")
            print(f"robot {args.name} connects with (brainmem-ros bringup --fleet DSN):")
            print(fleet_db.add_robot_dsn(args.data, args.name))
        else:
            fleet_db.stop(args.data)
            print("fleet server stopped")
    except (BrainMemError, OSError) as exc:
        print(f"brainmem-ros fleet-db: {exc}", file=sys.stderr)
        return 2
    return 0


def _cmd_map(args: argparse.Namespace) -> int:
    from brainmem_ros.bringup.node_table import check_namespace
    from brainmem_ros.inspection.map_view import draw_markers, latest_markers

    try:
        markers = latest_markers(check_namespace(args.namespace), args.timeout)
    except (TimeoutError, ValueError) as exc:
        print(f"brainmem-ros map: {exc}", file=sys.stderr)
        return 2
    print(f"map: {draw_markers(markers, args.png)}")
    return 0


def add_robot_verbs(verbs, handlers: dict) -> None:
    """Add ``fleet-db`` and ``map`` to the command's verbs."""
    fd = verbs.add_parser(
        "fleet-db", help="a PostgreSQL server for a fleet in a folder: start, robot NAME, stop")
    fd.add_argument("action", choices=("start", "robot", "stop"))
    fd.add_argument("name", nargs="?", default="", help="the robot (for robot)")
    fd.add_argument("--data", type=Path, required=True, help="the server's folder")
    fd.add_argument("--port", type=int, default=5432,
                    help="names the private socket (no TCP port is opened); for a new folder")
    handlers["fleet-db"] = _cmd_fleet_db

    mp = verbs.add_parser(
        "map", help="draw what a running store_node remembers on the map (its markers) to a PNG")
    mp.add_argument("--png", type=Path, default=Path("results/map.png"))
    mp.add_argument("--namespace", default="", metavar="NS", help="the stack's namespace")
    mp.add_argument("--timeout", type=float, default=10.0, help="wait for the markers, seconds")
    handlers["map"] = _cmd_map
