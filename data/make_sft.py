"""Write data/sft/written.jsonl (and, with --falseqa N, data/sft/falseqa.jsonl) for sft.py.

written.jsonl holds the answers of data/sft/answers.yaml, written for this set, one per training
prompt of data/prompts.jsonl, as {"id", "prompt_id", "category", "prompt", "answer"} records.
Before writing, every entry is checked: the prompt is a training prompt of its section's category
and appears in no evaluation file (data/eval.jsonl, data/eval_external.jsonl, data/gold/); the
evaluation grader's data never holds that prompt nor shares a 10-word run with the answer
(data/grader/written.jsonl, data/grader/policy_answers*.jsonl, data/pushback_labels.jsonl); the
answer is at most 65 words and ends a sentence; corrections and true-premise answers are equal in
number. falseqa.jsonl takes N rebuttals and N plain answers from ../shared/datasets/falseqa (read
here, never committed: it states no license), none of them among the rows the grader trains or
validates on (train_grader.build_data). twins.jsonl holds the answers of
data/sft/twin_answers.yaml: plain answers to the true twins (data/twins.jsonl) of false-premise
prompts that answers.yaml corrects, so each twin and its false premise form a minimal pair of
answers (the same checks; a twin whose false premise has no correction is refused).
Deterministic: the same inputs give the same bytes.

Run from the repo root:  uv run python -m data.make_sft [--falseqa 150 [--pairs]] [--out DIR]
"""

import argparse
import csv
import glob
import json
import random
import re
import sys
from pathlib import Path

from core import errors
from core.diversity import word_count
from core.jsonl import DataError, output_folder
from core.prompts import CATEGORIES, held_out_prompts, load_prompts, norm

import yaml

ROOT = Path(__file__).resolve().parent.parent

OUT = ROOT / "data" / "sft"
SHARED = ROOT.parent / "shared" / "datasets"
MAX_WORDS = 65
SHARED_RUN = 10  # words in a row an answer may not share with any grader answer
GOLD_ANSWERS = "data/gold/answers.jsonl"
GRADER_FILES = ("data/grader/written.jsonl", "data/pushback_labels.jsonl")
GRADER_GLOB = "data/grader/policy_answers*.jsonl"
ENDS = re.compile(r"[.!?][\"')]?$")


def runs(text: str, n: int = SHARED_RUN) -> set:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def grader_texts() -> tuple[set, set, set]:
    """(prompts, answers, 10-word runs of answers) of the grader's own data files."""
    files = [ROOT / f for f in GRADER_FILES] + sorted(map(Path, glob.glob(str(ROOT / GRADER_GLOB))))
    prompts, answers, shared = set(), set(), set()
    for path in files:
        for r in _jsonl(path):
            prompts.add(norm(r["prompt"]))
            if r.get("answer"):
                answers.add(norm(r["answer"]))
                shared |= runs(r["answer"])
    return prompts, answers, shared


def eval_prompts() -> set:
    """prompts.held_out_prompts and the gold set's prompts (normalized)."""
    return held_out_prompts(ROOT) | {norm(r["prompt"]) for r in _jsonl(ROOT / GOLD_ANSWERS)}


def check_entry(
    pid, cat, answer, prompts, banned, grader, source="data/prompts.jsonl"
) -> list[str]:
    """Problems with one answers.yaml entry (empty if fine)."""
    g_prompts, g_answers, g_runs = grader
    if pid not in prompts:
        return [f"{pid} is not a prompt id of {source}"]
    rec, problems = prompts[pid], []
    if rec["category"] != cat:
        problems.append(f"{pid} is a {rec['category']} prompt, listed under {cat}")
    if norm(rec["prompt"]) in banned:
        problems.append(f"{pid}: its prompt is in an evaluation file; pick a training-only prompt")
    if norm(rec["prompt"]) in g_prompts:
        problems.append(f"{pid}: the grader's data holds this prompt; pick another")
    if not isinstance(answer, str) or not answer.strip():
        return problems + [f"{pid}: the answer is empty"]
    words = word_count(answer)
    if words > MAX_WORDS:
        problems.append(f"{pid}: {words} words, over {MAX_WORDS}; the policy writes ~80 tokens")
    if not ENDS.search(answer.strip()):
        problems.append(f"{pid}: the answer must end a sentence (. ! or ?)")
    if norm(answer) in g_answers or runs(answer) & g_runs:
        problems.append(f"{pid}: shares text with a grader answer; write it afresh")
    return problems


