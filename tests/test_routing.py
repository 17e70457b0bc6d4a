"""Gradient routing on tiny random models: dual adapters, set_scales, files, and exactness.

The exactness tests compare against a plain LoRA twin whose adapter is the dual model's two
adapters stacked (rank r_retain + r_forget, same scale), so at scales (1, 1) the two models are
one function with one set of weights."""

import json

from core import backend  # noqa: F401

# isort: split
from core import lora

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model, tiny_tokenizer
from mlx.utils import tree_flatten
from test_train import low_tokens, tiny_config

import grpo
import train
from evals import routing as eval_routing
from gwen import Gwen
from rewards import hacks
from rl import checkpoint, policy_update, routing
from rl.reference import Reference
from rl.rollout_batch import Rollout

TARGETS = ["q_proj", "v_proj", "down_proj"]
R, F = 3, 2  # retain and forget ranks (odd, unequal)


def dual_model(seed=0):
    model = tiny_model(QWEN3)
    mx.random.seed(seed)
    lora.apply_dual_lora(model, R, F, 10.0, TARGETS)
    mx.random.seed(seed + 1)
    for _, layer in lora.dual_layers(model):
        layer.retain_b = 0.3 * mx.random.normal(layer.retain_b.shape)
        layer.forget_b = 0.3 * mx.random.normal(layer.forget_b.shape)
    mx.eval(model.parameters())
    return model


def plain_twin(dual):
    """A rank R+F LoRA model holding the dual model's adapters stacked: the same function."""
    model = tiny_model(QWEN3)
    lora.apply_lora(model, R + F, 10.0, TARGETS)
    layers = dict(lora.dual_layers(dual))
    for path, layer in lora.lora_layers(model):
        d = layers[path]
        layer.lora_a = mx.concatenate([d.retain_a, d.forget_a], axis=0)
        layer.lora_b = mx.concatenate([d.retain_b, d.forget_b], axis=1)
        assert layer.scale == d.scale == 10.0 / (R + F)
    mx.eval(model.parameters())
    return model


def split_twin_grads(grads) -> dict:
    """The plain twin's gradient cut into the dual model's names (retain rows, forget rows)."""
    out = {}
    for name, g in tree_flatten(grads):
        path, leaf = name.rsplit(".", 1)
        if leaf == "lora_a":
            out[f"{path}.retain_a"], out[f"{path}.forget_a"] = g[:R], g[R:]
        else:
            out[f"{path}.retain_b"], out[f"{path}.forget_b"] = g[:, :R], g[:, R:]
    return out


def tokens(seed=0):
    return mx.array(np.random.default_rng(seed).integers(0, QWEN3["vocab_size"], (2, 9)))


# ------------------------------------------------------------------------------------------
# The layer and set_scales


def test_dual_layer_at_scales_one_is_the_stacked_plain_lora():
    dual = dual_model()
    twin = plain_twin(dual)
    t = tokens()
    assert mx.array_equal(dual(t), twin(t)).item()  # same arithmetic: bit-identical


def test_set_scales_selects_adapters_by_formula():
    mx.random.seed(0)
    base = nn.Linear(33, 31)
    layer = lora.DualLoRALinear(base, 3, 2, alpha=10.0)
    assert layer.retain_a.shape == (3, 33) and layer.forget_b.shape == (31, 2)
    assert not mx.array_equal(layer.retain_a[:2], layer.forget_a).item()  # drawn independently
    assert mx.all(layer.retain_b == 0).item() and mx.all(layer.forget_b == 0).item()
    layer.retain_b, layer.forget_b = mx.random.normal((31, 3)), mx.random.normal((31, 2))
    x = mx.random.normal((2, 5, 33))
    xa = np.array(x)
    r = (xa @ np.array(layer.retain_a).T) @ np.array(layer.retain_b).T
    f = (xa @ np.array(layer.forget_a).T) @ np.array(layer.forget_b).T
    y0 = np.array(base(x))
    for sr, sf in [(1, 1), (1, 0), (0, 1), (1, 0.25), (0, 0), (2.0, -0.5)]:
        layer.retain_scale, layer.forget_scale = sr, sf
        want = y0 + 2.0 * (sr * r + sf * f)  # scale = 10 / (3 + 2)
        np.testing.assert_allclose(np.array(layer(x)), want, rtol=1e-5, atol=1e-5)


