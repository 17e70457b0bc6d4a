"""export.py: a trained model out of the project, into the tools people run models in.

`--model` takes whatever the resolver takes (a run folder, a checkpoint with full weights, LoRA
or dual adapters, a shipped folder under models/, `smollm2-135m`); `--out DIR` becomes a
standalone HF folder: the adapters merged into the weights (a dual-adapter checkpoint: the retain
adapter alone by default, `--adapters both` for retain and forget), saved as model.safetensors in
the base's dtype (config.json `torch_dtype`; `--dtype` to choose), an HF config.json (RoPE
settings at the top level and in transformers 5's `rope_parameters`), the tokenizer with its chat
template, generation_config.json (the EOS ids) and a README.md card (base, recipe, run config, the
figures the source has). mlx_lm.load and transformers' AutoConfig/AutoTokenizer read it.
`--q-bits 4|8` writes mlx-lm's quantized layout (core/quant.py), `--gguf` adds a GGUF file (llama,
qwen3; float weights, llama.cpp's Q/K row order for llama) that llama.cpp-based tools and this
project's loader read. It does not train, evaluate or upload (knowledge/export.md).
"""

import argparse
import json
import sys
from pathlib import Path

from core import backend

# isort: split
from core import errors, gguf_reader, lora, quant, run_folder
from core.atomic import atomic_folder

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

import load_weights
from model import Model

DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}
DUAL_MERGES = {"retain": (1.0, 0.0), "both": (1.0, 1.0)}  # --adapters: (retain, forget) scales
ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
}
WEIGHTS_FILE = "model.safetensors"  # quant.save_model writes it
GGUF_TYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}
# The run config entries the card shows.
CARD_CONFIG = ("task", "reward", "reward_config", "data", "steps", "lr", "kl_coef", "lora_rank",
               "lora_alpha", "lora_layers", "routing", "seed", "run_name")  # fmt: skip


class ExportError(errors.UserError, ValueError):
    """Something export cannot write; the message names the input and the fix."""


def source_dtype(src: load_weights.ModelSource) -> str:
    """The dtype the model's weights were made in: the config's `torch_dtype` (transformers 5:
    `dtype`) of the checkpoint or, for adapters, of their base; for a full checkpoint that
    records none, its stored float weights' dtype; a GGUF's float type, or float16 for a
    quantized GGUF (its scales are)."""
    if src.adapters:
        return source_dtype(src.base)
    if src.kind == "gguf":
        file_type = gguf_file_type(src.path)
        return {0: "float32", 32: "bfloat16"}.get(file_type, "float16")
    config = json.loads((src.path / "config.json").read_text())
    name = config.get("torch_dtype") or config.get("dtype") or stored_dtype(src.path)
    if name not in DTYPES:
        raise ExportError(f"{src.path / 'config.json'}: torch_dtype {name!r}; pass --dtype")
    return name


def stored_dtype(folder: Path) -> str:
    """The dtype of the float tensors in an HF folder's first weight file (read from the
    safetensors header: 8 bytes of length, then JSON); float32 when there are none."""
    path = sorted(folder.glob("model*.safetensors"))[:1]
    if not path:
        return "float32"
    with open(path[0], "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    kinds = {v["dtype"] for k, v in header.items() if k != "__metadata__"}
    names = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}
    floats = sorted(names[k] for k in kinds if k in names)
    return floats[0] if len(floats) == 1 else "float32"


def gguf_file_type(path: Path) -> int | None:
    _, metadata = mx.load(str(path), return_metadata=True)
    value = metadata.get("general.file_type")
    return None if value is None else int(value.item())


def merged_model(src: load_weights.ModelSource, adapters: str) -> tuple[Model, object]:
    """(plain float32 Model with every adapter folded in, tokenizer); a dual checkpoint's
    adapters at --adapters' scales."""
    if src.kind != "dual":
        return load_weights.load(src, mx.float32)
    model, tokenizer = load_weights.load(src, mx.float32, merge=False)
    lora.set_scales(model, *DUAL_MERGES[adapters])
    merged = Model(model.args)
    merged.load_weights(list(lora.merged_weights(model).items()), strict=True)
    mx.eval(merged.parameters())
    return merged, tokenizer


