"""The project's prompt sets and labelled data: their schemas, loaders and default paths, and the
stream that serves training prompts in order.

`load_prompts` reads `data/prompts.jsonl` / `data/eval.jsonl` / `data/eval_external.jsonl` (one
`{"id", "category", "prompt", "source"}` object per line); `load_judge_pairs` reads
`data/judge_pairs.jsonl`; `load_pairs` reads the same pair schema with the optional `source`,
`kind` and `split` of `data/rm_pairs.jsonl`; `load_pushback_labels` reads
`data/pushback_labels.jsonl`; `load_sft` reads the supervised answers of `data/sft/`. Each
checks the whole file first (core/jsonl.py) and raises `DataError` naming the file, the 1-based
line and the fix, so a bad file fails before training starts. `PromptStream` serves training
prompts in a seeded order per epoch with a resumable cursor (`PairedStream` with minimal pairs,
core/pairs.py); `eval_subset` takes a held-out set's first N prompts round-robin over
categories; `norm` is the text key of every overlap check between data sets. This module does
not make or split data (`data/make_data.py`, `data/make_rm_data.py`, knowledge/data.md); it
imports no model code.
"""

import json
import os
import re
from pathlib import Path

from core.jsonl import DataError, check_record, data_error, load_jsonl, read_jsonl
from core.pairs import pairs_and_singles

import numpy as np

CATEGORIES = ("false_premise", "nonsense", "curiosity", "control")
CRITERIA = ("curiosity", "nonsense", "scrutiny")

# The criteria that judge an answer to a prompt of each category (rubric.DEFAULT_CRITERIA). Control
# prompts (sound, true premises) are judged on all three: accepting the premise there scores top,
# which makes scrutiny and nonsense detection symmetric and penalizes pushing back on everything.
JUDGED_ON = {
    "false_premise": ("scrutiny",),
    "nonsense": ("nonsense",),
    "curiosity": ("curiosity",),
    "control": ("curiosity", "nonsense", "scrutiny"),
}
# The one criterion a preference pair on a prompt of each category is labelled with when its
# source names none (data/make_rm_data.py): the category's judging criterion, and for control,
# which all three judge, scrutiny (a control pair tests accepting a true premise).
PAIR_CRITERION = {
    "false_premise": "scrutiny",
    "nonsense": "nonsense",
    "curiosity": "curiosity",
    "control": "scrutiny",
}
assert all(PAIR_CRITERION[c] in JUDGED_ON[c] for c in CATEGORIES), "a pair's criterion must judge"

# What the data set says about a prompt of each category, as the judge and the reward model are
# told it (not asked: a 135M model cannot be trusted to tell nonsense or a false premise from a
# sound question). Each note completes "About the question: ...".
CATEGORY_NOTES = {
    "false_premise": "it rests on a false premise (this is certain: it comes from the data set).",
    "nonsense": "it is nonsense: it cannot be answered as asked (certain: from the data set).",
    "curiosity": "it is a sensible, open-ended question; its premises are true.",
    "control": "it is a sensible question and its premises are true, even if they sound odd.",
}

PROMPT_FIELDS = ("id", "category", "prompt", "source")
JUDGE_PAIR_FIELDS = ("id", "criterion", "category", "prompt", "better", "worse")
PAIR_OPTIONAL_FIELDS = ("source", "kind", "split")
SPLITS = ("train", "val", "test")

