"""CPU-backend tuning: faster stand-ins for the plain MLX ops that MLX's CPU backend runs slowly.

MLX's CPU `exp` costs ~12-17 ns/element (numpy ~0.6), so silu, softmax and the vocabulary-sized
exps of the log-prob math dominate a CPU step; a compiled polynomial exp runs ~3 ns while its
operands stay cache-sized, and MLX's CPU elementwise kernels slow down ~4x per element beyond
(knowledge/inference.md). This module holds those stand-ins (silu·up, masked softmax attention,
RoPE from shared cos/sin tables, the log-prob kernels' CPU row statistics) behind ONE switch,
`ENABLED`, decided once from the backend and $RL_VALUES_PLAIN_KERNELS and read at call time (so
tests can flip it). Callers use the dispatching functions (`attention`, `silu_mul`, `rms_norm`,
`rope_for`); each falls back to its plain-MLX twin when the switch is off. Under the switch,
silu·up, RMSNorm, the masked softmax, attention (scores, softmax and values fused: a decode and a
prefill kernel), RoPE and the log-prob row statistics on float32 run the native kernels
(core/cpu_native.py) where they built. `blocked()` marks forward-only passes (the judge, prefill),
where exp-heavy ops also run in cache-sized blocks. It is not a kernel library: Metal/CUDA
kernels live in core/kernels.py.
"""

import contextlib
import functools
import math

from core import backend

# isort: split
from core import cpu_native

import mlx.core as mx
import mlx.nn as nn

ENABLED = backend.backend_name() == "cpu" and not backend.plain_ops_requested()

# Largest operand (float32 elements, 512 KiB) an exp-heavy CPU op works on at once.
CPU_BLOCK = 1 << 17
_LOG2E = 1.4426950408889634
_EXP2_TAYLOR = [math.log(2) ** k / math.factorial(k) for k in range(8)]

_blocked = False


@contextlib.contextmanager
def blocked():
    """Inside: attention and silu·up run in blocks of at most CPU_BLOCK elements.

    Only for forward-only passes (judge, prefill, reward-model scoring): judging 48 items took
    25 s instead of 39. Under autodiff the backward of many sliced blocks costs more than it
    saves (a 64 x 64-token policy forward+backward: 48 s blocked, 37 s not)."""
    global _blocked
    before, _blocked = _blocked, True
    try:
        yield
    finally:
        _blocked = before


def poly_exp(x: mx.array) -> mx.array:
    """exp(x) for x in [-87, 88]: 2^n by exponent bits times a degree-7 polynomial for 2^f
    (relative error ~1.4e-6). For use inside mx.compile'd functions on the CPU backend."""
    t = mx.clip(x * _LOG2E, -126.0, 127.0)
    n = mx.floor(t)
    f = t - n
    p = _EXP2_TAYLOR[-1]
    for c in reversed(_EXP2_TAYLOR[:-1]):
        p = p * f + c
    return p * mx.view((n.astype(mx.int32) + 127) << 23, mx.float32)


def spans(n: int, size: int) -> list[tuple[int, int]]:
    return [(i, min(i + size, n)) for i in range(0, n, size)]


# ----------------------------------------------------------------------------------------------
# silu(g) * u


# poly_exp computes in float32: the results are cast back so that half-precision inputs get
# outputs and cotangents of their own dtype (autodiff checks it).
@mx.compile
def _silu_mul_fwd(g, u):
    return (g * u / (1.0 + poly_exp(-g))).astype(g.dtype)


@mx.compile
def _silu_mul_bwd(g, u, cot):
    s = 1.0 / (1.0 + poly_exp(-g))
    return (cot * u * s * (1.0 + g * (1.0 - s))).astype(g.dtype), (cot * g * s).astype(u.dtype)


@mx.custom_function
def silu_mul_cpu(g, u):
    return _silu_mul_fwd(g, u)


@silu_mul_cpu.vjp
def _silu_mul_vjp(primals, cotangent, output):
    return _silu_mul_bwd(*primals, cotangent)


_native_on = True  # native_kernels(False) turns the native kernels off in this process


