"""Every `uv run ...` command of README.md and knowledge/usage.md runs, as written or with only its
sizes turned down.

The two pages' fenced bash blocks are parsed (`\\` continuations joined, `# comments` dropped) and
each `uv run` command must have an entry in CASES, keyed by its exact text: how the test runs it
(size flags changed or added, placeholders such as `runs/<name>` filled with runs that earlier
cases made) and what it must produce (a file, a JSON key, a line). A README command missing from
CASES, or a CASES key no longer in the README, fails `test_every_readme_command_has_a_case`: the
table follows the README. Commands run in a copy of the repository's tracked files (runs/,
reports/ and models/my-rm land there), with this environment's Python in place of `uv run`.
Servers are started, fetched over HTTP and stopped with SIGINT. knowledge/readme_test.md says how
to add a command.
"""

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import QWEN3, save_checkpoint, save_qwen3_checkpoint, tiny_model

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
SMALL = "--prompts-per-step 1 --group-size 2 --max-new-tokens 6 --eval-every 0"
# A tiny random Qwen3 checkpoint the `repo` fixture writes, for commands whose figures do not
# matter here and whose real-model run costs most (bench/distributed.py).
TINY = "models/tiny-readme"
# A tiny Qwen3 with a Qwen-style tokenizer and chat template (helpers.save_qwen3_checkpoint), the
# `repo` fixture writes it too: a user's own model through the main commands (QWEN3_CASES).
QWEN = "models/tiny-qwen3"
pytestmark = pytest.mark.slow


def readme_commands(text: str) -> list[str]:
    """The `uv run` commands of the README's bash blocks, whitespace normalised, in order."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.split(r"\s#\s", line)[0].strip()
            if line.startswith("uv run "):
                out.append(re.sub(r"\s+", " ", line))
    return out


@dataclass
class Case:
    """How the test runs one README command: `sub` replaces text (sizes, placeholders), `add`
    appends flags; `needs` are README commands (keys) to run first; `check(result, repo)`
    asserts on the output; `server` probes the page the command serves on `--port`; `stdin`
    is fed to it; `skip` says why it cannot run here."""

    add: str = ""
    sub: dict = field(default_factory=dict)
    needs: tuple = ()
    check: object = None
    server: bool = False
    stdin: str = ""
    skip: str = ""


def run_file(path):
    return lambda r, repo: (repo / path).exists() or pytest.fail(f"{path} not written\n{r.stdout}")


def metrics_lines(run, n):
    def check(r, repo):
        rows = (repo / "runs" / run / "metrics.jsonl").read_text().splitlines()
        assert len(rows) == n, (len(rows), r.stdout[-2000:])
        assert all(math_ok(json.loads(x)["reward_mean"]) for x in rows)

    return check


def refreshed(run):
    """One step whose reward model was refreshed, and the checkpoint holding it."""

    def check(r, repo):
        metrics_lines(run, 1)(r, repo)
        row = json.loads((repo / "runs" / run / "metrics.jsonl").read_text())
        assert "refresh/pairs" in row and "refresh/loss_after" in row, sorted(row)
        ckpt = repo / "runs" / run / "checkpoints" / "step_000001" / "reward_refresh"
        assert (ckpt / "rm_weights.safetensors").is_file(), r.stdout[-2000:]

    return check


def both(*checks):
    def check(r, repo):
        for c in checks:
            c(r, repo)

    return check


def logged(run, *keys):
    """The run's metrics rows hold `keys` (a periodic evaluation ran)."""

    def check(r, repo):
        row = json.loads((repo / "runs" / run / "metrics.jsonl").read_text().splitlines()[-1])
        for k in keys:
            assert k in row, (k, sorted(row))

    return check


def math_ok(x) -> bool:
    return isinstance(x, float) and x == x


def out_has(*needles):
    def check(r, repo):
        for needle in needles:
            assert needle in r.stdout, (needle, r.stdout[-2000:])

    return check


