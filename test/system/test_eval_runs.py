"""The evaluation end to end with the real model.

The evaluation end to end with the real model: in-process, over ROS (which must agree with it), the
CLI, and kitchen_sim_node's answers to bad requests.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from brainmem_ros.nodes import names
from brainmem_ros.evaluation.runner import EvalSettings, evaluate
from processes import Child
from ros_client import Client

REPO = Path(__file__).resolve().parents[2]
KEYS = ("episodes", "success_rate", "mean_steps", "interruption_recovery_rate",
        "repeat_failure_rate", "retrieve_p50_ms")


@pytest.fixture(scope="module")
def nodes_embedder():
    """Make the embedder the memory nodes make from the default configuration.

    The in-process runs that the runs over ROS are compared with must embed as the nodes do: the
    session's float ONNX model and the nodes' default int8 one rank close memories differently.
    """
    from brainmem_ros.core.config import MemoryConfig
    from brainmem_ros.core.embedding import MiniLMEmbedder

    return MiniLMEmbedder.configured(MemoryConfig().embedding)


@pytest.fixture(scope="module")
def in_process(nodes_embedder):
    settings = EvalSettings(env="kitchen", seeds=[0, 1, 2], interruptions=True)
    return evaluate(settings, progress=False, embedder=nodes_embedder)


def test_report_has_every_condition_and_figure(in_process):
    assert set(in_process["conditions"]) == {"window", "brainmem", "full"}
    for c in in_process["conditions"].values():
        assert all(k in c for k in KEYS) and c["episodes"] == 3
    assert in_process["config"]["window"] == 5 and in_process["config"]["interruptions"] is True
    assert in_process["conditions"]["brainmem"]["retrieve_p50_ms"] > 0
    assert in_process["conditions"]["window"]["retrieve_p50_ms"] is None


def test_memory_beats_the_window_on_identical_episodes(in_process):
    c = in_process["conditions"]
    assert c["brainmem"]["success_rate"] >= c["window"]["success_rate"] + 0.5
    assert c["brainmem"]["interruption_recovery_rate"] > c["window"]["interruption_recovery_rate"]


def test_a_remembered_failure_is_not_repeated(minilm):
    """A failure remembered from one attempt is not repeated in the next.

    Seed 10 is the coffee task; with hazard_rate 1 its recipe says to switch on before filling.
    """
    settings = EvalSettings(env="kitchen", seeds=[10], attempts=2,
                            conditions=("window", "brainmem"), game_params="hazard_rate=1.0")
    report = evaluate(settings, progress=False, embedder=minilm)
    window = report["conditions"]["window"]["episodes_detail"]
    brainmem = report["conditions"]["brainmem"]["episodes_detail"]
    assert brainmem[0]["failure"] == "short_circuit"
    assert report["conditions"]["brainmem"]["repeat_failure_rate"] == 0.0 and brainmem[1]["success"]
    assert window[0]["failure"] == window[1][
        "failure"] == "short_circuit"  # the window forgets, and repeats it
    assert report["conditions"]["window"]["repeat_failure_rate"] == 1.0


@pytest.fixture(scope="module")
def kitchen_after_kitchen(nodes_embedder):
    """Play two coffee seeds with a fresh memory each, and with one lifelong memory.

    Seeds 7 and 10 are both the coffee task, each with the short circuit in its recipe: 7 meets it
    first. Played with a fresh memory per seed, and by one lifelong robot.
    """
    return {
        lifelong: evaluate(
            EvalSettings(env="kitchen", seeds=[7, 10], interruptions=True,
                         conditions=("brainmem", ), lifelong=lifelong), progress=False,
            embedder=nodes_embedder)
        for lifelong in (False, True)
    }


def test_a_lifelong_robot_does_not_repeat_a_failure_met_in_another_kitchen(kitchen_after_kitchen):
    fresh = kitchen_after_kitchen[False]["conditions"]["brainmem"]["episodes_detail"]
    lifelong = kitchen_after_kitchen[True]["conditions"]["brainmem"]["episodes_detail"]
    assert [e["failure"] for e in fresh] == ["short_circuit",
                                             "short_circuit"]  # seed 10 cannot know of seed 7
    assert lifelong[0]["failure"] == "short_circuit" and lifelong[1]["success"]
    assert kitchen_after_kitchen[True]["config"]["lifelong"] is True


def test_over_ros_a_lifelong_robot_plays_the_same_episodes(kitchen_after_kitchen):
    from brainmem_ros.evaluation.via_ros import evaluate_via_ros

    settings = EvalSettings(env="kitchen", seeds=[7, 10], interruptions=True,
                            conditions=("brainmem", ), lifelong=True)
    over_ros = evaluate_via_ros(settings, progress=False, timeout_s=600)
    here, there = (r["conditions"]["brainmem"]["episodes_detail"]
                   for r in (kitchen_after_kitchen[True], over_ros))
    assert [(e["seed"], e["success"], e["actions"]) for e in there] == \
        [(e["seed"], e["success"], e["actions"]) for e in here]


def test_over_ros_the_episodes_are_the_same(in_process):
    from brainmem_ros.evaluation.via_ros import evaluate_via_ros

    settings = EvalSettings(env="kitchen", seeds=[0, 1, 2], interruptions=True,
                            conditions=("brainmem", "window"))
    over_ros = evaluate_via_ros(settings, progress=False, timeout_s=600)
    assert over_ros["config"]["via_ros"] is True
    for condition in ("brainmem", "window"):
        here = [(e["seed"], e["success"], e["steps"], e["actions"])
                for e in in_process["conditions"][condition]["episodes_detail"]]
        there = [(e["seed"], e["success"], e["steps"], e["actions"])
                 for e in over_ros["conditions"][condition]["episodes_detail"]]
        assert there == here, condition
    assert over_ros["conditions"]["brainmem"]["retrieve_p50_ms"] > 0


def test_cli_eval_writes_json_and_plot(tmp_path):
    out = subprocess.run([
        sys.executable, "-m", "brainmem_ros.cli", "eval", "--env", "kitchen", "--seeds", "0",
        "--conditions", "window,full", "--json",
        str(tmp_path / "r.json"), "--plot",
        str(tmp_path / "r.png"), "--quiet"
    ], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert set(report["conditions"]) == {"window", "full"}
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args, message", [
    (["--conditions", "window,memoryless"], "unknown condition"),
    (["--seeds", "x"], "seeds"),
    (["--attempts", "0"], "attempts"),
    (["--game-params", "hazard_rate=7"], "hazard_rate"),
])
def test_cli_eval_refuses_bad_arguments(args, message):
    out = subprocess.run([sys.executable, "-m", "brainmem_ros.cli", "eval", "--quiet", *args],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 2 and message in out.stderr


def test_kitchen_sim_node_answers_bad_requests_and_stays_up():
    from brainmem_ros.srv import EnvStep

    node = Child(
        ["-m", "brainmem_ros.nodes", "kitchen_sim_node", "--ros-args", "-p", "interruptions:=true"],
        cwd=REPO)
    client = Client("sim_test_client")
    try:
        refused = client.call(EnvStep, names.KITCHEN_STEP,
                              EnvStep.Request(agent_id="nobody", action="look around"))
        assert not refused.success and "reset first" in refused.message
        first = client.call(EnvStep, names.KITCHEN_STEP,
                            EnvStep.Request(agent_id="a", reset=True, seed=4))
        assert first.success and first.task and first.valid_actions and not first.done
        for action in ["x" * 100000, "take the moon", "move up; DROP TABLE x"]:
            r = client.call(EnvStep, names.KITCHEN_STEP,
                            EnvStep.Request(agent_id="a", action=action))
            assert r.success and r.observation == "You can't do that here."
        for action in ["", "\x00\x01",
                       "   "]:  # empty on arrival (a NUL ends a DDS string): refused, no reset
            r = client.call(EnvStep, names.KITCHEN_STEP,
                            EnvStep.Request(agent_id="a", action=action))
            assert not r.success and "empty action" in r.message
        again = client.call(EnvStep, names.KITCHEN_STEP,
                            EnvStep.Request(agent_id="a", reset=True, seed=4))
        assert again.observation == first.observation  # same seed, same episode
        other = client.call(EnvStep, names.KITCHEN_STEP,
                            EnvStep.Request(agent_id="b", reset=True, seed=5))
        assert other.success and other.task != first.task  # one episode per agent
    finally:
        client.close()
        node.stop()


def test_kitchen_sim_node_refuses_an_unknown_environment():
    node = Child(["-m", "brainmem_ros.nodes", "kitchen_sim_node", "--ros-args", "-p", "env:=moon"],
                 cwd=REPO)
    node.proc.wait(timeout=60)
    assert node.stop() == 1 and "env must be kitchen or cookingworld" in node.output()


def test_over_ros_a_start_that_fails_leaves_no_node_running_and_says_why(tmp_path):
    """A start over ROS that fails stops what it started and says why.

    The memory nodes refuse the deliberately broken config: the kitchen started beside them is
    stopped too (left running, it answered the next run's /kitchen/step over DDS), and the error
    carries the nodes' own words.
    """
    from brainmem_ros.evaluation.via_ros import NodeProcesses

    settings = EvalSettings(env="kitchen", seeds=[0],
                            config_path=str(REPO / "config" / "broken.yaml"))
    nodes = NodeProcesses(settings, tmp_path)
    with pytest.raises(RuntimeError, match="did not start") as refused:
        with nodes:
            pass
    assert "retrieval.top_k=-3 is outside" in str(refused.value)
    assert nodes.children and all(child.poll() is not None for child in nodes.children)
