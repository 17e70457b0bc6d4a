"""The Qwen3-family decoder-only transformer: Qwen3 (per-head q/k RMSNorm) and Llama/SmolLM2.

One code path serves both, configured only by `ModelArgs` (built from a HF `config.json`;
unknown keys are dropped). Parameter names equal the HF checkpoint's, so weights load with
`strict=True`. Batches may be left-padded: `pad[b]` slots at the start of row b hold no token,
and every row gets its own RoPE positions and mask, so a padded row computes what the unpadded
sequence computes. Hidden states and the LM head are exposed separately so log-probs can be
chunked over the vocabulary. It is not a sampler or a cache: see gwen.py and kvcache.py.
"""

import dataclasses
import math
import os
from dataclasses import dataclass

import backend  # loads OpenBLAS before mlx

# isort: split
import mlx.core as mx
import mlx.nn as nn

import kernels
from kernels import poly_exp

SUPPORTED_MODEL_TYPES = ("qwen3", "llama")

# MLX's CPU backend evaluates exp at ~17 ns/element (numpy: ~0.6), so silu and softmax dominate a
# CPU decode step. On CPU we use compiled ops built on a polynomial exp (rel. error ~2e-6); the
# plain twins (nn.silu, mx.fast.scaled_dot_product_attention) run on Metal/CUDA, in the parity
# tests, and everywhere with RL_VALUES_PLAIN_KERNELS=1.
FAST_CPU_OPS = backend.backend_name() == "cpu" and os.environ.get("RL_VALUES_PLAIN_KERNELS") != "1"


@mx.compile
def _silu_mul_fwd(g, u):
    return g * u / (1.0 + poly_exp(-g))


@mx.compile
def _silu_mul_bwd(g, u, cot):
    s = 1.0 / (1.0 + poly_exp(-g))
    return cot * u * s * (1.0 + g * (1.0 - s)), cot * g * s


@mx.custom_function
def silu_mul_cpu(g, u):
    return _silu_mul_fwd(g, u)


@silu_mul_cpu.vjp
def _silu_mul_vjp(primals, cotangent, output):
    return _silu_mul_bwd(*primals, cotangent)


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


