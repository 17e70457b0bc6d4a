"""grpo.py on hand-made arrays; every expected number is worked out in the comments."""

import json
import math

from core import backend  # noqa: F401

import numpy as np
import pytest

# isort: split
from core.precision import all_finite

import mlx.core as mx

from grpo import (
    ADVANTAGE_CAP,
    BASELINES,
    AdaptiveKLController,
    LossConfig,
    advantages,
    baseline_update,
    cap_truncated,
    flatten_groups,
    group_advantages,
    low_variance_groups,
    policy_loss,
    reward_stats,
)

NAN = float("nan")


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.array(a), np.array(b, dtype=np.float64), rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------- advantages


def test_advantages_mean_baseline_without_std():
    # group 0: mean 2 -> [-1, 0, 1]; group 1: mean 20 -> [-10, 0, 10]
    adv = group_advantages([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]], scale_by_std=False)
    assert adv.dtype == mx.float32 and adv.shape == (2, 3)
    close(adv, [[-1, 0, 1], [-10, 0, 10]])


def test_advantages_scaled_by_population_std():
    # deviations [-1, 0, 1]: population var = (1 + 0 + 1) / 3 = 2/3, std = 0.816497
    # -> +-1 / 0.816497 = +-1.224745. Group 1 is the same shape x10, so the same advantages.
    adv = group_advantages([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])
    s = 1 / math.sqrt(2 / 3)
    close(adv, [[-s, 0, s], [-s, 0, s]])


def test_advantages_std_floor():
    # [0.5, 0.502]: mean 0.501, deviations +-0.001, std 0.001 < floor 0.01 -> +-0.001/0.01 = +-0.1
    close(group_advantages([[0.5, 0.502]]), [[-0.1, 0.1]], tol=1e-4)
    # a larger floor shrinks them further: +-0.001 / 0.1 = +-0.01
    close(group_advantages([[0.5, 0.502]], std_floor=0.1), [[-0.01, 0.01]], tol=1e-4)
    # exact ties: deviations are 0, so 0 whatever the floor
    close(group_advantages([[0.7, 0.7, 0.7]]), [[0, 0, 0]])


def test_advantages_nan_excluded_from_baseline_and_zero():
    # finite {1, 3}: mean 2 (not (1+3)/3), std 1 -> [-1, 0 (failed), 1]
    adv = group_advantages([[1.0, NAN, 3.0]])
    close(adv, [[-1, 0, 1]])
    # inf is a failed reward too; without scaling: finite {0, 4, 8}, mean 4 -> [-4, 0, 0, 4]
    close(group_advantages([[0.0, 4.0, math.inf, 8.0]], scale_by_std=False), [[-4, 0, 0, 4]])


def test_advantages_group_with_fewer_than_two_finite_is_zero():
    adv = group_advantages([[NAN, 5.0, NAN], [NAN, NAN, NAN], [0.0, 1.0, NAN]])
    # rows 0, 1: < 2 finite -> zeros. Row 2: finite {0, 1}, mean 0.5, std 0.5 -> [-1, 1, 0]
    close(adv, [[0, 0, 0], [0, 0, 0], [-1, 1, 0]])
    assert np.isfinite(np.array(adv)).all()


def test_advantages_validation():
    with pytest.raises(ValueError, match=r"\(B, G\)"):
        group_advantages([1.0, 2.0])
    with pytest.raises(ValueError, match="std_floor"):
        group_advantages([[1.0, 2.0]], std_floor=0.0)


def test_low_variance_groups():
    # stds: 0; [0, 1, 0.5] -> 0.408; [0.5, 0.505, 0.5] -> 0.00236; single finite -> dropped
    rewards = [[1.0, 1.0, 1.0], [0.0, 1.0, 0.5], [0.5, 0.505, 0.5], [NAN, 0.3, NAN]]
    assert np.array(low_variance_groups(rewards, min_std=0.01)).tolist() == [
        True,
        False,
        True,
        True,
    ]
    # min_std 0 drops only groups without a baseline
    assert np.array(low_variance_groups(rewards, 0.0)).tolist() == [False, False, False, True]


