"""A fleet's memories shared through a real PostgreSQL server started by the project's command.

Robots here are BrainMemory objects in this process, each with its own SQLite store and its own
PostgreSQL role; the hashing stand-in embeds (the sync carries vectors, it does not read them).
Rounds are driven by hand, so every step is deterministic.
"""
import time

import numpy as np
import psycopg
import pytest

from brainmem_ros.bringup import fleet_db
from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.errors import StoreUnavailable
from brainmem_ros.core.retrieval import RetrievalRequest
from brainmem_ros.core.trace import Entry, Position, Zone

QUIET = 3600.0  # the background round waits this long: the test drives the rounds


@pytest.fixture
def fleet(fleet_server, tmp_path, hashing):
    """Make robots on the server; each call ``make(name)`` gives one; all closed at the end."""
    from brainmem_ros.core.memory import BrainMemory

    made = []
    admin = psycopg.connect(fleet_db.dsn_for(fleet_server, fleet_db.ADMIN), autocommit=True)
    admin.execute("DELETE FROM memories")  # each test starts from an empty fleet

    def make(name, **flat):
        dsn = flat.pop("dsn", None) or fleet_db.add_robot_dsn(fleet_server, name)
        config = MemoryConfig().replace(**{
            "store.path": str(tmp_path / f"{name}.db"), "fleet.dsn": dsn,
            "fleet.period_s": QUIET, **flat})
        memory = BrainMemory(config, embedder=hashing, clock=time.time)
        made.append(memory)
        return memory

    yield make, admin
    for memory in made:
        memory.close()
    admin.close()


def _fact(memory, text, agent="robot", **fields):
    return memory.store_entries([Entry(agent, Zone.SEMANTIC, text, None, **fields)])[0]


def _sync(*robots):
    for robot in robots + robots:  # twice: what one pushes after another pulled
        robot.fleet.round()


def _prompt(memory, query, agent="chef", **fields):
    return memory.retrieve(RetrievalRequest(agent, query, **fields)).prompt


def test_facts_warnings_procedures_and_completed_goals_are_shared_and_episodes_are_not(fleet):
    make, _ = fleet
    r1, r2 = make("robot1"), make("robot2")
    _fact(r1, "the butter is in the fridge")
    r1.report_outcome("robot", False, "the coffee machine short-circuits when wet",
                      action="pour water into the coffee machine")
    r1.store_entries([Entry("robot", Zone.EPISODIC, "I hummed a song in the hallway", None)])
    goal = r1.push_goal("robot", "make toast")
    r1.act("robot", "take the bread", True, goal_id=goal.id)
    r1.act("robot", "turn on the toaster", True, goal_id=goal.id)
    r1.finish_goal("robot", goal.id)
    r1.observe("robot", "the red mug is on the shelf")  # stays in working memory
    _sync(r1, r2)
    shared = {e.zone.value + (":warning" if e.warning else "") for e in _all(r2)}
    assert shared == {"semantic", "episodic:warning", "procedural", "goal"}
    contents = " ".join(e.content for e in _all(r2))
    assert "hummed" not in contents and "red mug" not in contents
    assert "goal completed: make toast" in contents
    assert all(e.origin == "robot1" and e.agent_id.startswith("robot1/") for e in _all(r2))


def _all(memory):
    return memory.store.get(memory.store.ids())


