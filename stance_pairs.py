"""The stance contrast (sft.py --stance-pairs): minimal pairs (a false premise and its true
twin) split by claim, the SFT records that go with them, and a loss that scores one stance
sentence after each half and pays only the difference (knowledge/sft.md).
"""

from core.forced import make_batch, row_logprob
from core.prompts import claim_groups, fold_of_groups, load_prompts, minimal_pairs

import mlx.core as mx


def stance_split(files: str, folds: int, holdout: int, seed: int) -> tuple[list, list]:
    """(training pairs, held-out pairs) of the minimal pairs in `files`, split by claim group
    (prompts.claim_groups, the folds premise_probe.py uses): fold `holdout` of `folds` is held
    out."""
    pairs = minimal_pairs(load_prompts(files))
    fold = fold_of_groups(claim_groups(pairs), folds, seed)
    train = [p for p, f in zip(pairs, fold, strict=True) if f != holdout]
    held = [p for p, f in zip(pairs, fold, strict=True) if f == holdout]
    return train, held


def stance_records(records: list[dict], text: str, held: list) -> tuple[list[dict], int]:
    """The SFT records with every false-premise answer opened by the stance sentence (so the
    sentence the contrast moves is the one a correction begins with), less the records whose
    prompt is a held-out pair's half (so the held-out fold stays untrained); (records, dropped)."""
    held_texts = {r["prompt"].strip() for pair in held for r in pair}
    kept = [r for r in records if r["prompt"].strip() not in held_texts]
    opened = [
        r | {"answer": f"{text.strip()} {r['answer'].strip()}"}
        if r["category"] == "false_premise"
        else r
        for r in kept
    ]
    return opened, len(records) - len(kept)


def stance_contrast(model, rows: list, pad_id: int, beta: float) -> tuple[mx.array, mx.array]:
    """(mean softplus(-beta * margin), margins) over pairs [(false row, twin row)], margin =
    log p(sentence | false premise) - log p(sentence | its twin). Both halves score the same
    tokens, so saying the sentence more (or less) after every prompt leaves it unchanged."""
    batch = make_batch([r for r, _ in rows] + [t for _, t in rows], pad_id)
    s = row_logprob(model, *batch)
    margins = s[: len(rows)] - s[len(rows) :]
    return mx.mean(mx.logaddexp(0.0, -beta * margins)), margins
