"""Look after a folder of runs: list them, compare two, read rollouts, prune checkpoints.

`list` shows each run under --runs-dir (a folder holding metrics.jsonl, train_log.jsonl,
config.json or checkpoints/) with its model, reward, steps done, last reward, KL and eval reward,
and size on disk. `compare` prints two runs' config differences and the last and best value of
key metrics, and with --plot draws their curves on one figure. `rollouts` prints a run's
rollouts.sqlite rows filtered by step, reward, category and text. `prune` deletes checkpoints
except the newest N, the best N by a metric and the one `latest` names, after listing them and
asking y/N on a terminal (--yes for scripts; without a terminal and --yes it deletes nothing).
It reads the files train.py and train_rm.py write (knowledge/train.md) and imports neither, so
it starts without MLX. Every subcommand takes --json; bad input is one `error:` line, exit 2.

  uv run python runs.py list --sort reward
  uv run python runs.py compare runs/A runs/B --plot ab.png
  uv run python runs.py rollouts runs/A --step 40-60 --min-reward 0.8 --grep happy
  uv run python runs.py prune runs/A --keep-last 2 --keep-best 1 --metric eval/reward
"""

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from core import errors, strict_json
from core.run_folder import is_run_folder, read_metrics

KEY_METRICS = ("reward_mean", "eval/reward", "kl_mean", "loss", "val_accuracy")
SORT_KEYS = ("name", "time", "steps", "reward", "kl", "eval", "size")
ROLLOUT_COLUMNS = ("step", "prompt_id", "category", "prompt", "completion", "scores", "reward")
ROLLOUT_COLUMNS += ("advantage", "length", "finished")


class RunsError(errors.UserError):
    """Bad input (a path, an argument, an unreadable file): printed as one `error:` line."""


@dataclass
class RunInfo:
    path: Path
    config: dict
    metrics: list[dict]
    checkpoints: dict[int, Path]  # step -> RUN/checkpoints/step_NNNNNN
    latest: str | None  # the folder name RUN/latest holds

    @property
    def name(self) -> str:
        return self.path.name


# ---------------------------------------------------------------------------------- reading


def load_run(path) -> RunInfo:
    path = Path(path)
    if not is_run_folder(path):
        raise RunsError(
            f"{path} is not a run folder (no metrics.jsonl, config.json or checkpoints/); "
            "list the runs with: runs.py list"
        )
    config = {}
    if (path / "config.json").exists():
        try:
            config = json.loads((path / "config.json").read_text())
        except json.JSONDecodeError as e:
            raise RunsError(f"{path / 'config.json'} is not valid JSON ({e})") from e
    log = path / "metrics.jsonl"
    metrics = read_metrics(log if log.exists() else path / "train_log.jsonl")
    checkpoints = {}
    for ckpt in (path / "checkpoints").glob("step_*"):
        m = re.fullmatch(r"step_(\d+)", ckpt.name)
        if m and (ckpt / "trainer.json").exists():  # complete checkpoints only
            checkpoints[int(m.group(1))] = ckpt
    pointer = path / "latest"
    latest = pointer.read_text().strip() if pointer.exists() else None
    return RunInfo(path, config, metrics, dict(sorted(checkpoints.items())), latest)


def resolve(arg: str, runs_dir: str) -> RunInfo:
    """A run given as a path, or as a name under --runs-dir."""
    path = Path(arg)
    if not path.exists() and (Path(runs_dir) / arg).exists():
        path = Path(runs_dir) / arg
    if not path.exists():
        raise RunsError(f"run {arg} not found (neither a path nor a folder of {runs_dir}/)")
    return load_run(path)


def last_value(run: RunInfo, key: str) -> tuple[int, float] | None:
    """(step, value) of the last finite value of `key`; None if never logged."""
    for r in reversed(run.metrics):
        if _finite(r.get(key)):
            return r["step"], r[key]
    return None


def best_value(run: RunInfo, key: str) -> tuple[int, float] | None:
    """(step, value) of the best finite value: highest for rewards and accuracies, else lowest
    (losses, KL); the first such step on ties."""
    pts = [(r["step"], r[key]) for r in run.metrics if _finite(r.get(key))]
    if not pts:
        return None
    sign = 1 if higher_is_better(key) else -1
    return max(pts, key=lambda p: (sign * p[1], -p[0]))


