"""Broken variants of an answer: each kind does what its name says, the two styles stay apart."""

import random
from collections import Counter

import pytest

from rewards import broken_text as bt

ANSWER = (
    "The Great Wall of China is not visible to the naked eye from orbit. Astronauts have said "
    "so many times. It is long but far too narrow."
)


def test_each_kind_on_a_known_answer():
    rng = random.Random(0)
    words = ANSWER.split()
    cut = bt.variant(ANSWER, "cut", rng, "probe")
    assert len(words) == 27 and cut == " ".join(words[:14]).rstrip(".")  # round(13.5): 14 words
    assert not cut.endswith(".")
    mixed = bt.variant(ANSWER, "shuffled", rng, "probe")
    assert Counter(mixed.split()) == Counter(words) and mixed.split() != words
    rep = bt.variant(ANSWER, "repeat", rng, "probe")
    assert rep == ANSWER + " It is long but far too narrow." * 3
    pad = bt.variant(ANSWER, "filler", rng, "probe")
    assert ANSWER in pad and len(bt.sentences(pad)) == len(bt.sentences(ANSWER)) + 3
    assert sum(f in pad for f in bt.FILLER["probe"]) == 3
    assert not any(f in pad for f in bt.FILLER["train"])


def test_training_style_varies_and_uses_its_own_filler():
    rng = random.Random(1)
    cuts = {len(bt.variant(ANSWER, "cut", rng, "train").split()) for _ in range(30)}
    assert len(cuts) > 3 and max(cuts) < 26  # 30-70% of the words, never all
    reps = {bt.variant(ANSWER, "repeat", rng, "train").count("too narrow") for _ in range(30)}
    assert reps == {3, 4, 5}  # the answer's own sentence + 2-4 repeats
    assert not set(bt.FILLER["train"]) & set(bt.FILLER["probe"])


def pairs(n):
    return [
        {"id": f"p{i}", "criterion": "scrutiny", "category": "control", "prompt": f"q{i}",
         "better": ANSWER if i % 3 else "Too short to break.", "worse": "x", "split": "train"}
        for i in range(n)
    ]  # fmt: skip


def test_broken_pairs_rotate_kinds_skip_short_answers_and_repeat_exactly():
    got = bt.broken_pairs(pairs(9), bt.KINDS, "probe", seed=0, per_pair=2)
    assert len(got) == 6 * 2  # 6 of 9 better answers are long enough
    assert [p["kind"] for p in got[:4]] == ["broken_cut", "broken_shuffled"] * 1 + [
        "broken_shuffled", "broken_repeat"]  # fmt: skip
    assert all(p["better"] == ANSWER and p["worse"] != ANSWER for p in got)
    assert all(p["split"] == "train" and p["id"].startswith("p") for p in got)
    assert got == bt.broken_pairs(pairs(9), bt.KINDS, "probe", seed=0, per_pair=2)
    every = bt.broken_pairs(pairs(9), bt.KINDS, "probe", seed=0, per_pair=4)
    assert Counter(p["kind"] for p in every) == {f"broken_{k}": 6 for k in bt.KINDS}


def test_bad_arguments_name_the_fix():
    rng = random.Random(0)
    with pytest.raises(ValueError, match="broken kind 'typo'"):
        bt.variant(ANSWER, "typo", rng, "probe")
    with pytest.raises(ValueError, match="style"):
        bt.variant(ANSWER, "cut", rng, "exam")
    with pytest.raises(ValueError, match="too short"):
        bt.variant("Two words", "cut", rng, "probe")
    with pytest.raises(ValueError, match="per_pair"):
        bt.broken_pairs(pairs(3), bt.KINDS, "probe", seed=0, per_pair=5)
