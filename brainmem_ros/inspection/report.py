"""``brainmem-ros inspect``: what an operator (and the crash test) needs to know about a store file.

Counts per agent and zone (working traces from the journal included), every id present, and the
integrity verdict: SQLite's integrity_check, the FTS index's own check, no orphan graph rows, the
journal readable, and the vector index in agreement with SQLite. A missing file is an error, never
an empty store created by looking.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from brainmem_ros.core.errors import StoreUnavailable

__all__ = ["inspect_store", "describe"]


def inspect_store(path: str | Path) -> dict:
    from brainmem_ros.core.store import LongTermStore
    from brainmem_ros.core.working_memory import trace_from_json

    path = Path(path).expanduser()
    if not path.is_file():
        raise StoreUnavailable(f"no memory store at {path}")
    t0 = time.perf_counter()
    store = LongTermStore(path)
    opened_s = time.perf_counter() - t0
    try:
        counts = store.counts()
        journal_ok = True
        for _id, _agent, text in store.journal():
            try:
                trace_from_json(text)
            except (ValueError, KeyError, TypeError):
                journal_ok = False
        for agent, n in store.working_counts().items():
            counts.setdefault(agent, {})["working"] = n
        check = store.integrity()
        check["journal_ok"] = journal_ok
        return {
            "path": str(path),
            "ids": store.ids(working=True),
            "counts": counts,
            "integrity_ok": bool(check["integrity_ok"] and journal_ok),
            "integrity": check,
            "index_rebuilt": list(store.rebuilt_partitions),
            "open_s": round(opened_s, 3),
            "archived": store.archive_count()
        }
    finally:
        store.close()


def describe(report: dict) -> str:
    lines = [
        f"store {report['path']}: {len(report['ids'])} memories, opened in {report['open_s']:.2f} s"
    ]
    for agent, zones in sorted(report["counts"].items()):
        lines.append(f"  {agent}: " + ", ".join(f"{zone} {n}" for zone, n in sorted(zones.items())))
    check = report["integrity"]
    lines.append(
        f"integrity: {'ok' if report['integrity_ok'] else 'FAILED'} (sqlite {check['sqlite_ok']}, "
        f"fts {check['fts_ok']}, index agrees {check['index_ok']}, orphans {check['orphans']}, "
        f"journal {check['journal_ok']})")
    if report["index_rebuilt"]:
        lines.append(f"vector index rebuilt from SQLite for: {', '.join(report['index_rebuilt'])}")
    lines.append(f"archived: {report['archived']}")
    return "\n".join(lines)


def to_json(report: dict) -> str:
    return json.dumps(report, indent=1)
