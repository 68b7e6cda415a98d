"""The memory test with ground truth: TextWorld walks, a planner's questions, the engine's answers.

Every step of a walk (``textworld_walk``) goes through a real BrainMemory as a robot's would: the
action and what came back, errands as goals, an interruption as a temporary goal, consolidation
every ten steps, a clock that moves three seconds a step. At set points the questions a planner
asks are put to each way of remembering, each answering with k memories:

- ``pipeline``: the full retrieval (five routes, fusion, rerank; its warnings first within its k);
- ``vector``: cosine top k over every memory and working trace (a vector database on its own);
- ``bm25``: SQLite FTS5 bm25 over the same texts;
- ``last-k``: the last k things that happened (a window).

and the pipeline again with each recall route switched off (the ablation). Scored against the
engine's facts: the answer found in the k, ranked first, a stale answer given first, and precision
(the share of the k about the question's subject: a small model's prompt has no room for padding).
"""
from __future__ import annotations

import random
import sqlite3
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Callable, Optional

import numpy as np

from brainmem_ros.core.config import MemoryConfig
from brainmem_ros.core.memory import BrainMemory
from brainmem_ros.core.retrieval import RetrievalRequest
from brainmem_ros.core.retrieval.candidates import query_terms
from brainmem_ros.core.trace import GoalStatus
from brainmem_ros.evaluation.recall_claims import mentions, place_claims, state_claims
from brainmem_ros.evaluation.textworld_walk import Walk

__all__ = ["METHODS", "ABLATIONS", "Question", "ask_walk", "summarise_answers", "recall_table"]

METHODS = ("pipeline", "vector", "bm25", "last-k")
ABLATIONS = {
    "pipeline without vector": {"retrieval.vector_candidates": 0},
    "pipeline without lexical": {"retrieval.lexical_candidates": 0},
    "pipeline without graph": {"retrieval.graph_candidates": 0},
    "pipeline without temporal": {"retrieval.temporal_actions": 0},
}
AGENT = "robot"
STEP_S = 3.0
CHECK_EVERY = 10


@dataclass
class Question:
    game: str
    step: int
    kind: str  # where, state, failure, interrupted
    text: str
    subject: str
    truth: str
    older: tuple = ()  # earlier true answers (failures, errands): returning one first is stale


class _Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _questions(walk: Walk, i: int, rng: random.Random, last_change: dict,
               last_mention: dict) -> list[Question]:
    step = walk.steps[i]
    qs = []
    seen = sorted(x for x in step.place if last_mention.get(x, -1) >= last_change.get(x, 0))
    for x in rng.sample(seen, min(3, len(seen))):
        qs.append(Question(walk.game, i, "where", f"where is the {x} now?", x, step.place[x]))
    shown = sorted(y for y in step.state
                   if last_mention.get(y, -1) >= last_change.get(("state", y), 0))
    for y in rng.sample(shown, min(2, len(shown))):
        qs.append(Question(walk.game, i, "state", f"is the {y} open?", y, step.state[y]))
    failures = [s.action for s in walk.steps[1:i + 1] if not s.success]
    recent = [s for s in walk.steps[max(1, i - CHECK_EVERY + 1):i + 1] if not s.success]
    if recent:
        last = recent[-1].action
        verb = last.split()[0]
        older = tuple(a for a in failures[:-1] if a.split()[0] == verb and a != last)
        qs.append(Question(walk.game, i, "failure", f"what went wrong last time I tried to {verb}?",
                           last, last, older))
    return qs


def _interrupted_question(walk: Walk, i: int) -> Optional[Question]:
    step = walk.steps[i]
    if not step.resolved or not step.goal:
        return None
    older = tuple(dict.fromkeys(s.goal for s in walk.steps[1:i] if s.goal and s.goal != step.goal))
    return Question(walk.game, i, "interrupted", "what was I doing before the interruption?",
                    step.goal, step.goal, older)


