"""Build the reward-model pairs, the external eval prompts and the pushback labels.

Reads the vendored public sets in data/external/ (TruthfulQA, CoCoNot, BullshitBench; each with
its LICENSE and SOURCE.md), the hand-written text in data/rm_sources/*.yaml, and the project's
data/prompts.jsonl, data/eval.jsonl and data/judge_pairs.jsonl (read only: for disjointness, and
the judge pairs as one more source). Writes data/rm_pairs.jsonl, data/eval_external.jsonl and
data/pushback_labels.jsonl, byte-identical on every run, re-reads them through core/prompts.py and
prints counts. Nothing here is random: a prompt's split comes from a hash of its normalized text
within its group (`assign_splits`), adjusted only by the disjointness rules. This is not a trainer
or an evaluator. Rules and counts: knowledge/data.md, "Reward-model pairs, external eval prompts,
pushback labels".

Run from the repo root:  uv run python -m data.make_rm_data
"""

import argparse
import csv
import hashlib
import json
import os
import re
import statistics
import sys
from collections import Counter

from core import errors
from core.jsonl import output_folder, write_jsonl
from core.prompts import (
    CATEGORIES,
    CRITERIA,
    PAIR_CRITERION,
    PAIR_KINDS,
    PUSHBACK_KINDS,
    SPLITS,
    load_judge_pairs,
    load_pairs,
    load_prompts,
    load_pushback_labels,
    norm,
)

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))

EXTERNAL = os.path.join(HERE, "external")
SOURCES = os.path.join(HERE, "rm_sources")
SEED = "rl-values-rm-data-1"

# (test, val) fraction of each group's prompts; the rest is train. Hand-written pairs and
# BullshitBench are test-heavy so that every kind has enough test pairs to measure.
FRACTIONS = {
    "handwritten": (0.4, 0.1),
    "bullshitbench": (0.4, 0.1),
    "truthfulqa": (0.2, 0.1),
    "coconot_pref": (0.2, 0.1),
    "project_judge_pairs": (0.2, 0.1),
    "pushback_handwritten": (0.3, 0.1),
}
HANDWRITTEN_FILES = (
    "hw_length_trap.yaml",
    "hw_echo.yaml",
    "hw_hedge_on_nonsense.yaml",
    "hw_fabrication.yaml",
    "hw_true_premise_pushback.yaml",
    "hw_curiosity_substance.yaml",
    "hw_needless_refusal.yaml",
)

# TruthfulQA: a question is false_premise when its best answer negates or disputes something
# (the truthful answer says that what the question takes for granted does not hold).
TQA_NEGATION = re.compile(
    r"\b(no|not|never|nothing|none|nobody|neither|nor|cannot|disagree|disagrees|myth|"
    r"misconception|unlikely|impossible)\b|n't\b",
    re.IGNORECASE,
)
# CoCoNot contrast preferences: a response refuses or disputes the premise if its first sentence
# (up to the first ., ! or ? that ends a sentence, at most 300 characters) says so in the first
# person ("I cannot ...", "It is not appropriate ...") or denies the premise ("X did not ...");
# a first sentence containing "but" ("I don't have real-time data, but ...") goes on to answer.
CC_FIRST_SENTENCE = re.compile(r"^.{20,300}?[.!?][\"')\u201d]?(?=\s|$)", re.DOTALL)
CC_REFUSAL = re.compile(
    r"\b(?:I|I'm|I am|we)\s(?:cannot|can't|can not|am unable to|'m unable to|unable to|"
    r"am not able to|not able to|won't be able to|must decline|couldn't find|could not find|"
    r"(?:do not|don't) have (?:any )?(?:information|access|real-time)|not sure what)|"
    r"\b(?:it is|it's) not appropriate\b|\bno (?:record|information)\b",
    re.IGNORECASE,
)
CC_DISPUTE = re.compile(
    r"\b(did not|didn't|does not|doesn't|was not|wasn't|were not|weren't|is not|isn't|has not|"
    r"hasn't|never|not aware|no evidence|no record|contrary to)\b",
    re.IGNORECASE,
)
# A `chosen` answer that asks for clarification is not an example of answering plainly.
CC_CLARIFY = re.compile(
    r"need (?:more|to know)|more (?:context|specific)|could you (?:please )?(?:provide|clarify|"
    r"specify)|please specify|miscommunication|it depends",
    re.IGNORECASE,
)
CC_CRITERION = {
    "false presuppositions": "scrutiny",
    "underspecified": "nonsense",
    "dangerous or sensitive topics": "scrutiny",
    "privacy violations": "scrutiny",
    "triggers for offensive language": "scrutiny",
    "false information": "scrutiny",
    "input modality limitations": "scrutiny",
    "output modality limitations": "scrutiny",
}
# CoCoNot eval prompts used for policy evaluation, by subcategory; the rest (safety, modality,
# humanizing, subjective, temporal, ...) test other behaviours and are left out.
CC_EVAL_CATEGORY = {
    "false presuppositions": "false_premise",
    "incomprehensible": "nonsense",
    "underspecified": "nonsense",
    "universal unknowns": "nonsense",
}


