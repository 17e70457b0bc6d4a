"""Per-token log-probability and KL math for GRPO, with fused backend kernels where they exist.

What it is: `token_logprobs` (log pi(token) and entropy from the LM head, chunked so no
(rows x vocab) float32 tensor exists for the whole batch, custom chunked VJP), its naive twin,
Schulman's k1/k2/k3 KL estimators in both directions (`kl_per_token`), and masked reductions.
Metal / CUDA kernels are used where that backend runs; the plain-MLX twin is the reference,
and on the CPU backend its vocabulary-sized exps run cpu_ops' polynomial exp over cache-sized
row blocks (cpu_ops.ENABLED). What it is not: a loss. Advantages, clipping and the GRPO
objective live in grpo.py.
"""

import contextlib
import functools
import logging
import math

from core import backend

# isort: split
from core import cpu_ops

import mlx.core as mx

log = logging.getLogger(__name__)

# Logits held per chunk (float32 elements): 64 MB, small next to a model. At least _MIN_ROWS rows
# per chunk even for large vocabularies: at V=151936 chunks of 104 rows ran the forward 1.2x
# slower than 256-512 rows (thinner matmuls, more chunks).
_CHUNK_ELEMS = 1 << 24
_MIN_ROWS = 256
_BWD_ROWS = 16384
# `keep_logits`: the forward's logits are kept for the backward (no recomputed product) when the
# whole (rows x vocabulary) block holds at most this many float32 elements (512 MiB).
_KEEP_ELEMS = 1 << 27
_THREADS = 256  # per row-reduction threadgroup / CUDA block: 8 simdgroups or warps of 32


@functools.cache
def kernel_backend() -> str:
    """'metal', 'cuda' or 'plain': which implementation the fused paths use, chosen once.

    `RL_VALUES_PLAIN_KERNELS=1` forces the plain-MLX twin (the reference, and the CPU path)."""
    name = backend.backend_name()
    if backend.plain_ops_requested():
        choice, why = "plain", f"{backend.PLAIN_ENV}=1"
    elif name in ("metal", "cuda"):
        choice, why = name, f"backend is {name}"
    else:
        choice, why = "plain", f"backend is {name}: no custom kernels"
    log.debug("kernels: using %s kernels (%s)", choice, why)
    return choice


_LAG = 2  # chunks in flight: chunk i waits for chunk i - _LAG


def _on(stream):
    return mx.stream(stream) if stream is not None else contextlib.nullcontext()


# ----------------------------------------------------------------------------------------------
# Backend kernel sources. One threadgroup (Metal) / block (CUDA) of _THREADS threads reduces one
# row of logits with an online softmax: running max m, s = sum exp(z - m) and
# u = sum exp(z - m) (z - m). Then lse = m + log s and entropy = log s - u / s; accumulating
# (z - m) rather than z avoids the cancellation in lse - sum softmax * z.

_METAL_HEADER = """
inline void rlv_merge(thread float& m, thread float& s, thread float& u,
                      float m2, float s2, float u2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) { m = m2; s = s2; u = u2; return; }
  float mn = metal::max(m, m2);
  float a = metal::exp(m - mn), b = metal::exp(m2 - mn);
  u = a * (u + (m - mn) * s) + b * (u2 + (m2 - mn) * s2);
  s = a * s + b * s2;
  m = mn;
}

"""

_METAL_ROW_STATS = """
  uint row = threadgroup_position_in_grid.x;
  uint lid = thread_position_in_threadgroup.x;
  uint tg = threads_per_threadgroup.x;
  uint lane = thread_index_in_simdgroup;
  uint sg = simdgroup_index_in_threadgroup;
  int V = n_cols[0];
  size_t base = size_t(row) * size_t(V);
  float m = -INFINITY, s = 0.0f, u = 0.0f;
  for (int j = int(lid); j < V; j += int(tg)) {
    float v = z[base + j];
    if (v == -INFINITY) continue;
    if (m == -INFINITY) {
      m = v; s = 1.0f; u = 0.0f;
    } else if (v > m) {
      float c = metal::exp(m - v);
      u = c * (u + (m - v) * s); s = s * c + 1.0f; m = v;
    } else {
      float d = v - m, e = metal::exp(d);
      s += e; u += e * d;
    }
  }
  for (ushort off = 16; off > 0; off >>= 1) {
    rlv_merge(m, s, u, simd_shuffle_xor(m, off), simd_shuffle_xor(s, off),
              simd_shuffle_xor(u, off));
  }
  threadgroup float pm[32], ps[32], pu[32];
  if (lane == 0) { pm[sg] = m; ps[sg] = s; pu[sg] = u; }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    uint nsg = (tg + 31) / 32;
    m = lane < nsg ? pm[lane] : -INFINITY;
    s = lane < nsg ? ps[lane] : 0.0f;
    u = lane < nsg ? pu[lane] : 0.0f;
    for (ushort off = 16; off > 0; off >>= 1) {
      rlv_merge(m, s, u, simd_shuffle_xor(m, off), simd_shuffle_xor(s, off),
                simd_shuffle_xor(u, off));
    }
    if (lane == 0) {
      float log_s = metal::log(s);
      lse[row] = m + log_s;
      ent[row] = s > 0.0f ? log_s - u / s : 0.0f;
      int k = tok[row];
      tgt[row] = (k >= 0 && k < V) ? z[base + k] : 0.0f;
    }
  }
"""

