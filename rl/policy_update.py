"""The policy update of one GRPO step: the loss over micro-batches, the gradients summed over
ranks, clipped, checked and applied.

`update(run, b)` takes a run_state.Run (policy, reference, optimizer, KL controller, counters,
config) and a rollout_batch.Rollout (sampled tokens, sampler log-probs, advantages, completion
mask). Each of `grad_accum` micro-batches holds whole groups (the prompt is run once per group);
its gradient is weighted by its share of the full batch's loss denominator
(grpo.micro_batch_shares), so the sum is the full-batch gradient for every loss type and every
number of ranks (knowledge/distributed.md). A non-finite loss or gradient skips the optimizer
step, counted in `skipped_steps`; a step that leaves a non-finite weight is rolled back, counted
in `rolled_back_steps`; `max_failed_updates` of them in a row stop the run (core/precision.py).
Under gradient routing the micro-batches are rl/routing.py's
instead.
"""

import sys
import time

from core import backend

# isort: split
from core import precision
from core.kernels import masked_mean

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_map
from tqdm import tqdm

import grpo
from gwen import sequence_logprobs
from rl import distributed, routing
from rl.reference import shared_trunks
from rl.rollout_batch import Rollout
from rl.run_state import Run


def loss_fn(model, pt, pp, tokens, adv, mask, sampled, old, ref, kl_coef, cfg, trunk=None):
    """The GRPO loss of one micro-batch (grpo.policy_loss) and its metrics, from the policy's
    log-probs of the sampled tokens (the prompt run once per group; with `trunk`, only the
    blocks above the frozen ones)."""
    logp, entropy = sequence_logprobs(
        model, pt, pp, tokens, cfg.group_size, cfg.temperature, return_entropy=True,
        trunk=trunk, valid=mask if cfg.head_valid_only else None,
        keep_logits=cfg.keep_head_logits, ragged=cfg.ragged_tail,
    )  # fmt: skip
    # num_iterations == 1: the ratio is against these same weights, so stop_gradient(logp) is
    # exact; > 1: against the rollout policy, whose log-probs the sampler returned.
    old = mx.stop_gradient(logp) if old is None else old
    loss, metrics = grpo.policy_loss(logp, old, ref, adv, mask, cfg.loss_config(), kl_coef)
    metrics["entropy"] = masked_mean(mx.stop_gradient(entropy), mask)
    # Sampler vs trainer log-probs of the same tokens: ~1e-6 unless caching or padding is wrong.
    metrics["logprob_gap"] = masked_mean(mx.abs(mx.stop_gradient(logp) - sampled), mask)
    return loss, metrics


def update(run: Run, b: Rollout) -> dict:
    """num_iterations optimizer updates on this batch, each over grad_accum micro-batches of
    this rank's groups, weighted by their share of the whole batch's loss and summed over ranks
    (gradient routing: routing.routed_update)."""
    if run.cfg.routing == "routed":

        def step(grads, sums, it, clip):
            return apply_gradients(run, grads, sums, it, clip=clip)

        model, coef = run.policy.model, run.controller.coef
        out = routing.routed_update(run.cfg, model, run.reference, coef, b, loss_fn, step)
        return out | {"lr": run.optimizer.learning_rate.item()}
    cfg, s, model = run.cfg, b.sample, run.policy.model
    G, B, k = cfg.group_size, len(b.records), cfg.grad_accum
    parts = distributed.micro_batches(B, G, k)
    shares = grpo.micro_batch_shares(b.mask, [c for _, c in parts], cfg.loss_type)
    t0 = time.perf_counter()
    trunks = shared_trunks(model, run.reference, s, parts, G, cfg.share_trunk)
    ref, kl_coef = [None] * k, 0.0  # no reference: a Python 0 (grpo checks for it)
    if run.reference is not None:
        ref = run.reference.part_logprobs(
            s, b.mask, parts, trunks, G, cfg.head_valid_only, cfg.ragged_tail
        )
        kl_coef = mx.array(run.controller.coef, dtype=mx.float32)
    reference_s = time.perf_counter() - t0  # the shared trunk and the reference's log-probs
    grad_fn = nn.value_and_grad(model, loss_fn)
    history = []
    for it in range(cfg.num_iterations):
        grads, parts_m = None, []
        for (p, c), r, (w, _), t in zip(parts, ref, shares, trunks, strict=True):
            sampled = s.logprobs[c]
            (_, m), g = grad_fn(
                model,
                s.prompt_tokens[p],
                s.prompt_pad[p],
                s.tokens[c],
                b.advantages[c],
                b.mask[c],
                sampled,
                sampled if cfg.num_iterations > 1 else None,
                r,
                kl_coef,
                cfg,
                t,
            )
            g = g if w == 1.0 else tree_map(lambda x, w=w: x * w, g)
            grads = g if grads is None else tree_map(mx.add, grads, g)
            parts_m.append(m)
        sums = distributed.sum_metrics(grpo.combine_metrics(parts_m, shares), grpo.MAX_METRICS)
        grads = distributed.sum_gradients(grads)
        history.append(apply_gradients(run, grads, sums, it))
    return history[-1] | {"lr": run.optimizer.learning_rate.item(), "reference_s": reference_s}


def _clip_global(grads, max_norm: float):
    grads, norm = precision.clip_grad_norm(grads, max_norm)
    return grads, norm, {}


def apply_gradients(run: Run, grads, sums: dict, it: int, clip=_clip_global) -> dict:
    """Clip (`clip(grads, max_norm) -> (grads, norm, {name: part norm})`: the global norm by
    default, each adapter's own under routing), check finiteness, take the optimizer step; a
    non-finite loss or gradient skips it, a step that leaves a non-finite weight or optimizer
    state is rolled back, both counted (precision.Failures: max_failed_updates in a row stop
    the run); host metrics."""
    model = run.policy.model
    grads, grad_norm, part_norms = clip(grads, run.cfg.max_grad_norm)
    finite = precision.all_finite((sums["loss"], grads))
    mx.eval(finite, sums, grad_norm, part_norms)
    outcome = "skipped"
    if finite.item():
        ok = precision.guarded_update(run.optimizer, model, grads)
        outcome = "applied" if ok else "rolled_back"
    fix = backend.overflow_fix(model.model.norm.weight.dtype)
    failures = precision.Failures(run.cfg.max_failed_updates, fix, run.counters)
    failures.record(outcome, f"iteration {it + 1} of {run.cfg.num_iterations}")
    if outcome != "applied":
        c = run.counters
        what = "loss or gradient" if outcome == "skipped" else "weights after the update"
        tqdm.write(
            f"non-finite {what}"
            f" at iteration {it}: update {outcome.replace('_', ' ')} (skipped {c['skipped_steps']},"
            f" rolled back {c['rolled_back_steps']}, {c['failed_in_a_row']} in a row)",
            file=sys.stderr,
        )
    parts = {f"grad_norm/{name}": n.item() for name, n in part_norms.items()}
    return {**{key: v.item() for key, v in sums.items()}, "grad_norm": grad_norm.item(), **parts}
