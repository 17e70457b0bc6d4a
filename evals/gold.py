"""The gold set: model answers labelled by a person reading them, and a grader's figures on it.

`load_gold` joins data/gold/answers.jsonl (sampled by data/make_gold.py) with
data/gold/labels.jsonl (written by hand, data/gold/LABEL_SCHEME.md) by id, after checking both
whole files; any problem raises `jsonl.DataError` naming the file, the 1-based line and the
fix. `grader_figures` scores a grader's predictions against it: label and pushback accuracy,
recall on false-premise corrections and on nonsense flags, the false-positive rate on control
answers, each with its n and a Wilson 95% interval, and a label confusion matrix. The set is
for measuring graders only: never train, tune or pick a threshold or checkpoint on it.

    uv run python -m evals.gold                          # counts per category x label and model uv
    run python -m evals.gold --predictions preds.jsonl --json   # a grader's figures uv run python
    -m evals.gold --predictions data/gold/second_labels.jsonl --partial   # two labellers uv run
    python -m evals.gold --set fluent             # the second gold set: fluent written answers

`load_fluent` reads the second gold set (data/gold/fluent_*.jsonl): answers written in a larger
chat model's register on evaluation prompts, labelled by the same scheme (GOLD_SETS names both).
"""

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

from core import strict_json
from core.errors import as_user_error, cli
from core.jsonl import DataError, data_error, file_sha256, read_jsonl
from core.prompts import ANSWER_LABELS, CATEGORIES
from core.stats import cohen_kappa, wilson

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANSWERS = os.path.join(ROOT, "data", "gold", "answers.jsonl")
LABELS_FILE = os.path.join(ROOT, "data", "gold", "labels.jsonl")
# The second gold set: answers written in a larger chat model's register (data/gold/README.md).
FLUENT_ANSWERS = os.path.join(ROOT, "data", "gold", "fluent_answers.jsonl")
FLUENT_LABELS = os.path.join(ROOT, "data", "gold", "fluent_labels.jsonl")

