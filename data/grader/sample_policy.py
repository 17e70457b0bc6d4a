"""Sample answers from the policies on TRAINING prompts (data/prompts.jsonl) for the grader's
data: the embedded model and a GRPO checkpoint, seeded; labelled by reading afterwards
(data/grader/policy_labels.jsonl). Never uses evaluation prompts.

  uv run python -m data.grader.sample_policy --checkpoint runs/gold_policy/checkpoints/step_000016

`--system` opens every prompt with a system message (the flags file: a scrutiny instruction that
prompts corrections and nonsense flags into existence, so the grader sees them in the policies'
own words); `--categories` limits the draw; `--exclude FILE` (repeatable) skips every prompt_id
an earlier sampled file used, so the new file's prompts are fresh.
"""

import argparse
import json
import random
import sys
from pathlib import Path

from core import (
    backend,  # noqa: F401  (loads OpenBLAS before mlx)
    flags,
)
from core.prompts import CATEGORIES, load_prompts

from gwen import Gwen

ROOT = Path(__file__).resolve().parents[2]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True, help="a trained checkpoint beside the base")
    p.add_argument("--base", default="smollm2-135m", help="the first model sampled")
    p.add_argument("--per-category", type=int, default=15, help="prompts per category and model")
    p.add_argument("--max-new-tokens", type=int, default=100, help="tokens per answer")
    p.add_argument("--out", default=str(ROOT / "data/grader/policy_answers.jsonl"))
    p.add_argument("--temperatures", default="0.7,1.0", help="base's and checkpoint's")
    p.add_argument("--seed", type=int, default=7, help="prompt choice (7: the first file)")
    p.add_argument("--id-prefix", default="pol")
    p.add_argument("--system", default=None, help="system message opening every prompt")
    p.add_argument("--categories", default=",".join(CATEGORIES), help="comma-separated")
    p.add_argument("--exclude", action="append", default=[], metavar="FILE",
                   help="a JSONL file whose prompt_id values are not drawn again")  # fmt: skip
    flags.renamed(p, "--max-tokens", "--max-new-tokens")  # the project's one spelling
    a = p.parse_args(argv)
    cats = a.categories.split(",")
    if bad := [c for c in cats if c not in CATEGORIES]:
        p.error(f"--categories: unknown {bad}; known {list(CATEGORIES)}")
    used = {json.loads(x).get("prompt_id") for f in a.exclude for x in Path(f).open()}
    records = [r for r in load_prompts(ROOT / "data/prompts.jsonl") if r["id"] not in used]
    rng = random.Random(a.seed)
    t_base, t_ckpt = (float(t) for t in a.temperatures.split(","))
    out = []
    for m, (ref, temp) in enumerate([(a.base, t_base), (a.checkpoint, t_ckpt)]):
        gwen = Gwen.load(ref, system_prompt=a.system)
        for cat in cats:
            pool = [r for r in records if r["category"] == cat]
            chosen = rng.sample(pool, a.per_category)
            s = gwen.sample_group(
                [r["prompt"] for r in chosen],
                1,
                a.max_new_tokens,
                temp,
                seed=[
                    1000 * m + i + (0 if a.seed == 7 else 100 * a.seed) for i in range(len(chosen))
                ],
            )
            for r, text, fin in zip(chosen, s.texts, s.finished, strict=True):
                out.append(
                    {
                        "id": f"{a.id_prefix}-{len(out):04d}",
                        "category": cat,
                        "prompt": r["prompt"],
                        "answer": text,
                        "model": "base" if ref == "smollm2-135m" else ref,
                        "temperature": temp,
                        "prompt_id": r["id"],
                        "finished": bool(fin),
                        **({"system": a.system} if a.system else {}),
                    }
                )
    Path(a.out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out))
    print(f"{len(out)} answers -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
