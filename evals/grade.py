"""The grader: what an answer does to its prompt, for evaluation (never a training reward).

For each (prompt, answer) it gives one label of the gold scheme (data/gold/LABEL_SCHEME.md:
corrects_premise, flags_nonsense, asks_clarification, refuses, hedges, answers, broken),
`pushback` (the label corrects the premise or flags nonsense), `p` (the probability of pushback:
the two labels' probabilities summed) and, on curiosity prompts, `engages` (a rule: the answer is
labelled `answers` and has at least ENGAGE_WORDS words; null elsewhere). The model: the frozen
embedded SmolLM2-135M reads the chat-formatted prompt and the answer's first MAX_ANSWER_TOKENS
tokens; the residual stream after blocks FEATURE_BLOCKS, averaged over the answer's tokens, plus
the last token's, and three text statistics, feed a multinomial logistic head trained by
train_grader.py (models/grader-smollm2-135m: head weights, feature standardization, validation
figures). It is measured on two gold sets (gold.GOLD_SETS: the 135M models' answers and fluent
written ones), never trained or tuned on; their stored figures are printed after every grading.

  uv run python -m evals.grade --answers FILE.jsonl --json    # lines: id, category, prompt, answer
  uv run python -m evals.grade --answers data/gold/answers.jsonl --labels data/gold/labels.jsonl
  (~9 minutes on 2 cores: two 135M passes over 514 answers; `--limit N` grades a round-robin subset)

Each input line needs `id`, `category` (false_premise, nonsense, curiosity, control), `prompt`,
`answer` (an optional `note` is read but not used). The whole file is checked before any
grading: a bad line is one `error:` line naming the file and line, exit 2. Answers to prompts
that carry a reference note (`--notes`, default data/eval_notes.jsonl: what is false or
nonsensical, and marker phrases that state it) get the reference check: a false-premise or
nonsense answer the model calls not-pushback that holds a marker becomes a correction or a
flag (`reference_check`; `--no-notes` turns it off).
"""

import argparse
import json
import math
import os
import sys
from pathlib import Path

from core import backend, chat_format, diversity, frozen_states, strict_json
from core.errors import as_user_error, cli
from core.jsonl import DataError, data_error, file_sha256, read_jsonl
from core.prompts import CATEGORIES, EVAL_NOTES, eval_subset, load_notes, reference_hits
from core.stats import figure

import mlx.core as mx
import numpy as np
from tqdm import tqdm

import load_weights
from evals import gold
from evals.gold import LABELS, grader_figures
from rewards import reward_model

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_GRADER = str(ROOT / "models" / "grader-smollm2-135m")
BASE_MODEL = "smollm2-135m"
FEATURE_BLOCKS = (8, 16)  # residual stream after these blocks (of 30)
MAX_PROMPT_TOKENS = 96
MAX_ANSWER_TOKENS = 96
ENGAGE_WORDS = 25
LABEL_NAMES = tuple(LABELS)
PUSHBACK = np.array([LABELS[k] for k in LABEL_NAMES])


