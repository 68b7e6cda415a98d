"""The memory cycle through BrainMemory with the hashing stand-in.

The memory cycle through BrainMemory with the hashing stand-in (plumbing and rules, not meaning):
consolidation, supersession in answers, procedures, warnings, forgetting, bad requests.
"""
import time

import pytest

from brainmem_ros.core.errors import InvalidRequest
from brainmem_ros.core.retrieval import RetrievalRequest
from brainmem_ros.core.trace import Entry, GoalStatus, Position, Zone


def contents(result):
    return [r.entry.content for r in result.recalls]


def test_consolidation_promotes_by_threshold_and_derives_facts(make_memory, hashing):
    memory = make_memory(hashing)
    memory.push_goal("a", "make a sandwich with butter")
    memory.observe("a", "The butter is in the fridge.")
    memory.observe("a", "The butter is in the fridge.")  # a repeat: nothing new, low importance
    report = memory.consolidate("a")
    assert report.promoted == 1 and report.facts == 1
    wm = memory.working_memory("a")
    assert [t.text
            for t in wm.traces] == ["The butter is in the fridge."]  # the repeat stays behind
    counts = memory.store.counts()["a"]
    assert counts == {"episodic": 1, "semantic": 1}


def test_newer_fact_supersedes_older_in_the_answer(make_memory, hashing):
    memory = make_memory(hashing)
    memory.observe("a", "The butter is in the fridge.")
    memory.consolidate("a")
    memory.observe("a", "The butter is on the counter.")
    # Before consolidation the newer observation, in working memory, already wins.
    result = memory.retrieve(RetrievalRequest("a", "where is the butter", include_working=True))
    assert not any("fridge" in c for c in contents(result)), contents(result)
    assert any("counter" in c for c in contents(result))
    memory.consolidate("a")
    result = memory.retrieve(RetrievalRequest("a", "where is the butter", include_working=False))
    assert not any("fridge" in c for c in contents(result)), contents(result)
    history = memory.retrieve(
        RetrievalRequest("a", "where is the butter", include_superseded=True, include_working=False,
                         top_k=10))
    assert any("fridge" in c for c in contents(history))


def test_repeated_successes_merge_into_one_stronger_procedure(make_memory, hashing):
    memory = make_memory(hashing)
    for _ in range(3):
        goal = memory.push_goal("a", "make coffee")
        for step in ["fill the kettle", "turn on the kettle", "pour the water into the mug"]:
            memory.act("a", step, True, "Done.")
        memory.finish_goal("a", goal.id, GoalStatus.COMPLETED)
    procedures = memory.store.procedures("a")
    assert len(procedures) == 1
    assert procedures[0].strength == 3
    steps = "1. fill the kettle; 2. turn on the kettle; 3. pour the water into the mug"
    assert steps in procedures[0].content
    assert memory.store.counts()["a"]["goal"] == 3


def test_a_consolidated_action_keeps_what_was_done_beside_what_it_gave(make_memory, hashing):
    """A move's episode must say the move: "-= Kitchen =-" alone cannot link two rooms."""
    memory = make_memory(hashing)
    memory.act("a", "go west", True, "-= Kitchen =- You are in a kitchen.", location="corridor")
    memory.act("a", "look around", True, "")
    memory.consolidate("a")
    episodes = {
        e.content: e
        for e in memory.store.get(memory.store.ids()) if e.zone is Zone.EPISODIC
    }
    assert "go west: -= Kitchen =- You are in a kitchen (success)" in episodes
    assert episodes["go west: -= Kitchen =- You are in a kitchen (success)"].location == "corridor"
    assert "you did: look around (success)" in episodes


def test_failure_becomes_a_warning_announced_before_a_similar_goal(make_memory, hashing):
    memory = make_memory(hashing)
    goal = memory.push_goal("a", "make coffee with the coffee machine")
    memory.act("a", "pour water into the coffee machine", False,
               "The coffee machine short-circuits!")
    memory.finish_goal("a", goal.id, GoalStatus.FAILED)
    warnings = memory.store.warnings("a")
    assert {w.content
            for w in warnings
            } >= {"pour water into the coffee machine failed: The coffee machine short-circuits!"}
    assert all(w.importance >= 0.95 for w in warnings)
    memory.push_goal("a", "make coffee with the coffee machine")
    result = memory.retrieve(RetrievalRequest("a", "pour water into the coffee machine"))
    assert result.warnings and result.prompt.splitlines()[1].startswith("- Warning:")