_METAL_SOFTMAX_GRAD = """
  uint idx = thread_position_in_grid.x;
  int V = n_cols[0];
  if (size_t(idx) >= size_t(n_rows[0]) * size_t(V)) return;
  uint row = idx / uint(V);
  float d = z[idx] - lse[row];
  float p = metal::exp(d);
  float c = g[row];
  if (HAS_ENT) c += gh[row] * (d + ent[row]);
  out[idx] = p == 0.0f ? 0.0f : -p * c;
"""

_CUDA_HEADER = """
#define RLV_NEG_INF (-__int_as_float(0x7f800000))

__device__ inline void rlv_merge(float& m, float& s, float& u, float m2, float s2, float u2) {
  if (m2 == RLV_NEG_INF) return;
  if (m == RLV_NEG_INF) { m = m2; s = s2; u = u2; return; }
  float mn = fmaxf(m, m2);
  float a = expf(m - mn), b = expf(m2 - mn);
  u = a * (u + (m - mn) * s) + b * (u2 + (m2 - mn) * s2);
  s = a * s + b * s2;
  m = mn;
}

"""

_CUDA_ROW_STATS = """
  int row = blockIdx.x;
  int lid = threadIdx.x, tg = blockDim.x, lane = lid & 31, warp = lid >> 5;
  int V = n_cols[0];
  const float* zr = z + (size_t)row * (size_t)V;
  float m = RLV_NEG_INF, s = 0.0f, u = 0.0f;
  for (int j = lid; j < V; j += tg) {
    float v = zr[j];
    if (v == RLV_NEG_INF) continue;
    if (m == RLV_NEG_INF) {
      m = v; s = 1.0f; u = 0.0f;
    } else if (v > m) {
      float c = expf(m - v);
      u = c * (u + (m - v) * s); s = s * c + 1.0f; m = v;
    } else {
      float d = v - m, e = expf(d);
      s += e; u += e * d;
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    rlv_merge(m, s, u, __shfl_xor_sync(0xffffffffu, m, off),
              __shfl_xor_sync(0xffffffffu, s, off), __shfl_xor_sync(0xffffffffu, u, off));
  }
  __shared__ float pm[32], ps[32], pu[32];
  if (lane == 0) { pm[warp] = m; ps[warp] = s; pu[warp] = u; }
  __syncthreads();
  if (warp == 0) {
    int nw = (tg + 31) / 32;
    m = lane < nw ? pm[lane] : RLV_NEG_INF;
    s = lane < nw ? ps[lane] : 0.0f;
    u = lane < nw ? pu[lane] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) {
      rlv_merge(m, s, u, __shfl_xor_sync(0xffffffffu, m, off),
                __shfl_xor_sync(0xffffffffu, s, off), __shfl_xor_sync(0xffffffffu, u, off));
    }
    if (lane == 0) {
      float log_s = logf(s);
      lse[row] = m + log_s;
      ent[row] = s > 0.0f ? log_s - u / s : 0.0f;
      int k = tok[row];
      tgt[row] = (k >= 0 && k < V) ? zr[k] : 0.0f;
    }
  }
"""

_CUDA_SOFTMAX_GRAD = """
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  int V = n_cols[0];
  if (idx >= (size_t)n_rows[0] * (size_t)V) return;
  size_t row = idx / (size_t)V;
  float d = z[idx] - lse[row];
  float p = expf(d);
  float c = g[row];
  if (HAS_ENT) c += gh[row] * (d + ent[row]);
  out[idx] = p == 0.0f ? 0.0f : -p * c;
"""

