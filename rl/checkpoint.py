"""Checkpoints that lose nothing: written to a temp dir, fsynced, then renamed into place.

A checkpoint `RUN_DIR/checkpoints/step_NNNNNN/` holds the weights in HF layout
(`model.safetensors` + `config.json` + tokenizer files, loadable by `load_weights.load`) or, with
LoRA, `adapters.safetensors` + `adapter_config.json` (dual adapters for gradient routing: the
same pair in `retain/` and `forget/`); `optimizer.safetensors`; `trainer.json`
(step, data cursor, KL controller, metrics/SQLite offsets; randomness is keyed by
(seed, step), so no RNG array is needed); and `train_config.json`
(the resolved run config). `RUN_DIR/latest` names the newest complete one. A crash mid-write
leaves only a `.tmp-*` folder, never a half checkpoint, and non-finite weights are refused
(precision.NonFiniteError), never written; `StopOnSignal` turns a first Ctrl-C or
SIGTERM into "finish the step, then checkpoint". It does not prune old checkpoints.
"""

import dataclasses
import json
import signal
import sys
from pathlib import Path

from core import (
    backend,  # noqa: F401
    precision,
)
from core import lora as lora_mod
from core.atomic import atomic_folder, atomic_write

import mlx.core as mx
from mlx.utils import tree_flatten, tree_unflatten


def _write_weights(out: Path, model, tokenizer, lora_cfg: dict | None) -> None:
    if lora_cfg and lora_cfg.get("forget_rank"):  # gradient routing: retain/ and forget/
        lora_mod.save_dual_adapters(model, out, lora_cfg["alpha"], lora_cfg["targets"])
        return
    if lora_cfg:
        lora_mod.save_adapters(model, out, lora_cfg["rank"], lora_cfg["alpha"], lora_cfg["targets"])
        return
    # A tied model has no lm_head parameter, so this is exactly the HF key set.
    mx.save_safetensors(str(out / "model.safetensors"), dict(tree_flatten(model.parameters())))
    config = {k: v for k, v in dataclasses.asdict(model.args).items() if v is not None}
    config["torch_dtype"] = str(model.model.norm.weight.dtype).removeprefix("mlx.core.")
    (out / "config.json").write_text(json.dumps(config, indent=1))
    tokenizer.save_pretrained(str(out))


def save(
    run_dir: Path,
    step: int,
    *,
    model,
    tokenizer,
    optimizer,
    trainer_state: dict,
    config: dict,
    lora_cfg: dict | None = None,
    extra=None,
) -> Path:
    """Write checkpoint `step` atomically and point RUN_DIR/latest at it; `extra(folder)`, when
    given, writes more state into the checkpoint's folder before it is renamed into place."""
    root = Path(run_dir) / "checkpoints"
    final = root / f"step_{step:06d}"
    precision.check_finite((model.parameters(), optimizer.state), f"checkpoint {final}")
    root.mkdir(parents=True, exist_ok=True)
    # Re-saving the same step (e.g. a signal right after a periodic save) replaces it.
    with atomic_folder(final, fsync=True) as tmp:
        _write_weights(tmp, model, tokenizer, lora_cfg)
        optimizer_state = dict(tree_flatten(optimizer.state))
        mx.save_safetensors(str(tmp / "optimizer.safetensors"), optimizer_state)
        state = dict(trainer_state, step=step)
        (tmp / "trainer.json").write_text(json.dumps(state, indent=1))
        (tmp / "train_config.json").write_text(json.dumps(config, indent=1))
        if extra is not None:
            extra(tmp)
    atomic_write(Path(run_dir) / "latest", final.name + "\n", fsync=True)
    return final


def latest(run_dir: Path) -> Path:
    """The newest complete checkpoint of a run; a clear error when there is none."""
    pointer = Path(run_dir) / "latest"
    if not pointer.exists():
        raise FileNotFoundError(
            f"{run_dir} has no checkpoint (no 'latest' file): nothing to resume; "
            f"start a new run without --resume"
        )
    ckpt = Path(run_dir) / "checkpoints" / pointer.read_text().strip()
    if not (ckpt / "trainer.json").exists():
        raise FileNotFoundError(f"{pointer} names {ckpt}, which is missing or incomplete")
    return ckpt


def read_state(ckpt: Path) -> tuple[dict, dict]:
    """(trainer state, run config) of a checkpoint."""
    return (
        json.loads((ckpt / "trainer.json").read_text()),
        json.loads((ckpt / "train_config.json").read_text()),
    )


def restore(ckpt: Path, *, model, optimizer, lora: bool = False) -> dict:
    """Load weights and optimizer state from `ckpt`; return the trainer state.

    There is no RNG array to restore: MLX cannot set its global key except by seeding, so the
    trainer derives every random draw from (seed, step) instead."""
    if lora and lora_mod.is_dual_folder(ckpt):
        lora_mod.load_dual_adapters(model, ckpt)
    elif lora:
        lora_mod.load_adapters(model, ckpt)
    else:
        weights = mx.load(str(ckpt / "model.safetensors"))
        model.load_weights(list(weights.items()), strict=True)
    opt = mx.load(str(ckpt / "optimizer.safetensors"))
    optimizer.state = tree_unflatten(list(opt.items()))
    state, _ = read_state(ckpt)
    mx.eval(model.parameters(), optimizer.state)
    return state


class StopOnSignal:
    """First Ctrl-C/SIGTERM: finish the step, checkpoint, exit. Second: stop at once."""

    def __init__(self):
        self.raised = False
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.raised:
            raise KeyboardInterrupt
        self.raised = True
        print(
            f"signal {signum}: finishing this step, then writing a checkpoint "
            "(signal again to abort without one)",
            file=sys.stderr,
        )

    def __exit__(self, *exc):
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
