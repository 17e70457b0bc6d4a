"""Benchmark: chunked `kernels.token_logprobs` against its naive twin (full log-softmax + gather).

Same inputs for both, forward and forward+backward (gradients w.r.t. hidden and the LM head),
wall time (median of trials after a warm-up) and `mx.get_peak_memory()` (reset before each
trial; it includes the inputs, so both sides carry the same weight and hidden state). Cases: the
SmolLM2 head (V=49152, D=576) at 64x256 rows, and a Qwen3-vocabulary head (V=151936, D=1024) at
fewer rows. Not a model benchmark: random inputs, no transformer.

    uv run python -m bench.logprobs            # table
    uv run python -m bench.logprobs --json     # one JSON object (main case fwd+bwd at top level)
"""

import argparse
import functools
import os
import platform
import statistics
import sys
import time

from core import backend

# isort: split
from core import errors, kernels, strict_json

import mlx.core as mx


def _available_mb() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("inf")


def _fit_rows(rows: int, n_vocab: int) -> int:
    """Rows the naive path can afford here: it holds about 5 (rows, V) float32 tensors at once
    in forward+backward (measured), so leave headroom for the rest of the machine."""
    per_row_mb = 5 * n_vocab * 4 / 2**20
    budget = 0.6 * _available_mb()
    fit = rows
    while fit > 256 and fit * per_row_mb > budget:
        fit //= 2
    return fit


def _inputs(rows: int, n_vocab: int, dim: int, seed: int = 0):
    key = mx.random.key(seed)
    k1, k2, k3 = mx.random.split(key, 3)
    hidden = mx.random.normal((rows, dim), key=k1)
    weight = mx.random.normal((n_vocab, dim), key=k2) * (1.0 / dim**0.5)
    tokens = mx.random.randint(0, n_vocab, (rows,), key=k3)
    mx.eval(hidden, weight, tokens)
    return hidden, weight, tokens


def _measure(steps: dict, trials: int) -> dict:
    """{name: (median seconds, max peak MB)}; one warm-up each, then the trials interleaved
    (naive, ours, naive, ...) so load from other work on a shared machine hits both alike."""
    for step in steps.values():
        mx.eval(step())
    times = {name: [] for name in steps}
    peaks = {name: [] for name in steps}
    for _ in range(trials):
        for name, step in steps.items():
            mx.clear_cache()
            mx.reset_peak_memory()
            start = time.perf_counter()
            mx.eval(step())
            times[name].append(time.perf_counter() - start)
            peaks[name].append(mx.get_peak_memory() / 2**20)
    return {name: (statistics.median(times[name]), max(peaks[name])) for name in steps}


def bench_case(rows, n_vocab, dim, temperature, trials, chunk_rows, chunk_vocab) -> dict:
    hidden, weight, tokens = _inputs(rows, n_vocab, dim)

    def ours(h, w):
        return kernels.token_logprobs(
            h, w, tokens, temperature, chunk_rows=chunk_rows, chunk_vocab=chunk_vocab
        )

    def naive(h, w):
        return kernels.token_logprobs_naive(h, w, tokens, temperature)

    result = {"rows": rows, "vocab": n_vocab, "dim": dim, "temperature": temperature}
    for mode in ("fwd", "fwd_bwd"):
        steps = {}
        for name, fn in (("naive", naive), ("ours", ours)):
            if mode == "fwd":
                steps[name] = functools.partial(fn, hidden, weight)
            else:
                grad = mx.value_and_grad(lambda h, w, fn=fn: fn(h, w).sum(), argnums=(0, 1))
                steps[name] = functools.partial(grad, hidden, weight)
        measured = _measure(steps, trials)
        for name, (seconds, peak) in measured.items():
            result[f"{mode}_{name}_s"] = round(seconds, 6)
            result[f"{mode}_{name}_peak_mb"] = round(peak, 1)
        # the ratio of the unrounded times (a tiny case rounds to 0 ms)
        result[f"{mode}_time_ratio"] = round(measured["ours"][0] / measured["naive"][0], 3)
        result[f"{mode}_peak_ratio"] = round(
            result[f"{mode}_ours_peak_mb"] / result[f"{mode}_naive_peak_mb"], 3
        )
    ours_out, naive_out = ours(hidden, weight), naive(hidden, weight)
    result["max_abs_diff"] = float(mx.abs(ours_out - naive_out).max())
    return result