_SIGNATURES = {
    "row_stats": (["z", "tok", "n_cols"], ["lse", "tgt", "ent"]),
    "softmax_grad": (["z", "lse", "g", "gh", "ent", "n_rows", "n_cols"], ["out"]),
}
_SOURCES = {
    "metal": (
        _METAL_HEADER,
        {
            "row_stats": _METAL_ROW_STATS,
            "softmax_grad": _METAL_SOFTMAX_GRAD,
        },
    ),
    "cuda": (
        _CUDA_HEADER,
        {
            "row_stats": _CUDA_ROW_STATS,
            "softmax_grad": _CUDA_SOFTMAX_GRAD,
        },
    ),
}


# The Metal sources compare against -INFINITY (masked logits, the empty running max), which holds
# only in Metal's safe math mode: fast math may assume no infinities. MLX 0.32.4's default is
# "safe"; it is pinned here so a changed default cannot silently break the masking. The sources
# index their inputs directly instead of naming `device` pointers: MLX passes an input of fewer
# than 8 elements in `constant` space, where a `device` pointer would not compile.
_METAL_OPTIONS = {"compile_options": {"math_mode": "safe"}}


@functools.cache
def _kernel(name: str, which: str):
    header, sources = _SOURCES[which]
    inputs, outputs = _SIGNATURES[name]
    make, options = (
        (mx.fast.metal_kernel, _METAL_OPTIONS) if which == "metal" else (mx.fast.cuda_kernel, {})
    )
    return make(
        name=f"rlv_{name}",
        input_names=inputs,
        output_names=outputs,
        source=sources[name],
        header=header,
        **options,
    )


def _i32(n: int) -> mx.array:
    return mx.array([n], dtype=mx.int32)


# ----------------------------------------------------------------------------------------------
# Per-block primitives on one (rows, vocab-chunk) block of float32 logits z, and their twins.


def _target_logit(z: mx.array, tok: mx.array) -> mx.array:
    """z[row, tok[row]] per row, 0 where tok is outside this block's [0, V)."""
    n_cols = z.shape[-1]
    inside = (tok >= 0) & (tok < n_cols)
    picked = mx.take_along_axis(z, mx.clip(tok, 0, n_cols - 1)[:, None], axis=-1)[:, 0]
    return mx.where(inside, picked, 0.0)


def _row_stats_plain(z: mx.array, tok: mx.array, want_ent: bool):
    """Per row: logsumexp(z), z[tok] (0 where tok is outside [0, V)), entropy of softmax(z)."""
    lse = mx.logsumexp(z, axis=-1)
    tgt = _target_logit(z, tok)
    if not want_ent:
        return lse, tgt, None
    d = z - lse[:, None]  # log softmax; summing p * d avoids cancelling lse - sum p * z
    return lse, tgt, -mx.sum(mx.exp(d) * d, axis=-1)


def _row_stats_kernel(z: mx.array, tok: mx.array, want_ent: bool, which: str):
    rows, n_cols = z.shape
    lse, tgt, ent = _kernel("row_stats", which)(
        inputs=[z, tok, _i32(n_cols)],
        output_shapes=[(rows,), (rows,), (rows,)],
        output_dtypes=[mx.float32] * 3,
        grid=(rows * _THREADS, 1, 1),
        threadgroup=(_THREADS, 1, 1),
    )
    return lse, tgt, (ent if want_ent else None)


def _softmax_grad_plain(z, lse, g, gh=None, ent=None):
    """-softmax(z) * c with c = g, plus gh * (log softmax(z) + ent) when entropy flows back.

    That is d(g * z[tok] - g * lse + gh * H)/dz without its one-hot part g * e_tok, which the
    caller adds with a gather/scatter of N x D instead of an N x V pass."""
    d = z - lse[:, None]
    p = mx.exp(d)
    if gh is None:
        return p * (-g)[:, None]
    # Per-row constants first, so only three vocabulary-sized passes follow the exp.
    return p * ((-(g + gh * ent))[:, None] - gh[:, None] * d)


def _softmax_grad_kernel(z, lse, g, gh, ent, which: str):
    rows, n_cols = z.shape
    has_ent = gh is not None
    if not has_ent:
        gh = ent = mx.zeros((rows,), dtype=mx.float32)
    (out,) = _kernel("softmax_grad", which)(
        inputs=[z, lse, g, gh, ent, _i32(rows), _i32(n_cols)],
        output_shapes=[(rows, n_cols)],
        output_dtypes=[mx.float32],
        grid=(rows * n_cols, 1, 1),
        threadgroup=(_THREADS, 1, 1),
        template=[("HAS_ENT", has_ent)],
    )
    return out


def _row_stats(z, tok, want_ent):
    which = kernel_backend()
    if which != "plain":
        return _row_stats_kernel(z, tok, want_ent, which)
    if cpu_ops.ENABLED:
        lse, ent = cpu_ops.lse_entropy(z, want_ent)
        return lse, _target_logit(z, tok), ent
    return _row_stats_plain(z, tok, want_ent)


