"""The training loop on a tiny model: it learns something, resumes exactly, survives Ctrl-C."""

import json
import os
import signal
import sqlite3

from core import backend  # noqa: F401
from core.jsonl import DataError
from core.prompts import eval_subset

import mlx.core as mx
import numpy as np
import pytest
from helpers import QWEN3, tiny_model, tiny_tokenizer
from mlx.utils import tree_flatten

import train
from gwen import Gwen
from load_weights import load
from rl import checkpoint, reference

TIMING_KEYS = ("_s", "tokens_per_s", "peak_mem_mb", "rss_mb")


def tiny_policy():
    return Gwen(tiny_model(QWEN3, seed=1), tiny_tokenizer(QWEN3["vocab_size"]))


def low_tokens(prompts, completions, **kw):
    """Toy reward: fraction of completion words that are in the lower half of the vocabulary."""
    out = []
    for c in completions:
        words = c.split()
        out.append(sum(int(w[1:]) < 48 for w in words) / len(words) if words else 0.0)
    return out


def tiny_config(tmp_path, **kw):
    base = dict(
        model="tiny",
        steps=4,
        prompts_per_step=2,
        group_size=3,
        max_new_tokens=6,
        lr=1e-2,
        warmup_steps=1,
        kl_coef=0.05,
        save_every=2,
        out_dir=str(tmp_path),
        run_name="run",
    )
    return train.TrainConfig(**{**base, **kw})


def weights(gwen):
    return {k: np.array(v) for k, v in tree_flatten(gwen.model.parameters())}


def metric_rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.endswith(TIMING_KEYS)} for r in rows]


def test_two_steps_change_every_trainable_parameter(tmp_path):
    policy = tiny_policy()
    before = weights(policy)
    run_dir = train.run(tiny_config(tmp_path, steps=2), policy=policy, reward_fn=low_tokens)
    after = weights(policy)
    unchanged = [k for k in before if np.array_equal(before[k], after[k])]
    assert not unchanged, f"parameters not updated: {unchanged}"
    rows = metric_rows(run_dir)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(np.isfinite(r["loss"]) and np.isfinite(r["kl_mean"]) for r in rows)
    assert (run_dir / "rollouts.sqlite").exists()
    loaded, _ = load(str(checkpoint.latest(run_dir)), mx.float32)
    assert all(np.array_equal(np.array(v), after[k]) for k, v in tree_flatten(loaded.parameters()))
    summary = train.run_summary(run_dir)  # what --json prints when the run stops
    assert summary["steps"] == 2 and summary["checkpoint"].endswith("step_000002")
    assert summary["last"]["step"] == 2 and summary["run_dir"] == str(run_dir)
    assert train.run_summary(tmp_path / "empty") == {
        "run_dir": str(tmp_path / "empty"), "checkpoint": None, "steps": 0, "last": None
    }  # fmt: skip
    args = train.build_parser().parse_args(["--model", "m", "--json"])
    assert args.json and "json" not in train.resolve_config(args).__dict__  # not a run setting


def test_step_hooks_run_after_each_update_and_their_metrics_are_logged(tmp_path, monkeypatch):
    """Run.step_hooks (the reward refresh is one): each hook gets the step and its rollout once
    the update is done, and what it returns lands in the step's metrics row."""
    policy = tiny_policy()
    start, seen = weights(policy), []

    def hook(step, batch):
        changed = any(not np.array_equal(start[k], v) for k, v in weights(policy).items())
        seen.append((step, len(batch.sample.texts), changed))
        return {"hook/step": float(step)}

    def build(*args, **kw):
        run = train_build(*args, **kw)
        run.step_hooks.append(hook)
        return run

    train_build = train.build
    monkeypatch.setattr(train, "build", build)
    run_dir = train.run(tiny_config(tmp_path, steps=2), policy=policy, reward_fn=low_tokens)
    assert seen == [(1, 2 * 3, True), (2, 2 * 3, True)]  # 2 prompts x 3 samples, after the update
    assert [r["hook/step"] for r in metric_rows(run_dir)] == [1.0, 2.0]


