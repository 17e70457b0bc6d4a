"""Model parity with mlx_lm's implementations, and KV-cache equalities."""

from core import backend  # noqa: F401

# isort: split
import importlib

from core import cpu_ops
from core.cpu_ops import attention_cpu, silu_mul_cpu

import mlx.core as mx
import mlx.nn as nn
import mlx.utils
import numpy as np
import pytest
from helpers import LLAMA, QWEN3, tiny_model

from kvcache import KVCache
from model import ModelArgs, attention_mask


def reference(config, ours):
    """mlx_lm's model of the same architecture holding our weights."""
    mod = importlib.import_module(f"mlx_lm.models.{config['model_type']}")
    ref = mod.Model(mod.ModelArgs.from_dict(config))
    ref.load_weights(mlx.utils.tree_flatten(ours.parameters()), strict=True)
    mx.eval(ref.parameters())
    return ref


def greedy(step, prompt, n):
    out = []
    for _ in range(n):
        tok = int(mx.argmax(step(prompt, out)).item())
        out.append(tok)
    return out


@pytest.mark.parametrize("config", [QWEN3, LLAMA], ids=["qwen3", "llama"])
@pytest.mark.parametrize("fast_ops", [True, False], ids=["cpu-ops", "plain-ops"])
def test_logits_and_greedy_match_mlx_lm(config, fast_ops, monkeypatch):
    monkeypatch.setattr(cpu_ops, "ENABLED", fast_ops)
    ours = tiny_model(config)
    ref = reference(config, ours)
    tokens = mx.array(np.random.default_rng(0).integers(0, config["vocab_size"], (3, 13)))
    diff = mx.abs(ours(tokens) - ref(tokens)).max().item()
    assert diff <= 1e-4, f"max |ours - mlx_lm| = {diff}"

    prompt = [5, 17, 3, 44, 9]
    ref_out = greedy(lambda p, o: ref(mx.array([p + o]))[0, -1], prompt, 16)
    cache = KVCache.for_model(ours, 1, len(prompt) + 16)

    def cached_step(p, o):
        feed = p if not o else o[-1:]
        return ours(mx.array([feed]), cache)[0, -1]

    assert greedy(cached_step, prompt, 16) == ref_out


def test_prefill_then_decode_equals_full_forward():
    m = tiny_model(QWEN3)
    seq = mx.array(np.random.default_rng(1).integers(0, 97, (2, 11)))
    full = m(seq)
    cache = KVCache.for_model(m, 2, 11)
    parts = [m(seq[:, :6], cache)] + [m(seq[:, i : i + 1], cache) for i in range(6, 11)]
    diff = mx.abs(mx.concatenate(parts, axis=1) - full).max().item()
    assert diff <= 1e-5, diff
    assert cache.offset == 11


