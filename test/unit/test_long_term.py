"""The SQLite + FAISS store.

The SQLite + FAISS store: durable, consistent with its index, history-keeping, agent-isolated, and
unchanged by every rejected write. Uses the hashing stand-in: nothing here depends on meaning.
"""
import sqlite3
from collections import Counter
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from brainmem_ros.core.embedding import HashingEmbedder
from brainmem_ros.core.errors import InvalidRequest, StoreUnavailable
from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.trace import Entry, Position, Relation, Zone
from brainmem_ros.core.store.graph import IndexSettings
from brainmem_ros.core.store.partition import Partition

EMB = HashingEmbedder()
TEXTS = [
    f"the item {i} is on shelf {i % 7} near the {['fridge', 'sink', 'stove'][i % 3]}"
    for i in range(300)
]


def entry(text, agent="a", zone=Zone.EPISODIC, **kw):
    return Entry(agent_id=agent, zone=zone, content=text, embedding=EMB.embed([text])[0], **kw)


def fill(store, n=300, agent="a"):
    return store.add([entry(t, agent) for t in TEXTS[:n]])


def crash_after_adding(path, texts):
    """Add entries in another process, which then dies without closing the store."""
    crash = ("import os, sys; sys.path[:0] = %r\n"
             "from test_long_term import LongTermStore, IndexSettings, entry\n"
             "s = LongTermStore(%r, index=IndexSettings(exact_below=50))\n"
             "s.add([entry(t) for t in %r])\n"
             "os._exit(0)\n" % (sys.path, str(path), list(texts)))
    subprocess.run([sys.executable, "-c", crash], check=True, timeout=120,
                   cwd=Path(__file__).parent)


def delete_by_hand(path, n):
    """Delete ``n`` entries with plain sqlite3, behind the store's back."""
    con = sqlite3.connect(path)
    con.execute("DELETE FROM entries WHERE rowid IN (SELECT rowid FROM entries LIMIT ?)", (n, ))
    con.commit()
    con.close()


def filled_and_closed(path, settings):
    """Fill a store, let its graphs take every row, close it; its answers before the close."""
    store = LongTermStore(path, index=settings)
    fill(store)
    assert store.wait_indexed(timeout=30)
    before = answers(store)
    store.close()
    return before


def answers(store, agent="a"):
    out = []
    for text in TEXTS[::37]:
        q = EMB.embed([text])[0]
        out.append(store.vector_search(q, agent, [Zone.EPISODIC], 10))
    return out


def test_ids_come_back_after_commit_and_entries_read_back(tmp_path):
    store = LongTermStore(tmp_path / "m.db")
    ids = store.add([
        entry("the butter is in the fridge", zone=Zone.SEMANTIC, entities=["butter", "fridge"],
              relations=[Relation("butter", "location", "fridge")], position=Position(1, 2, 0))
    ])
    got = store.get(ids)[0]
    assert got.content == "the butter is in the fridge" and got.entities == ["butter", "fridge"]
    assert got.relations == [Relation("butter", "location", "fridge")] and got.position == Position(
        1, 2, 0)
    other = sqlite3.connect(tmp_path / "m.db")  # another connection sees it: it is committed
    assert other.execute("SELECT COUNT(*) FROM entries WHERE id = ?", ids).fetchone()[0] == 1
    store.close()


@pytest.mark.parametrize("exact_below", [100000, 50])
def test_closed_and_reopened_store_answers_exactly_as_before(tmp_path, exact_below):
    settings = IndexSettings(exact_below=exact_below)
    store = LongTermStore(tmp_path / "m.db", index=settings)
    fill(store)
    assert store.wait_indexed(timeout=30)  # until then the newest rows are scored exactly
    before = answers(store)
    store.close()
    again = LongTermStore(tmp_path / "m.db", index=settings)
    assert again.index_backlog() == 0
    assert answers(again) == before
    assert again.rebuilt_partitions == []  # the saved graph (if any) was reused
    again.close()