def test_reward_stats():
    # finite {1, 3, 2, 2}: mean 2, population std sqrt((1+1+0+0)/4) = 0.7071; one failed;
    # group 1 [2, 2] is flat -> 1 of 2 groups
    s = reward_stats([[1.0, 3.0, NAN], [2.0, 2.0, NAN]])
    assert s["reward_failed"] == 2
    assert s["reward_mean"] == pytest.approx(2.0)
    assert s["reward_std"] == pytest.approx(math.sqrt(0.5))
    assert s["frac_groups_zero_std"] == pytest.approx(0.5)


# ---------------------------------------------------------------------------------- baselines


def test_baseline_update_by_hand():
    # Step 1 (decay 0.5): P sees {1, 3}: first time -> mean 2, var ((1-2)^2 + (3-2)^2)/2 = 1;
    # A sees {5} (the NaN is a failed reward, left out): mean 5, var 0.
    s1 = baseline_update({}, [[1.0, 3.0], [NAN, 5.0]], ["P", "A"], decay=0.5)
    assert s1 == {"P": {"mean": 2.0, "var": 1.0}, "A": {"mean": 5.0, "var": 0.0}}
    # Step 2 (decay 0.75): P sees {0, 2}, batch mean 1, old mean 2: mean 0.75*2 + 0.25*1 = 1.75,
    # var 0.75*1 + 0.25*((0-2)^2 + (2-2)^2)/2 = 1.25. A sees {7, 7}: mean 0.75*5 + 0.25*7 = 5.5,
    # var 0.75*0 + 0.25*(7-5)^2 = 1.
    s2 = baseline_update(s1, [[0.0, 2.0], [7.0, 7.0]], ["P", "A"], decay=0.75)
    assert s2 == {"P": {"mean": 1.75, "var": 1.25}, "A": {"mean": 5.5, "var": 1.0}}
    assert s1["P"] == {"mean": 2.0, "var": 1.0}, "the old state is not changed"
    # A key with no finite reward this step keeps its state; an unseen one gets none.
    s3 = baseline_update(s2, [[NAN, NAN]], ["P"], decay=0.5)
    assert s3 == s2
    assert baseline_update({}, [[NAN, NAN]], ["Q"], decay=0.5) == {}


# EMA of key P: mean 0.5, var 0.04 (std 0.2). Key A has no history yet.
STATE = {"P": {"mean": 0.5, "var": 0.04}}


def test_ema_baseline_by_hand():
    rewards = [[0.2, 1.0], [-0.3, -0.3], [NAN, 0.7]]
    keys = ["P", "P", "A"]
    # Unscaled: P rows minus 0.5 -> [-0.3, 0.5] and [-0.8, -0.8]: the flat group, which the group
    # mean gives nothing, moves because it did worse than P usually does. A's first step is its
    # own baseline (finite {0.7}: mean 0.7) -> [0 (failed), 0].
    adv = advantages("ema", rewards, keys, STATE, scale_by_std=False)
    close(adv, [[-0.3, 0.5], [-0.8, -0.8], [0.0, 0.0]])
    # Scaled by the EMA std 0.2: [-1.5, 2.5], [-4, -4]; A's std is 0 -> floor 0.01, 0 / 0.01 = 0.
    adv = advantages("ema", rewards, keys, STATE, scale_by_std=True, std_floor=0.01)
    close(adv, [[-1.5, 2.5], [-4.0, -4.0], [0.0, 0.0]])


def test_adaptive_baseline_by_hand():
    rewards = [[0.2, 1.0], [-0.3, -0.3], [NAN, 0.9]]
    keys = ["P", "P", "P"]
    # Row 0 spreads (std 0.4 >= 0.01): group mean 0.6 -> [-0.4, 0.4]. Row 1 is flat and row 2 has
    # one finite reward: both compared with P's EMA 0.5 -> [-0.8, -0.8] and [0, 0.4].
    adv = advantages("adaptive", rewards, keys, STATE, scale_by_std=False)
    close(adv, [[-0.4, 0.4], [-0.8, -0.8], [0.0, 0.4]])
    # Scaled: row 0 by its group std 0.4 -> [-1, 1]; rows 1-2 by the EMA std 0.2.
    adv = advantages("adaptive", rewards, keys, STATE, scale_by_std=True, std_floor=0.01)
    close(adv, [[-1.0, 1.0], [-4.0, -4.0], [0.0, 2.0]])


