"""The memory prompt: what the planner reads before each action. English and Chinese.

Warnings come first (a remembered failure matters most right before an action), then the memories
best first, then the current task and state from working memory, then the instruction to weigh the
memories against the current observation (planners otherwise over-trust memory).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from brainmem_ros.core.trace import Entry, Recall, Zone

__all__ = [
    "TEMPLATES", "TaskState", "render", "render_merged", "splice_task_section", "time_ago", "said"
]

TEMPLATES = {
    "en": {
        "memories": "## Relevant memories",
        "none": "- (nothing relevant remembered yet)",
        "warning": "- Warning: {text}",
        "episode": "- {ago}: {text}",
        "episode_at": "- {ago} ({location}): {text}",
        "fact": "- Fact: {text}",
        "procedure": "- Procedure: {text}",
        "goal": "- Goal history: {text}",
        "task": "## Current task and state",
        "goal_line": "Goal: {goal}.",
        "subgoal_line": "Current subgoal: {goal}.",
        "interrupt_line": "Interrupted by: {goal}. When it is handled, return to: {main}.",
        "done_line": "Done: {steps}.",
        "holding_line": "Holding: {items}.",
        "no_goal": "No active goal.",
        "instruction": "## Plan the next action, using both the memories above and the current "
        "observation.",
        "now": "just now",
        "s": "{n} s ago",
        "min": "{n} min ago",
        "h": "{n} h ago",
        "d": "{n} days ago",
        "success": " (success)",
        "failure": " (failure)",
        "found": "{origin} found: {text}",
    },
    "zh": {
        "memories": "## 相关记忆回顾",
        "none": "- （暂无相关记忆）",
        "warning": "- 警告：{text}",
        "episode": "- {ago}：{text}",
        "episode_at": "- {ago}（{location}）：{text}",
        "fact": "- 常识：{text}",
        "procedure": "- 步骤：{text}",
        "goal": "- 目标记录：{text}",
        "task": "## 当前任务与状态",
        "goal_line": "你的目标是：{goal}。",
        "subgoal_line": "当前子目标：{goal}。",
        "interrupt_line": "任务被打断：{goal}。处理完后回到：{main}。",
        "done_line": "你已经完成了：{steps}。",
        "holding_line": "当前手里拿着：{items}。",
        "no_goal": "当前没有目标。",
        "instruction": "## 请综合参考以上记忆和当前观察，规划下一步动作",
        "now": "刚才",
        "s": "{n}秒前",
        "min": "{n}分钟前",
        "h": "{n}小时前",
        "d": "{n}天前",
        "success": "（成功）",
        "failure": "（失败）",
        "found": "{origin}发现：{text}",
    },
}


@dataclass
class TaskState:
    main_goal: str = ""
    active_goal: str = ""
    interruption: str = ""
    done_steps: Sequence[str] = ()
    holding: Sequence[str] = ()


def time_ago(seconds: float, language: str = "en") -> str:
    t = TEMPLATES[language]
    if seconds < 10:
        return t["now"]
    if seconds < 90:
        return t["s"].format(n=int(seconds))
    if seconds < 5400:
        return t["min"].format(n=round(seconds / 60))
    if seconds < 36 * 3600:
        return t["h"].format(n=round(seconds / 3600))
    return t["d"].format(n=round(seconds / 86400))


def _sentence(text: str, language: str = "en") -> str:
    text = text.strip()
    ended = text.endswith((".", "!", "?", "。", "！", "？", ")", "）"))
    return text if ended else text + ("。" if language == "zh" else ".")


def said(entry: Entry, language: str = "en") -> str:
    """Return what a memory says, with the robot that found it when it came from the fleet."""
    if not entry.origin:
        return entry.content
    return TEMPLATES[language]["found"].format(origin=entry.origin, text=entry.content)


def render(recalls: Sequence[Recall], warnings: Sequence[str], task: TaskState, now: float,
           language: str = "en") -> str:
    t = TEMPLATES[language]
    lines = [t["memories"]]
    lines += [t["warning"].format(text=_sentence(w, language)) for w in warnings]
    for recall in recalls:
        entry = recall.entry
        text = _sentence(said(entry, language), language)
        if entry.warning and said(entry, language) in warnings:
            continue
        if entry.warning:
            lines.append(t["warning"].format(text=text))
        elif entry.zone is Zone.SEMANTIC:
            lines.append(t["fact"].format(text=text))
        elif entry.zone is Zone.PROCEDURAL:
            lines.append(t["procedure"].format(text=text))
        elif entry.zone is Zone.GOAL:
            lines.append(t["goal"].format(text=text))
        else:
            # where it happened: "go north" says where it led only with where it started
            lines.append(t["episode_at" if entry.location else "episode"].format(
                ago=time_ago(now - entry.created, language), location=entry.location, text=text))
    if len(lines) == 1:
        lines.append(t["none"])
    lines.append(t["task"])
    state = []
    if task.main_goal:
        state.append(t["goal_line"].format(goal=task.main_goal.rstrip(".")))
        if task.interruption:
            state.append(t["interrupt_line"].format(goal=task.interruption.rstrip("."),
                                                    main=task.active_goal or task.main_goal))
        elif task.active_goal and task.active_goal != task.main_goal:
            state.append(t["subgoal_line"].format(goal=task.active_goal.rstrip(".")))
    else:
        state.append(t["no_goal"])
    if task.done_steps:
        sep = "，" if language == "zh" else " "
        state.append(t["done_line"].format(steps=sep.join(
            f"{i}. {s}" for i, s in enumerate(task.done_steps, 1))))
    if task.holding:
        state.append(t["holding_line"].format(items=", ".join(task.holding)))
    lines.append(" ".join(state))
    lines.append(t["instruction"])
    return "\n".join(lines)


def render_merged(results: Sequence[tuple[Sequence[Recall], Sequence[str]]], task: TaskState,
                  now: float, language: str = "en", limit: int = 0) -> str:
    """Render one memory prompt from several retrievals.

    One memory prompt from several retrievals (a planner asking more than one question before an
    action): each memory once, at its best score, the warnings first, then newest first, so that a
    reader who folds the memories in order ends with the latest state of the world.
    """
    best: dict[str, Recall] = {}
    warnings: list[str] = []
    for recalls, warns in results:
        for w in warns:
            if w not in warnings:
                warnings.append(w)
        for recall in recalls:
            key = recall.entry.id or recall.entry.content
            if key not in best or recall.score > best[key].score:
                best[key] = recall
    ordered = sorted(best.values(), key=lambda r: (r.entry.created, r.score), reverse=True)
    if limit:
        ordered = sorted(
            sorted(ordered, key=lambda r: r.score, reverse=True)[:limit], key=lambda r:
            (r.entry.created, r.score), reverse=True)
    return render(ordered, warnings, task, now, language)


def splice_task_section(prompt: str, source: str, language: str = "en") -> str:
    """Put the task-and-state section of ``source`` into ``prompt``.

    ``prompt`` with its task-and-state section taken from ``source`` (a prompt the store rendered
    with the working memory a client cannot see).
    """
    header = TEMPLATES[language]["task"]
    if header not in prompt or header not in source:
        return prompt
    return prompt[:prompt.index(header)] + source[source.index(header):]
