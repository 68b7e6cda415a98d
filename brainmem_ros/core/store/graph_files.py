"""A partition's graphs on disk: the FAISS index, the rowid behind each label, and its twins.

Graphs are a cache of SQLite that spares a rebuild at start. Each file is written beside its final
name and then renamed, so a crash leaves whole files; the twins file is written first and starts
with its graph's number of labels, so one left beside an older graph is recognised as stale.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Optional

import faiss
import numpy as np

__all__ = ["SavedGraph", "write_graph", "read_graph", "remove_graph", "history_path",
           "positions_of"]


class SavedGraph(NamedTuple):
    index: faiss.IndexHNSW
    rowids: np.ndarray  # per label, -1 for a row deleted before the save
    twin_labels: np.ndarray
    twin_rowids: np.ndarray


def history_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}.history{path.suffix}")


def _files(target: Path) -> tuple[Path, Path, Path]:
    return target.with_suffix(".twins.npy"), target.with_suffix(".rowids.npy"), target


def remove_graph(target: Path) -> None:
    for stale in _files(target):
        stale.unlink(missing_ok=True)


def write_graph(target: Path, graph: SavedGraph) -> None:
    twins = np.concatenate([[graph.index.ntotal], graph.twin_labels, graph.twin_rowids])
    for data, final in zip((twins, graph.rowids, None), _files(target)):
        partial = final.with_name(final.name + ".partial")
        if data is None:
            faiss.write_index(graph.index, str(partial))
        else:
            with open(partial, "wb") as out:
                np.save(out, data.astype(np.int64))
        partial.replace(final)


def read_graph(target: Path, dim: int, compact: bool) -> Optional[SavedGraph]:
    """Read a saved graph; None if unusable (missing, torn, of another dimension or precision).

    Raises FileNotFoundError when no graph was saved at ``target`` at all.
    """
    twins_file, rowids_file, _ = _files(target)
    try:
        rowids = np.load(rowids_file)
        index = faiss.read_index(str(target))
    except FileNotFoundError:
        raise
    except (OSError, ValueError, RuntimeError):
        return None
    if index.ntotal != len(rowids) or index.d != dim or rowids.ndim != 1:
        return None
    if isinstance(index, faiss.IndexHNSWSQ) != compact:
        return None  # saved under the other RAM precision: rebuilt in this one
    try:
        twins = np.load(twins_file)
    except FileNotFoundError:  # saved before graphs had twins
        twins = np.array([index.ntotal], dtype=np.int64)
    except (OSError, ValueError):
        return None
    if twins.ndim != 1 or len(twins) % 2 != 1 or twins[0] != index.ntotal:
        return None
    labels, twin_rowids = np.split(twins[1:], 2)
    if not np.all((labels >= 0) & (labels < index.ntotal)):
        return None
    return SavedGraph(index, rowids, labels, twin_rowids)


def positions_of(held: np.ndarray, dead: np.ndarray, rowids: np.ndarray) -> np.ndarray:
    """Position in ``held`` (a partition's rowids) of each of ``rowids``; -1 if absent or dead."""
    if not len(held) or not len(rowids):
        return np.full(len(rowids), -1, dtype=np.int64)
    order = np.argsort(held, kind="stable")
    ranked = held[order]
    at = np.minimum(np.searchsorted(ranked, rowids), len(held) - 1)
    alive = (ranked[at] == rowids) & ~dead[order[at]]
    return np.where(alive, order[at], -1)
