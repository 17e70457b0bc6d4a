"""Write gate prompts from other sources for the opener gate's --gate-prompts (never committed).

The opener gate learns its decision on the prompts it is given (experiments/opener_gate.py). Trained
on our own prompt files only, its threshold did not travel: the nonsense gate opened on about half
of the external evaluation set's controls (knowledge/learning_run.md, attempts 23 and 25). This
writes prompts in other styles for the gate to learn from, as prompt records {"id", "category",
"prompt", "source"[, "pair"]}:

- CoCoNot's contrast preference prompts (../shared/datasets/coconot/coconot_pref.jsonl, MIT):
  prompts that only look problematic and should be answered plainly -> control;
- FalseQA's train split (../shared/datasets/falseqa/train.csv, no license: read here, never
  copied into the repository): N minimal pairs, a false-premise question (-> false_premise) and
  FalseQA's true-premise edit of it (-> control, `pair` naming the false one, so the gate's split
  keeps the two together). The k-th label-0 row is the k-th label-1 row's partner; a partner
  sharing under 30% of the words is not a pair (counted, printed).

No prompt of an evaluation file (prompts.held_out_prompts), of the gold set or of the project's
own training prompt files is written. Deterministic given --seed.

Run from the repo root:
    uv run python -m data.make_gate_prompts --out runs/gate_prompts_other.jsonl
"""

import argparse
import collections
import csv
import json
import random
import sys
from pathlib import Path

from core import errors
from core.jsonl import DataError
from core.prompts import load_prompts, norm

from data.make_sft import SHARED, eval_prompts, falseqa_partners

ROOT = Path(__file__).resolve().parent.parent

OWN = "data/prompts.jsonl,data/twins_v2.jsonl"


def excluded() -> set[str]:
    """Normalized prompts no gate file may hold: held-out, gold and our own training prompts."""
    own = {norm(r["prompt"]) for r in load_prompts(",".join(str(ROOT / f) for f in OWN.split(",")))}
    return eval_prompts() | own


def coconot_controls(shared: Path, skip: set[str]) -> list[dict]:
    out = []
    for line in (shared / "coconot" / "coconot_pref.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        q = " ".join(row["prompt"].split())
        if not q or norm(q) in skip:
            continue
        skip.add(norm(q))
        out.append({"id": f"cocopref-{row['id']}", "category": "control", "prompt": q,
                    "source": "coconot_pref"})  # fmt: skip
    return out


def falseqa_pairs(shared: Path, n: int, seed: int, skip: set[str]) -> list[dict]:
    path = shared / "falseqa" / "train.csv"
    by_label = {"1": [], "0": []}
    for i, row in enumerate(csv.DictReader(path.open(encoding="utf-8"))):
        by_label[row["label"]].append((i, " ".join(row["question"].split())))
    if len(by_label["1"]) != len(by_label["0"]):
        raise DataError(
            f"{path}: {len(by_label['1'])} false-premise rows but {len(by_label['0'])} "
            "true-premise rows; FalseQA's pairs need equal counts"
        )
    pool, unpaired = [], 0
    for (i, fq), (j, tq) in zip(by_label["1"], by_label["0"], strict=True):
        if not fq or not tq or norm(fq) == norm(tq) or {norm(fq), norm(tq)} & skip:
            continue
        if not falseqa_partners(fq, tq):
            unpaired += 1
            continue
        pool.append(((i, fq), (j, tq)))
    print(f"FalseQA train: {len(pool)} usable minimal pairs; {unpaired} partners share under 30% "
          "of their words and were left out")  # fmt: skip
    if len(pool) < n:
        raise DataError(f"FalseQA has only {len(pool)} usable minimal pairs, not {n}")
    out = []
    for (i, fq), (j, tq) in random.Random(seed).sample(pool, n):
        if {norm(fq), norm(tq)} & skip:  # a question FalseQA wrote twice
            continue
        skip |= {norm(fq), norm(tq)}
        fid = f"fqa-train-{i:04d}"
        out.append({"id": fid, "category": "false_premise", "prompt": fq, "source": "falseqa"})
        out.append({"id": f"fqa-train-{j:04d}", "category": "control", "prompt": tq,
                    "source": "falseqa", "pair": fid})  # fmt: skip
    return out


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="JSONL to write (outside git: FalseQA's rows)")
    p.add_argument("--falseqa-pairs", type=int, default=300, help="FalseQA minimal pairs drawn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shared", default=str(SHARED), help="the shared datasets folder")
    a = p.parse_args(argv)
    if a.falseqa_pairs < 0:
        raise errors.UserError(f"--falseqa-pairs {a.falseqa_pairs}: give a count >= 0")
    for path in (
        Path(a.shared) / "coconot" / "coconot_pref.jsonl",
        Path(a.shared) / "falseqa" / "train.csv",
    ):
        if not path.is_file():
            raise DataError(f"{path} not found: name the shared datasets folder with --shared")
    out = Path(a.out)
    if out.suffix != ".jsonl":
        raise errors.UserError(f"--out {a.out}: name a .jsonl file (--gate-prompts reads JSONL)")
    if (ROOT / "data") in out.resolve().parents:
        raise errors.UserError(
            f"--out {a.out}: FalseQA states no license, so its rows stay out of data/; "
            "write under runs/"
        )
    skip = excluded()
    records = coconot_controls(Path(a.shared), skip)
    if a.falseqa_pairs:
        records += falseqa_pairs(Path(a.shared), a.falseqa_pairs, a.seed, skip)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    load_prompts(str(out))  # the file must load as sft.py will read it
    counts = dict(collections.Counter(r["category"] for r in records))
    print(f"wrote {len(records)} prompts to {out}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
