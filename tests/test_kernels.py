"""core/kernels.py against float64 numpy references, autodiff of the naive twin, and hand-worked KL
numbers. Kernel-vs-twin tests run only where a Metal or CUDA backend exists."""

import logging
import math

from core import backend  # noqa: F401

# isort: split
from core import cpu_ops
from core import kernels as K

import mlx.core as mx
import numpy as np
import pytest

ON_GPU_KERNELS = K.kernel_backend() in ("metal", "cuda")
NEEDS_KERNELS = pytest.mark.skipif(
    not ON_GPU_KERNELS,
    reason=f"custom kernels run only on Metal or CUDA; backend here is "
    f"{backend.backend_name()!r} (or {backend.PLAIN_ENV}=1 forced the plain twin)",
)


def _inputs(lead, n_vocab, dim, seed, dtype=mx.float32):
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(*lead, dim)).astype(np.float32)
    w = (rng.normal(size=(n_vocab, dim)) * 1.5 / math.sqrt(dim)).astype(np.float32)
    tok = rng.integers(0, n_vocab, size=lead).astype(np.int32)
    h, w = mx.array(h).astype(dtype), mx.array(w).astype(dtype)
    return h, w, mx.array(tok)


def _reference(h, w, tok, temperature):
    """float64 log-softmax + gather and entropy, from the (possibly rounded) inputs."""
    h64 = np.array(h.astype(mx.float32), dtype=np.float64)
    w64 = np.array(w.astype(mx.float32), dtype=np.float64)
    z = (h64 @ w64.T) / temperature
    m = z.max(-1, keepdims=True)
    logp_all = z - (m + np.log(np.exp(z - m).sum(-1, keepdims=True)))
    logp = np.take_along_axis(logp_all, np.array(tok)[..., None], -1)[..., 0]
    ent = -(np.exp(logp_all) * logp_all).sum(-1)
    return logp, ent


def _f64(a):
    return np.array(a.astype(mx.float32) if isinstance(a, mx.array) else a, dtype=np.float64)


def _max_err(a, b):
    return float(np.max(np.abs(_f64(a) - _f64(b))))


def _scale(b):
    return max(1.0, float(np.max(np.abs(_f64(b)))))


# ---------------------------------------------------------------------------------------------
# token_logprobs


@pytest.mark.parametrize("rows", [31, 32, 33])
@pytest.mark.parametrize("temperature", [0.7, 1.0, 1.3])
@pytest.mark.parametrize("chunk_vocab", [None, 384])  # 1000 = 2 * 384 + 232
def test_logprobs_and_entropy_match_float64(rows, temperature, chunk_vocab):
    h, w, tok = _inputs((rows,), 1000, 48, seed=rows)
    logp, ent = K.token_logprobs(
        h, w, tok, temperature, chunk_rows=8, chunk_vocab=chunk_vocab, return_entropy=True
    )
    ref_logp, ref_ent = _reference(h, w, tok, temperature)
    assert logp.dtype == mx.float32 and ent.dtype == mx.float32
    assert logp.shape == (rows,) and ent.shape == (rows,)
    assert _max_err(logp, ref_logp) <= 1e-5
    # Entropy (~5 nats here) is a sum over the vocabulary; float32 gives ~2e-6 relative, the
    # same as the naive twin's error.
    assert _max_err(ent, ref_ent) <= 1e-5 * _scale(ref_ent)


def test_leading_shape_and_default_chunks():
    h, w, tok = _inputs((3, 11), 777, 40, seed=1)
    logp = K.token_logprobs(h, w, tok, 1.0)
    assert logp.shape == (3, 11)
    assert _max_err(logp, _reference(h, w, tok, 1.0)[0]) <= 1e-5
    assert _max_err(logp, K.token_logprobs_naive(h, w, tok)) <= 1e-5


def _grads(fn, h, w, tok, temperature, coef_ent):
    rng = np.random.default_rng(7)
    c = mx.array(rng.normal(size=tok.shape).astype(np.float32))

    def loss(h, w):
        logp, ent = fn(h, w, tok, temperature)
        return mx.sum(c * logp) + coef_ent * mx.sum(ent)

    return mx.grad(loss, argnums=(0, 1))(h, w)