def _print_table(name: str, r: dict) -> None:
    print(f"\n{name}: rows={r['rows']} V={r['vocab']} D={r['dim']} T={r['temperature']}")
    head = ("", "naive s", "ours s", "ratio", "naive MB", "ours MB", "ratio")
    print("  {:8s} {:>9s} {:>9s} {:>6s}   {:>9s} {:>9s} {:>6s}".format(*head))
    for mode in ("fwd", "fwd_bwd"):
        print(
            f"  {mode:8s} {r[f'{mode}_naive_s']:9.2f} {r[f'{mode}_ours_s']:9.2f} "
            f"{r[f'{mode}_time_ratio']:6.2f}   {r[f'{mode}_naive_peak_mb']:9.0f} "
            f"{r[f'{mode}_ours_peak_mb']:9.0f} {r[f'{mode}_peak_ratio']:6.3f}"
        )
    print(f"  max |ours - naive| log-prob: {r['max_abs_diff']:.2e}")


@errors.cli
def main(argv=None) -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--vocab", type=int, default=49152, help="main case vocabulary (SmolLM2)")
    p.add_argument("--dim", type=int, default=576, help="main case hidden size (SmolLM2)")
    p.add_argument("--rows", type=int, default=64 * 256, help="main case rows (64 x 256 tok)")
    p.add_argument("--qwen-rows", type=int, default=2048, help="rows for V=151936, D=1024")
    p.add_argument("--no-qwen", action="store_true", help="skip the Qwen3-vocabulary case")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    p.add_argument("--trials", type=int, default=3, help="timed trials after one warm-up")
    p.add_argument("--chunk-rows", type=int, default=None, help="token_logprobs chunk_rows")
    p.add_argument("--chunk-vocab", type=int, default=None, help="token_logprobs chunk_vocab")
    p.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = p.parse_args(argv)
    if args.trials < 3:
        raise errors.UserError(
            f"--trials={args.trials}: use at least 3 (the median of fewer is noise)"
        )
    backend.announce()

    cases = {"main": (args.rows, args.vocab, args.dim)}
    if not args.no_qwen:
        cases["qwen3_vocab"] = (args.qwen_rows, 151936, 1024)
    report = {
        "hardware": f"{platform.machine()}, {os.cpu_count()} cores",
        "backend": backend.backend_name(),
        "blas": backend.BLAS,
        "kernels": kernels.kernel_backend(),
        "mlx": mx.__version__,
        "trials": args.trials,
    }
    for name, (rows, n_vocab, dim) in cases.items():
        fit = _fit_rows(rows, n_vocab)
        if fit != rows:
            print(f"[bench] {name}: rows {rows} -> {fit} to fit free memory", file=sys.stderr)
        report[name] = bench_case(
            fit, n_vocab, dim, args.temperature, args.trials, args.chunk_rows, args.chunk_vocab
        )
        mx.clear_cache()
    main_case = report["main"]
    report.update(
        naive_peak_mb=main_case["fwd_bwd_naive_peak_mb"],
        ours_peak_mb=main_case["fwd_bwd_ours_peak_mb"],
        peak_ratio=main_case["fwd_bwd_peak_ratio"],
        naive_s=main_case["fwd_bwd_naive_s"],
        ours_s=main_case["fwd_bwd_ours_s"],
        time_ratio=main_case["fwd_bwd_time_ratio"],
    )
    if args.json:
        print(strict_json.dumps(report))
        return
    print(
        f"{report['hardware']}, {report['blas']}, mlx {report['mlx']}, kernels={report['kernels']}"
    )
    for name in cases:
        _print_table(name, report[name])


if __name__ == "__main__":
    sys.exit(main())
