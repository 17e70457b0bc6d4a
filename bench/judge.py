"""Reward benchmark: how well, how fast and how length-robustly each reward ranks answer pairs.

For every `--reward SPEC` (the registry's syntax; default: train.py's default reward) the better and
worse answer of each pair in `--pairs` (default: the test split of data/rm_pairs.jsonl) are scored
with the pair's prompt and category. A pair counts 1 if better scores above worse, 0.5 on a tie or a
failed score, else 0. Reported per reward: overall and per category, kind, source and criterion; the
length-trap subset (the worse answer is the longer one); echo checks (the prompt itself as an answer
never scoring above the better answer); items scored per second; corr(score, answer length) over all
scored answers and how often the longer answer wins. A reward that gives every answer the same score
fails loudly. `--judge-speed` adds the rubric's own peers (single pass vs generate-then-parse vs one
at a time) and its OOM backoff. `--quick --json` prints one object whose `pairwise_accuracy` is the
first reward's figures. `--probes` adds the broken-text probes (rewards/broken_text.py, probe
style): each selected pair's better answer against its cut-off, shuffled, repeating and
filler-padded variants, the share of probes per kind where the intact answer scores higher, with n
and a 95% Wilson interval.
"""

import argparse
import contextlib
import os
import platform
import sys
import time
from importlib.metadata import version

from core import backend, diversity, errors, stats, strict_json
from core.jsonl import DataError
from core.prompts import RM_PAIRS, load_pairs, select_split

import numpy as np

from evals import stance_probes
from gwen import Gwen
from rewards import broken_text
from rewards.builtin import RewardError
from rewards.registry import RewardContext, load_reward_config, parse_spec
from rewards.scorer import build_scorer
from rl import rm_data
from rubric import Rubric
from tasks import registry as tasks


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


def pair_credit(scores: np.ndarray) -> np.ndarray:
    """(2n,) scores, better at 2i and worse at 2i + 1 -> (n,) credit: 1 better > worse, 0.5 tie
    or NaN, 0 otherwise."""
    return stats.pair_credit(scores[0::2], scores[1::2], failed=0.5)


def _mean_by(credit: np.ndarray, labels: list[str]) -> dict:
    return {
        v: float(credit[[x == v for x in labels]].mean())
        for v in sorted(set(labels))
        if v is not None
    }


def accuracy_report(pairs: list[dict], scores: np.ndarray) -> dict:
    """Pairwise accuracy overall and by category, kind, source and criterion; the length-trap
    subset; length bias (corr(score, words) over every scored answer, longer-wins rate)."""
    credit = pair_credit(scores)
    words = np.array([len(diversity.words(p[k])) for p in pairs for k in ("better", "worse")])
    b_len, w_len = words[0::2], words[1::2]
    trap = w_len > b_len
    differ = w_len != b_len
    b, w = scores[0::2], scores[1::2]
    longer_wins = np.where(trap, w > b, b > w)[differ]
    finite = np.isfinite(scores)
    corr = np.corrcoef(scores[finite], words[finite])[0, 1] if finite.sum() > 2 else np.nan
    by_cat = _mean_by(credit, [p["category"] for p in pairs])
    return {
        "overall": float(credit.mean()),
        **by_cat,
        "by_category": by_cat,
        "by_kind": _mean_by(credit, [p.get("kind") for p in pairs]),
        "by_source": _mean_by(credit, [p.get("source") for p in pairs]),
        "by_criterion": _mean_by(credit, [p["criterion"] for p in pairs]),
        "length_trap": float(credit[trap].mean()) if trap.any() else None,
        "n_pairs": len(pairs),
        "n_length_trap": int(trap.sum()),
        "corr_score_length": float(corr),
        "longer_preferred": float(longer_wins.mean()) if differ.any() else None,
        "ties_or_failed": int((credit == 0.5).sum()),
        "mean_score_better": float(np.nanmean(b)),
        "mean_score_worse": float(np.nanmean(w)),
    }


