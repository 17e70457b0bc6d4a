"""The sampler behind data/reads/ctl_sft (run once from the repo root with PYTHONPATH=.): six
answers (T 0.8, 80 tokens) of the SFT warm start to each of runs/ctl240_prompts.jsonl's 240
control training prompts, each flagged with pushback.opening_negation (the stance term's flag);
draw.py then picks. Kept to show how the set was made (runs/ is not kept)."""

import json

from core import backend  # noqa: F401  (OpenBLAS before mlx)

from tqdm import tqdm

from gwen import Gwen
from rewards.pushback import opening_negation

rows = [json.loads(line) for line in open("runs/ctl240_prompts.jsonl")]
g = Gwen.load("models/sft-smollm2-135m")
with open("runs/ctl240_samples.jsonl", "w") as out:
    for i in tqdm(range(0, len(rows), 8)):
        batch = rows[i : i + 8]
        s = g.sample_group([r["prompt"] for r in batch], 6, 80, temperature=0.8, seed=1000 + i)
        for j, text in enumerate(s.texts):
            r = batch[j // 6]
            rec = {"prompt_id": r["id"], "category": r["category"], "prompt": r["prompt"],
                   "answer": text.strip(), "finished": bool(s.finished[j]),
                   "deny": bool(opening_negation(text, r["prompt"]))}  # fmt: skip
            out.write(json.dumps(rec) + "\n")
