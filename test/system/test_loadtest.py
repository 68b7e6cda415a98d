"""``brainmem-ros loadtest`` as an operator runs it, in miniature.

`brainmem-ros loadtest` as an operator runs it, in miniature: it starts the memory nodes one process
each, drives them over DDS and reports what the issue asks for. The figures themselves are the
benchmark's business (README); here only that every call is answered and accounted for.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _loadtest(*args: str, timeout: float = 240.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "brainmem_ros.cli", "loadtest", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def test_a_short_load_is_answered_without_errors_and_reported(tmp_path, scratch):
    report_path = tmp_path / "load.json"
    done = _loadtest("--clients", "2", "--seconds", "5", "--rate", "10", "--client-rate", "5",
                     "--novel-queries", "--json", str(report_path))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["nodes"] == "one process per node" and report["novel_queries"] is True
    assert report["errors"] == 0 and report["calls"] >= 20, report
    assert report[
        "clients_ready_at_start"] == 2, "the window must start with every client connected"
    assert report["retrieve_p50_ms"] <= report["retrieve_p99_ms"] <= report["retrieve_max_ms"]
    assert report["observations_published"] >= 40
    assert report["ingest_lag_samples"] >= 1 and report["ingest_lag_p50_ms"] > 0
    assert "/retrieve_memory p50" in done.stdout
    assert not list(scratch.glob("brainmem-*"))  # the store and the nodes' log went with the run


@pytest.mark.parametrize("bad", [["--clients", "0"], ["--client-rate", "-1"], ["--seconds", "0"]])
def test_nonsense_arguments_are_refused_before_anything_starts(bad):
    done = _loadtest(*bad, timeout=60.0)
    assert done.returncode == 2 and "loadtest:" in done.stderr


def test_novel_queries_are_never_asked_twice_and_the_default_ones_are_six():
    """Novel questions never repeat; the default ones are six.

    The default load repeats six questions, which the store's embedding cache then answers; the
    novel load must cost a model pass on every call, so no text may come back, in any client.
    """
    from brainmem_ros.loadtest.client import QUERIES, _query

    assert len({_query(i, client, True) for client in range(8) for i in range(3000)}) == 8 * 3000
    assert {_query(i, client, False) for client in range(8) for i in range(50)} == set(QUERIES)


def test_a_teardown_that_hangs_is_given_up_on_and_one_that_finishes_is_not():
    """A teardown that hangs is given up on; one that finishes is not.

    Fast DDS can deadlock while deleting a data writer (eProsima/Fast-DDS#6502): a finished load
    test must still report and return instead of waiting on it forever.
    """
    import threading

    from brainmem_ros.loadtest.run import _torn_down

    class Node:

        def __init__(self, hangs):
            self.hangs, self.destroyed = hangs, threading.Event()

        def destroy_node(self):
            if self.hangs:
                threading.Event().wait()
            self.destroyed.set()

    class Rclpy:
        shut_down = False

        def shutdown(self):
            Rclpy.shut_down = True

    assert _torn_down(Node(hangs=False), Rclpy(), timeout=5.0) and Rclpy.shut_down
    hanging = Node(hangs=True)
    assert not _torn_down(hanging, Rclpy(), timeout=0.2) and not hanging.destroyed.is_set()
