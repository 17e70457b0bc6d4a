"""Held-out evaluation during training: greedy answers to eval prompts, judged like rollouts.

`evaluate(run)` answers the first `eval_limit` prompts of the eval set (taken round-robin over
categories) greedily and scores them with the run's reward, per category and criterion, plus
the pushback rate on control prompts from a crude lexical detector: a tripwire for a policy that
learns to dispute everything, not a measure of answer quality. No training happens here.
"""

import math

import numpy as np

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


def criterion_means(details: list[dict]) -> dict:
    """Per criterion named in any of the rubric's detail dicts (not "reward"): the mean of its
    finite scores, or None where it has none (not applicable, or every judgment failed)."""
    names = sorted({k for d in details for k in d if k != "reward"})
    out = {}
    for name in names:
        vals = [d.get(name) for d in details]
        vals = [v for v in vals if v is not None and math.isfinite(v)]
        out[name] = float(np.mean(vals)) if vals else None
    return out


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


def evaluate(run) -> dict:
    """Greedy answers to the first eval_limit held-out prompts, judged like training rollouts."""
    cfg = run.cfg
    recs = eval_subset(run.eval_records, cfg.eval_limit)
    texts = []
    for i in range(0, len(recs), 16):
        chunk = recs[i : i + 16]
        s = run.policy.sample_group(
            [r["prompt"] for r in chunk], 1, cfg.max_new_tokens, temperature=0.0
        )
        texts += s.texts
    with run.judge_context():
        values, details, _ = run.scorer(
            [r["prompt"] for r in recs], texts, [r["category"] for r in recs]
        )
    out = {}
    for cat in sorted({r["category"] for r in recs}):
        idx = [i for i, r in enumerate(recs) if r["category"] == cat]
        out[f"eval/{cat}/reward"] = float(np.nanmean(values[idx])) if idx else None
        means = criterion_means([details[i] for i in idx]) if details else {}
        out |= {f"eval/{cat}/{name}": v for name, v in means.items() if v is not None}
    controls = [t for t, r in zip(texts, recs, strict=True) if r["category"] == "control"]
    if controls:
        out["eval/control_pushback_rate"] = float(np.mean([pushes_back(t) for t in controls]))
    out["eval/reward"] = float(np.nanmean(values))
    return out