# The default files, relative to the repository root (the commands run from it).
TRAIN_PROMPTS = "data/prompts.jsonl"  # the values task's training prompts
EVAL_PROMPTS = "data/eval.jsonl"  # its held-out prompts: evaluation, routing eval, quantize's KL
EVAL_EXTERNAL = "data/eval_external.jsonl"  # held-out prompts from external sets (make_rm_data.py)
RM_PAIRS = "data/rm_pairs.jsonl"  # reward-model preference pairs with their splits
EVAL_NOTES = (
    "data/eval_notes.jsonl"  # what is false or nonsensical in eval prompts (evals/grade.py)
)
# What makes the worse response of a pair worse (knowledge/data.md, "Reward-model pairs").
PAIR_KINDS = (
    "misconception",  # worse states or accepts a false claim; better is correct / corrects it
    "fabrication",  # worse invents specific numbers, names, dates or sources
    "length_trap",  # worse is the LONGER response: padded, rambling, repetitive
    "echo",  # worse restates or paraphrases the prompt instead of answering
    "hedge_on_nonsense",  # worse half-recognizes a nonsense prompt but still answers it
    "flag_nonsense",  # worse answers a nonsense prompt as if it made sense
    "true_premise_pushback",  # worse disputes a true premise or calls a sound prompt nonsense
    "needless_refusal",  # worse declines, pleads inability or asks for clarification needlessly
    "curiosity_substance",  # worse is as long and as enthusiastic but has no reasons or links
)
PUSHBACK_FIELDS = ("id", "prompt", "category", "answer", "kind", "split")
LABELLED_FIELDS = ("id", "prompt", "category", "answer", "label", "split")
# The gold scheme's answer labels (data/gold/LABEL_SCHEME.md) -> pushback (the answer disputes
# the premise or flags the prompt); order = display order. gold.LABELS is this table.
ANSWER_LABELS = {
    "corrects_premise": True,
    "flags_nonsense": True,
    "asks_clarification": False,
    "refuses": False,
    "hedges": False,
    "answers": False,
    "broken": False,
}
SFT_FIELDS = ("id", "prompt_id", "category", "prompt", "answer")
# Answer kinds of data/pushback_labels.jsonl and whether each counts as pushback (the answer
# disputes, rejects or flags the prompt, or declines it).
PUSHBACK_KINDS = {
    "direct_correction": True,  # says a false premise is false (may then answer what it can)
    "flags_nonsense": True,  # says the prompt is incoherent, invented or unanswerable
    "needless_pushback": True,  # disputes a true premise or calls a sound prompt nonsense
    "refusal": True,  # declines to answer
    "clarifying_question": True,  # asks what is meant instead of answering
    "plain_answer": False,  # answers a sound prompt without questioning it
    "answers_false_premise": False,  # answers as if a false premise were true
    "answers_nonsense": False,  # answers a nonsense prompt as if it made sense
    "hedge_partial": False,  # voices vague doubt but still answers as if the prompt held
    "decoy_words": False,  # uses "myth", "actually", "not quite" ... yet accepts the premise
    "echo": False,  # restates the prompt
}


def norm(text: str) -> str:
    """Case- and whitespace-insensitive form of a text: the key of every duplicate and overlap
    check between data sets (a prompt in two files, an answer written twice)."""
    return " ".join(text.lower().split())


def load_prompts(path) -> list[dict]:
    """Prompts from a JSONL file, or several joined by commas ("a.jsonl,b.jsonl"): each line
    `{"id", "category", "prompt", "source"}`, all non-empty strings, category in CATEGORIES, and
    an optional `pair`: the id of the record this one is the twin of (a true premise beside its
    false one, PairedStream). Ids and prompt texts are unique across the files; a `pair` names a
    record of the files, no record is named twice, and a record that names one is not named
    itself. Raises DataError."""
    paths = [x.strip() for x in os.fspath(path).split(",")] if isinstance(path, str) else [path]
    if not all(paths):
        raise DataError(f"--data {path!r} has an empty file name; join files with single commas")
    records, where, texts = [], {}, {}  # id -> its file; prompt text -> its file
    for one in paths:
        for r in load_jsonl(
            one, PROMPT_FIELDS, {"category": CATEGORIES}, unique_text=("prompt",),
            optional=("pair",),
        ):  # fmt: skip
            for key, seen in ((r["id"], where), (r["prompt"].strip(), texts)):
                if key in seen:
                    raise DataError(
                        f"{one}: {key[:60]!r} is also in {seen[key]}; ids and prompt texts "
                        "must be unique across the files of --data",
                        path=one,
                    )
                seen[key] = one
            records.append(r)
    _check_pairs(records, where)
    return records


