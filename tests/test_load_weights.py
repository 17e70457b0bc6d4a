"""Loader: HF folders round-trip, the embedded GGUF answers, and every failure is loud."""

import json

from core import backend  # noqa: F401

import mlx.core as mx
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model

from load_weights import LoadError, load


@pytest.fixture
def checkpoint(tmp_path):
    model = tiny_model(QWEN3)
    save_checkpoint(model, QWEN3, tmp_path / "ckpt")
    return model, tmp_path / "ckpt"


def test_hf_folder_round_trip(checkpoint):
    model, path = checkpoint
    loaded, tokenizer = load(str(path), mx.float32)
    tokens = mx.array([[3, 1, 4, 1, 5]])
    # exact on purpose: float32 weights saved and loaded are the same bits, so is the forward
    assert mx.array_equal(loaded(tokens), model(tokens))
    assert tokenizer.encode("t3 t4", add_special_tokens=False) == [3, 4]


def test_missing_model_names_what_was_tried(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(LoadError) as e:
        load("nobody/no-such-model-here")
    msg = str(e.value)
    assert "nobody/no-such-model-here" in msg and "Looked at" in msg
    assert "--model smollm2-135m" in msg


def test_folder_without_config(tmp_path):
    with pytest.raises(LoadError, match="neither config.json"):
        load(str(tmp_path))


def test_missing_and_unexpected_keys_are_listed(checkpoint):
    _, path = checkpoint
    weights = mx.load(str(path / "model.safetensors"))
    del weights["model.layers.1.mlp.up_proj.weight"]
    weights["model.layers.1.mlp.extra.weight"] = mx.zeros((2,))
    mx.save_safetensors(str(path / "model.safetensors"), weights)
    with pytest.raises(LoadError) as e:
        load(str(path))
    assert "model.layers.1.mlp.up_proj.weight" in str(e.value)
    assert "model.layers.1.mlp.extra.weight" in str(e.value)


def test_wrong_shapes_are_listed(checkpoint):
    _, path = checkpoint
    config = json.loads((path / "config.json").read_text())
    config["intermediate_size"] += 1
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(LoadError, match="shapes do not match"):
        load(str(path))


def test_truncated_weight_file(checkpoint):
    _, path = checkpoint
    f = path / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(LoadError, match="truncated or corrupt"):
        load(str(path))


def test_unsupported_architecture(checkpoint):
    _, path = checkpoint
    config = json.loads((path / "config.json").read_text())
    config["model_type"] = "gpt2"
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(LoadError, match="not served"):
        load(str(path))


@pytest.mark.slow
def test_embedded_model_answers_paris(smollm):
    s = smollm.sample_group(["What is the capital of France?"], 1, 24, temperature=0)
    assert "Paris" in s.texts[0], s.texts[0]
    assert s.finished[0], "greedy answer should end with EOS well before 24 tokens"


def test_lora_checkpoint_folder_loads_base_with_merged_adapters(tmp_path):
    """A LoRA run's checkpoint (adapters only) loads like a full model: base + adapters merged,
    the same logits as the adapted model in memory."""
    from core import lora

    base_dir = tmp_path / "base"
    base = tiny_model(QWEN3, seed=4)
    save_checkpoint(base, QWEN3, base_dir)
    adapted, _ = load(str(base_dir), mx.float32)
    lora.apply_lora(adapted, 4, 8.0, ["q_proj", "down_proj"])
    for _, layer in lora.lora_layers(adapted):  # non-zero adapters, so merging matters
        layer.lora_b = 0.1 * mx.random.normal(layer.lora_b.shape, key=mx.random.key(1))
    ckpt = tmp_path / "step_000002"
    lora.save_adapters(adapted, ckpt, 4, 8.0, ["q_proj", "down_proj"])
    tokens = mx.array([[3, 9, 27, 5]])
    loaded, _ = load(str(ckpt), mx.float32)
    assert mx.abs(loaded(tokens) - adapted(tokens)).max().item() <= 1e-5
    assert mx.abs(loaded(tokens) - base(tokens)).max().item() > 1e-3, "adapters took effect"
    cfg = json.loads((ckpt / "adapter_config.json").read_text())
    (ckpt / "adapter_config.json").write_text(json.dumps(cfg | {"base_model_name_or_path": None}))
    with pytest.raises(LoadError, match="names no base model"):
        load(str(ckpt))


def test_a_run_folder_loads_its_latest_checkpoint(tmp_path):
    from helpers import QWEN3, save_checkpoint, tiny_model

    from load_weights import LoadError, resolve

    run = tmp_path / "run"
    save_checkpoint(tiny_model(QWEN3, seed=1), QWEN3, run / "checkpoints" / "step_000002")
    (run / "config.json").write_text('{"steps": 2}')  # the run's config, not a model's
    (run / "latest").write_text("step_000002\n")
    assert resolve(str(run)).path == run / "checkpoints" / "step_000002"
    (run / "latest").write_text("step_000009\n")
    with pytest.raises(LoadError, match="step_000009"):
        resolve(str(run))
