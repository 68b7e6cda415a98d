"""Start and stop helper processes for tests: always with sys.executable, every wait bounded."""
from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Optional
from pathlib import Path


class ReadyTimeout(AssertionError):
    pass


class Child:
    """A process started in its own process group, so stopping it stops everything it started.

    Its output is drained by a thread from the start: a child whose pipe nobody reads would block
    on its next log line, and lines are handed over one by one, whatever the pipe delivered at once.
    """

    def __init__(self, argv: list[str], env: dict | None = None, cwd: str | Path | None = None):
        self.argv = argv
        self.proc = subprocess.Popen(
            [sys.executable, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                **(env or {})
            },
            cwd=cwd,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._unread: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        for line in self.proc.stdout:
            self._unread.put(line.rstrip("\n"))
        self._unread.put(None)  # the end of the output

    def wait_for_line(self, needle: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while (line := self._next_line(max(0.0, deadline - time.monotonic()))) is not None:
            if needle in line:
                return line
        raise ReadyTimeout(f"{self.argv[0]} never printed {needle!r} within {timeout}s; "
                           f"output so far:\n" + "\n".join(self.lines[-40:]))

    def stop(self, sig: int = signal.SIGINT, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=timeout)
        self._reader.join(timeout=timeout)
        return self.proc.returncode

    def output(self) -> str:
        """Everything printed so far (what no wait has looked at yet included)."""
        while self._next_line(None) is not None:
            pass
        return "\n".join(self.lines)

    def _next_line(self, timeout: Optional[float]) -> Optional[str]:
        """Take the next unread line, waiting up to ``timeout`` (None: not at all).

        None when no line came or the output has ended (the end mark stays for the next reader).
        """
        try:
            line = self._unread.get(timeout=timeout) if timeout is not None \
                else self._unread.get_nowait()
        except queue.Empty:
            return None
        if line is None:
            self._unread.put(None)
            return None
        self.lines.append(line)
        return line


def serve_node(node_class) -> None:
    """Run one test peer node until SIGINT, printing READY once its entities exist."""
    import rclpy
    from rclpy.executors import ExternalShutdownException

    rclpy.init()
    node = node_class()
    print("READY", flush=True)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
