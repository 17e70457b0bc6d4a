"""Hyperparameter sweeps: a grid of train.py runs from one command, resumable, with a summary.

    uv run python sweep.py --grid seed=0,1,2 kl_coef=0.01,0.04 --fixed lr=1e-5 steps=200 \\
        --out-dir runs/sweep_kl --jobs 2 --reward happy

`--grid KEY=V1,V2,...` items span the cartesian product (in the order given); `--fixed
KEY=VALUE` and any other flags (`--reward happy`) go to every run. Keys are TrainConfig fields
(`kl_coef` or `kl-coef`); every run's config is resolved and checked before the first one
starts, so a typo fails at once with one `error:` line and exit status 2. A run is named by its
varied hyperparameters (`seed0_kl_coef0.01`) and lives in OUT_DIR/NAME with its log in
train.log. Runs execute as `train.py` subprocesses, up to `--jobs` at a time; a run whose newest
checkpoint is at its last step is skipped, one with an earlier checkpoint resumes, so the same
command continues an interrupted sweep. `--dry-run` prints the plan. The summary (printed, and
written as OUT_DIR/summary.csv and summary.md) has per run the mean reward and hack rate of the
last `--window` steps and, from its last routing evaluation (evals/routing.py), task reward, hack
rate and diversity per adapter mode; a second table averages over seeds (mean ± std). It does
not schedule across machines or search adaptively.
"""

import argparse
import csv
import dataclasses
import itertools
import json
import math
import re
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from core import errors, run_folder, strict_json
from core.stats import finite_mean

import numpy as np

from evals import routing as eval_routing
from rl.config import ConfigError, TrainConfig, build_parser, resolve_config

FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
RESERVED = {"out_dir", "run_name"}  # the sweep decides where each run lives
MODES = ("both", "retain", "forget")
MODE_KEYS = (
    ("task_reward", "task"),
    ("hack_rate", "hack"),
    ("distinct_2", "d2"),
    ("unique_fraction", "uniq"),
)


class SweepError(errors.UserError, ValueError):
    """A grid, value or flag the sweep cannot run; printed as one `error:` line, exit 2."""


@dataclass
class Planned:
    name: str
    point: dict  # the varied hyperparameters of this run
    argv: list[str]  # train.py arguments
    run_dir: Path
    steps: int
    status: str  # new | resume | complete


def _key(raw: str, flag: str) -> str:
    key = raw.strip().replace("-", "_")
    if key not in FIELDS:
        raise SweepError(f"{flag}: {raw!r} is not a training setting; valid: {sorted(FIELDS)}")
    if key in RESERVED:
        raise SweepError(f"{flag}: {key} is set by the sweep (use --out-dir)")
    return key


def parse_assignments(items: list[str], flag: str, multi: bool) -> dict[str, list[str]]:
    """`KEY=V1,V2` (multi) or `KEY=V` items -> {field: [values]}; SweepError naming the item."""
    out = {}
    example = "seed=0,1,2" if multi else "lr=1e-5"
    for item in items:
        raw, sep, values = item.partition("=")
        if not sep or not raw.strip() or not values.strip():
            raise SweepError(
                f"{flag} {item!r}: write KEY=VALUE{',VALUE' if multi else ''} (e.g. {example})"
            )
        key = _key(raw, flag)
        vals = [v.strip() for v in values.split(",")] if multi else [values.strip()]
        if any(not v for v in vals):
            raise SweepError(f"{flag} {item!r}: an empty value; write e.g. {example}")
        if len(set(vals)) != len(vals):
            raise SweepError(f"{flag} {item!r}: a value appears twice")
        if key in out:
            raise SweepError(f"{flag}: {key} is given twice")
        out[key] = vals
    return out


def expand(grid: dict[str, list[str]]) -> list[dict[str, str]]:
    """The cartesian product of the grid, the first key varying slowest."""
    keys = list(grid)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*grid.values())]


def run_name(point: dict[str, str]) -> str:
    """`key1V1_key2V2` over the varied keys, safe as a folder name."""
    parts = [f"{k}{v}" for k, v in point.items()] or ["run"]
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", "_".join(parts))


def to_flags(settings: dict[str, str]) -> list[str]:
    """{field: text} -> train.py flags; booleans become --flag / --no-flag."""
    argv = []
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if FIELDS[key].type is bool:
            truth = value.lower()
            if truth not in ("true", "false", "1", "0", "yes", "no"):
                raise SweepError(f"{key}={value!r}: a boolean is true or false")
            argv.append(flag if truth in ("true", "1", "yes") else "--no-" + flag[2:])
        else:
            argv += [flag, value]
    return argv


