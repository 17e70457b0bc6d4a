"""Draw data/reads/ctl_sft/answers.jsonl: answers of the SFT warm start (models/sft-smollm2-135m,
T 0.8, 80 new tokens, six per prompt, seed 1000 + batch offset) to 240 control training prompts
that no earlier read set holds (120 from data/prompts.jsonl, 120 true twins from
data/twins.jsonl, drawn with random.Random(29)). Per prompt at most four answers: two whose
opening the stance term flags as a negation (pushback.opening_negation) and two it does not,
where the six have both, so that same-prompt pairs of needless pushback and a plain answer are
common once read; otherwise two answers. Run once, 2026-11-28, session 20 (runs/ is not kept):
kept to show how the set was drawn. The sampler was a short script around Gwen.sample_group."""

import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
rng = random.Random(31)
groups: dict[str, list[dict]] = {}
for line in (ROOT / "runs/ctl240_samples.jsonl").open():
    r = json.loads(line)
    groups.setdefault(r["prompt_id"], []).append(r)
out = []
for pid in sorted(groups):
    rows = groups[pid]
    seen, distinct = set(), []
    for r in rows:
        if r["answer"] and r["answer"] not in seen:
            seen.add(r["answer"])
            distinct.append(r)
    deny = [r for r in distinct if r["deny"]]
    plain = [r for r in distinct if not r["deny"]]
    pick = rng.sample(deny, min(2, len(deny))) + rng.sample(plain, min(2, len(plain)))
    if not (deny and plain):
        pick = rng.sample(distinct, min(2, len(distinct)))
    out += pick
rng.shuffle(out)
with open(ROOT / "data/reads/ctl_sft/answers.jsonl", "w", encoding="utf-8") as f:
    for i, r in enumerate(out):
        rec = {"id": f"ctl-sft-{i:04d}", "prompt_id": r["prompt_id"], "category": r["category"],
               "prompt": r["prompt"], "answer": r["answer"], "finished": r["finished"]}  # fmt: skip
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
print(len(out), "answers from", len(groups), "prompts")
