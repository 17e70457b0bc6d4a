"""A read set: held-out answers of several models, sampled blind for a person to label, and the
figures those labels give per model.

Where no grader holds on a model's text (knowledge/evaluation.md: grader v2 calls over half of
the warm-started policy's plain answers pushback), a model's figures come from reading its
answers. `sample` takes the file of `evaluate.py --answers-out`, draws `--per-category` prompts
of each category (seeded) that every model answered, and writes DIR/answers.jsonl (every model's
first answer to each drawn prompt, shuffled together, ids `read-0000`...: no model name, so the
reader labels blind) and DIR/key.jsonl (id -> model and prompt id). The reader writes
DIR/labels.jsonl in the gold scheme (data/gold/LABEL_SCHEME.md: id, label, pushback, engages,
reason; gold.load_gold checks it). `figures` joins the three and reports per model and category
the share of answers that push back (corrects_premise or flags_nonsense: on control prompts that
is needless pushback), that are broken, and on curiosity prompts that engage, with Wilson
intervals, and each later model's paired difference from the first model on the same prompts
(bootstrap over prompts).

    uv run python -m evals.read_set sample --answers runs/answers.jsonl --per-category 12 --out
    reads/x uv run python -m evals.read_set figures --dir reads/x --json
"""

import argparse
import random
import sys
from pathlib import Path

from core import errors, stats, strict_json
from core.jsonl import DataError, data_error, read_jsonl, write_jsonl
from core.prompts import CATEGORIES

from evals import gold

READ_FIELDS = {k: gold.ANSWER_FIELDS[k] for k in ("id", "category", "prompt", "answer")}
KEY_FIELDS = ("id", "model", "prompt_id", "model_rank")


def load_answers(path) -> list[dict]:
    """evaluate.py --answers-out rows; DataError naming the line of a malformed one."""
    values, errors = read_jsonl(path, "write it with evaluate.py --answers-out")
    rows = []
    need = ("model", "id", "category", "prompt", "sample", "answer")
    for n, row in values:
        missing = [k for k in need if not isinstance(row, dict) or k not in row]
        if missing:
            errors.append((n, f"missing {missing}; write it with evaluate.py --answers-out"))
        elif row["category"] not in CATEGORIES:
            errors.append((n, f"category {row['category']!r} not in {CATEGORIES}"))
        else:
            rows.append(row)
    if errors:
        raise data_error(path, errors)
    return rows


def sample(
    rows: list[dict], per_category: int, seed: int, prefix: str = "read"
) -> tuple[list[dict], list[dict]]:
    """(blind answers, key): `per_category` prompts per category answered by every model, each
    model's first answer to each, shuffled with `seed`; ids `{prefix}-0000`... The prompts drawn
    depend only on the prompt ids and the seed, so a later model's answers sampled with the same
    seed are to the same prompts (a second read set beside the first). ValueError when a
    category has fewer such prompts than asked."""
    if per_category < 1:
        raise ValueError(f"--per-category {per_category}: must be >= 1")
    models = list(dict.fromkeys(r["model"] for r in rows))
    first = {(r["model"], r["id"]): r for r in rows if r["sample"] == 0}
    prompts = {}
    for r in rows:
        prompts.setdefault(r["id"], r)
    rng = random.Random(seed)
    chosen = []
    for cat in CATEGORIES:
        ids = sorted(i for i, r in prompts.items() if r["category"] == cat
                     and all((m, i) in first for m in models))  # fmt: skip
        if not ids:
            continue
        if len(ids) < per_category:
            raise ValueError(
                f"category {cat!r} has {len(ids)} prompts answered by every model, fewer than "
                f"--per-category {per_category}"
            )
        chosen += rng.sample(ids, per_category)
    items = [(m, i) for i in chosen for m in models]
    rng.shuffle(items)
    blind, key = [], []
    for k, (m, i) in enumerate(items):
        r = first[(m, i)]
        rid = f"{prefix}-{k:04d}"
        blind.append({"id": rid, "category": r["category"], "prompt": r["prompt"],
                      "answer": r["answer"]})  # fmt: skip
        key.append({"id": rid, "model": m, "prompt_id": i, "model_rank": models.index(m)})
    return blind, key


def load_key(path) -> dict[str, dict]:
    values, errors = read_jsonl(path, "rewrite it with `sample`")
    out = {}
    for n, row in values:
        if not isinstance(row, dict) or any(k not in row for k in KEY_FIELDS):
            errors.append((n, f"needs {KEY_FIELDS}; rewrite it with `sample`"))
        else:
            out[row["id"]] = row
    if errors:
        raise data_error(path, errors)
    return out


