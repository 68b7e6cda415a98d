"""``brainmem-ros eval``: the conditions on identical episodes, the metrics, the JSON report.

Every condition plays the same seeds with the same step budget and the same planner. ``brainmem``
gets a fresh store per seed, kept across that seed's attempts (``--attempts``), so learning from a
failure is measured on the game it happened in and nothing leaks from one game to the next.
``--lifelong`` instead gives every seed to one robot, in seed order, with one memory: the way a
robot that cooks in kitchen after kitchen would run. Recall stays limited to the current episode
(an earlier kitchen's layout is not this one's); what crosses over is what consolidation made of
earlier failures.
"""
from __future__ import annotations

import contextlib
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from brainmem_ros.evaluation.episode import CONDITIONS, EpisodeRecord, episode_agent, run_episode
from brainmem_ros.evaluation.metrics import summarise

__all__ = ["EvalSettings", "evaluate", "parse_seeds", "table"]


class EvalSettings:

    def __init__(self, env: str = "kitchen", conditions: Sequence[str] = CONDITIONS,
                 window: int = 5, seeds: Sequence[int] = tuple(range(10)), max_steps: int = 100,
                 attempts: int = 1, interruptions: bool = False, fold: str = "dev",
                 game_params: str = "", top_k: int = 5, planner: str = "scripted",
                 config_path: str = "", lifelong: bool = False, llm_model: str = "",
                 llm_choose: str = "generate"):
        unknown = [c for c in conditions if c not in CONDITIONS]
        if unknown or not conditions:
            raise ValueError(f"unknown condition(s) {unknown}; choose from {', '.join(CONDITIONS)}")
        if window < 0 or max_steps < 1 or attempts < 1 or not seeds:
            raise ValueError(
                "window must be >= 0, max_steps and attempts >= 1, and seeds not empty")
        if env == "cookingworld" and fold == "test":
            pass  # allowed for acceptance; tuning happens on train and dev
        self.env, self.conditions, self.window = env, tuple(conditions), window
        self.seeds = tuple(seeds)
        self.max_steps, self.attempts, self.interruptions = max_steps, attempts, interruptions
        self.fold, self.game_params, self.top_k = fold, game_params, top_k
        self.planner, self.config_path = planner, config_path
        self.lifelong = lifelong
        self.llm_model, self.llm_choose = llm_model, llm_choose

    def to_dict(self) -> dict:
        return dict(vars(self), seeds=list(self.seeds), conditions=list(self.conditions))


