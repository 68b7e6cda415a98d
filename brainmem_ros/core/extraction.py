"""Entities and relations from a trace's words, by rules over a configurable vocabulary.

Rules, not a model: they are fast, deterministic and explainable, which matters for supersession
(a wrong relation would close a true fact). Sentence patterns catch names outside the vocabulary
("the red potato is on the counter"), so the rules also work on kitchens nobody configured.
Relations are normalised so that functional facts line up: every containment becomes
(item, location, place), every open/closed/on/off/sliced... becomes (item, state, word).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Iterable

from brainmem_ros.core.trace import Relation

__all__ = ["Vocabulary", "Extraction", "extract", "canonical", "HELD"]

HELD = "hand"  # the place of whatever the agent is carrying

KITCHEN_OBJECTS = (
    "bread",
    "butter",
    "lettuce",
    "tomato",
    "mayonnaise",
    "mustard",
    "cheese",
    "ham",
    "egg",
    "eggs",
    "knife",
    "fork",
    "spoon",
    "plate",
    "bowl",
    "cup",
    "mug",
    "glass",
    "cutting board",
    "pan",
    "pot",
    "kettle",
    "coffee",
    "coffee beans",
    "coffee grounds",
    "filter",
    "water",
    "milk",
    "sugar",
    "salt",
    "pepper",
    "sponge",
    "towel",
    "cloth",
    "soap",
    "dish soap",
    "trash",
    "crumbs",
    "timer",
    "apple",
    "banana",
    "carrot",
    "onion",
    "potato",
    "cucumber",
    "jam",
    "peanut butter",
    "sandwich",
    "toast",
    "juice",
    "tea",
    "tea bag",
    "rag",
    "spray",
    "cleaner",
    "dough",
    "flour",
    "oil",
    "lemon",
)
KITCHEN_PLACES = (
    "fridge",
    "freezer",
    "cupboard",
    "cabinet",
    "drawer",
    "counter",
    "countertop",
    "table",
    "sink",
    "stove",
    "oven",
    "toaster",
    "microwave",
    "coffee machine",
    "dishwasher",
    "shelf",
    "pantry",
    "kitchen",
    "living room",
    "bedroom",
    "bathroom",
    "corridor",
    "hallway",
    "garden",
    "backyard",
    "patio",
    "laundry room",
    "supermarket",
    "street",
    "driveway",
    "bin",
    "trash can",
    "bbq",
    "left counter",
    "right counter",
    "right-hand counter",
    "left-hand counter",
    "kitchen island",
)
STATE_WORDS = ("open", "closed", "on", "off", "sliced", "diced", "chopped", "cooked", "fried",
               "roasted", "grilled", "clean", "dirty", "empty", "full", "broken", "ringing", "wet",
               "dry", "hot", "cold", "toasted", "spread", "burned", "raw")

_ARTICLE = r"(?:the|a|an|some|your|one|two|three)\s+"
_NP = r"[a-z][a-z0-9' -]*?"
_LIST = r"[a-z][a-z0-9' ,-]*?"
_END = r"(?=[.!?;\n]|$)"

_LEADING_ARTICLES = re.compile(rf"^(?:{_ARTICLE})+")
_SPACES = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?;\n])\s+")


@functools.lru_cache(maxsize=8192)
def canonical(name: str) -> str:
    """Lower-case, articles and trailing punctuation removed: "The Butter." -> "butter".

    Cached: a robot names the same few hundred things over and over.
    """
    name = name.strip().lower().strip(" .,!?;:\"'")
    name = _LEADING_ARTICLES.sub("", name + " ").strip()
    return _SPACES.sub(" ", name)


def _split_list(text: str) -> list[str]:
    parts = re.split(r",\s*(?:and\s+)?|\s+and\s+", text)
    return [c for c in (canonical(p) for p in parts) if c and c not in ("nothing", "")]


@dataclass(frozen=True)
class Vocabulary:
    """Names the extractor recognises anywhere in a text, places among them."""

    objects: frozenset = field(default_factory=lambda: frozenset(KITCHEN_OBJECTS))
    places: frozenset = field(default_factory=lambda: frozenset(KITCHEN_PLACES))

    @classmethod
    def with_extra(cls, entities: Iterable[str] = (), places: Iterable[str] = ()) -> "Vocabulary":
        return cls(
            frozenset(KITCHEN_OBJECTS) | {canonical(e)
                                          for e in entities},
            frozenset(KITCHEN_PLACES) | {canonical(p)
                                         for p in places})

    @functools.cached_property
    def names(self) -> frozenset:
        """Return every name of the vocabulary, worked out once.

        ``pattern`` is looked up by this set for every text extracted, and a new set would be
        hashed anew each time.
        """
        return self.objects | self.places

    def pattern(self) -> re.Pattern:
        return _compile_names(self.names)


@functools.lru_cache(maxsize=16)
def _compile_names(names: frozenset) -> re.Pattern:
    return re.compile(r"(?<![\w-])(" + _alternation(names) + r")(?![\w-])")


def _alternation(words: Iterable[str]) -> str:
    """Compile a regular expression matching any of ``words``, written as a trie.

    "cup|cupboard|cutting board" becomes "cu(?:p(?:board)?|tting board)". The engine tries a flat
    alternation's branches one after the other at every position of the text; a trie rejects a
    position at its first character. Where one word is a prefix of another the longer is tried
    first and the shorter is what backtracking falls back to, as with the words sorted longest
    first.
    """
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        if len(branches) == 1 and "" not in node:
            return branches[0]
        return "(?:" + "|".join(branches) + ")" + ("?" if "" in node else "")

    return emit(trie)


@dataclass
class Extraction:
    entities: list[str]
    relations: list[Relation]


_LOCATED = r"(?:is|are|was|were|lies|sits|stays)"
_WHERE = r"(?:in|inside|on|at|on top of|in the middle of|under|next to)"
_PLACED = r"(?:put|place|placed|move|moved|insert|inserted|drop|dropped)"
_TAKEN = r"(?:take|took|pick up|picked up|grab|grabbed|get|got)"
_DOING = ("open|opens|close|closes|turn on|switch on|turn off|switch off|slice|dice|chop|fry|roast|"
          "grill|clean|wipe|toast")
_DONE = ("opened|closed|turned on|switched on|turned off|switched off|sliced|diced|chopped|fried|"
         "roasted|grilled|cleaned|wiped|toasted")

# Each rule: (pattern, kind, words one of which must occur for the pattern to be tried at all).
_RULE_DEFINITIONS: list[tuple[re.Pattern, str, tuple[str, ...]]] = [
    # "the butter is in the fridge", "a knife is on the counter", "the eggs are in the bowl"
    (re.compile(rf"(?:^|[.!?;,]\s*|\bthat\s+)(?:{_ARTICLE})?(?P<x>{_NP})\s+{_LOCATED}\s+"
                rf"(?:now\s+|still\s+)?{_WHERE}\s+"
                rf"(?:{_ARTICLE})?(?P<y>{_NP}){_END}"),
     "located", (" is ", " are ", " was ", " were ", " lies ", " sits ", " stays ")),
    # "you put the butter on the counter", "you placed the knife in the drawer"
    (re.compile(rf"\byou\s+{_PLACED}\s+(?:{_ARTICLE})?(?P<x>{_NP})"
                rf"\s+(?:in|into|on|onto|inside|in the)\s+(?:{_ARTICLE})?(?P<y>{_NP}){_END}"),
     "located", ("you ",)),
    # "you took the butter (from the fridge)", "you pick up the knife"
    (re.compile(rf"\byou\s+{_TAKEN}\s+(?:{_ARTICLE})?(?P<list>{_LIST})"
                rf"(?:\s+(?:from|off|out of)\s+(?:{_ARTICLE})?{_NP})?{_END}"),
     "held", ("you ",)),
    # "the fridge contains butter and milk"
    (re.compile(rf"(?:{_ARTICLE})?(?P<y>{_NP})\s+(?:contains|holds|has)\s+"
                rf"(?P<list>{_LIST}){_END}"),
     "contains", ("contains", "holds", " has ")),
    # "on the counter you see a knife, a plate and bread", "in the fridge there is milk"
    (re.compile(rf"\b(?:in|on|inside)\s+(?:{_ARTICLE})?(?P<y>{_NP}),?\s+"
                rf"(?:you\s+(?:see|can see|notice|find)|there\s+(?:is|are))\s+"
                rf"(?P<list>{_LIST}){_END}"),
     "contains", (" see", "notice", "find", "there ")),
    # "you open the fridge", "opened the cupboard", "you turn on the coffee machine"
    # (present tense only after "you": a bare "slice bread" is an instruction, not something done)
    (re.compile(rf"\b(?:you\s+(?P<verb>{_DOING}|{_DONE})|(?P<past>{_DONE}))\s+"
                rf"(?:{_ARTICLE})?(?P<x>{_NP})(?:\s+(?:with|using|on|in)\s+{_NP})?{_END}"),
     "verb_state", ("open", "clos", "turn", "switch", "slic", "dic", "chop", "fr", "roast", "grill",
                    "clean", "wip", "toast")),
    # "the fridge is open", "the coffee machine is on"
    (re.compile(rf"(?:^|[.!?;,]\s*)(?:{_ARTICLE})?(?P<x>{_NP})\s+(?:is|are)\s+(?:now\s+)?(?P<state>"
                + "|".join(STATE_WORDS) + rf"){_END}"),
     "state", (" is ", " are ")),
    # 黄油在冰箱里 / 刀在台面上
    (re.compile(r"(?P<x>[\u4e00-\u9fff]{1,6})在(?P<y>[\u4e00-\u9fff]{1,6}?)(?:里|上|中|内|旁)"),
     "located", ("在",)),
]

_RULES = [(rule, kind) for rule, kind, _ in _RULE_DEFINITIONS]
# Every rule's trigger words in one scan of a sentence: a lookahead finds them where they overlap
# ("you see": "you " and " see"), and as the trie tries the longest word at a position first, a
# word found stands for every trigger word that is a prefix of it.
_TRIGGERS = re.compile("(?=(" +
                       _alternation({w
                                     for _, _, words in _RULE_DEFINITIONS
                                     for w in words}) + "))")
_RULES_OF_TRIGGER = {
    found: frozenset(i for i, (_, _, words) in enumerate(_RULE_DEFINITIONS) if any(
        found.startswith(w) for w in words))
    for found in {w
                  for _, _, words in _RULE_DEFINITIONS
                  for w in words}
}

_VERB_STATE = {
    "open": "open",
    "opened": "open",
    "opens": "open",
    "close": "closed",
    "closed": "closed",
    "closes": "closed",
    "turn on": "on",
    "turned on": "on",
    "switch on": "on",
    "switched on": "on",
    "turn off": "off",
    "turned off": "off",
    "switch off": "off",
    "switched off": "off",
    "slice": "sliced",
    "sliced": "sliced",
    "dice": "diced",
    "diced": "diced",
    "chop": "chopped",
    "chopped": "chopped",
    "fry": "fried",
    "fried": "fried",
    "roast": "roasted",
    "roasted": "roasted",
    "grill": "grilled",
    "grilled": "grilled",
    "clean": "clean",
    "cleaned": "clean",
    "wipe": "clean",
    "wiped": "clean",
    "toast": "toasted",
    "toasted": "toasted",
}
_NOT_ENTITIES = {
    "you", "it", "there", "this", "that", "here", "which", "what", "nothing", "room", "something",
    "anything", "everything", "i", "we", "they", "he", "she"
}


@functools.lru_cache(maxsize=8192)
def _ok(name: str) -> bool:
    """Tell whether a found name is worth keeping as an entity (cached).

    Cached: asked about every name found, and a robot names the same few hundred things.
    """
    return bool(name) and name not in _NOT_ENTITIES and len(name) <= 60 and len(name.split()) <= 5


def extract(text: str, vocabulary: Vocabulary, pattern: re.Pattern | None = None) -> Extraction:
    """Entities (vocabulary names, then pattern captures) and normalised relations of one text."""
    lowered = text.lower()
    pattern = pattern or vocabulary.pattern()
    entities: list[str] = []
    relations: list[Relation] = []

    def add_entity(name: str) -> None:
        if _ok(name) and name not in entities:
            entities.append(name)

    def add(rel: Relation) -> None:
        if _ok(rel.subject) and rel.object and rel not in relations:
            relations.append(rel)
            add_entity(rel.subject)
            if rel.predicate == "location" and rel.object != HELD:
                add_entity(rel.object)

    for name in pattern.findall(lowered):
        add_entity(name)
    for sentence in _SENTENCE_END.split(lowered):
        triggered = set()
        for word in _TRIGGERS.findall(sentence):
            triggered |= _RULES_OF_TRIGGER[word]
        for i in sorted(triggered):
            rule, kind = _RULES[i]
            for m in rule.finditer(sentence):
                groups = m.groupdict()
                if kind == "located":
                    add(Relation(canonical(groups["x"]), "location", canonical(groups["y"])))
                elif kind == "held":
                    for item in _split_list(groups["list"]):
                        add(Relation(item, "location", HELD))
                elif kind == "contains":
                    place = canonical(groups["y"])
                    if place in ("you", "it"):
                        continue
                    for item in _split_list(groups["list"]):
                        add(Relation(item, "location", place))
                elif kind == "verb_state":
                    add(
                        Relation(canonical(groups["x"]), "state", _VERB_STATE[groups["verb"]
                                                                              or groups["past"]]))
                elif kind == "state":
                    add(Relation(canonical(groups["x"]), "state", groups["state"]))
    return Extraction(entities, relations)
