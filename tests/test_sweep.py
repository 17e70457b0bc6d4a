"""sweep.py: grid expansion, names, dry run, skip/resume, summary, and bad grids (exit 2)."""

import json
from pathlib import Path

import pytest
from helpers import QWEN3, save_checkpoint, tiny_model

import sweep


def test_grid_expansion_order_and_names():
    grid = sweep.parse_assignments(["seed=0,1,2", "kl-coef=0.01,0.04"], "--grid", multi=True)
    assert grid == {"seed": ["0", "1", "2"], "kl_coef": ["0.01", "0.04"]}
    points = sweep.expand(grid)
    assert len(points) == 6 and points[0] == {"seed": "0", "kl_coef": "0.01"}
    assert points[1] == {"seed": "0", "kl_coef": "0.04"}  # the last key varies fastest
    assert [sweep.run_name(p) for p in points[:2]] == ["seed0_kl_coef0.01", "seed0_kl_coef0.04"]
    assert sweep.run_name({"reward": "rm:runs/a b"}) == "rewardrm-runs-a-b"


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--grid", "seed"], "write KEY=VALUE,VALUE"),
        (["--grid", "seed="], "write KEY=VALUE"),
        (["--grid", "seed=0,,1"], "an empty value"),
        (["--grid", "seed=0,0"], "appears twice"),
        (["--grid", "sed=0,1"], "'sed' is not a training setting"),
        (["--grid", "seed=0,1", "seed=2"], "seed is given twice"),
        (["--grid", "seed=0,1", "--fixed", "seed=3"], "both --grid and --fixed"),
        (["--grid", "run_name=a,b"], "set by the sweep"),
        (["--grid", "lr=0.1,fast"], "invalid float value: 'fast'"),  # not a number
        (["--grid", "group_size=1,2"], "group_size=1"),  # TrainConfig's own check
        (["--grid", "seed=0,1", "--reward", "joy"], "joy"),
        (["--grid", "seed=0,1", "--seed", "3"], "also set"),
        (["--grid", "seed=0,1", "--jobs", "0"], "--jobs"),
    ],
)
def test_bad_grids_are_one_error_line_and_exit_2(args, msg, capsys, tmp_path):
    assert sweep.main([*args, "--out-dir", str(tmp_path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert any(m in err for m in msg.split("|")), err


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path, capsys):
    argv = [
        "--grid",
        "seed=0,1",
        "kl_coef=0.01,0.04",
        "--fixed",
        "lr=1e-5",
        "steps=3",
        "--out-dir",
        str(tmp_path / "sw"),
        "--dry-run",
        "--reward",
        "happy",
    ]
    assert sweep.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5 and out[-1] == "4 runs, 4 to do"
    assert out[0].startswith("seed0_kl_coef0.01 [new]: python train.py --lr 1e-5 --steps 3")
    assert "--reward happy" in out[0] and "--run-name seed0_kl_coef0.01" in out[0]
    assert not (tmp_path / "sw").exists()


@pytest.mark.slow  # starts train.py processes: four runs (~1 min on 2 cores)
def test_sweep_runs_skips_complete_runs_and_resumes_short_ones(tmp_path, capsys):
    save_checkpoint(tiny_model(QWEN3, seed=1), QWEN3, tmp_path / "tiny")
    data = tmp_path / "p.jsonl"
    data.write_text(
        "".join(
            f'{{"id": "p{i}", "category": "control", "prompt": "t{5 + i} t9", "source": "x"}}\n'
            for i in range(4)
        )
    )
    out_dir = tmp_path / "sw"
    base = [
        "--grid",
        "seed=0,1",
        "--out-dir",
        str(out_dir),
        "--jobs",
        "2",
        "--model",
        str(tmp_path / "tiny"),
        "--data",
        str(data),
        "--reward",
        "happy",
        "--prompts-per-step",
        "2",
        "--group-size",
        "2",
        "--max-new-tokens",
        "4",
        "--lora-rank",
        "2",
        "--lora-layers",
        "0",  # the values task's CLI setting (12) is more blocks than the tiny model has
        "--forget-rank",
        "2",
        "--routing",
        "routed",
        "--hack-detectors",
        "length_padding:max_words=2",
        "--kl-coef",
        "0",
        "--kl-target",
        "none",  # the values task's CLI setting adapts the coefficient
        "--routing-eval-every",
        "1",
        "--eval-data",
        str(data),
        "--eval-limit",
        "2",
        "--routing-eval-samples",
        "2",
    ]
    assert sweep.main([*base, "--fixed", "steps=1"]) == 0
    out = capsys.readouterr().out
    assert "| run | seed | steps | reward | hack |" in out and "| seed0 | 0 | 1 |" in out
    assert "retain/task" in out and "forget/hack" in out
    assert {p.name for p in out_dir.glob("*.png")} == {
        "routing_modes.png",
        "routing_sweep.png",
        "curves.png",
    }
    assert (out_dir / "summary.csv").exists() and "Mean ± std" in (
        out_dir / "summary.md"
    ).read_text()
    assert sweep.main([*base, "--fixed", "steps=1", "--summary-only", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)  # one JSON object, nothing else on stdout
    assert [r["run"] for r in summary["runs"]] == ["seed0", "seed1"] and summary["failed"] == {}
    assert {Path(x).name for x in summary["plots"]} == {p.name for p in out_dir.glob("*.png")}
    assert summary["mean_std_over_seeds"] and summary["out_dir"] == str(out_dir)
    assert "2 runs, 0 to do" in _dry(base + ["--fixed", "steps=1"], capsys)
    plan = _dry(base + ["--fixed", "steps=2"], capsys)
    assert "seed0 [resume]: python train.py --resume" in plan
    assert sweep.main([*base, "--fixed", "steps=2"]) == 0
    rows = [json.loads(x) for x in (out_dir / "seed1" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]  # resumed, not restarted


def _dry(argv, capsys) -> str:
    assert sweep.main([*argv, "--dry-run"]) == 0
    return capsys.readouterr().out


def test_summary_of_a_run_with_a_partial_metrics_line_is_one_error_line(tmp_path, capsys):
    run = tmp_path / "sw" / "seed0"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 1, "reward_mean": 0.5}\n{"step": 2, "rew\n')
    argv = ["--grid", "seed=0", "--fixed", "steps=3", "--out-dir", str(tmp_path / "sw"),
            "--summary-only", "--reward", "happy"]  # fmt: skip
    assert sweep.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "metrics.jsonl:2 is not valid JSON" in err and "fix or remove that line" in err, err


def test_a_run_with_no_finite_reward_is_a_blank_cell_and_json_null(tmp_path, capsys):
    out_dir = tmp_path / "sw"
    for seed, lines in {
        0: ['{"step": 1, "reward_mean": null}', '{"step": 2, "reward_mean": null}'],
        1: ['{"step": 1, "reward_mean": 0.25, "hack/any": 1}', '{"step": 2, "reward_mean": 0.75}'],
    }.items():
        (out_dir / f"seed{seed}").mkdir(parents=True)
        (out_dir / f"seed{seed}" / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    argv = ["--grid", "seed=0,1", "--fixed", "steps=2", "--out-dir", str(out_dir),
            "--summary-only", "--reward", "happy"]  # fmt: skip
    assert sweep.main([*argv, "--json"]) == 0

    def no_nan(word):
        raise AssertionError(f"{word} in the --json output")

    out = json.loads(capsys.readouterr().out, parse_constant=no_nan)
    by_run = {r["run"]: r for r in out["runs"]}
    assert by_run["seed0"]["reward"] is None and by_run["seed0"]["hack"] is None
    assert by_run["seed1"]["reward"] == 0.5 and by_run["seed1"]["hack"] == 1.0
    [agg] = out["mean_std_over_seeds"]  # seed0 left out of the means, not counted as 0
    assert agg == {"runs": 2, "reward": "0.500 ± 0.000", "hack": "1.000 ± 0.000"}
    md = (out_dir / "summary.md").read_text()
    assert "| seed0 | 0 | 2 |  |  |" in md and "| seed1 | 1 | 2 | 0.500 | 1.000 |" in md
    csv_rows = (out_dir / "summary.csv").read_text().splitlines()
    assert csv_rows[:3] == ["run,seed,steps,reward,hack", "seed0,0,2,,", "seed1,1,2,0.5,1.0"]
    assert sweep.main(argv) == 0
    assert "| seed0 | 0 | 2 |  |  |" in capsys.readouterr().out