class Featurizer:
    """Feature vectors of (prompt, answer) pairs from the frozen base model (its residual stream
    by frozen_states.block_states, the probes' features too)."""

    def __init__(self, model=None, tokenizer=None):
        if model is None:
            model, tokenizer = load_weights.load(BASE_MODEL)
        self.model, self.tok = model, tokenizer
        self.pad = (
            tokenizer.eos_token_id if tokenizer.pad_token_id is None else tokenizer.pad_token_id
        )

    def encode(self, prompt: str, answer: str) -> tuple[list[int], int]:
        p_ids = self.tok.encode(prompt.strip(), add_special_tokens=False)[-MAX_PROMPT_TOKENS:]
        head = chat_format.chat_tokens(self.tok, self.tok.decode(p_ids))
        body = self.tok.encode(answer.strip(), add_special_tokens=False)[:MAX_ANSWER_TOKENS]
        if not body:  # an empty answer: read the EOS as its one token
            body = [self.tok.eos_token_id]
        return head + body, len(body)

    def __call__(self, prompts, answers, batch: int = 16, progress: bool = False) -> np.ndarray:
        seqs = [self.encode(p, a) for p, a in zip(prompts, answers, strict=True)]
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i][0]))
        out = [None] * len(seqs)
        bar = tqdm(total=len(seqs), desc="grader features", disable=not progress, leave=False)
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            width = max(len(seqs[i][0]) for i in idx)
            pad = [width - len(seqs[i][0]) for i in idx]
            rows = [[self.pad] * p + seqs[i][0] for p, i in zip(pad, idx, strict=True)]
            tokens, pad_a = mx.array(rows, dtype=mx.int32), mx.array(pad, dtype=mx.int32)
            answer_len = np.array([seqs[i][1] for i in idx])
            mask = np.arange(width)[None, :] >= (width - answer_len)[:, None]  # answer slots
            m = mx.array(mask[..., None].astype(np.float32))
            states = frozen_states.block_states(self.model, tokens, FEATURE_BLOCKS, pad=pad_a)
            parts = [(h * m).sum(axis=1) / m.sum(axis=1) for h in states]
            parts.append(states[-1][:, -1, :])
            feats = np.array(mx.concatenate(parts, axis=1).astype(mx.float32))
            for row, i in enumerate(idx):
                out[i] = np.concatenate([feats[row], text_stats(answers[i])])
            bar.update(len(idx))
        bar.close()
        return np.stack(out)


def text_stats(answer: str) -> np.ndarray:
    """log words, trigram repetition, share of non-ASCII letters: cues for broken text."""
    words = diversity.words(answer)
    letters = [c for c in answer if c.isalpha()]
    non_ascii = sum(not c.isascii() for c in letters) / max(len(letters), 1)
    return np.array([math.log1p(len(words)), diversity.repetition_rate(answer), non_ascii])


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def within_side(probs: np.ndarray, p_push: np.ndarray) -> np.ndarray:
    """The head's label probabilities with the labels on the other side of the classifier's
    pushback decision (p > 0.5) set to -1, so that argmax picks a label on the decided side."""
    side = (np.asarray(p_push) > 0.5)[:, None] == PUSHBACK[None, :]
    return np.where(side, probs, -1.0)


