"""LoRA adapters for model.py's `Model`: wrap chosen Linear layers, train only the low-rank factors.

`apply_lora` freezes the whole model and swaps each targeted projection (q/k/v/o_proj,
gate/up/down_proj) for a `LoRALinear` whose output is base(x) + (alpha/r) * x A^T B^T, with
B = 0 at init so the model starts unchanged. Turning the adapters off (`adapters_disabled`)
gives back the exact base model, which serves as the frozen reference and judge with no second
copy of the weights. Adapters are saved in PEFT's file layout, and `merged_weights` folds them
(plain or dual) into HF-named full weights for export. `DualLoRALinear` (gradient routing,
rl/routing.py) holds two independently initialized adapters, retain and forget, each with its own
output scale (`set_scales`); it is saved as two PEFT adapter folders whose ranks are read back
from the tensors. It is not PEFT: no dropout, no DoRA/QLoRA, no per-module ranks, no adapters
on the embedding or LM head.
"""

import json
import math
import re
from contextlib import contextmanager
from pathlib import Path

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten, tree_unflatten

ADAPTER_FILE = "adapters.safetensors"
CONFIG_FILE = "adapter_config.json"
_PEFT_PREFIX = "base_model.model."
_LAYER = re.compile(r"\.layers\.(\d+)\.")


def _adapter_init(base: nn.Linear, rank: int) -> tuple[mx.array, mx.array]:
    """One adapter's starting (A, B) for `base`: A uniform in +-1/sqrt(in) (one draw from MLX's
    global RNG), B zero, so a fresh adapter leaves the layer's output unchanged."""
    out_dims, in_dims = base.weight.shape
    bound = 1.0 / in_dims**0.5
    return mx.random.uniform(-bound, bound, (rank, in_dims)), mx.zeros((out_dims, rank))


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        if rank < 1:
            raise ValueError(f"LoRA rank={rank} must be >= 1")
        self.base = base
        self.base.freeze()
        self.lora_a, self.lora_b = _adapter_init(base, rank)  # (r, in), (out, r)
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


class DualLoRALinear(nn.Module):
    """base(x) + scale * x [A_r; A_f]^T [s_r B_r, s_f B_f]^T: two adapters, retain (r) and
    forget (f), drawn independently. scale = alpha / (r_r + r_f), so at scales (1, 1) the layer is
    exactly a rank r_r + r_f LoRALinear with the two adapters' rows stacked (the routing
    baseline). `retain_scale`/`forget_scale` weight each adapter's output (set_scales);
    `stop_retain` passes no gradient to the retain adapter's parameters (gradient routing:
    flagged completions train only the forget one) while every other path is unchanged."""

    def __init__(self, base: nn.Linear, retain_rank: int, forget_rank: int, alpha: float):
        super().__init__()
        if retain_rank < 1 or forget_rank < 1:
            raise ValueError(
                f"retain rank {retain_rank} and forget rank {forget_rank} must be >= 1"
            )
        self.base = base
        self.base.freeze()
        # retain drawn first, then forget: the stacked rows of one rank r_r + r_f draw
        self.retain_a, self.retain_b = _adapter_init(base, retain_rank)  # (r_r, in), (out, r_r)
        self.forget_a, self.forget_b = _adapter_init(base, forget_rank)  # (r_f, in), (out, r_f)
        self.scale = alpha / (retain_rank + forget_rank)
        # Plain attributes like LoRALinear.enabled: no parameter tree changes, read at trace time.
        self.retain_scale, self.forget_scale = 1.0, 1.0
        self.enabled = True
        self.stop_retain = False

    def __call__(self, x: mx.array) -> mx.array:
        y = self.base(x)
        if not self.enabled:
            return y
        ra, rb = self.retain_a, self.retain_b
        if self.stop_retain:  # the retain parameters' gradient is exactly zero
            ra, rb = mx.stop_gradient(ra), mx.stop_gradient(rb)
        # One stacked product, the same arithmetic as a rank r_r + r_f LoRALinear.
        a = mx.concatenate([ra, self.forget_a], axis=0)  # (r_r + r_f, in)
        b = mx.concatenate([self.retain_scale * rb, self.forget_scale * self.forget_b], axis=1)
        z = (x @ a.T) @ b.T
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


def _wrap(model: nn.Module, targets: list[str], layers: list[int] | None, make) -> int:
    """Freeze the model and replace every target Linear (in `layers`) by make(linear)."""
    if adapters_of(model):
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
                wrapped.append((f"model.layers.{i}.{path}", make(m)))
    model.update_modules(tree_unflatten(wrapped))
    mx.eval([m.trainable_parameters() for _, m in wrapped])
    return sum(p.size for _, p in tree_flatten(model.trainable_parameters()))


