"""The scorer the loop calls: a reward's checked components bound and summed, plus the logs' means.

`build_scorer` binds each component (rewards/registry.py) to what it needs (a judge, a
reward-model folder, a file) and adds the optional length penalty (rewards/builtin.py);
`scorer_from_fn` wraps one plain reward function. A `Scorer` returns `Scores`: the weighted sum,
per-part details and the count of failed judgments. `criterion_means` and `category_means` turn
the details into the per-criterion and per-category figures the run log and evaluation report.
"""

import math

import numpy as np

from rewards.builtin import LENGTH_TARGET, RewardError, RewardFn, length_penalty
from rewards.registry import REWARDS, Component, RewardContext, Scores, plain_part


class Scorer:
    """The reward the loop calls: weighted sum of the spec's components plus the length penalty.

    `scorer(prompts, completions, categories) -> Scores`; a component returning the wrong number
    of values raises. With several components each row's details hold every component's value
    (and its own details under `name/`)."""

    def __init__(self, parts, length_target: int = LENGTH_TARGET, length_per_word: float = 0.0):
        length_penalty([], target_words=length_target, per_word=length_per_word)  # validate now
        self.parts = parts  # [(Component, score function)]
        self.length_target, self.length_per_word = length_target, length_per_word

    def __call__(self, prompts, completions, categories) -> Scores:
        n = len(completions)
        total, failures, per_part = np.zeros(n), 0, []
        for comp, fn in self.parts:
            values, details, fails = self._part(comp, fn, prompts, completions, categories)
            total += comp.weight * values
            failures += fails
            per_part.append((comp, values, details))
        if self.length_per_word > 0:
            total += np.asarray(
                length_penalty(
                    completions, target_words=self.length_target, per_word=self.length_per_word
                )
            )
        return Scores(total, _merge_details(per_part, n), failures)

    @staticmethod
    def _part(comp, fn, prompts, completions, categories):
        """One component's (values, details, failures) on every row; a component limited to
        some categories is called on their rows only, the others get 0 and `scored: 0`."""
        n = len(completions)
        if comp.categories is None:
            s = fn(prompts, completions, categories)
            return _values(comp, s, n), s.details, s.failures
        if categories is None or len(categories) != n:
            raise RewardError(
                f"reward {comp.label!r} scores only {list(comp.categories)} prompts, but "
                f"the rows came with categories {categories!r} for {n} completions"
            )
        rows = [i for i in range(n) if categories[i] in comp.categories]
        values, details, fails = np.zeros(n), [{"scored": 0.0} for _ in range(n)], 0
        if rows:
            s = fn(*([xs[i] for i in rows] for xs in (prompts, completions, categories)))
            values[rows], fails = _values(comp, s, len(rows)), s.failures
            for i, d in zip(rows, s.details or [{}] * len(rows), strict=True):
                details[i] = {**d, "scored": 1.0}
        return values, details, fails


def _values(comp: Component, s: Scores, n: int) -> np.ndarray:
    """A component's values as float64, raising unless it gave one per completion."""
    values = np.asarray(s.values, dtype=np.float64)
    if values.shape != (n,):
        raise ValueError(
            f"reward {comp.name!r} returned {values.shape} values for {n} completions: "
            "a reward must give one float per completion"
        )
    return values


def _merge_details(per_part, n: int) -> list[dict] | None:
    if len(per_part) == 1:
        return per_part[0][2]
    rows = [{} for _ in range(n)]
    for comp, values, details in per_part:
        label = comp.label
        for i in range(n):
            rows[i][label] = float(values[i])
            if details:
                rows[i] |= {f"{label}/{k}": v for k, v in details[i].items() if k != "reward"}
    return rows


def build_scorer(
    components: list[Component],
    ctx: RewardContext,
    length_target: int = LENGTH_TARGET,
    length_per_word: float = 0.0,
) -> Scorer:
    """Bind checked components to what they need (a judge, a reward-model folder, a file)."""
    parts = [(c, REWARDS[c.name].build(ctx, **c.args)) for c in components]
    return Scorer(parts, length_target, length_per_word)


def scorer_from_fn(fn: RewardFn, length_target: int = LENGTH_TARGET, length_per_word: float = 0.0):
    """A Scorer around one plain reward function (tests, programs that hold the function)."""
    comp = Component("fn", 1.0, {"file": "<in-process>", "function": fn.__name__})
    return Scorer([(comp, plain_part(fn))], length_target, length_per_word)


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


def category_means(prefix: str, categories: list[str], values, details) -> dict:
    """`{prefix}/{category}/reward` (mean of the finite rewards) and `{prefix}/{category}/{part}`
    (criterion_means) per category: the rubric's criteria per prompt category, or the chess
    reward's parts (`format` = validity rate) per task type."""
    values = np.asarray(values, dtype=np.float64)
    out = {}
    for cat in sorted(set(categories)):
        idx = [i for i, c in enumerate(categories) if c == cat]
        finite = values[idx][np.isfinite(values[idx])]
        out[f"{prefix}/{cat}/reward"] = float(finite.mean()) if finite.size else None
        means = criterion_means([details[i] for i in idx]) if details else {}
        out |= {f"{prefix}/{cat}/{name}": v for name, v in means.items() if v is not None}
    return out