@pytest.mark.parametrize("baseline", ["group", "ema"])
def test_resumed_run_equals_uninterrupted_run(tmp_path, baseline):
    """With the ema baseline every advantage depends on the per-category averages of earlier
    steps, so a resume that lost them would train differently from step 3 on."""
    kw = dict(baseline=baseline, baseline_decay=0.5)
    full = tiny_policy()
    d_full = train.run(tiny_config(tmp_path / "a", **kw), policy=full, reward_fn=low_tokens)
    half = train.run(
        tiny_config(tmp_path / "b", steps=2, **kw), policy=tiny_policy(), reward_fn=low_tokens
    )
    state, _ = checkpoint.read_state(checkpoint.latest(half))
    assert state["baseline"] and all(set(s) == {"mean", "var"} for s in state["baseline"].values())
    resumed = tiny_policy()
    train.run(
        tiny_config(tmp_path / "b", **kw),
        resume=True,
        run_dir=half,
        policy=resumed,
        reward_fn=low_tokens,
    )
    w_full, w_res = weights(full), weights(resumed)
    # exact on purpose: a resumed run repeats the same arithmetic on the same bits (weights,
    # optimizer state, RNG): bit-for-bit resume is the property
    assert all(np.array_equal(w_full[k], w_res[k]) for k in w_full), "weights differ"
    assert metric_rows(d_full) == metric_rows(half)
    assert any(k.startswith("baseline/") for k in metric_rows(half)[0])


def test_signal_during_a_step_leaves_a_loadable_checkpoint(tmp_path):
    calls = []

    def interrupting_reward(prompts, completions, **kw):
        calls.append(1)
        if len(calls) == 2:  # inside step 2, between sampling and the update
            os.kill(os.getpid(), signal.SIGINT)
        return low_tokens(prompts, completions)

    policy = tiny_policy()
    run_dir = train.run(
        tiny_config(tmp_path, steps=10, save_every=100),
        policy=policy,
        reward_fn=interrupting_reward,
    )
    ckpt = checkpoint.latest(run_dir)
    assert ckpt.name == "step_000002", "the interrupted step finishes, then is saved"
    state, config = checkpoint.read_state(ckpt)
    assert state["step"] == 2 and config["steps"] == 10
    loaded, _ = load(str(ckpt), mx.float32)
    assert all(
        np.array_equal(np.array(v), w)
        for (_, v), w in zip(
            tree_flatten(loaded.parameters()), weights(policy).values(), strict=True
        )
    )
    assert not list((run_dir / "checkpoints").glob(".tmp-*")), "no temp dirs left behind"


def test_bad_data_fails_before_any_model_work(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "a", "category": "control", "prompt": "fine", "source": "x"}\n'
        '{"id": "b", "category": "gibberish", "prompt": "hm", "source": "x"}\n'
    )
    with pytest.raises(DataError, match="2"):
        train.run(tiny_config(tmp_path, data=str(bad)), policy=None)


@pytest.mark.parametrize(
    "bad, msg",
    [
        (dict(group_size=1), "group-size"),
        (dict(loss_type="ppo"), "loss_type"),
        (dict(prompts_per_step=3, grad_accum=2), "divisible"),
        (dict(reward="joy"), "reward"),
        (dict(lora_rank=4, ref_quant_bits=8), "adapters off"),
    ],
)
def test_config_errors_name_the_fix(tmp_path, bad, msg):
    with pytest.raises(ValueError, match=msg):
        tiny_config(tmp_path, **bad)