def higher_is_better(key: str) -> bool:
    return "reward" in key or "accuracy" in key


def _finite(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def disk_size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def human(n: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if n < 1024 or unit == "G":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}T"


def reward_label(config: dict) -> str:
    if config.get("reward_config"):
        return f"config:{Path(config['reward_config']).stem}"
    if config.get("reward_fn"):
        return f"fn:{config['reward_fn'].rpartition(':')[2]}"
    return str(config.get("reward", "-"))


# ---------------------------------------------------------------------------------- list


def summarize(run: RunInfo) -> dict:
    last = {k: last_value(run, k) for k in ("reward_mean", "kl_mean", "eval/reward")}
    stamp = max((p.stat().st_mtime for p in run.path.iterdir()), default=run.path.stat().st_mtime)
    return {
        "name": run.name,
        "path": str(run.path),
        "model": run.config.get("model"),
        "reward": reward_label(run.config),
        "steps_done": run.metrics[-1]["step"] if run.metrics else 0,
        "steps": run.config.get("steps"),
        "reward_mean": last["reward_mean"][1] if last["reward_mean"] else None,
        "kl_mean": last["kl_mean"][1] if last["kl_mean"] else None,
        "eval_reward": last["eval/reward"][1] if last["eval/reward"] else None,
        "eval_step": last["eval/reward"][0] if last["eval/reward"] else None,
        "checkpoints": len(run.checkpoints),
        "latest": run.latest,
        "size_bytes": disk_size(run.path),
        "modified": time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)),
        "mtime": stamp,
    }


def _sort_key(field: str):
    column = {
        "steps": "steps_done",
        "reward": "reward_mean",
        "kl": "kl_mean",
        "eval": "eval_reward",
        "size": "size_bytes",
        "time": "mtime",
    }.get(field, field)
    return lambda s: (s[column] is None, s[column] if s[column] is not None else 0)


def cmd_list(args) -> int:
    root = Path(args.runs_dir)
    if not root.is_dir():
        raise RunsError(f"runs folder {root} does not exist; pass --runs-dir")
    rows = [summarize(load_run(p)) for p in sorted(root.iterdir()) if is_run_folder(p)]
    rows.sort(key=_sort_key(args.sort), reverse=args.reverse)
    if args.json:
        print(strict_json.dumps(rows, indent=1))
        return 0
    if not rows:
        print(f"no runs in {root}")
        return 0
    head = ("run", "model", "reward", "steps", "last_reward", "last_KL", "last_eval", "ckpts")
    head += ("size", "modified")
    table = [head]
    for s in rows:
        steps = f"{s['steps_done']}/{s['steps']}" if s["steps"] else str(s["steps_done"])
        table.append(
            (
                s["name"],
                str(s["model"] or "-"),
                s["reward"],
                steps,
                _fmt(s["reward_mean"]),
                _fmt(s["kl_mean"]),
                _fmt(s["eval_reward"]),
                str(s["checkpoints"]),
                human(s["size_bytes"]),
                s["modified"],
            )
        )
    _print_table(table)
    return 0


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.4g}"


def _print_table(table: list[tuple]) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


# ---------------------------------------------------------------------------------- compare


def config_diff(a: dict, b: dict) -> dict[str, tuple]:
    return {k: (a.get(k), b.get(k)) for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)}


def metric_table(runs: list[RunInfo], keys) -> dict[str, dict]:
    """{key: {run name: {"last": [step, v], "best": [step, v]}}} for keys either run logged."""
    out = {}
    for key in keys:
        per_run = {r.name: {"last": last_value(r, key), "best": best_value(r, key)} for r in runs}
        if any(v["last"] for v in per_run.values()):
            out[key] = per_run
    return out


