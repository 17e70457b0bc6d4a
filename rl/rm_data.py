"""Reward-model training data, encoded once for one reward model: preference pairs (Bradley-Terry
loss, pairwise accuracy) and labelled answers (binary cross-entropy, accuracy at score 0). Used by
train_rm.py (training and validation) and rl/reward_refresh.py (the in-run refresh and its replay);
the same loss and the same accuracy in both, a tie counting half (stats.pair_credit).
"""

from core import (
    backend,  # noqa: F401
    stats,
)

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from rewards import reward_model
from rl import distributed


def pair_batch(rm, enc: list[tuple[list[int], list[int]]]) -> tuple[mx.array, mx.array, int]:
    """(tokens, pad, n) for n encoded (better, worse) pairs: the better answers' rows, then the
    worse answers' rows, in one left-padded batch."""
    tokens, pad = rm.batch([b for b, _ in enc] + [w for _, w in enc])
    return tokens, pad, len(enc)


def pair_metrics(better, worse, margin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per pair, float64: (credit, BT loss): credit 1 when better scores above worse, a tie half,
    a non-finite score a miss (stats.pair_credit); loss -log sigmoid(better - worse - margin)."""
    better, worse = np.asarray(better, np.float64), np.asarray(worse, np.float64)
    credit = stats.pair_credit(better, worse, failed=0.0)
    return credit, np.logaddexp(0.0, -(better - worse - margin))


def pair_scores(score, pairs) -> tuple[np.ndarray, np.ndarray]:
    """(better, worse) float64 scores of `pairs` (dicts with prompt, better, worse, category):
    each distinct (prompt, answer, category) is scored once, by one call of
    `score(prompts, answers, categories)`, in first-seen order (a group's answers stay together,
    so a shared-prefix scorer reads each prompt once). `pairs` must not be empty."""
    rows: dict[tuple, int] = {}
    for p in pairs:
        for side in ("better", "worse"):
            rows.setdefault((p["prompt"], p[side], p["category"]), len(rows))
    keys = list(rows)
    s = np.asarray(score([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]),
                   np.float64)  # fmt: skip
    better = s[[rows[(p["prompt"], p["better"], p["category"])] for p in pairs]]
    return better, s[[rows[(p["prompt"], p["worse"], p["category"])] for p in pairs]]


class PairData:
    """Preference pairs: a batch runs the better answers then the worse ones; Bradley-Terry loss
    -log sigmoid(r_better - r_worse - margin); accuracy = better scored above worse, a tie half
    (stats.pair_credit), the same in training and in validation."""

    def __init__(self, rm, records: list[dict], margin: float = 0.0):
        self.margin = margin
        self.enc = [
            (
                rm.encode(p["prompt"], p["better"], p["category"]),
                rm.encode(p["prompt"], p["worse"], p["category"]),
            )
            for p in records
        ]
        self.lengths = np.array([max(len(b), len(w)) for b, w in self.enc])

    def __len__(self) -> int:
        return len(self.enc)

    def batch(self, rm, idx):
        return pair_batch(rm, [self.enc[i] for i in idx])

    def loss(self, r, n):
        better, worse = r[:n], r[n:]
        # stats.pair_credit in-graph, as `accuracy` counts: a tie half, a non-finite score a miss
        credit = mx.where(better > worse, 1.0, mx.where(better < worse, 0.0, 0.5))
        credit = mx.where(mx.isfinite(better) & mx.isfinite(worse), credit, 0.0)
        return reward_model.bt_loss(better, worse, self.margin), mx.mean(credit)

    def accuracy(self, rm, batch: int = 16) -> tuple[float, float]:
        """(accuracy, mean BT loss); a tie counts half. Each rank scores its share."""
        correct, losses = [], []
        for i in distributed.share_of(range(0, len(self.enc), batch)):
            tokens, pad, n = self.batch(rm, range(i, min(i + batch, len(self.enc))))
            r = rm(tokens, pad)
            credit, loss = pair_metrics(np.array(r[:n]), np.array(r[n:]), self.margin)
            correct += list(credit)
            losses += list(loss)
        correct, losses = distributed.gather_lists(correct, losses)
        return float(np.mean(correct)), float(np.mean(losses))


class LabelData:
    """Answers labelled true/false (e.g. "does it push back?"): one row each; the score is a
    logit, trained with binary cross-entropy; accuracy at probability 0.5 (score 0)."""

    def __init__(self, rm, records: list[dict], field: str):
        self.enc = [rm.encode(r["prompt"], r["answer"], r["category"]) for r in records]
        self.labels = np.array([float(r[field]) for r in records], dtype=np.float32)
        self.lengths = np.array([len(e) for e in self.enc])

    def __len__(self) -> int:
        return len(self.enc)

    def batch(self, rm, idx):
        idx = list(idx)
        tokens, pad = rm.batch([self.enc[i] for i in idx])
        return tokens, pad, mx.array(self.labels[idx])

    def loss(self, r, y):
        bce = mx.mean(nn.softplus(r) - y * r)  # -y log sigmoid(r) - (1 - y) log(1 - sigmoid(r))
        return bce, mx.mean((r > 0) == (y > 0.5))

    def accuracy(self, rm, batch: int = 16) -> tuple[float, float]:
        """(accuracy at score 0, mean BCE). Each rank scores its share."""
        correct, losses = [], []
        for i in distributed.share_of(range(0, len(self.enc), batch)):
            tokens, pad, y = self.batch(rm, range(i, min(i + batch, len(self.enc))))
            r, y = np.array(rm(tokens, pad)), np.array(y)
            correct += list(((r > 0) == (y > 0.5)).astype(float))
            losses += list(np.logaddexp(0.0, r) - y * r)
        correct, losses = distributed.gather_lists(correct, losses)
        return float(np.mean(correct)), float(np.mean(losses))
