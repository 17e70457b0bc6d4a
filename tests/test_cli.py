"""One CLI convention across every command (core/errors.py, flags.renamed, strict_json).

For each entry point (a root module with `if __name__ == "__main__"`), in process through its
`main(argv)`: --help exits 0; a missing input file, a bad flag value and (for a command that
reads JSONL) a malformed line each give exit status 2 and exactly one `error:` line on stderr,
no traceback, the malformed line named by file and line number. Every case stops before a model
is loaded, so the file runs in seconds. ENTRY_POINTS must list every entry point: a new command
gets its cases here. Then the pieces: the wrapper, the old-flag aliases, strict JSON, and
evaluate.py on a broken checkpoint.
"""

import ast
import importlib
import json
import math
import re
import socket
import subprocess
import sys
from pathlib import Path

from core import errors, flags, strict_json
from core.jsonl import DataError

import numpy as np
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model

ROOT = Path(__file__).resolve().parent.parent
MISSING = "MISSING"  # replaced by a path that does not exist
BAD = "BAD"  # replaced by a JSONL file whose line 1 is fine and line 2 is malformed
OUT = "OUT"  # replaced by a fresh output path
PORT = "PORT"  # replaced by a free local port (chat.py checks its port first)
EVAL = "--grader none --no-kl --reward happy".split()
GATE = "nonsense=This question does not make sense."

