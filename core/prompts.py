"""Load and validate the project's JSONL data sets, and serve training prompts in order.

`load_prompts` reads `data/prompts.jsonl` / `data/eval.jsonl` / `data/eval_external.jsonl` (one
`{"id", "category", "prompt", "source"}` object per line); `load_judge_pairs` reads
`data/judge_pairs.jsonl`; `load_pairs` reads the same pair schema with the optional `source`,
`kind` and `split` of `data/rm_pairs.jsonl`; `load_pushback_labels` reads
`data/pushback_labels.jsonl`; `load_sft` reads the supervised answers of `data/sft/`. Each
checks the whole file first and raises `DataError` naming the file, the 1-based line and the
fix, so a bad file fails before training starts. `PromptStream` serves training prompts in a
seeded order per epoch with a resumable cursor; `eval_subset` takes a held-out set's first N
prompts round-robin over categories; `write_jsonl` writes records atomically; `output_folder`
checks a data builder's --out before it reads anything; `norm` is the text key of every overlap
check between data sets. This module does not make or split data (`data/make_data.py`,
`data/make_rm_data.py`, knowledge/data.md); it imports no model code.
"""

import hashlib
import json
import os
import re
from pathlib import Path

from core.atomic import atomic_file
from core.errors import UserError

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

_MAX_REPORTED = 20


class DataError(UserError, ValueError):
    """A data file is missing, empty or malformed; `path` and `line` (1-based or None) say where."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        super().__init__(message)
        self.path = path
        self.line = line


def file_sha256(*paths) -> str:
    """SHA-256 of the files' bytes, one after another (a data file's identity in a model's or
    run's record; the gold set's answers and labels files as one)."""
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def data_error(path, errors: list[tuple[int, str]]) -> DataError:
    """One line for a file's problems [(line, message)]: the first line's first in full (where,
    what, the fix), then how many more and on which lines, so a CLI prints it as its one `error:`
    line."""
    errors = sorted(errors, key=lambda e: e[0])  # stable: a line's own problems keep their order
    first, msg = errors[0]
    text = f"{path} line {first}: {msg}"
    if len(errors) > 1:
        lines = sorted({n for n, _ in errors[1:]})
        shown = ", ".join(map(str, lines[:_MAX_REPORTED]))
        shown += ", ..." if len(lines) > _MAX_REPORTED else ""
        where = f"line {shown}" if len(lines) == 1 else f"lines {shown}"
        text += f" (and {len(errors) - 1} more problem(s): {where})"
    return DataError(text, path=path, line=first)


def read_jsonl(
    path, fix: str = "check the path"
) -> tuple[list[tuple[int, object]], list[tuple[int, str]]]:
    """A JSONL file's values [(line, value)] and the problems [(line, message)] of its blank and
    malformed lines: the one reader under every loader, which checks the values, adds its own
    problems and raises `data_error`. A file that is missing (`fix`: how to get it), not UTF-8
    or empty is a DataError at once."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"{path}: file not found; {fix}", path=path)
    with open(path, encoding="utf-8") as f:
        try:
            lines = f.read().splitlines()
        except UnicodeDecodeError as e:
            raise DataError(f"{path}: not UTF-8 text ({e}); save it as UTF-8", path=path) from e
    if not any(line.strip() for line in lines):
        raise DataError(f"{path}: file is empty; it needs one JSON object per line", path=path)
    values, errors = [], []
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            errors.append((line_no, "blank line; remove it (one JSON object per line)"))
            continue
        try:
            values.append((line_no, json.loads(line)))
        except json.JSONDecodeError as e:
            errors.append((line_no, f"not valid JSON ({e.msg} at column {e.colno}); fix the line"))
    return values, errors


