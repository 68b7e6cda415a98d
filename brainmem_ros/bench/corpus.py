"""Kitchen-like memories and questions for benchmarks, generated deterministically.

Entities overlap the way a household robot's memories do: a few hundred objects and places seen
again and again in different combinations, rooms, states and actions, over weeks. The embeddings of
a corpus are computed once with the real model and cached on disk, keyed by the texts themselves.
"""
from __future__ import annotations

import hashlib
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from brainmem_ros.core.trace import Zone

__all__ = [
    "CORPUS_NOW", "CorpusItem", "make_corpus", "make_questions", "cached_embeddings",
    "embedding_cache_path"
]

COLOURS = [
    "red", "green", "blue", "yellow", "white", "black", "small", "large", "old", "new", "clean",
    "dirty"
]
FOODS = [
    "apple", "banana", "carrot", "onion", "potato", "tomato", "cucumber", "lettuce", "cheese",
    "ham", "bread", "butter", "jam", "milk", "egg", "lemon", "pepper", "mushroom", "chicken",
    "rice", "pasta", "yoghurt", "orange", "pear", "garlic", "salmon", "tofu", "beans", "flour",
    "sugar"
]
TOOLS = [
    "knife", "fork", "spoon", "plate", "bowl", "cup", "mug", "glass", "pan", "pot", "kettle",
    "cutting board", "sponge", "towel", "grater", "peeler", "whisk", "ladle", "tray", "jar"
]
PLACES = [
    "fridge", "freezer", "cupboard", "drawer", "counter", "table", "sink", "shelf", "stove", "oven",
    "microwave", "dishwasher", "pantry", "toaster", "coffee machine", "kitchen island",
    "windowsill", "bin", "basket", "sideboard"
]
ROOMS = [
    "kitchen", "living room", "bedroom", "bathroom", "hallway", "pantry room", "garage", "garden"
]
STATES = ["open", "closed", "on", "off", "clean", "dirty", "empty", "full"]
GOALS = [
    "make a sandwich", "make coffee", "clean the counter", "make toast", "prepare a salad",
    "boil an egg", "set the table", "wash the dishes", "make tea", "put away the groceries"
]
# The moment a corpus ends. Benchmarks run their memory on a clock stopped here, so that ages,
# decay and the store's refusal of stamps from the future read the same on every day they run.
CORPUS_NOW = 1.8e9
AGENT_SHARES = [("robot_a", 0.9), ("robot_b", 0.1)]
ZONE_SHARES = [(Zone.EPISODIC, 0.6), (Zone.SEMANTIC, 0.25), (Zone.PROCEDURAL, 0.1),
               (Zone.GOAL, 0.05)]


@dataclass
class CorpusItem:
    agent_id: str
    zone: Zone
    text: str
    created: float


def _pick(rng: random.Random, shares):
    x, acc = rng.random(), 0.0
    for value, share in shares:
        acc += share
        if x < acc:
            return value
    return shares[-1][0]


def _thing(rng: random.Random) -> str:
    base = rng.choice(FOODS + TOOLS)
    return f"{rng.choice(COLOURS)} {base}" if rng.random() < 0.5 else base


def _text(rng: random.Random, zone: Zone, i: int) -> str:
    a, b, c = _thing(rng), _thing(rng), _thing(rng)
    place, room = rng.choice(PLACES), rng.choice(ROOMS)
    n = rng.randint(1, 9)
    if zone is Zone.SEMANTIC:
        return rng.choice([
            f"the {a} is in the {place} of the {room}",
            f"the {place} in the {room} contains a {a} and a {b}",
            f"the {place} in the {room} is {rng.choice(STATES)}",
            f"the {a} belongs on shelf {n} of the {place}",
            f"the {a} is next to the {b} on the {place}",
        ])
    if zone is Zone.PROCEDURAL:
        goal = rng.choice(GOALS)
        return (f"to {goal} in the {room}: 1. open the {place} 2. take the {a} 3. use the {b} "
                f"4. put the {c} on the {rng.choice(PLACES)} (variant {i % 97})")
    if zone is Zone.GOAL:
        status = rng.choice(['completed', 'failed', 'started'])
        return f"goal {status}: {rng.choice(GOALS)} in the {room} (run {i % 211})"
    return rng.choice([
        f"you took the {a} from the {place} in the {room}",
        f"you put the {a} on the {place} in the {room}",
        f"on the {place} in the {room} you see a {a}, a {b} and a {c}",
        f"you opened the {place} in the {room} and found the {a}",
        f"you sliced the {a} with the {b} on the {place}",
        f"you tried to take the {a} from the {place} but it was stuck (failure)",
        f"someone moved the {a} to the {place} in the {room} while you were away",
        f"the timer rang in the {room} while you were washing the {a}",
    ])


def make_corpus(n: int, seed: int = 7, days: float = 30.0,
                now: float = CORPUS_NOW) -> list[CorpusItem]:
    rng = random.Random(seed * 1_000_003 + n)
    items = []
    for i in range(n):
        zone = _pick(rng, ZONE_SHARES)
        items.append(
            CorpusItem(_pick(rng, AGENT_SHARES), zone, _text(rng, zone, i),
                       now - days * 86400 * (1 - i / max(1, n))))
    return items


def make_questions(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    templates = [
        "where is the {a}?",
        "where did I put the {a} in the {room}?",
        "what is in the {place}?",
        "how do I {goal}?",
        "what did I do with the {a}?",
        "is the {place} in the {room} open?",
        "what did I see on the {place}?",
        "which tool do I need to slice the {a}?",
    ]
    questions: dict[str, None] = {}
    while len(questions) < n:  # distinct, so no timed call is served from an embedding cache
        questions[rng.choice(templates).format(a=_thing(rng), room=rng.choice(ROOMS),
                                               place=rng.choice(PLACES),
                                               goal=rng.choice(GOALS))] = None
    return list(questions)


def embedding_cache_path(texts: list[str], cache_dir: Path, model_name: str = "") -> Path:
    digest = hashlib.sha256((model_name + "\n" + "\n".join(texts)).encode()).hexdigest()[:20]
    return cache_dir / f"emb-{len(texts)}-{digest}.npy"


def cached_embeddings(texts: list[str], embed: Callable[[list[str]], np.ndarray], cache_dir: Path,
                      label: str = "embedding", batch: int = 512, progress: bool = True,
                      model_name: str = "") -> np.ndarray:
    """Embed each distinct text of a corpus once, from a cache on disk when it holds them.

    Each distinct text is embedded once (a large corpus repeats many of its memories: 61% of 1M are
    distinct), then the vectors are laid out in the corpus's order.
    """
    path = embedding_cache_path(texts, cache_dir, model_name)
    if path.is_file():
        return np.load(path)
    distinct = list(dict.fromkeys(texts))
    vectors = np.zeros((len(distinct), 384), dtype=np.float32)
    for start in tqdm(range(0, len(distinct), batch), desc=label, unit_scale=batch,
                      disable=not progress, leave=False):
        vectors[start:start + batch] = embed(distinct[start:start + batch])
    where = {text: i for i, text in enumerate(distinct)}
    out = vectors[np.fromiter((where[t] for t in texts), dtype=np.int64, count=len(texts))]
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.npy")
    np.save(partial, out)
    os.replace(partial, path)
    return out
