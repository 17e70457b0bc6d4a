"""GRPO math for rl-values: advantages and their baselines, the clipped loss, the KL controller.

Implements exactly these policy-gradient variants (`LossConfig.loss_type`), all with a token-level
PPO-clipped importance ratio against the rollout-time (old) log-probs and an optional per-token
KL penalty to a frozen reference policy added to the loss (not folded into the reward):
  grpo     DeepSeekMath GRPO (Shao et al. 2024): mean over each completion's tokens, then mean
           over completions; advantages (r - mean) / std within the group.
  dr_grpo  Dr. GRPO (Liu et al. 2025): sum over tokens / a constant max_completion_len, mean over
           completions; use with group_advantages(scale_by_std=False). No length or std bias.
  dapo     DAPO's token-level loss with clip-higher (Yu et al. 2025): sum over every token of the
           batch / token count, eps_high (0.28) > eps_low (0.2).
Baselines (`advantages`, one function per name): `group`, the group mean (GRPO); `ema`, a moving
average of earlier rewards per key (task type or prompt category); `adaptive`, the group mean
where the group's rewards spread and the key's EMA where they are flat. The KL penalty's gradient is
that of the divergence `kl_direction` names, reverse / forward / symmetric
(kernels.kl_gradient_term); its value is `kl_estimator`'s estimate of the same divergence
(kernels.kl_per_token), and every direction's value is measured every call.
Truncated answers (cut at the token cap, `TRUNCATION`): `keep` scores them as they are; `cap`
lowers a truncated answer's reward to at most the lowest reward of an answer in its group that
ended, so running into the cap never pays more than ending; `mask` leaves them out of the loss
(DAPO's overlong filtering) while they still count in the group's baseline.
Not implemented: GSPO's sequence-level ratio, value functions / GAE, DAPO's dynamic resampling and
soft overlong penalty (the trainer may drop groups with `low_variance_groups`). No model code,
no trainer: arrays in, arrays out.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

import numpy as np

# isort: split
from core.kernels import (
    KL_DIRECTIONS,
    KL_ESTIMATORS,
    kl_gradient_term,
    kl_per_token,
    masked_mean,
    masked_sum,
)

import mlx.core as mx

# --------------------------------------------------------------------------------------------
# Advantages (host side: rewards come from the judge one float per completion, NaN = failed)


def _group_stats(rewards) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """finite mask (B, G), finite count (B,), mean (B,) and population std (B,) over finite."""
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError(
            f"rewards must be (B, G) = (prompts, completions per prompt), got {r.shape}"
        )
    finite = np.isfinite(r)
    n = finite.sum(axis=1)
    safe_n = np.maximum(n, 1)
    mean = np.where(finite, r, 0.0).sum(axis=1) / safe_n
    dev = np.where(finite, r - mean[:, None], 0.0)
    std = np.sqrt((dev**2).sum(axis=1) / safe_n)
    return finite, n, mean, std


def group_advantages(rewards, *, scale_by_std: bool = True, std_floor: float = 1e-2) -> mx.array:
    """Group-relative advantages: rewards (B, G) float, NaN/inf for a failed reward -> (B, G) f32.

    A[b, g] = r[b, g] - mean_b, divided by max(std_b, std_floor) when `scale_by_std`, where
    mean_b and std_b are over the FINITE rewards of group b and std is the population std
    (ddof=0: the scaled advantages of a group have unit RMS; TRL uses ddof=1). The floor stops a
    near-tie of continuous rubric scores (0.70 vs 0.71) from being blown up to +-1.
    A failed reward is left out of the baseline and gets advantage 0 (no gradient signal); a group
    with fewer than 2 finite rewards has no baseline and gets all zeros. Never returns NaN.
    """
    _check_floor(scale_by_std, std_floor)
    return mx.array(_group(np.asarray(rewards, np.float64), scale_by_std, std_floor))


def _check_floor(scale_by_std: bool, std_floor: float) -> None:
    if scale_by_std and not std_floor > 0:
        raise ValueError(f"std_floor={std_floor}: must be > 0 with scale_by_std (e.g. 1e-2)")


def _group(r: np.ndarray, scale_by_std: bool, std_floor: float) -> np.ndarray:
    finite, n, mean, std = _group_stats(r)
    adv = np.where(finite, r - mean[:, None], 0.0)
    if scale_by_std:
        adv = adv / np.maximum(std, std_floor)[:, None]
    adv[n < 2] = 0.0
    return adv.astype(np.float32)


def low_variance_groups(rewards, min_std: float) -> mx.array:
    """(B,) bool, True for groups to drop: population std of the finite rewards < min_std, or
    fewer than 2 finite rewards. Continuous rubric scores rarely tie exactly, so "no signal" is
    a threshold, not std == 0 (DAPO's dynamic sampling drops exact ties only)."""
    if min_std < 0:
        raise ValueError(f"min_std={min_std}: must be >= 0 (0 drops only single-reward groups)")
    _, n, _, std = _group_stats(rewards)
    return mx.array((n < 2) | (std < min_std))


def reward_stats(rewards) -> dict[str, float]:
    """Host-side summary for logging: mean/std of finite rewards, failed count, flat groups."""
    finite, n, _, std = _group_stats(rewards)
    r = np.asarray(rewards, dtype=np.float64)[finite]
    return {
        "reward_mean": float(r.mean()) if r.size else float("nan"),
        "reward_std": float(r.std()) if r.size else float("nan"),
        "reward_failed": int((~finite).sum()),
        "frac_groups_zero_std": float(((n < 2) | (std == 0)).mean()),
    }


# --------------------------------------------------------------------------------------------
# Baselines: what each reward is compared with. One function per variant, chosen by name in
# `advantages`; the EMA state is a plain dict {key: {"mean", "var"}} that the trainer keeps in
# its checkpoints. A key is the record's category (a values prompt category, a chess task type).


def baseline_update(state: dict, rewards, keys: Sequence[str], decay: float) -> dict:
    """The per-key EMA after this step (a new dict; `state` is not changed).

    For each key with finite rewards this step (x, from all its groups): the first time,
    mean = mean(x) and var = mean((x - mean)^2); after that, with m the previous mean,
    mean <- decay * m + (1 - decay) * mean(x), var <- decay * var + (1 - decay) * mean((x - m)^2).
    var tracks the squared error of the baseline the step actually used (m), drift included.
    Keys without a finite reward this step keep their state."""
    if not 0.0 <= decay < 1.0:
        raise ValueError(f"decay={decay}: must be in [0, 1) (0.9 averages over ~10 steps)")
    r = _check_keys(rewards, keys)
    new = {key: dict(v) for key, v in state.items()}
    for key in sorted(set(keys)):
        x = r[[i for i, k in enumerate(keys) if k == key]]
        x = x[np.isfinite(x)]
        if x.size == 0:
            continue
        if key not in new:
            new[key] = {"mean": float(x.mean()), "var": float(x.var())}
            continue
        m, v = new[key]["mean"], new[key]["var"]
        new[key] = {
            "mean": float(decay * m + (1.0 - decay) * x.mean()),
            "var": float(decay * v + (1.0 - decay) * np.mean((x - m) ** 2)),
        }
    return new


def _check_keys(rewards, keys: Sequence[str]) -> np.ndarray:
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 2 or len(keys) != r.shape[0]:
        raise ValueError(
            f"rewards {r.shape} and {len(keys)} keys: need (B, G) rewards and one key per group"
        )
    return r


def _ema(r, keys, state, scale_by_std, std_floor) -> np.ndarray:
    # A key not yet in `state` (its first step) is its own baseline: this step's statistics.
    first = baseline_update({}, r, keys, 0.0)
    stats = [state.get(k) or first.get(k) for k in keys]
    base = np.array([s["mean"] if s else np.nan for s in stats])  # (B,)
    std = np.sqrt([s["var"] if s else np.nan for s in stats])
    finite = np.isfinite(r) & np.isfinite(base)[:, None]
    adv = np.where(finite, r - np.where(np.isfinite(base), base, 0.0)[:, None], 0.0)
    if scale_by_std:
        adv = adv / np.maximum(np.nan_to_num(std), std_floor)[:, None]
    return adv.astype(np.float32)


def _adaptive(r, keys, state, scale_by_std, std_floor) -> np.ndarray:
    # A group whose rewards spread keeps GRPO's group mean; a flat one (std < std_floor, or
    # fewer than 2 finite rewards) has no within-group signal and is compared with its key's EMA.
    _, n, _, std = _group_stats(r)
    flat = (n < 2) | (std < std_floor)
    ema = _ema(r, keys, state, scale_by_std, std_floor)
    return np.where(flat[:, None], ema, _group(r, scale_by_std, std_floor))


# The one place a --baseline picks its function; TrainConfig validates against these keys.
BASELINES: dict[str, Callable] = {
    "group": lambda r, keys, state, scale, floor: _group(r, scale, floor),
    "ema": _ema,
    "adaptive": _adaptive,
}


# |A| never exceeds this. A group baseline is bounded by itself (population std: |A| <= sqrt(G - 1),
# 2.65 at G = 8), but the EMA's scale is an average of EARLIER steps: after a flat step (every
# reward of a key equal, variance 0) its std is the floor 0.01, and one sample 0.5 better would get
# advantage 50, a 20x larger step than any group advantage; 5 keeps such a step within ~2x.
ADVANTAGE_CAP = 5.0


def advantages(
    baseline: str,
    rewards,
    keys: Sequence[str],
    state: dict,
    *,
    scale_by_std: bool = True,
    std_floor: float = 1e-2,
    cap: float = ADVANTAGE_CAP,
) -> mx.array:
    """(B, G) float32 advantages of (B, G) rewards (NaN = failed) against `baseline`:
      group     A = (r - group mean) / group std: `group_advantages` (GRPO)
      ema       A = (r - m_k) / sqrt(v_k), m_k and v_k the EMA of key k = keys[b] from earlier
                steps (`baseline_update`); a key's first step uses that step's statistics
      adaptive  group where the group's std >= std_floor, ema where the group is flat
    The std division happens only with `scale_by_std`, floored at `std_floor`; every advantage is
    then clipped to [-cap, cap] (ADVANTAGE_CAP). A failed reward gets advantage 0 and never enters
    a baseline; the result is never NaN."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline={baseline!r}: use one of {sorted(BASELINES)}")
    _check_floor(scale_by_std, std_floor)
    if not cap > 0:
        raise ValueError(f"cap={cap}: advantages are clipped to [-cap, cap]; use > 0, e.g. 5")
    r = _check_keys(rewards, keys)
    adv = BASELINES[baseline](r, list(keys), state, scale_by_std, std_floor)
    return mx.array(np.clip(adv, -cap, cap))


TRUNCATION = ("keep", "cap", "mask")


def cap_truncated(rewards, finished) -> tuple[np.ndarray, int]:
    """(B, G) rewards, (B, G) bool finished -> rewards where each truncated answer's is at most the
    lowest finite reward of a finished answer in its group, and how many were lowered. A group
    with no finished answer is left as it is (nothing that ended to compare with); NaN (a failed
    score) stays NaN."""
    r = np.array(rewards, dtype=np.float64)
    done = np.asarray(finished, dtype=bool)
    if r.shape != done.shape or r.ndim != 2:
        raise ValueError(f"rewards {r.shape} and finished {done.shape} must be the same (B, G)")
    ended = np.where(done & np.isfinite(r), r, np.inf).min(axis=1, keepdims=True)  # (B, 1)
    lower = ~done & np.isfinite(r) & (r > ended)
    return np.where(lower, ended, r), int(lower.sum())


def flatten_groups(
    advantages: mx.array, mask: mx.array, keep: mx.array | None = None
) -> tuple[mx.array, mx.array]:
    """(B, G) advantages + (N, T) completion mask [+ (B,) keep] -> (N,) advantages, (N, T) mask.

    Completions are laid out group-major: row n = b * G + g. A dropped group (keep[b] False) gets
    its mask rows zeroed, so neither its policy term nor its KL term reaches the loss, and it does
    not count in the loss denominators."""
    B, G = advantages.shape
    if mask.shape[0] != B * G:
        raise ValueError(f"mask has {mask.shape[0]} rows, expected B*G = {B}*{G} = {B * G}")
    mask = mask.astype(mx.float32)
    if keep is not None:
        if keep.shape != (B,):
            raise ValueError(f"keep must be ({B},), got {tuple(keep.shape)}")
        rows = mx.repeat(keep.astype(mx.float32), G)  # (N,)
        mask = mask * rows[:, None]
    return advantages.reshape(B * G), mask


# --------------------------------------------------------------------------------------------
# Policy loss


def _active_completions(mask: mx.array) -> mx.array:
    return mx.sum(mx.sum(mask, axis=1) > 0)


def _mean_per_sequence(x: mx.array, mask: mx.array, cfg: "LossConfig") -> mx.array:
    # grpo: 1/|active| sum_i 1/|o_i| sum_t x_it. Long completions get less weight per token.
    n_active = _active_completions(mask)
    return mx.sum(masked_mean(x, mask, axis=1)) / mx.maximum(n_active, 1)


def _sum_over_constant_len(x: mx.array, mask: mx.array, cfg: "LossConfig") -> mx.array:
    # dr_grpo: 1/|active| sum_i 1/L sum_t x_it with L fixed, so every token weighs the same.
    n_active = _active_completions(mask)
    per_seq = masked_sum(x, mask, axis=1) / cfg.max_completion_len
    return mx.sum(per_seq) / mx.maximum(n_active, 1)


def _mean_over_tokens(x: mx.array, mask: mx.array, cfg: "LossConfig") -> mx.array:
    # dapo: 1/sum_i |o_i| sum_i sum_t x_it over the whole batch.
    return masked_mean(x, mask)


# The one place a loss_type picks its reduction; LossConfig validates against these keys.
REDUCTIONS: dict[str, Callable[[mx.array, mx.array, "LossConfig"], mx.array]] = {
    "grpo": _mean_per_sequence,
    "dr_grpo": _sum_over_constant_len,
    "dapo": _mean_over_tokens,
}
DEFAULT_CLIP_EPS_HIGH = {"grpo": 0.2, "dr_grpo": 0.2, "dapo": 0.28}

# What each reduction divides by: a batch's loss is (sum over its rows) / DENOMINATORS[type].
DENOMINATORS: dict[str, Callable[[mx.array], mx.array]] = {
    "grpo": _active_completions,
    "dr_grpo": _active_completions,
    "dapo": mx.sum,
}
LOSS_METRICS = ("loss", "policy_loss", "kl_loss")  # reduced like the loss
SUMMED_METRICS = ("n_tokens",)
MAX_METRICS = ("ratio_max",)


def micro_batch_shares(mask: mx.array, rows: list[slice], loss_type: str) -> list[tuple]:
    """(loss share, token share) of each micro-batch (`rows` of the batch's (N, T) mask).

    A micro-batch's loss divides by its own denominator, so the whole batch's loss, and its
    gradient, is the sum of the micro-batch losses times their loss shares (denominator of the
    rows / denominator of the batch); per-token metrics combine with the token shares. Both are
    0 for a batch with no active completion (every group dropped: no gradient anyway)."""
    count = DENOMINATORS[loss_type]
    total_loss, total_tok = float(count(mask).item()), float(mx.sum(mask).item())
    return [
        (
            float(count(mask[r]).item()) / total_loss if total_loss else 0.0,
            float(mx.sum(mask[r]).item()) / total_tok if total_tok else 0.0,
        )
        for r in rows
    ]


def combine_metrics(parts: list[dict], shares: list[tuple]) -> dict:
    """One batch's metrics from its micro-batches' (policy_loss's, lazy scalars): losses weighted
    by loss share, counts summed, maxima maxed, the rest (per-token means) by token share."""
    out = {}
    for key in parts[0]:
        values = [m[key] for m in parts]
        if key in MAX_METRICS:
            out[key] = mx.max(mx.stack(values))
        elif key in SUMMED_METRICS:
            out[key] = sum(values[1:], values[0])
        else:
            col = 0 if key in LOSS_METRICS else 1
            out[key] = sum(v * s[col] for v, s in zip(values, shares, strict=True))
    return out


@dataclass(frozen=True)
class LossConfig:
    """How the per-token objective is clipped, bounded and reduced. Defaults follow each paper."""

    loss_type: str = "grpo"  # grpo | dr_grpo | dapo: how tokens are averaged (see module doc)
    clip_eps_low: float = 0.2  # ratio floor 1 - eps_low for negative advantages
    clip_eps_high: float | None = None  # ratio ceiling 1 + eps_high; None: 0.28 dapo, else 0.2
    max_log_ratio: float = 20.0  # clamp log(pi/pi_old) (and the KL log-ratio) before exp
    max_token_loss: float = 10.0  # clamp |per-token policy loss|: far off-policy tokens stop
    kl_estimator: str = "k3"  # the KL VALUE logged and steered: k1 | k2 | k3 (kl_per_token)
    kl_direction: str = "reverse"  # the divergence whose GRADIENT the loss applies: reverse
    # KL(pi||ref) | forward KL(ref||pi) | symmetric (their mean); kernels.kl_gradient_term
    max_completion_len: int | None = None  # dr_grpo's constant denominator: the generation cap

    def __post_init__(self):
        if self.loss_type not in REDUCTIONS:
            raise ValueError(f"loss_type={self.loss_type!r}: use one of {sorted(REDUCTIONS)}")
        if self.clip_eps_high is None:
            object.__setattr__(self, "clip_eps_high", DEFAULT_CLIP_EPS_HIGH[self.loss_type])
        if not 0 < self.clip_eps_low < 1:
            raise ValueError(f"clip_eps_low={self.clip_eps_low}: must be in (0, 1), e.g. 0.2")
        if not self.clip_eps_high > 0:
            raise ValueError(f"clip_eps_high={self.clip_eps_high}: must be > 0, e.g. 0.2 or 0.28")
        if not 0 < self.max_log_ratio <= 80:
            raise ValueError(
                f"max_log_ratio={self.max_log_ratio}: must be in (0, 80] so exp stays finite "
                "in float32; 20 is the default"
            )
        if not self.max_token_loss > 0:
            raise ValueError(f"max_token_loss={self.max_token_loss}: must be > 0, e.g. 10")
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(f"kl_estimator={self.kl_estimator!r}: use one of {KL_ESTIMATORS}")
        if self.kl_direction not in KL_DIRECTIONS:
            raise ValueError(f"kl_direction={self.kl_direction!r}: use one of {KL_DIRECTIONS}")
        if self.loss_type == "dr_grpo" and not (
            isinstance(self.max_completion_len, int) and self.max_completion_len > 0
        ):
            raise ValueError(
                f"max_completion_len={self.max_completion_len!r}: loss_type='dr_grpo' divides by "
                "a constant; pass the generation cap (max_new_tokens), a positive int"
            )


def _check_inputs(logp, old_logp, ref_logp, advantages, mask, kl_coef) -> None:
    for name, x in (("old_logp", old_logp), ("ref_logp", ref_logp), ("mask", mask)):
        if x is not None and x.shape != logp.shape:
            raise ValueError(f"{name} has shape {tuple(x.shape)}, logp has {tuple(logp.shape)}")
    for name, x in (("logp", logp), ("old_logp", old_logp), ("ref_logp", ref_logp)):
        if x is not None and x.dtype != mx.float32:
            raise ValueError(f"{name} is {x.dtype}: log-probs must be float32 (cast before)")
    if logp.ndim != 2 or advantages.shape != (logp.shape[0],):
        raise ValueError(
            f"expected logp (N, T) and advantages (N,), got {tuple(logp.shape)} and "
            f"{tuple(advantages.shape)} (flatten (B, G) advantages with flatten_groups)"
        )
    if ref_logp is None and not (isinstance(kl_coef, int | float) and kl_coef == 0):
        raise ValueError("ref_logp is None but kl_coef != 0: pass the reference log-probs")


def policy_loss(
    logp: mx.array,
    old_logp: mx.array,
    ref_logp: mx.array | None,
    advantages: mx.array,
    mask: mx.array,
    cfg: LossConfig,
    kl_coef: float | mx.array = 0.0,
) -> tuple[mx.array, dict[str, mx.array]]:
    """Clipped GRPO surrogate + kl_coef * KL, reduced per `cfg.loss_type`; differentiable in logp.

    logp, old_logp, ref_logp: (N, T) float32 log-probs of the sampled tokens under the current,
    rollout-time and reference policies; advantages (N,); mask (N, T), 1 on completion tokens.
    Per token: rho = exp(clamp(logp - old_logp, +-max_log_ratio)),
    l = -min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A), clamped to +-max_token_loss.
    The KL term is reduced the same way as l. ref_logp may be None only when kl_coef == 0; with
    ref_logp given the KL is always measured (metric) even at coefficient 0. kl_coef may be an
    mx.array so an adaptive coefficient does not retrigger compilation.
    Returns (loss, metrics); metrics are scalar mx.arrays (no host sync here).
    """
    _check_inputs(logp, old_logp, ref_logp, advantages, mask, kl_coef)
    mask = mask.astype(mx.float32)
    on = mask != 0
    reduce = REDUCTIONS[cfg.loss_type]
    A = advantages.astype(mx.float32)[:, None]  # (N, 1) broadcast over tokens

    # Padding may hold -inf/NaN log-probs; zero the log-ratio there so neither the loss nor the
    # gradient ever sees them (masking the product afterwards would leave 0 * NaN in the VJP).
    log_ratio = mx.where(on, logp - old_logp, 0.0)
    log_ratio = mx.clip(log_ratio, -cfg.max_log_ratio, cfg.max_log_ratio)
    ratio = mx.exp(log_ratio)  # (N, T)
    clipped_ratio = mx.clip(ratio, 1.0 - cfg.clip_eps_low, 1.0 + cfg.clip_eps_high)
    per_token = -mx.minimum(ratio * A, clipped_ratio * A)
    per_token = mx.clip(per_token, -cfg.max_token_loss, cfg.max_token_loss)
    pg_loss = reduce(per_token, mask, cfg)

    # Every direction is measured (a metric each, cheap (N, T) work); the configured one is in
    # the loss and is what the KL controller sees.
    kl_by_direction = {d: mx.zeros_like(logp) for d in KL_DIRECTIONS}
    if ref_logp is not None:
        lp, ref = mx.where(on, logp, 0.0), mx.where(on, ref_logp, 0.0)
        kl_by_direction = {
            d: kl_per_token(lp, ref, cfg.kl_estimator, d, cfg.max_log_ratio) for d in KL_DIRECTIONS
        }
    # The loss's KL term has the configured estimator's VALUE (logged, steered by the controller)
    # and the named divergence's GRADIENT (kernels.kl_gradient_term): an estimator's own gradient
    # belongs to another quantity (k3's to the forward KL, k1's is zero on average).
    kl = kl_by_direction[cfg.kl_direction]
    if ref_logp is not None:
        grad_term = kl_gradient_term(lp, ref, cfg.kl_direction, cfg.max_log_ratio)
        kl = mx.stop_gradient(kl) + (grad_term - mx.stop_gradient(grad_term))
    kl_loss = reduce(kl, mask, cfg)
    loss = pg_loss + kl_coef * kl_loss

    # The clip is active (zero gradient) where the clipped branch won the min.
    low = (ratio < 1.0 - cfg.clip_eps_low) & (A < 0)
    high = (ratio > 1.0 + cfg.clip_eps_high) & (A > 0)
    bounded = mx.abs(per_token) >= cfg.max_token_loss
    metrics = {
        "loss": loss,
        "policy_loss": pg_loss,
        "kl_loss": kl_loss,  # the reduced KL before kl_coef
        "kl_mean": masked_mean(kl, mask),  # per-token mean: the unit for AdaptiveKLController
        **{f"kl/{d}": masked_mean(k, mask) for d, k in kl_by_direction.items()},
        "ratio_mean": masked_mean(ratio, mask),
        "ratio_max": mx.max(mx.where(on, ratio, 0.0)),
        "clip_frac_low": masked_mean(low.astype(mx.float32), mask),
        "clip_frac_high": masked_mean(high.astype(mx.float32), mask),
        "bound_frac": masked_mean(bounded.astype(mx.float32), mask),
        "n_tokens": mx.sum(mask),
    }
    return loss, {k: mx.stop_gradient(v) for k, v in metrics.items()}


# --------------------------------------------------------------------------------------------
# KL coefficient controller and the non-finite guard


@dataclass
class AdaptiveKLController:
    """The KL coefficient: fixed (target_kl None) or Ziegler et al. (2019)'s proportional control.

    Adaptive: error = clip(observed_kl / target_kl - 1, -0.2, 0.2), coef *= 1 + error * n / horizon,
    with n in the same unit as horizon (Ziegler counts samples, horizon 10000). The clip bounds
    the change to 20% per horizon, so one noisy KL estimate cannot swing the coefficient."""

    coef: float = 0.0
    target_kl: float | None = None
    horizon: int = 10000

    def __post_init__(self):
        if self.coef < 0:
            raise ValueError(f"coef={self.coef}: the KL coefficient must be >= 0")
        if self.target_kl is not None:
            if not self.target_kl > 0:
                raise ValueError(f"target_kl={self.target_kl}: must be > 0, or None for fixed")
            if not self.coef > 0:
                raise ValueError(
                    f"coef={self.coef}: an adaptive controller scales the coefficient, so it "
                    "must start > 0 (e.g. 0.05); use target_kl=None for a fixed 0"
                )
            if not self.horizon > 0:
                raise ValueError(f"horizon={self.horizon}: must be > 0, e.g. 10000 samples")

    @property
    def adaptive(self) -> bool:
        return self.target_kl is not None

    def update(self, observed_kl: float, n_steps: int) -> float:
        """Move the coefficient toward target_kl and return it; a non-finite KL is ignored."""
        observed_kl = float(observed_kl)
        if self.adaptive and math.isfinite(observed_kl):
            error = min(max(observed_kl / self.target_kl - 1.0, -0.2), 0.2)
            self.coef *= 1.0 + error * n_steps / self.horizon
        return self.coef

    def state_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state_dict(cls, state: dict) -> "AdaptiveKLController":
        return cls(**state)
