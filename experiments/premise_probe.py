"""Does a frozen model know which premise is false? A linear probe on minimal pairs.

Stance training can only teach *when* to push back if the model can tell a false premise from
the same sentence with the fact made true. This reads the residual stream at the last prompt
token (where the answer's first word is decided; the prompt in the chat template, as the policy
reads it) after the embedding and after every block, and fits a ridge classifier per layer on
minimal pairs: each record of the pairs file that names another with `pair` is the true twin of
that one (data/twins.jsonl beside data/prompts.jsonl). Folds split by claim: both halves of a
pair, and every pair whose false half shares a rare run of words with it (one claim put in
several frames), are always on the same side; the ridge strength is picked by an inner split
of the training pairs only, by claim too. The figure is held-out **pairwise accuracy**: the
share of held-out pairs whose false half scores above its true twin (chance 0.5), with a Wilson
interval over pairs. The peer, in the same run, is the same probe on the prompts' bag of words
(on a minimal pair only the changed words differ, so it measures what the surface gives away).

    uv run python -m experiments.premise_probe --model smollm2-135m --json

Study: the premise probe, "Does the 135M model know which premise is false?" (session 22 in
knowledge/learning_run.md, where the result is read); its `--stance` figures served attempt 21.
"""

import argparse
import sys

from core import backend

# isort: split
from core import errors, forced, stats, strict_json
from core.frozen_states import last_token_states, ridge_fit
from core.pairs import claim_groups, fold_of_groups, minimal_pairs, prompt_words
from core.prompts import load_prompts

import mlx.core as mx
import numpy as np

from load_weights import load

DEFAULT_PAIRS = "data/prompts.jsonl,data/twins_v2.jsonl"  # v2: no negation marks the twin
STRENGTHS = (1.0, 10.0, 100.0, 1000.0, 10000.0)
INNER_FOLDS = 4


def bag_of_words(prompts: list[str]) -> np.ndarray:
    """(N, V) 0/1: which lower-cased words each prompt holds (the vocabulary of all prompts:
    it is unsupervised, labels never enter it)."""
    words = [set(prompt_words(p)) for p in prompts]
    vocab = {w: i for i, w in enumerate(sorted(set().union(*words)))}
    x = np.zeros((len(prompts), len(vocab)))
    for row, ws in enumerate(words):
        x[row, [vocab[w] for w in ws]] = 1.0
    return x


def pair_margins(x: np.ndarray, fold: np.ndarray, groups: np.ndarray, strengths=STRENGTHS, seed=0):
    """Held-out score(false) - score(twin) of every pair. x is (2P, D): rows 2k (false) and
    2k + 1 (twin) are pair k; fold (P,) its outer fold, groups (P,) its claim group. The
    strength of each outer fold is the one with the best inner pairwise accuracy on its training
    pairs, split by group too (ties: the stronger)."""
    y = np.tile([1.0, -1.0], len(fold))
    chosen = []
    for f in range(fold.max() + 1):
        train = np.flatnonzero(fold != f)
        inner = fold_of_groups(groups[train], INNER_FOLDS, seed + 1 + f)
        scored = [
            (_accuracy(_margins(x, y, train, inner, [s] * INNER_FOLDS)), s) for s in strengths
        ]
        chosen.append(max(scored)[1])
    return _margins(x, y, np.arange(len(fold)), fold, chosen), chosen


def _margins(x, y, pairs, fold, strengths) -> np.ndarray:
    """Cross-validated margins of `pairs` (indices into x's pairs) under `fold` (fold f's ridge
    fitted with strengths[f] on the other folds)."""
    out = np.empty(len(pairs))
    for f in range(fold.max() + 1):
        tr, te = pairs[fold != f], pairs[fold == f]
        score = ridge_fit(x[_rows(tr)], y[_rows(tr)], strengths[f])
        out[fold == f] = _pair_diff(score(x[_rows(te)]))
    return out


def _rows(pairs: np.ndarray) -> np.ndarray:
    return np.stack([2 * pairs, 2 * pairs + 1], axis=1).reshape(-1)


def _pair_diff(scores: np.ndarray) -> np.ndarray:
    return scores[0::2] - scores[1::2]


