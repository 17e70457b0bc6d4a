"""Programmatic rewards: plain functions with the reward contract used by train.py.

A reward function is `fn(prompts: list[str], completions: list[str], **kw) -> list[float]`, one
float per completion; NaN marks a failed score (grpo.py leaves it out of the group baseline).
`happy_reward` is a deliberately hackable toy (the policy learns to say "happy" a lot) for
watching reward hacking and the KL leash. `with_length_penalty` adds a word-count penalty to any
reward. The model-judged rubric reward lives in rubric.py/train.py, not here.
"""

import string
from collections.abc import Callable

RewardFn = Callable[..., list[float]]


def _words(text: str) -> list[str]:
    return text.split()


def happy_reward(prompts: list[str], completions: list[str], **kw) -> list[float]:
    """Fraction of whitespace-split words that are "happy" (any case, edge punctuation stripped)."""
    scores = []
    for text in completions:
        words = _words(text)
        hits = sum(w.strip(string.punctuation).lower() == "happy" for w in words)
        scores.append(hits / len(words) if words else 0.0)
    return scores


def length_penalty(completions: list[str], *, target_words: int, per_word: float) -> list[float]:
    """-per_word for each word beyond target_words (0 at or under it); add it to a reward."""
    if target_words < 0 or per_word < 0:
        raise ValueError(
            f"length_penalty needs target_words >= 0 and per_word >= 0, got "
            f"target_words={target_words}, per_word={per_word}"
        )
    return [-per_word * max(0, len(_words(text)) - target_words) for text in completions]


def with_length_penalty(reward_fn: RewardFn, target_words: int, per_word: float) -> RewardFn:
    """reward_fn plus length_penalty; a NaN (failed) score stays NaN."""
    length_penalty([], target_words=target_words, per_word=per_word)  # validate now, not mid-run

    def penalized(prompts: list[str], completions: list[str], **kw) -> list[float]:
        scores = reward_fn(prompts, completions, **kw)
        if len(scores) != len(completions):
            raise ValueError(
                f"{reward_fn.__name__} returned {len(scores)} scores for "
                f"{len(completions)} completions"
            )
        penalty = length_penalty(completions, target_words=target_words, per_word=per_word)
        return [float(s) + p for s, p in zip(scores, penalty, strict=True)]

    penalized.__name__ = f"{reward_fn.__name__}+length_penalty"
    return penalized


REWARDS: dict[str, RewardFn] = {"happy": happy_reward}


def get_reward(name: str) -> RewardFn:
    if name not in REWARDS:
        raise ValueError(f"unknown reward {name!r}; valid names: {sorted(REWARDS)}")
    return REWARDS[name]
