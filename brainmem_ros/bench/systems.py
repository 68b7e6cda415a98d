"""The stores ``bench --peers`` compares, each used as its own documentation recommends.

Every system takes the same memories (agent, zone, text, vector) in batches of 1,000, then answers
top-10 cosine queries, filtered by agent ``robot_a`` and zone ``episodic`` or not. ``settle()`` ends
ingest: a system that builds its index after the data (LanceDB, Milvus, FAISS) builds it there, and
brainmem waits until its graphs hold every row. ``knobs`` are the values of the system's own
search-time setting that trades recall for latency, the default first, swept for the curve.

- brainmem: the long-term store, queried through ``vector_search`` (its route of the pipeline);
  knob: ``store.hnsw_ef_search``. ``brainmem-int8`` the same with ``store.ram_precision: int8``.
- chromadb: ``PersistentClient``, batched ``add``, a ``where`` filter; knob: HNSW ``ef_search``.
- qdrant: local mode (``QdrantClient(path=...)``), batched ``upsert``, a payload ``Filter``; local
  mode searches exactly, so no knob.
- lancedb: a table with an ``IVF_HNSW_SQ`` vector index and bitmap indexes on agent and zone,
  queried with a prefilter; knob: ``nprobes``.
- milvus: Milvus Lite (``MilvusClient(file)``), an ``IVF_FLAT`` index (of the types Milvus Lite
  builds, the one that is not brute force), a boolean ``filter``; knob: ``nprobe``.
- sqlite-vec: a ``vec0`` table with agent and zone as metadata columns, filtered inside the KNN
  query; exact, so no knob.
- faiss: FAISS alone, an HNSW graph (brainmem's degree and efConstruction) over exactly the rows a
  query may return: the floor a filtered search could reach; knob: ``efSearch``, scaled with the
  graph's rows as brainmem scales it.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

import numpy as np

__all__ = ["FACTORIES", "PeerUnavailable", "FILTER_AGENT", "FILTER_ZONE", "K", "floor_graph",
           "tune_floor"]

FILTER_AGENT, FILTER_ZONE = "robot_a", "episodic"
K = 10


class PeerUnavailable(RuntimeError):
    """A peer's client library is not installed (``make peers`` installs them)."""


def _need(module: str, package: str):
    from importlib import import_module

    try:
        return import_module(module)
    except ImportError as exc:
        raise PeerUnavailable(f"{package} is not installed: run `make peers`") from exc


class _NoEmbedder:
    """Every vector is given; a call to embed would be a bench defect."""

    name, backend, dim = "none (vectors given)", "", 384

    def embed(self, texts):
        raise AssertionError("the peers bench gives every vector")


class BrainmemSystem:
    name = "brainmem"
    unfiltered_agent = FILTER_AGENT  # agent isolation is never off: its widest query
    knobs = (128, 16, 32, 64, 256)

    settings: dict = {}

    def __init__(self, folder: Path):
        from brainmem_ros.bench.corpus import CORPUS_NOW
        from brainmem_ros.core.config import MemoryConfig
        from brainmem_ros.core.memory import BrainMemory

        config = MemoryConfig().replace(**{"store.path": str(folder / "memory.db"),
                                           "consolidation.every_n_traces": 0, **self.settings})
        self.memory = BrainMemory(config, embedder=_NoEmbedder(), clock=lambda: CORPUS_NOW)
        self.folder = folder
        self.rowid_to_index: dict[int, int] = {}

    def insert(self, start: int, texts, agents, zones, vectors) -> None:
        from brainmem_ros.core.trace import Entry, Zone

        entries = [Entry(a, Zone(z), t, v, importance=0.5)
                   for t, a, z, v in zip(texts, agents, zones, vectors)]
        ids = self.memory.store_entries(entries)
        for offset, entry_id in enumerate(ids):
            self.rowid_to_index[self.memory.store.rowid_of(entry_id)] = start + offset

    def settle(self) -> None:
        self.memory.store.wait_indexed()

    def unindexed(self) -> int:
        """Rows stored but in no graph yet: answered by an exact scan until the indexer has them."""
        return self.memory.store.index_backlog()

    def tune(self, ef: int) -> None:
        # The partitions read the one settings object on every search.
        object.__setattr__(self.memory.store.index_settings, "hnsw_ef_search", int(ef))

    def query(self, vector: np.ndarray, filtered: bool) -> list[int]:
        from brainmem_ros.core.trace import LONG_TERM_ZONES, Zone

        zones = [Zone(FILTER_ZONE)] if filtered else list(LONG_TERM_ZONES)
        hits = self.memory.store.vector_search(vector, FILTER_AGENT, zones, K,
                                               include_superseded=True)
        return [self.rowid_to_index[r] for r, _ in hits]

    def current_rows(self) -> np.ndarray:
        """Bench indexes of the rows a default filtered query may return: current facts only."""
        import sqlite3

        with sqlite3.connect(f"file:{self.folder / 'memory.db'}?mode=ro", uri=True) as db:
            rowids = db.execute("SELECT rowid FROM entries WHERE agent_id = ? AND zone = ? AND "
                                "superseded = 0", (FILTER_AGENT, FILTER_ZONE)).fetchall()
        return np.array(sorted(self.rowid_to_index[r] for r, in rowids), dtype=np.int64)

    def query_current(self, vector: np.ndarray) -> list[int]:
        """Answer the filtered query as brainmem does by default: superseded facts left out."""
        from brainmem_ros.core.trace import Zone

        hits = self.memory.store.vector_search(vector, FILTER_AGENT, [Zone(FILTER_ZONE)], K)
        return [self.rowid_to_index[r] for r, _ in hits]

    def close(self) -> None:
        self.memory.close()