def apply_lora(
    model: nn.Module,
    rank: int,
    alpha: float,
    targets: list[str],
    layers: list[int] | None = None,
) -> int:
    """Freeze the model, wrap every target Linear in LoRALinear; return the trainable count.

    `layers`: only these transformer blocks get adapters (default all)."""
    return _wrap(model, targets, layers, lambda m: LoRALinear(m, rank, alpha))


def apply_dual_lora(
    model: nn.Module,
    retain_rank: int,
    forget_rank: int,
    alpha: float,
    targets: list[str],
    layers: list[int] | None = None,
) -> int:
    """Like apply_lora with DualLoRALinear layers (retain, then forget drawn from MLX's RNG)."""
    return _wrap(
        model, targets, layers, lambda m: DualLoRALinear(m, retain_rank, forget_rank, alpha)
    )


def _require_lora(model: nn.Module) -> list[tuple[str, LoRALinear]]:
    layers = lora_layers(model)
    if not layers:
        raise ValueError("model has no LoRA adapters: call lora.apply_lora(model, ...) first")
    return layers


def adapters_of(model: nn.Module) -> list:
    """Every adapter layer, plain or dual, in module order."""
    return [(p, m) for p, m in model.named_modules() if isinstance(m, LoRALinear | DualLoRALinear)]


def _require_adapters(model: nn.Module) -> list:
    layers = adapters_of(model)
    if not layers:
        raise ValueError("model has no LoRA adapters: call lora.apply_lora(model, ...) first")
    return layers


def set_adapters(model: nn.Module, enabled: bool) -> None:
    for _, layer in _require_adapters(model):
        layer.enabled = enabled


@contextmanager
def adapters_disabled(model: nn.Module):
    """Run the base model (the frozen reference) inside the block; restore the previous state."""
    layers = _require_adapters(model)
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


def _peft_names(path: str) -> tuple[str, str]:
    return f"{_PEFT_PREFIX}{path}.lora_A.weight", f"{_PEFT_PREFIX}{path}.lora_B.weight"


