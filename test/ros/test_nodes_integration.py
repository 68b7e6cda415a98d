"""The memory nodes over real DDS between processes, with the real embedding model.

The memory nodes over real DDS between processes, with the real embedding model: `brainmem-ros
bringup` in one process, this test as an independent client in another.
"""
import math
import signal
from pathlib import Path

import pytest

from processes import Child
from ros_client import Client
from brainmem_ros.nodes import names

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    store = tmp_path_factory.mktemp("store") / "memory.db"
    child = Child([
        "-m", "brainmem_ros.cli", "bringup", "--one-process", "--store",
        str(store), "--ros-args", "-p", "consolidation.period_s:=1.5", "-p",
        "consolidation.every_n_traces:=0"
    ], cwd=REPO)
    try:
        child.wait_for_line("bringup: store_node, encoder_node, consolidation_node up", timeout=120)
        client = Client()
        yield child, client, store
        client.close()
    finally:
        code = child.stop(signal.SIGINT, timeout=30)
        assert code == 0, child.output()
        assert "stopped, memory flushed" in child.output()


def srv():
    import brainmem_ros.srv as s
    return s


def msg():
    import brainmem_ros.msg as m
    return m


def retrieve(client, agent, query, **kw):
    s = srv()
    return client.call(s.RetrieveMemory, names.RETRIEVE_MEMORY,
                       s.RetrieveMemory.Request(agent_id=agent, query=query, **kw))


def observe(client, agent, text):
    m = msg()
    client.publish(m.Observation, names.OBSERVATION,
                   m.Observation(agent_id=agent, text=text, confidence=1.0))


def test_observation_encoded_stored_and_recalled_with_the_right_top_result(system):
    _, client, _ = system
    observe(client, "r1", "The butter is in the fridge.")
    observe(client, "r1", "The cat sleeps on the sofa.")
    answer = client.wait_until(
        lambda: (r := retrieve(client, "r1", "where is the butter?")
                 ).memories and "butter" in r.memories[0].content and r)
    assert answer.success and "fridge" in answer.memories[0].content
    assert "## Relevant memories" in answer.memory_prompt and answer.memories[0].routes


def test_another_agent_does_not_see_them(system):
    _, client, _ = system
    client.wait_until(lambda: retrieve(client, "r1", "butter").memories)
    other = retrieve(client, "r2", "where is the butter?")
    assert other.success and not any("butter" in m.content for m in other.memories)


def test_a_newer_fact_supersedes_the_older_in_the_answer(system):
    _, client, _ = system
    client.wait_until(lambda: retrieve(client, "r1", "butter").memories)
    observe(client, "r1", "The butter is on the counter.")

    def answered():
        r = retrieve(client, "r1", "where is the butter?", top_k=10)
        texts = [m.content for m in r.memories if "butter" in m.content]
        return texts if texts and "counter" in texts[0] else None

    texts = client.wait_until(answered)
    assert not any("fridge" in t for t in texts), texts


def test_the_consolidation_timer_moves_entries_to_long_term_memory(system):
    _, client, _ = system
    s = srv()
    observe(client, "r3", "The sponge is next to the sink.")

    def consolidated():
        r = retrieve(client, "r3", "where is the sponge?", exclude_working=True,
                     zones=["semantic", "episodic"])
        return r if any("sponge" in m.content for m in r.memories) else None

    answer = client.wait_until(consolidated, timeout=30)
    assert all(m.zone in ("semantic", "episodic") for m in answer.memories)
    wm = client.call(s.GetWorkingMemory, names.GET_WORKING_MEMORY,
                     s.GetWorkingMemory.Request(agent_id="r3"))
    assert wm.success and not any("sponge" in t.content for t in wm.traces)


