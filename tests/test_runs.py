"""runs.py on a fabricated runs folder: list, compare, rollout filters, prune (what it keeps, and
that it deletes nothing without confirmation), bad arguments."""

import io
import json

import pytest

import runs
from rl.runlog import MetricsLog, RolloutDB


def make_run(root, name, config, metrics, ckpt_steps=(), latest=None, rollouts=()):
    """A run folder as train.py leaves it: config.json, metrics.jsonl, rollouts.sqlite,
    checkpoints/step_NNNNNN/ (trainer.json and a 1 kB weights file) and `latest`."""
    run = root / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    log = MetricsLog(run / "metrics.jsonl")
    for step, m in metrics:
        log.append(step, m)
    for step in ckpt_steps:
        ckpt = run / "checkpoints" / f"step_{step:06d}"
        ckpt.mkdir(parents=True)
        (ckpt / "trainer.json").write_text(json.dumps({"step": step}))
        (ckpt / "model.safetensors").write_bytes(b"\0" * 1024)
    if latest:
        (run / "latest").write_text(f"step_{latest:06d}\n")
    if rollouts:
        with RolloutDB(run / "rollouts.sqlite") as db:
            db.add(list(rollouts))
    return run


def rollout(step, i, reward, completion, category="control"):
    return {
        "step": step,
        "prompt_id": f"p{i}",
        "category": category,
        "prompt": f"prompt {i}",
        "completion": completion,
        "scores": {"curiosity": reward},
        "reward": reward,
        "advantage": 0.5,
        "length": 3,
        "finished": 1,
    }


EVAL = {2: 0.3, 4: 0.7, 6: 0.5}  # eval/reward at the even steps; step 4 is the best


@pytest.fixture
def runs_dir(tmp_path):
    root = tmp_path / "runs"
    base = dict(model="smollm2-135m", reward="happy", steps=6, lr=1e-5, kl_coef=0.04, seed=0)
    metrics_a = []
    for step in range(1, 7):
        m = {"reward_mean": 0.1 * step, "kl_mean": 0.01 * step, "loss": 1.0 / step}
        if step in EVAL:
            m["eval/reward"] = EVAL[step]
        metrics_a.append((step, m))
    texts = ["I am happy today", "the sky is blue", "HAPPY happy joy", "no idea"]
    rows = [rollout(s, i, 0.25 * i, t) for s in (1, 2, 3) for i, t in enumerate(texts)]
    rows.append(rollout(3, 9, float("nan"), "judge failed happily"))  # NULL reward
    make_run(root, "a", base, metrics_a, range(1, 7), latest=6, rollouts=rows)
    metrics_b = [(s, {"reward_mean": 0.9, "kl_mean": 0.0, "loss": float("nan")}) for s in (1, 2)]
    make_run(root, "b", base | dict(lr=2e-5, kl_coef=0.0, steps=10), metrics_b, [2], latest=2)
    (root / "not_a_run").mkdir()
    return root


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = runs.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------- list


def test_list_shows_runs_with_settings_last_metrics_and_size(runs_dir, capsys):
    code, out, _ = run_cli(capsys, "list", "--runs-dir", runs_dir, "--json")
    assert code == 0
    got = {r["name"]: r for r in json.loads(out)}
    assert sorted(got) == ["a", "b"]  # not_a_run is skipped
    a = got["a"]
    assert (a["model"], a["reward"], a["steps_done"], a["steps"]) == ("smollm2-135m", "happy", 6, 6)
    assert a["reward_mean"] == pytest.approx(0.6) and a["kl_mean"] == pytest.approx(0.06)
    assert (a["eval_reward"], a["eval_step"], a["checkpoints"]) == (0.5, 6, 6)
    assert a["size_bytes"] > 6 * 1024
    assert got["b"]["eval_reward"] is None and got["b"]["steps_done"] == 2
    code, out, _ = run_cli(capsys, "list", "--runs-dir", runs_dir, "--sort", "reward")
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["run", "model", "reward"]
    assert [ln.split()[0] for ln in lines[1:]] == ["a", "b"]  # 0.6 before 0.9
    assert "6/6" in lines[1] and "2/10" in lines[2]
    code, out, _ = run_cli(capsys, "list", "--runs-dir", runs_dir, "--sort", "reward", "--reverse")
    assert [ln.split()[0] for ln in out.splitlines()[1:]] == ["b", "a"]


def test_list_skips_a_metrics_line_cut_by_a_crash(runs_dir, capsys):
    with open(runs_dir / "a" / "metrics.jsonl", "a") as f:
        f.write('{"step": 7, "reward_me')
    code, out, _ = run_cli(capsys, "list", "--runs-dir", runs_dir, "--json")
    assert code == 0 and {r["name"]: r["steps_done"] for r in json.loads(out)}["a"] == 6


# ---------------------------------------------------------------------------------- compare


def test_compare_config_diff_and_key_metrics(runs_dir, capsys, tmp_path):
    png = tmp_path / "ab.png"
    argv = ("compare", "a", "b", "--runs-dir", runs_dir)
    code, out, _ = run_cli(capsys, *argv, "--json", "--plot", png)
    assert code == 0
    got = json.loads(out)
    assert got["config_diff"] == {"kl_coef": [0.04, 0.0], "lr": [1e-5, 2e-5], "steps": [6, 10]}
    m = got["metrics"]
    assert m["eval/reward"]["a"] == {"last": [6, 0.5], "best": [4, 0.7]}
    assert m["eval/reward"]["b"] == {"last": None, "best": None}
    assert m["kl_mean"]["a"]["best"] == [1, pytest.approx(0.01)]  # lower KL is "best"
    assert m["loss"]["b"] == {"last": None, "best": None}  # only NaN (null) logged
    assert "val_accuracy" not in m  # neither run logged it
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run_cli(capsys, *argv)
    assert "lr" in out and "seed" not in out
    assert "0.7 @4" in out and "eval/reward (max best)" in out


