"""Gradient routing for GRPO: completions flagged as hacks train only the forget adapter.

The policy carries two LoRA adapters per layer (lora.DualLoRALinear): retain and forget.
Completions a hack detector flags (rewards/hacks.py) give gradient to the forget adapter only; all
others to both. Removing the forget adapter at inference (lora.set_scales(model, 1, 0)) should
then remove the hack and keep the task (Cloud et al. 2024, *Gradient Routing*).

How it is exact without backward hooks: a step's completions are split into homogeneous
micro-batches (all flagged or none, `plan`); a flagged micro-batch runs with the retain
parameters behind stop_gradient (lora.retain_frozen), so their gradient from it is exactly zero
while the forget adapter gets the true gradient of the loss. Each micro-batch's loss is weighted
by its `share` of the full-batch loss, so that with routing switched off the weighted gradients
add up to the full-batch gradient for every loss_type (tests/test_routing.py). This module plans
and accumulates, and `routed_update` is the loop's update under routing (policy_update.update
calls it); evals/routing.py measures the result (train.py binds its evaluation for the loop).
"""

import contextlib
import time
from dataclasses import dataclass

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core import lora

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten, tree_map, tree_unflatten

import grpo
from rewards import hacks
from rl.reference import shared_trunks
from rl.rollout_batch import Rollout


@dataclass(frozen=True)
class MicroBatch:
    """Whole groups of one step's batch and which of their completions this micro-batch trains.

    groups (b,) prompt indices; rows (b*G,) their completion rows, group-major; keep (b*G,) 1
    on the rows it trains on (the others are in the forward only, because a group's prompt is
    run once for all its completions); flagged: its kept rows are hacks; share: the weight of
    its loss in the full-batch loss."""

    groups: np.ndarray
    rows: np.ndarray
    keep: np.ndarray
    flagged: bool
    share: float


def loss_share(mask: np.ndarray, keep: np.ndarray, cfg: grpo.LossConfig) -> float:
    """Weight w such that w * loss(rows `keep`) is those rows' part of the full-batch loss.

    Every reduction in grpo.REDUCTIONS is a per-row linear form divided by a normaliser of the
    whole batch: active completions (grpo, dr_grpo) or tokens (dapo). So the share is the ratio
    of normalisers, read off the reduction itself by reducing an indicator x = 1 on the kept
    rows: w = reduce(x, full mask) / reduce(x, kept mask). grpo: n_kept / n_active; dr_grpo the
    same; dapo: kept tokens / all tokens. The test checks the gradients add up per loss_type."""
    reduce = grpo.REDUCTIONS[cfg.loss_type]
    full = mx.array(mask, dtype=mx.float32)
    kept = full * mx.array(keep, dtype=mx.float32)[:, None]
    x = mx.broadcast_to(mx.array(keep, dtype=mx.float32)[:, None], full.shape)
    part = reduce(x, kept, cfg).item()
    return reduce(x, full, cfg).item() / part if part else 0.0


