"""The Bradley-Terry reward model: loss by hand, learning a hand-made preference, the last-token
read under left padding, save/load round trip, and the trainer's CLI errors. Tiny random
checkpoints stand in for the base model (no downloads)."""

import json
import math
import os
import signal

from core import (
    backend,  # noqa: F401
    lora,
    precision,
    stats,
)
from core.jsonl import file_sha256

import mlx.core as mx
import numpy as np
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model, write_pairs
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import gwen
import train_rm
from load_weights import LoadError
from rewards import reward_model
from rl import rm_data, tblog


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "base"
    save_checkpoint(tiny_model(QWEN3, seed=3), QWEN3, path)
    return str(path)


def rm_config(base, **kw):
    cfg = dict(base_model=base, lora_rank=4, lora_alpha=8.0, max_prompt_tokens=8)
    return reward_model.RMConfig(**(cfg | kw))


def val_margins(rm, path, use_category=True) -> np.ndarray:
    """Per val record of a pairs file, better's score minus worse's; of a labels file, the logit
    signed by the label. Validation accuracy is 1.0 where all are > 0; clear of 0, it is 1.0 on
    any BLAS (the run's rounding moves them far less)."""
    recs = [r for r in map(json.loads, open(path)) if r["split"] == "val"]
    prompts = [r["prompt"] for r in recs]
    cats = [r["category"] if use_category else None for r in recs]
    if "better" in recs[0]:
        better = rm.score(prompts, [r["better"] for r in recs], cats)
        return np.array(better) - np.array(rm.score(prompts, [r["worse"] for r in recs], cats))
    logits = np.array(rm.score(prompts, [r["answer"] for r in recs], cats))
    return logits * np.where([r["pushback"] for r in recs], 1.0, -1.0)


def test_bt_loss_by_hand():
    # softplus(-(2 - 0)) = log(1 + e^-2) = 0.126928; softplus(0) = log 2 = 0.693147
    got = reward_model.bt_loss(mx.array([2.0, 0.0]), mx.array([0.0, 0.0]))
    assert got.item() == pytest.approx((0.126928 + 0.693147) / 2, abs=1e-6)
    # a margin of 1 asks for a gap above 1: softplus(-(2 - 0 - 1)) = log(1 + e^-1) = 0.313262
    got = reward_model.bt_loss(mx.array([2.0]), mx.array([0.0]), margin=1.0)
    assert got.item() == pytest.approx(0.313262, abs=1e-6)
    big = reward_model.bt_loss(mx.array([-500.0]), mx.array([500.0]))
    assert math.isfinite(big.item()) and big.item() == pytest.approx(1000.0)


def test_training_accuracy_counts_a_tie_half_as_validation_does():
    # pairs: better above, tie, below, NaN score, better infinite, worse -infinite
    better = [2.0, 1.0, 1.0, math.nan, math.inf, 1.0]
    worse = [1.0, 1.0, 3.0, 0.0, 0.0, -math.inf]
    data = rm_data.PairData.__new__(rm_data.PairData)  # loss reads only the margin
    data.margin = 0.0
    _, acc = data.loss(mx.array(better + worse), len(better))
    assert acc.item() == pytest.approx((1 + 0.5 + 0 + 0 + 0 + 0) / 6)
    want = stats.pair_credit(np.array(better), np.array(worse), failed=0.0).mean()
    assert acc.item() == pytest.approx(want)  # PairData.accuracy's definition


def test_score_reads_each_rows_last_real_token(base, float32_loads):
    rm = reward_model.build(rm_config(base, use_category=False))
    rm.score_head.weight = mx.ones_like(rm.score_head.weight)
    a, b = rm.encode("t5 t6", "t7", None), rm.encode("t5 t6 t8 t9", "t7 t10 t11", None)
    tokens, pad = rm.batch([a, b])
    both = rm(tokens, pad)
    alone = [rm(*rm.batch([s]))[0].item() for s in (a, b)]
    assert both.tolist() == pytest.approx(alone, abs=1e-5)
    assert a[-1] == rm.tokenizer.eos_token_id, "a response ends with EOS"
    # score() sorts by length for batching but returns the input order
    assert rm.score(["t5 t6 t8 t9", "t5 t6"], ["t7 t10 t11", "t7"], [None, None]) == pytest.approx(
        alone[::-1], abs=1e-5
    )