@pytest.mark.parametrize("rows", [31, 33])
@pytest.mark.parametrize("temperature", [0.7, 1.3])
@pytest.mark.parametrize("chunk_vocab", [None, 384])
@pytest.mark.parametrize("coef_ent", [0.0, 0.3])
@pytest.mark.parametrize("keep", [False, True], ids=["recompute", "keep-logits"])
def test_gradient_matches_autodiff_of_naive(rows, temperature, chunk_vocab, coef_ent, keep):
    h, w, tok = _inputs((rows,), 1000, 48, seed=100 + rows)

    def ours(h, w, tok, t):
        return K.token_logprobs(
            h, w, tok, t, chunk_rows=8, chunk_vocab=chunk_vocab, return_entropy=True,
            keep_logits=keep,
        )  # fmt: skip

    def naive(h, w, tok, t):
        return K.token_logprobs_naive(h, w, tok, t, return_entropy=True)

    got = _grads(ours, h, w, tok, temperature, coef_ent)
    want = _grads(naive, h, w, tok, temperature, coef_ent)
    for g, r in zip(got, want, strict=True):
        assert g.dtype == mx.float32
        assert _max_err(g, r) <= 1e-5 * _scale(r)


@pytest.mark.parametrize("chunk_vocab", [None, 384])
@pytest.mark.parametrize("keep", [False, True], ids=["recompute", "keep-logits"])
def test_frozen_weight_and_metric_entropy_keep_the_hidden_gradient(chunk_vocab, keep):
    # weight_grad=False (a frozen LM head) and entropy_grad=False (entropy read as a metric):
    # d/dh equals the naive twin's gradient of the log-prob term alone, the weight gets zero.
    h, w, tok = _inputs((33,), 1000, 48, seed=9)
    c = mx.array(np.random.default_rng(3).normal(size=tok.shape).astype(np.float32))

    def ours(h, w):
        logp, ent = K.token_logprobs(
            h, w, tok, 0.7, chunk_rows=8, chunk_vocab=chunk_vocab, return_entropy=True,
            weight_grad=False, entropy_grad=False, keep_logits=keep,
        )  # fmt: skip
        return mx.sum(c * logp) + 0.3 * mx.sum(ent)

    def naive(h):
        return mx.sum(c * K.token_logprobs_naive(h, w, tok, 0.7))

    gh, gw = mx.grad(ours, argnums=(0, 1))(h, w)
    want = mx.grad(naive)(h)
    assert _max_err(gh, want) <= 1e-5 * _scale(want)
    # exact: weight_grad=False stops the gradient, so none reaches w
    assert float(mx.abs(gw).max()) == 0.0
    logp, ent = K.token_logprobs(h, w, tok, 0.7, return_entropy=True, weight_grad=False)
    ref_logp, ref_ent = _reference(h, w, tok, 0.7)
    assert _max_err(logp, ref_logp) <= 1e-5 and _max_err(ent, ref_ent) <= 1e-5 * _scale(ref_ent)


@pytest.mark.parametrize("limit,kept", [(1000 * 33, True), (1000 * 33 - 1, False)])
def test_keep_logits_reuses_the_forward_only_within_its_memory_limit(limit, kept, monkeypatch):
    # At the limit (33 rows x 1000 vocabulary) the backward reads the forward's logits, all 15
    # tiles (5 row chunks of 8 x 3 vocabulary tiles), and never recomputes one; one element over,
    # it recomputes; the gradient is the same either way.
    h, w, tok = _inputs((33,), 1000, 48, seed=12)
    calls = {"kept": 0, "recomputed": 0}
    real_block = K._block_backward

    def count(*a, z=None):
        calls["recomputed" if z is None else "kept"] += 1
        return real_block(*a, z=z)

    monkeypatch.setattr(K, "_KEEP_ELEMS", limit)
    monkeypatch.setattr(K, "_block_backward", count)
    c = mx.array(np.random.default_rng(5).normal(size=tok.shape).astype(np.float32))

    def loss(h, w, keep):
        logp = K.token_logprobs(h, w, tok, 0.9, chunk_rows=8, chunk_vocab=384, keep_logits=keep)
        return mx.sum(c * logp)

    got = mx.grad(lambda h, w: loss(h, w, True), argnums=(0, 1))(h, w)
    assert (calls["kept"], calls["recomputed"] > 0) == ((15, False) if kept else (0, True))
    want = mx.grad(lambda h, w: mx.sum(c * K.token_logprobs_naive(h, w, tok, 0.9)), (0, 1))(h, w)
    for g, r in zip(got, want, strict=True):
        assert _max_err(g, r) <= 1e-5 * _scale(r)


