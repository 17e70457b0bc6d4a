"""Supervised warm start: LoRA fine-tuning of the policy on (prompt, answer) records.

Each record's prompt is formatted exactly as the GRPO policy sees it (chat_format.chat_tokens,
thinking off) and followed by the answer's tokens and the tokenizer's EOS, the token that ends a
sampled completion. The loss is the mean cross-entropy over answer tokens only: the prompt and
the padding are masked, the closing EOS is included (so the model learns to stop). Prompts are
split into train and validation by prompt (seeded, per category), validation loss is measured at
step 0, every --eval-every steps or each epoch, and at the end; only the best-by-validation
checkpoint is kept, in train.py's layout (RUN_DIR/checkpoints/step_N/ with PEFT adapters,
optimizer, trainer.json, train_config.json; RUN_DIR/latest names it), so `--model RUN_DIR` loads
it anywhere (load_weights merges the adapters into the base). An experiment adds a term to the
loss through `ExtraLoss`, from its own module with its own command (experiments/opener_gate.py,
experiments/stance_pairs.py); sft.py imports none. It is not resumable and does no full
fine-tuning or packing of several records into one row.

  uv run python sft.py --model smollm2-135m --data data/sft/written.jsonl --epochs 2
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

from core import backend, errors, flags, lora, precision, strict_json
from core.forced import encode, make_batch, token_nll
from core.jsonl import DataError
from core.prompts import CATEGORIES, load_sft

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from tqdm import tqdm

from load_weights import LoadError, load
from rl import checkpoint, runlog

_f = flags.option


@dataclass
class SFTConfig:
    model: str = _f("smollm2-135m", "base policy: HF folder, hub id, checkpoint or smollm2-135m")
    data: str = _f("data/sft/written.jsonl", "comma-separated JSONL files of (prompt, answer)")
    out_dir: str = _f("runs/sft", "parent folder of SFT run directories")
    run_name: str | None = _f(None, "run directory name (default: built from the settings)")
    epochs: int = _f(3, "passes over the training records")
    steps: int = _f(0, "stop after this many optimizer steps (0 = run all --epochs)")
    batch_size: int = _f(8, "records per optimizer step")
    lr: float = _f(2e-4, "peak AdamW learning rate (warm-up, then cosine to a tenth)")
    warmup_steps: int = _f(10, "linear warm-up steps")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    max_grad_norm: float = _f(1.0, "clip the global gradient norm to this")
    lora_rank: int = _f(16, "LoRA rank (>= 1)")
    lora_alpha: float = _f(32.0, "LoRA alpha (scale = alpha / rank)")
    lora_targets: str = _f("q_proj,k_proj,v_proj,o_proj", "comma-separated LoRA target layers")
    lora_layers: int = _f(0, "adapters in the top N blocks only (0 = all)")
    val_fraction: float = _f(0.15, "share of each category's prompts held out for validation")
    eval_every: int = _f(0, "validation loss every N steps (0 = at the end of each epoch)")
    max_answer_tokens: int = _f(80, "answers longer than this (EOS included) are refused")
    seed: int = _f(0, "seed for the split, data order and LoRA init")
    dtype: str | None = flags.dtype_option()
    max_failed_updates: int = _f(
        3, "stop after this many non-finite updates in a row (each skipped or rolled back)"
    )

    def __post_init__(self):
        backend.parse_dtype(self.dtype)  # ValueError naming --dtype and its values
        positive = ("epochs", "batch_size", "lora_rank", "max_answer_tokens", "max_failed_updates")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        for name in ("steps", "warmup_steps", "eval_every", "lora_layers"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 0")
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr} must be > 0")
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction={self.val_fraction} must be in (0, 1), e.g. 0.15")
        if not self.data_files():
            raise ValueError("data is empty: name at least one JSONL file")

    def data_files(self) -> list[str]:
        return [p.strip() for p in self.data.split(",") if p.strip()]

    def lora_target_list(self) -> list[str]:
        return [t.strip() for t in self.lora_targets.split(",") if t.strip()]

    def lora_config(self) -> dict:
        """What checkpoint.save records for the adapters (train.py's form)."""
        targets = self.lora_target_list()
        return {"rank": self.lora_rank, "alpha": self.lora_alpha, "targets": targets}

    def default_run_name(self) -> str:
        slug = Path(self.model).name.replace("/", "_")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return f"{slug}_sft_lora{self.lora_rank}_lr{self.lr:g}_s{self.seed}_{stamp}"


# ----------------------------------------------------------------------------------------------
# Data: records, the prompt-disjoint split, token sequences and the answer-only mask


def load_data(files: list[str]) -> list[dict]:
    """Every record of every file, validated before any model work (DataError names the line);
    ids unique across files and one text per prompt_id."""
    records, where = [], {}
    for path in files:
        if not Path(path).is_file():
            raise DataError(f"{path}: file not found; build it: uv run python -m data.make_sft")
        for r in load_sft(path):
            first = where.setdefault(r["id"], path)
            if first != path:
                raise DataError(f"{path}: id {r['id']!r} is also in {first}; ids must be unique")
            records.append(r)
    texts = {}
    for r in records:
        if texts.setdefault(r["prompt_id"], r["prompt"].strip()) != r["prompt"].strip():
            raise DataError(f"prompt_id {r['prompt_id']!r} names two prompt texts across {files}")
    return records


def split_by_prompt(records: list[dict], val_fraction: float, seed: int):
    """(train, val) records with no prompt_id in both: in each category, a seeded
    ceil(val_fraction * n) of its prompts (at least 1, at most n - 1) go to validation."""
    val_ids = set()
    for i, cat in enumerate(CATEGORIES):
        ids = sorted({r["prompt_id"] for r in records if r["category"] == cat})
        if len(ids) < 2:
            continue
        rng = np.random.default_rng([seed, i])
        k = min(max(1, math.ceil(val_fraction * len(ids))), len(ids) - 1)
        val_ids.update(ids[j] for j in rng.permutation(len(ids))[:k])
    train = [r for r in records if r["prompt_id"] not in val_ids]
    val = [r for r in records if r["prompt_id"] in val_ids]
    if not train or not val:
        raise DataError(
            f"{len(records)} records on too few prompts to split: a category needs >= 2 prompts"
        )
    return train, val


def epoch_batches(lengths: np.ndarray, batch: int, seed: int, epoch: int) -> list[np.ndarray]:
    """One epoch of record indices: a seeded shuffle, sorted by length within windows of 8
    batches (less padding), the batches then shuffled."""
    rng = np.random.default_rng([seed, 1000 + epoch])
    order = rng.permutation(len(lengths))
    batches = []
    for i in range(0, len(order), batch * 8):
        chunk = order[i : i + batch * 8]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[j : j + batch] for j in range(0, len(chunk), batch)]
    return [batches[i] for i in rng.permutation(len(batches))]