def _check_record(record, fields, allowed, optional=(), flags=(), lists=()):
    """Problems with one parsed line, as a list of strings (empty if fine). `fields` are required
    strings, `optional` strings that may be absent, `flags` required booleans, `lists` required
    non-empty lists of non-empty strings."""
    if not isinstance(record, dict):
        return [f"expected a JSON object, got {type(record).__name__}; write one object per line"]
    problems = []
    for name in flags:
        if name not in record:
            problems.append(f"missing field {name!r}; write {name!r}: true or false")
        elif not isinstance(record[name], bool):
            problems.append(f"field {name!r} must be true or false, got {record[name]!r}")
    for name in lists:
        value = record.get(name)
        if not (isinstance(value, list) and value):
            problems.append(f"field {name!r} must be a non-empty list of strings")
        elif not all(isinstance(v, str) and v.strip() for v in value):
            problems.append(f"every entry of {name!r} must be a non-empty string")
    for name in (*fields, *(o for o in optional if o in record)):
        if name not in record:
            problems.append(f"missing field {name!r}; every line needs {', '.join(fields)}")
        elif not isinstance(record[name], str):
            problems.append(
                f"field {name!r} must be a string, got {type(record[name]).__name__}; quote it"
            )
        elif not record[name].strip():
            problems.append(f"field {name!r} is empty or whitespace; give it text or drop the line")
    known = (*fields, *optional, *flags, *lists)
    extra = sorted(set(record) - set(known))
    if extra:
        problems.append(
            f"unknown field(s) {', '.join(map(repr, extra))}; allowed: {', '.join(known)}"
        )
    for name, values in allowed.items():
        value = record.get(name)
        if isinstance(value, str) and value.strip() and value not in values:
            problems.append(f"{name} {value!r} is not one of {', '.join(values)}; use one of those")
    return problems


def norm(text: str) -> str:
    """Case- and whitespace-insensitive form of a text: the key of every duplicate and overlap
    check between data sets (a prompt in two files, an answer written twice)."""
    return " ".join(text.lower().split())