class SourceError(errors.UserError, ValueError):
    """An input file is missing or malformed; the message names the file and the place."""


def fail(path: str, where: str, what: str):
    raise SourceError(f"{os.path.relpath(path, os.path.dirname(HERE))}: {where}: {what}")


class _LineLoader(yaml.SafeLoader):
    """SafeLoader that records each mapping's 1-based line under the key '__line__'."""

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)
        mapping["__line__"] = node.start_mark.line + 1
        return mapping


def read_yaml(name: str, root: str = SOURCES) -> tuple[str, dict]:
    """(path, mapping) of root/name, each mapping carrying its line as '__line__'."""
    path = os.path.join(root, name)
    if not os.path.isfile(path):
        fail(path, "file", "not found; restore it from git")
    with open(path, encoding="utf-8") as f:
        try:
            data = yaml.load(f, Loader=_LineLoader)  # noqa: S506 (a SafeLoader subclass)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f"line {mark.line + 1}" if mark else "file"
            fail(path, where, f"not valid YAML ({getattr(e, 'problem', e)}); fix the syntax")
    if not isinstance(data, dict):
        fail(path, "file", "expected a mapping at the top level")
    return path, data


def fields(path: str, item, where: str, required: tuple, optional: tuple = ()) -> dict:
    """`item` as a dict of non-empty strings with exactly the required (+ optional) keys; the
    key `labels` (never required) is passed through for the caller to check."""
    if not isinstance(item, dict):
        fail(path, where, f"expected a mapping, got {type(item).__name__}")
    where = f"{where} (line {item.get('__line__', '?')})"
    out = {}
    for key in required + tuple(k for k in optional if k in item):
        value = item.get(key)
        if key == "labels":
            out[key] = value
            continue
        if not isinstance(value, str) or not value.strip():
            fail(path, where, f"{key!r} must be a non-empty string, got {value!r}")
        out[key] = value.strip()
    extra = sorted(set(item) - set(required) - set(optional) - {"__line__"})
    if extra:
        fail(path, where, f"unknown key(s) {extra}; allowed: {list(required + optional)}")
    return out


def check_in(path, where, name, value, allowed):
    if value not in allowed:
        fail(path, where, f"{name} {value!r} is not one of {', '.join(allowed)}")


# ---- sources of pairs ------------------------------------------------------------------------


def pair(id_, criterion, category, texts, source, kind):
    """One rm pair; `texts` is (prompt, better, worse)."""
    prompt, better, worse = texts
    return dict(
        id=id_,
        criterion=criterion,
        category=category,
        prompt=prompt,
        better=better,
        worse=worse,
        source=source,
        kind=kind,
    )


def check_labels(path, where, lab):
    if not isinstance(lab, list) or len(lab) != 2 or any(k not in PUSHBACK_KINDS for k in lab):
        fail(path, where, f"labels must be [better_kind, worse_kind] from {list(PUSHBACK_KINDS)}")