def last_json(*keys):
    def check(r, repo):
        obj = json.loads(r.stdout.strip().splitlines()[-1])
        for k in keys:
            assert k in obj, (k, sorted(obj))

    return check


def exported(folder):
    """export.py's folder: an HF config, a GGUF, and mlx_lm loads it on its own."""

    def check(r, repo):
        import mlx_lm

        assert (repo / folder / "config.json").is_file(), r.stdout[-2000:]
        assert list((repo / folder).glob("*.gguf")), sorted((repo / folder).iterdir())
        model, tokenizer = mlx_lm.load(str(repo / folder))
        assert tokenizer.chat_template and model.args.num_hidden_layers > 0

    return check


MAIN = "uv run python train.py --model smollm2-135m --steps 3"
CHESS = "uv run python train.py --model smollm2-135m --task chess --lora-rank 16"
HAPPY = "uv run python train.py --model smollm2-135m --reward happy --steps 60"
RM = (
    "uv run python train_rm.py --model smollm2-135m --pairs data/rm_pairs.jsonl "
    "--out models/my-rm --steps 240"
)
ROUTED = (
    "uv run python train.py --reward asks_question,happy --data data/happy_prompts.jsonl "
    "--eval-data data/happy_eval.jsonl --task-reward asks_question --hack-detectors happy_spam "
    "--lora-rank 8 --forget-rank 8 --routing routed --routing-eval-every 10 "
    "--retain-baseline unflagged --retain-rollout-every 2"
)
MAIN_RUN = {"runs/<name>": "runs/main"}
STANCE_CATEGORIES = ("false_premise", "nonsense", "control")