# name -> (argv with a missing input file or None, argv with a bad flag value,
#          (argv with a malformed JSONL file, the file line 1 is copied from) or None)
ENTRY_POINTS = {
    "bench.distributed": (["--model", MISSING], ["--ranks", "3", "--prompts-per-step", "4"], None),
    "bench.judge": (["--pairs", MISSING], ["--reward", "joy"],
                    (["--pairs", BAD], "data/rm_pairs.jsonl")),
    "bench.logprobs": (None, ["--trials", "2"], None),
    "bench.precision": (None, ["--steps", "0"], None),
    "bench_rollout": (["--model", MISSING], ["--group-size", "0"], None),
    "bench.train": (["--config", MISSING], ["--steps", "1"], None),
    "bench.cpu_native": (None, ["gpu"], None),
    "export": (["--model", MISSING, "--out", OUT], ["--model", "smollm2-135m", "--out", OUT,
                                                    "--q-bits", "3"], None),
    "chat": (["--model", MISSING, "--port", PORT], ["--temperature", "-1", "--port", PORT], None),
    "tasks.chess_data": (
        ["generate", "--out", OUT, "--n", "2", "--seed", "0", "--tasks", "A", "--exclude", MISSING],
        ["generate", "--out", OUT, "--n", "2", "--seed", "0", "--tasks", "Q"],
        (["generate", "--out", OUT, "--n", "2", "--seed", "0", "--tasks", "A", "--exclude", BAD],
         "data/chess/test.jsonl"),
    ),
    "evals.routing": (["smollm2-135m", "--prompts", MISSING, "--task-reward", "happy"],
                      ["smollm2-135m", "--task-reward", "joy"],
                      (["smollm2-135m", "--prompts", BAD, "--task-reward", "happy"],
                       "data/eval.jsonl")),
    "eval_task": (["--prompts", MISSING], ["--task", "go"],
                  (["--prompts", BAD], "data/chess/test.jsonl")),
    "evaluate": (["--model", "smollm2-135m", "--prompts", MISSING, *EVAL],
                 ["--model", "smollm2-135m", "--prompts", "data/eval.jsonl", "--samples", "0",
                  *EVAL],
                 (["--model", "smollm2-135m", "--prompts", BAD, *EVAL], "data/eval.jsonl")),
    "evals.gold": (["--answers", MISSING], ["--json=yes"],
                   (["--predictions", BAD],
                    '{"id": "gold-0001", "label": "answers", "pushback": 0}')),
    "evals.grade": (["--answers", MISSING],
                    ["--answers", "data/gold/answers.jsonl", "--grader", OUT],
                    (["--answers", BAD], "data/gold/answers.jsonl")),
    "gwen": (["--model", MISSING, "--prompt", "hi"], ["--prompt", "hi", "--top-p", "0"], None),
    "bench.mutation_check": (None, ["--only", "nope"], None),
    "experiments.category_probe": (["--model", "smollm2-135m", "--test", MISSING],
                       ["--model", "smollm2-135m", "--test", "data/eval.jsonl",
                        "--control-level", "2"],
                       (["--model", "smollm2-135m", "--test", BAD], "data/eval.jsonl")),
    "experiments.gate_eval": (["--model", "smollm2-135m", "--prompts", MISSING, "--gate", GATE],
                  ["--model", "smollm2-135m", "--prompts", "data/eval.jsonl", "--limit", "0"],
                  (["--model", "smollm2-135m", "--prompts", BAD, "--gate", GATE],
                   "data/eval.jsonl")),
    "experiments.opener_gate": (["--gate", GATE, "--gate-prompts", MISSING], ["--gate", "nonsense"],
                    (["--gate", GATE, "--gate-prompts", BAD], "data/prompts.jsonl")),
    "experiments.stance_pairs": (["--stance-pairs", MISSING], ["--stance-folds", "1"],
                     (["--stance-pairs", BAD], "data/prompts.jsonl")),
    "experiments.premise_probe": (["--model", "smollm2-135m", "--pairs", MISSING],
                      ["--model", "smollm2-135m", "--folds", "1"],
                      (["--model", "smollm2-135m", "--pairs", BAD], "data/prompts.jsonl")),
    "quantize": (["--model", MISSING], ["--model", "smollm2-135m", "--bits", "3"],
                 (["--model", "smollm2-135m", "--data", BAD], "data/eval.jsonl")),
    "evals.read_set": (["figures", "--dir", MISSING],
                       ["sample", "--answers", "x", "--out", OUT, "--per-category", "many"],
                       (["sample", "--answers", BAD, "--out", OUT],
                        '{"model": "m", "id": "p1", "category": "control", "prompt": "q", '
                        '"sample": 0, "answer": "a"}')),
    "runs": (["compare", MISSING, MISSING], ["list", "--sort", "nope"],
             (["rollouts", BAD], '{"step": 1, "reward_mean": 0.5}')),
    "sft": (["--data", MISSING], ["--val-fraction", "1.5"],
            (["--data", BAD, "--out-dir", OUT], "data/sft/written.jsonl")),
    "sweep": (["--grid", "seed=0,1", "--data", MISSING, "--out-dir", OUT, "--dry-run"],
              ["--jobs", "0"],
              (["--grid", "seed=0,1", "--data", BAD, "--out-dir", OUT, "--dry-run"],
               "data/eval.jsonl")),
    "train": (["--config", MISSING], ["--group-size", "0"],
              (["--data", BAD, "--out-dir", OUT], "data/eval.jsonl")),
    "train_grader": (["--pushback-model", MISSING], ["--steps", "many"], None),
    "train_rm": (["--pairs", MISSING], ["--steps", "0"],
                 (["--pairs", BAD], "data/rm_pairs.jsonl")),
}  # fmt: skip
RUN_FOLDER = {"runs"}  # BAD is a run folder holding the bad metrics.jsonl


def source(name: str) -> Path:
    """The file of a module by its dotted name (`bench.judge` -> bench/judge.py)."""
    return ROOT / (name.replace(".", "/") + ".py")


def entry_points() -> list[str]:
    """Every module with a `__main__` block: the commands at the top and the packages' modules
    (run as `python -m package.module`), by dotted name; data/'s builders are BUILDERS."""
    packages = [d for d in ROOT.iterdir() if (d / "__init__.py").exists() and d.name != "data"]
    paths = [*ROOT.glob("*.py"), *(p for d in packages for p in d.glob("*.py"))]
    return sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in paths
        if 'if __name__ == "__main__":' in p.read_text()
    )


def test_every_entry_point_has_cases():
    assert entry_points() == sorted(ENTRY_POINTS)