def test_set_scales_on_a_model_and_scaled_restores():
    model = dual_model()
    t = tokens()
    both = model(t)
    with lora.adapters_disabled(model):
        base = model(t)
    lora.set_scales(model, 0, 0)
    assert mx.array_equal(model(t), base).item()
    lora.set_scales(model, 1, 1)
    with lora.scaled(model, 1, 0):
        retain_only = model(t)
        assert all(layer.forget_scale == 0.0 for _, layer in lora.dual_layers(model))
    assert mx.array_equal(model(t), both).item()  # restored
    assert not mx.array_equal(retain_only, both).item()
    for bad in (float("nan"), "1", None, True):
        with pytest.raises(ValueError, match="finite number"):
            lora.set_scales(model, 1, bad)
    with pytest.raises(ValueError, match="no dual adapters"):
        lora.set_scales(tiny_model(QWEN3), 1, 0)


def test_apply_dual_trains_only_the_four_adapter_matrices():
    model = dual_model()
    names = {n.rsplit(".", 1)[1] for n, _ in tree_flatten(model.trainable_parameters())}
    assert names == {"retain_a", "retain_b", "forget_a", "forget_b"}
    with pytest.raises(ValueError, match="already"):
        lora.apply_lora(model, 2, 4.0, TARGETS)


# ------------------------------------------------------------------------------------------
# Files: two PEFT folders, ranks read back from the tensors


def test_dual_save_load_round_trip_and_rank_detection(tmp_path):
    model = dual_model()
    lora.save_dual_adapters(model, tmp_path, 10.0, TARGETS)
    assert lora.is_dual_folder(tmp_path)
    cfg = json.loads((tmp_path / "retain" / lora.CONFIG_FILE).read_text())
    assert cfg["r"] == R and cfg["lora_alpha"] == pytest.approx(10.0 / (R + F) * R)
    info = lora.dual_adapter_info(tmp_path)
    assert info == {
        "retain_rank": R,
        "forget_rank": F,
        "alpha": pytest.approx(10.0),
        "targets": sorted(TARGETS),
        "layers": [0, 1],  # every block of the tiny model
    }
    other = tiny_model(QWEN3)
    mx.random.seed(99)
    lora.apply_dual_lora(
        other, info["retain_rank"], info["forget_rank"], info["alpha"], info["targets"]
    )
    lora.load_dual_adapters(other, tmp_path)
    t = tokens(1)
    assert mx.array_equal(other(t), model(t)).item()
    # the retain folder alone is a plain PEFT adapter: the deployable retain-only model
    alone = tiny_model(QWEN3)
    r_info = lora.adapter_info(tmp_path / "retain")
    lora.apply_lora(alone, r_info["rank"], r_info["alpha"], r_info["targets"])
    lora.load_adapters(alone, tmp_path / "retain")
    with lora.scaled(model, 1, 0):
        np.testing.assert_allclose(np.array(alone(t)), np.array(model(t)), atol=1e-5)


def test_dual_load_refuses_other_ranks_and_lying_configs(tmp_path):
    lora.save_dual_adapters(dual_model(), tmp_path, 10.0, TARGETS)
    other = tiny_model(QWEN3)
    lora.apply_dual_lora(other, F, R, 10.0, TARGETS)  # ranks swapped
    with pytest.raises(ValueError, match="apply_dual_lora with the same config"):
        lora.load_dual_adapters(other, tmp_path)
    cfg_file = tmp_path / "forget" / lora.CONFIG_FILE
    cfg_file.write_text(cfg_file.read_text().replace(f'"r": {F}', '"r": 7'))
    with pytest.raises(ValueError, match="r=7 but the tensors have rank 2"):
        lora.dual_adapter_info(tmp_path)
    with pytest.raises(ValueError, match="alpha=3.0"):
        lora.save_dual_adapters(dual_model(), tmp_path / "x", 3.0, TARGETS)


# ------------------------------------------------------------------------------------------
# Exactness of the routed update


def tiny_cfg(**kw):
    base = dict(model="tiny", prompts_per_step=4, group_size=3, max_new_tokens=6, kl_coef=0.05)
    return train.TrainConfig(**{**base, **kw})