def echo_report(pairs: list[dict], score) -> dict:
    """For each distinct (prompt, category) of the pairs: the prompt repeated as the answer
    against the pair's better answer. `echo_wins` counts echoes scoring at or above it."""
    seen = {}
    for p in pairs:
        seen.setdefault((p["prompt"], p["category"]), p["better"])
    keys = list(seen)
    prompts = [k[0] for k in keys for _ in range(2)]
    answers = [x for k in keys for x in (seen[k], k[0])]
    cats = [k[1] for k in keys for _ in range(2)]
    s = np.asarray(score(prompts, answers, cats), dtype=np.float64)
    real, echo = s[0::2], s[1::2]
    wins = ~(real > echo)
    return {
        "n_prompts": len(keys),
        "echo_wins": int(wins.sum()),
        "echo_win_rate": float(wins.mean()) if keys else None,
        "examples": [keys[i][0][:80] for i in np.flatnonzero(wins)[:5]],
    }


def bench_reward(
    spec: str,
    ctx: RewardContext,
    pairs: list[dict],
    echo: bool,
    scores_out=None,
    probes: bool = False,
    stance: list[dict] | None = None,
) -> dict:
    """`spec`: a registry spec, or the path of a reward file (YAML, registry.load_reward_config);
    `stance`: stance_probes.pairs of labelled read answers, reported as `stance_probes`."""
    scorer = build_scorer(reward_components(spec), ctx)
    out = bench_reward_with(scorer, spec, pairs, echo, scores_out)
    if probes:
        out["probes"] = probe_report(scorer, pairs)
    if stance:
        out["stance_probes"] = stance_probes.report(lambda *a: scorer(*a).values, stance)
    return out


def reward_components(spec: str) -> list:
    if spec.endswith((".yaml", ".yml")):
        return load_reward_config(spec)
    return parse_spec(spec)