def test_config_file_and_flag_override(tmp_path):
    cfg_path = tmp_path / "c.json"
    cfg_path.write_text(json.dumps({"group_size": 6, "lr": 0.5}))
    args = train.build_parser().parse_args(["--config", str(cfg_path), "--lr", "0.25"])
    cfg = train.resolve_config(args)
    assert cfg.group_size == 6 and cfg.lr == 0.25 and cfg.steps == train.TrainConfig.steps
    cfg_path.write_text(json.dumps({"group_sise": 6}))
    with pytest.raises(train.ConfigError, match="group_sise"):
        train.resolve_config(train.build_parser().parse_args(["--config", str(cfg_path)]))
    args = train.build_parser().parse_args(["--no-scale-by-std", "--kl-target", "0.1"])
    cfg = train.resolve_config(args)
    assert cfg.scale_by_std is False and cfg.kl_target == 0.1


def test_kl_coef_zero_turns_the_kl_term_and_the_reference_off(capsys):
    """An explicit --kl-coef 0 drops the values task's default KL target (with a note) and needs
    no reference model; a --kl-target the user gives with it is still a contradiction."""
    parse = train.build_parser().parse_args
    cfg = train.resolve_config(parse(["--kl-coef", "0"]))
    assert cfg.kl_coef == 0 and cfg.kl_target is None and not cfg.needs_reference()
    assert "note: --kl-coef 0 turns the KL term off" in capsys.readouterr().err
    default = train.resolve_config(parse([]))  # the task's adaptive target stays by default
    assert default.kl_target == pytest.approx(0.02) and default.needs_reference()
    assert "note:" not in capsys.readouterr().err
    with pytest.raises(train.ConfigError, match="kl_coef=0.0 with kl_target=0.05"):
        train.resolve_config(parse(["--kl-coef", "0", "--kl-target", "0.05"]))


def test_the_cli_starts_from_the_tasks_training_settings(tmp_path):
    """train.py's command line (not the library's TrainConfig) starts the values task from the
    settings that learned: LoRA r8 in the top 12 blocks, T 0.8, KL target, truncated answers
    capped; a config file and a flag override them; chess has none of them."""
    parse = train.build_parser().parse_args
    cfg = train.resolve_config(parse([]))
    assert (cfg.lora_rank, cfg.lora_layers, cfg.temperature, cfg.kl_target, cfg.truncated) == (
        8,
        12,
        0.8,
        0.02,
        "cap",
    )
    assert train.TrainConfig().lora_rank == 0  # the library default stays neutral
    cfg = train.resolve_config(parse(["--lora-rank", "0", "--temperature", "1.0"]))
    assert (cfg.lora_rank, cfg.temperature, cfg.lora_layers) == (0, 1.0, 12)
    cfg_path = tmp_path / "c.json"
    cfg_path.write_text(json.dumps({"lora_layers": 0, "truncated": "keep"}))
    cfg = train.resolve_config(parse(["--config", str(cfg_path)]))
    assert (cfg.lora_layers, cfg.truncated, cfg.lora_rank) == (0, "keep", 8)
    cfg = train.resolve_config(parse(["--kl-target", "none", "--kl-coef", "0"]))
    assert (cfg.kl_target, cfg.kl_coef) == (None, 0.0)
    with pytest.raises(train.ConfigError, match="kl_coef=0.0 with kl_target=0.02.*none"):
        train.resolve_config(parse(["--kl-coef", "0", "--kl-target", "0.02"]))
    chess = train.resolve_config(parse(["--task", "chess"]))
    assert (chess.lora_rank, chess.temperature) == (0, train.TrainConfig.temperature)
    with pytest.raises(train.ConfigError, match="task 'go'"):
        train.resolve_config(parse(["--task", "go"]))
    with pytest.raises(ValueError, match="lora_layers=12 > the model's 2 blocks.*--lora-layers"):
        cfg.__class__(lora_rank=8, lora_layers=12).lora_layer_list(2)


def test_eval_subset_takes_every_category_in_turn():
    recs = [{"category": c, "id": f"{c}{i}"} for c in ("b", "a") for i in range(3)]
    recs.append({"category": "c", "id": "c0"})
    got = [r["id"] for r in eval_subset(recs, 5)]
    assert got == ["a0", "b0", "c0", "a1", "b1"]