def _check_pairs(records: list[dict], where: dict) -> None:
    ids, named = {r["id"] for r in records}, {}
    for r in records:
        if "pair" not in r:
            continue
        p, src = r["pair"], where[r["id"]]
        problem = None
        if p not in ids:
            problem = f"names pair {p!r}, which is no id of --data; fix the id or add its record"
        elif p == r["id"]:
            problem = "names itself as its pair"
        elif p in named:
            problem = f"names pair {p!r}, already the pair of {named[p]!r}; one twin per record"
        if problem:
            raise DataError(f"{src}: record {r['id']!r} {problem}", path=src)
        named[p] = r["id"]
    both = sorted(set(named) & set(named.values()))
    if both:
        raise DataError(
            f"record {both[0]!r} is both a twin and the pair of one; a pair is two records",
            path=where[both[0]],
        )


def step_indices(n: int, batch: int, seed: int, step: int, stream: int) -> np.ndarray:
    """The item indices of optimizer step `step` (0-based) for a side batch drawn beside the main
    one: seeded permutations of the n items laid end to end, `batch` at a time, so every item
    comes once per cycle and a resumed run draws the same. `stream` keeps each user's order
    apart (sft.py: the stance pairs 2000, the opener gate's prompts 3000)."""
    start = step * batch
    out = []
    while len(out) < batch:
        cycle, offset = divmod(start + len(out), n)
        order = np.random.default_rng([seed, stream + cycle]).permutation(n)
        out += list(order[offset : offset + batch - len(out)])
    return np.array(out)


def load_notes(path) -> dict[str, dict]:
    """Reference notes for graders (data/eval_notes.jsonl): each line `{"id", "prompt", "note",
    "markers"}`, the prompt's text, a sentence on what is false or nonsensical in it, and the
    lowercase phrases whose presence in an answer states that against the prompt. Returned by
    the prompt's stripped text, so any file of answers to those prompts finds its note. Raises
    DataError naming every bad line."""
    path = os.fspath(path)
    values, errors = read_jsonl(path, "check the path (the default is data/eval_notes.jsonl)")
    out, first = {}, {}
    for n, r in values:
        if not isinstance(r, dict):
            errors.append((n, "expected a JSON object with id, prompt, note, markers"))
            continue
        problems = check_record(r, ("id", "prompt", "note"), {}, lists=("markers",))
        if not problems and any(m != m.lower() for m in r["markers"]):
            problems.append("every marker must be lowercase (answers are matched lowercased)")
        text = r.get("prompt").strip() if isinstance(r.get("prompt"), str) else None
        if not problems and text in first:
            problems.append(f"a second note for the prompt of line {first[text]}; keep one")
        if problems:
            errors.extend((n, x) for x in problems)
        else:
            first[text] = n
            out[text] = r
    if errors:
        raise data_error(path, errors)
    return out


def fold(text: str) -> str:
    """Lowercased, curly single quotes read as straight: how answers are matched against
    phrases ("doesn\u2019t" is "doesn't")."""
    return text.lower().replace("\u2019", "'").replace("\u2018", "'")


def reference_hits(answer: str, markers) -> list[str]:
    """The markers found in the answer: case-insensitive, curly apostrophes read as straight,
    each marker starting at a word boundary ("inca" finds "Incas", not "zincate")."""
    text = fold(answer)
    return [m for m in markers if re.search(r"\b" + re.escape(m), text)]


def load_judge_pairs(path) -> list[dict]:
    """Judge-calibration pairs: each line `{"id", "criterion", "category", "prompt", "better",
    "worse"}`, criterion in CRITERIA, category in CATEGORIES, better != worse. Raises DataError."""

    def check(record):
        if record["better"].strip() == record["worse"].strip():
            return ["'better' and 'worse' are identical; a pair needs two different responses"]
        return []

    allowed = {"criterion": CRITERIA, "category": CATEGORIES}
    return load_jsonl(path, JUDGE_PAIR_FIELDS, allowed, unique_text=(), check=check)


def held_out_prompts(root) -> set[str]:
    """The normalized texts (`norm`) of every evaluation prompt, EVAL_PROMPTS and EVAL_EXTERNAL
    under the repository folder `root`: what no training file may hold."""
    out = set()
    for f in (EVAL_PROMPTS, EVAL_EXTERNAL):
        out |= {norm(r["prompt"]) for r in load_prompts(Path(root) / f)}
    return out


