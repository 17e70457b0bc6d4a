"""GRPO step benchmark: median step time and peak memory, split into rollout / reward / reference /
update; with `--ab`, the step with every optimization on against all of them off, in one run.

Runs train.py's loop for --steps steps (the first is a warm-up and is not counted) at exactly
--max-new-tokens new tokens (EOS ignored, so every step does the same work) and reports medians
from metrics.jsonl. `--eos` lets answers end as in training (real lengths, the recipe's truncation
rule), where the optimizations that skip what follows an EOS (`head_valid_only`,
`drop_finished`) show; both arms start from the same weights and seeds, so their rollouts agree
but for rounding, while each step's work follows the lengths the policy gives. Without
`--config`: B prompts (--prompts-per-step) x G samples, full fine-tuning with a frozen reference
(KL coefficient 0.04) unless told otherwise. With `--config FILE` (a recipe such as
recipes/values_smollm2.json): that run's shape, model, reward, LoRA and KL settings; flags given
here override it.

`--ab` alternates runs with every optimization on and with all of them off (`--rounds` pairs, on
first), and prints both medians, their ratio and each arm's step parts. The optimizations are the
TrainConfig switches in OPTIMIZATIONS and, on MLX's CPU backend, the native kernels
(`native_kernels`: core/cpu_native.py; off, the stand-ins and plain ops of before them).
`--off NAME` switches one optimization off (in both arms of an A/B: the other optimizations are
then measured without it); `--keep NAME` keeps one on in the unoptimized arm too (say
`--keep native_kernels`: the A/B of the other switches with the kernels in both arms).
`reference_s` is the shared frozen trunk plus the reference's log-probs, a part of `update_s`.
Peers measured on the same machine are recorded in knowledge/benchmarks.md (TRL GRPOTrainer,
mlx-lm-lora); they cannot run offline here. Under `mlx.launch -n N` the ranks split the same
global batch and rank 0 reports (bench/distributed.py runs both and prints the ratio).

  uv run python -m bench.train --config recipes/values_smollm2.json --ab --json
"""

import argparse
import contextlib
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

from core import backend, cpu_ops, errors, flags, strict_json
from core.run_folder import read_metrics

import mlx.core as mx

import train
from rl import distributed
from rl.config import resolve_config

