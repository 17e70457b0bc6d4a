"""Build reward-model pairs from the policies' own answers to TRAINING prompts, labelled by reading.

Reward model v2 prefers needless pushback to a plain answer on the policy's own control answers
(stance probes, knowledge/reward_model.md): written pairs never showed it the policy's text. This
turns the labelled read sets of training prompts into same-prompt preference pairs of the wanted
stance over the unwanted one (stance_probes.ORDER: a correction over going along on a false
premise, a flag over answering nonsense, a plain answer over needless pushback on a control):

    data/reads/warm_policy, ctl_disputes_grpo5, policy_runs_fpns, rollouts_stance, ctl_sft
    data/grader/policy_answers*.jsonl, flag_answers*.jsonl   (+ their *_labels*.jsonl)

A prompt that is an evaluation prompt (data/eval.jsonl, data/eval_external.jsonl) stops the build:
the eval read sets measure the result (python -m bench.judge --stance-probes) and never train. A
prompt's split is a hash of its normalized text (a fifth `val`, the rest `train`; no `test`: the
held-out figure is the stance probe on eval read sets). One prompt gives at most --per-prompt pairs
(drawn seeded), so a group of eight answers does not outweigh the rest. Writes
data/rm_read_pairs.jsonl (prompts.load_pairs format, `source` "policy_reads"; --out names the
folder), byte-identical on every run; train with

    uv run python train_rm.py --extra-pairs data/rm_read_pairs.jsonl ...

Run from the repo root:  uv run python -m data.make_rm_read_pairs
"""

import argparse
import hashlib
import json
import random
from collections import Counter
from pathlib import Path

from core import errors
from core.jsonl import DataError, output_folder
from core.prompts import held_out_prompts, load_pairs, norm

from evals import stance_probes
from evals.gold import join_labels

ROOT = Path(__file__).resolve().parents[1]

READ_DIRS = ("warm_policy", "ctl_disputes_grpo5", "policy_runs_fpns", "rollouts_stance", "ctl_sft")
GRADER_FILES = (("policy", ""), ("policy", "2"), ("flag", ""), ("flag", "2"))
KIND = {"false_premise": "misconception", "nonsense": "flag_nonsense",
        "control": "true_premise_pushback"}  # fmt: skip
CRITERION = {"false_premise": "scrutiny", "nonsense": "nonsense", "control": "scrutiny"}
OUT_NAME = "rm_read_pairs.jsonl"


def sources(root: Path = ROOT) -> list[tuple[str, Path, Path, bool]]:
    """(name, answers file, labels file, every answer labelled?) of each source."""
    out = [(d, root / "data/reads" / d / "answers.jsonl", root / "data/reads" / d / "labels.jsonl",
            True) for d in READ_DIRS]  # fmt: skip
    for stem, suffix in GRADER_FILES:
        folder = root / "data/grader"
        out.append((f"{stem}{suffix}", folder / f"{stem}_answers{suffix}.jsonl",
                    folder / f"{stem}_labels{suffix}.jsonl", False))  # fmt: skip
    return out


def split_of(prompt: str) -> str:
    return "val" if int(hashlib.sha256(norm(prompt).encode()).hexdigest(), 16) % 5 == 0 else "train"


def build(rows: list[dict], banned: set[str], per_prompt: int, seed: int) -> list[dict]:
    """Same-prompt pairs (stance_probes.pairs of distinct answers), at most `per_prompt` each,
    in a fixed order, as load_pairs records. ValueError if a prompt is in `banned` (normalized)."""
    held = sorted({r["prompt"] for r in rows if norm(r["prompt"]) in banned})
    if held:
        raise DataError(
            f"{len(held)} read prompts are evaluation prompts (first: {held[0]!r}); "
            "read sets of eval prompts must not train: drop them from the build"
        )
    seen, distinct = set(), []
    for r in rows:
        key = (r["category"], norm(r["prompt"]), r["answer"].strip())
        if r["answer"].strip() and key not in seen:
            seen.add(key)
            distinct.append(r)
    by_prompt: dict[tuple, list[dict]] = {}
    for p in stance_probes.pairs(distinct):
        by_prompt.setdefault((p["category"], p["prompt"]), []).append(p)
    rng, out = random.Random(seed), []
    for (cat, prompt), ps in sorted(by_prompt.items()):
        for p in rng.sample(ps, min(per_prompt, len(ps))):
            out.append({"id": f"read-{KIND[cat]}-{len(out):05d}", "criterion": CRITERION[cat],
                        "category": cat, "prompt": prompt, "better": p["better"],
                        "worse": p["worse"], "kind": KIND[cat], "source": "policy_reads",
                        "split": split_of(prompt)})  # fmt: skip
    return out


@errors.cli
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "data"), help=f"folder for {OUT_NAME}")
    ap.add_argument("--per-prompt", type=int, default=6, help="most pairs one prompt gives")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.per_prompt < 1:
        raise DataError(f"--per-prompt {args.per_prompt}: give at least 1")
    out = output_folder(args.out) / OUT_NAME
    rows = []
    for name, answers, labels, every in sources():
        got, unlabelled = join_labels(answers, labels, every)
        rows += got
        print(f"{name}: {len(got)} labelled answers" + (f" ({unlabelled} unlabelled, left out)"
                                                        if unlabelled else ""))  # fmt: skip
    pairs = build(rows, held_out_prompts(ROOT), args.per_prompt, args.seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs)
    load_pairs(out)  # the trainer's own check
    counts = Counter((p["split"], p["category"]) for p in pairs)
    print(f"wrote {out}: {len(pairs)} pairs", dict(sorted(counts.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
