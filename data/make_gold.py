"""Sample the answers of the gold set (data/gold/answers.jsonl) that a person then labels.

Answers come from the base model and two checkpoints of a GRPO run, on the held-out prompts of
data/eval.jsonl, through the project's own sampler (`Gwen.sample_group`, chat_format's template,
one seed per answer). Three prompting conditions: `plain` is what training and evaluate.py use
(the chat template and the user's question, nothing else); `scrutiny` opens the conversation
with a short system message and four example turns (a premise corrected, two nonsense prompts
flagged, a sound question answered), because the 135M model almost never corrects a premise
or flags nonsense unprompted and a grader's recall needs real corrections to be measured on;
`scrutiny_plus` has eight example turns (rounds 2 and 3: round 1 gave too few nonsense flags).
PLAN says how many answers each (category, model, condition) gets and ROUNDS which round each
pass belongs to; temperatures cycle 0, 0.7, 1.0 over each pass. Deterministic: prompt draws use
`random.Random` seeded from SEED and the pass, each answer's sampling seed is written beside
it, and each round is a seeded shuffle appended after the rounds before it (labels are read
blind to model and condition; adding a round keeps earlier ids). It labels nothing
(data/gold/README.md).

Run from the repo root:  uv run python -m data.make_gold --checkpoints runs/gold_policy/checkpoints
"""

import argparse
import json
import os
import random
import sys
import time

from core import errors
from core.jsonl import output_folder
from core.prompts import EVAL_PROMPTS, load_prompts

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SEED = 20251124
MAX_NEW_TOKENS = 120
TEMPERATURES = (0.0, 0.7, 1.0)
BATCH = 48
CHECKPOINTS = ("step_000008", "step_000016")
BASE = "smollm2-135m"

SCRUTINY_SYSTEM = (
    "Before answering, check whether the question makes sense and whether its assumptions are "
    "true. If a question rests on a false assumption, say so and give the correct facts. If it "
    "makes no sense, say so."
)
# Example turns; none of their topics is among the evaluation prompts.
SCRUTINY_EXAMPLES = (
    (
        "Why did Thomas Edison invent the telephone?",
        "Thomas Edison did not invent the telephone. Alexander Graham Bell patented it in 1876. "
        "Edison is known for the phonograph and for improving the electric light bulb.",
    ),
    (
        "What does the number seven smell like?",
        "That question doesn't make sense: seven is a number, and numbers have no smell.",
    ),
    (
        "Tell me about the history of the Valdrenian Empire.",
        "I don't know of any Valdrenian Empire. As far as I can tell it is not a real place, so "
        "I can't give you its history. Could it be from a novel or a game?",
    ),
    (
        "Why is the sky blue?",
        "Sunlight is scattered by the molecules in the air, and blue light is scattered much more "
        "than red light, so the sky looks blue from every direction.",
    ),
)

# More example turns, for `scrutiny_plus` (round 2): the first round gave too few nonsense
# flags (5 in 100 nonsense answers) to measure a grader's recall on them.
SCRUTINY_PLUS_EXAMPLES = (
    SCRUTINY_EXAMPLES[0],
    (
        "How did Marie Curie win her Nobel Prize for discovering penicillin?",
        "Marie Curie did not discover penicillin; Alexander Fleming did, in 1928. Curie's Nobel "
        "Prizes were for her work on radioactivity and for discovering polonium and radium.",
    ),
    SCRUTINY_EXAMPLES[1],
    (
        "What is the boiling point of a Tuesday morning?",
        "That question doesn't make sense: a Tuesday morning is a time, not a substance, so it "
        "has no boiling point.",
    ),
    (
        "I need three facts about the Quenthar Republic for my report.",
        "I don't know of any Quenthar Republic. As far as I can tell it doesn't exist, so I "
        "can't give you facts about it. Could you check the name?",
    ),
    (
        "List two even numbers that are also odd.",
        "There are none: no whole number is both even and odd, so the list can't be made.",
    ),
    (
        "Blue whereas the fork of seldom running?",
        "I can't make sense of that: it isn't a meaningful question. Could you rephrase it?",
    ),
    SCRUTINY_EXAMPLES[3],
)
CONDITIONS = {  # condition -> (system prompt, example turns)
    "plain": (None, ()),
    "scrutiny": (SCRUTINY_SYSTEM, SCRUTINY_EXAMPLES),
    "scrutiny_plus": (SCRUTINY_SYSTEM, SCRUTINY_PLUS_EXAMPLES),
}