def run_status(run_dir: Path, steps: int) -> str:
    """complete (newest checkpoint at the last step), resume (an earlier one) or new."""
    latest = run_dir / "latest"
    if not latest.exists():
        return "new"
    state = run_dir / "checkpoints" / latest.read_text().strip() / "trainer.json"
    if not state.exists():
        return "new"
    return "complete" if json.loads(state.read_text())["step"] >= steps else "resume"


def _refuse(message: str):
    raise SweepError(f"train.py flags: {message}")


def plan(grid, fixed, passthrough: list[str], out_dir: Path, check_data=True) -> list[Planned]:
    """Every run of the sweep, each config resolved and checked now (before any model loads),
    with its data files unless `check_data` is off (a summary of runs already made)."""
    clash = sorted(set(grid) & set(fixed))
    if clash:
        raise SweepError(f"{clash} appear in both --grid and --fixed")
    parser = build_parser()
    parser.error = _refuse  # a bad value is a SweepError, not argparse's usage text and exit
    for flag in passthrough:
        if flag.startswith("--") and flag[2:].split("=")[0].replace("-", "_") in {
            *grid,
            *fixed,
            *RESERVED,
            "resume",
            "config",
        }:
            raise SweepError(f"{flag} is also set by --grid/--fixed or by the sweep itself")
    runs = []
    for point in expand(grid):
        name = run_name(point)
        run_dir = out_dir / name
        argv = [
            *to_flags({**fixed, **point}),
            *passthrough,
            "--out-dir",
            str(out_dir),
            "--run-name",
            name,
        ]
        try:
            args, unknown = parser.parse_known_args(argv)
            if unknown:
                raise SweepError(f"train.py does not know {unknown}; see train.py --help")
            cfg = resolve_config(args)
            if check_data:
                cfg.load_data()
        except (ConfigError, ValueError) as e:
            raise SweepError(f"run {name}: {e}") from None
        status = run_status(run_dir, cfg.steps)
        if status == "resume":
            argv = ["--resume", str(run_dir), *argv]
        runs.append(Planned(name, point, argv, run_dir, cfg.steps, status))
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise SweepError(f"two runs would share a name: {names}; make the values distinct")
    return runs


def execute(runs: list[Planned], jobs: int) -> dict[str, int]:
    """Run the pending ones as train.py subprocesses, `jobs` at a time; {name: exit status}."""
    todo = [r for r in runs if r.status != "complete"]
    train_py = str(Path(__file__).with_name("train.py"))

    def one(r: Planned) -> tuple[str, int]:
        r.run_dir.mkdir(parents=True, exist_ok=True)
        if r.status == "new":  # logs of an attempt that saved no checkpoint: start them over
            for stale in ("metrics.jsonl", "rollouts.sqlite"):
                (r.run_dir / stale).unlink(missing_ok=True)
        start = time.time()
        print(f"[sweep] start {r.name} ({r.status})", flush=True)
        with open(r.run_dir / "train.log", "a") as log:
            rc = subprocess.call([sys.executable, train_py, *r.argv], stdout=log, stderr=log)
        print(f"[sweep] {r.name}: exit {rc} after {time.time() - start:.0f} s", flush=True)
        return r.name, rc

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(pool.map(one, todo))


# ----------------------------------------------------------------------------------------------
# Summary


def summarize_run(run_dir: Path, window: int = 5) -> dict:
    """Last-`window`-steps means of the reward and hack rate (None where no step logged a finite
    value: a blank cell, JSON null), and the last routing evaluation (`<mode>/<key>` for the
    MODE_KEYS of every mode present)."""
    rows = run_folder.read_metrics(run_dir / "metrics.jsonl")
    out = {"steps": rows[-1]["step"] if rows else 0}
    last = rows[-window:]
    out["reward"] = finite_mean(r.get("reward_mean") for r in last)
    out["hack"] = finite_mean(r.get("hack/any") for r in last)
    evals = [r for r in rows if any(k.startswith("routing/") for k in r)]
    if evals:
        for mode in MODES:
            for key, short in MODE_KEYS:
                value = evals[-1].get(f"routing/{mode}/{key}")
                if value is not None:
                    out[f"{mode}/{short}"] = value
    return out


