"""Mixed precision for the training commands: float32 where an update needs it, and an update
that cannot leave a non-finite weight behind.

`adamw(params, ...)` is MLX's AdamW when every trainable parameter is float32 (CPU, LoRA
adapters), else `MasterAdamW`: float32 master copies of the half-precision parameters, float32
moments, and the model given each update rounded to its own dtype (MLX's AdamW keeps its moments
in the parameter's dtype, where float16 turns eps 1e-8 into 0). `clip_grad_norm` sums squares in
float32. `guarded_update` applies a step and rolls weights and optimizer state back when any of
them came out non-finite; `Failures` counts skipped and rolled-back updates and stops a run after
`limit` in a row. `check_finite` is the checkpoint writers' last guard. `schedule` is the one
learning-rate schedule of train.py, sft.py and train_rm.py. No loss scaling: float16 gradients
below ~6e-8 flush to zero (knowledge/precision.md).
"""

import math

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core import errors

import mlx.core as mx
import mlx.optimizers as optim
from mlx.utils import tree_flatten, tree_map

MASTER = "master_weights"  # MasterAdamW's state key for the float32 copies


class NonFiniteError(errors.UserError):
    """Training stopped or a checkpoint was refused because weights are not finite: one
    `error:` line and exit 2 (errors.cli), never a run that ends 0 with a corrupt checkpoint."""


class MasterAdamW(optim.AdamW):
    """AdamW on float32 master copies of the parameters; the model holds each update rounded to
    its own dtype. The masters live in the optimizer's state (key MASTER), so a checkpoint's
    optimizer file saves them and restoring it resumes exactly. A float32 parameter is its own
    master (no copy)."""

    def init(self, parameters: dict):
        if MASTER not in self.state:
            self.state[MASTER] = tree_map(_as_float32, parameters)
        super().init(self.state[MASTER])

    def apply_gradients(self, gradients: dict, parameters: dict):
        if MASTER not in self.state:  # a float32 run's optimizer state, resumed in half precision
            self.init(tree_map(lambda _, p: p, gradients, parameters))
        master = super().apply_gradients(tree_map(_as_float32, gradients), self.state[MASTER])
        self.state[MASTER] = master
        return tree_map(
            lambda w, p: w if w.dtype == p.dtype else w.astype(p.dtype), master, parameters
        )


def _to(x: mx.array, dtype: mx.Dtype) -> mx.array:
    return x if x.dtype == dtype else x.astype(dtype)


def _as_float32(x: mx.array) -> mx.array:
    return _to(x, mx.float32)


def is_half(parameters) -> bool:
    """True when some parameter in the tree is not float32 (float16, bfloat16)."""
    return any(p.dtype != mx.float32 for _, p in tree_flatten(parameters))


def schedule(lr: float, warmup_steps: int, decay_steps: int | None = None, start: float = 1e-2):
    """The training commands' learning-rate schedule: linear warm-up from lr x `start` to lr
    over `warmup_steps` (at least 1), then cosine decay to lr / 10 over `decay_steps` total
    steps (sft.py, train_rm.py), or constant when `decay_steps` is None (train.py)."""
    warm = max(warmup_steps, 1)
    rest = (
        optim.cosine_decay(lr, max(decay_steps - warm, 1), lr * 0.1)
        if decay_steps is not None
        else lambda _: lr
    )
    return optim.join_schedules([optim.linear_schedule(lr * start, lr, warm), rest], [warm])


def adamw(parameters, **kw) -> optim.AdamW:
    """An AdamW (keyword arguments as MLX's) initialized on the trainable `parameters`: float32
    moments always, float32 master weights when any parameter is half precision."""
    opt = (MasterAdamW if is_half(parameters) else optim.AdamW)(**kw)
    opt.init(parameters)
    return opt