def call(name: str, argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `main(argv)` in this process; argparse's exits too."""
    module = importlib.import_module(name)
    try:
        code = module.main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code or 0, out, err


def assert_one_error_line(code, err) -> str:
    lines = [x for x in err.splitlines() if x.startswith("error: ") or ": error: " in x]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err[-2000:])
    return lines[0]


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def fill(argv: list[str], tmp_path: Path, bad: Path | None = None) -> list[str]:
    subs = {MISSING: str(tmp_path / "missing.jsonl"), OUT: str(tmp_path / "out"), BAD: str(bad)}
    subs[PORT] = free_port() if PORT in argv else ""
    return [subs.get(a, a) for a in argv]


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_help_exits_0(name, capsys):
    code, out, _ = call(name, ["--help"], capsys)
    assert code == 0 and "usage:" in out


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_main_is_wrapped_and_its_status_is_the_exit_status(name):
    module = importlib.import_module(name)
    assert module.main.__code__ is errors.cli(len).__code__, f"{name}.main lacks @errors.cli"
    tail = source(name).read_text().split('if __name__ == "__main__":')[1]
    assert tail.strip() in ("sys.exit(main())", "raise SystemExit(main())"), tail


@pytest.mark.parametrize("name", sorted(n for n, c in ENTRY_POINTS.items() if c[0]))
def test_missing_input_file_is_one_error_line_exit_2(name, tmp_path, capsys):
    code, _, err = call(name, fill(ENTRY_POINTS[name][0], tmp_path), capsys)
    line = assert_one_error_line(code, err)
    assert "missing" in line, line


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_bad_flag_value_exits_2(name, tmp_path, capsys):
    code, _, err = call(name, fill(ENTRY_POINTS[name][1], tmp_path), capsys)
    assert_one_error_line(code, err)


@pytest.mark.parametrize("name", sorted(n for n, c in ENTRY_POINTS.items() if c[2]))
def test_malformed_jsonl_line_is_named(name, tmp_path, capsys):
    argv, first = ENTRY_POINTS[name][2]
    if not first.startswith("{"):
        first = (ROOT / first).read_text().splitlines()[0]
    bad = tmp_path / "bad.jsonl"
    if name in RUN_FOLDER:
        bad = tmp_path / "run"
        bad.mkdir()
        path = bad / "metrics.jsonl"
    else:
        path = bad
    path.write_text(first + '\n{"id": "oops", \n{"step": 3}\n')
    code, _, err = call(name, fill(argv, tmp_path, bad), capsys)
    line = assert_one_error_line(code, err)
    assert re.search(re.escape(str(path)) + r"( line |:)2\b", line), line


FILE = "FILE"  # replaced by an existing one-line file (an --out that is not a folder)
DATASETS = "DATASETS"  # replaced by a stand-in for ../shared/datasets made in the test
# the data builders, scripts in data/: name -> (argv with a missing input file or None,
#                                              argv with a bad flag value)
BUILDERS = {
    "make_data": (None, ["--out", FILE]),
    "make_gold": (["--prompts", MISSING], ["--round", "2", "--append", "--out", FILE]),
    "make_gate_prompts": (
        ["--out", OUT, "--shared", MISSING],
        ["--out", FILE, "--shared", DATASETS],
    ),
    "make_happy_prompts": (None, ["--out", FILE]),
    "make_rm_data": (None, ["--out", FILE]),
    "make_rm_read_pairs": (None, ["--out", FILE]),
    "make_sft": (None, ["--out", FILE]),
}


def builder(name: str):
    return importlib.import_module(f"data.{name}")


def test_every_builder_has_cases():
    found = [p.stem for p in (ROOT / "data").glob("*.py") if "def main(" in p.read_text()]
    assert sorted(found) == sorted(BUILDERS)


