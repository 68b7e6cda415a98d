"""Applying changes pulled from the fleet to one robot's store, with the rules that hold inside it.

In server order: a put stores the memory as shared, owned by ``ROBOT/AGENT`` (so a newer fact of
another robot supersedes the older one here, history kept); a procedure for a goal this store
already has a procedure for strengthens that one instead of adding a second (the shorter sequence
of steps kept); a tombstone deletes the copy and what was derived from it. Every change is recorded
as applied in the transaction that applies it, and the cursor moves once all are, so a pull
replayed after a crash changes nothing and skips nothing.
"""
from __future__ import annotations

from typing import Callable, Sequence

from brainmem_ros.core.fleet.record import Pulled
from brainmem_ros.core.store.outbox import Outbox
from brainmem_ros.core.trace import Zone

__all__ = ["apply"]


def apply(store, pulled: Sequence[Pulled], refused: Sequence[tuple[tuple[str, int], str]],
          me: str, functional_predicates: Sequence[str],
          say: Callable[[str], None]) -> dict[str, int]:
    """Apply ``pulled`` (refused rows only move the cursor); counts of what was done."""
    done = {"stored": 0, "merged": 0, "deleted": 0}
    if not pulled and not refused:
        return done
    cursor = max([p.cursor for p in pulled] + [c for c, _ in refused],
                 key=lambda c: (int(c[0]), c[1]))
    seen = store.outbox.applied([p.change for p in pulled])
    known = store.known([p.entry_id for p in pulled if p.op == "put"])
    batch: list[Pulled] = []  # consecutive new puts, stored together
    marked: list[str] = [change for _, change in refused]

    def flush() -> None:
        if batch:
            changes = [p.change for p in batch]
            store.add([p.entry for p in batch], supersede=functional_predicates,
                      within=lambda conn: Outbox.mark(conn, changes))
            done["stored"] += len(batch)
            batch.clear()

    for change in pulled:
        if change.change in seen:
            continue
        if change.robot == me:
            if change.entry_id not in known and change.op == "put":
                say(f"refused change {change.change}: a memory in this robot's own name that it "
                    "never stored (was the row changed on the server?)")
            marked.append(change.change)
            continue
        if change.op == "delete":
            flush()
            done["deleted"] += store.delete(
                change.agent_id, ids=[change.entry_id], missing_ok=True,
                within=lambda conn, c=change.change: Outbox.mark(conn, [c]))
            known.discard(change.entry_id)
            continue
        if change.entry_id in known:
            marked.append(change.change)
            continue
        twin = _procedure_for(store, change)
        if twin is not None:
            flush()
            _merge(store, twin, change)
            done["merged"] += 1
            continue
        known.add(change.entry_id)
        batch.append(change)
    flush()
    store.outbox.save_cursor(cursor, marked)
    return done


def _procedure_for(store, change: Pulled):
    entry = change.entry
    if entry.zone is not Zone.PROCEDURAL or not entry.goal_key:
        return None
    return store.procedure_keyed(entry.goal_key)


def _merge(store, twin, change: Pulled) -> None:
    """Strengthen the procedure already here; take the other robot's steps if they are fewer."""
    entry = change.entry
    fewer = entry.content.count("; ") < twin.content.count("; ")
    store.strengthen(twin.id, min(1.0, max(twin.importance, entry.importance) + 0.1),
                     content=entry.content if fewer else None,
                     embedding=entry.embedding if fewer else None,
                     within=lambda conn: Outbox.mark(conn, [change.change]))
