"""Supervised warm start: LoRA fine-tuning of the policy on (prompt, answer) records.

Each record's prompt is formatted exactly as the GRPO policy sees it (chat_format.chat_tokens,
thinking off) and followed by the answer's tokens and the tokenizer's EOS, the token that ends a
sampled completion. The loss is the mean cross-entropy over answer tokens only: the prompt and
the padding are masked, the closing EOS is included (so the model learns to stop). Prompts are
split into train and validation by prompt (seeded, per category), validation loss is measured at
step 0, every --eval-every steps or each epoch, and at the end; only the best-by-validation
checkpoint is kept, in train.py's layout (RUN_DIR/checkpoints/step_N/ with PEFT adapters,
optimizer, trainer.json, train_config.json; RUN_DIR/latest names it), so `--model RUN_DIR` loads
it anywhere (load_weights merges the adapters into the base). It is not resumable and does no
full fine-tuning or packing of several records into one row.

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
from core.prompts import CATEGORIES, DataError, load_sft, step_indices

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from tqdm import tqdm

from load_weights import LoadError, load
from opener_gate import (
    LOG_HALF,
    check_first_tokens,
    check_openers,
    flat_gate,
    gate_figures,
    gate_loss,
    gate_records,
    gate_rows,
    gate_scores,
    gate_split,
    parse_gates,
)
from rl import checkpoint, runlog
from stance_pairs import stance_contrast, stance_records, stance_split

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
    stance_pairs: str = _f(
        "",
        "prompt files with minimal pairs (e.g. data/prompts.jsonl,data/twins_v2.jsonl): adds "
        "the stance contrast (empty = plain SFT)",
    )
    stance_text: str = _f("That premise is false.", "the stance sentence the contrast scores")
    stance_weight: float = _f(1.0, "weight of the stance contrast beside the SFT loss")
    stance_beta: float = _f(1.0, "scale of the log-prob margin inside the contrast's softplus")
    stance_batch: int = _f(8, "minimal pairs per optimizer step")
    stance_folds: int = _f(4, "folds of the pairs by claim group; one is held out")
    stance_holdout: int = _f(0, "the held-out fold: its pairs and SFT records never trained on")
    gate: str = _f(
        "",
        "opener gates 'category=sentence; ...': the sentence opens that category's answers and "
        "p(sentence | prompt) is trained as its classifier on --gate-prompts (empty = none)",
    )
    gate_prompts: str = _f(
        "data/prompts.jsonl,data/twins_v2.jsonl",
        "prompt files the gates learn from (training prompts only; twins go with their claim)",
    )
    gate_weight: float = _f(1.0, "weight of the gates' cross-entropy beside the SFT loss")
    gate_batch: int = _f(16, "gate prompts per optimizer step")
    gate_margin: float = _f(
        0.0,
        "weight of the greedy term: each sentence's first token above the likeliest other token "
        "on its category and below it elsewhere (0 = the cross-entropy alone; routed around in "
        "attempt 26: knowledge/sft.md)",
    )
    gate_neg_weight: float = _f(
        1.0,
        "weight of the cross-entropy on prompts outside a gate's category (> 1 lowers the "
        "sentence's probability there, below greedy decoding's threshold: knowledge/sft.md)",
    )
    dtype: str | None = flags.dtype_option()
    max_failed_updates: int = _f(
        3, "stop after this many non-finite updates in a row (each skipped or rolled back)"
    )

    def __post_init__(self):
        backend.parse_dtype(self.dtype)  # ValueError naming --dtype and its values
        for name in (
            "epochs", "batch_size", "lora_rank", "max_answer_tokens", "stance_batch", "gate_batch",
            "max_failed_updates",
        ):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        for name in ("steps", "warmup_steps", "eval_every", "lora_layers"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 0")
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr} must be > 0")
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction={self.val_fraction} must be in (0, 1), e.g. 0.15")
        if self.stance_pairs:
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
                    "must be > 0 (leave --stance-pairs empty for plain SFT)"
                )
        if self.gate:
            self.gate_list()  # raises on a bad entry
            if self.stance_pairs:
                raise ValueError(
                    "--gate and --stance-pairs both open answers with a sentence: use one"
                )
            if not (self.gate_weight > 0 and self.gate_neg_weight > 0) or self.gate_margin < 0:
                raise ValueError(
                    f"gate_weight={self.gate_weight} and gate_neg_weight={self.gate_neg_weight} "
                    f"must be > 0 and gate_margin={self.gate_margin} >= 0"
                )
            if not self.gate_prompts.strip():
                raise ValueError("gate_prompts is empty: name the prompt files the gates learn")
        if not self.data_files():
            raise ValueError("data is empty: name at least one JSONL file")

    def gate_list(self) -> list[tuple[str, str]]:
        return parse_gates(self.gate) if self.gate else []

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
            raise DataError(f"{path}: file not found; build it: uv run python data/make_sft.py")
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
    stance: list | None = None  # [(false row, twin row)] of the training pairs, or None
    held_pairs: list | None = None  # [(false record, twin record)] never trained on
    gate: dict | None = None  # rows/targets of the gates' training and validation prompts
    failures: precision.Failures | None = None  # skipped and rolled-back updates (train_step)


def step_loss(model, batch, rows, gate, pad_id: int, cfg: SFTConfig):
    """(SFT loss + the weighted extra term, SFT loss, extra term, its per-row figures): the
    stance contrast and its margins (rows), the gates' cross-entropy and log p(sentence) (gate
    = (rows, targets)), or nothing (plain SFT)."""
    loss = sft_loss(model, *batch)
    if rows is not None:
        contrast, margins = stance_contrast(model, rows, pad_id, cfg.stance_beta)
        return loss + cfg.stance_weight * contrast, loss, contrast, margins
    if gate is not None:
        bce, lp = gate_loss(model, *gate, pad_id, cfg.gate_margin, cfg.gate_neg_weight)
        return loss + cfg.gate_weight * bce, loss, bce, lp
    return loss, loss, mx.zeros(()), mx.zeros((0,))


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


def build(cfg: SFTConfig) -> SFTRun:
    """Data read and split and the run folder checked (a bad file fails here, before the model
    loads), then the model loaded with fresh adapters and the examples encoded."""
    records = load_data(cfg.data_files())
    stance_pairs = held_pairs = None
    dropped = 0
    if cfg.stance_pairs:
        stance_pairs, held_pairs = stance_split(
            cfg.stance_pairs, cfg.stance_folds, cfg.stance_holdout, cfg.seed
        )
        records, dropped = stance_records(records, cfg.stance_text, held_pairs)
    gates = cfg.gate_list()
    if gates:
        records = gate_records(records, gates)
    train_recs, val_recs = split_by_prompt(records, cfg.val_fraction, cfg.seed)
    if gates:  # the SFT's validation prompts stay out of the gates' training too
        val_texts = {r["prompt"].strip() for r in val_recs}
        gate_train, gate_val = gate_split(cfg.gate_prompts, val_texts, cfg.val_fraction, cfg.seed)
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
    stance = None
    if stance_pairs is not None:
        text = cfg.stance_text

        def rows(r):
            return encode(tokenizer, r["prompt"], text, eos=False)

        stance = [(rows(a), rows(b)) for a, b in stance_pairs]
        counts |= {
            "stance_train_pairs": len(stance_pairs),
            "stance_held_pairs": len(held_pairs),
            "records_dropped_on_held_pairs": dropped,
        }
    gate = None
    if gates:
        check_openers(tokenizer, train_recs + val_recs, gates)
        if cfg.gate_margin:
            try:
                check_first_tokens(tokenizer, gates)
            except ValueError as e:
                raise DataError(f"--gate {cfg.gate!r}: {e}") from e
        gate = {"train": gate_rows(tokenizer, gate_train, gates)}
        gate["val"] = gate_rows(tokenizer, gate_val, gates)
        gate["val_categories"] = [r["category"] for r in gate_val]
        counts |= {"gate_train_prompts": len(gate_train), "gate_val_prompts": len(gate_val)}
    optimizer = make_optimizer(cfg, model, total_steps(cfg, len(train)))
    fix = backend.overflow_fix(model.model.norm.weight.dtype)
    failures = precision.Failures(cfg.max_failed_updates, fix)
    return SFTRun(
        cfg, run_dir, model, tokenizer, optimizer, train, val, counts, stance, held_pairs, gate,
        failures,
    )  # fmt: skip


def total_steps(cfg: SFTConfig, n_train: int) -> int:
    per_epoch = math.ceil(n_train / cfg.batch_size)
    return min(cfg.steps, per_epoch * cfg.epochs) if cfg.steps else per_epoch * cfg.epochs


def train_step(run: SFTRun, idx, step: int = 0) -> dict:
    """One AdamW step on the records `idx` (and, with the stance contrast, the pairs of
    `step`); a non-finite loss or gradient skips it, a non-finite result is rolled back, and
    max_failed_updates of those in a row stop the run (precision.Failures)."""
    pad_id = run.tokenizer.eos_token_id
    batch = make_batch([run.train[i] for i in idx], pad_id)
    rows = gate = None
    if run.stance is not None:
        pick = step_indices(len(run.stance), run.cfg.stance_batch, run.cfg.seed, step, 2000)
        rows = [run.stance[i] for i in pick]
    if run.gate is not None:
        gate_rows_all, gate_targets = run.gate["train"]
        pick = step_indices(len(gate_rows_all), run.cfg.gate_batch, run.cfg.seed, step, 3000)
        gate = ([gate_rows_all[i] for i in pick], gate_targets[pick])
    (loss, sft_part, extra, margins), grads = nn.value_and_grad(run.model, step_loss)(
        run.model, batch, rows, gate, pad_id, run.cfg
    )
    grads, norm = precision.clip_grad_norm(grads, run.cfg.max_grad_norm)
    mx.eval(loss, sft_part, extra, margins, grads, norm)
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
    if rows is not None:
        m = np.array(margins)
        out |= {
            "sft_loss": sft_part.item(),
            "stance_margin": float(m.mean()),
            "stance_accuracy": float((m > 0).mean()),
        }
    if gate is not None:
        lp, t = np.array(margins), gate[1]
        out |= {"sft_loss": sft_part.item(), "gate_loss": extra.item()}
        out["gate_accuracy"] = float(np.mean((lp > LOG_HALF) == (t > 0.5)))
    return out


def gate_val_figures(run: SFTRun) -> dict:
    """The gates on their validation prompts (gate_figures), no gradient."""
    rows, _ = run.gate["val"]
    lp, margins = gate_scores(run.model, rows, run.tokenizer.eos_token_id)
    return gate_figures(lp, run.gate["val_categories"], run.cfg.gate_list(), margins)


def save_best(run: SFTRun, step: int, state: dict) -> Path:
    """train.py's checkpoint of `step` (atomic; `latest` then names it); older ones removed."""
    path = checkpoint.save(
        run.run_dir,
        step,
        model=run.model,
        tokenizer=run.tokenizer,
        optimizer=run.optimizer,
        trainer_state=state,
        config=dataclasses.asdict(run.cfg),
        lora_cfg=run.cfg.lora_config(),
    )
    for old in (run.run_dir / "checkpoints").glob("step_*"):
        if old != path:
            shutil.rmtree(old)
    return path


