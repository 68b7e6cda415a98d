"""Retrieval: recall routes, fusion and rerank, warnings, the memory prompt (see ``pipeline``)."""
from brainmem_ros.core.retrieval.candidates import trace_as_entry
from brainmem_ros.core.retrieval.pipeline import Retriever
from brainmem_ros.core.retrieval.request import RetrievalRequest, RetrievalResult, parse_zones

__all__ = ["RetrievalRequest", "RetrievalResult", "Retriever", "parse_zones", "trace_as_entry"]
