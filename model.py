"""The Qwen3-family decoder-only transformer: Qwen3 (per-head q/k RMSNorm) and Llama/SmolLM2.

One code path serves both, configured only by `ModelArgs` (built from a HF `config.json`;
unknown keys are dropped). Parameter names equal the HF checkpoint's, so weights load with
`strict=True`. Batches may be left-padded: `pad[b]` slots at the start of row b hold no token,
and every row gets its own RoPE positions and mask, so a padded row computes what the unpadded
sequence computes. Hidden states and the LM head are exposed separately so log-probs can be
chunked over the vocabulary. Attention, silu·up, RMSNorm and RoPE go through cpu_ops, which
picks the CPU-tuned or plain-MLX version once. It is not a sampler or a cache: see gwen.py and
kvcache.py.
"""

import dataclasses
import math
from dataclasses import dataclass

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core import cpu_ops

import mlx.core as mx
import mlx.nn as nn

SUPPORTED_MODEL_TYPES = ("qwen3", "llama")


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


class Rope:
    """Rotary position embedding (rotate-half), shared by every layer: plain, linear or llama3."""

    def __init__(self, args: ModelArgs):
        self.dims = args.head_dim
        self.base = args.rope_theta
        self.scale, self.freqs = rope_frequencies(args)
        if self.freqs is not None:
            self.inv_freq = 1.0 / self.freqs
        else:
            exponents = mx.arange(0, self.dims, 2, dtype=mx.float32) / self.dims
            self.inv_freq = self.base ** (-exponents)  # (head_dim/2,) angular frequencies

    def __call__(self, x: mx.array, offset: mx.array) -> mx.array:
        """x (B, H, L, hd) with row b's first slot at position offset[b]."""
        return mx.fast.rope(
            x,
            self.dims,
            traditional=False,
            base=None if self.freqs is not None else self.base,
            scale=self.scale,
            offset=offset,
            freqs=self.freqs,
        )


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
            self.q_norm = cpu_ops.RMSNorm(self.head_dim, eps=args.rms_norm_eps)
            self.k_norm = cpu_ops.RMSNorm(self.head_dim, eps=args.rms_norm_eps)

    def __call__(self, x, mask, rope, cache=None, layer=0):
        B, L, _ = x.shape
        q = self.q_proj(x).reshape(B, L, self.n_heads, self.head_dim)
        k = self.k_proj(x).reshape(B, L, self.n_kv_heads, self.head_dim)
        v = self.v_proj(x).reshape(B, L, self.n_kv_heads, self.head_dim)
        if "q_norm" in self:
            q, k = self.q_norm(q), self.k_norm(k)
        q = rope(q.transpose(0, 2, 1, 3))  # (B, H, L, hd)
        k = rope(k.transpose(0, 2, 1, 3))  # (B, Hkv, L, hd)
        v = v.transpose(0, 2, 1, 3)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (B, Hkv, S, hd), all slots so far
        o = cpu_ops.attention(q, k, v, self.scale, mask)
        return self.o_proj(o.transpose(0, 2, 1, 3).reshape(B, L, -1))


class MLP(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        dim, hidden, bias = args.hidden_size, args.intermediate_size, args.mlp_bias
        self.gate_proj = nn.Linear(dim, hidden, bias=bias)
        self.up_proj = nn.Linear(dim, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, dim, bias=bias)

    def __call__(self, x):
        return self.down_proj(cpu_ops.silu_mul(self.gate_proj(x), self.up_proj(x)))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.self_attn = Attention(args)
        self.mlp = MLP(args)
        self.input_layernorm = cpu_ops.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)
        self.post_attention_layernorm = cpu_ops.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)

    def __call__(self, x, mask, rope, cache=None, layer=0):
        h = x + self.self_attn(self.input_layernorm(x), mask, rope, cache, layer)
        return h + self.mlp(self.post_attention_layernorm(h))


class Body(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = [TransformerBlock(args) for _ in range(args.num_hidden_layers)]
        self.norm = cpu_ops.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)


class Model(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.rope = Rope(args)  # a plain object, not a parameter
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

    def hidden(self, tokens: mx.array, cache=None, pad: mx.array | None = None) -> mx.array:
        """Final-norm hidden states (B, L, D) for tokens (B, L).

        With a cache, tokens continue its rows at slot `cache.offset` and its left padding
        applies; without one, `pad` (B,) gives each row's left padding (default none)."""
        h = self.blocks(self.embed(tokens), range(len(self.layers)), cache, pad)
        return self.final_norm(h)

    def embed(self, tokens: mx.array) -> mx.array:
        return self.model.embed_tokens(tokens)

    def final_norm(self, h: mx.array) -> mx.array:
        return self.model.norm(h)

    def blocks(
        self, h: mx.array, layers: range, cache=None, pad: mx.array | None = None, advance=True
    ):
        """The residual stream (B, L, D) after the blocks in `layers` (consecutive), from `h`, the
        stream entering the first of them; cache and pad as in `hidden`. Running range(0, k) and
        then range(k, n) on the output (each with its own cache, or one cache and
        `advance=False` on the first call) computes what `hidden` does before its final norm:
        the frozen bottom blocks can run once for several tops."""
        B, L, _ = h.shape
        if layers.step != 1 or layers.start < 0 or layers.stop > len(self.layers):
            raise ValueError(f"layers {layers} is not a consecutive run of 0..{len(self.layers)}")
        start = 0 if cache is None else cache.offset
        if cache is not None:
            pad = cache.pad
        elif pad is None:
            pad = mx.zeros((B,), dtype=mx.int32)
        mask = attention_mask(pad, start, L)
        rope = cpu_ops.rope_for(self.rope, start - pad, L)  # row b's first slot: start - pad[b]
        for i in layers:
            h = self.model.layers[i](h, mask, rope, cache, i)
        if cache is not None and advance:
            cache.advance(L)
        return h

    def logits(self, h: mx.array) -> mx.array:
        return h @ self.lm_head_weight().T

    def __call__(self, tokens: mx.array, cache=None, pad: mx.array | None = None) -> mx.array:
        return self.logits(self.hidden(tokens, cache, pad))
