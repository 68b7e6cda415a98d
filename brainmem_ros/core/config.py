"""Every tunable of brainmem_ros, declared once: type, default, description and valid range.

The same declarations serve the core (``MemoryConfig.from_yaml``) and the ROS nodes, which declare a
ROS parameter per field with its description and range. One YAML file configures both: a ROS
parameter file (``/**: ros__parameters: ...``) or a plain mapping of the same sections.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import yaml

from brainmem_ros.core.embedding import BACKENDS
from brainmem_ros.core.errors import InvalidRequest

# A frame id as tf2 and ROS 2 write them (validation.check_frame says the same for requests).
_FRAME_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,127}")

__all__ = ["MemoryConfig", "ConfigError", "Param", "iter_params", "defaults_yaml", "check_value"]


class ConfigError(InvalidRequest):
    """A configuration value is missing its section, of the wrong type, or out of range."""


def p(default, description: str, lo=None, hi=None, choices=None):
    """Declare a parameter: its default, what it means, and the values it may take."""
    meta = {"description": description, "range": (lo, hi), "choices": choices}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class StoreSection:
    path: str = p("~/.ros/brainmem/memory.db",
                  "SQLite file of long-term memory; the FAISS index lives beside it")
    fixed_frame: str = p("map", "frame of positions that come without one (observations, stored "
                         "memories, spatial queries)")
    frames: list = p([], "frames positions may be given in besides fixed_frame; empty: any frame "
                     "(a query still needs memories in its frame: no transforms without tf2)")
    exact_below: int = p(
        10000, "partitions (agent, zone) smaller than this use exact search; larger ones HNSW", 0,
        10**9)
    hnsw_m: int = p(16, "HNSW graph degree of current graphs under hnsw_large_rows nodes", 4, 128)
    hnsw_large_m: int = p(
        24, "HNSW graph degree of current graphs of hnsw_large_rows nodes or more (a graph that "
        "grows past that is rebuilt in the background with it)", 4, 128)
    hnsw_large_rows: int = p(
        100000, "current graphs from this many nodes (distinct vectors; rows with an identical "
        "vector share one) are built with hnsw_large_m (0: never)", 0,
        10**9)
    hnsw_ef_construction: int = p(40, "HNSW build-time candidate list", 8, 1024)
    hnsw_ef_search: int = p(128, "HNSW query-time candidate list (recall against latency)", 8, 4096)
    hnsw_ef_reference_rows: int = p(
        40000, "graphs of more nodes than this search with hnsw_ef_search scaled by "
        "(nodes / this)^0.75, to keep recall as they grow (0: never scaled)", 0, 10**9)
    hnsw_history_m: int = p(
        16, "HNSW graph degree of the history graph (superseded facts, walked only by "
        "history queries)", 4, 128)
    hnsw_history_ef_construction: int = p(40, "HNSW build-time candidate list of the history graph",
                                          8, 1024)
    ram_precision: str = p(
        "float32", "how vectors are held in RAM: float32, or int8 (rows scaled per row, graphs "
        "scalar-quantised: a quarter of the memory, for a million memories on a small board; "
        "SQLite keeps embedding_precision either way)", choices=("float32", "int8"))
    rescore_factor: int = p(
        2, "with ram_precision int8: graph candidates per result, ranked again by the rows", 1,
        16)
    regraph_share: float = p(
        0.25, "rebuild a partition's current HNSW graph in the background once this share of "
        "its nodes has every row superseded or deleted", 0.01, 1.0)
    synchronous: str = p(
        "FULL", "SQLite synchronous mode: FULL survives power cuts, NORMAL only process crashes",
        choices=("FULL", "NORMAL"))
    embedding_precision: str = p(
        "float16", "how embeddings are stored in SQLite: float16 halves the bytes written "
        "and read (its rounding is far below the int8 model's own noise); "
        "float32 keeps a caller's vectors bit for bit", choices=("float16", "float32"))
    index_save_every: int = p(
        5000, "write the FAISS index to disk after this many changes (0: only at close)", 0, 10**9)


@dataclass(frozen=True)
class EmbeddingSection:
    backend: str = p(
        "onnx-int8",
        "onnx-int8 (ONNX Runtime, the weights quantised to 8 bits: about twice as fast as "
        "onnx on CPU, vectors within cosine ~0.99 of it), onnx (ONNX Runtime, float: the "
        "reference's vectors) or torch (sentence-transformers, the reference); a store "
        "answers only the precision it was made with", choices=BACKENDS)
    threads: int = p(0, "CPU threads for the embedding model (one pass each); 0 means up to 4", 0,
                     64)
    batch_size: int = p(
        4, "texts per forward pass; a larger batch is split into length-sorted passes of "
        "this size, run side by side on the threads", 1, 1024)


@dataclass(frozen=True)
class EncodingSection:
    max_text_chars: int = p(4000, "longest accepted trace or query text, in characters", 16,
                            1_000_000)
    entities: list = p(
        [], "extra entity names (objects, appliances, places) to recognise besides the built-in "
        "kitchen vocabulary")
    places: list = p(
        [], "extra names that are places or containers (fridge, counter...) rather than portable "
        "objects")
    functional_predicates: list = p(
        ["location", "state"],
        "predicates with one current value per subject: a newer fact supersedes the older")
    max_future_s: float = p(300.0, "stamps further ahead of the clock than this are refused: a "
                            "sender with a wrong clock would make its memories newer than "
                            "everything", 0.0, 1e9)


@dataclass(frozen=True)
class ImportanceSection:
    base: float = p(0.1, "importance every trace starts from", 0.0, 1.0)
    goal_relevance: float = p(0.3, "weight of overlap (entities, embedding) with the active goal",
                              0.0, 1.0)
    novelty: float = p(
        0.25,
        "weight of novelty: distance to what is known about the same entities, or a contradiction",
        0.0, 1.0)
    valence: float = p(0.25, "weight of outcome valence", 0.0, 1.0)
    failure_valence: float = p(1.0, "valence of a failure", 0.0, 1.0)
    success_valence: float = p(0.5, "valence of a success", 0.0, 1.0)
    neutral_valence: float = p(0.0, "valence of a plain observation", 0.0, 1.0)
    action_bonus: float = p(0.1, "extra weight of an action result over a plain state", 0.0, 1.0)
    access: float = p(0.05, "importance gained each time a retrieval returns the memory", 0.0, 1.0)


@dataclass(frozen=True)
class WorkingSection:
    max_traces: int = p(200, "traces kept in working memory before the oldest are dropped", 1,
                        100000)
    max_actions: int = p(20, "actions kept in the action history", 1, 10000)
    max_entities: int = p(200, "entities kept in the environment snapshot", 1, 100000)
    snapshot_path: str = p(
        "", "JSON file the working memory is saved to and resumed from; empty: beside the store")
    done_shown: int = p(12, "done steps of the current goal the memory prompt lists (most recent)",
                        0, 1000)
    routine_verbs: list = p(
        ["move", "go", "look", "examine", "inventory", "read", "open", "close", "take", "drop"],
        "actions starting with these words are not listed as done steps in the prompt (getting "
        "about and fetching are not progress; what is held is listed apart)")


@dataclass(frozen=True)
class ConsolidationSection:
    threshold: float = p(0.35,
                         "working traces at or above this importance move to long-term memory", 0.0,
                         1.0)
    warning_importance: float = p(0.95, "importance of a remembered failure", 0.0, 1.0)
    procedure_similarity: float = p(
        0.9, "goals at least this similar share one procedure (merged, strengthened)", 0.0, 1.0)
    period_s: float = p(10.0, "consolidation timer period, seconds", 0.1, 86400.0)
    every_n_traces: int = p(
        25, "also consolidate after this many new traces (0: timer and goal events only)", 0, 10**6)


@dataclass(frozen=True)
class RetrievalSection:
    top_k: int = p(5, "memories returned when the request says 0", 1, 1000)
    max_top_k: int = p(50, "largest top_k a request may ask for", 1, 1000)
    min_relevance: float = p(0.3,
                             "candidates less relevant than this are dropped however important",
                             0.0, 1.0)
    vector_candidates: int = p(16, "candidates from vector recall (0: vector recall off)", 0,
                               10000)
    lexical_candidates: int = p(
        10, "candidates from lexical recall, in long-term memory (FTS5) and in working "
        "memory (words in common) each", 0, 10000)
    lexical_max_df: float = p(
        0.002,
        "lexical recall uses only query words found in at most this share of the memories the "
        "caller sees, its own and the shared ones (rare words; common ones are vector recall's "
        "job)",
        0.0, 1.0)
    graph_hops: int = p(2, "entity-graph hops from the query's and context's entities", 0, 2)
    graph_fanout: int = p(6, "entities followed per hop (most recently related first)", 1, 1000)
    graph_per_entity: int = p(4, "memories taken per entity reached (most recent first)", 1, 1000)
    graph_candidates: int = p(12, "candidates from graph recall", 0, 10000)
    temporal_actions: int = p(5, "recent actions from working memory offered to temporal recall", 0,
                              1000)
    w_relevance: float = p(0.55, "rerank weight of relevance to the query", 0.0, 1.0)
    w_importance: float = p(0.2, "rerank weight of (decayed) importance", 0.0, 1.0)
    w_recency: float = p(0.15, "rerank weight of recency", 0.0, 1.0)
    w_confidence: float = p(0.1, "rerank weight of source confidence", 0.0, 1.0)
    recency_tau_s: float = p(600.0, "time constant of the recency term, seconds", 1.0, 1e9)
    multi_route_bonus: float = p(0.05, "relevance added per extra route that found the same memory",
                                 0.0, 1.0)
    context_weight: float = p(
        0.8, "similarity to the context (the goal) counts this much of similarity to the query",
        0.0, 1.0)
    route_similarity_nudge: float = p(
        0.25,
        "evidence of the lexical, graph, temporal and spatial routes is raised toward 1 by this "
        "share of the memory's similarity", 0.0, 1.0)
    duplicate_similarity: float = p(
        0.97, "candidates this similar to a better one are dropped as near-duplicates", 0.5, 1.0)
    warning_similarity: float = p(
        0.55, "a past failure at least this similar to the current goal is announced", 0.0, 1.0)
    warning_overlap_margin: float = p(
        0.15, "a past failure naming an entity of the query or goal is announced at this much less "
        "similarity", 0.0, 1.0)
    language: str = p("en", "memory prompt language", choices=("en", "zh"))


@dataclass(frozen=True)
class ForgettingSection:
    decay_tau_s: float = p(7 * 86400.0,
                           "importance decays as exp(-t / tau) since last access, seconds", 1.0,
                           1e12)
    archive_below: float = p(0.02,
                             "memories whose decayed importance falls below this are archived", 0.0,
                             1.0)
    hard_delete: bool = p(False, "delete pruned memories instead of archiving them")
    capacity_per_agent: int = p(
        1_000_000,
        "most long-term memories one agent keeps; the least important beyond are evicted", 1, 10**9)
    period_s: float = p(60.0, "forgetting timer period, seconds", 0.1, 86400.0)


@dataclass(frozen=True)
class HealthSection:
    period_s: float = p(1.0, "diagnostics period, seconds", 0.1, 3600.0)
    free_disk_warn_mb: float = p(
        1024.0, "free space beside the store below which diagnostics warn, MB", 0.0, 1e9)
    free_disk_error_mb: float = p(
        100.0, "free space beside the store below which diagnostics report an error, MB", 0.0,
        1e9)
    backlog_warn: int = p(500, "events waiting in encoder_node above which diagnostics warn", 1,
                          10**9)
    lag_warn_s: float = p(5.0, "age of the oldest waiting event above which diagnostics warn, s",
                          0.0, 1e9)


@dataclass(frozen=True)
class FleetSection:
    dsn: str = p("", "PostgreSQL connection string of the fleet's server (put the password in a "
                 "passfile, as brainmem-ros fleet-db robot does); empty: no fleet")
    kinds: list = p(["fact", "procedure", "warning", "completed_goal"],
                    "what this robot shares: fact, procedure, warning, completed_goal, episode, "
                    "goal (never working-memory traces)")
    agents: list = p([], "agents whose memories are shared; empty: every agent")
    share_with: list = p([], "robots that may read what this robot shares; empty: the whole "
                         "fleet")
    period_s: float = p(1.0, "push and pull period, seconds", 0.05, 3600.0)
    batch: int = p(500, "most changes pushed or pulled in one round trip", 1, 100000)
    timeout_s: float = p(5.0, "connect and statement timeout against the server, seconds", 0.1,
                         600.0)


SECTIONS = {
    "store": StoreSection,
    "embedding": EmbeddingSection,
    "encoding": EncodingSection,
    "importance": ImportanceSection,
    "working": WorkingSection,
    "consolidation": ConsolidationSection,
    "retrieval": RetrievalSection,
    "forgetting": ForgettingSection,
    "health": HealthSection,
    "fleet": FleetSection,
}


@dataclass(frozen=True)
class Param:
    """One declared parameter, flattened to its ROS name ``section.field``."""

    name: str
    type: type
    default: Any
    description: str
    range: tuple
    choices: tuple | None


def iter_params() -> Iterator[Param]:
    for section, cls in SECTIONS.items():
        instance = cls()
        for f in dataclasses.fields(cls):
            yield Param(f"{section}.{f.name}", type(getattr(instance, f.name)),
                        getattr(instance, f.name), f.metadata["description"], f.metadata["range"],
                        f.metadata["choices"])


def check_value(param: Param, value: Any) -> Any:
    """Return ``value`` as ``param`` takes it, or raise ConfigError saying what is wrong."""
    if param.type is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if param.type is list and isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, param.type) or (param.type is int and isinstance(value, bool)):
        raise ConfigError(f"{param.name} must be {param.type.__name__}, got {value!r}")
    if param.type is float and not math.isfinite(value):
        raise ConfigError(f"{param.name} must be finite, got {value!r}")
    lo, hi = param.range
    if lo is not None and value < lo or hi is not None and value > hi:
        raise ConfigError(f"{param.name}={value!r} is outside [{lo}, {hi}]")
    if param.choices and value not in param.choices:
        raise ConfigError(
            f"{param.name}={value!r} is not one of {', '.join(map(str, param.choices))}")
    if param.type is list and not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{param.name} must be a list of strings")
    return value


@dataclass(frozen=True)
class MemoryConfig:
    store: StoreSection = field(default_factory=StoreSection)
    embedding: EmbeddingSection = field(default_factory=EmbeddingSection)
    encoding: EncodingSection = field(default_factory=EncodingSection)
    importance: ImportanceSection = field(default_factory=ImportanceSection)
    working: WorkingSection = field(default_factory=WorkingSection)
    consolidation: ConsolidationSection = field(default_factory=ConsolidationSection)
    retrieval: RetrievalSection = field(default_factory=RetrievalSection)
    forgetting: ForgettingSection = field(default_factory=ForgettingSection)
    health: HealthSection = field(default_factory=HealthSection)
    fleet: FleetSection = field(default_factory=FleetSection)

    @classmethod
    def from_flat(cls, values: dict[str, Any]) -> "MemoryConfig":
        """Build from flat names, ``{"retrieval.top_k": 5, ...}``.

        Build from ``{"retrieval.top_k": 5, ...}``; unknown names and bad values raise ConfigError.
        """
        known = {param.name: param for param in iter_params()}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(f"unknown parameter(s): {', '.join(unknown)}")
        per_section: dict[str, dict] = {s: {} for s in SECTIONS}
        problems = []
        for name, value in values.items():
            section, key = name.split(".", 1)
            try:
                per_section[section][key] = check_value(known[name], value)
            except ConfigError as exc:
                problems.append(str(exc))
        if problems:
            raise ConfigError("; ".join(problems))
        config = cls(**{s: SECTIONS[s](**kw) for s, kw in per_section.items()})
        weights = config.retrieval
        total = (weights.w_relevance + weights.w_importance + weights.w_recency
                 + weights.w_confidence)
        if total <= 0:
            raise ConfigError("retrieval weights w_* must not all be zero")
        if config.retrieval.top_k > config.retrieval.max_top_k:
            raise ConfigError("retrieval.top_k must not exceed retrieval.max_top_k")
        for frame in [config.store.fixed_frame, *config.store.frames]:
            if not frame or not _FRAME_NAME.fullmatch(frame):
                raise ConfigError(
                    f"store.fixed_frame and store.frames must be frame names, got {frame!r}")
        return config

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> "MemoryConfig":
        """Accept a ROS parameter file's content or a plain mapping of sections."""
        data = data or {}
        if any(isinstance(v, dict) and "ros__parameters" in v for v in data.values()):
            merged: dict = {}
            for v in data.values():
                if isinstance(v, dict):
                    merged.update(v.get("ros__parameters") or {})
            data = merged
        flat: dict[str, Any] = {}
        for section, content in data.items():
            if section not in SECTIONS:
                continue  # node-specific parameters (topics, timers) live beside the core's
            if not isinstance(content, dict):
                raise ConfigError(f"section {section!r} must be a mapping")
            for key, value in content.items():
                flat[f"{section}.{key}"] = value
        return cls.from_flat(flat)

    @classmethod
    def from_yaml(cls, path: str | Path) -> "MemoryConfig":
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"config {path} is not valid YAML: {exc}") from exc
        return cls.from_mapping(data if isinstance(data, dict) else {})

    def replace(self, **flat: Any) -> "MemoryConfig":
        """Return a copy with some parameters changed.

        A copy with some parameters changed: ``config.replace(**{"store.path": "x.db"})``.
        """
        values = self.flat()
        values.update(flat)
        return MemoryConfig.from_flat(values)

    def flat(self) -> dict[str, Any]:
        return {
            f"{s}.{k}": v
            for s in SECTIONS
            for k, v in dataclasses.asdict(getattr(self, s)).items()
        }


def defaults_yaml() -> str:
    """Write a ROS parameter file with every declared parameter at its default and description.

    Empty lists are written as comments: a ROS parameter file cannot type an empty array.
    """
    lines = [
        "# brainmem_ros parameters: one file for every node and for the core (bringup, bench).",
        "# Generated by `brainmem-ros params --yaml` from the declarations in "
        "brainmem_ros/core/config.py.", "/**:", "  ros__parameters:"
    ]
    section = None
    for param in iter_params():
        name, key = param.name.split(".", 1)
        if name != section:
            lines.append(f"    {name}:")
            section = name
        value = param.default
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str):
            text = f'"{value}"'
        elif isinstance(value, list):
            text = "[" + ", ".join(f'"{v}"' for v in value) + "]"
        else:
            text = repr(value)
        prefix = "# " if isinstance(value, list) and not value else ""
        lines.append(f"      {prefix}{key}: {text}  # {param.description}")
    return "\n".join(lines) + "\n"
