"""Mixed precision measured: full fine-tuning of a small random Llama-architecture model on a
fixed next-token task, in float32 and in bfloat16/float16, with precision.adamw (float32 master
weights and moments, each update guarded) and with MLX's AdamW as it is (its state in the
parameters' dtype, no check after the update: what the training commands did before issue 55);
the `guarded` arm is float32 with the guard alone, for its memory.

Per arm it prints the loss at a few steps, the non-finite weight tensors at the end, the peak
memory of a step (weights, gradients, optimizer state and activations) and the time per step.
It is no speed benchmark on CPU (half-precision matmul has no BLAS path there) and no test: the
figures are recorded in knowledge/precision.md.

  uv run python -m bench.precision          # ~1M parameters, 40 steps per arm
"""

import argparse
import sys
import time

from core import backend, errors, precision, strict_json

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
from mlx.utils import tree_flatten, tree_map

from model import Model, ModelArgs

ARMS = (
    ("float32", "mlx"),
    ("float32", "guarded"),  # MLX's AdamW with the rollback snapshot: the guard's own memory
    ("bfloat16", "master"),
    ("bfloat16", "mlx"),
    ("float16", "master"),
    ("float16", "mlx"),
)


def build(a, dtype: str) -> Model:
    args = ModelArgs.from_config(
        {
            "model_type": "llama", "hidden_size": a.hidden, "num_hidden_layers": a.layers,
            "intermediate_size": a.hidden * 8 // 3, "num_attention_heads": a.hidden // 32,
            "num_key_value_heads": a.hidden // 64, "rms_norm_eps": 1e-5,
            "vocab_size": a.vocab, "max_position_embeddings": 4 * a.seq, "rope_theta": 10000.0,
            "tie_word_embeddings": True,
        }
    )  # fmt: skip
    mx.random.seed(0)
    model = Model(args)
    model.update(tree_map(lambda p: p.astype(getattr(mx, dtype)), model.parameters()))
    mx.eval(model.parameters())
    return model


def task(a) -> mx.array:
    """Sequences where each token follows from the one before (t' = 7t + 3 mod V): learnable."""
    start = mx.random.randint(0, a.vocab, (a.batch, 1), key=mx.random.key(1))
    rows = [start]
    for _ in range(a.seq):
        rows.append((rows[-1] * 7 + 3) % a.vocab)
    return mx.concatenate(rows, axis=1)


def loss_fn(model, tokens):
    logits = model(tokens[:, :-1]).astype(mx.float32)  # log-probs in float32
    return nn.losses.cross_entropy(logits, tokens[:, 1:], reduction="mean")


def run_arm(a, dtype: str, optimizer: str) -> dict:
    model = build(a, dtype)
    tokens = task(a)
    params = model.trainable_parameters()
    if optimizer == "master":  # and guarded
        opt = precision.adamw(params, learning_rate=a.lr)
    else:
        opt = optim.AdamW(learning_rate=a.lr)
        opt.init(params)
    grad_fn = nn.value_and_grad(model, loss_fn)
    losses, rolled_back, times = {}, 0, []
    mx.reset_peak_memory()
    for step in range(a.steps + 1):
        t0 = time.perf_counter()
        loss, grads = grad_fn(model, tokens)
        grads, _ = precision.clip_grad_norm(grads, 1.0)
        if step in a.report or step == a.steps:
            losses[step] = loss.item()
        if step == a.steps:
            break
        if optimizer in ("master", "guarded"):
            rolled_back += not precision.guarded_update(opt, model, grads)
        else:  # as before issue 55: no check after the update
            opt.update(model, grads)
            mx.eval(model.parameters(), opt.state)
        times.append(time.perf_counter() - t0)
    bad = precision.non_finite_names(model.parameters())
    n = sum(p.size for _, p in tree_flatten(model.parameters()))
    return {
        "dtype": dtype,
        "optimizer": optimizer,
        "loss": losses,
        "non_finite_tensors": len(bad),
        "rolled_back": rolled_back,
        "params": n,
        "peak_mb": round(mx.get_peak_memory() / 2**20, 1),
        "step_s": round(sorted(times)[len(times) // 2], 3),
    }


def row_line(r: dict) -> str:
    loss = " ".join(f"{k}:{v:.3f}" for k, v in r["loss"].items())
    return (
        f"{r['dtype']:>8} {r['optimizer']:>7}  non-finite {r['non_finite_tensors']:>3}  "
        f"rolled back {r['rolled_back']:>3}  peak {r['peak_mb']:>7} MB  "
        f"{r['step_s']} s/step  loss {loss}"
    )


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description="Mixed precision: loss and memory per dtype.", allow_abbrev=False
    )
    p.add_argument("--steps", type=int, default=40, help="optimizer steps per arm")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate")
    p.add_argument("--hidden", type=int, default=128, help="model width (a multiple of 64)")
    p.add_argument("--layers", type=int, default=4, help="transformer blocks")
    p.add_argument("--vocab", type=int, default=2048, help="vocabulary size")
    p.add_argument("--seq", type=int, default=64, help="tokens per row")
    p.add_argument("--batch", type=int, default=8, help="rows per step")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    if a.steps < 1 or a.hidden < 64 or a.hidden % 64 or min(a.layers, a.seq, a.batch) < 1:
        raise errors.UserError(
            f"--steps {a.steps}, --hidden {a.hidden}, --layers {a.layers}, --seq {a.seq}, "
            f"--batch {a.batch}: use steps, layers, seq and batch >= 1, hidden a multiple of 64"
        )
    a.report = [0, 1, 2, 5, 10, 20, 40]
    backend.announce()
    rows = []
    for dtype, optimizer in ARMS:
        rows.append(run_arm(a, dtype, optimizer))
        if not a.json:  # each arm as it ends: a run takes minutes on CPU
            print(row_line(rows[-1]), flush=True)
    if a.json:
        print(strict_json.dumps({"settings": vars(a), "arms": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