@pytest.mark.parametrize("batch_size", [16, 3])
def test_shared_prompt_prefix_scores_equal_whole_rows(base, batch_size, float32_loads, monkeypatch):
    # GRPO-shaped input: groups of answers to the same prompt, answers of different lengths,
    # prompts of different lengths and categories; batch_size 3 cuts chunks at group bounds.
    rm = reward_model.build(rm_config(base))  # LoRA in the top blocks, reads the category
    mx.random.seed(0)
    rm.score_head.weight = mx.random.normal(rm.score_head.weight.shape)
    for _, layer in lora.lora_layers(rm.backbone):
        layer.lora_b = 0.1 * mx.random.normal(layer.lora_b.shape)
    prompts = ["t5 t6"] * 3 + ["t5 t6 t8 t9 t12"] * 4 + ["t9"] * 2 + ["t5 t6"]
    cats = ["control"] * 3 + ["nonsense"] * 4 + ["curiosity"] * 2 + ["false_premise"]
    answers = ["t7", "t7 t10 t11", "", "t13 t14", "t15", "t7 t7 t7 t7 t7 t7", "t8", "t9 t9", "t20"]
    answers.append("t7")
    whole = rm.score(prompts, answers, cats, batch_size=batch_size, share_prefix=False)
    shared = rm.score(prompts, answers, cats, batch_size=batch_size, share_prefix=True)
    assert len(set(whole)) > 5  # the scores differ between rows: the comparison means something
    assert shared == pytest.approx(whole, abs=1e-4)
    # ragged=False runs every answer's padding; the default skips most of it (the long answer,
    # 6 tokens + EOS, runs a tail alone): the same scores
    cuts, real = [], reward_model.ragged_blocks
    monkeypatch.setattr(reward_model, "ragged_blocks", lambda *a: cuts.append(a[4]) or real(*a))
    again = rm.score(prompts, answers, cats, batch_size=batch_size)
    assert cuts and any(gwen.ragged_cut(c, max(c)) is not None for c in cuts), cuts
    n_ragged = len(cuts)
    padded = rm.score(prompts, answers, cats, batch_size=batch_size, ragged=False)
    assert cuts[n_ragged:] == [None] * n_ragged  # the same chunks, every position needed
    assert again == pytest.approx(whole, abs=1e-4) and padded == pytest.approx(whole, abs=1e-4)


def test_pushback_probabilities_are_the_sigmoid_of_the_scores(base):
    rm = reward_model.build(rm_config(base, use_category=False))
    mx.random.seed(1)
    rm.score_head.weight = 3.0 * mx.random.normal(rm.score_head.weight.shape)
    prompts, answers = ["t5 t6", "t5 t6", "t9"], ["t7", "t8 t10", ""]
    scores = rm.score(prompts, answers, [None] * 3)
    assert max(scores) - min(scores) > 0.1  # distinct rows: the check below means something
    want = [1.0 / (1.0 + math.exp(-s)) for s in scores]  # sigmoid by hand, float64
    got = rm.pushback_probabilities(prompts, answers)
    assert got.dtype == np.float64 and got.tolist() == pytest.approx(want, abs=1e-6)
    whole = rm.pushback_probabilities(prompts, answers, share_prefix=False)
    assert whole.tolist() == pytest.approx(want, abs=1e-4)
    assert rm.pushback_probabilities([], []).shape == (0,)


def test_category_is_required_when_the_model_reads_it(base):
    rm = reward_model.build(rm_config(base))
    assert rm.encode("t5", "t6", "nonsense") != rm.encode("t5", "t6", "control")
    with pytest.raises(ValueError, match="category"):
        rm.encode("t5", "t6", "gibberish")


