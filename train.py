"""GRPO training for rl-values: sample groups, score them, take a clipped policy step, record all.

Each step takes B prompts from the shuffled training set, samples G completions per prompt
(prompt prefilled once), scores them with the reward (the model-judged rubric by default, or a
programmatic one), turns rewards into group-relative advantages (grpo.py), and updates the policy
on the GRPO loss with an optional KL penalty to a frozen reference. Every random draw is keyed
by (seed, step), so a run resumed from a checkpoint repeats the uninterrupted run exactly.
Writes RUN_DIR/metrics.jsonl, RUN_DIR/rollouts.sqlite, checkpoints and (with --plot) PNG curves.
It is one loop, not a framework: the math lives in grpo.py, the judge in rubric.py.
"""

import argparse
import contextlib
import dataclasses
import json
import math
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
import grpo
import lora
import rewards as rewards_mod
import runlog
from gwen import Gwen, sequence_logprobs
from kernels import masked_mean
from model import Model
from prompts import load_prompts


def _f(default, help_text, **kw):
    return field(default=default, metadata={"help": help_text, **kw})


@dataclass
class TrainConfig:
    model: str = _f("smollm2-135m", "policy checkpoint: HF folder, hub id or smollm2-135m")
    reward: str = _f("rubric", "reward: rubric (model-judged) or happy (toy, hackable)")
    data: str | None = _f(None, "training prompts, validated before step 1 (default: "
                          "data/prompts.jsonl; data/happy_prompts.jsonl for --reward happy)")
    eval_data: str = _f("data/eval.jsonl", "held-out prompts for --eval-every")
    steps: int = _f(60, "optimizer steps to run (total, including resumed ones)")
    prompts_per_step: int = _f(4, "distinct prompts B per step")
    group_size: int = _f(4, "completions G per prompt (>= 2 for a group baseline)")
    max_new_tokens: int = _f(64, "generation cap per completion")
    temperature: float = _f(1.0, "sampling temperature (log-probs use the same)")
    top_p: float = _f(1.0, "nucleus sampling mass")
    lr: float = _f(2e-6, "peak AdamW learning rate")
    warmup_steps: int = _f(3, "linear warm-up steps")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    max_grad_norm: float = _f(1.0, "clip the global gradient norm to this")
    grad_accum: int = _f(1, "micro-batches per step (splits the B groups)")
    num_iterations: int = _f(1, "updates per rollout batch (PPO's mu), ratio vs rollout policy")
    loss_type: str = _f("grpo", "grpo | dr_grpo | dapo")
    clip_eps_low: float = _f(0.2, "ratio floor 1 - eps_low")
    clip_eps_high: float | None = _f(None, "ratio ceiling 1 + eps_high (default 0.28 dapo)")
    scale_by_std: bool = _f(True, "divide advantages by the group std (off for dr_grpo)")
    std_floor: float = _f(1e-2, "floor on the group std when scaling")
    min_group_std: float = _f(0.0, "drop groups whose reward std is below this (0 = keep all)")
    kl_coef: float = _f(0.04, "KL penalty coefficient (initial value when adaptive)")
    kl_target: float | None = _f(None, "target KL per token: adapt the coefficient (Ziegler)")
    kl_horizon: int = _f(10000, "adaptive KL horizon, in samples")
    kl_estimator: str = _f("k3", "k1 | k2 | k3")
    kl_direction: str = _f("reverse", "reverse | forward | symmetric")
    lora_rank: int = _f(0, "0 = full fine-tuning, else the LoRA rank")
    lora_alpha: float = _f(16.0, "LoRA alpha (scale = alpha / rank)")
    lora_targets: str = _f("q_proj,k_proj,v_proj,o_proj", "comma-separated LoRA target layers")
    ref_quant_bits: int = _f(0, "quantize the frozen reference to 8 or 4 bits (0 = off)")
    judge: str = _f("frozen", "frozen (starting weights) | live (the current policy)")
    judge_model: str | None = _f(None, "judge with this checkpoint instead")
    judge_chunk_size: int | None = _f(None, "judge micro-batch (default 24)")
    length_penalty: float = _f(0.0, "reward -= this per word beyond --length-target")
    length_target: int = _f(120, "words allowed before the length penalty")
    eval_every: int = _f(0, "evaluate on --eval-data every N steps (0 = off)")
    eval_limit: int = _f(32, "eval prompts per evaluation")
    save_every: int = _f(10, "checkpoint every N steps (and at the end, and on Ctrl-C)")
    seed: int = _f(0, "seed for data order, sampling and LoRA init")
    dtype: str | None = _f(None, "float32 | float16 | bfloat16 (default: backend's)")
    out_dir: str = _f("runs", "parent folder of run directories")
    run_name: str | None = _f(None, "run directory name (default: built from hyperparameters)")

    def __post_init__(self):
        def need(ok, msg):
            if not ok:
                raise ValueError(msg)

        need(
            self.group_size >= 2,
            f"group_size={self.group_size}: GRPO needs >= 2 completions "
            "per prompt for a group baseline; use --group-size 4",
        )
        need(self.prompts_per_step >= 1, f"prompts_per_step={self.prompts_per_step}: use >= 1")
        need(
            self.prompts_per_step % self.grad_accum == 0,
            f"prompts_per_step={self.prompts_per_step} is not divisible by grad_accum="
            f"{self.grad_accum}: micro-batches split the groups evenly",
        )
        need(
            self.steps >= 1 and self.max_new_tokens >= 1 and self.num_iterations >= 1,
            "steps, max_new_tokens and num_iterations must be >= 1",
        )
        need(self.reward in ("rubric", "happy"), f"reward={self.reward!r}: use rubric or happy")
        if self.data is None:  # the toy reward needs prompts that sometimes draw "happy"
            self.data = "data/happy_prompts.jsonl" if self.reward == "happy" \
                else "data/prompts.jsonl"
        need(self.judge in ("frozen", "live"), f"judge={self.judge!r}: use frozen or live")
        need(self.ref_quant_bits in (0, 4, 8), f"ref_quant_bits={self.ref_quant_bits}: 0, 4, 8")
        need(
            not (self.ref_quant_bits and self.lora_rank),
            "ref_quant_bits needs full fine-tuning: with LoRA the reference is the base model "
            "with adapters off, which costs no memory",
        )
        need(self.lr > 0 and self.kl_coef >= 0, f"lr={self.lr} must be > 0, kl_coef >= 0")
        self.loss_config()  # validates loss_type, clipping and KL settings

    def loss_config(self) -> grpo.LossConfig:
        return grpo.LossConfig(
            loss_type=self.loss_type,
            clip_eps_low=self.clip_eps_low,
            clip_eps_high=self.clip_eps_high,
            kl_estimator=self.kl_estimator,
            kl_direction=self.kl_direction,
            max_completion_len=self.max_new_tokens,
        )

    def needs_reference(self) -> bool:
        return self.kl_coef > 0 or self.kl_target is not None

    def default_run_name(self) -> str:
        slug = Path(self.model).name.replace("/", "_")
        kl = f"kl{self.kl_coef:g}" + (f"t{self.kl_target:g}" if self.kl_target else "")
        ft = f"lora{self.lora_rank}" if self.lora_rank else "full"
        return (
            f"{slug}_{self.reward}_{self.loss_type}_{ft}_b{self.prompts_per_step}"
            f"g{self.group_size}_lr{self.lr:g}_{kl}_s{self.seed}_"
            f"{time.strftime('%Y%m%d-%H%M%S')}"
        )


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