@pytest.mark.parametrize("baseline", ["ema", "adaptive"])
def test_advantages_bounded_after_a_flat_step(baseline):
    # Step 1: every P reward is 0.0 -> the EMA is mean 0, var 0 (std -> floor 0.01).
    state = baseline_update({}, [[0.0, 0.0, 0.0, 0.0]], ["P"], decay=0.9)
    assert state == {"P": {"mean": 0.0, "var": 0.0}}
    # Step 2: a flat group [0.5, 0.5] (adaptive uses the EMA for it too) and one spread group.
    # Unbounded: 0.5 / 0.01 = 50. The cap clips it to ADVANTAGE_CAP = 5; the spread group under
    # ema gives (0 - 0)/0.01 = 0 and (0.5 - 0)/0.01 = 50 -> 5; under adaptive its group mean
    # 0.25 and std 0.25 give -1, +1.
    rewards = [[0.5, 0.5], [0.0, 0.5]]
    adv = np.array(advantages(baseline, rewards, ["P", "P"], state))
    assert np.abs(adv).max() <= ADVANTAGE_CAP == 5.0
    close(adv[0], [5.0, 5.0])
    close(adv[1], [0.0, 5.0] if baseline == "ema" else [-1.0, 1.0])
    # Without the cap (cap = inf) the blow-up the cap exists for: 50.
    close(advantages(baseline, rewards, ["P", "P"], state, cap=math.inf)[0], [50.0, 50.0])
    with pytest.raises(ValueError, match="cap=0"):
        advantages(baseline, rewards, ["P", "P"], state, cap=0)


def test_group_baseline_is_group_advantages_and_ignores_state():
    rewards = [[1.0, 2.0, 3.0], [-0.3, -0.3, -0.3]]
    adv = advantages("group", rewards, ["P", "P"], STATE)
    close(adv, group_advantages(rewards))
    close(adv[1], [0.0, 0.0, 0.0])  # a flat group: no signal from the group mean


def test_baseline_errors_name_the_fix():
    assert sorted(BASELINES) == ["adaptive", "ema", "group"]
    with pytest.raises(ValueError, match="baseline='mean'.*adaptive"):
        advantages("mean", [[1.0, 2.0]], ["P"], {})
    with pytest.raises(ValueError, match="one key per group"):
        advantages("ema", [[1.0, 2.0]], ["P", "A"], {})
    with pytest.raises(ValueError, match="decay=1.0"):
        baseline_update({}, [[1.0, 2.0]], ["P"], decay=1.0)
    with pytest.raises(ValueError, match="std_floor"):
        advantages("ema", [[1.0, 2.0]], ["P"], {}, std_floor=0.0)


# ------------------------------------------------------------------------------- policy losses

# Two completions, T = 3: completion 0 has 2 tokens (last column padding), completion 1 has 3.
MASK = mx.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
ADV = mx.array([1.0, -2.0])
ZEROS = mx.zeros((2, 3))


def loss_of(cfg, logp=ZEROS, old=ZEROS, ref=None, adv=ADV, mask=MASK, kl_coef=0.0):
    return policy_loss(logp, old, ref, adv, mask, cfg, kl_coef)


@pytest.mark.parametrize(
    "cfg, expected, grad0, grad1",
    [
        # ratio = 1 everywhere, so the per-token loss is -A: -1 on completion 0, +2 on completion 1.
        # grpo: sequence means -1 and 2, mean over 2 completions = 0.5.
        #   d/dlogp of -rho*A = -A*rho = -A, weighted 1/(|o_i| * 2): -1/4 and 2/6.
        (LossConfig("grpo"), 0.5, -0.25, 2 / 6),
        # dr_grpo, L = 5: sums -2/5 and 6/5, mean = (-0.4 + 1.2)/2 = 0.4; grads -A/(5*2).
        (LossConfig("dr_grpo", max_completion_len=5), 0.4, -0.1, 0.2),
        # dapo: (-1 - 1 + 2 + 2 + 2) / 5 tokens = 0.8; grads -A/5.
        (LossConfig("dapo"), 0.8, -0.2, 0.4),
    ],
)
def test_loss_variants_reduction_and_gradient(cfg, expected, grad0, grad1):
    loss, metrics = loss_of(cfg)
    close(loss, expected)
    close(metrics["policy_loss"], expected)
    close(metrics["ratio_mean"], 1.0)
    assert metrics["n_tokens"].item() == 5
    grad = mx.grad(lambda lp: loss_of(cfg, logp=lp)[0])(ZEROS)
    close(grad, [[grad0, grad0, 0.0], [grad1, grad1, grad1]])  # padding gets no gradient


