"""Long-term memory: SQLite as the source of truth, FAISS partitions in RAM kept in step with it.

See ``long_term`` for the facade and the modules of each part.
"""
from brainmem_ros.core.store.graph import IndexSettings
from brainmem_ros.core.store.long_term import LongTermStore
from brainmem_ros.core.store.partitions import SHARED_OWNER
from brainmem_ros.core.store.terms import fts_tokens

__all__ = ["LongTermStore", "IndexSettings", "SHARED_OWNER", "fts_tokens"]
