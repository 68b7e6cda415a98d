"""A store closed cleanly reopens from its RAM snapshot, and only when nothing was written since.

The snapshot is a cache of SQLite: adopting a stale one would answer from memories that are gone or
miss new ones, so every way it can fall behind must cost a full read instead.
"""
import shutil

import numpy as np

from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.store.graph import IndexSettings
from brainmem_ros.core.store.snapshot import SNAPSHOT_DIR
from brainmem_ros.core.trace import Relation, Zone

from test_long_term import (EMB, TEXTS, answers, crash_after_adding, delete_by_hand, entry, fill,
                            filled_and_closed)

SETTINGS = IndexSettings(exact_below=50)


def snapshot_folder(tmp_path):
    return tmp_path / "m.db.index" / SNAPSHOT_DIR


def state(store):
    """Return what RAM holds that a retrieval reads: answers, rerank inputs, words, failures."""
    rowids = sorted(store._vectors.where)
    return (answers(store), rowids, store.scoring_inputs(rowids)[2].tolist(),
            store._terms.export(), sorted(store._vectors.warning_rowids))


def test_a_clean_close_reopens_from_the_snapshot_as_a_full_read_would(tmp_path):
    store = LongTermStore(tmp_path / "m.db", index=SETTINGS)
    ids = fill(store)
    store.add([entry("the stove burned the towel", zone=Zone.SEMANTIC, warning=True),
               entry("the butter is in the fridge", zone=Zone.SEMANTIC,
                     relations=[Relation("butter", "location", "fridge")])])
    store.add([entry("the butter is in the cupboard", zone=Zone.SEMANTIC,
                     relations=[Relation("butter", "location", "cupboard")])])  # supersedes
    store.delete([ids[5]])
    assert store.wait_indexed(timeout=30)
    store.close()
    again = LongTermStore(tmp_path / "m.db", index=SETTINGS)
    assert again.opened_from == "snapshot" and again.rebuilt_partitions == []
    restored = state(again)
    again.close()
    shutil.rmtree(snapshot_folder(tmp_path))
    full = LongTermStore(tmp_path / "m.db", index=SETTINGS)
    assert full.opened_from == "sqlite"
    assert state(full) == restored
    full.close()


def test_a_write_after_the_snapshot_makes_it_stale(tmp_path):
    """Another process writes, then dies without closing: the snapshot is refused, nothing lost."""
    store = LongTermStore(tmp_path / "m.db", index=SETTINGS)
    fill(store, n=200)
    store.close()
    crash_after_adding(tmp_path / "m.db", ["the kettle is on the windowsill"])
    again = LongTermStore(tmp_path / "m.db", index=SETTINGS)
    assert again.opened_from == "sqlite" and len(again) == 201
    q = EMB.embed(["the kettle is on the windowsill"])[0]
    top = again.vector_search(q, "a", [Zone.EPISODIC], 1)[0][0]
    assert again.entries_by_rowid([top])[top].content == "the kettle is on the windowsill"
    again.close()


def test_rows_deleted_behind_the_stores_back_make_the_snapshot_stale(tmp_path):
    store = LongTermStore(tmp_path / "m.db", index=SETTINGS)
    fill(store, n=100)
    store.close()
    delete_by_hand(tmp_path / "m.db", 3)
    again = LongTermStore(tmp_path / "m.db", index=SETTINGS)
    assert again.opened_from == "sqlite" and len(again) == 97 == len(again._vectors.where)
    again.close()


def test_a_damaged_snapshot_is_ignored_and_the_store_reads_sqlite(tmp_path):
    before = filled_and_closed(tmp_path / "m.db", SETTINGS)
    codes = sorted(snapshot_folder(tmp_path).glob("p*_codes.npy"))[0]
    codes.write_bytes(b"not an array")
    again = LongTermStore(tmp_path / "m.db", index=SETTINGS)
    assert again.opened_from == "sqlite" and answers(again) == before
    again.close()
    third = LongTermStore(tmp_path / "m.db", index=SETTINGS)  # the close wrote a sound one again
    assert third.opened_from == "snapshot" and answers(third) == before
    third.close()


def test_a_snapshot_taken_as_float32_opens_a_store_set_to_int8(tmp_path):
    store = LongTermStore(tmp_path / "m.db", index=SETTINGS)
    fill(store)
    store.close()
    compact = IndexSettings(exact_below=50, ram_precision="int8")
    again = LongTermStore(tmp_path / "m.db", index=compact)
    assert again.opened_from == "snapshot" and again.rebuilt_partitions  # graphs made anew
    part = again._vectors.partitions[("a", "episodic")]
    assert part._vectors.compact and np.isfinite(part._vectors.take(slice(0, 3))).all()
    assert len(again.vector_search(EMB.embed([TEXTS[0]])[0], "a", [Zone.EPISODIC], 5)) == 5
    again.close()
