"""Diversity and degeneracy of generated text: did training make the answers duller or collapse?

Pure functions over strings (whitespace words, lower-cased; no model): `distinct_n` (unique
n-grams / all n-grams over a set of answers), `repetition_rate` (share of an answer's n-grams
that repeat an earlier n-gram of the same answer: "happy happy happy" loops), `jaccard` and
`self_similarity` (mean pairwise Jaccard similarity of the word sets of several samples for one
prompt: 1 = the samples say the same thing), `unique_fraction` (distinct normalized answers /
answers), `opening` and `top_opener` (the commonest opening sentence and its share: one
opener taking over a category, as "You're right." did in the learning run's attempt 25) and
`summary`, which adds a template-collapse flag. Evaluation (evaluate.py) and
gradient routing (rl/routing.py) use these; they do not sample.
"""

import itertools
import re

import numpy as np

_WORD = re.compile(r"\w+(?:'\w+)?")


def words(text: str) -> list[str]:
    """Lower-cased word tokens; punctuation dropped (so "Happy!" and "happy" match)."""
    return _WORD.findall(text.lower())


def word_count(text: str) -> int:
    """Whitespace-separated words, punctuation attached: the unit of every length limit (the
    reward's length penalty, the rubric's length_beta, broken_text.MIN_WORDS, data/make_sft.py's
    MAX_WORDS). The figures that report an answer's length count `words(text)`, which skips a
    lone "-" or "..."."""
    return len(text.split())


def ngrams(tokens: list[str], n: int) -> list[tuple]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def distinct_n(texts: list[str], n: int = 2) -> float:
    """Unique n-grams / total n-grams pooled over `texts` (Li et al. 2016); NaN if none."""
    grams = [g for t in texts for g in ngrams(words(t), n)]
    return len(set(grams)) / len(grams) if grams else float("nan")


def repetition_rate(text: str, n: int = 3) -> float:
    """Share of the answer's n-grams that already occurred earlier in it; 0 for short answers."""
    grams = ngrams(words(text), n)
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def jaccard(a: str, b: str) -> float:
    """|words(a) ∩ words(b)| / |words(a) ∪ words(b)|; two empty answers are identical (1)."""
    sa, sb = set(words(a)), set(words(b))
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def self_similarity(samples: list[str]) -> float:
    """Mean pairwise Jaccard similarity of one prompt's samples; NaN for fewer than two."""
    pairs = list(itertools.combinations(samples, 2))
    if not pairs:
        return float("nan")
    return float(np.mean([jaccard(a, b) for a, b in pairs]))


def unique_fraction(texts: list[str]) -> float:
    """Distinct answers (compared as their word sequences) / answers; NaN if no answers."""
    if not texts:
        return float("nan")
    return len({" ".join(words(t)) for t in texts}) / len(texts)


_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
OPENING_MAX_WORDS = 8


def opening(text: str) -> str:
    """An answer's opening as comparable words: its first sentence (up to the first . ! or ?
    followed by a space or the end), cut to OPENING_MAX_WORDS words, lower-cased without
    punctuation ("You're right." and "you're right!" match)."""
    m = _SENTENCE_END.search(text.strip())
    first = text.strip()[: m.start()] if m else text.strip()
    return " ".join(words(first)[:OPENING_MAX_WORDS])


def top_opener(texts: list[str]) -> tuple[str, float]:
    """(the commonest opening, its share of the answers); ("", NaN) for no answers. Ties go to
    the opening seen first."""
    if not texts:
        return "", float("nan")
    counts: dict[str, int] = {}
    for t in texts:
        key = opening(t)
        counts[key] = counts.get(key, 0) + 1
    best = max(counts, key=counts.get)  # dicts keep insertion order: the first of a tie
    return best, counts[best] / len(texts)


def summary(groups: list[list[str]], collapse_threshold: float = 0.5) -> dict:
    """Diversity over answers grouped by prompt (several samples per prompt, or one).

    `template_collapse` is True when the answers to DIFFERENT prompts look alike: the mean
    Jaccard similarity between first answers of different prompts exceeds the threshold (a
    policy answering everything with one template). Keys: distinct_1, distinct_2,
    repetition, self_similarity (within prompts), cross_prompt_similarity, unique_fraction,
    top_opener_share, template_collapse."""
    flat = [t for g in groups for t in g]
    within = [self_similarity(g) for g in groups if len(g) > 1]
    firsts = [g[0] for g in groups if g]
    cross = self_similarity(firsts[:64])  # at most 2,016 pairs
    return {
        "distinct_1": distinct_n(flat, 1),
        "distinct_2": distinct_n(flat, 2),
        "repetition": float(np.mean([repetition_rate(t) for t in flat])) if flat else float("nan"),
        "self_similarity": float(np.mean(within)) if within else float("nan"),
        "cross_prompt_similarity": cross,
        "unique_fraction": unique_fraction(flat),
        "top_opener_share": top_opener(flat)[1],
        "template_collapse": bool(np.isfinite(cross) and cross > collapse_threshold),
    }