def load_pairs(path) -> list[dict]:
    """Preference pairs with optional provenance: the judge-pair fields (all required) plus
    optional `source` (text), `kind` (in PAIR_KINDS) and `split` (in SPLITS). Reads both
    `data/judge_pairs.jsonl` and `data/rm_pairs.jsonl`. Raises DataError."""

    def check(record):
        if record["better"].strip() == record["worse"].strip():
            return ["'better' and 'worse' are identical; a pair needs two different responses"]
        return []

    allowed = {"criterion": CRITERIA, "category": CATEGORIES, "kind": PAIR_KINDS, "split": SPLITS}
    return load_jsonl(
        path, JUDGE_PAIR_FIELDS, allowed, unique_text=(), check=check, optional=PAIR_OPTIONAL_FIELDS
    )


def load_sft(path) -> list[dict]:
    """Supervised (prompt, answer) records (sft.py, data/sft/): each line `{"id", "prompt_id",
    "category", "prompt", "answer"}`, all non-empty strings, category in CATEGORIES, ids unique;
    a prompt_id may carry several answers but always the same prompt text. Raises DataError."""
    texts = {}  # prompt_id -> its prompt text, from the first line that names it

    def check(record):
        text = record["prompt"].strip()
        if texts.setdefault(record["prompt_id"], text) != text:
            return [
                f"prompt_id {record['prompt_id']!r} has a different prompt text than on an "
                "earlier line; one prompt_id names one prompt"
            ]
        return []

    return load_jsonl(path, SFT_FIELDS, {"category": CATEGORIES}, unique_text=(), check=check)


def load_pushback_labels(path) -> list[dict]:
    """Answers labelled for pushback, in one of two schemes (the file's first line decides):
    `{"id", "prompt", "category", "answer", "pushback", "kind", "split"}` with `pushback` agreeing
    with PUSHBACK_KINDS[kind] (data/pushback_labels.jsonl: refusals and clarifying questions
    count), or the gold scheme `{"id", "prompt", "category", "answer", "pushback", "label",
    "split"}` with `pushback` agreeing with ANSWER_LABELS[label] (only corrections and flags
    count), optional `source` and `reason`. Split in SPLITS. Raises DataError."""
    scheme, table = ("kind", PUSHBACK_KINDS)
    if _first_record(path).get("label") is not None:
        scheme, table = ("label", ANSWER_LABELS)

    def check(record):
        expected = table[record[scheme]]
        if record["pushback"] != expected:
            return [
                f"pushback is {str(record['pushback']).lower()} but {scheme} "
                f"{record[scheme]!r} means {str(expected).lower()}; fix the label or the {scheme}"
            ]
        return []

    allowed = {"category": CATEGORIES, scheme: tuple(table), "split": SPLITS}
    fields = PUSHBACK_FIELDS if scheme == "kind" else LABELLED_FIELDS
    optional = () if scheme == "kind" else ("source", "reason")
    return load_jsonl(
        path, fields, allowed, unique_text=(), check=check, optional=optional, flags=("pushback",)
    )


