"""Process-wide MLX setup: which BLAS the CPU backend uses, which device runs, which dtype.

Import this module before `mlx` anywhere in the process. On Linux the `mlx-cpu` wheel links a
reference BLAS (~4 GFLOP/s float32 matmul on our 2-core machine); a system OpenBLAS loaded with
RTLD_GLOBAL before MLX is imported takes over its symbols (~150 GFLOP/s). There is no MLX setting
for this, so it must happen at import time. It is not a device manager: one process, one backend.
"""

import ctypes
import glob
import os
import sys

_OPENBLAS_PATTERNS = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas*.so*",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas*.so*",
    "/usr/lib/x86_64-linux-gnu/libopenblas*.so*",
    "/usr/lib64/libopenblas*.so*",
    "/usr/lib/libopenblas*.so*",
)


def _preload_openblas() -> str:
    if not sys.platform.startswith("linux"):
        return "platform BLAS"
    if "mlx.core" in sys.modules:
        return "MLX's bundled BLAS (mlx was imported before core/backend.py; OpenBLAS not loaded)"
    for pattern in _OPENBLAS_PATTERNS:
        for path in sorted(glob.glob(pattern)):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                return f"OpenBLAS ({path})"
            except OSError:
                continue
    return "MLX's bundled reference BLAS (slow: apt-get install libopenblas0-pthread)"


BLAS = _preload_openblas()
# The one switch for debugging: plain MLX ops everywhere (no CPU-tuned ops, no custom kernels).
PLAIN_ENV = "RL_VALUES_PLAIN_KERNELS"
# transformers prints an advisory about missing PyTorch on import; we use only its tokenizers.
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import mlx.core as mx  # noqa: E402  (must follow the preload)


def backend_name() -> str:
    """'metal', 'cuda' or 'cpu': the backend that runs MLX's default device."""
    if mx.default_device() == mx.cpu:
        return "cpu"
    if mx.metal.is_available():
        return "metal"
    if mx.cuda.is_available():
        return "cuda"
    return "cpu"


def plain_ops_requested() -> bool:
    """True when $RL_VALUES_PLAIN_KERNELS=1 asks for the plain-MLX twins everywhere."""
    return os.environ.get(PLAIN_ENV) == "1"


_DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}
DTYPE_NAMES = tuple(_DTYPES)  # what --dtype and $GWEN_DTYPE accept
# The GPU default for weights that name no dtype of their own (a GGUF, a config without
# torch_dtype): bfloat16 has float32's exponent range, so it cannot overflow where float32 would
# not, and it is what the Llama, Qwen and SmolLM families were trained in (knowledge/precision.md).
GPU_FALLBACK = "bfloat16"


def choose_dtype(backend: str, torch_dtype: str | None = None, override: str | None = None) -> str:
    """The dtype name a model loads in when no --dtype is given: `override` ($GWEN_DTYPE) if set;
    on CPU float32 (half-precision matmul has no BLAS path there); on Metal/CUDA the checkpoint's
    own `torch_dtype` (config.json) when it is one of DTYPE_NAMES, else GPU_FALLBACK. Pure: the
    backend's name and the config's value in, a name out."""
    if override:
        if override not in _DTYPES:
            raise ValueError(f"GWEN_DTYPE={override!r} is not one of {sorted(_DTYPES)}")
        return override
    if backend == "cpu":
        return "float32"
    return torch_dtype if torch_dtype in _DTYPES else GPU_FALLBACK


def config_dtype(config: dict) -> str | None:
    """The dtype a HF config.json says its weights are in (`torch_dtype`, or `dtype` as newer
    transformers write it); None when it names none."""
    value = config.get("torch_dtype") or config.get("dtype")
    return value if isinstance(value, str) else None


def default_dtype(torch_dtype: str | None = None) -> mx.Dtype:
    """The dtype of a model whose own is `torch_dtype` (None: it names none) on this process's
    backend, per choose_dtype; `GWEN_DTYPE=float32|float16|bfloat16` overrides."""
    return _DTYPES[choose_dtype(backend_name(), torch_dtype, os.environ.get("GWEN_DTYPE"))]


def parse_dtype(name: str | None) -> mx.Dtype | None:
    """--dtype's value as an MLX dtype; None (no --dtype) stays None: the loader then picks each
    model's own (default_dtype)."""
    if name is None:
        return None
    if name not in _DTYPES:
        raise ValueError(f"--dtype {name}: use one of {', '.join(_DTYPES)}")
    return _DTYPES[name]


def overflow_fix(dtype: mx.Dtype) -> str:
    """The fix a training command names when its loss turns non-finite with weights of `dtype`."""
    if dtype == mx.float16:
        return "lower --lr, or pass --dtype float32 or bfloat16 (float16 overflows past 65504)"
    return "lower --lr"


_announced = False


def announce() -> None:
    """Say once per process, in one line, which backend and BLAS are in use."""
    global _announced
    if not _announced:
        _announced = True
        print(f"[rl-values] backend={backend_name()} blas={BLAS}", file=sys.stderr)