def _attention_block(q, k, v, scale, mask):
    """GQA attention as matmuls + masked_softmax_cpu; q (B, H, L, hd), k/v (B, Hkv, S, hd)."""
    B, H, L, hd = q.shape
    Hkv = k.shape[1]
    q = q.reshape(B, Hkv, (H // Hkv) * L, hd)  # query head h uses kv head h // (H // Hkv)
    s = (q * scale) @ k.swapaxes(-1, -2)  # (B, Hkv, rep*L, S)
    s = s.reshape(B, Hkv, H // Hkv, L, -1)
    p = masked_softmax_cpu(s.astype(mx.float32), mask[:, :, None]).astype(v.dtype)
    return (p.reshape(B, Hkv, (H // Hkv) * L, -1) @ v).reshape(B, H, L, hd)


# In forward-only passes over long inputs (the judge) the exp-heavy CPU ops work in blocks of at
# most kernels.CPU_BLOCK elements, because MLX's CPU elementwise kernels slow down ~4x per element
# once their operands outgrow the core's cache: judging 48 items took 25 s instead of 39. Not
# under autodiff: the backward of many sliced blocks cost more than it saved (a 64 x 64-token
# policy forward+backward: 48 s blocked, 37 s not).


def attention_cpu(q, k, v, scale, mask, blocked: bool = False):
    """GQA attention; `blocked`: over blocks of batch rows (and of queries when one row's
    scores exceed kernels.CPU_BLOCK), so each block's (heads x queries x keys) scores stay
    cache-sized."""
    B, H, L, _ = q.shape
    S = k.shape[2]
    per_row = H * L * S
    block = kernels.CPU_BLOCK
    if not blocked or B * per_row <= block:
        return _attention_block(q, k, v, scale, mask)
    row_mask = (lambda i, j: mask[i:j]) if mask.shape[0] > 1 else (lambda i, j: mask)
    if per_row <= block:
        n = block // per_row
        blocks = [
            _attention_block(q[i : i + n], k[i : i + n], v[i : i + n], scale, row_mask(i, i + n))
            for i in range(0, B, n)
        ]
        return mx.concatenate(blocks, axis=0)
    n = max(1, block // (H * S))  # queries per block
    rows = []
    for b in range(B):
        qb, kb, vb, mb = q[b : b + 1], k[b : b + 1], v[b : b + 1], row_mask(b, b + 1)
        blocks = [
            _attention_block(qb[:, :, j : j + n], kb, vb, scale, mb[:, :, j : j + n])
            for j in range(0, L, n)
        ]
        rows.append(mx.concatenate(blocks, axis=2))
    return mx.concatenate(rows, axis=0)


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


def silu_mul(g, u, blocked: bool = False):
    if not FAST_CPU_OPS:
        return nn.silu(g) * u
    if not blocked or g.size <= kernels.CPU_BLOCK:
        return silu_mul_cpu(g, u)
    width = g.shape[-1]  # in cache-sized blocks of rows (see kernels.CPU_BLOCK)
    g2, u2 = g.reshape(-1, width), u.reshape(-1, width)
    n = max(1, kernels.CPU_BLOCK // width)
    blocks = [silu_mul_cpu(g2[i : i + n], u2[i : i + n]) for i in range(0, g2.shape[0], n)]
    return mx.concatenate(blocks, axis=0).reshape(g.shape)


def attention(q, k, v, scale, mask, blocked: bool = False):
    if FAST_CPU_OPS:
        return attention_cpu(q, k, v, scale, mask, blocked)
    return mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)


@dataclass
class ModelArgs:
    model_type: str
    hidden_size: int
    num_hidden_layers: int
    intermediate_size: int
    num_attention_heads: int
    rms_norm_eps: float
    vocab_size: int
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    max_position_embeddings: int | None = None
    rope_theta: float | None = None
    rope_scaling: dict | None = None
    rope_parameters: dict | None = None
    tie_word_embeddings: bool = True
    attention_bias: bool = False
    mlp_bias: bool = False
    eos_token_id: int | list[int] | None = None

    @classmethod
    def from_config(cls, config: dict) -> "ModelArgs":
        names = {f.name for f in dataclasses.fields(cls)}
        model_type = config.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"config model_type={model_type!r} is not served; rl-values runs "
                f"{SUPPORTED_MODEL_TYPES} (Qwen3 and Llama/SmolLM2 families)"
            )
        missing = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.name not in config
        ]
        if missing:
            raise ValueError(f"config for {model_type} lacks required keys {missing}")
        return cls(**{k: v for k, v in config.items() if k in names})

    def __post_init__(self):
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads={self.num_key_value_heads}"
            )
        # transformers >= 5 writes RoPE settings only under `rope_parameters`.
        nested = self.rope_parameters or {}
        if self.rope_theta is None:
            self.rope_theta = nested.get("rope_theta")
        if self.rope_scaling is None and nested.get("rope_type", "default") != "default":
            self.rope_scaling = nested
        if self.rope_theta is None:
            raise ValueError(
                "config has no rope_theta (neither top-level nor in rope_parameters); "
                "refusing to guess a RoPE base"
            )

    @property
    def qk_norm(self) -> bool:
        return self.model_type == "qwen3"


def rope_frequencies(args: ModelArgs) -> tuple[float, mx.array | None]:
    """(scale, freqs) for mx.fast.rope: plain, linear or llama3 scaling; anything else raises."""
    cfg = args.rope_scaling
    kind = None if cfg is None else cfg.get("rope_type", cfg.get("type", "default"))
    if kind in (None, "default"):
        return 1.0, None
    if kind == "linear":
        return 1.0 / float(cfg["factor"]), None
    if kind == "llama3":
        d = args.head_dim
        inv = args.rope_theta ** (mx.arange(0, d, 2, dtype=mx.float32) / d)  # wavelengths/2pi
        factor, low, high = cfg["factor"], cfg["low_freq_factor"], cfg["high_freq_factor"]
        old_len = cfg["original_max_position_embeddings"]
        wavelen = 2 * math.pi * inv
        low_wl, high_wl = old_len / low, old_len / high
        smooth = (old_len / wavelen - low) / (high - low)
        mid = inv / ((1 - smooth) / factor + smooth)
        freqs = mx.where(wavelen > low_wl, inv * factor, inv)
        freqs = mx.where((wavelen >= high_wl) & (wavelen <= low_wl), mid, freqs)
        return 1.0, freqs
    raise ValueError(f"rope_scaling type {kind!r} is not supported (default, linear, llama3)")


def attention_mask(pad: mx.array, start: int, length: int) -> mx.array:
    """Boolean (B, 1, L, start+L): query slot s sees key slot j iff pad[b] <= j <= s.

    A padded query slot sees only itself, so its (ignored) output stays finite and a
    0-weight times NaN never leaks into real rows."""
    q = mx.arange(start, start + length)[:, None]  # (L, 1)
    k = mx.arange(start + length)[None, :]  # (1, S)
    causal = k <= q
    real = k[None] >= pad[:, None, None]  # (B, 1, S)
    return ((causal[None] & real) | (k == q)[None])[:, None]


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv_heads = args.num_attention_heads, args.num_key_value_heads
        self.head_dim = args.head_dim
        self.scale = args.head_dim**-0.5
        dim, bias = args.hidden_size, args.attention_bias
        self.q_proj = nn.Linear(dim, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(dim, self.n_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(dim, self.n_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, dim, bias=bias)
        if args.qk_norm:
            self.q_norm = nn.RMSNorm(self.head_dim, eps=args.rms_norm_eps)
            self.k_norm = nn.RMSNorm(self.head_dim, eps=args.rms_norm_eps)
        self.rope_base = args.rope_theta
        self.rope_scale, self._rope_freqs = rope_frequencies(args)
        if self._rope_freqs is not None:
            self._inv_freq = 1.0 / self._rope_freqs
        else:
            exponents = mx.arange(0, self.head_dim, 2, dtype=mx.float32) / self.head_dim
            self._inv_freq = self.rope_base ** (-exponents)

    def inv_freq(self) -> mx.array:
        """(head_dim/2,) angular frequencies, as mx.fast.rope derives them (built once)."""
        return self._inv_freq

    def rope(self, x: mx.array, positions) -> mx.array:
        """`positions` is (B,) first positions, or rope_tables' (cos, sin) pair."""
        if isinstance(positions, tuple):
            return _rope_apply(x, *positions)
        base = None if self._rope_freqs is not None else self.rope_base
        return mx.fast.rope(
            x,
            self.head_dim,
            traditional=False,
            base=base,
            scale=self.rope_scale,
            offset=positions,
            freqs=self._rope_freqs,
        )

    def __call__(self, x, mask, positions, cache=None, layer=0, blocked=False):
        B, L, _ = x.shape
        q = self.q_proj(x).reshape(B, L, self.n_heads, self.head_dim)
        k = self.k_proj(x).reshape(B, L, self.n_kv_heads, self.head_dim)
        v = self.v_proj(x).reshape(B, L, self.n_kv_heads, self.head_dim)
        if "q_norm" in self:
            q, k = self.q_norm(q), self.k_norm(k)
        q = self.rope(q.transpose(0, 2, 1, 3), positions)  # (B, H, L, hd)
        k = self.rope(k.transpose(0, 2, 1, 3), positions)  # (B, Hkv, L, hd)
        v = v.transpose(0, 2, 1, 3)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (B, Hkv, S, hd), all slots so far
        o = attention(q, k, v, self.scale, mask, blocked)
        return self.o_proj(o.transpose(0, 2, 1, 3).reshape(B, L, -1))


class MLP(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        dim, hidden, bias = args.hidden_size, args.intermediate_size, args.mlp_bias
        self.gate_proj = nn.Linear(dim, hidden, bias=bias)
        self.up_proj = nn.Linear(dim, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, dim, bias=bias)

    def __call__(self, x, blocked=False):
        return self.down_proj(silu_mul(self.gate_proj(x), self.up_proj(x), blocked))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.self_attn = Attention(args)
        self.mlp = MLP(args)
        self.input_layernorm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)

    def __call__(self, x, mask, positions, cache=None, layer=0, blocked=False):
        h = x + self.self_attn(self.input_layernorm(x), mask, positions, cache, layer, blocked)
        return h + self.mlp(self.post_attention_layernorm(h), blocked)


class Body(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = [TransformerBlock(args) for _ in range(args.num_hidden_layers)]
        self.norm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)


class Model(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.model = Body(args)
        if not args.tie_word_embeddings:
            self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)

    @property
    def layers(self):
        return self.model.layers

    def lm_head_weight(self) -> mx.array:
        """The (V, D) output projection: the embedding matrix when tied."""
        return (
            self.model.embed_tokens.weight if self.args.tie_word_embeddings else self.lm_head.weight
        )

    def hidden(
        self, tokens: mx.array, cache=None, pad: mx.array | None = None, blocked: bool = False
    ) -> mx.array:
        """Final-norm hidden states (B, L, D) for tokens (B, L).

        With a cache, tokens continue its rows at slot `cache.offset` and its left padding
        applies; without one, `pad` (B,) gives each row's left padding (default none).
        `blocked=True` for forward-only passes over long inputs (see kernels.CPU_BLOCK)."""
        B, L = tokens.shape
        start = 0 if cache is None else cache.offset
        if cache is not None:
            pad = cache.pad
        elif pad is None:
            pad = mx.zeros((B,), dtype=mx.int32)
        mask = attention_mask(pad, start, L)
        positions = start - pad  # per-row RoPE offset of the chunk's first slot
        if FAST_CPU_OPS:
            attn = self.model.layers[0].self_attn
            positions = rope_tables(attn.inv_freq(), attn.rope_scale, positions, L)
        h = self.model.embed_tokens(tokens)
        for i, layer in enumerate(self.model.layers):
            h = layer(h, mask, positions, cache, i, blocked)
        if cache is not None:
            cache.advance(L)
        return self.model.norm(h)

    def logits(self, h: mx.array) -> mx.array:
        return h @ self.lm_head_weight().T

    def __call__(self, tokens: mx.array, cache=None, pad: mx.array | None = None) -> mx.array:
        return self.logits(self.hidden(tokens, cache, pad))
