"""Judge benchmark: how well and how fast a model judges the rubric (data/judge_pairs.jsonl).

Accuracy: each pair's `better` and `worse` are scored on its criterion and category; a pair
counts 1 if better scores above worse, 0.5 on a tie or failure, else 0 (overall, per criterion,
on the worse-is-longer and control subsets, and how often the longer response wins), for
single-pass scoring and for generate-then-parse. Speed, judged completions/s on GRPO-shaped
groups: single-pass batched with shared prefixes, generate-then-parse, single-pass one at a time,
warmed up and timed in alternation (medians). Then the out-of-memory backoff runs under a model
that raises MLX's malloc error above a micro-batch size. It does not tune the rubric.
"""

import argparse
import json
import os
import platform
import sys
import time
from importlib.metadata import version

import backend

import numpy as np

from gwen import Gwen
from prompts import load_judge_pairs
from rubric import Rubric


class MemoryCeiling:
    """A model that raises MLX's out-of-memory error for forwards over more than `max_batch`
    rows (a stand-in for a real OOM, which this machine would take minutes to reach)."""

    def __init__(self, model, max_batch: int):
        self._model, self.max_batch, self.refused = model, max_batch, 0

    def hidden(self, tokens, cache=None, pad=None):
        if tokens.shape[0] > self.max_batch:
            self.refused += 1
            raise RuntimeError(
                f"[malloc] Unable to allocate {tokens.size << 20} bytes. (simulated: batch "
                f"{tokens.shape[0]} > {self.max_batch})"
            )
        return self._model.hidden(tokens, cache, pad)

    def __call__(self, tokens, cache=None, pad=None):
        return self._model.logits(self.hidden(tokens, cache, pad))

    def __getattr__(self, name):
        return getattr(self._model, name)


def pair_items(pairs):
    """Flatten pairs into judge_items arguments: better at 2i, worse at 2i + 1."""
    crit, prompts, comps, cats = [], [], [], []
    for p in pairs:
        for text in (p["better"], p["worse"]):
            crit.append(p["criterion"])
            prompts.append(p["prompt"])
            comps.append(text)
            cats.append(p["category"])
    return crit, prompts, comps, cats