def cmd_compare(args) -> int:
    a, b = resolve(args.run_a, args.runs_dir), resolve(args.run_b, args.runs_dir)
    if a.path.resolve() == b.path.resolve():
        raise RunsError(f"{args.run_a} and {args.run_b} are the same run; give two runs")
    if a.name == b.name:  # same folder name in two places: label them by path
        a.path, b.path = a.path.resolve(), b.path.resolve()
    keys = args.metrics.split(",") if args.metrics else KEY_METRICS
    diff = config_diff(a.config, b.config)
    table = metric_table([a, b], keys)
    if args.plot:
        plot_compare([a, b], list(table), Path(args.plot))
    if args.json:
        out = {"runs": [str(a.path), str(b.path)], "config_diff": diff, "metrics": table}
        print(strict_json.dumps(out, indent=1))
        return 0
    print(f"A = {a.path}\nB = {b.path}\n")
    rows = [("config", "A", "B")] + [(k, repr(x), repr(y)) for k, (x, y) in diff.items()]
    _print_table(rows if diff else [("config", "identical", "")])
    print()
    rows = [("metric", "A last", "A best", "B last", "B best")]
    for key, per_run in table.items():
        cells = [_point(per_run[r.name][kind]) for r in (a, b) for kind in ("last", "best")]
        rows.append((f"{key} ({'max' if higher_is_better(key) else 'min'} best)", *cells))
    _print_table(rows)
    if args.plot:
        print(f"\nwrote {args.plot}")
    return 0


def _point(p) -> str:
    return "-" if p is None else f"{p[1]:.4g} @{p[0]}"


def plot_compare(runs: list[RunInfo], keys: list[str], out: Path) -> None:
    """One panel per metric, every run's curve on it (null steps are gaps)."""
    from matplotlib.figure import Figure  # start-up: matplotlib only for --plot

    if not keys:
        raise RunsError("none of the metrics to plot was logged by either run; pass --metrics")
    fig = Figure(figsize=(7, 2.6 * len(keys)), layout="constrained")
    axes = fig.subplots(len(keys), 1, squeeze=False)[:, 0]
    for ax, key in zip(axes, keys, strict=True):
        for label, run in zip("AB", runs, strict=False):
            pts = [(r["step"], r[key]) for r in run.metrics if _finite(r.get(key))]
            if pts:
                steps, values = zip(*pts, strict=True)
                ax.plot(steps, values, marker="." if len(pts) < 30 else None, label=label)
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[0].set_title(f"A = {runs[0].name}\nB = {runs[1].name}", fontsize="small")
    axes[-1].set_xlabel("step")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)


# ---------------------------------------------------------------------------------- rollouts


def step_range(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)(?:-(\d+))?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a step N or a range A-B")
    lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
    if lo > hi:
        raise argparse.ArgumentTypeError(f"{text!r} is an empty range (A > B)")
    return lo, hi


def query_rollouts(run: RunInfo, args) -> tuple[list[dict], int]:
    """(rows shown, rows matching): SQL filters on step, reward and category, then --grep
    (case-insensitive, prompt or completion), then the order and --limit."""
    db = run.path / "rollouts.sqlite"
    if not db.exists():
        raise RunsError(f"{run.path} has no rollouts.sqlite (train_rm runs have none)")
    where, params = [], []
    if args.step:
        where.append("step BETWEEN ? AND ?")
        params += list(args.step)
    if args.min_reward is not None:
        where.append("reward >= ?")  # a failed judgement (NULL reward) never matches
        params.append(args.min_reward)
    if args.max_reward is not None:
        where.append("reward <= ?")
        params.append(args.max_reward)
    if args.category:
        where.append("category = ?")
        params.append(args.category)
    sql = f"SELECT {', '.join(ROLLOUT_COLUMNS)} FROM rollouts"
    sql += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY rowid"
    # Read-write but only SELECT: a read-only connection to a WAL database leaves -wal/-shm
    # files behind; this one removes them on close when no trainer holds the database.
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = [dict(zip(ROLLOUT_COLUMNS, r, strict=True)) for r in conn.execute(sql, params)]
    if args.grep:
        needle = args.grep.casefold()
        rows = [
            r
            for r in rows
            if needle in (r["prompt"] or "").casefold()
            or needle in (r["completion"] or "").casefold()
        ]
    if args.sort != "step":
        rows.sort(key=lambda r: (r[args.sort] is None, -(r[args.sort] or 0)))  # high first
    matching = len(rows)
    for r in rows:
        r["scores"] = json.loads(r["scores"]) if r["scores"] else None
    return (rows[: args.limit] if args.limit else rows), matching