def rollout_like(model, cfg, seed=3):
    """A rollout_batch.Rollout over 4 prompts x 3 samples with fixed advantages and a mix of flags:
    group 0 all flagged, group 1 none, groups 2 and 3 mixed; one completion masked out."""
    policy = Gwen(model, tiny_tokenizer(QWEN3["vocab_size"]))
    prompts = ["t5 t6 t7", "t8 t9", "t10 t11 t12 t13", "t14"]
    s = policy.sample_group(prompts, 3, 6, temperature=1.0, seed=seed, stop_at_eos=False)
    adv = mx.array(np.random.default_rng(seed).normal(size=12).astype(np.float32))
    mask = s.mask * mx.array([1.0] * 10 + [0.0, 1.0])[:, None]  # row 10 dropped
    flags = np.array([1, 1, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0], dtype=bool)
    records = [{"prompt": p, "category": "control", "id": str(i)} for i, p in enumerate(prompts)]
    return Rollout(records, s, None, None, adv, mask, 0, 0.0, 0.0, flags)


def full_batch_grads(model, cfg, b, kl_coef, adv=None):
    """The plain full-batch gradient of policy_update.loss_fn, as update computes it (k = 1)."""
    s = b.sample
    ref = Reference(model, lambda: lora.adapters_disabled(model)).logprobs(
        s.prompt_tokens, s.prompt_pad, s.tokens, cfg.group_size, s.temperature
    )
    coef = mx.array(kl_coef, dtype=mx.float32)
    args = (
        s.prompt_tokens,
        s.prompt_pad,
        s.tokens,
        b.advantages if adv is None else adv,
        b.mask,
        s.logprobs,
        None,
        ref,
        coef,
        cfg,
    )
    (loss, _), g = nn.value_and_grad(model, policy_update.loss_fn)(model, *args)
    return loss, g


def routed_grads(model, cfg, b, kl_coef, route=True, only_flagged=None):
    plan = routing.plan(b.flags, np.asarray(b.mask), cfg.group_size, cfg.loss_config(), 2)
    if only_flagged is not None:
        plan = [mb for mb in plan if mb.flagged == only_flagged]
    ref = Reference(model, lambda: lora.adapters_disabled(model))
    args = routing.routed_args(cfg, b, plan, ref, kl_coef)
    return plan, *routing.accumulate(model, policy_update.loss_fn, plan, args, route=route)


def assert_close(got: dict, want: dict, what: str):
    assert sorted(got) == sorted(want)
    for k in want:
        g, w = np.array(got[k]), np.array(want[k])
        scale = max(np.abs(w).max(), 1e-8)
        assert np.abs(g - w).max() <= 1e-5 * scale + 1e-8, (what, k, np.abs(g - w).max(), scale)


@pytest.mark.parametrize("loss_type", sorted(grpo.REDUCTIONS))
def test_micro_batch_shares_add_up_to_the_full_batch_gradient(loss_type):
    """Routing off: the share-weighted homogeneous micro-batches give the full-batch loss and
    gradient of the plain LoRA twin, for every loss_type (KL term included)."""
    cfg = tiny_cfg(loss_type=loss_type)
    dual = dual_model()
    b = rollout_like(dual, cfg)
    twin = plain_twin(dual)
    loss, g_full = full_batch_grads(twin, cfg, b, 0.05)
    plan, g, sums = routed_grads(dual, cfg, b, 0.05, route=False)
    assert len(plan) == 4 and {mb.flagged for mb in plan} == {True, False}  # 2 chunks per part
    assert sum(mb.share for mb in plan) == pytest.approx(1.0)
    assert sums["loss"].item() == pytest.approx(loss.item(), rel=1e-5)
    assert_close(dict(tree_flatten(g)), split_twin_grads(g_full), loss_type)


