"""The stance contrast: minimal pairs (a false premise and its true twin) split by claim, the SFT
records that go with them, and a loss that scores one stance sentence after each half and pays
only the difference (knowledge/sft.md). It is SFT with an extra term (`StanceContrast`,
sft.ExtraLoss): the command takes every sft.py flag and the contrast's own.

    uv run python -m experiments.stance_pairs --model models/sft-smollm2-135m \
        --data data/sft/written.jsonl --stance-pairs data/prompts.jsonl,data/twins_v2.jsonl \
        --epochs 2 --max-answer-tokens 90

Study: attempt 21, the stance contrast (knowledge/learning_run.md; its model,
models/candidates/stance-candidate-a21).
"""

import sys
from dataclasses import asdict, dataclass

from core import (
    backend,  # noqa: F401
    errors,
    flags,
)
from core.forced import encode, make_batch, row_logprob
from core.pairs import claim_groups, fold_of_groups, minimal_pairs
from core.prompts import load_prompts, step_indices

import mlx.core as mx
import numpy as np

import sft

_f = flags.option


@dataclass
class StanceConfig:
    stance_pairs: str = _f(
        "data/prompts.jsonl,data/twins_v2.jsonl",
        "prompt files with minimal pairs (a false premise and its true twin, `pair`)",
    )
    stance_text: str = _f("That premise is false.", "the stance sentence the contrast scores")
    stance_weight: float = _f(1.0, "weight of the stance contrast beside the SFT loss")
    stance_beta: float = _f(1.0, "scale of the log-prob margin inside the contrast's softplus")
    stance_batch: int = _f(8, "minimal pairs per optimizer step")
    stance_folds: int = _f(4, "folds of the pairs by claim group; one is held out")
    stance_holdout: int = _f(0, "the held-out fold: its pairs and SFT records never trained on")

    def __post_init__(self):
        if not self.stance_pairs.strip():
            raise ValueError("stance_pairs is empty: name the prompt files with minimal pairs")
        if self.stance_batch < 1:
            raise ValueError(f"stance_batch={self.stance_batch} must be >= 1")
        if self.stance_folds < 2 or not 0 <= self.stance_holdout < self.stance_folds:
            raise ValueError(
                f"stance_folds={self.stance_folds}, stance_holdout={self.stance_holdout}: "
                "need >= 2 folds and a held-out fold in 0..folds-1"
            )
        if not self.stance_text.strip():
            raise ValueError("stance_text is empty: give the sentence the contrast scores")
        if not (self.stance_weight > 0 and self.stance_beta > 0):
            raise ValueError(
                f"stance_weight={self.stance_weight}, stance_beta={self.stance_beta}: both "
                "must be > 0 (plain SFT is sft.py)"
            )


class StanceContrast(sft.ExtraLoss):
    """The contrast as SFT's extra term: the pairs split by claim with one fold held out, the
    SFT records opened and the held-out ones dropped (stance_records), and per step the
    contrast on --stance-batch training pairs, weighted by --stance-weight."""

    name = "stance"

    def __init__(self, cfg: StanceConfig, sft_cfg: sft.SFTConfig):
        self.cfg, self.seed, self.weight = cfg, sft_cfg.seed, cfg.stance_weight

    def config(self) -> dict:
        return asdict(self.cfg)

    def records(self, records: list[dict]) -> list[dict]:
        c = self.cfg
        self.pairs, self.held = stance_split(
            c.stance_pairs, c.stance_folds, c.stance_holdout, self.seed
        )
        records, self.dropped = stance_records(records, c.stance_text, self.held)
        return records

    def encode(self, tokenizer, train: list[dict], val: list[dict]) -> dict:
        def row(r):
            return encode(tokenizer, r["prompt"], self.cfg.stance_text, eos=False)

        self.rows = [(row(a), row(b)) for a, b in self.pairs]
        return {
            "stance_train_pairs": len(self.pairs),
            "stance_held_pairs": len(self.held),
            "records_dropped_on_held_pairs": self.dropped,
        }

    def batch(self, step: int):
        pick = step_indices(len(self.rows), self.cfg.stance_batch, self.seed, step, 2000)
        return [self.rows[i] for i in pick]

    def loss(self, model, batch, pad_id: int):
        return stance_contrast(model, batch, pad_id, self.cfg.stance_beta)

    def step_metrics(self, batch, term: float, rows: np.ndarray) -> dict:
        return {"stance_margin": float(rows.mean()), "stance_accuracy": float((rows > 0).mean())}

    def progress(self, metrics: dict) -> dict:
        return {"margin": f"{metrics['stance_margin']:+.2f}"}

    def summary(self, history: list[dict], best_step: int | None) -> dict:
        return {"stance_held_pairs": [[a["id"], b["id"]] for a, b in self.held]}


def stance_split(files: str, folds: int, holdout: int, seed: int) -> tuple[list, list]:
    """(training pairs, held-out pairs) of the minimal pairs in `files`, split by claim group
    (pairs.claim_groups, the folds experiments/premise_probe.py uses): fold `holdout` of `folds`
    is held out."""
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


@errors.cli
def main(argv=None) -> int:
    """sft.py's command with the contrast's flags beside its own."""
    doc = "Supervised LoRA warm start with the stance contrast (rl-values; knowledge/sft.md)."
    return sft.main(argv, extra=(StanceConfig, StanceContrast), description=doc)


if __name__ == "__main__":
    sys.exit(main())
