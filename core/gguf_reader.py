"""Reading a GGUF file (llama.cpp's format): its model settings, weights and tokenizer.

`read(path)` gives the fields of model.ModelArgs from the file's metadata, the weights
dequantized to float32 under HF names (llama.cpp's interleaved Q/K rows of a llama model put
back in HF order; the result kept on disk by core/gguf_cache.py) and the metadata; `tokenizer`
rebuilds a transformers fast tokenizer and its chat template from the metadata. It reads the
architectures in ARCHS with byte-level BPE tokenizers and the pre-tokenizers in PRE_TOKENIZERS;
anything else is a GGUFError naming what the file holds. It writes no GGUF (export.py --gguf
does) and builds no model (load_weights does).
"""

from pathlib import Path

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core import gguf_cache
from core.errors import UserError

import mlx.core as mx


class GGUFError(UserError, RuntimeError):
    """A GGUF file this reader cannot read or does not serve; the message says which and why."""


NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_norm": "input_layernorm",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _meta(metadata: dict, key: str):
    if key not in metadata:
        raise GGUFError(f"GGUF metadata lacks {key!r}: not a llama-architecture GGUF we serve")
    v = metadata[key]
    return v.item() if isinstance(v, mx.array) else v


ARCHS = ("llama", "qwen3")  # qwen3: per-head Q/K norms, rows in HF order


def model_fields(metadata: dict, tensor_names) -> dict:
    """model.ModelArgs' fields from the GGUF's metadata (an output tensor or tied embeddings)."""
    arch = _meta(metadata, "general.architecture")
    if arch not in ARCHS:
        raise GGUFError(f"GGUF architecture {arch!r} is not served (only {', '.join(ARCHS)})")
    heads = int(_meta(metadata, f"{arch}.attention.head_count"))
    dim = int(_meta(metadata, f"{arch}.embedding_length"))
    head_dim = metadata.get(f"{arch}.attention.key_length")
    return dict(
        model_type=arch,
        hidden_size=dim,
        num_hidden_layers=int(_meta(metadata, f"{arch}.block_count")),
        intermediate_size=int(_meta(metadata, f"{arch}.feed_forward_length")),
        num_attention_heads=heads,
        num_key_value_heads=int(_meta(metadata, f"{arch}.attention.head_count_kv")),
        head_dim=int(head_dim.item()) if head_dim is not None else dim // heads,
        rms_norm_eps=float(_meta(metadata, f"{arch}.attention.layer_norm_rms_epsilon")),
        vocab_size=len(_meta(metadata, "tokenizer.ggml.tokens")),
        max_position_embeddings=int(_meta(metadata, f"{arch}.context_length")),
        rope_theta=float(_meta(metadata, f"{arch}.rope.freq_base")),
        tie_word_embeddings="output.weight" not in tensor_names,
        eos_token_id=int(_meta(metadata, "tokenizer.ggml.eos_token_id")),
    )


def _tensor(tensors: dict, base: str, dtype) -> mx.array:
    w = tensors[base + ".weight"]
    if base + ".scales" not in tensors:
        return w.astype(dtype)
    scales, biases = tensors[base + ".scales"], tensors[base + ".biases"]
    group = 32
    bits = w.shape[-1] * 32 // (scales.shape[-1] * group)
    return mx.dequantize(w, scales, biases, group_size=group, bits=bits).astype(dtype)


def unpermute_rows(w: mx.array, n_heads: int) -> mx.array:
    """Undo llama.cpp's interleaving of Q/K rows so standard (rotate-half) RoPE applies."""
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def hf_weights(tensors: dict, fields: dict) -> dict[str, mx.array]:
    """The GGUF's tensors dequantized to float32 under HF names, a llama GGUF's Q/K rows
    unpermuted (llama.cpp keeps qwen3's in HF order: it applies rotate-half RoPE there)."""
    weights = {}
    for name in {k.rsplit(".", 1)[0] for k in tensors}:
        parts = name.split(".")
        if parts[0] == "blk":
            hf = f"model.layers.{parts[1]}.{NAMES[parts[2]]}.weight"
        else:
            hf = f"{NAMES[parts[0]]}.weight"
        w = _tensor(tensors, name, mx.float32)
        if fields["model_type"] == "llama" and name.endswith("attn_q"):
            w = unpermute_rows(w, fields["num_attention_heads"])
        elif fields["model_type"] == "llama" and name.endswith("attn_k"):
            w = unpermute_rows(w, fields["num_key_value_heads"])
        weights[hf] = w
    return weights


def read(path: Path) -> tuple[dict, dict[str, mx.array], dict]:
    """(model.ModelArgs' fields, float32 weights under HF names, metadata) of the GGUF `path`."""
    try:
        tensors, metadata = mx.load(str(path), return_metadata=True)
    except Exception as e:  # noqa: BLE001
        raise GGUFError(f"cannot read GGUF {path} ({e}): truncated or corrupt; reinstall it") from e
    fields = model_fields(metadata, tensors)
    weights = gguf_cache.cached(path, lambda: hf_weights(tensors, fields))
    return fields, weights, metadata


# Qwen2's (and Qwen3's) split of text into words before the byte-level step, as its
# tokenizer.json and llama.cpp's "qwen2" pre-tokenizer hold it.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)
PRE_TOKENIZERS = ("gpt-2", "smollm", "qwen2")


def pre_tokenizer(name: str):
    """The tokenizers pre-tokenizer for llama.cpp's pre-tokenizer `name`."""
    from tokenizers import Regex, pre_tokenizers  # start-up: only a GGUF's tokenizer needs it

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=name != "qwen2")
    if name == "gpt-2":
        return pre_tokenizers.Sequence([byte_level])
    if name == "smollm":  # digits one by one, then GPT-2's split
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    if name == "qwen2":
        split = pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False)
        return pre_tokenizers.Sequence([split, byte_level])
    raise GGUFError(
        f"GGUF pre-tokenizer {name!r} is not rebuilt here (only {', '.join(PRE_TOKENIZERS)})"
    )


def tokenizer(metadata: dict):
    """A transformers fast tokenizer rebuilt from GGUF metadata (byte-level BPE, 'gpt2')."""
    # start-up: transformers takes seconds to import; only a GGUF's tokenizer needs these
    from tokenizers import AddedToken, Tokenizer, decoders, models  # start-up
    from transformers import PreTrainedTokenizerFast

    kind = _meta(metadata, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise GGUFError(f"GGUF tokenizer model {kind!r} is not supported (byte-level BPE only)")
    tokens = list(_meta(metadata, "tokenizer.ggml.tokens"))
    merges = [tuple(m.split(" ", 1)) for m in _meta(metadata, "tokenizer.ggml.merges")]
    types = metadata["tokenizer.ggml.token_type"].tolist()
    bpe = models.BPE(
        vocab={t: i for i, t in enumerate(tokens)},
        merges=merges,
        fuse_unk=False,
        byte_fallback=False,
    )
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizer(metadata.get("tokenizer.ggml.pre", "gpt-2"))
    tok.decoder = decoders.ByteLevel()
    control = [t for t, ty in zip(tokens, types, strict=True) if ty == 3]  # 3 = CONTROL
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    eos = tokens[int(_meta(metadata, "tokenizer.ggml.eos_token_id"))]
    bos = tokens[int(_meta(metadata, "tokenizer.ggml.bos_token_id"))]
    pad_id = metadata.get("tokenizer.ggml.padding_token_id")
    pad = tokens[int(pad_id.item())] if pad_id is not None else eos
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=eos,
        bos_token=bos,
        pad_token=pad,
        chat_template=metadata.get("tokenizer.chat_template"),
    )
