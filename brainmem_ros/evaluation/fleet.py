"""``brainmem-ros eval --fleet N``: robots in their own kitchens, one after the other.

N robots play the same seeds of the kitchen (with hidden hazards), robot 1 first, then robot 2,
...: each its own store, each keeping its memory from kitchen to kitchen. Under ``isolated`` a
robot learns only from itself; under ``fleet`` the robots share through a PostgreSQL server the
evaluation starts with ``fleet-db`` (each robot its own role). After a robot's episode its outbox
is pushed, and before the next robot's its inbox is pulled: the schedule of robots taking turns,
made deterministic.

Figures: success; the fleet repeat-failure rate (among episodes of a seed that another robot had
already failed on, the share that ended in a failure another robot had already met there); the
sync lag from a memory's making on one robot to its storing on another, and to its first
retrieval there.
"""
from __future__ import annotations

import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from brainmem_ros.core.latency import percentile
from brainmem_ros.evaluation.episode import EpisodeRecord, episode_agent, run_episode
from brainmem_ros.evaluation.memory_port import InProcessMemory
from brainmem_ros.evaluation.metrics import summarise
from brainmem_ros.evaluation.runner import EvalSettings, make_env, make_planner

__all__ = ["evaluate_fleet", "fleet_repeat_failure_rate", "FLEET_CONDITIONS", "fleet_table"]

FLEET_CONDITIONS = ("isolated", "fleet")


