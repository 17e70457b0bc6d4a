"""The fused native CPU kernels (cpu_native, native/rl_cpu_ext.cpp) against float64 numpy
references and their plain-MLX twins: values and gradients, float32, odd widths, zero and
masked rows, non-contiguous inputs, the multi-threaded path; the dispatch in cpu_ops; and a
forced build failure that must leave the plain path in use with one `note:` line.

Parity tests skip (with the reason) where the extension did not build, e.g. under
RL_VALUES_CPU_EXT=fail or without a C++ compiler; the first run on a machine builds it (1-3 min).
"""

import os
import subprocess
import sys
from pathlib import Path

from core import backend

# isort: split
from core import cpu_native, cpu_ops, kernels, sampling

import mlx.core as mx
import mlx.nn as nn
import mlx.utils
import numpy as np
import pytest
from helpers import LLAMA, tiny_model, tiny_tokenizer

import model
from gwen import Gwen

ROOT = Path(__file__).resolve().parent.parent
EPS = 1e-5


@pytest.fixture(scope="module")
def ext():
    module = cpu_native.load()
    if module is None:
        setting = os.environ.get(cpu_native.EXT_ENV)
        pytest.skip(f"rl_cpu_ext unavailable (backend {backend.backend_name()!r}, "
                    f"${cpu_native.EXT_ENV}={setting!r}; see the note)")  # fmt: skip
    return module


def _rms_ref(x, w, g):
    """float64 RMSNorm, and its gradients for the loss sum(y * g)."""
    x, w, g = (np.array(a, dtype=np.float64) for a in (x, w, g))
    d = x.shape[-1]
    inv = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + EPS)
    y = x * inv * w
    gw = g * w
    dx = inv * gw - x * inv**3 * (gw * x).sum(-1, keepdims=True) / d
    dw = (g * x * inv).reshape(-1, d).sum(0)
    return y, dx, dw


def _silu_ref(a, b, g):
    a, b, g = (np.array(t, dtype=np.float64) for t in (a, b, g))
    s = 1.0 / (1.0 + np.exp(-a))
    return a * s * b, g * b * s * (1 + a * (1 - s)), g * a * s


def _err(a, b):
    return float(np.max(np.abs(np.array(a, dtype=np.float64) - np.array(b, dtype=np.float64))))


SHAPES = [(1, 31), (3, 32), (5, 33), (2, 7, 576), (130, 576)]  # the last one uses the threads


@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm_matches_float64_and_fast(ext, shape):
    rng = np.random.default_rng(shape[-1] + len(shape))
    x = rng.normal(size=shape).astype(np.float32) * 3
    x.reshape(-1, shape[-1])[0] = 0.0  # a masked (all-zero) row: output and gradient stay finite
    w = rng.normal(size=shape[-1]).astype(np.float32)
    g = rng.normal(size=shape).astype(np.float32)
    y_ref, dx_ref, dw_ref = _rms_ref(x, w, g)
    xa, wa, ga = mx.array(x), mx.array(w), mx.array(g)

    def loss(fn):
        return lambda a, b: (fn(a, b) * ga).sum()

    ours = ext.rms_norm(xa, wa, EPS)
    dx, dw = mx.grad(loss(lambda a, b: ext.rms_norm(a, b, EPS)), argnums=(0, 1))(xa, wa)
    twin = mx.fast.rms_norm(xa, wa, EPS)
    tdx, tdw = mx.grad(loss(lambda a, b: mx.fast.rms_norm(a, b, EPS)), argnums=(0, 1))(xa, wa)
    assert _err(ours, y_ref) < 1e-5 * max(1.0, np.abs(y_ref).max()), _err(ours, y_ref)
    assert _err(ours, twin) < 1e-5 * max(1.0, np.abs(y_ref).max()), _err(ours, twin)
    assert _err(dx, dx_ref) < 1e-4 * max(1.0, np.abs(dx_ref).max()), _err(dx, dx_ref)
    assert _err(dx, tdx) < 1e-4 * max(1.0, np.abs(dx_ref).max()), _err(dx, tdx)
    assert _err(dw, dw_ref) < 1e-5 * max(1.0, np.abs(dw_ref).max()) * np.sqrt(x.size), _err(
        dw, dw_ref
    )
    assert _err(dw, tdw) < 1e-5 * max(1.0, np.abs(dw_ref).max()) * np.sqrt(x.size), _err(dw, tdw)
    assert np.all(np.array(ours).reshape(-1, shape[-1])[0] == 0.0)


def test_rms_norm_gradient_of_x_alone_and_strided_input(ext):
    """A frozen weight (LoRA) asks only for d/dx; a transposed view is made contiguous first."""
    rng = np.random.default_rng(7)
    base = mx.array(rng.normal(size=(33, 9)).astype(np.float32))
    x = base.T  # (9, 33), not row-contiguous
    w = mx.array(rng.normal(size=33).astype(np.float32))
    g = mx.array(rng.normal(size=(9, 33)).astype(np.float32))
    y_ref, dx_ref, _ = _rms_ref(np.array(x), np.array(w), np.array(g))
    assert _err(ext.rms_norm(x, w, EPS), y_ref) < 1e-5
    dx = mx.grad(lambda a: (ext.rms_norm(a.T, w, EPS) * g).sum())(base)
    assert _err(dx, dx_ref.T) < 1e-4 * max(1.0, np.abs(dx_ref).max())