def _judge(q: Question, texts: list[str], holders: set) -> dict:
    """Found, first, stale and precision of one method's k texts for one question."""
    def says(text: str) -> Optional[bool]:  # True: the truth; False: something else; None: nothing
        low = text.lower()
        if q.kind == "where":
            claims = place_claims(q.subject, text, holders)
        elif q.kind == "state":
            claims = state_claims(q.subject, text)
        else:
            if q.truth.lower() in low:
                return True
            return False if any(o.lower() in low for o in q.older) else None
        return None if not claims else q.truth in claims

    verdicts = [says(t) for t in texts]
    claimed = [v for v in verdicts if v is not None]
    subject = q.subject if q.kind != "failure" else q.subject.split(" ", 1)[-1]
    relevant = [mentions(subject, t) or says(t) is not None for t in texts]
    return {"found": any(v is True for v in verdicts),
            "first": bool(verdicts) and verdicts[0] is True,
            "stale": bool(claimed) and claimed[0] is False,
            "precision": sum(relevant) / len(texts) if texts else 0.0,
            "returned": len(texts)}


def _bm25(texts: list[str], query: str, k: int) -> list[str]:
    terms = [t for t in query_terms(query) if t.isalnum()]
    if not terms or not texts:
        return []
    db = sqlite3.connect(":memory:")
    try:
        db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
        db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)", list(enumerate(texts)))
        rows = db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?",
                          (" OR ".join(f'"{t}"' for t in terms), k)).fetchall()
    finally:
        db.close()
    return [texts[r[0]] for r in rows]


def _answers(memory: BrainMemory, q: Question, context: str, fed: list[str],
             k: int) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    base = memory.retriever.config
    for name, overrides in [("pipeline", {}), *ABLATIONS.items()]:
        memory.retriever.config = base.replace(**overrides) if overrides else base
        try:
            r = memory.retrieve(RetrievalRequest(AGENT, q.text, context=context, top_k=k))
        finally:
            memory.retriever.config = base
        state = memory.retriever.task_state(memory.working.agents.get(AGENT))
        said = [f"Interrupted by: {state.interruption}. When it is handled, resume: "
                f"{state.active_goal}."] if state.interruption else []  # the prompt's task line
        out[name] = list(dict.fromkeys(said + r.warnings + [c.entry.content
                                                            for c in r.recalls]))[:k]
    stored = memory.store.get(memory.store.ids())
    traces = list(memory.working.agent(AGENT).traces)
    pool = [e.content for e in stored] + [t.text for t in traces]
    vectors = np.stack([e.embedding for e in stored] + [t.embedding for t in traces])
    qv = memory.embedder.embed([q.text])[0]
    out["vector"] = list(dict.fromkeys(pool[i] for i in np.argsort(-(vectors @ qv))))[:k]
    out["bm25"] = _bm25(list(dict.fromkeys(pool)), q.text, k)
    out["last-k"] = list(reversed(fed[-k:]))
    return out


