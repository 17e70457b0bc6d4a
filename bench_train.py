"""GRPO step benchmark: median step time and peak memory, split into rollout / reward / update.

Runs train.py's loop for --steps steps (the first is a warm-up and is not counted) at B prompts
x G samples x exactly --max-tokens new tokens (EOS ignored, so every step does the same work),
full fine-tuning with a frozen reference model (KL coefficient 0.04) unless told otherwise, and
reports medians from metrics.jsonl. Peers measured on the same machine are recorded in
knowledge/benchmarks.md (TRL GRPOTrainer, mlx-lm-lora); they cannot run offline here. Under
`mlx.launch -n N` the ranks split the same global batch and rank 0 reports (bench_distributed.py
runs both and prints the ratio).
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import backend

import mlx.core as mx

import distributed
import train


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="policy checkpoint")
    p.add_argument("--reward", default="happy", help="happy | rubric")
    p.add_argument("--prompts", type=int, default=8, help="prompts per step B")
    p.add_argument("--group-size", type=int, default=8, help="samples per prompt G")
    p.add_argument("--max-tokens", type=int, default=64, help="new tokens per sample (exact)")
    p.add_argument("--steps", type=int, default=4, help="steps to run; the first is warm-up")
    p.add_argument("--kl-coef", type=float, default=0.04, help="0 drops the reference model")
    p.add_argument("--lora-rank", type=int, default=0, help="0 = full fine-tuning")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    if a.steps < 2:
        raise SystemExit("--steps must be >= 2: the first step is a warm-up")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = train.TrainConfig(
            model=a.model,
            reward=a.reward,
            steps=a.steps,
            prompts_per_step=a.prompts,
            group_size=a.group_size,
            max_new_tokens=a.max_tokens,
            ignore_eos=True,
            kl_coef=a.kl_coef,
            lora_rank=a.lora_rank,
            save_every=10**9,
            out_dir=tmp,
            run_name="bench",
        )
        mx.reset_peak_memory()
        run_dir = train.run(cfg)
        if not distributed.is_main():  # rank 0 holds the metrics and reports
            return
        rows = [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").open()][1:]
    med = {
        k: statistics.median(r[k] for r in rows)
        for k in ("step_s", "rollout_s", "reward_s", "update_s", "tokens_per_s", "cpu_s")
    }
    result = {
        "model": a.model,
        "reward": a.reward,
        "backend": backend.backend_name(),
        "blas": backend.BLAS,
        "dtype": str(backend.default_dtype()),
        "prompts": a.prompts,
        "group_size": a.group_size,
        "max_tokens": a.max_tokens,
        "kl_coef": a.kl_coef,
        "lora_rank": a.lora_rank,
        "timed_steps": len(rows),
        "median_step_s": med["step_s"],
        "rollout_s": med["rollout_s"],
        "reward_s": med["reward_s"],
        "update_s": med["update_s"],
        "rollout_tokens_per_s": med["tokens_per_s"],
        "cpu_s": med["cpu_s"],
        "peak_mb": max(r["peak_mem_mb"] for r in rows),
        "rss_mb": max(r["rss_mb"] for r in rows),
        "mlx": mx.__version__,
        "ranks": distributed.size(),
    }
    if a.json:
        print(json.dumps(result))
        return
    for k, v in result.items():
        print(f"{k:>22}: {v:.4g}" if isinstance(v, float) else f"{k:>22}: {v}")


if __name__ == "__main__":
    sys.exit(main())