# ----------------------------------------------------------------------------------------------
# Loss


def sft_loss(model, inputs, targets, mask, pad) -> mx.array:
    """Mean cross-entropy per answer token (every answer token of the batch weighs the same)."""
    total, count = token_nll(model, inputs, targets, mask, pad)
    return total / mx.maximum(count, 1.0)


def mean_loss(model, examples: list, pad_id: int, batch: int = 16) -> float:
    """Token-mean cross-entropy of `examples` (validation), no gradient."""
    total = count = 0.0
    order = np.argsort([len(t) for t, _ in examples], kind="stable")
    for i in range(0, len(order), batch):
        chunk = [examples[j] for j in order[i : i + batch]]
        s, n = token_nll(model, *make_batch(chunk, pad_id))
        mx.eval(s, n)
        total, count = total + s.item(), count + n.item()
    return total / max(count, 1.0)


# ----------------------------------------------------------------------------------------------
# The extra-loss hook: where an experiment adds a term to the SFT loss


class ExtraLoss:
    """A loss term beside the SFT loss, with the data it learns from: how an experiment plugs
    into SFT (experiments/opener_gate.py, experiments/stance_pairs.py) without sft.py knowing
    it. `build` calls `records`, then `split` (both before the model loads, so a bad file stops
    the run early), then `encode`; each optimizer step calls `batch` (host side) and, inside the
    gradient, `loss`: the step minimizes SFT loss + `weight` x the term. The defaults change
    nothing; a subclass sets `weight` and overrides what it needs."""

    name: str = "extra"  # the key of its figures in the summary's history
    weight: float = 1.0

    def config(self) -> dict:
        """Its settings, saved beside SFT's in config.json and the checkpoint's
        train_config.json."""
        return {}

    def records(self, records: list[dict]) -> list[dict]:
        """The SFT records to train on (opened, dropped), before the split by prompt."""
        return records

    def split(self, train: list[dict], val: list[dict]) -> None:
        """Its own data, split given the SFT's (train, validation) records."""

    def encode(self, tokenizer, train: list[dict], val: list[dict]) -> dict:
        """Its rows tokenized (the model is loaded); counts for the run's summary."""
        return {}

    def batch(self, step: int):
        """What `loss` reads at optimizer step `step`."""

    def loss(self, model, batch, pad_id: int) -> tuple[mx.array, mx.array]:
        """(the term, unweighted; per-row figures that step_metrics reads)."""
        raise NotImplementedError

    def step_metrics(self, batch, term: float, rows: np.ndarray) -> dict:
        """Figures of one step for metrics.jsonl."""
        return {}

    def progress(self, metrics: dict) -> dict:
        """{name: text} shown on the progress bar."""
        return {}

    def validate(self, model, pad_id: int) -> tuple[dict, dict] | None:
        """(figures for the summary's history, flat figures for metrics.jsonl) on its
        validation data, no gradient; None when it has none."""
        return None

    def summary(self, history: list[dict], best_step: int | None) -> dict:
        """Entries for the run's summary (sft.json); `history` holds validate's figures under
        `name`."""
        return {}