def test_interruption_is_in_the_prompt_with_the_task_to_return_to(make_memory, hashing):
    memory = make_memory(hashing)
    main = memory.push_goal("a", "make a sandwich")
    memory.act("a", "take bread", True, "You take the bread.", goal_id=main.id)
    memory.act("a", "move north", True, "You are in the kitchen.", goal_id=main.id)
    memory.act("a", "slice bread", True, "You slice the bread.", goal_id=main.id)
    memory.push_goal("a", "turn off the ringing timer", temporary=True)
    prompt = memory.retrieve(RetrievalRequest("a", "what next")).prompt
    assert ("Interrupted by: turn off the ringing timer. "
            "When it is handled, return to: make a sandwich.") in prompt
    # fetching and walking are not progress; the hand is listed apart
    assert "Done: 1. slice bread." in prompt
    assert "Holding: bread." in prompt
    memory.finish_goal("a", "", GoalStatus.COMPLETED)
    prompt = memory.retrieve(RetrievalRequest("a", "what next")).prompt
    assert "Interrupted" not in prompt and "Goal: make a sandwich." in prompt


def test_routes_lexical_graph_temporal_spatial_working(make_memory, hashing):
    memory = make_memory(hashing)
    memory.store_entries([
        Entry("a", Zone.SEMANTIC, "the zyxoquat gadget sits in the pantry", None),
        Entry("a", Zone.SEMANTIC, "the butter is in the fridge", None),
        Entry("a", Zone.PROCEDURAL, "to open the fridge pull the handle", None,
              entities=["fridge"]),
        Entry("a", Zone.EPISODIC, "you saw a red mug here", None, position=Position(5.0, 5.0, 0.0)),
    ])
    memory.act("a", "wipe the counter", True, "The counter is clean.")

    def routes(q, **kw):
        return {r.entry.content: r.routes
                for r in memory.retrieve(RetrievalRequest("a", q, top_k=10, **kw)).recalls}

    assert "lexical" in routes("zyxoquat")["the zyxoquat gadget sits in the pantry"]
    graph = routes("where is the butter")
    assert "graph" in graph["to open the fridge pull the handle"]  # butter -> fridge -> procedure
    assert "temporal" in routes("what did I just do")["wipe the counter: The counter is clean."]
    near = routes("what did I see", position=Position(5.5, 5.0, 0.0), radius=2.0)
    assert "spatial" in near["you saw a red mug here"]
    assert "working" in routes("counter clean")["wipe the counter: The counter is clean."]


def test_working_memory_lexical_recall_offers_the_best_matches_only(make_memory, hashing):
    """Working-memory lexical recall offers the best matches only.

    A working memory full of one kind of observation shares a word with nearly every question:
    lexical recall there offers ``lexical_candidates`` traces, most words in common first, then the
    newest, as it does in long-term memory, instead of every trace that shares a word.
    """
    memory = make_memory(
        hashing, **{
            "retrieval.lexical_candidates": 3,
            "retrieval.vector_candidates": 1,
            "consolidation.every_n_traces": 0
        })
    memory.observe("a", "the zyxoquat kettle is on the counter")
    for i in range(40):
        memory.observe("a", f"observation {i}: the mug is on the counter")
    assert len(memory.working_memory("a").traces) == 41
    result = memory.retrieve(
        RetrievalRequest("a", "zyxoquat kettle counter", zones=["working"], top_k=20))
    lexical = [r.entry.content for r in result.recalls if "lexical" in r.routes]
    assert "the zyxoquat kettle is on the counter" in lexical
    assert len(lexical) == 3 and len(result.recalls) <= 4
    assert {c
            for c in lexical if "mug" in c} == {
                "observation 39: the mug is on the counter",
                "observation 38: the mug is on the counter"
            }


def test_a_time_range_is_applied_before_each_route_takes_its_best(make_memory, hashing):
    """A time range is applied before each route takes its best.

    A robot long in service asks about this episode only (``since``): the routes that rank the whole
    store must not fill their few candidates with the past and so lose what the range holds. (Every
    word counts for lexical recall here: in 41 memories, none is rare.)
    """
    memory = make_memory(hashing, **{"retrieval.lexical_max_df": 1.0})
    long_ago = time.time() - 86400.0
    memory.store_entries([
        Entry("a", Zone.EPISODIC, f"zyxoquat zyxoquat label, old note {i}", None,
              position=Position(5.0, 5.0, 0.0), created=long_ago + i) for i in range(40)
    ])
    start = time.time()
    memory.store_entries([
        Entry("a", Zone.EPISODIC, "today the zyxoquat label is on the shelf", None,
              position=Position(5.5, 5.0, 0.0))
    ])
    today = "today the zyxoquat label is on the shelf"

    def routes(query, **kw):
        return {
            r.entry.content: r.routes
            for r in memory.retrieve(RetrievalRequest("a", query, top_k=5, **kw)).recalls
        }

    assert "lexical" in routes("zyxoquat", since=start)[today]
    assert "spatial" in routes("what did I see", since=start, position=Position(5.0, 5.0, 0.0),
                               radius=2.0)[today]
    assert not any("old note" in c for c in routes("zyxoquat", since=start))
    assert all("old note" in c for c in routes("zyxoquat", until=start - 1.0))


