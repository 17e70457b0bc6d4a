"""Train a Bradley-Terry reward model on preference pairs (rewards/reward_model.py), with exact
resume.

With --labels instead of --pairs it trains the same head as a classifier of labelled answers
(binary cross-entropy; e.g. the pushback classifier evaluate.py uses).

Reads a pairs file (prompts.load_pairs: id, criterion, category, prompt, better, worse, and a
split); trains on the `train` split only, measures pairwise accuracy and loss on `val` every
--eval-every steps, and never reads `test` (bench/judge.py reports it). Each step takes
--batch-pairs pairs, runs better and worse answers in one left-padded batch, and minimizes
-log sigmoid(r_better - r_worse - margin) with AdamW (linear warm-up, cosine decay). Batches
group pairs of similar length (less padding), in a seeded order. The best validation step's
weights are saved atomically to --out (reward_model.load reads them back), with the base model,
the data file's hash, the metrics and train_log.jsonl (every step). Resumable state, the log and
TensorBoard events (tb/, unless --no-tensorboard) live in --work (default runs/rm/<out name>;
--resume continues it exactly). `--broken-negatives N` adds, to the train and val splits, N
broken variants of each better answer (rewards/broken_text.py, training style: cut off, shuffled,
repeating, filler-padded) as the worse answer; `--init FOLDER` starts from a trained reward
model's weights. Not a GRPO trainer.

  uv run python train_rm.py --model smollm2-135m --pairs data/rm_pairs.jsonl --steps 300
"""

import argparse
import dataclasses
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from core import backend, errors, flags, precision, strict_json
from core.atomic import atomic_folder
from core.jsonl import DataError, file_sha256
from core.prompts import RM_PAIRS, SPLITS, load_pairs, load_pushback_labels, select_split

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten, tree_map, tree_unflatten
from tqdm import tqdm

from load_weights import LoadError
from rewards import broken_text, reward_model
from rl import checkpoint, distributed, rm_data, runlog, tblog

_f = flags.option


