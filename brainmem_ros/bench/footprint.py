"""What a store occupies: the process's memory as the kernel counts it, and its files on disk."""
from __future__ import annotations

from pathlib import Path

__all__ = ["status_bytes", "disk_bytes"]


def status_bytes(field: str = "VmRSS") -> int:
    """Read a size field of ``/proc/self/status`` in bytes: ``VmRSS`` now, ``VmHWM`` the peak.

    Read from the kernel rather than from Python's allocator, which does not see FAISS's, SQLite's
    or the model's memory.
    """
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def disk_bytes(folder: Path) -> int:
    """Sum every file under ``folder``: a store is its database, its write-ahead log, snapshots."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