def eos_ids(model: Model, tokenizer) -> list[int]:
    cfg = model.args.eos_token_id
    ids = [*(cfg if isinstance(cfg, list) else [cfg]), tokenizer.eos_token_id]
    return sorted({i for i in ids if i is not None})


def hf_config(model: Model, tokenizer, dtype: str) -> dict:
    """config.json as transformers writes it, readable by transformers 4 and 5 and mlx_lm."""
    a = model.args
    if a.model_type not in ARCHITECTURES:
        raise ExportError(
            f"model_type {a.model_type!r} has no HF class here ({sorted(ARCHITECTURES)})"
        )
    theta = float(f"{a.rope_theta:.7g}")
    rope = {"rope_type": "default", **(a.rope_scaling or {}), "rope_theta": theta}
    eos = eos_ids(model, tokenizer)
    config = {
        "architectures": [ARCHITECTURES[a.model_type]],
        "model_type": a.model_type,
        "hidden_size": a.hidden_size,
        "intermediate_size": a.intermediate_size,
        "num_hidden_layers": a.num_hidden_layers,
        "num_attention_heads": a.num_attention_heads,
        "num_key_value_heads": a.num_key_value_heads,
        "head_dim": a.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": a.max_position_embeddings,
        "rms_norm_eps": float(f"{a.rms_norm_eps:.7g}"),  # a GGUF's is float32
        "rope_theta": theta,  # mlx_lm and transformers 4 read it here
        "rope_scaling": a.rope_scaling,
        "rope_parameters": rope,  # transformers 5 reads it here
        "tie_word_embeddings": a.tie_word_embeddings,
        "attention_bias": a.attention_bias,
        "vocab_size": a.vocab_size,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": eos[0] if len(eos) == 1 else eos,
        "pad_token_id": tokenizer.pad_token_id,
        "torch_dtype": dtype,
        "dtype": dtype,
        "use_cache": True,
    }
    if a.model_type == "llama":
        config["mlp_bias"] = a.mlp_bias
    return config


def write_tokenizer(tokenizer, folder: Path, max_length: int | None) -> None:
    """The tokenizer files, with the chat template in tokenizer_config.json (where mlx_lm,
    transformers 4 and LM Studio look) as well as in transformers 5's chat_template.jinja."""
    if not tokenizer.chat_template:
        raise ExportError("the model's tokenizer has no chat template: nothing to chat with")
    tokenizer.save_pretrained(str(folder))
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["chat_template"] = tokenizer.chat_template
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # transformers 4 and 5 both know it
    if max_length:
        config["model_max_length"] = max_length
    path.write_text(json.dumps(config, indent=1) + "\n")