def test_ratio_inside_clip_range_scales_loss():
    # log(pi/pi_old) = log 1.1 on every token: rho = 1.1 within [0.8, 1.2], loss = -1.1 * A,
    # so grpo = 1.1 * 0.5 = 0.55 and nothing is clipped.
    loss, m = loss_of(LossConfig("grpo"), logp=mx.full((2, 3), math.log(1.1)))
    close(loss, 0.55)
    close(m["ratio_mean"], 1.1)
    assert m["clip_frac_low"].item() == 0 and m["clip_frac_high"].item() == 0


# Clipping: each completion has ratios [0.5, 1.0, 1.5]; advantages +1 and -1.
CLIP_LOGP = mx.log(mx.array([[0.5, 1.0, 1.5], [0.5, 1.0, 1.5]]))
CLIP_ADV = mx.array([1.0, -1.0])
CLIP_MASK = mx.ones((2, 3))


def test_clipping_dapo_asymmetric():
    # eps_low 0.2, eps_high 0.28 (dapo default), clip range [0.8, 1.28].
    # A=+1: rho 0.5 -> min(0.5, 0.8) = 0.5 -> -0.5 (not clipped, gradient flows)
    #       rho 1.0 -> -1
    #       rho 1.5 -> min(1.5, 1.28) = 1.28 -> -1.28  (high clip active)
    # A=-1: rho 0.5 -> min(-0.5, -0.8) = -0.8 -> 0.8  (low clip active)
    #       rho 1.0 -> 1
    #       rho 1.5 -> min(-1.5, -1.28) = -1.5 -> 1.5 (not clipped: the pessimistic branch)
    # dapo: (-0.5 - 1 - 1.28 + 0.8 + 1 + 1.5) / 6 = 0.52 / 6 = 0.0866667
    cfg = LossConfig("dapo")
    assert cfg.clip_eps_high == 0.28
    loss, m = policy_loss(CLIP_LOGP, mx.zeros((2, 3)), None, CLIP_ADV, CLIP_MASK, cfg)
    close(loss, 0.52 / 6)
    close(m["clip_frac_low"], 1 / 6)
    close(m["clip_frac_high"], 1 / 6)
    close(m["ratio_max"], 1.5)
    # gradient -A * rho / 6 where unclipped, 0 where the clip is active
    g = mx.grad(lambda lp: policy_loss(lp, mx.zeros((2, 3)), None, CLIP_ADV, CLIP_MASK, cfg)[0])
    close(g(CLIP_LOGP), [[-0.5 / 6, -1 / 6, 0.0], [0.0, 1 / 6, 1.5 / 6]])


def test_clipping_eps_low_and_high_act_separately():
    old = mx.zeros((2, 3))
    # symmetric 0.2 (grpo): only the A=+1, rho=1.5 token changes: -1.2 instead of -1.28.
    # completion means: (-0.5 - 1 - 1.2)/3 = -0.9, (0.8 + 1 + 1.5)/3 = 1.1 -> grpo 0.1
    loss, _ = policy_loss(CLIP_LOGP, old, None, CLIP_ADV, CLIP_MASK, LossConfig("grpo"))
    close(loss, 0.1)
    # eps_low 0.1 (floor 0.9) only changes the A=-1, rho=0.5 token: 0.9 instead of 0.8
    # -> means -0.9 and 3.4/3 -> (-0.9 + 1.133333)/2 = 0.1166667
    cfg = LossConfig("grpo", clip_eps_low=0.1, clip_eps_high=0.2)
    loss, m = policy_loss(CLIP_LOGP, old, None, CLIP_ADV, CLIP_MASK, cfg)
    close(loss, (-0.9 + 3.4 / 3) / 2)
    # eps_high 0.6 (ceiling 1.6): rho 1.5 no longer clipped, high fraction drops to 0
    cfg = LossConfig("grpo", clip_eps_high=0.6)
    _, m = policy_loss(CLIP_LOGP, old, None, CLIP_ADV, CLIP_MASK, cfg)
    assert m["clip_frac_high"].item() == 0
    close(m["clip_frac_low"], 1 / 6)