# ----------------------------------------------------------------------------------------------
# Training


@dataclass
class SFTRun:
    cfg: SFTConfig
    run_dir: Path
    model: object
    tokenizer: object
    optimizer: object
    train: list  # [(tokens, prompt_len)]
    val: list
    counts: dict
    extra: ExtraLoss | None = None  # an experiment's term beside the SFT loss
    failures: precision.Failures | None = None  # skipped and rolled-back updates (train_step)


def step_loss(model, batch, extra: ExtraLoss | None, extra_batch, pad_id: int):
    """(SFT loss + extra's weight x its term, SFT loss, the term, its per-row figures); without
    an extra term, (SFT loss, SFT loss, 0, nothing)."""
    loss = sft_loss(model, *batch)
    if extra is None:
        return loss, loss, mx.zeros(()), mx.zeros((0,))
    term, rows = extra.loss(model, extra_batch, pad_id)
    return loss + extra.weight * term, loss, term, rows


def add_adapters(model, cfg: SFTConfig) -> int:
    """apply_lora per cfg (the top --lora-layers blocks, or all); the trainable count."""
    n_layers = len(model.layers)
    if cfg.lora_layers > n_layers:
        raise LoadError(f"--lora-layers {cfg.lora_layers} > the {n_layers} blocks of {cfg.model}")
    layers = list(range(n_layers - cfg.lora_layers, n_layers)) if cfg.lora_layers else None
    lc = cfg.lora_config()
    try:
        return lora.apply_lora(model, lc["rank"], lc["alpha"], lc["targets"], layers)
    except ValueError as e:  # targets the model does not have
        raise LoadError(f"--lora-targets {cfg.lora_targets}: {e}") from e


def encode_all(tokenizer, records: list[dict], max_answer_tokens: int) -> list:
    """[(tokens, prompt_len)] of the records; an answer over max_answer_tokens is a DataError."""
    out = [encode(tokenizer, r["prompt"], r["answer"]) for r in records]
    for r, (tokens, p) in zip(records, out, strict=True):
        if len(tokens) - p > max_answer_tokens:
            raise DataError(
                f"record {r['id']!r}: its answer is {len(tokens) - p} tokens with EOS, over "
                f"--max-answer-tokens {max_answer_tokens}; shorten it or raise the limit"
            )
    return out


