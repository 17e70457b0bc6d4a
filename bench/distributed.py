"""Distributed step benchmark: bench/train.py's GRPO step in one process and on N local ranks.

Runs `python -m bench.train --json` twice on the same global batch (B prompts x G samples x exactly
--max-new-tokens new tokens): once as a plain process, once under `mlx.launch -n N` (ring backend,
127.0.0.1), and times one all_sum of a gradient the size of the model's trainable parameters on
the N ranks (distributed.sum_gradients, the collective every step makes). Prints both step
times, the split into rollout / reward / update, the ratio, and the all_sum's time and
bandwidth. On a machine with fewer cores than ranks x BLAS threads this measures overhead, not
speed-up (knowledge/distributed.md). Results are recorded in knowledge/benchmarks.md.

  uv run python -m bench.distributed --model smollm2-135m --ranks 2
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from core import backend, errors, flags, strict_json

import mlx.core as mx
import mlx.optimizers as optim
from mlx.utils import tree_flatten, tree_map

from load_weights import load, resolve
from rl import distributed

ROOT = Path(__file__).resolve().parent.parent


def launcher(ranks: int) -> list[str]:
    """The mlx.launch command line for `ranks` local ranks on free ports."""
    exe = Path(sys.executable).parent / "mlx.launch"
    if not exe.exists():
        raise errors.UserError(f"mlx.launch is not installed beside {sys.executable}: uv sync")
    port = distributed.free_local_port(ranks)
    return [str(exe), "-n", str(ranks), "--backend", "ring", "--starting-port", str(port), "--"]


def json_run(cmd: list[str]) -> dict:
    """Run cmd and return the JSON object its stdout ends with (rank 0's, under mlx.launch); a
    user error it reports (exit 2, `error: ...`) is raised as ours."""
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    said = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    if not lines and proc.returncode == 2 and said:
        raise errors.UserError(said[-1].removeprefix("error: "))
    if not lines:
        raise SystemExit(
            f"error: {' '.join(cmd)} printed no result (exit {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    return json.loads(lines[-1])


def allsum_worker(model: str, trials: int) -> None:
    """Under mlx.launch: time sum_gradients on a tree shaped like the model's parameters, and
    the AdamW update every rank repeats (the parts of a step that do not shrink with N)."""
    net, _ = load(model)  # the model's own dtype on this backend (backend.default_dtype)
    grads = tree_map(lambda p: mx.ones_like(p) * 1e-3, net.trainable_parameters())
    mx.eval(grads)
    n_bytes = sum(v.nbytes for _, v in tree_flatten(grads))
    opt = optim.AdamW(learning_rate=1e-5)
    opt.init(net.trainable_parameters())

    def adamw():
        opt.update(net, grads)
        mx.eval(net.parameters(), opt.state)

    def allsum():
        mx.eval(distributed.sum_gradients(grads))

    result = {}
    for name, fn in (("allsum", allsum), ("adamw", adamw)):
        times = []
        for _ in range(trials + 1):  # the first is a warm-up
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        result[f"{name}_s"] = statistics.median(times[1:])
    result["allsum_mb"] = n_bytes / 2**20
    result["allsum_gb_per_s"] = n_bytes / result["allsum_s"] / 1e9
    if distributed.is_main():
        print(strict_json.dumps(result))


@errors.cli
def main(argv=None) -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="policy checkpoint")
    p.add_argument("--reward", default="happy", help="happy | rubric")
    p.add_argument("--ranks", type=int, default=2, help="local ranks to compare with 1 process")
    p.add_argument("--prompts-per-step", type=int, default=4, help="global prompts per step B")
    p.add_argument("--group-size", type=int, default=4, help="samples per prompt G")
    p.add_argument("--max-new-tokens", type=int, default=16, help="new tokens per sample (exact)")
    p.add_argument("--steps", type=int, default=3, help="steps per run; the first is warm-up")
    p.add_argument("--kl-coef", type=float, default=0.04, help="0 drops the reference model")
    p.add_argument("--trials", type=int, default=3, help="timed all_sum calls")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--allsum-worker", action="store_true", help=argparse.SUPPRESS)
    flags.renamed(p, "--prompts", "--prompts-per-step")
    flags.renamed(p, "--max-tokens", "--max-new-tokens")
    a = p.parse_args(argv)
    if a.allsum_worker:
        return allsum_worker(a.model, a.trials)
    if a.ranks < 1 or a.prompts_per_step % a.ranks:
        raise errors.UserError(
            f"--prompts-per-step {a.prompts_per_step} must be a multiple of --ranks {a.ranks}"
        )
    resolve(a.model)  # a model that is not there: LoadError now, not from the first run
    bench = [sys.executable, "-m", "bench.train", "--json", "--model", a.model]  # cwd: ROOT
    bench += ["--reward", a.reward, "--prompts-per-step", str(a.prompts_per_step)]
    bench += ["--group-size", str(a.group_size)]
    bench += ["--max-new-tokens", str(a.max_new_tokens), "--steps", str(a.steps)]
    bench += ["--kl-coef", str(a.kl_coef)]
    one = json_run(bench)
    print(f"1 process: {strict_json.dumps(one)}", file=sys.stderr, flush=True)
    many = json_run(launcher(a.ranks) + bench)
    print(f"{a.ranks} ranks: {strict_json.dumps(many)}", file=sys.stderr, flush=True)
    comm = json_run(
        launcher(a.ranks)
        + [sys.executable, "-m", "bench.distributed", "--allsum-worker"]
        + ["--model", a.model, "--trials", str(a.trials)]
    )
    keys = ("median_step_s", "rollout_s", "reward_s", "update_s", "cpu_s", "peak_mb", "rss_mb")
    result = {
        "model": a.model,
        "backend": backend.backend_name(),
        "blas": backend.BLAS,
        "mlx": mx.__version__,
        "prompts": a.prompts_per_step,
        "group_size": a.group_size,
        "max_tokens": a.max_new_tokens,
        "kl_coef": a.kl_coef,
        "timed_steps": one["timed_steps"],
        **{f"1_rank_{k}": one[k] for k in keys},
        **{f"{a.ranks}_ranks_{k}": many[k] for k in keys},
        f"{a.ranks}_ranks_over_1": many["median_step_s"] / one["median_step_s"],
        **comm,
    }
    strict_json.print_result(result, a.json, width=28)


if __name__ == "__main__":
    sys.exit(main())