def model_card(src, model: Model, dtype: str, a) -> str:
    """README.md: what the folder holds, where it came from, how it was trained, its figures."""
    chain, s = [], src
    while s is not None:
        chain.append(f"`{s.ref}` ({s.kind})")
        s = s.base
    name = Path(a.out).name
    quantized = f", {a.q_bits}-bit MLX affine quantized" if a.q_bits else ""
    lines = [
        f"# {name}",
        "",
        f"Exported by rl-values' export.py from `{src.ref}`: a {model.args.model_type} model, "
        f"{model.args.num_hidden_layers} blocks, hidden size {model.args.hidden_size}, "
        f"weights in {dtype}{quantized}.",
        "",
        "Made from: " + " on ".join(chain) + ".",
    ]
    if src.kind == "dual":
        lines.append(f"Dual adapters (gradient routing): merged `{a.adapters}` "
                     f"(retain, forget scales {DUAL_MERGES[a.adapters]}).")  # fmt: skip
    elif src.adapters:
        lines.append("LoRA adapters merged into the weights.")
    lines += [
        "",
        f"    mlx_lm.generate --model {a.out} --prompt 'Hello'",
        "",
        "rl-values tests that mlx_lm's greedy answers from such a folder equal its own sampler's "
        "(gwen.py, temperature 0); half precision rounds the merged weights (rl-values' "
        "knowledge/export.md has the figures).",
    ]
    if a.gguf:
        lines += ["", f"`{a.gguf_name}`: the same weights as GGUF for llama.cpp-based tools."]
    config = src.run_config
    if config:
        keys = CARD_CONFIG
        shown = {k: config[k] for k in keys if config.get(k) is not None}
        lines += ["", "## Run config (train_config.json)", "", "```json",
                  json.dumps(shown, indent=1), "```"]  # fmt: skip
    figures = run_figures(src.path)
    if figures:
        lines += ["", "## Evaluation figures the run logged", ""]
        lines += [f"- {k}: {v}" for k, v in figures.items()]
    card = src.path / "README.md"
    if card.is_file():
        lines += ["", f"## The source's card ({src.ref})", "", card.read_text().strip()]
    return "\n".join(lines) + "\n"


def run_figures(ckpt: Path) -> dict:
    """The latest eval figures a run logged (metrics.jsonl rows' `eval*` keys), if any."""
    for folder in (ckpt, ckpt.parent.parent):
        log = folder / "metrics.jsonl"
        if not log.is_file():
            continue
        found = {}
        for row in run_folder.read_metrics(log):
            found.update({k: v for k, v in row.items() if k.startswith("eval")})
        return found
    return {}


