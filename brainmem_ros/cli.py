"""The ``brainmem-ros`` command: thin verbs over the package's library functions.

Each verb only parses its arguments and calls one function of the library, so everything a verb does
is reachable (and tested) without a shell.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

from brainmem_ros import __version__

Verb = Callable[[argparse.Namespace], int]


def _cmd_demo(args: argparse.Namespace) -> int:
    from brainmem_ros.demo import run_demo

    return run_demo()


def _sizes(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        factor = 1_000_000 if part.endswith("m") else 1000 if part.endswith("k") else 1
        value = int(float(part.rstrip("km")) * factor)
        if value < 1:
            raise argparse.ArgumentTypeError(f"store size must be positive: {part}")
        out.append(value)
    return out


def _load_config(path):
    from brainmem_ros.config import MemoryConfig

    return MemoryConfig.from_yaml(path) if path else MemoryConfig()


def _cmd_bench(args: argparse.Namespace) -> int:
    from brainmem_ros.bench.core import DEFAULT_SIZES, format_table, run_bench
    from brainmem_ros.embedding import MiniLMEmbedder

    config = _load_config(args.config)
    if args.backend:
        config = config.replace(**{"embedding.backend": args.backend})
    embedder = MiniLMEmbedder(config.embedding.backend, config.embedding.threads, config.embedding.batch_size)
    report = run_bench(args.sizes or DEFAULT_SIZES, args.queries, args.json, embedder, config,
                       progress=not args.quiet)
    print(format_table(report))
    if args.json:
        print(f"report: {args.json}")
    if args.plot:
        from brainmem_ros.bench.plot import plot_report

        print(f"plot: {plot_report(report, args.plot)}")
    return 0


def _cmd_bringup(args: argparse.Namespace) -> int:
    from brainmem_ros.bringup import bringup

    return bringup(args.config, args.store, args.ready_file, args.ros_args)


def _cmd_replay(args: argparse.Namespace) -> int:
    import rclpy

    from brainmem_ros.bag import BagError, replay

    rclpy.init()
    node = rclpy.create_node("brainmem_replay")
    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)
    try:
        report = replay(node, args.bag, args.rate, args.topics, restamp=args.restamp)
    except BagError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 1
    finally:
        executor.spin_once(timeout_sec=0.5)  # let the last messages leave
        node.destroy_node()
        rclpy.try_shutdown()
    print(f"replayed {report.published} messages in {report.seconds:.1f} s, skipped {report.skipped}")
    for problem in report.problems[:10]:
        print(f"  skipped: {problem}")
    return 0


def _cmd_eval_retrieval(args: argparse.Namespace) -> int:
    import json

    from brainmem_ros.embedding import MiniLMEmbedder
    from brainmem_ros.retrieval_eval import evaluate_retrieval

    result = evaluate_retrieval(MiniLMEmbedder(), k=args.k)
    print(f"questions: {len(result.per_question)}  k = {result.k}")
    print(f"fused pipeline recall@{result.k}: {result.fused_recall:.3f}   stale facts returned: {len(result.fused_stale)}")
    print(f"vector alone   recall@{result.k}: {result.vector_recall:.3f}   stale facts returned: {len(result.vector_stale)}")
    for row in result.per_question:
        print(f"  {row['fused_recall']:.2f}  {row['vector_recall']:.2f}  {row['query']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
    return 0


def _cmd_params(args: argparse.Namespace) -> int:
    from brainmem_ros.config import ConfigError, defaults_yaml, iter_params

    if args.yaml:
        print(defaults_yaml(), end="")
        return 0
    if args.check:
        try:
            _load_config(args.check)
        except ConfigError as exc:
            print(f"{args.check}: {exc}", file=sys.stderr)
            return 1
        print(f"{args.check}: ok")
        return 0
    for p in iter_params():
        lo, hi = p.range
        bounds = f" [{lo}, {hi}]" if lo is not None else f" one of {', '.join(p.choices)}" if p.choices else ""
        print(f"{p.name} ({p.type.__name__}, default {p.default!r}{bounds}): {p.description}")
    return 0


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Verb]]:
    parser = argparse.ArgumentParser(prog="brainmem-ros", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"brainmem_ros {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    handlers: dict[str, Verb] = {}

    verbs.add_parser("demo", help="run the main job: the memory nodes fed a recorded kitchen run, then questioned")
    handlers["demo"] = _cmd_demo

    bench = verbs.add_parser("bench", help="measure the memory core as the store grows")
    bench.add_argument("--sizes", type=_sizes, default=None, help="comma-separated store sizes (default 1k,10k,100k)")
    bench.add_argument("--queries", type=int, default=200, help="retrieval calls measured per size")
    bench.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the full report here")
    bench.add_argument("--plot", type=Path, default=None, metavar="PNG", help="draw latency and ingest against size")
    bench.add_argument("--config", type=Path, default=None, help="parameter file (default: built-in defaults)")
    bench.add_argument("--backend", choices=("onnx", "torch"), default=None, help="embedding backend")
    bench.add_argument("--quiet", action="store_true", help="no progress bars")
    handlers["bench"] = _cmd_bench

    quality = verbs.add_parser("eval-retrieval", help="recall@k of the fused pipeline against vector search alone")
    quality.add_argument("--k", type=int, default=5)
    quality.add_argument("--json", type=Path, default=None, metavar="PATH")
    handlers["eval-retrieval"] = _cmd_eval_retrieval

    up = verbs.add_parser("bringup", help="run the memory nodes in one process (no ros2 launch needed)")
    up.add_argument("--config", type=Path, default=None, help="parameter file (default: config/memory.yaml)")
    up.add_argument("--store", default=None, help="SQLite file of long-term memory (overrides store.path)")
    up.add_argument("--ready-file", type=Path, default=None, help=argparse.SUPPRESS)
    handlers["bringup"] = _cmd_bringup

    rp = verbs.add_parser("replay", help="play a recorded run (rosbag2, sqlite3 or mcap) into the running nodes")
    rp.add_argument("bag", type=Path)
    rp.add_argument("--rate", type=float, default=1.0, help="speed factor of recorded timing; 0: as fast as possible")
    rp.add_argument("--topics", nargs="*", default=None, help="topics to play (default: observation and action_result)")
    rp.add_argument("--restamp", action="store_true", help="shift header stamps so the run starts now")
    handlers["replay"] = _cmd_replay

    params = verbs.add_parser("params", help="list every parameter with its default, range and description")
    params.add_argument("--check", type=Path, default=None, metavar="FILE", help="validate a parameter file")
    params.add_argument("--yaml", action="store_true", help="print a parameter file with every default")
    handlers["params"] = _cmd_params
    return parser, handlers


def main(argv: Sequence[str] | None = None) -> int:
    parser, handlers = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    ros_args: list[str] = []
    if "--ros-args" in argv:  # everything from --ros-args on goes to the nodes, as with `ros2 run`
        at = argv.index("--ros-args")
        argv, ros_args = argv[:at], argv[at:]
    args = parser.parse_args(argv)
    args.ros_args = ros_args
    if not args.verb:
        parser.print_help()
        return 2
    return handlers[args.verb](args)


if __name__ == "__main__":
    sys.exit(main())
