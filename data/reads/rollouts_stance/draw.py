"""Draw data/reads/rollouts_stance/answers.jsonl from the rollouts of GRPO attempts 14-16
(runs/values_sft_grpo11-13/rollouts.sqlite, training prompts, T 0.8): one group per prompt
(control prompts: only those no earlier read set holds; false-premise and nonsense prompts were
nearly all read before, from other runs' answers), four answers each, two whose opening the
run's stance term flagged as a denial and two it did not (where the group has them), so same-
prompt pairs of the wanted and unwanted stance are common. Run once, 2026-11-27 (runs/ is not
kept): kept to show how the set was drawn."""

import json
import random
import sqlite3
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
QUOTA = {"control": 45, "false_premise": 40, "nonsense": 20}
rng = random.Random(23)
seen = set()
for d in (ROOT / "data/reads").iterdir():
    if (d / "answers.jsonl").is_file() and d.name != "rollouts_stance":
        seen |= {json.loads(line).get("prompt_id") for line in (d / "answers.jsonl").open()}
for f in (
    "data/grader/policy_answers.jsonl",
    "data/grader/policy_answers2.jsonl",
    "data/grader/flag_answers.jsonl",
    "data/grader/flag_answers2.jsonl",
):
    seen |= {json.loads(line).get("prompt_id") for line in (ROOT / f).open()}
groups = {}
for run in ("values_sft_grpo11", "values_sft_grpo12", "values_sft_grpo13"):
    con = sqlite3.connect(ROOT / "runs" / run / "rollouts.sqlite")
    for step, pid, cat, prompt, text, scores, fin in con.execute(
        "select step, prompt_id, category, prompt, completion, scores, finished from rollouts"
    ):
        if cat in QUOTA and (cat != "control" or pid not in seen):
            deny = json.loads(scores).get("stance/disputes", 0.0) > 0.5
            groups.setdefault(pid, {}).setdefault((run, step), []).append(
                (deny, cat, prompt, text.strip(), bool(fin))
            )
out = []
for cat, n in QUOTA.items():
    pids = sorted(p for p, g in groups.items() if next(iter(g.values()))[0][1] == cat)

    def mixed(p):
        return any(len({a[0] for a in rows}) == 2 for rows in groups[p].values())

    pids = sorted(pids, key=lambda p: (not mixed(p), rng.random()))[:n]
    for pid in pids:
        key = sorted(
            groups[pid], key=lambda k: (len({a[0] for a in groups[pid][k]}) < 2, rng.random())
        )[0]
        rows = groups[pid][key]
        pick = [a for a in rows if a[0]][:2] + [a for a in rows if not a[0]]
        pick = (pick + [a for a in rows if a not in pick])[:4]
        for _deny, c, prompt, text, fin in pick:
            out.append(
                {
                    "prompt_id": pid,
                    "category": c,
                    "prompt": prompt,
                    "answer": text,
                    "run": key[0],
                    "step": key[1],
                    "finished": fin,
                }
            )
rng.shuffle(out)
with open(ROOT / "data/reads/rollouts_stance/answers.jsonl", "w") as f:
    for i, r in enumerate(out):
        f.write(json.dumps({"id": f"rst-{i:04d}", **r}) + "\n")
print(len(out), {c: sum(r["category"] == c for r in out) for c in QUOTA})