def make_optimizer(cfg: SFTConfig, model, steps: int):
    """AdamW over the adapters: linear warm-up from lr/100, then cosine decay to lr/10."""
    schedule = precision.schedule(cfg.lr, cfg.warmup_steps, steps)
    return precision.adamw(
        model.trainable_parameters(), learning_rate=schedule, weight_decay=cfg.weight_decay
    )


def build(cfg: SFTConfig, extra: ExtraLoss | None = None) -> SFTRun:
    """Data read and split and the run folder checked (a bad file fails here, before the model
    loads), then the model loaded with fresh adapters and the examples encoded. `extra`: an
    experiment's term beside the SFT loss (ExtraLoss)."""
    records = load_data(cfg.data_files())
    if extra is not None:
        records = extra.records(records)
    train_recs, val_recs = split_by_prompt(records, cfg.val_fraction, cfg.seed)
    if extra is not None:
        extra.split(train_recs, val_recs)
    run_dir = Path(cfg.out_dir) / (cfg.run_name or cfg.default_run_name())
    if (run_dir / "metrics.jsonl").exists():
        raise FileExistsError(f"{run_dir} already holds a run; choose another --run-name")
    mx.random.seed(cfg.seed)  # LoRA's A matrices
    model, tokenizer = load(cfg.model, backend.parse_dtype(cfg.dtype))
    if tokenizer.eos_token_id is None:
        raise LoadError(f"{cfg.model}: the tokenizer names no EOS token to end the answers with")
    n_params = add_adapters(model, cfg)
    model.train()
    train = encode_all(tokenizer, train_recs, cfg.max_answer_tokens)
    val = encode_all(tokenizer, val_recs, cfg.max_answer_tokens)
    counts = {
        "records": len(records),
        "train_records": len(train),
        "val_records": len(val),
        "train_prompts": len({r["prompt_id"] for r in train_recs}),
        "val_prompts": len({r["prompt_id"] for r in val_recs}),
        "train_answer_tokens": int(sum(len(t) - p for t, p in train)),
        "val_answer_tokens": int(sum(len(t) - p for t, p in val)),
        "trainable_params": int(n_params),
    }
    if extra is not None:
        counts |= extra.encode(tokenizer, train_recs, val_recs)
    optimizer = make_optimizer(cfg, model, total_steps(cfg, len(train)))
    fix = backend.overflow_fix(model.model.norm.weight.dtype)
    failures = precision.Failures(cfg.max_failed_updates, fix)
    return SFTRun(
        cfg, run_dir, model, tokenizer, optimizer, train, val, counts, extra, failures
    )  # fmt: skip


def total_steps(cfg: SFTConfig, n_train: int) -> int:
    per_epoch = math.ceil(n_train / cfg.batch_size)
    return min(cfg.steps, per_epoch * cfg.epochs) if cfg.steps else per_epoch * cfg.epochs


def train_step(run: SFTRun, idx, step: int = 0) -> dict:
    """One AdamW step on the records `idx` (and on the extra term's batch of `step`); a
    non-finite loss or gradient skips it, a non-finite result is rolled back, and
    max_failed_updates of those in a row stop the run (precision.Failures)."""
    pad_id = run.tokenizer.eos_token_id
    batch = make_batch([run.train[i] for i in idx], pad_id)
    extra_batch = None if run.extra is None else run.extra.batch(step)
    (loss, sft_part, term, rows), grads = nn.value_and_grad(run.model, step_loss)(
        run.model, batch, run.extra, extra_batch, pad_id
    )
    grads, norm = precision.clip_grad_norm(grads, run.cfg.max_grad_norm)
    mx.eval(loss, sft_part, term, rows, grads, norm)
    outcome = "skipped"
    if math.isfinite(loss.item()) and math.isfinite(norm.item()):
        ok = precision.guarded_update(run.optimizer, run.model, grads)
        outcome = "applied" if ok else "rolled_back"
    run.failures.record(
        outcome, f"step {step + 1} (loss {loss.item()}, gradient norm {norm.item()})"
    )
    if outcome != "applied":
        tqdm.write(
            f"step {step + 1}: non-finite update {outcome}: {run.failures.counts}", file=sys.stderr
        )
    out = {"loss": loss.item(), "grad_norm": norm.item(), "tokens": int(batch[2].sum().item())}
    out |= {k: v for k, v in run.failures.counts.items() if k != "failed_in_a_row"}
    if run.extra is not None:
        out["sft_loss"] = sft_part.item()
        out |= run.extra.step_metrics(extra_batch, term.item(), np.array(rows))
    return out