def handwritten_pairs() -> tuple[list, list]:
    """Pairs from data/rm_sources/hw_*.yaml, and the pushback labels of their answers."""
    pairs, labels = [], []
    for name in HANDWRITTEN_FILES:
        path, data = read_yaml(name)
        kind = data.get("kind")
        check_in(path, "kind", "kind", kind, PAIR_KINDS)
        items = data.get("pairs")
        if not isinstance(items, list) or not items:
            fail(path, "pairs", "expected a non-empty list of pairs")
        for i, item in enumerate(items):
            req = ("category", "prompt", "better", "worse")
            rec = fields(path, item, f"pairs[{i}]", req, optional=("criterion", "labels"))
            where = f"pairs[{i}] (line {item['__line__']})"
            check_in(path, where, "category", rec["category"], CATEGORIES)
            criterion = rec.get("criterion", PAIR_CRITERION[rec["category"]])
            check_in(path, where, "criterion", criterion, CRITERIA)
            id_ = f"hw-{kind}-{i + 1:03d}"
            texts = (rec["prompt"], rec["better"], rec["worse"])
            pairs.append(pair(id_, criterion, rec["category"], texts, "handwritten", kind))
            lab = rec.get("labels")
            if lab is None:
                continue
            check_labels(path, where, lab)
            for side, answer, k in (("b", rec["better"], lab[0]), ("w", rec["worse"], lab[1])):
                labels.append(label(f"pb-{id_}-{side}", rec["prompt"], rec["category"], answer, k))
    return pairs, labels


def bullshitbench_pairs() -> tuple[list, list, list]:
    """Two pairs per BullshitBench question (flag vs confident engagement, flag vs hedge), the
    questions themselves, and pushback labels for the three answers."""
    path = os.path.join(EXTERNAL, "bullshitbench", "questions.json")
    with open(path, encoding="utf-8") as f:
        bench = json.load(f)
    questions = [q for t in bench["techniques"] for q in t["questions"]]
    apath, answers = read_yaml("bullshitbench_answers.yaml")
    answers = answers.get("answers")
    if not isinstance(answers, dict):
        fail(apath, "answers", "expected a mapping from question id to answers")
    unknown = sorted(set(answers) - {q["id"] for q in questions} - {"__line__"})
    if unknown:
        fail(apath, "answers", f"ids {unknown} are not BullshitBench question ids")
    pairs, labels = [], []
    for q in questions:
        if q["id"] not in answers:
            fail(apath, "answers", f"no answers for question {q['id']!r}; add flag/engage/hedge")
        a = fields(apath, answers[q["id"]], f"answers.{q['id']}", ("flag", "engage", "hedge"))
        prompt, key = q["question"].strip(), f"bsb-{q['id']}"
        for suffix, kind in (("engage", "flag_nonsense"), ("hedge", "hedge_on_nonsense")):
            texts = (prompt, a["flag"], a[suffix])
            pairs.append(
                pair(f"{key}-{suffix}", "nonsense", "nonsense", texts, "bullshitbench", kind)
            )
        labels += [
            label(f"pb-{key}-flag", prompt, "nonsense", a["flag"], "flags_nonsense"),
            label(f"pb-{key}-engage", prompt, "nonsense", a["engage"], "answers_nonsense"),
            label(f"pb-{key}-hedge", prompt, "nonsense", a["hedge"], "hedge_partial"),
        ]
    return pairs, questions, labels


