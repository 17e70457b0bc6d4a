"""Build the evaluation grader (evals/grade.py) from labelled answers; write
models/grader-smollm2-135m.

Training data (data/grader/README.md), every prompt that appears in data/eval.jsonl or
data/eval_external.jsonl dropped, splits disjoint by prompt:
- data/pushback_labels.jsonl: written answers of eleven kinds, mapped to the gold scheme
  (KIND_LABEL); its train split trains, val and test validate;
- FalseQA (../shared/datasets/falseqa, read in place: no license, nothing copied): rebuttals of
  false premises (corrects_premise) and plain answers to true ones (answers);
- CoCoNot's contrast preferences (MIT): `chosen` answers lookalike prompts plainly (answers);
- broken text made from the above answers (shuffled words, a phrase looped, a cut mid-word run
  of another answer's words), labelled by construction;
- data/grader/policy_labels.jsonl: answers sampled from the embedded model and a GRPO checkpoint
  on training prompts, labelled by reading (data/grader/policy_answers.jsonl + labels); a third
  of their prompts are held out as the source-disjoint validation slice.
- data/grader/fluent.jsonl ... fluent4.jsonl (FLUENT_FILES): answers written in larger chat
  models' registers (issue 55), labelled by the gold scheme; a third of each file's new prompts
  validate, a prompt an earlier file used keeps that file's split.
The head is a multinomial logistic regression (numpy, class-balanced, L2) on grade.Featurizer
features; validation figures (gold.grader_figures on each validation source) go to metrics.json.

  uv run python train_grader.py            # ~6 minutes on 2 cores (features cached in /tmp)
"""

import argparse
import csv
import hashlib
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

from core import backend, errors, jsonl, strict_json
from core import prompts as prompts_mod
from core.atomic import atomic_folder, atomic_write
from core.jsonl import file_sha256
from core.prompts import EVAL_NOTES, load_notes, load_pushback_labels, norm

import numpy as np
from tqdm import tqdm

from evals import gold
from evals.gold import LABELS, grader_figures
from evals.grade import (
    DEFAULT_GRADER,
    FEATURE_BLOCKS,
    LABEL_NAMES,
    MAX_ANSWER_TOKENS,
    MAX_PROMPT_TOKENS,
    Featurizer,
    Grader,
    reference_check,
    softmax,
    within_side,
)
from rewards import reward_model

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parent / "shared" / "datasets"
KIND_LABEL = {
    "direct_correction": "corrects_premise",
    "flags_nonsense": "flags_nonsense",
    "needless_pushback": "corrects_premise",  # disputes a true premise: pushback all the same
    "refusal": "refuses",
    "clarifying_question": "asks_clarification",
    "plain_answer": "answers",
    "answers_false_premise": "answers",
    "answers_nonsense": "answers",
    "hedge_partial": "hedges",
    "decoy_words": "answers",
    "echo": "answers",
}
# the policies' own answers, read and labelled ("policy_run": read sets added with --with-reads)
SAMPLED = ("policy", "policy_warm", "policy_flags", "policy_run")
FLUENT = "written_fluent"  # data/grader/fluent*.jsonl: answers in larger models' registers
# (file, seed of its validation prompts): a third of each file's prompts validate
FLUENT_FILES = (
    ("fluent.jsonl", 18),
    ("fluent2.jsonl", 56),
    ("fluent3.jsonl", 57),
    ("fluent4.jsonl", 58),
)
CACHE = Path(tempfile.gettempdir()) / "rl-values-grader-features"


def rec(source, category, prompt, answer, label, split):
    return {"source": source, "category": category, "prompt": prompt, "answer": answer,
            "label": label, "pushback": LABELS[label], "split": split}  # fmt: skip


def falseqa(path: Path, n: int, split: str, rng) -> list[dict]:
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: FalseQA is read from ../shared/datasets")
    rows = [r for r in csv.DictReader(path.open(encoding="utf-8")) if r["answer"].strip()]
    rows = rng.sample(rows, min(n, len(rows)))
    return [rec("falseqa", "false_premise" if r["label"] == "1" else "control", r["question"],
                r["answer"], "corrects_premise" if r["label"] == "1" else "answers", split)
            for r in rows]  # fmt: skip