class BrainmemCompactSystem(BrainmemSystem):
    """brainmem with its vectors in RAM as int8 (``store.ram_precision: int8``)."""

    name = "brainmem-int8"
    settings = {"store.ram_precision": "int8"}


class ChromaSystem:
    name = "chromadb"
    unfiltered_agent = None
    knobs = (100, 25, 50, 200, 400)  # its default ef_search first

    def __init__(self, folder: Path):
        chromadb = _need("chromadb", "chromadb")
        from chromadb.config import Settings

        self.client = chromadb.PersistentClient(path=str(folder / "chroma"),
                                                settings=Settings(anonymized_telemetry=False))
        self.collection = self.client.create_collection("memories",
                                                        metadata={"hnsw:space": "cosine"})
        self.batch = self.client.get_max_batch_size()

    def insert(self, start: int, texts, agents, zones, vectors) -> None:
        for s in range(0, len(texts), self.batch):
            e = min(len(texts), s + self.batch)
            self.collection.add(
                ids=[str(start + i) for i in range(s, e)], embeddings=vectors[s:e],
                documents=list(texts[s:e]),
                metadatas=[{"agent": a, "zone": z} for a, z in zip(agents[s:e], zones[s:e])])

    def tune(self, ef: int) -> None:
        self.collection.modify(configuration={"hnsw": {"ef_search": int(ef)}})

    def query(self, vector: np.ndarray, filtered: bool) -> list[int]:
        where = {"$and": [{"agent": FILTER_AGENT}, {"zone": FILTER_ZONE}]} if filtered else None
        answer = self.collection.query(query_embeddings=[vector], n_results=K, where=where,
                                       include=[])
        return [int(i) for i in answer["ids"][0]]

    def close(self) -> None:
        del self.collection, self.client


class QdrantSystem:
    name = "qdrant"
    unfiltered_agent = None
    knobs = (None, )

    def __init__(self, folder: Path):
        _need("qdrant_client", "qdrant-client")
        from qdrant_client import QdrantClient, models

        self.models = models
        self.client = QdrantClient(path=str(folder / "qdrant"))
        self.client.create_collection(
            "memories",
            vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE))
        self.filter = models.Filter(must=[
            models.FieldCondition(key="agent", match=models.MatchValue(value=FILTER_AGENT)),
            models.FieldCondition(key="zone", match=models.MatchValue(value=FILTER_ZONE))
        ])

    def insert(self, start: int, texts, agents, zones, vectors) -> None:
        self.client.upsert("memories", points=self.models.Batch(
            ids=list(range(start, start + len(texts))), vectors=vectors.tolist(),
            payloads=[{"agent": a, "zone": z, "text": t}
                      for t, a, z in zip(texts, agents, zones)]))

    def query(self, vector: np.ndarray, filtered: bool) -> list[int]:
        answer = self.client.query_points("memories", query=vector.tolist(), limit=K,
                                          query_filter=self.filter if filtered else None)
        return [int(p.id) for p in answer.points]

    def close(self) -> None:
        self.client.close()