def test_rows_behind_a_saved_graph_become_its_tail_not_a_rebuild(tmp_path):
    """Rows added after the last graph save become its tail, not a rebuild.

    A store killed after the last graph save comes back with that graph plus the rows it lacks.
    """
    settings = IndexSettings(exact_below=50)
    store = LongTermStore(tmp_path / "m.db", index=settings)
    fill(store, n=200)
    store.close()
    crash_after_adding(tmp_path / "m.db", TEXTS[200:])
    again = LongTermStore(tmp_path / "m.db", index=settings)
    assert again.rebuilt_partitions == [] and len(again) == 300
    last = EMB.embed([TEXTS[299]])[0]
    assert again.vector_search(last, "a", [Zone.EPISODIC],
                               1)[0][0] == again.rowid_of(again.ids()[-1])
    assert again.wait_indexed(timeout=30) and again.index_backlog() == 0
    assert again.integrity()["integrity_ok"]
    again.close()


def test_partition_scores_its_tail_exactly_until_the_graph_holds_it():
    settings = IndexSettings(dim=EMB.dim, exact_below=50)
    part = Partition(settings)
    vectors = EMB.embed(TEXTS)
    part.add(np.arange(1, 301), vectors, np.zeros(300))
    assert part.hnsw is not None and part.indexed == 0 and part.tail == 300
    for moved_so_far in (0, 64, 300):
        while part.indexed < moved_so_far:
            part.index_tail(64)
        for i in (0, 150, 299):
            rowids, sims = part.search(vectors[i], 5)
            assert rowids[0] == i + 1 and sims[0] == pytest.approx(1.0, abs=1e-5)
            assert list(sims) == sorted(sims, reverse=True)
    # a text seen twice has one vector: its rows share a node
    assert part.tail == 0 and part.hnsw.ntotal == len(np.unique(vectors, axis=0)) < 300


def test_index_is_rebuilt_when_missing_stale_or_corrupt(tmp_path):
    settings = IndexSettings(exact_below=50)
    store = LongTermStore(tmp_path / "m.db", index=settings)
    fill(store)
    before = answers(store)
    store.close()
    index_dir = tmp_path / "m.db.index"
    graphs = list(index_dir.glob("*.faiss"))
    assert graphs
    for graph in graphs:
        graph.unlink()
    again = LongTermStore(tmp_path / "m.db", index=settings)
    assert again.rebuilt_partitions and again.integrity()["integrity_ok"]
    assert [[r for r, _ in a] for a in answers(again)][0][0] == [r for r, _ in before[0]][0]
    again.close()
    for graph in index_dir.glob("*.faiss"):
        graph.write_bytes(b"garbage")
    third = LongTermStore(tmp_path / "m.db", index=settings)
    assert third.rebuilt_partitions and third.integrity()["index_ok"]
    third.close()
    # stale: rows added behind the saved graph's back (e.g. a crash before the index was saved)
    delete_by_hand(tmp_path / "m.db", 5)
    fourth = LongTermStore(tmp_path / "m.db", index=settings)
    assert fourth.rebuilt_partitions and fourth.integrity()["index_ok"] and len(fourth) == 295
    fourth.close()


def test_supersession_closes_only_the_same_subject_and_predicate_and_keeps_history(tmp_path):
    store = LongTermStore(tmp_path / "m.db")

    def fact(s, p, o, **kw):
        return entry(f"{s} {p} {o}", zone=Zone.SEMANTIC, entities=[s, o],
                     relations=[Relation(s, p, o)], **kw)

    old, knife, fridge_open = store.add([
        fact("butter", "location", "fridge"),
        fact("knife", "location", "drawer"),
        fact("fridge", "state", "open")
    ])
    (new, ) = store.add([fact("butter", "location", "counter")])
    by_id = {e.id: e for e in store.get([old, knife, fridge_open, new])}
    assert by_id[old].superseded and not by_id[new].superseded
    assert not by_id[knife].superseded and not by_id[fridge_open].superseded
    assert store.current_facts("a", ["butter", "knife"]) == {
        ("butter", "location"): ("counter", new),
        ("knife", "location"): ("drawer", knife)
    }
    history = store._db.conn.execute(
        "SELECT object, valid_to IS NOT NULL, superseded_by FROM relations "
        "WHERE subject = 'butter' ORDER BY id").fetchall()
    assert history == [("fridge", 1, new), ("counter", 0, None)]
    q = EMB.embed(["butter location fridge"])[0]
    assert old not in [
        store.get(
            [store._db.conn.execute("SELECT id FROM entries WHERE rowid=?",
                                    (r, )).fetchone()[0]])[0].id
        for r, _ in store.vector_search(q, "a", [Zone.SEMANTIC], 5)
    ]
    assert any(r == store.rowid_of(old)
               for r, _ in store.vector_search(q, "a", [Zone.SEMANTIC], 5, include_superseded=True))
    # Deleting the newer (wrong) fact makes the older one current again.
    store.delete("a", ids=[new])
    assert store.current_facts("a", ["butter"]) == {("butter", "location"): ("fridge", old)}
    store.close()


