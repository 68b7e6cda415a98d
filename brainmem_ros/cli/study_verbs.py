"""The verbs of the wider evaluation.

``eval-grid`` (CookingWorld's whole parameter space) and ``eval-recall`` (the memory test with
TextWorld's ground truth).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["add_study_verbs"]


def _cmd_eval_grid(args: argparse.Namespace) -> int:
    from brainmem_ros.core.errors import BrainMemError
    from brainmem_ros.evaluation.grid import evaluate_grid, grid_table
    from brainmem_ros.evaluation.runner import EvalSettings, parse_seeds

    try:
        settings = EvalSettings(
            env=args.env, conditions=[c.strip() for c in args.conditions.split(",") if c.strip()],
            window=args.window,
            seeds=parse_seeds(args.seeds), max_steps=args.max_steps, fold=args.fold,
            config_path=str(args.config or ""))
        report = evaluate_grid(settings, progress=not args.quiet)
    except (BrainMemError, ValueError) as exc:
        print(f"brainmem-ros eval-grid: {exc}", file=sys.stderr)
        return 2
    print(grid_table(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))
        print(f"report: {args.json}")
    return 0


def _cmd_eval_recall(args: argparse.Namespace) -> int:
    from brainmem_ros.core.embedding import MiniLMEmbedder
    from brainmem_ros.core.errors import BrainMemError
    from brainmem_ros.evaluation.recall_test import recall_table, run_recall_test
    from brainmem_ros.evaluation.runner import parse_seeds

    try:
        options = _tw_options(args.tw_options)
        seeds = parse_seeds(args.seeds)
        report = run_recall_test(
            MiniLMEmbedder(), seeds, args.steps, args.k, options,
            on_game=lambda seed, n: print(f"game {seed}: {n} questions so far", flush=True))
    except (BrainMemError, ValueError) as exc:
        print(f"brainmem-ros eval-recall: {exc}", file=sys.stderr)
        return 2
    print(recall_table(report["summary"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False))
        print(f"report: {args.json}")
    return 0


def _cmd_eval_window(args: argparse.Namespace) -> int:
    from brainmem_ros.core.errors import BrainMemError
    from brainmem_ros.evaluation.runner import EvalSettings, parse_seeds
    from brainmem_ros.evaluation.window_sweep import plot_sweep, sweep_table, sweep_windows

    reports = []
    try:
        windows = [int(k) for k in args.windows.split(",") if k.strip()]
        for env in args.envs.split(","):
            settings = EvalSettings(
                env=env.strip(), seeds=parse_seeds(args.seeds), max_steps=args.max_steps,
                interruptions=env.strip() == "kitchen", fold="dev",
                game_params=args.cookingworld_params if env.strip() == "cookingworld" else "")
            reports.append(sweep_windows(settings, windows))
    except (BrainMemError, ValueError) as exc:
        print(f"brainmem-ros eval-window: {exc}", file=sys.stderr)
        return 2
    for report in reports:
        print(sweep_table(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(reports, indent=1))
    if args.plot:
        print(f"plot: {plot_sweep(reports, args.plot)}")
    return 0


def _tw_options(text: str) -> dict:
    """Parse "recipe=3,take=3,go=6,open=1": tw-make's own flag names."""
    options = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if not value.strip().isdigit():
            raise ValueError(f"tw-cooking options are name=integer, got {part!r}")
        options[name.strip()] = int(value)
    return options


def add_study_verbs(verbs, handlers: dict) -> None:
    """Add ``eval-grid``, ``eval-recall`` and ``eval-window`` to the command's verbs."""
    grid = verbs.add_parser(
        "eval-grid", help="CookingWorld or TextWorld's kitchens over every value of their game "
        "parameters, per condition")
    grid.add_argument("--env", choices=("cookingworld", "textworld"), default="cookingworld")
    grid.add_argument("--conditions", default="window,brainmem,full")
    grid.add_argument("--window", type=int, default=5)
    grid.add_argument("--seeds", default="0-19",
                      help="games per cell (CookingWorld: indexes into the fold; TextWorld: seeds)")
    grid.add_argument("--fold", choices=("train", "dev", "test"), default="dev")
    grid.add_argument("--max-steps", type=int, default=100)
    grid.add_argument("--config", type=Path, default=None)
    grid.add_argument("--json", type=Path, default=None, metavar="PATH")
    grid.add_argument("--quiet", action="store_true")
    handlers["eval-grid"] = _cmd_eval_grid

    recall = verbs.add_parser(
        "eval-recall", help="the memory test: TextWorld walks, questions scored by the engine's "
        "facts, the pipeline against vector, BM25 and a window, and the route ablation")
    recall.add_argument("--seeds", default="0-19", help="games (tw-make seeds)")
    recall.add_argument("--steps", type=int, default=80, help="steps walked per game")
    recall.add_argument("--k", type=int, default=5, help="memories every method answers with")
    recall.add_argument("--tw-options", default="", metavar="OPTS",
                        help="tw-cooking options, e.g. recipe=3,take=3,go=6,open=1,cook=1,cut=1")
    recall.add_argument("--json", type=Path, default=None, metavar="PATH")
    handlers["eval-recall"] = _cmd_eval_recall

    window = verbs.add_parser(
        "eval-window", help="window and brainmem at K = 1, 3, 5, 10, 20 (CookingWorld dev fold, "
        "the kitchen with interruptions); one plot")
    window.add_argument("--envs", default="cookingworld,kitchen")
    window.add_argument("--windows", default="1,3,5,10,20")
    window.add_argument("--seeds", default="0-19")
    window.add_argument("--max-steps", type=int, default=100)
    window.add_argument("--cookingworld-params", default="", metavar="PARAMS",
                        help="CookingWorld game parameters (default: the engine's own defaults)")
    window.add_argument("--json", type=Path, default=None, metavar="PATH")
    window.add_argument("--plot", type=Path, default=None, metavar="PNG")
    handlers["eval-window"] = _cmd_eval_window