class Grader:
    """A trained head on Featurizer features: `grade(records)` -> one dict per record. When the
    folder holds a pushback classifier (config `pushback_model`: a reward-model folder trained
    with `train_rm.py --labels`, LoRA through the blocks), the classifier decides pushback and
    gives `p`; the head then only picks the label within that side (corrects_premise or
    flags_nonsense; or the likeliest of the others)."""

    def __init__(self, path: str, weights: dict, config: dict, metrics: dict, featurizer=None,
                 classifier=None):  # fmt: skip
        self.path, self.config, self.metrics = path, config, metrics
        self.mean, self.std = weights["mean"], weights["std"]
        self.W, self.b = weights["W"], weights["b"]
        self.featurizer, self.classifier = featurizer, classifier

    @classmethod
    def load(cls, path: str = DEFAULT_GRADER, featurizer=None) -> "Grader":
        folder = Path(path)
        if not (folder / "grader.npz").is_file():
            raise FileNotFoundError(
                f"grader folder {path!r} has no grader.npz: build it with "
                "`uv run python train_grader.py` or pass the right folder"
            )
        w = dict(np.load(folder / "grader.npz"))
        config = json.loads((folder / "config.json").read_text())
        if tuple(config["labels"]) != LABEL_NAMES:
            raise ValueError(f"{path}: trained for labels {config['labels']}, not {LABEL_NAMES}")
        shape = (tuple(config.get("feature_blocks", ())), config.get("max_answer_tokens"))
        if shape != (FEATURE_BLOCKS, MAX_ANSWER_TOKENS):
            raise ValueError(
                f"{path}: trained on features of blocks {shape[0]} and {shape[1]} answer "
                f"tokens, but evals/grade.py computes blocks {FEATURE_BLOCKS} and "
                f"{MAX_ANSWER_TOKENS}: rebuild it with `uv run python train_grader.py`"
            )
        metrics = json.loads((folder / "metrics.json").read_text())
        classifier = None
        if config.get("pushback_model"):
            sub = folder / config["pushback_model"]
            if not (sub / "rm_config.json").is_file():
                raise FileNotFoundError(
                    f"{path}: its config names the pushback classifier {sub}, which has no "
                    "rm_config.json; rebuild the grader with train_grader.py --pushback-model"
                )
            classifier = reward_model.load(str(sub))
            if classifier.config.use_category:
                raise ValueError(f"{sub}: a grader's classifier must not read the category")
        return cls(str(folder), w, config, metrics, featurizer, classifier)

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        return softmax(((features - self.mean) / self.std) @ self.W + self.b)

    def pushback_probabilities(self, records: list[dict]) -> np.ndarray:
        """P(pushback) from the classifier, one per record (the category is not read)."""
        return self.classifier.pushback_probabilities(
            [r["prompt"] for r in records], [r["answer"] for r in records], share_prefix=False
        )

    def grade(self, records: list[dict], progress: bool = False, notes=None) -> list[dict]:
        """One verdict per record, in order. With `notes` (prompts.load_notes), a false-premise
        or nonsense answer to a noted prompt that the model calls not-pushback but that holds
        one of the note's markers becomes a correction or a flag (`reference_check`)."""
        if self.featurizer is None:
            self.featurizer = Featurizer()
        feats = self.featurizer(
            [r["prompt"] for r in records], [r["answer"] for r in records], progress=progress
        )
        probs = self.probabilities(feats)
        p_push = probs[:, PUSHBACK].sum(axis=1)
        if self.classifier is not None:
            p_push = self.pushback_probabilities(records)
            probs = within_side(probs, p_push)
        out = []
        for r, pr, pp in zip(records, probs, p_push, strict=True):
            label = LABEL_NAMES[int(pr.argmax())]
            engages = None
            if r["category"] == "curiosity":
                engages = label == "answers" and len(diversity.words(r["answer"])) >= ENGAGE_WORDS
            out.append({"id": r["id"], "label": label, "pushback": bool(LABELS[label]),
                        "p": float(pp), "engages": engages})  # fmt: skip
        return out if notes is None else reference_check(records, out, notes)


# The label a reference hit gives, per category (notes are written for these two only).
REFERENCE_LABEL = {"false_premise": "corrects_premise", "nonsense": "flags_nonsense"}


def reference_check(records: list[dict], graded: list[dict], notes: dict) -> list[dict]:
    """The reference-guided check (issue 20): where an answer's prompt carries a note
    (data/eval_notes.jsonl) and the answer holds one of its markers, a statement of what is
    false or nonsensical in the prompt ("built by the Incas, not the Aztecs", "It's not a
    sentence"), a not-pushback verdict on a false-premise or nonsense answer becomes
    `corrects_premise` or `flags_nonsense`. It only adds pushback, never removes it. Each
    verdict gets `reference`: the markers found (None where the prompt has no note)."""
    out = []
    for r, g in zip(records, graded, strict=True):
        note = notes.get(r["prompt"].strip()) if r["category"] in REFERENCE_LABEL else None
        hits = None if note is None else reference_hits(r["answer"], note["markers"])
        g = {**g, "reference": hits}
        if hits and not g["pushback"]:
            g.update(label=REFERENCE_LABEL[r["category"]], pushback=True)
        out.append(g)
    return out