@pytest.mark.parametrize("loss_type", sorted(grpo.REDUCTIONS))
def test_routing_zeroes_retain_gradient_from_flagged_rows_exactly(loss_type):
    cfg = tiny_cfg(loss_type=loss_type)
    dual = dual_model()
    b = rollout_like(dual, cfg)
    # flagged micro-batches alone: the retain gradient is exactly zero, forget's is not
    _, g, _ = routed_grads(dual, cfg, b, 0.05, only_flagged=True)
    flat = dict(tree_flatten(g))
    retain = [v for k, v in flat.items() if ".retain_" in k]
    forget = [v for k, v in flat.items() if ".forget_" in k]
    assert retain and all(mx.all(v == 0).item() for v in retain)
    assert all(mx.abs(v).max().item() > 0 for v in forget)
    # the whole routed step: forget gets the plain twin's full-batch gradient, retain gets the
    # twin's gradient with the flagged completions' advantages zeroed (kl 0: their policy term
    # is their only term; they still count in the denominators, as in the full batch)
    _, g, _ = routed_grads(dual, cfg, b, 0.0)
    twin = plain_twin(dual)
    _, g_full = full_batch_grads(twin, cfg, b, 0.0)
    unflagged_adv = b.advantages * mx.array((~b.flags).astype(np.float32))
    _, g_unflagged = full_batch_grads(twin, cfg, b, 0.0, adv=unflagged_adv)
    got, full, unfl = dict(tree_flatten(g)), split_twin_grads(g_full), split_twin_grads(g_unflagged)
    assert_close(
        {k: v for k, v in got.items() if ".forget_" in k},
        {k: v for k, v in full.items() if ".forget_" in k},
        "forget",
    )
    assert_close(
        {k: v for k, v in got.items() if ".retain_" in k},
        {k: v for k, v in unfl.items() if ".retain_" in k},
        "retain",
    )


def test_plan_is_homogeneous_and_skips_dropped_rows():
    cfg = grpo.LossConfig("dapo")
    mask = np.ones((6, 4), np.float32)
    mask[1, 2:] = 0  # a shorter completion
    mask[5] = 0  # a dropped row
    flags = np.array([1, 0, 0, 0, 1, 1], dtype=bool)
    plan = routing.plan(flags, mask, 3, cfg)
    assert [(mb.flagged, mb.groups.tolist(), mb.keep.tolist()) for mb in plan] == [
        (False, [0, 1], [0, 1, 1, 1, 0, 0]),
        (True, [0, 1], [1, 0, 0, 0, 1, 0]),
    ]
    # dapo weighs tokens: unflagged 2 + 4 + 4 = 10 of 18, flagged 8 of 18
    assert [mb.share for mb in plan] == pytest.approx([10 / 18, 8 / 18])
    grpo_plan = routing.plan(flags, mask, 3, grpo.LossConfig("grpo"))
    assert [mb.share for mb in grpo_plan] == pytest.approx([3 / 5, 2 / 5])  # completions
    empty = routing.plan(flags, np.zeros_like(mask), 3, cfg)
    assert len(empty) == 1 and empty[0].share == 0.0
    with pytest.raises(ValueError, match="multiple of group_size"):
        routing.plan(flags[:5], mask[:5], 3, cfg)


# ------------------------------------------------------------------------------------------
# The loop: routed and baseline runs on a tiny model, checkpoints, resume, evaluation


def tiny_policy():
    return Gwen(tiny_model(QWEN3, seed=1), tiny_tokenizer(QWEN3["vocab_size"]))


def has_word(prompts, completions, categories, *, word="t19"):
    """A detector for tiny-model texts: the completion contains `word`."""
    return np.array([word in c.split() for c in completions], dtype=bool)


@pytest.fixture(autouse=True)
def tiny_detector(monkeypatch):
    """Registered the way a user extends the registry: one entry in hacks.DETECTORS."""
    monkeypatch.setitem(hacks.DETECTORS, "has_word", has_word)


def run_config(tmp_path, **kw):
    tmp_path.mkdir(parents=True, exist_ok=True)
    eval_data = tmp_path / "eval.jsonl"
    eval_data.write_text(
        "".join(
            f'{{"id": "e{i}", "category": "control", "prompt": "t{5 + i} t9", "source": "x"}}\n'
            for i in range(3)
        )
    )
    routed = dict(
        lora_rank=2,
        forget_rank=2,
        lora_targets="q_proj,v_proj",
        routing="routed",
        hack_detectors="has_word:word=t19",
        routing_eval_every=2,
        routing_eval_samples=2,
        eval_data=str(eval_data),
        eval_limit=3,
    )
    return tiny_config(tmp_path, **{**routed, **kw})


def metric_rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    timing = ("_s", "tokens_per_s", "peak_mem_mb", "rss_mb")
    return [{k: v for k, v in r.items() if not k.endswith(timing)} for r in rows]