def test_goal_events_reach_the_consolidation_node_and_make_a_procedure(system):
    _, client, _ = system
    s, m = srv(), msg()
    push = client.call(
        s.UpdateGoal, names.UPDATE_GOAL,
        s.UpdateGoal.Request(operation=s.UpdateGoal.Request.OP_PUSH,
                             goal=m.Goal(agent_id="r4", description="make toast")))
    assert push.success and push.stack[-1].description == "make toast"
    for action, result in [("take the bread", "You take the bread."),
                           ("turn on the toaster", "The toaster is on.")]:
        client.publish(
            m.ActionResult, names.ACTION_RESULT,
            m.ActionResult(agent_id="r4", action=action, success=True, result=result,
                           goal_id=push.goal.id))
    client.wait_until(lambda: len(
        client.call(s.GetWorkingMemory, names.GET_WORKING_MEMORY,
                    s.GetWorkingMemory.Request(agent_id="r4")).recent_actions) == 2)
    done = client.call(
        s.UpdateGoal, names.UPDATE_GOAL,
        s.UpdateGoal.Request(operation=s.UpdateGoal.Request.OP_COMPLETE,
                             goal=m.Goal(agent_id="r4")))
    assert done.success and done.goal.status == m.Goal.STATUS_COMPLETED
    procedure = client.wait_until(
        lambda:
        [x for x in retrieve(client, "r4", "how do I make toast?", zones=["procedural"]).memories])
    assert "1. take the bread; 2. turn on the toaster" in procedure[0].content


def test_a_replayed_bag_leaves_the_expected_memories(system):
    _, client, _ = system
    replay = Child(
        ["-m", "brainmem_ros.cli", "replay",
         str(REPO / "bags" / "kitchen_run"), "--rate", "0"], cwd=REPO)
    assert replay.proc.wait(timeout=60) == 0, replay.output()
    replay.stop()
    assert "replayed 12 messages" in replay.output()

    def butter_on_counter():
        r = retrieve(client, "robot", "where is the butter?", top_k=10)
        texts = [x.content for x in r.memories if "butter" in x.content]
        return texts if texts and "counter" in texts[0] else None

    texts = client.wait_until(butter_on_counter, timeout=30)
    assert not any("in the fridge" in t for t in texts)
    tomato = retrieve(client, "robot", "where is the tomato?", top_k=10)
    tomato_texts = [x.content for x in tomato.memories if "tomato" in x.content]
    assert tomato_texts and "right-hand counter" in tomato_texts[0] and not any(
        "left" in t for t in tomato_texts)
    coffee = retrieve(client, "robot", "pour water into the coffee machine")
    assert coffee.warnings and "short-circuits" in coffee.warnings[0]