class LanceSystem:
    name = "lancedb"
    unfiltered_agent = None
    knobs = (20, 5, 10, 40, 80)  # nprobes; LanceDB's default first

    def __init__(self, folder: Path):
        self.lancedb = _need("lancedb", "lancedb")
        self.pa = _need("pyarrow", "pyarrow")
        self.db = self.lancedb.connect(str(folder / "lance"))
        self.table = None
        self.nprobes = self.knobs[0]

    def insert(self, start: int, texts, agents, zones, vectors) -> None:
        pa = self.pa
        batch = pa.table({
            "id": pa.array(range(start, start + len(texts)), pa.int64()),
            "agent": pa.array(list(agents)), "zone": pa.array(list(zones)),
            "text": pa.array(list(texts)),
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(np.asarray(vectors, dtype=np.float32).ravel()), 384)})
        if self.table is None:
            self.table = self.db.create_table("memories", data=batch)
        else:
            self.table.add(batch)

    def settle(self) -> None:
        self.table.create_index(metric="cosine", vector_column_name="vector",
                                index_type="IVF_HNSW_SQ")
        for column in ("agent", "zone"):
            self.table.create_scalar_index(column, index_type="BITMAP")

    def tune(self, nprobes: int) -> None:
        self.nprobes = int(nprobes)

    def query(self, vector: np.ndarray, filtered: bool) -> list[int]:
        search = self.table.search(vector, vector_column_name="vector").distance_type("cosine")
        if filtered:
            search = search.where(f"agent = '{FILTER_AGENT}' AND zone = '{FILTER_ZONE}'",
                                  prefilter=True)
        rows = search.nprobes(self.nprobes).limit(K).select(["id"]).to_list()
        return [int(r["id"]) for r in rows]

    def close(self) -> None:
        self.table = self.db = None


class MilvusSystem:
    name = "milvus"
    unfiltered_agent = None
    knobs = (16, 4, 8, 32, 64)  # nprobe

    def __init__(self, folder: Path):
        _need("milvus_lite", "milvus-lite")
        pymilvus = _need("pymilvus", "pymilvus")
        self.path = folder / "milvus.db"
        self.client = pymilvus.MilvusClient(str(self.path))
        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", pymilvus.DataType.INT64, is_primary=True)
        schema.add_field("vector", pymilvus.DataType.FLOAT_VECTOR, dim=384)
        schema.add_field("agent", pymilvus.DataType.VARCHAR, max_length=32)
        schema.add_field("zone", pymilvus.DataType.VARCHAR, max_length=16)
        self.client.create_collection("memories", schema=schema)
        self.nprobe = self.knobs[0]

    def insert(self, start: int, texts, agents, zones, vectors) -> None:
        self.client.insert("memories", [
            {"id": start + i, "vector": v.tolist(), "agent": a, "zone": z}
            for i, (a, z, v) in enumerate(zip(agents, zones, vectors))])

    def settle(self) -> None:
        params = self.client.prepare_index_params()
        params.add_index("vector", index_type="IVF_FLAT", metric_type="COSINE",
                         params={"nlist": 1024})
        self.client.create_index("memories", params)
        self.client.load_collection("memories")

    def tune(self, nprobe: int) -> None:
        self.nprobe = int(nprobe)

    def query(self, vector: np.ndarray, filtered: bool) -> list[int]:
        found = self.client.search(
            "memories", data=[vector.tolist()], limit=K,
            filter=f'agent == "{FILTER_AGENT}" and zone == "{FILTER_ZONE}"' if filtered else "",
            search_params={"metric_type": "COSINE", "params": {"nprobe": self.nprobe}})
        return [int(hit["id"]) for hit in found[0]]

    def close(self) -> None:
        """Close the client and stop Milvus Lite's server for the file.

        Milvus Lite serves the file from a thread of this process and writes much of its data out
        only when that server stops, by default at the interpreter's exit: after the bench has
        measured the folder and removed it.
        """
        from milvus_lite.server_manager import server_manager_instance

        self.client.close()
        server_manager_instance.release_server(str(self.path))