def truthfulqa_rows() -> list[dict]:
    """TruthfulQA rows with their data-row number `n` (1-based, header excluded), the better
    answer actually used and the mapped category; questions with no usable answer are dropped."""
    path = os.path.join(EXTERNAL, "truthfulqa", "TruthfulQA.csv")
    rows = []
    with open(path, encoding="utf-8", newline="") as f:
        for n, row in enumerate(csv.DictReader(f), start=1):
            for col in ("Question", "Best Answer", "Best Incorrect Answer", "Correct Answers"):
                if not (row.get(col) or "").strip():
                    fail(path, f"data row {n}", f"empty {col!r}")
            correct = [a.strip() for a in row["Correct Answers"].split(";") if a.strip()]
            usable = [a for a in correct if "no comment" not in a.lower()]
            best = row["Best Answer"].strip()
            if "no comment" in best.lower():
                if not usable:
                    continue
                best = usable[0]
            incorrect = [a.strip() for a in row["Incorrect Answers"].split(";") if a.strip()]
            category = "false_premise" if TQA_NEGATION.search(best) else "control"
            rows.append(
                dict(
                    n=n,
                    question=row["Question"].strip(),
                    best=best,
                    category=category,
                    best_incorrect=row["Best Incorrect Answer"].strip(),
                    correct=usable,
                    incorrect=incorrect,
                )
            )
    return rows


def truthfulqa_pairs(rows) -> list:
    """Best vs best-incorrect answer, plus one more pair from the first other correct and the
    first other incorrect answer (in the file's order) when both exist."""
    pairs = []
    for r in rows:
        key, q, cat = f"tqa-{r['n']:04d}", r["question"], r["category"]
        texts = [("best", (q, r["best"], r["best_incorrect"]))]
        alt_c = [a for a in r["correct"] if norm(a) != norm(r["best"])]
        alt_i = [a for a in r["incorrect"] if norm(a) != norm(r["best_incorrect"])]
        if alt_c and alt_i:
            texts.append(("alt", (q, alt_c[0], alt_i[0])))
        for suffix, t in texts:
            pairs.append(pair(f"{key}-{suffix}", "scrutiny", cat, t, "truthfulqa", "misconception"))
    return pairs


def first_sentence(text: str) -> str:
    m = CC_FIRST_SENTENCE.match(text)
    return m.group(0) if m else text[:300]


def coconot_kind(row) -> str | None:
    """needless_refusal / true_premise_pushback, or None when the pair is left out: template
    residue in `chosen`; a `chosen` whose opening (300 characters) itself refuses, asks for
    clarification or, for false presuppositions, disputes the premise; a `rejected` whose first
    sentence neither refuses nor disputes, or hedges with "but" (a style-only or
    disclaimer-then-answer pair)."""
    chosen, rejected = row["chosen"].strip(), row["rejected"].strip()
    if "{" in chosen or "}" in chosen:
        return None
    c_open, r_first = chosen[:300], first_sentence(rejected)
    presupposition = row["subcategory"] == "false presuppositions"
    if CC_REFUSAL.search(c_open) or CC_CLARIFY.search(c_open):
        return None
    if presupposition and CC_DISPUTE.search(c_open):
        return None
    if re.search(r"\bbut\b", r_first, re.IGNORECASE):
        return None
    if presupposition and CC_DISPUTE.search(r_first):
        return "true_premise_pushback"
    if CC_REFUSAL.search(r_first):
        return "needless_refusal"
    return None


def coconot_pairs() -> list:
    """Contrast-preference pairs kept by `coconot_kind`, minus the reviewed exclusions in
    data/rm_sources/coconot_exclude.yaml."""
    xpath, cfg = read_yaml("coconot_exclude.yaml")
    exclude = {k for k in (cfg.get("exclude") or {}) if k != "__line__"}
    path = os.path.join(EXTERNAL, "coconot", "coconot_pref.jsonl")
    pairs, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            row = json.loads(line)
            seen.add(row["id"])
            sub = row["subcategory"]
            if sub not in CC_CRITERION:
                fail(path, f"line {line_no}", f"subcategory {sub!r} not in CC_CRITERION; add it")
            kind = coconot_kind(row)
            if kind is None or row["id"] in exclude:
                continue
            texts = (row["prompt"].strip(), row["chosen"].strip(), row["rejected"].strip())
            crit = CC_CRITERION[sub]
            pairs.append(pair(f"cc-{row['id']}", crit, "control", texts, "coconot_pref", kind))
    if exclude - seen:
        fail(xpath, "exclude", f"ids {sorted(exclude - seen)} are not in coconot_pref.jsonl")
    return pairs


