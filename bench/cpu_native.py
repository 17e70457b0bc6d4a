"""Microbenchmark of the fused native CPU kernels (cpu_native) against MLX's own ops.

`kernels`: RMSNorm (mx.fast.rms_norm, the plain-MLX formula, ours), silu·up (plain
nn.silu(g)*u, cpu_ops' compiled polynomial stand-in, ours) and attention's masked softmax
(cpu_ops' stand-in, mx.softmax over mx.where, ours) at decode shapes (32 and 64 rows, 30 calls
per eval, one per layer of SmolLM2-135M) and an update shape (32 x 128 positions, one call),
forward and forward+backward; the arms alternate for --rounds rounds, medians and ratios printed.
`prefill`: attention for many queries (the reward model's scoring, the policy's update, short
runs) through cpu_ops' matmul path, the decode kernel and the prefill kernel, forward and
forward+backward, alternating.
`decode`: one decode step of the embedded SmolLM2-135M (30 blocks + LM head) at 32 and 64 rows
with the kernels on, on but for the fused decode attention, on but for RoPE, and off,
alternating round by round in one process.
"""

import argparse
import statistics
import time

from core import backend

# isort: split
from core import cpu_native, cpu_ops, errors, strict_json

import mlx.core as mx
import mlx.nn as nn

EPS = 1e-5


