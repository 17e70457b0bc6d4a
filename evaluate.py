"""Held-out evaluation during training: greedy answers to eval prompts, judged like rollouts.

`evaluate(run)` answers the first `eval_limit` prompts of the eval set (taken round-robin over
categories) greedily and scores them with the run's reward, per category and criterion, plus
the pushback rate on control prompts from a crude lexical detector: a tripwire for a policy that
learns to dispute everything, not a measure of answer quality. No training happens here.
"""

import numpy as np

from rewards import category_means

PUSHBACK_MARKERS = (
    "actually",
    "not true",
    "isn't true",
    "is not true",
    "false premise",
    "misconception",
    "myth",
    "incorrect",
    "not correct",
    "doesn't make sense",
    "does not make sense",
    "no such",
    "there is no",
    "mistaken",
    "not accurate",
)


def pushes_back(text: str) -> bool:
    """Crude lexical detector of a response that disputes the prompt (see knowledge/train.md)."""
    t = text.lower()
    return any(marker in t for marker in PUSHBACK_MARKERS)


def eval_subset(records: list[dict], limit: int) -> list[dict]:
    """The first `limit` records taken round-robin over categories, so every category counts."""
    by_cat = {}
    for r in records:
        by_cat.setdefault(r["category"], []).append(r)
    queues = [by_cat[c] for c in sorted(by_cat)]
    out = []
    for i in range(max(len(q) for q in queues)):
        out += [q[i] for q in queues if i < len(q)]
    return out[:limit]


def evaluate(policy, scorer, records: list[dict], *, limit: int, max_new_tokens: int) -> dict:
    """Greedy answers to the first `limit` records (round-robin over categories), scored by
    `scorer` (rewards.Scorer): mean reward per category and criterion, control pushback rate."""
    recs = eval_subset(records, limit)
    texts = []
    for i in range(0, len(recs), 16):
        chunk = recs[i : i + 16]
        s = policy.sample_group([r["prompt"] for r in chunk], 1, max_new_tokens, temperature=0.0)
        texts += s.texts
    categories = [r["category"] for r in recs]
    scores = scorer([r["prompt"] for r in recs], texts, categories)
    values = scores.values
    out = category_means("eval", categories, values, scores.details)
    controls = [t for t, r in zip(texts, recs, strict=True) if r["category"] == "control"]
    if controls:
        out["eval/control_pushback_rate"] = float(np.mean([pushes_back(t) for t in controls]))
    out["eval/reward"] = float(np.nanmean(values))
    return out
