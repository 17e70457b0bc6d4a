"""Where would a model's opener gates open on held-out prompts?

A model trained by experiments/opener_gate.py opens a category's answers with a fixed sentence, and
the sentence's probability after a prompt is that category's classifier. This scores each gate on
each --prompts file without generating: per prompt category, `opens` (the share whose p(sentence |
prompt) > 1/2), `greedy_first` (the share where the sentence's first token is the likeliest: greedy
decoding starts it there, the decision the answers show) and the AUROC of log p, the gate's category
against every other. The gate sentences are the ones the model was trained with (its sft.json)
unless --gate names others.

    uv run python -m experiments.gate_eval --model runs/sft/gate26 --prompts data/eval.jsonl \
        --prompts data/eval_external.jsonl

Study: the opener gates, attempts 23-29 (knowledge/learning_run.md; results and their reading
in attempts 23-26).
"""

import argparse
import json
import sys
from pathlib import Path

from core import backend

# isort: split
from core import errors, strict_json
from core.prompts import eval_subset, load_prompts

import mlx.core as mx

from experiments.opener_gate import gate_figures, gate_rows, gate_scores, parse_gates
from load_weights import load


def trained_gates(ref: str) -> list[tuple[str, str]] | None:
    """The gates an experiments/opener_gate.py run was trained with (its sft.json), else None."""
    path = Path(ref) / "sft.json"
    if not path.is_file():
        return None
    gate = json.loads(path.read_text()).get("gate")
    return [(g["category"], g["sentence"]) for g in gate["gates"]] if gate else None


def score(model, tokenizer, records: list[dict], gates) -> dict:
    """gate_figures of `gates` on `records`, with the prompts' count per category."""
    rows, _ = gate_rows(tokenizer, records, gates)
    lp, margins = gate_scores(model, rows, tokenizer.eos_token_id)
    cats = [r["category"] for r in records]
    figs = gate_figures(lp, cats, gates, margins)
    return {"n": {c: cats.count(c) for c in dict.fromkeys(cats)}, "gates": figs}


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", required=True, help="model reference (repeatable)")
    p.add_argument("--prompts", action="append", required=True, help="prompt file (repeatable)")
    p.add_argument(
        "--gate",
        default=None,
        help='"category=sentence; ..." (default: the gates the model was trained with)',
    )
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="the first N prompts of each file, round-robin over categories",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    if a.limit is not None and a.limit < 1:
        raise errors.UserError(f"--limit {a.limit} must be >= 1")
    given = None
    if a.gate is not None:
        with errors.as_user_error(ValueError):
            given = parse_gates(a.gate)
    specs = {}
    for ref in a.model:
        specs[ref] = given or trained_gates(ref)
        if specs[ref] is None:
            raise errors.UserError(
                f"--model {ref}: no sft.json with gates there; name the sentences with --gate "
                "'category=sentence; ...'"
            )
    files = {f: eval_subset(load_prompts(f), a.limit) for f in a.prompts}  # bad files fail first
    backend.announce()
    result = {"models": []}
    for ref in a.model:
        model, tokenizer = load(ref, mx.float32)  # a margin's sign near 0 wants float32
        per_file = {f: score(model, tokenizer, recs, specs[ref]) for f, recs in files.items()}
        result["models"].append({"model": ref, "gates": dict(specs[ref]), "files": per_file})
    if a.json:
        print(strict_json.dumps(result, indent=1))
        return 0
    for m in result["models"]:
        for cat, text in m["gates"].items():
            print(f"{m['model']}: gate {cat} ({text!r}); greedy_first / opens by category")
            for f, res in m["files"].items():
                g = res["gates"][cat]
                cells = [
                    f"{c} {g['greedy_first'][c]:.2f}/{g['opens'][c]:.2f} (n {res['n'][c]})"
                    for c in g["opens"]
                ]
                print(f"  {f}: AUROC {g['auroc']:.3f}; " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