def clip_grad_norm(grads, max_norm: float):
    """(grads scaled to global norm <= max_norm, the norm before): MLX's clip_grad_norm with the
    squares summed in float32 (a float16 sum of squares overflows past 65504), each gradient
    kept in its dtype."""
    total = sum((mx.sum(mx.square(g.astype(mx.float32))) for _, g in tree_flatten(grads)),
                mx.array(0.0, mx.float32))  # fmt: skip
    norm = mx.sqrt(total)
    scale = mx.minimum(max_norm / (norm + 1e-6), 1.0)
    return tree_map(lambda g: g * scale.astype(g.dtype), grads), norm


def all_finite(tree) -> mx.array:
    """A scalar bool array: every floating array and Python number in the tree is finite
    (integer arrays always are). Lazy, so it can sit inside a compiled step: the update's
    loss-and-gradient check and the after-update weight check both use it."""
    leaves = [x for _, x in tree_flatten(tree)]
    if any(isinstance(x, int | float) and not math.isfinite(x) for x in leaves):
        return mx.array(False)
    checks = [mx.all(mx.isfinite(x)) for x in leaves if _floating(x)]
    return mx.all(mx.stack(checks)) if checks else mx.array(True)


def non_finite_names(tree) -> list[str]:
    """Names of the floating arrays in the tree that hold a NaN or an infinity."""
    return [k for k, x in tree_flatten(tree) if _floating(x) and not mx.all(mx.isfinite(x)).item()]


def _floating(x) -> bool:
    return isinstance(x, mx.array) and mx.issubdtype(x.dtype, mx.floating)


def guarded_update(optimizer: optim.Optimizer, model, grads) -> bool:
    """Apply `grads` to `model`; when a trainable weight or an optimizer state came out
    non-finite, put both back as they were and return False. Arrays are immutable in MLX, so
    the snapshot holds references, not copies."""
    weights = model.trainable_parameters()
    state = tree_map(lambda x: x, optimizer.state)  # new containers, the same arrays
    optimizer.update(model, grads)
    ok = all_finite((model.trainable_parameters(), optimizer.state))
    mx.eval(ok, model.parameters(), optimizer.state)
    if ok.item():
        return True
    model.update(weights)
    optimizer.state = state
    mx.eval(model.parameters(), optimizer.state)
    return False


class Failures:
    """Counts updates that were skipped (non-finite loss or gradient) or rolled back (non-finite
    weights after the step), and raises NonFiniteError after `limit` in a row."""

    def __init__(self, limit: int, fix: str, counts: dict | None = None):
        self.limit, self.fix = limit, fix
        self.counts = counts if counts is not None else {}
        for key in ("skipped_steps", "rolled_back_steps", "failed_in_a_row"):
            self.counts.setdefault(key, 0)

    def record(self, outcome: str, where: str) -> None:
        """`outcome` 'applied', 'skipped' or 'rolled_back'; `where` names the step in messages."""
        if outcome == "applied":
            self.counts["failed_in_a_row"] = 0
            return
        self.counts["skipped_steps" if outcome == "skipped" else "rolled_back_steps"] += 1
        self.counts["failed_in_a_row"] += 1
        if self.counts["failed_in_a_row"] >= self.limit:
            raise NonFiniteError(
                f"{self.counts['failed_in_a_row']} updates in a row were non-finite (last at "
                f"{where}; skipped {self.counts['skipped_steps']}, rolled back "
                f"{self.counts['rolled_back_steps']} in all): the run stops with the weights of "
                f"the last good update, and its last checkpoint is intact. Fix: {self.fix}"
            )


def check_finite(tree, what: str) -> None:
    """Refuse to write `what` (a checkpoint, a model folder) when a weight is non-finite."""
    bad = non_finite_names(tree)
    if bad:
        raise NonFiniteError(
            f"refusing to write {what}: {len(bad)} tensors hold NaN or infinity ({bad[:6]}); the "
            "previous checkpoint is left as it was"
        )
