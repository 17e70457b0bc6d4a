"""GRPO training for rl-values: sample groups, score them, take a clipped policy step, record all.

Each step takes B prompts from the shuffled training set, samples G completions per prompt
(prompt prefilled once), scores them with the reward (the model-judged rubric by default, or a
programmatic one), turns rewards into group-relative advantages (grpo.py), and updates the policy
on the GRPO loss with an optional KL penalty to a frozen reference. Every random draw is keyed
by (seed, step), so a run resumed from a checkpoint repeats the uninterrupted run exactly.
Writes RUN_DIR/metrics.jsonl, RUN_DIR/rollouts.sqlite, checkpoints and (with --plot) PNG curves.
It is one loop, not a framework: the math lives in grpo.py, the judge in rubric.py.
"""

import contextlib
import dataclasses
import json
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import backend

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten, tree_map
from tqdm import tqdm

import checkpoint
import evaluate
import grpo
import lora
import rewards as rewards_mod
import runlog
from config import TrainConfig, build_parser, resolve_config
from gwen import Gwen, sequence_logprobs
from kernels import masked_mean
from model import Model
from prompts import load_prompts


class PromptStream:
    """Training prompts in a seeded order per epoch; (epoch, position) is the data cursor."""

    def __init__(self, records: list[dict], seed: int, epoch: int = 0, position: int = 0):
        self.records, self.seed, self.epoch, self.position = records, seed, epoch, position

    def _order(self) -> np.ndarray:
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.records))

    def next_batch(self, n: int) -> list[dict]:
        out = []
        while len(out) < n:
            if self.position == len(self.records):
                self.epoch, self.position = self.epoch + 1, 0
            order = self._order()
            take = min(n - len(out), len(self.records) - self.position)
            out += [self.records[i] for i in order[self.position : self.position + take]]
            self.position += take
        return out

    def state(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}


@dataclass
class Run:
    """Everything a run holds; built once by `build`, mutated only by the loop."""

    cfg: TrainConfig
    run_dir: Path
    policy: Gwen
    ref_model: Model | None  # None: no KL term
    ref_context: object  # () -> context manager that makes ref_model the reference
    scorer: object  # (prompts, completions, categories) -> (rewards (N,), details, failures)
    judge_context: object
    optimizer: optim.Optimizer
    stream: PromptStream
    eval_records: list[dict]
    controller: grpo.AdaptiveKLController
    metrics: runlog.MetricsLog
    db: runlog.RolloutDB
    counters: dict = field(
        default_factory=lambda: {"skipped_steps": 0, "filtered_groups": 0, "judge_failures": 0}
    )

    def lora_cfg(self) -> dict | None:
        c = self.cfg
        if not c.lora_rank:
            return None
        return {"rank": c.lora_rank, "alpha": c.lora_alpha, "targets": _targets(c)}


def _targets(cfg: TrainConfig) -> list[str]:
    return [t.strip() for t in cfg.lora_targets.split(",") if t.strip()]


def frozen_copy(model: Model, quant_bits: int = 0, group_size: int = 64) -> Model:
    """A frozen copy of `model`; with quant_bits, its transformer-block Linears quantized.

    The embedding / LM head stays in float: log-probs read its rows directly."""
    copy = Model(model.args)
    copy.load_weights(tree_flatten(model.parameters()), strict=True)
    if quant_bits:

        def block_linear(path, module):
            return (
                isinstance(module, nn.Linear)
                and path.startswith("model.layers.")
                and module.weight.shape[-1] % group_size == 0
            )

        nn.quantize(copy, group_size=group_size, bits=quant_bits, class_predicate=block_linear)
        n = sum(isinstance(m, nn.QuantizedLinear) for _, m in copy.named_modules())
        if n == 0:
            raise ValueError(
                f"ref_quant_bits={quant_bits}: no layer's input size is a "
                f"multiple of {group_size}; use --ref-quant-bits 0"
            )
    copy.freeze()
    copy.eval()
    mx.eval(copy.parameters())
    return copy


