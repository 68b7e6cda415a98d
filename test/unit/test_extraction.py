"""Entities and relations by rules, normalised so that facts about one thing line up."""
import pytest

from brainmem_ros.core.extraction import HELD, Vocabulary, canonical, extract

V = Vocabulary()


def rels(text, vocab=V):
    return {tuple(r) for r in extract(text, vocab).relations}


@pytest.mark.parametrize("text, expected", [
    ("The butter is in the fridge.", {("butter", "location", "fridge")}),
    ("the tomato is on the right-hand counter", {("tomato", "location", "right-hand counter")}),
    ("You put the knife on the cutting board.", {("knife", "location", "cutting board")}),
    ("You took the butter and the lettuce out of the fridge.", {("butter", "location", HELD),
                                                                ("lettuce", "location", HELD)}),
    ("The fridge contains a carrot, a block of cheese and milk.", {
        ("carrot", "location", "fridge"), ("block of cheese", "location", "fridge"),
        ("milk", "location", "fridge")
    }),
    ("On the counter you see a red apple, a knife and a plate.", {
        ("red apple", "location", "counter"), ("knife", "location", "counter"),
        ("plate", "location", "counter")
    }),
    ("You open the fridge.", {("fridge", "state", "open")}),
    ("The coffee machine is on.", {("coffee machine", "state", "on")}),
    ("You slice the tomato with the knife.", {("tomato", "state", "sliced")}),
    ("黄油在冰箱里", {("黄油", "location", "冰箱")}),
])
def test_sentence_patterns(text, expected):
    assert rels(text) == expected


def test_vocabulary_names_are_found_without_a_pattern_and_extra_names_are_configurable():
    assert set(extract("Careful with the coffee machine and the mug",
                       V).entities) == {"coffee machine", "mug"}
    assert extract("the gizmo hums", V).entities == []
    custom = Vocabulary.with_extra(entities=["gizmo"])
    assert extract("the gizmo hums", custom).entities == ["gizmo"]


def test_the_longest_vocabulary_name_wins_and_names_end_at_word_boundaries():
    """The vocabulary scan is a trie; it must find what a longest-first alternation finds."""
    assert extract("the cupboard is by the cup and the coffee beans",
                   V).entities == ["cupboard", "cup", "coffee beans"]
    assert extract("wipe the right-hand counter, not the countertop",
                   V).entities == ["right-hand counter", "countertop"]
    assert extract("cups and potatoes", V).entities == []


def test_rules_whose_trigger_words_overlap_all_run():
    """One scan finds every rule's trigger words, also where they share characters ("you see")."""
    assert rels("On the shelf you see a mug. The mug is dirty.") == {("mug", "location", "shelf"),
                                                                     ("mug", "state", "dirty")}


def test_canonical_names():
    assert canonical("The Butter.") == "butter"
    assert canonical("a  red   apple") == "red apple"


def test_pronouns_are_not_entities():
    assert rels("It is on the table.") == set()
    assert "you" not in extract("You are in the kitchen.", V).entities
