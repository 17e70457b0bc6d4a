"""The plain reward functions and the error every reward raises: the bottom of rewards/.

A reward function has TRL's contract: `fn(prompts: list[str], completions: list[str], **kw) ->
list[float]`, one float per completion, NaN for a failed score (grpo.py leaves it out of the group
baseline); `categories=` carries each prompt's category. Here: `happy_reward` (a hackable toy),
`asks_question` (the routing task), `length_penalty` (added by the scorer) and the stance term's
values per prompt category (`stance_reward`, `stance_values`). The registry
(rewards/registry.py) names them for a spec; nothing here loads a model.
"""

import re
import string
from collections.abc import Callable

from core.diversity import word_count
from core.errors import UserError

from rewards.pushback import disputes

RewardFn = Callable[..., list[float]]
_QUESTION = re.compile(r"\w[\"')]?\s*\?")


class RewardError(UserError, ValueError):
    """A reward spec, file, function or model that cannot be used; the CLIs print it, exit 2."""


def happy_reward(prompts: list[str], completions: list[str], **kw) -> list[float]:
    """Fraction of whitespace-split words that are "happy" (any case, edge punctuation stripped)."""
    scores = []
    for text in completions:
        words = text.split()
        hits = sum(w.strip(string.punctuation).lower() == "happy" for w in words)
        scores.append(hits / len(words) if words else 0.0)
    return scores


def asks_question(prompts: list[str], completions: list[str], **kw) -> list[float]:
    """1.0 if the completion asks something (a '?' right after a word), else 0.0: the task of
    the happy-hack experiment (knowledge/routing.md), a checkable stand-in for curiosity that
    SmolLM2-135M shows in ~1 of 10 samples, so GRPO has signal from the first step."""
    return [1.0 if _QUESTION.search(text) else 0.0 for text in completions]


LENGTH_TARGET = 120  # words an answer may have before the length penalty (--length-target)


def length_penalty(completions: list[str], *, target_words: int, per_word: float) -> list[float]:
    """-per_word for each word beyond target_words (0 at or under it); add it to a reward."""
    if target_words < 0 or per_word < 0:
        raise ValueError(
            f"length_penalty needs target_words >= 0 and per_word >= 0, got "
            f"target_words={target_words}, per_word={per_word}"
        )
    return [-per_word * max(0, word_count(text) - target_words) for text in completions]


# Which way the stance reward pays per prompt category: +1 for disputing where the premise is
# false or the prompt is nonsense, -1 for disputing a true premise, 0 where stance is not the point.
STANCE_SIGN = {"false_premise": 1.0, "nonsense": 1.0, "control": -1.0, "curiosity": 0.0}


def stance_reward(
    prompts: list[str],
    completions: list[str],
    *,
    categories,
    pay: float = 1.0,
    penalty: float = 1.0,
    **kw,
) -> list[float]:
    """+pay for an answer that disputes (pushback.disputes) a false-premise or nonsense prompt,
    -penalty for one that disputes a true-premise control, 0 otherwise: the category-aware term
    of issue 22 that pays for pushback only where the prompt's known category calls for it. A
    category outside STANCE_SIGN raises (a task without these categories cannot use it)."""
    return stance_values([disputes(t) for t in completions], categories, pay, penalty)


def stance_values(
    flags, categories, pay: float = 1.0, penalty: float = 1.0, curiosity_penalty: float = 0.0
) -> list[float]:
    """stance_reward from each answer's `disputes` flag (computed once by the caller): a bool,
    or a probability in [0, 1] from a trained detector, which scales the pay or penalty.
    `curiosity_penalty` is taken for a dispute on a curiosity prompt (0: neutral, as
    STANCE_SIGN says): a curious question has no false premise, so "There's no link between X
    and Y" is needless there too."""
    if categories is None or len(categories) != len(flags):
        raise RewardError(
            f"the stance reward needs one category per completion, got {categories!r} for "
            f"{len(flags)} completions"
        )
    # what a dispute is worth per category: the sign's pay or penalty, curiosity's own penalty
    worth = {c: s * (pay if s > 0 else penalty) for c, s in STANCE_SIGN.items() if s}
    worth["curiosity"] = 0.0 - curiosity_penalty
    out = []
    for flag, cat in zip(flags, categories, strict=True):
        if cat not in STANCE_SIGN:
            raise RewardError(
                f"the stance reward has no sign for category {cat!r}; known: {sorted(STANCE_SIGN)}"
            )
        out.append(worth.get(cat, 0.0) * float(flag))
    return out