def fake_datasets(folder: Path) -> Path:
    """The files make_gate_prompts checks for, in the shared folder's layout, with one synthetic
    row each: a fresh clone has no ../shared, so no test may read it."""
    (folder / "coconot").mkdir(parents=True)
    (folder / "falseqa").mkdir()
    (folder / "coconot" / "coconot_pref.jsonl").write_text('{"id": "c1", "prompt": "Hi?"}\n')
    (folder / "falseqa" / "train.csv").write_text("question,answer,label\nWhy?,Because.,1\n")
    return folder


def call_builder(name: str, argv: list[str], tmp_path: Path, capsys) -> tuple[int, str, str]:
    (tmp_path / "file.txt").write_text("one line\n")
    subs = {FILE: str(tmp_path / "file.txt")}
    if DATASETS in argv:
        subs[DATASETS] = str(fake_datasets(tmp_path / "datasets"))
    argv = [subs.get(a, a) for a in fill(argv, tmp_path)]
    return call(builder(name).__name__, argv, capsys)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_help_exits_0_and_main_is_wrapped(name, capsys):
    code, out, _ = call(builder(name).__name__, ["--help"], capsys)
    assert code == 0 and "usage:" in out
    assert builder(name).main.__code__ is errors.cli(len).__code__, f"{name}.main lacks @errors.cli"
    tail = (ROOT / "data" / f"{name}.py").read_text().split('if __name__ == "__main__":')[1]
    assert tail.strip() in ("sys.exit(main())", "raise SystemExit(main())"), tail


@pytest.mark.parametrize("name", sorted(n for n, c in BUILDERS.items() if c[0]))
def test_builder_missing_input_file_is_one_error_line_exit_2(name, tmp_path, capsys):
    code, _, err = call_builder(name, BUILDERS[name][0], tmp_path, capsys)
    line = assert_one_error_line(code, err)
    assert str(tmp_path / "missing.jsonl") in line, line


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_bad_flag_value_is_one_error_line_exit_2(name, tmp_path, capsys):
    code, _, err = call_builder(name, BUILDERS[name][1], tmp_path, capsys)
    line = assert_one_error_line(code, err)
    assert str(tmp_path / "file.txt") in line, line
    assert (tmp_path / "file.txt").read_text() == "one line\n"  # nothing written


def test_train_grader_checks_its_classifier_folder_before_model_work(tmp_path, capsys, monkeypatch):
    import train_grader

    def no_model_work(*args, **kwargs):
        raise AssertionError("model work before --pushback-model was checked")

    monkeypatch.setattr(train_grader, "features", no_model_work)
    (tmp_path / "notrm").mkdir()
    for folder in (tmp_path / "missing", tmp_path / "notrm"):
        code, _, err = call("train_grader", ["--pushback-model", str(folder)], capsys)
        assert str(folder) in assert_one_error_line(code, err)


def test_the_exit_status_reaches_the_shell(tmp_path):
    """Through `python X.py`: exit 2, one error line, no traceback (runs.py: starts without MLX)."""
    cmd = [sys.executable, "runs.py", "compare", str(tmp_path / "a"), str(tmp_path / "b")]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: ")


# ---------------------------------------------------------------------------------- the pieces


def test_cli_turns_user_errors_into_one_line_and_2(capsys):
    def main(exc):
        if exc:
            raise exc
        return 7

    wrapped = errors.cli(main)
    assert wrapped(None) == 7
    assert wrapped(DataError("f.jsonl line 3: bad\n  details")) == 2
    assert capsys.readouterr().err == "error: f.jsonl line 3: bad details\n"
    assert wrapped(FileNotFoundError(2, "No such file or directory", "x.json")) == 2
    assert "x.json" in capsys.readouterr().err
    for passes in (ValueError("a bug"), KeyboardInterrupt(), SystemExit(2)):
        with pytest.raises(type(passes)):
            wrapped(passes)


def test_as_user_error_marks_only_its_block():
    with pytest.raises(errors.UserError, match="^bad value$"):
        with errors.as_user_error(ValueError):
            raise ValueError("bad value")
    data = DataError("f line 1: x", path="f", line=1)
    with pytest.raises(DataError) as info, errors.as_user_error(ValueError):
        raise data
    assert info.value is data  # a user error already: unchanged, path and line kept
    with pytest.raises(KeyError), errors.as_user_error(ValueError):
        raise KeyError("a bug")