def test_broadcast_batch_equals_separate_prefills():
    m = tiny_model(LLAMA)
    rng = np.random.default_rng(2)
    prompts = mx.array(rng.integers(0, 101, (2, 7)))
    cont = mx.array(rng.integers(0, 101, (6, 4)))  # 3 continuations per prompt
    cache = KVCache.for_model(m, 2, 7)
    m(prompts, cache)
    shared = cache.snapshot().broadcast_batch(3, capacity=11)
    got = m(cont, shared)
    for r in range(6):
        alone = KVCache.for_model(m, 1, 11)
        m(prompts[r // 3 : r // 3 + 1], alone)
        want = m(cont[r : r + 1], alone)
        diff = mx.abs(got[r : r + 1] - want).max().item()
        assert diff <= 1e-5, (r, diff)


@pytest.mark.parametrize("capacity", [7, 11], ids=["room-in-source", "room-added"])
def test_broadcast_batch_of_a_roomy_cache_equals_separate_prefills(capacity):
    # capacity 11 == the source's: the one-pass repeat path (what sample_tokens takes)
    m = tiny_model(QWEN3)
    rng = np.random.default_rng(5)
    prompts = mx.array(rng.integers(0, 97, (2, 7)))
    cont = mx.array(rng.integers(0, 97, (4, 4)))
    cache = KVCache.for_model(m, 2, 11 if capacity == 11 else 7)
    m(prompts, cache)
    shared = cache.broadcast_batch(2, capacity=11)
    assert shared.capacity == 11 and shared.offset == 7
    got = m(cont, shared)
    for r in range(4):
        alone = KVCache.for_model(m, 1, 11)
        m(prompts[r // 2 : r // 2 + 1], alone)
        diff = mx.abs(got[r : r + 1] - m(cont[r : r + 1], alone)).max().item()
        assert diff <= 1e-5, (r, diff)


LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
ROPES = {
    "default": QWEN3,
    "linear": LLAMA | {"rope_scaling": {"rope_type": "linear", "factor": 4.0}},
    "llama3": LLAMA | {"rope_scaling": LLAMA3_ROPE, "head_dim": 12},
}


@pytest.mark.parametrize("name", list(ROPES))
def test_rope_tables_match_fast_rope(name):
    # the CPU path's shared cos/sin tables against mx.fast.rope, far positions included
    rope = tiny_model(ROPES[name]).rope
    x = mx.random.normal((3, 4, 5, rope.dims), key=mx.random.key(7))
    positions = mx.array([0, 37, 3000])
    want = rope(x, positions)
    cos, sin = cpu_ops.rope_tables(rope.inv_freq, rope.scale, positions, 5)
    diff = mx.abs(cpu_ops._rope_apply(x, cos, sin) - want).max().item()
    assert diff <= 1e-4, diff  # both use float32 angles: ~3e-5 apart at position 3000
    near = mx.abs(cpu_ops._rope_apply(x[:2], cos[:2], sin[:2]) - want[:2]).max().item()
    assert near <= 1e-5, near


@pytest.mark.parametrize("name", ["linear", "llama3"])
@pytest.mark.parametrize("fast_ops", [True, False], ids=["cpu-ops", "plain-ops"])
def test_scaled_rope_models_match_mlx_lm(name, fast_ops, monkeypatch):
    monkeypatch.setattr(cpu_ops, "ENABLED", fast_ops)
    config = ROPES[name]
    ours = tiny_model(config)
    ref = reference(config, ours)
    tokens = mx.array(np.random.default_rng(8).integers(0, config["vocab_size"], (2, 90)))
    diff = mx.abs(ours(tokens) - ref(tokens)).max().item()
    assert diff <= 1e-4, f"max |ours - mlx_lm| = {diff}"


def test_snapshot_is_frozen():
    m = tiny_model(QWEN3)
    cache = KVCache.for_model(m, 1, 8)
    m(mx.array([[1, 2, 3]]), cache)
    snap = cache.snapshot()
    before = mx.array(snap.keys[0])
    m(mx.array([[4, 5]]), cache)
    assert snap.offset == 3 and snap.keys[0].shape[2] == 3
    assert mx.array_equal(snap.keys[0], before)


@pytest.mark.parametrize("config", [QWEN3, LLAMA], ids=["qwen3", "llama"])
def test_left_padded_row_equals_sequence_alone(config):
    m = tiny_model(config)
    V = config["vocab_size"]
    short, long_ = [7, 8, 9], [1, 2, 3, 4, 5, 6]
    batch = mx.array([[0, 0, 0] + short, long_])
    pad = mx.array([3, 0])
    padded = m(batch, pad=pad)
    alone = m(mx.array([short]))
    assert mx.abs(padded[0, 3:] - alone[0]).max().item() <= 1e-5
    assert mx.abs(padded[1] - m(mx.array([long_]))[0]).max().item() <= 1e-5
    # and through a cache, decoding two more tokens
    cache = KVCache.for_model(m, 2, 8, pad)
    m(batch, cache)
    step = m(mx.array([[11], [12]]), cache)
    c1 = KVCache.for_model(m, 1, 8)
    m(mx.array([short]), c1)
    want = m(mx.array([[11]]), c1)
    assert mx.abs(step[0] - want[0]).max().item() <= 1e-5
    assert np.isfinite(np.array(padded)).all(), "padded slots must stay finite"
    assert padded.shape[-1] == V


def test_cache_overflow_is_loud():
    m = tiny_model(QWEN3)
    cache = KVCache.for_model(m, 1, 4)
    with pytest.raises(ValueError, match="overflow"):
        m(mx.array([[1, 2, 3, 4, 5]]), cache)


@pytest.mark.slow  # compiles float16 kernels with a C++ compiler on the CPU (20-30 s, empty cache)
def test_cpu_silu_keeps_half_precision_dtypes_under_autodiff():
    """poly_exp computes in float32; float16 inputs must get float16 outputs and cotangents (a
    float32 cotangent made value_and_grad raise 'Type of cotangents does not match')."""
    rng = np.random.default_rng(4)
    g = mx.array(rng.normal(0, 3, (4, 16)).astype(np.float16))
    u = mx.array(rng.normal(0, 1, (4, 16)).astype(np.float16))
    out = silu_mul_cpu(g, u)
    assert out.dtype == mx.float16
    assert mx.allclose(out, nn.silu(g) * u, rtol=1e-2, atol=1e-2)
    grads = mx.grad(lambda a, b: (silu_mul_cpu(a, b) ** 2).sum().astype(mx.float32),
                    argnums=(0, 1))(g, u)  # fmt: skip
    assert [x.dtype for x in grads] == [mx.float16, mx.float16]


def test_cpu_ops_match_plain_twins_forward_and_gradient():
    rng = np.random.default_rng(3)
    g = mx.array(rng.normal(0, 6, (5, 33)).astype(np.float32))
    u = mx.array(rng.normal(0, 1, (5, 33)).astype(np.float32))
    assert mx.allclose(silu_mul_cpu(g, u), nn.silu(g) * u, rtol=1e-5, atol=1e-5)
    ours = mx.grad(lambda a, b: (silu_mul_cpu(a, b) ** 2).sum(), argnums=(0, 1))(g, u)
    plain = mx.grad(lambda a, b: ((nn.silu(a) * b) ** 2).sum(), argnums=(0, 1))(g, u)
    for a, b in zip(ours, plain, strict=True):
        assert mx.allclose(a, b, rtol=1e-4, atol=1e-4)

    B, H, Hkv, L, S, hd = 2, 6, 2, 5, 9, 8
    q = mx.array(rng.normal(size=(B, H, L, hd)).astype(np.float32))
    k = mx.array(rng.normal(size=(B, Hkv, S, hd)).astype(np.float32))
    v = mx.array(rng.normal(size=(B, Hkv, S, hd)).astype(np.float32))
    mask = attention_mask(mx.array([0, 3]), S - L, L)

    def plain_attn(q, k, v):
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask=mask)

    assert mx.allclose(attention_cpu(q, k, v, 0.3, mask), plain_attn(q, k, v), atol=1e-5)
    gq = mx.grad(lambda *a: (attention_cpu(*a, 0.3, mask) ** 2).sum(), argnums=(0, 1, 2))(q, k, v)
    gp = mx.grad(lambda *a: (plain_attn(*a) ** 2).sum(), argnums=(0, 1, 2))(q, k, v)
    for a, b in zip(gq, gp, strict=True):
        assert mx.allclose(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "block", [1 << 17, 1000, 200, 10], ids=["whole", "rows", "queries", "1-query"]
)
def test_blocked_cpu_ops_equal_the_plain_twins(block, monkeypatch):
    # small CPU_BLOCKs force the blocked paths: whole rows per block, then query blocks per row
    monkeypatch.setattr(cpu_ops, "CPU_BLOCK", block)
    monkeypatch.setattr(cpu_ops, "ENABLED", True)
    rng = np.random.default_rng(9)
    B, H, Hkv, L, S, hd = 5, 6, 2, 7, 11, 8
    q = mx.array(rng.normal(size=(B, H, L, hd)).astype(np.float32))
    k = mx.array(rng.normal(size=(B, Hkv, S, hd)).astype(np.float32))
    v = mx.array(rng.normal(size=(B, Hkv, S, hd)).astype(np.float32))
    mask = attention_mask(mx.array([0, 3, 1, 0, 4]), S - L, L)

    def plain_attn(q, k, v):
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask=mask)

    in_blocks = attention_cpu(q, k, v, 0.3, mask, in_blocks=True)
    assert mx.allclose(in_blocks, plain_attn(q, k, v), atol=1e-5)
    gq = mx.grad(lambda *a: (attention_cpu(*a, 0.3, mask, True) ** 2).sum(), argnums=(0, 1, 2))(
        q, k, v
    )
    gp = mx.grad(lambda *a: (plain_attn(*a) ** 2).sum(), argnums=(0, 1, 2))(q, k, v)
    for a, b in zip(gq, gp, strict=True):
        assert mx.allclose(a, b, rtol=1e-4, atol=1e-4)

    g = mx.array(rng.normal(0, 6, (3, 4, 33)).astype(np.float32))
    u = mx.array(rng.normal(0, 1, (3, 4, 33)).astype(np.float32))
    with cpu_ops.blocked():
        assert mx.allclose(cpu_ops.silu_mul(g, u), nn.silu(g) * u, rtol=1e-5, atol=1e-5)
        ours = mx.grad(lambda a, b: (cpu_ops.silu_mul(a, b) ** 2).sum(), argnums=(0, 1))(g, u)
    plain = mx.grad(lambda a, b: ((nn.silu(a) * b) ** 2).sum(), argnums=(0, 1))(g, u)
    for a, b in zip(ours, plain, strict=True):
        assert mx.allclose(a, b, rtol=1e-4, atol=1e-4)

    # and a whole model against mlx_lm
    ours_model = tiny_model(QWEN3)
    tokens = mx.array(rng.integers(0, QWEN3["vocab_size"], (3, 13)))
    want = reference(QWEN3, ours_model)(tokens)
    with cpu_ops.blocked():
        got = ours_model.logits(ours_model.hidden(tokens))
    diff = mx.abs(got - want).max().item()
    assert diff <= 1e-4, diff


def test_config_errors_name_the_problem():
    with pytest.raises(ValueError, match="not served"):
        ModelArgs.from_config({**QWEN3, "model_type": "gpt2"})
    with pytest.raises(ValueError, match="rope_theta"):
        ModelArgs.from_config({k: v for k, v in QWEN3.items() if k != "rope_theta"})
    with pytest.raises(ValueError, match="lacks required keys"):
        ModelArgs.from_config({k: v for k, v in QWEN3.items() if k != "vocab_size"})
    nested = {k: v for k, v in QWEN3.items() if k != "rope_theta"}
    nested["rope_parameters"] = {"rope_theta": 5e5, "rope_type": "default"}
    assert ModelArgs.from_config(nested).rope_theta == 5e5


def test_qwen3_fixture_loads_as_mlx_lm_loads_it(qwen3_dir):
    """The tiny Qwen3 HF folder (bfloat16 weights, Qwen-style tokenizer): our loader and
    mlx_lm.load read the same weights, tokens and chat prompt, and the logits agree (both in
    float32 from the same bfloat16 values); mlx_lm's EOS set holds <|im_end|>."""
    from core.chat_format import chat_tokens

    import mlx_lm

    import load_weights

    ours, tok = load_weights.load(str(qwen3_dir), mx.float32)
    ref, ref_tok = mlx_lm.load(str(qwen3_dir))
    assert {p.dtype for _, p in mlx.utils.tree_flatten(ref.parameters())} == {mx.bfloat16}
    ref.update(mlx.utils.tree_map(lambda p: p.astype(mx.float32), ref.parameters()))
    messages = [{"role": "user", "content": "Why is the sky blue? It's 42."}]
    ids = chat_tokens(tok, messages[0]["content"])
    ref_text = ref_tok.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert ids == ref_tok.encode(ref_text, add_special_tokens=False)
    assert tok.eos_token_id in ref_tok.eos_token_ids
    tokens = mx.array([ids])
    diff = mx.abs(ours(tokens) - ref(tokens)).max().item()
    assert diff <= 1e-4, f"max |ours - mlx_lm| = {diff}"
    assert ours(tokens).shape[-1] == ours.args.vocab_size > len(tok)  # rows past the tokenizer