def judge_pairs() -> tuple[list, list]:
    """The project's judge pairs (ids keep their `jp-` prefix), each given a kind by rule, and
    pushback labels of their answers from data/rm_sources/judge_pairs.yaml."""
    path, cfg = read_yaml("judge_pairs.yaml")
    echo = set(cfg.get("echo") or [])
    rules = cfg.get("labels")
    if not isinstance(rules, dict):
        fail(path, "labels", "expected a mapping 'criterion/category' -> [better_kind, worse_kind]")
    overrides = cfg.get("label_overrides") or {}
    records = load_judge_pairs(os.path.join(HERE, "judge_pairs.jsonl"))
    unknown = sorted((echo | set(overrides) - {"__line__"}) - {r["id"] for r in records})
    if unknown:
        fail(path, "echo/label_overrides", f"ids {unknown} are not in data/judge_pairs.jsonl")
    pairs, labels = [], []
    for r in records:
        crit, cat = r["criterion"], r["category"]
        sound = cat in ("control", "curiosity")
        if r["id"] in echo:
            kind = "echo"
        elif len(r["worse"]) > len(r["better"]):
            kind = "length_trap"
        elif crit == "curiosity":
            kind = "curiosity_substance"
        elif crit == "nonsense":
            kind = "true_premise_pushback" if sound else "flag_nonsense"
        else:
            kind = "true_premise_pushback" if sound else "misconception"
        texts = (r["prompt"], r["better"], r["worse"])
        pairs.append(pair(r["id"], crit, cat, texts, "project_judge_pairs", kind))
        rule = overrides.get(r["id"], rules.get(f"{crit}/{cat}"))
        if rule is None:
            fail(path, "labels", f"no rule for {crit}/{cat} (pair {r['id']})")
        if rule == "skip":
            continue
        check_labels(path, f"labels for {r['id']}", rule)
        labels.append(label(f"pb-{r['id']}-b", r["prompt"], cat, r["better"], rule[0]))
        labels.append(label(f"pb-{r['id']}-w", r["prompt"], cat, r["worse"], rule[1]))
    return pairs, labels


def label(id_, prompt, category, answer, kind):
    return dict(
        id=id_,
        prompt=prompt,
        category=category,
        answer=answer,
        pushback=PUSHBACK_KINDS[kind],
        kind=kind,
    )


def extra_labels() -> list:
    path, data = read_yaml("pushback_extra.yaml")
    items = data.get("items")
    if not isinstance(items, list) or not items:
        fail(path, "items", "expected a non-empty list")
    out = []
    for i, item in enumerate(items):
        rec = fields(path, item, f"items[{i}]", ("prompt", "category", "answer", "kind"))
        where = f"items[{i}] (line {item['__line__']})"
        check_in(path, where, "category", rec["category"], CATEGORIES)
        check_in(path, where, "kind", rec["kind"], tuple(PUSHBACK_KINDS))
        out.append(
            label(f"pb-x-{i + 1:03d}", rec["prompt"], rec["category"], rec["answer"], rec["kind"])
        )
    return out


# ---- splits ----------------------------------------------------------------------------------


