"""Group sampling: determinism, greedy, EOS handling, the completion mask, and log-probs."""

import backend  # noqa: F401

import mlx.core as mx
import numpy as np
import pytest
from helpers import LLAMA, QWEN3, tiny_model, tiny_tokenizer

import gwen as gwen_mod
from gwen import Gwen, _sample_mlx, _sample_numpy, completion_mask


@pytest.fixture(params=["numpy", "mlx"])
def tiny(request):
    g = Gwen(tiny_model(QWEN3), tiny_tokenizer(QWEN3["vocab_size"]))
    g.sampler = request.param
    return g


PROMPTS = ["t5 t6 t7", "t8 t9", "t10 t11 t12 t13"]


def test_completion_mask_includes_first_eos_only():
    tokens = mx.array([[4, 5, 2, 2, 2], [2, 7, 7, 7, 7], [4, 4, 4, 4, 4], [9, 2, 9, 2, 2]])
    want = [[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert completion_mask(tokens, [2]).tolist() == want
    assert completion_mask(tokens, [7, 2])[1].tolist() == [1, 0, 0, 0, 0]


def test_same_seed_same_samples_and_seed_matters(tiny):
    a = tiny.sample_group(PROMPTS, 4, 12, temperature=1.0, seed=3)
    b = tiny.sample_group(PROMPTS, 4, 12, temperature=1.0, seed=3)
    c = tiny.sample_group(PROMPTS, 4, 12, temperature=1.0, seed=4)
    assert mx.array_equal(a.tokens, b.tokens) and mx.array_equal(a.logprobs, b.logprobs)
    assert not mx.array_equal(a.tokens, c.tokens)
    assert a.tokens.shape[0] == len(PROMPTS) * 4


def test_greedy_ignores_seed_and_matches_full_forward(tiny):
    a = tiny.sample_group(PROMPTS, 2, 10, temperature=0, seed=1)
    b = tiny.sample_group(PROMPTS, 2, 10, temperature=0, seed=2)
    assert mx.array_equal(a.tokens, b.tokens)
    m = tiny.model
    for i, p in enumerate(PROMPTS):
        seq = tiny.chat_tokens(p)
        for t in range(int(a.mask[2 * i].sum().item())):
            nxt = int(mx.argmax(m(mx.array([seq]))[0, -1]).item())
            assert nxt == a.tokens[2 * i, t].item()
            seq.append(nxt)


def test_sampled_logprobs_equal_training_forward(tiny):
    s = tiny.sample_group(PROMPTS, 3, 9, temperature=0.8, seed=0)
    again = tiny.logprobs(s) * s.mask
    diff = mx.abs(again - s.logprobs).max().item()
    assert diff <= 1e-4, diff


def test_rows_stop_at_eos_and_padding_is_masked():
    g = Gwen(tiny_model(LLAMA), tiny_tokenizer(LLAMA["vocab_size"], eos_id=0))
    # make EOS likely so rows end at different steps
    w = g.model.lm_head.weight
    g.model.lm_head.weight = w.at[0].add(3.0 * mx.sign(mx.random.normal(w[0].shape)))
    s = g.sample_group(PROMPTS, 4, 30, temperature=1.5, seed=0)
    tokens, mask, lp = np.array(s.tokens), np.array(s.mask), np.array(s.logprobs)
    lengths = mask.sum(1)
    assert s.finished.any(), "no row emitted EOS: the test setup is too weak"
    for r in range(tokens.shape[0]):
        eos_at = np.flatnonzero(tokens[r] == 0)
        if s.finished[r]:
            assert lengths[r] == eos_at[0] + 1, "mask must include the EOS that ended the row"
        else:
            assert len(eos_at) == 0 and lengths[r] == tokens.shape[1]
        assert (lp[r][mask[r] == 0] == 0).all()
        assert (lp[r][mask[r] == 1] < 0).all()
    if s.finished.all():
        assert tokens.shape[1] == lengths.max(), "loop must end when every row is done"


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
    _categorical_check(lambda b, t: _sample_numpy(b.copy(), t, 1.0, rng))


def test_mlx_sampler_distribution_and_logprobs():
    key = mx.random.key(0)
    _categorical_check(
        lambda b, t: tuple(np.array(x) for x in _sample_mlx(mx.array(b), t, 1.0, key))
    )


@pytest.mark.parametrize("sampler", ["numpy", "mlx"])
def test_top_p_never_draws_outside_nucleus(sampler):
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    batch = np.tile(logits, (4000, 1))
    if sampler == "numpy":
        tokens, _ = _sample_numpy(batch, 1.0, 0.75, np.random.default_rng(1))
    else:
        tokens = np.array(_sample_mlx(mx.array(batch), 1.0, 0.75, mx.random.key(1))[0])
    assert set(np.unique(tokens)) == {0, 1}, "0.5 + 0.3 reaches top_p=0.75; 2 and 3 are out"


def test_block_draw_matches_the_full_inverse_cdf():
    # vocabularies below, at and across block boundaries; zero-mass tokens among them
    rng = np.random.default_rng(3)
    for vocab in (1, 7, gwen_mod._BLOCK, gwen_mod._BLOCK + 1, 3 * gwen_mod._BLOCK - 5):
        p = rng.random((40, vocab)).astype(np.float32) ** 4
        p[:, ::3] = 0.0
        if vocab == 1:
            p[:] = 1.0
        r = rng.random(40)
        got = gwen_mod._draw(p, r)
        cdf = np.cumsum(p.astype(np.float64), axis=1)
        want = (cdf <= (r * cdf[:, -1])[:, None]).sum(axis=1)
        assert got.tolist() == want.tolist(), vocab
        assert (p[np.arange(40), got] > 0).all(), "drew a token with zero mass"
    # r at the top of [0, 1): rounding must not land on a trailing zero-mass token
    p = np.zeros((2, 600), dtype=np.float32)
    p[:, 10], p[:, 300] = 1.0, 2.0
    assert gwen_mod._draw(p, np.array([0.0, np.nextafter(1.0, 0.0)])).tolist() == [10, 300]


def test_numpy_sampler_distribution_over_a_large_vocabulary():
    # 3 blocks and a tail: frequencies of the 8 likely tokens match their probabilities
    vocab = 3 * gwen_mod._BLOCK + 40
    logits = np.full(vocab, -30.0, dtype=np.float32)
    hot = np.array([0, 255, 256, 511, 600, vocab - 41, vocab - 2, vocab - 1])
    probs = np.array([0.2, 0.1, 0.15, 0.05, 0.1, 0.2, 0.1, 0.1])
    logits[hot] = np.log(probs)
    tokens, logp = _sample_numpy(np.tile(logits, (40000, 1)), 1.0, 1.0, np.random.default_rng(2))
    freq = np.bincount(tokens, minlength=vocab)[hot] / len(tokens)
    assert np.allclose(freq, probs, atol=0.01), freq
    full = logits - np.log(np.exp(logits.astype(np.float64)).sum())
    assert np.allclose(logp, full[tokens], atol=1e-5)


def test_nucleus_wider_than_the_partial_sort_falls_back_to_a_full_sort():
    rng = np.random.default_rng(4)
    vocab = gwen_mod._NUCLEUS_K * 3
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
    gwen_mod._nucleus_inplace(got, 0.9, got.sum(axis=1, dtype=np.float64))
    assert ((got > 0) == np.array(want)).all()
    assert (got[0] > 0).sum() == 5 and (got[1] > 0).sum() > gwen_mod._NUCLEUS_K


def test_numpy_sampler_rejects_nan_logits():
    logits = np.zeros((3, 10), dtype=np.float32)
    logits[1, 4] = np.nan
    for temperature in (1.0, 0.0):
        with pytest.raises(ValueError, match=r"rows \[1\]"):
            _sample_numpy(logits, temperature, 1.0, np.random.default_rng(0))


def test_bad_sampling_arguments(tiny):
    for kw in [dict(group_size=0), dict(max_new_tokens=0), dict(temperature=-1), dict(top_p=0.0)]:
        args = dict(group_size=2, max_new_tokens=4, temperature=1.0, top_p=1.0) | kw
        with pytest.raises(ValueError):
            tiny.sample_group(PROMPTS, **args)


def test_embedded_model_group_invariants(smollm):
    s = smollm.sample_group(["Name a prime number.", "Say hello."], 3, 40, temperature=1.0, seed=0)
    assert len(s.texts) == 6 and s.tokens.shape[0] == 6
    mask = np.array(s.mask)
    assert (np.diff(mask, axis=1) <= 0).all(), "mask is a prefix of ones"
    assert all(isinstance(t, str) and t for t in s.texts)
    assert gwen_mod.completion_mask(s.tokens, smollm.eos_ids).tolist() == mask.tolist()