def test_every_user_error_class_derives_from_user_error():
    import load_weights
    import runs
    import sweep
    from rewards.builtin import RewardError
    from rl import config, distributed
    from tasks import chess_data

    for cls, other in [
        (DataError, ValueError), (RewardError, ValueError),
        (load_weights.LoadError, RuntimeError), (config.ConfigError, ValueError),
        (distributed.LaunchError, ValueError), (runs.RunsError, Exception),
        (sweep.SweepError, ValueError), (chess_data.StockfishNotFound, RuntimeError),
        (builder("make_rm_data").SourceError, ValueError),
    ]:  # fmt: skip
        assert issubclass(cls, errors.UserError) and issubclass(cls, other), cls


def test_renamed_flag_is_a_hidden_alias_that_warns(capsys):
    import gwen

    p = __import__("argparse").ArgumentParser()
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--enable-thinking", action="store_true")
    flags.renamed(p, "--max-tokens", "--max-new-tokens")
    flags.renamed(p, "--thinking", "--enable-thinking")
    assert vars(p.parse_args([])) == {"max_new_tokens": 64, "enable_thinking": False}
    assert capsys.readouterr().err == ""
    a = p.parse_args(["--max-tokens", "5", "--thinking"])
    assert (a.max_new_tokens, a.enable_thinking) == (5, True)
    assert capsys.readouterr().err.splitlines() == [
        "warning: --max-tokens is deprecated; use --max-new-tokens",
        "warning: --thinking is deprecated; use --enable-thinking",
    ]
    assert "--max-tokens" not in p.format_help()
    with pytest.raises(SystemExit):
        p.parse_args(["--max-tokens", "many"])  # typed like the new flag
    assert "invalid int value: 'many'" in capsys.readouterr().err
    assert gwen.main(["--max-tokens", "0", "--prompt", "x"]) == 2  # the commands have them
    assert capsys.readouterr().err.startswith("warning: --max-tokens is deprecated")


def test_retired_flag_is_a_hidden_spelling_that_fails(capsys):
    p = __import__("argparse").ArgumentParser()
    p.add_argument("--grader", default="g")
    flags.retired(p, "--old-model", "use --grader")
    assert vars(p.parse_args([])) == {"grader": "g"}  # nothing stored when it is not given
    assert "--old-model" not in p.format_help()
    for argv in (["--old-model", "x"], ["--old-model"], ["--old-model=none"]):
        with pytest.raises(errors.UserError, match=r"^--old-model was retired: use --grader$"):
            p.parse_args(argv)

    @errors.cli
    def main(argv):
        p.parse_args(argv)
        return 0

    assert main(["--old-model", "x"]) == 2
    assert capsys.readouterr().err == "error: --old-model was retired: use --grader\n"


def test_add_flags_plain_and_layered():
    import argparse
    import dataclasses

    @dataclasses.dataclass
    class Cfg:
        steps: int = flags.option(3, "steps")
        lr: float = flags.option(0.5, "rate")
        kl_target: float | None = flags.option(None, "target")
        name: str | None = flags.option(None, "name")
        plot: bool = flags.option(True, "plot")

    plain = flags.add_flags(argparse.ArgumentParser(), Cfg)
    assert vars(plain.parse_args([])) == dataclasses.asdict(Cfg())
    a = plain.parse_args(["--steps", "7", "--kl-target", "0.1", "--name", "none", "--no-plot"])
    assert (a.steps, a.kl_target, a.name, a.plot) == (7, 0.1, "none", False)
    assert "steps (default: 3)" in plain.format_help()
    # layered: a flag left out is absent; `none` switches an optional field off
    layered = flags.add_flags(
        argparse.ArgumentParser(), Cfg, layered=True, default_text=lambda f: f"<{f.name}>"
    )
    assert vars(layered.parse_args([])) == {}
    a = layered.parse_args(["--kl-target", "None", "--name", "none", "--lr", "2"])
    assert vars(a) == {"kl_target": None, "name": None, "lr": 2.0}
    assert "steps (default: <steps>)" in layered.format_help()