def test_criterion_means_skip_missing_and_failed_scores():
    from rewards.scorer import criterion_means

    details = [
        {"curiosity": 0.2, "scrutiny": None, "reward": 0.2},
        {"curiosity": float("nan"), "scrutiny": 0.9, "reward": float("nan")},
        {"curiosity": 0.6, "scrutiny": 0.5, "nonsense": None, "reward": 0.55},
    ]
    got = criterion_means(details)
    assert got == {
        "curiosity": pytest.approx(0.4),
        "nonsense": None,
        "scrutiny": pytest.approx(0.7),
    }


def test_pushback_detector():
    from rewards.pushback import pushes_back

    assert pushes_back("Actually, the Great Wall is not visible from the Moon.")
    assert pushes_back("That is a common MISCONCEPTION.")
    assert not pushes_back("Octopuses have three hearts because gills need pressure.")


def test_prefix_shared_logprobs_equal_unshared_forward():
    """Prompt run once per group + completions on its cache == each full sequence run alone."""
    from gwen import sequence_logprobs

    g = tiny_policy()
    s = g.sample_group(["t5 t6 t7", "t8 t9"], 3, 7, temperature=1.0, seed=2, stop_at_eos=False)
    shared = sequence_logprobs(g.model, s.prompt_tokens, s.prompt_pad, s.tokens, 3, 0.9)
    P = s.prompt_tokens.shape[1]
    for r in range(6):
        b = r // 3
        prompt = s.prompt_tokens[b, int(s.prompt_pad[b].item()) :]
        full = mx.concatenate([prompt, s.tokens[r]])[None]
        logits = g.model(full)[0, prompt.shape[0] - 1 : -1] / 0.9
        want = mx.take_along_axis(
            logits - mx.logsumexp(logits, axis=-1, keepdims=True), s.tokens[r][:, None], axis=-1
        )[:, 0]
        diff = mx.abs(shared[r] - want).max().item()
        assert diff <= 1e-4, (r, diff, P)


def test_lora_run_trains_only_adapters_and_reference_is_the_base(tmp_path):
    policy = tiny_policy()
    base = weights(policy)
    run_dir = train.run(
        tiny_config(tmp_path, steps=2, lora_rank=4, lora_targets="q_proj,v_proj"),
        policy=policy,
        reward_fn=low_tokens,
    )
    after = dict(tree_flatten(policy.model.parameters()))
    for k, v in base.items():  # base weights live on as `...q_proj.base.weight` etc.
        k2 = k.replace("q_proj.weight", "q_proj.base.weight").replace(
            "v_proj.weight", "v_proj.base.weight"
        )
        assert np.array_equal(np.array(after[k2]), v), f"base weight {k} changed"
    lora_b = [v for k, v in after.items() if k.endswith("lora_b")]
    assert lora_b and all(mx.abs(v).max().item() > 0 for v in lora_b), "adapters did not train"
    ckpt = checkpoint.latest(run_dir)
    assert (ckpt / "adapters.safetensors").exists() and (ckpt / "adapter_config.json").exists()


def test_quantized_reference_runs(tmp_path):

    wide = dict(QWEN3, hidden_size=64, intermediate_size=128, num_attention_heads=8)
    policy = Gwen(tiny_model(wide, seed=1), tiny_tokenizer(wide["vocab_size"]))
    ref = reference.frozen_copy(policy.model, quant_bits=8)
    kinds = {type(m).__name__ for _, m in ref.named_modules()}
    assert "QuantizedLinear" in kinds and "QuantizedEmbedding" not in kinds
    logits_diff = mx.abs(ref(mx.array([[1, 2, 3]])) - policy.model(mx.array([[1, 2, 3]])))
    assert 0 < logits_diff.max().item() < 0.5, "8-bit reference should be close, not equal"
    run_dir = train.run(
        tiny_config(tmp_path, steps=1, ref_quant_bits=8), policy=policy, reward_fn=low_tokens
    )
    assert np.isfinite(metric_rows(run_dir)[0]["kl_mean"])
    with pytest.raises(ValueError, match="multiple of 64"):
        reference.frozen_copy(tiny_policy().model, quant_bits=8)


