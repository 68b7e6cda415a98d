"""The generated interfaces: built, with their declared fields, surviving CDR.

The generated interfaces: every .msg/.srv file is built, carries its declared fields, and survives
CDR serialization with non-default values.
"""
import importlib
import math
import re
from pathlib import Path

import pytest
from rclpy.serialization import deserialize_message, serialize_message

REPO = Path(__file__).resolve().parents[2]
MSG_FILES = sorted((REPO / "msg").glob("*.msg"))
SRV_FILES = sorted((REPO / "srv").glob("*.srv"))


def _declared_fields(text: str) -> list[str]:
    """Return the field names of one .msg section (constants left out)."""
    names = []
    for line in text.splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) >= 2 and "=" not in parts[1]:
            names.append(parts[1])
    return names


def _msg_class(name):
    return getattr(importlib.import_module("brainmem_ros.msg"), name)


def _srv_class(name):
    return getattr(importlib.import_module("brainmem_ros.srv"), name)


def test_every_interface_file_is_generated():
    assert len(MSG_FILES) >= 5 and len(SRV_FILES) >= 7
    for path in MSG_FILES:
        assert _msg_class(path.stem)
    for path in SRV_FILES:
        cls = _srv_class(path.stem)
        assert cls.Request and cls.Response


@pytest.mark.parametrize("path", MSG_FILES, ids=lambda p: p.stem)
def test_message_fields_match_definition(path):
    fields = set(_msg_class(path.stem).get_fields_and_field_types())
    assert fields == set(_declared_fields(path.read_text()))


@pytest.mark.parametrize("path", SRV_FILES, ids=lambda p: p.stem)
def test_service_fields_match_definition(path):
    request_text, response_text = path.read_text().split("\n---\n")
    cls = _srv_class(path.stem)
    assert set(cls.Request.get_fields_and_field_types()) == set(_declared_fields(request_text))
    assert set(cls.Response.get_fields_and_field_types()) == set(_declared_fields(response_text))
    assert {"success", "message"} <= set(cls.Response.get_fields_and_field_types())


def test_required_field_names_from_the_package_issue():
    observation = _msg_class("Observation").get_fields_and_field_types()
    assert {
        "header", "agent_id", "text", "entities", "location", "position", "has_position", "source",
        "confidence"
    } <= set(observation)
    assert observation["position"] == "geometry_msgs/Point"
    action = _msg_class("ActionResult").get_fields_and_field_types()
    assert {"header", "agent_id", "action", "success", "result", "entities"} <= set(action)
    entry = _msg_class("MemoryEntry")
    assert {
        "id", "agent_id", "zone", "content", "entities", "relations", "importance", "access_count",
        "created", "last_access", "source", "confidence", "position", "has_position", "score",
        "routes"
    } <= set(entry.get_fields_and_field_types())
    assert {
        entry.ZONE_PROCEDURAL, entry.ZONE_EPISODIC, entry.ZONE_SEMANTIC, entry.ZONE_GOAL,
        entry.ZONE_WORKING
    } == {"procedural", "episodic", "semantic", "goal", "working"}
    goal = _msg_class("Goal")
    assert {"id", "parent_id", "description", "status"} <= set(goal.get_fields_and_field_types())
    statuses = [goal.STATUS_PENDING, goal.STATUS_ACTIVE, goal.STATUS_COMPLETED, goal.STATUS_FAILED]
    assert len(set(statuses)) == 4
    retrieve = _srv_class("RetrieveMemory")
    assert {
        "agent_id", "query", "context", "zones", "top_k", "min_score", "exclude_working",
        "position", "has_position", "radius"
    } <= set(retrieve.Request.get_fields_and_field_types())
    assert {"success", "message", "memories",
            "memory_prompt"} <= set(retrieve.Response.get_fields_and_field_types())
    assert "ids" in _srv_class("StoreMemory").Response.get_fields_and_field_types()


def _sample_entry():
    m = importlib.import_module("brainmem_ros.msg")
    entry = m.MemoryEntry(
        id="e-1",
        agent_id="robot_a",
        zone=m.MemoryEntry.ZONE_SEMANTIC,
        content="the butter is in the fridge \u9ec4\u6cb9",
        entities=["butter", "fridge"],
        relations=[m.Relation(subject="butter", predicate="in", object="fridge")],
        embedding=[0.25] * 384,
        importance=0.75,
        access_count=3,
        source="observation",
        confidence=0.875,
        has_position=True,
        score=0.5,
        routes=["vector", "graph"],
    )
    entry.position.x, entry.position.y = 1.5, -2.0
    entry.created.sec = 1_700_000_000
    return entry