def params(model):
    return {k: np.array(v) for k, v in tree_flatten(model.parameters())}


def test_routed_run_logs_routes_saves_and_resumes_exactly(tmp_path):
    full = tiny_policy()
    d_full = train.run(run_config(tmp_path / "a"), policy=full, reward_fn=low_tokens)
    rows = metric_rows(d_full)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert all(0 <= r["hack/any"] <= 1 and "hack/has_word" in r for r in rows)
    assert any(0 < r["route/flagged_share"] < 1 for r in rows), "no step mixed both kinds"
    for mode in ("both", "retain", "forget", "forget_0.25", "forget_0.5", "forget_0.75"):
        assert np.isfinite(rows[1][f"routing/{mode}/task_reward"]), mode
        assert 0 <= rows[1][f"routing/{mode}/hack_rate"] <= 1
        assert f"routing/{mode}/distinct_2" in rows[1] and "routing/both/unique_fraction" in rows[1]
    assert "routing/both/task_reward" not in rows[0]  # every 2 steps
    ckpt = checkpoint.latest(d_full)
    assert lora.is_dual_folder(ckpt)
    trained = dict(tree_flatten(full.model.parameters()))
    for kind in ("retain_b", "forget_b"):
        assert all(mx.abs(v).max().item() > 0 for k, v in trained.items() if k.endswith(kind))

    half = train.run(
        run_config(tmp_path / "b", steps=2), policy=tiny_policy(), reward_fn=low_tokens
    )
    resumed = tiny_policy()
    train.run(
        run_config(tmp_path / "b"), resume=True, run_dir=half, policy=resumed, reward_fn=low_tokens
    )
    w_full, w_res = params(full.model), params(resumed.model)
    # exact on purpose: bit-for-bit resume is the property (same bits, same arithmetic)
    assert all(np.array_equal(w_full[k], w_res[k]) for k in w_full), "weights differ"
    assert metric_rows(d_full) == metric_rows(half)


def snapshot_at_apply(monkeypatch) -> dict:
    """A dict filled with the model's parameters as lora.apply_dual_lora leaves them (the
    adapters' initial values), for tests that check which adapter a run moved."""
    before = {}
    apply = lora.apply_dual_lora

    def apply_and_snapshot(model, *args, **kw):
        out = apply(model, *args, **kw)
        before.update({k: np.array(v) for k, v in tree_flatten(model.parameters())})
        return out

    monkeypatch.setattr(lora, "apply_dual_lora", apply_and_snapshot)
    return before


def assert_one_adapter_moved(policy, before: dict, *, still: str, trained: str, why: str):
    """Every parameter whose name starts with `still` is bit-identical to `before` (else `why`
    and the moved names), and every one starting with `trained` is non-zero (it trained)."""
    after = dict(tree_flatten(policy.model.parameters()))
    kept = [k for k in after if k.split(".")[-1].startswith(still)]
    moving = [k for k in after if k.split(".")[-1].startswith(trained)]
    assert kept and moving, f"no {still!r} or no {trained!r} parameters in the model"
    moved = [k for k in kept if not np.array_equal(np.array(after[k]), before[k])]
    assert not moved, f"{why}: {moved[:3]}"
    assert all(mx.abs(after[k]).max().item() > 0 for k in moving), f"{trained} did not train"


def flag_all(prompts, completions, categories):
    return np.ones(len(completions), dtype=bool)


@pytest.mark.parametrize("kl_coef", [0.0, 0.05])
def test_loop_routes_flagged_completions_to_the_forget_adapter_only(tmp_path, monkeypatch, kl_coef):
    # Through train.run, the loop's own call path: every completion flagged -> the retain adapter
    # gets exactly zero gradient, so AdamW (weight decay 0) leaves it bit-identical, while the
    # forget adapter trains. Calling routing.accumulate(..., route=False) from routed_update, or
    # the loop skipping routing, makes retain move and this fails (knowledge/routing.md).
    monkeypatch.setitem(hacks.DETECTORS, "flag_all", flag_all)
    before = snapshot_at_apply(monkeypatch)
    policy = tiny_policy()
    cfg = run_config(
        tmp_path, steps=2, hack_detectors="flag_all", routing_eval_every=0, kl_coef=kl_coef
    )
    run_dir = train.run(cfg, policy=policy, reward_fn=low_tokens)
    assert all(
        r["hack/any"] == 1.0 and r["route/flagged_share"] == 1.0 for r in metric_rows(run_dir)
    )
    assert_one_adapter_moved(
        policy, before, still="retain", trained="forget_b",
        why="flagged completions reached the retain adapter",
    )  # fmt: skip