def test_extreme_log_ratios_stay_finite_and_bounded():
    # log-ratios +-100 are clamped to +-20 (rho = e^20 = 4.85e8 or e^-20). With A = -1 and
    # rho = e^20 the pessimistic branch gives 4.85e8, clamped to max_token_loss = 10 -> no
    # gradient there. Token 2 (ratio e^-20, A = -1) is low-clipped: 0.8. Token 3: rho 1 -> 1.
    logp = mx.array([[50.0, -50.0, 0.0]])
    old = mx.array([[-50.0, 50.0, 0.0]])
    cfg = LossConfig("dapo")
    f = lambda lp: policy_loss(lp, old, None, mx.array([-1.0]), mx.ones((1, 3)), cfg)  # noqa: E731
    loss, m = f(logp)
    close(loss, (10 + 0.8 + 1) / 3)
    close(m["bound_frac"], 1 / 3)
    grad = mx.grad(lambda lp: f(lp)[0])(logp)
    assert all_finite(grad).item()
    close(grad, [[0.0, 0.0, 1 / 3]])  # only the unclipped, unbounded token moves


def test_padding_garbage_never_reaches_loss_or_gradient():
    # -inf and NaN log-probs at padded positions (and -inf - -inf = NaN in the ratio) are masked
    # before any arithmetic; the result equals the clean grpo case (0.5).
    logp = mx.array([[0.0, 0.0, -math.inf], [0.0, 0.0, 0.0]])
    old = mx.array([[0.0, 0.0, -math.inf], [0.0, 0.0, 0.0]])
    ref = mx.array([[0.0, 0.0, NAN], [0.0, 0.0, 0.0]])
    cfg = LossConfig("grpo")
    loss, m = loss_of(cfg, logp=logp, old=old, ref=ref, kl_coef=0.1)
    close(loss, 0.5)
    assert all_finite(m).item()
    grad = mx.grad(lambda lp: loss_of(cfg, logp=lp, old=old, ref=ref, kl_coef=0.1)[0])(logp)
    close(grad, [[-0.25, -0.25, 0.0], [2 / 6, 2 / 6, 2 / 6]])


def test_kl_term_added_with_coefficient():
    # A = 0, so only the KL term is left. Reverse k3 with log r = ref - logp:
    #   token 0: log r = log 2 -> 2 - 1 - 0.693147 = 0.306853;  token 1: log r = 0 -> 0.
    # grpo: one completion, mean (0.306853 + 0)/2 = 0.153426; loss = 0.1 * 0.153426 = 0.0153426
    logp = mx.zeros((1, 2))
    ref = mx.array([[math.log(2.0), 0.0]])
    cfg = LossConfig("grpo")
    loss, m = policy_loss(logp, logp, ref, mx.array([0.0]), mx.ones((1, 2)), cfg, kl_coef=0.1)
    k3 = 2 - 1 - math.log(2)
    close(m["kl_loss"], k3 / 2)
    close(m["kl_mean"], k3 / 2)
    close(loss, 0.1 * k3 / 2)
    close(m["policy_loss"], 0.0)
    # The gradient is the reverse KL's, d^2/2's with d = logp - ref (kl_gradient_term), not
    # k3's: token 0 -> d = -log 2, token 1 -> 0; times 0.1 / 2 tokens = -0.0346574
    g = mx.grad(
        lambda lp: policy_loss(lp, logp, ref, mx.array([0.0]), mx.ones((1, 2)), cfg, 0.1)[0]
    )
    close(g(logp), [[-0.1 * math.log(2) / 2, 0.0]])
    # kl_coef as an mx.array gives the same loss (an adaptive coefficient needs no recompile)
    loss2, _ = policy_loss(logp, logp, ref, mx.array([0.0]), mx.ones((1, 2)), cfg, mx.array(0.1))
    close(loss2, loss)