@pytest.mark.parametrize("shape", [(31,), (2, 32), (3, 33), (4, 1536), (64, 1536)])
def test_silu_mul_matches_float64_and_plain(ext, shape):
    rng = np.random.default_rng(shape[-1])
    a = (rng.normal(size=shape) * 6).astype(np.float32)
    a.reshape(-1)[:3] = [-100.0, 100.0, 0.0]  # saturated and zero gates
    b = rng.normal(size=shape).astype(np.float32)
    g = rng.normal(size=shape).astype(np.float32)
    y_ref, da_ref, db_ref = _silu_ref(a, b, g)
    aa, ba, ga = mx.array(a), mx.array(b), mx.array(g)
    ours = ext.silu_mul(aa, ba)
    da, db = mx.grad(lambda p, q: (ext.silu_mul(p, q) * ga).sum(), argnums=(0, 1))(aa, ba)
    twin = nn.silu(aa) * ba
    tda, tdb = mx.grad(lambda p, q: ((nn.silu(p) * q) * ga).sum(), argnums=(0, 1))(aa, ba)
    for got, ref, twin_val in ((ours, y_ref, twin), (da, da_ref, tda), (db, db_ref, tdb)):
        scale = max(1.0, float(np.abs(ref).max()))
        assert _err(got, ref) < 2e-6 * scale, (_err(got, ref), scale)
        assert _err(got, twin_val) < 2e-6 * scale, (_err(got, twin_val), scale)
        assert np.isfinite(np.array(got)).all()


def _softmax_ref(s, mask, g):
    """float64 masked softmax (rows with no key set: zeros) and the gradient of sum(p * g)."""
    s, g = np.array(s, dtype=np.float64), np.array(g, dtype=np.float64)
    mask = np.broadcast_to(np.array(mask), s.shape)
    z = np.where(mask, s, -np.inf)
    m = z.max(-1, keepdims=True)
    e = np.where(mask, np.exp(z - np.where(np.isfinite(m), m, 0.0)), 0.0)
    tot = e.sum(-1, keepdims=True)
    p = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return p, p * (g - (g * p).sum(-1, keepdims=True))


@pytest.mark.parametrize("keys", [31, 32, 33, 130])
def test_masked_softmax_matches_float64_and_the_stand_in(ext, keys):
    """Attention's layout: scores (B, Hkv, rep, L, S), a causal + padding mask (B, 1, 1, L, S)
    broadcast over the heads; one batch row's first query sees no key (all zeros)."""
    rng = np.random.default_rng(keys)
    B, Hkv, rep, L = 2, 3, 3, 5
    s = (rng.normal(size=(B, Hkv, rep, L, keys)) * 4).astype(np.float32)
    start = keys - L  # query l sits at slot start + l
    mask = np.arange(keys)[None, :] <= (start + np.arange(L))[:, None]  # (L, S) causal
    mask = np.broadcast_to(mask, (B, L, keys)).copy()
    mask[1, :, :3] = False  # row 1 is left-padded by three slots
    mask[0, 0, :] = False  # and one query of row 0 sees nothing
    mask = mask[:, None, None]
    g = rng.normal(size=s.shape).astype(np.float32)
    p_ref, ds_ref = _softmax_ref(s, mask, g)
    sa, ma, ga = mx.array(s), mx.array(mask), mx.array(g)
    ours = ext.masked_softmax(sa, ma)
    ds = mx.grad(lambda a: (ext.masked_softmax(a, ma) * ga).sum())(sa)
    assert _err(ours, p_ref) < 1e-6, _err(ours, p_ref)
    assert _err(ds, ds_ref) < 1e-5 * max(1.0, np.abs(ds_ref).max()), _err(ds, ds_ref)
    stand_in = cpu_ops.masked_softmax_cpu(sa, ma)
    seen = np.broadcast_to(np.array(mask).any(-1, keepdims=True), s.shape)
    assert _err(np.where(seen, np.array(ours), 0), np.where(seen, np.array(stand_in), 0)) < 1e-5


def test_attention_with_the_kernel_matches_sdpa(ext, monkeypatch):
    """cpu_ops.attention (GQA, the native softmax inside) against MLX's fused attention."""
    monkeypatch.setattr(cpu_ops, "ENABLED", True)
    rng = np.random.default_rng(3)
    B, H, Hkv, L, S, hd = 2, 9, 3, 4, 33, 16
    q, k, v = (
        mx.array(rng.normal(size=shape).astype(np.float32))
        for shape in ((B, H, L, hd), (B, Hkv, S, hd), (B, Hkv, S, hd))
    )
    mask = np.arange(S)[None, :] <= (S - L + np.arange(L))[:, None]
    mask = np.broadcast_to(mask, (B, 1, L, S)).copy()
    mask[1, :, :, :2] = False
    mask = mx.array(mask)
    ours = cpu_ops.attention(q, k, v, 0.25, mask)
    want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.25, mask=mask)
    assert _err(ours, want) < 1e-5, _err(ours, want)


def _attention_ref(q, k, v, mask, scale):
    """float64 masked GQA attention; a query with no key set gives zeros."""
    q, k, v = (np.array(a, dtype=np.float64) for a in (q, k, v))
    B, H, L, hd = q.shape
    rep = H // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)  # head h reads kv head h // rep
    s = np.einsum("bhld,bhsd->bhls", q, k) * scale
    p, _ = _softmax_ref(s, np.broadcast_to(np.array(mask), s.shape), np.zeros_like(s))
    return np.einsum("bhls,bhsd->bhld", p, v)


def _decode_case(rng, B, H, Hkv, L, S, hd, capacity):
    """q (B, H, L, hd) and k, v as the cache's [:, :, :S] views of (B, Hkv, capacity, hd) buffers;
    the model's mask (B, 1, L, S) with row b left-padded by b % 4 slots, and the last row's
    first query seeing nothing (a fully masked row)."""
    q = mx.array(rng.normal(size=(B, H, L, hd)).astype(np.float32))
    kb, vb = (
        mx.array(rng.normal(size=(B, Hkv, capacity, hd)).astype(np.float32)) for _ in range(2)
    )
    pad = mx.array((np.arange(B) % 4).clip(max=S - L).astype(np.int32))
    mask = np.array(model.attention_mask(pad, S - L, L))
    if B > 1:
        mask[-1, :, 0, :] = False
    return q, kb[:, :, :S], vb[:, :, :S], mx.array(mask)


