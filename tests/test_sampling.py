"""The token samplers: distributions, log-probs under the tempered softmax, top-p, NaN checks."""

from core import (
    backend,  # noqa: F401
    sampling,
)
from core.sampling import make_sampler, sample_mlx, sample_numpy

import mlx.core as mx
import numpy as np
import pytest


def _categorical_check(sampler_fn):
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    batch = np.tile(logits, (20000, 1))
    tokens, logp = sampler_fn(batch, 1.0)
    freq = np.bincount(tokens, minlength=4) / len(tokens)
    assert np.allclose(freq, [0.5, 0.3, 0.15, 0.05], atol=0.015), freq
    assert np.allclose(logp, logits[tokens], atol=1e-5)
    t_tokens, t_logp = sampler_fn(batch[:50], 2.0)
    tempered = logits / 2 - np.log(np.exp(logits / 2).sum())
    assert np.allclose(t_logp, tempered[t_tokens], atol=1e-5)


def test_numpy_sampler_distribution_and_logprobs():
    rng = np.random.default_rng(0)
    _categorical_check(lambda b, t: sample_numpy(b.copy(), t, 1.0, rng))


def test_mlx_sampler_distribution_and_logprobs():
    key = mx.random.key(0)
    _categorical_check(
        lambda b, t: tuple(np.array(x) for x in sample_mlx(mx.array(b), t, 1.0, key))
    )


@pytest.mark.parametrize("sampler", ["numpy", "mlx"])
def test_top_p_never_draws_outside_nucleus(sampler):
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    batch = np.tile(logits, (4000, 1))
    if sampler == "numpy":
        tokens, _ = sample_numpy(batch, 1.0, 0.75, np.random.default_rng(1))
    else:
        tokens = np.array(sample_mlx(mx.array(batch), 1.0, 0.75, mx.random.key(1))[0])
    assert set(np.unique(tokens)) == {0, 1}, "0.5 + 0.3 reaches top_p=0.75; 2 and 3 are out"


def test_block_draw_matches_the_full_inverse_cdf():
    # vocabularies below, at and across block boundaries; zero-mass tokens among them
    rng = np.random.default_rng(3)
    for vocab in (1, 7, sampling._BLOCK, sampling._BLOCK + 1, 3 * sampling._BLOCK - 5):
        p = rng.random((40, vocab)).astype(np.float32) ** 4
        p[:, ::3] = 0.0
        if vocab == 1:
            p[:] = 1.0
        r = rng.random(40)
        got = sampling._draw(p, r)
        cdf = np.cumsum(p.astype(np.float64), axis=1)
        want = (cdf <= (r * cdf[:, -1])[:, None]).sum(axis=1)
        assert got.tolist() == want.tolist(), vocab
        assert (p[np.arange(40), got] > 0).all(), "drew a token with zero mass"
    # r at the top of [0, 1): rounding must not land on a trailing zero-mass token
    p = np.zeros((2, 600), dtype=np.float32)
    p[:, 10], p[:, 300] = 1.0, 2.0
    assert sampling._draw(p, np.array([0.0, np.nextafter(1.0, 0.0)])).tolist() == [10, 300]


def test_numpy_sampler_distribution_over_a_large_vocabulary():
    # 3 blocks and a tail: frequencies of the 8 likely tokens match their probabilities
    vocab = 3 * sampling._BLOCK + 40
    logits = np.full(vocab, -30.0, dtype=np.float32)
    hot = np.array([0, 255, 256, 511, 600, vocab - 41, vocab - 2, vocab - 1])
    probs = np.array([0.2, 0.1, 0.15, 0.05, 0.1, 0.2, 0.1, 0.1])
    logits[hot] = np.log(probs)
    tokens, logp = sample_numpy(np.tile(logits, (40000, 1)), 1.0, 1.0, np.random.default_rng(2))
    freq = np.bincount(tokens, minlength=vocab)[hot] / len(tokens)
    assert np.allclose(freq, probs, atol=0.01), freq
    full = logits - np.log(np.exp(logits.astype(np.float64)).sum())
    assert np.allclose(logp, full[tokens], atol=1e-5)


def test_nucleus_wider_than_the_partial_sort_falls_back_to_a_full_sort():
    rng = np.random.default_rng(4)
    vocab = sampling._NUCLEUS_K * 3
    p = rng.random((6, vocab)).astype(np.float32)  # nearly flat: the 0.9 nucleus is ~2800 wide
    p[0, :5] = 1e4  # row 0: a narrow nucleus, found in the partial sort
    want = []
    for row in p:
        order = np.argsort(-row, kind="stable")
        mass_before = np.cumsum(row[order].astype(np.float64)) - row[order]
        keep = np.zeros(vocab, dtype=bool)
        keep[order[mass_before < 0.9 * row.sum(dtype=np.float64)]] = True
        want.append(keep)
    got = p.copy()
    sampling._nucleus_inplace(got, 0.9, got.sum(axis=1, dtype=np.float64))
    assert ((got > 0) == np.array(want)).all()
    assert (got[0] > 0).sum() == 5 and (got[1] > 0).sum() > sampling._NUCLEUS_K


def test_numpy_sampler_rejects_nan_logits():
    logits = np.zeros((3, 10), dtype=np.float32)
    logits[1, 4] = np.nan
    for temperature in (1.0, 0.0):
        with pytest.raises(ValueError, match=r"rows \[1\]"):
            sample_numpy(logits, temperature, 1.0, np.random.default_rng(0))


@pytest.mark.parametrize("kind", sampling.KINDS)
def test_make_sampler_is_deterministic_per_seed_and_advances(kind):
    logits = mx.array(np.random.default_rng(0).normal(size=(16, 50)).astype(np.float32))
    a, b = make_sampler(kind, 7, 1.0, 1.0), make_sampler(kind, 7, 1.0, 1.0)
    first_a, first_b = a(logits)[0], b(logits)[0]
    assert first_a.tolist() == first_b.tolist(), "same seed, same draw"
    assert a(logits)[0].tolist() != first_a.tolist(), "the generator advances between calls"
    with pytest.raises(ValueError, match="sampler kind"):
        make_sampler("torch", 0, 1.0, 1.0)
