"""tasks/registry.py and --task: each task's defaults, the rewards a task refuses (before any model
work), chess records grouped by task type, the registered chess reward, and a chess run on a tiny
model with no engine installed."""

import json
import shutil
import sqlite3
import subprocess
import sys

from core import backend  # noqa: F401

import mlx.core as mx
import numpy as np
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model, tiny_tokenizer

import eval_task
import train
from gwen import Gwen
from load_weights import load
from rewards.builtin import RewardError
from rewards.registry import RewardContext, load_reward_config, parse_spec, register
from rewards.scorer import build_scorer, category_means
from tasks import chess_task as ct
from tasks import registry as tasks


def config(tmp_path, **kw):
    base = dict(model="tiny", out_dir=str(tmp_path), run_name="run")
    return train.TrainConfig(**{**base, **kw})


def test_each_task_brings_its_defaults(tmp_path):
    values = config(tmp_path)
    assert (values.task, values.reward, values.data, values.eval_data) == (
        "values",
        "rm:models/rm-smollm2-135m-v2",
        "data/prompts.jsonl",
        "data/eval.jsonl",
    )
    assert config(tmp_path, reward="happy").data == "data/happy_prompts.jsonl"
    chess = config(tmp_path, task="chess")
    assert (chess.reward, chess.data, chess.eval_data) == (
        "chess",
        "data/chess/train.jsonl",
        "data/chess/val.jsonl",
    )
    # a flag still wins over the task's default
    assert config(tmp_path, task="chess", eval_data="data/chess/test.jsonl").eval_data.endswith(
        "test.jsonl"
    )


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(task="chess", reward="rubric"), "cannot use the 'rubric' reward.*--reward chess"),
        (dict(task="chess", reward="chess:0.5,rm:/x:0.5"), "'rm'|rm_config"),
        (dict(task="chess", reward="stance"), "cannot use the 'stance' reward.*--reward chess"),
        (dict(task="values", reward="chess"), "cannot use the 'chess' reward.*--task chess"),
        (dict(task="go"), "task 'go' is not one of"),
        (dict(baseline="median"), "baseline='median'"),
        (dict(baseline="ema", baseline_decay=1.0), "baseline_decay=1.0"),
    ],
)
def test_mismatched_task_and_reward_fail_with_the_fix(tmp_path, kw, message):
    with pytest.raises(ValueError, match=message):
        config(tmp_path, **kw)


