"""core/stats.py against known cases: Wilson by hand, bootstrap against the normal interval."""

import math

from core import stats

import numpy as np
import pytest


def test_wilson_known_values():
    # k=8, n=10: p=0.8, z=1.96; centre (0.8 + 0.19208)/1.38415 = 0.71678, half 0.22651
    lo, hi = stats.wilson(8, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.4902, 0.9433)
    lo, hi = stats.wilson(0, 60)  # a rate of 0 still has an upper bound: 1.96^2/(60+1.96^2)
    assert lo == 0.0 and hi == pytest.approx(0.0602, abs=1e-4)
    assert stats.wilson(60, 60)[1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="n=0"):
        stats.wilson(0, 0)
    with pytest.raises(ValueError, match="k=11"):
        stats.wilson(11, 10)


def test_pair_credit_ties_half_and_failed_as_the_caller_says():
    # pairs: better above, below, tied, better failed (NaN), worse infinite
    better = np.array([0.7, 0.1, 0.5, np.nan, 0.3])
    worse = np.array([0.2, 0.4, 0.5, 0.3, np.inf])
    assert stats.pair_credit(better, worse, failed=0.5).tolist() == [1.0, 0.0, 0.5, 0.5, 0.5]
    assert stats.pair_credit(better, worse, failed=0.0).tolist() == [1.0, 0.0, 0.5, 0.0, 0.0]
    # accuracy with a tie counted half: (1 + 0 + 0.5) / 3
    assert stats.pair_credit(better[:3], worse[:3], failed=0.0).mean() == pytest.approx(0.5)


def test_bootstrap_mean_constant_and_normal_theory():
    assert stats.bootstrap_mean([2.5] * 30) == (2.5, 2.5)
    x = np.random.default_rng(1).normal(3.0, 2.0, 400)
    lo, hi = stats.bootstrap_mean(x)
    se = x.std(ddof=1) / math.sqrt(len(x))
    assert lo == pytest.approx(x.mean() - 1.96 * se, abs=0.05)
    assert hi == pytest.approx(x.mean() + 1.96 * se, abs=0.05)
    assert stats.bootstrap_mean(x) == (lo, hi)  # seeded
    with pytest.raises(ValueError, match="empty"):
        stats.bootstrap_mean([float("nan")])


def test_figure_picks_wilson_for_rates_and_never_gives_nan():
    rate = stats.figure([1, 0, 1, 1, 1, 1, 1, 1, 0, 1])
    assert rate["ci_method"] == "wilson" and rate["n"] == 10 and rate["value"] == 0.8
    assert [round(v, 4) for v in rate["ci95"]] == [0.4902, 0.9433]
    mean = stats.figure([1.5, 2.0, float("nan"), 3.0])
    assert mean["ci_method"] == "bootstrap" and mean["n"] == 3
    assert mean["value"] == pytest.approx(6.5 / 3)
    assert stats.figure([]) == {"value": None, "n": 0, "ci95": None, "ci_method": None}
    assert stats.show(rate) == "0.800 [0.49, 0.94] n=10" and stats.show(stats.figure([])) == "-"


def test_paired_difference_sign_and_zero():
    rng = np.random.default_rng(0)
    hard = rng.normal(0, 5, 80)  # prompt difficulty, shared by both models: cancels when paired
    a, b = hard, hard + 0.5 + rng.normal(0, 0.2, 80)
    d = stats.paired_diff(a, b)
    assert d["diff"] == pytest.approx(0.5, abs=0.06) and d["n"] == 80
    assert not d["contains_zero"] and d["ci95"][0] > 0
    u = stats.unpaired_diff(a, b)  # the same data unpaired: the difficulty swamps the 0.5
    assert u["contains_zero"]
    same = stats.paired_diff(a, a + rng.normal(0, 0.2, 80))
    assert same["contains_zero"]
    assert stats.paired_diff([1.0, float("nan")], [2.0, 3.0])["n"] == 1
    assert stats.paired_diff([], [])["diff"] is None
    with pytest.raises(ValueError, match="pair them"):
        stats.paired_diff([1.0, 2.0], [1.0])


def test_auroc_by_hand_ties_half_and_empty_none():
    assert stats.auroc([3, 2], [1, 2.5]) == pytest.approx(0.75)  # 3>1, 3>2.5, 2>1; 2<2.5
    assert stats.auroc([1.0], [1.0]) == 0.5
    assert stats.auroc([], [1.0]) is None and stats.auroc([1.0], []) is None
