"""chat.py without a browser: which weights a --model names (LoRA and full checkpoints, run
folders), the judge's default, the model thread, and the score table. The page itself is tested
in a real browser in test_chat_page.py."""

import json
import threading

from core import backend  # noqa: F401

# isort: split
from core import lora

import mlx.core as mx
import numpy as np
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model

import chat
from load_weights import LoadError, lora_base, resolve
from rewards import registry
from rewards.registry import Scores

TARGETS = ["q_proj", "v_proj"]
TOKENS = mx.array([[3, 14, 15, 9, 26, 5]])


def logits(gwen) -> mx.array:
    return gwen.model(TOKENS)


@pytest.fixture
def lora_run(tmp_path):
    """A base HF folder, and a run folder whose latest checkpoint holds LoRA adapters trained
    (here: randomized) on it, with the run's train_config.json naming the base."""
    base_dir = tmp_path / "base"
    save_checkpoint(tiny_model(QWEN3), QWEN3, base_dir)
    trained = tiny_model(QWEN3)
    lora.apply_lora(trained, 4, 8.0, TARGETS)
    mx.random.seed(1)
    for _, layer in lora.lora_layers(trained):
        layer.lora_b = 0.3 * mx.random.normal(layer.lora_b.shape)
    ckpt = tmp_path / "run" / "checkpoints" / "step_000002"
    lora.save_adapters(trained, ckpt, 4, 8.0, TARGETS)
    (ckpt / "train_config.json").write_text(json.dumps({"model": str(base_dir), "lora_rank": 4}))
    (ckpt / "trainer.json").write_text(json.dumps({"step": 2}))
    (tmp_path / "run" / "latest").write_text("step_000002\n")
    return base_dir, tmp_path / "run", trained


def test_lora_run_loads_base_plus_adapters_and_judges_with_adapters_off(lora_run):
    base_dir, run_dir, trained = lora_run
    models, (judge, context) = chat.load_models([str(run_dir)], None, None, mx.float32)
    [(name, gwen)] = models
    assert name == str(run_dir) and judge is gwen
    assert mx.allclose(logits(gwen), trained(TOKENS), atol=1e-5).item()
    base = tiny_model(QWEN3)(TOKENS)
    assert not mx.allclose(logits(gwen), base, atol=1e-3).item(), "the adapters changed nothing"
    with context():
        assert mx.allclose(logits(judge), base, atol=1e-5).item()
    assert mx.allclose(logits(judge), trained(TOKENS), atol=1e-5).item(), "context restores"