def parse_seeds(text: str) -> list[int]:
    """Parse seeds: "0-29" is 0..29; "1,4,7" and "0-4,9" work too."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = part.split("-", 1)
                seeds += list(range(int(lo), int(hi) + 1))
            elif part:
                seeds.append(int(part))
    except ValueError:
        raise ValueError(
            f"seeds must be non-negative integers or ranges like 0-29, got {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise ValueError(f"seeds must be non-negative integers or ranges like 0-29, got {text!r}")
    return seeds


def make_env(settings: EvalSettings):
    from brainmem_ros.kitchen import Interruptions, make_environment

    options = {"game_params": settings.game_params}
    if settings.env == "cookingworld":
        from brainmem_ros.kitchen.cookingworld import DEFAULT_GAME_PARAMS

        options = {
            "fold": settings.fold,
            "game_params": settings.game_params or DEFAULT_GAME_PARAMS
        }
    if settings.env == "textworld":
        options = {"game_params": settings.game_params or ""}
    env = make_environment(settings.env, **options)
    return Interruptions(env) if settings.interruptions else env


def make_planner(settings: EvalSettings, base_url: str = ""):
    if settings.planner == "scripted":
        from brainmem_ros.planning.scripted import ScriptedPlanner

        return ScriptedPlanner()
    if settings.planner == "llm":
        from brainmem_ros.planning.llm import LLMPlanner

        return LLMPlanner(base_url=base_url, model=settings.llm_model,
                          choose=settings.llm_choose) if base_url else LLMPlanner()
    raise ValueError(f"unknown planner {settings.planner!r}; one of scripted, llm")


def evaluate(settings: EvalSettings, progress: bool = True, embedder=None,
             on_episode: Optional[Callable[[EpisodeRecord], None]] = None) -> dict:
    from tqdm import tqdm

    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.embedding import MiniLMEmbedder
    from brainmem_ros.evaluation.memory_port import InProcessMemory
    from brainmem_ros.core.memory import BrainMemory

    config = MemoryConfig.from_yaml(
        settings.config_path) if settings.config_path else MemoryConfig()
    served = contextlib.ExitStack()
    base_url = ""
    local = settings.planner == "llm" and settings.llm_model
    if local and settings.llm_choose == "generate":  # a local model, served for the run
        from brainmem_ros.planning.llm_server import serve

        base_url = served.enter_context(serve(settings.llm_model))
    if local and settings.llm_choose == "score":  # scored in this process (llm_local says why)
        from brainmem_ros.planning.llm_local import LocalScoringPlanner

        planner = LocalScoringPlanner(settings.llm_model)
    else:
        planner = make_planner(settings, base_url)
    env = make_env(settings)
    if "brainmem" in settings.conditions and embedder is None:
        embedder = MiniLMEmbedder.configured(config.embedding)
    report = {"config": settings.to_dict(), "machine": platform.platform(), "conditions": {}}
    started = time.time()
    try:
        with tempfile.TemporaryDirectory(prefix="brainmem-eval-") as folder:
            for condition in settings.conditions:
                records: list[EpisodeRecord] = []
                bar = tqdm(total=len(settings.seeds) * settings.attempts,
                           desc=f"{settings.env}/{condition}", unit="ep", disable=not progress,
                           leave=True)
                store = BrainMemory(config, embedder, Path(folder) / f"{condition}.db") \
                    if condition == "brainmem" else None
                try:
                    for seed in settings.seeds:
                        agent = episode_agent("robot", seed, settings.lifelong)
                        memory = InProcessMemory(store, agent_id=agent, top_k=settings.top_k) \
                            if store is not None else None
                        for attempt in range(settings.attempts):
                            record = run_episode(env, planner, condition, seed, settings.window,
                                                 settings.max_steps, memory, attempt, settings.env)
                            records.append(record)
                            if on_episode:
                                on_episode(record)
                            bar.update(1)
                            bar.set_postfix(
                                success=f"{sum(r.success for r in records)}/{len(records)}")
                finally:
                    if store is not None:
                        store.close()
                bar.close()
                summary = summarise(records)
                summary["episodes_detail"] = [r.to_dict() for r in records]
                report["conditions"][condition] = summary
    finally:
        env.close()
        served.close()
    report["wall_s"] = round(time.time() - started, 1)
    return report


def _fmt(value, percent: bool = True) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.0f}%" if percent else f"{value:.1f}"


def table(report: dict) -> str:
    head = (f"{'condition':10} {'episodes':>8} {'success':>8} {'steps':>6} {'recovery':>9} "
            f"{'repeat-fail':>11} {'retrieve p50':>12} {'decide p50':>11}")
    lines = [head, "-" * len(head)]
    for name, c in report["conditions"].items():
        p50 = f"{c['retrieve_p50_ms']:.1f} ms" if c.get("retrieve_p50_ms") is not None else "-"
        decide = f"{c['decide_p50_ms']:.0f} ms" if c.get("decide_p50_ms") is not None else "-"
        lines.append(
            f"{name:10} {c['episodes']:>8} {_fmt(c['success_rate']):>8} {c['mean_steps']:>6.1f} "
            f"{_fmt(c['interruption_recovery_rate']):>9} {_fmt(c['repeat_failure_rate']):>11} "
            f"{p50:>12} {decide:>11}")
    return "\n".join(lines)


def write_json(report: dict, path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report, indent=1))
