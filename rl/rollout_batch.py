"""One GRPO step's batch, as the loop's parts pass it: the `Rollout` dataclass.

train.rollout builds it (B prompt records x G sampled completions, scored, with group-relative
advantages); policy_update and routing update on it; runlog logs it. A plain dataclass of arrays
and records, below all of them, so each imports the type it works on (issue 24: no module reaches
into the loop's objects without saying so).
"""

from dataclasses import dataclass

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
import mlx.core as mx
import numpy as np

from gwen import GroupSample
from rewards.registry import Scores


@dataclass
class Rollout:
    """One step's batch: B prompt records x G sampled completions, scored, with advantages."""

    records: list[dict]
    sample: GroupSample
    scores: Scores  # values (B*G,), NaN = failed
    rewards: np.ndarray  # (B, G) float64
    advantages: mx.array  # (B*G,) float32
    mask: mx.array  # (B*G, T) completion mask; rows of dropped groups zeroed
    filtered_groups: int
    rollout_s: float
    reward_s: float
    flags: np.ndarray | None = None  # (B*G,) bool: a hack detector fired (rl/routing.py)
    capped: int = 0  # truncated answers whose reward truncated=cap lowered

    @property
    def flat(self) -> list[dict]:
        """The prompt record of each completion row."""
        return [r for r in self.records for _ in range(self.sample.group_size)]