def test_agents_see_their_own_and_shared_entries_only(tmp_path):
    store = LongTermStore(tmp_path / "m.db")
    store.add([
        entry("secret plan of robot a", "a"),
        entry("secret plan of robot b", "b"),
        entry("shared plan for everyone", "b", shared=True)
    ])
    q = EMB.embed(["secret plan"])[0]
    seen_by_a = {
        store.entries_by_rowid([r])[r].content
        for r, _ in store.vector_search(q, "a", [Zone.EPISODIC], 10)
    }
    assert seen_by_a == {"secret plan of robot a", "shared plan for everyone"}
    lexical = {
        store.entries_by_rowid([r])[r].content
        for r, _ in store.lexical_search(["secret", "plan"], "a", [Zone.EPISODIC], 10)
    }
    assert lexical == seen_by_a
    store.close()


def test_deletion_by_id_and_by_entity_leaves_no_debris(tmp_path):
    store = LongTermStore(tmp_path / "m.db", index=IndexSettings(exact_below=50))
    fill(store, 120)
    (fact, ) = store.add([
        entry("the butter is in the fridge", zone=Zone.SEMANTIC, entities=["butter", "fridge"],
              relations=[Relation("butter", "location", "fridge")])
    ])
    (proc, ) = store.add([
        entry("to spread butter: 1. open fridge", zone=Zone.PROCEDURAL, entities=["fridge"],
              derived_from=[fact])
    ])
    assert store.delete("a", entities=["butter"]) == 2  # the fact, and the procedure quoting it
    assert store.get([fact, proc]) == []
    assert store.lexical_search(["butter"], "a", list(Zone)[1:], 10) == []
    check = store.integrity()
    assert check["integrity_ok"] and check["orphans"] == 0
    ids = store.ids()[:10]
    assert store.delete("a", ids=ids) == 10 and len(store) == 110
    assert store.integrity()["integrity_ok"]
    with pytest.raises(InvalidRequest, match="no memory of agent"):
        store.delete("a", ids=["nope"])
    with pytest.raises(InvalidRequest, match="needs an agent_id"):
        store.delete("", ids=ids)
    store.close()


@pytest.mark.parametrize("bad, fragment", [
    (dict(embedding=np.full(384, np.nan, dtype=np.float32)), "NaN"),
    (dict(embedding=np.ones(12, dtype=np.float32)), "384 components"),
    (dict(embedding=np.ones((2, 192), dtype=np.float32)), "shape \\(2, 192\\)"),
    (dict(embedding=["a"] * 384), "384 numbers"),
    (dict(importance=1.5), "importance"),
    (dict(confidence=float("nan")), "confidence"),
    (dict(zone=Zone.WORKING), "long-term zone"),
    (dict(position=Position(float("inf"), 0, 0)), "position"),
])
def test_bad_entries_are_refused_and_nothing_is_written(tmp_path, bad, fragment):
    store = LongTermStore(tmp_path / "m.db")
    fill(store, 20)
    before = (store.ids(), store.integrity())
    good = entry("a perfectly fine memory")
    broken = entry("a broken memory")
    for key, value in bad.items():
        setattr(broken, key, value)
    with pytest.raises(InvalidRequest, match=fragment):
        store.add([good, broken])
    assert (store.ids(), store.integrity()) == before
    store.close()


def test_unopenable_store_raises_store_unavailable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreUnavailable, match="cannot open the memory store"):
        LongTermStore(blocker / "m.db")
    not_a_db = tmp_path / "junk.db"
    not_a_db.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreUnavailable):
        LongTermStore(not_a_db)