def _softmax_grad(z, lse, g, gh=None, ent=None):
    which = kernel_backend()
    if which != "plain":
        return _softmax_grad_kernel(z, lse, g, gh, ent, which)
    if cpu_ops.ENABLED:
        return cpu_ops.softmax_grad(z, lse, g, gh, ent)
    return _softmax_grad_plain(z, lse, g, gh, ent)


# ----------------------------------------------------------------------------------------------
# Chunked log-probs with a chunked VJP.


def _after(x: mx.array, previous: list) -> mx.array:
    """x, made to wait for every array in `previous` (one chunk's outputs).

    MLX allocates an op's output when it encodes the op, and orders independent branches
    breadth-first, so without this chain many chunks' logits get allocated before the first is
    reduced; a chunk's logits stay alive until ALL their consumers ran, hence every output."""
    previous = [a for a in previous if a is not None]
    return mx.depends([x], previous)[0] if previous else x


def _block_forward(h, w, tok, cols, want_ent, kept=None):
    """(rows, D) hidden chunk -> lse, target logit, entropy over the whole vocabulary; each
    vocabulary tile's logits appended to `kept` when given (for the backward)."""
    mm, ew = cpu_ops.streams()
    stats = []
    for j, (v0, v1) in enumerate(cols):
        h_j = _after(h, list(stats[j - _LAG]) if j >= _LAG else [])
        with _on(mm):
            z = h_j @ w[v0:v1].T  # (rows, v1 - v0) float32
        if kept is not None:
            kept.append(z)
        with _on(ew):
            stats.append(_row_stats(z, tok - v0, want_ent))
    if len(stats) == 1:
        return stats[0]
    lses = mx.stack([s[0] for s in stats], axis=-1)  # (rows, n_chunks)
    lse = mx.logsumexp(lses, axis=-1)
    tgt = sum(s[1] for s in stats)  # only the chunk holding the token gave a nonzero value
    if not want_ent:
        return lse, tgt, None
    # H = sum_j w_j (H_j + lse - lse_j), w_j = exp(lse_j - lse) the chunk's softmax mass.
    gap = lse[:, None] - lses
    ents = mx.stack([s[2] for s in stats], axis=-1)
    return lse, tgt, mx.sum(mx.exp(-gap) * (ents + gap), axis=-1)


def _block_backward(h, w, lse, g, gh, ent, want_w=True, z=None):
    """One (rows, vocab block) tile: its logits `z` as the forward kept them, else recomputed;
    return its d/dh part (rows, D) and its d/dw block (block, D; None without `want_w`), fresh
    arrays. One-hot parts are the caller's."""
    mm, ew = cpu_ops.streams()
    if z is None:
        with _on(mm):
            z = h @ w.T  # (rows, block)
    with _on(ew):
        grad_z = _softmax_grad(z, lse, g, gh, ent)
    with _on(mm):
        return grad_z @ w, (grad_z.T @ h if want_w else None)


def _logprobs_forward(h, w, tok, valid, plan):
    """(logp, lse[, entropy], *kept logits): the logits of every (row chunk, vocabulary tile),
    in that order, only under plan["keep"]."""
    hs = h.astype(mx.float32) * plan["inv_t"]
    w32 = w.astype(mx.float32)
    want_ent = plan["entropy"]
    parts, kept = [], [] if plan["keep"] else None
    for i, (r0, r1) in enumerate(plan["rows"]):
        h_i = _after(hs[r0:r1], list(parts[i - _LAG]) if i >= _LAG else [])
        parts.append(_block_forward(h_i, w32, tok[r0:r1], plan["cols"], want_ent, kept))
    lse = mx.concatenate([p[0] for p in parts])
    tgt = mx.concatenate([p[1] for p in parts])
    logp = mx.where(valid, tgt - lse, mx.nan)
    out = (logp, lse, mx.concatenate([p[2] for p in parts])) if want_ent else (logp, lse)
    return out + tuple(kept or ())