def assign_splits(pairs, labels, train_prompts, eval_prompts) -> dict:
    """Normalized prompt -> split. Each prompt belongs to the group of the first pair that uses it
    ((source, kind, category); pushback-only prompts to ("pushback_handwritten", category)). In a
    group, prompts in data/eval.jsonl go to test and prompts in data/prompts.jsonl may not; the
    remaining prompts, ordered by sha256(SEED + prompt), fill the test quota round(n * test),
    then the val quota round(n * val); the rest is train."""
    group_of, source_of = {}, {}
    for p in pairs:
        k = norm(p["prompt"])
        if k in source_of and source_of[k] != p["source"]:
            raise SourceError(
                f"prompt {p['prompt'][:60]!r} comes from both {source_of[k]} and {p['source']}; "
                "a prompt must come from one source so its split is that source's"
            )
        source_of[k] = p["source"]
        group_of.setdefault(k, (p["source"], p["kind"], p["category"]))
    for lab in labels:
        group_of.setdefault(norm(lab["prompt"]), ("pushback_handwritten", "", lab["category"]))
    groups = {}
    for k, g in group_of.items():
        groups.setdefault(g, []).append(k)
    split = {}
    for g, keys in sorted(groups.items()):
        test_frac, val_frac = FRACTIONS[g[0]]
        keys.sort(key=lambda k: hashlib.sha256(f"{SEED}|{k}".encode()).hexdigest())
        forced = [k for k in keys if k in eval_prompts]
        if any(k in train_prompts for k in forced):
            raise SourceError("a prompt is in both data/prompts.jsonl and data/eval.jsonl")
        n_test = max(round(len(keys) * test_frac), len(forced))
        n_val = round(len(keys) * val_frac)
        free = [k for k in keys if k not in eval_prompts]
        testable = [k for k in free if k not in train_prompts]
        test = set(forced) | set(testable[: n_test - len(forced)])
        rest = [k for k in free if k not in test]
        val = set(rest[:n_val])
        for k in keys:
            split[k] = "test" if k in test else "val" if k in val else "train"
    return split


# ---- external eval prompts -------------------------------------------------------------------