@pytest.mark.parametrize(
    "direction, per_token, grad_token",
    [
        # One completion, two tokens, A = 0, log r = ref - logp = [log 2, 0], r = [2, 1];
        # d = logp - ref = -log r. Values are k3's; gradients kl_gradient_term's.
        # reverse k3 = r - 1 - log r:        [0.306853, 0]; gradient d = [-0.693147, 0]
        ("reverse", 2 - 1 - math.log(2), -math.log(2)),
        # forward k3 = r log r - r + 1:      [0.386294, 0]; gradient 1 - r = [-1, 0]
        ("forward", 2 * math.log(2) - 2 + 1, -1.0),
        # symmetric: the mean of the two:    [0.346574, 0]; gradient the mean too
        ("symmetric", math.log(2) / 2, (-1.0 - math.log(2)) / 2),
    ],
)
def test_each_kl_direction_changes_the_loss_as_worked_out(direction, per_token, grad_token):
    # grpo reduction: mean over the two tokens; loss = 0.1 * per_token / 2. Every direction is
    # logged whichever is in the loss, and kl_mean is the configured one's.
    logp, ref = mx.zeros((1, 2)), mx.array([[math.log(2.0), 0.0]])
    cfg = LossConfig("grpo", kl_direction=direction)

    def loss(lp):
        return policy_loss(lp, logp, ref, mx.array([0.0]), mx.ones((1, 2)), cfg, 0.1)

    value, m = loss(logp)
    close(value, 0.1 * per_token / 2)
    close(m["kl_mean"], per_token / 2)
    close(m[f"kl/{direction}"], per_token / 2)
    close(m["kl/reverse"], (2 - 1 - math.log(2)) / 2)
    close(m["kl/forward"], (2 * math.log(2) - 1) / 2)
    close(mx.grad(lambda lp: loss(lp)[0])(logp), [[0.1 * grad_token / 2, 0.0]])


def _divergence(theta: mx.array, ref_logp: mx.array, direction: str) -> mx.array:
    # Exact divergences of a categorical policy softmax(theta) from the reference.
    logp = theta - mx.logsumexp(theta)
    reverse = mx.sum(mx.exp(logp) * (logp - ref_logp))  # KL(pi || ref)
    forward = mx.sum(mx.exp(ref_logp) * (ref_logp - logp))  # KL(ref || pi)
    return {"reverse": reverse, "forward": forward, "symmetric": 0.5 * (reverse + forward)}[
        direction
    ]


def _expected_kl_gradient(theta, ref_logp, cfg: LossConfig) -> np.ndarray:
    # sum_x pi(x) * d/dtheta of the loss of a one-token completion x, differentiated as the trainer
    # does (on-policy: old_logp = logp, advantage 0, kl_coef 1): the exact on-policy expectation.
    pi = np.exp(np.array(theta - mx.logsumexp(theta), dtype=np.float64))
    total = np.zeros(theta.shape[0])
    for x in range(theta.shape[0]):

        def loss(t, x=x):
            lp = (t - mx.logsumexp(t))[x].reshape(1, 1)
            ref = ref_logp[x].reshape(1, 1)
            old = mx.stop_gradient(lp)
            return policy_loss(lp, old, ref, mx.zeros(1), mx.ones((1, 1)), cfg, 1.0)[0]

        total += pi[x] * np.array(mx.grad(loss)(theta), dtype=np.float64)
    return total


@pytest.mark.parametrize("direction", ["reverse", "forward", "symmetric"])
@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_kl_gradient_is_the_named_divergences_for_every_estimator(estimator, direction):
    # A 6-token categorical policy and a fixed reference, far apart (KL ~ 0.5). Before the fix only
    # (k2, reverse) matched: k3 + reverse gave the forward KL's gradient (relative error 0.28 vs
    # the reverse's), k1 + reverse a zero expected gradient (error 1.0).
    rng = np.random.default_rng(0)
    theta = mx.array(rng.normal(size=6).astype(np.float32))
    ref_logp = mx.log(mx.softmax(mx.array(rng.normal(size=6).astype(np.float32))))
    want = np.array(mx.grad(lambda t: _divergence(t, ref_logp, direction))(theta), np.float64)
    got = _expected_kl_gradient(
        theta, ref_logp, LossConfig("grpo", kl_estimator=estimator, kl_direction=direction)
    )
    assert np.linalg.norm(want) > 0.1
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert rel < 0.05, f"{estimator}/{direction}: expected gradient off by {rel:.3f} (relative)"


