"""Half precision that cannot corrupt a run: the default dtype per backend, float32 optimizer state
and master weights, updates rolled back when non-finite, runs stopped after K in a row, and
checkpoint writers that refuse non-finite weights (core/precision.py, knowledge/precision.md)."""

import functools
import importlib
import json
import math

from core import backend, flags, lora, precision

import mlx.core as mx
import mlx.optimizers as optim
import numpy as np
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model, tiny_tokenizer, write_pairs
from mlx.utils import tree_flatten, tree_map
from test_train import low_tokens

import train
import train_rm
from gwen import Gwen
from load_weights import load
from rewards import reward_model
from rl import checkpoint


@pytest.mark.parametrize(
    "name, torch_dtype, override, want",
    [
        ("cpu", "bfloat16", None, "float32"),  # no BLAS for half-precision matmul on CPU
        ("cpu", None, None, "float32"),
        ("metal", "bfloat16", None, "bfloat16"),  # Qwen3, SmolLM2: the checkpoint's own
        ("cuda", "float16", None, "float16"),
        ("metal", "float32", None, "float32"),
        ("metal", None, None, "bfloat16"),  # a GGUF, a config without torch_dtype
        ("cuda", "float64", None, "bfloat16"),  # nothing MLX trains in: the fallback
        ("metal", "bfloat16", "float16", "float16"),  # $GWEN_DTYPE wins
        ("cpu", None, "bfloat16", "bfloat16"),
    ],
)
def test_default_dtype_is_float32_on_cpu_and_the_checkpoints_own_on_gpu(
    name, torch_dtype, override, want
):
    assert backend.choose_dtype(name, torch_dtype, override) == want


