"""Builds once (into a cache folder) and loads rl_cpu_ext: fused float32 CPU kernels for MLX.

native/rl_cpu_ext.cpp holds RMSNorm, silu(g)*u, attention's masked softmax (forward and backward),
fused decode and prefill attention and the LM head's row statistics, each an MLX `Primitive`
whose eval_cpu runs vectorized (AVX2+FMA where the CPU has it) over the machine's threads. It is
compiled on first use with CMake, the system C++ compiler, nanobind and the MLX wheel's CMake
config, keyed by the sources and the MLX, nanobind and Python versions. Anything that fails (no
compiler, an ABI mismatch, a wrong smoke-test value) leaves `load()` returning None after ONE
`note:` line, and cpu_ops uses its plain-MLX path. Only for the CPU backend: Metal and CUDA never
load it.
$RL_VALUES_CPU_EXT=0 turns it off; =fail forces a build failure (tests).
"""

import fcntl
import functools
import hashlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from core import backend

# isort: split
import mlx.core as mx

# The build tools (Linux dependencies in pyproject); any may be missing, which only means no build.
try:
    import nanobind
except ImportError:
    nanobind = None
try:
    import cmake
except ImportError:
    cmake = None
try:
    import ninja
except ImportError:
    ninja = None

SOURCE_DIR = Path(__file__).resolve().parent.parent / "native"
EXT_ENV = "RL_VALUES_CPU_EXT"
CACHE_ENV = "RL_VALUES_CPU_EXT_DIR"
MODULE = "rl_cpu_ext"
BUILD_TIMEOUT_S = 900


class BuildError(RuntimeError):
    pass


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rl-values" / "cpu-ext"


def build_key() -> str:
    """Changes with the sources and every version the binary depends on."""
    h = hashlib.sha256()
    for path in sorted(SOURCE_DIR.iterdir()):
        if path.is_file():
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    nb_version = nanobind.__version__ if nanobind else "none"
    parts = (mx.__version__, nb_version, sys.version, platform.machine())
    h.update("|".join(parts).encode())
    return h.hexdigest()[:16]


def _cmake() -> str:
    if cmake is not None:
        return str(Path(cmake.CMAKE_BIN_DIR) / "cmake")
    found = shutil.which("cmake")
    if not found:
        raise BuildError("no cmake (uv sync installs it; or apt-get install cmake)")
    return found


def _run(cmd: list[str], log, env: dict) -> None:
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    try:
        done = subprocess.run(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=BUILD_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"{Path(cmd[0]).name} failed to run: {e}") from e
    if done.returncode != 0:
        step = "build" if "--build" in cmd else "configure"
        raise BuildError(f"cmake {step} exited {done.returncode}; log: {log.name}")


def build(out_dir: Path) -> Path:
    """Compiles native/ into out_dir/<module>.so (atomically); returns the library's path."""
    if os.environ.get(EXT_ENV) == "fail":
        raise BuildError(f"build forced to fail by ${EXT_ENV}=fail")
    out_dir.mkdir(parents=True, exist_ok=True)
    if nanobind is None:
        raise BuildError("nanobind is not installed (uv sync installs it on Linux)")
    cmake_bin = _cmake()
    print(f"building the fused CPU kernels once into {out_dir} (1-3 min)", file=sys.stderr)
    mlx_dir = Path(mx.__file__).resolve().parent
    log_path = out_dir / "build.log"
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp, open(log_path, "w") as log:
        args = [
            cmake_bin, "-S", str(SOURCE_DIR), "-B", tmp, "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dnanobind_ROOT={nanobind.cmake_dir()}", f"-DMLX_ROOT={mlx_dir}",
        ]  # fmt: skip
        env = dict(os.environ)
        if ninja is not None:
            env["PATH"] = ninja.BIN_DIR + os.pathsep + env.get("PATH", "")
        if ninja is not None or shutil.which("ninja"):
            args += ["-G", "Ninja"]
        _run(args, log, env)
        _run([cmake_bin, "--build", tmp, "--parallel", str(os.cpu_count() or 1)], log, env)
        built = sorted(Path(tmp).glob(f"{MODULE}*.so"))
        if not built:
            raise BuildError(f"the build made no {MODULE}*.so (log: {log_path})")
        final = out_dir / built[0].name
        shutil.copy2(built[0], out_dir / (built[0].name + ".tmp"))
        os.replace(out_dir / (built[0].name + ".tmp"), final)
    return final


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(MODULE, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _smoke_test(ext) -> None:
    """One small call of each kernel against plain MLX, so a broken binary is never used."""
    x = mx.array([[0.5, -1.0, 2.0], [0.0, 0.0, 0.0]])
    w = mx.array([1.0, 2.0, -0.5])
    want = x * mx.rsqrt(mx.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w
    got = ext.rms_norm(x, w, 1e-5)
    if not mx.allclose(got, want, atol=1e-5).item():
        raise BuildError(f"rms_norm smoke test: got {got.tolist()}, want {want.tolist()}")
    got = ext.silu_mul(x, w * x)
    want = x * mx.sigmoid(x) * (w * x)
    if not mx.allclose(got, want, atol=1e-5).item():
        raise BuildError(f"silu_mul smoke test: got {got.tolist()}, want {want.tolist()}")
    mask = mx.array([[True, False, True]])
    got = ext.masked_softmax(x, mask)
    want = mx.softmax(mx.where(mask, x, -mx.inf), axis=-1)
    if not mx.allclose(got, want, atol=1e-5).item():
        raise BuildError(f"masked_softmax smoke test: got {got.tolist()}, want {want.tolist()}")
    q, k = x[None, :, None], mx.stack([x[0], x[1], w])[None, None]  # (1, 2, 1, 3), (1, 1, 3, 3)
    got = ext.decode_attention(q, k, k + 1.0, mask[None, None], 0.5)
    want = mx.fast.scaled_dot_product_attention(q, k, k + 1.0, scale=0.5, mask=mask[None, None])
    if not mx.allclose(got, want, atol=1e-5).item():
        raise BuildError(f"decode_attention smoke test: got {got.tolist()}, want {want.tolist()}")
    got = ext.prefill_attention(q, k, k + 1.0, mask[None, None], 0.5)[0]
    if not mx.allclose(got, want, atol=1e-5).item():
        raise BuildError(f"prefill_attention smoke test: got {got.tolist()}, want {want.tolist()}")


def wanted() -> bool:
    """The kernels are for MLX's CPU backend only, and not when plain ops or off is asked."""
    return (
        backend.backend_name() == "cpu"
        and not backend.plain_ops_requested()
        and os.environ.get(EXT_ENV) != "0"
    )


@functools.cache
def load():
    """The rl_cpu_ext module, built on first use; None (after one `note:` line) if it can't be."""
    if not wanted():
        return None
    try:
        out_dir = cache_root() / build_key()
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(out_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time (ranks, parallel tests)
            found = sorted(out_dir.glob(f"{MODULE}*.so"))
            if found and os.environ.get(EXT_ENV) != "fail":
                path = found[0]
            else:
                path = build(out_dir)
        ext = _import(path)
        _smoke_test(ext)
        return ext
    except Exception as e:  # any failure means: the plain path, said once
        print(f"note: fused CPU kernels unavailable ({type(e).__name__}: {e}); "
              "using plain MLX ops", file=sys.stderr)  # fmt: skip
        return None
