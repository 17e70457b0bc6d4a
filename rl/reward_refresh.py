"""Reward refresh (issue 22): every K steps (`--reward-refresh K`) the run labels the answers it
has just sampled and updates its reward model on preference pairs made from them, so that text
the policy found and the reward model overrates (loops, answers cut at the cap, a denial register
on true premises) is met by a reward model that has now seen it ranked.

**Labels, by rules on the answers alone** (no model; nothing the evaluation grader reads):
- *broken*: it ran to the token cap without ending, it is empty, or at least `REPEAT` of its word
  trigrams repeat earlier ones (`diversity.repetition_rate`);
- *denial* (only with `refresh_stance`): the stance term's lexical detector with the opening
  negation (`registry.stance_flagger("lexical", opening=True)`).
Within one group (one prompt's answers) an unbroken answer is better than a broken one; among
unbroken answers, with `refresh_stance`, a denial is better on false-premise and nonsense
prompts and worse on control prompts (`builtin.STANCE_SIGN`; curiosity: no order). Every ordered
pair of a group is a candidate; `refresh_pairs` of them are drawn at random (keyed by the run's
seed and the step, so a resumed run draws the same).

**The update**: `refresh_steps` AdamW steps (learning rate `refresh_lr`) of the Bradley-Terry
loss on the reward model's trained weights (its LoRA and head, loaded unmerged), each on
`refresh_batch` new pairs and, with `refresh_replay`, as many pairs from the reward model's own
training split (the pairs file its rm_config names, checked against the recorded hash), so it
keeps what it was trained to know.

Logged per refresh (`refresh/...`): candidate and used pairs, broken and denial shares, the mean
BT loss on the drawn pairs before and after, and the accuracy on a fixed replay sample before
and after. The refreshed weights and the optimizer state are saved in every checkpoint
(`reward_refresh/`) and restored by --resume.
"""

from dataclasses import dataclass
from pathlib import Path

from core import (
    backend,  # noqa: F401
    diversity,
    precision,
)
from core.jsonl import file_sha256
from core.prompts import load_pairs

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten

from rewards import reward_model
from rewards.builtin import STANCE_SIGN
from rewards.registry import stance_flagger
from rl import rm_data

REPEAT = 0.3  # share of repeated word trigrams that makes an answer broken
REPLAY_PROBE = 32  # replay pairs whose accuracy is logged at each refresh
FOLDER = "reward_refresh"  # inside a checkpoint
WEIGHTS, OPTIMIZER = "rm_weights.safetensors", "optimizer.safetensors"


class RefreshError(ValueError):
    """A refresh that cannot run as configured (no reward model, no replay data)."""


@dataclass(frozen=True)
class Settings:
    every: int  # K: refresh after every K-th step
    pairs: int = 64  # pairs drawn per refresh
    steps: int = 4  # optimizer steps per refresh
    batch: int = 8  # new pairs per optimizer step (and as many replay pairs)
    lr: float = 1e-5
    stance: bool = False  # order unbroken answers by the category's stance sign
    replay: bool = True  # mix in the reward model's own training pairs


def is_broken(answer: str, finished: bool) -> bool:
    return not finished or not answer.strip() or diversity.repetition_rate(answer) >= REPEAT


def label_group(answers: list[str], finished: list[bool], denials: list[bool] | None,
                category: str) -> list[tuple[int, int]]:  # fmt: skip
    """Ordered (better, worse) index pairs of one group by the rules in the module doc."""
    broken = [is_broken(a, f) for a, f in zip(answers, finished, strict=True)]
    sign = STANCE_SIGN.get(category, 0.0) if denials is not None else 0.0
    out = []
    for i in range(len(answers)):
        for j in range(len(answers)):
            if broken[j] and not broken[i]:
                out.append((i, j))
            elif not broken[i] and not broken[j] and sign and denials[i] != denials[j]:
                if (sign > 0) == denials[i]:
                    out.append((i, j))
    return out


