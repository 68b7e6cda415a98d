"""What the store holds in RAM, saved at a clean close so that the next open need not rebuild it.

Opening a store reads every row of SQLite, decodes every vector and counts every word: at a million
memories that is most of a restart, on a robot that has just rebooted. At a clean
close the store writes its partitions' rows (rowids, creation times, flags, vectors as held), the
rerank inputs, the remembered failures and the word counts beside the graphs, stamped with the
store's write generation (``meta.generation``, counted by every write transaction). The next open
adopts them only when the generation, the number of entries and the largest rowid are still those
of the file; anything else (a crash after writes, another process that wrote, a file edited) costs
the full read from SQLite, never a stale answer. Like the graphs it is a cache of SQLite.

The word counts are JSON and the arrays ``.npy`` files read without pickle, so a snapshot file
that is not what it claims is refused, not executed.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Optional

import numpy as np

__all__ = ["save_snapshot", "load_snapshot", "discard_snapshot", "SNAPSHOT_DIR"]

log = logging.getLogger("brainmem_ros.store")
SNAPSHOT_DIR = "rows"
_FORMAT = 1


def save_snapshot(folder: Path, stamp: dict, arrays: dict[str, np.ndarray], extra: dict) -> None:
    """Write ``arrays`` and ``extra`` (JSON) under ``folder``/rows, replacing the previous one.

    Written to a new folder that then replaces the old one: a crash midway leaves the old snapshot
    (refused, its stamp is old) or none, never a mixture.
    """
    target = folder / SNAPSHOT_DIR
    partial = folder / (SNAPSHOT_DIR + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name, array in arrays.items():
        np.save(partial / f"{name}.npy", array, allow_pickle=False)
    (partial / "state.json").write_text(json.dumps(
        {"format": _FORMAT, "stamp": stamp, "arrays": sorted(arrays), "extra": extra}))
    old = folder / (SNAPSHOT_DIR + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    partial.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def load_snapshot(folder: Path, stamp: dict) -> Optional[tuple[dict[str, np.ndarray], dict]]:
    """Return the snapshot's (arrays, extra) if it was written at ``stamp``, else None."""
    target = folder / SNAPSHOT_DIR
    try:
        state = json.loads((target / "state.json").read_text())
        if state.get("format") != _FORMAT or state.get("stamp") != stamp:
            return None
        arrays = {name: np.load(target / f"{name}.npy", allow_pickle=False)
                  for name in state["arrays"]}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring the store's RAM snapshot %s (%s); reading SQLite instead", target,
                    exc)
        return None
    return arrays, state["extra"]


def discard_snapshot(folder: Path) -> None:
    shutil.rmtree(folder / SNAPSHOT_DIR, ignore_errors=True)