# name -> (TrainConfig field, value when on, value when off): the optimizations --ab compares.
OPTIMIZATIONS = {
    "share_trunk": ("share_trunk", True, False),  # frozen bottom blocks once for policy + ref
    "share_prefix": ("share_prefix", True, False),  # the reward model reads a prompt once
    "rollout_trunk": ("rollout_trunk", True, False),  # the update reuses sampling's trunk
    "head_valid_only": ("head_valid_only", True, False),  # no LM head on padding after EOS
    "drop_finished": ("drop_finished", True, False),  # ended answers leave the decode batch
    "ragged_tail": ("ragged_tail", True, False),  # no blocks on most padding after EOS
    "keep_head_logits": ("keep_head_logits", True, False),  # the head's backward reuses logits
}
# name -> context manager taking `on`: optimizations that are process settings, not config fields.
PROCESS_SWITCHES = {"native_kernels": cpu_ops.native_kernels}
NAMES = (*OPTIMIZATIONS, *PROCESS_SWITCHES)
PARTS = ("rollout_s", "reward_s", "reference_s", "update_s")
DEFAULTS = dict(model="smollm2-135m", reward="happy", prompts=8, group_size=8, max_tokens=64)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--config", help="a recipe / run config JSON to take the step's shape from")
    p.add_argument("--model", help=f"policy checkpoint (default: {DEFAULTS['model']})")
    p.add_argument("--reward", help=f"reward spec (default: {DEFAULTS['reward']})")
    p.add_argument(
        "--prompts-per-step", type=int, help=f"prompts per step B (default: {DEFAULTS['prompts']})"
    )
    p.add_argument("--group-size", type=int, help="samples per prompt G (default: 8)")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        help="new tokens per sample, exact; the cap with --eos (default: 64)",
    )
    p.add_argument("--steps", type=int, default=4, help="steps per run; the first is warm-up")
    p.add_argument("--kl-coef", type=float, help="0 drops the reference model (default: 0.04)")
    p.add_argument("--lora-rank", type=int, help="0 = full fine-tuning (default: 0)")
    p.add_argument("--ab", action="store_true", help="optimizations on vs all off, interleaved")
    p.add_argument("--rounds", type=int, default=2, help="--ab: on/off run pairs")
    p.add_argument(
        "--off",
        action="append",
        default=[],
        choices=sorted(NAMES),
        help="switch this optimization off in both arms (repeatable)",
    )
    p.add_argument(
        "--keep",
        action="append",
        default=[],
        choices=sorted(NAMES),
        help="--ab: keep this optimization on in the unoptimized arm too (repeatable)",
    )
    p.add_argument(
        "--eos",
        action="store_true",
        help="answers end at EOS as in training (the recipe's truncation rule): real lengths, so "
        "steps differ in work; both arms start from the same weights and seeds",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    flags.renamed(p, "--prompts", "--prompts-per-step")
    flags.renamed(p, "--max-tokens", "--max-new-tokens")
    return p


def base_config(a, tmp: str) -> train.TrainConfig:
    """The benchmarked run's config: the recipe (or the defaults) with this command's flags."""
    given = {
        "model": a.model,
        "reward": a.reward,
        "prompts_per_step": a.prompts_per_step,
        "group_size": a.group_size,
        "max_new_tokens": a.max_new_tokens,
        "kl_coef": a.kl_coef,
        "lora_rank": a.lora_rank,
    }
    given = {k: v for k, v in given.items() if v is not None}
    fixed = dict(
        steps=a.steps,
        save_every=10**9,
        eval_every=0,
        tensorboard=False,
        out_dir=tmp,
        run_name="bench",
    )
    if not a.eos:  # every answer runs to max_tokens, so none ends: fixed work per step
        fixed |= dict(ignore_eos=True, truncated="keep")
    if a.config:
        ns = argparse.Namespace(config=a.config, resume=None, plot=None, **given, **fixed)
        return resolve_config(ns)
    shape = {
        "model": DEFAULTS["model"],
        "reward": DEFAULTS["reward"],
        "prompts_per_step": DEFAULTS["prompts"],
        "group_size": DEFAULTS["group_size"],
        "max_new_tokens": DEFAULTS["max_tokens"],
        "kl_coef": 0.04,
        "lora_rank": 0,
    }
    return train.TrainConfig(**{**shape, **given, **fixed})


def arm_switches(optimized: bool, off: list[str], keep: list[str]) -> dict[str, bool]:
    """name -> on, for every optimization in one arm: the optimized arm has all of them but
    `off`, the unoptimized arm only those in `keep` (and not in `off`)."""
    return {n: n not in off and (optimized or n in keep) for n in NAMES}


def with_optimizations(cfg, switches: dict[str, bool], run_name: str) -> train.TrainConfig:
    """`cfg` with each config optimization on or off as `switches` says."""
    values = {field: (v_on if switches[name] else v_off)
              for name, (field, v_on, v_off) in OPTIMIZATIONS.items()}  # fmt: skip
    return dataclasses.replace(cfg, **values, run_name=run_name)


def run_arm(cfg, switches: dict[str, bool], run_name: str) -> list[dict]:
    """timed_rows of `cfg` under `switches`, the process switches set around the run."""
    with contextlib.ExitStack() as stack:
        for name, switch in PROCESS_SWITCHES.items():
            stack.enter_context(switch(switches[name]))
        return timed_rows(with_optimizations(cfg, switches, run_name))


def timed_rows(cfg) -> list[dict]:
    """metrics.jsonl rows of a run of `cfg`, the warm-up step dropped."""
    run_dir = train.run(cfg)
    if not distributed.is_main():
        return []
    return read_metrics(Path(run_dir) / "metrics.jsonl")[1:]


def medians(rows: list[dict]) -> dict:
    keys = ("step_s", *PARTS, "tokens_per_s", "cpu_s")
    return {k: statistics.median(r.get(k, 0.0) for r in rows) for k in keys}


def cpu_native_available() -> bool:
    with cpu_ops.native_kernels(True):
        return cpu_ops.native(mx.zeros((1,))) is not None


@errors.cli
def main(argv=None):
    a = build_parser().parse_args(argv)
    if a.steps < 2 or a.rounds < 1:
        raise errors.UserError("--steps must be >= 2 (the first is a warm-up), --rounds >= 1")
    if a.keep and not a.ab:
        raise errors.UserError("--keep sets the unoptimized arm of an A/B: add --ab")
    with tempfile.TemporaryDirectory() as tmp:
        with errors.as_user_error(ValueError):  # TrainConfig's checks
            cfg = base_config(a, tmp)
        mx.reset_peak_memory()
        arms = {"optimized": [], "unoptimized": []} if a.ab else {"optimized": []}
        for i in range(a.rounds if a.ab else 1):
            for arm, rows in arms.items():
                switches = arm_switches(arm == "optimized", a.off, a.keep)
                rows.extend(run_arm(cfg, switches, f"bench_{arm}_{i}"))
        if not distributed.is_main():  # rank 0 holds the metrics and reports
            return 0
    rows = arms["optimized"]
    med = medians(rows)
    result = {
        "config": a.config,
        "model": cfg.model,
        "reward": cfg.reward,
        "backend": backend.backend_name(),
        "blas": backend.BLAS,
        "dtype": str(backend.default_dtype()),
        "prompts": cfg.prompts_per_step,
        "group_size": cfg.group_size,
        "max_tokens": cfg.max_new_tokens,
        "eos": a.eos,  # False: every answer ran to max_tokens
        "kl_coef": cfg.kl_coef,
        "lora_rank": cfg.lora_rank,
        "lora_layers": cfg.lora_layers,
        "optimizations": arm_switches(True, a.off, a.keep),
        # whether the native CPU kernels built and load here (switched on or not)
        "native_kernels_available": cpu_native_available(),
        "timed_steps": len(rows),
        "median_step_s": med["step_s"],
        **{k: med[k] for k in PARTS},
        "rollout_tokens_per_s": med["tokens_per_s"],
        "cpu_s": med["cpu_s"],
        "peak_mb": max(r["peak_mem_mb"] for r in rows),
        "rss_mb": max(r["rss_mb"] for r in rows),
        "mlx": mx.__version__,
        "ranks": distributed.size(),
    }
    if a.ab:
        un = medians(arms["unoptimized"])
        result |= {
            "rounds": a.rounds,
            "unoptimized_optimizations": arm_switches(False, a.off, a.keep),
            "unoptimized_timed_steps": len(arms["unoptimized"]),
            "unoptimized_median_step_s": un["step_s"],
            "unoptimized_parts": {k: un[k] for k in PARTS},
            "step_ratio": med["step_s"] / un["step_s"],  # < 1: the optimizations save time
        }
    strict_json.print_result(result, a.json, width=26)
    return 0


if __name__ == "__main__":
    sys.exit(main())