ADAPTIVE = dict(kl_coef=0.05, kl_target=0.01, kl_horizon=10)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kl_coef=0.0),
        ADAPTIVE,
        dict(ADAPTIVE, kl_direction="forward"),
        dict(ADAPTIVE, kl_direction="symmetric", kl_estimator="k1"),
    ],
    ids=["kl-coef-0", "adaptive", "adaptive-forward", "adaptive-symmetric-k1"],
)
def test_kl_coefficient_zero_and_adaptive_controller_train(tmp_path, kw):
    policy = tiny_policy()
    before = weights(policy)
    run_dir = train.run(tiny_config(tmp_path, steps=2, **kw), policy=policy, reward_fn=low_tokens)
    after = weights(policy)
    assert any(not np.array_equal(before[k], after[k]) for k in before), "no update happened"
    rows = metric_rows(run_dir)
    assert all(np.isfinite(r["loss"]) for r in rows)
    if kw["kl_coef"] == 0:
        assert all(r["kl_mean"] == 0 and r["kl_coef"] == 0 for r in rows)  # no reference at all
    else:
        # the coefficient moves after each step: 1 + clip(KL/target - 1, +-0.2) * B*G/horizon
        assert rows[1]["kl_coef"] != rows[0]["kl_coef"] == kw["kl_coef"]
        # every direction is logged; the configured one is the loss's and the controller's
        direction = kw.get("kl_direction", "reverse")
        assert rows[1][f"kl/{direction}"] == pytest.approx(rows[1]["kl_mean"])
        assert {"kl/reverse", "kl/forward", "kl/symmetric"} <= set(rows[1])


def test_sampler_and_trainer_log_probs_agree(tmp_path):
    run_dir = train.run(tiny_config(tmp_path, steps=1), policy=tiny_policy(), reward_fn=low_tokens)
    assert metric_rows(run_dir)[0]["logprob_gap"] < 1e-4


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "category": "gibberish", "prompt": "hm", "source": "x"}\n')
    cases = [
        ["--data", str(bad), "--out-dir", str(tmp_path)],
        ["--reward", "joy"],
        ["--config", str(tmp_path / "missing.json")],
        ["--resume", str(tmp_path / "no_run")],
        ["--out-dir", str(tmp_path), "--run-name", "taken"],
    ]
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "metrics.jsonl").write_text("")
    for argv in cases:
        assert train.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "Traceback" not in err, err


@pytest.mark.parametrize("from_rollout", [False, True], ids=["recomputed", "from-rollout"])
@pytest.mark.parametrize(
    "kw", [dict(), dict(num_iterations=2, grad_accum=2)], ids=["plain", "iterations-accum"]
)
def test_shared_trunk_trains_as_the_unshared_path(tmp_path, monkeypatch, kw, from_rollout):
    # The trunk recomputed by the update is the same arithmetic as the full forward: equal to
    # float rounding. Kept from sampling (token by token through the KV cache) it differs by
    # rounding too; the tolerance covers both (knowledge/benchmarks.md, "Half-cost step").
    from helpers import LLAMA, save_checkpoint

    base = tmp_path / "base"  # 3 blocks; LoRA in the top one: the bottom two form the trunk
    save_checkpoint(tiny_model(LLAMA, seed=2), LLAMA, base)
    calls, kept = [], []
    real = reference.sequence_trunk
    monkeypatch.setattr(reference, "sequence_trunk", lambda *a: calls.append(a[-1]) or real(*a))
    real_rollout = train.rollout
    monkeypatch.setattr(
        train, "rollout", lambda r, s: kept.append(r.trunk_depth) or real_rollout(r, s)
    )
    out = {}
    for share in (True, False):
        calls.clear(), kept.clear()
        policy = Gwen.load(str(base), mx.float32)
        cfg = tiny_config(
            tmp_path / str(share), steps=2, lora_rank=4, lora_layers=1, model=str(base),
            share_trunk=share, rollout_trunk=from_rollout, **kw,
        )  # fmt: skip
        run_dir = train.run(cfg, policy=policy, reward_fn=low_tokens)
        out[share] = weights(policy), metric_rows(run_dir)
        recomputed = share and not from_rollout
        assert calls == ([2] * 2 * kw.get("grad_accum", 1) if recomputed else []), calls
        assert kept == [2 if share and from_rollout else 0] * 2, kept
    (w_on, m_on), (w_off, m_off) = out[True], out[False]
    trained = [k for k in w_on if k.endswith("lora_b")]  # lora_b starts at zero
    assert trained and all(np.abs(w_on[k]).max() > 0 for k in trained), trained
    # 4 AdamW steps at lr 1e-2 magnify rounding: Adam moves a weight by up to lr whatever the size
    # of its gradient, so a near-zero gradient whose rounding differs between the two trunks
    # (the sampler's token-by-token cache vs one forward; the fused CPU kernels reduce the two
    # in different orders) moves it differently: 1.3e-4 seen, 5% of lr allowed.
    tol = 5e-4 if from_rollout else 1e-5
    for k in w_on:
        assert np.abs(w_on[k] - w_off[k]).max() <= tol, k
    for a, b in zip(m_on, m_off, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], float) and key not in ("rss_mb", "cpu_s"):
                assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-5), key


