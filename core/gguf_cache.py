"""A GGUF file's dequantized weights kept on disk, so the model loads without dequantizing again.

Dequantizing the embedded SmolLM2-135M (Q4_1) with MLX takes ~1.7 s of a ~3 s load on our 2-core
CPU; reading the same float32 weights from a safetensors file takes ~0.2 s, and every command, test
and rank loads the model anew. `cached(path, build)` returns the weights of the GGUF file `path`:
from the cache when a file for that content is there, else `build()`'s, which it stores (atomic
write). It stores exactly what `build()` returned (float32, HF names, Q/K rows already unpermuted),
so a load through it equals a GGUF load bit for bit. The key is the GGUF's sha256, MLX's version
(its dequantize decides the values) and FORMAT. The folder is $RL_VALUES_CACHE, else
$XDG_CACHE_HOME/rl-values/gguf (default ~/.cache); RL_VALUES_CACHE=off turns it off. About 540 MB
per 135M model; files of other MLX versions stay until the folder is deleted. A cache file that
cannot be read is reported on stderr and rebuilt; a folder that cannot be written is reported and
the load goes on without it. It is not a model cache: the tokenizer and config still come from the
GGUF's metadata, and other checkpoints load as before.
"""

import os
import sys
from collections.abc import Callable
from pathlib import Path

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core import atomic
from core.jsonl import file_sha256

import mlx.core as mx

ENV = "RL_VALUES_CACHE"
FORMAT = "1"  # bump when what build() returns changes (names, dtype, permutation)


def folder() -> Path | None:
    """Where cached weights live; None when $RL_VALUES_CACHE is 'off'."""
    value = os.environ.get(ENV, "")
    if value.lower() == "off":
        return None
    if value:
        return Path(value)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rl-values" / "gguf"


def _stamp(sha: str) -> dict[str, str]:
    return {"format": FORMAT, "gguf_sha256": sha, "mlx": mx.__version__}


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _not_float32(weights: dict[str, mx.array]) -> dict[str, str]:
    """{name: dtype} of the weights that are not float32 (what the cache stores)."""
    return {k: str(v.dtype) for k, v in weights.items() if v.dtype != mx.float32}


def _read(path: Path, stamp: dict) -> dict[str, mx.array] | None:
    """The cached weights, or None (with a warning) when the file is unreadable or not ours."""
    try:
        weights, meta = mx.load(str(path), return_metadata=True)
    except Exception as e:  # noqa: BLE001  (MLX raises several types for a bad file)
        _warn(f"cached weights {path} cannot be read ({e}); dequantizing the GGUF again")
        return None
    bad = [k for k in stamp if meta.get(k) != stamp[k]]
    bad += list(_not_float32(weights))
    if bad:
        _warn(f"cached weights {path} do not match ({bad[:3]}); dequantizing the GGUF again")
        return None
    return weights


def cached(gguf_path, build: Callable[[], dict[str, mx.array]]) -> dict[str, mx.array]:
    """`build()`'s float32 weights for the GGUF file `gguf_path`, read from the cache when it
    holds them, else built, evaluated and stored there."""
    where = folder()
    if where is None:
        return build()
    sha = file_sha256(gguf_path)
    stamp = _stamp(sha)
    path = where / f"{sha[:32]}-mlx{mx.__version__}-f{FORMAT}.safetensors"
    if path.exists():
        weights = _read(path, stamp)
        if weights is not None:
            return weights
    weights = build()
    wrong = _not_float32(weights)
    if wrong:
        raise ValueError(f"the GGUF cache stores float32 weights; build() gave {wrong}")
    mx.eval(list(weights.values()))
    try:
        with atomic.atomic_file(path, "wb") as f:
            mx.save_safetensors(f, weights, metadata=stamp)
    except OSError as e:
        _warn(
            f"cannot store dequantized weights in {where} ({e}); loading goes on without the "
            f"cache: set {ENV} to a writable folder, or to 'off'"
        )
    return weights
