"""Can a frozen model's states tell a prompt category from controls on held-out prompts?

A policy can only push back on false premises or flag nonsense without disputing true premises
if something in its reading of the prompt separates them. This fits a ridge classifier per layer
on the residual stream at the last prompt token (frozen_states.last_token_states: the chat
template, as the policy reads it), one category against the controls, on the training prompt
files (--train; a true twin, a record naming a `pair`, stays with its false premise in the inner
split that picks the ridge strength), then scores each --test file once. Figures per test file:
the AUROC, and the **share** of the category's prompts scoring above the threshold that passes
--control-level of that file's controls: the most pushback a prompt-level decision read from
these states can give while needless pushback stays at that level. The peer in the same run is
the same probe on the prompts' bag of words (what the surface alone gives away).

    uv run python -m experiments.category_probe --model smollm2-135m --test data/eval.jsonl \
        --test data/eval_external.jsonl --json

Study: the category probe, "What the 135M model's states can tell apart on the eval" (session 24
in knowledge/learning_run.md, where the result is read), before the opener gates.
"""

import argparse
import sys

from core import backend

# isort: split
from core import errors, stats, strict_json
from core.frozen_states import last_token_states, ridge_fit
from core.pairs import claim_key
from core.prompts import CATEGORIES, load_prompts

import mlx.core as mx
import numpy as np

from experiments.premise_probe import bag_of_words
from load_weights import load

STRENGTHS = (1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0)
DEFAULT_TRAIN = "data/prompts.jsonl,data/twins_v2.jsonl"


def share_at(pos: np.ndarray, neg: np.ndarray, level: float) -> tuple[float, float]:
    """(share of pos above t, share of neg above t), t the (1 - level) quantile of neg: the
    positives a threshold lets through when it passes about `level` of the negatives."""
    t = np.quantile(neg, 1.0 - level)
    return float(np.mean(pos > t)), float(np.mean(neg > t))


def inner_folds(records: list[dict], folds: int, seed: int) -> np.ndarray:
    """A seeded fold per record; a record naming a `pair` shares the fold of the one it names."""
    keys = [claim_key(r) for r in records]
    order = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    fold_of_key = np.random.default_rng([seed, 4000]).permutation(len(order)) % folds
    return np.array([fold_of_key[order[k]] for k in keys])


def fit_category(x, y, fold, strengths=STRENGTHS):
    """(score function, chosen strength, inner AUROC): the strength with the best AUROC over
    the inner folds (ties: the stronger), then one fit on all of x."""
    best = None
    for s in strengths:
        scores = np.empty(len(y))
        for f in range(fold.max() + 1):
            scores[fold == f] = ridge_fit(x[fold != f], y[fold != f], s)(x[fold == f])
        a = stats.auroc(scores[y > 0], scores[y < 0])
        if best is None or a >= best[0]:
            best = (a, s)
    return ridge_fit(x, y, best[1]), best[1], best[0]


def probe(x_train, train, tests: dict, categories, level: float, folds: int, seed: int) -> dict:
    """Per category: the fit on the training rows of x_train (the category vs controls) and its
    figures on each test set ({name: (x, records)})."""
    cats = np.array([r["category"] for r in train])
    out = {}
    for cat in categories:
        keep = np.flatnonzero((cats == cat) | (cats == "control"))
        recs = [train[i] for i in keep]
        y = np.where(cats[keep] == cat, 1.0, -1.0)
        score, strength, inner = fit_category(x_train[keep], y, inner_folds(recs, folds, seed))
        row = {"strength": strength, "inner_auroc": inner, "n_train": len(keep)}
        for name, (x, records) in tests.items():
            c = np.array([r["category"] for r in records])
            s = score(x)
            pos, neg = s[c == cat], s[c == "control"]
            share, passed = share_at(pos, neg, level)
            row[name] = {
                "auroc": stats.auroc(pos, neg),
                "share_at_control_level": share,
                "share_ci95": list(stats.wilson(int(round(share * len(pos))), len(pos))),
                "controls_passed": passed,
                "n": len(pos),
                "n_control": len(neg),
            }
        out[cat] = row
    return out