def test_access_counts_are_updated_by_retrieval(make_memory, hashing):
    memory = make_memory(hashing)
    (entry_id, ) = memory.store_entries(
        [Entry("a", Zone.SEMANTIC, "the knife is in the drawer", None)])
    for _ in range(3):
        memory.retrieve(RetrievalRequest("a", "where is the knife"))
    memory.store.flush()
    (entry, ) = memory.store.get([entry_id])
    assert entry.access_count == 3 and entry.importance > 0.5


def test_forgetting_decays_archives_and_caps(make_memory, hashing):
    memory = make_memory(hashing, **{
        "forgetting.decay_tau_s": 10.0,
        "forgetting.capacity_per_agent": 3
    })
    old = time.time() - 1000
    memory.store_entries([
        Entry("a", Zone.EPISODIC, f"old event {i}", None, importance=0.5, created=old,
              last_access=old) for i in range(4)
    ])
    memory.store_entries([
        Entry("a", Zone.EPISODIC, f"fresh event {i}", None, importance=0.2 + 0.1 * i)
        for i in range(5)
    ])
    report = memory.forget("a")
    assert report.decayed == 9 and report.archived == 6 and report.evicted == 2
    left = sorted(e.content for e in memory.store.get(memory.store.ids()))
    assert left == ["fresh event 2", "fresh event 3", "fresh event 4"]
    assert memory.store.archive_count() == 6 and memory.store.integrity()["integrity_ok"]


def test_hard_delete_when_configured(make_memory, hashing):
    memory = make_memory(hashing, **{"forgetting.decay_tau_s": 1.0, "forgetting.hard_delete": True})
    old = time.time() - 100
    memory.store_entries([Entry("a", Zone.EPISODIC, "ancient", None, created=old, last_access=old)])
    report = memory.forget("a")
    assert report.deleted == 1 and memory.store.archive_count() == 0 and len(memory.store) == 0


@pytest.mark.parametrize("request_kwargs, fragment", [
    (dict(query=""), "query must not be empty"),
    (dict(query="   "), "query must not be empty"),
    (dict(query="x" * 5000), "more than the 4000 allowed"),
    (dict(top_k=-1), "top_k must be within"),
    (dict(top_k=51), "top_k must be within"),
    (dict(zones=["semantic", "dreams"]), "unknown zone 'dreams'"),
    (dict(agent_id=""), "agent_id must not be empty"),
    (dict(min_score=float("nan")), "min_score"),
    (dict(position=Position(float("nan"), 0, 0), radius=1.0), "position"),
    (dict(position=Position(1, 0, 0), radius=0.0), "radius"),
    (dict(since=10.0, until=5.0), "until"),
])
def test_bad_retrieval_requests_raise_one_clear_error(make_memory, hashing, request_kwargs,
                                                      fragment):
    memory = make_memory(hashing)
    memory.store_entries([Entry("a", Zone.SEMANTIC, "the knife is in the drawer", None)])
    before = memory.store.ids()
    args = dict(agent_id="a", query="knife")
    args.update(request_kwargs)
    with pytest.raises(InvalidRequest, match=fragment):
        memory.retrieve(RetrievalRequest(**args))
    assert memory.store.ids() == before


def test_bad_encodings_reject_the_whole_batch(make_memory, hashing):
    from brainmem_ros.core.encoding import Event
    from brainmem_ros.core.trace import TraceKind

    memory = make_memory(hashing)
    good = Event("a", TraceKind.OBSERVATION, "the cup is on the table")
    for bad in [
            Event("a", TraceKind.OBSERVATION, ""),
            Event("", TraceKind.OBSERVATION, "x"),
            Event("a", TraceKind.OBSERVATION, "x", confidence=float("nan")),
            Event("a", TraceKind.OBSERVATION, "x\x00y"),
            Event("a", TraceKind.OBSERVATION, "y" * 4001)
    ]:
        with pytest.raises(InvalidRequest):
            memory.encode([good, bad])
    assert memory.working.agents.get("a") is None or not memory.working.agents["a"].traces


def test_chinese_prompt_template(make_memory, hashing):
    memory = make_memory(hashing, **{"retrieval.language": "zh"})
    memory.push_goal("a", "做一份三明治")
    memory.store_entries([Entry("a", Zone.SEMANTIC, "黄油在冰箱里", None)])
    prompt = memory.retrieve(RetrievalRequest("a", "黄油在哪里")).prompt
    assert prompt.startswith("## 相关记忆回顾") and "你的目标是：做一份三明治。" in prompt
    assert "- 常识：黄油在冰箱里。" in prompt