CASES = {
    MAIN: Case(
        sub={"--steps 3": "--steps 2"},
        add=f"{SMALL} --eval-every 1 --eval-limit 2 --run-name main",  # eval/reward: prune
        check=metrics_lines("main", 2),
    ),
    "uv run pytest": Case(skip="the suite itself: this test runs inside it"),
    'uv run pytest -m "not slow"': Case(skip="the fast tier of the suite this test runs inside"),
    'uv run python gwen.py --model smollm2-135m --prompt "What is the capital of France?" '
    "--temperature 0 --max-new-tokens 32": Case(check=out_has("Paris")),
    "uv run python chat.py --model smollm2-135m --model runs/<name>": Case(
        sub=MAIN_RUN, needs=(MAIN,), server=True
    ),
    "uv run python chat.py --model smollm2-135m --model models/values-smollm2-135m": Case(
        server=True
    ),
    "uv run python evaluate.py --model smollm2-135m --model models/values-smollm2-135m "
    "--prompts data/eval.jsonl --report reports/values": Case(
        add="--limit 2 --max-new-tokens 6",
        check=run_file("reports/values/report.md"),
    ),  # fmt: skip
    HAPPY: Case(
        sub={"--steps 60": "--steps 1"},
        add=f"{SMALL} --run-name happy",
        check=metrics_lines("happy", 1),
    ),  # fmt: skip
    CHESS: Case(
        add=f"--steps 1 {SMALL} --run-name chess", check=run_file("runs/chess/checkpoints")
    ),
    "uv run python eval_task.py --task chess --prompts data/chess/test.jsonl "
    "--model runs/<name>/checkpoints/step_N": Case(
        sub={"runs/<name>/checkpoints/step_N": "runs/chess/checkpoints/step_000001"},
        add="--limit 2 --max-new-tokens 6 --json",
        needs=(CHESS,),
        check=last_json("eval/reward"),
    ),  # fmt: skip
    "uv run python train.py --resume runs/<name> --steps 100": Case(
        sub={"runs/<name> --steps 100": "runs/main --steps 3"},
        needs=(MAIN,),
        check=metrics_lines("main", 3),
    ),  # fmt: skip
    "uv run python train.py --plot runs/<name>": Case(
        sub=MAIN_RUN, needs=(MAIN,), check=run_file("runs/main/plots/reward.png")
    ),
    "uv run python train.py --help": Case(check=out_has("--share-trunk", "--reward")),
    "uv run tensorboard --logdir runs": Case(needs=(MAIN,), server=True),
    RM: Case(
        sub={"--steps 240": "--steps 1"},
        # short inputs: the cases that score with this model (its 8-bit copy's timed forward
        # on MLX's slow CPU quantized matmul above all) read 64 tokens per pair side, not ~380
        add="--val-limit 4 --no-tensorboard --max-prompt-tokens 32 --max-response-tokens 32 "
        "--batch-pairs 2",
        check=run_file("models/my-rm/rm_config.json"),
    ),  # fmt: skip
    "uv run python sft.py --model smollm2-135m --data data/sft/written.jsonl --epochs 2 "
    "--run-name warm": Case(
        sub={"--epochs 2": "--epochs 1 --steps 1 --batch-size 2 --val-fraction 0.01"},
        add="--json",
        check=run_file("runs/sft/warm/checkpoints/step_000001/adapters.safetensors"),
    ),  # fmt: skip
    "uv run python train.py --reward rm:models/my-rm --steps 30": Case(
        sub={"--steps 30": "--steps 1"},
        add=f"{SMALL} --run-name rm1",
        needs=(RM,),
        check=metrics_lines("rm1", 1),
    ),  # fmt: skip
    "uv run python train.py --reward rubric:0.5,rm:models/my-rm:0.5 --steps 30": Case(
        sub={"--steps 30": "--steps 1"},
        add=f"{SMALL} --run-name mix",
        needs=(RM,),
        check=metrics_lines("mix", 1),
    ),  # fmt: skip
    "uv run python train.py --reward rm:models/rm-smollm2-135m-v2,stance:2 --steps 30": Case(
        sub={"--steps 30": "--steps 1"},
        add=f"{SMALL} --run-name stance",
        check=metrics_lines("stance", 1),
    ),  # fmt: skip
    "uv run python train.py --reward rm:models/rm-smollm2-135m-v2 --reward-refresh 10 --steps 30": Case(  # noqa: E501
        sub={"--steps 30": "--steps 1", "--reward-refresh 10": "--reward-refresh 1"},
        add=f"{SMALL} --refresh-steps 1 --refresh-batch 2 --run-name refresh",
        check=refreshed("refresh"),
    ),  # fmt: skip
    "uv run python train.py --reward-config my_rewards.yaml": Case(
        add=f"--steps 1 {SMALL} --run-name yaml", check=metrics_lines("yaml", 1)
    ),
    "uv run python train.py --reward-fn my_rewards.py:shout": Case(
        add=f"--steps 1 {SMALL} --run-name fn", check=metrics_lines("fn", 1)
    ),
    "uv run python -m bench.judge --probes --quick": Case(
        add="--limit 3", check=out_has("intact over broken")
    ),
    "uv run python -m bench.judge --reward rm:models/rm-smollm2-135m-v2 --stance-probes "
    "data/reads/sft_grpo_eval,data/reads/sft_grpo13_eval --quick": Case(
        # the reward model reads each distinct probe answer: 125 of the two sets' 112 pairs took
        # ~55 s of the case's ~70 s on 2 cores; 2 pairs per category read at most 12
        add="--limit 3 --stance-limit 2",
        check=out_has(*(f"stance {c}: wanted over unwanted" for c in STANCE_CATEGORIES)),
    ),
    "uv run python train_rm.py --init models/rm-smollm2-135m --broken-negatives 1 "
    "--train-layers 8 --steps 160 --lr 1e-4 --warmup-steps 10 --eval-every 40 --val-limit 160 "
    "--out models/my-rm2": Case(
        sub={"--steps 160": "--steps 1", "--val-limit 160": "--val-limit 4"},
        # its token limits are the --init model's (train_rm refuses others): fewer pairs instead
        add="--no-tensorboard --batch-pairs 2",
        check=run_file("models/my-rm2/rm_config.json"),
    ),  # fmt: skip
    "uv run python -m bench.judge --reward rm:models/my-rm --reward rubric": Case(
        add="--limit 2 --quick", needs=(RM,), check=out_has("rm:models/my-rm")
    ),
    "uv run python evaluate.py --model smollm2-135m --model runs/<name> --prompts data/eval.jsonl "
    "--report reports/<name>": Case(
        sub={"runs/<name>": "runs/main", "reports/<name>": "reports/main"},
        add="--limit 2 --max-new-tokens 6",
        needs=(MAIN,),
        check=run_file("reports/main/report.md"),
    ),  # fmt: skip
    "uv run python train.py --config recipes/attempts/values_sft_grpo2.json": Case(
        add=f"--steps 1 {SMALL} --run-name recipe2", check=metrics_lines("recipe2", 1)
    ),
    "uv run python -m evals.read_set figures --dir data/reads/sft_grpo_eval": Case(
        check=out_has("control: pushback", "smollm2-135m")
    ),
    "uv run python -m experiments.category_probe --model smollm2-135m --test data/eval.jsonl "
    "--test data/eval_external.jsonl": Case(
        add="--limit 6", check=out_has("false_premise vs control", "bag of words")
    ),
    "uv run python -m experiments.gate_eval --model smollm2-135m --gate "
    '"nonsense=This question does not make sense." --prompts data/eval.jsonl '
    "--prompts data/eval_external.jsonl": Case(
        add="--limit 8", check=out_has("gate nonsense", "greedy_first / opens", "AUROC")
    ),
    "uv run python -m experiments.premise_probe --model smollm2-135m": Case(
        add="--limit 10", check=out_has("bag of words (peer)", "read layer 20", "layer 30")
    ),
    "uv run python train.py --config recipes/values_smollm2.json": Case(
        add=f"--steps 1 {SMALL} --run-name recipe", check=metrics_lines("recipe", 1)
    ),
    "uv run python runs.py list --sort reward": Case(needs=(MAIN, HAPPY), check=out_has("main")),
    "uv run python runs.py compare runs/<a> runs/<b> --plot ab.png": Case(
        sub={"runs/<a> runs/<b>": "runs/main runs/happy"},
        needs=(MAIN, HAPPY),
        check=run_file("ab.png"),
    ),  # fmt: skip
    "uv run python runs.py rollouts runs/<name> --step 40-60 --min-reward 0.8 --grep happy": Case(
        sub=MAIN_RUN, needs=(MAIN,)
    ),
    "uv run python runs.py prune runs/<name> --keep-last 2 --keep-best 1 "
    "--metric eval/reward": Case(
        sub=MAIN_RUN, needs=(MAIN,), stdin="n\n", check=run_file("runs/main/checkpoints")
    ),
    ROUTED: Case(
        # the routing evaluation at the run's last step samples every adapter mode: on the
        # defaults (32 prompts x 4 samples x 6 modes) it was ~40 of the case's ~50 s
        add=f"--steps 1 {SMALL} --eval-limit 2 --routing-eval-samples 1 --run-name routed",
        check=both(metrics_lines("routed", 1), logged("routed", "routing/retain/hack_rate")),
    ),
    "uv run python -m evals.routing runs/<name>": Case(
        sub={"runs/<name>": "runs/routed"},
        add="--limit 2 --samples 1 --max-new-tokens 6",
        needs=(ROUTED,),
    ),  # fmt: skip
    "uv run python eval_task.py --task chess --model models/chess-smollm2-135m --json": Case(
        add="--limit 2", check=out_has("eval/P/format")
    ),
    "uv run python -m evals.routing models/happy-routed-smollm2-135m --json": Case(
        add="--limit 1 --samples 1 --max-new-tokens 4", check=out_has("routing/retain/hack_rate")
    ),
    "uv run python sweep.py --grid seed=0,1,2 routing=routed,baseline --fixed steps=30 --jobs 2 "
    "--out-dir runs/happy_hack --reward asks_question,happy ...": Case(
        sub={" ...": " --lora-rank 8 --forget-rank 8 --hack-detectors happy_spam --dry-run"},
        check=out_has("seed2"),
    ),
    "uv run python bench_rollout.py --model smollm2-135m --prompts-per-step 8 --group-size 8 "
    "--max-new-tokens 64": Case(
        sub={
            "--prompts-per-step 8 --group-size 8 --max-new-tokens 64": "--prompts-per-step 1 "
            "--group-size 2 --max-new-tokens 4"
        },
        add="--trials 1 --json",
        check=last_json(),
    ),  # fmt: skip
    "uv run python -m bench.train --model smollm2-135m --reward happy": Case(
        add="--steps 2 --prompts-per-step 1 --group-size 2 --max-new-tokens 4 --json",
        check=last_json("median_step_s", "reference_s"),
    ),  # fmt: skip
    "uv run python -m bench.train --config recipes/values_smollm2.json --ab --json": Case(
        add="--steps 2 --rounds 1 --prompts-per-step 1 --group-size 2 --max-new-tokens 4",
        check=last_json("median_step_s", "unoptimized_median_step_s", "step_ratio"),
    ),
    "uv run python -m evals.grade --answers data/gold/answers.jsonl "
    "--labels data/gold/labels.jsonl": Case(
        add="--limit 8", check=out_has("false_premise_correction_recall")
    ),
    "uv run python -m bench.logprobs": Case(
        add="--vocab 8192 --dim 128 --rows 64 --no-qwen --trials 3 --json", check=last_json()
    ),
    "uv run python -m bench.judge --reward rubric --judge-speed": Case(
        add="--limit 2 --speed-items 2 --group-size 2 --trials 1", check=out_has("rubric")
    ),
    "uv run python quantize.py --model smollm2-135m --bits 8 --json": Case(
        add="--limit 1 --max-new-tokens 4 --speed-batch 1 --speed-tokens 2",
        check=last_json("bits"),
    ),
    "uv run python quantize.py --reward-model models/rm --bits 8 --pairs data/rm_pairs.jsonl "
    "--split test": Case(
        sub={"models/rm": "models/my-rm"},
        add="--pair-limit 1 --speed-batch 1",
        needs=(RM,),
        check=run_file("models/my-rm-q8/rm_config.json"),
    ),  # fmt: skip
    "uv run python export.py --model models/values-smollm2-135m --out exported/values-smollm2-135m "
    "--gguf": Case(check=exported("exported/values-smollm2-135m")),
    "uv run mlx.launch -n 2 --backend ring -- python train.py --model smollm2-135m --steps 3": Case(
        sub={"--steps 3": "--steps 1"},
        add="--prompts-per-step 2 --group-size 2 --max-new-tokens 4 --eval-every 0 --run-name dist",
        check=metrics_lines("dist", 1),
    ),  # fmt: skip
    "uv run mlx.launch --hostfile hosts.json --backend ring -- /path/to/rl-values/.venv/bin/python "
    "train.py --steps 60": Case(
        skip="needs a hostfile of machines reachable over ssh with this checkout at that path"
    ),
    # The tiny random checkpoint (the `repo` fixture writes it): the command starts five
    # processes (one run, two ranks, two all_sum workers), each loading the model and taking
    # full fine-tuning steps; on the embedded model that took ~100 s of the suite, here ~12 s.
    "uv run python -m bench.distributed --ranks 2": Case(
        add=f"--model {TINY} --prompts-per-step 2 --group-size 2 --max-new-tokens 4 --steps 2 "
        "--trials 1 --json",
        check=last_json("1_rank_median_step_s", "2_ranks_over_1", "allsum_s"),
    ),  # fmt: skip
}


