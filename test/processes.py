"""Start and stop helper processes for tests: always with sys.executable, every wait bounded."""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path


class ReadyTimeout(AssertionError):
    pass


class Child:
    """A process started in its own process group, so stopping it stops everything it started."""

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

    def wait_for_line(self, needle: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while time.monotonic() < deadline:
                if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                    break
                line = self.proc.stdout.readline()
                if not line:
                    break
                self.lines.append(line.rstrip("\n"))
                if needle in line:
                    return line
        finally:
            selector.unregister(self.proc.stdout)
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
        rest = self.proc.stdout.read() if self.proc.stdout else ""
        self.lines.extend(rest.splitlines())
        return self.proc.returncode

    def output(self) -> str:
        return "\n".join(self.lines)


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