def coconot(n: int, rng, shared: Path = SHARED) -> list[dict]:
    rows = [json.loads(x) for x in (shared / "coconot" / "coconot_pref.jsonl").open()]
    rows = rng.sample(rows, min(n, len(rows)))
    out = []
    for i, r in enumerate(rows):
        split = "val" if i % 5 == 0 else "train"
        out.append(rec("coconot", "control", r["prompt"], r["chosen"][:1200], "answers", split))
    return out


def broken(source: list[dict], rng) -> list[dict]:
    """Degenerate answers made from real ones: the label is known by construction."""
    out = []
    for i, r in enumerate(source):
        words = r["answer"].split()
        if len(words) < 6:
            continue
        kind = i % 3
        if kind == 0:
            rng.shuffle(words)
            text = " ".join(words)
        elif kind == 1:
            k = rng.randint(2, 5)
            start = rng.randint(0, max(len(words) - k, 0))
            text = " ".join(words[:start] + words[start : start + k] * rng.randint(6, 12))
        else:
            other = source[(i * 7 + 3) % len(source)]["answer"].split()
            mix = words[: len(words) // 3] + other[len(other) // 2 :]
            rng.shuffle(mix)
            text = " ".join(mix)[: rng.randint(40, 300)]
        out.append(rec("synthetic_broken", r["category"], r["prompt"], text, "broken", r["split"]))
    return out


def read_labelled(answers: Path, labels: Path, source: str, seed: int) -> list[dict]:
    """Sampled answers (id, prompt_id, category, prompt, answer) and their reading labels (id,
    label), joined by id (gold.join_labels: answers left unlabelled are skipped, a label naming no
    answer or an unknown label is a DataError). A third of the prompts (random.Random(seed)) is
    the validation slice."""
    rows, _ = gold.join_labels(answers, labels, every=False)
    prompts = sorted({r["prompt_id"] for r in rows})
    held = set(random.Random(seed).sample(prompts, len(prompts) // 3))
    return [rec(source, r["category"], r["prompt"], r["answer"], r["label"],
                "val" if r["prompt_id"] in held else "train") for r in rows]  # fmt: skip


def _grader_files(stem: str, source: str, seeds: tuple[tuple[str, int], ...]) -> list[dict]:
    """data/grader/{stem}_answers{suffix}.jsonl + {stem}_labels{suffix}.jsonl for each (suffix,
    seed) whose labels file exists."""
    out = []
    for suffix, seed in seeds:
        folder = ROOT / "data" / "grader"
        labels = folder / f"{stem}_labels{suffix}.jsonl"
        if labels.is_file():
            out += read_labelled(folder / f"{stem}_answers{suffix}.jsonl", labels, source, seed)
    return out


def policy_answers() -> list[dict]:
    """Sampled policy answers labelled by reading: policy_answers.jsonl (base T 0.7, checkpoint
    T 1.0) and policy_answers2.jsonl (base T 1.0, checkpoint T 0.7, other prompts); a third of
    each file's prompts (seeded) is the source-disjoint validation slice."""
    return _grader_files("policy", "policy", (("", 11), ("2", 12)))


def warm_policy_answers() -> list[dict]:
    """data/reads/warm_policy: 200 answers of the SFT-warm-started policy under GRPO (training
    prompts, T 0.8), labelled by reading; a third of its prompts (seed 14) validate."""
    folder = ROOT / "data" / "reads" / "warm_policy"
    return read_labelled(folder / "answers.jsonl", folder / "labels.jsonl", "policy_warm", 14)


def flag_answers() -> list[dict]:
    """data/grader/flag_answers*.jsonl: answers of the base and the SFT warm start sampled with a
    scrutiny system message on fresh training prompts (false-premise, nonsense, control; then
    nonsense only), so that corrections, nonsense flags and needless pushback appear in the
    policies' own words; labelled by reading (flag_labels*.jsonl). The system message is not
    shown to the grader (it reads prompt and answer). A third of each file's prompts (seeded)
    validate."""
    return _grader_files("flag", "policy_flags", (("", 15), ("2", 16)))


def run_reads(folders: list[str]) -> list[dict]:
    """Read sets of a run's own rollouts on training prompts (data/reads/<name>/answers.jsonl +
    labels.jsonl), added with --with-reads: source "policy_run", a third of each folder's prompts
    (seed 17) validate. A folder holding an evaluation prompt is refused: those stay held out."""
    if not folders:
        return []
    out, banned = [], prompts_mod.held_out_prompts(ROOT)
    for d in folders:
        folder = Path(d)
        for name in ("answers.jsonl", "labels.jsonl"):
            if not (folder / name).is_file():
                raise FileNotFoundError(f"--with-reads {d}: no {name} there (a read set folder "
                                        "holds answers.jsonl and labels.jsonl)")  # fmt: skip
        rows = read_labelled(folder / "answers.jsonl", folder / "labels.jsonl", "policy_run", 17)
        held = sorted({r["prompt"] for r in rows if norm(r["prompt"]) in banned})
        if held:
            raise ValueError(
                f"--with-reads {d}: {len(held)} prompts are evaluation prompts "
                f"(first: {held[0]!r}); read sets of eval prompts must not train"
            )
        out += rows
    return out


def classifier_labels(data: list[dict], policy_repeat: int, fluent_repeat: int = 1) -> list[dict]:
    """The pushback classifier's file (train_rm.py --labels, gold scheme): every training record,
    the policies' own labelled answers repeated `policy_repeat` times (they are the text the
    grader must read and the fewest) and the fluent written answers `fluent_repeat` times;
    validation keeps only the sampled, grader-written and fluent answers of held-out prompts
    (the answers most like the gold sets'), once each."""
    out = []
    for i, r in enumerate(data):
        base = {"id": f"g{i:05d}", "prompt": r["prompt"], "category": r["category"],
                "answer": r["answer"], "pushback": r["pushback"], "label": r["label"],
                "split": r["split"], "source": r["source"]}  # fmt: skip
        if r["split"] != "train":
            if r["source"] in (*SAMPLED, "written_grader", FLUENT):
                out.append(base)
            continue
        copies = {**dict.fromkeys(SAMPLED, policy_repeat), FLUENT: fluent_repeat}
        copies = copies.get(r["source"], 1)
        out += [{**base, "id": f"{base['id']}-{k}"} for k in range(copies)]
    return out


def written_answers() -> list[dict]:
    """data/grader/written.jsonl: answers written for training prompts in many registers (calm
    encyclopedic corrections, blunt ones, answers that swallow the premise, flags, hedges,
    refusals, questions, needless pushback, broken text); a third of its prompts validate."""
    path = ROOT / "data" / "grader" / "written.jsonl"
    if not path.is_file():
        return []
    rows = [json.loads(x) for x in path.open()]
    prompts = sorted({r["prompt_id"] for r in rows})
    held = set(random.Random(13).sample(prompts, len(prompts) // 3))
    return [rec("written_grader", r["category"], r["prompt"], r["answer"], r["label"],
                "val" if r["prompt_id"] in held else "train") for r in rows]  # fmt: skip


def fine_tune_mix(rows: list[dict], others: int, seed: int) -> list[dict]:
    """The classifier file cut for a short fine-tune from a trained classifier: validation and
    every fluent, sampled or grader-written training record kept, `others` of the remaining
    training records (written, FalseQA, CoCoNot, broken; random.Random(seed)) so the old kinds
    stay in view."""
    keep = (*SAMPLED, FLUENT, "written_grader")
    rest = [r for r in rows if r["split"] == "train" and r["source"] not in keep]
    picked = {id(r) for r in random.Random(seed).sample(rest, min(others, len(rest)))}
    return [r for r in rows
            if r["split"] != "train" or r["source"] in keep or id(r) in picked]  # fmt: skip


def fluent_answers() -> list[dict]:
    """data/grader/fluent*.jsonl (FLUENT_FILES): answers written in the registers of larger chat
    models (plain, markdown and buried corrections, flags that also ask to rephrase or offer a
    reading, answers that go along, hard-negative controls and decoy words, hedges, refusals,
    questions, broken text) on training prompts; labelled by the gold scheme. A third of each
    file's new prompts (with that file's seed) validate; a prompt an earlier file already used
    keeps that file's split, so no prompt both trains and validates. Their prompts are disjoint
    from the fluent gold set's (tests/test_gold.py)."""
    out, split_of = [], {}
    for name, seed in FLUENT_FILES:
        path = ROOT / "data" / "grader" / name
        if not path.is_file():
            continue
        rows = [json.loads(x) for x in path.open(encoding="utf-8")]
        new = sorted({r["prompt_id"] for r in rows} - set(split_of))
        held = set(random.Random(seed).sample(new, len(new) // 3))
        split_of |= {p: "val" if p in held else "train" for p in new}
        out += [rec(FLUENT, r["category"], r["prompt"], r["answer"], r["label"],
                    split_of[r["prompt_id"]]) for r in rows]  # fmt: skip
    return out


def build_data(seed: int = 0, with_warm: bool = False, with_flags: bool = False,
               reads: list[str] = (), shared: Path = SHARED) -> list[dict]:  # fmt: skip
    rng = random.Random(seed)
    data = []
    for r in load_pushback_labels(ROOT / "data" / "pushback_labels.jsonl"):
        split = "train" if r["split"] == "train" else "val"
        data.append(rec("written", r["category"], r["prompt"], r["answer"],
                        KIND_LABEL[r["kind"]], split))  # fmt: skip
    data += falseqa(shared / "falseqa" / "train.csv", 1800, "train", rng)
    data += falseqa(shared / "falseqa" / "valid.csv", 200, "val", rng)
    data += coconot(200, rng, shared)
    data += broken([r for r in data if r["source"] in ("written", "falseqa")], rng)[::3]
    data += policy_answers()
    data += written_answers()
    data += fluent_answers()
    if with_warm:
        data += warm_policy_answers()
    if with_flags:
        data += flag_answers()
    data += run_reads(reads)
    banned = prompts_mod.held_out_prompts(ROOT)
    kept = [r for r in data if norm(r["prompt"]) not in banned]
    train_prompts = {norm(r["prompt"]) for r in kept if r["split"] == "train"}
    # splits disjoint by prompt: a validation record whose prompt trains is dropped
    return [r for r in kept if r["split"] == "train" or norm(r["prompt"]) not in train_prompts]


def features(records: list[dict], featurizer: Featurizer) -> np.ndarray:
    """Featurizer features, cached per (prompt, answer) outside the repository."""
    CACHE.mkdir(parents=True, exist_ok=True)
    shape = [list(FEATURE_BLOCKS), MAX_PROMPT_TOKENS, MAX_ANSWER_TOKENS]  # what a feature is
    keys = [hashlib.sha256(json.dumps([shape, r["prompt"], r["answer"]]).encode()).hexdigest()[:24]
            for r in records]  # fmt: skip
    missing = [i for i, k in enumerate(keys) if not (CACHE / f"{k}.npy").is_file()]
    if missing:
        f = featurizer([records[i]["prompt"] for i in missing],
                       [records[i]["answer"] for i in missing], progress=True)  # fmt: skip
        for i, row in zip(missing, f, strict=True):
            np.save(CACHE / f"{keys[i]}.npy", row)
    return np.stack([np.load(CACHE / f"{k}.npy") for k in keys])


def fit(x, y, weights, l2: float, steps: int, lr: float = 0.05, seed: int = 0):
    """Multinomial logistic regression by full-batch Adam: (W, b)."""
    rng = np.random.default_rng(seed)
    k = len(LABEL_NAMES)
    W, b = rng.normal(0, 0.01, (x.shape[1], k)), np.zeros(k)
    m = [np.zeros_like(W), np.zeros_like(b)]
    v = [np.zeros_like(W), np.zeros_like(b)]
    onehot = np.eye(k)[y]
    for t in tqdm(range(1, steps + 1), desc="grader head", leave=False):
        p = softmax(x @ W + b)
        g = (p - onehot) * weights[:, None] / weights.sum()
        grads = [x.T @ g + l2 * W, g.sum(axis=0)]
        for j, (param, grad) in enumerate(zip((W, b), grads, strict=True)):
            m[j] = 0.9 * m[j] + 0.1 * grad
            v[j] = 0.999 * v[j] + 0.001 * grad**2
            param -= lr * (m[j] / (1 - 0.9**t)) / (np.sqrt(v[j] / (1 - 0.999**t)) + 1e-8)
    return W, b


def figures(records, probs) -> dict:
    pred = [{"id": str(i), "label": LABEL_NAMES[int(p.argmax())]} for i, p in enumerate(probs)]
    gold = [{**r, "id": str(i), "engages": None} for i, r in enumerate(records)]
    pred = [{**q, "pushback": LABELS[q["label"]]} for q in pred]
    out = grader_figures(gold, pred)
    out.pop("confusion")
    return out


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--out", default=DEFAULT_GRADER, help="grader folder to write")
    p.add_argument("--l2", type=float, default=1e-2, help="L2 penalty of the head")
    p.add_argument("--steps", type=int, default=600, help="Adam steps of the head")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-gold", action="store_true", help="skip measuring on the gold set")
    p.add_argument("--pushback-model", metavar="DIR",
                   help="a pushback classifier (train_rm.py --labels on the --write-labels "
                   "file) that decides pushback; copied into the grader folder")  # fmt: skip
    p.add_argument("--write-labels", metavar="FILE", help="write the pushback classifier's "
                   "training file (train_rm.py --labels FILE) and stop")  # fmt: skip
    p.add_argument("--with-reads", metavar="DIR", action="append", default=[],
                   help="--write-labels: add this read set of a run's rollouts on training "
                   "prompts (answers.jsonl + labels.jsonl; repeatable)")  # fmt: skip
    p.add_argument(
        "--policy-repeat",
        type=int,
        default=3,
        help="--write-labels: copies of each sampled policy answer in training",
    )
    p.add_argument("--datasets", default=str(SHARED),
                   help="the public data sets' folder (read in place)")  # fmt: skip
    p.add_argument("--fluent-repeat", type=int, default=3,
                   help="--write-labels: copies of each fluent written answer")  # fmt: skip
    p.add_argument("--others", type=int, default=None, metavar="N",
                   help="--write-labels: keep every fluent and sampled training record but only "
                   "N others (seeded): a short fine-tune's file (train_rm.py --init)")  # fmt: skip
    p.add_argument("--head-from", metavar="DIR",
                   help="keep the label head (grader.npz) of this grader folder instead of "
                   "fitting one: only the validation answers are read (the fourth version "
                   "kept the third's head and changed the classifier)")  # fmt: skip
    p.add_argument("--measure-gold", metavar="DIR",
                   help="measure the grader folder DIR on both gold sets (with and without "
                   "the reference notes), write DIR/gold.json and stop (~14 min)")  # fmt: skip
    p.add_argument("--val-figures", metavar="DIR", action="append", default=[],
                   help="print this pushback classifier's figures (alone, p > 0.5) on the "
                   "validation rows of --labels FILE, fluent and other rows apart, and stop; "
                   "repeatable: one line per classifier")  # fmt: skip
    p.add_argument("--labels", metavar="FILE",
                   help="--val-figures: a --write-labels file")  # fmt: skip
    a = p.parse_args(argv)
    if a.val_figures:
        with errors.as_user_error(FileNotFoundError, ValueError):
            if not a.labels:
                raise ValueError("--val-figures reads the validation rows of a --write-labels "
                                 "file: pass --labels FILE")  # fmt: skip
            for d in a.val_figures:
                reward_model.check_folder(d)
            rows = [r for r in load_pushback_labels(a.labels) if r["split"] == "val"]
            if not rows:
                raise ValueError(f"{a.labels}: no validation rows (split 'val'); "
                                 "write it with --write-labels")  # fmt: skip
        backend.announce()
        for d in a.val_figures:
            figs = validation_figures(reward_model.load(d), rows)
            print(strict_json.dumps({"classifier": d, **figs}))
        return 0
    if a.pushback_model:
        reward_model.check_folder(a.pushback_model)  # before the features' model work
    if a.measure_gold:
        folder = Path(a.measure_gold)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"{folder}: no grader here (no config.json)")
        backend.announce()
        measure_gold(folder)
        print(gold_summary(folder))
        return 0
    sampled = bool(a.write_labels or a.head_from)  # the read policy answers since the third version
    with errors.as_user_error(ValueError):  # the data files
        if a.with_reads and not a.write_labels:
            raise ValueError("--with-reads only adds to --write-labels's file: "
                             "pass --write-labels FILE")  # fmt: skip
        data = build_data(a.seed, with_warm=sampled, with_flags=sampled, reads=a.with_reads,
                          shared=Path(a.datasets))  # fmt: skip
    if a.write_labels:
        rows = classifier_labels(data, a.policy_repeat, a.fluent_repeat)
        if a.others is not None:
            rows = fine_tune_mix(rows, a.others, a.seed)
        jsonl.write_jsonl(rows, a.write_labels)
        counts = {s: sum(r["split"] == s for r in rows) for s in ("train", "val")}
        print(f"{a.write_labels}: {counts}, by source {_count(data, True)} train, "
              f"{_count(data, False)} held out", file=sys.stderr)  # fmt: skip
        return 0
    backend.announce()
    tr = np.array([r["split"] == "train" for r in data])
    if a.head_from:
        with errors.as_user_error(FileNotFoundError, KeyError):
            npz = np.load(Path(a.head_from) / "grader.npz")
            W, b, mean, std = (npz[k] for k in ("W", "b", "mean", "std"))
        val_idx = np.flatnonzero(~tr)
        z = np.zeros((len(data), len(mean)))
        z[val_idx] = (features([data[i] for i in val_idx], Featurizer()) - mean) / std
    else:
        x = features(data, Featurizer())
        y = np.array([LABEL_NAMES.index(r["label"]) for r in data])
        mean, std = x[tr].mean(axis=0), x[tr].std(axis=0) + 1e-6
        z = (x - mean) / std
        counts = np.bincount(y[tr], minlength=len(LABEL_NAMES)).astype(float)
        # class-balanced: a label's weight is inverse to its count, capped at 10x the commonest's
        w_class = np.where(counts > 0, 1.0 / np.maximum(counts, 1), 0.0)
        w_class = np.minimum(w_class / w_class[counts > 0].min(), 10.0)
        W, b = fit(z[tr], y[tr], w_class[y[tr]], a.l2, a.steps, seed=a.seed)
    probs = softmax(z @ W + b)
    val = [r for r, t in zip(data, tr, strict=True) if not t]
    classifier = None
    if a.pushback_model:
        classifier = Grader(a.pushback_model, {"mean": 0, "std": 1, "W": 0, "b": 0}, {}, {},
                            classifier=reward_model.load(a.pushback_model))  # fmt: skip
        probs[~tr] = within_side(probs[~tr], classifier.pushback_probabilities(val))
    metrics = {
        "train": {"n": int(tr.sum()), "by_source": _count(data, True)},
        "validation": {
            "n": len(val),
            "by_source": _count(data, False),
            "all": figures(val, probs[~tr]),
        },  # fmt: skip
    }
    for source in sorted({r["source"] for r in val}):
        idx = [i for i, r in enumerate(data) if not tr[i] and r["source"] == source]
        metrics["validation"][source] = figures([data[i] for i in idx], probs[idx])
    out = Path(a.out)
    config = {"labels": list(LABEL_NAMES), "base_model": "smollm2-135m", "l2": a.l2,
              "feature_blocks": list(FEATURE_BLOCKS), "max_prompt_tokens": MAX_PROMPT_TOKENS,
              "max_answer_tokens": MAX_ANSWER_TOKENS,
              "steps": a.steps, "seed": a.seed, "data_sha256": _sha(data),
              "head_from": a.head_from,
              "pushback_model": "pushback" if classifier is not None else None}  # fmt: skip
    with atomic_folder(out) as tmp:
        np.savez(tmp / "grader.npz", W=W, b=b, mean=mean, std=std)
        if classifier is not None:
            shutil.copytree(a.pushback_model, tmp / "pushback")
        (tmp / "config.json").write_text(json.dumps(config, indent=1) + "\n")
        (tmp / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    print(strict_json.dumps(metrics["validation"]["all"]))
    if not a.no_gold:
        measure_gold(out)
        print(gold_summary(out))
    return 0


def validation_figures(classifier, rows: list[dict]) -> dict:
    """A pushback classifier alone (p > 0.5, no label head, no notes) on a --write-labels file's
    validation rows, split into the fluent written answers and all others: pushback accuracy,
    correction and flag recall, control false positives, each with k/n (gold.grader_figures)."""
    p = classifier.pushback_probabilities([r["prompt"] for r in rows],
                                          [r["answer"] for r in rows])  # fmt: skip
    out = {}
    for name, keep in (("fluent", lambda r: r.get("source") == FLUENT),
                       ("other", lambda r: r.get("source") != FLUENT)):  # fmt: skip
        idx = [i for i, r in enumerate(rows) if keep(r)]
        part = [rows[i] for i in idx]
        pred = [{"id": r["id"], "label": None, "pushback": bool(p[i] > 0.5)}
                for r, i in zip(part, idx, strict=True)]  # fmt: skip
        figs = gold.grader_figures(part, pred)
        out[name] = {k: {"k": figs[k]["k"], "n": figs[k]["n"]} for k in (
            "pushback_accuracy", "false_premise_correction_recall", "nonsense_flag_recall",
            "control_false_positive_rate")}  # fmt: skip
    return out


def gold_summary(folder: Path) -> str:
    """Both gold sets' figures (model alone and with the notes) from FOLDER/gold.json, one line
    each, confusion matrices left out."""
    saved = json.loads((Path(folder) / "gold.json").read_text())
    lines = []
    for name, entry in (("135m", saved), ("fluent", saved.get("fluent"))):
        for how, m in (("model alone", entry), ("with notes", (entry or {}).get("with_notes"))):
            if m:
                figs = {k: v for k, v in m["figures"].items() if k != "confusion"}
                lines.append(f"gold set {name}, {how}: {strict_json.dumps(figs)}")
    return "\n".join(lines)


def measure_gold(folder: Path, notes_path: str | None = EVAL_NOTES) -> dict:
    """The finished grader's figures on both gold sets (gold.GOLD_SETS: the 135M models' answers
    and the fluent written ones), written to FOLDER/gold.json (evaluate.py and evals/grade.py print
    them): the 135M set at the top level as before, the fluent set under "fluent"; each the
    model's verdicts alone and, under `with_notes`, with the reference check of `notes_path`
    (grade.reference_check; as evaluate.py grades). Measured after training; nothing is chosen
    by them. Returns the 135M set's model-alone figures."""
    grader = Grader.load(str(folder))
    out = {}
    for name, (loader, files) in gold.GOLD_SETS.items():
        rows = loader(*files)
        measured = gold_measurement(rows, grader.grade(rows, progress=True), notes_path, files)
        if name == "135m":
            out.update(measured)
        else:
            out[name] = measured
    atomic_write(folder / "gold.json", json.dumps(out, indent=1) + "\n")
    return out["figures"]


def gold_measurement(rows: list[dict], graded: list[dict], notes_path: str | None,
                     files: tuple = (gold.ANSWERS, gold.LABELS_FILE)) -> dict:  # fmt: skip
    """gold.json's content for one gold set (its two `files`) from the grader's verdicts on its
    rows (no notes applied)."""
    figs = gold.grader_figures(rows, graded)
    figs["n_answers"] = len(rows)
    out = {"gold_sha256": gold.files_sha256(*files), "figures": figs}
    if notes_path:
        checked = reference_check(rows, graded, load_notes(notes_path))
        with_notes = gold.grader_figures(rows, checked)
        with_notes["n_answers"] = len(rows)
        with_notes["answers_with_a_marker"] = sum(bool(g["reference"]) for g in checked)
        with_notes["upgraded_to_pushback"] = sum(
            g["pushback"] and not h["pushback"] for g, h in zip(checked, graded, strict=True)
        )
        out["with_notes"] = {"notes": notes_path, "notes_sha256": file_sha256(notes_path),
                             "gold_sha256": out["gold_sha256"], "figures": with_notes}  # fmt: skip
    return out


def _count(data, train: bool) -> dict:
    out = {}
    for r in data:
        if (r["split"] == "train") == train:
            out[r["source"]] = out.get(r["source"], 0) + 1
    return out


def _sha(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


if __name__ == "__main__":
    sys.exit(main())