def noted(present: bool):
    """The reward model's note (another base than the policy) is printed once, or not at all."""

    def check(r, repo):
        notes = [x for x in r.stderr.splitlines() if x.startswith("note: reward model")]
        assert len(notes) == int(present), (notes, r.stderr[-2000:])
        if present:
            assert f"train_rm.py --model {QWEN}" in notes[0], notes

    return check


def answered(n: int):
    """gwen.py printed an answer and its `[n tokens in ...]` line."""

    def check(r, repo):
        assert r.stdout.strip() and f"[{n} tokens in " in r.stderr, (r.stdout, r.stderr[-2000:])

    return check


QWEN_MAIN = f"uv run python train.py --model {QWEN} --steps 1"
# Beyond the README's own lines: the main commands on a user's Qwen3 model, each with its
# defaults (rewards, judge, grader, data) and only its sizes turned down. The reward model on the
# user's model, evaluate with its default rewards and the chat page run as the README's "Qwen3-0.6B
# on a Mac" lines below; test_chat.py starts chat.py with --model alone. The sft case raises
# --max-answer-tokens: the fixture's 4,000-token BPE spends ~1.2x SmolLM2's tokens per answer
# (knowledge/qwen3.md).
QWEN3_CASES = {
    QWEN_MAIN: Case(
        add=f"{SMALL} --run-name qwen",
        check=both(metrics_lines("qwen", 1), noted(True)),
    ),
    f'uv run python gwen.py --model {QWEN} --prompt "What is the capital of France?" '
    "--temperature 0 --max-new-tokens 8": Case(check=answered(8)),
    f"uv run python sft.py --model {QWEN} --data data/sft/written.jsonl --run-name qwen-warm": Case(
        add="--epochs 1 --steps 1 --batch-size 2 --val-fraction 0.01 --max-answer-tokens 128 "
        "--json",
        check=run_file("runs/sft/qwen-warm/checkpoints/step_000001/adapters.safetensors"),
    ),
    f"uv run python quantize.py --model {QWEN} --bits 8 --json": Case(
        add="--limit 1 --max-new-tokens 4 --speed-batch 1 --speed-tokens 2",
        check=last_json("bits"),
    ),
    f"uv run python eval_task.py --task chess --model {QWEN} --json": Case(
        add="--limit 2 --max-new-tokens 6", check=last_json("eval/reward")
    ),
}  # fmt: skip

