"""Group sampling: determinism, greedy, EOS handling, the completion mask, and log-probs."""

from core import backend  # noqa: F401

import mlx.core as mx
import numpy as np
import pytest
from helpers import LLAMA, QWEN3, tiny_model, tiny_tokenizer

import gwen as gwen_mod
from gwen import Gwen, completion_mask


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
    # exact on purpose: the same call with the same seed is the same arithmetic, bit for bit
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
        # log p <= 0; exactly 0 where a float32 probability rounds to 1 (the MLX sampler)
        assert (lp[r][mask[r] == 1] <= 0).all()
    assert (lp[mask == 1] < 0).mean() > 0.5, "real tokens carry their log-probs"
    if s.finished.all():
        assert tokens.shape[1] == lengths.max(), "loop must end when every row is done"


def test_bad_sampling_arguments(tiny):
    for kw in [dict(group_size=0), dict(max_new_tokens=0), dict(temperature=-1), dict(top_p=0.0)]:
        args = dict(group_size=2, max_new_tokens=4, temperature=1.0, top_p=1.0) | kw
        with pytest.raises(ValueError):
            tiny.sample_group(PROMPTS, **args)


@pytest.mark.slow
def test_embedded_model_group_invariants(smollm):
    s = smollm.sample_group(["Name a prime number.", "Say hello."], 3, 40, temperature=1.0, seed=0)
    assert len(s.texts) == 6 and s.tokens.shape[0] == 6
    mask = np.array(s.mask)
    assert (np.diff(mask, axis=1) <= 0).all(), "mask is a prefix of ones"
    assert all(isinstance(t, str) and t for t in s.texts)
    assert gwen_mod.completion_mask(s.tokens, smollm.eos_ids).tolist() == mask.tolist()


@pytest.mark.parametrize("temperature, top_p, seed", [(0.0, 1.0, 0), (1.0, 1.0, 5), (0.8, 0.9, 2)])
def test_stream_ends_with_the_group_samplers_text(tiny, temperature, top_p, seed):
    for prompt, max_new in [(PROMPTS[0], 12), (PROMPTS[2], 3)]:
        parts = list(tiny.stream(prompt, max_new, temperature, top_p, seed))
        s = tiny.sample_group([prompt], 1, max_new, temperature, top_p, seed)
        assert parts[-1] == s.texts[0]
        assert 1 <= len(parts) <= max_new + 1
        assert all(b.startswith(a) for a, b in zip(parts, parts[1:], strict=False))


def test_stream_checks_its_arguments(tiny):
    with pytest.raises(ValueError, match="max_new_tokens"):
        next(tiny.stream("t5", 0))


@pytest.mark.slow
def test_embedded_model_stream_matches_sample_group(smollm):
    prompt = "What is the capital of France?"
    parts = list(smollm.stream(prompt, 24, temperature=0.0))
    assert parts[-1] == smollm.sample_group([prompt], 1, 24, temperature=0.0).texts[0]
    assert "Paris" in parts[-1] and len(parts) > 3, parts
    assert all(parts[-1].startswith(p) for p in parts)
    sampled = list(smollm.stream(prompt, 24, temperature=1.0, seed=7))[-1]
    assert sampled == smollm.sample_group([prompt], 1, 24, temperature=1.0, seed=7).texts[0]


def _lora_top(cfg, top: int, seed=3):
    """A tiny model with LoRA (lora_b randomized, so the adapters change the output) on its top
    `top` blocks."""
    from core import lora

    model = tiny_model(cfg, seed=seed)
    n = cfg["num_hidden_layers"]
    lora.apply_lora(model, 4, 8.0, ["q_proj", "v_proj", "down_proj"], list(range(n - top, n)))
    mx.random.seed(seed)
    for _, layer in lora.lora_layers(model):
        layer.lora_b = 0.1 * mx.random.normal(layer.lora_b.shape)
    return model


