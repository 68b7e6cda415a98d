"""The kitchens over their whole parameter space: every value of every game parameter.

CookingWorld: one cell per value of one parameter with the others at the engine's defaults (the
defaults are a cell too), so each row of the table says what that one parameter does to each
condition. TextWorld's cooking games: the same around the First TextWorld Problems' middle setting
(``DEFAULT_TW_PARAMS``), plus tw-make's own defaults and everything switched on at once. A game
counts in a cell's success rate only when the engine's own solution fits the step budget: a game no
planner could finish in time says nothing about memory.
"""
from __future__ import annotations

import time
from typing import Callable, Optional

from brainmem_ros.kitchen.cookingworld import ENGINE_DEFAULTS
from brainmem_ros.kitchen.textworld_cooking import parse_tw_params

__all__ = ["ENGINE_DEFAULTS", "PARAMETER_VALUES", "TW_VALUES", "grid_cells", "cell_params",
           "evaluate_grid", "grid_table"]

# The values TextWorldExpress CookingWorld accepts (the engine refuses others).
PARAMETER_VALUES = {"numLocations": range(1, 12), "numIngredients": range(1, 6),
                    "numDistractorItems": range(0, 11), "includeDoors": (0, 1),
                    "limitInventorySize": (0, 1)}


TW_VALUES = {"recipe": range(1, 6), "take": range(0, 4), "go": (1, 6, 9, 12), "open": (0, 1),
             "cook": (0, 1), "cut": (0, 1), "drop": (0, 1)}


def cell_params(cell: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in cell.items())


def grid_cells(env: str = "cookingworld") -> list[dict]:
    """Return the defaults first, then each parameter's other values, one at a time."""
    base = dict(ENGINE_DEFAULTS) if env == "cookingworld" else parse_tw_params("")
    values = PARAMETER_VALUES if env == "cookingworld" else TW_VALUES
    cells = [base]
    for name, options in values.items():
        for value in options:
            if value != base[name]:
                cells.append(dict(base, **{name: value}))
    if env == "textworld":  # take at most what the recipe has; tw-make's own defaults; everything
        cells = [dict(c, take=min(c["take"], c["recipe"])) for c in cells]
        cells += [{"recipe": 1, "take": 0, "go": 1, "open": 0, "cook": 0, "cut": 0, "drop": 0},
                  {"recipe": 5, "take": 5, "go": 12, "open": 1, "cook": 1, "cut": 1, "drop": 1}]
    return list({cell_params(c): c for c in cells}.values())


def evaluate_grid(settings, cells: Optional[list[dict]] = None, progress: bool = True,
                  on_cell: Optional[Callable[[dict], None]] = None) -> dict:
    """Play every cell with ``settings`` (its ``game_params`` replaced per cell); one report."""
    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.embedding import MiniLMEmbedder
    from brainmem_ros.evaluation.runner import evaluate
    from brainmem_ros.kitchen.cookingworld import CookingWorld
    from brainmem_ros.kitchen.textworld_cooking import TextWorldCooking

    config = MemoryConfig.from_yaml(
        settings.config_path) if settings.config_path else MemoryConfig()
    embedder = MiniLMEmbedder.configured(config.embedding) \
        if "brainmem" in settings.conditions else None
    started, rows = time.time(), []
    cells = cells or grid_cells(settings.env)
    for i, cell in enumerate(cells):
        params = cell_params(cell)
        engine = CookingWorld(settings.fold, params) if settings.env == "cookingworld" \
            else TextWorldCooking(params)
        try:
            gold = {seed: len(engine.gold_path(seed)) for seed in settings.seeds}
        finally:
            engine.close()
        settings.game_params = params
        report = evaluate(settings, progress=False, embedder=embedder)
        fits = {seed for seed, steps in gold.items() if steps <= settings.max_steps}
        row = {"cell": cell, "params": params, "gold_steps": gold, "games": len(gold),
               "games_fitting": len(fits), "conditions": {}}
        for name, summary in report["conditions"].items():
            played = [e for e in summary["episodes_detail"] if e["seed"] in fits]
            row["conditions"][name] = {
                "success_rate": sum(e["success"] for e in played) / len(played) if played else None,
                "mean_steps": sum(e["steps"] for e in played) / len(played) if played else None,
            }
        rows.append(row)
        if progress:
            rates = "  ".join(f"{n} {_pct(c['success_rate'])}"
                              for n, c in row["conditions"].items())
            print(f"[{i + 1}/{len(cells)}] {params}: {rates}", flush=True)
        if on_cell:
            on_cell(row)
    return {"config": dict(settings.to_dict(), game_params="per cell"), "cells": rows,
            "wall_s": round(time.time() - started, 1)}


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def grid_table(report: dict) -> str:
    """Markdown: one row per cell, the parameter that differs from the defaults named first."""
    conditions = list(report["cells"][0]["conditions"]) if report["cells"] else []
    head = ("| cell | games (gold fits) | gold steps mean | "
            + " | ".join(conditions) + " |")
    lines = [head, "|" + "---|" * (3 + len(conditions))]
    base = dict(ENGINE_DEFAULTS) if report["config"]["env"] == "cookingworld" \
        else parse_tw_params("")
    for row in report["cells"]:
        changed = [f"{k}={v}" for k, v in row["cell"].items() if v != base[k]]
        gold = row["gold_steps"].values()
        lines.append(
            f"| {', '.join(changed) or 'defaults'} | {row['games']} "
            f"({row['games_fitting']}) | {sum(gold) / max(1, len(gold)):.1f} | "
            + " | ".join(_pct(row["conditions"][c]["success_rate"]) for c in conditions) + " |")
    return "\n".join(lines)
