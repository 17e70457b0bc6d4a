"""rl/runlog.py: metrics lines, the background rollout writer (non-blocking, errors surface),
plots."""

import json
import sqlite3
import threading

from core import backend  # noqa: F401

# isort: split
from core.run_folder import read_metrics

import mlx.core as mx
import numpy as np
import pytest

from rl.runlog import MetricsLog, RolloutDB, plot_run


def row(step: int, i: int = 0, **extra) -> dict:
    return {
        "step": step,
        "prompt_id": f"p{i}",
        "category": "curiosity",
        "prompt": f"prompt {i}",
        "completion": f"completion {i}",
        "scores": {"curiosity": 0.5, "nonsense": float("nan")},
        "reward": 0.25,
        "advantage": -1.0,
        "length": 7,
        "finished": True,
        **extra,
    }


# ---------------------------------------------------------------------------------- metrics


def test_metrics_append_read_and_non_finite_as_null(tmp_path):
    path = tmp_path / "run" / "metrics.jsonl"
    log = MetricsLog(path)
    log.append(1, {"loss": 0.5, "kl_mean": mx.array(0.25), "n": np.int64(3), "lr": np.float32(2)})
    log.append(2, {"loss": float("nan"), "kl_mean": float("inf"), "flag": True})
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert [json.loads(ln) for ln in lines] == read_metrics(path)
    assert "NaN" not in path.read_text() and "Infinity" not in path.read_text()
    assert read_metrics(path) == [
        {"step": 1, "loss": 0.5, "kl_mean": 0.25, "n": 3.0, "lr": 2.0},
        {"step": 2, "loss": None, "kl_mean": None, "flag": 1.0},
    ]


def test_metrics_reject_non_scalar(tmp_path):
    with pytest.raises(TypeError, match="ratio"):
        MetricsLog(tmp_path / "m.jsonl").append(1, {"ratio": mx.array([1.0, 2.0])})


def test_metrics_truncate_after(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path)
    for step in range(1, 6):
        log.append(step, {"loss": float(step)})
    with open(path, "a") as f:
        f.write('{"step": 6, "lo')  # a crash mid-write leaves a line without newline
    log.truncate_after(3)
    assert [r["step"] for r in read_metrics(path)] == [1, 2, 3]
    log.append(4, {"loss": 40.0})  # the resumed run continues the file
    assert [r["loss"] for r in read_metrics(path)] == [1.0, 2.0, 3.0, 40.0]


# ---------------------------------------------------------------------------------- rollouts


def table(path) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT step, prompt_id, scores, reward, finished FROM rollouts"
        ).fetchall()


def test_rollout_add_flush_count_truncate(tmp_path):
    path = tmp_path / "rollouts.sqlite"
    db = RolloutDB(path)
    db.add([row(1, 0), row(1, 1)])
    db.add([row(2, 0, reward=float("nan"), scores=None), row(3, 0, reward=np.float32(0.5))])
    assert db.flush() == 4
    rows = table(path)
    assert rows[0] == (1, "p0", '{"curiosity": 0.5, "nonsense": null}', 0.25, 1)
    assert rows[2][2:4] == (None, None)  # no scores; NaN reward stored as NULL
    assert rows[3][3] == 0.5
    db.truncate_after(1)
    assert db.flush() == 2
    assert {r[0] for r in table(path)} == {1}
    db.close()
    db = RolloutDB(path)  # reopening appends to the same table
    db.add([row(2, 5)])
    assert db.flush() == 3
    db.close()


def test_rollout_add_does_not_wait_for_the_writer(tmp_path, monkeypatch):
    release, entered = threading.Event(), threading.Event()
    real_insert = RolloutDB._insert

    def slow_insert(self, conn, rows):
        entered.set()
        assert release.wait(10), "test never released the writer"
        real_insert(self, conn, rows)

    monkeypatch.setattr(RolloutDB, "_insert", slow_insert)
    db = RolloutDB(tmp_path / "r.sqlite")
    db.add([row(1)])
    assert entered.wait(10)  # the writer is now stuck inside a commit
    db.add([row(2)])  # returns although the writer is busy
    db.add([row(3)])
    assert table(tmp_path / "r.sqlite") == []  # nothing committed yet
    release.set()
    assert db.flush() == 3
    db.close()


def test_rollout_writer_error_is_reraised(tmp_path):
    db = RolloutDB(tmp_path / "r.sqlite")
    db.add([row(1)])
    db.add([row(2, completion=object())])  # sqlite cannot bind it: fails in the writer thread
    with pytest.raises(RuntimeError, match="writer .* failed"):
        db.flush()
    assert db.flush() == 1  # raised once; the good batch is kept and the writer goes on
    db.add([row(3, prompt=["not", "text"])])
    with pytest.raises(RuntimeError, match="failed"):
        db.close()


def test_rollout_rejects_bad_rows_at_add(tmp_path):
    with RolloutDB(tmp_path / "r.sqlite") as db:
        with pytest.raises(ValueError, match=r"unknown keys \['rewrd'\]"):
            db.add([row(1, rewrd=1.0)])
        with pytest.raises(ValueError, match=r"lacks \['completion'\]"):
            db.add([{"step": 1, "prompt": "p"}])
    with pytest.raises(RuntimeError, match="closed"):
        db.add([row(1)])


# ---------------------------------------------------------------------------------- plots


def test_plot_run_writes_pngs(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl")
    for step in range(1, 8):
        metrics = {
            "reward_mean": 0.1 * step,
            "reward_std": 0.05,
            "reward/curiosity": 0.2 * step,
            "reward/nonsense": float("nan") if step == 3 else 0.3,
            "kl_mean": 0.01 * step,
            "kl_coef": 0.05,
            "loss": 1.0 / step,
        }
        if step % 3 == 0:
            metrics["eval/reward_mean"] = 0.4
        log.append(step, metrics)
    written = plot_run(tmp_path)
    # no length_mean logged: that plot is skipped, not an error
    assert sorted(p.name for p in written) == ["eval.png", "kl.png", "loss.png", "reward.png"]
    for p in written:
        assert p.parent == tmp_path / "plots"
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_run_missing_or_empty_metrics(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl does not exist"):
        plot_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("")
    with pytest.raises(ValueError, match="is empty"):
        plot_run(tmp_path)
