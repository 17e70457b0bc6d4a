"""Intervals for the figures evaluate.py and the graders print: every rate and mean with its n.

`wilson(k, n)` is the Wilson score interval of a proportion (good at small n and near 0 or 1,
where the normal interval leaves [0, 1]). `bootstrap_mean(values)` is the percentile bootstrap
interval of a mean. `paired_diff(a, b)` is the difference of two models' means on the same
prompts (b - a) with a bootstrap interval that resamples prompts jointly, so the prompts' own
difficulty cancels; `unpaired_diff` resamples each side alone, for different prompt sets.
`figure(values)` packs one figure as {"value", "n", "ci95", "ci_method"}: Wilson for 0/1
values, bootstrap for anything else; an empty list gives value, ci95 None and n 0 (never NaN).
`show` and `cell` write a figure (and a paired difference) as table text. `pair_credit` is the
per-pair credit of a ranking of preference pairs (a tie half); `auroc` the chance that a positive
scores above a negative (a tie half). Everything is seeded: the same
input gives the same interval.
"""

import math
from collections.abc import Sequence

import numpy as np

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
N_BOOT = 2000


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials (95% by default)."""
    if n <= 0:
        raise ValueError(f"wilson interval of {k} in n={n}: n must be >= 1 (no data, no interval)")
    if not 0 <= k <= n:
        raise ValueError(f"wilson interval: k={k} must be in 0..n={n}")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _clean(values) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    return x[np.isfinite(x)]


def bootstrap_mean(values, n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean of `values` (finite ones)."""
    return bootstrap_stat(values, np.mean, n_boot, seed)


def bootstrap_stat(values, stat=np.median, n_boot: int = N_BOOT, seed: int = 0):
    """Percentile bootstrap 95% interval of `stat` (a numpy reduction taking axis=1)."""
    x = _clean(values)
    if len(x) == 0:
        raise ValueError("bootstrap interval of an empty set: no data, no interval")
    rng = np.random.default_rng(seed)
    draws = stat(x[rng.integers(0, len(x), size=(n_boot, len(x)))], axis=1)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def finite_mean(values) -> float | None:
    """The mean of the values that are numbers and finite (None and NaN left out), or None."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return float(np.mean(vals)) if vals else None


def cohen_kappa(a: Sequence, b: Sequence) -> float | None:
    """Cohen's kappa of two raters' labels on the same items: (p_o - p_e) / (1 - p_e), p_o the
    share of items they agree on, p_e the agreement their label rates give by chance. None when
    there are no items or p_e is 1 (both raters used one and the same label throughout)."""
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} labels against {len(b)}; they must be paired")
    n = len(a)
    if n == 0:
        return None
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pe = sum((list(a).count(c) / n) * (list(b).count(c) / n) for c in set(a) | set(b))
    return None if pe >= 1.0 else (po - pe) / (1.0 - pe)


def pair_credit(better, worse, failed: float) -> np.ndarray:
    """Per preference pair, whether a scorer ranks it right: 1 where the better answer scores
    above the worse, 0 below, 0.5 on a tie, and `failed` where either score is not finite (the
    judge could not score it). Pairwise accuracy is its mean. bench_judge counts a failed pair
    0.5, as a tie; train_rm and quantize count it 0, a miss (knowledge/reward_model.md)."""
    b, w = np.asarray(better), np.asarray(worse)
    credit = np.where(b > w, 1.0, np.where(b < w, 0.0, 0.5))
    return np.where(np.isfinite(b) & np.isfinite(w), credit, failed)


def auroc(pos, neg) -> float | None:
    """P(a positive's score > a negative's), ties counting a half; None without both kinds."""
    pos, neg = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    if pos.size == 0 or neg.size == 0:
        return None
    p, n = pos[:, None], neg[None, :]
    return float(np.mean((p > n) + 0.5 * (p == n)))


def is_binary(x: np.ndarray) -> bool:
    return bool(len(x)) and bool(np.all((x == 0) | (x == 1)))


def figure(values: Sequence[float]) -> dict:
    """{"value", "n", "ci95", "ci_method"} of a mean over `values` (NaNs dropped and counted in n
    only when finite): Wilson for 0/1 values (a rate), bootstrap otherwise."""
    x = _clean(values)
    if len(x) == 0:
        return {"value": None, "n": 0, "ci95": None, "ci_method": None}
    if is_binary(x):
        lo, hi = wilson(int(x.sum()), len(x))
        method = "wilson"
    else:
        lo, hi = bootstrap_mean(x)
        method = "bootstrap"
    return {"value": float(x.mean()), "n": int(len(x)), "ci95": [lo, hi], "ci_method": method}


def paired_diff(a, b, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """mean(b) - mean(a) over the same items (prompt i is a[i] and b[i]; pairs with a NaN on
    either side dropped), with a bootstrap interval resampling the pairs jointly:
    {"diff", "n", "ci95", "contains_zero"}."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(
            f"paired difference of {a.shape} and {b.shape} values: pair them by prompt"
        )
    keep = np.isfinite(a) & np.isfinite(b)
    d = b[keep] - a[keep]
    if len(d) == 0:
        return {"diff": None, "n": 0, "ci95": None, "contains_zero": None}
    lo, hi = bootstrap_mean(d, n_boot, seed)
    return {"diff": float(d.mean()), "n": int(len(d)), "ci95": [lo, hi],
            "contains_zero": bool(lo <= 0 <= hi)}  # fmt: skip


def unpaired_diff(a, b, n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """mean(b) - mean(a) for two independent samples, each resampled on its own."""
    a, b = _clean(a), _clean(b)
    if len(a) == 0 or len(b) == 0:
        return {"diff": None, "n": 0, "ci95": None, "contains_zero": None}
    rng = np.random.default_rng(seed)
    ma = a[rng.integers(0, len(a), size=(n_boot, len(a)))].mean(axis=1)
    mb = b[rng.integers(0, len(b), size=(n_boot, len(b)))].mean(axis=1)
    lo, hi = np.percentile(mb - ma, [2.5, 97.5])
    return {"diff": float(b.mean() - a.mean()), "n": int(min(len(a), len(b))),
            "ci95": [float(lo), float(hi)], "contains_zero": bool(lo <= 0 <= hi)}  # fmt: skip


def show(fig: dict, digits: int = 3) -> str:
    """'0.417 [0.29, 0.55] n=60' for a table cell; '-' for an empty figure."""
    if fig.get("value") is None:
        return "-"
    lo, hi = fig["ci95"]
    return f"{fig['value']:.{digits}f} [{lo:.{digits - 1}f}, {hi:.{digits - 1}f}] n={fig['n']}"


def cell(fig: dict | None, diff: dict | None) -> str:
    """'0.42 [0.30,0.55]' for a figure; a later model's adds its difference from the base,
    '+0.10*' when its 95% interval excludes 0 and '+0.02 n.s.' when it contains 0."""
    if not fig or fig.get("value") is None:
        return "-"
    text = f"{fig['value']:.3g}"
    if fig.get("ci95"):
        lo, hi = fig["ci95"]
        text += f" [{lo:.2g},{hi:.2g}]"
    if diff and diff.get("diff") is not None:
        text += f" {diff['diff']:+.2g}{' n.s.' if diff['contains_zero'] else '*'}"
    return text