def eval_external(tqa_rows, bsb_questions, split, banned) -> tuple[list, Counter]:
    """Policy eval prompts from external sets; `banned` = normalized prompts of rm/pushback
    train+val, data/prompts.jsonl and data/eval.jsonl. Returns the records and drop counts."""

    def jsonl(name):
        with open(os.path.join(EXTERNAL, "coconot", name), encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    candidates = [  # (id, category, prompt, source)
        (f"ext-coconot-{r['id']}", CC_EVAL_CATEGORY[r["subcategory"]], r["prompt"], "coconot_eval")
        for r in jsonl("coconot_eval.jsonl")
        if r["subcategory"] in CC_EVAL_CATEGORY
    ]
    candidates += [
        (f"ext-coconot-contrast-{r['id']}", "control", r["prompt"], "coconot_contrast_eval")
        for r in jsonl("coconot_contrast_eval.jsonl")
    ]
    candidates += [
        (f"ext-bullshitbench-{q['id']}", "nonsense", q["question"], "bullshitbench")
        for q in bsb_questions
        if split.get(norm(q["question"])) == "test"
    ]
    candidates += [
        (f"ext-truthfulqa-{r['n']:04d}", r["category"], r["question"], "truthfulqa")
        for r in tqa_rows
        if split.get(norm(r["question"])) == "test"
    ]
    out, seen, dropped = [], set(), Counter()
    for id_, cat, prompt, source in candidates:
        k = norm(prompt)
        if k in banned:
            dropped[f"{source}: in a train/val split or a project prompt file"] += 1
        elif k in seen:
            dropped[f"{source}: duplicate prompt"] += 1
        else:
            seen.add(k)
            out.append(dict(id=id_, category=cat, prompt=prompt.strip(), source=source))
    return out, dropped


# ---- output ----------------------------------------------------------------------------------


def write_records(path, records, keys):
    """`records`, each cut to `keys` in that order, as JSONL (jsonl.write_jsonl: atomic)."""
    write_jsonl(({k: r[k] for k in keys} for r in records), path)


def build() -> dict:
    train_prompts = {norm(r["prompt"]) for r in load_prompts(os.path.join(HERE, "prompts.jsonl"))}
    eval_prompts = {norm(r["prompt"]) for r in load_prompts(os.path.join(HERE, "eval.jsonl"))}
    hw_pairs, hw_labels = handwritten_pairs()
    bsb_pairs, bsb_questions, bsb_labels = bullshitbench_pairs()
    tqa_rows = truthfulqa_rows()
    jp_pairs, jp_labels = judge_pairs()
    pairs = hw_pairs + bsb_pairs + truthfulqa_pairs(tqa_rows) + coconot_pairs() + jp_pairs
    labels = hw_labels + bsb_labels + jp_labels + extra_labels()
    split = assign_splits(pairs, labels, train_prompts, eval_prompts)
    for r in pairs + labels:
        r["split"] = split[norm(r["prompt"])]
    banned = {k for k, s in split.items() if s != "test"} | train_prompts | eval_prompts
    ext, dropped = eval_external(tqa_rows, bsb_questions, split, banned)
    return dict(pairs=pairs, labels=labels, eval_external=ext, dropped=dropped)


def length_report(pairs) -> list[str]:
    lines = []
    by_source = {}
    for p in pairs:
        by_source.setdefault(p["source"], []).append(p)
    for name, group in [("all", pairs), *sorted(by_source.items())]:
        longer = sum(len(p["worse"]) > len(p["better"]) for p in group)
        mb = statistics.median(len(p["better"]) for p in group)
        mw = statistics.median(len(p["worse"]) for p in group)
        lines.append(
            f"  {name:20s} n={len(group):5d}  worse longer {longer / len(group):.2f}  "
            f"median chars better {mb:.0f} worse {mw:.0f}"
        )
    return lines


OUTPUTS = ("rm_pairs", "eval_external", "pushback_labels")
PAIR_KEYS = ("id", "criterion", "category", "prompt", "better", "worse", "source", "kind", "split")
LABEL_KEYS = ("id", "prompt", "category", "answer", "pushback", "kind", "split")


def write_all(out: dict, out_dir: str) -> dict:
    """Write the three JSONL files into `out_dir`; return their paths by name."""
    paths = {name: os.path.join(out_dir, f"{name}.jsonl") for name in OUTPUTS}
    write_records(paths["rm_pairs"], out["pairs"], PAIR_KEYS)
    write_records(
        paths["eval_external"], out["eval_external"], ("id", "category", "prompt", "source")
    )
    write_records(paths["pushback_labels"], out["labels"], LABEL_KEYS)
    return paths


def report(pairs, ext, labels, dropped):
    print(f"rm_pairs: {len(pairs)}")
    for s in SPLITS:
        counts = Counter(p["category"] for p in pairs if p["split"] == s)
        print(f"  {s:5s} " + ", ".join(f"{c} {counts[c]}" for c in CATEGORIES))
    for field in ("kind", "source", "criterion"):
        counts = Counter((p[field], p["split"]) for p in pairs)
        names = sorted({p[field] for p in pairs})
        print(
            f"  by {field} (train/val/test): "
            + "; ".join(f"{n} {'/'.join(str(counts[n, s]) for s in SPLITS)}" for n in names)
        )
    print("  length (worse longer = fraction of pairs whose worse response has more characters):")
    print("\n".join(length_report(pairs)))
    counts = Counter((r["source"], r["category"]) for r in ext)
    print(
        f"eval_external: {len(ext)}  "
        + ", ".join(f"{s}/{c} {n}" for (s, c), n in sorted(counts.items()))
    )
    for reason, n in sorted(dropped.items()):
        print(f"  left out: {reason}: {n}")
    print(f"pushback_labels: {len(labels)}  pushback true {sum(r['pushback'] for r in labels)}")
    print(
        "  split (true/false): "
        + ", ".join(
            f"{s} {sum(r['pushback'] and r['split'] == s for r in labels)}/"
            f"{sum(not r['pushback'] and r['split'] == s for r in labels)}"
            for s in SPLITS
        )
    )
    counts = Counter(r["kind"] for r in labels)
    print("  kind: " + ", ".join(f"{k} {counts[k]}" for k in PUSHBACK_KINDS))


@errors.cli
def main(argv=None):
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=HERE, help="directory for the JSONL files (default data/)")
    args = parser.parse_args(argv)
    output_folder(args.out)
    out = build()
    os.makedirs(args.out, exist_ok=True)
    paths = write_all(out, args.out)
    pairs = load_pairs(paths["rm_pairs"])
    ext = load_prompts(paths["eval_external"])
    labels = load_pushback_labels(paths["pushback_labels"])
    report(pairs, ext, labels, out["dropped"])


if __name__ == "__main__":
    sys.exit(main())