def replay_pairs(rm) -> list[dict]:
    """The reward model's training split, read from the pairs file its config names (hash
    checked); RefreshError naming the fix when it cannot be read."""
    extra = rm.config.extra or {}
    path, sha = extra.get("data"), extra.get("data_sha256")
    fix = "pass --no-refresh-replay to refresh without replay"
    if not path or not Path(path).is_file():
        raise RefreshError(
            f"refresh replay: the reward model's pairs file {path!r} is not here; {fix}"
        )
    if sha and file_sha256(path) != sha:
        raise RefreshError(
            f"refresh replay: {path} changed since the reward model was trained (its hash "
            f"differs); {fix}"
        )
    train = [p for p in load_pairs(path) if p.get("split", "train") == "train"]
    if not train:
        raise RefreshError(f"refresh replay: {path} has no train-split pairs; {fix}")
    return train


class Refresher:
    """Holds the reward model being refreshed, its optimizer and the replay pairs."""

    def __init__(self, settings: Settings, rm, seed: int):
        if settings.every < 1 or settings.pairs < 1 or settings.steps < 1 or settings.batch < 1:
            raise RefreshError(f"refresh settings must be >= 1: {settings}")
        if not settings.lr > 0:
            raise RefreshError(f"refresh_lr={settings.lr} must be > 0")
        names = [k for k, _ in tree_flatten(rm.trainable_parameters())]
        if rm.config.lora_rank and not any(k.endswith("lora_a") for k in names):
            raise RefreshError(
                "the reward model's LoRA was merged into its weights: load it with "
                "reward_model.load(path, merge=False) to refresh its adapters"
            )
        self.s, self.rm, self.seed = settings, rm, seed
        self.optimizer = precision.adamw(
            rm.trainable_parameters(), learning_rate=settings.lr, weight_decay=0.0
        )
        self.replay = replay_pairs(rm) if settings.replay else []
        rng = np.random.default_rng([seed, 0])
        probe = rng.permutation(len(self.replay))[:REPLAY_PROBE]
        self.probe = rm_data.PairData(rm, [self.replay[int(i)] for i in probe])
        self.denials = stance_flagger("lexical", opening=True) if settings.stance else None
        self._probe_cache = None  # the probe's accuracy at the current weights, once computed

    def due(self, step: int) -> bool:
        return step % self.s.every == 0

    def __call__(self, step: int, batch) -> dict:
        """The loop's step hook (Run.step_hooks), after the update: on a due step, refresh on the
        step's rollout (rl.rollout_batch.Rollout) and return the refresh's metrics; else {}."""
        if not self.due(step):
            return {}
        return self.refresh(batch.records, batch.sample.texts, batch.sample.finished, step)

    def pairs(self, records: list[dict], texts: list[str], finished, step: int):
        """(drawn pairs as dicts, candidates, broken share, denial share) of one rollout: G rows
        per record, in order."""
        G = len(texts) // len(records)
        prompts = [r["prompt"] for r in records for _ in range(G)]
        denials = None
        if self.denials is not None:
            denials = [f > 0.5 for f in self.denials(prompts, texts)]
        candidates = []
        for g, rec in enumerate(records):
            rows = range(g * G, (g + 1) * G)
            answers = [texts[i] for i in rows]
            fin = [bool(finished[i]) for i in rows]
            group_denials = None if denials is None else [denials[i] for i in rows]
            for i, j in label_group(answers, fin, group_denials, rec["category"]):
                candidates.append(
                    {
                        "prompt": rec["prompt"],
                        "category": rec["category"],
                        "better": answers[i],
                        "worse": answers[j],
                    }  # fmt: skip
                )
        rng = np.random.default_rng([self.seed, step, 1])
        take = rng.permutation(len(candidates))[: self.s.pairs]
        broken = np.mean([is_broken(t, bool(f)) for t, f in zip(texts, finished, strict=True)])
        denied = float(np.mean(denials)) if denials is not None else float("nan")
        return [candidates[int(i)] for i in take], len(candidates), float(broken), denied

    def _drawn_loss_and_accuracy(self, drawn: list[dict]) -> tuple[float, float]:
        """(mean BT loss, accuracy) on this refresh's pairs. They are made of at most G answers
        per group, so each distinct answer is scored once, its prompt shared with the rest of
        its group (reward_model.score's shared prefix: equal to whole rows within 1e-4)."""
        if not drawn:
            return float("nan"), float("nan")
        b, w = rm_data.pair_scores(
            lambda *texts: self.rm.score(*texts, 2 * self.s.batch, share_prefix=True), drawn
        )
        credit, loss = rm_data.pair_metrics(b, w)
        return float(np.mean(loss)), float(np.mean(credit))

    def _probe_accuracy(self) -> float:
        """Pairwise accuracy on the fixed replay sample; remembered until the weights change
        (the previous refresh's `after` is this one's `before`)."""
        if self._probe_cache is None:
            if not len(self.probe):
                return float("nan")
            self._probe_cache = self.probe.accuracy(self.rm, self.s.batch)[0]
        return self._probe_cache

    def refresh(self, records: list[dict], texts: list[str], finished, step: int) -> dict:
        """Label this step's rollout, update the reward model; the metrics of the refresh."""
        drawn, n_candidates, broken, denied = self.pairs(records, texts, finished, step)
        m = {
            "refresh/candidates": float(n_candidates),
            "refresh/pairs": float(len(drawn)),
            "refresh/broken_share": broken,
            "refresh/denial_share": denied,
        }
        m["refresh/loss_before"], _ = self._drawn_loss_and_accuracy(drawn)
        m["refresh/replay_accuracy_before"] = self._probe_accuracy()
        new = rm_data.PairData(self.rm, drawn)  # encoded once for every step
        if drawn:
            rng = np.random.default_rng([self.seed, step, 2])
            grad_fn = nn.value_and_grad(self.rm, self._loss)
            m["refresh/rolled_back_steps"] = 0
            for k in range(self.s.steps):
                start = k * self.s.batch  # the drawn pairs in turn, wrapping around
                take = range(start, start + min(self.s.batch, len(drawn)))
                enc = [new.enc[i % len(drawn)] for i in take]
                if self.replay:
                    few = len(self.replay) < len(enc)
                    idx = rng.choice(len(self.replay), len(enc), replace=few)
                    enc += rm_data.PairData(self.rm, [self.replay[int(i)] for i in idx]).enc
                tokens, pad, n = rm_data.pair_batch(self.rm, enc)
                _, grads = grad_fn(self.rm, tokens, pad, n)
                if not precision.guarded_update(self.optimizer, self.rm, grads):
                    m["refresh/rolled_back_steps"] += 1  # non-finite: weights kept as they were
            self._probe_cache = None
        m["refresh/loss_after"], _ = self._drawn_loss_and_accuracy(drawn)
        m["refresh/replay_accuracy_after"] = self._probe_accuracy()
        return m

    @staticmethod
    def _loss(rm, tokens, pad, n):
        r = rm(tokens, pad)
        return reward_model.bt_loss(r[:n], r[n:])

    def save(self, folder: Path) -> None:
        """Write the refreshed weights and the optimizer state into `folder` (inside a
        checkpoint's temporary folder: the checkpoint's rename makes it atomic)."""
        folder.mkdir(parents=True, exist_ok=True)
        mx.save_safetensors(str(folder / WEIGHTS), reward_model.trained_weights(self.rm))
        mx.save_safetensors(str(folder / OPTIMIZER), dict(tree_flatten(self.optimizer.state)))

    def restore(self, folder: Path) -> None:
        """Load what `save` wrote; FileNotFoundError naming the checkpoint when it is absent."""
        for name in (WEIGHTS, OPTIMIZER):
            if not (folder / name).is_file():
                raise FileNotFoundError(
                    f"{folder / name} not found: this run refreshes its reward model "
                    f"(--reward-refresh {self.s.every}) but the checkpoint holds no refreshed "
                    "state; resume from a checkpoint this run wrote"
                )
        weights = mx.load(str(folder / WEIGHTS))
        expected = reward_model.trained_weights(self.rm)
        if set(weights) != set(expected):
            raise ValueError(
                f"{folder / WEIGHTS} does not hold this run's reward-model weights: missing "
                f"{sorted(set(expected) - set(weights))[:4]}, unexpected "
                f"{sorted(set(weights) - set(expected))[:4]}"
            )
        self.rm.load_weights(list(weights.items()), strict=False)
        self.optimizer.state = tree_unflatten(list(mx.load(str(folder / OPTIMIZER)).items()))
        mx.eval(self.rm.trainable_parameters(), self.optimizer.state)
        self._probe_cache = None
