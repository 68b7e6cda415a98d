"""The door of a managed node: requests pass while it is active; a transition waits for them.

A lifecycle transition (deactivate, cleanup, shutdown) arrives on its own executor thread while
retrievals and writes run on others. It closes the door first, so new requests are answered
"not active", then waits for those already inside to finish before it flushes or closes the store
under them.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

from brainmem_ros.core.errors import NotServing

__all__ = ["ServingGate"]


class ServingGate:

    def __init__(self, node_name: str):
        self.node_name = node_name
        self._cond = threading.Condition()
        self._inside = 0
        self._open = False
        self.state = "unconfigured"

    @contextlib.contextmanager
    def enter(self) -> Iterator[None]:
        """Let one request in, or raise NotServing saying which state the node is in."""
        with self._cond:
            if not self._open:
                raise NotServing(
                    f"{self.node_name} is {self.state}, not active: it serves again once "
                    "activated (lifecycle change_state)")
            self._inside += 1
        try:
            yield
        finally:
            with self._cond:
                self._inside -= 1
                self._cond.notify_all()

    def open(self) -> None:
        with self._cond:
            self._open, self.state = True, "active"

    def close(self, state: str, timeout_s: float) -> bool:
        """Refuse new requests from now on; wait for those inside. False if some outlasted it."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._open, self.state = False, state
            while self._inside:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True