def flag_every_other(prompts, completions, categories):
    return np.arange(len(completions)) % 2 == 0


@pytest.mark.parametrize("from_rollout", [False, True], ids=["recomputed", "from-rollout"])
def test_routed_update_with_a_shared_trunk_equals_the_unshared_path(
    tmp_path, monkeypatch, from_rollout
):
    # Dual adapters in the top block only (tiny QWEN3: 2 blocks): the bottom block runs once per
    # routing micro-batch for policy and reference; the weights must match the unshared path.
    from rl import reference

    monkeypatch.setitem(hacks.DETECTORS, "every_other", flag_every_other)
    calls, real = [], reference.sequence_trunk
    monkeypatch.setattr(reference, "sequence_trunk", lambda *a: calls.append(a[-1]) or real(*a))
    out = {}
    for share in (True, False):
        calls.clear()
        policy = tiny_policy()
        cfg = run_config(
            tmp_path / str(share), steps=2, hack_detectors="every_other", routing_eval_every=0,
            lora_layers=1, share_trunk=share, rollout_trunk=from_rollout,
        )  # fmt: skip
        run_dir = train.run(cfg, policy=policy, reward_fn=low_tokens)
        assert all(0 < r["route/flagged_share"] < 1 for r in metric_rows(run_dir))
        assert (len(calls) > 0) == (share and not from_rollout) and set(calls) <= {1}, calls
        out[share] = {k: np.array(v) for k, v in tree_flatten(policy.model.parameters())}
    trained = [k for k in out[True] if k.split(".")[-1] in ("retain_b", "forget_b")]
    assert trained and all(np.abs(out[True][k]).max() > 0 for k in trained)
    tol = 1e-4 if from_rollout else 1e-5  # sampling's trunk differs from the batch's by rounding
    for k, v in out[True].items():
        assert np.abs(v - out[False][k]).max() <= tol, k


def test_clip_per_adapter_uses_each_adapters_own_norm():
    # retain grads norm sqrt(3^2 + 4^2) = 5, forget norm 400; max_norm 1.
    # Per adapter: retain x 1/5, forget x 1/400 (global clipping would scale retain by 1/400.03).
    grads = {
        "layers": [
            {
                "q": {
                    "retain_a": mx.array([3.0]),
                    "retain_b": mx.array([4.0]),
                    "forget_a": mx.array([0.0]),
                    "forget_b": mx.array([400.0]),
                }
            }
        ]
    }
    clipped, total, norms = routing.clip_per_adapter(grads, 1.0)
    q = clipped["layers"][0]["q"]
    close = np.testing.assert_allclose
    close(np.array(q["retain_a"]), [0.6], rtol=1e-5)
    close(np.array(q["retain_b"]), [0.8], rtol=1e-5)
    close(np.array(q["forget_b"]), [1.0], rtol=1e-5)
    close(norms["retain"].item(), 5.0, rtol=1e-6)
    close(norms["forget"].item(), 400.0, rtol=1e-6)
    close(total.item(), (25 + 160000) ** 0.5, rtol=1e-6)
    # below the limit nothing changes
    small, _, _ = routing.clip_per_adapter(grads, 1000.0)
    close(np.array(small["layers"][0]["q"]["forget_b"]), [400.0])
    with pytest.raises(ValueError, match="neither adapter"):
        routing.clip_per_adapter({"w": mx.array([1.0])}, 1.0)


def test_baseline_is_plain_lora_of_the_summed_rank(tmp_path):
    policy = tiny_policy()
    run_dir = train.run(
        run_config(tmp_path, steps=2, routing="baseline"), policy=policy, reward_fn=low_tokens
    )
    layers = lora.lora_layers(policy.model)
    assert layers and not lora.dual_layers(policy.model)
    assert {layer.lora_a.shape[0] for _, layer in layers} == {4}
    assert layers[0][1].scale == 16.0 / 4  # the dual model's scale alpha / (r_r + r_f)
    rows = metric_rows(run_dir)
    assert "hack/any" in rows[1] and "routing/both/hack_rate" in rows[1]
    assert "routing/retain/hack_rate" not in rows[1] and "route/flagged_share" not in rows[1]