# (category, model, condition, answers): each pass draws that many distinct prompts of the
# category. false_premise and control are over-represented (the grader's recall on corrections
# and its false-positive rate on control answers are the figures the set exists for). ROUNDS
# says which passes belong to which round: round 2 was added after round 1 had been labelled.
PLAN = (
    ("false_premise", BASE, "plain", 36),
    ("false_premise", "step_000008", "plain", 12),
    ("false_premise", "step_000016", "plain", 12),
    ("false_premise", BASE, "scrutiny", 60),
    ("false_premise", "step_000016", "scrutiny", 30),
    ("nonsense", BASE, "plain", 18),
    ("nonsense", "step_000008", "plain", 6),
    ("nonsense", "step_000016", "plain", 6),
    ("nonsense", BASE, "scrutiny", 50),
    ("nonsense", "step_000016", "scrutiny", 20),
    ("control", BASE, "plain", 30),
    ("control", "step_000008", "plain", 10),
    ("control", "step_000016", "plain", 10),
    ("control", BASE, "scrutiny", 35),
    ("control", "step_000016", "scrutiny", 15),
    ("curiosity", BASE, "plain", 24),
    ("curiosity", "step_000008", "plain", 8),
    ("curiosity", "step_000016", "plain", 8),
    ("curiosity", BASE, "scrutiny", 10),
    ("nonsense", BASE, "scrutiny_plus", 60),
    ("false_premise", BASE, "scrutiny_plus", 30),
    ("nonsense", "step_000016", "scrutiny_plus", 24),
)
ROUNDS = (1,) * 19 + (2,) * 2 + (3,)


def plan_rows(records: list[dict], models: set[str], rounds: set[int]) -> list[dict]:
    """One row per answer to sample: prompt record, model, condition, temperature, seed, round.
    Passes whose model or round is not asked for are left out; the others' draws and seeds do
    not depend on which are."""
    by_cat = {}
    for r in records:
        by_cat.setdefault(r["category"], []).append(r)
    rows = []
    for n, ((category, model, condition, count), rnd) in enumerate(zip(PLAN, ROUNDS, strict=True)):
        pool = by_cat.get(category, [])
        if count > len(pool):
            raise ValueError(f"PLAN asks {count} {category} prompts of {len(pool)}; lower it")
        rng = random.Random(f"{SEED}|{category}|{model}|{condition}")
        if model not in models or rnd not in rounds:
            continue
        for i, rec in enumerate(rng.sample(pool, count)):
            rows.append(
                {
                    "record": rec,
                    "model": model,
                    "condition": condition,
                    "temperature": TEMPERATURES[i % len(TEMPERATURES)],
                    "seed": SEED + 1000 * n + i,
                    "round": rnd,
                }
            )
    return rows


def in_order(rows: list[dict]) -> list[dict]:
    """Round by round, each round in its own seeded shuffle (so adding a round keeps the ids of
    the rows before it)."""
    out = []
    for rnd in sorted({r["round"] for r in rows}):
        part = [r for r in rows if r["round"] == rnd]
        random.Random(f"{SEED}|order" + ("" if rnd == 1 else f"|{rnd}")).shuffle(part)
        out += part
    return out


def model_name(model: str) -> str:
    return model if model == BASE else f"gold_policy/{model}"


def sample_rows(gwen, rows: list[dict]) -> list[str]:
    """Answers for rows that share one model and condition, batched by temperature."""
    texts = [None] * len(rows)
    for temp in TEMPERATURES:
        idx = [i for i, r in enumerate(rows) if r["temperature"] == temp]
        for start in range(0, len(idx), BATCH):
            chunk = idx[start : start + BATCH]
            s = gwen.sample_group(
                [rows[i]["record"]["prompt"] for i in chunk],
                1,
                MAX_NEW_TOKENS,
                temperature=temp,
                seed=[rows[i]["seed"] for i in chunk],
            )
            for i, text, done in zip(chunk, s.texts, s.finished, strict=True):
                texts[i] = (text.strip(), bool(done))
    return texts