def validate_extra(run: SFTRun) -> tuple[dict, dict]:
    """(figures for the history, flat figures for metrics.jsonl) of the extra term on its
    validation data: empty without one."""
    got = None if run.extra is None else run.extra.validate(run.model, run.tokenizer.eos_token_id)
    return got or ({}, {})


def save_best(run: SFTRun, step: int, state: dict) -> Path:
    """train.py's checkpoint of `step` (atomic; `latest` then names it); older ones removed."""
    path = checkpoint.save(
        run.run_dir,
        step,
        model=run.model,
        tokenizer=run.tokenizer,
        optimizer=run.optimizer,
        trainer_state=state,
        config=run_config(run),
        lora_cfg=run.cfg.lora_config(),
    )
    for old in (run.run_dir / "checkpoints").glob("step_*"):
        if old != path:
            shutil.rmtree(old)
    return path


def run_config(run: SFTRun) -> dict:
    """SFT's settings and the extra term's, as config.json and train_config.json hold them."""
    return dataclasses.asdict(run.cfg) | ({} if run.extra is None else run.extra.config())


def train(cfg: SFTConfig, extra: ExtraLoss | None = None) -> dict:
    """Run SFT per `cfg` (and `extra`'s term); return the summary (also written to
    RUN_DIR/sft.json). The backend line comes after the data's checks, so a bad input stays one
    error line."""
    run = build(cfg, extra)
    backend.announce()
    return fit(run)


def fit(run: SFTRun) -> dict:
    """The loop: steps over seeded epochs, validation, the best checkpoint kept; the summary."""
    cfg = run.cfg
    run.run_dir.mkdir(parents=True, exist_ok=True)
    (run.run_dir / "config.json").write_text(json.dumps(run_config(run), indent=1))
    log = runlog.MetricsLog(run.run_dir / "metrics.jsonl")
    pad_id = run.tokenizer.eos_token_id  # any id will do: padding is masked everywhere
    steps = total_steps(cfg, len(run.train))
    per_epoch = math.ceil(len(run.train) / cfg.batch_size)
    eval_every = cfg.eval_every or per_epoch
    lengths = np.array([len(t) for t, _ in run.train])
    tqdm.write(f"{cfg.data}: {run.counts}", file=sys.stderr)  # stdout: the summary
    tqdm.write(f"run dir: {run.run_dir}", file=sys.stderr)
    start = time.perf_counter()
    base_val = mean_loss(run.model, run.val, pad_id)
    history = [{"step": 0, "val_loss": base_val}]
    figures, flat = validate_extra(run)
    if figures:
        history[0][run.extra.name] = figures
    log.append(0, {"val_loss": base_val} | flat)
    best = {"step": None, "val_loss": math.inf}
    recent = []
    bar = tqdm(total=steps, desc="sft", unit="step", dynamic_ncols=True)
    step, epoch = 0, 0
    while step < steps:
        for idx in epoch_batches(lengths, cfg.batch_size, cfg.seed, epoch):
            if step == steps:
                break
            try:
                m = train_step(run, idx, step)
            except precision.NonFiniteError:
                bar.close()  # the error line goes below the bar
                raise
            step += 1
            recent.append(m["loss"])
            m |= {"lr": run.optimizer.learning_rate.item(), "epoch": epoch}
            if step % eval_every == 0 or step == steps:
                m["train_loss"] = float(np.mean(recent))
                m["val_loss"] = mean_loss(run.model, run.val, pad_id)
                recent = []
                history.append({k: m[k] for k in ("train_loss", "val_loss")} | {"step": step})
                figures, flat = validate_extra(run)
                if figures:
                    history[-1][run.extra.name] = figures
                    m |= flat
                if m["val_loss"] < best["val_loss"]:
                    best = {"step": step, "val_loss": m["val_loss"]}
                    state = {"epoch": epoch, "val_loss": m["val_loss"], "base_val_loss": base_val}
                    save_best(run, step, state)
            m["elapsed_s"] = time.perf_counter() - start
            log.append(step, m)
            bar.update(1)
            val = {"val": f"{m['val_loss']:.3f}"} if "val_loss" in m else {}
            if run.extra is not None:
                val |= run.extra.progress(m)
            bar.set_postfix(loss=f"{m['loss']:.3f}", **val)
        epoch += 1
    bar.close()
    summary = {
        "run_dir": str(run.run_dir),
        "checkpoint": str(checkpoint.latest(run.run_dir)),
        "best_step": best["step"],
        "best_val_loss": best["val_loss"],
        "base_val_loss": base_val,
        "steps": steps,
        "epochs_started": epoch,
        "elapsed_s": round(time.perf_counter() - start, 1),
        "counts": run.counts,
        "history": history,
    }
    if run.extra is not None:
        summary |= run.extra.summary(history, best["step"])
    (run.run_dir / "sft.json").write_text(strict_json.dumps(summary, indent=1))
    return summary