def test_term_counts_follow_adds_deletes_and_reopen(tmp_path):
    """Lexical recall picks rare words from counts kept in RAM; they must match FTS5's own."""
    store = LongTermStore(tmp_path / "m.db")
    fill(store, 60)
    store.add([entry("the ZX-4410 label is on the café machine", entities=["machine"])])
    store.delete("a", ids=store.ids()[:7])

    def fts_counts(s):
        return dict(s._db.conn.execute("SELECT term, doc FROM entries_fts_vocab"))

    def counted(s):
        return dict(sum(s._terms.df.values(), Counter()))

    assert counted(store) == fts_counts(store)
    assert store._terms.df["a"]["4410"] == 1 and store._terms.df["a"]["cafe"] == 1
    assert store._terms.owned["a"] == store._db.conn.execute(
        "SELECT COUNT(*) FROM entries").fetchone()[0]
    hits = store.lexical_search(["ZX-4410"], "a", [Zone.EPISODIC], 5, max_df=0.01)
    assert [store.entries_by_rowid([r])[r].content
            for r, _ in hits] == ["the ZX-4410 label is on the café machine"]
    store.close()
    again = LongTermStore(tmp_path / "m.db")
    assert counted(again) == fts_counts(again) and again._terms.owned == store._terms.owned
    again.close()


def test_what_is_rare_for_one_agent_does_not_change_with_another_agents_notes(tmp_path):
    """Word rarity for one agent does not change with another agent's notes.

    Lexical recall keeps only words rare among the memories the caller sees: another robot writing
    the same word a hundred times must not change which of this robot's memories come back.
    """
    store = LongTermStore(tmp_path / "m.db")
    fill(store, 300, agent="a")
    store.add([entry("the QZ-5151 valve is behind the boiler", "a")])
    # The rowids, not the scores: FTS5 weighs a term by its rarity in the whole table.

    def shown():
        found = store.lexical_search(["QZ-5151"], "a", [Zone.EPISODIC], 5, max_df=0.002)
        return [r for r, _ in found]

    before = shown()
    assert [store.entries_by_rowid([r])[r].content
            for r in before] == ["the QZ-5151 valve is behind the boiler"]
    store.add([entry(f"QZ-5151 note {i} of robot b", "b") for i in range(100)])
    assert shown(
    ) == before  # "qz" and "5151" are still rare for a, though b used them a hundred times
    store.delete("b", ids=store.ids()[-100:])
    assert "5151" not in store._terms.df.get("b", {}) and store._terms.owned.get("b", 0) == 0
    store.close()


def test_within_one_batch_a_later_fact_supersedes_an_earlier_one(tmp_path):
    """Within one batch, a later fact supersedes an earlier one.

    A replayed bag or a consolidation pass stores many facts about one item in one call: they are
    taken in order, as if added one by one, and only the same agent's (subject, predicate) is
    closed.
    """
    store = LongTermStore(tmp_path / "m.db")

    def fact(o, t, agent="a", s="butter"):
        return entry(f"{s} location {o}", agent, zone=Zone.SEMANTIC, entities=[s, o],
                     relations=[Relation(s, "location", o)], created=t, last_access=t)

    fridge, knife, other_robot, counter, late, sink = store.add([
        fact("fridge", 1000.0),
        fact("drawer", 1001.0, s="knife"),
        fact("shelf", 1002.0, agent="b"),
        fact("counter", 2000.0),
        fact("table", 1500.0),
        fact("sink", 3000.0)
    ])
    by_id = {e.id: e for e in store.get([fridge, knife, other_robot, counter, late, sink])}
    assert [by_id[i].superseded for i in (fridge, knife, other_robot, counter, late, sink)
            ] == [True, False, False, True, True, False]
    assert store.current_facts("a", ["butter", "knife"]) == {
        ("butter", "location"): ("sink", sink),
        ("knife", "location"): ("drawer", knife)
    }
    assert store.current_facts("b", ["butter"]) == {("butter", "location"): ("shelf", other_robot)}
    history = store._db.conn.execute(
        "SELECT object, valid_from, valid_to, superseded_by FROM relations "
        "WHERE subject = 'butter' AND agent_id = 'a' ORDER BY valid_from").fetchall()
    assert history == [("fridge", 1000.0, 2000.0, counter), ("table", 1500.0, 2000.0, counter),
                       ("counter", 2000.0, 3000.0, sink), ("sink", 3000.0, None, None)]
    assert store.integrity()["integrity_ok"]
    store.close()