def appended_after(out: str, earlier: list[dict]) -> int:
    """The first id of the rows --append adds to `out`, which must hold the `earlier` rounds."""
    if not os.path.isfile(out):
        raise errors.UserError(
            f"--append: {out} not found; pass the --out the earlier rounds were written to"
        )
    with open(out, encoding="utf-8") as f:
        have = sum(1 for line in f if line.strip())
    if have != len(earlier):
        raise errors.UserError(
            f"--append: {out} has {have} rows, the earlier rounds {len(earlier)}; pass the --out "
            "they were written to, or sample them first"
        )
    return have + 1


def check_paths(a, checkpoints: set[str]) -> None:
    """--out can be written and the checkpoint folders sampled from exist, before model work."""
    if os.path.isdir(a.out):
        raise errors.UserError(f"--out {a.out} is a folder; give the JSONL file to write")
    output_folder(os.path.dirname(os.path.abspath(a.out)), flag=f"--out {a.out}: its folder")
    for name in sorted(checkpoints):
        if not os.path.isdir(os.path.join(a.checkpoints, name)):
            raise errors.UserError(
                f"--checkpoints {a.checkpoints} has no {name}/; pass the gold_policy run's "
                "checkpoints folder, or --base-only"
            )


@errors.cli
def main(argv=None) -> None:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description="Sample the gold set's answers (labelled by hand)."
    )
    p.add_argument("--prompts", default=os.path.join(ROOT, EVAL_PROMPTS))
    p.add_argument(
        "--checkpoints",
        default=os.path.join(ROOT, "runs/gold_policy/checkpoints"),
        help="folder holding step_000008/ and step_000016/ of the gold_policy run",
    )
    p.add_argument("--base-only", action="store_true", help="sample only the base model's passes")
    p.add_argument("--round", type=int, choices=sorted(set(ROUNDS)), help="sample one round only")
    p.add_argument("--append", action="store_true", help="append the rows to --out (with --round)")
    p.add_argument("--out", default=os.path.join(HERE, "gold", "answers.jsonl"))
    a = p.parse_args(argv)
    records = load_prompts(a.prompts)
    models = {BASE} if a.base_only else {BASE, *CHECKPOINTS}
    rounds = {a.round} if a.round else set(ROUNDS)
    try:
        rows = plan_rows(records, models, rounds)
    except ValueError as e:
        raise errors.UserError(f"--prompts {a.prompts}: {e}, or pass {EVAL_PROMPTS}") from e
    first_id = 1
    if a.append:
        earlier = plan_rows(records, models, {r for r in ROUNDS if r < min(rounds)})
        first_id = appended_after(a.out, earlier)
    check_paths(a, {r["model"] for r in rows} - {BASE})

    from core import backend  # start-up: MLX and the model load after the arguments' check

    from gwen import Gwen  # start-up
    from load_weights import load  # start-up

    backend.announce()
    for model in sorted({r["model"] for r in rows}, key=lambda m: (m != BASE, m)):
        ref = model if model == BASE else os.path.join(a.checkpoints, model)
        weights, tokenizer = load(ref)
        for condition, (system, examples) in CONDITIONS.items():
            part = [r for r in rows if r["model"] == model and r["condition"] == condition]
            if not part:
                continue
            turns = (lambda _prompt, ex=examples: ex) if examples else None
            gwen = Gwen(weights, tokenizer, system_prompt=system, examples=turns)
            start = time.perf_counter()
            for r, (text, done) in zip(part, sample_rows(gwen, part), strict=True):
                r["answer"], r["finished"] = text, done
            took = time.perf_counter() - start
            print(f"{model} {condition}: {len(part)} answers in {took:.0f}s", file=sys.stderr)

    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "a" if a.append else "w", encoding="utf-8") as f:
        for i, r in enumerate(in_order(rows), start=first_id):
            rec = r["record"]
            out = {
                "id": f"gold-{i:04d}",
                "category": rec["category"],
                "prompt": rec["prompt"],
                "answer": r["answer"],
                "model": model_name(r["model"]),
                "condition": r["condition"],
                "temperature": r["temperature"],
                "seed": r["seed"],
                "finished": r["finished"],
                "prompt_id": rec["id"],
            }
            f.write(json.dumps(out, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} answers to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
