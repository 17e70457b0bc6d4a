"""GRPO training for rl-values: sample groups, score them, take a clipped policy step, record all.

Each step takes B prompts from the shuffled training set (prompts.PromptStream), samples G
completions per prompt (prompt prefilled once), scores them with the reward spec
(rewards/registry.py: the model-judged rubric by default), turns rewards into group-relative
advantages (grpo.py), and updates the policy on the GRPO loss with an optional KL penalty to a
frozen reference (rl/policy_update.py, rl/reference.py). Every random draw is keyed by (seed, step),
so a run resumed from a checkpoint (run_state.save_run / resume_run) repeats the uninterrupted run
exactly. Writes RUN_DIR/metrics.jsonl, RUN_DIR/rollouts.sqlite, checkpoints and (with --plot) PNG
curves (rl/runlog.py), and TensorBoard events in RUN_DIR/tb/ (rl/tblog.py). It is the loop and its
CLI.
"""

import dataclasses
import functools
import json
import sys
import time
from pathlib import Path

from core import backend, errors, lora, precision, quant, run_folder, strict_json
from core.prompts import prompt_stream

import mlx.core as mx
import numpy as np
from tqdm import tqdm

import grpo
from evals import routing as eval_routing
from gwen import Gwen
from load_weights import LoadError
from rewards import hacks
from rewards.registry import RewardContext, parse_spec
from rewards.scorer import build_scorer, scorer_from_fn
from rl import (
    checkpoint,
    distributed,
    eval_hook,
    policy_update,
    reward_refresh,
    routing,
    runlog,
    tblog,
)
from rl.config import ConfigError, TrainConfig, build_parser, resolve_config  # noqa: F401 (tests)
from rl.reference import Reference, default_judge, trunk_depth
from rl.rollout_batch import Rollout
from rl.run_state import Run, resume_run, save_run
from tasks import registry as tasks

# Where a run is written: rank 0's folder is every rank's (distributed.main_value), so these
# may differ between ranks (e.g. a temporary folder each).
WHERE = ("out_dir", "run_name")