# The README's "Qwen3-0.6B on a Mac" lines: the hub id becomes the tiny Qwen3 fixture.
HUB_QWEN = {"Qwen/Qwen3-0.6B": QWEN}
MAC_RM = (
    "uv run python train_rm.py --model Qwen/Qwen3-0.6B --pairs data/rm_pairs.jsonl "
    "--broken-negatives 1 --train-layers 8 --steps 400 --out models/rm-qwen3-0.6b"
)
MAC_RUN = "uv run python train.py --config recipes/qwen3_0.6b_values.json"
CASES |= {
    MAC_RM: Case(
        sub={**HUB_QWEN, "--steps 400": "--steps 1"},
        add="--val-limit 4 --no-tensorboard --max-prompt-tokens 32 --max-response-tokens 32",
        check=run_file("models/rm-qwen3-0.6b/rm_config.json"),
    ),
    "uv run python evaluate.py --model Qwen/Qwen3-0.6B --prompts data/eval.jsonl "
    "--report reports/qwen3-base": Case(
        sub=HUB_QWEN, add="--limit 2 --max-new-tokens 6",
        check=both(run_file("reports/qwen3-base/report.md"), noted(True)),
    ),
    MAC_RUN: Case(
        add=f"--model {QWEN} --steps 1 --prompts-per-step 2 --group-size 2 --max-new-tokens 6 "
        "--eval-every 0 --run-name qwen3_values",
        needs=(MAC_RM,),
        check=both(metrics_lines("qwen3_values", 1), noted(False)),
    ),
    "uv run python evaluate.py --model Qwen/Qwen3-0.6B --model runs/qwen3_values "
    "--prompts data/eval.jsonl --report reports/qwen3": Case(
        sub=HUB_QWEN, add="--limit 2 --max-new-tokens 6", needs=(MAC_RUN,),
        check=run_file("reports/qwen3/report.md"),
    ),
    "uv run python chat.py --model Qwen/Qwen3-0.6B --model runs/qwen3_values": Case(
        sub=HUB_QWEN, needs=(MAC_RUN,), server=True
    ),
    "uv run python export.py --model runs/qwen3_values --out exported/qwen3-values --gguf": Case(
        needs=(MAC_RUN,), check=exported("exported/qwen3-values")
    ),
}  # fmt: skip
ALL_CASES = {**CASES, **QWEN3_CASES}