def train(cfg: SFTConfig) -> dict:
    """Run SFT per `cfg`; return the summary (also written to RUN_DIR/sft.json). The backend
    line comes after the data's checks, so a bad input stays one error line."""
    run = build(cfg)
    backend.announce()
    return fit(run)


def fit(run: SFTRun) -> dict:
    """The loop: steps over seeded epochs, validation, the best checkpoint kept; the summary."""
    cfg = run.cfg
    run.run_dir.mkdir(parents=True, exist_ok=True)
    (run.run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=1))
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
    if run.gate is not None:
        history[0]["gate"] = gate_val_figures(run)
    log.append(0, {"val_loss": base_val} | flat_gate(history[0].get("gate", {})))
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
                if run.gate is not None:
                    history[-1]["gate"] = gate_val_figures(run)
                    m |= flat_gate(history[-1]["gate"])
                if m["val_loss"] < best["val_loss"]:
                    best = {"step": step, "val_loss": m["val_loss"]}
                    state = {"epoch": epoch, "val_loss": m["val_loss"], "base_val_loss": base_val}
                    save_best(run, step, state)
            m["elapsed_s"] = time.perf_counter() - start
            log.append(step, m)
            bar.update(1)
            val = {"val": f"{m['val_loss']:.3f}"} if "val_loss" in m else {}
            if "stance_margin" in m:
                val["margin"] = f"{m['stance_margin']:+.2f}"
            if "gate_loss" in m:
                val["gate"] = f"{m['gate_loss']:.3f}"
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
    if run.held_pairs is not None:
        summary["stance_held_pairs"] = [[a["id"], b["id"]] for a, b in run.held_pairs]
    if run.gate is not None:  # the gates on their validation prompts, before and as kept
        at = {h["step"]: h["gate"] for h in history}
        summary["gate"] = {
            "gates": [{"category": c, "sentence": t} for c, t in cfg.gate_list()],
            "val_step_0": at[0],
            "val_best_step": at.get(best["step"]),
        }
    (run.run_dir / "sft.json").write_text(strict_json.dumps(summary, indent=1))
    return summary


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description="Supervised LoRA warm start of the policy (rl-values)."
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    flags.add_flags(p, SFTConfig)
    return p


@errors.cli
def main(argv=None) -> int:
    """The CLI: a bad setting, data file or model path is one `error:` line and exit 2."""
    cfg, own = flags.parse_config(build_parser(), SFTConfig, argv)
    summary = train(cfg)
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
