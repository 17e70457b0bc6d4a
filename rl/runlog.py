"""What a run leaves for the researcher: metrics.jsonl, a SQLite table of rollouts, PNG plots.

`step_metrics` and `rollout_rows` turn one training step into what is logged. `MetricsLog`
appends one JSON object per step (NaN/inf as null, so every line stays valid JSON). `RolloutDB`
stores every prompt/completion/score in SQLite from a background thread, so the training step
never waits on disk; a writer error is re-raised on the next call, never dropped. Both can be cut
back to a step when a run resumes from a checkpoint. `plot_run` draws the standard curves from
metrics.jsonl. It is not an experiment tracker: no server, no run index, no config logging (the
trainer saves its config beside each checkpoint).
"""

import atexit
import json
import math
import os
import queue
import resource
import sqlite3
import threading
from pathlib import Path

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core.atomic import atomic_write
from core.run_folder import parse_line, read_metrics

import mlx.core as mx
import numpy as np

import grpo
from rewards.scorer import category_means, criterion_means
from rl.rollout_batch import Rollout

COLUMNS = (
    "step",
    "prompt_id",
    "category",
    "prompt",
    "completion",
    "scores",
    "reward",
    "advantage",
    "length",
    "finished",
)
_REQUIRED = {"step", "prompt", "completion"}
_SCHEMA = """CREATE TABLE IF NOT EXISTS rollouts (
    step INTEGER, prompt_id TEXT, category TEXT, prompt TEXT, completion TEXT,
    scores TEXT, reward REAL, advantage REAL, length INTEGER, finished INTEGER)"""


def rss_mb() -> float:
    """The process's resident memory now (Linux), else its peak (other systems), in MB."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def step_metrics(b: Rollout, update_metrics: dict, update_s: float) -> dict:
    """What one step logs about its rollout `b` and its update."""
    s, lengths, adv = b.sample, b.sample.lengths, np.asarray(b.advantages)
    m = {**grpo.reward_stats(b.rewards), **update_metrics}
    if b.scores.details:
        m |= {f"reward/{k}": v for k, v in criterion_means(b.scores.details).items()}
    categories = [r["category"] for r in b.flat]
    m |= category_means("train", categories, b.rewards.reshape(-1), b.scores.details)
    total_s = b.rollout_s + b.reward_s + update_s
    return m | {
        "adv_mean": float(adv.mean()),
        "adv_std": float(adv.std()),
        "adv_abs_max": float(np.abs(adv).max()),
        "length_mean": float(lengths.mean()),
        "length_max": int(lengths.max()),
        "truncation_rate": float(1.0 - s.finished.mean()),
        "filtered_groups": b.filtered_groups,
        "capped_truncated": b.capped,
        "judge_failures_step": b.scores.failures,
        "reward_nan": int((~np.isfinite(b.rewards)).sum()),
        "tokens_per_s": float(lengths.sum() / b.rollout_s),
        "step_s": total_s,
        "rollout_s": b.rollout_s,
        "reward_s": b.reward_s,
        "update_s": update_s,
        "peak_mem_mb": mx.get_peak_memory() / 2**20,
        "rss_mb": rss_mb(),
    }


def rollout_rows(step: int, b: Rollout) -> list[dict]:
    """One RolloutDB row per completion of the step's rollout `b`."""
    s, rewards, adv = b.sample, b.rewards.reshape(-1), np.asarray(b.advantages)
    lengths, details = s.lengths, b.scores.details
    flags = b.flags  # hack detectors' verdicts (gradient routing), or None
    rows = []
    for i, r in enumerate(b.flat):
        scores = details[i] if details else {"reward": rewards[i]}
        if flags is not None:
            scores = {**scores, "hack": bool(flags[i])}
        rows.append(
            {
                "step": step,
                "prompt_id": r["id"],
                "category": r["category"],
                "prompt": r["prompt"],
                "completion": s.texts[i],
                "scores": scores,
                "reward": float(rewards[i]),
                "advantage": float(adv[i]),
                "length": int(lengths[i]),
                "finished": int(s.finished[i]),
            }
        )
    return rows


def _scalar(value, name: str):
    """A JSON-safe Python scalar: mx/numpy scalars unwrapped, NaN/inf -> None."""
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        value = value.item()  # numpy and mlx scalars and 1-element arrays
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        value = float(value)
        return value if math.isfinite(value) else None
    raise TypeError(f"{name}={value!r} is not a scalar (type {type(value).__name__})")


