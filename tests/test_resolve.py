"""One resolver for every `--model` (load_weights.resolve): a run folder of each kind (full
weights, LoRA, dual adapters) resolves to its latest checkpoint and loads with the weights it was
saved with, through load_weights, evaluate.py, chat.py and evals/routing.py alike; the default
judge is the starting weights wherever it is chosen (reference.starting_judge). Tiny random
models, no downloads."""

import json

from core import backend  # noqa: F401

# isort: split
from core import lora

import mlx.core as mx
import mlx.optimizers as optim
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model, tiny_tokenizer

import chat
import eval_task
import evaluate
from evals import routing as eval_routing
from load_weights import LoadError, load, resolve
from model import Model
from rl import checkpoint

TARGETS = ["q_proj", "v_proj"]
TOKENS = mx.array([[3, 14, 15, 9, 26, 5]])
KINDS = {"full": "hf", "lora": "lora", "dual": "dual"}  # run kind -> ModelSource.kind


def close(a: mx.array, b: mx.array, atol: float = 1e-5) -> bool:
    return mx.abs(a - b).max().item() <= atol


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A base HF folder and one run folder per kind, written by checkpoint.save as train.py
    writes them (the run's own config.json beside checkpoints/, which is not a model's), each
    run's trained model kept in memory to compare against."""
    root = tmp_path_factory.mktemp("runs")
    base_dir = root / "base"
    save_checkpoint(tiny_model(QWEN3), QWEN3, base_dir)
    prompts = root / "p.jsonl"
    rows = [{"id": f"q{i}", "category": c, "prompt": f"t{10 + i} t{20 + i}", "source": "x"}
            for i, c in enumerate(["control", "nonsense", "curiosity"])]  # fmt: skip
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = {"model": str(base_dir), "reward": "happy", "eval_data": str(prompts),
              "eval_limit": 2, "routing_eval_samples": 1, "max_new_tokens": 3}  # fmt: skip
    out = {}
    for kind in KINDS:
        model, lora_cfg = tiny_model(QWEN3), None
        mx.random.seed(len(out))
        if kind == "full":
            model = tiny_model(QWEN3, seed=5)
        elif kind == "lora":
            lora.apply_lora(model, 4, 8.0, TARGETS)
            lora_cfg = {"rank": 4, "alpha": 8.0, "targets": TARGETS}
        else:
            lora.apply_dual_lora(model, 2, 3, 10.0, TARGETS)
            lora_cfg = {"rank": 2, "forget_rank": 3, "alpha": 10.0, "targets": TARGETS}
        for _, layer in lora.adapters_of(model):  # B = 0 at init: give the adapters an effect
            for name in ("lora_b", "retain_b", "forget_b"):
                if hasattr(layer, name):
                    setattr(layer, name, 0.3 * mx.random.normal(getattr(layer, name).shape))
        optimizer = optim.AdamW(learning_rate=1e-3)
        optimizer.init(model.trainable_parameters())
        run_dir = root / kind
        run_dir.mkdir()
        (run_dir / "config.json").write_text(json.dumps(config))  # the run's, not a model's
        (run_dir / "metrics.jsonl").write_text("")
        checkpoint.save(
            run_dir, 2, model=model, tokenizer=tiny_tokenizer(QWEN3["vocab_size"]),
            optimizer=optimizer, trainer_state={}, config=config, lora_cfg=lora_cfg,
        )  # fmt: skip
        out[kind] = (run_dir, model)
    return base_dir, prompts, out


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_run_folder_resolves_to_its_latest_checkpoint_and_loads_as_saved(runs, kind):
    base_dir, _, by_kind = runs
    run_dir, trained = by_kind[kind]
    src = resolve(str(run_dir))
    assert src.path == run_dir / "checkpoints" / "step_000002" and src.kind == KINDS[kind]
    assert src.start == str(base_dir) and src.run_config["reward"] == "happy"
    assert (src.base is not None) == (kind != "full") and src.adapters == (kind != "full")
    want, base = trained(TOKENS), tiny_model(QWEN3)(TOKENS)
    assert not close(want, base, 1e-3), "the run changed nothing"
    merged, _ = load(str(run_dir), mx.float32)
    assert not lora.adapters_of(merged) and close(merged(TOKENS), want)
    if kind == "full":
        return
    switchable, _ = load(src, mx.float32, merge=False)
    assert lora.adapters_of(switchable) and close(switchable(TOKENS), want)
    with lora.adapters_disabled(switchable):
        assert close(switchable(TOKENS), base)
    if kind == "dual":  # merging folds both adapters at their scales: retain alone too
        with lora.scaled(switchable, 1.0, 0.0):
            retain = Model(switchable.args)
            retain.load_weights(list(lora.merged_weights(switchable).items()), strict=True)
            assert close(retain(TOKENS), switchable(TOKENS))
            assert not close(retain(TOKENS), want, 1e-3)