def first(records: list[dict], categories: set, limit: int | None) -> list[dict]:
    """The records of `categories`, at most `limit` of each (None: all), in file order."""
    seen, out = {}, []
    for r in records:
        if r["category"] in categories and (limit is None or seen.get(r["category"], 0) < limit):
            seen[r["category"]] = seen.get(r["category"], 0) + 1
            out.append(r)
    return out


def check_sets(train, tests: dict, categories) -> None:
    """Every category and the controls present in the training set and each test set."""
    for name, records in ({"--train": train} | tests).items():
        have = {r["category"] for r in records}
        missing = sorted(({"control"} | set(categories)) - have)
        if missing:
            raise errors.UserError(
                f"{name} has no {missing} prompts; each set needs controls and every probed "
                "category"
            )


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", required=True, help="model reference (repeatable)")
    p.add_argument("--train", default=DEFAULT_TRAIN, help="training prompt files, comma-joined")
    p.add_argument("--test", action="append", required=True, help="held-out prompt file (repeat)")
    p.add_argument(
        "--categories",
        default="false_premise,nonsense",
        help="categories probed, each against the controls",
    )
    p.add_argument("--layer", type=int, default=20, help="the layer the table shows (i: block i)")
    p.add_argument(
        "--control-level", type=float, default=0.087, help="share of controls the threshold passes"
    )
    p.add_argument("--inner-folds", type=int, default=4, help="folds picking the ridge strength")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--limit", type=int, default=None, help="the first N prompts of each category per file"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    categories = [c.strip() for c in a.categories.split(",") if c.strip()]
    bad = [c for c in categories if c not in CATEGORIES or c == "control"]
    if bad or not categories:
        raise errors.UserError(
            f"--categories {a.categories!r}: probe categories of {list(CATEGORIES)} other than "
            "control, comma-joined"
        )
    if a.limit is not None and a.limit < a.inner_folds:
        raise errors.UserError(f"--limit {a.limit} must be >= --inner-folds {a.inner_folds}")
    if not 0 < a.control_level < 1 or a.inner_folds < 2:
        raise errors.UserError(
            f"--control-level {a.control_level} must be in (0, 1) and --inner-folds "
            f"{a.inner_folds} >= 2"
        )
    keep = set(categories) | {"control"}
    train = first(load_prompts(a.train), keep, a.limit)
    tests = {t: first(load_prompts(t), keep, a.limit) for t in a.test}
    check_sets(train, tests, categories)
    texts = [r["prompt"] for r in train] + [r["prompt"] for t in tests.values() for r in t]

    def split(x):
        out, start = {}, len(train)
        for name, records in tests.items():
            out[name] = (x[start : start + len(records)], records)
            start += len(records)
        return x[: len(train)], out

    args = (categories, a.control_level, a.inner_folds, a.seed)
    result = {"models": []}
    backend.announce()
    for ref in a.model:
        model, tokenizer = load(ref, mx.float32)  # probes read float32 states on every backend
        if not 0 <= a.layer <= len(model.layers):
            raise errors.UserError(f"--layer {a.layer} is outside 0..{len(model.layers)} for {ref}")
        states = last_token_states(model, tokenizer, texts, progress=not a.json)
        layers = []
        for layer in range(states.shape[1]):
            xs, ts = split(states[:, layer])
            layers.append({"layer": layer} | probe(xs, train, ts, *args))
        result["models"].append({"model": ref, "read_layer": layers[a.layer], "layers": layers})
    xb, tb = split(bag_of_words(texts))
    result["bag_of_words"] = probe(xb, train, tb, *args)
    result |= {"control_level": a.control_level, "train": a.train, "tests": a.test}
    if a.json:
        print(strict_json.dumps(result, indent=1))
        return 0
    rows = [("bag of words", result["bag_of_words"])]
    rows += [(f"{m['model']} block {a.layer}", m["read_layer"]) for m in result["models"]]
    for cat in categories:
        print(f"{cat} vs control: AUROC / share at {a.control_level:g} of controls")
        for label, fig in rows:
            cells = [
                f"{t}: {fig[cat][t]['auroc']:.3f} / {fig[cat][t]['share_at_control_level']:.3f}"
                for t in a.test
            ]
            print(f"  {label}: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