def cmd_rollouts(args) -> int:
    run = resolve(args.run, args.runs_dir)
    rows, matching = query_rollouts(run, args)
    if args.json:
        print(strict_json.dumps(rows, indent=1))
        return 0
    for r in rows:
        reward = "-" if r["reward"] is None else f"{r['reward']:.3f}"
        adv = "-" if r["advantage"] is None else f"{r['advantage']:+.3f}"
        ended = "" if r["finished"] else ", cut at the token limit"
        print(f"step {r['step']}  {r['prompt_id']} ({r['category']})  reward {reward}", end="")
        print(f"  advantage {adv}  {r['length']} tokens{ended}")
        if r["scores"] and set(r["scores"]) != {"reward"}:
            print("  scores " + ", ".join(f"{k} {_fmt(v)}" for k, v in r["scores"].items()))
        print("  prompt:     " + _wrap(r["prompt"]))
        print("  completion: " + _wrap(r["completion"]) + "\n")
    print(f"{len(rows)} of {matching} matching rollouts shown")
    return 0


def _wrap(text: str | None) -> str:
    return (text or "").replace("\n", "\n              ")


# ---------------------------------------------------------------------------------- prune


def prune_plan(
    run: RunInfo, keep_last: int, keep_best: int = 0, metric: str = "", better: str | None = None
) -> dict[int, list]:
    """{checkpoint step: reasons to keep it}; an empty list means delete. `latest` is always
    kept; --keep-best ranks checkpoints by the metric logged at their own step, highest first
    when `better` is "high" (default for rewards and accuracies), else lowest first."""
    steps = list(run.checkpoints)
    reasons = {s: [] for s in steps}
    for s in steps[len(steps) - keep_last :] if keep_last else []:
        reasons[s].append("last")
    if keep_best:
        by_step = {r["step"]: r.get(metric) for r in run.metrics}
        scored = [(s, by_step[s]) for s in steps if _finite(by_step.get(s))]
        if not scored:
            logged = sorted({k for r in run.metrics for k in r} - {"step"})
            raise RunsError(
                f"no checkpoint step of {run.path} has a value of {metric!r} in its metrics, so "
                f"--keep-best cannot rank them; use --metric with one of {logged} logged at "
                "checkpoint steps, or --keep-best 0"
            )
        high = better == "high" if better else higher_is_better(metric)
        sign = 1 if high else -1
        scored.sort(key=lambda p: (-sign * p[1], -p[0]))
        for s, v in scored[:keep_best]:
            reasons[s].append(f"best {metric} {v:.4g}")
    for s, ckpt in run.checkpoints.items():
        if ckpt.name == run.latest:
            reasons[s].append("latest")
    return reasons