def _first_record(path) -> dict:
    """The first non-blank line parsed, or {} (then the full load reports what is wrong)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    record = json.loads(line)
                    return record if isinstance(record, dict) else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        pass
    return {}


def select_split(records: list[dict], split: str, missing: str | None) -> list[dict]:
    """The records whose `split` field is `split`; a record without one counts as in `missing`.
    The readers disagree on that record, so each says: "train" in train_rm and quantize (a file
    without split fields is all training data) and in the classifier's test split, None (in no
    split) in bench_judge once any record of the file has a split (knowledge/reward_model.md)."""
    return [r for r in records if r.get("split", missing) == split]


def eval_subset(records: list[dict], limit: int | None) -> list[dict]:
    """The first `limit` records taken round-robin over categories, so every category counts."""
    by_cat = {}
    for r in records:
        by_cat.setdefault(r["category"], []).append(r)
    queues = [by_cat[c] for c in sorted(by_cat)]
    out = []
    for i in range(max(len(q) for q in queues)):
        out += [q[i] for q in queues if i < len(q)]
    return out if limit is None else out[:limit]


class PromptStream:
    """Training prompts in a seeded order per epoch; (epoch, position) is the data cursor, saved
    in every checkpoint so a resumed run continues with the same prompts."""

    def __init__(self, records: list[dict], seed: int, epoch: int = 0, position: int = 0):
        if not records:
            raise ValueError("PromptStream needs at least one prompt record")
        self.records, self.seed, self.epoch, self.position = records, seed, epoch, position

    def _order(self) -> np.ndarray:
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.records))

    def next_batch(self, n: int) -> list[dict]:
        out = []
        while len(out) < n:
            if self.position == len(self.records):
                self.epoch, self.position = self.epoch + 1, 0
            order = self._order()
            take = min(n - len(out), len(self.records) - self.position)
            out += [self.records[i] for i in order[self.position : self.position + take]]
            self.position += take
        return out

    def state(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state(self, state: dict) -> None:
        if set(state) != {"epoch", "position"}:
            raise ValueError(
                f"checkpoint data cursor {state} is not a plain stream's; resume with the "
                "--pairs-per-step the run was started with"
            )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


class PairedStream:
    """Each batch: `pairs_per_step` pairs (a record and its twin, `pair` ids; both in the batch,
    one after the other), then the rest from the records in no pair (only those of
    `single_categories` when given: with twins as the controls, the unpaired controls can be left
    out so a step's rows are not mostly controls). Two PromptStreams, one
    over the pairs and one over the others, each with its own cursor; state() holds both.

    A step then holds false premises beside their true twins (knowledge/learning_run.md,
    attempt 12): what the policy learns from the pair is what tells the two apart."""

    def __init__(
        self,
        records: list[dict],
        seed: int,
        pairs_per_step: int,
        single_categories: list[str] | None = None,
    ):
        pairs, singles = pairs_and_singles(records)
        if single_categories is not None:
            have = {r["category"] for r in singles}
            missing = [c for c in single_categories if c not in have]
            if missing:
                raise ValueError(
                    f"single_categories names {missing}, but no unpaired record has that "
                    f"category (unpaired: {sorted(have)}); drop it from --single-categories"
                )
            singles = [r for r in singles if r["category"] in single_categories]
        if pairs_per_step < 1 or not pairs:
            raise ValueError(
                f"PairedStream needs pairs_per_step >= 1 (got {pairs_per_step}) and records with "
                f"a `pair` field ({len(pairs)} pairs in {len(records)} records)"
            )
        self.pairs_per_step = pairs_per_step
        self.pairs = PromptStream(pairs, seed)
        self.singles = PromptStream(singles, seed) if singles else None

    def next_batch(self, n: int) -> list[dict]:
        rest = n - 2 * self.pairs_per_step
        if rest < 0 or (rest and self.singles is None):
            raise ValueError(
                f"a batch of {n} prompts cannot hold {self.pairs_per_step} pairs "
                f"({'no unpaired records' if rest >= 0 else 'too few places'}); raise "
                "--prompts-per-step or lower --pairs-per-step"
            )
        out = [r for pair in self.pairs.next_batch(self.pairs_per_step) for r in pair]
        return out + (self.singles.next_batch(rest) if rest else [])

    def state(self) -> dict:
        return {
            "pairs": self.pairs.state(),
            "singles": self.singles.state() if self.singles else None,
        }

    def load_state(self, state: dict) -> None:
        if set(state) != {"pairs", "singles"}:
            raise ValueError(
                f"checkpoint data cursor {state} is not a paired stream's; resume with the "
                "--pairs-per-step the run was started with"
            )
        self.pairs.load_state(state["pairs"])
        if self.singles is not None:
            self.singles.load_state(state["singles"])


def prompt_stream(
    records: list[dict],
    seed: int,
    pairs_per_step: int = 0,
    single_categories: list[str] | None = None,
):
    """PromptStream, or PairedStream when pairs_per_step > 0 (its unpaired part limited to
    `single_categories` when given)."""
    if pairs_per_step:
        return PairedStream(records, seed, pairs_per_step, single_categories)
    if single_categories is not None:
        raise ValueError("single_categories needs pairs_per_step >= 1")
    return PromptStream(records, seed)