def _plain_rms(x, w):
    return x * mx.rsqrt(mx.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def _arms(op: str, ext) -> dict:
    if op == "softmax":
        return {
            "cpu_ops stand-in": cpu_ops.masked_softmax_cpu,
            "plain": lambda s, m: mx.softmax(mx.where(m, s, -mx.inf), axis=-1),
            "native": ext.masked_softmax,
        }
    if op == "rmsnorm":
        return {
            "mx.fast.rms_norm": lambda x, w: mx.fast.rms_norm(x, w, EPS),
            "plain": _plain_rms,
            "native": lambda x, w: ext.rms_norm(x, w, EPS),
        }
    return {
        "plain": lambda g, u: nn.silu(g) * u,
        "cpu_ops poly": cpu_ops.silu_mul_cpu,
        "native": ext.silu_mul,
    }


def _time(fn, inputs, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        mx.eval([fn(*a) for a in inputs])
    return (time.perf_counter() - t0) / reps


def bench_op(op, ext, shape, calls, backward, rounds) -> dict:
    mx.random.seed(0)
    width = shape[-1]
    second = {
        "rmsnorm": lambda: mx.random.normal((width,)),
        "silu_mul": lambda: mx.random.normal(shape),
        # attention's mask (B, 1, 1, L, S): causal over the last L of S slots
        "softmax": lambda: mx.broadcast_to(
            mx.arange(width)[None] <= (width - shape[-2] + mx.arange(shape[-2]))[:, None],
            (shape[0], 1, 1, shape[-2], width),
        ),
    }[op]
    inputs = [(mx.random.normal(shape), second(), mx.random.normal(shape)) for _ in range(calls)]
    mx.eval(inputs)
    fns = {}
    for name, f in _arms(op, ext).items():
        if backward:
            fns[name] = mx.grad(lambda a, b, c, f=f: (f(a, b) * c).sum(), argnums=(0, 1))
        else:
            fns[name] = lambda a, b, c, f=f: f(a, b)
    reps = 20 if calls > 1 else 3
    times = {k: [] for k in fns}
    for f in fns.values():
        _time(f, inputs, 2)
    for _ in range(rounds):
        for k, f in fns.items():
            times[k].append(_time(f, inputs, reps))
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    first = next(iter(ms))
    return {
        "op": op,
        "pass": "fwd+bwd" if backward else "fwd",
        "shape": list(shape),
        "calls_per_eval": calls,
        "ms": ms,
        f"speedup_vs_{first}": ms[first] / ms["native"],
    }


def kernels(ext, rounds: int) -> list[dict]:
    out = []
    # decode: 32 / 64 rows, one call per layer; update: 32 x 128 positions, one call. Attention's
    # scores: (B, Hkv 3, 3 heads each, L, S), decode at 76 slots, the update at 80 x 130.
    cases = [
        (op, (rows, width), calls)
        for op, width in (("rmsnorm", 576), ("silu_mul", 1536))
        for rows, calls in ((32, 30), (64, 30), (4096, 1))
    ] + [
        ("softmax", (32, 3, 3, 1, 76), 30),
        ("softmax", (64, 3, 3, 1, 76), 30),
        ("softmax", (32, 3, 3, 80, 130), 1),
    ]
    for backward in (False, True):
        for op, shape, calls in cases:
            r = bench_op(op, ext, shape, calls, backward, rounds)
            print(
                f"{r['op']} {r['pass']} {'x'.join(map(str, shape))} x{calls}: "
                + ", ".join(f"{k} {v:.2f} ms" for k, v in r["ms"].items())
                + f"; native {list(r.values())[-1]:.2f}x",
                flush=True,
            )
            out.append(r)
    return out


def _attention_inputs(B, L, S, calls, seed=0):
    """`calls` layers' (q, k, v, mask, cotangent): SmolLM2's 9/3 heads at head dim 64, k and v
    as views of a (B, 3, S + 60, 64) cache buffer, the model's causal mask for L queries after
    S - L cached slots with left padding of up to 30 slots."""
    import model  # start-up: only this part needs the model's mask

    mx.random.seed(seed)
    pad = mx.random.randint(0, 30, (B,))
    mask = model.attention_mask(pad, S - L, L)
    out = []
    for _ in range(calls):
        q = mx.random.normal((B, 9, L, 64))
        k, v = (mx.random.normal((B, 3, S + 60, 64))[:, :, :S] for _ in range(2))
        out.append((q, k, v, mask, mx.random.normal((B, 9, L, 64))))
    mx.eval(out)
    return out


def prefill(ext, rounds: int) -> list[dict]:
    """Attention for many queries: cpu_ops' matmul path (plain and in row blocks, as under
    `blocked()`), the decode kernel and the prefill kernel, forward and forward + backward."""
    scale = 0.125
    arms = {
        "matmul path": lambda q, k, v, m: cpu_ops.attention_cpu(q, k, v, scale, m, False),
        "matmul blocked": lambda q, k, v, m: cpu_ops.attention_cpu(q, k, v, scale, m, True),
        "decode kernel": lambda q, k, v, m: ext.decode_attention(q, k, v, m, scale),
        "prefill kernel": lambda q, k, v, m: ext.prefill_attention(q, k, v, m, scale)[0],
    }
    # (rows, queries, slots, calls per eval): the reward model's scoring (16 rows, 81 queries),
    # the policy's update (32 x 79, the top 12 blocks), short runs where the decode kernel is used.
    cases = [(16, 81, 140, 30), (32, 79, 140, 12), (64, 4, 140, 30), (64, 16, 140, 30)]
    out = []
    for backward in (False, True):
        for B, L, S, calls in cases:
            inputs = _attention_inputs(B, L, S, calls)
            fns = {}
            for name, f in arms.items():
                if not backward:
                    fns[name] = lambda q, k, v, m, g, f=f: f(q, k, v, m)
                elif name != "matmul blocked":  # blocks are for forward-only passes
                    fns[name] = mx.grad(
                        lambda q, k, v, m, g, f=f: (f(q, k, v, m) * g).sum(), argnums=(0, 1, 2)
                    )
            times = {k: [] for k in fns}
            for f in fns.values():
                _time(f, inputs, 1)
            for _ in range(rounds):
                for name, f in fns.items():
                    times[name].append(_time(f, inputs, 2))
            ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            best_other = min(v for k, v in ms.items() if k != "prefill kernel")
            r = {
                "pass": "fwd+bwd" if backward else "fwd",
                "shape": [B, 9, L, S],
                "calls_per_eval": calls,
                "ms": ms,
                "speedup_vs_best_other": best_other / ms["prefill kernel"],
            }
            print(
                f"attention {r['pass']} {B}x9x{L}x{S} x{calls}: "
                + ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items())
                + f"; prefill kernel {r['speedup_vs_best_other']:.2f}x the best other",
                flush=True,
            )
            out.append(r)
    return out


def decode(rows_list, steps: int, rounds: int) -> list[dict]:
    from bench_rollout import PROMPTS  # start-up: the decode bench alone needs the model stack
    from gwen import Gwen  # start-up: loads the embedded model's code only when asked

    g = Gwen.load("smollm2-135m")
    W = g.model.lm_head_weight()
    real = (cpu_native.load, cpu_ops.FUSED_MAX_QUERIES, cpu_ops.NATIVE_ROPE,
            cpu_ops.NATIVE_PREFILL)  # fmt: skip
    # "on": every kernel; "no fused attn": all but decode attention (the matmul path with the
    # native softmax); "no native rope": all but RoPE (the compiled twin); "off": cpu_ops' plain
    # stand-ins.
    arms = {
        "on": real,
        "no fused attn": (real[0], 0, real[2], False),
        "no native rope": (real[0], real[1], False, real[3]),
        "off": (lambda: None, *real[1:]),
    }
    out = []
    for rows in rows_list:
        tokens, pad = g.left_pad([g.chat_tokens(p) for p in PROMPTS])
        n_runs = len(arms) * (rounds + 1)
        cache, _ = g.prefill(tokens, pad, tokens.shape[1] + n_runs * steps + 8)
        cache = cache.broadcast_batch(rows // len(PROMPTS))
        tok = mx.ones((rows, 1), dtype=mx.int32)
        times = {k: [] for k in arms}
        for i in range(n_runs):
            arm = list(arms)[i % len(arms)]
            (cpu_native.load, cpu_ops.FUSED_MAX_QUERIES, cpu_ops.NATIVE_ROPE,
             cpu_ops.NATIVE_PREFILL) = arms[arm]  # fmt: skip
            t0 = time.perf_counter()
            for _ in range(steps):
                h = g.model.hidden(tok, cache)
                mx.eval(h[:, -1, :] @ W.T)
            if i >= len(arms):  # the first round of each arm warms up
                times[arm].append((time.perf_counter() - t0) / steps)
        (cpu_native.load, cpu_ops.FUSED_MAX_QUERIES, cpu_ops.NATIVE_ROPE,
         cpu_ops.NATIVE_PREFILL) = real  # fmt: skip
        ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        gains = {
            "speedup": ms["off"] / ms["on"],
            "fused_attention_speedup": ms["no fused attn"] / ms["on"],
            "native_rope_speedup": ms["no native rope"] / ms["on"],
        }
        print(
            f"decode step {rows} rows (cache {cache.offset} slots at the end): "
            + ", ".join(f"{k} {v:.1f} ms" for k, v in ms.items())
            + "; "
            + ", ".join(f"{k} {v:.2f}x" for k, v in gains.items()),
            flush=True,
        )
        out.append({"rows": rows, "ms": ms, **gains})
    return out


@errors.cli
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument(
        "what", nargs="*", default=["kernels", "decode"], help="kernels, prefill and/or decode"
    )
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds per arm")
    ap.add_argument("--steps", type=int, default=5, help="decode steps per round")
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = ap.parse_args(argv)
    if set(args.what) - {"kernels", "prefill", "decode"}:
        raise errors.UserError(f"unknown part(s) {args.what}: choose kernels, prefill, decode")
    ext = cpu_native.load()
    if ext is None:
        raise errors.UserError(
            "the native kernels are not available (see the note above): nothing to measure"
        )
    print(f"threads {ext.threads()}, simd {ext.simd_level()}, BLAS {backend.BLAS}, "
          f"mlx {mx.__version__}", flush=True)  # fmt: skip
    result = {"threads": ext.threads(), "simd": ext.simd_level(), "mlx": mx.__version__}
    if "kernels" in args.what:
        result["kernels"] = kernels(ext, args.rounds)
    if "prefill" in args.what:
        result["prefill"] = prefill(ext, args.rounds)
    if "decode" in args.what:
        result["decode"] = decode((32, 64), args.steps, args.rounds)
    if args.json:
        print(strict_json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