def make_scorer(cfg: TrainConfig, judge: Gwen | None, reward_fn):
    """Wrap the reward so the loop sees (rewards (N,) float64, per-item details, failures)."""
    if reward_fn is None and cfg.reward == "rubric":
        import rubric

        judge_rubric = rubric.Rubric(judge, judge_chunk_size=cfg.judge_chunk_size)

        def score(prompts, completions, categories):
            before = judge_rubric.failures
            details = judge_rubric.score_detailed_batched(prompts, completions, categories)
            values = [d["reward"] for d in details]
            return values, details, judge_rubric.failures - before
    else:
        fn = reward_fn or rewards_mod.get_reward(cfg.reward)

        def score(prompts, completions, categories):
            return list(fn(prompts, completions, categories=categories)), None, 0

    def checked(prompts, completions, categories):
        values, details, failures = score(prompts, completions, categories)
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (len(completions),):
            raise ValueError(
                f"reward returned {values.shape} values for {len(completions)} "
                "completions: a reward must give one float per completion"
            )
        if cfg.length_penalty > 0:
            values = values + np.asarray(
                rewards_mod.length_penalty(
                    completions, target_words=cfg.length_target, per_word=cfg.length_penalty
                )
            )
        return values, details, failures

    return checked


def build(cfg: TrainConfig, run_dir: Path, policy: Gwen | None = None, reward_fn=None) -> Run:
    records = load_prompts(cfg.data)  # bad files fail here, before any model work
    eval_records = load_prompts(cfg.eval_data) if cfg.eval_every else []
    mx.random.seed(cfg.seed)  # only LoRA init draws from MLX's global RNG
    policy = policy or Gwen.load(cfg.model, backend.parse_dtype(cfg.dtype))
    model = policy.model
    null = contextlib.nullcontext
    ref_model, ref_context = None, null
    if cfg.needs_reference():
        if cfg.lora_rank:
            ref_model, ref_context = model, (lambda: lora.adapters_disabled(model))
        else:
            ref_model = frozen_copy(model, cfg.ref_quant_bits)
    judge, judge_context = None, null
    if cfg.reward == "rubric" and reward_fn is None:
        if cfg.judge_model:
            judge = Gwen.load(cfg.judge_model, backend.parse_dtype(cfg.dtype))
        elif cfg.judge == "live":
            judge = policy
        elif cfg.lora_rank:
            judge, judge_context = policy, (lambda: lora.adapters_disabled(model))
        else:
            unquantized_ref = ref_model is not None and not cfg.ref_quant_bits
            judge = Gwen(ref_model if unquantized_ref else frozen_copy(model), policy.tokenizer)
    if cfg.lora_rank:
        n = lora.apply_lora(model, cfg.lora_rank, cfg.lora_alpha, _targets(cfg))
        tqdm.write(f"LoRA rank {cfg.lora_rank} on {_targets(cfg)}: {n:,} trainable parameters")
    model.train()
    warmup = optim.linear_schedule(cfg.lr * 1e-3, cfg.lr, max(cfg.warmup_steps, 1))
    schedule = optim.join_schedules([warmup, lambda _: cfg.lr], [max(cfg.warmup_steps, 1)])
    optimizer = optim.AdamW(learning_rate=schedule, weight_decay=cfg.weight_decay)
    optimizer.init(model.trainable_parameters())
    run_dir.mkdir(parents=True, exist_ok=True)
    return Run(
        cfg=cfg,
        run_dir=run_dir,
        policy=policy,
        ref_model=ref_model,
        ref_context=ref_context,
        scorer=make_scorer(cfg, judge, reward_fn),
        judge_context=judge_context,
        optimizer=optimizer,
        stream=PromptStream(records, cfg.seed),
        eval_records=eval_records,
        controller=grpo.AdaptiveKLController(cfg.kl_coef, cfg.kl_target, cfg.kl_horizon),
        metrics=runlog.MetricsLog(run_dir / "metrics.jsonl"),
        db=runlog.RolloutDB(run_dir / "rollouts.sqlite"),
    )