def _groups(vocab, B=2, G=3, P=5, T=6, seed=0):
    rng = np.random.default_rng(seed)
    pt = mx.array(rng.integers(3, vocab, (B, P)), dtype=mx.int32)
    pad = mx.array([0, 2][:B], dtype=mx.int32)  # the second prompt left-padded by 2
    comp = mx.array(rng.integers(3, vocab, (B * G, T)), dtype=mx.int32)
    return pt, pad, comp, G


@pytest.mark.parametrize("T", [6, 1])
def test_frozen_trunk_gives_the_same_logprobs_and_gradients(T):
    from mlx.nn import value_and_grad
    from mlx.utils import tree_flatten

    model = _lora_top(LLAMA, top=1)  # 3 blocks, adapters in the top one: a trunk of 2
    assert gwen_mod.frozen_depth(model) == 2
    pt, pad, comp, G = _groups(LLAMA["vocab_size"], T=T)
    trunk = gwen_mod.sequence_trunk(model, pt, pad, comp, G, 2)
    assert trunk.prompt.shape == (2, 5, LLAMA["hidden_size"])
    assert (trunk.completion is None) == (T == 1)

    def loss(m, trunk):
        lp = gwen_mod.sequence_logprobs(m, pt, pad, comp, G, 0.7, trunk=trunk)
        return (lp * mx.arange(lp.size).reshape(lp.shape) / lp.size).sum()

    full_v, full_g = value_and_grad(model, loss)(model, None)
    cut_v, cut_g = value_and_grad(model, loss)(model, trunk)
    assert abs(full_v.item() - cut_v.item()) <= 1e-5 * abs(full_v.item())
    full_g, cut_g = dict(tree_flatten(full_g)), dict(tree_flatten(cut_g))
    assert full_g.keys() == cut_g.keys() and len(full_g) == 6  # 3 targets x (a, b), top block
    for name, g in full_g.items():
        assert mx.abs(g).max().item() > 0, name
        assert mx.abs(g - cut_g[name]).max().item() <= 1e-5, name


@pytest.mark.parametrize(
    "lengths,width,want",
    [
        ([2, 10, 10, 3], 10, (3, 10)),  # cut 3: 4*3 + 2*7 = 26 positions of 40 (cut 2: 32)
        ([8, 8, 8, 8], 10, (8, 8)),  # no tail: the last 2 positions of every row skipped
        ([10, 10, 10, 9], 10, None),  # cut 9 saves 1 of 40: under RAGGED_MIN_SAVING
        ([0, 0], 5, None),  # nothing needed: the caller's business
        ([12, 1], 10, (1, 10)),  # 12 counts as the width: cut 1 runs 2 + 9 = 11 of 20
    ],
)
def test_ragged_cut_hand_counted(lengths, width, want):
    assert gwen_mod.ragged_cut(lengths, width) == want


def test_last_nonzero_reads_each_rows_end():
    mask = np.array([[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]])
    assert gwen_mod.last_nonzero(mask).tolist() == [2, 0, 3, 4]