def test_trains_on_a_hand_made_preference_and_round_trips(base, tmp_path, float32_loads):
    # lr 3e-2 learns in 30 steps at float32; at float16 it overflows (the test below)
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    cfg = train_rm.RMTrainConfig(
        model=base,
        pairs=pairs,
        out=str(tmp_path / "rm"),
        work=str(tmp_path / "work"),
        steps=30,
        batch_pairs=4,
        lr=3e-2,
        warmup_steps=2,
        lora_rank=4,
        lora_alpha=8.0,
        eval_every=10,
        max_prompt_tokens=8,
    )
    out = train_rm.train(cfg)
    saved = json.loads((out / reward_model.CONFIG_FILE).read_text())
    # 1.0 is 8 of 8 (a count); the saved weights' val margins, 4.1 and up on OpenBLAS (the
    # 2026-12 CPU run), are far from 0, so another BLAS's rounding cannot flip a pair
    assert saved["extra"]["metrics"]["val_accuracy"] == 1.0
    assert val_margins(reward_model.load(out), pairs).min() > 1.0
    assert saved["extra"]["split_counts"] == {"train": 16, "val": 8, "test": 0}
    assert saved["extra"]["data_sha256"] == file_sha256(pairs)
    prompts, better, worse = ["t30 t31"] * 2, ["t30 t5 t5", "t31 t5"], ["t30 t6 t6", "t31 t6"]
    merged = reward_model.load(out)
    unmerged = reward_model.load(out, merge=False)
    cats = ["control"] * 2
    b_m, w_m = merged.score(prompts, better, cats), merged.score(prompts, worse, cats)
    assert all(x > y for x, y in zip(b_m, w_m, strict=True)), "held-out prompts keep the order"
    assert unmerged.score(prompts, better, cats) == pytest.approx(b_m, abs=1e-4)
    again = reward_model.load(out, merge=False)
    # exact on purpose: loading is deterministic, the same weights score bit for bit alike
    assert again.score(prompts, better, cats) == unmerged.score(prompts, better, cats)


@pytest.mark.slow  # 30 float16 training steps on the CPU (~15 s)
def test_trains_at_float16(base, tmp_path):
    # float16 backbone (LoRA and head stay float32): a learning rate a real run would use trains
    # to the same accuracy with finite losses; 3e-2 (above) overflowed float16 at step 12 on CPU
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    cfg = train_rm.RMTrainConfig(
        model=base, pairs=pairs, out=str(tmp_path / "rm"), work=str(tmp_path / "work"),
        steps=30, batch_pairs=4, lr=1e-2, warmup_steps=2, lora_rank=4, lora_alpha=8.0,
        eval_every=10, max_prompt_tokens=8, dtype="float16",
    )  # fmt: skip
    out = train_rm.train(cfg)
    metrics = json.loads((out / reward_model.CONFIG_FILE).read_text())["extra"]["metrics"]
    assert metrics["val_accuracy"] == 1.0, metrics  # 8 of 8, as above
    rm = reward_model.load(out, dtype=mx.float16)
    # float32 master weights under the float16 backbone (core/precision.py): 0.64 and up on
    # OpenBLAS, hundreds of times float16's rounding of a score of this size, so accuracy 1.0 is no
    # tie
    margins = val_margins(rm, pairs)
    assert margins.min() > 0.25, margins
    assert rm.backbone.model.embed_tokens.weight.dtype == mx.float16
    scores = rm.score(["t30 t31"] * 2, ["t30 t5 t5", "t30 t6 t6"], ["control"] * 2)
    assert all(math.isfinite(x) for x in scores) and scores[0] > scores[1], scores


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_non_finite_losses_stop_the_run_naming_the_fix(base, tmp_path, monkeypatch, dtype):
    """Each non-finite loss skips its update; max_failed_updates in a row stop the run with one
    user error naming the fix, and no reward model is written."""
    cfg = train_rm.RMTrainConfig(
        model=base, pairs=write_pairs(tmp_path / "pairs.jsonl"), out=str(tmp_path / "rm"),
        work=str(tmp_path / "work"), steps=5, batch_pairs=4, lora_rank=4, max_prompt_tokens=8,
        dtype=dtype, max_failed_updates=3,
    )  # fmt: skip
    real = train_rm.Trainer.loss_fn

    def nan_loss(self, *args):
        loss, aux = real(self, *args)
        return loss * math.nan, aux

    monkeypatch.setattr(train_rm.Trainer, "loss_fn", nan_loss)
    fix = "--dtype float32" if dtype == "float16" else "lower --lr$"
    with pytest.raises(precision.NonFiniteError, match=f"3 updates in a row.*step 3 .*{fix}"):
        train_rm.train(cfg)
    assert not (tmp_path / "rm").exists()