def load_answers(path) -> list[dict]:
    """Records to grade: every line checked first (JSON object, id unique, category known,
    prompt and answer strings); DataError names the file, the line and the fix."""
    path = os.fspath(path)
    values, errors = read_jsonl(path)
    records, seen = [], {}
    for n, r in values:
        if not isinstance(r, dict):
            errors.append((n, "expected a JSON object with id, category, prompt, answer"))
            continue
        problems = [f"missing field {k!r}; every line needs id, category, prompt, answer"
                    for k in ("id", "category", "prompt", "answer") if k not in r]  # fmt: skip
        for k in ("id", "prompt", "answer", "note"):
            if k in r and not isinstance(r[k], str):
                problems.append(f"field {k!r} must be a string, got {type(r[k]).__name__}")
        if "category" in r and r["category"] not in CATEGORIES:
            problems.append(f"category {r['category']!r} is not one of {', '.join(CATEGORIES)}")
        if isinstance(r.get("id"), str):
            if r["id"] in seen:
                problems.append(f"duplicate id {r['id']!r} (first on line {seen[r['id']]})")
            seen.setdefault(r["id"], n)
        errors += [(n, msg) for msg in problems]
        if not problems:
            records.append(r)
    if errors:
        raise data_error(path, errors)
    return records


# the gold sets' names in a report line (gold.GOLD_SETS), keyed as evaluate.py's JSON keys them
GOLD_NAMES = {"gold": "the gold set ({n} answers of the 135M models, read by the team)",
              "gold_fluent": "the fluent gold set ({n} written answers in a larger model's "
              "register, labelled by the same hand that wrote them)"}  # fmt: skip
GOLD_KEYS = {"gold": "135m", "gold_fluent": "fluent"}


def gold_lines(path: str, sets: dict) -> list[str]:
    """One line per gold set in `sets` ({"gold": figures, "gold_fluent": figures}; a set that is
    None or missing is left out): pushback and label accuracy, correction and flag recall and the
    control false-positive rate, each with k/n and its Wilson interval."""

    def f(figs, key):
        x = figs[key]
        if x["value"] is None:
            return f"- (0/{x['n']})"
        return f"{x['value']:.2f} [{x['ci95'][0]:.2f},{x['ci95'][1]:.2f}] ({x['k']}/{x['n']})"

    lines = []
    for key, name in GOLD_NAMES.items():
        figs = sets.get(key)
        if figs:
            lines.append(
                f"grader {path} on {name.format(n=figs['n_answers'])}: pushback accuracy "
                f"{f(figs, 'pushback_accuracy')}, label accuracy {f(figs, 'label_accuracy')}, "
                f"false-premise correction recall {f(figs, 'false_premise_correction_recall')}, "
                f"nonsense-flag recall {f(figs, 'nonsense_flag_recall')}, control "
                f"false-positive rate {f(figs, 'control_false_positive_rate')}"
            )
    return lines


def stored_gold(folder, notes_path=None) -> dict:
    """The grader folder's measured figures on both gold sets (gold.json, train_grader.py
    --measure-gold), with the reference check of `notes_path` when given: {"gold": ...,
    "gold_fluent": ...}, a set None where gold.json lacks it or measured other files or notes."""
    stored = Path(folder) / "gold.json"
    saved = json.loads(stored.read_text()) if stored.is_file() else {}
    out = {}
    for key, name in GOLD_KEYS.items():
        entry = saved if name == "135m" else saved.get(name) or {}
        if notes_path:
            entry = entry.get("with_notes") or {}
            if entry.get("notes_sha256") != file_sha256(notes_path):
                entry = {}
        ok = entry.get("gold_sha256") == gold.files_sha256(*gold.GOLD_SETS[name][1])
        out[key] = {k: v for k, v in entry["figures"].items() if k != "confusion"} if ok else None
    return out


def summary(records: list[dict], graded: list[dict], grader: Grader) -> dict:
    out = {"n": len(graded), "labels": {k: sum(g["label"] == k for g in graded) for k in LABELS}}
    out["pushback_rate"] = {
        cat: figure(
            [
                float(g["pushback"])
                for r, g in zip(records, graded, strict=True)
                if r["category"] == cat
            ]
        )  # fmt: skip
        for cat in CATEGORIES
        if any(r["category"] == cat for r in records)
    }
    out["grader"] = {"path": grader.path, "validation": grader.metrics.get("validation")}
    return out