@pytest.mark.parametrize("fast_exp", [True, False], ids=["cpu-poly-exp", "plain-exp"])
def test_cpu_exp_blocks_match_float64_and_naive_gradient(fast_exp, monkeypatch):
    # 3,000-element blocks: 3 rows of the 1,000-token vocabulary per block, several per chunk
    monkeypatch.setattr(cpu_ops, "ENABLED", fast_exp)
    monkeypatch.setattr(cpu_ops, "CPU_BLOCK", 3000)
    h, w, tok = _inputs((33,), 1000, 48, seed=55)
    logp, ent = K.token_logprobs(h, w, tok, 0.7, chunk_rows=16, return_entropy=True)
    ref_logp, ref_ent = _reference(h, w, tok, 0.7)
    assert _max_err(logp, ref_logp) <= 1e-5
    assert _max_err(ent, ref_ent) <= 1e-5 * _scale(ref_ent)

    def ours(h, w, tok, t):
        return K.token_logprobs(h, w, tok, t, chunk_rows=16, return_entropy=True)

    def naive(h, w, tok, t):
        return K.token_logprobs_naive(h, w, tok, t, return_entropy=True)

    for coef_ent in (0.0, 0.3):
        got = _grads(ours, h, w, tok, 0.7, coef_ent)
        want = _grads(naive, h, w, tok, 0.7, coef_ent)
        for g, r in zip(got, want, strict=True):
            assert _max_err(g, r) <= 1e-5 * _scale(r)


@pytest.mark.parametrize("rows", [1, 31, 33])
@pytest.mark.parametrize("n_cols", [1000, 4097])
def test_cpu_primitives_match_plain_twins(rows, n_cols, monkeypatch):
    monkeypatch.setattr(cpu_ops, "CPU_BLOCK", 2 * n_cols + 5)  # blocks of 2 rows
    rng = np.random.default_rng(rows + n_cols)
    z = mx.array((rng.normal(size=(rows, n_cols)) * 3).astype(np.float32))
    tok = mx.array(rng.integers(-2, n_cols + 2, size=rows).astype(np.int32))
    for want_ent in (False, True):
        lse, ent = cpu_ops.lse_entropy(z, want_ent)
        got = (lse, K._target_logit(z, tok), ent)
        want = K._row_stats_plain(z, tok, want_ent)
        for a, b in zip(got, want, strict=True):
            if b is None:
                assert a is None
            else:
                assert _max_err(a, b) <= 1e-5 * _scale(b)
    lse = mx.logsumexp(z, axis=-1)
    g, gh, ent = (mx.array(rng.normal(size=rows).astype(np.float32)) for _ in range(3))
    for args in ((g, None, None), (g, gh, ent)):
        got, want = cpu_ops.softmax_grad(z, lse, *args), K._softmax_grad_plain(z, lse, *args)
        assert _max_err(got, want) <= 1e-6 * _scale(want)


@pytest.mark.parametrize("dtype,tol", [(mx.float16, 2e-3), (mx.bfloat16, 1.6e-2)])
def test_half_precision_inputs(dtype, tol):
    """Computed in float32 from the rounded inputs, so log-probs stay float32-accurate; the
    gradients come back in the input dtype, so they carry its rounding (tol, relative)."""
    h, w, tok = _inputs((33,), 1000, 48, seed=5, dtype=dtype)
    logp, ent = K.token_logprobs(h, w, tok, 0.7, chunk_rows=8, return_entropy=True)
    ref_logp, ref_ent = _reference(h, w, tok, 0.7)
    assert logp.dtype == mx.float32
    assert _max_err(logp, ref_logp) <= 1e-5
    assert _max_err(ent, ref_ent) <= 1e-5 * _scale(ref_ent)

    def fn(h, w, tok, t):
        return K.token_logprobs(h, w, tok, t, chunk_rows=8, return_entropy=True)

    def naive(h, w, tok, t):
        return K.token_logprobs_naive(h, w, tok, t, return_entropy=True)

    got = _grads(fn, h, w, tok, 0.7, 0.3)
    want = _grads(naive, h.astype(mx.float32), w.astype(mx.float32), tok, 0.7, 0.3)
    for g, r, x in zip(got, want, (h, w), strict=True):
        assert g.dtype == x.dtype
        assert _max_err(g, r) <= tol * _scale(r)