def test_kl_value_is_the_estimators_and_the_controller_reads_it():
    # The loss's KL value is the configured estimator's (k1 here: -log r = -log 2 at token 0,
    # 0 at token 1 -> mean -0.346574), not the gradient surrogate's (d^2/2 = 0.240227).
    logp, ref = mx.zeros((1, 2)), mx.array([[math.log(2.0), 0.0]])
    cfg = LossConfig("grpo", kl_estimator="k1")
    _, m = policy_loss(logp, logp, ref, mx.zeros(1), mx.ones((1, 2)), cfg, 1.0)
    close(m["kl_loss"], -math.log(2) / 2)
    close(m["kl_mean"], -math.log(2) / 2)


def test_kl_reduced_like_policy_term():
    # KL per token 0.306853 on completion 0's two tokens, 0 on completion 1's three tokens.
    # grpo: (0.306853 + 0) / 2 completions = 0.153426; dapo: 2 * 0.306853 / 5 = 0.122741
    ref = mx.array([[math.log(2.0), math.log(2.0), 7.0], [0.0, 0.0, 0.0]])  # 7.0 is padding
    adv = mx.zeros((2,))
    k3 = 2 - 1 - math.log(2)
    _, m = loss_of(LossConfig("grpo"), ref=ref, adv=adv, kl_coef=1.0)
    close(m["kl_loss"], k3 / 2)
    _, m = loss_of(LossConfig("dapo"), ref=ref, adv=adv, kl_coef=1.0)
    close(m["kl_loss"], 2 * k3 / 5)
    close(m["kl_mean"], 2 * k3 / 5)


def test_filtered_groups_drop_policy_and_kl_terms():
    # B=2 groups of G=2. Group 1 is dropped: its rows are masked, so the loss equals the loss on
    # group 0 alone, KL included, and the denominator counts only group 0's 2 completions.
    adv = mx.array([[1.0, -1.0], [5.0, -5.0]])
    mask = mx.ones((4, 2))
    ref = mx.full((4, 2), math.log(2.0))
    flat_adv, flat_mask = flatten_groups(adv, mask, keep=mx.array([True, False]))
    close(flat_adv, [1, -1, 5, -5])
    close(flat_mask, [[1, 1], [1, 1], [0, 0], [0, 0]])
    logp = mx.zeros((4, 2))
    loss, m = policy_loss(logp, logp, ref, flat_adv, flat_mask, LossConfig("grpo"), 0.5)
    # policy: means -1 and +1 -> 0; KL: every kept token 0.306853 -> loss 0.5 * 0.306853
    close(loss, 0.5 * (2 - 1 - math.log(2)))
    assert m["n_tokens"].item() == 4
    # every group dropped: loss 0, not NaN
    _, empty = flatten_groups(adv, mask, keep=mx.array([False, False]))
    loss, m = policy_loss(logp, logp, ref, flat_adv, empty, LossConfig("grpo"), 0.5)
    # exact: with every row masked there is nothing to sum
    assert loss.item() == 0.0 and all_finite(m).item()


@pytest.mark.slow  # the CPU compiles fused kernels with a C++ compiler: 20-50 s, cold cache
def test_policy_loss_compiles():
    # mx.compile needs every array as an argument (no captured globals)
    cfg = LossConfig("dapo")

    def f(logp, old, ref, adv, mask, kl_coef):
        return policy_loss(logp, old, ref, adv, mask, cfg, kl_coef)[0]

    args = (mx.full((2, 3), 0.1), ZEROS, ZEROS, ADV, MASK, mx.array(0.1))
    close(mx.compile(f)(*args), f(*args))


def test_policy_loss_input_errors():
    cfg = LossConfig("grpo")
    with pytest.raises(ValueError, match="ref_logp is None"):
        loss_of(cfg, kl_coef=0.1)
    with pytest.raises(ValueError, match="float32"):
        loss_of(cfg, logp=ZEROS.astype(mx.float16))
    with pytest.raises(ValueError, match="advantages"):
        loss_of(cfg, adv=mx.zeros((2, 1)))
    with pytest.raises(ValueError, match="mask has shape"):
        loss_of(cfg, mask=mx.ones((2, 4)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"loss_type": "ppo"}, "loss_type='ppo'.*dapo"),
        ({"loss_type": "dr_grpo"}, "max_completion_len=None.*max_new_tokens"),
        ({"loss_type": "dr_grpo", "max_completion_len": 0}, "max_completion_len=0"),
        ({"clip_eps_low": 1.0}, r"clip_eps_low=1.0.*\(0, 1\)"),
        ({"clip_eps_high": 0.0}, "clip_eps_high=0.0"),
        ({"max_log_ratio": 100.0}, "max_log_ratio=100.0"),
        ({"max_token_loss": 0.0}, "max_token_loss=0.0"),
        ({"kl_estimator": "k4"}, "kl_estimator='k4'.*k3"),
        ({"kl_direction": "up"}, "kl_direction='up'.*reverse"),
    ],
)
def test_loss_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LossConfig(**kwargs)