# The README and the long usage page it links: every command of either keeps a case.
DOCS = ("README.md", "knowledge/usage.md")
README_CMDS = list(dict.fromkeys(readme_commands("\n".join((ROOT / d).read_text() for d in DOCS))))


def test_every_readme_command_has_a_case():
    missing = [c for c in README_CMDS if c not in CASES]
    stale = [c for c in CASES if c not in README_CMDS]
    assert not missing, f"README commands without a case in CASES: {missing}"
    assert not stale, f"CASES keys in neither {DOCS}: {stale}"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A copy of the tracked files, with the files the README's placeholders name."""
    dest = tmp_path_factory.mktemp("readme") / "repo"
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    save_checkpoint(tiny_model(QWEN3, seed=3), QWEN3, dest / TINY)
    save_qwen3_checkpoint(dest / QWEN)
    (dest / "my_rewards.yaml").write_text(
        "components:\n  - {name: happy, weight: 0.5}\n"
        "  - {name: fn, file: my_rewards.py, function: shout, weight: 0.5}\n"
    )
    (dest / "my_rewards.py").write_text(
        "def shout(prompts, completions, **kw):\n"
        "    return [sum(c.isupper() for c in t) / max(len(t), 1) for t in completions]\n"
    )
    return dest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def argv_of(command: str, case: Case) -> list[str]:
    for old, new in case.sub.items():
        assert old in command, (old, command)
        command = command.replace(old, new)
    argv = shlex.split(command + " " + case.add)
    assert argv[:2] == ["uv", "run"], argv
    argv = argv[2:]
    # `uv run X`: this environment's python or console script; `-- python` under mlx.launch too
    argv = [sys.executable if a == "python" else a for a in argv]
    if argv[0] != sys.executable:
        argv[0] = str(VENV_BIN / argv[0])
    return argv