def test_what_others_share_is_found_by_every_route_and_said_to_come_from_them(fleet):
    make, _ = fleet
    r1, r2 = make("robot1"), make("robot2")
    made = time.time()
    _fact(r1, "the saffron is in the spice drawer", position=Position(4.0, 1.0))
    _sync(r1, r2)
    routes = {}
    for name, request in {
            "vector": RetrievalRequest("chef", "which spice drawer holds saffron?"),
            "lexical": RetrievalRequest("chef", "saffron"),
            "graph": RetrievalRequest("chef", "what do I know about the spice drawer?"),
            "temporal": RetrievalRequest("chef", "saffron spice drawer", since=made - 1),
            "spatial": RetrievalRequest("chef", "what is around here?", position=Position(4.0,
                                                                                          1.2),
                                        radius=0.5),
    }.items():
        result = r2.retrieve(request)
        hit = [r for r in result.recalls if "saffron" in r.entry.content]
        assert hit, name
        routes[name] = set(hit[0].routes)
        assert "robot1 found: the saffron is in the spice drawer" in result.prompt
    for route in ("vector", "lexical", "graph", "spatial"):
        assert route in routes[route], routes
    before = r2.retrieve(RetrievalRequest("chef", "saffron spice drawer", until=made - 60))
    assert not any("saffron" in r.entry.content for r in before.recalls)  # kept its own time


def test_a_newer_fact_from_another_robot_supersedes_an_older_one_keeping_history(fleet):
    make, _ = fleet
    r1, r2 = make("robot1"), make("robot2")
    _fact(r2, "the butter is in the fridge", agent="chef")
    time.sleep(0.01)
    _fact(r1, "the butter is on the counter")
    _sync(r1, r2)
    now = _prompt(r2, "where is the butter?")
    assert "robot1 found: the butter is on the counter" in now and "in the fridge" not in now
    history = r2.retrieve(RetrievalRequest("chef", "where is the butter?",
                                           include_superseded=True))
    assert any("fridge" in r.entry.content and r.entry.superseded for r in history.recalls)
    time.sleep(0.01)
    _fact(r2, "the butter is in the pantry", agent="chef")  # and back the other way
    _sync(r2, r1)
    back = _prompt(r1, "where is the butter?", agent="robot")
    assert "robot2 found: the butter is in the pantry" in back and "counter" not in back


def test_procedures_for_the_same_goal_from_several_robots_merge_into_one(fleet):
    make, _ = fleet
    r1, r2 = make("robot1"), make("robot2")
    for robot, steps in ((r1, ["take the bread", "open the toaster", "turn on the toaster"]),
                         (r2, ["take the bread", "turn on the toaster"])):
        goal = robot.push_goal("robot", "make toast")
        for step in steps:
            robot.act("robot", step, True, goal_id=goal.id)
        robot.finish_goal("robot", goal.id)
    _sync(r1, r2)
    for robot in (r1, r2):
        procedures = [e for e in _all(robot) if e.zone is Zone.PROCEDURAL]
        assert len(procedures) == 1, [p.content for p in procedures]
        assert procedures[0].content.count("; ") == 1  # the shorter sequence won
    assert r1.fleet.counts["merged"] == 1


def test_a_deletion_travels_as_a_tombstone_and_leaves_nothing_behind(fleet):
    make, admin = fleet
    r1, r2 = make("robot1"), make("robot2")
    kept = _fact(r1, "the jam is on the shelf")
    wrong = _fact(r1, "the salt is in the oven")
    _sync(r1, r2)
    assert r2.store.known([kept, wrong]) == {kept, wrong}
    r1.forget("robot", decay=False, ids=[wrong])
    _sync(r1, r2)
    assert r2.store.known([kept, wrong]) == {kept}
    with r2.store._db.lock:
        conn = r2.store._db.conn
        orphans = conn.execute(
            "SELECT (SELECT COUNT(*) FROM entry_entities WHERE entry NOT IN"
            " (SELECT rowid FROM entries)) + (SELECT COUNT(*) FROM relations WHERE entry NOT IN"
            " (SELECT rowid FROM entries))").fetchone()[0]
        fts = conn.execute("SELECT COUNT(*) FROM entries_fts WHERE entries_fts MATCH 'oven'"
                           ).fetchone()[0]
    assert orphans == 0 and fts == 0 and r2.store.integrity()["integrity_ok"]
    puts = admin.execute("SELECT COUNT(*) FROM memories WHERE entry_id = %s AND op = 'put'",
                         (wrong, )).fetchone()[0]
    assert puts == 0  # the server keeps the tombstone only


