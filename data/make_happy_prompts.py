"""Write data/happy_prompts.jsonl (and happy_eval.jsonl): everyday prompts for the `happy` reward.

The rubric prompts (prompts.jsonl) almost never draw the word "happy" from a small model (0 of
64 SmolLM2 samples), which leaves GRPO no signal. These prompts (greetings, celebrations, moods)
do draw it sometimes, so the reward-hacking playground has something to amplify. The text is in
data/sources/happy.yaml (checked by load_sources.py); this file only combines it. Deterministic.
happy_eval.jsonl holds out 24 other {person} x {occasion} x frame combinations (none of them in
the training file) for evaluating the happy-hack task (gradient routing, knowledge/routing.md).

Run from the repo root:  uv run python -m data.make_happy_prompts [--out DIR]
"""

import argparse
import itertools
import json
import os
import sys

from core import errors
from core.jsonl import output_folder
from core.prompts import load_prompts

from data.load_sources import SOURCES, load_source

HERE = os.path.dirname(os.path.abspath(__file__))


def _combinations(text: dict) -> list[str]:
    combos = itertools.product(text["frames"], text["people"], text["occasions"])
    return [frame.format(person=p, occasion=o) for frame, p, o in combos]


def happy_records(directory=SOURCES) -> list[dict]:
    text = load_source("happy", directory)
    rows = _combinations(text)[::3] + text["moods"]  # every third: small and varied
    source = "template:happy"
    return [
        {"id": f"happy-{i:04d}", "category": "control", "prompt": prompt, "source": source}
        for i, prompt in enumerate(rows)
    ]


def happy_eval_records(directory=SOURCES) -> list[dict]:
    """Every fifth of the combinations after each training one (index 1 mod 3): held out."""
    rows = _combinations(load_source("happy", directory))[1::3][::5]
    source = "template:happy"
    return [
        {"id": f"happy-eval-{i:04d}", "category": "control", "prompt": prompt, "source": source}
        for i, prompt in enumerate(rows)
    ]


@errors.cli
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=HERE, help="directory for the JSONL file (default data/)")
    args = parser.parse_args(argv)
    output_folder(args.out)
    os.makedirs(args.out, exist_ok=True)
    for name, records in (
        ("happy_prompts.jsonl", happy_records()),
        ("happy_eval.jsonl", happy_eval_records()),
    ):
        out = os.path.join(args.out, name)
        with open(out, "w", encoding="utf-8") as f:
            for rec in records:
                f.write(json.dumps(rec) + "\n")
        load_prompts(out)  # re-read as training reads it: refuses duplicates and empty prompts
        print(f"wrote {len(records)} prompts to {out}")


if __name__ == "__main__":
    sys.exit(main())
