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
        return "MLX's bundled BLAS (mlx was imported before backend.py; OpenBLAS not loaded)"
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


def default_dtype() -> mx.Dtype:
    """float32 on CPU (half-precision matmul has no BLAS path there), float16 on Metal/CUDA.

    `GWEN_DTYPE=float32|float16|bfloat16` overrides."""
    name = os.environ.get("GWEN_DTYPE")
    if name:
        if name not in _DTYPES:
            raise ValueError(f"GWEN_DTYPE={name!r} is not one of {sorted(_DTYPES)}")
        return _DTYPES[name]
    return mx.float32 if backend_name() == "cpu" else mx.float16


def parse_dtype(name: str | None) -> mx.Dtype:
    if name is None:
        return default_dtype()
    if name not in _DTYPES:
        raise ValueError(f"dtype {name!r} is not one of {sorted(_DTYPES)}")
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
