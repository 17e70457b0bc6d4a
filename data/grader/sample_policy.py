"""Sample answers from the policies on TRAINING prompts (data/prompts.jsonl) for the grader's
data: the embedded model and a GRPO checkpoint, seeded; labelled by reading afterwards
(data/grader/policy_labels.jsonl). Never uses evaluation prompts.

  uv run python data/grader/sample_policy.py --checkpoint runs/gold_policy/checkpoints/step_000016
"""

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import backend  # noqa: E402,F401

from gwen import Gwen  # noqa: E402
from prompts import CATEGORIES, load_prompts  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True, help="a trained checkpoint beside the base")
    p.add_argument("--per-category", type=int, default=15, help="prompts per category and model")
    p.add_argument("--max-tokens", type=int, default=100)
    p.add_argument("--out", default=str(ROOT / "data/grader/policy_answers.jsonl"))
    p.add_argument("--temperatures", default="0.7,1.0", help="base's and checkpoint's")
    p.add_argument("--seed", type=int, default=7, help="prompt choice (7: the first file)")
    p.add_argument("--id-prefix", default="pol")
    a = p.parse_args(argv)
    records = load_prompts(ROOT / "data/prompts.jsonl")
    rng = random.Random(a.seed)
    t_base, t_ckpt = (float(t) for t in a.temperatures.split(","))
    out = []
    for m, (ref, temp) in enumerate([("smollm2-135m", t_base), (a.checkpoint, t_ckpt)]):
        gwen = Gwen.load(ref)
        for cat in CATEGORIES:
            pool = [r for r in records if r["category"] == cat]
            chosen = rng.sample(pool, a.per_category)
            s = gwen.sample_group(
                [r["prompt"] for r in chosen],
                1,
                a.max_tokens,
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
                        "model": "base" if m == 0 else "grpo-step16",
                        "temperature": temp,
                        "prompt_id": r["id"],
                        "finished": bool(fin),
                    }
                )
    Path(a.out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out))
    print(f"{len(out)} answers -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
