"""Every reported figure, defined on plain episode records.

Every reported figure, defined on plain episode records (so tests can check the definitions on
hand-built episodes).

- success_rate: share of all episodes (every seed, every attempt) that completed the task.
- mean_steps: mean steps taken per episode.
- interruption_recovery_rate: among episodes an interruption actually happened in, the share that
  still completed the main task. None when none was interrupted.
- repeat_failure_rate: among attempts after the first, the share that ended in a failure the same
  seed had already ended in at an earlier attempt (same failure: same cause, e.g. the same
  hazard or the same fatal action). None with one attempt.
- retrieve_p50_ms: median time of the memory recall before an action (``core.latency.percentile``).
- decide_p50_ms: median time the planner took to choose an action (a language model's step).
  None without memory.
"""
from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import Optional, Sequence

from brainmem_ros.core.latency import percentile
from brainmem_ros.evaluation.episode import EpisodeRecord

__all__ = ["summarise", "success_rate", "interruption_recovery_rate", "repeat_failure_rate"]


def success_rate(episodes: Sequence[EpisodeRecord]) -> float:
    return sum(e.success for e in episodes) / len(episodes) if episodes else 0.0


def interruption_recovery_rate(episodes: Sequence[EpisodeRecord]) -> Optional[float]:
    hit = [e for e in episodes if e.interrupted]
    return sum(e.success for e in hit) / len(hit) if hit else None


def repeat_failure_rate(episodes: Sequence[EpisodeRecord]) -> Optional[float]:
    by_seed: dict[int, list[EpisodeRecord]] = defaultdict(list)
    for e in episodes:
        by_seed[e.seed].append(e)
    later = repeats = 0
    for runs in by_seed.values():
        met: set[str] = set()
        for e in sorted(runs, key=lambda r: r.attempt):
            if e.attempt > 0:
                later += 1
                repeats += int(e.failed and e.failure in met)
            if e.failed:
                met.add(e.failure)
    return repeats / later if later else None


def summarise(episodes: Sequence[EpisodeRecord]) -> dict:
    times = [ms for e in episodes for ms in e.retrieve_ms]
    attempts = sorted({e.attempt for e in episodes})
    return {
        "episodes": len(episodes),
        "success_rate": success_rate(episodes),
        "mean_steps": mean(e.steps for e in episodes) if episodes else 0.0,
        "interruption_recovery_rate": interruption_recovery_rate(episodes),
        "interrupted_episodes": sum(e.interrupted for e in episodes),
        "repeat_failure_rate": repeat_failure_rate(episodes),
        "failure_rate": sum(e.failed for e in episodes) / len(episodes) if episodes else 0.0,
        "success_rate_by_attempt": {
            str(a): success_rate([e for e in episodes if e.attempt == a])
            for a in attempts
        },
        "retrieve_p50_ms": percentile(times, 50),
        "decide_p50_ms": percentile([ms for e in episodes for ms in e.decide_ms], 50),
        "retrieve_calls": len(times),
    }
