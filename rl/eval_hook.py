"""The in-training evaluation hook: a run's held-out prompts answered greedily and scored by the
run's own reward, every `--eval-every` steps (train.py) and by eval_task.py.

What it is not: evaluate.py, the command that puts models side by side with the grader, intervals
and a report. The hook is small and imports no grader, so a training run does not load one.
"""

from core.prompts import eval_subset

import numpy as np

from rewards.pushback import pushes_back
from rewards.scorer import category_means


def evaluate(policy, scorer, records: list[dict], *, limit: int, max_new_tokens: int) -> dict:
    """The in-training hook: greedy answers to the first `limit` records (round-robin over
    categories), scored by the run's scorer: mean reward per category and criterion, and the
    lexical control pushback tripwire."""
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
        out["eval/control_pushback_rate_lexical"] = float(
            np.mean([pushes_back(t) for t in controls])
        )
    out["eval/reward"] = float(np.nanmean(values))
    return out