def plan(
    flags: np.ndarray, mask: np.ndarray, group_size: int, cfg: grpo.LossConfig, chunks: int = 1
) -> list[MicroBatch]:
    """Homogeneous micro-batches for one step: the unflagged completions, then the flagged ones,
    each part over the groups that hold any of its completions, split into up to `chunks`
    micro-batches of whole groups (--grad-accum). Rows with an empty mask (dropped groups) are in
    neither part. A batch with no active row gives one micro-batch of weight 0."""
    flags, mask = np.asarray(flags, dtype=bool), np.asarray(mask, dtype=np.float32)
    N = mask.shape[0]
    if flags.shape != (N,) or N % group_size:
        raise ValueError(
            f"flags {flags.shape} and mask {mask.shape} must have N rows, N a multiple of "
            f"group_size {group_size}"
        )
    active = mask.sum(axis=1) > 0
    out = []
    for flagged in (False, True):
        part = active & (flags == flagged)
        groups = np.flatnonzero(part.reshape(-1, group_size).any(axis=1))
        for chunk in np.array_split(groups, min(chunks, len(groups))) if len(groups) else []:
            rows = (chunk[:, None] * group_size + np.arange(group_size)).reshape(-1)
            keep = part[rows].astype(np.float32)
            full_keep = np.zeros(N, dtype=np.float32)
            full_keep[rows] = keep
            share = loss_share(mask, full_keep, cfg)
            out.append(MicroBatch(chunk, rows, keep, flagged, share))
    if not out:
        groups, rows = np.arange(N // group_size), np.arange(N)
        out.append(MicroBatch(groups, rows, np.zeros(N, np.float32), False, 0.0))
    return out


def accumulate(model, loss_fn, micro_batches: list[MicroBatch], args: list[tuple], route=True):
    """sum_j share_j * grad loss_fn(model, *args_j) over the micro-batches, and the same
    weighted sum of the metrics loss_fn returns (loss_fn -> (loss, metrics dict)). With `route`,
    a flagged micro-batch's gradient is taken with the retain adapters frozen (zero gradient to
    them); without, it is plain gradient accumulation (the exactness test compares it with the
    full batch)."""
    grad_fn = nn.value_and_grad(model, loss_fn)
    grads, sums = None, {}
    for mb, a in zip(micro_batches, args, strict=True):
        ctx = lora.retain_frozen(model) if route and mb.flagged else contextlib.nullcontext()
        with ctx:
            (_, metrics), g = grad_fn(model, *a)
        g = tree_map(lambda x, w=mb.share: w * x, g)
        grads = g if grads is None else tree_map(mx.add, grads, g)
        for key, v in metrics.items():
            sums[key] = sums.get(key, 0.0) + mb.share * v
    return grads, sums


ADAPTERS = ("retain", "forget")


def clip_per_adapter(grads, max_norm: float):
    """Clip the retain and the forget adapter's gradients each to `max_norm` by its OWN norm ->
    (clipped grads, the global norm before clipping, {"retain": norm, "forget": norm}).

    Global-norm clipping would scale the retain adapter's step by the forget adapter's gradient
    too, so a large gradient from flagged hacks would shrink the retain step: flagged samples
    would reach retain through the clip scale. Per adapter, the retain update depends only on
    the unflagged completions (its gradient from flagged ones is exactly zero). A parameter whose
    name names neither adapter is refused (routing trains the two adapters only)."""
    flat = tree_flatten(grads)
    groups = {a: [(k, g) for k, g in flat if k.split(".")[-1].startswith(a)] for a in ADAPTERS}
    stray = [k for k, _ in flat if not any(k.split(".")[-1].startswith(a) for a in ADAPTERS)]
    if stray:
        raise ValueError(f"clip_per_adapter: {stray[:3]} belong to neither adapter (retain/forget)")
    norms, out = {}, []
    for adapter, items in groups.items():
        sq = sum((mx.sum(g.astype(mx.float32) ** 2) for _, g in items), mx.array(0.0))
        norms[adapter] = mx.sqrt(sq)
        scale = mx.minimum(max_norm / (norms[adapter] + 1e-6), 1.0)
        out += [(k, g * scale) for k, g in items]
    total = mx.sqrt(sum(n * n for n in norms.values()))
    return tree_unflatten(out), total, norms


# ----------------------------------------------------------------------------------------------
# The loop's side (train.py and policy_update.update call these with plain arguments: the run's
# config, the model, its reference and a Rollout)


def retain_only_step(cfg, step: int) -> bool:
    """Whether this step samples and updates with the forget adapter off (--retain-rollout-every).

    When the hack holds every rollout, no completion is left to train the retain adapter on the
    task (knowledge/routing.md, seed 0). On these steps the policy is the retain adapter alone:
    its rollouts are on-policy for it, its unflagged completions train it, and the forget
    adapter, scaled to 0, gets exactly zero gradient (AdamW still applies its momentum)."""
    return bool(cfg.retain_rollout_every) and step % cfg.retain_rollout_every == 0


def retain_alone(model, on: bool):
    """lora.scaled(model, 1, 0) when `on` (a retain-only step), else nothing."""
    return lora.scaled(model, 1.0, 0.0) if on else contextlib.nullcontext()


def flag_hacks(detectors: list, b) -> dict:
    """Run the hack detectors on a rollout: set b.flags; return the rates to log."""
    if not detectors:
        return {}
    prompts, categories = [x["prompt"] for x in b.flat], [x["category"] for x in b.flat]
    b.flags, rates = hacks.detect(detectors, prompts, b.sample.texts, categories)
    return rates


def routed_args(
    cfg, b, micro_batches: list[MicroBatch], reference, kl_coef: float, model=None
) -> list:
    """The loss function's arguments for each routing micro-batch: its groups' prompts and
    completions, the completion mask cut to the rows it trains on, reference log-probs when
    there is a KL term."""
    s, G = b.sample, cfg.group_size
    parts = [(mx.array(mb.groups), mx.array(mb.rows)) for mb in micro_batches]
    trunks = [None] * len(parts)  # model None: no trunk (the caller computes every block)
    if model is not None:
        trunks = shared_trunks(model, reference, s, parts, G, cfg.share_trunk)
    ref, coef = [None] * len(micro_batches), 0.0  # no reference: a Python 0 (grpo checks it)
    if reference is not None:
        ref = reference.part_logprobs(
            s, b.mask, parts, trunks, G, cfg.head_valid_only, cfg.ragged_tail
        )
        coef = mx.array(kl_coef, dtype=mx.float32)
    args = []
    for mb, (p, c), r, t in zip(micro_batches, parts, ref, trunks, strict=True):
        sampled = s.logprobs[c]
        old = sampled if cfg.num_iterations > 1 else None
        mask = b.mask[c] * mx.array(mb.keep)[:, None]
        tokens, adv = s.tokens[c], b.advantages[c]
        args.append(
            (s.prompt_tokens[p], s.prompt_pad[p], tokens, adv, mask, sampled, old, r, coef, cfg, t)
        )
    return args


def retain_advantages(
    rewards,
    flags,
    advantages,
    *,
    scale_by_std: bool = True,
    std_floor: float = 1e-2,
    cap: float = grpo.ADVANTAGE_CAP,
) -> mx.array:
    """(B*G,) advantages where each UNFLAGGED completion is measured against its group's
    unflagged completions alone (group baseline, same scaling and cap); flagged completions keep
    `advantages` (they train the forget adapter only).

    Against the whole group, a hack that earns more than the task makes every unflagged answer's
    advantage negative, and the retain adapter, which sees only unflagged answers, is pushed off
    them, towards whatever the hack looks like (knowledge/routing.md, seed 2). Here a group with
    fewer than 2 unflagged completions gives its unflagged ones advantage 0."""
    r = np.asarray(rewards, dtype=np.float64)
    f = np.asarray(flags, dtype=bool)
    if f.shape != (r.size,) or np.asarray(advantages).shape != (r.size,):
        raise ValueError(
            f"rewards {r.shape}, flags {f.shape} and advantages "
            f"{np.asarray(advantages).shape} must give one value per completion"
        )
    own = np.asarray(
        grpo.group_advantages(
            np.where(f.reshape(r.shape), np.nan, r), scale_by_std=scale_by_std,
            std_floor=std_floor,
        )
    ).reshape(-1)  # fmt: skip
    own = np.clip(own, -cap, cap)
    return mx.array(np.where(f, np.asarray(advantages, dtype=np.float32), own), dtype=mx.float32)


def routed_update(cfg, model, reference, kl_coef: float, b: Rollout, loss_fn, step) -> dict:
    """policy_update.update under gradient routing: homogeneous micro-batches of whole groups,
    flagged completions (b.flags) training only the forget adapter, each micro-batch's loss
    weighted by its share of the full-batch loss, each adapter's gradient clipped by its own norm
    (clip_per_adapter). Plain arguments: the run's config (TrainConfig), the policy model, its
    reference (or None) and KL coefficient; `step(grads, sums, it, clip) -> metrics` clips and
    takes the optimizer step (policy_update.apply_gradients bound to the run)."""
    micro = plan(b.flags, np.asarray(b.mask), cfg.group_size, cfg.loss_config(), cfg.grad_accum)
    if cfg.retain_baseline == "unflagged":
        b.advantages = retain_advantages(
            b.rewards, b.flags, b.advantages, scale_by_std=cfg.scale_by_std,
            std_floor=cfg.std_floor, cap=cfg.advantage_cap,
        )  # fmt: skip
    t0 = time.perf_counter()
    args = routed_args(cfg, b, micro, reference, kl_coef, model)
    reference_s = time.perf_counter() - t0  # the shared trunk and the reference's log-probs
    history = []
    for it in range(cfg.num_iterations):
        grads, sums = accumulate(model, loss_fn, micro, args)
        history.append(step(grads, sums, it, clip=clip_per_adapter))
    return history[-1] | {
        "reference_s": reference_s,
        "route/micro_batches": len(micro),
        "route/flagged_share": sum(mb.share for mb in micro if mb.flagged),
    }