def test_parse_config_builds_the_config_and_returns_the_other_flags():
    import argparse
    import dataclasses

    @dataclasses.dataclass
    class Cfg:
        steps: int = flags.option(3, "steps")

        def __post_init__(self):
            if self.steps < 1:
                raise ValueError(f"steps={self.steps} must be >= 1")

    p = argparse.ArgumentParser()
    p.add_argument("--json", action="store_true")
    flags.add_flags(p, Cfg)
    assert flags.parse_config(p, Cfg, ["--steps", "5", "--json"]) == (Cfg(5), {"json": True})
    with pytest.raises(errors.UserError, match="steps=0 must be >= 1"):
        flags.parse_config(p, Cfg, ["--steps", "0"])


def test_strict_json_writes_null_for_non_finite():
    obj = {"a": float("nan"), "b": [1.0, float("inf"), (-math.inf, 2)], "c": np.float32("nan"),
           "d": np.int64(3), "e": {"f": np.float64(0.5)}, "g": "NaN"}  # fmt: skip
    text = strict_json.dumps(obj)
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c}")) == {
        "a": None, "b": [1.0, None, [None, 2]], "c": None, "d": 3, "e": {"f": 0.5}, "g": "NaN"
    }  # fmt: skip
    assert strict_json.finite([float("nan")]) == [None]


def test_print_result_is_strict_json_or_aligned_lines(capsys):
    result = {"model": "m", "step_s": 1.23456, "ratio": float("nan"), "ranks": 2}
    strict_json.print_result(result, True, width=8)
    assert json.loads(capsys.readouterr().out) == result | {"ratio": None}  # one line, null
    strict_json.print_result(result, False, width=8)
    assert capsys.readouterr().out == "   model: m\n  step_s: 1.235\n   ratio: nan\n   ranks: 2\n"


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_json_on_stdout_goes_through_strict_json(name):
    """What a command prints as JSON is strict (strict_json.dumps: null, never a bare NaN)."""
    tree = ast.parse(source(name).read_text())
    plain = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"
        for arg in node.args
        for inner in ast.walk(arg)
        if isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Attribute)
        and inner.func.attr == "dumps"
        and getattr(inner.func.value, "id", None) == "json"
    ]
    assert not plain, f"{name}.py prints json.dumps on lines {plain}: use strict_json.dumps"


def test_evaluate_json_has_no_bare_nan():
    import evaluate

    assert "NaN" not in evaluate.to_json({"self_similarity": float("nan")})


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "good"
    save_checkpoint(tiny_model(QWEN3), QWEN3, path)
    return path


@pytest.mark.parametrize("damage", ["truncated", "no_tokenizer", "no_weights", "bad_config"])
def test_evaluate_on_a_broken_checkpoint_is_one_error_line(damage, checkpoint, tmp_path, capsys):
    import shutil

    broken = tmp_path / damage
    shutil.copytree(checkpoint, broken)
    weights = broken / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "no_tokenizer":
        (broken / "tokenizer.json").unlink()
    elif damage == "no_weights":
        weights.unlink()
    else:
        (broken / "config.json").write_text("{")
    argv = ["--model", str(broken), "--prompts", "data/eval.jsonl", "--limit", "1", *EVAL]
    code, _, err = call("evaluate", argv, capsys)
    line = assert_one_error_line(code, err)
    assert str(broken) in line, line