def test_loss_config_defaults():
    assert LossConfig("grpo").clip_eps_high == 0.2
    assert LossConfig("dapo").clip_eps_high == 0.28
    assert LossConfig("dapo", clip_eps_high=0.3).clip_eps_high == 0.3


# ------------------------------------------------------------------------------ KL controller


def test_adaptive_kl_controller_by_hand():
    kl = AdaptiveKLController(coef=0.1, target_kl=0.01, horizon=100)
    # kl 0.02: error = clip(2 - 1) = 0.2 -> coef *= 1 + 0.2 * 10/100 = 1.02 -> 0.102
    assert kl.update(0.02, n_steps=10) == pytest.approx(0.102)
    # kl 0.011: error 0.1 -> *= 1.01 -> 0.10302
    assert kl.update(0.011, n_steps=10) == pytest.approx(0.10302)
    # kl 0: error clip(-1) = -0.2 -> *= 0.98 -> 0.1009596
    assert kl.update(0.0, n_steps=10) == pytest.approx(0.1009596)
    # non-finite observation: unchanged
    assert kl.update(float("nan"), n_steps=10) == pytest.approx(0.1009596)
    # state round-trips through JSON (checkpointing)
    back = AdaptiveKLController.from_state_dict(json.loads(json.dumps(kl.state_dict())))
    assert back == kl
    assert back.update(0.02, 10) == pytest.approx(0.1009596 * 1.02)


def test_fixed_kl_controller():
    kl = AdaptiveKLController(coef=0.04)
    assert not kl.adaptive
    assert kl.update(5.0, n_steps=1000) == 0.04
    assert AdaptiveKLController.from_state_dict(kl.state_dict()) == kl


def test_kl_controller_validation():
    with pytest.raises(ValueError, match="coef=-1"):
        AdaptiveKLController(coef=-1.0)
    with pytest.raises(ValueError, match="target_kl=0"):
        AdaptiveKLController(coef=0.1, target_kl=0.0)
    with pytest.raises(ValueError, match="must start > 0"):
        AdaptiveKLController(coef=0.0, target_kl=0.01)


# ------------------------------------------------------------- all_finite (core/precision.py)


def test_all_finite():
    good = {"w": mx.ones((3,)), "layers": [{"b": mx.zeros((2,))}, {"b": mx.array([1, 2])}]}
    assert all_finite(good).item() is True
    assert all_finite({}).item() is True
    assert all_finite({**good, "x": mx.array([1.0, NAN])}).item() is False
    assert all_finite([mx.array([-math.inf])]).item() is False
    assert all_finite({"loss": float("inf")}).item() is False


def test_cap_truncated_lowers_to_the_lowest_ended_answer():
    nan = float("nan")
    rewards = [[1.0, 3.0, 0.5, nan], [5.0, 4.0, 0.0, 2.0], [nan, 7.0, 2.0, 9.0]]
    finished = [[True, False, False, False], [False] * 4, [True, True, False, False]]
    out, n = cap_truncated(rewards, finished)
    # group 0: the one ended answer earned 1.0, so 3.0 -> 1.0; 0.5 stays; NaN stays NaN.
    # group 1: nothing ended: unchanged. group 2: the ended NaN is ignored, 7.0 is the floor.
    want = [[1.0, 1.0, 0.5, nan], [5.0, 4.0, 0.0, 2.0], [nan, 7.0, 2.0, 7.0]]
    np.testing.assert_array_equal(out, np.array(want))
    assert n == 2
    with pytest.raises(ValueError, match="same"):
        cap_truncated([[1.0, 2.0]], [[True]])