def confirm(question: str) -> bool | None:
    """y/N from a terminal; None when stdin is not a terminal (no one to ask)."""
    if not sys.stdin.isatty():
        return None
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def cmd_prune(args) -> int:
    run = resolve(args.run, args.runs_dir)
    if not run.checkpoints:
        raise RunsError(f"{run.path} has no checkpoints to prune")
    plan = prune_plan(run, args.keep_last, args.keep_best, args.metric, args.better)
    doomed = [s for s, why in plan.items() if not why]
    freed = sum(disk_size(run.checkpoints[s]) for s in doomed)
    if not args.json:
        for s, why in plan.items():
            action = "keep   " if why else "delete "
            print(
                f"{action}{run.checkpoints[s].name}  {human(disk_size(run.checkpoints[s]))}", end=""
            )
            print(f"  ({', '.join(why)})" if why else "")
    deleted = False
    if doomed and not args.dry_run:
        if not args.yes:
            answer = confirm(f"delete {len(doomed)} checkpoints of {run.name} ({human(freed)})?")
            if answer is None:
                raise RunsError(
                    "refusing to delete without confirmation: stdin is not a terminal; "
                    "pass --yes to delete, or --dry-run to only list (nothing was deleted)"
                )
            if not answer:
                print("nothing deleted")
                return 1
        for s in doomed:
            ckpt = run.checkpoints[s]
            # Renamed first: a crash mid-delete leaves a .del-* folder, never a half checkpoint.
            gone = ckpt.with_name(f".del-{ckpt.name}-{os.getpid()}")
            os.replace(ckpt, gone)
            shutil.rmtree(gone)
        deleted = True
    if args.json:
        out = {
            "keep": {run.checkpoints[s].name: why for s, why in plan.items() if why},
            "delete": [run.checkpoints[s].name for s in doomed],
            "deleted": deleted,
            "freed_bytes": freed if deleted else 0,
        }
        print(strict_json.dumps(out, indent=1))
    elif not doomed:
        print("nothing to delete")
    elif deleted:
        print(f"deleted {len(doomed)} checkpoints, freed {human(freed)}")
    else:
        print(f"dry run: would delete {len(doomed)} checkpoints ({human(freed)})")
    return 0


# ---------------------------------------------------------------------------------- CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one `error:` line and exit 2 (main), not usage + message
        raise RunsError(f"{self.prog}: {message} (see --help)")


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count >= 0")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="runs.py", allow_abbrev=False, description="List, compare and prune rl-values runs."
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, func, help_text):
        c = sub.add_parser(name, allow_abbrev=False, help=help_text, description=help_text)
        c.add_argument("--runs-dir", default="runs", help="parent folder of runs (default: runs)")
        c.add_argument("--json", action="store_true", help="machine-readable output")
        c.set_defaults(func=func)
        return c

    c = command("list", cmd_list, "runs with their key settings, last metrics and size")
    c.add_argument("--sort", choices=SORT_KEYS, default="time", help="column (default: time)")
    c.add_argument("--reverse", action="store_true", help="descending order")
    c = command("compare", cmd_compare, "two runs' config differences and key metrics")
    c.add_argument("run_a", metavar="RUN_A", help="a run folder, or a run name in --runs-dir")
    c.add_argument("run_b", metavar="RUN_B")
    c.add_argument("--metrics", help=f"comma-separated keys (default: {','.join(KEY_METRICS)})")
    c.add_argument("--plot", metavar="OUT.png", help="draw both runs' curves into this PNG")
    c = command("rollouts", cmd_rollouts, "a run's logged completions, filtered")
    c.add_argument("run", metavar="RUN")
    c.add_argument("--step", type=step_range, help="a step N or a range A-B")
    c.add_argument("--min-reward", type=float, help="reward >= X (failed judgements excluded)")
    c.add_argument("--max-reward", type=float, help="reward <= X")
    c.add_argument("--category", help="prompt category, e.g. false_premise")
    c.add_argument("--grep", metavar="TEXT", help="in prompt or completion (case-insensitive)")
    c.add_argument(
        "--sort",
        choices=("step", "reward", "advantage", "length"),
        default="step",
        help="step order, or highest value first (default: step)",
    )
    c.add_argument("--limit", type=_count, default=20, help="rows shown, 0 = all (default: 20)")
    c = command("prune", cmd_prune, "delete checkpoints except the last/best N and `latest`")
    c.add_argument("run", metavar="RUN")
    c.add_argument("--keep-last", type=_count, required=True, help="newest N checkpoints kept")
    c.add_argument("--keep-best", type=_count, default=0, help="best N by --metric kept")
    c.add_argument("--metric", default="eval/reward", help="for --keep-best (default: eval/reward)")
    c.add_argument(
        "--better",
        choices=("high", "low"),
        help="which end of --metric is best (default: high for rewards and accuracies, else low)",
    )
    c.add_argument("--dry-run", action="store_true", help="list what would go; delete nothing")
    c.add_argument("--yes", action="store_true", help="delete without asking (for scripts)")
    return p


@errors.cli
def main(argv=None) -> int:
    args = build_parser().parse_args(argv)  # a bad argument is a RunsError (_Parser)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