def test_a_retried_push_and_a_replayed_pull_change_nothing(fleet):
    make, admin = fleet
    r1, r2 = make("robot1"), make("robot2")
    for i in range(5):
        _fact(r1, f"box {i} is on shelf {i}")
    changes = r1.store.outbox.take(100)
    r1.fleet.server.connect()
    r1.fleet.server.push(changes, r1.embedder.name, r1.embedder.dim, [])  # killed before done()
    _sync(r1, r2)  # pushes the same changes again
    assert admin.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == 5
    before = sorted(r2.store.ids())
    r2.store.outbox.save_cursor(("0", 0))  # the pull replayed from the start
    _sync(r2)
    assert sorted(r2.store.ids()) == before and len(before) == 5


def test_with_the_server_down_robots_keep_working_and_catch_up_without_duplicates(
        fleet, fleet_server):
    make, _ = fleet
    r1, r2 = make("robot1"), make("robot2")
    _sync(r1, r2)
    fleet_db.stop(fleet_server)
    try:
        ids = [_fact(r1, f"crate {i} holds {i} apples") for i in range(100)]
        with pytest.raises(StoreUnavailable):
            r1.fleet.round()
        assert r1.store.outbox.backlog() == 100
        assert "crate 7" in _prompt(r1, "what does crate 7 hold?", agent="robot")
        assert _prompt(r2, "what does crate 7 hold?")  # robot2 answers from what it has
        assert r1.fleet.check().level == 1 and "memories are kept here" in \
            r1.fleet.check().message
    finally:
        fleet_db.start(fleet_server)
    _sync(r1, r2)
    assert r1.store.outbox.backlog() == 0
    assert r2.store.known(ids) == set(ids) and len(_all(r2)) == 100