def test_interrupted_run_resumes_exactly(base, tmp_path, monkeypatch):
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    common = dict(model=base, pairs=pairs, batch_pairs=4, lr=1e-2, lora_rank=4, lora_alpha=8.0)
    common |= dict(eval_every=2, max_prompt_tokens=8, warmup_steps=1, steps=6)
    full = train_rm.train(
        train_rm.RMTrainConfig(**common, out=str(tmp_path / "a"), work=str(tmp_path / "wa"))
    )
    half = train_rm.RMTrainConfig(**common, out=str(tmp_path / "b"), work=str(tmp_path / "wb"))
    real_step = train_rm.Trainer.train_step

    def interrupted(self):
        out = real_step(self)
        if self.step == 3:  # Ctrl-C during step 3: it finishes, the state is saved
            os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(train_rm.Trainer, "train_step", interrupted)
    assert train_rm.train(half) == tmp_path / "wb", "an interrupted run returns its work folder"
    assert not (tmp_path / "b").exists(), "no final model from an interrupted run"
    assert train_rm.result_summary(tmp_path / "wb") == {  # what --json prints then
        "out": None, "stopped": True, "state": str(tmp_path / "wb")
    }  # fmt: skip
    monkeypatch.setattr(train_rm.Trainer, "train_step", real_step)
    resumed = train_rm.train(half, resume=True)
    wa = mx.load(str(full / reward_model.WEIGHTS_FILE))
    wb = mx.load(str(resumed / reward_model.WEIGHTS_FILE))
    done = train_rm.result_summary(resumed)
    assert done["out"] == str(resumed) and not done["stopped"] and done["trained_steps"] >= 3
    assert done["objective"] == "bradley_terry" and done["selected_step"] <= done["trained_steps"]
    # exact on purpose: bit-for-bit resume is the property
    assert wa.keys() == wb.keys() and all(mx.array_equal(wa[k], wb[k]) for k in wa)
    logs = [(tmp_path / w / "train_log.jsonl").read_text().splitlines() for w in ("wa", "wb")]
    strip = [
        [{k: v for k, v in json.loads(x).items() if k != "elapsed_s"} for x in log] for log in logs
    ]
    assert strip[0] == strip[1], "the logs of both runs agree step by step"
    for w, log in zip(("wa", "wb"), strip, strict=True):  # TensorBoard holds the same, once
        acc = EventAccumulator(str(tmp_path / w / "tb"), size_guidance={"scalars": 0})
        acc.Reload()
        got = {
            (tag, e.step): e.value
            for tag in acc.Tags()["scalars"]
            if tag != "rm/elapsed_s"
            for e in acc.Scalars(tag)
        }
        want = {
            (tblog.scalar_tag(k, "rm"), r["step"]): float(np.float32(v))
            for r in log
            for k, v in r.items()
            if k != "step"
        }
        assert got == want