def grpo_shaped(pairs, n_items: int, group_size: int):
    """judge_items arguments shaped like a GRPO step: prompts of the first pairs, each with
    `group_size` candidates drawn (cyclically) from all responses written for that criterion."""
    pool = {}
    for p in pairs:
        pool.setdefault(p["criterion"], []).extend([p["better"], p["worse"]])
    crit, prompts, comps, cats = [], [], [], []
    for j, p in enumerate(pairs[: max(1, n_items // group_size)]):
        texts = pool[p["criterion"]]
        for g in range(group_size):
            crit.append(p["criterion"])
            prompts.append(p["prompt"])
            comps.append(texts[(j * group_size + g) % len(texts)])
            cats.append(p["category"])
    return crit, prompts, comps, cats


def pair_credit(scores: np.ndarray) -> np.ndarray:
    """(2n,) scores -> (n,) credit: 1 better > worse, 0.5 tie or NaN, 0 otherwise."""
    b, w = scores[0::2], scores[1::2]
    credit = np.where(b > w, 1.0, np.where(b < w, 0.0, 0.5))
    return np.where(np.isfinite(b) & np.isfinite(w), credit, 0.5)


def accuracy_report(pairs, scores: np.ndarray) -> dict:
    credit = pair_credit(scores)
    b, w = scores[0::2], scores[1::2]
    crit = np.array([p["criterion"] for p in pairs])
    worse_longer = np.array([len(p["worse"]) > len(p["better"]) for p in pairs])
    control = np.array([p["category"] == "control" for p in pairs])
    differ = np.array([len(p["worse"]) != len(p["better"]) for p in pairs])
    longer_wins = np.where(worse_longer, w > b, b > w)[differ]  # longer one strictly above
    mean = lambda m: float(credit[m].mean()) if m.any() else None  # noqa: E731
    return {
        "overall": float(credit.mean()),
        **{c: mean(crit == c) for c in sorted(set(crit))},
        "subsets": {
            "worse_longer": mean(worse_longer),
            "better_longer": mean(~worse_longer),
            "control": mean(control),
        },
        "n_pairs": {
            "overall": len(pairs),
            **{c: int((crit == c).sum()) for c in sorted(set(crit))},
            "worse_longer": int(worse_longer.sum()),
            "control": int(control.sum()),
        },
        "longer_preferred": float(longer_wins.mean()) if differ.any() else None,
        "ties_or_failed": int((credit == 0.5).sum()),
        "mean_score_better": float(np.nanmean(b)),
        "mean_score_worse": float(np.nanmean(w)),
    }


def timed(rubric: Rubric, args) -> tuple[np.ndarray, float]:
    """Judge all items once; return (scores, judged completions per second)."""
    start = time.perf_counter()
    scores = rubric.judge_items(*args)
    return scores, len(args[2]) / (time.perf_counter() - start)


def speed_trials(peers: dict, args, trials: int) -> tuple[dict, dict]:
    """Median judged/s per peer, and each peer's scores. Peers alternate within each trial, so a
    change in machine load (other jobs share the cores) hits all of them, not one; each is warmed
    up first."""
    rates, scores = {name: [] for name in peers}, {}
    for rubric in peers.values():
        rubric.judge_items(*(a[:2] for a in args))
    for _ in range(trials):
        for name, rubric in peers.items():
            scores[name], rate = timed(rubric, args)
            rates[name].append(rate)
    return {name: float(np.median(r)) for name, r in rates.items()}, scores


def oom_demo(gwen, args, reference: np.ndarray, chunk: int, ceiling: int) -> dict:
    """Judge with a model that 'runs out of memory' above `ceiling` rows; compare scores."""
    flaky = MemoryCeiling(gwen.model, ceiling)
    rubric = Rubric(Gwen(flaky, gwen.tokenizer), batch_size=chunk)
    scores = rubric.judge_items(*args)
    return {
        "start_micro_batch": chunk,
        "ceiling": ceiling,
        "final_micro_batch": rubric.last_stats["batch_size"],
        "halvings": rubric.last_stats["oom_backoffs"],
        "refused_forwards": flaky.refused,
        "max_abs_diff_vs_unfailed": float(np.max(np.abs(scores - reference))),
    }


def run(a) -> dict:
    gwen = Gwen.load(a.model)
    pairs = load_judge_pairs(a.pairs)[: a.limit]
    args = pair_items(pairs)
    batched = Rubric(gwen, batch_size=a.judge_batch_size)
    scores = batched.judge_items(*args)
    out = {
        "model": a.model,
        "pairs": len(pairs),
        "judged_completions": len(args[2]),
        "batch_size": batched.batch_size,
        "pairwise_accuracy": accuracy_report(pairs, scores),
        "score_token_mass": batched.last_stats["score_token_mass"],
    }
    gen = Rubric(gwen, batch_size=a.judge_batch_size, mode="generate")
    if not a.quick:
        gen_scores = gen.judge_items(*args)
        out["generate_parse_accuracy"] = accuracy_report(pairs, gen_scores)
        out["generate_parse_failures"] = int(np.sum(~np.isfinite(gen_scores)))
    few = grpo_shaped(pairs, a.speed_items, a.group_size)
    peers = {"single_pass": batched}
    if not a.quick:
        peers |= {"generate_parse": gen, "one_at_a_time": Rubric(gwen, batch_size=1)}
    rates, trial_scores = speed_trials(peers, few, a.trials)
    out |= {"speed_items": len(few[2]), "speed_group_size": a.group_size, "trials": a.trials}
    out |= {f"{name}_per_s": rate for name, rate in rates.items()}
    if a.quick:
        return out
    out["speedup_vs_generate_parse"] = rates["single_pass"] / rates["generate_parse"]
    out["speedup_vs_one_at_a_time"] = rates["single_pass"] / rates["one_at_a_time"]
    diff = np.abs(trial_scores["one_at_a_time"] - trial_scores["single_pass"])
    out["chunked_vs_one_at_a_time_max_diff"] = float(np.max(diff))
    few = [x[: a.oom_items] for x in args]
    out["oom_backoff"] = oom_demo(gwen, few, scores[: a.oom_items], a.oom_items, 8)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="Judge accuracy on data/judge_pairs.jsonl and speed.")
    p.add_argument("--model", default="smollm2-135m", help="judge: HF folder, hub id, smollm2-135m")
    p.add_argument("--pairs", default="data/judge_pairs.jsonl", help="judge-calibration pairs")
    p.add_argument("--limit", type=int, default=None, help="use only the first N pairs")
    p.add_argument("--judge-batch-size", type=int, default=24, help="judge forward batch")
    p.add_argument("--speed-items", type=int, default=48, help="items in each speed trial")
    p.add_argument("--group-size", type=int, default=8, help="candidates per prompt when timing")
    p.add_argument("--trials", type=int, default=2, help="speed trials per peer (median)")
    p.add_argument("--oom-items", type=int, default=16, help="items judged under a fake OOM")
    p.add_argument("--quick", action="store_true", help="single-pass accuracy and speed only")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    a = p.parse_args(argv)
    backend.announce()
    out = run(a)
    out["hardware"] = {
        "cpus": os.cpu_count(),
        "load_average_1min_at_end": os.getloadavg()[0],
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "backend": backend.backend_name(),
        "blas": backend.BLAS,
        "mlx": version("mlx"),
    }
    if a.json:
        print(json.dumps(out, indent=2))
        return
    acc = out["pairwise_accuracy"]
    print(f"pairwise accuracy (single pass): {acc['overall']:.3f} over {out['pairs']} pairs")
    for k, v in acc.items():
        if k not in ("overall", "subsets", "n_pairs"):
            print(f"  {k}: {v}")
    print(f"  subsets: {acc['subsets']}")
    for k in ("single_pass_per_s", "generate_parse_per_s", "one_at_a_time_per_s"):
        if k in out:
            print(f"{k}: {out[k]:.2f} judged completions/s")
    for k in ("speedup_vs_generate_parse", "speedup_vs_one_at_a_time", "oom_backoff"):
        if k in out:
            print(f"{k}: {out[k]}")
    print(json.dumps(out["hardware"]), file=sys.stderr)


if __name__ == "__main__":
    main()