def _json_safe(tree, name: str):
    if isinstance(tree, dict):
        return {str(k): _json_safe(v, f"{name}.{k}") for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return [_json_safe(v, f"{name}[{i}]") for i, v in enumerate(tree)]
    return _scalar(tree, name)


class MetricsLog:
    """metrics.jsonl: one {"step": int, key: float | null, ...} object per line."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, step: int, metrics: dict) -> None:
        record = {"step": int(step)}
        record.update({str(k): _scalar(v, str(k)) for k, v in metrics.items()})
        line = json.dumps(record, allow_nan=False)
        with open(self.path, "a") as f:
            f.write(line + "\n")
            f.flush()

    def truncate_after(self, step: int) -> None:
        """Keep lines with step <= step. A last line without newline (a crash mid-write) goes."""
        if not self.path.exists():
            return
        lines = self.path.read_text().splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            lines.pop()
        kept = [ln for i, ln in enumerate(lines) if parse_line(ln, self.path, i)["step"] <= step]
        atomic_write(self.path, "".join(kept))  # a crash here leaves the old or the new file


class RolloutDB:
    """SQLite `rollouts` table written by one background thread; `add` only enqueues."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._queue: queue.Queue = queue.Queue()
        self._errors: queue.Queue = queue.Queue()  # writer -> caller, thread-safe
        self._closed = False
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait()
        self._raise_pending()  # the database could not be opened
        # The thread is a daemon (a forgotten close() must not hang exit), so flush at exit.
        atexit.register(self.close)

    def add(self, rows: list[dict]) -> None:
        """Queue rows (dicts keyed by COLUMNS, scores a dict) and return; the writer reads them
        later, so do not mutate them after."""
        self._raise_pending()
        self._check_open()
        for row in rows:
            unknown, missing = row.keys() - set(COLUMNS), _REQUIRED - row.keys()
            if unknown or missing:
                raise ValueError(
                    f"rollout row has unknown keys {sorted(unknown)} / lacks {sorted(missing)}; "
                    f"columns are {COLUMNS}"
                )
        self._queue.put(("insert", list(rows), None))

    def flush(self) -> int:
        """Block until everything queued is committed; return the table's row count."""
        return self._call("count")

    def truncate_after(self, step: int) -> None:
        """Delete rows with step > step (resume from a checkpoint taken at `step`)."""
        self._call("truncate", int(step))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._queue.put(("stop", None, None))
        self._thread.join()
        self._raise_pending()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"RolloutDB({self.path}) is closed")

    def _call(self, op: str, arg=None):
        self._raise_pending()
        self._check_open()
        reply: dict = {"done": threading.Event()}
        self._queue.put((op, arg, reply))
        reply["done"].wait()
        self._raise_pending()
        return reply.get("result")

    def _raise_pending(self) -> None:
        try:
            err = self._errors.get_nowait()
        except queue.Empty:
            return
        raise RuntimeError(f"RolloutDB writer for {self.path} failed: {err!r}") from err

    def _run(self, ready: threading.Event) -> None:
        try:
            conn = sqlite3.connect(self.path)
            # WAL lets a researcher read the table (sqlite3 CLI, pandas) while the run writes.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
            conn.execute("CREATE INDEX IF NOT EXISTS rollouts_step ON rollouts(step)")
            conn.commit()
        except Exception as e:  # noqa: BLE001  (handed to the caller by _raise_pending)
            self._errors.put(e)
            self._closed = True
            ready.set()
            return
        ready.set()
        while True:
            op, arg, reply = self._queue.get()
            try:
                if op == "stop":
                    break
                result = self._execute(conn, op, arg)
                if reply is not None:
                    reply["result"] = result
            except Exception as e:  # noqa: BLE001
                conn.rollback()
                self._errors.put(e)
            finally:
                if reply is not None:
                    reply["done"].set()
        conn.close()

    def _execute(self, conn: sqlite3.Connection, op: str, arg):
        if op == "insert":
            self._insert(conn, arg)
        elif op == "truncate":
            conn.execute("DELETE FROM rollouts WHERE step > ?", (arg,))
            conn.commit()
        elif op == "count":
            return conn.execute("SELECT COUNT(*) FROM rollouts").fetchone()[0]
        else:
            raise ValueError(f"unknown RolloutDB operation {op!r}")

    def _insert(self, conn: sqlite3.Connection, rows: list[dict]) -> None:
        values = [tuple(_column_value(row, c) for c in COLUMNS) for row in rows]
        placeholders = ", ".join("?" * len(COLUMNS))
        conn.executemany(f"INSERT INTO rollouts VALUES ({placeholders})", values)
        conn.commit()