def write_folder(model: Model, tokenizer, out: Path, dtype: str, a, card: str) -> None:
    """The export folder, written whole or not at all."""
    model.set_dtype(DTYPES[dtype])  # float tensors only; the merged float32 weights are cast
    float_model = quant.dequantized_copy(model) if quant.quantized_layers(model) else model
    if a.q_bits:
        float_model = quant.copy_model(model)
        with errors.as_user_error(ValueError):
            quant.quantize_model(model, a.q_bits, a.group_size)
    config = hf_config(model, tokenizer, dtype)
    with atomic_folder(out) as tmp:
        quant.save_model(model, tokenizer, tmp)  # mlx-lm's layout, quantized or not
        q = quant.quantization_config(model)
        if q:
            config["quantization"] = config["quantization_config"] = q
        (tmp / "config.json").write_text(json.dumps(config, indent=1) + "\n")
        write_tokenizer(tokenizer, tmp, model.args.max_position_embeddings)
        generation = {k: config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
        (tmp / "generation_config.json").write_text(json.dumps(generation, indent=1) + "\n")
        (tmp / "README.md").write_text(card)
        if a.gguf:
            write_gguf(float_model, tokenizer, tmp / a.gguf_name, dtype)


# --- GGUF -------------------------------------------------------------------------------------


def gguf_pre_tokenizer(tokenizer_json: dict) -> str:
    """llama.cpp's name for the tokenizer's pre-tokenizer (the loader rebuilds each); ExportError
    for one it has no name for."""
    pre = tokenizer_json.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    kinds = [p.get("type") for p in parts]
    if kinds == ["ByteLevel"] and parts[0].get("use_regex", True):
        return "gpt-2"
    if kinds == ["Digits", "ByteLevel"] and parts[0].get("individual_digits"):
        return "smollm"
    if (
        kinds == ["Split", "ByteLevel"]
        and parts[0].get("pattern", {}).get("Regex") == gguf_reader.QWEN2_SPLIT
    ):
        return "qwen2"
    raise ExportError(
        f"the tokenizer's pre-tokenizer {kinds} is none that GGUF names here (gpt-2, smollm, "
        "qwen2): export without --gguf"
    )


def gguf_vocab(tokenizer, vocab_size: int) -> dict:
    """Tokens, token types, merges and the pre-tokenizer name of a byte-level BPE tokenizer,
    padded to the embedding's rows as llama.cpp's converter pads them ([PADn], unused)."""
    import gguf  # start-up: only --gguf needs the writer

    tj = json.loads(tokenizer.backend_tokenizer.to_str())
    model = tj.get("model", {})
    if model.get("type") != "BPE" or (tj.get("decoder") or {}).get("type") != "ByteLevel":
        raise ExportError(
            f"GGUF needs a byte-level BPE tokenizer; this one is {model.get('type')} with a "
            f"{(tj.get('decoder') or {}).get('type')} decoder: export without --gguf"
        )
    vocab = tokenizer.get_vocab()
    if len(vocab) > vocab_size:
        raise ExportError(f"the tokenizer has {len(vocab)} tokens, the model {vocab_size} rows")
    by_id = {i: t for t, i in vocab.items()}
    added = {t.content: t.special for t in tokenizer.added_tokens_decoder.values()}
    tokens, types = [], []
    for i in range(vocab_size):
        token = by_id.get(i)
        if token is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        else:
            tokens.append(token)
            kind = gguf.TokenType.CONTROL if added.get(token) else gguf.TokenType.USER_DEFINED
            types.append(kind if token in added else gguf.TokenType.NORMAL)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return {"tokens": tokens, "types": types, "merges": merges, "pre": gguf_pre_tokenizer(tj)}


def llama_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's Q/K row order for its interleaved RoPE (gguf_reader undoes it on reading):
    within each head, rows [0, d/2) and [d/2, d) are interleaved."""
    rows, cols = w.shape
    return w.reshape(n_heads, 2, rows // n_heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def gguf_tensors(model: Model) -> list[tuple[str, np.ndarray]]:
    """(GGUF name, float32 array) for every weight, in llama.cpp's names and row order."""
    import gguf  # start-up: only --gguf needs the writer

    a = model.args
    arch = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen3": gguf.MODEL_ARCH.QWEN3}[a.model_type]
    names = gguf.get_tensor_name_map(arch, a.num_hidden_layers)
    out = []
    for name, w in tree_flatten(model.parameters()):
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise ExportError(f"no GGUF name for the weight {name!r} of a {a.model_type} model")
        array = np.array(w.astype(mx.float32))
        if a.model_type == "llama" and name.endswith("q_proj.weight"):
            array = llama_permute(array, a.num_attention_heads)
        elif a.model_type == "llama" and name.endswith("k_proj.weight"):
            array = llama_permute(array, a.num_key_value_heads)
        out.append((gguf_name, array))
    return out


def write_gguf(model: Model, tokenizer, path: Path, dtype: str) -> None:
    """One GGUF file: metadata as llama.cpp's converter writes it, 2-D weights in `dtype` (F32,
    F16 or BF16), norms in F32 (as llama.cpp keeps them)."""
    import gguf  # start-up: only --gguf needs the writer

    a = model.args
    if a.model_type not in gguf_reader.ARCHS:
        raise ExportError(f"--gguf: architecture {a.model_type!r} is not written; GGUF here is "
                          f"for {', '.join(gguf_reader.ARCHS)}")  # fmt: skip
    if a.rope_scaling:
        raise ExportError(f"--gguf: RoPE scaling {a.rope_scaling} is not written: export "
                          "without --gguf")  # fmt: skip
    vocab = gguf_vocab(tokenizer, a.vocab_size)
    qtype = GGUF_TYPES[dtype]
    file_type = {"F32": "ALL_F32", "F16": "MOSTLY_F16", "BF16": "MOSTLY_BF16"}[qtype]
    w = gguf.GGUFWriter(str(path), a.model_type)
    w.add_name(path.stem)
    w.add_block_count(a.num_hidden_layers)
    w.add_context_length(a.max_position_embeddings or 4096)
    w.add_embedding_length(a.hidden_size)
    w.add_feed_forward_length(a.intermediate_size)
    w.add_head_count(a.num_attention_heads)
    w.add_head_count_kv(a.num_key_value_heads)
    w.add_key_length(a.head_dim)
    w.add_value_length(a.head_dim)
    w.add_rope_dimension_count(a.head_dim)
    w.add_rope_freq_base(a.rope_theta)
    w.add_layer_norm_rms_eps(a.rms_norm_eps)
    w.add_vocab_size(a.vocab_size)
    w.add_file_type(gguf.LlamaFileType[file_type])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(vocab["pre"])
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["types"])
    w.add_token_merges(vocab["merges"])
    eos = eos_ids(model, tokenizer)
    w.add_eos_token_id(tokenizer.eos_token_id if tokenizer.eos_token_id is not None else eos[0])
    if tokenizer.bos_token_id is not None:
        w.add_bos_token_id(tokenizer.bos_token_id)
    if tokenizer.pad_token_id is not None:
        w.add_pad_token_id(tokenizer.pad_token_id)
    adds_bos = tokenizer.bos_token_id in tokenizer.encode("a")
    w.add_add_bos_token(bool(adds_bos))
    w.add_chat_template(tokenizer.chat_template)
    for name, array in gguf_tensors(model):
        if array.ndim == 1 or qtype == "F32":
            w.add_tensor(name, array)
        elif qtype == "F16":
            w.add_tensor(name, array.astype(np.float16))
        else:
            bits = gguf.quants.quantize(array, gguf.GGMLQuantizationType.BF16)
            w.add_tensor(name, bits, raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# --- command ----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Export a model (a run, a checkpoint, a shipped adapter) as a standalone HF "
        "folder that mlx_lm and transformers read; optionally quantized, optionally with a GGUF.",
        allow_abbrev=False,
    )
    p.add_argument("--model", required=True, help=load_weights.MODEL_HELP)
    p.add_argument("--out", required=True, help="the folder to write (must not hold files)")
    p.add_argument("--force", action="store_true", help="replace a non-empty --out")
    p.add_argument("--base", default=None, help="an adapter checkpoint's base model (override)")
    p.add_argument(
        "--dtype",
        default=None,
        choices=sorted(DTYPES),
        help="the weights' dtype (default: the base's, config.json torch_dtype)",
    )
    p.add_argument("--adapters", default="retain", choices=sorted(DUAL_MERGES),
                   help="a dual-adapter checkpoint: merge the retain adapter alone (the "
                   "deployment, forget off) or both")  # fmt: skip
    p.add_argument("--q-bits", type=int, default=0, help="4 or 8: MLX affine quantization")
    p.add_argument("--group-size", type=int, default=64, help="quantization group size")
    p.add_argument("--gguf", action="store_true", help="also write a GGUF file (llama, qwen3)")
    return p