def test_eval_routing_cli_on_a_run_and_bad_input(tmp_path, capsys):
    save_checkpoint(tiny_model(QWEN3, seed=1), QWEN3, tmp_path / "base")
    cfg = run_config(tmp_path, steps=2, lora_layers=1)  # adapters in the last block only
    run_dir = train.run(cfg, policy=tiny_policy(), reward_fn=low_tokens)
    args = [str(run_dir), "--base", str(tmp_path / "base"), "--task-reward", "happy"]
    assert eval_routing.main([*args, "--out", str(tmp_path / "r.md")]) == 0
    table = capsys.readouterr().out
    for mode in ("| both |", "| retain |", "| forget |", "| forget_0.5 |"):
        assert mode in table
    assert "hack rate" in (tmp_path / "r.md").read_text()
    assert eval_routing.main([*args[:3], "--task-reward", "joy"]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert eval_routing.main([str(run_dir), "--data", str(tmp_path / "missing.jsonl")]) == 2


def test_lora_layers_top_n():
    cfg = run_config_plain(lora_layers=3)
    assert (
        cfg.lora_layer_list(30) == [27, 28, 29] and run_config_plain().lora_layer_list(30) is None
    )
    with pytest.raises(ValueError, match="lora_layers=3 > the model's 2 blocks"):
        run_config_plain(lora_layers=3).lora_layer_list(2)
    with pytest.raises(ValueError, match="lora_layers=-1"):
        run_config_plain(lora_layers=-1)


def run_config_plain(**kw):
    return train.TrainConfig(model="tiny", lora_rank=2, **kw)


@pytest.mark.parametrize("name,modes", [("happy-routed-smollm2-135m", 3),
                                        ("happy-baseline-smollm2-135m", 1)])  # fmt: skip
@pytest.mark.slow
def test_shipped_happy_adapters_load_with_their_runs_settings(name, modes, capsys):
    """The shipped adapters of the routing experiment (knowledge/routing.md) load through
    eval_routing with the settings their run saved; a short sample here, the full row in the
    card. Dual adapters give the three modes and the forget-scale sweep, the baseline one."""
    folder = f"models/{name}"
    args = [str(folder), "--limit", "1", "--samples", "1", "--max-new-tokens", "4", "--json"]
    assert eval_routing.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["task_reward"] == "asks_question"
    assert out["hack_detectors"] == "happy_spam:min_count=1"
    assert out["data"] == "data/happy_eval.jsonl" and out["temperature"] == 0.8
    assert ("routing/retain/hack_rate" in out) == (modes == 3)
    assert 0.0 <= out["routing/both/hack_rate"] <= 1.0


def test_retain_advantages_by_hand():
    # Group 0: two flagged hacks (reward 1) and two unflagged answers (0 and 0.5). Against the
    # whole group (mean 0.625, std 0.415) both unflagged answers are negative; against the
    # unflagged pair alone (mean 0.25, std 0.25) they are -1 and +1. Group 1: one unflagged
    # answer: no baseline, advantage 0. Flagged rows keep the advantages given.
    rewards = np.array([[1.0, 1.0, 0.0, 0.5], [2.0, 2.0, 2.0, 0.0]])
    flags = np.array([1, 1, 0, 0, 1, 1, 1, 0], dtype=bool)
    whole = np.asarray(grpo.group_advantages(rewards)).reshape(-1)
    assert whole[2] < 0 and whole[3] < 0
    got = np.asarray(routing.retain_advantages(rewards, flags, mx.array(whole)))
    np.testing.assert_allclose(got, [whole[0], whole[1], -1.0, 1.0, *whole[4:7], 0.0], atol=1e-6)
    unscaled = routing.retain_advantages(rewards, flags, mx.array(whole), scale_by_std=False)
    np.testing.assert_allclose(np.asarray(unscaled)[2:4], [-0.25, 0.25], atol=1e-6)
    capped = routing.retain_advantages(
        np.array([[0.0, 0.0, 0.0, 9.0]]), np.zeros(4, bool), mx.zeros(4), cap=1.5
    )
    assert np.asarray(capped).max() == pytest.approx(1.5)
    with pytest.raises(ValueError, match="one value per completion"):
        routing.retain_advantages(rewards, flags[:5], mx.array(whole))


def test_retain_baseline_unflagged_is_refused_without_routing_and_used_by_the_loop(
    tmp_path, monkeypatch
):
    with pytest.raises(ValueError, match="needs --routing routed and --baseline group"):
        train.TrainConfig(model="tiny", lora_rank=2, retain_baseline="unflagged")
    with pytest.raises(ValueError, match="use group or unflagged"):
        run_config(tmp_path / "x", retain_baseline="forget")
    monkeypatch.setitem(hacks.DETECTORS, "flag_every_other", flag_every_other)
    seen = []
    real = routing.retain_advantages

    def spy(rewards, flags, advantages, **kw):
        out = real(rewards, flags, advantages, **kw)
        seen.append((np.asarray(advantages), np.asarray(out), np.asarray(flags)))
        return out

    monkeypatch.setattr(routing, "retain_advantages", spy)
    cfg = run_config(
        tmp_path / "r", steps=2, hack_detectors="flag_every_other", routing_eval_every=0,
        retain_baseline="unflagged",
    )  # fmt: skip
    train.run(cfg, policy=tiny_policy(), reward_fn=low_tokens)
    assert len(seen) == 2, "routed_update did not rebase the unflagged advantages each step"
    for before, after, flags in seen:
        np.testing.assert_array_equal(after[flags], before[flags])


def dual_scales(policy):
    """The set of (retain, forget) scales over the policy's dual LoRA layers."""
    return {(m.retain_scale, m.forget_scale) for _, m in lora.dual_layers(policy.model)}


def record_sampling_scales(policy):
    """Wrap policy.sample_group to record the adapter scales each rollout samples at."""
    seen, sample_group = [], policy.sample_group

    def spy(*args, **kw):
        seen.append(dual_scales(policy))
        return sample_group(*args, **kw)

    policy.sample_group = spy
    return seen


def test_retain_rollout_every_samples_and_trains_the_retain_adapter_alone(tmp_path, monkeypatch):
    # --retain-rollout-every 1: every step samples with the forget adapter scaled to 0 and
    # updates under the same scales, so the forget adapter gets exactly zero gradient and AdamW
    # (weight decay 0, zero moments) leaves it bit-identical while retain trains. Sampling at
    # the full model's scales, or updating outside the retain-only scales, moves forget.
    with pytest.raises(ValueError, match="retain_rollout_every=2 needs --routing routed"):
        train.TrainConfig(model="tiny", lora_rank=2, retain_rollout_every=2)
    with pytest.raises(ValueError, match="value >= 0"):
        run_config(tmp_path / "x", retain_rollout_every=-1)
    monkeypatch.setitem(hacks.DETECTORS, "flag_every_other", flag_every_other)
    before = snapshot_at_apply(monkeypatch)
    policy = tiny_policy()
    seen = record_sampling_scales(policy)
    cfg = run_config(
        tmp_path / "r", steps=2, hack_detectors="flag_every_other", routing_eval_every=0,
        retain_rollout_every=1,
    )  # fmt: skip
    run_dir = train.run(cfg, policy=policy, reward_fn=low_tokens)
    assert seen == [{(1.0, 0.0)}, {(1.0, 0.0)}], seen
    assert [r["route/retain_only_step"] for r in metric_rows(run_dir)] == [1.0, 1.0]
    assert_one_adapter_moved(
        policy, before, still="forget", trained="retain_b",
        why="a retain-only step reached the forget adapter",
    )  # fmt: skip
    assert dual_scales(policy) == {(1.0, 1.0)}, "the scales were not restored after the step"

    policy = tiny_policy()
    seen = record_sampling_scales(policy)
    cfg = run_config(tmp_path / "e2", steps=4, routing_eval_every=0, retain_rollout_every=2)
    run_dir = train.run(cfg, policy=policy, reward_fn=low_tokens)
    assert [s.pop() for s in seen] == [(1.0, 1.0), (1.0, 0.0), (1.0, 1.0), (1.0, 0.0)]
    assert [r["route/retain_only_step"] for r in metric_rows(run_dir)] == [0.0, 1.0, 0.0, 1.0]