def test_every_bad_request_is_answered_and_the_node_stays_up(system):
    child, client, _ = system
    s, m = srv(), msg()
    cases = [
        (s.RetrieveMemory, names.RETRIEVE_MEMORY, s.RetrieveMemory.Request(agent_id="r1", query=""),
         "query must not be empty"),
        (s.RetrieveMemory, names.RETRIEVE_MEMORY,
         s.RetrieveMemory.Request(agent_id="r1", query="x", top_k=-1), "top_k"),
        (s.RetrieveMemory, names.RETRIEVE_MEMORY,
         s.RetrieveMemory.Request(agent_id="r1", query="x", zones=["dreams"]), "unknown zone"),
        (s.RetrieveMemory, names.RETRIEVE_MEMORY, s.RetrieveMemory.Request(agent_id="",
                                                                           query="x"), "agent_id"),
        (s.RetrieveMemory, names.RETRIEVE_MEMORY,
         s.RetrieveMemory.Request(agent_id="r1", query="x" * 100000), "allowed"),
        (s.RetrieveMemory, names.RETRIEVE_MEMORY,
         s.RetrieveMemory.Request(agent_id="r1", query="x", has_position=True,
                                  radius=float("nan")), "radius"),
        (s.StoreMemory, names.STORE_MEMORY,
         s.StoreMemory.Request(entries=[
             m.MemoryEntry(agent_id="r1", zone="semantic", content="nan fact",
                           embedding=[math.nan] * 384)
         ]), "NaN"),
        (s.StoreMemory, names.STORE_MEMORY,
         s.StoreMemory.Request(entries=[m.MemoryEntry(agent_id="r1", zone="nowhere", content="x")]),
         "unknown zone"),
        (s.StoreMemory, names.STORE_MEMORY, s.StoreMemory.Request(entries=[]), "no entries"),
        (s.IngestTraces, names.INGEST_TRACES,
         s.IngestTraces.Request(
             traces=[m.Trace(agent_id="r1", text="short vector", embedding=[0.1] * 3)]),
         "384 components"),
        (s.IngestTraces, names.INGEST_TRACES,
         s.IngestTraces.Request(
             traces=[m.Trace(agent_id="r1", text="another model", embedding=[0.05] * 384)],
             embedding_model="all-mpnet-base-v2"), "same embedding.backend"),
        (s.Forget, names.FORGET, s.Forget.Request(agent_id="r1",
                                                  ids=["no-such-id"]), "no memory of agent"),
        (s.UpdateGoal, names.UPDATE_GOAL,
         s.UpdateGoal.Request(operation=9, goal=m.Goal(agent_id="r1")), "unknown goal operation"),
        (s.UpdateGoal, names.UPDATE_GOAL,
         s.UpdateGoal.Request(operation=1, goal=m.Goal(agent_id="nobody")), "no goal"),
        (s.Consolidate, names.CONSOLIDATE, s.Consolidate.Request(goal_id="never-finished"),
         "has not finished"),
        (s.GetWorkingMemory, names.GET_WORKING_MEMORY, s.GetWorkingMemory.Request(agent_id=""),
         "agent_id"),
        (s.ReportOutcome, names.REPORT_OUTCOME, s.ReportOutcome.Request(agent_id="r1"),
         "needs a detail"),
    ]
    before = retrieve(client, "r1", "where is the butter?", top_k=10)
    for srv_type, name, request, fragment in cases:
        response = client.call(srv_type, name, request)
        assert response.success is False and fragment in response.message, (name, response.message)
    assert child.proc.poll() is None, "the bringup process died"
    after = retrieve(client, "r1", "where is the butter?", top_k=10)
    assert after.success and [x.id for x in after.memories] == [x.id for x in before.memories]


def test_a_bad_parameter_stops_a_node_with_a_clear_message(tmp_path):
    node = Child([
        "-m", "brainmem_ros.nodes", "store_node", "--ros-args", "-p", "retrieval.top_k:=-3", "-p",
        f"store.path:={tmp_path / 'm.db'}"
    ], cwd=REPO)
    assert node.proc.wait(timeout=60) == 1
    node.stop()
    assert "[FATAL] cannot start" in node.output() and "retrieval.top_k" in node.output()
    assert not (tmp_path /
                "m.db").exists(), "nothing may be created by a node that refused to start"


@pytest.mark.parametrize("mode", [[], ["--one-process"]])
def test_bringup_refuses_the_deliberately_broken_config(tmp_path, mode):
    up = Child([
        "-m", "brainmem_ros.cli", "bringup", *mode, "--config",
        str(REPO / "config" / "broken.yaml"), "--store",
        str(tmp_path / "m.db")
    ], cwd=REPO)
    assert up.proc.wait(timeout=120) == 1
    up.stop()
    # The stack stops, naming every bad value, not only the first.
    for value in ("retrieval.top_k", "retrieval.language", "forgetting.decay_tau_s"):
        assert value in up.output(), value
    assert not (tmp_path / "m.db").exists()