def _logprobs_backward(primals, cotangents, outputs, tok, valid, plan):
    h, w = primals
    hs = h.astype(mx.float32) * plan["inv_t"]
    w32 = w.astype(mx.float32)
    g = mx.where(valid, cotangents[0].astype(mx.float32), 0.0)
    lse = outputs[1]
    gh = cotangents[2].astype(mx.float32) if plan["entropy_grad"] else None
    ent = outputs[2] if plan["entropy_grad"] else None
    want_w = plan["weight_grad"]
    # Vocabulary blocks in the outer loop over a few large row spans: each tile's d/dw block is
    # a fresh array, so nothing V x D is accumulated in place (which MLX would copy whenever
    # another pending op still references the accumulator), and d/dw is one concatenate. Kept
    # logits (plan["keep"]) come in the forward's tiles, (row chunk, vocabulary tile) in order.
    kept = iter(outputs[3 if plan["entropy"] else 2 :]) if plan["keep"] else None
    tiles = ("rows", "cols") if plan["keep"] else ("bwd_rows", "bwd_cols")
    rows, cols = plan[tiles[0]], plan[tiles[1]]
    blocks = [None] * len(cols)
    grad_hs = []
    for r0, r1 in rows:
        sl = slice(r0, r1)
        h_s, lse_s, g_s = hs[sl], lse[sl], g[sl]
        gh_s = None if gh is None else gh[sl]
        ent_s = None if ent is None else ent[sl]
        total, done = None, []  # d/dh of this span
        for j, (v0, v1) in enumerate(cols):
            h_j = _after(h_s, done[j - _LAG] if j >= _LAG else [])
            z = None if kept is None else next(kept)
            part, block = _block_backward(h_j, w32[v0:v1], lse_s, g_s, gh_s, ent_s, want_w, z=z)
            done.append([part, block])
            total = part if total is None else total + part
            blocks[j] = block if blocks[j] is None else blocks[j] + block
        grad_hs.append(total)
    # d logp / d z = onehot(tok) - softmax: the one-hot part is an N x D gather for d/dh and an
    # N x D scatter-add for d/dw, instead of an N x V pass.
    grad_hs = mx.concatenate(grad_hs) + g[:, None] * w32[tok]
    grad_hs = (grad_hs * plan["inv_t"]).astype(h.dtype)
    if not want_w:
        return grad_hs, None
    grad_w = (
        (blocks[0] if len(blocks) == 1 else mx.concatenate(blocks)).at[tok].add(g[:, None] * hs)
    )
    return grad_hs, grad_w.astype(w.dtype)


def _check_logprob_args(hidden, weight, tokens, temperature, chunk_rows, chunk_vocab):
    if weight.ndim != 2:
        raise ValueError(f"weight must be (V, D), got shape {tuple(weight.shape)}")
    if hidden.ndim < 1 or hidden.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"hidden {tuple(hidden.shape)} must end in D={weight.shape[1]} "
            f"(weight {tuple(weight.shape)})"
        )
    if tuple(tokens.shape) != tuple(hidden.shape[:-1]):
        raise ValueError(
            f"tokens {tuple(tokens.shape)} must equal hidden's leading shape "
            f"{tuple(hidden.shape[:-1])} (hidden {tuple(hidden.shape)})"
        )
    if not mx.issubdtype(tokens.dtype, mx.integer):
        raise ValueError(f"tokens must be integer ids, got dtype {tokens.dtype}")
    for name, a in (("hidden", hidden), ("weight", weight)):
        if not mx.issubdtype(a.dtype, mx.floating):
            raise ValueError(f"{name} must be floating point, got dtype {a.dtype}")
    if not (
        isinstance(temperature, int | float) and math.isfinite(temperature) and temperature > 0
    ):
        raise ValueError(f"temperature={temperature!r}: must be a finite number > 0")
    for name, v in (("chunk_rows", chunk_rows), ("chunk_vocab", chunk_vocab)):
        if v is not None and (not isinstance(v, int) or v < 1):
            raise ValueError(f"{name}={v!r}: must be a positive int or None")