def _column_value(row: dict, column: str):
    value = row.get(column)
    if column == "scores":
        return None if value is None else json.dumps(_json_safe(value, "scores"), allow_nan=False)
    if column in ("step", "length", "finished"):
        value = _scalar(value, column)
        return None if value is None else int(value)
    if column in ("reward", "advantage"):
        return _scalar(value, column)
    return value  # text columns go to SQLite as given; a wrong type raises in the writer


# (file stem, title, [(panel y-label, [metric keys or a "prefix/" for every key under it])])
_PLOTS = [
    ("reward", "Reward", [("reward", ["reward_mean", "reward/"])]),
    ("train", "Rollouts per category", [("reward", ["train/"])]),
    (
        "kl",
        "KL to the reference",
        [("KL per token", ["kl_mean", "kl/"]), ("KL coefficient", ["kl_coef"])],
    ),
    ("loss", "Loss", [("loss", ["loss"])]),
    ("length", "Completion length", [("tokens", ["length_mean"])]),
    ("eval", "Evaluation", [("eval", ["eval/"])]),
    ("hacks", "Hack detectors (rollouts)", [("flagged fraction", ["hack/"])]),
    (
        "routing",
        "Routing evaluation (fresh samples per adapter mode)",
        [
            ("task reward", [f"routing/{m}/task_reward" for m in ("both", "retain", "forget")]),
            ("hack rate", [f"routing/{m}/hack_rate" for m in ("both", "retain", "forget")]),
            ("distinct-2", [f"routing/{m}/distinct_2" for m in ("both", "retain", "forget")]),
        ],
    ),
]


def _series(records: list[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) where the key is logged and finite; logged nulls become gaps."""
    pts = [(r["step"], r[key]) for r in records if _finite(r, key)]
    return [s for s, _ in pts], [v for _, v in pts]


def _expand(records: list[dict], patterns: list[str]) -> list[str]:
    present = sorted({k for r in records for k in r})
    keys = []
    for p in patterns:
        if p.endswith("/"):
            keys += [k for k in present if k.startswith(p)]
        elif p in present:
            keys.append(p)
    return keys


def _draw(ax, records: list[dict], key: str) -> None:
    """One curve; a `<name>_mean` key gets a +-1 std band where `<name>_std` is logged too."""
    steps, values = _series(records, key)
    ax.plot(steps, values, marker="." if len(steps) < 30 else None, label=key)
    std_key = key.removesuffix("_mean") + "_std"
    if key.endswith("_mean"):
        rows = [(r["step"], r[key], r[std_key]) for r in records if _finite(r, key, std_key)]
        if rows:
            s, m, d = np.array(rows, dtype=np.float64).T
            ax.fill_between(s, m - d, m + d, alpha=0.2)


def _finite(record: dict, *keys: str) -> bool:
    return all(isinstance(record.get(k), int | float) for k in keys)


def plot_run(run_dir) -> list[Path]:
    """Draw run_dir/metrics.jsonl into run_dir/plots/*.png; return the files written."""
    # start-up: matplotlib only for plots; Figure + savefig renders with Agg, no pyplot state
    from matplotlib.figure import Figure

    metrics = Path(run_dir) / "metrics.jsonl"
    if not metrics.exists():
        raise FileNotFoundError(f"{metrics} does not exist: nothing to plot for {run_dir}")
    records = read_metrics(metrics)
    if not records:
        raise ValueError(f"{metrics} is empty: the run logged no steps yet")
    out_dir = Path(run_dir) / "plots"
    out_dir.mkdir(exist_ok=True)
    written = []
    for stem, title, panels in _PLOTS:
        panels = [(label, _expand(records, keys)) for label, keys in panels]
        panels = [(label, keys) for label, keys in panels if keys]
        if not panels:
            continue
        fig = Figure(figsize=(7, 3 * len(panels)), layout="constrained")
        axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
        for ax, (label, keys) in zip(axes, panels, strict=True):
            for key in keys:
                _draw(ax, records, key)
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            ax.legend(fontsize="small")
        axes[0].set_title(title)
        axes[-1].set_xlabel("step")
        path = out_dir / f"{stem}.png"
        fig.savefig(path, dpi=100)
        written.append(path)
    return written