def ask_walk(walk: Walk, embedder, k: int = 5, config: Optional[MemoryConfig] = None,
             seed: int = 0) -> list[dict]:
    """Feed one walk through a fresh memory, asking at set points; one row per question."""
    rng, clock, rows = random.Random(seed), _Clock(), []
    last_change: dict = {}
    last_mention: dict = {}
    with tempfile.TemporaryDirectory(prefix="brainmem-recall-") as folder:
        config = (config or MemoryConfig()).replace(**{"store.path": f"{folder}/memory.db"})
        with BrainMemory(config, embedder=embedder, clock=clock) as memory:
            goal, temporary, fed = "", "", []
            for i, step in enumerate(walk.steps):
                clock.now += STEP_S
                previous = walk.steps[i - 1] if i else None
                for x, where in step.place.items():
                    if previous is None or previous.place.get(x) != where:
                        last_change[x] = i
                for y, state in step.state.items():
                    if previous is None or previous.state.get(y) != state:
                        last_change[("state", y)] = i
                said = f"{step.action} {step.text}"
                for name in [*step.place, *step.state]:
                    if mentions(name, said):
                        last_mention[name] = i
                if step.goal and step.goal != goal:
                    if goal:
                        memory.finish_goal(AGENT, "", GoalStatus.COMPLETED)
                    goal = step.goal
                    memory.push_goal(AGENT, goal)
                if i == 0:
                    memory.observe(AGENT, step.text)
                    fed.append(step.text)
                else:
                    memory.act(AGENT, step.action, step.success, step.text)
                    fed.append(f"{step.action}: {step.text}")
                if step.interruption:
                    temporary = memory.push_goal(AGENT, step.interruption, temporary=True).id
                if i and i % CHECK_EVERY == 0:
                    memory.consolidate(AGENT)
                asked = _questions(walk, i, rng, last_change, last_mention) \
                    if i and i % CHECK_EVERY == 0 else []
                interrupted = _interrupted_question(walk, i)  # asked as it is dealt with
                asked += [interrupted] if interrupted else []
                for q in asked:
                    answers = _answers(memory, q, goal or walk.task, fed, k)
                    rows.append({"question": asdict(q), "answers": answers, "scores": {
                        name: _judge(q, texts, walk.holders) for name, texts in answers.items()}})
                if step.resolved and temporary:
                    memory.finish_goal(AGENT, temporary, GoalStatus.COMPLETED)
                    temporary = ""
    return rows


def summarise_answers(rows: list[dict]) -> dict:
    """Per method: found@k, first, stale and precision, over all questions and per kind."""
    summary: dict = {}
    if not rows:
        return summary
    for name in rows[0]["scores"]:
        per: dict = {}
        for kind in ("all", "where", "state", "failure", "interrupted"):
            scored = [r["scores"][name] for r in rows
                      if kind == "all" or r["question"]["kind"] == kind]
            if scored:
                per[kind] = {m: float(np.mean([s[m] for s in scored]))
                             for m in ("found", "first", "stale", "precision")}
                per[kind]["questions"] = len(scored)
        summary[name] = per
    return summary


def recall_table(summary: dict) -> str:
    """Markdown: one row per method, overall figures then found@k by question kind."""
    kinds = ("where", "state", "failure", "interrupted")
    lines = ["| method | found@k | ranked first | stale first | precision | "
             + " | ".join(f"found: {k}" for k in kinds) + " |", "|" + "---|" * (5 + len(kinds))]
    for name, per in summary.items():
        a = per["all"]
        lines.append(f"| {name} | {a['found']:.3f} | {a['first']:.3f} | {a['stale']:.3f} | "
                     f"{a['precision']:.3f} | " + " | ".join(
                         f"{per[k]['found']:.3f} ({per[k]['questions']})" if k in per else "-"
                         for k in kinds) + " |")
    return "\n".join(lines)


def run_recall_test(embedder, seeds: list[int], steps: int = 80, k: int = 5,
                    options: Optional[dict] = None, config: Optional[MemoryConfig] = None,
                    on_game: Optional[Callable[[int, int], None]] = None) -> dict:
    """Make, walk and question every seed's game; the report with every answer kept."""
    from brainmem_ros.evaluation.textworld_walk import TW_OPTIONS, make_game, walk_game

    started, rows = time.time(), []
    for seed in seeds:
        walk = walk_game(make_game(seed, options), seed, steps)
        rows += ask_walk(walk, embedder, k, config, seed)
        if on_game:
            on_game(seed, len(rows))
    return {"config": {"seeds": list(seeds), "steps": steps, "k": k,
                       "tw_options": dict(TW_OPTIONS, **(options or {}))},
            "summary": summarise_answers(rows), "rows": rows,
            "wall_s": round(time.time() - started, 1)}
