"""Tiny random models shared by the tests (no downloads)."""

import backend  # noqa: F401

# isort: split
import mlx.core as mx
import mlx.utils

from model import Model, ModelArgs

QWEN3 = dict(
    model_type="qwen3",
    hidden_size=48,
    num_hidden_layers=2,
    intermediate_size=67,
    num_attention_heads=6,
    num_key_value_heads=2,
    head_dim=8,
    rms_norm_eps=1e-6,
    vocab_size=97,
    max_position_embeddings=256,
    rope_theta=1000000.0,
    tie_word_embeddings=True,
)
LLAMA = dict(
    model_type="llama",
    hidden_size=36,
    num_hidden_layers=3,
    intermediate_size=53,
    num_attention_heads=6,
    num_key_value_heads=3,
    rms_norm_eps=1e-5,
    vocab_size=101,
    max_position_embeddings=256,
    rope_theta=100000.0,
    tie_word_embeddings=False,
)


def tiny_model(config: dict, seed: int = 0) -> Model:
    """A model with random weights large enough that layers matter (norm weights != 1)."""
    model = Model(ModelArgs.from_config(config))
    mx.random.seed(seed)
    params = mlx.utils.tree_flatten(model.parameters())
    new = []
    for name, p in params:
        if name.endswith("norm.weight"):
            new.append((name, 1.0 + 0.1 * mx.random.normal(p.shape)))
        else:
            new.append((name, 0.2 * mx.random.normal(p.shape)))
    model.load_weights(new, strict=True)
    mx.eval(model.parameters())
    return model