DONE: dict[str, subprocess.CompletedProcess] = {}


def run_case(command: str, repo: Path):
    """Run a README command (its needs first, each once per session); check what it made."""
    case = ALL_CASES[command]
    if command in DONE:
        return DONE[command]
    for need in case.needs:
        run_case(need, repo)
    argv = argv_of(command, case)
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    if case.server:
        result = serve(argv, repo, env)
    else:
        result = subprocess.run(
            argv, cwd=repo, env=env, input=case.stdin, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
    assert result.returncode == 0, (
        f"{command}\n-> {shlex.join(argv)}\nexit {result.returncode}\n"
        f"stdout: {result.stdout[-3000:]}\nstderr: {result.stderr[-3000:]}"
    )
    if case.check:
        case.check(result, repo)
    DONE[command] = result
    return result


def serve(argv, repo, env) -> subprocess.CompletedProcess:
    """Start a server on a free port, fetch its page (HTTP 200), stop it with SIGINT."""
    port = free_port()
    argv = [*argv, "--port", str(port)]
    proc = subprocess.Popen(
        argv, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    status, deadline = None, time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    status = r.status
                    break
            except OSError:
                time.sleep(1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert status == 200, f"{shlex.join(argv)} served no page (status {status}):\n{out[-3000:]}"
    return subprocess.CompletedProcess(argv, 0, out, "")


@pytest.mark.parametrize("command", README_CMDS, ids=[f"{i:02d}" for i in range(len(README_CMDS))])
def test_readme_command_runs(command, repo):
    case = CASES.get(command)
    if case is None:
        pytest.fail(f"no case for README command: {command}")
    if case.skip:
        pytest.skip(case.skip)
    run_case(command, repo)


@pytest.mark.parametrize(
    "command", list(QWEN3_CASES), ids=[f"qwen3-{i:02d}" for i in range(len(QWEN3_CASES))]
)
def test_qwen3_command_runs(command, repo):
    run_case(command, repo)