def test_planner_node_retrieves_before_each_action_and_its_run_is_remembered(system):
    """planner_node retrieves before each action, and its run is remembered.

    planner_node with the LLM backend pointed at a FAKE chat server (not an LLM: it picks the first
    valid action), acting in a two-step test environment: the plumbing, not a planning result.
    """
    from fake_chat_server import FakeChatServer

    _, client, _ = system
    env = Child([str(Path(__file__).resolve().parents[1] / "env_server.py")], cwd=REPO)
    try:
        env.wait_for_line("READY", timeout=30)
        with FakeChatServer() as fake:
            planner = Child([
                "-m", "brainmem_ros.nodes", "planner_node", "--ros-args", "-p", "agent_id:=planbot",
                "-p", "backend:=llm", "-p", f"llm.base_url:={fake.url}", "-p", "llm.model:=fake",
                "-p", "seeds:=3"
            ], cwd=REPO)  # one seed arrives as an integer, not as text
            try:
                line = planner.wait_for_line("episode seed=3 attempt=0", timeout=60)
            finally:
                planner.stop()
            assert "success after 2 steps" in line, planner.output()
            assert len(fake.requests) == 2
            assert all("## Relevant memories" in r["messages"][-1]["content"]
                       for r in fake.requests)
    finally:
        env.stop()
    procedure = client.wait_until(lambda: [
        m.content for m in retrieve(client, "planbot-s3", "how do I fetch the milk?",
                                    zones=["procedural"]).memories
    ])
    assert "1. open fridge; 2. take milk from fridge" in procedure[0]


def test_planner_node_plays_with_a_real_small_model_served_by_llama_cpp(system):
    """planner_node against llama.cpp's real server and SmolLM2-135M, scoring each valid action.

    Not a planning result (a 135M model in a two-step test kitchen): it proves the real server's
    log-probabilities reach the node, every action it takes is a valid one, and the run is
    remembered like any other.
    """
    from brainmem_ros.planning.llm_server import serve

    _, client, _ = system
    env = Child([str(Path(__file__).resolve().parents[1] / "env_server.py")], cwd=REPO)
    try:
        env.wait_for_line("READY", timeout=30)
        with serve("smollm2-135m") as base:
            planner = Child([
                "-m", "brainmem_ros.nodes", "planner_node", "--ros-args", "-p", "agent_id:=realbot",
                "-p", "backend:=llm", "-p", f"llm.base_url:={base}", "-p",
                "llm.model:=smollm2-135m", "-p", "llm.choose:=score", "-p", "llm.timeout_s:=120.0",
                "-p", "max_steps:=3", "-p", "seeds:=4"
            ], cwd=REPO)
            try:
                line = planner.wait_for_line("EPISODE", timeout=400)
            finally:
                planner.stop()
    finally:
        env.stop()
    assert '"seed": 4' in line and '"outcome": "error"' not in line, planner.output()
    assert "not a valid action" not in planner.output()
    remembered = client.wait_until(lambda: retrieve(client, "realbot-s4", "fridge").memories)
    assert remembered


def test_the_episode_memory_port_waits_for_the_event_it_sent_not_an_earlier_one_with_the_same_words(
        system):
    """The memory port waits for the event it sent, not an earlier one.

    Moving north twice: the second "move north" must be in working memory before the next recall,
    though the first one already answers a check on the action's name (the race that made one
    lifelong kitchen episode over ROS take other steps than in-process).
    """
    import threading

    from brainmem_ros.evaluation.ros_ports import RosMemory, _call

    port_client = Client("episode_port")
    spinner = threading.Thread(target=port_client.executor.spin, daemon=True)
    spinner.start()
    try:
        port = RosMemory(port_client.node, "walker", timeout_s=20.0)
        port_client.wait_until(
            lambda: port.actions.get_subscription_count() and port.observations.
            get_subscription_count(), timeout=20.0, every=0.05)
        Request = srv().GetWorkingMemory.Request
        rooms = ["You are in the hallway.", "You are in the kitchen.", "You are in the pantry."]
        for n, room in enumerate(rooms):
            port.record("move north", room, True)
            port.observe("You see a door.")
            wm = _call(port.working, Request(agent_id="walker"), 20.0)
            assert wm.recent_actions[-1].result == f"move north: {room}"
            assert sum(t.content == "You see a door." for t in wm.traces) == n + 1
    finally:
        port_client.close()
        spinner.join(timeout=5)