def summary_rows(runs: list[Planned], window: int) -> list[dict]:
    return [{"run": r.name, **r.point, **summarize_run(r.run_dir, window)} for r in runs]


def aggregate(rows: list[dict], varied: list[str]) -> list[dict]:
    """Mean ± std over seeds of every numeric column, per value of the other varied keys."""
    by = [k for k in varied if k != "seed"]
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row.get(k) for k in by), []).append(row)
    out = []
    for key, members in groups.items():
        agg = dict(zip(by, key, strict=True)) | {"runs": len(members)}
        numeric = [c for c in members[0] if c not in (*varied, "run", "steps")]
        for col in numeric:
            vals = [m.get(col) for m in members]
            vals = [v for v in vals if isinstance(v, int | float) and math.isfinite(v)]
            if vals:
                agg[col] = f"{np.mean(vals):.3f} ± {np.std(vals):.3f}"
        out.append(agg)
    return out


def markdown(rows: list[dict]) -> str:
    if not rows:
        return "(no runs)"
    cols = list(dict.fromkeys(c for r in rows for c in r))

    def cell(v):
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.3f}"
        return "" if v is None else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def write_summary(rows: list[dict], agg: list[dict], out_dir: Path) -> str:
    cols = list(dict.fromkeys(c for r in rows for c in r))
    with open(out_dir / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    text = f"## Runs\n\n{markdown(rows)}\n\n## Mean ± std over seeds\n\n{markdown(agg)}\n"
    (out_dir / "summary.md").write_text(text)
    return text


def _groups(runs: list[Planned], varied: list[str]) -> dict[str, list[Planned]]:
    """Runs grouped by their varied values other than the seed, labelled `key=value ...`."""
    out = {}
    for r in runs:
        label = " ".join(f"{k}={v}" for k, v in r.point.items() if k != "seed") or "all"
        out.setdefault(label, []).append(r)
    return out


def _last_eval(run_dir: Path) -> dict:
    rows = run_folder.read_metrics(run_dir / "metrics.jsonl")
    evals = [r for r in rows if any(k.startswith("routing/") for k in r)]
    return evals[-1] if evals else {}


def _band(ax, x, series, label, **kw):
    """Mean line with a ±1 std band over seeds; each seed's values as faint dots."""
    arr = np.array(series, dtype=np.float64)  # (seeds, len(x))
    with warnings.catch_warnings():  # a point no seed logged stays NaN: a gap in the line
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, std = np.nanmean(arr, axis=0), np.nanstd(arr, axis=0)
    line = ax.plot(x, mean, marker="o", label=f"{label} (n={len(arr)})", **kw)[0]
    ax.fill_between(x, mean - std, mean + std, alpha=0.2, color=line.get_color())


def plot_routing(runs: list[Planned], varied: list[str], out_dir: Path) -> list[Path]:
    """PNGs for runs with routing evaluations, mean ± std over seeds per group: task reward
    and hack rate per adapter mode (routing_modes.png), along the forget-scale sweep
    (routing_sweep.png), and the rollouts' hack rate and task reward per step (curves.png)."""
    from matplotlib.figure import Figure  # start-up: matplotlib only for the plots

    groups = _groups(runs, varied)
    evals = {g: [_last_eval(r.run_dir) for r in members] for g, members in groups.items()}
    if not any(e for es in evals.values() for e in es):
        return []
    written = []
    fig = Figure(figsize=(9, 6), layout="constrained")
    axes = fig.subplots(2, 1)
    bars = [
        (g, m)
        for g, es in evals.items()
        for m in eval_routing.MODES
        if any(f"routing/{m}/task_reward" in e for e in es)
    ]
    for ax, key, title in zip(
        axes, ("task_reward", "hack_rate"), ("task reward", "hack rate"), strict=True
    ):
        for i, (g, m) in enumerate(bars):
            vals = [e[f"routing/{m}/{key}"] for e in evals[g] if f"routing/{m}/{key}" in e]
            ax.bar(i, np.mean(vals), yerr=np.std(vals), capsize=4, alpha=0.7)
            ax.plot([i] * len(vals), vals, "k.", alpha=0.6)
        ax.set_xticks(range(len(bars)), [f"{g}\n{m}" for g, m in bars], fontsize="small")
        ax.set_ylabel(title)
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_title("Routing evaluation per adapter mode (mean ± std over seeds; dots: seeds)")
    written.append(out_dir / "routing_modes.png")
    fig.savefig(written[-1], dpi=100)

    scales = list(eval_routing.SWEEP)
    dual = {g: es for g, es in evals.items() if any("routing/retain/task_reward" in e for e in es)}
    if dual:
        fig = Figure(figsize=(7, 6), layout="constrained")
        axes = fig.subplots(2, 1, sharex=True)
        for ax, key, title in zip(
            axes, ("task_reward", "hack_rate"), ("task reward", "hack rate"), strict=True
        ):
            for g, es in dual.items():
                series = [
                    [e.get(f"routing/{eval_routing.sweep_label(f)}/{key}", np.nan) for f in scales]
                    for e in es
                    if e
                ]
                _band(ax, scales, series, g)
            ax.set_ylabel(title)
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small")
        axes[0].set_title("Forget-adapter scale sweep (retain scale 1)")
        axes[1].set_xlabel("forget scale")
        written.append(out_dir / "routing_sweep.png")
        fig.savefig(written[-1], dpi=100)

    fig = Figure(figsize=(7, 6), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
    for g, members in groups.items():
        paths = [r.run_dir / "metrics.jsonl" for r in members]
        logs = [run_folder.read_metrics(p) for p in paths if p.exists()]
        cfg = json.loads((members[0].run_dir / "config.json").read_text()) if logs else {}
        task_key = f"reward/{cfg.get('task_reward')}"
        n = min((len(rows) for rows in logs), default=0)
        if not n:
            continue
        steps = [row["step"] for row in logs[0][:n]]
        for ax, key in zip(axes, ("hack/any", task_key), strict=True):
            _band(ax, steps, [[row.get(key, np.nan) for row in rows[:n]] for rows in logs], g)
    axes[0].set_ylabel("rollout hack rate")
    axes[1].set_ylabel("rollout task reward")
    axes[1].set_xlabel("step")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[0].set_title("Training rollouts (the policy as sampled: both adapters)")
    written.append(out_dir / "curves.png")
    fig.savefig(written[-1], dpi=100)
    return written


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        allow_abbrev=False,
        description=__doc__.splitlines()[0],
        epilog="Other flags (e.g. --reward happy) are passed to every train.py run.",
    )
    p.add_argument("--grid", nargs="+", default=[], metavar="KEY=V1,V2", help="values to sweep")
    p.add_argument("--fixed", nargs="*", default=[], metavar="KEY=V", help="settings for all")
    p.add_argument("--out-dir", default="runs/sweep", help="parent folder of the runs")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1)")
    p.add_argument("--window", type=int, default=5, help="steps averaged for final figures")
    p.add_argument("--dry-run", action="store_true", help="print the planned runs and exit")
    p.add_argument("--summary-only", action="store_true", help="summarize, run nothing")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    args, passthrough = p.parse_known_args(argv)
    if args.jobs < 1 or args.window < 1:
        raise SweepError("--jobs and --window must be >= 1")
    grid = parse_assignments(args.grid, "--grid", multi=True)
    fixed = {k: v[0] for k, v in parse_assignments(args.fixed, "--fixed", False).items()}
    out_dir = Path(args.out_dir)
    # every run checked, its data files too: a SweepError before any run starts
    runs = plan(grid, fixed, passthrough, out_dir, check_data=not args.summary_only)
    if args.dry_run:
        for r in runs:
            print(f"{r.name} [{r.status}]: python train.py {' '.join(r.argv)}")
        print(f"{len(runs)} runs, {sum(r.status != 'complete' for r in runs)} to do")
        return 0
    failed = {}
    if not args.summary_only:
        out_dir.mkdir(parents=True, exist_ok=True)
        failed = {n: rc for n, rc in execute(runs, args.jobs).items() if rc != 0}
    rows = summary_rows(runs, args.window)
    agg = aggregate(rows, list(grid))
    text = write_summary(rows, agg, out_dir)
    plots = [str(path) for path in plot_routing(runs, list(grid), out_dir)]
    if args.json:
        out = {"out_dir": str(out_dir), "runs": rows, "mean_std_over_seeds": agg, "plots": plots,
               "failed": failed}  # fmt: skip
        print(strict_json.dumps(out))
    else:
        print(text)
        for path in plots:
            print(path)
    for name, rc in failed.items():
        print(f"error: run {name} exited {rc}; see {out_dir / name / 'train.log'}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