def step_seed(cfg: TrainConfig, step: int) -> int:
    return int(np.random.SeedSequence([cfg.seed, step]).generate_state(1)[0])


def rollout(run: Run, step: int) -> dict:
    """Sample B x G completions, score them, and compute advantages (host-side numbers)."""
    cfg, G = run.cfg, run.cfg.group_size
    batch = run.stream.next_batch(cfg.prompts_per_step)
    t0 = time.perf_counter()
    sample = run.policy.sample_group(
        [r["prompt"] for r in batch],
        G,
        cfg.max_new_tokens,
        cfg.temperature,
        cfg.top_p,
        seed=step_seed(cfg, step),
        stop_at_eos=not cfg.ignore_eos,
    )
    mx.eval(sample.tokens, sample.mask)
    t1 = time.perf_counter()
    flat = [r for r in batch for _ in range(G)]
    with run.judge_context():
        values, details, judge_failures = run.scorer(
            [r["prompt"] for r in flat], sample.texts, [r["category"] for r in flat]
        )
    t2 = time.perf_counter()
    rewards = values.reshape(len(batch), G)
    adv = grpo.group_advantages(rewards, scale_by_std=cfg.scale_by_std, std_floor=cfg.std_floor)
    keep = None
    if cfg.min_group_std > 0:
        keep = mx.logical_not(grpo.low_variance_groups(rewards, cfg.min_group_std))
    adv_flat, mask = grpo.flatten_groups(adv, sample.mask, keep)
    return {
        "records": batch,
        "flat": flat,
        "sample": sample,
        "rewards": rewards,
        "details": details,
        "adv": adv_flat,
        "mask": mask,
        "keep": keep,
        "judge_failures": judge_failures,
        "rollout_s": t1 - t0,
        "reward_s": t2 - t1,
    }


def _loss_fn(model, pt, pp, tokens, adv, mask, old, ref, kl_coef, cfg: TrainConfig):
    logp, entropy = sequence_logprobs(
        model, pt, pp, tokens, cfg.group_size, cfg.temperature, return_entropy=True
    )
    old = mx.stop_gradient(logp) if old is None else old
    loss, metrics = grpo.policy_loss(logp, old, ref, adv, mask, cfg.loss_config(), kl_coef)
    metrics["entropy"] = masked_mean(mx.stop_gradient(entropy), mask)
    return loss, metrics


def _no_grad_logprobs(model, s, rows_p, rows_c, temperature):
    lp = sequence_logprobs(
        model,
        s.prompt_tokens[rows_p],
        s.prompt_pad[rows_p],
        s.tokens[rows_c],
        s.group_size,
        temperature,
    )
    return mx.stop_gradient(lp)


