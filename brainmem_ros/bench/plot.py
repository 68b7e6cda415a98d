"""A picture of a bench report: retrieval latency and ingest rate against store size."""
from __future__ import annotations

from pathlib import Path

__all__ = ["plot_report"]


def plot_report(report: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(int(n) for n in report["sizes"])
    fig = report["sizes"]
    get = lambda key: [fig[str(n)][key] for n in sizes]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
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
    right.set(xscale="log", yscale="log", xlabel="long-term memories", ylabel="per second", title="Ingest")
    right.grid(True, alpha=0.3)
    right.legend(fontsize=8)
    figure.suptitle(f"brainmem_ros bench, {report['machine']['cpus']} CPU cores, {report['embedder']}", fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