def test_cli_refuses_a_task_reward_mismatch_in_one_line(capsys):
    assert train.main(["--task", "chess", "--reward", "rubric"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "--reward chess" in err


def test_chess_records_are_grouped_by_task_type():
    records = tasks.load_chess_records("data/chess/val.jsonl")
    assert {r["category"] for r in records} == {"P", "A"}
    assert all(r["category"] == r["task"] for r in records)


def test_chess_examples_are_shipped_train_records():
    train_records = {r["id"]: r for r in ct.load_chess("data/chess/train.jsonl")}
    shipped = [train_records[i] for i in tasks.CHESS_EXAMPLE_IDS]
    got = [turn for turns in tasks.CHESS_EXAMPLES.values() for turn in turns]
    assert sorted(got) == sorted((r["prompt"], r["target"]) for r in shipped)
    task = tasks.get("chess")
    assert task.examples("P: x") == tasks.CHESS_EXAMPLES["P"]
    assert task.examples("A: x") == tasks.CHESS_EXAMPLES["A"]


# Run in a fresh interpreter: every rewards/ module imported, then the tasks.
REGISTRATION = """
import pkgutil, sys
import rewards
from rewards import registry
from rewards.builtin import RewardError
for m in pkgutil.iter_modules(rewards.__path__):
    __import__(f"rewards.{m.name}")
print(sorted(n for n in sys.modules if n == "tasks" or n.startswith("tasks.")))
try:
    registry.parse_spec("chess")
except RewardError as e:
    print(e)
from tasks import registry as tasks
print([c.name for c in registry.parse_spec("chess:2,happy")], registry.TASK_CATEGORIES)
"""


def test_rewards_import_no_task_and_chess_parses_once_the_tasks_are_imported():
    """rewards/ imports no tasks module at run time (tests/test_layers.py reads the source); a
    spec naming chess fails, naming the fix, until tasks.registry registers it."""
    out = subprocess.run(
        [sys.executable, "-c", REGISTRATION], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1].startswith("reward 'chess' (in 'chess') is not registered; valid names: [")
    assert "'chess'" not in out[1].partition("valid names:")[2].partition("]")[0]
    assert "train.py --task chess" in out[1] and "import tasks.registry" in out[1]
    assert out[2] == "['chess', 'happy'] ['P', 'A']"


def test_a_task_reward_cannot_take_a_built_in_name():
    with pytest.raises(ValueError, match="cannot register reward 'rm': a built-in"):
        register("rm", tasks.CHESS_REWARD, task="chess")
    register("chess", tasks.CHESS_REWARD, task="chess")  # importing again: no error
    with pytest.raises(
        ValueError, match="'other' cannot register reward 'chess': task 'chess' has it"
    ):
        register("chess", tasks.CHESS_REWARD, task="other")


def test_registered_chess_reward_scores_parts_per_task_type():
    records = tasks.load_chess_records("data/chess/val.jsonl")[:2]  # one P, one A
    ctx = RewardContext(records=records)
    scorer = build_scorer(parse_spec("chess"), ctx)
    prompts = [r["prompt"] for r in records for _ in range(2)]
    completions = [records[0]["target"], "Sure! e2e4", records[1]["target"], "garbage"]
    scores = scorer(prompts, completions, [r["category"] for r in records for _ in range(2)])
    assert scores.values.tolist() == [1.0, ct.UNPARSABLE, 1.0, ct.UNPARSABLE]
    means = category_means("eval", ["P", "P", "A", "A"], scores.values, scores.details)
    assert means["eval/P/format"] == means["eval/A/format"] == 0.5
    assert means["eval/P/reward"] == pytest.approx((1.0 + ct.UNPARSABLE) / 2)
    assert "eval/P/a_fen" not in means and means["eval/A/a_fen"] == 0.5
    with pytest.raises(ValueError, match="--task chess"):
        build_scorer(parse_spec("chess"), RewardContext())


def test_registered_chess_reward_takes_partial_from_a_reward_file(tmp_path):
    records = tasks.load_chess_records("data/chess/val.jsonl")[:2]  # one P, one A
    cfg = tmp_path / "r.yaml"
    cfg.write_text("components:\n  - {name: chess, partial: 0.4}\n")
    scorer = build_scorer(load_reward_config(str(cfg)), RewardContext(records=records))
    prompts = [records[0]["prompt"]] * 2
    scores = scorer(prompts, [records[0]["target"], "M: 15b2 k2b2"], ["P", "P"])
    assert scores.values.tolist() == pytest.approx([1.0, ct.UNPARSABLE + 0.4 * 0.2])
    assert [d["shape"] for d in scores.details] == pytest.approx([1.0, 0.2])
    cfg.write_text("components:\n  - {name: chess, partial: 0.5}\n")
    with pytest.raises(RewardError, match=r"partial=0.5 must be in \[0, 0.5\)"):
        load_reward_config(str(cfg))


def test_chess_run_on_a_tiny_model_needs_no_engine(tmp_path, monkeypatch):
    """The whole --task chess path: chess records, few-shot turns, the registered reward, the
    per-task-type baseline, evaluation on val, logs. The tiny model cannot write chess, so every
    reward is the unparsable band; the wiring is what is checked."""
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)  # no stockfish anywhere
    policy = Gwen(tiny_model(QWEN3, seed=1), tiny_tokenizer(QWEN3["vocab_size"]))
    cfg = config(
        tmp_path,
        task="chess",
        baseline="adaptive",
        steps=2,
        prompts_per_step=2,
        group_size=2,
        max_new_tokens=4,
        kl_coef=0.0,
        eval_every=2,
        eval_limit=4,
    )
    run_dir = train.run(cfg, policy=policy)
    assert policy.examples is tasks.get("chess").examples
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    assert last["eval/P/format"] == 0.0 and last["eval/A/reward"] == ct.UNPARSABLE
    assert any(k.startswith("train/") and k.endswith("/format") for k in last)
    assert any(k.startswith("baseline/") for k in last)
    assert np.isfinite(last["loss"])
    db = sqlite3.connect(run_dir / "rollouts.sqlite")
    categories = {c for (c,) in db.execute("SELECT category FROM rollouts")}
    assert categories <= {"P", "A"} and categories


def test_evaluate_cli_refuses_judge_rewards_and_bad_files(capsys):
    assert eval_task.main(["--task", "values", "--reward", "rubric"]) == 2  # needs a judge model
    assert eval_task.main(["--task", "chess", "--prompts", "missing.jsonl"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: ") and "judge" in err[0]
    assert err[1].startswith("error: missing.jsonl")


def test_evaluate_loads_a_lora_checkpoint_onto_its_base(tmp_path, float32_loads):
    """The held-out figures of knowledge/chess.md come from eval_task (Gwen.load): a LoRA
    checkpoint must give the trained policy's outputs, not the base model's. A float32 check
    (float32_loads): at float16 the merged and unmerged adapters round apart by more than 1e-5."""

    base_dir = tmp_path / "base"
    save_checkpoint(tiny_model(QWEN3, seed=1), QWEN3, base_dir)
    policy = Gwen(*load(str(base_dir)))
    cfg = config(tmp_path, model=str(base_dir), steps=1, lora_rank=4, lr=0.5, group_size=2)
    reward = lambda prompts, completions, **kw: [float(len(c)) for c in completions]  # noqa: E731
    run_dir = train.run(cfg, policy=policy, reward_fn=reward)
    loaded = Gwen.load(str(run_dir / "checkpoints" / "step_000001"))
    tokens = np.array([[5, 6, 7, 8]])
    want, got = policy.model(mx.array(tokens)), loaded.model(mx.array(tokens))
    base = Gwen(*load(str(base_dir))).model(mx.array(tokens))
    assert np.allclose(np.array(got), np.array(want), atol=1e-5)
    assert not np.allclose(np.array(base), np.array(want), atol=1e-3), "the adapters did train"