def test_evaluate_takes_every_kind_of_run_folder_and_judges_with_the_starting_weights(runs, capsys):
    base_dir, prompts, by_kind = runs
    refs = [str(by_kind[kind][0]) for kind in KINDS]
    argv = ["--prompts", str(prompts), "--reward", "happy", "--grader", "none",
            "--cache-dir", "none", "--max-new-tokens", "3", "--json"]  # fmt: skip
    assert evaluate.main([*argv, "--model", str(base_dir), *(f"--model={r}" for r in refs)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["judge_model"] == str(base_dir)
    for ref in refs:
        assert result["results"][ref]["overall"]["kl_to_base"] > 0, ref
    # a run first: its starting weights judge, not the checkpoint
    assert evaluate.main([*argv, "--no-kl", "--model", refs[0]]) == 0
    assert json.loads(capsys.readouterr().out)["judge_model"] == str(base_dir)


@pytest.mark.parametrize("kind", list(KINDS))
def test_chat_loads_every_kind_and_judges_with_the_starting_weights(runs, kind):
    _, _, by_kind = runs
    run_dir, trained = by_kind[kind]
    [(name, gwen)], (judge, context) = chat.load_models([str(run_dir)], None, None, mx.float32)
    assert name == str(run_dir) and close(gwen.model(TOKENS), trained(TOKENS))
    with context():
        assert close(judge.model(TOKENS), tiny_model(QWEN3)(TOKENS))
    assert (judge is gwen) == (kind != "full"), "adapters off, or the run's starting model"


@pytest.mark.parametrize("kind", list(KINDS))
def test_eval_routing_takes_every_kind_with_the_runs_settings(runs, kind, capsys):
    _, _, by_kind = runs
    run_dir, _ = by_kind[kind]
    assert eval_routing.main([str(run_dir), "--json"]) == 0  # base, data, reward: from the run
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoint"] == str(run_dir / "checkpoints" / "step_000002")
    assert ("routing/retain/task_reward" in out) == (kind == "dual")


@pytest.mark.parametrize("kind", list(KINDS))
def test_eval_task_takes_every_kind_of_run_and_checkpoint_folder(runs, kind, capsys):
    """README: `eval_task.py --model runs/<name>/checkpoints/step_N` (and the run folder)."""
    run_dir, _ = runs[2][kind]
    for ref in (run_dir, run_dir / "checkpoints" / "step_000002"):
        argv = ["--model", str(ref), "--limit", "1", "--max-new-tokens", "2", "--json"]
        assert eval_task.main(argv) == 0
        assert json.loads(capsys.readouterr().out)["model"] == str(ref)


def test_a_run_without_a_checkpoint_or_a_reward_model_is_one_clear_error(runs, tmp_path, capsys):
    base_dir, prompts, _ = runs
    early = tmp_path / "early"  # a run before its first checkpoint: config.json, metrics
    early.mkdir()
    (early / "config.json").write_text(json.dumps({"model": str(base_dir), "reward": "happy"}))
    (early / "metrics.jsonl").write_text("")
    with pytest.raises(LoadError, match="no checkpoint yet"):
        resolve(str(early))
    argv = ["--model", str(early), "--prompts", str(prompts), "--reward", "happy"]
    assert evaluate.main([*argv, "--grader", "none", "--cache-dir", "none"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if not x.startswith("[rl-values]")]
    assert len(err) == 1 and err[0].startswith("error: ") and "no checkpoint yet" in err[0]
    rm = tmp_path / "rm"
    rm.mkdir()
    (rm / "rm_config.json").write_text("{}")
    with pytest.raises(LoadError, match="reward model"):
        resolve(str(rm))


def test_an_adapter_checkpoint_whose_base_leads_back_to_itself_is_refused(runs, tmp_path):
    _, _, by_kind = runs
    ckpt = resolve(str(by_kind["lora"][0])).path
    with pytest.raises(LoadError, match="leads back"):
        resolve(str(ckpt), base=str(by_kind["lora"][0]))