def test_out_of_range_tokens_are_nan_and_get_no_gradient():
    h, w, _ = _inputs((4,), 50, 16, seed=3)
    tok = mx.array([0, -1, 50, 49])
    logp = K.token_logprobs(h, w, tok)
    assert np.isnan(np.array(logp)).tolist() == [False, True, True, False]
    keep = tok >= 0

    def loss(h, w):
        return K.masked_sum(K.token_logprobs(h, w, tok), keep & (tok < 50))

    gh, gw = mx.grad(loss, argnums=(0, 1))(h, w)
    assert not np.isnan(np.array(gh)).any() and not np.isnan(np.array(gw)).any()
    assert float(mx.abs(gh[1:3]).max()) == 0.0  # exact: masked out, no gradient reaches them


@pytest.mark.slow  # the CPU compiles fused kernels with a C++ compiler: ~1 min, cold cache
def test_compiled_value_and_grad_matches_eager():
    h, w, tok = _inputs((20,), 300, 16, seed=9)

    def loss(h, w):
        return K.token_logprobs(h, w, tok, 0.7, chunk_rows=8, chunk_vocab=128).sum()

    eager = mx.value_and_grad(loss, argnums=(0, 1))(h, w)
    compiled = mx.compile(mx.value_and_grad(loss, argnums=(0, 1)))(h, w)
    # the same math, but compile may fuse element-wise ops into kernels that round differently
    # (on the CPU it has matched bit for bit; Metal and CUDA fuse more): float32 rounding only
    assert _max_err(eager[0], compiled[0]) <= 1e-5 * _scale(eager[0])
    for a, b in zip(eager[1], compiled[1], strict=True):
        assert _max_err(a, b) <= 1e-5 * _scale(a), _max_err(a, b)


@pytest.mark.skipif(
    backend.backend_name() == "cuda",
    reason="on CUDA mx.get_peak_memory after reset_peak_memory read 16 bytes for the naive "
    "step (H200, MLX 0.32.4): the measurement, not the chunking, does not hold there",
)
def test_chunked_backward_peak_memory_below_naive():
    """The point of the chunking: forward+backward never holds the batch's full logits."""
    h, w, tok = _inputs((2048,), 4096, 32, seed=11)
    mx.eval(h, w, tok)

    def peak(fn):
        """Peak bytes above what was already allocated (other tests may keep models alive)."""
        step = mx.value_and_grad(lambda h, w: fn(h, w, tok).sum(), argnums=(0, 1))
        mx.eval(step(h, w))
        mx.clear_cache()
        mx.reset_peak_memory()
        base = mx.get_active_memory()
        mx.eval(step(h, w))
        return mx.get_peak_memory() - base

    naive = peak(K.token_logprobs_naive)
    ours = peak(lambda h, w, t: K.token_logprobs(h, w, t, chunk_rows=32))
    full_logits = 2048 * 4096 * 4
    assert naive >= 2 * full_logits
    assert ours <= naive / 4, (ours, naive)


def test_bad_inputs_raise_with_shapes():
    h, w, tok = _inputs((5,), 40, 8, seed=0)
    with pytest.raises(ValueError, match=r"\(6,\).*\(5,\)"):
        K.token_logprobs(h, w, mx.zeros((6,), dtype=mx.int32))
    with pytest.raises(ValueError, match=r"D=8"):
        K.token_logprobs(mx.zeros((5, 9)), w, tok)
    with pytest.raises(ValueError, match="integer"):
        K.token_logprobs(h, w, tok.astype(mx.float32))
    with pytest.raises(ValueError, match="temperature"):
        K.token_logprobs(h, w, tok, 0.0)
    with pytest.raises(ValueError, match="chunk_rows"):
        K.token_logprobs(h, w, tok, chunk_rows=0)


# ---------------------------------------------------------------------------------------------
# KL estimators

