"""``brainmem-ros eval --via-ros``: the same episodes through the ROS nodes, one process each.

The memory nodes (``brainmem-ros bringup``), ``kitchen_sim_node`` and, per condition, a
``planner_node`` talk over DDS exactly as on a robot. The planner writes its episode records; the
figures come from the same ``metrics`` as in-process, so the two runs can be compared line by line.

One thing differs on purpose: the consolidation node's timer is off unless asked for. A wall-clock
timer promotes working traces at moments that depend on the machine's speed, so two runs of the
same seeds would recall differently; in-process there is no timer. Consolidation still runs on
every goal event and every ``consolidation.every_n_traces`` traces, as it does in-process.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from brainmem_ros.bringup.run import stop_process_groups
from brainmem_ros.evaluation.episode import EpisodeRecord
from brainmem_ros.evaluation.metrics import summarise
from brainmem_ros.evaluation.runner import EvalSettings

__all__ = ["evaluate_via_ros", "NodeProcesses"]

TIMER_OFF_S = 86400.0  # the longest period the parameter accepts: no tick within an evaluation


def _node_process(name: str, *ros_args: str) -> list[str]:
    return [sys.executable, "-m", "brainmem_ros.nodes", name, "--ros-args", *ros_args]


class NodeProcesses:
    """The memory nodes and the kitchen as child processes.

    Stopped (SIGINT, then SIGKILL) on exit.
    """

    def __init__(self, settings: EvalSettings, folder: Path, log=sys.stderr,
                 consolidation_timer: bool = False):
        self.settings, self.folder, self.log = settings, folder, log
        self.consolidation_timer = consolidation_timer
        self.children: list[subprocess.Popen] = []

    def __enter__(self) -> "NodeProcesses":
        ready = self.folder / "memory.ready"
        memory = [
            sys.executable, "-m", "brainmem_ros.cli", "bringup", "--store",
            str(self.folder / "memory.db"), "--ready-file",
            str(ready)
        ]
        if self.settings.config_path:
            memory += ["--config", self.settings.config_path]
        if not self.consolidation_timer:
            memory += ["--ros-args", "-p", f"consolidation.period_s:={TIMER_OFF_S}"]
        self._start(memory, "memory")
        sim = [
            "-p", f"env:={self.settings.env}", "-p", f"fold:={self.settings.fold}", "-p",
            f"interruptions:={str(self.settings.interruptions).lower()}"
        ]
        if self.settings.game_params:
            sim += ["-p", f"game_params:={self.settings.game_params}"]
        self._start(_node_process("kitchen_sim_node", *sim), "kitchen")
        deadline = time.monotonic() + 120.0
        while not ready.exists():
            if time.monotonic() > deadline or any(c.poll() is not None for c in self.children):
                # __exit__ is not called when __enter__ raises: stop what did start, or it would
                # live on and answer the next run's requests over DDS.
                self.__exit__(None, None, None)
                tails = "\n".join(f"--- {name}.log:\n" +
                                  "".join((self.folder / f"{name}.log").read_text(
                                      errors="replace").splitlines(keepends=True)[-15:])
                                  for name in ("memory", "kitchen"))
                raise RuntimeError(f"the memory nodes or the kitchen did not start:\n{tails}")
            time.sleep(0.2)
        return self

    def _start(self, command: list[str], name: str) -> subprocess.Popen:
        out = open(self.folder / f"{name}.log", "w")
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        self.children.append(child)
        return child

    def __exit__(self, *exc) -> None:
        stop_process_groups(list(reversed(self.children)))


def _planner(settings: EvalSettings, condition: str, results: Path) -> list[str]:
    return _node_process("planner_node", "-p", f"backend:={settings.planner}",
                         "-p", f"condition:={condition}", "-p",
                         f"seeds:={','.join(str(s) for s in settings.seeds)}", "-p",
                         f"attempts:={settings.attempts}", "-p",
                         f"lifelong:={str(settings.lifelong).lower()}", "-p",
                         f"window:={settings.window}", "-p", f"max_steps:={settings.max_steps}",
                         "-p", f"top_k:={settings.top_k}", "-p", f"agent_id:=robot-{condition}",
                         "-p", f"results_file:={results}", "-p", "exit_when_done:=true", "-r",
                         "__node:=planner_" + condition)


def evaluate_via_ros(settings: EvalSettings, progress: bool = True, timeout_s: float = 3600.0,
                     consolidation_timer: bool = False) -> dict:
    from tqdm import tqdm

    report = {
        "config": dict(settings.to_dict(), via_ros=True, consolidation_timer=consolidation_timer),
        "conditions": {}
    }
    started = time.time()
    # A node killed on a stuck stop may still be writing its store: that must not fail the run.
    with tempfile.TemporaryDirectory(prefix="brainmem-eval-ros-",
                                     ignore_cleanup_errors=True) as name:
        folder = Path(name)
        with NodeProcesses(settings, folder, consolidation_timer=consolidation_timer):
            for condition in settings.conditions:
                results = folder / f"{condition}.json"
                bar = tqdm(total=len(settings.seeds) * settings.attempts,
                           desc=f"{settings.env}/{condition} (ROS)", unit="ep",
                           disable=not progress)
                child = subprocess.Popen(_planner(settings, condition, results),
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         text=True, start_new_session=True)
                deadline = time.monotonic() + timeout_s
                log = []
                for line in child.stdout:
                    log.append(line)
                    if line.startswith("EPISODE "):
                        bar.update(1)
                    if time.monotonic() > deadline:
                        os.killpg(child.pid, signal.SIGKILL)
                        break
                child.wait()
                bar.close()
                if not results.exists():
                    raise RuntimeError(f"planner_node ({condition}) wrote no results; its log:\n" +
                                       "".join(log[-40:]))
                rows = json.loads(results.read_text())
                errors = [r for r in rows if "error" in r]
                if errors:
                    raise RuntimeError(f"planner_node ({condition}): {errors[0]['error']}")
                records = [EpisodeRecord(**r) for r in rows]
                summary = summarise(records)
                summary["episodes_detail"] = [r.to_dict() for r in records]
                report["conditions"][condition] = summary
    report["wall_s"] = round(time.time() - started, 1)
    return report