def test_an_older_fact_arriving_late_does_not_supersede_a_newer_one(tmp_path):
    """Topics do not keep order between each other, and replays deliver in bursts: time decides."""
    store = LongTermStore(tmp_path / "m.db")

    def fact(o, t):
        return entry(f"butter location {o}", zone=Zone.SEMANTIC, entities=["butter", o],
                     relations=[Relation("butter", "location", o)], created=t, last_access=t)

    (newer, ) = store.add([fact("counter", 2000.0)])
    (older, ) = store.add([fact("fridge", 1000.0)])
    by_id = {e.id: e for e in store.get([newer, older])}
    assert by_id[older].superseded and not by_id[newer].superseded
    assert store.current_facts("a", ["butter"]) == {("butter", "location"): ("counter", newer)}
    history = store._db.conn.execute(
        "SELECT object, valid_from, valid_to, superseded_by FROM relations "
        "WHERE subject = 'butter' ORDER BY valid_from").fetchall()
    assert history == [("fridge", 1000.0, 2000.0, newer), ("counter", 2000.0, None, None)]
    assert store.integrity()["integrity_ok"]
    store.close()


_SUPERSESSION_LOOKUP = (
    "SELECT id, entry, valid_from FROM relations WHERE agent_id = 'a' AND subject = 'butter'"
    " AND predicate = 'location' AND valid_to IS NULL AND zone IN ('semantic', 'episodic')"
    " AND object != 'sink'")


@pytest.mark.parametrize("made_before_the_fix", [False, True])
def test_supersession_reads_current_facts_from_the_index_alone(tmp_path, made_before_the_fix):
    """Supersession reads current facts from the index alone.

    A fact seen again with the same value stays current beside the earlier ones, so the lookup that
    closes facts grows with the store; it must not also read the table for each of them. A store
    made with the narrow index is repaired when opened, and supersedes as before.
    """
    path = tmp_path / "m.db"
    store = LongTermStore(path)

    def fact(o, t):
        return entry(f"butter location {o}", zone=Zone.SEMANTIC, entities=["butter", o],
                     relations=[Relation("butter", "location", o)], created=t, last_access=t)

    seen = store.add([fact("fridge", 1000.0 + i) for i in range(5)])
    if made_before_the_fix:
        store._db.conn.execute("DROP INDEX relations_current")
        store._db.conn.execute(
            "CREATE INDEX relations_current ON relations(agent_id, subject, predicate)"
            " WHERE valid_to IS NULL")
        store.close()
        store = LongTermStore(path)
    plan = " ".join(row[-1]
                    for row in store._db.conn.execute("EXPLAIN QUERY PLAN " + _SUPERSESSION_LOOKUP))
    assert "COVERING INDEX relations_current" in plan, plan
    (moved, ) = store.add([fact("counter", 2000.0)])
    assert store.current_facts("a", ["butter"]) == {("butter", "location"): ("counter", moved)}
    assert all(e.superseded for e in store.get(seen))
    assert store.integrity()["integrity_ok"]
    store.close()


def _fts_segments(store):
    return store._db.conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(block)), 0) FROM entries_fts_data").fetchone()


@pytest.mark.parametrize("made_before_the_fix", [False, True])
def test_fts_is_rewritten_only_when_an_entrys_text_changes(tmp_path, made_before_the_fix):
    """FTS is rewritten only when an entry's text changes.

    Access flushes, decay and supersession update entries all the time; re-indexing their text each
    time would hold the write lock ~0.1 ms an entry for nothing. A store made with the old
    every-update trigger is repaired when opened.
    """
    path = tmp_path / "m.db"
    store = LongTermStore(path)
    ids = fill(store, 50)
    if made_before_the_fix:
        store._db.conn.execute("DROP TRIGGER entries_au")
        store._db.conn.execute(
            "CREATE TRIGGER entries_au AFTER UPDATE ON entries BEGIN INSERT INTO entries_fts "
            "(entries_fts, rowid,"
            " content, entity_text) VALUES ('delete', old.rowid, old.content, old.entity_text); "
            "INSERT INTO"
            " entries_fts (rowid, content, entity_text) VALUES (new.rowid, new.content, "
            "new.entity_text); END")
        store.close()
        store = LongTermStore(path)
    before = _fts_segments(store)
    store.set_importance(ids, [0.9] * len(ids))
    store.record_access([store.rowid_of(i) for i in ids[:20]], [0.8] * 20, 1e9)
    store.flush()
    assert _fts_segments(store) == before
    store.strengthen(ids[0], 0.9, content="the QX-77 kettle is on shelf 0")
    assert _fts_segments(store) != before
    hits = store.lexical_search(["QX-77"], "a", [Zone.EPISODIC], 5, max_df=0.5)
    assert [store.entries_by_rowid([r])[r].id for r, _ in hits] == [ids[0]]
    store._db.conn.execute(
        "INSERT INTO entries_fts (entries_fts) VALUES ('integrity-check')")  # raises if out of step
    store.close()