def _load_jsonl(path, fields, allowed, unique_text, check=None, optional=(), flags=()):
    """Parse and validate a JSONL file; return its records or raise one DataError listing all
    problems. `unique_text` names fields whose (stripped) values must not repeat; `check(record)`
    returns extra problems for a record that passed the field checks; `optional` and `flags` are
    passed to `_check_record`."""
    path = os.fspath(path)
    values, errors = read_jsonl(path, "check the path or run `uv run python -m data.make_data`")
    records = []
    first_seen = {name: {} for name in ("id", *unique_text)}
    for line_no, record in values:
        problems = _check_record(record, fields, allowed, optional, flags)
        if not problems and check is not None:
            problems = check(record)
        if not problems:
            for name, seen in first_seen.items():
                key = record[name] if name == "id" else record[name].strip()
                if key in seen:
                    what = "id" if name == "id" else f"{name} text"
                    problems.append(
                        f"duplicate {what} {key[:60]!r} (first on line {seen[key]}); "
                        f"make it unique or delete one"
                    )
                else:
                    seen[key] = line_no
        if problems:
            errors.extend((line_no, p) for p in problems)
        else:
            records.append(record)

    if errors:
        raise data_error(path, errors)
    return records


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
        for r in _load_jsonl(
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


def claim_key(record: dict) -> str:
    """The id a record's claim goes by: a true twin's is its false premise's (`pair`), so the two
    halves of a minimal pair land on the same side of any split."""
    return record.get("pair") or record["id"]


def pairs_and_singles(records: list[dict]) -> tuple[list[tuple[dict, dict]], list[dict]]:
    """([(named record, its twin)] in the twins' file order, the records in no pair)."""
    by_id = {r["id"]: r for r in records}
    pairs = [(by_id[r["pair"]], r) for r in records if "pair" in r]
    paired = {r["id"] for pair in pairs for r in pair}
    return pairs, [r for r in records if r["id"] not in paired]


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
        problems = _check_record(r, ("id", "prompt", "note"), {}, lists=("markers",))
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
    return _load_jsonl(path, JUDGE_PAIR_FIELDS, allowed, unique_text=(), check=check)


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
    return _load_jsonl(
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

    return _load_jsonl(path, SFT_FIELDS, {"category": CATEGORIES}, unique_text=(), check=check)


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
    return _load_jsonl(
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


def output_folder(path, flag: str = "--out") -> Path:
    """`path` as the folder a data builder writes into, checked before the builder reads anything:
    a UserError naming the flag when it, or the nearest part of it that exists, is not a folder
    (a missing folder is made when the files are written)."""
    path = Path(path)
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        where = "" if existing == path else f" ({existing})"
        raise UserError(
            f"{flag} {path}{where} is a file, not a folder; give the folder to write the files into"
        )
    return path


def write_jsonl(records, path) -> Path:
    """One JSON object per line via a temp file renamed into place, so a failed run leaves no
    half-written file (the parent folder is made if missing)."""
    path = Path(path)
    with atomic_file(path) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


# ----------------------------------------------------------------------------------------------
# Minimal pairs (a false premise and its true twin) and folds that keep a claim whole


def minimal_pairs(records: list[dict]) -> list[tuple[dict, dict]]:
    """(false, true twin) for every record that names its partner with `pair`; load_prompts has
    already checked that each named id exists and is named once."""
    pairs, _ = pairs_and_singles(records)
    reversed_ = [f"{b['id']} -> {a['id']}" for a, b in pairs if a["category"] == "control"]
    if reversed_:
        raise DataError(
            f"{len(reversed_)} twin(s) name a control prompt as their false half "
            f"({', '.join(reversed_[:3])}); `pair` goes on the true twin and names the false one"
        )
    if not pairs:
        raise DataError(
            "the pairs file has no record with a `pair` field (a true twin naming its false "
            "premise's id); pass e.g. --pairs data/prompts.jsonl,data/twins_v2.jsonl"
        )
    return pairs


def prompt_words(text: str) -> list[str]:
    """The lower-cased words of a prompt, as the claim groups and the bag of words read them."""
    return re.findall(r"[a-z0-9']+", text.lower())


def claim_groups(pairs: list[tuple[dict, dict]], run: int = 4, max_share: int = 4) -> np.ndarray:
    """Group index of each pair: pairs whose false halves share a rare `run`-word sequence (one
    that at most `max_share` false halves hold) are one group. Template prompts put one claim
    in several frames ("Settle a debate for us: my brother says <claim>", "Can you confirm that
    <claim>?"); folds by pair alone would train on a claim's other frames and test on it, so a
    probe (or the bag of words) could recall the claim instead of knowing the fact. A frame's
    own word runs are shared by many prompts and do not join groups. run=0: every pair alone."""
    parent = list(range(len(pairs)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if run > 0:
        holders: dict[tuple, list[int]] = {}
        for i, (false, _) in enumerate(pairs):
            words = prompt_words(false["prompt"])
            for gram in {tuple(words[k : k + run]) for k in range(len(words) - run + 1)}:
                holders.setdefault(gram, []).append(i)
        for members in holders.values():
            if 1 < len(members) <= max_share:
                for i in members[1:]:
                    parent[root(i)] = root(members[0])
    roots = [root(i) for i in range(len(pairs))]
    index = {r: g for g, r in enumerate(dict.fromkeys(roots))}
    return np.array([index[r] for r in roots], dtype=np.int64)


def fold_of_groups(groups: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Fold index (0..folds-1) of each pair, all pairs of a group in one fold: the groups from
    the largest down (a seeded shuffle among equal sizes), each placed in the fold with the
    fewest pairs so far."""
    names, sizes = np.unique(groups, return_counts=True)
    if len(names) < 2 * folds:
        raise DataError(
            f"{len(names)} independent groups of pairs are too few for {folds} folds "
            f"(need >= {2 * folds})"
        )
    shuffled = np.random.default_rng(seed).permutation(len(names))
    order = shuffled[np.argsort(-sizes[shuffled], kind="stable")]  # largest first, ties shuffled
    load = np.zeros(folds, dtype=np.int64)
    fold_of_name = {}
    for k in order:
        f = int(np.argmin(load))
        fold_of_name[names[k]] = f
        load[f] += sizes[k]
    return np.array([fold_of_name[g] for g in groups], dtype=np.int64)