MODEL = "MODEL"  # replaced by the broken checkpoint folder
# entry point -> argv taking a model folder (evaluate: above); each loads it before other work
MODEL_ENTRY_POINTS = {
    "bench.judge": ["--model", MODEL, "--limit", "1", "--reward", "rubric"],
    "bench_rollout": ["--model", MODEL, "--trials", "1", "--skip-mlx-lm"],
    "bench.train": ["--model", MODEL, "--steps", "2"],
    "chat": ["--model", MODEL, "--port", PORT],
    "evals.routing": [MODEL, "--limit", "1", "--samples", "1", "--task-reward", "happy"],
    "eval_task": ["--model", MODEL, "--limit", "1", "--max-new-tokens", "2"],
    "gwen": ["--model", MODEL, "--prompt", "hi", "--max-new-tokens", "2"],
    "experiments.gate_eval": [
        "--model",
        MODEL,
        "--prompts",
        "data/eval.jsonl",
        "--gate",
        GATE,
        "--limit",
        "4",
    ],
    "experiments.premise_probe": ["--model", MODEL, "--limit", "10"],
    "experiments.category_probe": ["--model", MODEL, "--test", "data/eval.jsonl", "--limit", "8"],
    "quantize": ["--model", MODEL, "--limit", "1"],
    "sft": ["--model", MODEL, "--steps", "1", "--out-dir", OUT],
    "train": ["--model", MODEL, "--steps", "1", "--reward", "happy", "--out-dir", OUT],
    "train_rm": ["--model", MODEL, "--steps", "1", "--out", OUT],
}


@pytest.mark.parametrize("damage", ["truncated", "no_tokenizer"])
@pytest.mark.parametrize("name", sorted(MODEL_ENTRY_POINTS))
def test_a_broken_checkpoint_is_one_error_line_everywhere(name, damage, checkpoint, tmp_path,
                                                          capsys):  # fmt: skip
    import shutil

    broken = tmp_path / damage
    shutil.copytree(checkpoint, broken)
    weights = broken / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    else:
        (broken / "tokenizer.json").unlink()
    argv = [str(broken) if a == MODEL else a for a in fill(MODEL_ENTRY_POINTS[name], tmp_path)]
    code, _, err = call(name, argv, capsys)
    line = assert_one_error_line(code, err)
    assert str(broken) in line, line


def test_gwen_json_is_one_object_with_every_sample(tmp_path, capsys):
    import gwen

    folder = tmp_path / "tiny"
    save_checkpoint(tiny_model(QWEN3), QWEN3, folder)
    argv = ["--model", str(folder), "--prompt", "a", "--prompt", "b", "--group-size", "2",
            "--max-new-tokens", "3", "--json"]  # fmt: skip
    assert gwen.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(x["prompt"], x["sample"]) for x in out["samples"]] == [
        ("a", 0),
        ("a", 1),
        ("b", 0),
        ("b", 1),
    ]
    assert all(1 <= x["tokens"] <= 3 for x in out["samples"]) and out["tokens"] >= 4
    assert out["tokens"] == sum(x["tokens"] for x in out["samples"]) and out["seconds"] > 0


def test_train_grader_with_reads_needs_write_labels(capsys):
    code, _, err = call("train_grader", ["--with-reads", "data/reads/ctl_disputes_grpo5"], capsys)
    assert "--write-labels" in assert_one_error_line(code, err)


def test_no_parser_reads_a_flag_by_its_prefix(monkeypatch, capsys):
    """argparse's prefix matching read chat.py's `--reward rubric` as `--reward-model rubric`:
    every parser a command or data builder builds (subcommands' too) has allow_abbrev=False."""
    import argparse

    built = []
    init = argparse.ArgumentParser.__init__

    def record(self, *args, **kwargs):
        init(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(argparse.ArgumentParser, "__init__", record)
    seen = {}
    for name in [*sorted(ENTRY_POINTS), *(builder(n).__name__ for n in sorted(BUILDERS))]:
        del built[:]
        code, _, _ = call(name, ["--help"], capsys)
        assert code == 0 and built, (name, code)
        seen[name] = [p.prog for p in built if p.allow_abbrev]
    assert not {name: progs for name, progs in seen.items() if progs}


def test_a_flag_prefix_is_an_error_not_another_flag(tmp_path, capsys):
    code, _, err = call("chat", ["--model", "smollm2-135m", "--reward-m", "none"], capsys)
    assert code == 2 and "unrecognized arguments: --reward-m" in err, err