def bench_reward_with(scorer, spec: str, pairs: list[dict], echo: bool, scores_out=None) -> dict:
    """Accuracy report, speed and echo checks of one built scorer (scorer.Scorer); with
    `scores_out` (an open file) one JSON line per scored answer is written to it."""

    def score(prompts, answers, cats):
        return scorer(prompts, answers, cats).values

    prompts = [p["prompt"] for p in pairs for _ in range(2)]
    answers = [p[k] for p in pairs for k in ("better", "worse")]
    cats = [p["category"] for p in pairs for _ in range(2)]
    start = time.perf_counter()
    scores = np.asarray(score(prompts, answers, cats), dtype=np.float64)
    seconds = time.perf_counter() - start
    if scores_out is not None:
        for i, s in enumerate(scores.tolist()):
            p = pairs[i // 2]
            row = {
                "reward": spec,
                "id": p["id"],
                "answer": ("better", "worse")[i % 2],
                "score": s,
                "words": len(diversity.words(answers[i])),
            }
            scores_out.write(strict_json.dumps(row) + "\n")
    finite = scores[np.isfinite(scores)]
    if finite.size < 2 or np.ptp(finite) == 0:
        raise RewardError(
            f"reward {spec!r} gave the same score ({finite[:1].tolist()}) to every one of "
            f"{len(scores)} answers: it cannot rank anything; check the reward"
        )
    out = accuracy_report(pairs, scores)
    out["items_per_s"] = len(answers) / seconds
    out["seconds"] = seconds
    if echo:
        out["echo"] = echo_report(pairs, score)
    return out


def probe_report(scorer, pairs: list[dict], seed: int = 0) -> dict:
    """Broken-text probes of `pairs`' better answers: per kind, the share where the intact
    answer scores above its variant (a tie or a failed score counts 0.5), with n and a Wilson
    interval of the strict wins. Each intact answer is scored once."""
    probes = broken_text.broken_pairs(
        pairs, broken_text.KINDS, "probe", seed, per_pair=len(broken_text.KINDS)
    )
    if not probes:
        raise RewardError(
            f"no pair has a better answer of >= {broken_text.MIN_WORDS} words to break"
        )
    # intact answers repeat across kinds: each is scored once
    better, worse = rm_data.pair_scores(lambda *texts: scorer(*texts).values, probes)
    credit = stats.pair_credit(better, worse, failed=0.5)
    out = {}
    for kind in broken_text.KINDS:
        c = credit[[p["kind"] == f"broken_{kind}" for p in probes]]
        wins = int((c == 1.0).sum())
        out[kind] = {
            "accuracy": float(c.mean()),
            "n": int(c.size),
            "wins": wins,
            "ci95": list(stats.wilson(wins, int(c.size))),
        }
    return out


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


def judge_speed(gwen: Gwen, pairs, a) -> dict:
    """The rubric's implementations on GRPO-shaped items, alternating (medians), and the OOM
    backoff under a fake memory ceiling."""
    few = grpo_shaped(pairs, a.speed_items, a.group_size)
    peers = {
        "single_pass": Rubric(gwen, batch_size=a.judge_batch_size),
        "generate_parse": Rubric(gwen, batch_size=a.judge_batch_size, mode="generate"),
        "one_at_a_time": Rubric(gwen, batch_size=1),
    }
    rates, scores = {n: [] for n in peers}, {}
    for r in peers.values():
        r.judge_items(*(x[:2] for x in few))  # warm-up
    for _ in range(a.trials):
        for name, r in peers.items():
            start = time.perf_counter()
            scores[name] = r.judge_items(*few)
            rates[name].append(len(few[2]) / (time.perf_counter() - start))
    med = {f"{n}_per_s": float(np.median(v)) for n, v in rates.items()}
    flaky = MemoryCeiling(gwen.model, 8)
    r = Rubric(Gwen(flaky, gwen.tokenizer), batch_size=16)
    oom_scores = r.judge_items(*(x[:16] for x in few))
    return med | {
        "speedup_vs_generate_parse": med["single_pass_per_s"] / med["generate_parse_per_s"],
        "chunked_vs_one_at_a_time_max_diff": float(
            np.max(np.abs(scores["one_at_a_time"] - scores["single_pass"]))
        ),
        "oom_backoff": {
            "start": 16,
            "final": r.last_stats["batch_size"],
            "halvings": r.last_stats["oom_backoffs"],
            "max_abs_diff": float(np.max(np.abs(oom_scores - scores["single_pass"][:16]))),
        },
    }


def select_pairs(path: str, split: str | None, limit: int | None) -> list[dict]:
    pairs = load_pairs(path)
    if split == "":  # the old spelling of "all" (quantize.py's word)
        print("warning: --split '' is deprecated; use --split all", file=sys.stderr)
        split = "all"
    if split != "all" and any("split" in p for p in pairs):  # a file without splits: whole
        pairs = select_split(pairs, split, missing=None)
    if not pairs:
        raise DataError(f"{path}: no pairs in split {split!r}")
    return pairs[:limit]


def run(a) -> dict:
    pairs = select_pairs(a.pairs, a.split, a.limit)
    sets = a.stance_probes.split(",") if a.stance_probes else []
    stance = stance_probes.pairs(stance_probes.load(sets)) if sets else None  # before any model
    if stance and a.stance_limit is not None:
        stance = stance_probes.first_per_category(stance, a.stance_limit)
    gwen = Gwen.load(a.model)
    judge = (Gwen(gwen.model, gwen.tokenizer), contextlib.nullcontext)
    ctx = RewardContext(lambda: judge, gwen.tokenizer, a.judge_batch_size)
    out = {"pairs": a.pairs, "split": a.split, "n_pairs": len(pairs), "model": a.model}
    if sets:
        out["stance_probe_sets"] = sets
    sink = open(a.scores_out, "w") if a.scores_out else None  # noqa: SIM115
    try:
        out["rewards"] = {
            spec: bench_reward(
                spec, ctx, pairs, echo=not a.quick, scores_out=sink, probes=a.probes, stance=stance
            )  # fmt: skip
            for spec in a.reward
        }
    finally:
        if sink:
            sink.close()
    first = out["rewards"][a.reward[0]]
    out["pairwise_accuracy"] = {"overall": first["overall"], **first["by_category"]}
    if a.judge_speed:
        out["judge_speed"] = judge_speed(gwen, pairs, a)
    return out


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument(
        "--pairs",
        default=RM_PAIRS,
        help="pairs file (id, criterion, "
        "category, prompt, better, worse; optional source, kind, split)",
    )
    p.add_argument("--split", default="test", help="train | val | test | all (default: test)")
    p.add_argument(
        "--reward",
        action="append",
        default=None,
        help="reward spec or reward file (.yaml) to measure (repeat; default: train.py's)",
    )
    p.add_argument("--model", default="smollm2-135m", help="the judge and the policy tokenizer")
    p.add_argument("--limit", type=int, default=None, help="first N pairs only")
    p.add_argument("--judge-batch-size", type=int, default=24, help="judge forward batch")
    p.add_argument("--judge-speed", action="store_true", help="also time the rubric's peers")
    p.add_argument("--speed-items", type=int, default=48, help="items in each speed trial")
    p.add_argument("--group-size", type=int, default=8, help="candidates per prompt when timing")
    p.add_argument("--trials", type=int, default=2, help="speed trials per peer (median)")
    p.add_argument("--quick", action="store_true", help="accuracy only (no echo checks)")
    p.add_argument(
        "--probes", action="store_true", help="also the broken-text probes (cut, shuffled, ...)"
    )
    p.add_argument(
        "--stance-probes",
        metavar="DIRS",
        help="read-set folders (comma-separated; answers.jsonl + labels.jsonl): same-prompt "
        "probes of the wanted stance over the unwanted one (evals/stance_probes.py)",
    )
    p.add_argument(
        "--stance-limit",
        type=int,
        metavar="N",
        help="the first N stance probe pairs of each category only (default: all)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--scores-out", metavar="FILE", help="write every answer's score as JSONL")
    a = p.parse_args(argv)
    if a.reward is None:
        a.reward = [tasks.default_reward("values")]
    for spec in a.reward:
        reward_components(spec)
    if a.stance_limit is not None and a.stance_limit < 1:
        raise DataError(f"--stance-limit must be at least 1, got {a.stance_limit}")
    backend.announce()
    out = run(a)
    out["hardware"] = {
        "cpus": os.cpu_count(),
        "load_average_1min_at_end": os.getloadavg()[0],
        "machine": platform.machine(),
        "backend": backend.backend_name(),
        "blas": backend.BLAS,
        "mlx": version("mlx"),
    }
    if a.json:
        print(strict_json.dumps(out, indent=1))
        return 0
    print(f"{out['n_pairs']} pairs ({a.pairs}, split {a.split!r})")
    for spec, r in out["rewards"].items():
        print(
            f"\n{spec}: overall {r['overall']:.3f}, length traps {r['length_trap']}, "
            f"corr(score, length) {r['corr_score_length']:.3f}, {r['items_per_s']:.1f} items/s"
        )
        for group in ("by_category", "by_kind", "by_source", "by_criterion"):
            print(f"  {group}: " + ", ".join(f"{k} {v:.3f}" for k, v in r[group].items()))
        if "echo" in r:
            print(f"  echo wins {r['echo']['echo_wins']} of {r['echo']['n_prompts']} prompts")
        if "probes" in r:
            print("  intact over broken: " + ", ".join(
                f"{k} {v['accuracy']:.3f} [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}] (n {v['n']})"
                for k, v in r["probes"].items()
            ))  # fmt: skip
        for cat, v in r.get("stance_probes", {}).items():
            lo, hi = v["ci95_over_prompts"]
            print(f"  stance {cat}: wanted over unwanted {v['prompt_accuracy']:.3f} [{lo:.2f}, "
                  f"{hi:.2f}] over {v['n_prompts']} prompts ({v['n_pairs']} pairs, pooled "
                  f"{v['pair_accuracy']:.3f}, mean margin {v['mean_margin']:+.2f})")  # fmt: skip
    if "judge_speed" in out:
        print(strict_json.dumps(out["judge_speed"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