DECODE_CASES = [  # (B, H, Hkv, L, S, hd): GQA 9/3 at SmolLM2's head dim, odd heads and lengths
    (1, 9, 3, 1, 1, 64),
    (2, 9, 3, 1, 31, 64),
    (3, 9, 3, 1, 32, 64),
    (5, 9, 3, 1, 33, 64),
    (64, 9, 3, 1, 33, 64),  # the threaded path
    (64, 9, 3, 1, 130, 64),
    (2, 5, 1, 3, 33, 64),
    (2, 4, 2, 2, 17, 128),
    (3, 6, 3, 1, 31, 8),  # the generic head dim (tiny test models)
    (2, 3, 3, 4, 9, 33),
]


@pytest.mark.parametrize("B,H,Hkv,L,S,hd", DECODE_CASES)
def test_decode_attention_matches_float64_and_the_plain_path(ext, B, H, Hkv, L, S, hd):
    """The fused kernel over the cache's view against float64, cpu_ops' matmul path and MLX's
    fused attention (those two only on queries with a key: they give NaN where none is set)."""
    rng = np.random.default_rng(B * 1000 + S * 10 + hd)
    q, k, v, mask = _decode_case(rng, B, H, Hkv, L, S, hd, capacity=S + 7)
    scale = hd**-0.5
    ours = ext.decode_attention(q, k, v, mask, scale)
    ref = _attention_ref(q, k, v, mask, scale)
    assert ours.shape == q.shape and ours.dtype == mx.float32
    assert _err(ours, ref) < 2e-6 * max(1.0, np.abs(ref).max()), _err(ours, ref)
    seen = np.broadcast_to(np.array(mask).any(-1, keepdims=True), ours.shape)
    if not seen.all():
        assert np.all(np.array(ours)[~seen] == 0.0)
    for twin in (
        cpu_ops._attention_block(q, k, v, scale, mask),
        mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask),
    ):
        assert _err(np.where(seen, np.array(ours), 0), np.where(seen, np.array(twin), 0)) < 2e-6


def test_decode_attention_gradient_and_a_strided_cache(ext):
    """The gradient (through the plain formula) equals the matmul path's for q, k and v; a k/v
    whose last axis is not contiguous (a transposed buffer) is gathered, with the same values."""
    rng = np.random.default_rng(11)
    q, k, v, mask = _decode_case(rng, 4, 9, 3, 2, 21, 64, capacity=30)
    mask = mx.array(np.array(mask)[:3].tolist() + [np.ones((1, 2, 21), bool).tolist()])
    g = mx.array(rng.normal(size=q.shape).astype(np.float32))

    def loss(fn):
        return lambda a, b, c: (fn(a, b, c) * g).sum()

    ours = mx.grad(loss(lambda a, b, c: ext.decode_attention(a, b, c, mask, 0.125)), (0, 1, 2))
    plain = mx.grad(loss(lambda a, b, c: cpu_ops._attention_block(a, b, c, 0.125, mask)), (0, 1, 2))
    for got, want in zip(ours(q, k, v), plain(q, k, v), strict=True):
        assert _err(got, want) < 1e-5 * max(1.0, float(mx.abs(want).max())), _err(got, want)
    kt = mx.array(np.ascontiguousarray(np.array(k).swapaxes(-1, -2))).swapaxes(-1, -2)
    gathered = ext.decode_attention(q, kt, v, mask, 0.125)
    # the same arithmetic on a differently strided k: equal up to rounding
    assert _err(gathered, ext.decode_attention(q, k, v, mask, 0.125)) < 1e-6


def test_attention_dispatches_decode_to_the_fused_kernel(ext, monkeypatch):
    """cpu_ops.attention: few queries go to the fused decode kernel, longer ones to the prefill
    kernel; both give MLX's fused attention's values (on queries with a key); the switch at 0
    turns the decode kernel off."""
    monkeypatch.setattr(cpu_ops, "ENABLED", True)
    calls = []
    real = ext.decode_attention
    monkeypatch.setattr(ext, "decode_attention", lambda *a: calls.append(a[0].shape) or real(*a))
    rng = np.random.default_rng(4)
    for L in (1, cpu_ops.FUSED_MAX_QUERIES, cpu_ops.FUSED_MAX_QUERIES + 1):
        q, k, v, mask = _decode_case(rng, 3, 9, 3, L, L + 20, 64, capacity=L + 24)
        want = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.125, mask=mask)
        got = cpu_ops.attention(q, k, v, 0.125, mask)
        seen = np.broadcast_to(np.array(mask).any(-1, keepdims=True), got.shape)
        assert _err(np.where(seen, got, 0), np.where(seen, want, 0)) < 2e-6
    assert [shape[2] for shape in calls] == [1, cpu_ops.FUSED_MAX_QUERIES]
    monkeypatch.setattr(cpu_ops, "FUSED_MAX_QUERIES", 0)
    cpu_ops.attention(q[:, :, :1], k, v, 0.125, mask[:, :, :1])
    assert len(calls) == 2