# label -> pushback (the answer disputes the premise or flags the prompt); order = display order.
LABELS = ANSWER_LABELS
CONDITIONS = ("plain", "scrutiny", "scrutiny_plus")
# field -> (type test, what to write); answers.jsonl
ANSWER_FIELDS = {
    "id": (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string"),
    "category": (lambda v: v in CATEGORIES, f"one of {', '.join(CATEGORIES)}"),
    "prompt": (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string"),
    "answer": (lambda v: isinstance(v, str), "a string (may be empty)"),
    "model": (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string"),
    "condition": (lambda v: v in CONDITIONS, f"one of {', '.join(CONDITIONS)}"),
    "temperature": (
        lambda v: isinstance(v, int | float) and not isinstance(v, bool) and v >= 0,
        "a number >= 0",
    ),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "finished": (lambda v: isinstance(v, bool), "true or false"),
    "prompt_id": (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string"),
}
# fluent_answers.jsonl: written, not sampled, so no sampling fields; `prompt_id` names the line
# of data/eval.jsonl or data/eval_external.jsonl the prompt comes from.
FLUENT_FIELD_NAMES = ("id", "category", "prompt", "answer", "model", "prompt_id")
FLUENT_ANSWER_FIELDS = {k: ANSWER_FIELDS[k] for k in FLUENT_FIELD_NAMES}
LABEL_FIELDS = {
    "id": (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string"),
    "label": (lambda v: v in LABELS, f"one of {', '.join(LABELS)}"),
    "pushback": (lambda v: isinstance(v, bool), "true or false"),
    "engages": (lambda v: v is None or isinstance(v, bool), "true, false or null"),
    "reason": (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty one-line string"),
}


def _parse(path, fields: dict) -> tuple[list[tuple[int, dict]], list[tuple[int, str]]]:
    """[(line, record)] of the lines whose fields are all present and well-typed, and the
    problems [(line, message)] of the others; duplicate ids are problems too."""
    values, errors = read_jsonl(path)
    records, first = [], {}
    for n, rec in values:
        if not isinstance(rec, dict):
            errors.append((n, f"expected a JSON object, got {type(rec).__name__}"))
            continue
        problems = [
            f"missing field {k!r}; every line needs {', '.join(fields)}"
            for k in fields
            if k not in rec
        ]
        extra = sorted(set(rec) - set(fields))
        if extra:
            problems.append(
                f"unknown field(s) {', '.join(map(repr, extra))}; allowed: {', '.join(fields)}"
            )
        for k, (ok, what) in fields.items():
            if k in rec and not ok(rec[k]):
                problems.append(f"field {k!r} is {rec[k]!r}; it must be {what}")
        if not problems and rec["id"] in first:
            problems.append(
                f"duplicate id {rec['id']!r} (first on line {first[rec['id']]}); "
                "make it unique or delete one"
            )
        if problems:
            errors.extend((n, p) for p in problems)
        else:
            first[rec["id"]] = n
            records.append((n, rec))
    return records, errors


def _label_problems(label: dict, category: str) -> list[str]:
    problems = []
    expected = LABELS[label["label"]]
    if label["pushback"] != expected:
        problems.append(
            f"pushback is {str(label['pushback']).lower()} but label "
            f"{label['label']!r} means {str(expected).lower()}; fix one of them"
        )
    if category == "curiosity" and label["engages"] is None:
        problems.append("engages is null on a curiosity answer; write true or false")
    if category != "curiosity" and label["engages"] is not None:
        problems.append(
            f"engages is set on a {category} answer; it is only for curiosity answers, write null"
        )
    if "\n" in label["reason"]:
        problems.append("reason spans several lines; keep it to one")
    return problems


def join_labels(answers: Path, labels: Path, every: bool = True) -> tuple[list[dict], int]:
    """(each labelled answer row with its label's `label`, how many answers have no label): the
    plain join by id of a sampled answers file and its reading labels (`id`, `label`, any other
    fields), for the read sets and data/grader's sampled files that train graders and reward
    models (load_gold is the gold set's stricter reader). A label naming no answer or an unknown
    label is a DataError; so is an unlabelled answer when `every` (a read set labels every
    answer; data/grader's sampled files label a part)."""
    for path in (answers, labels):
        if not Path(path).is_file():
            raise DataError(f"{path} not found: a read set is an answers file and its labels file")
    lab = {r["id"]: r["label"] for r in map(json.loads, Path(labels).open(encoding="utf-8"))}
    rows = list(map(json.loads, Path(answers).open(encoding="utf-8")))
    ids = {r["id"] for r in rows}
    problems = [f"label {i!r} names no answer" for i in sorted(set(lab) - ids)[:3]]
    if every:
        problems += [f"answer {i!r} has no label" for i in sorted(ids - set(lab))[:3]]
    problems += [f"{i!r}: unknown label {v!r}" for i, v in lab.items() if v not in LABELS][:3]
    if problems:
        raise DataError(f"{labels}: " + "; ".join(problems))
    out = [r | {"label": lab[r["id"]]} for r in rows if r["id"] in lab]
    return out, len(rows) - len(out)


def load_gold(answers_path=ANSWERS, labels_path=LABELS_FILE, answer_fields=None) -> list[dict]:
    """The labelled answers, in answers-file order: each answer's fields plus label, pushback,
    engages and reason. Both files are checked whole first; DataError (answers file first).
    `answer_fields` (default ANSWER_FIELDS) are the answers file's fields (evals/read_set.py's blind
    files carry fewer)."""
    answers, a_err = _parse(answers_path, answer_fields or ANSWER_FIELDS)
    labels, l_err = _parse(labels_path, LABEL_FIELDS)
    by_id = {rec["id"]: (n, rec) for n, rec in answers}
    labelled = {rec["id"] for _, rec in labels}
    for n, lab in labels:
        if lab["id"] not in by_id:
            l_err.append(
                (
                    n,
                    f"id {lab['id']!r} is not in {os.fspath(answers_path)}; "
                    "fix the id or delete the line",
                )
            )
        else:
            l_err.extend((n, p) for p in _label_problems(lab, by_id[lab["id"]][1]["category"]))
    for n, rec in answers:  # unless a bad label line may be the missing one
        if rec["id"] not in labelled and not l_err:
            a_err.append(
                (
                    n,
                    f"answer {rec['id']!r} has no label in {os.fspath(labels_path)}; "
                    "label it (every answer is labelled)",
                )
            )
    for path, errors in ((answers_path, a_err), (labels_path, l_err)):
        if errors:
            raise data_error(os.fspath(path), errors)
    label_of = {rec["id"]: rec for _, rec in labels}
    return [
        {**rec, **{k: label_of[rec["id"]][k] for k in LABEL_FIELDS if k != "id"}}
        for _, rec in answers
    ]


def load_fluent(answers_path=FLUENT_ANSWERS, labels_path=FLUENT_LABELS) -> list[dict]:
    """The fluent gold set (written answers in a larger model's register, labelled by reading),
    checked like the 135M set by load_gold with FLUENT_ANSWER_FIELDS."""
    return load_gold(answers_path, labels_path, FLUENT_ANSWER_FIELDS)


# name -> (loader, its two files): the gold sets a grader is measured on, printed side by side
GOLD_SETS = {
    "135m": (load_gold, (ANSWERS, LABELS_FILE)),
    "fluent": (load_fluent, (FLUENT_ANSWERS, FLUENT_LABELS)),
}


def rate(k: int, n: int) -> dict:
    """{"value", "k", "n", "ci95"}: value and interval are None when n is 0."""
    return {"value": k / n if n else None, "k": k, "n": n, "ci95": wilson(k, n) if n else None}


def _check_predictions(gold: list[dict], predicted: list[dict], partial: bool = False) -> dict:
    """{id: (label or None, pushback, engages or None)}; ValueError when a prediction is
    malformed, names an id the gold set lacks, or (unless `partial`) leaves a gold id out."""
    out = {}
    for i, p in enumerate(predicted):
        pid, label = p.get("id"), p.get("label")
        if pid in out:
            raise ValueError(f"prediction {i}: duplicate id {pid!r}; one prediction per answer")
        if label is not None and label not in LABELS:
            raise ValueError(
                f"prediction {i} ({pid}): label {label!r} is not one of {', '.join(LABELS)}"
            )
        push = p.get("pushback", LABELS[label] if label is not None else None)
        if not isinstance(push, bool):
            raise ValueError(
                f"prediction {i} ({pid}): pushback must be true or false "
                "(or give a label it follows from)"
            )
        engages = p.get("engages")
        if engages is not None and not isinstance(engages, bool):
            raise ValueError(f"prediction {i} ({pid}): engages must be true, false or null")
        out[pid] = (label, push, engages)
    want = {g["id"] for g in gold}
    if partial and set(out) <= want:
        return out
    if set(out) != want:
        missing, extra = sorted(want - set(out)), sorted(set(out) - want)
        raise ValueError(
            f"predictions must cover the gold ids exactly: {len(missing)} missing "
            f"{missing[:5]}, {len(extra)} unknown {extra[:5]}"
        )
    return out


def files_sha256(answers=ANSWERS, labels=LABELS_FILE) -> str:
    """One hash of the gold files' bytes: figures stored with it are of this gold set."""
    return file_sha256(answers, labels)


def grader_figures(gold: list[dict], predicted: list[dict], partial: bool = False) -> dict:
    """A grader's (or a second labeller's) figures on the gold set. `predicted`: one {"id",
    "label", "pushback"} per gold answer (label may be None for a pushback-only grader; pushback
    defaults to the label's; an optional "engages" on curiosity answers is scored too). With
    `partial`, the predictions may cover a subset of the gold ids and every figure is on that
    subset (its n says how many). Cohen's kappa beside the accuracies: agreement beyond chance."""
    pred = _check_predictions(gold, predicted, partial)
    gold = [g for g in gold if g["id"] in pred]

    def count(rows, hit):
        return rate(sum(1 for g in rows if hit(g, *pred[g["id"]])), len(rows))

    labelled = [g for g in gold if pred[g["id"]][0] is not None]
    confusion = {gl: dict.fromkeys(LABELS, 0) for gl in LABELS}
    for g in labelled:
        confusion[g["label"]][pred[g["id"]][0]] += 1
    fp_corr = [
        g for g in gold if g["category"] == "false_premise" and g["label"] == "corrects_premise"
    ]
    ns_flag = [g for g in gold if g["category"] == "nonsense" and g["label"] == "flags_nonsense"]
    ctl_ok = [g for g in gold if g["category"] == "control" and not g["pushback"]]
    curious = [g for g in gold if g["category"] == "curiosity" and pred[g["id"]][2] is not None]
    return {
        "label_accuracy": count(labelled, lambda g, lab, *_: lab == g["label"]),
        "label_kappa": cohen_kappa(
            [g["label"] for g in labelled], [pred[g["id"]][0] for g in labelled]
        ),
        "pushback_accuracy": count(gold, lambda g, _, push, *__: push == g["pushback"]),
        "pushback_kappa": cohen_kappa(
            [g["pushback"] for g in gold], [pred[g["id"]][1] for g in gold]
        ),
        "false_premise_correction_recall": count(fp_corr, lambda g, _, push, *__: push),
        "nonsense_flag_recall": count(ns_flag, lambda g, _, push, *__: push),
        "control_false_positive_rate": count(ctl_ok, lambda g, _, push, *__: push),
        "engages_accuracy": count(curious, lambda g, *p: p[2] == g["engages"]),
        "confusion": confusion,  # gold label -> predicted label -> count
    }


def counts(gold: list[dict]) -> dict:
    """Numbers for the data card: answers per category x label, per model x category, per
    condition x category x pushback, and curiosity answers that engage."""
    return {
        "answers": len(gold),
        "category_label": Counter(f"{g['category']}/{g['label']}" for g in gold),
        "model_category": Counter(f"{g['model']}/{g['category']}" for g in gold),
        "condition_category_pushback": Counter(
            f"{g.get('condition', 'written')}/{g['category']}/"
            f"{'pushback' if g['pushback'] else 'none'}"
            for g in gold
        ),
        "curiosity_engages": Counter(
            str(g["engages"]) for g in gold if g["category"] == "curiosity"
        ),
    }


def _table(gold: list[dict]) -> str:
    cats = [c for c in CATEGORIES if any(g["category"] == c for g in gold)]
    rows = [["label", *cats, "all"]]
    for lab in LABELS:
        n = [sum(1 for g in gold if g["label"] == lab and g["category"] == c) for c in cats]
        rows.append([lab, *map(str, n), str(sum(n))])
    rows.append(
        ["all", *[str(sum(g["category"] == c for g in gold)) for c in cats], str(len(gold))]
    )
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


@cli
def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description="Check the gold set; score a grader's predictions."
    )
    p.add_argument("--set", choices=tuple(GOLD_SETS), default="135m",
                   help="which gold set (default: the 135M models' answers)")  # fmt: skip
    p.add_argument("--answers", help="answers file (default: the --set's)")
    p.add_argument("--labels", help="labels file (default: the --set's)")
    p.add_argument("--predictions", help='JSONL of {"id", "label", "pushback"} per gold answer')
    p.add_argument(
        "--partial",
        action="store_true",
        help="the predictions cover only some gold ids (a second labeller's sample): "
        "figures on those ids",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    a = p.parse_args(argv)
    loader, (answers, labels) = GOLD_SETS[a.set]
    with as_user_error(ValueError, OSError):  # the files and their lines
        gold = loader(a.answers or answers, a.labels or labels)
        if a.predictions:
            preds = []
            with open(a.predictions, encoding="utf-8") as f:
                for n, line in enumerate(f, start=1):
                    try:
                        preds += [json.loads(line)] if line.strip() else []
                    except json.JSONDecodeError as e:
                        why = f"not valid JSON ({e.msg} at column {e.colno}); fix the line"
                        raise data_error(a.predictions, [(n, why)]) from None
            out = grader_figures(gold, preds, partial=a.partial)
        else:
            out = counts(gold)
    if a.json or a.predictions:
        print(strict_json.dumps(out, indent=1))
    else:
        print(_table(gold))
        for k in ("model_category", "condition_category_pushback", "curiosity_engages"):
            print(f"\n{k}:")
            for key, n in sorted(out[k].items()):
                print(f"  {key}: {n}")


if __name__ == "__main__":
    sys.exit(main())