# log r = ref - logp = [-0.5, 1.0, 0.0]; r = [e^-0.5, e, 1] = [0.6065307, 2.7182818, 1].
LOGP = mx.array([-1.0, -2.0, -0.5])
REF = mx.array([-1.5, -1.0, -0.5])
HAND = {
    # reverse: k1 = -log r, k2 = (log r)^2 / 2, k3 = r - 1 - log r
    ("k1", "reverse"): [0.5, -1.0, 0.0],
    ("k2", "reverse"): [0.125, 0.5, 0.0],
    ("k3", "reverse"): [0.6065307 - 1 + 0.5, 2.7182818 - 1 - 1, 0.0],  # 0.1065307, 0.7182818
    # forward: k1 = r log r, k2 = r (log r)^2 / 2, k3 = r log r - r + 1
    ("k1", "forward"): [-0.5 * 0.6065307, 2.7182818, 0.0],  # -0.3032653
    ("k2", "forward"): [0.125 * 0.6065307, 0.5 * 2.7182818, 0.0],  # 0.0758163, 1.3591409
    ("k3", "forward"): [-0.3032653 - 0.6065307 + 1, 1.0, 0.0],  # 0.0902040
}


@pytest.mark.parametrize("estimator,direction", sorted(HAND))
def test_kl_estimators_hand_worked(estimator, direction):
    got = K.kl_per_token(LOGP, REF, estimator, direction)
    assert got.dtype == mx.float32
    np.testing.assert_allclose(np.array(got), HAND[(estimator, direction)], atol=1e-6)


@pytest.mark.parametrize("estimator", K.KL_ESTIMATORS)
def test_kl_symmetric_is_mean_of_directions(estimator):
    rng = np.random.default_rng(0)
    lp, ref = (mx.array(rng.normal(size=(4, 9)).astype(np.float32) - 2) for _ in range(2))
    sym = K.kl_per_token(lp, ref, estimator, "symmetric")
    rev = K.kl_per_token(lp, ref, estimator, "reverse")
    fwd = K.kl_per_token(lp, ref, estimator, "forward")
    assert _max_err(sym, 0.5 * (rev + fwd)) <= 1e-6


@pytest.mark.parametrize("direction", K.KL_DIRECTIONS)
def test_k3_and_k2_nonnegative(direction):
    rng = np.random.default_rng(1)
    lp = mx.array(rng.normal(size=1000).astype(np.float32) * 5)
    ref = mx.array(rng.normal(size=1000).astype(np.float32) * 5)
    for est in ("k2", "k3"):
        assert float(K.kl_per_token(lp, ref, est, direction).min()) >= 0.0


def test_k1_k3_are_unbiased_for_their_kl():
    """Exact expectation over policy samples (weights pi) equals the closed-form KL: reverse
    estimators give KL(pi || ref), forward (importance-weighted) ones give KL(ref || pi)."""
    pi = np.array([0.5, 0.2, 0.15, 0.1, 0.05])
    ref = np.array([0.3, 0.3, 0.1, 0.05, 0.25])
    kl_rev = float(np.sum(pi * np.log(pi / ref)))
    kl_fwd = float(np.sum(ref * np.log(ref / pi)))
    lp, lr = mx.array(np.log(pi).astype(np.float32)), mx.array(np.log(ref).astype(np.float32))
    for est in ("k1", "k3"):
        for direction, want in (("reverse", kl_rev), ("forward", kl_fwd)):
            k = np.array(K.kl_per_token(lp, lr, est, direction), dtype=np.float64)
            assert abs(float(np.sum(pi * k)) - want) <= 1e-6, (est, direction)


@pytest.mark.parametrize("estimator", K.KL_ESTIMATORS)
@pytest.mark.parametrize("direction", K.KL_DIRECTIONS)
def test_kl_bounded_under_extreme_inputs(estimator, direction):
    inf = float("inf")
    lp = mx.array([-1e4, 0.0, -3.0, -inf, -50.0])
    ref = mx.array([0.0, -1e4, -inf, -3.0, -1e-3])
    bound = 20.0

    def total(lp, ref):
        return K.kl_per_token(lp, ref, estimator, direction, max_log_ratio=bound).sum()

    kl = np.array(K.kl_per_token(lp, ref, estimator, direction, max_log_ratio=bound))
    assert np.isfinite(kl).all()
    # The largest magnitude any estimator reaches at |log r| <= 20 (forward k2 at log r = 20).
    assert np.abs(kl).max() <= 0.5 * math.exp(bound) * bound**2 * 1.0001
    g_lp, g_ref = mx.grad(total, argnums=(0, 1))(lp, ref)
    assert np.isfinite(np.array(g_lp)).all() and np.isfinite(np.array(g_ref)).all()