def test_load_errors_name_the_problem(base, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a reward-model folder"):
        reward_model.load(tmp_path)


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    for argv in (["--pairs", str(bad)], ["--steps", "0"], ["--pairs", str(tmp_path / "no.jsonl")]):
        assert train_rm.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "Traceback" not in err


def test_grpo_trains_against_a_reward_model_and_a_mix(base, tmp_path, capsys):
    from helpers import LLAMA, tiny_tokenizer

    import train
    from gwen import Gwen

    pairs = write_pairs(tmp_path / "pairs.jsonl")
    cfg = train_rm.RMTrainConfig(
        model=base, pairs=pairs, out=str(tmp_path / "rm"), work=str(tmp_path / "w"), steps=4
    )
    rm_dir = train_rm.train(cfg)
    common = dict(
        model="tiny",
        steps=1,
        prompts_per_step=2,
        group_size=3,
        max_new_tokens=5,
        kl_coef=0.0,
        out_dir=str(tmp_path / "runs"),
    )
    for spec in (f"rm:{rm_dir}", f"happy:0.5,rm:{rm_dir}:0.5"):
        policy = Gwen(tiny_model(QWEN3, seed=1), tiny_tokenizer(QWEN3["vocab_size"]))
        run_cfg = train.TrainConfig(**common, reward=spec, run_name=spec.split(":")[0])
        run_dir = train.run(run_cfg, policy=policy)
        row = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
        assert math.isfinite(row["reward_mean"]) and math.isfinite(row["loss"])
    other = Gwen(tiny_model(LLAMA), tiny_tokenizer(LLAMA["vocab_size"]))
    cfg = train.TrainConfig(**common, reward=f"rm:{rm_dir}", run_name="x")
    run_dir = train.run(cfg, policy=other)
    row = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert math.isfinite(row["reward_mean"])
    notes = [x for x in capsys.readouterr().err.splitlines() if x.startswith("note: ")]
    assert len(notes) == 1 and "train_rm.py --model tiny" in notes[0], notes


def test_a_reward_model_reads_another_tokenizers_policy_as_text(
    base, qwen3_dir, tmp_path, capsys, monkeypatch
):
    """A reward model on a word-level base scoring a Qwen3 policy: the scorer the loop builds
    (the policy's tokenizer in its context) gives the reward model's scores of the policy's
    decoded text, which are its scores of the same text given directly, which are a forward
    over its own tokenizer's ids of that text; one `note:` line names train_rm.py on the
    policy's model."""
    from gwen import Gwen
    from rewards import registry
    from rewards.registry import RewardContext, parse_spec
    from rewards.scorer import build_scorer

    rm = reward_model.build(rm_config(base, lora_rank=0, head_only=True))
    mx.random.seed(0)
    rm.score_head.weight = mx.random.normal(rm.score_head.weight.shape)
    rm_dir = reward_model.save(rm, tmp_path / "rm")
    policy = Gwen.load(str(qwen3_dir))
    monkeypatch.setattr(registry, "_noted", set())
    written = ["t21 t5 t5", "t22 t6 t6", "t30 t31", "Why is the sky blue? It's 42."]
    qwen = policy.tokenizer
    # the policy's path: its token ids, decoded (gwen.decode_texts); byte-level BPE gives back
    # the text it encoded, so the reward model reads what the policy wrote
    ids = [qwen.encode(t, add_special_tokens=False) for t in written]
    assert all(len(i) > 1 for i in ids[:3]), ids  # several Qwen tokens per word-level token
    decoded = [qwen.decode(i, skip_special_tokens=True) for i in ids]
    assert decoded == written
    sampled = policy.sample_group(["t20 t30 t40"], 2, 6, seed=0).texts
    texts = decoded + sampled
    prompts, cats = ["t20 t30 t40"] * len(texts), ["control"] * len(texts)
    ctx = RewardContext(tokenizer=qwen, policy=str(qwen3_dir))
    scorer = build_scorer(parse_spec(f"rm:{rm_dir}"), ctx)
    got = scorer(prompts, texts, cats).values
    rm = reward_model.load(rm_dir)
    direct = rm.score(prompts, [*written, *sampled], cats, share_prefix=False)
    seqs = [rm.encode(p, t, c) for p, t, c in zip(prompts, texts, cats, strict=True)]
    word_ids = [rm.tokenizer.encode(t.strip(), add_special_tokens=False) for t in written]
    assert [s[-len(w) - 1 : -1] for s, w in zip(seqs, word_ids, strict=False)] == word_ids
    by_hand = [rm(mx.array([s]), mx.array([0])).item() for s in seqs]
    np.testing.assert_allclose(got, direct, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(direct, by_hand, rtol=1e-4, atol=1e-4)
    assert np.ptp(got) > 1e-4, got  # the scores tell the texts apart
    notes = [x for x in capsys.readouterr().err.splitlines() if x.startswith("note: ")]
    assert len(notes) == 1, notes
    assert f"train_rm.py --model {qwen3_dir}" in notes[0] and repr(base) in notes[0], notes
    build_scorer(parse_spec(f"rm:{rm_dir}"), ctx)  # the same pair: no new note
    assert "note: " not in capsys.readouterr().err


def test_classifier_mode_learns_labelled_answers(base, tmp_path):
    """--labels trains the same head with binary cross-entropy: answers holding t5 are true."""
    rng = np.random.default_rng(1)
    rows = []
    for i in range(32):
        words = [f"t{int(w)}" for w in rng.integers(20, 90, size=3)]
        flag = bool(i % 2)
        rows.append(
            {
                "id": f"a{i}",
                "prompt": " ".join(words),
                "category": "control",
                "answer": f"{words[1]} {'t5' if flag else 't6'} {words[2]}",
                "pushback": flag,
                "kind": "direct_correction" if flag else "plain_answer",
                "split": "train" if i < 24 else "val",
            }
        )
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = train_rm.RMTrainConfig(
        model=base,
        labels=str(labels),
        out=str(tmp_path / "clf"),
        work=str(tmp_path / "w"),
        steps=30,
        batch_pairs=8,
        lr=5e-3,
        warmup_steps=2,
        lora_rank=4,
        lora_alpha=8.0,
        eval_every=10,
        use_category=False,
    )
    out = train_rm.train(cfg)
    saved = json.loads((out / reward_model.CONFIG_FILE).read_text())
    assert saved["extra"]["objective"] == "bce" and saved["extra"]["metrics"]["val_accuracy"] == 1.0
    clf = reward_model.load(out)
    margins = val_margins(clf, labels, use_category=False)  # 5.1 and up on OpenBLAS
    assert margins.min() > 1.0, margins  # so the 1.0 above (8 of 8) holds on any BLAS
    logits = clf.score(["t40 t41"] * 2, ["t50 t5 t51", "t50 t6 t51"], [None, None])
    assert logits[0] > 0 > logits[1], "held-out answers classified by the learned cue"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rows[0] | {"pushback": "yes"}) + "\n")
    assert train_rm.main(["--labels", str(bad), "--model", base]) == 2