def test_a_robot_writes_only_in_its_own_name_and_reads_only_what_is_shared_with_it(
        fleet, fleet_server):
    make, admin = fleet
    r1 = make("robot1", **{"fleet.share_with": ["robot2"]})
    r2, r3 = make("robot2"), make("robot3")
    _fact(r1, "the vault code is on the fridge note")
    _sync(r1, r2, r3)
    assert len(_all(r2)) == 1 and len(_all(r3)) == 0
    with psycopg.connect(fleet_db.dsn_for(fleet_server, "robot1"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO memories (robot, change, op, entry_id, agent_id, model, dim,"
                         " record) VALUES ('robot2', 99, 'put', 'x', 'a', 'm', 1, '{}')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE memories SET robot = 'robot1'")
    own = fleet_db.dsn_for(fleet_server, "robot1")
    password = (fleet_server / "robot1.pgpass").read_text().strip().rsplit(":", 1)[1]
    with pytest.raises(psycopg.OperationalError, match="no password supplied"):
        psycopg.connect(own.replace("user=robot1", "user=robot2"))
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(own.replace("user=robot1", "user=robot2"), password=password)


def test_a_wrong_dsn_and_another_schema_version_are_clear_and_the_robot_keeps_working(
        fleet, fleet_server):
    make, admin = fleet
    lost = make("robot9", dsn="postgresql:///brainmem?host=/nonexistent&port=1&user=robot9")
    with pytest.raises(StoreUnavailable, match="fleet server: .*nonexistent"):
        lost.fleet.round()
    _fact(lost, "the broom is in the closet")
    assert "broom" in _prompt(lost, "where is the broom?", agent="robot")
    r1 = make("robot1")
    admin.execute("UPDATE brainmem_meta SET value = '99' WHERE key = 'schema_version'")
    try:
        with pytest.raises(StoreUnavailable, match="schema version 99; this robot speaks 1"):
            r1.fleet.round()
    finally:
        admin.execute("UPDATE brainmem_meta SET value = '1' WHERE key = 'schema_version'")


@pytest.mark.parametrize("tamper, reason", [
    ("embedding = substring(embedding from 1 for 40)", "vector must have"),
    ("embedding = overlay(embedding placing '\\x0000c07f'::bytea from 1 for 4)", "NaN"),
    ("model = 'all-mpnet-base-v2'", "embedded with 'all-mpnet-base-v2'"),
    ("robot = 'robot2'", "own name that it never stored"),
    ("robot = 'Robot-X'", "not a fleet robot's name"),
    ("record = jsonb_set(record, '{content}', '\"\"')", "content must not be empty"),
])
def test_a_row_tampered_with_on_the_server_is_refused_and_changes_nothing(fleet, tamper, reason):
    make, admin = fleet
    r1, r2 = make("robot1"), make("robot2")
    _fact(r1, "the tea is in the tin")
    r1.fleet.round()
    admin.execute(f"UPDATE memories SET {tamper}")
    before = r2.store.ids()
    r2.fleet.round()
    assert r2.store.ids() == before
    assert r2.fleet.counts["refused"] == 1
    assert reason in r2.fleet.check().message
    _fact(r1, "the sugar is in the jar")  # what comes after is taken as usual
    _sync(r1, r2)
    assert any("sugar" in e.content for e in _all(r2))


def test_nothing_is_shared_without_a_fleet_and_the_policy_is_checked(tmp_path, hashing):
    from brainmem_ros.core.config import ConfigError
    from brainmem_ros.core.fleet import SharePolicy
    from brainmem_ros.core.memory import BrainMemory

    with BrainMemory(MemoryConfig().replace(**{"store.path": str(tmp_path / "m.db")}),
                     embedder=hashing) as alone:
        _fact(alone, "the cup is on the table")
        assert alone.fleet is None and alone.store.outbox.backlog() == 0
    with pytest.raises(ConfigError, match="unknown gossip"):
        SharePolicy(["fact", "gossip"])
    only_facts = SharePolicy(["fact"], agents=["a"])
    assert only_facts(Entry("a", Zone.SEMANTIC, "x", np.zeros(3)))
    assert not only_facts(Entry("b", Zone.SEMANTIC, "x", np.zeros(3)))
    assert not only_facts(Entry("a", Zone.PROCEDURAL, "x", np.zeros(3)))


def test_the_fleet_experiment_shows_a_warning_shared_saves_the_next_robot(minilm, scratch):
    from brainmem_ros.evaluation.fleet import evaluate_fleet, fleet_table
    from brainmem_ros.evaluation.runner import EvalSettings

    settings = EvalSettings(env="kitchen", seeds=[0, 1], game_params="hazard_rate=1.0")
    report = evaluate_fleet(settings, robots=2, progress=False, embedder=minilm)
    isolated, fleet = report["conditions"]["isolated"], report["conditions"]["fleet"]
    assert isolated["episodes"] == fleet["episodes"] == 4
    assert fleet["fleet_repeat_failure_rate"] < isolated["fleet_repeat_failure_rate"]
    assert fleet["sync_lag_stored_p50_s"] > 0 and isolated["sync_lag_stored_p50_s"] is None
    assert "fleet repeat-fail" in fleet_table(report)
    assert not list(scratch.glob("brainmem-*"))  # the server's files and the stores are gone


def test_the_fleet_bench_reports_every_figure(minilm, scratch):
    from brainmem_ros.bench import fleet as bench

    report = bench.bench_fleet(2, 1000, minilm, MemoryConfig(), n_queries=20, progress=False)
    assert report["server_rows"] == 1000  # counted before the lag phase adds more
    assert report["pulled"] == 1000  # each robot took the other's half
    assert report["push_per_s"] > 0 and report["pull_applied_per_s"] > 0
    assert report["retrieve_with_fleet_ms"]["p99"] > 0 and report["sync_lag_p99_s"] > 0
    assert "server disk per memory" in bench.format_fleet(report)
    assert not list(scratch.glob("brainmem-*"))
