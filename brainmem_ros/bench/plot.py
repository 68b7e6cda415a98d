"""A picture of a bench report: retrieval latency and ingest rate against store size."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

__all__ = ["plot_report", "plot_curves", "plot_ingest"]


def plot_report(report: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(int(n) for n in report["sizes"])
    fig = report["sizes"]

    def get(key):
        return [fig[str(n)][key] for n in sizes]

    systems = report.get("systems") or {}
    figure, axes = plt.subplots(1, 3 if systems else 2, figsize=(16 if systems else 11, 4.2))
    left, right = axes[0], axes[1]
    for key, label in [("retrieve_p99_ms", "retrieve p99 (query embedded)"),
                       ("retrieve_no_embed_p99_ms", "retrieve p99 (vector given)"),
                       ("retrieve_no_embed_p50_ms", "retrieve p50 (vector given)"),
                       ("vector_filtered_p99_ms", "filtered vector search p99")]:
        left.plot(sizes, get(key), marker="o", label=label)
    left.set(xscale="log", xlabel="long-term memories", ylabel="ms", title="Retrieval latency")
    left.grid(True, alpha=0.3)
    left.legend(fontsize=8)
    right.plot(sizes, get("ingest_preembedded_per_s"), marker="o", label="pre-embedded entries")
    right.plot(sizes, get("ingest_per_s"), marker="o", label="observations, embedding included")
    right.set(xscale="log", yscale="log", xlabel="long-term memories", ylabel="per second",
              title="Ingest")
    right.grid(True, alpha=0.3)
    right.legend(fontsize=8)
    if systems:
        _plot_systems(axes[2], systems)
    figure.suptitle(
        f"brainmem_ros bench, {report['machine']['cpus']} CPU cores, {report['embedder']}",
        fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _plot_systems(axis, systems: dict) -> None:
    """Draw each store's filtered (solid) and unfiltered (dashed) top-10 p99 on the same vectors."""
    for i, (name, per_size) in enumerate(systems.items()):
        measured = sorted((int(n), f) for n, f in per_size.items() if "query_filtered_p99_ms" in f)
        if not measured:
            continue
        sizes = [n for n, _ in measured]
        colour = f"C{i}"
        axis.plot(sizes, [f["query_filtered_p99_ms"] for _, f in measured], marker="o",
                  color=colour, label=f"{name} filtered")
        axis.plot(sizes, [f["query_p99_ms"] for _, f in measured], marker="x", linestyle="--",
                  color=colour, label=f"{name} unfiltered")
    axis.set(xscale="log", yscale="log", xlabel="memories", ylabel="p99 ms (vector given)",
             title="Top-10 query p99, same data in each store")
    axis.grid(True, alpha=0.3, which="both")
    axis.legend(fontsize=7)


def plot_curves(systems: dict, path: Path) -> Path:
    """Draw each store's recall@10 against filtered p99 as its search knob is swept, per size.

    The default setting is the filled marker, so a figure taken at it can be read against the
    store's other settings: none is compared at a fast low-recall point against a slow high one.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({int(n) for per_size in systems.values() for n, f in per_size.items()
                    if f.get("curve")})
    figure, axes = plt.subplots(1, max(1, len(sizes)), figsize=(6.5 * max(1, len(sizes)), 4.6),
                                squeeze=False)
    for axis, n in zip(axes[0], sizes):
        for i, (name, per_size) in enumerate(systems.items()):
            curve = (per_size.get(str(n)) or {}).get("curve")
            if not curve:
                continue
            ordered = sorted(curve, key=lambda point: point["p99_ms"])
            axis.plot([p["p99_ms"] for p in ordered], [p["recall"] for p in ordered],
                      marker="o", markerfacecolor="none", color=f"C{i}", label=name)
            axis.plot(curve[0]["p99_ms"], curve[0]["recall"], marker="o", color=f"C{i}")
        axis.axhline(0.95, color="grey", linewidth=0.8, linestyle=":")
        axis.set(xscale="log", xlabel="filtered top-10 p99, ms (vector given)",
                 ylabel="recall@10", title=f"{n:,} memories: each store's knob swept")
        axis.grid(True, alpha=0.3, which="both")
        axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def plot_ingest(systems: dict, path: Path) -> Optional[Path]:
    """Draw each store's write rate through its ingest, tenth by tenth, and rows in no graph.

    A single ingest rate hides where it slows: as the store grows, or behind an index that falls
    behind. None when the report has no ingest course (made before the bench recorded one).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [(name, int(n), f["ingest_course"]) for name, per_size in systems.items()
            for n, f in sorted(per_size.items(), key=lambda item: int(item[0]))
            if f.get("ingest_course")]
    if not runs:
        return None
    figure, (rates, unindexed) = plt.subplots(1, 2, figsize=(13, 4.4))
    names = list(systems)
    largest = max(n for _, n, _ in runs)
    for name, n, course in runs:
        rows = [0] + [point["rows"] for point in course]
        seconds = [0.0] + [point["seconds"] for point in course]
        rate = [(rows[i + 1] - rows[i]) / max(seconds[i + 1] - seconds[i], 1e-9)
                for i in range(len(course))]
        style = dict(color=f"C{names.index(name)}", marker="o" if n == largest else "x",
                     linestyle="-" if n == largest else "--")
        rates.plot(rows[1:], rate, label=f"{name} {n:,}", **style)
        if course[0]["unindexed"] is not None:
            unindexed.plot(rows[1:], [point["unindexed"] for point in course],
                           label=f"{name} {n:,}", **style)
    rates.set(xscale="log", yscale="log", xlabel="memories stored so far",
              ylabel="entries per second, this tenth", title="Pre-embedded write rate as it grows")
    unindexed.set(xscale="log", xlabel="memories stored so far", ylabel="rows in no graph yet",
                  title="brainmem: rows the background indexer owes (searched exactly)")
    for axis in (rates, unindexed):
        axis.grid(True, alpha=0.3, which="both")
        axis.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