# The experiments' flags that sft.py once had, by the command that takes them now.
MOVED = {
    "experiments.opener_gate": ("--gate", "--gate-prompts", "--gate-weight", "--gate-batch",
                                "--gate-margin", "--gate-neg-weight"),
    "experiments.stance_pairs": ("--stance-pairs", "--stance-text", "--stance-weight",
                                 "--stance-beta", "--stance-batch", "--stance-folds",
                                 "--stance-holdout"),
}  # fmt: skip


def build_parser(description: str = "Supervised LoRA warm start of the policy (rl-values).",
                 extra_config=None) -> argparse.ArgumentParser:  # fmt: skip
    """sft.py's flags, and an experiment's beside them (`extra_config`); plain sft.py keeps the
    experiments' old flags as retired spellings that name the command taking them now."""
    p = argparse.ArgumentParser(allow_abbrev=False, description=description)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    flags.add_flags(p, SFTConfig)
    if extra_config is not None:
        flags.add_flags(p, extra_config)
        return p
    for command, old in MOVED.items():
        for flag in old:
            flags.retired(p, flag, f"it moved to `uv run python -m {command}`, which takes "
                                   "every sft.py flag too")  # fmt: skip
    return p


@errors.cli
def main(argv=None, extra=None, description: str | None = None) -> int:
    """The CLI: a bad setting, data file or model path is one `error:` line and exit 2.
    `extra` = (a config dataclass, make(its config, SFTConfig) -> ExtraLoss): an experiment's
    command is this one with its own flags beside SFT's (experiments/opener_gate.py,
    experiments/stance_pairs.py)."""
    extra_config, make = extra if extra is not None else (None, None)
    parser = build_parser(*([description] if description else []), extra_config=extra_config)
    cfg, own = flags.parse_config(parser, SFTConfig, argv)
    extra_loss = None
    if extra_config is not None:
        names = {f.name for f in dataclasses.fields(extra_config)}
        with errors.as_user_error(ValueError):  # the experiment's config checks
            extra_loss = make(extra_config(**{k: own.pop(k) for k in names}), cfg)
    summary = train(cfg, extra_loss)
    if own["json"]:
        print(strict_json.dumps(summary, indent=1))
    else:
        print(
            f"saved {summary['checkpoint']}: validation loss {summary['base_val_loss']:.3f} "
            f"(base) -> {summary['best_val_loss']:.3f} (step {summary['best_step']}); "
            f"load it with --model {summary['run_dir']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