def update(run: Run, b: dict) -> dict:
    """num_iterations optimizer updates on this batch, each over grad_accum micro-batches."""
    cfg, s, model = run.cfg, b["sample"], run.policy.model
    G, B, k = cfg.group_size, cfg.prompts_per_step, cfg.grad_accum
    parts = [
        (slice(i * B // k, (i + 1) * B // k), slice(i * B * G // k, (i + 1) * B * G // k))
        for i in range(k)
    ]
    ref = [None] * k
    if run.ref_model is not None:
        with run.ref_context():
            ref = [_no_grad_logprobs(run.ref_model, s, p, c, cfg.temperature) for p, c in parts]
            mx.eval(ref)
    old = [None] * k  # mu == 1: the ratio is against the same weights, so stop_gradient(logp)
    if cfg.num_iterations > 1:
        old = [_no_grad_logprobs(model, s, p, c, cfg.temperature) for p, c in parts]
        mx.eval(old)
    grad_fn = nn.value_and_grad(model, _loss_fn)
    kl_coef = mx.array(run.controller.coef, dtype=mx.float32)
    history = []
    for _ in range(cfg.num_iterations):
        grads, sums = None, {}
        for (p, c), r, o in zip(parts, ref, old, strict=True):
            (loss, m), g = grad_fn(
                model,
                s.prompt_tokens[p],
                s.prompt_pad[p],
                s.tokens[c],
                b["adv"][c],
                b["mask"][c],
                o,
                r,
                kl_coef,
                cfg,
            )
            grads = g if grads is None else tree_map(mx.add, grads, g)
            for key, v in m.items():
                sums[key] = sums.get(key, 0.0) + v / k
        grads = tree_map(lambda g: g / k, grads)
        grads, grad_norm = optim.clip_grad_norm(grads, cfg.max_grad_norm)
        finite = grpo.tree_is_finite((sums["loss"], grads))
        mx.eval(finite, sums, grad_norm)
        if not finite.item():
            run.counters["skipped_steps"] += 1
            tqdm.write(
                f"non-finite loss or gradient: update skipped "
                f"(total skipped {run.counters['skipped_steps']})"
            )
        else:
            run.optimizer.update(model, grads)
            mx.eval(model.parameters(), run.optimizer.state)
        history.append(
            {
                **{key: float(v.item()) for key, v in sums.items()},
                "grad_norm": float(grad_norm.item()),
            }
        )
    metrics = history[-1]
    metrics["lr"] = float(run.optimizer.learning_rate.item())
    return metrics


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            import os

            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def step_metrics(run: Run, b: dict, upd: dict, update_s: float) -> dict:
    s, rewards = b["sample"], b["rewards"]
    lengths = s.lengths
    adv = np.asarray(b["adv"])
    m = {**grpo.reward_stats(rewards), **upd}
    if b["details"]:
        m |= {f"reward/{k}": v for k, v in evaluate.criterion_means(b["details"]).items()}
    run.counters["judge_failures"] += b["judge_failures"]
    filtered = 0 if b["keep"] is None else int((~np.asarray(b["keep"])).sum())
    run.counters["filtered_groups"] += filtered
    total_s = b["rollout_s"] + b["reward_s"] + update_s
    m.update(
        {
            "adv_mean": float(adv.mean()),
            "adv_std": float(adv.std()),
            "adv_abs_max": float(np.abs(adv).max()),
            "kl_coef": run.controller.coef,
            "length_mean": float(lengths.mean()),
            "length_max": int(lengths.max()),
            "truncation_rate": float(1.0 - s.finished.mean()),
            "filtered_groups": filtered,
            "judge_failures_step": b["judge_failures"],
            "reward_nan": int((~np.isfinite(rewards)).sum()),
            **run.counters,
            "tokens_per_s": float(lengths.sum() / b["rollout_s"]),
            "step_s": total_s,
            "rollout_s": b["rollout_s"],
            "reward_s": b["reward_s"],
            "update_s": update_s,
            "peak_mem_mb": mx.get_peak_memory() / 2**20,
            "rss_mb": _rss_mb(),
        }
    )
    return m


def log_rollouts(run: Run, step: int, b: dict) -> None:
    s, rewards, adv = b["sample"], b["rewards"].reshape(-1), np.asarray(b["adv"])
    lengths = s.lengths  # one host conversion, not one per row
    rows = []
    for i, r in enumerate(b["flat"]):
        d = b["details"][i] if b["details"] else {"reward": rewards[i]}
        rows.append(
            {
                "step": step,
                "prompt_id": r["id"],
                "category": r["category"],
                "prompt": r["prompt"],
                "completion": s.texts[i],
                "scores": json.dumps(d, default=float),
                "reward": float(rewards[i]),
                "advantage": float(adv[i]),
                "length": int(lengths[i]),
                "finished": int(s.finished[i]),
            }
        )
    run.db.add(rows)


def save(run: Run, step: int) -> Path:
    rows = run.db.flush()
    state = {
        "data": run.stream.state(),
        "kl_controller": run.controller.state_dict(),
        "counters": dict(run.counters),
        "sqlite_rows": rows,
    }
    return checkpoint.save(
        run.run_dir,
        step,
        model=run.policy.model,
        tokenizer=run.policy.tokenizer,
        optimizer=run.optimizer,
        trainer_state=state,
        config=dataclasses.asdict(run.cfg),
        lora_cfg=run.lora_cfg(),
    )


def resume_into(run: Run) -> int:
    """Restore the newest checkpoint of run.run_dir into `run`; return its step."""
    ckpt = checkpoint.latest(run.run_dir)
    state = checkpoint.restore(
        ckpt, model=run.policy.model, optimizer=run.optimizer, lora_cfg=run.lora_cfg()
    )
    run.stream.epoch, run.stream.position = state["data"]["epoch"], state["data"]["position"]
    run.controller = grpo.AdaptiveKLController.from_state_dict(state["kl_controller"])
    run.counters.update(state["counters"])
    run.metrics.truncate_after(state["step"])
    run.db.truncate_after(state["step"])
    tqdm.write(f"resumed {run.run_dir} at step {state['step']} from {ckpt.name}")
    return state["step"]


class _StopFlag:
    """First Ctrl-C/SIGTERM: finish the step, checkpoint, exit. Second: stop at once."""

    def __init__(self):
        self.raised = False
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.raised:
            raise KeyboardInterrupt
        self.raised = True
        tqdm.write(
            f"signal {signum}: finishing this step, then writing a checkpoint "
            "(signal again to abort without one)"
        )

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)


def run(
    cfg: TrainConfig,
    *,
    resume: bool = False,
    run_dir: Path | None = None,
    policy: Gwen | None = None,
    reward_fn=None,
) -> Path:
    """Train per `cfg`; with `resume`, continue the run in `run_dir` from its newest checkpoint."""
    backend.announce()
    run_dir = Path(run_dir or Path(cfg.out_dir) / (cfg.run_name or cfg.default_run_name()))
    r = build(cfg, run_dir, policy, reward_fn)
    start = resume_into(r) if resume else 0
    (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
    tqdm.write(f"run dir: {run_dir}")
    bar = tqdm(total=cfg.steps, initial=start, desc="grpo", unit="step", dynamic_ncols=True)
    last_saved = start
    with _StopFlag() as stop:
        for step in range(start + 1, cfg.steps + 1):
            b = rollout(r, step)
            t0 = time.perf_counter()
            upd = update(r, b)
            m = step_metrics(r, b, upd, time.perf_counter() - t0)
            r.controller.update(m["kl_mean"], cfg.prompts_per_step * cfg.group_size)
            if cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps):
                m.update(evaluate.evaluate(r))
            r.metrics.append(step, m)
            log_rollouts(r, step, b)
            bar.update(1)
            bar.set_postfix(
                reward=f"{m['reward_mean']:.3f}",
                kl=f"{m['kl_mean']:.4f}",
                loss=f"{m['loss']:.4f}",
                s=f"{m['step_s']:.1f}",
            )
            if step % cfg.save_every == 0 or step == cfg.steps or stop.raised:
                save(r, step)
                last_saved = step
            if stop.raised:
                break
    bar.close()
    r.db.close()
    tqdm.write(f"done at step {last_saved}; checkpoint in {run_dir / 'checkpoints'}")
    return run_dir


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    if args.plot:
        for path in runlog.plot_run(Path(args.plot)):
            print(path)
        return
    cfg = resolve_config(args)
    run(cfg, resume=bool(args.resume), run_dir=Path(args.resume) if args.resume else None)


if __name__ == "__main__":
    sys.exit(main())
