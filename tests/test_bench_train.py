"""bench/train.py on a tiny saved model: the A/B arms run, are labelled, and the recipe is read."""

import json

from core import backend  # noqa: F401

# isort: split
from core import cpu_ops

import mlx.core as mx
import pytest
from helpers import LLAMA, save_checkpoint, tiny_model

from bench import train as bench_train
from rl import reference


@pytest.fixture
def recipe(tmp_path):
    base = tmp_path / "base"  # 3 blocks; LoRA in the top one, so a trunk of 2 can be shared
    save_checkpoint(tiny_model(LLAMA, seed=4), LLAMA, base)
    path = tmp_path / "recipe.json"
    path.write_text(
        json.dumps(
            dict(
                model=str(base),
                reward="happy",
                prompts_per_step=2,
                group_size=2,
                max_new_tokens=4,
                lora_rank=4,
                lora_layers=1,
                kl_coef=0.05,
                lr=1e-3,
                run_name="recipe",
                steps=60,
            )  # fmt: skip
        )
    )
    return path


@pytest.mark.slow  # both arms of the benchmark: training steps, ~1 min on 2 cores
def test_ab_runs_both_arms_from_a_recipe(recipe, capsys, monkeypatch):
    calls, real = [], reference.sequence_trunk
    monkeypatch.setattr(reference, "sequence_trunk", lambda *a: calls.append(a) or real(*a))
    argv = ["--config", str(recipe), "--ab", "--steps", "2", "--rounds", "1", "--json"]
    argv += ["--off", "rollout_trunk"]  # so the optimized arm computes its trunk (counted)
    assert bench_train.main(argv) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[-1])  # after the run's progress lines
    assert out["prompts"] == 2 and out["group_size"] == 2 and out["max_tokens"] == 4
    assert out["lora_rank"] == 4 and out["lora_layers"] == 1
    assert out["timed_steps"] == 1 and out["unoptimized_timed_steps"] == 1
    assert out["optimizations"] == {
        "share_trunk": True, "share_prefix": True, "rollout_trunk": False,
        "head_valid_only": True, "drop_finished": True,
        "ragged_tail": True, "keep_head_logits": True, "native_kernels": True,
    }  # fmt: skip
    assert out["unoptimized_optimizations"] == dict.fromkeys(bench_train.NAMES, False)
    for key in ("median_step_s", "unoptimized_median_step_s", "reference_s", "update_s"):
        assert out[key] > 0, key
    assert set(out["unoptimized_parts"]) == set(bench_train.PARTS)
    assert out["step_ratio"] == pytest.approx(
        out["median_step_s"] / out["unoptimized_median_step_s"]
    )
    assert len(calls) == 2  # the optimized arm's two steps shared a trunk; the other arm none


@pytest.mark.slow  # the benchmark's training steps: ~1-2 min on a machine's first run
def test_off_switches_an_optimization_off_in_both_arms(recipe, capsys, monkeypatch):
    calls, real = [], reference.sequence_trunk
    monkeypatch.setattr(reference, "sequence_trunk", lambda *a: calls.append(a) or real(*a))
    argv = ["--config", str(recipe), "--steps", "2", "--off", "share_trunk", "--json"]
    assert bench_train.main(argv) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[-1])  # after the run's progress lines
    assert out["optimizations"] == {
        "share_trunk": False, "share_prefix": True, "rollout_trunk": True,
        "head_valid_only": True, "drop_finished": True,
        "ragged_tail": True, "keep_head_logits": True, "native_kernels": True,
    }  # fmt: skip
    assert "step_ratio" not in out
    assert calls == []


def test_bad_settings_are_one_error_line(tmp_path, capsys):
    assert bench_train.main(["--steps", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: --steps")
    assert bench_train.main(["--config", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "none.json" in err and err.count("\n") == 1


def test_arm_switches_follow_off_and_keep():
    on = bench_train.arm_switches(True, ["share_trunk"], ["native_kernels"])
    assert on == dict.fromkeys(bench_train.NAMES, True) | {"share_trunk": False}
    un = bench_train.arm_switches(False, ["share_trunk"], ["native_kernels", "share_trunk"])
    assert un == dict.fromkeys(bench_train.NAMES, False) | {"native_kernels": True}


def test_run_arm_sets_the_kernel_switch_for_the_run_alone(monkeypatch):
    seen = []

    def fake(cfg):
        seen.append((cfg.share_trunk, cfg.drop_finished, cpu_ops._native_on))
        return []

    monkeypatch.setattr(bench_train, "timed_rows", fake)
    cfg = bench_train.train.TrainConfig(model="m", reward="happy")
    for optimized in (True, False):
        bench_train.run_arm(cfg, bench_train.arm_switches(optimized, [], []), "x")
        assert cpu_ops._native_on is True  # restored after the run
    assert seen == [(True, True, True), (False, False, False)]
    with cpu_ops.native_kernels(False):
        assert cpu_ops.native(mx.zeros((2,))) is None


def test_keep_without_ab_is_one_error_line(capsys):
    assert bench_train.main(["--keep", "native_kernels"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --keep") and err.count("\n") == 1


def test_timed_rows_read_the_runs_metrics_without_the_warm_up_step(tmp_path, monkeypatch):
    lines = ['{"step": 1, "step_s": 9.5}', '{"step": 2, "step_s": 1.5}']
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(bench_train.train, "run", lambda cfg: tmp_path)
    assert bench_train.timed_rows(None) == [{"step": 2, "step_s": 1.5}]


@pytest.mark.slow  # the benchmark's training steps: ~1-2 min on a machine's first run
def test_eos_lets_answers_end_and_says_so(recipe, capsys, monkeypatch):
    seen, real = [], bench_train.train.run
    monkeypatch.setattr(bench_train.train, "run", lambda cfg: seen.append(cfg) or real(cfg))
    assert bench_train.main(["--config", str(recipe), "--steps", "2", "--eos", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert out["eos"] is True
    assert [(c.ignore_eos, c.truncated) for c in seen] == [(False, "cap")]  # the run's own rule
    assert bench_train.main(["--config", str(recipe), "--steps", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["eos"] is False
    assert (seen[-1].ignore_eos, seen[-1].truncated) == (True, "keep")