def _sample_trace():
    m = importlib.import_module("brainmem_ros.msg")
    return m.Trace(agent_id="a", kind=m.Trace.KIND_ACTION, text="open fridge: You open the fridge.",
                   embedding=[0.5] * 384, entities=["fridge"],
                   relations=[m.Relation(subject="fridge", predicate="state",
                                         object="open")], source="action", confidence=1.0,
                   has_success=True, success=True, action="open fridge")


def _roundtrip(message):
    return deserialize_message(serialize_message(message), type(message))


def test_memory_entry_survives_serialization():
    entry = _sample_entry()
    back = _roundtrip(entry)
    assert back.content == entry.content
    assert back.relations[0].object == "fridge"
    assert len(back.embedding) == 384 and math.isclose(back.embedding[7], 0.25)
    assert (back.position.x, back.position.y, back.has_position) == (1.5, -2.0, True)
    assert back.created.sec == 1_700_000_000 and back.routes == ["vector", "graph"]
    assert back == entry


def test_each_message_type_survives_serialization():
    m = importlib.import_module("brainmem_ros.msg")
    samples = [
        m.Observation(agent_id="a", text="you see a knife", entities=["knife"], location="kitchen",
                      has_position=True, source="camera", confidence=0.75),
        m.ActionResult(agent_id="a", action="open fridge", success=False, result="It is locked.",
                       entities=["fridge"], location="kitchen", goal_id="g1"),
        m.Goal(id="g1", parent_id="g0", agent_id="a", description="make a sandwich",
               status=m.Goal.STATUS_ACTIVE, temporary=True),
        m.EntityState(entity="butter", location="fridge", state="cold", entry_id="e-1"),
        m.Relation(subject="fridge", predicate="contains", object="butter"),
        _sample_entry(),
        _sample_trace(),
    ]
    covered = {type(s).__name__ for s in samples}
    assert covered == {p.stem for p in MSG_FILES}
    for sample in samples:
        assert _roundtrip(sample) == sample


def test_each_service_type_survives_serialization():
    m = importlib.import_module("brainmem_ros.msg")
    s = importlib.import_module("brainmem_ros.srv")
    samples = [
        s.RetrieveMemory.Request(agent_id="a", query="where is the butter?", zones=["semantic"],
                                 top_k=5, min_score=0.25, exclude_working=True, radius=2.0),
        s.RetrieveMemory.Response(success=True, memories=[_sample_entry()],
                                  memory_prompt="## Relevant memories\n- Fact: ...",
                                  warnings=["w"]),
        s.StoreMemory.Request(entries=[_sample_entry()]),
        s.StoreMemory.Response(success=True, ids=["e-1"]),
        s.Consolidate.Request(agent_id="a", reason="timer"),
        s.Consolidate.Response(success=True, promoted=3, superseded=1),
        s.Forget.Request(agent_id="a", decay=True, ids=["e-1"], entities=["butter"]),
        s.Forget.Response(success=False, message="unknown id e-9"),
        s.UpdateGoal.Request(operation=s.UpdateGoal.Request.OP_PUSH,
                             goal=m.Goal(description="turn off the timer", temporary=True)),
        s.UpdateGoal.Response(success=True, stack=[m.Goal(id="g1")]),
        s.GetWorkingMemory.Request(agent_id="a"),
        s.GetWorkingMemory.Response(success=True, environment=[m.EntityState(entity="knife")],
                                    recent_actions=[m.ActionResult(action="take knife")]),
        s.ReportOutcome.Request(agent_id="a", goal_id="g1", success=False, detail="fell apart"),
        s.ReportOutcome.Response(success=True, updated=4, warning_id="w-1"),
        s.IngestTraces.Request(traces=[_sample_trace()]),
        s.IngestTraces.Response(success=True, ids=["wrk-1"]),
        s.EnvStep.Request(agent_id="a", action="open fridge"),
        s.EnvStep.Response(success=True, task="fetch the milk", observation="You open the fridge.",
                           valid_actions=["take milk from fridge"], done=False),
    ]
    covered = {re.sub(r"_(Request|Response)$", "", type(x).__name__) for x in samples}
    assert covered == {p.stem for p in SRV_FILES}
    for sample in samples:
        assert _roundtrip(sample) == sample