def token_logprobs(
    hidden: mx.array,
    weight: mx.array,
    tokens: mx.array,
    temperature: float = 1.0,
    *,
    chunk_rows: int | None = None,
    chunk_vocab: int | None = None,
    return_entropy: bool = False,
    weight_grad: bool = True,
    entropy_grad: bool = True,
    keep_logits: bool = False,
):
    """log softmax((hidden @ weight.T) / temperature)[tokens], float32, without N x V memory.

    hidden (..., D) any float dtype; weight (V, D) the LM head (tied embedding); tokens (...) int.
    Returns logp (...) float32, and the entropy of the tempered distribution (...) float32 if
    `return_entropy`. Rows are processed `chunk_rows` at a time (default: 16M logits per chunk,
    at least 256 rows), and the vocabulary `chunk_vocab` columns at a time if given, so only
    chunk-sized logits exist; all arithmetic is float32 whatever the input dtypes (a
    half-precision weight is upcast once per pass, not per chunk). The temperature scales the
    hidden state, which is free.
    Differentiable in hidden and weight through a custom VJP that recomputes the logits tile by
    tile (vocabulary blocks x up to 16384 rows, the same number of logits as a forward chunk) and
    reuses the saved log-sum-exp. A token outside [0, V) gives NaN (mask it) and no gradient.
    `weight_grad=False` (a frozen LM head, as under LoRA) skips d/dweight, a matmul as large as
    the forward's: the weight is then a constant and its gradient is zero. `entropy_grad=False`
    (the entropy read as a metric only) drops the entropy's cotangent from the backward.
    `keep_logits` (for a call that a backward follows): when all N x V logits fit in
    _KEEP_ELEMS, the forward's chunks are kept and the backward reuses them instead of
    recomputing the product (one vocabulary-sized matmul less, N x V float32 memory more;
    values equal up to rounding). Without a backward it only costs memory.
    """
    _check_logprob_args(hidden, weight, tokens, temperature, chunk_rows, chunk_vocab)
    lead = tuple(tokens.shape)
    n_vocab, dim = weight.shape
    n = math.prod(lead)
    rows = chunk_rows or max(_MIN_ROWS, _CHUNK_ELEMS // n_vocab // 8 * 8)
    # The backward tiles hold as many logits as a forward chunk: up to _BWD_ROWS rows at once
    # and as many vocabulary columns as that budget allows (at least 128, for the matmuls).
    bwd_rows = min(n, max(rows, _BWD_ROWS))
    bwd_cols = min(n_vocab, chunk_vocab or n_vocab, max(128, rows * n_vocab // bwd_rows))
    plan = {
        "rows": cpu_ops.spans(n, rows),
        "cols": cpu_ops.spans(n_vocab, chunk_vocab or n_vocab),
        "bwd_rows": cpu_ops.spans(n, bwd_rows),
        "bwd_cols": cpu_ops.spans(n_vocab, bwd_cols),
        "inv_t": 1.0 / float(temperature),
        "entropy": bool(return_entropy),
        "entropy_grad": bool(return_entropy and entropy_grad),
        "weight_grad": bool(weight_grad),
        "keep": bool(keep_logits) and n * n_vocab <= _KEEP_ELEMS,
    }
    tok = tokens.reshape(n).astype(mx.int32)
    valid = (tok >= 0) & (tok < n_vocab)
    tok = mx.where(valid, tok, 0)

    if weight_grad:

        @mx.custom_function
        def fused(h, w):
            return _logprobs_forward(h, w, tok, valid, plan)

        @fused.vjp
        def fused_vjp(primals, cotangents, outputs):
            return _logprobs_backward(primals, cotangents, outputs, tok, valid, plan)

        outs = fused(hidden.reshape(n, dim), weight)
    else:
        frozen = mx.stop_gradient(weight)

        @mx.custom_function
        def fused_h(h):
            return _logprobs_forward(h, frozen, tok, valid, plan)

        @fused_h.vjp
        def fused_h_vjp(primal, cotangents, outputs):  # one input: its array, not a tuple
            return _logprobs_backward((primal, frozen), cotangents, outputs, tok, valid, plan)[0]

        outs = fused_h(hidden.reshape(n, dim))
    if return_entropy:
        return outs[0].reshape(lead), outs[2].reshape(lead)
    return outs[0].reshape(lead)


def token_logprobs_naive(
    hidden: mx.array,
    weight: mx.array,
    tokens: mx.array,
    temperature: float = 1.0,
    *,
    return_entropy: bool = False,
):
    """Reference twin of `token_logprobs`: full float32 log-softmax over the vocabulary, then a
    gather; MLX autodiff for gradients. Holds several (..., V) float32 tensors."""
    _check_logprob_args(hidden, weight, tokens, temperature, None, None)
    hs = hidden.astype(mx.float32) * (1.0 / float(temperature))
    logits = hs @ weight.astype(mx.float32).T  # (..., V)
    logp_all = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    logp = mx.take_along_axis(logp_all, tokens[..., None].astype(mx.int32), axis=-1)[..., 0]
    if not return_entropy:
        return logp
    return logp, -mx.sum(mx.exp(logp_all) * logp_all, axis=-1)


def full_kl(h_p, w_p, h_q, w_q, chunk_rows: int = 256) -> mx.array:
    """Exact KL(p || q) per position over the whole vocabulary, float32, shape h_p.shape[:-1]:
    p = softmax(h_p @ w_p.T), q = softmax(h_q @ w_q.T), in chunks of rows so no (rows x vocab)
    tensor exists for the batch. No gradient (a measurement: quantization loss, drift from a
    base model). KL = sum_v p_v (log p_v - log q_v)."""
    if h_p.shape != h_q.shape or w_p.shape[0] != w_q.shape[0]:
        raise ValueError(
            f"full_kl needs matching hidden states {h_p.shape} vs {h_q.shape} and vocabularies "
            f"{w_p.shape[0]} vs {w_q.shape[0]}"
        )
    lead = h_p.shape[:-1]
    hp, hq = h_p.reshape(-1, h_p.shape[-1]), h_q.reshape(-1, h_q.shape[-1])
    wp, wq = w_p.astype(mx.float32), w_q.astype(mx.float32)
    out = []
    for r0, r1 in cpu_ops.spans(hp.shape[0], chunk_rows):
        lp = hp[r0:r1].astype(mx.float32) @ wp.T
        lq = hq[r0:r1].astype(mx.float32) @ wq.T
        lp = lp - mx.logsumexp(lp, axis=-1, keepdims=True)
        lq = lq - mx.logsumexp(lq, axis=-1, keepdims=True)
        kl = mx.sum(mx.exp(lp) * (lp - lq), axis=-1)
        mx.eval(kl)
        out.append(kl)
    return mx.maximum(mx.concatenate(out), 0.0).reshape(lead)  # rounding can give -1e-9


KL_ESTIMATORS = ("k1", "k2", "k3")
KL_DIRECTIONS = ("reverse", "forward", "symmetric")


def _check_same_shape(what: str, a: mx.array, b: mx.array) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{what}: shapes differ, {tuple(a.shape)} vs {tuple(b.shape)}")


def _reverse_kl(log_r: mx.array, r: mx.array, estimator: str) -> mx.array:
    # KL(pi || pi_ref) = E_pi[-log r], r = pi_ref / pi, samples from pi.
    if estimator == "k1":
        return -log_r
    if estimator == "k2":
        return 0.5 * log_r * log_r
    return r - 1.0 - log_r


def _forward_kl(log_r: mx.array, r: mx.array, estimator: str) -> mx.array:
    # KL(pi_ref || pi) = E_{pi_ref}[log r] = E_pi[r log r]: the reverse estimators with the roles
    # of the two policies swapped (ratio 1/r), importance-weighted by r back to policy samples.
    if estimator == "k1":
        return r * log_r
    if estimator == "k2":
        return 0.5 * r * log_r * log_r
    return r * log_r - r + 1.0


def kl_per_token(
    logp: mx.array,
    ref_logp: mx.array,
    estimator: str = "k3",
    direction: str = "reverse",
    max_log_ratio: float = 20.0,
) -> mx.array:
    """Per-token KL estimate between the policy pi and the reference pi_ref, float32.

    `logp` = log pi(token) and `ref_logp` = log pi_ref(token) at tokens SAMPLED FROM pi; only these
    sampled-token log-probs are used, so every value is a single-sample Monte-Carlo estimate whose
    mean over tokens estimates the KL (not the full-distribution KL at each position).
    With log r = ref_logp - logp (r = pi_ref / pi), Schulman's "Approximating KL divergence":

    direction="reverse", KL(pi || pi_ref) = E_pi[-log r]:
        k1 = -log r                 unbiased, can be negative
        k2 = (log r)^2 / 2          biased, low variance, >= 0
        k3 = r - 1 - log r          unbiased (E_pi[r] = 1), >= 0  (the usual GRPO term)
    direction="forward", KL(pi_ref || pi) = E_{pi_ref}[log r] = E_pi[r log r]; samples come from
    pi, so each estimator is the reverse one with the policies swapped (ratio 1/r) times the
    importance weight r:
        k1 = r log r                unbiased, can be negative
        k2 = r (log r)^2 / 2        biased, >= 0
        k3 = r (1/r - 1 + log r) = r log r - r + 1    unbiased (E_pi[r - 1] = 0), >= 0 since
             g(r) = r log r - r + 1 has g(1) = 0, g'(r) = log r, g'' = 1/r > 0.
        Importance weights make these high-variance when pi_ref puts mass where pi does not.
    direction="symmetric": the mean of the two (half the Jeffreys divergence).

    log r is clamped to [-max_log_ratio, max_log_ratio] before any exp, so finite (or -inf)
    inputs give finite values and gradients (zero gradient where the clamp is active).
    NaN inputs (e.g. -inf minus -inf) stay NaN: mask such positions with `masked_mean`.
    """
    _check_same_shape("kl_per_token(logp, ref_logp)", logp, ref_logp)
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"estimator={estimator!r}: use one of {KL_ESTIMATORS}")
    if direction not in KL_DIRECTIONS:
        raise ValueError(f"direction={direction!r}: use one of {KL_DIRECTIONS}")
    if not max_log_ratio > 0:
        raise ValueError(f"max_log_ratio={max_log_ratio}: must be > 0 (20 keeps exp finite)")
    log_r = ref_logp.astype(mx.float32) - logp.astype(mx.float32)
    log_r = mx.clip(log_r, -max_log_ratio, max_log_ratio)
    r = mx.exp(log_r)
    if direction == "reverse":
        return _reverse_kl(log_r, r, estimator)
    if direction == "forward":
        return _forward_kl(log_r, r, estimator)
    return 0.5 * (_reverse_kl(log_r, r, estimator) + _forward_kl(log_r, r, estimator))


def kl_gradient_term(
    logp: mx.array, ref_logp: mx.array, direction: str = "reverse", max_log_ratio: float = 20.0
) -> mx.array:
    """Per-token surrogate whose gradient, averaged over tokens sampled from pi, is the gradient of
    the named divergence. Its value is not a KL estimate: pair it with `kl_per_token` for that
    (`grpo.policy_loss` adds value + surrogate - stop_gradient(surrogate)).

    Differentiating an estimator's value at a fixed sample does not give the divergence's
    gradient: with d = logp - ref_logp and g = grad log pi(x),
        k1 = d           has gradient g,           E_pi[g] = 0: no force at all;
        k3 = r - 1 + d   has gradient (1 - r) g,   E_pi = -E_ref[g] = grad KL(pi_ref || pi):
                         the FORWARD KL's gradient, though k3's value estimates the reverse KL
                         (DeepSeekMath's GRPO term; Tang & Munos 2025 and others point this out);
    while grad KL(pi || pi_ref) = E_pi[d g] (the score-function identity, sum_x grad pi = 0).
    So the surrogates are
        reverse    d^2 / 2              gradient d g          (k2's form)
        forward    r - 1 + d            gradient (1 - r) g    (k3's form, r = pi_ref / pi)
        symmetric  the mean of the two  (half the Jeffreys divergence)
    exact in expectation for one sampled token per position (tests/test_grpo.py enumerates a
    categorical policy). Over a sequence each position's term differentiates that position's KL
    given the sampled prefix; the effect of earlier tokens on later positions' KL (a score term)
    is left out, as in every per-token GRPO KL penalty. log r is clamped like `kl_per_token`."""
    _check_same_shape("kl_gradient_term(logp, ref_logp)", logp, ref_logp)
    if direction not in KL_DIRECTIONS:
        raise ValueError(f"direction={direction!r}: use one of {KL_DIRECTIONS}")
    log_r = mx.clip(
        ref_logp.astype(mx.float32) - logp.astype(mx.float32), -max_log_ratio, max_log_ratio
    )
    reverse = 0.5 * log_r * log_r
    forward = mx.exp(log_r) - 1.0 - log_r
    if direction == "reverse":
        return reverse
    if direction == "forward":
        return forward
    return 0.5 * (reverse + forward)


def _broadcast_mask(x: mx.array, mask: mx.array, what: str) -> mx.array:
    try:
        shape = mx.broadcast_shapes(x.shape, mask.shape)
    except ValueError as e:
        raise ValueError(f"{what}: mask {tuple(mask.shape)} vs x {tuple(x.shape)}: {e}") from e
    if tuple(shape) != tuple(x.shape):
        raise ValueError(f"{what}: mask {tuple(mask.shape)} does not broadcast to x {x.shape}")
    return mx.broadcast_to(mask, x.shape)


def masked_sum(x: mx.array, mask: mx.array, axis=None) -> mx.array:
    """Sum of x where mask is nonzero (float masks weight the terms), float32.

    Masked-out entries are dropped with `where`, not multiplied by 0, so a NaN/inf there (padding
    log-probs) cannot leak into the sum or its gradient."""
    mask = _broadcast_mask(x, mask, "masked_sum").astype(mx.float32)
    return mx.sum(mx.where(mask != 0, x.astype(mx.float32) * mask, 0.0), axis=axis)


def masked_mean(x: mx.array, mask: mx.array, axis=None) -> mx.array:
    """Mean of x over entries where mask is nonzero (mask-weighted), float32; 0 where the mask
    is empty along `axis` (an empty completion contributes nothing instead of NaN)."""
    mask = _broadcast_mask(x, mask, "masked_mean").astype(mx.float32)
    total = mx.sum(mx.where(mask != 0, x.astype(mx.float32) * mask, 0.0), axis=axis)
    count = mx.sum(mask, axis=axis)
    safe = mx.where(count != 0, count, 1.0)
    return mx.where(count != 0, total / safe, 0.0)