def check_args(a) -> Path:
    """The output folder, once the flags are known good (before any model loads)."""
    if a.q_bits:
        with errors.as_user_error(ValueError):
            quant.check_settings(a.q_bits, a.group_size)
    out = Path(a.out)
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file: name a folder")
    if out.is_dir() and any(out.iterdir()) and not a.force:
        raise ExportError(f"--out {out} already holds files: name a new folder, or pass --force")
    return out


@errors.cli
def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    out = check_args(a)
    src = load_weights.resolve(a.model, a.base)
    dtype = a.dtype or source_dtype(src)
    a.gguf_name = f"{out.name}-{GGUF_TYPES[dtype]}.gguf"
    backend.announce()
    model, tokenizer = merged_model(src, a.adapters)
    if a.gguf and model.args.model_type not in gguf_reader.ARCHS:
        raise ExportError(f"--gguf: architecture {model.args.model_type!r} is not written; GGUF "
                          f"here is for {', '.join(gguf_reader.ARCHS)}")  # fmt: skip
    card = model_card(src, model, dtype, a)
    write_folder(model, tokenizer, out, dtype, a, card)
    files = ", ".join(sorted(p.name for p in out.iterdir()))
    print(f"wrote {out} ({dtype}{f', {a.q_bits}-bit' if a.q_bits else ''}): {files}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