def figures(labelled: list[dict], key: dict[str, dict]) -> dict:
    """Per model (in the key's order) and category: n, pushback, broken, label shares,
    engagement (curiosity), each a gold.rate (Wilson); `vs_first`: each later model's paired
    difference in pushback (and engagement) from the first model on the same prompts."""
    missing = [r["id"] for r in labelled if r["id"] not in key]
    if missing:
        raise DataError(f"labelled ids {missing[:3]} are not in the key; use the sample's key")
    rank = {}  # a model's place: its read set's order, then its place in evaluate's answers file
    for r in labelled:
        k = key[r["id"]]
        rank.setdefault(k["model"], (k.get("set", 0), k["model_rank"]))
    models = sorted(rank, key=rank.get)
    out = {"models": models, "by_model": {}, "vs_first": {}}
    per = {}  # (model, category) -> {prompt_id: labelled row}
    for r in labelled:
        k = key[r["id"]]
        per.setdefault((k["model"], r["category"]), {})[k["prompt_id"]] = r
    for m in models:
        out["by_model"][m] = {}
        for cat in CATEGORIES:
            rs = list(per.get((m, cat), {}).values())
            if not rs:
                continue
            fig = {
                "n": len(rs),
                "pushback": gold.rate(sum(r["pushback"] for r in rs), len(rs)),
                "broken": gold.rate(sum(r["label"] == "broken" for r in rs), len(rs)),
                "labels": {lab: sum(r["label"] == lab for r in rs) for lab in gold.LABELS},
            }
            if cat == "curiosity":
                fig["engages"] = gold.rate(sum(bool(r["engages"]) for r in rs), len(rs))
            out["by_model"][m][cat] = fig
    first = models[0]
    for m in models[1:]:
        out["vs_first"][m] = {}
        for cat in CATEGORIES:
            a, b = per.get((first, cat), {}), per.get((m, cat), {})
            ids = sorted(set(a) & set(b))
            if not ids:
                continue
            names = ("pushback", "engages") if cat == "curiosity" else ("pushback",)
            d = {
                name: stats.paired_diff(
                    [float(bool(a[i][name])) for i in ids], [float(bool(b[i][name])) for i in ids]
                )
                for name in names
            }
            out["vs_first"][m][cat] = d
    return out


def _cell(r: dict) -> str:
    lo, hi = r["ci95"]
    return f"{r['value']:.2f} [{lo:.2f}, {hi:.2f}] ({r['k']}/{r['n']})"


def table(result: dict) -> str:
    """Markdown: one row per category and figure, one column per model."""
    models = result["models"]
    lines = ["| category: figure | " + " | ".join(models) + " |",
             "|---|" + "---|" * len(models)]  # fmt: skip
    for cat in CATEGORIES:
        for name in ("pushback", "broken", "engages"):
            cells = [result["by_model"][m].get(cat, {}).get(name) for m in models]
            if all(c is None for c in cells):
                continue
            shown = ["-" if c is None else _cell(c) for c in cells]
            lines.append(f"| {cat}: {name} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description="Blind read sets of model answers, and their figures."
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser(
        "sample", allow_abbrev=False, help="draw a blind read set from evaluate.py --answers-out"
    )
    s.add_argument("--answers", required=True, help="evaluate.py --answers-out FILE")
    s.add_argument("--per-category", type=int, default=12, help="prompts per category")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True, help="folder for answers.jsonl and key.jsonl")
    s.add_argument("--id-prefix", default="read", help="answer ids PREFIX-0000... (unique per set)")
    f = sub.add_parser("figures", allow_abbrev=False, help="per-model figures from DIR's labels")
    f.add_argument(
        "--dir",
        action="append",
        required=True,
        help="a sample's folder with labels.jsonl (repeat to join read sets of the same prompts)",
    )
    f.add_argument("--json", action="store_true", help="print one JSON object")
    return p


@errors.cli
def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    with errors.as_user_error(ValueError):  # the files, the folders and --per-category
        if a.command == "sample":
            blind, key = sample(load_answers(a.answers), a.per_category, a.seed, a.id_prefix)
            out = Path(a.out)
            out.mkdir(parents=True, exist_ok=True)
            if (out / "labels.jsonl").exists():
                raise ValueError(f"{out}/labels.jsonl exists: sample into a new folder")
            write_jsonl(blind, out / "answers.jsonl")
            write_jsonl(key, out / "key.jsonl")
            print(f"{len(blind)} answers to label in {out / 'answers.jsonl'} (blind; the key is "
                  f"{out / 'key.jsonl'}); write {out / 'labels.jsonl'}")  # fmt: skip
            return 0
        labelled, key = [], {}
        for n, d in enumerate(map(Path, a.dir)):
            for name in ("answers.jsonl", "key.jsonl", "labels.jsonl"):
                if not (d / name).is_file():
                    raise FileNotFoundError(f"{d / name} not found: run `sample`, then label")
            rows = gold.load_gold(d / "answers.jsonl", d / "labels.jsonl", READ_FIELDS)
            clash = sorted({r["id"] for r in rows} & set(key))
            if clash:
                raise ValueError(f"{d}: ids {clash[:3]} also in an earlier set; use --id-prefix")
            labelled += rows
            key |= {i: {**k, "set": n} for i, k in load_key(d / "key.jsonl").items()}
        result = figures(labelled, key)
    print(strict_json.dumps(result) if a.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