def test_kl_bad_options_raise():
    with pytest.raises(ValueError, match=r"\(3,\) vs \(2,\)"):
        K.kl_per_token(LOGP, REF[:2])
    with pytest.raises(ValueError, match="estimator"):
        K.kl_per_token(LOGP, REF, estimator="k4")
    with pytest.raises(ValueError, match="direction"):
        K.kl_per_token(LOGP, REF, direction="sideways")


# ---------------------------------------------------------------------------------------------
# masked reductions


def test_masked_sum_and_mean_hand_worked():
    x = mx.array([[1.0, 3.0, float("nan")], [5.0, 5.0, 5.0], [2.0, 4.0, 6.0]])
    mask = mx.array([[1, 1, 0], [0, 0, 0], [1, 0, 1]])
    # row sums: 1+3 = 4, 0 (empty), 2+6 = 8; row means: 2, 0 (empty -> 0), 4
    np.testing.assert_allclose(np.array(K.masked_sum(x, mask, axis=-1)), [4.0, 0.0, 8.0])
    np.testing.assert_allclose(np.array(K.masked_mean(x, mask, axis=-1)), [2.0, 0.0, 4.0])
    # whole array: (4 + 8) / 4 = 3; the NaN under the mask never leaks
    assert float(K.masked_sum(x, mask)) == 12.0
    assert float(K.masked_mean(x, mask)) == 3.0
    # float weights: (0.5 * 2 + 1.5 * 4) / (0.5 + 1.5) = 3.5
    w = mx.array([0.5, 1.5])
    assert float(K.masked_mean(mx.array([2.0, 4.0]), w)) == 3.5
    g = mx.grad(lambda x: K.masked_mean(x, mask, axis=-1).sum())(x)
    np.testing.assert_allclose(np.array(g), [[0.5, 0.5, 0], [0, 0, 0], [0.5, 0, 0.5]])


def test_masked_mask_broadcast_and_errors():
    x = mx.ones((2, 3))
    assert float(K.masked_sum(x, mx.array([1, 0, 1]))) == 4.0
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        K.masked_mean(x, mx.ones((3, 2)))


# ---------------------------------------------------------------------------------------------
# dispatch, and the kernel plumbing (custom VJPs around the kernels) with stand-in kernels


def test_env_var_forces_plain_and_choice_is_logged(monkeypatch, caplog):
    monkeypatch.setenv(backend.PLAIN_ENV, "1")
    K.kernel_backend.cache_clear()
    try:
        with caplog.at_level(logging.DEBUG, logger=K.__name__):
            assert K.kernel_backend() == "plain"
            assert K.kernel_backend() == "plain"
        lines = [r.getMessage() for r in caplog.records if "kernels: using" in r.getMessage()]
        assert lines == [f"kernels: using plain kernels ({backend.PLAIN_ENV}=1)"]
    finally:
        monkeypatch.delenv(backend.PLAIN_ENV)
        K.kernel_backend.cache_clear()


def test_kernel_dispatch_plumbing_with_stand_in_kernels(monkeypatch):
    """Runs the kernel code paths (dispatch, custom VJPs) with the plain twins
    standing in for the Metal/CUDA kernels, so a CPU run still covers the wiring."""
    calls = []

    def row_stats(z, tok, want_pz, which):
        calls.append("row_stats")
        return K._row_stats_plain(z, tok, want_pz)

    def softmax_grad(z, lse, g, gh, ent, which):
        calls.append("softmax_grad")
        return K._softmax_grad_plain(z, lse, g, gh, ent)

    monkeypatch.setattr(K, "kernel_backend", lambda: "metal")
    monkeypatch.setattr(K, "_row_stats_kernel", row_stats)
    monkeypatch.setattr(K, "_softmax_grad_kernel", softmax_grad)

    h, w, tok = _inputs((9,), 100, 8, seed=2)

    def ours(h, w, tok, t):
        return K.token_logprobs(h, w, tok, t, chunk_rows=4, return_entropy=True)

    def naive(h, w, tok, t):
        return K.token_logprobs_naive(h, w, tok, t, return_entropy=True)

    got = _grads(ours, h, w, tok, 0.7, 0.3)
    want = _grads(naive, h, w, tok, 0.7, 0.3)
    for g, r in zip(got, want, strict=True):
        assert _max_err(g, r) <= 1e-5 * _scale(r)

    assert {"row_stats", "softmax_grad"} <= set(calls)