def _prefill_ref(q, k, v, mask, scale, g):
    """float64 masked GQA attention, its log-sum-exp and the gradients of sum(out * g) for q, k
    and v; a query with no key set gives zeros, a log-sum-exp of -inf and no gradient."""
    q, k, v, g = (np.array(a, dtype=np.float64) for a in (q, k, v, g))
    B, H, L, hd = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    rep = H // Hkv
    kk, vv = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    m = np.broadcast_to(np.array(mask), (B, H, L, S))
    s = np.einsum("bhld,bhsd->bhls", q, kk) * scale
    top = np.where(m, s, -np.inf).max(-1, keepdims=True)
    seen = np.isfinite(top)
    e = np.where(m, np.exp(s - np.where(seen, top, 0.0)), 0.0)
    total = e.sum(-1, keepdims=True)
    p = e / np.where(seen, total, 1.0)
    lse = np.where(seen, top + np.log(np.where(seen, total, 1.0)), -np.inf)[..., 0]
    dp = g @ vv.swapaxes(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * scale
    dk = (ds.swapaxes(-1, -2) @ q).reshape(B, Hkv, rep, S, hd).sum(2)
    dv = (p.swapaxes(-1, -2) @ g).reshape(B, Hkv, rep, S, hd).sum(2)
    return p @ vv, lse, ds @ kk, dk, dv


def _close(got, want, rel):
    want = np.asarray(want, dtype=np.float64)
    return _err(got, want) < rel * max(1.0, float(np.abs(want).max()))


PREFILL_CASES = [  # (B, H, Hkv, L, S, hd): GQA 9/3, 4/2, 3/3, 5/1; head dims 64 and 33
    (1, 9, 3, 1, 1, 64),
    (2, 9, 3, 17, 40, 64),
    (3, 9, 3, 81, 140, 64),  # the reward model's scoring
    (2, 4, 2, 130, 300, 64),
    (1, 9, 3, 130, 130, 64),  # a whole prefill, batch 1
    (2, 3, 3, 17, 30, 33),
    (3, 5, 1, 81, 90, 33),
    (32, 9, 3, 79, 140, 64),  # the policy's update
]


@pytest.mark.parametrize("B,H,Hkv,L,S,hd", PREFILL_CASES)
def test_prefill_attention_matches_float64_and_the_plain_path(ext, B, H, Hkv, L, S, hd):
    """The prefill kernel over the cache's view (left padding, a fully masked query), its
    log-sum-exp and its native gradients of q, k and v against float64 and the matmul path
    (values on queries with a key: the plain twins give NaN elsewhere)."""
    rng = np.random.default_rng(B * 1000 + L * 10 + hd)
    q, k, v, mask = _decode_case(rng, B, H, Hkv, L, S, hd, capacity=S + 9)
    g = mx.array(rng.normal(size=q.shape).astype(np.float32))
    scale = hd**-0.5
    out, lse = ext.prefill_attention(q, k, v, mask, scale)
    ref, lse_ref, *grads_ref = _prefill_ref(q, k, v, mask, scale, g)
    assert out.shape == q.shape and lse.shape == q.shape[:3] and out.dtype == mx.float32
    assert _close(out, ref, 2e-6), _err(out, ref)
    seen = np.isfinite(lse_ref)
    assert _close(np.array(lse)[seen], lse_ref[seen], 2e-6)
    assert np.all(np.array(lse)[~seen] == -np.inf) and np.all(np.array(out)[~seen] == 0.0)
    twin = cpu_ops._attention_block(q, k, v, scale, mask)
    assert _err(np.array(out)[seen], np.array(twin)[seen]) < 2e-6

    def loss(fn):
        return lambda a, b, c: (fn(a, b, c) * g).sum()

    ours = mx.grad(loss(lambda a, b, c: ext.prefill_attention(a, b, c, mask, scale)[0]), (0, 1, 2))
    plain = mx.grad(loss(lambda a, b, c: cpu_ops._attention_block(a, b, c, scale, mask)), (0, 1, 2))
    for got, want, want64 in zip(ours(q, k, v), plain(q, k, v), grads_ref, strict=True):
        assert got.shape == want64.shape
        assert _close(got, want64, 1e-5), _err(got, want64)
        assert _close(got, want, 1e-5), _err(got, want)
    if not seen.all():  # a query with no key: zero gradient for it
        assert np.all(np.array(ours(q, k, v)[0])[~seen] == 0.0)


def test_prefill_attention_broadcast_mask_lse_gradient_and_strided_keys(ext):
    """A causal mask broadcast over rows and heads ((L, S) and (1, 1, L, S), read as a view),
    the log-sum-exp's own gradient (dS += P dlse), and a k whose last axis is not contiguous."""
    rng = np.random.default_rng(21)
    B, H, Hkv, L, S, hd = 4, 9, 3, 33, 50, 64
    q, k, v, _ = _decode_case(rng, B, H, Hkv, L, S, hd, capacity=S)
    causal = np.arange(S)[None, :] <= (S - L + np.arange(L))[:, None]
    ref, lse_ref, *_ = _prefill_ref(q, k, v, causal, 0.125, mx.zeros(q.shape))
    for mask in (mx.array(causal), mx.array(causal)[None, None]):
        out, lse = ext.prefill_attention(q, k, v, mask, 0.125)
        assert _close(out, ref, 2e-6) and _close(lse, lse_ref, 2e-6)
    m = mx.array(causal)
    w = mx.array(rng.normal(size=(B, H, L)).astype(np.float32))

    def plain_lse(a, b):
        s = (a @ mx.repeat(b, H // Hkv, axis=1).swapaxes(-1, -2)) * 0.125
        return (mx.logsumexp(mx.where(m, s, -mx.inf), axis=-1) * w).sum()

    ours = mx.grad(lambda a, b: (ext.prefill_attention(a, b, v, m, 0.125)[1] * w).sum(), (0, 1))
    for got, want in zip(ours(q, k), mx.grad(plain_lse, (0, 1))(q, k), strict=True):
        assert _close(got, want, 1e-5), _err(got, want)
    kt = mx.array(np.ascontiguousarray(np.array(k).swapaxes(-1, -2))).swapaxes(-1, -2)
    assert _err(ext.prefill_attention(q, kt, v, m, 0.125)[0], ref) < 2e-6 * max(
        1, np.abs(ref).max()
    )


def test_attention_dispatches_long_runs_to_the_prefill_kernel(ext, monkeypatch):
    """cpu_ops.attention: above FUSED_MAX_QUERIES the prefill kernel, also under mx.grad and
    inside blocked(), with the matmul path's values and gradients; NATIVE_PREFILL off gives the
    matmul path."""
    monkeypatch.setattr(cpu_ops, "ENABLED", True)
    calls = []
    real = ext.prefill_attention
    monkeypatch.setattr(ext, "prefill_attention", lambda *a: calls.append(a[0].shape) or real(*a))
    rng = np.random.default_rng(8)
    q, k, v, mask = _decode_case(rng, 16, 9, 3, 81, 140, 64, capacity=160)
    seen = np.broadcast_to(np.array(mask).any(-1, keepdims=True), q.shape)
    plain_out = np.where(seen, cpu_ops.attention_cpu(q, k, v, 0.125, mask), 0)
    got = cpu_ops.attention(q, k, v, 0.125, mask)
    with cpu_ops.blocked():
        got_blocked = cpu_ops.attention(q, k, v, 0.125, mask)
    for a in (got, got_blocked):
        assert _err(np.where(seen, a, 0), plain_out) < 2e-6
    assert len(calls) == 2
    g = mx.array(rng.normal(size=q.shape).astype(np.float32))

    def loss(fn):
        return mx.grad(lambda a, b, c: (fn(a, b, c, 0.125, mask) * g).sum(), (0, 1, 2))

    ours, plain = loss(cpu_ops.attention)(q, k, v), loss(cpu_ops.attention_cpu)(q, k, v)
    for got, want in zip(ours, plain, strict=True):
        assert _close(got, want, 1e-5), _err(got, want)
    assert len(calls) == 3
    monkeypatch.setattr(cpu_ops, "NATIVE_PREFILL", False)
    assert _err(np.where(seen, cpu_ops.attention(q, k, v, 0.125, mask), 0), plain_out) < 2e-6
    assert len(calls) == 3


def test_model_forward_and_gradient_equal_with_the_prefill_kernel_on_and_off(ext, monkeypatch):
    """End to end: a tiny model at head dim 64 (GQA 3/1) on 40 left-padded tokens gives the same
    log-probs and parameter gradients with the prefill kernel and with the matmul path."""
    monkeypatch.setattr(cpu_ops, "ENABLED", True)
    config = dict(LLAMA, hidden_size=192, num_attention_heads=3, num_key_value_heads=1, head_dim=64)
    net = tiny_model(config)
    rng = np.random.default_rng(9)
    tokens = mx.array(rng.integers(0, config["vocab_size"], size=(3, 40)).astype(np.int32))
    pad = mx.array([0, 5, 17], dtype=mx.int32)

    def loss(m):
        logp = nn.log_softmax(m.logits(m.hidden(tokens, pad=pad)), axis=-1)
        return logp[:, 20:].mean()

    calls = []
    real = ext.prefill_attention
    monkeypatch.setattr(ext, "prefill_attention", lambda *a: calls.append(1) or real(*a))
    on_val, on_grad = nn.value_and_grad(net, loss)(net)
    assert calls, "the prefill kernel was not used"
    monkeypatch.setattr(cpu_ops, "NATIVE_PREFILL", False)
    off_val, off_grad = nn.value_and_grad(net, loss)(net)
    assert abs(on_val.item() - off_val.item()) < 1e-5
    flat_on = dict(mlx.utils.tree_flatten(on_grad))
    for name, want in mlx.utils.tree_flatten(off_grad):
        assert _close(flat_on[name], want, 1e-4), (name, _err(flat_on[name], want))


def test_greedy_decode_equal_with_the_kernels_on_and_off(ext, monkeypatch):
    """End to end: a tiny model at SmolLM2's head dim (64, GQA 3/1) decodes the same greedy
    tokens with every kernel, with all but the fused attention, also without the native RoPE,
    and with none."""
    monkeypatch.setattr(cpu_ops, "ENABLED", True)
    config = dict(LLAMA, hidden_size=192, num_attention_heads=3, num_key_value_heads=1, head_dim=64)
    g = Gwen(tiny_model(config), tiny_tokenizer(config["vocab_size"]))
    prompts = ["t5 t6 t7", "t8 t9", "t10 t11 t12 t13 t14 t15 t16 t17 t18"]
    calls = []
    real = ext.decode_attention
    monkeypatch.setattr(ext, "decode_attention", lambda *a: calls.append(1) or real(*a))
    on = g.sample_group(prompts, 2, 24, temperature=0, seed=0)
    assert calls, "the fused kernel was not used"
    monkeypatch.setattr(cpu_ops, "FUSED_MAX_QUERIES", 0)
    monkeypatch.setattr(cpu_ops, "NATIVE_PREFILL", False)
    no_fused = g.sample_group(prompts, 2, 24, temperature=0, seed=0)
    monkeypatch.setattr(cpu_ops, "NATIVE_ROPE", False)
    no_rope = g.sample_group(prompts, 2, 24, temperature=0, seed=0)
    monkeypatch.setattr(cpu_native, "load", lambda: None)
    off = g.sample_group(prompts, 2, 24, temperature=0, seed=0)
    assert on.tokens.tolist() == no_fused.tokens.tolist() == no_rope.tokens.tolist()
    assert on.tokens.tolist() == off.tokens.tolist()
    assert _err(on.logprobs, off.logprobs) < 1e-4


@pytest.mark.parametrize("B,L,H,hd", [(1, 1, 9, 64), (64, 1, 3, 64), (2, 33, 9, 64), (3, 5, 2, 8)])
def test_rope_matches_float64_and_the_compiled_twin(ext, B, L, H, hd):
    """RoPE from cpu_ops' tables on the model's layout (the projection (B, L, H, hd) transposed,
    read in place), values and the gradient of x, against float64 and the compiled twin; a
    last axis that is not contiguous takes the strided loop."""
    rng = np.random.default_rng(B * L + hd)
    x = mx.array(rng.normal(size=(B, L, H, hd)).astype(np.float32)).transpose(0, 2, 1, 3)
    inv_freq = 10000.0 ** (-mx.arange(0, hd, 2, dtype=mx.float32) / hd)
    cos, sin = cpu_ops.rope_tables(inv_freq, 1.0, mx.array(np.arange(B) * 7, mx.int32), L)
    x64, c64, s64 = (np.array(a, dtype=np.float64) for a in (x, cos, sin))
    h = hd // 2
    ref = x64 * c64 + np.concatenate([x64[..., h:], x64[..., :h]], axis=-1) * s64
    ours = ext.rope(x, cos, sin)
    assert _err(ours, ref) < 2e-6 * max(1.0, np.abs(ref).max()), _err(ours, ref)
    assert _err(ours, cpu_ops._rope_apply(x, cos, sin)) < 2e-6 * max(1.0, np.abs(ref).max())
    g = mx.array(rng.normal(size=x.shape).astype(np.float32))
    dx = mx.grad(lambda a: (ext.rope(a, cos, sin) * g).sum())(x)
    want = mx.grad(lambda a: (cpu_ops._rope_apply(a, cos, sin) * g).sum())(x)
    assert _err(dx, want) < 2e-6 * max(1.0, float(mx.abs(want).max())), _err(dx, want)
    strided = mx.array(np.ascontiguousarray(np.array(x).swapaxes(-1, -2))).swapaxes(-1, -2)
    assert _err(ext.rope(strided, cos, sin), ours) < 1e-6  # a strided input, the same rotation


def test_rope_dispatch_and_table_gradients(ext, monkeypatch):
    """cpu_ops.rope_apply goes native for float32 under the switch and to the twin with
    NATIVE_ROPE off or float16; the tables' gradients (unused by the model) equal the twin's."""
    monkeypatch.setattr(cpu_ops, "ENABLED", True)
    rng = np.random.default_rng(2)
    x = mx.array(rng.normal(size=(2, 3, 4, 8)).astype(np.float32))
    cos, sin = (mx.array(rng.normal(size=(2, 1, 4, 8)).astype(np.float32)) for _ in range(2))
    calls = []
    real = ext.rope
    monkeypatch.setattr(ext, "rope", lambda *a: calls.append(1) or real(*a))
    want = cpu_ops._rope_apply(x, cos, sin)
    assert _err(cpu_ops.rope_apply(x, cos, sin), want) < 1e-6 and len(calls) == 1
    cpu_ops.rope_apply(x.astype(mx.float16), cos, sin)
    monkeypatch.setattr(cpu_ops, "NATIVE_ROPE", False)
    assert _err(cpu_ops.rope_apply(x, cos, sin), want) < 1e-6 and len(calls) == 1
    g = mx.array(rng.normal(size=x.shape).astype(np.float32))
    ours = mx.grad(lambda c, s: (ext.rope(x, c, s) * g).sum(), (0, 1))(cos, sin)
    twin = mx.grad(lambda c, s: (cpu_ops._rope_apply(x, c, s) * g).sum(), (0, 1))(cos, sin)
    for a, b in zip(ours, twin, strict=True):
        assert a.shape == b.shape == cos.shape and _err(a, b) < 1e-5


@pytest.mark.parametrize("rows,cols", [(1, 31), (3, 32), (5, 33), (33, 1000), (40, 4096)])
def test_row_statistics_match_float64_and_the_plain_twins(ext, rows, cols, monkeypatch):
    """The LM head's row statistics over a vocabulary chunk: log-sum-exp, entropy and the
    softmax gradient (with and without the entropy term), through cpu_ops' dispatch, against
    float64 and kernels' plain twins; one row holds a -1e30 logit (a masked vocabulary slot)."""
    monkeypatch.setattr(cpu_ops, "ENABLED", True)
    rng = np.random.default_rng(rows * cols)
    z = (rng.normal(size=(rows, cols)) * 5).astype(np.float32)
    z[0, 0] = -1e30
    g, gh = (rng.normal(size=rows).astype(np.float32) for _ in range(2))
    z64 = z.astype(np.float64)
    m = z64.max(-1, keepdims=True)
    lse_ref = (m + np.log(np.exp(z64 - m).sum(-1, keepdims=True)))[:, 0]
    logp = z64 - lse_ref[:, None]
    ent_ref = -(np.exp(logp) * logp).sum(-1)
    za, ga, gha = mx.array(z), mx.array(g), mx.array(gh)
    lse, ent = cpu_ops.lse_entropy(za, True)
    lse_only, none = cpu_ops.lse_entropy(za, False)
    assert none is None
    assert _err(lse, lse_ref) < 1e-5 * max(1.0, np.abs(lse_ref).max()), _err(lse, lse_ref)
    assert _err(lse_only, lse) < 1e-6 * max(1.0, np.abs(lse_ref).max())
    assert _err(ent, ent_ref) < 1e-4, _err(ent, ent_ref)
    plain_lse, _, plain_ent = kernels._row_stats_plain(za, mx.zeros((rows,), mx.int32), True)
    assert _err(lse, plain_lse) < 1e-5 * max(1.0, np.abs(lse_ref).max())
    assert _err(ent, plain_ent) < 1e-4

    p = np.exp(logp)
    want = p * (-g)[:, None]
    got = cpu_ops.softmax_grad(za, mx.array(lse_ref.astype(np.float32)), ga)
    assert _err(got, want) < 1e-5, _err(got, want)
    c = -(g + gh * ent_ref)
    want = p * (c[:, None] - gh[:, None] * logp)
    lse32, ent32 = mx.array(lse_ref.astype(np.float32)), mx.array(ent_ref.astype(np.float32))
    got = cpu_ops.softmax_grad(za, lse32, ga, gha, ent32)
    assert _err(got, want) < 1e-5 * max(1.0, np.abs(want).max()), _err(got, want)
    twin = kernels._softmax_grad_plain(za, lse32, ga, gha, ent32)
    assert _err(got, twin) < 1e-5 * max(1.0, np.abs(want).max()), _err(got, twin)


def test_two_cpu_streams_checkpoint_and_compile(ext):
    """Two CPU streams at once (the pool serves one, the other runs on its own thread), and the
    ops under mx.checkpoint and mx.compile, all give the plain values and gradients."""
    rng = np.random.default_rng(5)
    big = mx.array(rng.normal(size=(512, 576)).astype(np.float32))  # threaded: 295 K elements
    w = mx.array(rng.normal(size=576).astype(np.float32))
    s1, s2 = mx.new_stream(mx.cpu), mx.new_stream(mx.cpu)
    r1 = ext.rms_norm(big, w, EPS, stream=s1)
    r2 = ext.rms_norm(-big, w, EPS, stream=s2)
    mx.eval(r1, r2)
    want = mx.fast.rms_norm(big, w, EPS)
    assert _err(r1, want) < 1e-4 and _err(r2, -want) < 1e-4, (_err(r1, want), _err(r2, -want))

    x, g = big[:8, :64], mx.array(rng.normal(size=(8, 64)).astype(np.float32))
    wx = w[:64]

    def ours(a, b):
        return (ext.silu_mul(ext.rms_norm(a, b, EPS), a) * g).sum()

    def plain(a, b):
        y = mx.fast.rms_norm(a, b, EPS)
        return (nn.silu(y) * a * g).sum()

    want = mx.grad(plain, argnums=(0, 1))(x, wx)
    for got in (
        mx.grad(mx.checkpoint(ours), argnums=(0, 1))(x, wx),
        mx.compile(mx.grad(ours, argnums=(0, 1)))(x, wx),
    ):
        assert max(_err(a, b) for a, b in zip(got, want, strict=True)) < 1e-4


def test_kernels_refuse_wrong_inputs(ext):
    x = mx.ones((2, 4), dtype=mx.float16)
    with pytest.raises(ValueError, match="float32"):
        ext.rms_norm(x, mx.ones((4,), dtype=mx.float16), EPS)
    with pytest.raises(ValueError, match="weight"):
        ext.rms_norm(mx.ones((2, 4)), mx.ones((3,)), EPS)
    with pytest.raises(ValueError, match="shapes"):
        ext.silu_mul(mx.ones((2, 4)), mx.ones((4,)))
    with pytest.raises(ValueError, match="bool"):
        ext.masked_softmax(mx.ones((2, 4)), mx.ones((2, 4)))
    with pytest.raises(ValueError, match="rows"):
        ext.lse_entropy(mx.ones((2, 3, 4)), True)
    with pytest.raises(ValueError, match="per-row"):
        ext.softmax_grad(mx.ones((2, 4)), mx.ones((3,)), mx.ones((2,)), mx.ones((2,)))


def _exact_draw(z, u, temperature):
    """float64 inverse CDF: the first token whose cumulative tempered mass exceeds u * total,
    and each draw's distance (in probability) to that token's nearer edge."""
    z = z.astype(np.float64)
    p = np.exp((z - z.max(axis=1, keepdims=True)) / temperature)
    cdf = np.cumsum(p, axis=1) / p.sum(axis=1, keepdims=True)
    tokens = (cdf <= u[:, None]).sum(axis=1)
    rows = np.arange(len(u))
    below = np.where(tokens > 0, cdf[rows, np.maximum(tokens - 1, 0)], 0.0)
    edge = np.minimum(u - below, cdf[rows, tokens] - u)
    return tokens, edge


@pytest.mark.parametrize("vocab", [1, 7, 256, 257, 1000, 49152])
def test_sample_rows_draws_the_inverse_cdf_token(ext, vocab):
    """The native draw against float64 and against the numpy sampler with the same uniforms:
    the same token in every row but at most two whose draw lies within 1e-6 of the token's edge
    (rounding may pick either side there); the log-prob under the tempered full softmax."""
    rng = np.random.default_rng(vocab)
    rows = 64
    z = (rng.normal(size=(rows, vocab)) * 3).astype(np.float32)
    z[:, ::5] -= 40.0  # low-mass tokens among the rest
    for temperature in (1.0, 0.8, 1.7):
        u = rng.random(rows)
        tok, logp, total = ext.sample_rows(
            mx.array(z), mx.array(u, dtype=mx.float64), 1 / temperature
        )
        tok, logp, total = np.array(tok), np.array(logp), np.array(total)
        want, edge = _exact_draw(z, u, temperature)
        off = np.flatnonzero(tok != want)
        assert len(off) <= 2 and (edge[off] < 1e-6).all(), (off, tok[off], want[off], edge[off])
        assert ((tok >= 0) & (tok < vocab)).all()
        zt = z.astype(np.float64) / temperature
        lse = np.log(np.exp(zt - zt.max(axis=1, keepdims=True)).sum(axis=1)) + zt.max(axis=1)
        assert np.abs(logp - (zt[np.arange(rows), tok] - lse)).max() < 2e-5
        ref = np.exp(zt - zt.max(axis=1, keepdims=True)).sum(axis=1)
        assert np.abs(total / ref - 1).max() < 1e-5
        np_tok, _ = sampling.sample_numpy(z, temperature, 1.0, _Fixed(u))
        off = np.flatnonzero(np_tok != tok)
        assert len(off) <= 2 and (edge[off] < 1e-6).all(), (off, edge[off])


class _Fixed:
    """A generator stand-in whose one draw is the given uniforms."""

    def __init__(self, u):
        self.u = u

    def random(self, n):
        assert n == len(self.u)
        return self.u


def test_sample_rows_never_draws_zero_mass_and_flags_bad_rows(ext):
    """-inf logits (and ones exp() underflows) never draw, even at u near 1; a row with NaN or
    +inf, or all -inf, gets token -1 and a NaN total, and the sampler names it."""
    z = np.full((5, 600), -np.inf, dtype=np.float32)
    z[:, 10], z[:, 300] = 0.0, np.log(2.0)
    z[:, 599] = -200.0  # exp(-200) underflows: no mass, like -inf
    z[2, 7] = np.nan
    z[3, 5] = np.inf
    z[4] = -np.inf
    u = np.array([0.0, np.nextafter(1.0, 0.0), 0.5, 0.5, 0.5])
    tok, logp, total = (
        np.array(a) for a in ext.sample_rows(mx.array(z), mx.array(u, dtype=mx.float64), 1.0)
    )
    assert tok[:2].tolist() == [10, 300]
    assert np.allclose(logp[:2], np.log([1 / 3, 2 / 3]), atol=1e-6)
    assert tok[2:].tolist() == [-1, -1, -1] and np.isnan(total[2:]).all()
    draw = sampling.make_sampler("numpy", 0, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"rows \[2, 3, 4\]"):
        draw(mx.array(z))
    with pytest.raises(ValueError, match="float64"):
        ext.sample_rows(mx.array(z), mx.array(u, dtype=mx.float32), 1.0)
    with pytest.raises(ValueError, match="inv_t"):
        ext.sample_rows(mx.array(z), mx.array(u, dtype=mx.float64), 0.0)


def test_numpy_sampler_takes_the_native_draw_under_the_switch(ext, monkeypatch):
    """make_sampler("numpy") draws through sample_rows without top-p, with the same uniforms as
    sample_numpy (per-row seeds and a subset of rows included); top-p, greedy and the switch off
    keep the numpy path."""
    monkeypatch.setattr(cpu_ops, "ENABLED", True)
    calls = []
    native_fn = sampling.sample_native

    def counted(*a):
        calls.append(1)
        return native_fn(*a)

    monkeypatch.setattr(sampling, "sample_native", counted)
    z = np.random.default_rng(5).normal(size=(12, 3000)).astype(np.float32) * 2
    seeds = list(range(100, 112))
    got = sampling.make_sampler("numpy", seeds, 0.9, 1.0)(mx.array(z))
    ref = sampling.sample_numpy(z, 0.9, 1.0, sampling.RowGenerators(seeds))
    assert calls == [1]
    assert (got[0] == ref[0]).mean() > 0.9 and np.abs(got[1] - ref[1])[
        got[0] == ref[0]
    ].max() < 1e-5
    some = sampling.make_sampler("numpy", seeds, 0.9, 1.0)(mx.array(z[[1, 4]]), [1, 4], 12)
    assert some[0].tolist() == got[0][[1, 4]].tolist()
    for temperature, top_p in ((0.9, 0.5), (0.0, 1.0)):
        sampling.make_sampler("numpy", 3, temperature, top_p)(mx.array(z))
    assert calls == [1, 1]
    with cpu_ops.native_kernels(False):
        sampling.make_sampler("numpy", 3, 0.9, 1.0)(mx.array(z))
    assert calls == [1, 1]


def test_cpu_ops_dispatches_to_the_kernels_under_the_switch(ext, monkeypatch):
    """Under the switch float32 goes native, float16 and the switch off take the plain twins;
    the model's norms are cpu_ops.RMSNorm, so they take the same route."""
    monkeypatch.setattr(cpu_ops, "ENABLED", True)
    x32 = mx.ones((2, 4))
    assert cpu_ops.native(x32, x32) is ext
    assert cpu_ops.native(x32, x32.astype(mx.float16)) is None
    norm = cpu_ops.RMSNorm(4)
    x = mx.array([[1.0, -2.0, 3.0, 0.5], [0.0, 0.0, 0.0, 0.0]])
    want = mx.fast.rms_norm(x, norm.weight, norm.eps)
    assert _err(norm(x), want) < 1e-6
    monkeypatch.setattr(cpu_ops, "ENABLED", False)
    assert cpu_ops.native(x32) is None
    assert _err(norm(x), want) < 1e-6


@pytest.mark.skipif(backend.backend_name() != "cpu", reason="the kernels are for the CPU backend")
def test_forced_build_failure_uses_the_plain_path_with_one_note(tmp_path):
    """$RL_VALUES_CPU_EXT=fail: the build fails, one `note:` line says so, and the ops still
    give the plain-MLX values."""
    script = (
        "from core import backend, cpu_ops, cpu_native\n"
        "import mlx.core as mx, mlx.nn as nn\n"
        "g = mx.array([[0.5, -1.0, 2.0]]); u = mx.array([[1.0, 2.0, 3.0]])\n"
        "w = mx.array([1.0, 2.0, 3.0])\n"
        "assert cpu_ops.ENABLED\n"
        "a = cpu_ops.silu_mul(g, u); b = cpu_ops.rms_norm(g, w, 1e-5)\n"
        "assert cpu_native.load() is None\n"
        "assert mx.allclose(a, nn.silu(g) * u, atol=1e-5).item()\n"
        "assert mx.allclose(b, mx.fast.rms_norm(g, w, 1e-5)).item()\n"
        "q = mx.random.normal((2, 3, 20, 8)); k = mx.random.normal((2, 1, 20, 8))\n"
        "m = mx.tril(mx.ones((20, 20), dtype=mx.bool_))[None, None]\n"
        "o = cpu_ops.attention(q, k, k, 0.3, m)\n"
        "want = mx.fast.scaled_dot_product_attention(q, k, k, scale=0.3, mask=m)\n"
        "assert mx.allclose(o, want, atol=1e-5).item()\n"
        "print('plain ok')\n"
    )
    env = {**os.environ, cpu_native.EXT_ENV: "fail", cpu_native.CACHE_ENV: str(tmp_path)}
    env.pop(backend.PLAIN_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "plain ok" in done.stdout
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1, done.stderr
    assert "fused CPU kernels unavailable" in notes[0] and "fail" in notes[0], notes
    assert not list(tmp_path.rglob("rl_cpu_ext*.so"))


def test_build_key_follows_the_sources(tmp_path, monkeypatch):
    """A changed source file gives a new cache folder, so a stale binary is never loaded."""
    for p in cpu_native.SOURCE_DIR.iterdir():
        (tmp_path / p.name).write_bytes(p.read_bytes())
    monkeypatch.setattr(cpu_native, "SOURCE_DIR", tmp_path)
    before = cpu_native.build_key()
    (tmp_path / "rl_cpu_ext.cpp").write_text("// changed\n")
    assert cpu_native.build_key() != before
