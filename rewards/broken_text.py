"""Broken variants of a good answer: the failures a policy finds when a reward model has never
been shown them (knowledge/reward_model.md, "Broken-text probes").

Four kinds, each a pure function of (text, rng): `cut` stops the answer part-way through a
sentence (an answer that never ends), `shuffled` permutes its words (word salad), `repeat`
appends its last sentence again and again (a loop), `filler` wraps it in content-free formal
sentences (padding). `broken_pairs` turns preference pairs into (intact better answer, its
broken variant) pairs. Two styles keep training and measurement apart: `train` (random cut
points, 2-4 repeats, one filler list) makes negatives for train_rm.py; `probe` (cut at half,
3 repeats, another filler list) makes the held-out probes bench/judge.py measures. Text in,
text out: no model here.
"""

import random
import re

from core.diversity import word_count

KINDS = ("cut", "shuffled", "repeat", "filler")
STYLES = ("train", "probe")
MIN_WORDS = 8  # shorter answers have too little to cut or shuffle

# Content-free padding. The two lists share no sentence, so a reward model trained on one is
# measured on the other.
FILLER = {
    "train": (
        "This is a very interesting and important question.",
        "There are many different factors to take into account here.",
        "It is always worth thinking carefully about such matters.",
        "Many experts have discussed this topic at great length.",
        "In summary, this is a topic with many aspects to consider.",
        "I hope this information is helpful to you in some way.",
    ),
    "probe": (
        "That is a truly fascinating question that deserves attention.",
        "It is important to note that there are many perspectives on this.",
        "Overall, it is essential to keep all of these considerations in mind.",
        "Ultimately, the answer depends on a wide range of circumstances.",
        "People have been wondering about things like this for a long time.",
        "Let me know if you would like to explore any part of this further.",
    ),
}

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """The text split after ., ! or ? followed by white space (at least one piece)."""
    parts = [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]
    return parts or [text.strip()]


def cut(text: str, rng: random.Random, style: str) -> str:
    """The first part of the words (half for probes, 30-70% for training), trailing punctuation
    removed so the answer visibly stops mid-way."""
    words = text.split()
    share = 0.5 if style == "probe" else rng.uniform(0.3, 0.7)
    keep = min(max(3, round(len(words) * share)), len(words) - 1)
    return " ".join(words[:keep]).rstrip(".,;:!?")


def shuffled(text: str, rng: random.Random, style: str) -> str:
    """The same words in a random order (never the original order)."""
    words = text.split()
    if len(words) < 2:
        raise ValueError(f"{text!r}: fewer than two words cannot be shuffled")
    order = list(range(len(words)))
    while order == sorted(order):
        rng.shuffle(order)
    return " ".join(words[i] for i in order)


def repeat(text: str, rng: random.Random, style: str) -> str:
    """The answer, then its last sentence again 3 times (probes) or 2-4 times (training)."""
    last = sentences(text)[-1]
    n = 3 if style == "probe" else rng.randint(2, 4)
    return " ".join([text.strip()] + [last] * n)


def filler(text: str, rng: random.Random, style: str) -> str:
    """One filler sentence before the answer and two after it, from the style's list."""
    pad = rng.sample(FILLER[style], 3)
    return " ".join([pad[0], text.strip(), pad[1], pad[2]])


VARIANTS = {"cut": cut, "shuffled": shuffled, "repeat": repeat, "filler": filler}


def variant(text: str, kind: str, rng: random.Random, style: str) -> str:
    if kind not in VARIANTS:
        raise ValueError(f"broken kind {kind!r}: use one of {list(KINDS)}")
    if style not in STYLES:
        raise ValueError(f"style {style!r}: use one of {list(STYLES)}")
    if word_count(text) < MIN_WORDS:
        raise ValueError(f"an answer of {word_count(text)} words is too short to break")
    return VARIANTS[kind](text, rng, style)


def broken_pairs(pairs: list[dict], kinds, style: str, seed: int, per_pair: int = 1) -> list[dict]:
    """For each pair whose better answer has >= MIN_WORDS words: `per_pair` new pairs (better:
    that answer intact, worse: a broken variant), kinds taken in turn over the eligible answers
    (all of them with `per_pair` = len(kinds)). Same seed, same pairs. Each keeps the source
    pair's prompt, category and split; `kind` is `broken_<kind>`, `id` the source id + kind."""
    kinds = list(kinds)
    if not 1 <= per_pair <= len(kinds):
        raise ValueError(f"per_pair={per_pair}: use 1..{len(kinds)} (one variant per kind)")
    rng = random.Random(seed)
    eligible = [p for p in pairs if word_count(p["better"]) >= MIN_WORDS]
    out = []
    for i, p in enumerate(eligible):
        for j in range(per_pair):
            kind = kinds[(i + j) % len(kinds)]
            out.append(
                {
                    **{k: p[k] for k in ("criterion", "category", "prompt") if k in p},
                    "id": f"{p['id']}-{kind}",
                    "better": p["better"],
                    "worse": variant(p["better"], kind, rng, style),
                    "source": "broken_text",
                    "kind": f"broken_{kind}",
                    **({"split": p["split"]} if "split" in p else {}),
                }
            )
    return out