@pytest.mark.parametrize(
    "full,trunk_depth", [(True, 0), (False, 0), (False, 2)], ids=["full", "lora", "lora-trunk"]
)
def test_ragged_blocks_same_logprobs_and_gradients(full, trunk_depth, monkeypatch):
    # ragged=True cuts the completions into a head for every row and a tail for the long rows
    # (ends 9, 9, 2, 3, 1, 9, 2, 4: cut at 3 of 8 positions, a tail for 4 rows): log-probs at
    # valid positions and every gradient of a masked loss equal the uncut path's.
    from mlx.nn import value_and_grad
    from mlx.utils import tree_flatten

    model = tiny_model(LLAMA, seed=5) if full else _lora_top(LLAMA, top=1)
    pt, pad, comp, G = _groups(LLAMA["vocab_size"], B=2, G=4, T=9, seed=3)
    ends = [9, 9, 2, 3, 1, 9, 2, 4]
    assert gwen_mod.ragged_cut(np.array(ends) - 1, 8) == (3, 8)
    mask = mx.array([[1.0] * n + [0.0] * (9 - n) for n in ends])
    weights = mask * (1 + mx.arange(mask.size).reshape(mask.shape)) / mask.size
    trunk = gwen_mod.sequence_trunk(model, pt, pad, comp, G, trunk_depth) if trunk_depth else None

    def loss(m, ragged):
        lp = gwen_mod.sequence_logprobs(
            m, pt, pad, comp, G, 0.7, trunk=trunk, valid=mask, ragged=ragged
        )
        return (lp * weights).sum()

    base_v, base_g = value_and_grad(model, loss)(model, False)
    calls, blocks = [], type(model).blocks
    monkeypatch.setattr(
        type(model), "blocks", lambda m, h, *a, **k: calls.append(h.shape) or blocks(m, h, *a, **k)
    )
    cut_v, cut_g = value_and_grad(model, loss)(model, True)
    # the prompt, then the head (8 rows x 3) and the tail (3 rows x 5: ends 9, 9, 9 minus 1)
    assert [c[:2] for c in calls] == [(2, 5), (8, 3), (3, 5)]
    assert abs(base_v.item() - cut_v.item()) <= 1e-5 * abs(base_v.item())
    base_g, cut_g = dict(tree_flatten(base_g)), dict(tree_flatten(cut_g))
    assert base_g.keys() == cut_g.keys() and len(base_g) > 0
    for name, g in base_g.items():
        assert mx.abs(g).max().item() > 0, name
        assert mx.abs(g - cut_g[name]).max().item() <= 1e-5 * max(1.0, mx.abs(g).max().item())


@pytest.mark.parametrize("full", [True, False], ids=["full-finetune", "lora"])
def test_head_on_valid_positions_only_same_logprobs_and_gradients(full):
    # `valid` runs the LM head only where the mask is nonzero (padding after EOS skipped): the
    # log-probs and entropies there, and every gradient of a masked loss, equal the full path's;
    # elsewhere both are 0. A fully masked batch scores nothing; a wrong shape is refused.
    from mlx.nn import value_and_grad
    from mlx.utils import tree_flatten

    model = tiny_model(LLAMA, seed=4) if full else _lora_top(LLAMA, top=1)
    pt, pad, comp, G = _groups(LLAMA["vocab_size"])
    ends = [6, 2, 4, 1, 5, 3]  # completion lengths up to and including EOS
    mask = mx.array([[1.0] * n + [0.0] * (6 - n) for n in ends])
    weights = mask * mx.arange(mask.size).reshape(mask.shape) / mask.size

    def loss(m, valid):
        lp = gwen_mod.sequence_logprobs(m, pt, pad, comp, G, 0.7, valid=valid)
        return (lp * weights).sum()

    full_v, full_g = value_and_grad(model, loss)(model, None)
    cut_v, cut_g = value_and_grad(model, loss)(model, mask)
    assert abs(full_v.item() - cut_v.item()) <= 1e-5 * abs(full_v.item())
    full_g, cut_g = dict(tree_flatten(full_g)), dict(tree_flatten(cut_g))
    assert full_g.keys() == cut_g.keys() and len(full_g) > 0
    for name, g in full_g.items():
        assert mx.abs(g).max().item() > 0, name
        assert mx.abs(g - cut_g[name]).max().item() <= 1e-5 * max(1.0, mx.abs(g).max().item())

    lp_all, ent_all = gwen_mod.sequence_logprobs(model, pt, pad, comp, G, 0.7, True)
    lp, ent = gwen_mod.sequence_logprobs(model, pt, pad, comp, G, 0.7, True, valid=mask)
    on = np.asarray(mask) > 0
    assert np.abs(np.asarray(lp - lp_all))[on].max() <= 1e-5
    assert np.abs(np.asarray(ent - ent_all))[on].max() <= 1e-5
    assert (np.asarray(lp)[~on] == 0).all() and (np.asarray(ent)[~on] == 0).all()
    assert (np.asarray(lp_all)[~on] != 0).all()  # the full path did score the padding
    none = gwen_mod.sequence_logprobs(model, pt, pad, comp, G, 0.7, valid=mx.zeros(comp.shape))
    assert none.shape == comp.shape and not np.asarray(none).any()
    with pytest.raises(ValueError, match="valid has shape"):
        gwen_mod.sequence_logprobs(model, pt, pad, comp, G, 0.7, valid=mask[:, :3])