@dataclass
class RMTrainConfig:
    model: str = _f("smollm2-135m", "base checkpoint: HF folder, hub id or smollm2-135m")
    pairs: str = _f(RM_PAIRS, "preference pairs with a split field")
    labels: str | None = _f(
        None, "pushback-labelled answers instead of pairs: train a classifier (BCE)"
    )
    out: str = _f("models/rm", "output folder (written atomically; replaced if present)")
    work: str | None = _f(None, "resumable state and logs (default: runs/rm/<out name>)")
    steps: int = _f(300, "optimizer steps")
    batch_pairs: int = _f(8, "pairs per step (2x sequences per forward)")
    lr: float = _f(2e-4, "peak AdamW learning rate")
    warmup_steps: int = _f(20, "linear warm-up steps")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    max_grad_norm: float = _f(1.0, "clip the global gradient norm to this")
    margin: float = _f(0.0, "Bradley-Terry margin: -log sigmoid(r_b - r_w - margin)")
    center_coef: float = _f(1e-3, "penalty on mean squared score (keeps scores near 0)")
    lora_rank: int = _f(16, "LoRA rank (0 = full fine-tuning of the trainable layers)")
    lora_alpha: float = _f(32.0, "LoRA alpha")
    train_layers: int = _f(0, "train only the top N transformer blocks (0 = all)")
    max_prompt_tokens: int = _f(160, "prompt tokens kept (its end)")
    max_response_tokens: int = _f(224, "response tokens kept (its start)")
    use_category: bool = _f(True, "tell the model the prompt's data-set category")
    eval_every: int = _f(25, "validation accuracy every N steps (and at the end)")
    val_limit: int | None = _f(None, "validate on the val split's first N records (default: all)")
    seed: int = _f(0, "seed for data order and LoRA init")
    dtype: str | None = flags.dtype_option()
    max_failed_updates: int = _f(
        3, "stop after this many non-finite updates in a row (each skipped or rolled back)"
    )
    tensorboard: bool = _f(True, "TensorBoard events in WORK/tb (tensorboard --logdir runs)")
    broken_negatives: int = _f(
        0, "add N broken variants (cut, shuffled, repeat, filler) of each better answer as worse"
    )
    init: str | None = _f(None, "start from this reward-model folder's weights (same config)")
    extra_pairs: str | None = _f(
        None,
        "more pairs (same format) whose train and val splits join --pairs' (e.g. "
        "data/rm_read_pairs.jsonl: the policies' own answers, labelled by reading)",
    )
    extra_repeat: int = _f(1, "train on each --extra-pairs train pair this many times per epoch")

    def __post_init__(self):
        backend.parse_dtype(self.dtype)  # ValueError naming --dtype and its values
        for name in ("steps", "batch_pairs", "eval_every", "max_failed_updates"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        if self.val_limit is not None and self.val_limit < 1:
            raise ValueError(f"val_limit={self.val_limit} must be >= 1 (or left out: all)")
        if not self.lr > 0 or self.warmup_steps < 0 or self.center_coef < 0:
            raise ValueError("lr must be > 0; warmup_steps and center_coef >= 0")
        kinds = len(broken_text.KINDS)
        if not 0 <= self.broken_negatives <= kinds:
            raise ValueError(f"broken_negatives={self.broken_negatives}: use 0..{kinds}")
        if self.extra_repeat < 1:
            raise ValueError(f"extra_repeat={self.extra_repeat} must be >= 1")
        if self.extra_pairs and self.labels:
            raise ValueError("extra_pairs are preference pairs: they need --pairs, not --labels")
        if self.broken_negatives and self.labels:
            raise ValueError(
                "broken_negatives makes preference pairs: it needs --pairs, not --labels"
            )

    def data_path(self) -> str:
        return self.labels or self.pairs

    def rm_config(self) -> reward_model.RMConfig:
        return reward_model.RMConfig(
            base_model=self.model,
            lora_rank=self.lora_rank,
            lora_alpha=self.lora_alpha,
            train_layers=self.train_layers,
            max_prompt_tokens=self.max_prompt_tokens,
            max_response_tokens=self.max_response_tokens,
            use_category=self.use_category,
        )


def split_records(records: list[dict]) -> dict[str, list[dict]]:
    """Records by split; a file without a split field is all `train` (then no validation)."""
    return {s: select_split(records, s, missing="train") for s in SPLITS}


def check_data(cfg) -> None:
    """Read and validate the data file before any model is loaded (DataError names the line)."""
    if cfg.labels:
        load_pushback_labels(cfg.labels)
    else:
        load_pairs(cfg.pairs)
        if cfg.extra_pairs:
            load_pairs(cfg.extra_pairs)


def length_batches(lengths: np.ndarray, batch: int, rng) -> list[np.ndarray]:
    """One epoch of pair indices in batches of `batch`: shuffled, then sorted by length within
    windows of 16 batches (pairs of similar length share a batch), then the batches shuffled."""
    order = rng.permutation(len(lengths))
    window = batch * 16
    batches = []
    for i in range(0, len(order), window):
        chunk = order[i : i + window]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[j : j + batch] for j in range(0, len(chunk), batch)]
    return [batches[i] for i in rng.permutation(len(batches))]


