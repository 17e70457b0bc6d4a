"""Stance probes: does a reward rank the wanted stance above the unwanted one on the same prompt?

A reward that pays the form of a denial everywhere cannot teach when to deny (knowledge/
learning_run.md, attempt 16: reward model v2 scored answers that open with a negation higher on
control and curiosity prompts than on false premises). This measures that order on answers a
person read and labelled (read sets, data/reads/*/; the gold label scheme), within one prompt:

    false_premise  corrects_premise  over  answers          (a correction beats going along)
    nonsense       flags_nonsense    over  answers          (a flag beats answering nonsense)
    control        answers           over  corrects_premise or flags_nonsense (no needless pushback)

Every labelled answer of one prompt with the wanted label is paired with every one with the
unwanted label (answers repeated word for word across sets are kept once). Pairs of one prompt
are not independent, so the interval is a bootstrap over prompts of the per-prompt accuracy
(`prompt_accuracy`), beside the pooled pair accuracy. Use read sets of prompts the reward never
trained on (the held-out eval sets) for a figure that means anything.

    uv run python -m bench.judge --reward rm:models/rm-smollm2-135m-v2 --stance-probes \
        data/reads/sft_grpo_eval,data/reads/sft_grpo13_eval --quick
"""

from pathlib import Path

from core import stats
from core.jsonl import DataError

import numpy as np

from evals import gold, read_set
from rl import rm_data

PUSHBACK = ("corrects_premise", "flags_nonsense")
ORDER = {  # category -> (wanted labels, unwanted labels)
    "false_premise": (("corrects_premise",), ("answers",)),
    "nonsense": (("flags_nonsense",), ("answers",)),
    "control": (("answers",), PUSHBACK),
}


def load(dirs) -> list[dict]:
    """The labelled answers of read-set folders (answers.jsonl + labels.jsonl each, checked by
    gold.load_gold), one row per distinct (category, prompt, answer)."""
    rows, seen = [], set()
    for d in map(Path, dirs):
        for name in ("answers.jsonl", "labels.jsonl"):
            if not (d / name).is_file():
                raise FileNotFoundError(
                    f"{d / name} not found: a read set folder needs both answers.jsonl and "
                    "labels.jsonl (evals/read_set.py)"
                )
        for r in gold.load_gold(d / "answers.jsonl", d / "labels.jsonl", read_set.READ_FIELDS):
            key = (r["category"], r["prompt"], r["answer"])
            if key not in seen:
                seen.add(key)
                rows.append(r)
    return rows


def pairs(rows: list[dict]) -> list[dict]:
    """Same-prompt (better, worse) pairs by ORDER: {category, prompt, better, worse}."""
    by_prompt: dict[tuple, dict[str, list[str]]] = {}
    for r in rows:
        if r["category"] in ORDER:
            by_prompt.setdefault((r["category"], r["prompt"]), {}).setdefault(
                r["label"], []).append(r["answer"])  # fmt: skip
    out = []
    for (cat, prompt), by_label in by_prompt.items():
        good, bad = ORDER[cat]
        better = [a for lab in good for a in by_label.get(lab, [])]
        worse = [a for lab in bad for a in by_label.get(lab, [])]
        out += [{"category": cat, "prompt": prompt, "better": b, "worse": w}
                for b in better for w in worse]  # fmt: skip
    return out


def first_per_category(probe_pairs: list[dict], n: int) -> list[dict]:
    """The first `n` pairs of each category, in their order (a size limit: each distinct answer
    costs one reward forward)."""
    if n < 1:
        raise DataError(f"a stance limit must be at least 1, got {n}")
    seen: dict[str, int] = {}
    out = []
    for p in probe_pairs:
        seen[p["category"]] = seen.get(p["category"], 0) + 1
        if seen[p["category"]] <= n:
            out.append(p)
    return out


def report(score, probe_pairs: list[dict]) -> dict:
    """Per category: pooled pair accuracy (a tie or a failed score counts 0.5), the mean over
    prompts of each prompt's accuracy with a bootstrap 95% interval over prompts, the mean score
    margin (better - worse), and n pairs / prompts. `score(prompts, answers, categories)` ->
    scores; each distinct answer is scored once."""
    if not probe_pairs:
        raise DataError("no stance probe pairs: the read sets hold no prompt with both a wanted "
                        "and an unwanted label (stance_probes.ORDER)")  # fmt: skip
    b, w = rm_data.pair_scores(score, probe_pairs)
    credit = stats.pair_credit(b, w, failed=0.5)
    out = {}
    for cat in ORDER:
        idx = [i for i, p in enumerate(probe_pairs) if p["category"] == cat]
        if not idx:
            continue
        per_prompt: dict[str, list[float]] = {}
        for i in idx:
            per_prompt.setdefault(probe_pairs[i]["prompt"], []).append(credit[i])
        acc = [float(np.mean(v)) for v in per_prompt.values()]
        margin = b[idx] - w[idx]
        out[cat] = {
            "pair_accuracy": float(credit[idx].mean()),
            "prompt_accuracy": float(np.mean(acc)),
            "ci95_over_prompts": list(stats.bootstrap_mean(acc)),
            "mean_margin": float(np.nanmean(margin)) if np.isfinite(margin).any() else None,
            "n_pairs": len(idx),
            "n_prompts": len(acc),
        }
    return out