@pytest.mark.parametrize("full", [True, False], ids=["full-finetune", "lora"])
def test_head_gradient_only_where_the_head_trains(full):
    # A trained (tied) head gets d/dweight through the LM head; a frozen one is skipped. The
    # gradients equal those of the naive full-vocabulary log-softmax either way.
    from core import kernels

    from mlx.nn import value_and_grad
    from mlx.utils import tree_flatten

    model = tiny_model(LLAMA, seed=4) if full else _lora_top(LLAMA, top=1)
    assert gwen_mod.head_trains(model) == full
    pt, pad, comp, G = _groups(LLAMA["vocab_size"])

    def ours(m):
        return gwen_mod.sequence_logprobs(m, pt, pad, comp, G, 0.7).sum()

    def naive(m):
        h = gwen_mod.sequence_hidden(m, pt, pad, comp, G)
        return kernels.token_logprobs_naive(h, m.lm_head_weight(), comp, 0.7).sum()

    got = dict(tree_flatten(value_and_grad(model, ours)(model)[1]))
    want = dict(tree_flatten(value_and_grad(model, naive)(model)[1]))
    assert got.keys() == want.keys()
    assert ("model.embed_tokens.weight" in got) == full
    for name, g in want.items():
        assert mx.abs(g - got[name]).max().item() <= 1e-5 * max(1.0, mx.abs(g).max().item()), name


def test_frozen_depth_and_trunk_bounds():
    from core import lora

    model = tiny_model(LLAMA, seed=1)
    model.freeze()
    assert gwen_mod.frozen_depth(model) == 3  # nothing trains
    lora.apply_lora(model, 2, 4.0, ["q_proj"], [0])
    assert gwen_mod.frozen_depth(model) == 0  # the bottom block trains: no trunk
    full = tiny_model(LLAMA, seed=1)  # full fine-tuning: the embedding trains
    assert gwen_mod.frozen_depth(full) == 0
    pt, pad, comp, G = _groups(LLAMA["vocab_size"])
    for depth in (0, 3):
        with pytest.raises(ValueError, match="trunk depth"):
            gwen_mod.sequence_trunk(model, pt, pad, comp, G, depth)


@pytest.mark.parametrize("cfg", [LLAMA, QWEN3], ids=["llama", "qwen3"])
def test_sampling_keeps_the_trunk_the_update_would_compute(cfg):
    # The stream after the frozen blocks, computed token by token while sampling, equals the
    # batch recomputation to rounding, and log-probs and gradients through it match the full
    # forward within 1e-4 (the half-cost step's bar).
    from mlx.nn import value_and_grad
    from mlx.utils import tree_flatten

    model = _lora_top(cfg, top=1)
    depth = cfg["num_hidden_layers"] - 1
    g = Gwen(model, tiny_tokenizer(cfg["vocab_size"]))
    s = g.sample_group(["t5 t6 t7", "t9"], 3, 7, temperature=1.0, seed=1, trunk_depth=depth)
    plain = g.sample_group(["t5 t6 t7", "t9"], 3, 7, temperature=1.0, seed=1)
    # exact: the same uniforms on logits equal to rounding (~1e-6); a draw flips only if its
    # uniform lands that close to a step of the CDF (odds ~1e-4 over the test's draws)
    assert np.array_equal(np.array(s.tokens), np.array(plain.tokens))  # same draws
    T = s.tokens.shape[1]
    assert s.trunk.depth == depth and s.trunk.completion.shape[:2] == (6, T - 1)
    again = gwen_mod.sequence_trunk(model, s.prompt_tokens, s.prompt_pad, s.tokens, 3, depth)
    real = np.array(s.prompt_pad)[:, None] <= np.arange(s.prompt_tokens.shape[1])[None]
    diff = mx.abs(s.trunk.prompt - again.prompt).max(axis=-1)
    assert np.array(diff)[real].max() <= 1e-5  # left-pad slots hold nothing either way
    assert mx.abs(s.trunk.completion - again.completion).max().item() <= 1e-5

    def loss(m, trunk):
        lp = gwen_mod.sequence_logprobs(
            m, s.prompt_tokens, s.prompt_pad, s.tokens, 3, 1.0, trunk=trunk
        )
        return (lp * s.mask).sum()

    v0, g0 = value_and_grad(model, loss)(model, None)
    v1, g1 = value_and_grad(model, loss)(model, s.trunk)
    assert abs(v0.item() - v1.item()) <= 1e-4
    for (name, a), (_, b) in zip(tree_flatten(g0), tree_flatten(g1), strict=True):
        assert mx.abs(a - b).max().item() <= 1e-4, name
    with pytest.raises(ValueError, match="trunk_depth"):
        g.sample_group(["t5"], 1, 2, trunk_depth=cfg["num_hidden_layers"])