class _RecallWatch(InProcessMemory):
    """The episode's memory, noting when a memory another robot made is first recalled here."""

    def __init__(self, *args, robot: int, first_recalled: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.robot = robot
        self.first_recalled = first_recalled  # (robot, entry id) -> seconds since it was made

    def recall(self, queries, context):
        prompt = super().recall(queries, context)
        now = time.time()
        for entry in self.last_recalled:
            if entry.origin and (self.robot, entry.id) not in self.first_recalled:
                self.first_recalled[(self.robot, entry.id)] = now - entry.created
        return prompt


def fleet_repeat_failure_rate(episodes: Sequence[EpisodeRecord]) -> Optional[float]:
    """Among episodes of a seed another robot already failed on, the share failing the same way.

    ``attempt`` holds the robot's turn (0 first); episodes of one seed are in turn order.
    """
    later = repeats = 0
    by_seed: dict[int, list[EpisodeRecord]] = {}
    for e in episodes:
        by_seed.setdefault(e.seed, []).append(e)
    for runs in by_seed.values():
        met: set[str] = set()
        for e in sorted(runs, key=lambda r: r.attempt):
            if met:
                later += 1
                repeats += int(e.failed and e.failure in met)
            if e.failed:
                met.add(e.failure)
    return repeats / later if later else None


def evaluate_fleet(settings: EvalSettings, robots: int, progress: bool = True,
                   embedder=None) -> dict:
    """Play ``settings.seeds`` with ``robots`` robots under each fleet condition; the report."""
    from tqdm import tqdm

    from brainmem_ros.bringup import fleet_db
    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.embedding import MiniLMEmbedder

    if robots < 2:
        raise ValueError("a fleet needs at least 2 robots")
    base = MemoryConfig.from_yaml(settings.config_path) if settings.config_path else \
        MemoryConfig()
    embedder = embedder or MiniLMEmbedder.configured(base.embedding)
    env, planner = make_env(settings), make_planner(settings)
    report = {"config": {**settings.to_dict(), "robots": robots}, "machine": platform.platform(),
              "conditions": {}}
    started = time.time()
    server = Path(tempfile.mkdtemp(prefix="brainmem-fleet-eval-"))
    try:
        fleet_db.start(server, port=5432)
        for condition in FLEET_CONDITIONS:
            with tempfile.TemporaryDirectory(prefix=f"brainmem-{condition}-") as folder:
                report["conditions"][condition] = _play(
                    condition, settings, robots, base, embedder, env, planner, server,
                    Path(folder), progress, tqdm)
    finally:
        env.close()
        try:
            fleet_db.stop(server)
        except Exception:  # noqa: BLE001 - the report is what matters; the folder goes anyway
            pass
        shutil.rmtree(server, ignore_errors=True)
    report["wall_s"] = round(time.time() - started, 1)
    return report


def _play(condition, settings, robots, base, embedder, env, planner, server, folder, progress,
          tqdm) -> dict:
    from brainmem_ros.bringup import fleet_db
    from brainmem_ros.core.memory import BrainMemory

    memories = []
    for i in range(1, robots + 1):
        flat = {"store.path": str(folder / f"robot{i}.db")}
        if condition == "fleet":
            flat.update({"fleet.dsn": fleet_db.add_robot_dsn(server, f"robot{i}"),
                         "fleet.period_s": 3600.0})  # the turns drive the rounds
        memories.append(BrainMemory(base.replace(**flat), embedder, clock=time.time))
    records: list[EpisodeRecord] = []
    first_recalled: dict[str, float] = {}
    bar = tqdm(total=len(settings.seeds) * robots, desc=f"fleet/{condition}", unit="ep",
               disable=not progress)
    try:
        for seed in settings.seeds:
            for turn, memory in enumerate(memories):
                if memory.fleet is not None:
                    memory.fleet.round()  # what the others shared so far
                port = _RecallWatch(memory, agent_id=episode_agent("robot", seed),
                                    top_k=settings.top_k, robot=turn,
                                    first_recalled=first_recalled)
                record = run_episode(env, planner, "brainmem", seed, settings.window,
                                     settings.max_steps, port, turn, settings.env)
                records.append(record)
                if memory.fleet is not None:
                    memory.fleet.round()  # what it learnt, to the server
                bar.update(1)
                bar.set_postfix(success=f"{sum(r.success for r in records)}/{len(records)}")
    finally:
        bar.close()
        lags = [lag for m in memories if m.fleet is not None for lag in m.fleet.lags]
        for memory in memories:
            memory.close()
    summary = summarise(records)
    # Turns are not attempts of one robot: the fleet's own repeat rate replaces that one.
    summary["repeat_failure_rate"] = None
    summary["fleet_repeat_failure_rate"] = fleet_repeat_failure_rate(records)
    summary["success_rate_first_robot"] = _rate([r for r in records if r.attempt == 0])
    summary["success_rate_later_robots"] = _rate([r for r in records if r.attempt > 0])
    recalled = list(first_recalled.values())
    summary["sync_lag_stored_p50_s"] = percentile(lags, 50)
    summary["sync_lag_stored_p99_s"] = percentile(lags, 99)
    summary["sync_lag_first_recall_p50_s"] = percentile(recalled, 50)
    summary["sync_lag_first_recall_p99_s"] = percentile(recalled, 99)
    summary["shared_memories_recalled"] = len(recalled)
    summary["episodes_detail"] = [r.to_dict() for r in records]
    return summary


def _rate(records: Sequence[EpisodeRecord]) -> Optional[float]:
    return sum(r.success for r in records) / len(records) if records else None


def fleet_table(report: dict) -> str:
    def pct(v):
        return "-" if v is None else f"{100 * v:.0f}%"

    def secs(v):
        return "-" if v is None else f"{v:.2f}"

    head = (f"{'condition':9} {'episodes':>8} {'success':>8} {'later robots':>12} "
            f"{'fleet repeat-fail':>17} {'lag stored p50/p99 s':>21} "
            f"{'first recall p50/p99 s':>23}")
    lines = [head, "-" * len(head)]
    for name, c in report["conditions"].items():
        stored = f"{secs(c['sync_lag_stored_p50_s'])}/{secs(c['sync_lag_stored_p99_s'])}"
        recalled = (f"{secs(c['sync_lag_first_recall_p50_s'])}/"
                    f"{secs(c['sync_lag_first_recall_p99_s'])}")
        lines.append(
            f"{name:9} {c['episodes']:>8} {pct(c['success_rate']):>8} "
            f"{pct(c['success_rate_later_robots']):>12} "
            f"{pct(c['fleet_repeat_failure_rate']):>17} {stored:>21} {recalled:>23}")
    return "\n".join(lines)
