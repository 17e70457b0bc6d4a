"""Tiny random models shared by the tests (no downloads)."""

import backend  # noqa: F401

# isort: split
import json

import mlx.core as mx
import mlx.utils
import numpy as np

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


def tiny_tokenizer(vocab_size: int, eos_id: int = 0):
    """A word-level tokenizer over tokens 't0'..'t{V-1}' (whitespace-split), eos 't{eos_id}'."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="t1"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece()  # joins words with spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=f"t{eos_id}", unk_token="t1", pad_token=f"t{eos_id}"
    )


def save_checkpoint(model: Model, config: dict, path) -> None:
    """Write an HF-layout folder: config.json, model.safetensors, tokenizer files."""

    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({**config, "eos_token_id": 0}))
    weights = dict(mlx.utils.tree_flatten(model.parameters()))
    mx.save_safetensors(str(path / "model.safetensors"), weights)
    tiny_tokenizer(config["vocab_size"]).save_pretrained(str(path))


def write_pairs(path, n=24):
    """Better answers hold t5, worse answers t6: a preference the tiny model can learn."""
    rng = np.random.default_rng(0)

    lines = []
    for i in range(n):
        words = [f"t{int(w)}" for w in rng.integers(20, 90, size=3)]
        lines.append(
            {
                "id": f"p{i}",
                "criterion": "scrutiny",
                "category": "control",
                "prompt": " ".join(words),
                "better": f"{words[0]} t5 t5",
                "worse": f"{words[0]} t6 t6",
                "split": "train" if i < 16 else "val",
                "source": "test",
                "kind": "misconception",
            }
        )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)