def start_from(rm, folder: str) -> None:
    """Copy the trained weights of the reward model in `folder` into `rm`, whose build settings
    must equal that folder's (ValueError naming the differing fields)."""
    init = reward_model.load(folder, merge=False)
    keep = ("base_model", "tokenizer_sha256", "extra")
    mine = {k: v for k, v in dataclasses.asdict(rm.config).items() if k not in keep}
    theirs = {k: v for k, v in dataclasses.asdict(init.config).items() if k not in keep}
    differ = {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
    if differ or rm.config.tokenizer_sha256 != init.config.tokenizer_sha256:
        raise LoadError(
            f"--init {folder}: its settings differ from this run's (this run, the folder): "
            f"{differ or 'tokenizer'}; pass the folder's settings (its rm_config.json)"
        )
    rm.load_weights(list(reward_model.trained_weights(init).items()), strict=False)


def interleave(a: list, b: list) -> list:
    """a[0], b[0], a[1], b[1], ...; the longer list's rest at the end."""
    out = [x for pair in zip(a, b, strict=False) for x in pair]
    return out + a[len(b) :] + b[len(a) :]


def load_data(cfg, rm) -> tuple[dict, object, object]:
    """(split counts, train data, val data) for pairs (--pairs) or labelled answers (--labels)."""
    if cfg.labels:
        records = load_pushback_labels(cfg.labels)
        make = lambda recs: rm_data.LabelData(rm, recs, "pushback")  # noqa: E731
    else:
        records = load_pairs(cfg.pairs)
        make = lambda recs: rm_data.PairData(rm, recs, cfg.margin)  # noqa: E731
    splits = split_records(records)
    if cfg.broken_negatives:  # training-style variants; the probes (bench_judge) use others
        for name in ("train", "val"):
            extra = broken_text.broken_pairs(
                splits[name], broken_text.KINDS, "train", cfg.seed, cfg.broken_negatives
            )
            splits[name] = interleave(splits[name], extra)  # --val-limit keeps both kinds
    if cfg.extra_pairs:  # after the broken variants: those are made from --pairs' answers only
        more = split_records(load_pairs(cfg.extra_pairs))
        splits["train"] = interleave(splits["train"], more["train"] * cfg.extra_repeat)
        splits["val"] = interleave(splits["val"], more["val"])
    if not splits["train"]:
        raise DataError(f"{cfg.data_path()}: no record has split 'train'; nothing to train on")
    counts = {k: len(v) for k, v in splits.items()}
    val = splits["val"] if cfg.val_limit is None else splits["val"][: cfg.val_limit]
    return counts, make(splits["train"]), make(val)


class Trainer:
    """The state of one reward-model run: model, optimizer, data cursor, best weights."""

    def __init__(self, cfg: RMTrainConfig):
        self.cfg = cfg
        check_data(cfg)  # a bad file fails here, before any model work
        mx.random.seed(cfg.seed)
        self.rm = reward_model.build(cfg.rm_config(), backend.parse_dtype(cfg.dtype))
        if cfg.init:
            start_from(self.rm, cfg.init)
        self.counts, self.train_data, self.val_data = load_data(cfg, self.rm)
        schedule = precision.schedule(cfg.lr, cfg.warmup_steps, cfg.steps)
        self.optimizer = precision.adamw(
            self.rm.trainable_parameters(), learning_rate=schedule, weight_decay=cfg.weight_decay
        )
        fix = backend.overflow_fix(self.rm.backbone.model.norm.weight.dtype)
        self.failures = precision.Failures(cfg.max_failed_updates, fix)
        self.epoch, self.position, self.step = 0, 0, 0
        self.best = {"val_accuracy": -1.0, "step": 0}
        self.best_weights = None

    def _batches(self) -> list[np.ndarray]:
        rng = np.random.default_rng([self.cfg.seed, self.epoch])
        return length_batches(self.train_data.lengths, self.cfg.batch_pairs, rng)

    def next_batch(self) -> np.ndarray:
        batches = self._batches()
        if self.position >= len(batches):
            self.epoch, self.position = self.epoch + 1, 0
            batches = self._batches()
        self.position += 1
        return batches[self.position - 1]

    def loss_fn(self, rm, tokens, pad, aux):
        r = rm(tokens, pad)
        main, acc = self.train_data.loss(r, aux)
        return main + self.cfg.center_coef * mx.mean(r * r), (main, acc)

    def train_step(self) -> dict:
        """One step on the next batch; with several ranks each takes its block of the batch and
        the gradients, weighted by the block's share of the pairs, are summed over ranks."""
        idx = self.next_batch()
        mine = distributed.share_of(idx)
        share = len(mine) / len(idx)
        grad_fn = nn.value_and_grad(self.rm, self.loss_fn)
        if len(mine):
            tokens, pad, aux = self.train_data.batch(self.rm, mine)
            (loss, (main, acc)), grads = grad_fn(self.rm, tokens, pad, aux)
            n_tokens = tokens.size
        else:  # an epoch's last batch may hold fewer pairs than there are ranks
            loss = main = acc = mx.array(0.0)
            grads, n_tokens = tree_map(mx.zeros_like, self.rm.trainable_parameters()), 0
        if share != 1.0:
            grads = tree_map(lambda g: g * share, grads)
        grads = distributed.sum_gradients(grads)
        sums = distributed.sum_metrics(
            {"loss": loss * share, "main": main * share, "acc": acc * share, "tokens": n_tokens}
        )
        loss, main, acc = sums["loss"], sums["main"], sums["acc"]
        grads, norm = precision.clip_grad_norm(grads, self.cfg.max_grad_norm)
        mx.eval(loss, main, acc, grads, norm)
        outcome = "skipped"
        if math.isfinite(loss.item()) and math.isfinite(norm.item()):
            ok = precision.guarded_update(self.optimizer, self.rm, grads)
            outcome = "applied" if ok else "rolled_back"
        where = f"step {self.step + 1} (loss {loss.item()}, gradient norm {norm.item()})"
        self.failures.record(outcome, where)
        if outcome != "applied":
            tqdm.write(f"{where}: update {outcome}: {self.failures.counts}", file=sys.stderr)
        self.step += 1
        return {
            "loss": loss.item(),
            "data_loss": main.item(),
            "train_accuracy": acc.item(),
            "grad_norm": norm.item(),
            "lr": self.optimizer.learning_rate.item(),
            "tokens": int(sums["tokens"]),
            "skipped_steps": self.failures.counts["skipped_steps"],
            "rolled_back_steps": self.failures.counts["rolled_back_steps"],
        }

    def evaluate(self) -> dict:
        if not self.val_data.enc:
            return {}
        acc, loss = self.val_data.accuracy(self.rm)
        if acc > self.best["val_accuracy"]:
            self.best = {"val_accuracy": acc, "val_loss": loss, "step": self.step}
            self.best_weights = {
                k: mx.array(v) for k, v in reward_model.trained_weights(self.rm).items()
            }
        return {"val_accuracy": acc, "val_loss": loss}

    def save_state(self, path: Path) -> None:
        """Everything needed to resume exactly, written atomically (by rank 0 only)."""
        if not distributed.is_main():
            return
        state = {
            "step": self.step,
            "epoch": self.epoch,
            "position": self.position,
            "best": self.best,
        }
        precision.check_finite((self.rm.parameters(), self.optimizer.state), f"state {path}")
        with atomic_folder(path) as tmp:
            weights = reward_model.trained_weights(self.rm)
            mx.save_safetensors(str(tmp / "weights.safetensors"), weights)
            mx.save_safetensors(
                str(tmp / "optimizer.safetensors"), dict(tree_flatten(self.optimizer.state))
            )
            if self.best_weights is not None:
                mx.save_safetensors(str(tmp / "best.safetensors"), self.best_weights)
            (tmp / "state.json").write_text(json.dumps(state))

    def load_state(self, path: Path) -> None:
        self.rm.load_weights(list(mx.load(str(path / "weights.safetensors")).items()), strict=False)
        self.optimizer.state = tree_unflatten(
            list(mx.load(str(path / "optimizer.safetensors")).items())
        )
        if (path / "best.safetensors").exists():
            self.best_weights = mx.load(str(path / "best.safetensors"))
        state = json.loads((path / "state.json").read_text())
        self.step, self.epoch, self.position = state["step"], state["epoch"], state["position"]
        self.best = state["best"]
        mx.eval(self.rm.parameters(), self.optimizer.state)


def train(cfg: RMTrainConfig, resume: bool = False) -> Path:
    """Train per `cfg`; save the best-validation (else the last) weights to cfg.out and return
    it. A first Ctrl-C/SIGTERM saves the resumable state and returns the work folder instead.
    The backend line comes after the data's checks (Trainer), so a bad input stays one line."""
    distributed.check_split(cfg.batch_pairs, 1, "batch_pairs")
    main = distributed.is_main()  # rank 0 alone writes (knowledge/distributed.md)
    out = Path(cfg.out)
    work = Path(cfg.work or Path("runs") / "rm" / out.name)
    if not resume and work.exists() and main:  # scratch of an earlier run: a fresh start clears it
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    t = Trainer(cfg)
    backend.announce()
    log = distributed.main_only(lambda: runlog.MetricsLog(work / "train_log.jsonl"))
    tb = tblog.TBLog(work / "tb", prefix="rm") if cfg.tensorboard and main else None
    if resume and (work / "state").exists():
        t.load_state(work / "state")
        log.truncate_after(t.step)
        if tb:
            tb.truncate_after(t.step)
        tqdm.write(f"resumed {work} at step {t.step}", file=sys.stderr)
    distributed.check_same(
        lambda: {
            "step and data cursor": (t.step, t.epoch, t.position),
            "config": dataclasses.asdict(cfg),
            "training data": file_sha256(cfg.data_path()),
            "weights": distributed.checksum(t.rm.trainable_parameters()),
        }
    )
    if main:
        (work / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
    counts = t.counts
    said = f"{cfg.data_path()}: {counts} (the test split is never read here)"
    tqdm.write(said, file=sys.stderr)
    bar = tqdm(
        total=cfg.steps,
        initial=t.step,
        desc="reward model",
        unit="step",
        dynamic_ncols=True,
        disable=not main,
    )
    start = time.perf_counter()
    with checkpoint.StopOnSignal() as stop:
        while t.step < cfg.steps:
            try:
                m = t.train_step()
            except precision.NonFiniteError:
                bar.close()  # the error line goes below the bar
                raise
            stopping = distributed.any_rank(stop.raised)  # every rank stops at the same step
            if t.step % cfg.eval_every == 0 or t.step == cfg.steps:
                m |= t.evaluate()
            if t.step % cfg.eval_every == 0 or stopping:  # no extra evaluation: same best
                t.save_state(work / "state")
            m["elapsed_s"] = time.perf_counter() - start
            log.append(t.step, m)
            if tb:
                tb.add(t.step, m)
            bar.update(1)
            val = {"val": f"{m['val_accuracy']:.3f}"} if "val_accuracy" in m else {}
            bar.set_postfix(loss=f"{m['loss']:.3f}", **val)
            if stopping:
                bar.close()
                if tb:
                    tb.close()
                said = f"stopped at step {t.step}; continue with --resume (state in {work})"
                tqdm.write(said, file=sys.stderr)
                return work
    bar.close()
    if tb:
        tb.close()
    if not main:
        return out
    if t.best_weights is not None:
        t.rm.load_weights(list(t.best_weights.items()), strict=False)
    extra = {
        "objective": "bce" if cfg.labels else "bradley_terry",
        "data": cfg.data_path(),
        "data_sha256": file_sha256(cfg.data_path()),
        "extra_data_sha256": file_sha256(cfg.extra_pairs) if cfg.extra_pairs else None,
        "split_counts": counts,
        "trained_steps": t.step,
        "selected_step": t.best["step"] if t.best_weights is not None else t.step,
        "metrics": t.best if t.best_weights is not None else {},
        "train_config": dataclasses.asdict(cfg),
    }
    reward_model.save(t.rm, out, extra)
    shutil.copy(work / "train_log.jsonl", Path(out) / "train_log.jsonl")
    said = f"saved {out} (step {extra['selected_step']}, {extra['metrics']})"
    tqdm.write(said, file=sys.stderr)
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description="Train a Bradley-Terry reward model (rl-values)."
    )
    p.add_argument("--resume", action="store_true", help="continue OUT.run/state if present")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    flags.add_flags(p, RMTrainConfig)
    return p


@errors.cli
def main(argv=None) -> int:
    """The CLI: a bad setting, pairs file or model path is one `error:` line and exit 2."""
    cfg, own = flags.parse_config(build_parser(), RMTrainConfig, argv)
    path = Path(train(cfg, resume=own["resume"]))
    if own["json"] and distributed.is_main():
        print(strict_json.dumps(result_summary(path)))
    return 0


def result_summary(path: Path) -> dict:
    """What --json prints: the saved folder's selected step and metrics, or, for a run stopped
    by a signal (`path` is its state folder), where to resume."""
    config = path / reward_model.CONFIG_FILE
    if not config.is_file():
        return {"out": None, "stopped": True, "state": str(path)}
    extra = json.loads(config.read_text()).get("extra", {})
    keep = ("objective", "trained_steps", "selected_step", "metrics", "data", "data_sha256")
    return {"out": str(path), "stopped": False, **{k: extra.get(k) for k in keep}}


if __name__ == "__main__":
    sys.exit(main())
