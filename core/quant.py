"""Quantization primitives: MLX affine quantization of a model's transformer-block Linears.

The one rule (`quantizable`): MLX's own affine quantization (per group of `group_size` input
weights a scale and a bias; `bits` 8 or 4) of the Linear layers inside the transformer blocks
whose input size is a multiple of the group size. The embedding / LM head stays in float:
log-probs read its rows. `quantize_model` and `copy_model` apply it (rl/reference.py's quantized KL
reference uses them); `save_model` writes mlx-lm's folder layout (config.json gets
`quantization`: {group_size, bits}; the weights hold `weight`/`scales`/`biases` per quantized
Linear) and `prepare_quantized` readies a model for such a folder's weights (load_weights reads
quantized folders through it). It is not the command: quantize.py quantizes a policy or a reward
model and measures what was lost.
"""

import dataclasses
import json
from pathlib import Path

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)
from core.atomic import atomic_folder

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

BITS = (8, 4)
GROUP_SIZES = (32, 64, 128)  # MLX's affine group sizes


def check_settings(bits: int, group_size: int) -> None:
    if bits not in BITS:
        raise ValueError(f"bits={bits}: use 8 or 4 (MLX affine quantization)")
    if group_size not in GROUP_SIZES:
        raise ValueError(f"group_size={group_size}: use one of {GROUP_SIZES} (MLX affine groups)")


def block_linears(model) -> list[tuple[str, nn.Module]]:
    """(module path, Linear) for every Linear inside the transformer blocks."""
    return [
        (p, m)
        for p, m in model.named_modules()
        if isinstance(m, nn.Linear) and p.startswith("model.layers.")
    ]


def quantizable(path: str, module: nn.Module, group_size: int) -> bool:
    """The rule: a Linear inside a transformer block whose input size is a multiple of the
    group size. The embedding / LM head is not: log-probs read its float rows."""
    return (
        isinstance(module, nn.Linear)
        and path.startswith("model.layers.")
        and module.weight.shape[-1] % group_size == 0
    )


def quantized_layers(model) -> dict[str, dict]:
    """{module path: {group_size, bits}} for every quantized Linear of `model`."""
    return {
        p: {"group_size": m.group_size, "bits": m.bits}
        for p, m in model.named_modules()
        if isinstance(m, nn.QuantizedLinear)
    }


def quantize_model(model, bits: int, group_size: int) -> int:
    """Quantize `model`'s quantizable Linears in place; return how many. ValueError when the
    model is already quantized or no layer's input size is a multiple of `group_size`."""
    check_settings(bits, group_size)
    if quantized_layers(model):
        raise ValueError("the model is already quantized; quantize its float original instead")
    linears = block_linears(model)
    n = sum(quantizable(p, m, group_size) for p, m in linears)
    if n == 0:
        sizes = sorted({m.weight.shape[-1] for _, m in linears})
        raise ValueError(
            f"group_size={group_size}: no transformer-block Linear has an input size that is a "
            f"multiple of {group_size} (input sizes {sizes}); pick a group size dividing them"
        )
    nn.quantize(model, group_size, bits, class_predicate=lambda p, m: quantizable(p, m, group_size))
    return n


def copy_model(model, bits: int = 0, group_size: int = 64) -> nn.Module:
    """A new Model holding `model`'s weights (its quantized layers quantized alike); with
    `bits`, then quantized by `quantize_model`."""
    copy = type(model)(model.args)  # model.Model: core imports no card module
    layers = quantized_layers(model)
    if layers:
        nn.quantize(copy, class_predicate=lambda p, m: dict(layers[p]) if p in layers else False)
    copy.load_weights(tree_flatten(model.parameters()), strict=True)
    if bits:
        quantize_model(copy, bits, group_size)
    mx.eval(copy.parameters())
    return copy


def dequantized_copy(model) -> nn.Module:
    """A float Model computing what `model` computes: every quantized weight dequantized.
    On the CPU backend it runs ~50x faster than MLX's quantized matmul (knowledge/quantize.md)."""
    weights = dict(tree_flatten(model.parameters()))
    for p, m in model.named_modules():
        if isinstance(m, nn.QuantizedLinear):
            del weights[f"{p}.scales"], weights[f"{p}.biases"]
            weights[f"{p}.weight"] = mx.dequantize(
                m.weight, m.scales, m.biases, group_size=m.group_size, bits=m.bits
            )
    twin = type(model)(model.args)  # model.Model: core imports no card module
    twin.load_weights(list(weights.items()), strict=True)
    twin.eval()
    mx.eval(twin.parameters())
    return twin


def quantization_config(model) -> dict | None:
    """config.json's `quantization` entry: {group_size, bits}, or None for a float model."""
    settings = {tuple(sorted(v.items())) for v in quantized_layers(model).values()}
    if not settings:
        return None
    if len(settings) > 1:
        raise ValueError(f"mixed quantization settings {sorted(settings)}: not written here")
    return dict(settings.pop())


def save_model(model, tokenizer, out) -> Path:
    """An HF-layout folder, written atomically (temp folder, then rename): config.json (with
    mlx-lm's `quantization` and `quantization_config` when quantized), model.safetensors,
    the tokenizer files."""
    out = Path(out)
    config = {k: v for k, v in dataclasses.asdict(model.args).items() if v is not None}
    quant = quantization_config(model)
    if quant:
        config["quantization"] = config["quantization_config"] = quant
    weights = dict(tree_flatten(model.parameters()))
    with atomic_folder(out) as tmp:
        mx.save_safetensors(str(tmp / "model.safetensors"), weights, metadata={"format": "mlx"})
        (tmp / "config.json").write_text(json.dumps(config, indent=1) + "\n")
        tokenizer.save_pretrained(str(tmp))
    return out


def prepare_quantized(model, weights: dict, quant, source) -> dict:
    """Ready `model` for the weights of a quantized folder (config.json `quantization`): a
    quantized embedding / LM head (mlx-lm quantizes them) is dequantized, since log-probs read
    its float rows; then exactly the Linears the file holds scales for are quantized, with the
    config's settings or its per-layer entry. Returns the weights to load. ValueError naming
    `source` for a setting this project does not serve."""
    if not (isinstance(quant, dict) and {"group_size", "bits"} <= set(quant)):
        raise ValueError(f"{source}: quantization {quant!r} needs group_size and bits")
    if quant.get("mode", "affine") != "affine":
        raise ValueError(f"{source}: quantization mode {quant['mode']!r}; only affine is served")
    weights = dict(weights)

    def params(path):
        own = quant.get(path)
        return dict(own) if isinstance(own, dict) else None

    for name in ("model.embed_tokens", "lm_head"):
        if f"{name}.scales" in weights:
            p = params(name) or quant
            weights[f"{name}.weight"] = mx.dequantize(
                weights[f"{name}.weight"],
                weights.pop(f"{name}.scales"),
                weights.pop(f"{name}.biases"),
                group_size=p["group_size"],
                bits=p["bits"],
            )

    def predicate(path, module):
        if not isinstance(module, nn.Linear) or f"{path}.scales" not in weights:
            return False
        return params(path) or True

    nn.quantize(model, quant["group_size"], quant["bits"], class_predicate=predicate)
    return weights