def _checked(entries, prompts, prompt_file, seen, texts) -> tuple[list[dict], list[str]]:
    """(records, problems) of `(prompt id, category, answer)` entries: each checked by
    check_entry against `prompts` and against every answer in `seen` (normalized answer -> id,
    updated here), so no answer repeats within or across the files built."""
    banned, grader = texts
    records, problems = [], []
    for pid, cat, answer in entries:
        problems += check_entry(pid, cat, answer, prompts, banned, grader, prompt_file)
        if norm(str(answer)) in seen:
            problems.append(f"{pid}: same answer as {seen[norm(str(answer))]}")
        seen[norm(str(answer))] = pid
        if pid in prompts:
            records.append(
                {"id": f"sft-{pid}", "prompt_id": pid, "category": cat,
                 "prompt": prompts[pid]["prompt"], "answer": " ".join(str(answer).split())}
            )  # fmt: skip
    return records, problems


def _refuse(source: Path, problems: list[str]) -> None:
    """Raise one DataError naming the first problem, the count and the next five."""
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise DataError(f"{source}: {problems[0]}{more}: " + "; ".join(problems[1:6]))


def written_records(texts=None) -> list[dict]:
    """answers.yaml checked and turned into records (DataError listing every problem).
    `texts`: (eval_prompts(), grader_texts()), read here when not given."""
    source = OUT / "answers.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or set(data) - set(CATEGORIES):
        raise DataError(f"{source}: top-level keys must be categories {CATEGORIES}")
    prompts = {r["id"]: r for r in load_prompts(ROOT / "data" / "prompts.jsonl")}
    entries = [(pid, c, a) for c in CATEGORIES for pid, a in (data.get(c) or {}).items()]
    texts = texts or (eval_prompts(), grader_texts())
    records, problems = _checked(entries, prompts, "data/prompts.jsonl", {}, texts)
    n = {c: sum(r["category"] == c for r in records) for c in CATEGORIES}
    if n["false_premise"] != n["control"]:
        problems.append(
            f"{n['false_premise']} corrections but {n['control']} true-premise answers; keep them "
            "equal so the policy does not learn to dispute every premise"
        )
    _refuse(source, problems)
    return records


def twin_records(written: list[dict], texts=None) -> list[dict]:
    """twin_answers.yaml checked and turned into control records, one per true twin whose false
    premise `written` corrects (DataError listing every problem). `texts` as written_records'."""
    source = OUT / "twin_answers.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not data:
        raise DataError(f"{source}: expected a mapping of twin ids (tw-...) to answers")
    both = load_prompts(f"{ROOT / 'data' / 'prompts.jsonl'},{ROOT / 'data' / 'twins.jsonl'}")
    twins = {r["id"]: r for r in both if "pair" in r}
    corrected = {r["prompt_id"] for r in written if r["category"] == "false_premise"}
    seen = {norm(r["answer"]): r["prompt_id"] for r in written}
    texts = texts or (eval_prompts(), grader_texts())
    entries = [(pid, "control", answer) for pid, answer in data.items()]
    records, problems = _checked(entries, twins, "data/twins.jsonl", seen, texts)
    problems += [
        f"{pid}: its false premise {twins[pid]['pair']} has no answer in answers.yaml; "
        "write that correction first (the two make a minimal pair)"
        for pid in data
        if pid in twins and twins[pid]["pair"] not in corrected
    ]
    _refuse(source, problems)
    return records


def falseqa_partners(false_q: str, true_q: str) -> bool:
    """FalseQA's k-th label-0 question is an edit of its k-th label-1 question when the two share
    at least 30% of their words (lower-cased letters runs); below that they are unrelated rows."""
    a, b = (set(re.findall(r"[a-z]+", q.lower())) for q in (false_q, true_q))
    return len(a & b) >= 0.3 * len(a | b)


