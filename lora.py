"""LoRA adapters for model.py's `Model`: wrap chosen Linear layers, train only the low-rank factors.

`apply_lora` freezes the whole model and swaps each targeted projection (q/k/v/o_proj,
gate/up/down_proj) for a `LoRALinear` whose output is base(x) + (alpha/r) * x A^T B^T, with
B = 0 at init so the model starts unchanged. Turning the adapters off (`adapters_disabled`)
gives back the exact base model, which serves as the frozen reference and judge with no second
copy of the weights. Adapters are saved in PEFT's file layout, and `merged_weights` folds them
into HF-named full weights for export. It is not PEFT: no dropout, no DoRA/QLoRA, no
per-module ranks, no adapters on the embedding or LM head.
"""

import json
from contextlib import contextmanager
from pathlib import Path

import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_unflatten

ADAPTER_FILE = "adapters.safetensors"
CONFIG_FILE = "adapter_config.json"
_PEFT_PREFIX = "base_model.model."


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        if rank < 1:
            raise ValueError(f"LoRA rank={rank} must be >= 1")
        out_dims, in_dims = base.weight.shape
        self.base = base
        self.base.freeze()
        bound = 1.0 / in_dims**0.5
        self.lora_a = mx.random.uniform(-bound, bound, (rank, in_dims))  # (r, in)
        self.lora_b = mx.zeros((out_dims, rank))  # (out, r)
        self.scale = alpha / rank
        # A plain attribute, not an array: toggling it changes no parameter tree. Inside an
        # mx.compile'd function it is read at trace time, so toggle it around the traced calls.
        self.enabled = True

    def __call__(self, x: mx.array) -> mx.array:
        y = self.base(x)
        if not self.enabled:
            return y
        z = (x @ self.lora_a.T) @ self.lora_b.T
        # lora_a/lora_b stay float32 for training; keep the activation dtype of the base model.
        return y + (self.scale * z).astype(y.dtype)


def lora_layers(model: nn.Module) -> list[tuple[str, LoRALinear]]:
    """(module path, layer) for every LoRALinear in the model, in module order."""
    return [(p, m) for p, m in model.named_modules() if isinstance(m, LoRALinear)]


def _target_names(model: nn.Module) -> list[str]:
    """Leaf names of the Linear layers inside the transformer blocks (LoRA-able targets)."""
    names = set()
    for layer in model.layers:
        for path, m in layer.named_modules():
            if isinstance(m, nn.Linear):
                names.add(path.split(".")[-1])
    return sorted(names)


def apply_lora(
    model: nn.Module,
    rank: int,
    alpha: float,
    targets: list[str],
    layers: list[int] | None = None,
) -> int:
    """Freeze the model, wrap every target Linear in LoRALinear; return the trainable count.

    `layers`: only these transformer blocks get adapters (default all)."""
    if lora_layers(model):
        raise ValueError("model already has LoRA adapters; apply_lora must be called once")
    valid = _target_names(model)
    unknown = sorted(set(targets) - set(valid))
    if unknown or not targets:
        raise ValueError(f"LoRA targets {unknown or targets} are not valid; choose from {valid}")
    n_layers = len(model.layers)
    if layers is not None and (not layers or not all(0 <= i < n_layers for i in layers)):
        raise ValueError(f"LoRA layers {layers} must be indices in [0, {n_layers})")
    model.freeze()
    wrapped = []
    for i, layer in enumerate(model.layers):
        if layers is not None and i not in layers:
            continue
        for path, m in layer.named_modules():
            if isinstance(m, nn.Linear) and path.split(".")[-1] in targets:
                wrapped.append((f"model.layers.{i}.{path}", LoRALinear(m, rank, alpha)))
    model.update_modules(tree_unflatten(wrapped))
    mx.eval([(lora.lora_a, lora.lora_b) for _, lora in wrapped])
    return sum(p.size for _, p in tree_flatten(model.trainable_parameters()))


def _require_lora(model: nn.Module) -> list[tuple[str, LoRALinear]]:
    layers = lora_layers(model)
    if not layers:
        raise ValueError("model has no LoRA adapters: call lora.apply_lora(model, ...) first")
    return layers


def set_adapters(model: nn.Module, enabled: bool) -> None:
    for _, layer in _require_lora(model):
        layer.enabled = enabled


@contextmanager
def adapters_disabled(model: nn.Module):
    """Run the base model (the frozen reference) inside the block; restore the previous state."""
    layers = _require_lora(model)
    before = [layer.enabled for _, layer in layers]
    set_adapters(model, False)
    try:
        yield model
    finally:
        for (_, layer), was in zip(layers, before, strict=True):
            layer.enabled = was