def _accuracy(margins: np.ndarray) -> float:
    """Share of pairs with the false half above its twin (a tie counts a half)."""
    return float(np.mean((margins > 0) + 0.5 * (margins == 0)))


def figure(margins: np.ndarray) -> dict:
    """Pairwise accuracy with a Wilson interval over pairs (ties counted as half a win)."""
    wins = float(np.sum((margins > 0) + 0.5 * (margins == 0)))
    lo, hi = stats.wilson(round(wins), len(margins))
    return {"pairwise_accuracy": wins / len(margins), "ci95": [lo, hi], "n_pairs": len(margins)}


def stance_figures(margins: np.ndarray, fold: np.ndarray, folds: int) -> dict:
    """The stance margins' pairwise accuracy over all pairs and within each fold."""
    return {
        "all": figure(margins),
        "by_fold": [figure(margins[fold == k]) for k in range(folds)],
    }


def group_bootstrap_diff(a: np.ndarray, b: np.ndarray, groups: np.ndarray, n_boot=2000, seed=0):
    """Mean of b - a (per-pair wins) with a 95% interval resampling whole claim groups."""
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    names = np.unique(groups)
    sums = np.array([d[groups == g].sum() for g in names])
    sizes = np.array([(groups == g).sum() for g in names])
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(names), size=(n_boot, len(names)))
    boots = sums[pick].sum(axis=1) / sizes[pick].sum(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {"diff": float(d.mean()), "ci95": [float(lo), float(hi)], "n_pairs": len(d)}


def wins(margins: np.ndarray) -> np.ndarray:
    """Per pair: 1 where the margin is > 0, 0.5 on a tie, 0 otherwise."""
    return (margins > 0) + 0.5 * (margins == 0)


def probe_model(
    ref: str, pairs, fold, groups, read_layer: int, seed: int, progress: bool, stance=None
) -> dict:
    model, tokenizer = load(ref, mx.float32)  # probes read float32 states on every backend
    n_layers = len(model.layers)
    if not 0 <= read_layer <= n_layers:
        raise errors.UserError(
            f"--layer {read_layer} is outside 0..{n_layers} for {ref} "
            f"(0 = the embedding, i = after block i)"
        )
    texts = [t["prompt"] for pair in pairs for t in pair]
    states = last_token_states(model, tokenizer, texts, progress)
    layers = []
    for layer in range(n_layers + 1):
        margins, chosen = pair_margins(states[:, layer], fold, groups, seed=seed)
        layers.append({"layer": layer, **figure(margins), "strengths": chosen})
        if layer == read_layer:
            read_margins = margins
    best = max(layers, key=lambda r: r["pairwise_accuracy"])
    out = {}
    if stance is not None:  # the model's own stance: log p(sentence | false) - p(... | twin)
        lp = forced.text_logprobs(model, tokenizer, texts, stance)
        margins = lp[0::2] - lp[1::2]  # texts alternate false, twin
        out["stance"] = {"text": stance, **stance_figures(margins, fold, int(fold.max()) + 1)}
        out["stance_pair_margins"] = [float(m) for m in margins]
    return out | {
        "model": ref,
        "blocks": n_layers,
        "read_layer": layers[read_layer],
        "best_layer_after_the_fact": {k: best[k] for k in ("layer", "pairwise_accuracy", "ci95")},
        "layers": layers,
        "pair_margins_at_read_layer": [
            {"false": a["id"], "twin": b["id"], "margin": float(m)}
            for (a, b), m in zip(pairs, read_margins, strict=True)
        ],
    }


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument(
        "--model",
        action="append",
        required=True,
        help="a model reference (repeat for several), each probed on the same folds",
    )
    p.add_argument(
        "--pairs",
        default=DEFAULT_PAIRS,
        help="prompt files joined by commas; a record naming a `pair` is a true twin",
    )
    p.add_argument("--folds", type=int, default=5, help="outer folds, split by claim group")
    p.add_argument(
        "--group-run",
        type=int,
        default=4,
        help="pairs whose false halves share a rare run of this many words are one claim, kept "
        "in one fold (0: each pair alone)",
    )
    p.add_argument(
        "--layer",
        type=int,
        default=20,
        help="the layer whose figure is read (0: embedding, i: after block i)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the fold assignment")
    p.add_argument(
        "--stance",
        default=None,
        help="also score this sentence opening the answer after each half (e.g. 'That premise "
        "is false.'): the share of pairs where the false half gives it more log-probability, "
        "overall and per fold; with several models, each against the first by claim group",
    )
    p.add_argument("--limit", type=int, default=None, help="probe the first N pairs (a quick look)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    if a.folds < 2:
        p.error(f"--folds must be at least 2, got {a.folds}")
    if a.group_run < 0:
        p.error(f"--group-run must be >= 0, got {a.group_run}")
    if a.limit is not None and a.limit < 1:
        p.error(f"--limit must be at least 1, got {a.limit}")
    if a.stance is not None and not a.stance.strip():
        raise errors.UserError(
            "--stance is empty: give the sentence to score, e.g. 'That premise is false.'"
        )
    with errors.as_user_error(ValueError):
        pairs = minimal_pairs(load_prompts(a.pairs))[: a.limit]
        groups = claim_groups(pairs, a.group_run)
        fold = fold_of_groups(groups, a.folds, a.seed)
    backend.announce()
    texts = [t["prompt"] for pair in pairs for t in pair]
    bow, _ = pair_margins(bag_of_words(texts), fold, groups, seed=a.seed)
    result = {
        "pairs_file": a.pairs,
        "n_pairs": len(pairs),
        "folds": a.folds,
        "groups": int(groups.max()) + 1,
        "group_run": a.group_run,
        "feature": "residual stream at the last prompt token (chat template)",
        "bag_of_words": figure(bow),
        "models": [
            probe_model(m, pairs, fold, groups, a.layer, a.seed, not a.json, a.stance)
            for m in a.model
        ],
    }
    if a.stance is not None:
        result["stance_vs_first"] = stance_versus_first(result["models"], fold, groups, a.folds)
    if a.json:
        print(strict_json.dumps(result))
        return 0
    print(f"{len(pairs)} minimal pairs in {result['groups']} claim groups, {a.folds} folds by "
          "group; held-out pairwise accuracy (chance 0.5)")  # fmt: skip
    print(f"bag of words (peer): {stats.show(_as_fig(result['bag_of_words']))}")
    for m in result["models"]:
        print(f"\n{m['model']}: read layer {a.layer}: {stats.show(_as_fig(m['read_layer']))}")
        for row in m["layers"]:
            print(
                f"  layer {row['layer']:>2}  {row['pairwise_accuracy']:.3f}  "
                f"[{row['ci95'][0]:.3f}, {row['ci95'][1]:.3f}]"
            )
        if "stance" in m:
            st = m["stance"]
            folds = "  ".join(f"{f['pairwise_accuracy']:.3f}" for f in st["by_fold"])
            print(f"  stance {st['text']!r}: {stats.show(_as_fig(st['all']))}; by fold: {folds}")
    for row in result.get("stance_vs_first", []):
        cells = "; ".join(
            f"fold {k}: {d['diff']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]"
            for k, d in enumerate(row["by_fold"])
        )
        print(f"stance, {row['model']} - {row['first']}: all {row['all']['diff']:+.3f}; {cells}")
    return 0


def stance_versus_first(models: list[dict], fold, groups, folds: int) -> list[dict]:
    """Each later model's stance accuracy minus the first's, overall and per fold, with
    intervals that resample claim groups (the pairs are paired across models)."""
    first = wins(np.array(models[0]["stance_pair_margins"]))
    out = []
    for m in models[1:]:
        w = wins(np.array(m["stance_pair_margins"]))
        per = [group_bootstrap_diff(first[fold == k], w[fold == k], groups[fold == k])
               for k in range(folds)]  # fmt: skip
        row = {"model": m["model"], "first": models[0]["model"]}
        out.append(row | {"all": group_bootstrap_diff(first, w, groups), "by_fold": per})
    return out


def _as_fig(row: dict) -> dict:
    return {"value": row["pairwise_accuracy"], "ci95": row["ci95"], "n": row["n_pairs"]}


if __name__ == "__main__":
    sys.exit(main())