def build(cfg: TrainConfig, run_dir: Path, policy: Gwen | None = None, reward_fn=None) -> Run:
    task = tasks.get(cfg.task)
    records, eval_records = cfg.load_data()  # bad files fail here, before any model work
    mx.random.seed(cfg.seed)  # only LoRA init draws from MLX's global RNG
    dtype = backend.parse_dtype(cfg.dtype)
    policy = policy or Gwen.load(cfg.model, dtype, enable_thinking=cfg.enable_thinking)
    policy.system_prompt, policy.examples = task.system_prompt, task.examples
    policy.drop_finished = cfg.drop_finished
    model = policy.model
    if quant.quantized_layers(model):
        raise LoadError(
            f"--model {cfg.model} is quantized: GRPO cannot update its integer weights, and LoRA "
            "over quantized layers is not supported. Train the float model; a quantized model "
            "serves as --judge-model, and --ref-quant-bits quantizes the reference"
        )
    reference = None
    if cfg.needs_reference():
        reference = Reference.for_policy(model, cfg.lora_rank, cfg.ref_quant_bits)
    judge = functools.partial(
        default_judge,
        policy,
        reference,
        judge=cfg.judge,
        judge_model=cfg.judge_model,
        lora_rank=cfg.lora_rank,
        ref_quant_bits=cfg.ref_quant_bits,
        dtype=dtype,
    )
    ctx = RewardContext(
        judge,
        policy.tokenizer,
        cfg.judge_batch_size,
        records + eval_records,
        cfg.share_prefix,
        ragged=cfg.ragged_tail,
        refresh=bool(cfg.reward_refresh),
        policy=cfg.model,
    )
    if reward_fn is not None and cfg.reward_refresh:
        raise ConfigError(
            f"reward_refresh={cfg.reward_refresh} updates the reward's rm component, and an "
            "in-process reward function has none: drop reward_refresh or pass --reward rm:PATH"
        )
    if reward_fn is not None:
        scorer = scorer_from_fn(reward_fn, cfg.length_target, cfg.length_penalty)
    else:  # before LoRA is applied: a frozen judge copies the starting weights
        scorer = build_scorer(cfg.reward_components(), ctx, cfg.length_target, cfg.length_penalty)
    detectors, routing_eval = routing_parts(cfg, ctx, scorer, eval_records)
    refresher = None
    if ctx.refresh:  # config checked: exactly one rm component, now built unmerged
        settings = reward_refresh.Settings(
            every=cfg.reward_refresh,
            pairs=cfg.refresh_pairs,
            steps=cfg.refresh_steps,
            batch=cfg.refresh_batch,
            lr=cfg.refresh_lr,
            stance=cfg.refresh_stance,
            replay=cfg.refresh_replay,
        )
        refresher = reward_refresh.Refresher(settings, ctx.reward_models[0], cfg.seed)
    if cfg.lora_rank:
        _apply_adapters(model, cfg)
    model.train()
    schedule = precision.schedule(cfg.lr, cfg.warmup_steps, start=1e-3)
    # float32 moments, and float32 master weights under half-precision ones (core/precision.py)
    optimizer = precision.adamw(
        model.trainable_parameters(), learning_rate=schedule, weight_decay=cfg.weight_decay
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    return Run(
        cfg=cfg,
        run_dir=run_dir,
        policy=policy,
        reference=reference,
        scorer=scorer,
        optimizer=optimizer,
        stream=prompt_stream(records, cfg.seed, cfg.pairs_per_step, cfg.single_category_list()),
        eval_records=eval_records,
        controller=grpo.AdaptiveKLController(cfg.kl_coef, cfg.kl_target, cfg.kl_horizon),
        metrics=distributed.main_only(lambda: runlog.MetricsLog(run_dir / "metrics.jsonl")),
        db=distributed.main_only(lambda: runlog.RolloutDB(run_dir / "rollouts.sqlite")),
        tb=tblog.TBLog(run_dir / "tb") if cfg.tensorboard and distributed.is_main() else None,
        detectors=detectors,
        routing_eval=routing_eval,
        # One process only: a gathered rollout is re-padded, so its rows' trunk is recomputed.
        trunk_depth=trunk_depth(model, reference, cfg.share_trunk)
        if cfg.rollout_trunk and distributed.size() == 1
        else 0,
        refresher=refresher,
        step_hooks=[refresher] if refresher else [],
    )


def routing_parts(cfg, ctx, scorer, eval_records: list[dict]):
    """(built hack detectors, eval_routing.evaluate bound to the run's settings or None)."""
    detectors = hacks.build(hacks.parse_spec(cfg.hack_detectors), ctx) if cfg.hack_detectors else []
    if not cfg.routing_eval_every:
        return detectors, None
    task = scorer
    if cfg.task_reward:
        task = build_scorer(parse_spec(cfg.task_reward), ctx)
    routing_eval = functools.partial(
        eval_routing.evaluate,
        records=eval_records,
        task_scorer=task,
        detectors=detectors,
        limit=cfg.eval_limit,
        samples=cfg.routing_eval_samples,
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        seed=cfg.seed,
    )
    return detectors, routing_eval


def _apply_adapters(model, cfg: TrainConfig) -> None:
    """LoRA per cfg.lora_config(): plain, or dual (retain + forget) for gradient routing."""
    lc, targets = cfg.lora_config(), cfg.lora_target_list()
    layers = cfg.lora_layer_list(len(model.layers))
    if lc.get("forget_rank"):
        n = lora.apply_dual_lora(model, lc["rank"], lc["forget_rank"], lc["alpha"], targets, layers)
        desc = f"dual LoRA retain {lc['rank']} + forget {lc['forget_rank']}"
    else:
        n = lora.apply_lora(model, lc["rank"], lc["alpha"], targets, layers)
        desc = f"LoRA rank {lc['rank']}"
    blocks = f"top {cfg.lora_layers} blocks" if cfg.lora_layers else "all blocks"
    tqdm.write(f"{desc} on {targets}, {blocks}: {n:,} trainable", file=sys.stderr)


def row_seeds(cfg: TrainConfig, step: int, prompts: range, group_size: int) -> list[int]:
    """One sampler seed per completion row, keyed by (seed, step, the prompt's place in the
    step's batch, the sample): a group draws the same completions whichever rank samples it."""
    return [
        int(np.random.SeedSequence([cfg.seed, step, i, g]).generate_state(1)[0])
        for i in prompts
        for g in range(group_size)
    ]


def rollout(run: Run, step: int) -> Rollout:
    """Sample B x G completions, score them, and compute advantages (host-side numbers)."""
    cfg, G = run.cfg, run.cfg.group_size
    batch = run.stream.next_batch(cfg.prompts_per_step)
    mine = distributed.shard(len(batch))  # this rank's groups (all of them in one process)
    t0 = time.perf_counter()
    sample = run.policy.sample_group(
        [batch[i]["prompt"] for i in mine],
        G,
        cfg.max_new_tokens,
        cfg.temperature,
        cfg.top_p,
        seed=row_seeds(cfg, step, mine, G),
        stop_at_eos=not cfg.ignore_eos,
        trunk_depth=run.trunk_depth,
    )
    mx.eval(sample.tokens, sample.mask)
    t1 = time.perf_counter()
    flat = [batch[i] for i in mine for _ in range(G)]
    scores = run.scorer([r["prompt"] for r in flat], sample.texts, [r["category"] for r in flat])
    sample, scores = distributed.gather_rollout(sample, scores, run.policy.pad_id)
    t2 = time.perf_counter()
    reward_grid = scores.values.reshape(len(batch), G)
    finished = np.asarray(sample.finished).reshape(len(batch), G)
    capped = 0
    if cfg.truncated == "cap":
        reward_grid, capped = grpo.cap_truncated(reward_grid, finished)
    keys, state = [r["category"] for r in batch], run.baseline_state
    adv = grpo.advantages(
        cfg.baseline,
        reward_grid,
        keys,
        state,
        scale_by_std=cfg.scale_by_std,
        std_floor=cfg.std_floor,
        cap=cfg.advantage_cap,
    )
    run.baseline_state = grpo.baseline_update(state, reward_grid, keys, cfg.baseline_decay)
    keep = None
    if cfg.min_group_std > 0:
        keep = mx.logical_not(grpo.low_variance_groups(reward_grid, cfg.min_group_std))
    adv_flat, mask = grpo.flatten_groups(adv, sample.mask, keep)
    if cfg.truncated == "mask":  # out of the loss, still in the group's baseline above
        mask = mask * mx.array(finished.reshape(-1, 1), dtype=mx.float32)
    filtered = 0 if keep is None else int((~np.asarray(keep)).sum())
    return Rollout(
        batch,
        sample,
        scores,
        reward_grid,
        adv_flat,
        mask,
        filtered,
        t1 - t0,
        t2 - t1,
        capped=capped,
    )


def train_step(r: Run, step: int) -> dict:
    """One step: rollout, update, KL controller, metrics (and evaluation when due); logged."""
    cfg = r.cfg
    cpu0 = time.process_time()
    retain_only = routing.retain_only_step(cfg, step)
    with routing.retain_alone(r.policy.model, retain_only):
        b = rollout(r, step)
        hack_rates = routing.flag_hacks(r.detectors, b)
        t0 = time.perf_counter()
        upd = policy_update.update(r, b)
    m_hooks = {}
    for hook in r.step_hooks:  # after the update (a refreshed reward scores the next step)
        m_hooks |= hook(step, b)
    r.counters["judge_failures"] += b.scores.failures
    r.counters["filtered_groups"] += b.filtered_groups
    m = runlog.step_metrics(b, upd, time.perf_counter() - t0) | r.counters | hack_rates | m_hooks
    if cfg.retain_rollout_every:
        m["route/retain_only_step"] = float(retain_only)
    # This process's CPU time, all threads: unlike step_s it does not grow when jobs share cores.
    m["cpu_s"] = time.process_time() - cpu0
    m["kl_coef"] = r.controller.coef
    m |= {f"baseline/{key}": s["mean"] for key, s in r.baseline_state.items()}
    r.controller.update(m["kl_mean"], len(b.records) * cfg.group_size)
    due = cfg.eval_every and (step % cfg.eval_every == 0 or step == cfg.steps)
    if due and distributed.is_main():  # only rank 0 logs it
        m |= eval_hook.evaluate(
            r.policy,
            r.scorer,
            r.eval_records,
            limit=cfg.eval_limit,
            max_new_tokens=cfg.max_new_tokens,
        )
    if r.routing_eval and (step % cfg.routing_eval_every == 0 or step == cfg.steps):
        m |= r.routing_eval(r.policy)
    rows = runlog.rollout_rows(step, b)
    r.metrics.append(step, m)
    r.db.add(rows)
    if r.tb:
        r.tb.add(step, m, rows)
    return m


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
    distributed.check_split(cfg.prompts_per_step, cfg.grad_accum, "prompts_per_step")
    if cfg.routing == "routed" and distributed.size() > 1:  # routed_update sums no gradients
        raise distributed.LaunchError("--routing routed runs in one process: launch it alone")
    run_dir = Path(distributed.main_value(str(run_dir)))  # the name holds rank 0's clock
    if not resume and (run_dir / "metrics.jsonl").exists():
        raise FileExistsError(
            f"{run_dir} already holds a run: continue it with --resume {run_dir}, or choose "
            "another --run-name"
        )
    r = build(cfg, run_dir, policy, reward_fn)
    start = resume_run(r) if resume else 0
    distributed.check_same(
        lambda: {
            "step": start,
            "data cursor": r.stream.state(),
            "config": {k: v for k, v in dataclasses.asdict(cfg).items() if k not in WHERE},
            "training data": distributed.digest(r.stream.records),
            "weights": distributed.checksum(r.policy.model.trainable_parameters()),
        }
    )
    if distributed.is_main():
        (run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
    tqdm.write(f"run dir: {run_dir}", file=sys.stderr)
    bar = tqdm(
        total=cfg.steps,
        initial=start,
        desc="grpo",
        unit="step",
        dynamic_ncols=True,
        disable=not distributed.is_main(),
    )
    last_saved = start
    with checkpoint.StopOnSignal() as stop:
        for step in range(start + 1, cfg.steps + 1):
            try:
                m = train_step(r, step)
            except precision.NonFiniteError as e:  # the error line goes below the bar
                bar.close()
                raise precision.NonFiniteError(f"step {step}: {e}") from e
            bar.update(1)
            bar.set_postfix(
                reward=f"{m['reward_mean']:.3f}",
                kl=f"{m['kl_mean']:.4f}",
                loss=f"{m['loss']:.4f}",
                s=f"{m['step_s']:.1f}",
            )
            stopping = distributed.any_rank(stop.raised)  # every rank stops at the same step
            if step % cfg.save_every == 0 or step == cfg.steps or stopping:
                save_run(r, step)
                last_saved = step
            if stopping:
                break
    bar.close()
    r.db.close()
    if r.tb:
        r.tb.close()
    done = f"done at step {last_saved}; checkpoint in {run_dir / 'checkpoints'}"
    tqdm.write(done, file=sys.stderr)
    return run_dir


@errors.cli
def main(argv=None) -> int:
    """The CLI: a bad input (config, data file, model path, missing checkpoint) is one `error:`
    line and exit status 2, not a traceback (errors.cli); Ctrl-C checkpoints (run)."""
    args = build_parser().parse_args(argv)
    if args.plot:
        for path in runlog.plot_run(Path(args.plot)):
            print(path)
        return 0
    cfg = resolve_config(args)
    run_dir = run(cfg, resume=bool(args.resume), run_dir=Path(args.resume) if args.resume else None)
    if args.json and distributed.is_main():
        print(strict_json.dumps(run_summary(run_dir)))
    return 0


def run_summary(run_dir: Path) -> dict:
    """What `--json` prints when a run stops: its folder, newest checkpoint and last step's
    metrics (the whole curve is RUN_DIR/metrics.jsonl)."""
    metrics = run_dir / "metrics.jsonl"
    rows = run_folder.read_metrics(metrics)
    latest = checkpoint.latest(run_dir) if (run_dir / "latest").exists() else None
    last = rows[-1] if rows else None
    return {"run_dir": str(run_dir), "checkpoint": str(latest) if latest else None,
            "steps": last["step"] if last else 0, "last": last}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