# ---------------------------------------------------------------------------------------------
# the real kernels against their twins (Metal or CUDA only)


@NEEDS_KERNELS
@pytest.mark.parametrize("rows", [31, 32, 33])
@pytest.mark.parametrize("n_cols", [1000, 4097])
def test_row_stats_kernel_matches_twin(rows, n_cols):
    rng = np.random.default_rng(rows + n_cols)
    z = mx.array((rng.normal(size=(rows, n_cols)) * 3).astype(np.float32))
    tok = mx.array(rng.integers(-2, n_cols + 2, size=rows).astype(np.int32))
    got = K._row_stats_kernel(z, tok, True, K.kernel_backend())
    want = K._row_stats_plain(z, tok, True)
    for a, b in zip(got, want, strict=True):
        assert _max_err(a, b) <= 1e-5 * _scale(b)


@NEEDS_KERNELS
@pytest.mark.parametrize("rows", [31, 32, 33])
@pytest.mark.parametrize("with_entropy", [False, True])
def test_softmax_grad_kernel_matches_twin(rows, with_entropy):
    rng = np.random.default_rng(rows)
    z = mx.array((rng.normal(size=(rows, 1001)) * 3).astype(np.float32))
    lse = mx.logsumexp(z, axis=-1)
    g, gh, ent = (mx.array(rng.normal(size=rows).astype(np.float32)) for _ in range(3))
    if not with_entropy:
        gh = ent = None
    got = K._softmax_grad_kernel(z, lse, g, gh, ent, K.kernel_backend())
    want = K._softmax_grad_plain(z, lse, g, gh, ent)
    assert _max_err(got, want) <= 1e-6 * _scale(want)


def test_full_kl_against_float64():
    rng = np.random.default_rng(11)
    hp, hq = rng.normal(size=(2, 37, 16)), rng.normal(size=(2, 37, 16))
    wp, wq = rng.normal(size=(301, 16)) * 0.5, rng.normal(size=(301, 16)) * 0.5
    got = K.full_kl(*(mx.array(x.astype(np.float32)) for x in (hp, wp, hq, wq)), chunk_rows=10)

    def logsoftmax(z):
        z = z - z.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))

    lp, lq = logsoftmax(hp @ wp.T), logsoftmax(hq @ wq.T)
    want = (np.exp(lp) * (lp - lq)).sum(axis=-1)
    assert got.shape == (2, 37)
    assert _max_err(got, mx.array(want.astype(np.float32))) <= 1e-4 * _scale(mx.array(want))
    same = K.full_kl(
        mx.array(hp[0].astype(np.float32)),
        mx.array(wp.astype(np.float32)),
        mx.array(hp[0].astype(np.float32)),
        mx.array(wp.astype(np.float32)),
    )
    assert mx.abs(same).max().item() <= 1e-6, "KL of a distribution with itself is 0"


def test_metal_kernels_pin_safe_math_and_name_no_device_pointers(monkeypatch):
    """The Metal sources' -INFINITY masking needs safe math: _kernel pins it. An input of fewer
    than 8 elements reaches a Metal kernel in `constant` space, so the sources must not bind an
    input to a `device` pointer (Metal never runs here: these read what would be compiled)."""
    seen = {}

    def fake_metal_kernel(**kw):
        seen[kw["name"]] = kw
        return object()

    monkeypatch.setattr(K.mx.fast, "metal_kernel", fake_metal_kernel)
    K._kernel.cache_clear()
    try:
        for name in K._SIGNATURES:
            K._kernel(name, "metal")
    finally:
        K._kernel.cache_clear()
    assert set(seen) == {f"rlv_{n}" for n in K._SIGNATURES}
    for kw in seen.values():
        assert kw.get("compile_options") == {"math_mode": "safe"}, kw.get("compile_options")
        assert "device float*" not in kw["source"] + kw["header"], kw["name"]
