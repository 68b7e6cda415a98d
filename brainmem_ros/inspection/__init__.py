"""``brainmem-ros inspect``: what an operator needs to know about a store file (``report``)."""
from brainmem_ros.inspection.report import describe, inspect_store, to_json

__all__ = ["inspect_store", "describe", "to_json"]