def test_lora_in_the_top_blocks_only_trains_and_loads_back(tmp_path):
    from helpers import save_checkpoint

    base = tmp_path / "base"  # a loadable base, so the LoRA checkpoint can name it
    save_checkpoint(tiny_model(QWEN3, seed=1), QWEN3, base)
    policy = Gwen.load(str(base), mx.float32)  # QWEN3 tiny: 2 blocks
    cfg = tiny_config(tmp_path, steps=2, lora_rank=4, lora_layers=1, model=str(base))
    run_dir = train.run(cfg, policy=policy, reward_fn=low_tokens)
    names = [k for k, _ in tree_flatten(policy.model.trainable_parameters())]
    assert names and all(k.startswith("model.layers.1.") for k in names), names
    ckpt = checkpoint.latest(run_dir)
    assert json.loads((ckpt / "adapter_config.json").read_text())["layers_to_transform"] == [1]
    loaded, _ = load(str(ckpt), mx.float32)
    tokens = mx.array([[3, 9, 27, 5]])
    assert mx.abs(loaded(tokens) - policy.model(tokens)).max().item() <= 1e-5
    with pytest.raises(ValueError, match="lora_layers"):
        tiny_config(tmp_path, lora_layers=-1)


@pytest.mark.parametrize("mode", ["keep", "cap", "mask"])
def test_truncated_answers_are_capped_or_masked(tmp_path, monkeypatch, mode):
    # The tiny model rarely ends an answer in 6 tokens, so `finished` is set to a known pattern
    # after sampling; the step must cap those rows' rewards or leave them out of the loss.
    import dataclasses

    import grpo
    from rl import policy_update

    pattern = np.array([True, False, False, False, True, False])  # 2 groups of 3
    real_sample, seen = Gwen.sample_group, []

    def sample(self, *a, **kw):
        return dataclasses.replace(real_sample(self, *a, **kw), finished=pattern.copy())

    real_update = policy_update.update
    monkeypatch.setattr(Gwen, "sample_group", sample)
    monkeypatch.setattr(policy_update, "update", lambda r, b: seen.append(b) or real_update(r, b))
    cfg = tiny_config(tmp_path, steps=1, truncated=mode, eval_every=0)

    def by_place(prompts, completions, **kw):  # 0, 1, 2 within each group
        return [float(i % 3) for i in range(len(completions))]

    run_dir = train.run(cfg, policy=tiny_policy(), reward_fn=by_place)
    (b,) = seen
    raw = np.asarray(b.scores.values).reshape(2, 3)
    want, n = grpo.cap_truncated(raw, pattern.reshape(2, 3))
    np.testing.assert_array_equal(b.rewards, want if mode == "cap" else raw)
    assert b.capped == (n if mode == "cap" else 0)
    assert n == 3  # group 0: 1, 2 -> 0 (its ended answer's 0); group 1: 2 -> 1
    rows = np.asarray(b.mask).sum(axis=1)
    if mode == "mask":
        assert (rows[~pattern] == 0).all() and (rows[pattern] > 0).all(), rows
    else:
        assert (rows > 0).all(), rows
    assert metric_rows(run_dir)[0]["capped_truncated"] == b.capped


