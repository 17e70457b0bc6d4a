"""core/lora.py on tiny random models: identity at init, on/off switch, freezing, gradients,
files."""

import json

from core import backend  # noqa: F401

# isort: split
from core.lora import (
    LoRALinear,
    adapters_disabled,
    apply_lora,
    load_adapters,
    lora_layers,
    merged_weights,
    save_adapters,
    set_adapters,
)

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from helpers import LLAMA, QWEN3, tiny_model
from mlx.utils import tree_flatten, tree_unflatten

from model import Model, ModelArgs

TARGETS = ["q_proj", "v_proj", "down_proj"]


def tokens(vocab: int, seed: int = 0) -> mx.array:
    return mx.array(np.random.default_rng(seed).integers(0, vocab, (2, 9)))


def randomize_b(model, seed: int = 1) -> None:
    """Give every lora_b non-zero values so the adapters change the output."""
    mx.random.seed(seed)
    for _, layer in lora_layers(model):
        layer.lora_b = 0.3 * mx.random.normal(layer.lora_b.shape)
    mx.eval(model.parameters())


def lora_model(config=QWEN3, rank=4, alpha=8.0, targets=TARGETS):
    model = tiny_model(config)
    mx.random.seed(123)
    apply_lora(model, rank, alpha, targets)
    return model


def test_lora_linear_formula_and_init():
    # odd sizes: in 33, out 31, r 3; scale = 6 / 3 = 2
    mx.random.seed(0)
    base = nn.Linear(33, 31, bias=True)
    layer = LoRALinear(base, rank=3, alpha=6.0)
    assert layer.lora_a.shape == (3, 33) and layer.lora_b.shape == (31, 3)
    assert layer.scale == 2.0
    bound = 1 / 33**0.5
    assert mx.max(mx.abs(layer.lora_a)).item() <= bound and mx.all(layer.lora_b == 0).item()
    layer.lora_b = mx.random.normal((31, 3))
    x = mx.random.normal((2, 5, 33))
    a, b = np.array(layer.lora_a), np.array(layer.lora_b)
    want = np.array(base(x)) + 2.0 * (np.array(x) @ a.T) @ b.T
    np.testing.assert_allclose(np.array(layer(x)), want, rtol=1e-5, atol=1e-5)
    layer.enabled = False
    assert mx.array_equal(layer(x), base(x)).item()


def test_init_is_seeded_by_caller():
    a, b = lora_model(), lora_model()
    for (_, la), (_, lb) in zip(lora_layers(a), lora_layers(b), strict=True):
        assert mx.array_equal(la.lora_a, lb.lora_a).item()


@pytest.mark.parametrize("config", [QWEN3, LLAMA], ids=["qwen3", "llama"])
def test_identity_at_init_and_disabled_restores_base(config):
    t = tokens(config["vocab_size"])
    base_logits = tiny_model(config)(t)
    model = lora_model(config)
    assert mx.array_equal(model(t), base_logits).item()  # B = 0

    randomize_b(model)
    adapted = model(t)
    assert mx.abs(adapted - base_logits).max().item() > 1e-2
    with adapters_disabled(model):
        assert mx.array_equal(model(t), base_logits).item()
    assert mx.array_equal(model(t), adapted).item()  # switched back on

    set_adapters(model, False)
    with adapters_disabled(model):
        pass
    assert mx.array_equal(model(t), base_logits).item()  # the context restores, not forces on


def test_only_lora_params_trainable():
    model = lora_model()
    n = sum(p.size for _, p in tree_flatten(model.trainable_parameters()))
    names = sorted(name for name, _ in tree_flatten(model.trainable_parameters()))
    want = []
    for i in range(QWEN3["num_hidden_layers"]):
        for mod in ("mlp.down_proj", "self_attn.q_proj", "self_attn.v_proj"):
            want += [f"model.layers.{i}.{mod}.lora_a", f"model.layers.{i}.{mod}.lora_b"]
    assert names == sorted(want)
    # r=4 per layer: q (48->48): 4*48 + 48*4; v (48->16): 4*48 + 16*4; down (67->48): 4*67 + 48*4
    per_layer = (4 * 48 + 48 * 4) + (4 * 48 + 16 * 4) + (4 * 67 + 48 * 4)
    assert n == 2 * per_layer
    fresh = tiny_model(QWEN3)
    assert apply_lora(fresh, 4, 8.0, TARGETS) == 2 * per_layer