_PER_ROW_FTS_TRIGGER = (
    "CREATE TRIGGER [entries_ai] AFTER INSERT ON [entries] BEGIN INSERT INTO [entries_fts]"
    " (rowid, [content], [entity_text]) VALUES (new.rowid, new.[content], new.[entity_text]); END")


@pytest.mark.parametrize("made_before_the_fix", [False, True])
def test_a_batch_is_put_into_fts_once_without_the_per_row_trigger(tmp_path, made_before_the_fix):
    """``add`` indexes a batch's text with one INSERT ...

    SELECT; a store made with sqlite-utils' per-row insert trigger loses that trigger when opened,
    or every entry would be indexed twice.
    """
    path = tmp_path / "m.db"
    store = LongTermStore(path)
    first = fill(store, 40)
    if made_before_the_fix:
        store._db.conn.execute(_PER_ROW_FTS_TRIGGER)
        store.close()
        store = LongTermStore(path)
    assert store._db.conn.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE name = 'entries_ai'").fetchone()[0] == 0
    store.delete(first[:5])
    later = store.add([entry(f"the ZQ{i:02d} whisk is in the drawer") for i in range(30)])
    assert len(set(first + later)) == 70 and all(i.startswith("epi-") for i in later)
    for i in (0, 17, 29):
        hits = store.lexical_search([f"ZQ{i:02d}"], "a", [Zone.EPISODIC], 5, max_df=0.5)
        assert [store.entries_by_rowid([r])[r].id for r, _ in hits] == [later[i]]
    assert store._db.conn.execute(
        "SELECT doc FROM entries_fts_vocab WHERE term = 'whisk'").fetchone() == (30, )
    store._db.conn.execute(
        "INSERT INTO entries_fts (entries_fts) VALUES ('integrity-check')")  # raises if out of step
    assert store.integrity()["integrity_ok"]
    store.close()


def test_an_add_leaves_foreign_keys_checked_for_every_other_write(tmp_path):
    """An add leaves foreign keys checked for every other write.

    ``add`` writes without SQLite's reference checks (its rows point at entries of its own batch);
    the connection must check them again afterwards, after a failed add as well, or a later write
    could leave an edge pointing at nothing.
    """
    store = LongTermStore(tmp_path / "m.db")
    ids = fill(store, 5)
    assert store._db.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(
            StoreUnavailable):  # an id already stored: the INSERT fails inside the transaction
        store.add([entry("a second memory under the first one's id", id=ids[0])])
    assert store._db.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError):
        store._db.conn.execute("INSERT INTO entry_entities VALUES (999999, 'ghost')")
    assert len(store) == 5 and store.integrity()["integrity_ok"]
    store.close()


def test_new_ids_sort_in_the_order_they_were_made_and_never_repeat():
    """Time-first ids keep SQLite's unique index on ids growing at its end."""
    import time

    from brainmem_ros.core.trace import new_id, new_ids

    first = new_ids(["epi"] * 10000)
    time.sleep(0.002)
    later = new_id("epi")
    assert len(set(first)) == 10000 and all(later > i for i in first)
    assert first[0].startswith("epi-") and len(first[0]) == len("epi-") + 11 + 16