def _write_peft(
    path_dir: Path, tensors: dict, rank: int, alpha: float, targets, base, n_blocks: int
) -> None:
    """One PEFT adapter folder: adapters.safetensors and adapter_config.json; the blocks that
    hold adapters (read off the tensor names) go in layers_to_transform when not all do."""
    path_dir.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(path_dir / ADAPTER_FILE), tensors)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base,
        "r": rank,
        "lora_alpha": alpha,
        "target_modules": sorted(targets),
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
    }
    layers = sorted({int(name[len(_PEFT_PREFIX) :].split(".")[2]) for name in tensors})
    if len(layers) < n_blocks:  # PEFT's name for adapters in some blocks only
        config["layers_to_transform"] = layers
    (path_dir / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")


def _read_peft(path_dir: Path) -> tuple[dict, dict]:
    """(adapter_config, tensors) of a PEFT adapter folder; clear errors for a wrong folder."""
    for name in (CONFIG_FILE, ADAPTER_FILE):
        if not (path_dir / name).exists():
            raise FileNotFoundError(f"{path_dir / name} not found: not a save_adapters folder")
    config = json.loads((path_dir / CONFIG_FILE).read_text())
    if config.get("peft_type") != "LORA":
        raise ValueError(f"{path_dir / CONFIG_FILE}: peft_type={config.get('peft_type')!r}")
    return config, mx.load(str(path_dir / ADAPTER_FILE))


def _assign(expected: dict, tensors: dict, source: Path) -> None:
    """Set each expected {tensor name: (layer, attribute)} from `tensors`, shapes checked."""
    missing, extra = sorted(expected.keys() - tensors.keys()), sorted(tensors.keys() - expected)
    if missing or extra:
        raise ValueError(
            f"{source} does not match the model: missing {missing[:4]} "
            f"({len(missing)}), unexpected {extra[:4]} ({len(extra)})"
        )
    for name, (layer, attr) in expected.items():
        old, new = getattr(layer, attr), tensors[name]
        if new.shape != old.shape:
            raise ValueError(f"{name}: file shape {new.shape} != model shape {old.shape}")
        setattr(layer, attr, new.astype(old.dtype))
    mx.eval([getattr(layer, attr) for layer, attr in expected.values()])


def save_adapters(model: nn.Module, path_dir, rank: int, alpha: float, targets: list[str]) -> None:
    """Write adapters.safetensors (PEFT tensor names) and adapter_config.json into path_dir."""
    _check_config(model, rank, alpha, targets, "save_adapters arguments")
    tensors = {}
    for path, layer in lora_layers(model):
        a_name, b_name = _peft_names(path)
        tensors[a_name], tensors[b_name] = layer.lora_a, layer.lora_b
    base = getattr(model, "name", None)
    _write_peft(Path(path_dir), tensors, rank, alpha, targets, base, len(model.layers))


def load_adapters(model: nn.Module, path_dir) -> None:
    """Load save_adapters' output into a model prepared with apply_lora (same r/alpha/targets)."""
    path_dir = Path(path_dir)
    config, tensors = _read_peft(path_dir)
    _check_config(model, config["r"], config["lora_alpha"], config["target_modules"], str(path_dir))
    expected = {}
    for path, layer in lora_layers(model):
        a_name, b_name = _peft_names(path)
        expected[a_name], expected[b_name] = (layer, "lora_a"), (layer, "lora_b")
    _assign(expected, tensors, path_dir / ADAPTER_FILE)


def adapter_info(path_dir) -> dict:
    """{"rank", "alpha", "targets"} of a save_adapters folder, the rank read from the tensors
    (a config whose `r` disagrees with them is refused)."""
    path_dir = Path(path_dir)
    config, tensors = _read_peft(path_dir)
    ranks = {t.shape[0] for name, t in tensors.items() if name.endswith(".lora_A.weight")}
    if len(ranks) != 1:
        raise ValueError(f"{path_dir / ADAPTER_FILE}: lora_A ranks {sorted(ranks)}, expected one")
    rank = ranks.pop()
    if config.get("r") != rank:
        raise ValueError(
            f"{path_dir / CONFIG_FILE} says r={config.get('r')} but the tensors have rank {rank}"
        )
    layers = sorted({int(m.group(1)) for m in map(_LAYER.search, tensors) if m})
    return {
        "rank": rank,
        "alpha": config["lora_alpha"],
        "targets": config["target_modules"],
        "layers": layers,
    }


# ----------------------------------------------------------------------------------------------
# Dual adapters (gradient routing): a folder with retain/ and forget/, each a PEFT adapter

DUAL_ADAPTERS = ("retain", "forget")


def dual_layers(model: nn.Module) -> list[tuple[str, DualLoRALinear]]:
    return [(p, m) for p, m in model.named_modules() if isinstance(m, DualLoRALinear)]


def _require_dual(model: nn.Module) -> list[tuple[str, DualLoRALinear]]:
    layers = dual_layers(model)
    if not layers:
        raise ValueError("model has no dual adapters: call lora.apply_dual_lora(model, ...) first")
    return layers


def set_scales(model: nn.Module, retain: float, forget: float) -> None:
    """Weight each adapter's output in every DualLoRALinear: (1, 1) both, (1, 0) retain only,
    (0, 1) forget only, or any finite values (the forget-scale sweep)."""
    for name, value in (("retain", retain), ("forget", forget)):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not (number and math.isfinite(value)):
            raise ValueError(f"{name} scale {value!r} must be a finite number, e.g. 0 or 1")
    for _, layer in _require_dual(model):
        layer.retain_scale, layer.forget_scale = float(retain), float(forget)


@contextmanager
def scaled(model: nn.Module, retain: float, forget: float):
    """set_scales inside the block; the previous scales are restored after it."""
    layers = _require_dual(model)
    before = [(layer.retain_scale, layer.forget_scale) for _, layer in layers]
    set_scales(model, retain, forget)
    try:
        yield model
    finally:
        for (_, layer), (r, f) in zip(layers, before, strict=True):
            layer.retain_scale, layer.forget_scale = r, f


@contextmanager
def retain_frozen(model: nn.Module, frozen: bool = True):
    """With `frozen`, the retain adapters pass no gradient inside the block (rl/routing.py)."""
    layers = _require_dual(model)
    before = [layer.stop_retain for _, layer in layers]
    for _, layer in layers:
        layer.stop_retain = frozen
    try:
        yield model
    finally:
        for (_, layer), was in zip(layers, before, strict=True):
            layer.stop_retain = was


def _dual_config(model: nn.Module) -> dict:
    """{"retain_rank", "forget_rank", "alpha", "targets"} as the model's dual layers are."""
    layers = _require_dual(model)
    shapes = {(layer.retain_a.shape[0], layer.forget_a.shape[0]) for _, layer in layers}
    scales = {layer.scale for _, layer in layers}
    if len(shapes) != 1 or len(scales) != 1:
        raise ValueError(f"dual LoRA layers have mixed ranks {shapes} or scales {scales}")
    (retain_rank, forget_rank), scale = shapes.pop(), scales.pop()
    return {
        "retain_rank": retain_rank,
        "forget_rank": forget_rank,
        "alpha": scale * (retain_rank + forget_rank),
        "targets": sorted({path.rsplit(".", 1)[-1] for path, _ in layers}),
    }


def is_dual_folder(path_dir) -> bool:
    return all((Path(path_dir) / name / CONFIG_FILE).exists() for name in DUAL_ADAPTERS)


def save_dual_adapters(model: nn.Module, path_dir, alpha: float, targets: list[str]) -> None:
    """Write path_dir/retain/ and path_dir/forget/, each a PEFT adapter folder whose
    lora_alpha / r equals the dual layer's scale, so either loads alone into a plain
    LoRALinear of its rank (the retain adapter alone is the deployable model)."""
    have = _dual_config(model)
    if sorted(targets) != have["targets"] or abs(have["alpha"] - alpha) > 1e-6 * abs(alpha):
        raise ValueError(
            f"save_dual_adapters arguments alpha={alpha}, targets={sorted(targets)} do not match "
            f"the model's alpha={have['alpha']}, targets={have['targets']}"
        )
    scale = alpha / (have["retain_rank"] + have["forget_rank"])
    layers = dual_layers(model)
    for name in DUAL_ADAPTERS:
        tensors = {}
        for path, layer in layers:
            a_name, b_name = _peft_names(path)
            tensors[a_name] = getattr(layer, f"{name}_a")
            tensors[b_name] = getattr(layer, f"{name}_b")
        rank = have[f"{name}_rank"]
        base = getattr(model, "name", None)
        _write_peft(
            Path(path_dir) / name, tensors, rank, scale * rank, targets, base, len(model.layers)
        )


def dual_adapter_info(path_dir) -> dict:
    """{"retain_rank", "forget_rank", "alpha", "targets"} of a save_dual_adapters folder, ranks
    read from the tensors: enough to rebuild the model with apply_dual_lora."""
    info = {name: adapter_info(Path(path_dir) / name) for name in DUAL_ADAPTERS}
    r, f = info["retain"], info["forget"]
    if sorted(r["targets"]) != sorted(f["targets"]):
        raise ValueError(f"{path_dir}: retain and forget adapters target different layers")
    scales = {name: i["alpha"] / i["rank"] for name, i in info.items()}
    if abs(scales["retain"] - scales["forget"]) > 1e-6 * abs(scales["retain"]):
        raise ValueError(f"{path_dir}: retain and forget adapters have different scales {scales}")
    return {
        "retain_rank": r["rank"],
        "forget_rank": f["rank"],
        "alpha": scales["retain"] * (r["rank"] + f["rank"]),
        "targets": sorted(r["targets"]),
        "layers": r["layers"],
    }


def load_dual_adapters(model: nn.Module, path_dir) -> None:
    """Load save_dual_adapters' output into a model prepared with apply_dual_lora (same ranks,
    alpha and targets; dual_adapter_info reads them from the folder)."""
    path_dir = Path(path_dir)
    want, have = dual_adapter_info(path_dir), _dual_config(model)
    same = all(want[k] == have[k] for k in ("retain_rank", "forget_rank", "targets"))
    if not same or abs(want["alpha"] - have["alpha"]) > 1e-6 * abs(have["alpha"]):
        raise ValueError(
            f"{path_dir} has dual LoRA {want} but the model has {have}: apply_dual_lora with the "
            "same config (dual_adapter_info reads it from the folder)"
        )
    layers = dual_layers(model)
    for name in DUAL_ADAPTERS:
        _, tensors = _read_peft(path_dir / name)
        expected = {}
        for path, layer in layers:
            a_name, b_name = _peft_names(path)
            expected[a_name], expected[b_name] = (layer, f"{name}_a"), (layer, f"{name}_b")
        _assign(expected, tensors, path_dir / name / ADAPTER_FILE)


def merged_weights(model: nn.Module) -> dict[str, mx.array]:
    """HF-named weights with each adapter folded in (W + scale * B @ A; a dual layer's two
    adapters at their current retain / forget scales), whatever `enabled` is."""
    weights = dict(tree_flatten(model.parameters()))
    for path, layer in adapters_of(model):
        if isinstance(layer, DualLoRALinear):
            names = ("retain_a", "retain_b", "forget_a", "forget_b")
            a = mx.concatenate([layer.retain_a, layer.forget_a], axis=0)  # (r_r + r_f, in)
            b = mx.concatenate(
                [layer.retain_scale * layer.retain_b, layer.forget_scale * layer.forget_b], axis=1
            )  # (out, r_r + r_f)
        else:
            names, a, b = ("lora_a", "lora_b"), layer.lora_a, layer.lora_b
        for name in names:
            del weights[f"{path}.{name}"]
        w = weights.pop(f"{path}.base.weight")
        delta = layer.scale * (b.astype(mx.float32) @ a.astype(mx.float32))
        weights[f"{path}.weight"] = (w.astype(mx.float32) + delta).astype(w.dtype)
        if f"{path}.base.bias" in weights:
            weights[f"{path}.bias"] = weights.pop(f"{path}.base.bias")
    return weights