def test_unknown_target_and_double_apply_raise():
    model = tiny_model(QWEN3)
    with pytest.raises(ValueError, match=r"\['qproj'\].*down_proj.*v_proj"):
        apply_lora(model, 4, 8.0, ["qproj", "v_proj"])
    with pytest.raises(ValueError, match="no LoRA adapters"):
        set_adapters(model, False)
    apply_lora(model, 4, 8.0, ["v_proj"])
    with pytest.raises(ValueError, match="already"):
        apply_lora(model, 4, 8.0, ["v_proj"])


def test_gradient_reaches_only_lora_params():
    model = lora_model()
    randomize_b(model)
    t = tokens(QWEN3["vocab_size"])
    before = dict(tree_flatten(model.parameters()))

    def loss_fn(m):
        return mx.mean(nn.losses.cross_entropy(m(t[:, :-1]), t[:, 1:]))

    _, grads = nn.value_and_grad(model, loss_fn)(model)
    flat = dict(tree_flatten(grads))
    assert sorted(flat) == sorted(name for name, _ in tree_flatten(model.trainable_parameters()))
    assert all(mx.abs(g).max().item() > 0 for g in flat.values())

    # one SGD step moves every lora param and nothing else
    model.update(tree_unflatten([(n, before[n] - 0.1 * g) for n, g in flat.items()]))
    after = dict(tree_flatten(model.parameters()))
    for name, p in after.items():
        changed = not mx.array_equal(p, before[name]).item()
        assert changed == (name in flat), name


def test_save_load_round_trip(tmp_path):
    model = lora_model()
    randomize_b(model)
    save_adapters(model, tmp_path, 4, 8.0, TARGETS)
    config = json.loads((tmp_path / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 4 and config["lora_alpha"] == 8.0
    assert sorted(config["target_modules"]) == sorted(TARGETS)
    saved = mx.load(str(tmp_path / "adapters.safetensors"))
    a_name = "base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"
    assert saved[a_name].shape == (4, 48)
    assert saved[a_name.replace("lora_A", "lora_B")].shape == (48, 4)
    assert len(saved) == 2 * 3 * 2

    other = tiny_model(QWEN3)
    mx.random.seed(999)  # different lora_a init: the load must overwrite it
    apply_lora(other, 4, 8.0, TARGETS)
    load_adapters(other, tmp_path)
    theirs = dict(tree_flatten(other.parameters()))
    for name, p in tree_flatten(model.parameters()):
        assert mx.array_equal(p, theirs[name]).item(), name
    t = tokens(QWEN3["vocab_size"])
    assert mx.array_equal(model(t), other(t)).item()


@pytest.mark.parametrize(
    "rank, alpha, targets",
    [(8, 8.0, TARGETS), (4, 16.0, TARGETS), (4, 8.0, ["q_proj", "v_proj"])],
    ids=["rank", "alpha", "targets"],
)
def test_load_mismatch_raises(tmp_path, rank, alpha, targets):
    save_adapters(lora_model(), tmp_path, 4, 8.0, TARGETS)
    other = tiny_model(QWEN3)
    apply_lora(other, rank, alpha, targets)
    with pytest.raises(ValueError, match="apply_lora with the same config"):
        load_adapters(other, tmp_path)


def test_save_rejects_config_that_does_not_match_model(tmp_path):
    with pytest.raises(ValueError, match="r=8"):
        save_adapters(lora_model(), tmp_path, 8, 8.0, TARGETS)


@pytest.mark.parametrize("config", [QWEN3, LLAMA], ids=["qwen3", "llama"])
def test_merged_weights_reproduce_lora_logits(config):
    model = lora_model(config, targets=["q_proj", "k_proj", "o_proj", "gate_proj", "up_proj"])
    randomize_b(model)
    merged = merged_weights(model)
    fresh = Model(ModelArgs.from_config(config))
    fresh.load_weights(list(merged.items()), strict=True)
    t = tokens(config["vocab_size"], seed=3)
    diff = mx.abs(fresh(t) - model(t)).max().item()
    assert diff <= 1e-5, diff
    with adapters_disabled(model):  # merging ignores the switch: export is the trained model
        again = merged_weights(model)
    assert all(mx.array_equal(again[k], merged[k]).item() for k in merged)
