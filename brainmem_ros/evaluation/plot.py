"""A picture of an evaluation report: one bar group per metric, one bar per condition."""
from __future__ import annotations

from pathlib import Path

__all__ = ["plot_eval"]

_COLORS = {"window": "#b0b0b0", "brainmem": "#2b7bba", "full": "#7a7a7a",
           "isolated": "#b0b0b0", "fleet": "#2b7bba"}
_METRICS = [("success_rate", "task success"),
            ("interruption_recovery_rate", "interruption recovery"),
            ("repeat_failure_rate", "repeat of a known failure"),
            ("success_rate_later_robots", "success,\nrobots 2..N"),
            ("fleet_repeat_failure_rate", "another robot's\nfailure repeated")]


def plot_eval(reports: list[dict], path: Path) -> Path:
    """One panel per report (an environment's run); bars for each metric the run measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(reports), figsize=(5.5 * len(reports), 4.2), squeeze=False)
    for ax, report in zip(axes[0], reports):
        conditions = list(report["conditions"])
        metrics = [(k, label) for k, label in _METRICS
                   if any(report["conditions"][c].get(k) is not None for c in conditions)]
        width = 0.8 / max(1, len(conditions))
        for i, name in enumerate(conditions):
            values = [100 * (report["conditions"][name].get(k) or 0.0) for k, _ in metrics]
            xs = [m + (i - (len(conditions) - 1) / 2) * width for m in range(len(metrics))]
            bars = ax.bar(xs, values, width, label=name, color=_COLORS.get(name))
            for bar, v in zip(bars, values):
                ax.text(bar.get_x() + bar.get_width() / 2, v + 1.5, f"{v:.0f}", ha="center",
                        fontsize=8)
        cfg = report["config"]
        title = f"{cfg['env']}: {len(cfg['seeds'])} seeds" + (f", {cfg['fold']} fold" if cfg["env"]
                                                              == "cookingworld" else "")
        title += f", K={cfg['window']}" + (", interruptions" if cfg["interruptions"] else "")
        title += f", {cfg['attempts']} attempts" if cfg["attempts"] > 1 else ""
        title += ", lifelong memory" if cfg.get("lifelong") else ""
        title += f", {cfg['robots']} robots in turn" if cfg.get("robots") else ""
        ax.set(xticks=range(len(metrics)), xticklabels=[label for _, label in metrics],
               ylim=(0, 128), ylabel="% of episodes", title=title)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", ncol=len(conditions), frameon=False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