def test_lora_base_comes_from_flag_then_run_config_then_adapter_config(lora_run, tmp_path):
    base_dir, run_dir, _ = lora_run
    src = resolve(str(run_dir))
    ckpt = src.path
    assert ckpt.name == "step_000002" and src.kind == "lora" and src.start == str(base_dir)
    assert lora_base(ckpt, "other-model") == "other-model"
    assert lora_base(ckpt, None) == str(base_dir)
    (ckpt / "train_config.json").unlink()
    config = json.loads((ckpt / lora.CONFIG_FILE).read_text())
    config["base_model_name_or_path"] = "from-adapter-config"
    (ckpt / lora.CONFIG_FILE).write_text(json.dumps(config))
    assert lora_base(ckpt, None) == "from-adapter-config"
    config["base_model_name_or_path"] = None
    (ckpt / lora.CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(LoadError, match="--base"):
        lora_base(ckpt, None)
    with pytest.raises(LoadError, match="--base"):
        resolve(str(run_dir))
    assert resolve(str(run_dir), str(base_dir)).base.path == base_dir


def test_full_checkpoint_is_judged_by_the_runs_starting_model(tmp_path):
    start_dir, ckpt = tmp_path / "start", tmp_path / "ckpt"
    save_checkpoint(tiny_model(QWEN3, seed=0), QWEN3, start_dir)
    save_checkpoint(tiny_model(QWEN3, seed=5), QWEN3, ckpt)
    (ckpt / "train_config.json").write_text(json.dumps({"model": str(start_dir)}))
    models, (judge, _) = chat.load_models([str(ckpt), str(start_dir)], None, None, mx.float32)
    assert mx.allclose(logits(models[0][1]), tiny_model(QWEN3, seed=5)(TOKENS)).item()
    assert judge is models[1][1], "the starting model, named twice, loads once"
    assert mx.allclose(logits(judge), tiny_model(QWEN3, seed=0)(TOKENS)).item()
    _, (other, _) = chat.load_models([str(ckpt)], None, str(ckpt), mx.float32)
    assert mx.allclose(logits(other), tiny_model(QWEN3, seed=5)(TOKENS)).item(), "--judge-model"


def test_model_thread_runs_work_on_the_serving_thread():
    worker, stop = chat.ModelThread(), threading.Event()
    here = threading.get_ident()
    got = {}

    def numbers():
        for i in range(4):
            yield i, threading.get_ident()

    def fail():
        raise ValueError("bad settings")

    def client():
        try:
            got["items"] = list(worker.iterate(numbers))
            got["call"] = worker.call(lambda a, b: (a + b, threading.get_ident()), 2, 3)
            with pytest.raises(ValueError, match="bad settings"):
                worker.call(fail)
            early = worker.iterate(numbers)
            got["first"] = next(early)
            early.close()
            got["after_close"] = worker.call(lambda: "still serving")
        finally:
            stop.set()

    threading.Thread(target=client).start()
    worker.serve(stop)
    assert [i for i, _ in got["items"]] == [0, 1, 2, 3]
    assert {t for _, t in got["items"]} == {here} and got["call"] == (5, here)
    assert got["first"] == (0, here) and got["after_close"] == "still serving"


def test_score_table_rows_and_cells():
    rubric = Scores(
        np.array([0.5, np.nan]),
        [
            {"curiosity": 0.25, "nonsense": None, "scrutiny": 0.75, "reward": 0.5},
            {"curiosity": 0.5, "nonsense": None, "scrutiny": float("nan"), "reward": float("nan")},
        ],
        1,
    )
    rm = Scores(np.array([1.25, -0.5]), None, 0)
    table = chat.score_table(["A: base", "B: a|b"], {"rubric": rubric, "rm:x": rm})
    rows = [line for line in table.splitlines() if line.startswith("|")]
    assert rows[0] == "| score | A: base | B: a\\|b |"
    assert rows[2:] == [
        "| rubric: curiosity | 0.250 | 0.500 |",
        "| rubric: nonsense | n/a | n/a |",
        "| rubric: scrutiny | 0.750 | failed |",
        "| **rubric (weighted mean)** | 0.500 | failed |",
        "| **rm:x** | 1.250 | -0.500 |",
    ]


def test_score_answers_passes_one_category_per_answer_and_checks_it():
    calls = []

    def scorer(prompts, completions, categories):
        calls.append((prompts, completions, categories))
        return Scores(np.zeros(len(completions)), None, 0)

    out = chat.score_answers({"fake": scorer}, "Why?", ["a", "b"], "nonsense")
    assert list(out) == ["fake"]
    assert calls == [(["Why?", "Why?"], ["a", "b"], ["nonsense", "nonsense"])]
    with pytest.raises(ValueError, match="category"):
        chat.score_answers({"fake": scorer}, "Why?", ["a"], "trivia")


def test_reward_components_check_the_reward_model_folder(tmp_path):
    assert [c.label for c in chat.reward_components(None)] == ["rubric"]
    with pytest.raises(ValueError, match="train_rm.py"):
        chat.reward_components(str(tmp_path))


def chat_request(qwen3_dir, reward_model: str | None, monkeypatch) -> dict:
    """chat.py's start-up and one request on the Qwen3 fixture with only `--model` (and
    `--reward-model` when given), through the page's handlers (a stand-in for gradio): an
    answer, then its scores on request; counts when the scorers are built."""
    argv = ["--model", str(qwen3_dir), "--port", str(free_port())]
    args = chat.build_parser().parse_args(
        argv + (["--reward-model", reward_model] * bool(reward_model))
    )
    components = chat.check_args(args)
    models, judge = chat.load_models(args.model, None, None, mx.float32)
    monkeypatch.setattr(registry, "_noted", set())  # a note once per process: this one's own
    built = []
    build = chat.build_scorers
    monkeypatch.setattr(chat, "build_scorers", lambda *a: built.append(1) or build(*a))
    scorers = chat.lazy_scorers(components, judge, models[0][1].tokenizer, args.model[0])
    worker, stop, got = chat.ModelThread(), threading.Event(), {}

    class Gradio:
        Error = RuntimeError

    respond, score_latest = chat.handlers(Gradio, models, ["Q"], scorers, worker)

    def client():
        try:
            outs = list(respond("Why is the sky green?", [], 0.0, 1.0, 6, 0, False))
            got["built_after_answer"] = len(built)
            got["history"], got["latest"] = outs[-1][1], outs[-1][2]
            got["table"] = score_latest(got["latest"], "false_premise")
            score_latest(got["latest"], "false_premise")
            got["built"] = len(built)
        except Exception as e:  # noqa: BLE001  (raised below, on the test's thread)
            got["error"] = e
        finally:
            stop.set()

    threading.Thread(target=client).start()
    worker.serve(stop)
    if "error" in got:
        raise got["error"]
    got["components"] = [c.label for c in components]
    return got


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_qwen3_model_alone_answers_and_is_scored_only_when_asked(qwen3_dir, monkeypatch):
    got = chat_request(qwen3_dir, "none", monkeypatch)
    assert got["components"] == ["rubric"]
    assert got["history"][-1]["role"] == "assistant"
    assert got["latest"]["answers"] == [got["history"][-1]["content"]]
    assert got["built_after_answer"] == 0 and got["built"] == 1  # built once, on request
    rows = [x for x in got["table"].splitlines() if x.startswith("| **rubric")]
    assert len(rows) == 1 and "n/a" not in rows[0], got["table"]


@pytest.mark.slow  # loads the shipped reward model
def test_a_qwen3_model_is_scored_by_the_default_reward_model_with_a_note(
    qwen3_dir, monkeypatch, capsys
):
    got = chat_request(qwen3_dir, None, monkeypatch)
    assert got["components"] == ["rubric", "rm:models/rm-smollm2-135m-v2"]
    assert got["built_after_answer"] == 0 and got["built"] == 1
    row = [x for x in got["table"].splitlines() if x.startswith("| **rm:")]
    assert len(row) == 1 and np.isfinite(float(row[0].split("|")[2])), got["table"]
    notes = [x for x in capsys.readouterr().err.splitlines() if x.startswith("note: ")]
    assert len(notes) == 1 and f"train_rm.py --model {qwen3_dir}" in notes[0], notes