def test_reward_model_component_floors_echoes_of_the_prompt(base, tmp_path):
    from rewards.registry import ECHO_SCORE, Component, RewardContext, parse_spec
    from rewards.scorer import build_scorer

    pairs = write_pairs(tmp_path / "pairs.jsonl")
    cfg = train_rm.RMTrainConfig(
        model=base, pairs=pairs, out=str(tmp_path / "rm"), work=str(tmp_path / "w"), steps=2
    )
    rm_dir = train_rm.train(cfg)
    ctx = RewardContext()
    on = build_scorer(parse_spec(f"rm:{rm_dir}"), ctx)
    comps = [Component("rm", 1.0, {"path": str(rm_dir), "echo_threshold": None})]
    off = build_scorer(comps, ctx)
    args = (["t20 t21 t22"] * 2, ["t22 t21 t20", "t30 t5"], ["control"] * 2)
    got_on, got_off = on(*args).values, off(*args).values
    # the first answer has the prompt's words: an echo, floored; the second is untouched
    assert got_on[0] == ECHO_SCORE and got_off[0] != ECHO_SCORE
    assert got_on[1] == got_off[1]


def test_broken_negatives_and_init(base, tmp_path):
    long = "t5 t5 t5 t5 t5 t5 t5 t5 t5."  # 9 words: long enough to break
    path = tmp_path / "pairs.jsonl"
    rows = [
        {"id": f"p{i}", "criterion": "scrutiny", "category": "control", "prompt": f"t{20 + i}",
         "better": long, "worse": "t6 t6", "split": "train" if i < 6 else "val"}
        for i in range(9)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))
    common = dict(
        model=base, pairs=str(path), steps=2, batch_pairs=4, lora_rank=4, lora_alpha=8.0,
        max_prompt_tokens=8, eval_every=1, tensorboard=False,
    )  # fmt: skip
    cfg = train_rm.RMTrainConfig(
        **common, out=str(tmp_path / "rm"), work=str(tmp_path / "w"), broken_negatives=2
    )
    out = train_rm.train(cfg)
    saved = json.loads((out / reward_model.CONFIG_FILE).read_text())
    assert saved["extra"]["split_counts"] == {"train": 6 + 12, "val": 3 + 6, "test": 0}
    # --init: the trained weights are copied before any step; other settings are refused
    start = train_rm.Trainer(
        train_rm.RMTrainConfig(**common, out=str(tmp_path / "b"), init=str(out))
    )
    want = reward_model.trained_weights(reward_model.load(out, merge=False))
    got = reward_model.trained_weights(start.rm)
    assert want.keys() == got.keys()
    assert all(mx.array_equal(want[k], got[k]).item() for k in want)
    other = train_rm.RMTrainConfig(**{**common, "lora_rank": 2}, init=str(out))
    with pytest.raises(LoadError, match="lora_rank"):
        train_rm.Trainer(other)
    with pytest.raises(ValueError, match="broken_negatives=5"):
        train_rm.RMTrainConfig(**common, broken_negatives=5)
    # --extra-pairs: its train split (repeated --extra-repeat times) and val split join --pairs'
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps({**x, "id": "m" + x["id"]}) + "\n" for x in rows[4:]))
    both = train_rm.Trainer(train_rm.RMTrainConfig(**common, extra_pairs=str(more), extra_repeat=2))
    assert both.counts == {"train": 6 + 2 * 2, "val": 3 + 3, "test": 0}
    with pytest.raises(ValueError, match="extra_repeat=0"):
        train_rm.RMTrainConfig(**common, extra_pairs=str(more), extra_repeat=0)
