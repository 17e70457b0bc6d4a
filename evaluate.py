"""Held-out evaluation: greedy answers to eval prompts, scored like rollouts.

`evaluate(...)` answers the first `limit` records of an eval set (taken round-robin over
categories) greedily and scores them with the run's reward, per category and criterion, plus
the pushback rate on control prompts from a crude lexical detector: a tripwire for a policy that
learns to dispute everything, not a measure of answer quality. The trainer calls it every
--eval-every steps; `main` evaluates a model or checkpoint (full or LoRA) on a task's file with
a reward that needs no judge model (chess, happy), e.g. the base model and a run's last
checkpoint on data/chess/test.jsonl. No training happens here.
"""

import argparse
import json
import sys
from pathlib import Path

import backend

import numpy as np

import lora
import rewards
import tasks
from gwen import Gwen
from load_weights import LoadError
from prompts import DataError
from rewards import category_means

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


def eval_subset(records: list[dict], limit: int) -> list[dict]:
    """The first `limit` records taken round-robin over categories, so every category counts."""
    by_cat = {}
    for r in records:
        by_cat.setdefault(r["category"], []).append(r)
    queues = [by_cat[c] for c in sorted(by_cat)]
    out = []
    for i in range(max(len(q) for q in queues)):
        out += [q[i] for q in queues if i < len(q)]
    return out[:limit]


def evaluate(policy, scorer, records: list[dict], *, limit: int, max_new_tokens: int) -> dict:
    """Greedy answers to the first `limit` records (round-robin over categories), scored by
    `scorer` (rewards.Scorer): mean reward per category and criterion, control pushback rate."""
    recs = eval_subset(records, limit)
    texts = []
    for i in range(0, len(recs), 16):
        chunk = recs[i : i + 16]
        s = policy.sample_group([r["prompt"] for r in chunk], 1, max_new_tokens, temperature=0.0)
        texts += s.texts
    categories = [r["category"] for r in recs]
    scores = scorer([r["prompt"] for r in recs], texts, categories)
    values = scores.values
    out = category_means("eval", categories, values, scores.details)
    controls = [t for t, r in zip(texts, recs, strict=True) if r["category"] == "control"]
    if controls:
        out["eval/control_pushback_rate"] = float(np.mean([pushes_back(t) for t in controls]))
    out["eval/reward"] = float(np.nanmean(values))
    return out


def load_policy(model_ref: str, dtype=None):
    """A Gwen for a model reference or a checkpoint folder; a LoRA checkpoint (adapters plus
    train_config.json) is applied to the base model its run started from."""
    folder = Path(model_ref)
    if not (folder / lora.CONFIG_FILE).exists():
        return Gwen.load(model_ref, dtype)
    run_cfg = json.loads((folder / "train_config.json").read_text())
    adapter = json.loads((folder / lora.CONFIG_FILE).read_text())
    policy = Gwen.load(run_cfg["model"], dtype)
    lora.apply_lora(policy.model, adapter["r"], adapter["lora_alpha"], adapter["target_modules"])
    lora.load_adapters(policy.model, folder)
    return policy


def main(argv=None) -> int:
    """CLI: evaluate --model on --task's eval file (or --data); bad input is one error line."""
    p = argparse.ArgumentParser(description="Greedy held-out evaluation of a model or checkpoint.")
    p.add_argument("--model", default="smollm2-135m", help="model, hub id or checkpoint folder")
    p.add_argument("--task", default="values", help=f"one of {sorted(tasks.TASKS)}")
    p.add_argument("--data", help="eval records (default: the task's eval file)")
    p.add_argument("--reward", help="reward spec (default: the task's); no judge-model rewards")
    p.add_argument("--limit", type=int, default=100, help="records to answer")
    p.add_argument("--max-new-tokens", type=int, default=80, help="generation cap")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    try:
        task = tasks.get(args.task)
        spec = args.reward or task.reward
        components = rewards.parse_spec(spec)
        tasks.check_rewards(task, [c.name for c in components])
        if rewards.needs_judge(components):
            raise ValueError(f"--reward {spec!r} needs a judge model: use train.py --eval-every")
        records = task.load(args.data or task.eval_data)
        policy = load_policy(args.model, backend.parse_dtype(None))
        policy.system_prompt, policy.examples = task.system_prompt, task.examples
        scorer = rewards.build_scorer(components, rewards.RewardContext(records=records))
    except (ValueError, DataError, LoadError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = evaluate(policy, scorer, records, limit=args.limit, max_new_tokens=args.max_new_tokens)
    out = {"model": args.model, "data": args.data or task.eval_data, **out}
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