def _lora_config(model: nn.Module) -> tuple[int, float, list[str]]:
    """(r, alpha, sorted target leaf names) as the model's LoRA layers actually are."""
    layers = _require_lora(model)
    ranks = {layer.lora_a.shape[0] for _, layer in layers}
    alphas = {layer.scale * layer.lora_a.shape[0] for _, layer in layers}
    if len(ranks) != 1 or len(alphas) != 1:
        raise ValueError(f"LoRA layers have mixed ranks {ranks} or alphas {alphas}")
    targets = sorted({path.rsplit(".", 1)[-1] for path, _ in layers})
    return ranks.pop(), alphas.pop(), targets


def _check_config(model: nn.Module, rank: int, alpha: float, targets, source: str) -> None:
    m_rank, m_alpha, m_targets = _lora_config(model)
    if (m_rank, sorted(targets)) != (rank, m_targets) or abs(m_alpha - alpha) > 1e-6 * abs(alpha):
        raise ValueError(
            f"{source} has LoRA r={rank}, alpha={alpha}, targets={sorted(targets)} but the model "
            f"has r={m_rank}, alpha={m_alpha}, targets={m_targets}: apply_lora with the same config"
        )


def save_adapters(model: nn.Module, path_dir, rank: int, alpha: float, targets: list[str]) -> None:
    """Write adapters.safetensors (PEFT tensor names) and adapter_config.json into path_dir."""
    _check_config(model, rank, alpha, targets, "save_adapters arguments")
    path_dir = Path(path_dir)
    path_dir.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for path, layer in lora_layers(model):
        tensors[f"{_PEFT_PREFIX}{path}.lora_A.weight"] = layer.lora_a
        tensors[f"{_PEFT_PREFIX}{path}.lora_B.weight"] = layer.lora_b
    mx.save_safetensors(str(path_dir / ADAPTER_FILE), tensors)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": getattr(model, "name", None),
        "r": rank,
        "lora_alpha": alpha,
        "target_modules": sorted(targets),
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
    }
    layers = sorted({int(path.split(".")[2]) for path, _ in lora_layers(model)})
    if len(layers) < len(model.layers):  # PEFT's name for adapters in some blocks only
        config["layers_to_transform"] = layers
    (path_dir / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")


def load_adapters(model: nn.Module, path_dir) -> None:
    """Load save_adapters' output into a model prepared with apply_lora (same r/alpha/targets)."""
    path_dir = Path(path_dir)
    for name in (CONFIG_FILE, ADAPTER_FILE):
        if not (path_dir / name).exists():
            raise FileNotFoundError(f"{path_dir / name} not found: not a save_adapters folder")
    config = json.loads((path_dir / CONFIG_FILE).read_text())
    if config.get("peft_type") != "LORA":
        raise ValueError(f"{path_dir / CONFIG_FILE}: peft_type={config.get('peft_type')!r}")
    _check_config(model, config["r"], config["lora_alpha"], config["target_modules"], str(path_dir))
    tensors = mx.load(str(path_dir / ADAPTER_FILE))
    expected = {}
    for path, layer in lora_layers(model):
        expected[f"{_PEFT_PREFIX}{path}.lora_A.weight"] = (layer, "lora_a")
        expected[f"{_PEFT_PREFIX}{path}.lora_B.weight"] = (layer, "lora_b")
    missing, extra = sorted(expected.keys() - tensors.keys()), sorted(tensors.keys() - expected)
    if missing or extra:
        raise ValueError(
            f"{path_dir / ADAPTER_FILE} does not match the model: missing {missing[:4]} "
            f"({len(missing)}), unexpected {extra[:4]} ({len(extra)})"
        )
    for name, (layer, attr) in expected.items():
        old, new = getattr(layer, attr), tensors[name]
        if new.shape != old.shape:
            raise ValueError(f"{name}: file shape {new.shape} != model shape {old.shape}")
        setattr(layer, attr, new.astype(old.dtype))
    mx.eval([(layer.lora_a, layer.lora_b) for _, layer in lora_layers(model)])


def merged_weights(model: nn.Module) -> dict[str, mx.array]:
    """HF-named weights with each adapter folded in (W + scale * B @ A), whatever `enabled` is."""
    weights = dict(tree_flatten(model.parameters()))
    for path, layer in lora_layers(model):
        del weights[f"{path}.lora_a"], weights[f"{path}.lora_b"]
        w = weights.pop(f"{path}.base.weight")
        delta = layer.scale * (layer.lora_b.astype(mx.float32) @ layer.lora_a.astype(mx.float32))
        weights[f"{path}.weight"] = (w.astype(mx.float32) + delta).astype(w.dtype)
        if f"{path}.base.bias" in weights:
            weights[f"{path}.bias"] = weights.pop(f"{path}.base.bias")
    return weights