def test_working_memory_survives_restart(make_memory, hashing, tmp_path):
    memory = make_memory(hashing)
    goal = memory.push_goal("a", "clean the counter")
    memory.act("a", "take the sponge", True, "You take the sponge.")
    memory.close()
    again = make_memory(hashing)
    wm = again.working_memory("a")
    assert wm.active_goal().id == goal.id and wm.holding() == ["sponge"]


def test_working_memory_can_be_read_while_traces_stream_in(make_memory, hashing):
    """Working memory can be read while traces stream in.

    get_working_memory and the snapshot walk an agent's traces under working memory's lock; ingest
    must change them under the same lock, or a reader dies with 'deque mutated during iteration'
    (seen in brainmem-ros loadtest before the locks were one).
    """
    import threading
    import time

    from brainmem_ros.core.encoding import Event
    from brainmem_ros.core.trace import TraceKind

    memory = make_memory(hashing, **{"working.max_traces": 50, "consolidation.every_n_traces": 0})
    memory.observe("a", "the mug is on the counter")
    wm = memory.working_memory("a")
    traces = memory.encoder.prepare(
        [Event("a", TraceKind.OBSERVATION, f"the cup {i} is on the shelf") for i in range(400)])
    failures, stop = [], threading.Event()

    def read():
        while not stop.is_set():
            try:
                with memory.working.lock:
                    for _ in wm.traces:
                        time.sleep(0)  # hand the interpreter to the writer mid-walk
            except RuntimeError as exc:
                failures.append(exc)
                return

    reader = threading.Thread(target=read)
    reader.start()
    for start in range(0, len(traces), 4):
        memory.ingest(traces[start:start + 4])
    stop.set()
    reader.join(timeout=10)
    assert not failures and len(wm.traces) == 50


def test_retrieval_reads_working_memory_while_traces_stream_in(make_memory, hashing, monkeypatch):
    """Retrieval reads working memory while traces stream in.

    Retrieval walks an agent's traces and actions without holding working memory's lock (a
    consolidation may hold it for tens of milliseconds); it must walk a copy, or an ingest in
    another thread kills it with 'deque mutated during iteration' (seen once in 31,440 back-to-back
    calls of brainmem-ros loadtest).
    """
    import threading
    import time

    from brainmem_ros.core.encoding import Event
    from brainmem_ros.core.retrieval import RetrievalRequest, routes
    from brainmem_ros.core.trace import TraceKind

    memory = make_memory(hashing, **{"working.max_traces": 60, "consolidation.every_n_traces": 0})
    memory.act("a", "open the fridge", True, "You open the fridge.")
    events = [
        Event("a", TraceKind.ACTION if i % 2 else TraceKind.OBSERVATION,
              f"the cup {i} is on the shelf", success=True if i % 2 else None,
              action=f"take cup {i}" if i % 2 else "") for i in range(600)
    ]
    traces = memory.encoder.prepare(events)
    in_time = routes._in_time

    def slow_in_time(trace, req):
        time.sleep(0)  # hand the interpreter to the writer mid-walk, as a busy store does
        return in_time(trace, req)

    monkeypatch.setattr(routes, "_in_time", slow_in_time)
    failures, done = [], threading.Event()

    def write():
        for start in range(0, len(traces), 2):
            if failures:
                break
            memory.ingest(traces[start:start + 2])
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    calls = 0
    while not done.is_set() or calls < 20:
        try:
            memory.retrieve(RetrievalRequest("a", "where is the cup?", include_working=True))
        except RuntimeError as exc:
            failures.append(exc)
            break
        calls += 1
    writer.join(timeout=30)
    assert not failures, failures[0]
    assert len(memory.working_memory("a").traces) == 60


def test_a_batch_sent_again_is_answered_with_the_traces_held_not_added_twice(make_memory, hashing):
    """encoder_node resends a batch whose acknowledgement was lost; each event is held once."""
    from brainmem_ros.core.encoding import Event
    from brainmem_ros.core.trace import TraceKind

    memory = make_memory(hashing, **{"consolidation.every_n_traces": 0})
    batch = memory.encoder.prepare([
        Event("a", TraceKind.OBSERVATION, f"the cup {i} is on the shelf", timestamp=100.0 + i)
        for i in range(3)
    ])
    first = [t.id for t in memory.ingest(batch)]
    again = memory.encoder.prepare([
        Event("a", TraceKind.OBSERVATION, f"the cup {i} is on the shelf", timestamp=100.0 + i)
        for i in range(4)
    ])
    answered = [t.id for t in memory.ingest(again)]
    assert answered[:3] == first and answered[3] not in first
    assert [t.text for t in memory.working_memory("a").traces].count(
        "the cup 0 is on the shelf") == 1
    assert len(memory.working_memory("a").traces) == 4
