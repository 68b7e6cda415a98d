"""The ``brainmem-ros`` command: thin verbs over the package's library functions.

Each verb only parses its arguments and calls one function of the library, so everything a verb does
is reachable (and tested) without a shell.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, Sequence

from brainmem_ros import __version__
from brainmem_ros.cli.robot_verbs import add_robot_verbs
from brainmem_ros.cli.study_verbs import add_study_verbs
from brainmem_ros.core.embedding import BACKENDS

Verb = Callable[[argparse.Namespace], int]


def _cmd_demo(args: argparse.Namespace) -> int:
    from brainmem_ros.demo import run_bag_demo, run_demo
    from brainmem_ros.demo.map_walk import run_map_demo

    if args.map:
        return run_map_demo(args.map)
    return run_bag_demo() if args.bag else run_demo(args.out)


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


def _peers(text: str) -> tuple[str, ...]:
    from brainmem_ros.bench.peers import PEERS

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = sorted(set(names) - set(PEERS))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown peer(s) {', '.join(unknown) or '(none)'}; known: {', '.join(PEERS)}")
    return names


def _load_config(path):
    from brainmem_ros.core.config import MemoryConfig

    return MemoryConfig.from_yaml(path) if path else MemoryConfig()


def _cmd_bench(args: argparse.Namespace) -> int:
    from brainmem_ros.bench.core import DEFAULT_SIZES, format_table, run_bench
    from brainmem_ros.core.embedding import MiniLMEmbedder

    config = _load_config(args.config)
    if args.backend:
        config = config.replace(**{"embedding.backend": args.backend})
    embedder = MiniLMEmbedder.configured(config.embedding)
    if args.fleet:
        import json

        from brainmem_ros.bench.fleet import bench_fleet, format_fleet

        total = (args.sizes or [100000])[0]
        report = bench_fleet(args.fleet, total, embedder, config, args.queries,
                             progress=not args.quiet)
        print(format_fleet(report))
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(report, indent=1))
            print(f"report: {args.json}")
        return 0
    report = run_bench(args.sizes or DEFAULT_SIZES, args.queries, args.json, embedder, config,
                       progress=not args.quiet, peers=args.peers, peer_max_size=args.peer_max_size)
    print(format_table(report))
    if "systems" in report:
        from brainmem_ros.bench.peers import format_peer_table, format_ratios

        print("\nthe same vectors and queries in each store (top-10, vector given):")
        print(format_peer_table(report["systems"]))
        for size, found in report.get("ratios", {}).items():
            print(f"\nat {int(size):,}:\n" + "\n".join(format_ratios(f) for f in found))
    if args.json:
        print(f"report: {args.json}")
    if args.plot:
        from brainmem_ros.bench.plot import plot_curves, plot_ingest, plot_report

        print(f"plot: {plot_report(report, args.plot)}")
        if "systems" in report:
            curves = args.plot.with_name(f"{args.plot.stem}_curves{args.plot.suffix}")
            print(f"plot: {plot_curves(report['systems'], curves)}")
            course = plot_ingest(report["systems"],
                                 args.plot.with_name(f"{args.plot.stem}_ingest{args.plot.suffix}"))
            if course is not None:
                print(f"plot: {course}")
    return 0


def _cmd_bringup(args: argparse.Namespace) -> int:
    from brainmem_ros.bringup import bringup, bringup_processes

    start = bringup if args.one_process else bringup_processes
    return start(args.config, args.store, args.ready_file, args.ros_args, demo=args.demo,
                 namespace=args.namespace, use_sim_time=args.use_sim_time,
                 captions=args.captions, fleet=args.fleet)


def _cmd_replay(args: argparse.Namespace) -> int:
    from brainmem_ros.bringup.node_table import check_namespace

    try:
        namespace = check_namespace(args.namespace)
    except ValueError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from brainmem_ros.replay.bag import BagError, replay

    rclpy.init()
    node = rclpy.create_node("brainmem_replay", namespace=namespace or "/")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        report = replay(node, args.bag, args.rate, args.topics, restamp=args.restamp,
                        clock=args.clock)
    except BagError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 1
    finally:
        executor.spin_once(timeout_sec=0.5)  # let the last messages leave
        node.destroy_node()
        rclpy.try_shutdown()
    print(f"replayed {report.published} messages in {report.seconds:.1f} s, "
          f"skipped {report.skipped}")
    for problem in report.problems[:10]:
        print(f"  {problem}")
    return 0


def _cmd_eval_retrieval(args: argparse.Namespace) -> int:
    import json

    from brainmem_ros.core.embedding import MiniLMEmbedder
    from brainmem_ros.evaluation.retrieval_quality import evaluate_retrieval

    result = evaluate_retrieval(MiniLMEmbedder(args.backend), k=args.k)
    print(f"questions: {len(result.per_question)}  k = {result.k}")
    for name, rec, prec, stale in (
            ("fused pipeline", result.fused_recall, result.fused_precision, result.fused_stale),
            ("vector alone  ", result.vector_recall, result.vector_precision, result.vector_stale)):
        print(f"{name} recall@{result.k}: {rec:.3f}  precision@{result.k}: {prec:.3f}"
              f"  stale facts returned: {len(stale)}")
    print("  recall (fused, vector)  precision (fused, vector)  question")
    for row in result.per_question:
        print(f"  {row['fused_recall']:.2f}  {row['vector_recall']:.2f}"
              f"  {row['fused_precision']:.2f}  {row['vector_precision']:.2f}  {row['query']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:

    from brainmem_ros.core.errors import BrainMemError
    from brainmem_ros.evaluation.plot import plot_eval
    from brainmem_ros.evaluation.runner import (EvalSettings, evaluate, parse_seeds, table,
                                                write_json)

    try:
        settings = EvalSettings(
            env=args.env, conditions=[c.strip() for c in args.conditions.split(",")
                                      if c.strip()], window=args.window,
            seeds=parse_seeds(args.seeds), max_steps=args.max_steps, attempts=args.attempts,
            interruptions=args.interruptions, fold=args.fold, game_params=args.game_params or "",
            top_k=args.top_k, planner=args.planner, config_path=str(args.config or ""),
            lifelong=args.lifelong, llm_model=args.llm_model, llm_choose=args.llm_choose)
        if args.fleet:
            from brainmem_ros.evaluation.fleet import evaluate_fleet, fleet_table

            report = evaluate_fleet(settings, args.fleet, progress=not args.quiet)
        elif args.via_ros:
            from brainmem_ros.evaluation.via_ros import evaluate_via_ros

            report = evaluate_via_ros(settings, progress=not args.quiet)
        else:
            report = evaluate(settings, progress=not args.quiet)
    except (BrainMemError, ValueError) as exc:
        print(f"brainmem-ros eval: {exc}", file=sys.stderr)
        return 2
    print(fleet_table(report) if args.fleet else table(report))
    if args.json:
        write_json(report, str(args.json))
        print(f"report: {args.json}")
    if args.plot:
        plot_eval([report], args.plot)
        print(f"plot: {args.plot}")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from brainmem_ros.core.errors import BrainMemError
    from brainmem_ros.inspection import describe, inspect_store, to_json

    try:
        report = inspect_store(args.store)
    except BrainMemError as exc:
        print(f"brainmem-ros inspect: {exc}", file=sys.stderr)
        return 2
    print(to_json(report) if args.json else describe(report))
    return 0 if report["integrity_ok"] else 1


def _cmd_loadtest(args: argparse.Namespace) -> int:
    from brainmem_ros.loadtest import describe, run_loadtest

    if args.clients < 1 or args.seconds <= 0 or args.rate < 0 or args.client_rate < 0:
        print(
            "brainmem-ros loadtest: --clients >= 1, --seconds > 0, --rate >= 0, --client-rate >= 0",
            file=sys.stderr)
        return 2
    report = run_loadtest(args.clients, args.seconds, args.rate, args.external, args.config,
                          args.json, client_rate=args.client_rate, one_process=args.one_process,
                          novel_queries=args.novel_queries, namespace=args.namespace)
    print(describe(report), flush=True)
    code = 0 if report["errors"] == 0 else 1
    if report.get("teardown_hung"):
        # The interpreter's exit would wait on the same DDS lock again; the report is written.
        sys.stderr.flush()
        os._exit(code)
    return code


def _cmd_params(args: argparse.Namespace) -> int:
    from brainmem_ros.core.config import ConfigError, defaults_yaml, iter_params

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
        bounds = (f" [{lo}, {hi}]" if lo is not None
                  else f" one of {', '.join(p.choices)}" if p.choices else "")
        print(f"{p.name} ({p.type.__name__}, default {p.default!r}{bounds}): {p.description}")
    return 0


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Verb]]:
    parser = argparse.ArgumentParser(prog="brainmem-ros", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"brainmem_ros {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    handlers: dict[str, Verb] = {}

    demo = verbs.add_parser(
        "demo",
        help="run the main job: kitchen episodes through the ROS nodes, per memory condition")
    demo.add_argument("--bag", action="store_true",
                      help="instead: replay the recorded kitchen run and ask questions")
    demo.add_argument("--map", type=Path, default=None, metavar="PNG",
                      help="instead: a robot walks a kitchen captioning what it sees; draw what "
                      "it remembers (store_node's markers) to PNG")
    demo.add_argument("--out", type=Path, default=Path("results"),
                      help="folder for the report and the plot")
    handlers["demo"] = _cmd_demo

    bench = verbs.add_parser("bench", help="measure the memory core as the store grows")
    bench.add_argument("--sizes", type=_sizes, default=None,
                       help="comma-separated store sizes (default 1k,10k,100k)")
    bench.add_argument("--queries", type=int, default=200, help="retrieval calls measured per size")
    bench.add_argument("--json", type=Path, default=None, metavar="PATH",
                       help="write the full report here")
    bench.add_argument("--plot", type=Path, default=None, metavar="PNG",
                       help="draw latency and ingest against size")
    bench.add_argument("--config", type=Path, default=None,
                       help="parameter file (default: built-in defaults)")
    bench.add_argument("--backend", choices=BACKENDS, default=None, help="embedding backend")
    bench.add_argument("--quiet", action="store_true", help="no progress bars")
    bench.add_argument(
        "--fleet", type=int, default=0, metavar="N",
        help="instead: N robots share the first --sizes memories through a PostgreSQL server "
        "started for the run (push, pull, server disk, sync lag, retrieval with and without)")
    bench.add_argument(
        "--peers", type=_peers, default=(), metavar="NAMES",
        help="also measure these stores on the same data, comma-separated: chromadb, qdrant, "
        "lancedb, milvus, sqlite-vec, faiss (installed by `make peers`)")
    bench.add_argument("--peer-max-size", type=int, default=100000, metavar="N",
                       help="sizes above this are measured for brainmem only")
    handlers["bench"] = _cmd_bench

    quality = verbs.add_parser("eval-retrieval",
                               help="recall@k of the fused pipeline against vector search alone")
    quality.add_argument("--k", type=int, default=5)
    quality.add_argument("--backend", choices=BACKENDS, default=BACKENDS[0],
                         help="embedding backend")
    quality.add_argument("--json", type=Path, default=None, metavar="PATH")
    handlers["eval-retrieval"] = _cmd_eval_retrieval

    up = verbs.add_parser(
        "bringup", help="run the memory nodes as memory.launch.py does, one process each (no ros2 "
        "launch needed)")
    up.add_argument("--config", type=Path, default=None,
                    help="parameter file (default: config/memory.yaml)")
    up.add_argument("--store", default=None,
                    help="SQLite file of long-term memory (overrides store.path)")
    up.add_argument(
        "--demo", action="store_true",
        help="also start kitchen_sim_node and a scripted planner_node "
        "playing a few interrupted kitchen episodes")
    up.add_argument("--captions", action="store_true",
                    help="also start caption_node: std_msgs/String captions on 'caption', placed "
                    "at the pose on 'pose' or 'odom', become observations")
    up.add_argument("--namespace", default="", metavar="NS",
                    help="put every topic and service of the stack under /NS (robots side by side)")
    up.add_argument("--fleet", default="", metavar="DSN",
                    help="share memories with a fleet through this PostgreSQL server "
                    "(brainmem-ros fleet-db robot NAME prints one)")
    up.add_argument("--use-sim-time", action="store_true",
                    help="the nodes take their time from /clock (a simulator, or replay --clock)")
    up.add_argument("--one-process", action="store_true",
                    help="every node in this one process: the light way for one planner (under "
                    "several clients, one process per node answers faster)")
    up.add_argument("--ready-file", type=Path, default=None, help=argparse.SUPPRESS)
    handlers["bringup"] = _cmd_bringup

    rp = verbs.add_parser(
        "replay", help="play a recorded run (rosbag2, sqlite3 or mcap) into the running nodes")
    rp.add_argument("bag", type=Path)
    rp.add_argument("--rate", type=float, default=1.0,
                    help="speed factor of recorded timing; 0: as fast as possible")
    rp.add_argument("--topics", nargs="*", default=None,
                    help="topics to play (default: observation and action_result)")
    rp.add_argument("--restamp", action="store_true",
                    help="shift header stamps so the run starts now")
    rp.add_argument("--clock", action="store_true",
                    help="publish /clock from the bag's time, as ros2 bag play --clock (for nodes "
                    "on "
                    "use_sim_time)")
    rp.add_argument("--namespace", default="", metavar="NS",
                    help="replay the recorded topics under /NS (the stack of robot NS)")
    handlers["replay"] = _cmd_replay

    ev = verbs.add_parser(
        "eval", help="task success with and without memory on our kitchen or CookingWorld")
    ev.add_argument("--env", choices=("kitchen", "cookingworld", "textworld"), default="kitchen")
    ev.add_argument("--conditions", default="window,brainmem,full",
                    help="comma-separated: window, brainmem, full")
    ev.add_argument("--window", type=int, default=5,
                    help="K: steps of history every condition shows the planner")
    ev.add_argument("--seeds", default="0-9",
                    help="episodes, e.g. 0-29 (CookingWorld: indexes into the fold)")
    ev.add_argument("--fold", choices=("train", "dev", "test"), default="dev",
                    help="CookingWorld fold (test: acceptance only)")
    ev.add_argument(
        "--game-params", default=None,
        help="environment parameters, e.g. numLocations=8,numIngredients=4 (CookingWorld), "
        "recipe=3,take=2,go=6,open=1,cook=1,cut=1,drop=0 (TextWorld) or hazard_rate=1.0 (kitchen)")
    ev.add_argument("--interruptions", action="store_true",
                    help="a timer rings in another room at a random step")
    ev.add_argument("--attempts", type=int, default=1,
                    help="attempts per seed, memory kept across them (brainmem)")
    ev.add_argument(
        "--lifelong", action="store_true", help="one robot plays every seed in order, its memory "
        "kept from one to the next (brainmem; default: a fresh memory per seed)")
    ev.add_argument(
        "--fleet", type=int, default=0, metavar="N",
        help="N robots play each seed in turn, isolated and sharing through a PostgreSQL server "
        "started for the run (brainmem only; use --game-params hazard_rate=1.0)")
    ev.add_argument("--max-steps", type=int, default=100,
                    help="step budget per episode, the same for every condition")
    ev.add_argument("--top-k", type=int, default=5,
                    help="memories per question asked before an action")
    ev.add_argument(
        "--planner", choices=("scripted", "llm"), default="scripted",
        help="llm: an OpenAI-compatible endpoint from BRAINMEM_LLM_BASE_URL / _MODEL / _API_KEY")
    ev.add_argument("--llm-model", default="", choices=("", "smollm2-135m", "gemma3-270m"),
                    help="serve this small model locally with llama.cpp for --planner llm")
    ev.add_argument("--llm-choose", choices=("generate", "score"), default="generate",
                    help="llm: free generation mapped to an action, or each valid action scored "
                    "by its mean log-probability")
    ev.add_argument("--config", type=Path, default=None,
                    help="memory parameter file (default: built-in defaults)")
    ev.add_argument(
        "--via-ros", action="store_true",
        help="run the episodes through planner_node, kitchen_sim_node "
        "and the memory nodes over DDS")
    ev.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the report here")
    ev.add_argument("--plot", type=Path, default=None, metavar="PNG", help="draw the report")
    ev.add_argument("--quiet", action="store_true", help="no progress bars")
    handlers["eval"] = _cmd_eval

    ins = verbs.add_parser(
        "inspect",
        help="counts per agent and zone, the ids present, the integrity check of a store")
    ins.add_argument("--store", required=True, help="the SQLite file of a memory store")
    ins.add_argument("--json", action="store_true",
                     help="machine-readable: ids, counts, integrity_ok, ...")
    handlers["inspect"] = _cmd_inspect

    add_robot_verbs(verbs, handlers)
    add_study_verbs(verbs, handlers)

    lt = verbs.add_parser(
        "loadtest", help="N client processes on /retrieve_memory while observations stream in")
    lt.add_argument("--clients", type=int, default=8)
    lt.add_argument("--seconds", type=float, default=60.0)
    lt.add_argument("--rate", type=float, default=50.0, help="observations per second streamed in")
    lt.add_argument(
        "--client-rate", type=float, default=0.0, metavar="HZ",
        help="calls per second per client, as a planner deciding at that rate; 0: back to back")
    lt.add_argument(
        "--novel-queries", action="store_true",
        help="every call asks a question not asked before (default: six questions in turn, whose "
        "embeddings the store then has cached)")
    lt.add_argument("--one-process", action="store_true",
                    help="start the memory nodes in one process (default: one process per node)")
    lt.add_argument("--external", action="store_true",
                    help="use memory nodes already running (else start them)")
    lt.add_argument("--config", type=Path, default=None,
                    help="parameter file for the memory nodes it starts")
    lt.add_argument("--namespace", default="", metavar="NS",
                    help="the stack under /NS (started there, or already running there)")
    lt.add_argument("--json", type=Path, default=None, metavar="PATH")
    handlers["loadtest"] = _cmd_loadtest

    params = verbs.add_parser("params",
                              help="list every parameter with its default, range and description")
    params.add_argument("--check", type=Path, default=None, metavar="FILE",
                        help="validate a parameter file")
    params.add_argument("--yaml", action="store_true",
                        help="print a parameter file with every default")
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