@pytest.mark.parametrize(
    "name", ["train", "evaluate", "chat", "sft", "train_rm", "quantize", "eval_task", "gwen"]
)
def test_every_command_that_loads_a_model_takes_the_same_dtype_flag(name, capsys):
    with pytest.raises(SystemExit):
        importlib.import_module(name).main(["--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps help lines
    assert "--dtype {float32,float16,bfloat16}" in text
    assert f"{flags.DTYPE_HELP} (default: {flags.DTYPE_DEFAULT})" in text


def test_bad_override_and_config_keys():
    with pytest.raises(ValueError, match="GWEN_DTYPE='half'"):
        backend.choose_dtype("metal", "bfloat16", "half")
    assert backend.config_dtype({"torch_dtype": "bfloat16"}) == "bfloat16"
    assert backend.config_dtype({"dtype": "float16"}) == "float16"  # newer transformers
    assert backend.config_dtype({}) is None


def test_loader_takes_the_config_dtype_on_gpu_and_float32_on_cpu(tmp_path, monkeypatch):
    monkeypatch.delenv("GWEN_DTYPE", raising=False)
    model = tiny_model(QWEN3, seed=2)
    model.update(tree_map(lambda p: p.astype(mx.bfloat16), model.parameters()))
    save_checkpoint(model, {**QWEN3, "torch_dtype": "bfloat16"}, tmp_path / "q")
    cpu, _ = load(str(tmp_path / "q"))
    assert {p.dtype for _, p in tree_flatten(cpu.parameters())} == {mx.float32}
    monkeypatch.setattr(backend, "backend_name", lambda: "metal")
    gpu, _ = load(str(tmp_path / "q"))
    assert {p.dtype for _, p in tree_flatten(gpu.parameters())} == {mx.bfloat16}
    forced, _ = load(str(tmp_path / "q"), mx.float16)  # --dtype still decides
    assert {p.dtype for _, p in tree_flatten(forced.parameters())} == {mx.float16}
    save_checkpoint(model, {**QWEN3, "torch_dtype": "float16"}, tmp_path / "h")
    own, _ = load(str(tmp_path / "h"))  # the config's word, not a fixed GPU dtype
    assert {p.dtype for _, p in tree_flatten(own.parameters())} == {mx.float16}


def _half_model(dtype=mx.float16):
    model = tiny_model(QWEN3, seed=1)
    model.update(tree_map(lambda p: p.astype(dtype), model.parameters()))
    mx.eval(model.parameters())
    return model


def test_mlx_adamw_in_float16_is_the_bug_and_master_adamw_is_float32_adamw():
    """MLX's AdamW keeps m and v in float16, where eps 1e-8 is 0: a zero gradient gives 0/0.
    MasterAdamW's state and masters are float32, its update equals float32 AdamW's on float32
    copies, and the model gets the update rounded to float16."""
    model = _half_model()
    params = model.trainable_parameters()
    grads = tree_map(lambda p: 0.01 * mx.random.normal(p.shape, key=mx.random.key(3)), params)
    grads = tree_map(lambda g: g.astype(mx.float16), grads)
    grads["model"]["norm"]["weight"] = mx.zeros_like(params["model"]["norm"]["weight"])
    plain = optim.AdamW(learning_rate=1e-3)
    new = plain.apply_gradients(grads, params)
    assert not np.isfinite(np.array(new["model"]["norm"]["weight"])).any()  # the cause

    opt = precision.adamw(params, learning_rate=1e-3)
    assert isinstance(opt, precision.MasterAdamW)
    state = dict(tree_flatten(opt.state))
    floats = {k: v.dtype for k, v in state.items() if k not in ("step", "learning_rate")}
    assert floats and set(floats.values()) == {mx.float32}, floats
    assert any(k.startswith(precision.MASTER) for k in floats)
    reference = optim.AdamW(learning_rate=1e-3)
    ref = tree_map(lambda p: p.astype(mx.float32), params)
    for _ in range(3):
        opt.update(model, grads)
        ref = reference.apply_gradients(tree_map(lambda g: g.astype(mx.float32), grads), ref)
    mx.eval(model.parameters(), opt.state, ref)
    master = dict(tree_flatten(opt.state[precision.MASTER]))
    for k, w in tree_flatten(ref):
        np.testing.assert_allclose(np.array(master[k]), np.array(w), rtol=1e-6, atol=1e-7)
    for k, p in tree_flatten(model.parameters()):
        assert p.dtype == mx.float16
        np.testing.assert_array_equal(np.array(p), np.array(master[k].astype(mx.float16)))


def test_small_updates_accumulate_in_the_masters_not_lost_to_bfloat16_rounding():
    """lr 1e-5 moves a weight of ~0.2 by far less than half a bfloat16 step (~8e-4): rounded
    into bfloat16 weights each time, every update would be lost; the masters keep them."""
    model = _half_model(mx.bfloat16)
    before = np.array(model.parameters()["model"]["norm"]["weight"].astype(mx.float32))
    opt = precision.adamw(model.trainable_parameters(), learning_rate=1e-5)
    grads = tree_map(mx.ones_like, model.trainable_parameters())
    for _ in range(200):
        opt.update(model, grads)
        mx.eval(model.parameters(), opt.state)
    after = np.array(model.parameters()["model"]["norm"]["weight"].astype(mx.float32))
    moved = before - after  # 200 steps of ~lr each: ~2e-3
    assert np.all(moved > 1e-3), moved


def test_lora_adapters_are_float32_parameters_over_a_half_model():
    model = _half_model(mx.bfloat16)
    model.freeze()
    lora.apply_lora(model, 4, 8.0, ["q_proj", "v_proj"], None)
    trainable = dict(tree_flatten(model.trainable_parameters()))
    assert trainable and {p.dtype for p in trainable.values()} == {mx.float32}
    opt = precision.adamw(model.trainable_parameters(), learning_rate=1e-3)
    assert type(opt) is optim.AdamW  # no masters needed: the parameters are float32
    h = model(mx.array([[1, 2, 3]]))
    assert h.dtype == mx.bfloat16  # the activations keep the base's dtype


def test_guarded_update_rolls_back_weights_and_optimizer_state():
    model = tiny_model(QWEN3, seed=1)
    opt = precision.adamw(model.trainable_parameters(), learning_rate=1e-2)
    good = tree_map(mx.ones_like, model.trainable_parameters())
    assert precision.guarded_update(opt, model, good)
    weights = {k: np.array(v) for k, v in tree_flatten(model.parameters())}
    state = {k: np.array(v) for k, v in tree_flatten(opt.state)}
    bad = tree_map(lambda g: g * 1e30 * 1e30, good)  # inf: the update is NaN
    assert not precision.guarded_update(opt, model, bad)
    assert all(np.array_equal(np.array(v), weights[k]) for k, v in tree_flatten(model.parameters()))
    assert {k: np.array(v) for k, v in tree_flatten(opt.state)}.keys() == state.keys()
    assert all(np.array_equal(np.array(v), state[k]) for k, v in tree_flatten(opt.state))
    assert precision.guarded_update(opt, model, good)  # and it goes on from there
    assert opt.step.item() == 2


def test_failures_count_and_stop_after_k_in_a_row():
    f = precision.Failures(3, "lower --lr")
    for outcome in ("skipped", "rolled_back", "applied", "skipped", "rolled_back"):
        f.record(outcome, "step x")
    assert f.counts == {"skipped_steps": 2, "rolled_back_steps": 2, "failed_in_a_row": 2}
    with pytest.raises(precision.NonFiniteError, match="3 updates in a row.*step 9.*lower --lr"):
        f.record("skipped", "step 9")


def test_checkpoint_writer_refuses_non_finite_weights(tmp_path):
    model = tiny_model(QWEN3, seed=1)
    opt = precision.adamw(model.trainable_parameters(), learning_rate=1e-3)
    save = functools.partial(
        checkpoint.save, tmp_path, model=model, tokenizer=tiny_tokenizer(QWEN3["vocab_size"]),
        optimizer=opt, trainer_state={}, config={},
    )  # fmt: skip
    save(1)
    up = model.model.layers[1].mlp.up_proj
    up.weight = up.weight.at[0, 0].add(math.inf)
    with pytest.raises(precision.NonFiniteError, match=r"step_000002.*model.layers.1.mlp.up_proj"):
        save(2)
    assert not (tmp_path / "checkpoints" / "step_000002").exists()
    assert checkpoint.latest(tmp_path).name == "step_000001"
    config = json.loads((tmp_path / "checkpoints" / "step_000001" / "config.json").read_text())
    assert config["torch_dtype"] == "float32"  # a full checkpoint names its dtype


def poison_updates(monkeypatch, poisoned):
    """Every AdamW update (MasterAdamW's too) comes out NaN while `poisoned()` is true."""
    real = optim.AdamW.apply_single

    def apply_single(self, gradient, parameter, state):
        out = real(self, gradient, parameter, state)
        return out * math.nan if poisoned() else out

    monkeypatch.setattr(optim.AdamW, "apply_single", apply_single)


def train_cli(tmp_path, monkeypatch, dtype, steps, extra=(), reward=low_tokens):
    """train.py's main on a tiny checkpoint read from disk, full fine-tuning (--lora-rank 0)
    in `dtype`, the toy reward in process; (exit status, run folder)."""
    base = tmp_path / "base"
    save_checkpoint(tiny_model(QWEN3, seed=1), QWEN3, base)
    monkeypatch.setattr(train, "run", functools.partial(train.run, reward_fn=reward))
    argv = [
        "--model", str(base), "--dtype", dtype, "--lora-rank", "0", "--steps", str(steps),
        "--prompts-per-step", "2", "--group-size", "3", "--max-new-tokens", "6", "--lr", "1e-2",
        "--warmup-steps", "1", "--kl-coef", "0.05", "--save-every", "1", "--no-tensorboard",
        "--out-dir", str(tmp_path / "runs"), "--run-name", "r", *extra,
    ]  # fmt: skip
    return train.main(argv), tmp_path / "runs" / "r"


def metrics(run_dir):
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow  # half-precision training steps on the CPU: ~20 s each on 2 cores
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_full_fine_tune_leaves_finite_weights_and_float32_state(
    tmp_path, monkeypatch, dtype
):
    """The issue's case: `train.py --lora-rank 0 --dtype float16` exited 0 with NaN weights."""
    status, run_dir = train_cli(tmp_path, monkeypatch, dtype, steps=4)
    assert status == 0
    ckpt = checkpoint.latest(run_dir)
    assert ckpt.name == "step_000004"
    weights = mx.load(str(ckpt / "model.safetensors"))
    assert {str(w.dtype) for w in weights.values()} == {f"mlx.core.{dtype}"}
    assert not precision.non_finite_names(weights)
    state = mx.load(str(ckpt / "optimizer.safetensors"))
    masters = [k for k in state if k.startswith(precision.MASTER)]
    assert len(masters) == len(weights)
    floats = {state[k].dtype for k in state if k not in ("step", "learning_rate")}
    assert floats == {mx.float32}
    rows = metrics(run_dir)
    assert all(math.isfinite(r["loss"]) for r in rows)
    applied = state["step"].item()
    assert applied + rows[-1]["skipped_steps"] + rows[-1]["rolled_back_steps"] == 4
    assert applied >= 3, rows  # it trains: at most one update lost


def test_a_non_finite_update_is_rolled_back_and_counted(tmp_path, monkeypatch):
    calls = []

    def reward(*a, **kw):
        calls.append(1)  # one call per step, before its update
        return low_tokens(*a, **kw)

    poison_updates(monkeypatch, lambda: len(calls) == 3)
    status, run_dir = train_cli(tmp_path, monkeypatch, "float32", steps=5, reward=reward)
    assert status == 0
    rows = metrics(run_dir)
    assert [r["rolled_back_steps"] for r in rows] == [0, 0, 1, 1, 1]
    assert [r["failed_in_a_row"] for r in rows] == [0, 0, 1, 0, 0]
    w2 = mx.load(str(run_dir / "checkpoints" / "step_000002" / "model.safetensors"))
    w3 = mx.load(str(run_dir / "checkpoints" / "step_000003" / "model.safetensors"))
    assert all(np.array_equal(np.array(w2[k]), np.array(w3[k])) for k in w2)  # step 3 undone
    state = mx.load(str(checkpoint.latest(run_dir) / "optimizer.safetensors"))
    assert state["step"].item() == 4  # 5 steps, one update rolled back with its state
    assert not precision.non_finite_names(
        mx.load(str(checkpoint.latest(run_dir) / "model.safetensors"))
    )


def test_k_failed_updates_in_a_row_stop_with_exit_2_and_the_last_good_checkpoint(
    tmp_path, monkeypatch, capsys
):
    calls = []

    def reward(*a, **kw):
        calls.append(1)
        return low_tokens(*a, **kw)

    poison_updates(monkeypatch, lambda: len(calls) >= 3)
    status, run_dir = train_cli(
        tmp_path, monkeypatch, "float16", steps=8, reward=reward,
        extra=["--max-failed-updates", "2"],
    )  # fmt: skip
    assert status == 2
    err = capsys.readouterr().err.replace("\r", "\n")  # progress bars redraw with \r
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "step 4: 2 updates in a row" in errors[0], errors
    assert "last checkpoint is intact" in errors[0]
    ckpt = checkpoint.latest(run_dir)
    assert ckpt.name == "step_000003"  # step 3 was rolled back, then saved: still good weights
    assert not precision.non_finite_names(mx.load(str(ckpt / "model.safetensors")))
    assert not precision.non_finite_names(mx.load(str(ckpt / "optimizer.safetensors")))
    assert len(calls) == 4  # stopped inside step 4, before its checkpoint


def test_reward_model_full_fine_tune_in_float16_rolls_back_and_stays_finite(tmp_path, monkeypatch):
    base = tmp_path / "base"
    save_checkpoint(tiny_model(QWEN3, seed=3), QWEN3, base)
    steps = []
    real_step = train_rm.Trainer.train_step

    def counted(self):
        steps.append(1)
        return real_step(self)

    monkeypatch.setattr(train_rm.Trainer, "train_step", counted)
    poison_updates(monkeypatch, lambda: len(steps) == 2)
    status = train_rm.main([
        "--model", str(base), "--pairs", str(write_pairs(tmp_path / "pairs.jsonl")),
        "--out", str(tmp_path / "rm"), "--work", str(tmp_path / "work"), "--steps", "4",
        "--batch-pairs", "4", "--lora-rank", "0", "--train-layers", "1", "--lr", "1e-3",
        "--eval-every", "2", "--max-prompt-tokens", "8", "--dtype", "float16",
        "--no-tensorboard",
    ])  # fmt: skip
    assert status == 0
    log = [json.loads(x) for x in (tmp_path / "rm" / "train_log.jsonl").read_text().splitlines()]
    assert [r["rolled_back_steps"] for r in log] == [0, 1, 1, 1]
    weights = mx.load(str(tmp_path / "rm" / reward_model.WEIGHTS_FILE))
    assert not precision.non_finite_names(weights)
    assert mx.float16 in {
        w.dtype for w in weights.values()
    }  # the trained blocks, not only the head


def test_a_float16_full_fine_tune_resumes_exactly_with_its_masters(tmp_path):
    """The float32 masters travel in optimizer.safetensors: 2 steps + resume + 2 steps equals 4
    steps, weights and masters alike (without them the resumed masters would be the rounded
    float16 weights)."""

    def policy():
        return Gwen(_half_model(), tiny_tokenizer(QWEN3["vocab_size"]))

    def config(root, steps):
        return train.TrainConfig(
            model="tiny", steps=steps, prompts_per_step=2, group_size=3, max_new_tokens=6,
            lr=1e-2, warmup_steps=1, kl_coef=0.05, save_every=2, out_dir=str(root),
            run_name="run", tensorboard=False,
        )  # fmt: skip

    full = train.run(config(tmp_path / "a", 4), policy=policy(), reward_fn=low_tokens)
    half = train.run(config(tmp_path / "b", 2), policy=policy(), reward_fn=low_tokens)
    train.run(
        config(tmp_path / "b", 4), resume=True, run_dir=half, policy=policy(),
        reward_fn=low_tokens,
    )  # fmt: skip
    for name in ("model.safetensors", "optimizer.safetensors"):
        a = mx.load(str(checkpoint.latest(full) / name))
        b = mx.load(str(checkpoint.latest(half) / name))
        assert a.keys() == b.keys()
        assert all(np.array_equal(np.array(a[k]), np.array(b[k])) for k in a), name


def test_schedule_warms_up_then_decays_or_holds():
    """Hand-worked: lr 1, 4 warm-up steps from 1e-2; with 12 steps in all, cosine to 0.1 over
    the last 8 (halfway, step 8: 0.1 + 0.9 * (1 + cos(pi/2)) / 2 = 0.55); without, constant."""
    decay = precision.schedule(1.0, 4, 12)
    got = [float(decay(mx.array(t))) for t in (0, 2, 4, 8, 12)]
    assert got == pytest.approx([0.01, 0.505, 1.0, 0.55, 0.1], abs=1e-6)
    hold = precision.schedule(2.0, 0, start=1e-3)  # warm-up of 0 steps counts as 1
    assert [float(hold(mx.array(t))) for t in (0, 1, 50)] == pytest.approx([0.002, 2.0, 2.0])