@contextlib.contextmanager
def native_kernels(on: bool):
    """Inside: the native kernels used (True, where they built) or not (False: the stand-ins
    and plain ops of before them). bench/train.py's A/B counts them as one optimization."""
    global _native_on
    before, _native_on = _native_on, bool(on)
    try:
        yield
    finally:
        _native_on = before


def native(*arrays: mx.array):
    """The fused native kernels (cpu_native) for these arrays: under the switch, all float32,
    and only once they built and loaded; else None."""
    if not ENABLED or not _native_on or any(a.dtype != mx.float32 for a in arrays):
        return None
    return cpu_native.load()


def silu_mul(g: mx.array, u: mx.array) -> mx.array:
    """silu(g) * u: the native kernel, else the CPU stand-in (in row blocks inside `blocked()`),
    else the plain twin."""
    if not ENABLED:
        return nn.silu(g) * u
    if g.shape == u.shape and (ext := native(g, u)) is not None:
        return ext.silu_mul(g, u)
    if not _blocked or g.size <= CPU_BLOCK:
        return silu_mul_cpu(g, u)
    width = g.shape[-1]
    g2, u2 = g.reshape(-1, width), u.reshape(-1, width)
    n = max(1, CPU_BLOCK // width)
    parts = [silu_mul_cpu(g2[i : i + n], u2[i : i + n]) for i in range(0, g2.shape[0], n)]
    return mx.concatenate(parts, axis=0).reshape(g.shape)


# ----------------------------------------------------------------------------------------------
# RMSNorm


def rms_norm(x: mx.array, weight: mx.array, eps: float) -> mx.array:
    """x / sqrt(mean(x^2, -1) + eps) * weight: the native kernel, else mx.fast.rms_norm."""
    if (ext := native(x, weight)) is not None:
        return ext.rms_norm(x, weight, eps)
    return mx.fast.rms_norm(x, weight, eps)


class RMSNorm(nn.RMSNorm):
    """nn.RMSNorm (same parameter, same checkpoint name) that dispatches through `rms_norm`."""

    def __call__(self, x: mx.array) -> mx.array:
        return rms_norm(x, self["weight"], self.eps)


# ----------------------------------------------------------------------------------------------
# Attention


@mx.compile
def _softmax_fwd(scores, mask):
    m = mx.max(mx.where(mask, scores, -mx.inf), axis=-1, keepdims=True)
    e = mx.where(mask, poly_exp(scores - m), 0.0)
    return e / mx.sum(e, axis=-1, keepdims=True)


@mx.compile
def _softmax_bwd(p, cot):
    return p * (cot - mx.sum(cot * p, axis=-1, keepdims=True))


@mx.custom_function
def masked_softmax_cpu(scores, mask):
    return _softmax_fwd(scores, mask)


@masked_softmax_cpu.vjp
def _masked_softmax_vjp(primals, cotangent, output):
    return _softmax_bwd(output, cotangent), mx.zeros_like(primals[1])


def masked_softmax(scores: mx.array, mask: mx.array) -> mx.array:
    """Softmax over the last axis where the boolean `mask` (broadcast) is set: the native kernel
    for float32 where it built, else the compiled stand-in. A row with no key set: the kernel
    gives zeros, the stand-in NaN (0/0); attention never reads such rows' outputs."""
    if (ext := native(scores)) is not None:
        return ext.masked_softmax(scores, mask)
    return masked_softmax_cpu(scores, mask)


def _attention_block(q, k, v, scale, mask):
    """GQA attention as matmuls + masked_softmax_cpu; q (B, H, L, hd), k/v (B, Hkv, S, hd)."""
    B, H, L, hd = q.shape
    Hkv = k.shape[1]
    q = q.reshape(B, Hkv, (H // Hkv) * L, hd)  # query head h uses kv head h // (H // Hkv)
    s = (q * scale) @ k.swapaxes(-1, -2)  # (B, Hkv, rep*L, S)
    s = s.reshape(B, Hkv, H // Hkv, L, -1)
    p = masked_softmax(s.astype(mx.float32), mask[:, :, None]).astype(v.dtype)
    return (p.reshape(B, Hkv, (H // Hkv) * L, -1) @ v).reshape(B, H, L, hd)


def attention_cpu(q, k, v, scale, mask, in_blocks: bool = False):
    """GQA attention; `in_blocks`: over blocks of batch rows (and of queries when one row's
    scores exceed CPU_BLOCK), so each block's (heads x queries x keys) scores stay cache-sized."""
    B, H, L, _ = q.shape
    S = k.shape[2]
    per_row = H * L * S
    if not in_blocks or B * per_row <= CPU_BLOCK:
        return _attention_block(q, k, v, scale, mask)
    row_mask = (lambda i, j: mask[i:j]) if mask.shape[0] > 1 else (lambda i, j: mask)
    if per_row <= CPU_BLOCK:
        n = CPU_BLOCK // per_row
        parts = [
            _attention_block(q[i : i + n], k[i : i + n], v[i : i + n], scale, row_mask(i, i + n))
            for i in range(0, B, n)
        ]
        return mx.concatenate(parts, axis=0)
    n = max(1, CPU_BLOCK // (H * S))  # queries per block
    rows = []
    for b in range(B):
        qb, kb, vb, mb = q[b : b + 1], k[b : b + 1], v[b : b + 1], row_mask(b, b + 1)
        parts = [
            _attention_block(qb[:, :, j : j + n], kb, vb, scale, mb[:, :, j : j + n])
            for j in range(0, L, n)
        ]
        rows.append(mx.concatenate(parts, axis=2))
    return mx.concatenate(rows, axis=0)


# Queries per row up to which attention runs as the native decode kernel (one pass over the
# cache's view per (row, kv head)); longer runs take the native prefill kernel (query tiles against
# the keys their mask allows, native backward) while NATIVE_PREFILL is on, else the matmul path.
# The two kernels' forwards cross between 2 and 4 queries (knowledge/cpu_extension.md).
FUSED_MAX_QUERIES = 3
NATIVE_PREFILL = True


def attention(q, k, v, scale: float, mask: mx.array) -> mx.array:
    """Masked GQA attention (B, H, L, hd); `mask` boolean (B, 1, L, S). On float32 with a
    boolean mask the native kernels run over the cache's view (decode's for few queries, else
    prefill's, which also has its own backward); they give zeros, not NaN, and zero gradients for
    a query with no key set (model.attention_mask never makes one)."""
    if not ENABLED:
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
    if mask.dtype == mx.bool_ and (ext := native(q, k, v)) is not None:
        if q.shape[2] <= FUSED_MAX_QUERIES:
            return ext.decode_attention(q, k, v, mask, scale)
        if NATIVE_PREFILL:
            return ext.prefill_attention(q, k, v, mask, scale)[0]
    return attention_cpu(q, k, v, scale, mask, in_blocks=_blocked)


# ----------------------------------------------------------------------------------------------
# RoPE


@mx.compile
def _rope_apply(x, cos, sin_signed):
    half = x.shape[-1] // 2
    return x * cos + mx.concatenate([x[..., half:], x[..., :half]], axis=-1) * sin_signed


def rope_tables(inv_freq: mx.array, scale: float, positions: mx.array, length: int):
    """(cos, sign-folded sin), each (B, 1, L, head_dim), for rows starting at `positions` (B,).

    Built once per forward and shared by every layer's q and k: on the CPU, mx.fast.rope
    recomputes the angles in each call and cost ~13 ms per decode step at 64 rows."""
    pos = (positions[:, None] + mx.arange(length)[None]).astype(mx.float32) * scale  # (B, L)
    angles = pos[..., None] * inv_freq  # (B, L, hd/2)
    cos, sin = mx.cos(angles), mx.sin(angles)
    return (
        mx.concatenate([cos, cos], axis=-1)[:, None],
        mx.concatenate([-sin, sin], axis=-1)[:, None],
    )


def rope_for(rope, positions: mx.array, length: int):
    """A function x (B, H, L, hd) -> x rotated, for rows whose first slot sits at `positions`.

    `rope` is model.Rope (its plain `__call__(x, offset)`, `inv_freq`, `scale`). On the CPU the
    cos/sin tables are built here once and shared by every layer."""
    if not ENABLED:
        return lambda x: rope(x, positions)
    cos, sin = rope_tables(rope.inv_freq, rope.scale, positions, length)
    return lambda x: rope_apply(x, cos, sin)


NATIVE_ROPE = True  # the native RoPE kernel under the switch (bench/cpu_native.py toggles it)


def rope_apply(x: mx.array, cos: mx.array, sin: mx.array) -> mx.array:
    """x * cos + rotate_half(x) * sin (sign folded into sin): the native kernel for float32, which
    reads the transposed projections in place, else the compiled twin."""
    if NATIVE_ROPE and (ext := native(x, cos, sin)) is not None:
        return ext.rope(x, cos, sin)
    return _rope_apply(x, cos, sin)


# ----------------------------------------------------------------------------------------------
# Row statistics and softmax gradient for kernels.token_logprobs on (rows, vocab-chunk) logits


@mx.compile
def _lse_cpu(z):
    m = mx.max(z, axis=-1, keepdims=True)
    return m[:, 0] + mx.log(mx.sum(poly_exp(z - m), axis=-1))


@mx.compile
def _lse_ent_cpu(z):
    # H = -sum p log p = log s + sum e (m - z) / s with e = exp(z - m), s = sum e: two
    # non-negative terms, no cancellation.
    m = mx.max(z, axis=-1, keepdims=True)
    e = poly_exp(z - m)
    s = mx.sum(e, axis=-1)
    log_s = mx.log(s)
    return m[:, 0] + log_s, log_s + mx.sum(e * (m - z), axis=-1) / s


def row_blocks(n_rows: int, n_cols: int) -> list[tuple[int, int]]:
    return spans(n_rows, max(1, CPU_BLOCK // max(n_cols, 1)))


def lse_entropy(z: mx.array, want_ent: bool):
    """Per row of float32 logits z: (logsumexp, entropy of softmax or None): the native kernel,
    else in row blocks."""
    if (ext := native(z)) is not None:
        lse, ent = ext.lse_entropy(z, want_ent)
        return lse, (ent if want_ent else None)
    fn = _lse_ent_cpu if want_ent else _lse_cpu
    outs = [fn(z[r0:r1]) for r0, r1 in row_blocks(z.shape[0], z.shape[-1])]
    if not want_ent:
        return mx.concatenate(outs), None
    return mx.concatenate([o[0] for o in outs]), mx.concatenate([o[1] for o in outs])


@mx.compile
def _softmax_grad_block(z, lse, c):
    return poly_exp(z - lse[:, None]) * c[:, None]


@mx.compile
def _softmax_grad_ent_block(z, lse, c, gh):
    d = z - lse[:, None]
    return poly_exp(d) * (c[:, None] - gh[:, None] * d)


def softmax_grad(z, lse, g, gh=None, ent=None):
    """kernels' `_softmax_grad_plain` (-softmax(z) * c, plus the entropy part): the native
    kernel, else on poly_exp over cache-sized blocks of rows."""
    if gh is None and (ext := native(z, lse, g)) is not None:
        return ext.softmax_grad(z, lse, -g, mx.zeros_like(g))
    if gh is not None and (ext := native(z, lse, g, gh, ent)) is not None:
        return ext.softmax_grad(z, lse, -(g + gh * ent), gh)
    parts = []
    for r0, r1 in row_blocks(z.shape[0], z.shape[-1]):
        if gh is None:
            parts.append(_softmax_grad_block(z[r0:r1], lse[r0:r1], -g[r0:r1]))
        else:
            c = -(g[r0:r1] + gh[r0:r1] * ent[r0:r1])
            parts.append(_softmax_grad_ent_block(z[r0:r1], lse[r0:r1], c, gh[r0:r1]))
    return mx.concatenate(parts) if len(parts) > 1 else parts[0]


@functools.cache
def streams() -> tuple:
    """(matmul stream, elementwise stream) for the chunked log-probs. MLX's CPU backend runs each
    elementwise op on one thread while BLAS matmuls use every core; two streams overlap the next
    chunk's matmul with this chunk's exp. GPUs parallelise each op already: (None, None)."""
    if backend.backend_name() != "cpu":
        return (None, None)
    return (mx.new_stream(mx.cpu), mx.new_stream(mx.cpu))