def frozen_copy(model: Model, quant_bits: int = 0) -> Model:
    copy = Model(model.args)
    copy.load_weights(tree_flatten(model.parameters()), strict=True)
    if quant_bits:
        nn.quantize(copy, group_size=64, bits=quant_bits)
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

    if cfg.length_penalty > 0:
        inner = score

        def score(prompts, completions, categories):  # noqa: F811  (wraps the choice above)
            values, details, failures = inner(prompts, completions, categories)
            pen = rewards_mod.length_penalty(
                completions, target_words=cfg.length_target, per_word=cfg.length_penalty
            )
            return [v + p for v, p in zip(values, pen, strict=True)], details, failures

    def checked(prompts, completions, categories):
        values, details, failures = score(prompts, completions, categories)
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (len(completions),):
            raise ValueError(
                f"reward returned {values.shape} values for {len(completions)} "
                "completions: a reward must give one float per completion"
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
        names = sorted({k for d in b["details"] for k in d if k != "reward"})
        for name in names:
            vals = [d.get(name) for d in b["details"]]
            vals = [v for v in vals if v is not None and math.isfinite(v)]
            m[f"reward/{name}"] = float(np.mean(vals)) if vals else None
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
                "scores": json.dumps({k: v for k, v in d.items()}, default=float),
                "reward": float(rewards[i]),
                "advantage": float(adv[i]),
                "length": int(s.lengths[i]),
                "finished": int(s.finished[i]),
            }
        )
    run.db.add(rows)


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


