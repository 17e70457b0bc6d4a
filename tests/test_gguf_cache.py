"""The dequantized-GGUF cache: a load through it equals a GGUF load bit for bit, and a bad cache
file or folder is reported and worked around, never trusted."""

from core import gguf_cache, gguf_reader

import mlx.core as mx
import numpy as np
import pytest
from mlx.utils import tree_flatten

import load_weights


def weights_of(model) -> dict[str, np.ndarray]:
    return {k: np.array(v) for k, v in tree_flatten(model.parameters())}


@pytest.mark.slow
def test_embedded_model_loads_the_same_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(gguf_cache.ENV, "off")
    plain = weights_of(load_weights.load("smollm2-135m", mx.float32)[0])
    monkeypatch.setenv(gguf_cache.ENV, str(tmp_path))
    first = weights_of(load_weights.load("smollm2-135m", mx.float32)[0])
    files = list(tmp_path.glob("*.safetensors"))
    assert len(files) == 1, files
    built = []
    real = gguf_reader.hf_weights
    monkeypatch.setattr(gguf_reader, "hf_weights", lambda *a: built.append(1) or real(*a))
    second = weights_of(load_weights.load("smollm2-135m", mx.float32)[0])
    assert built == [], "the second load dequantized again instead of reading the cache"
    assert plain.keys() == first.keys() == second.keys()
    for k in plain:
        assert plain[k].dtype == second[k].dtype == np.float32, k
        assert np.array_equal(plain[k], first[k]) and np.array_equal(plain[k], second[k]), k


@pytest.fixture
def gguf(tmp_path, monkeypatch):
    """A stand-in GGUF file (only its bytes matter to the cache) and a cache folder."""
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF stand-in")
    monkeypatch.setenv(gguf_cache.ENV, str(tmp_path / "cache"))
    return path


def builder(calls):
    def build():
        calls.append(1)
        return {"a.weight": mx.arange(6, dtype=mx.float32).reshape(2, 3) / 7}

    return build


def test_second_call_reads_what_the_first_stored(gguf):
    calls = []
    a = gguf_cache.cached(gguf, builder(calls))
    b = gguf_cache.cached(gguf, builder(calls))
    assert calls == [1]
    assert np.array_equal(np.array(a["a.weight"]), np.array(b["a.weight"]))
    gguf.write_bytes(b"GGUF other content")  # new content: a new key, built again
    gguf_cache.cached(gguf, builder(calls))
    assert calls == [1, 1]


def test_unreadable_cache_file_is_reported_and_rebuilt(gguf, capsys):
    calls = []
    gguf_cache.cached(gguf, builder(calls))
    (stored,) = (gguf.parent / "cache").glob("*.safetensors")
    stored.write_bytes(stored.read_bytes()[:20])  # truncated
    out = gguf_cache.cached(gguf, builder(calls))
    assert calls == [1, 1]
    err = capsys.readouterr().err
    assert "warning: cached weights" in err and str(stored) in err, err
    assert np.allclose(np.array(out["a.weight"]), np.arange(6).reshape(2, 3) / 7)
    gguf_cache.cached(gguf, builder(calls))  # the rebuilt file is whole again
    assert calls == [1, 1]


def test_a_file_stamped_for_other_content_is_not_trusted(gguf, capsys):
    calls = []
    gguf_cache.cached(gguf, builder(calls))
    (stored,) = (gguf.parent / "cache").glob("*.safetensors")
    mx.save_safetensors(str(stored), {"a.weight": mx.zeros((2, 3))}, metadata={"format": "0"})
    out = gguf_cache.cached(gguf, builder(calls))
    assert calls == [1, 1]
    assert "do not match" in capsys.readouterr().err
    assert float(np.array(out["a.weight"]).sum()) > 0


def test_off_stores_nothing(gguf, monkeypatch):
    monkeypatch.setenv(gguf_cache.ENV, "off")
    calls = []
    gguf_cache.cached(gguf, builder(calls))
    gguf_cache.cached(gguf, builder(calls))
    assert calls == [1, 1]
    assert not (gguf.parent / "cache").exists()


def test_unwritable_folder_is_reported_and_the_load_goes_on(gguf, monkeypatch, capsys):
    blocker = gguf.parent / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv(gguf_cache.ENV, str(blocker))
    out = gguf_cache.cached(gguf, builder([]))
    assert "a.weight" in out
    err = capsys.readouterr().err
    assert "cannot store dequantized weights" in err and gguf_cache.ENV in err, err


def test_build_must_give_float32(gguf):
    with pytest.raises(ValueError, match="float32"):
        gguf_cache.cached(gguf, lambda: {"a.weight": mx.zeros((2,), dtype=mx.float16)})


def test_folder_defaults_under_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(gguf_cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert gguf_cache.folder() == tmp_path / "rl-values" / "gguf"
    monkeypatch.setenv(gguf_cache.ENV, "OFF")
    assert gguf_cache.folder() is None
