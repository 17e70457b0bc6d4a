"""Draw data/reads/stance21_minimal_pairs: greedy answers (80 new tokens) of the SFT warm start
(models/sft-smollm2-135m) and of attempt 21's stance-contrast model (runs/sft/stance21) to both
halves of 20 of the 75 held-out minimal pairs (fold 0 of 4 by claim, seed 0; never trained on),
the 20 drawn with random.Random(23), the 80 answers shuffled. The answers came from
`evaluate.py --model ... --model ... --prompts runs/held21_prompts.jsonl --max-new-tokens 80
--grader none --reward happy --no-kl --answers-out runs/held21_answers.jsonl` (runs/ is not kept:
this script shows how the set was drawn). key.jsonl maps each answer to its model and prompt.
Run once, 2026-11-28, session 23."""

import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
rows = [json.loads(line) for line in (ROOT / "runs/held21_answers.jsonl").open()]
false_ids = sorted({r["id"] for r in rows if r["id"].startswith("fp-")})
pick = set(random.Random(23).sample(false_ids, 20))
chosen = [r for r in rows if r["id"] in pick or r["id"].replace("tw-", "fp-") in pick]
random.Random(24).shuffle(chosen)
with open(HERE / "answers.jsonl", "w", encoding="utf-8") as a, open(HERE / "key.jsonl", "w") as k:
    for i, r in enumerate(chosen):
        rid = f"read23-{i:04d}"
        rec = {"id": rid, "category": r["category"], "prompt": r["prompt"], "answer": r["answer"]}
        a.write(json.dumps(rec, ensure_ascii=False) + "\n")
        k.write(json.dumps({"id": rid, "model": r["model"], "prompt_id": r["id"]}) + "\n")
print(len(chosen), "answers to", 2 * len(pick), "prompts")