def evaluate(run: Run, step: int) -> dict:
    """Greedy answers to the first eval_limit held-out prompts, judged like training rollouts."""
    cfg = run.cfg
    recs = run.eval_records[: cfg.eval_limit]
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
        for name in sorted({k for i in idx for k in (details[i] if details else {})}):
            vals = [details[i].get(name) for i in idx]
            vals = [v for v in vals if v is not None and math.isfinite(v)]
            if name != "reward" and vals:
                out[f"eval/{cat}/{name}"] = float(np.mean(vals))
    controls = [t for t, r in zip(texts, recs, strict=True) if r["category"] == "control"]
    if controls:
        out["eval/control_pushback_rate"] = float(np.mean([pushes_back(t) for t in controls]))
    out["eval/reward"] = float(np.nanmean(values))
    return out


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
                m.update(evaluate(r, step))
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="GRPO on a rubric reward (rl-values).")
    p.add_argument(
        "--config",
        help="a saved config JSON (e.g. RUN_DIR/config.json); flags given here override it",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue RUN_DIR from its newest "
        "checkpoint (uses its config; flags such as --steps override)",
    )
    p.add_argument("--plot", metavar="RUN_DIR", help="write PNG curves of RUN_DIR and exit")
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        kind = f.type if isinstance(f.type, type) else str(f.type)
        if kind is bool:
            p.add_argument(
                flag,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=f.metadata["help"],
            )
            continue
        conv = {int: int, float: float, str: str}.get(kind)
        if conv is None:  # optional fields: "float | None" etc.
            conv = float if "float" in kind else int if "int" in kind else str
        p.add_argument(
            flag,
            type=conv,
            default=argparse.SUPPRESS,
            help=f"{f.metadata['help']} (default: {f.default})",
        )
    return p


def resolve_config(args: argparse.Namespace) -> TrainConfig:
    """Defaults < --config / the resumed run's config < flags given on the command line."""
    base = {}
    source = args.config or (Path(args.resume) / "config.json" if args.resume else None)
    if source:
        path = Path(source)
        if not path.exists():
            raise SystemExit(f"config file {path} does not exist")
        base = json.loads(path.read_text())
        known = {f.name for f in dataclasses.fields(TrainConfig)}
        unknown = sorted(set(base) - known)
        if unknown:
            raise SystemExit(f"{path}: unknown config fields {unknown}; valid: {sorted(known)}")
    flags = {k: v for k, v in vars(args).items() if k not in ("config", "resume", "plot")}
    try:
        return TrainConfig(**{**base, **flags})
    except (TypeError, ValueError) as e:
        raise SystemExit(f"invalid config: {e}") from e


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
