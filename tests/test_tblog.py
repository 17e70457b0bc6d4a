"""rl/tblog.py: TensorBoard's own reader gets back every metric of a run, histograms and samples;
a resume drops the events after its checkpoint."""

import json
import re
import sqlite3

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from test_train import low_tokens, tiny_config, tiny_policy

import train
from rl import tblog


def read_tb(log_dir) -> EventAccumulator:
    """Every event kept (size 0), as `tensorboard --logdir` would read the folder."""
    acc = EventAccumulator(
        str(log_dir), size_guidance={"scalars": 0, "histograms": 0, "tensors": 0}
    )
    acc.Reload()
    return acc


def metrics(run_dir) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def assert_scalars_match(acc: EventAccumulator, rows: list[dict], prefix: str = "train"):
    """Every numeric value of metrics.jsonl is a scalar at its step (float32, as TensorBoard
    stores it), and nothing else: a null is no point."""
    tags = set(acc.Tags()["scalars"])
    for key in {k for r in rows for k in r} - {"step"}:
        want = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), float)]
        tag = tblog.scalar_tag(key, prefix)
        if not want:
            assert tag not in tags, key
            continue
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert got == [(s, float(np.float32(v))) for s, v in want], key


def test_two_step_run_writes_every_metric_histograms_and_samples(tmp_path):
    run_dir = train.run(tiny_config(tmp_path, steps=2), policy=tiny_policy(), reward_fn=low_tokens)
    rows = metrics(run_dir)
    assert [r["step"] for r in rows] == [1, 2]
    acc = read_tb(run_dir / "tb")
    assert_scalars_match(acc, rows)
    assert len(acc.Tags()["scalars"]) >= 30  # rewards, losses, KL, timings, counters
    n = 2 * 3  # prompts_per_step x group_size
    for name in ("reward", "advantage", "length"):
        hist = acc.Histograms(f"rollout/{name}")
        assert [h.step for h in hist] == [1, 2]
        assert all(h.histogram_value.num == n for h in hist)
    with sqlite3.connect(run_dir / "rollouts.sqlite") as conn:
        step1 = conn.execute(
            "SELECT completion, reward FROM rollouts WHERE step = 1 ORDER BY reward DESC"
        ).fetchall()
    h = acc.Histograms("rollout/reward")[0].histogram_value
    assert (h.min, h.max) == pytest.approx((step1[-1][1], step1[0][1]))
    assert sum(h.bucket) == n
    texts = acc.Tensors("rollout/samples")
    assert [t.step for t in texts] == [1, 2]
    best = step1[0]
    first = texts[0].tensor_proto.string_val[0].decode()
    assert first.startswith(f"**reward {best[1]:.3f}**")
    assert first.count("**reward") == 4  # the 2 best and 2 worst of 6
    assert best[0].split()[0] in first


def test_resume_drops_events_after_the_checkpoint(tmp_path):
    run_dir = train.run(tiny_config(tmp_path, steps=2), policy=tiny_policy(), reward_fn=low_tokens)
    # A crash after step 3 was logged but before its checkpoint: its events must go.
    crashed = tblog.TBLog(run_dir / "tb")
    crashed.add(3, {"loss": 999.0, "orphan": 1.0})
    crashed.close()
    with open(tblog.event_files(run_dir / "tb")[-1], "ab") as f:
        f.write(b"\x10\x00\x00")  # and a record cut short
    train.run(
        tiny_config(tmp_path, steps=4),
        resume=True,
        run_dir=run_dir,
        policy=tiny_policy(),
        reward_fn=low_tokens,
    )
    rows = metrics(run_dir)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    acc = read_tb(run_dir / "tb")
    assert "train/orphan" not in acc.Tags()["scalars"]
    assert_scalars_match(acc, rows)  # step 3 once, with the resumed run's value
    assert [t.step for t in acc.Tensors("rollout/samples")] == [1, 2, 3, 4]
    assert not list((run_dir / "tb").glob(".tmp-*"))
    assert file_steps(run_dir / "tb") == [1, 2, 3, 4]


def file_steps(log_dir) -> list[int]:
    """The steps of the summary events, file after file in name order (TensorBoard's data
    server reads them so, and a step lower than one already read drops the later ones)."""
    out = []
    for path in tblog.event_files(log_dir):
        out += [e.step for e in EventFileLoader(str(path)).Load() if e.HasField("summary")]
    return out


def test_a_new_writer_file_sorts_after_the_last(tmp_path):
    for step in (1, 2):  # opened within the same second: the second waits for the next one
        log = tblog.TBLog(tmp_path)
        log.add(step, {"x": 1.0})
        log.close()
    stamps = [int(p.name.split(".")[3]) for p in tblog.event_files(tmp_path)]
    assert len(stamps) == 2 and stamps[1] > stamps[0]
    assert file_steps(tmp_path) == [1, 2]


def test_truncate_after_is_idempotent_and_keeps_earlier_steps(tmp_path):
    log = tblog.TBLog(tmp_path)
    for step in range(1, 6):
        log.add(step, {"x": float(step), "nan": float("nan"), "note": "text", "flag": True})
    log.close()
    size = tblog.event_files(tmp_path)[0].stat().st_size
    log.truncate_after(5)  # nothing after 5: the file is left as it was
    assert tblog.event_files(tmp_path)[0].stat().st_size == size
    log.truncate_after(2)
    log.truncate_after(2)
    acc = read_tb(tmp_path)
    assert [(e.step, e.value) for e in acc.Scalars("train/x")] == [(1, 1.0), (2, 2.0)]
    assert [e.value for e in acc.Scalars("train/flag")] == [1.0, 1.0]
    assert sorted(acc.Tags()["scalars"]) == ["train/flag", "train/x"]  # NaN and text skipped
    assert [p.name for p in tmp_path.iterdir()] == [tblog.event_files(tmp_path)[0].name]


def test_sample_markdown_takes_best_and_worst_and_bounds_text():
    rows = [
        {"prompt": f"p{i}", "completion": f"c{i} " * 400, "reward": r, "advantage": 0.0}
        for i, r in enumerate([0.5, 0.9, float("nan"), 0.1, 0.7, 0.3])
    ]
    md = tblog.sample_markdown(rows, 4, max_chars=100)
    assert re.findall(r"\*\*reward ([\d.]+)\*\*", md) == ["0.900", "0.700", "0.300", "0.100"]
    assert "chars cut]" in md and len(md) < 4 * 250
    assert tblog.sample_markdown(rows[:2], 4, 100).count("**reward") == 2


def test_no_tensorboard_writes_no_events(tmp_path):
    run_dir = train.run(
        tiny_config(tmp_path, steps=1, tensorboard=False),
        policy=tiny_policy(),
        reward_fn=low_tokens,
    )
    assert (run_dir / "metrics.jsonl").exists() and not (run_dir / "tb").exists()