def falseqa_records(n: int, seed: int, pairs: bool = False) -> list[dict]:
    """n rebuttals (label 1) and n plain answers (label 0) from FalseQA's train and valid
    files, seeded, none whose question the grader uses or an evaluation file holds.

    With pairs, the draw is n minimal pairs: FalseQA wrote each true-premise question as an edit
    of a false-premise one ("What should men pay attention to when breastfeeding" / "...women
    ..."), the k-th label-0 row of a file being the partner of its k-th label-1 row. Both members
    of a pair are kept or neither, so the warm start sees the same template with opposite facts
    and must look at the fact to know whether to correct. A partner sharing under 30% of its
    question's words with the other is not a pair: counted and printed, never silently used."""
    # start-up: train_grader imports MLX; only --falseqa needs the grader's exact data
    from train_grader import build_data

    used = {norm(r["prompt"]) for r in build_data()} | eval_prompts()
    pools = {"1": [], "0": []}
    pair_pool, unpaired = [], 0
    for split in ("train", "valid"):
        path = SHARED / "falseqa" / f"{split}.csv"
        if not path.is_file():
            raise DataError(f"{path} not found: FalseQA is read from ../shared/datasets")
        by_label = {"1": [], "0": []}
        for i, row in enumerate(csv.DictReader(path.open(encoding="utf-8"))):
            q, a = row["question"].strip(), " ".join(row["answer"].split())
            cat = "false_premise" if row["label"] == "1" else "control"
            rec = {"id": f"fqa-{split}-{i:04d}", "prompt_id": f"falseqa-{split}-{i:04d}",
                   "category": cat, "prompt": q, "answer": a}  # fmt: skip
            ok = norm(q) not in used and 6 <= word_count(a) <= MAX_WORDS and ENDS.search(a)
            by_label[row["label"]].append((rec, bool(ok)))
            if ok and not pairs:
                used.add(norm(q))
                pools[row["label"]].append(rec)
        if not pairs:
            continue
        if len(by_label["1"]) != len(by_label["0"]):
            raise DataError(
                f"{path}: {len(by_label['1'])} false-premise rows but {len(by_label['0'])} "
                "true-premise rows; FalseQA's pairs need equal counts"
            )
        for (fp, ok1), (tp, ok0) in zip(by_label["1"], by_label["0"], strict=True):
            if not (ok1 and ok0) or norm(fp["prompt"]) == norm(tp["prompt"]):
                continue
            if not falseqa_partners(fp["prompt"], tp["prompt"]):
                unpaired += 1
                continue
            if {norm(fp["prompt"]), norm(tp["prompt"])} & used:
                continue
            used |= {norm(fp["prompt"]), norm(tp["prompt"])}
            pair_pool.append((fp, tp))
    rng = random.Random(seed)
    if pairs:
        print(f"FalseQA: {len(pair_pool)} usable minimal pairs; {unpaired} partners share under "
              "30% of their words and were left out")  # fmt: skip
        if len(pair_pool) < n:
            raise DataError(f"FalseQA has only {len(pair_pool)} usable minimal pairs, not {n}")
        return sorted([r for pr in rng.sample(pair_pool, n) for r in pr], key=lambda r: r["id"])
    if min(len(p) for p in pools.values()) < n:
        raise DataError(f"FalseQA has only {min(map(len, pools.values()))} usable rows per label")
    return sorted([r for p in pools.values() for r in rng.sample(p, n)], key=lambda r: r["id"])


def write(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description="Build data/sft/ for sft.py.")
    p.add_argument("--falseqa", type=int, default=0, help="also write N + N FalseQA records")
    p.add_argument("--seed", type=int, default=0, help="seed of the FalseQA draw")
    p.add_argument(
        "--pairs", action="store_true",
        help="draw --falseqa N as N minimal pairs (a false premise and its true-premise edit)",
    )  # fmt: skip
    p.add_argument("--out", type=Path, default=OUT, help="output folder (default data/sft)")
    a = p.parse_args(argv)
    if a.falseqa < 0:
        raise errors.UserError(
            f"--falseqa {a.falseqa}: give a count >= 0 (0 writes no FalseQA file)"
        )
    output_folder(a.out)
    texts = (eval_prompts(), grader_texts())  # read once for both files
    records = written_records(texts)
    twin = twin_records(records, texts)
    if a.pairs and not a.falseqa:
        raise errors.UserError("--pairs without --falseqa N: give the number of pairs to draw")
    extra = falseqa_records(a.falseqa, a.seed, a.pairs) if a.falseqa else []
    write(a.out / "written.jsonl", records)
    counts = {c: sum(r["category"] == c for r in records) for c in CATEGORIES}
    print(f"wrote {a.out / 'written.jsonl'}: {len(records)} records {counts}")
    write(a.out / "twins.jsonl", twin)
    print(f"wrote {a.out / 'twins.jsonl'}: {len(twin)} answers to true twins (minimal pairs)")
    if extra:
        write(a.out / "falseqa.jsonl", extra)
        print(f"wrote {a.out / 'falseqa.jsonl'}: {len(extra)} records (not for the repository)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