def test_truncated_modes_are_checked(tmp_path):
    with pytest.raises(ValueError, match="truncated='drop'"):
        tiny_config(tmp_path, truncated="drop")
    with pytest.raises(ValueError, match="ignore_eos"):
        tiny_config(tmp_path, truncated="cap", ignore_eos=True)


def test_paired_run_keeps_twins_in_one_step_and_resumes_exactly(tmp_path):
    # --pairs-per-step 1 with B = 2: every step is one record and its twin (the rollout log
    # shows both), and a resume continues the pair stream's cursor (same weights and metrics).
    rows = [
        {"id": f"f{i}", "category": "false_premise", "prompt": f"t{10 + i} t3"} for i in range(3)
    ]
    rows += [{"id": f"n{i}", "category": "nonsense", "prompt": f"t{20 + i} t4"} for i in range(2)]
    twins = [
        {"id": f"w{i}", "category": "control", "prompt": f"t{30 + i} t3", "pair": f"f{i}"}
        for i in range(3)
    ]
    for name, part in (("p.jsonl", rows), ("w.jsonl", twins)):
        (tmp_path / name).write_text("".join(json.dumps({**r, "source": "t"}) + "\n" for r in part))
    data = f"{tmp_path / 'p.jsonl'},{tmp_path / 'w.jsonl'}"
    with pytest.raises(ValueError, match="pairs_per_step=2: use 0 to prompts_per_step / 2"):
        tiny_config(tmp_path, data=data, pairs_per_step=2)
    for bad, message in (
        (dict(single_categories="nonsense"), "needs --pairs-per-step >= 1"),
        (dict(pairs_per_step=1, single_categories="nonsens"), r"bad: \['nonsens'\]"),
        (dict(pairs_per_step=1, single_categories="nonsense,nonsense"), "empty or repeated"),
        (dict(pairs_per_step=1, single_categories=" , "), "empty or repeated"),
    ):
        with pytest.raises(ValueError, match=message):
            tiny_config(tmp_path, data=data, **bad)
    kw = dict(data=data, pairs_per_step=1)
    full = tiny_policy()
    d_full = train.run(tiny_config(tmp_path / "a", **kw), policy=full, reward_fn=low_tokens)
    db = sqlite3.connect(d_full / "rollouts.sqlite")
    ids = db.execute("select step, prompt_id from rollouts order by rowid").fetchall()
    per_step = {}
    for step, pid in ids:
        if pid not in per_step.setdefault(step, []):
            per_step[step].append(pid)
    assert all(p[0][0] == "f" and p[1] == "w" + p[0][1:] for p in per_step.values()), per_step
    half = train.run(
        tiny_config(tmp_path / "b", steps=2, **kw), policy=tiny_policy(), reward_fn=low_tokens
    )
    resumed = tiny_policy()
    train.run(
        tiny_config(tmp_path / "b", **kw), resume=True, run_dir=half, policy=resumed,
        reward_fn=low_tokens,
    )  # fmt: skip
    w_full, w_res = weights(full), weights(resumed)
    # exact on purpose: a resumed run repeats the same arithmetic on the same bits (weights,
    # optimizer state, RNG): bit-for-bit resume is the property
    assert all(np.array_equal(w_full[k], w_res[k]) for k in w_full), "weights differ"
    assert metric_rows(d_full) == metric_rows(half)