@pytest.mark.parametrize("seed", [5, list(range(100, 112))], ids=["shared", "per-row"])
def test_dropping_finished_rows_samples_what_the_whole_batch_does(seed):
    # With many EOS ids rows end at different steps; the decode that drops them (DROP_AT at a
    # time) must draw the same tokens, give the same log-probs to rounding, and keep the same
    # trunk stream wherever the update reads it (positions whose next token is in the mask).
    model = _lora_top(LLAMA, top=1)
    depth = LLAMA["num_hidden_layers"] - 1
    g = Gwen(model, tiny_tokenizer(LLAMA["vocab_size"]))
    g.sampler = "numpy"
    g.eos_ids = list(range(0, LLAMA["vocab_size"], 6))  # ~1 token in 6 ends a row
    out = {}
    for drop in (False, True):
        g.drop_finished = drop
        out[drop] = g.sample_group(
            ["t5 t6 t7", "t9", "t3 t4"], 4, 24, temperature=1.0, seed=seed, trunk_depth=depth
        )
    whole, dropped = out[False], out[True]
    lengths = np.array(whole.mask).sum(axis=1)
    assert (lengths < whole.tokens.shape[1]).sum() >= gwen_mod.DROP_AT, lengths  # drops happen
    # exact: the same uniforms on logits equal to rounding (batch shapes differ); a draw flips
    # only if its uniform lands within ~1e-6 of a step of the CDF (odds ~1e-4 here)
    assert np.array_equal(np.array(whole.tokens), np.array(dropped.tokens))
    assert whole.texts == dropped.texts
    assert np.array_equal(whole.finished, dropped.finished)
    assert np.array_equal(np.array(whole.mask), np.array(dropped.mask))
    assert np.abs(np.array(whole.logprobs) - np.array(dropped.logprobs)).max() <= 1e-5
    read = np.array(whole.mask)[:, 1:] > 0
    a, b = np.array(whole.trunk.completion), np.array(dropped.trunk.completion)
    assert np.abs(a - b).max(axis=-1)[read].max() <= 1e-5
    assert (np.abs(b).max(axis=-1) == 0).any()  # the dropped rows' later positions: zeros


def test_sampler_draws_for_some_rows_what_it_draws_for_all():
    from core.sampling import make_sampler

    logits = mx.array(np.random.default_rng(0).normal(size=(6, 40)).astype(np.float32))
    rows = np.array([1, 4, 5])
    for seed in (3, [10, 11, 12, 13, 14, 15]):
        whole = make_sampler("numpy", seed, 1.0, 1.0)
        some = make_sampler("numpy", seed, 1.0, 1.0)
        for _ in range(3):
            tok, lp = whole(logits)
            tok_s, lp_s = some(logits[mx.array(rows)], rows, 6)
            assert np.array_equal(tok[rows], tok_s) and np.allclose(lp[rows], lp_s)
    with pytest.raises(ValueError, match="row indices"):
        make_sampler("numpy", 3, 1.0, 1.0)(logits[:2], np.array([0, 1]), None)
