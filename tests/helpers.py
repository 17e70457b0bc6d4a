"""Tiny random models shared by the tests (no downloads)."""

from core import backend  # noqa: F401

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


# Qwen2's pre-tokenizer split (Qwen3 keeps it): contractions, letter runs with one leading
# non-letter, single digits, punctuation runs, newlines, spaces.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# ChatML turns; Qwen3's added tokens in its order (<|endoftext|> first), then <think> tokens.
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_THINK = ["<think>", "</think>"]
# A Qwen3-style chat template: ChatML turns; the reasoning of earlier assistant turns dropped;
# the generation prompt closes an empty think block when enable_thinking is false, as Qwen3's
# own template does (ours is written for the tests, not copied).
QWEN3_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- set content = message['content'] -%}"
    "{%- if message['role'] == 'assistant' and '</think>' in content -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)
# A tiny Qwen3-0.6B: the same layout (tied embeddings, q/k norms, head_dim apart from
# hidden/heads), small sizes; 14 blocks, so the defaults that adapt the top 12 blocks (the values
# task's lora_layers) hold as on the real model's 28. The model's vocabulary is wider than the
# tokenizer's, as Qwen3's is (151936 rows for 151669 tokens): ids past the tokenizer exist and
# can be sampled.
QWEN3_HF = dict(
    architectures=["Qwen3ForCausalLM"],
    model_type="qwen3",
    hidden_size=64,
    num_hidden_layers=14,
    intermediate_size=96,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    rms_norm_eps=1e-6,
    vocab_size=4096,
    max_position_embeddings=4096,
    rope_theta=1000000.0,
    tie_word_embeddings=True,
    attention_bias=False,
    hidden_act="silu",
    torch_dtype="bfloat16",
)


def qwen_tokenizer(vocab_size: int = 4000):
    """A Qwen-style tokenizer: byte-level BPE trained here on the repository's prompts and SFT
    answers (the same merges every time; ~1.2x SmolLM2's tokens per answer), Qwen2's split
    regex, ChatML specials, <think> tokens and a Qwen3 chat template; eos <|im_end|>, pad
    <|endoftext|>, no BOS."""
    from pathlib import Path

    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    data = Path(__file__).resolve().parent.parent / "data"
    text = []
    for name in ("prompts.jsonl", "sft/written.jsonl"):
        for line in (data / name).read_text().splitlines():
            row = json.loads(line)
            text += [row["prompt"], row.get("answer", "")]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(QWEN_SPECIALS) - len(QWEN_THINK),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(text, trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIALS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN_THINK])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=QWEN3_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )


def save_qwen3_checkpoint(path, seed: int = 0) -> None:
    """A tiny Qwen3 HF folder as a user's download would be: config.json (torch_dtype
    bfloat16, eos <|im_end|>), bfloat16 model.safetensors, generation_config.json and a
    Qwen-style tokenizer (`qwen_tokenizer`). Random weights: it tests paths, not answers."""
    tokenizer = qwen_tokenizer()
    assert len(tokenizer) <= QWEN3_HF["vocab_size"], len(tokenizer)
    ids = tokenizer.convert_tokens_to_ids(QWEN_SPECIALS)
    config = {**QWEN3_HF, "bos_token_id": ids[0], "eos_token_id": ids[2]}
    model = tiny_model(config, seed)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config, indent=1))
    generation = {"bos_token_id": ids[0], "eos_token_id": [ids[2], ids[0]], "do_sample": True}
    (path / "generation_config.json").write_text(json.dumps(generation, indent=1))
    weights = {k: v.astype(mx.bfloat16) for k, v in mlx.utils.tree_flatten(model.parameters())}
    mx.save_safetensors(str(path / "model.safetensors"), weights, metadata={"format": "pt"})
    tokenizer.save_pretrained(str(path))
