"""How much history a prompt must hold: window and brainmem at K = 1, 3, 5, 10, 20.

The same seeds and budget at every K; ``full`` (every step shown, no K) is played once as the
ceiling. The plot has one panel per environment, success against K.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Sequence

__all__ = ["WINDOWS", "sweep_windows", "plot_sweep", "sweep_table"]

WINDOWS = (1, 3, 5, 10, 20)


def sweep_windows(settings, windows: Sequence[int] = WINDOWS, progress: bool = True) -> dict:
    """Play window and brainmem at every K, full once; success, recovery and steps per K."""
    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.embedding import MiniLMEmbedder
    from brainmem_ros.evaluation.runner import evaluate

    config = MemoryConfig.from_yaml(
        settings.config_path) if settings.config_path else MemoryConfig()
    embedder = MiniLMEmbedder.configured(config.embedding)
    rows = []
    for k in windows:
        run = copy.copy(settings)
        run.window, run.conditions = k, ("window", "brainmem")
        report = evaluate(run, progress=False, embedder=embedder)
        rows.append({"k": k, **{name: _brief(c) for name, c in report["conditions"].items()}})
        if progress:
            print(f"{settings.env} K={k}: " + "  ".join(
                f"{n} {100 * rows[-1][n]['success_rate']:.0f}%" for n in ("window", "brainmem")),
                flush=True)
    ceiling = copy.copy(settings)
    ceiling.conditions = ("full", )
    full = _brief(evaluate(ceiling, progress=False)["conditions"]["full"])
    return {"config": settings.to_dict(), "rows": rows, "full": full}


def _brief(summary: dict) -> dict:
    keys = ("success_rate", "interruption_recovery_rate", "mean_steps", "episodes")
    return {k: summary.get(k) for k in keys}


def sweep_table(report: dict) -> str:
    env = report["config"]["env"]
    lines = [f"| {env}: K | window | brainmem | full |", "|---|---|---|---|"]
    full = report["full"]["success_rate"]
    for row in report["rows"]:
        lines.append(f"| {row['k']} | {100 * row['window']['success_rate']:.0f}% | "
                     f"{100 * row['brainmem']['success_rate']:.0f}% | {100 * full:.0f}% |")
    return "\n".join(lines)


def plot_sweep(reports: list[dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(reports), figsize=(5.2 * len(reports), 3.8), squeeze=False)
    for ax, report in zip(axes[0], reports):
        ks = [r["k"] for r in report["rows"]]
        for name, color in (("window", "#b0b0b0"), ("brainmem", "#2b7bba")):
            ax.plot(ks, [100 * r[name]["success_rate"] for r in report["rows"]], "o-",
                    color=color, label=name)
        ax.axhline(100 * report["full"]["success_rate"], color="#7a7a7a", ls="--",
                   label="full history")
        ax.set_xscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_ylim(0, 105)
        ax.set_xlabel("K: steps of history in the prompt")
        ax.set_ylabel("task success, %")
        cfg = report["config"]
        ax.set_title(f"{cfg['env']} ({len(cfg['seeds'])} games"
                     + (", interruptions" if cfg.get("interruptions") else "") + ")")
        ax.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