def test_embeddings_are_stored_as_float16_and_searched_as_stored(tmp_path):
    """Embeddings are stored as float16 and searched as stored.

    The default stores half the bytes; the partitions hold the vectors as they read back, so a
    reopened store answers exactly as before
    (test_closed_and_reopened_store_answers_exactly_as_before).
    """
    store = LongTermStore(tmp_path / "m.db")
    texts = ["the butter is in the fridge", "a knife lies on the counter"]
    ids = store.add([entry(t) for t in texts])
    blobs = [
        r[0] for r in sqlite3.connect(tmp_path /
                                      "m.db").execute("SELECT embedding FROM entries ORDER BY key")
    ]
    assert [len(b) for b in blobs] == [384 * 2] * 2
    original = EMB.embed(texts)
    for got, sent, blob in zip(store.get(ids), original, blobs):
        assert np.array_equal(got.embedding,
                              np.frombuffer(blob, dtype=np.float16).astype(np.float32))
        assert np.allclose(got.embedding, sent, rtol=1e-3,
                           atol=1e-4) and not np.array_equal(got.embedding, sent)
    store.close()


def test_float32_precision_keeps_vectors_bit_for_bit_and_either_store_reads_the_other(tmp_path):
    exact = LongTermStore(tmp_path / "m.db", embedding_precision="float32")
    first = exact.add([entry("the butter is in the fridge")])
    assert np.array_equal(
        exact.get(first)[0].embedding,
        EMB.embed(["the butter is in the fridge"])[0])
    exact.close()
    mixed = LongTermStore(tmp_path /
                          "m.db")  # float16 from here on; the float32 row stays as it was
    second = mixed.add([entry("a knife lies on the counter")])
    lengths = sorted(
        len(r[0])
        for r in sqlite3.connect(tmp_path / "m.db").execute("SELECT embedding FROM entries"))
    assert lengths == [384 * 2, 384 * 4]
    before = [mixed.get(first)[0].embedding, mixed.get(second)[0].embedding, answers(mixed)]
    mixed.close()
    again = LongTermStore(tmp_path / "m.db", embedding_precision="float32")
    after = [again.get(first)[0].embedding, again.get(second)[0].embedding, answers(again)]
    assert np.array_equal(before[0], after[0]) and np.array_equal(
        before[1], after[1]) and before[2] == after[2]
    again.close()


def test_a_vector_beyond_float16_range_is_kept_as_float32(tmp_path):
    store = LongTermStore(tmp_path / "m.db")
    big = np.full(384, 1e-3, dtype=np.float32)
    big[5] = 1e6  # float16 would make it infinite
    ids = store.add(
        [Entry(agent_id="a", zone=Zone.EPISODIC, content="an odd vector", embedding=big)])
    assert np.array_equal(store.get(ids)[0].embedding, big)
    store.close()
    again = LongTermStore(tmp_path / "m.db")
    assert np.array_equal(again.get(ids)[0].embedding, big)
    again.close()


def test_an_unknown_embedding_precision_is_refused(tmp_path):
    with pytest.raises(InvalidRequest, match="embedding_precision"):
        LongTermStore(tmp_path / "m.db", embedding_precision="int4")


def test_a_new_embedding_given_to_a_memory_in_a_graph_survives_a_restart_unchanged(tmp_path):
    """A new embedding of a memory in a graph survives a restart unchanged.

    strengthen() with a new vector (a repeated procedure whose text changed): the scoring uses the
    vector SQLite holds, before a restart as after it, also in a partition with a graph.
    """
    settings = IndexSettings(exact_below=50)
    store = LongTermStore(tmp_path / "m.db", index=settings)
    ids = fill(store)
    assert store.wait_indexed(
        timeout=30) and store._vectors.partitions[("a", "episodic")].hnsw is not None
    fresh = EMB.embed(["the item 3 is now kept in the blue box by the window"])[0]
    store.strengthen(ids[3], 0.9, embedding=fresh)
    rowid = store.rowid_of(ids[3])
    before = (store.scoring_inputs([rowid])[1][0].copy(), answers(store))
    assert np.allclose(before[0], fresh, rtol=1e-3, atol=1e-4)
    store.close()
    again = LongTermStore(tmp_path / "m.db", index=settings)
    assert again.rebuilt_partitions == []
    after = (again.scoring_inputs([rowid])[1][0], answers(again))
    assert np.array_equal(before[0], after[0]) and before[1] == after[1]
    again.close()