def print_gold(grader: Grader, notes_path) -> None:
    """The lines of both gold sets' stored figures (or why there are none), after the summary."""
    sets = stored_gold(grader.path, notes_path)
    print("\n".join(gold_lines(grader.path, sets)))
    for key, figs in sets.items():
        if figs is None:
            print(f"grader {grader.path}: no stored figures on {key.replace('_', ' ')} for "
                  f"these files and notes; measure them with `uv run python train_grader.py "
                  f"--measure-gold {grader.path}`")  # fmt: skip


@cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--answers", required=True, help="JSONL: id, category, prompt, answer")
    p.add_argument("--labels", help="JSONL of id, label, pushback: adds the grader's figures")
    p.add_argument("--grader", default=DEFAULT_GRADER, help="grader folder (train_grader.py)")
    p.add_argument("--notes", default=EVAL_NOTES,
                   help="reference notes of the prompts (prompts.load_notes); the reference "
                   "check applies to answers whose prompt has one")  # fmt: skip
    p.add_argument("--no-notes", action="store_true", help="the model's verdicts alone")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--limit", type=int, default=None,
                   help="grade the first N answers, round-robin over categories (the whole "
                   "file is still checked)")  # fmt: skip
    a = p.parse_args(argv)
    if a.limit is not None and a.limit < 1:
        p.error(f"--limit must be at least 1, got {a.limit}")
    with as_user_error(ValueError):  # the answers, labels and grader folder
        records = load_answers(a.answers)
        if a.limit is not None:  # the round-robin subset, kept in input order
            kept = {id(r) for r in eval_subset(records, a.limit)}
            records = [r for r in records if id(r) in kept]
        truth = load_truth(a.labels, records) if a.labels else None
        grader = Grader.load(a.grader)
        notes = None if a.no_notes else load_notes(a.notes)
    backend.announce()
    graded = grader.grade(records, progress=not a.json, notes=notes)
    result = {"records": graded, "summary": summary(records, graded, grader)}
    # the grader's own figures on both gold sets, printed beside every grading
    result["summary"]["grader_gold"] = stored_gold(grader.path, None if a.no_notes else a.notes)
    if notes is not None:
        refs = [g["reference"] for g in graded]
        result["summary"]["reference_check"] = {
            "notes": a.notes,
            "answers_with_a_note": sum(x is not None for x in refs),
            "answers_with_a_marker": sum(bool(x) for x in refs),
        }
    if truth is not None:
        result["summary"]["against_labels"] = grader_figures(truth, graded)
    if a.json:
        print(strict_json.dumps(result))
        return 0
    for g in graded:
        print(f"{g['id']:<24} {g['label']:<20} p(pushback)={g['p']:.2f}")
    s = result["summary"]
    print(strict_json.dumps({k: v for k, v in s.items() if k not in ("grader", "grader_gold")},
                            indent=1))  # fmt: skip
    print_gold(grader, None if a.no_notes else a.notes)
    return 0


def load_truth(path, records: list[dict]) -> list[dict]:
    """Labels (id, label, pushback) joined to the graded records' category and prompt, for
    gold.grader_figures; every record needs a label."""
    values, errors = read_jsonl(path)
    need = f"needs id, label (one of {', '.join(LABELS)}) and pushback (true/false)"
    rows = {}
    for n, r in values:
        r = r if isinstance(r, dict) else {}
        label = r.get("label")
        if (
            isinstance(r.get("id"), str)
            and isinstance(label, str)
            and label in LABELS
            and isinstance(r.get("pushback"), bool)
        ):
            rows[r["id"]] = r
        else:
            errors.append((n, need))
    if errors:
        raise data_error(path, errors)
    missing = [r["id"] for r in records if r["id"] not in rows]
    if missing:
        raise DataError(f"{path}: no label for ids {missing[:5]}; label every answer", path=path)
    return [{**r, **{k: rows[r["id"]][k] for k in ("label", "pushback")},
             "engages": rows[r["id"]].get("engages")} for r in records]  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