# ---------------------------------------------------------------------------------- rollouts


def rollouts_json(capsys, runs_dir, *flags) -> list[dict]:
    code, out, err = run_cli(capsys, "rollouts", runs_dir / "a", "--json", *flags)
    assert code == 0, err
    return json.loads(out)


def test_rollout_filters(runs_dir, capsys):
    def ids(*flags):
        return [(r["step"], r["prompt_id"]) for r in rollouts_json(capsys, runs_dir, *flags)]

    assert len(ids("--limit", "0")) == 13
    assert len(ids()) == 13 and len(ids("--limit", "5")) == 5
    assert {s for s, _ in ids("--step", "2")} == {2}
    assert {s for s, _ in ids("--step", "2-3", "--limit", "0")} == {2, 3}
    assert ids("--step", "3", "--min-reward", "0.5") == [(3, "p2"), (3, "p3")]  # NULL excluded
    assert ids("--step", "1", "--max-reward", "0.25") == [(1, "p0"), (1, "p1")]
    assert ids("--step", "3", "--grep", "HAPP") == [(3, "p0"), (3, "p2"), (3, "p9")]
    assert ids("--grep", "zebra") == []
    best = rollouts_json(capsys, runs_dir, "--step", "1", "--sort", "reward", "--limit", "1")
    assert best[0]["reward"] == 0.75 and best[0]["scores"] == {"curiosity": 0.75}
    code, out, _ = run_cli(capsys, "rollouts", runs_dir / "a", "--step", "3", "--grep", "sky")
    assert sorted(p.name for p in (runs_dir / "a").iterdir() if "sqlite" in p.name) == [
        "rollouts.sqlite"
    ], "reading leaves no -wal/-shm files behind"
    assert "completion: the sky is blue" in out and out.rstrip().endswith(
        "1 of 1 matching rollouts shown"
    )


# ---------------------------------------------------------------------------------- prune


def checkpoints(run) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").iterdir())


def test_prune_keeps_last_best_and_latest(runs_dir, capsys):
    run = runs_dir / "a"
    argv = ("prune", run, "--keep-last", 1, "--keep-best", 1)
    code, out, _ = run_cli(capsys, *argv, "--dry-run")
    assert code == 0 and "would delete 4 checkpoints" in out
    assert len(checkpoints(run)) == 6, "a dry run deletes nothing"
    code, out, _ = run_cli(capsys, *argv, "--yes", "--json")
    got = json.loads(out)
    assert got["keep"] == {
        "step_000004": ["best eval/reward 0.7"],
        "step_000006": ["last", "latest"],
    }
    assert got["deleted"] and got["freed_bytes"] >= 4 * 1024
    assert checkpoints(run) == ["step_000004", "step_000006"]
    assert not list((run / "checkpoints").glob(".del-*"))


def test_prune_never_deletes_latest_and_lower_is_better(runs_dir, capsys):
    run = runs_dir / "a"
    (run / "latest").write_text("step_000002\n")  # e.g. a resumed run that went back
    code, _, _ = run_cli(
        capsys, "prune", run, "--keep-last", 0, "--keep-best", 1, "--better", "low", "--yes"
    )
    assert code == 0
    assert checkpoints(run) == ["step_000002"]  # latest, and the lowest eval/reward (0.3)


def test_prune_asks_and_refuses_without_confirmation(runs_dir, capsys, monkeypatch):
    run = runs_dir / "a"
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a terminal, even with a "y"
    code, out, err = run_cli(capsys, "prune", run, "--keep-last", 1)
    assert code == 2 and len(checkpoints(run)) == 6
    assert err.startswith("error: refusing to delete") and "--yes" in err
    assert "delete step_000001" in out  # the list of what would go is shown first

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, _ = run_cli(capsys, "prune", run, "--keep-last", 1)
    assert code == 1 and "nothing deleted" in out and len(checkpoints(run)) == 6
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, _ = run_cli(capsys, "prune", run, "--keep-last", 1)
    assert code == 0 and checkpoints(run) == ["step_000006"]


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "argv, msg",
    [
        ([], "required"),
        (["frobnicate"], "invalid choice"),
        (["list", "--runs-dir", "{root}/missing"], "does not exist"),
        (["list", "--runs-dir", "{root}", "--sort", "colour"], "invalid choice"),
        (["compare", "a", "nope", "--runs-dir", "{root}"], "run nope not found"),
        (["compare", "a", "a", "--runs-dir", "{root}"], "same run"),
        (["compare", "{root}/not_a_run", "a", "--runs-dir", "{root}"], "not a run folder"),
        (["rollouts", "{root}/a", "--step", "x"], "not a step"),
        (["rollouts", "{root}/a", "--step", "5-2"], "empty range"),
        (["rollouts", "{root}/a", "--limit", "-3"], "count"),
        (["rollouts", "{root}/b"], "no rollouts.sqlite"),
        (["prune", "{root}/a"], "--keep-last"),
        (["prune", "{root}/a", "--keep-last", "-1"], "count"),
        (["prune", "{root}/a", "--keep-last", "1", "--keep-best", "1", "--metric", "x"], "'x'"),
        (["prune", "{root}/b", "--keep-last", "1", "--keep-best", "1"], "eval/reward"),
    ],
)
def test_bad_arguments_are_one_error_line_and_exit_2(runs_dir, capsys, argv, msg):
    before = checkpoints(runs_dir / "a")
    code, _, err = run_cli(capsys, *[a.format(root=runs_dir) for a in argv])
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and msg in err, err
    assert checkpoints(runs_dir / "a") == before