class SqliteVecSystem:
    name = "sqlite-vec"
    unfiltered_agent = None
    knobs = (None, )

    def __init__(self, folder: Path):
        sqlite_vec = _need("sqlite_vec", "sqlite-vec")
        path = str(folder / "vec.db")
        if hasattr(sqlite3.Connection, "enable_load_extension"):
            self.conn = sqlite3.connect(path)
            self.conn.enable_load_extension(True)
            sqlite_vec.load(self.conn)
        else:  # a Python built without loadable extensions: apsw, as sqlite-vec's docs advise
            apsw = _need("apsw", "apsw")
            self.conn = apsw.Connection(path)
            self.conn.enable_load_extension(True)
            self.conn.load_extension(sqlite_vec.loadable_path())
        self.conn.execute("CREATE VIRTUAL TABLE memories USING vec0(embedding float[384]"
                          " distance_metric=cosine, agent text, zone text)")

    def insert(self, start: int, texts, agents, zones, vectors) -> None:
        with self.conn:
            self.conn.executemany(
                "INSERT INTO memories (rowid, embedding, agent, zone) VALUES (?, ?, ?, ?)",
                [(start + i, np.asarray(v, dtype=np.float32).tobytes(), a, z)
                 for i, (a, z, v) in enumerate(zip(agents, zones, vectors))])

    def query(self, vector: np.ndarray, filtered: bool) -> list[int]:
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        if filtered:
            rows = self.conn.execute(
                "SELECT rowid FROM memories WHERE embedding MATCH ? AND k = ? AND agent = ?"
                " AND zone = ? ORDER BY distance", (blob, K, FILTER_AGENT, FILTER_ZONE))
        else:
            rows = self.conn.execute("SELECT rowid FROM memories WHERE embedding MATCH ? AND"
                                     " k = ? ORDER BY distance", (blob, K))
        return [r[0] for r in rows]

    def close(self) -> None:
        self.conn.close()


class FaissSystem:
    """FAISS alone: one HNSW graph per query's rows, nothing else (no store, no filter)."""

    name = "faiss"
    unfiltered_agent = FILTER_AGENT
    knobs = (128, 16, 32, 64, 256)  # efSearch, brainmem's default first

    def __init__(self, folder: Path):
        _need("faiss", "faiss-cpu")  # a clear skip where it is not installed
        self.vectors, self.agents, self.zones = [], [], []
        self.graphs: dict[bool, tuple] = {}

    def insert(self, start: int, texts, agents, zones, vectors) -> None:
        self.vectors.append(np.asarray(vectors, dtype=np.float32))
        self.agents += list(agents)
        self.zones += list(zones)

    def settle(self) -> None:
        vectors = np.concatenate(self.vectors)
        agents, zones = np.asarray(self.agents), np.asarray(self.zones)
        for filtered in (True, False):
            rows = np.flatnonzero((agents == FILTER_AGENT) & (
                (zones == FILTER_ZONE) if filtered else True))
            self.graphs[filtered] = (floor_graph(vectors[rows]), rows)
        self.vectors = []
        self.tune(self.knobs[0])

    def tune(self, ef: int) -> None:
        for graph, _ in self.graphs.values():
            tune_floor(graph, ef)

    def query(self, vector: np.ndarray, filtered: bool) -> list[int]:
        graph, rows = self.graphs[filtered]
        _, found = graph.search(vector[None, :].astype(np.float32), K)
        return [int(rows[i]) for i in found[0] if i >= 0]

    def close(self) -> None:
        self.graphs.clear()


def floor_graph(vectors: np.ndarray):
    """One FAISS HNSW graph over ``vectors``, built as brainmem builds a current graph that size.

    The floor every brainmem figure is compared with: the same degree and efConstruction, no store.
    """
    import faiss

    from brainmem_ros.core.store.graph import IndexSettings

    settings = IndexSettings()
    graph = faiss.IndexHNSWFlat(vectors.shape[1], settings.m_for(len(vectors)),
                                faiss.METRIC_INNER_PRODUCT)
    graph.hnsw.efConstruction = settings.hnsw_ef_construction
    graph.add(np.ascontiguousarray(vectors))
    return graph


def tune_floor(graph, knob: int) -> None:
    """Set ``graph``'s efSearch from ``knob`` scaled with its rows, as brainmem scales its own."""
    from brainmem_ros.core.store.graph import IndexSettings

    graph.hnsw.efSearch = IndexSettings(hnsw_ef_search=int(knob)).ef_for(graph.ntotal)


FACTORIES: dict[str, Callable[[Path], object]] = {
    "brainmem": BrainmemSystem, "brainmem-int8": BrainmemCompactSystem, "chromadb": ChromaSystem,
    "qdrant": QdrantSystem, "lancedb": LanceSystem, "milvus": MilvusSystem,
    "sqlite-vec": SqliteVecSystem, "faiss": FaissSystem,
}
