"""SFT warm start: the answer-only mask, the loss against a float64 reference, learning, the
prompt-disjoint split, checkpoints that load through load_weights (and take GRPO's LoRA on top),
and bad data refused with one line before any model work."""

import dataclasses
import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

from core import (
    backend,  # noqa: F401
    forced,
    lora,
    precision,
    prompts,
)
from core.prompts import load_prompts, load_sft

import mlx.core as mx
import numpy as np
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model, tiny_tokenizer
from mlx.utils import tree_flatten

import sft
import train
from experiments import opener_gate, stance_pairs
from load_weights import load, resolve
from rl import checkpoint

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "data"))  # the builder is a script in data/, not a package
make_sft = importlib.import_module("data.make_sft")


def test_answer_mask_by_hand():
    """Row 0: prompt slots 0-2, answer 3-4, EOS 5, no padding. Row 1: 2 pad slots, prompt 2-3,
    answer 4, EOS 5. Target position t predicts slot t + 1."""
    mask = forced.answer_mask(prompt_lens=[3, 2], seq_lens=[6, 4], width=6)
    assert mask.tolist() == [[0, 0, 1, 1, 1], [0, 0, 0, 1, 1]]


def test_encode_and_batch_mask_answer_and_final_eos():
    tok = tiny_tokenizer(97, eos_id=0)
    tokens, n_prompt = forced.encode(tok, "t5 t6 t7", "t8 t9")
    assert (tokens, n_prompt) == ([5, 6, 7, 8, 9, 0], 3)
    short = forced.encode(tok, "t5", "t8")  # [5, 8, 0]: pad 3 on the left
    inputs, targets, mask, pad = forced.make_batch([(tokens, n_prompt), short], pad_id=0)
    assert inputs.tolist() == [[5, 6, 7, 8, 9], [0, 0, 0, 5, 8]]
    assert targets.tolist() == [[6, 7, 8, 9, 0], [0, 0, 5, 8, 0]]
    assert mask.tolist() == [[0, 0, 1, 1, 1], [0, 0, 0, 1, 1]]  # answer tokens and the EOS
    assert pad.tolist() == [0, 3]


@pytest.mark.slow
def test_embedded_tokenizer_ends_the_answer_with_im_end(smollm):
    tok = smollm.tokenizer
    tokens, n_prompt = forced.encode(tok, "What is the capital of France?", "Paris.")
    _, targets, mask, _ = forced.make_batch([(tokens, n_prompt)], tok.eos_token_id)
    answer = np.array(targets)[np.array(mask) > 0].tolist()
    assert tok.decode(answer) == "Paris.<|im_end|>" and answer[-1] == tok.eos_token_id
    assert tok.decode(tokens[:n_prompt]).endswith("<|im_start|>assistant\n")


@pytest.mark.slow
def test_every_shipped_answer_fits_the_default_answer_limit(smollm):
    """The builder caps words (65); sft.py caps tokens (80 with EOS) and refuses the whole run on
    one long answer. Every shipped answer must pass the token cap under the embedded tokenizer."""
    limit = sft.SFTConfig().max_answer_tokens
    for name in ("written.jsonl", "twins.jsonl"):
        records = load_sft(ROOT / "data/sft" / name)
        encoded = sft.encode_all(smollm.tokenizer, records, limit)  # raises naming the record
        longest = max(len(t) - p for t, p in encoded)
        assert 40 < longest <= limit, (name, longest)


def _reference_loss(model, examples) -> float:
    """Each row alone, unpadded: float64 log-softmax of the logits, NLL of the answer targets."""
    total = count = 0.0
    for tokens, n_prompt in examples:
        logits = np.array(model(mx.array([tokens[:-1]]))[0], dtype=np.float64)  # (n-1, V)
        logp = logits - logits.max(-1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
        for t in range(n_prompt - 1, len(tokens) - 1):  # predicts slot t + 1, an answer slot
            total -= logp[t, tokens[t + 1]]
            count += 1
    return total / count


def test_loss_equals_float64_reference_on_padded_batch():
    model = tiny_model(QWEN3, seed=3)
    rng = np.random.default_rng(0)
    examples = []
    for n_prompt, n_answer in [(5, 3), (2, 7), (9, 1), (4, 4)]:
        tokens = rng.integers(1, 97, n_prompt + n_answer).tolist() + [0]
        examples.append((tokens, n_prompt))
    loss = sft.sft_loss(model, *forced.make_batch(examples, pad_id=0)).item()
    assert loss == pytest.approx(_reference_loss(model, examples), rel=2e-5)
    assert sft.mean_loss(model, examples, 0, batch=3) == pytest.approx(loss, rel=2e-5)


def _records(n_prompts_per_cat: int = 4, answers: int = 2) -> list[dict]:
    """Tiny word-level records: each prompt has `answers` answers; the answer is a function of
    the prompt, so there is something to learn."""
    recs = []
    for c, cat in enumerate(sft.CATEGORIES):
        for p in range(n_prompts_per_cat):
            pid = f"{cat}-{p}"
            prompt = f"t{10 + c} t{20 + p} t{30 + c}"
            for a in range(answers):
                answer = f"t{40 + c} t{50 + p} t{60 + a} t{70 + c}"
                recs.append(
                    {
                        "id": f"{pid}-{a}",
                        "prompt_id": pid,
                        "category": cat,
                        "prompt": prompt,
                        "answer": answer,
                    }  # fmt: skip
                )
    return recs


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_split_is_disjoint_by_prompt_seeded_and_covers_every_category():
    recs = _records(n_prompts_per_cat=10, answers=3)
    train, val = sft.split_by_prompt(recs, 0.2, seed=0)
    train_ids, val_ids = {r["prompt_id"] for r in train}, {r["prompt_id"] for r in val}
    assert not train_ids & val_ids and len(train) + len(val) == len(recs)
    assert {r["category"] for r in val} == set(sft.CATEGORIES)
    assert len(val_ids) == 4 * 2  # ceil(0.2 * 10) prompts per category
    again, _ = sft.split_by_prompt(recs, 0.2, seed=0)
    other, _ = sft.split_by_prompt(recs, 0.2, seed=1)
    assert again == train and other != train


@pytest.fixture
def base_dir(tmp_path):
    save_checkpoint(tiny_model(QWEN3, seed=5), QWEN3, tmp_path / "base")
    return tmp_path / "base"


def _cfg(tmp_path, base_dir, **kw):
    data = _write(tmp_path / "sft.jsonl", _records())
    settings = dict(
        model=str(base_dir), data=str(data), out_dir=str(tmp_path / "runs"), run_name="r",
        lora_rank=4, lora_alpha=8.0, lora_targets="q_proj,v_proj,down_proj", lora_layers=1,
        batch_size=4, lr=2e-2, warmup_steps=1, val_fraction=0.25, dtype="float32",
    )  # fmt: skip
    return sft.SFTConfig(**(settings | kw))


def test_sft_steps_lower_the_training_loss(tmp_path, base_dir):
    run = sft.build(_cfg(tmp_path, base_dir))
    before = sft.mean_loss(run.model, run.train, 0)
    for i in range(6):
        sft.train_step(run, np.arange(i % 2 * 4, i % 2 * 4 + 4))
    after = sft.mean_loss(run.model, run.train, 0)
    assert after < before - 0.5, (before, after)
    trained = [name for name, _ in tree_flatten(run.model.trainable_parameters())]
    assert trained and all(".lora_" in name and "layers.1." in name for name in trained)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_non_finite_losses_are_skipped_then_stop_sft_naming_the_fix(
    tmp_path, base_dir, monkeypatch, dtype
):
    """A non-finite loss skips its update (counted, the weights untouched); max_failed_updates
    of them in a row stop the run with one user error naming the fix."""
    run = sft.build(_cfg(tmp_path, base_dir, dtype=dtype, max_failed_updates=2))
    before = {k: np.array(v) for k, v in tree_flatten(run.model.trainable_parameters())}
    real = sft.sft_loss
    monkeypatch.setattr(sft, "sft_loss", lambda *a: real(*a) * math.nan)
    m = sft.train_step(run, np.arange(4))
    assert m["skipped_steps"] == 1 and m["rolled_back_steps"] == 0, m
    after = {k: np.array(v) for k, v in tree_flatten(run.model.trainable_parameters())}
    assert all(np.array_equal(before[k], after[k]) for k in before)
    fix = "--dtype float32" if dtype == "float16" else "lower --lr$"
    with pytest.raises(precision.NonFiniteError, match=f"2 updates in a row.*step 2 .*{fix}"):
        sft.train_step(run, np.arange(4), step=1)


def test_checkpoint_loads_through_the_resolver_with_the_same_logits(tmp_path, base_dir):
    """The SFT run folder loads like train.py's (resolve -> latest checkpoint -> base + merged
    adapters); GRPO's own LoRA then wraps plain, already merged layers, and its reference
    (adapters off) is the SFT model."""
    run = sft.build(_cfg(tmp_path, base_dir))
    for i in range(3):
        sft.train_step(run, np.arange(4 * i, 4 * i + 4))
    run.run_dir.mkdir(parents=True)
    ckpt = sft.save_best(run, 3, {"val_loss": 1.0})
    names = {p.name for p in ckpt.iterdir()}
    assert {"adapters.safetensors", "adapter_config.json", "optimizer.safetensors"} <= names
    assert {"trainer.json", "train_config.json"} <= names
    src = resolve(str(run.run_dir))
    assert src.path == ckpt and src.kind == "lora" and src.start == str(base_dir)
    tokens = mx.array([[11, 21, 31, 41, 51]])
    want = run.model(tokens)
    base, _ = load(str(base_dir), mx.float32)
    assert mx.abs(want - base(tokens)).max().item() > 1e-3, "the adapters changed the model"
    loaded, _ = load(str(run.run_dir), mx.float32)
    assert not lora.adapters_of(loaded), "a LoRA checkpoint loads as plain merged weights"
    assert mx.abs(loaded(tokens) - want).max().item() <= 1e-5
    lora.apply_lora(loaded, 2, 4.0, ["q_proj", "o_proj"])  # what train.py --lora-rank does next
    for _, layer in lora.lora_layers(loaded):
        layer.lora_b = 0.1 * mx.random.normal(layer.lora_b.shape, key=mx.random.key(2))
    assert mx.abs(loaded(tokens) - want).max().item() > 1e-3
    with lora.adapters_disabled(loaded):
        assert mx.abs(loaded(tokens) - want).max().item() <= 1e-5
    # GRPO from the SFT run (train.py --model RUN_DIR --lora-rank 2): its checkpoint loads with
    # both levels merged, and with GRPO's adapters off it is the SFT model.
    cfg = train.TrainConfig(
        model=str(run.run_dir), steps=1, prompts_per_step=2, group_size=2, max_new_tokens=4,
        lora_rank=2, lora_alpha=4.0, lr=1e-2, warmup_steps=1, out_dir=str(tmp_path / "grpo"),
        run_name="g", tensorboard=False, dtype="float32",
    )  # fmt: skip
    grpo_dir = train.run(cfg, reward_fn=lambda prompts, completions, **kw: [0.0, 1.0] * 2)
    both, _ = load(str(grpo_dir), mx.float32)
    assert not lora.adapters_of(both) and mx.abs(both(tokens) - want).max().item() > 1e-4
    grpo_model, _ = load(str(checkpoint.latest(grpo_dir)), mx.float32, merge=False)
    with lora.adapters_disabled(grpo_model):
        assert mx.abs(grpo_model(tokens) - want).max().item() <= 1e-5
    sft.save_best(run, 5, {"val_loss": 0.5})  # a better step replaces the older checkpoint
    assert [p.name for p in (run.run_dir / "checkpoints").iterdir()] == ["step_000005"]


def test_cli_trains_keeps_the_best_checkpoint_and_prints_json(tmp_path, base_dir, capsys):
    data = _write(tmp_path / "sft.jsonl", _records())
    args = ["--model", str(base_dir), "--data", str(data), "--out-dir", str(tmp_path / "runs"),
            "--run-name", "cli", "--lora-rank", "4", "--batch-size", "4", "--lr", "2e-2",
            "--epochs", "3", "--eval-every", "2", "--val-fraction", "0.25", "--json"]  # fmt: skip
    assert sft.main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    history = summary["history"]
    assert [h["step"] for h in history] == list(range(0, 19, 2))  # 24 train records, batch 4
    assert summary["best_val_loss"] == min(h["val_loss"] for h in history[1:])
    assert history[-1]["train_loss"] < history[1]["train_loss"]
    assert summary["counts"]["val_prompts"] == 4 and summary["counts"]["train_prompts"] == 12
    state = json.loads((tmp_path / "runs/cli/checkpoints" / f"step_{summary['best_step']:06d}"
                        / "trainer.json").read_text())  # fmt: skip
    assert state["val_loss"] == summary["best_val_loss"]
    assert sft.main(args) == 2  # the run folder exists: refused, not overwritten
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.parametrize(
    "line, words",
    [
        ("{not json", "not valid JSON"),
        ('{"id": "x", "prompt_id": "p", "category": "control", "prompt": "q"}', "'answer'"),
        ('{"id": "x", "prompt_id": "p", "category": "opinion", "prompt": "q", "answer": "a"}',
         "opinion"),
    ],
)  # fmt: skip
def test_bad_data_line_is_one_error_line_and_exit_2(tmp_path, monkeypatch, capsys, line, words):
    good = _records()[:2]
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good[0]) + "\n" + line + "\n" + json.dumps(good[1]) + "\n")

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the data was checked")

    monkeypatch.setattr(sft, "load", no_model)
    assert sft.main(["--data", str(path), "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path} line 2: ") and words in err
    assert not list(tmp_path.glob("*/metrics.jsonl"))


def test_bad_settings_are_refused_before_any_work(tmp_path, capsys):
    assert sft.main(["--val-fraction", "1.5"]) == 2
    assert capsys.readouterr().err.startswith("error: val_fraction=1.5")
    assert sft.main(["--data", str(tmp_path / "missing.jsonl")]) == 2
    assert "python -m data.make_sft" in capsys.readouterr().err


def test_sft_data_is_rebuilt_byte_for_byte_and_balanced(tmp_path):
    """`python -m data.make_sft` gives the shipped written.jsonl whatever the hash seed; it loads,
    and has as many true-premise answers as corrections."""
    shipped = (ROOT / "data/sft/written.jsonl").read_bytes()
    for seed in ("1", "2"):
        out = tmp_path / seed
        cmd = [sys.executable, "-m", "data.make_sft", "--out", str(out)]
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run(cmd, check=True, cwd=ROOT, env=env, capture_output=True)
        assert (out / "written.jsonl").read_bytes() == shipped
        assert (out / "twins.jsonl").read_bytes() == (ROOT / "data/sft/twins.jsonl").read_bytes()
    twins = load_sft(ROOT / "data/sft/twins.jsonl")
    corrected = {r["prompt_id"] for r in load_sft(ROOT / "data/sft/written.jsonl")}
    both = load_prompts(f"{ROOT / 'data/prompts.jsonl'},{ROOT / 'data/twins.jsonl'}")
    pair_of = {r["id"]: r["pair"] for r in both if "pair" in r}
    assert len(twins) > 100 and all(r["category"] == "control" for r in twins)
    assert all(pair_of[r["prompt_id"]] in corrected for r in twins), "every twin is half a pair"
    cats = [r["category"] for r in load_sft(ROOT / "data/sft/written.jsonl")]
    assert cats.count("false_premise") == cats.count("control") > 100
    assert set(cats) == set(sft.CATEGORIES) and len(cats) > 200


def test_builder_refuses_eval_prompts_grader_text_and_long_answers():
    prompts = {"fp-1": {"category": "false_premise", "prompt": "Why is the Moon made of cheese?"}}
    grader_answer = "the moon is made of rock and dust not cheese at all as samples show"
    grader = (set(), set(), make_sft.runs(grader_answer))
    banned = {make_sft.norm(prompts["fp-1"]["prompt"])}

    def problems(answer, category="false_premise", banned=frozenset()):
        return make_sft.check_entry("fp-1", category, answer, prompts, banned, grader)

    ok = "The Moon is rock, not cheese."
    assert problems(ok) == []
    cases = [
        (problems(ok, banned=banned), "evaluation file"),
        (problems(ok, category="control"), "listed under control"),
        (problems(grader_answer.capitalize() + "."), "grader answer"),  # a 10-word run shared
        (problems("word " * 70 + "end."), "over 65"),
        (problems("It ends mid"), "end a sentence"),
    ]
    for found, words in cases:
        assert len(found) == 1 and words in found[0], (words, found)


def test_twin_answers_refuse_a_twin_without_its_correction_and_a_repeat(tmp_path, monkeypatch):
    (tmp_path / "twin_answers.yaml").write_text(
        "tw-0001: The wall is far too narrow to pick out from the Moon, a few metres wide.\n"
        "tw-0002: Neil Armstrong, in July 1969, who said it was one small step.\n"
    )
    monkeypatch.setattr(make_sft, "OUT", tmp_path)
    corrected = [{"prompt_id": "fp-0002", "category": "false_premise", "answer": "No one yet."}]
    with pytest.raises(
        make_sft.DataError, match="tw-0001: its false premise fp-0001 has no answer"
    ):
        make_sft.twin_records(corrected)
    both = corrected + [{"prompt_id": "fp-0001", "category": "false_premise", "answer": "x."}]
    records = make_sft.twin_records(both)
    assert [r["prompt_id"] for r in records] == ["tw-0001", "tw-0002"]
    assert all(r["category"] == "control" and r["id"] == "sft-" + r["prompt_id"] for r in records)
    (tmp_path / "twin_answers.yaml").write_text("tw-0002: No one yet.\n")
    with pytest.raises(make_sft.DataError, match="same answer as fp-0002"):
        make_sft.twin_records(both)


def test_falseqa_pairs_keep_both_members_or_neither(tmp_path, monkeypatch, capsys):
    """--pairs draws FalseQA's minimal pairs (k-th label-1 row with the k-th label-0 row): a pair
    whose partner fails a check is dropped whole, a 'partner' sharing under 30% of the words is
    counted and left out, and asking for more pairs than exist names the count."""
    import csv as csv_mod

    import train_grader

    def write(split, rows):
        folder = tmp_path / "falseqa"
        folder.mkdir(exist_ok=True)
        with (folder / f"{split}.csv").open("w", newline="", encoding="utf-8") as f:
            w = csv_mod.writer(f)
            w.writerow(["question", "answer", "label"])
            w.writerows(rows)

    fp = [
        ("Why do dolphins fly over the sea?", "Dolphins swim; they have no wings to fly.", "1"),
        ("Why do men breastfeed babies?", "Men do not produce breast milk at all.", "1"),
        ("What color is the sun's head?", "The sun is a star and has no head.", "1"),
        ("How do rocks sing at night?", "Rocks have no voice and cannot sing.", "1"),
    ]
    tp = [
        ("Why do dolphins swim in the sea?", "Dolphins are marine mammals of the sea.", "0"),
        ("Why do women breastfeed babies?", "Milk.", "0"),  # too short: the pair goes
        ("What color is the sun's light?", "Sunlight is white, a mix of all colours.", "0"),
        ("Name an animal of cold places.", "Polar bears live in the cold Arctic.", "0"),
    ]
    write("train", fp + tp)
    write("valid", [])
    monkeypatch.setattr(make_sft, "SHARED", tmp_path)
    monkeypatch.setattr(train_grader, "build_data", lambda: [])
    recs = make_sft.falseqa_records(2, seed=0, pairs=True)
    assert [r["prompt"] for r in recs] == [fp[0][0], fp[2][0], tp[0][0], tp[2][0]]
    assert [r["category"] for r in recs] == ["false_premise"] * 2 + ["control"] * 2
    assert "2 usable minimal pairs; 1 partners share under 30%" in capsys.readouterr().out
    with pytest.raises(make_sft.DataError, match="only 2 usable minimal pairs, not 3"):
        make_sft.falseqa_records(3, seed=0, pairs=True)
    write("valid", [fp[0]])
    with pytest.raises(make_sft.DataError, match="1 false-premise rows but 0 true-premise"):
        make_sft.falseqa_records(1, seed=0, pairs=True)


# ----------------------------------------------------------------------------------------------
# forced.text_logprobs and the stance contrast (--stance-pairs)


def _text_logprob_reference(model, tok, prompt: str, text: str) -> float:
    """log p(text | prompt) from the model's own unpadded forward, summed in float64."""
    tokens, n_prompt = forced.encode(tok, prompt, text, eos=False)
    logits = np.array(model(mx.array([tokens]))[0].astype(mx.float32), dtype=np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1))[:, None]
    logp -= logits.max(1, keepdims=True)
    return float(sum(logp[t, tokens[t + 1]] for t in range(n_prompt - 1, len(tokens) - 1)))


def test_text_logprobs_equal_the_float64_reference_across_padding():
    model, tok = tiny_model(QWEN3, seed=3), tiny_tokenizer(QWEN3["vocab_size"])
    prompts = ["t5 t6 t7 t8 t9", "t11", "t12 t13", "t14 t15 t16"]
    got = forced.text_logprobs(model, tok, prompts, "t40 t41 t42", batch=3)
    want = [_text_logprob_reference(model, tok, p, "t40 t41 t42") for p in prompts]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    with pytest.raises(ValueError, match="has no tokens"):
        forced.encode(tok, "t5", "   ", eos=False)


def test_stance_contrast_is_the_softplus_of_the_margin_and_blind_to_a_shared_prompt():
    model, tok = tiny_model(QWEN3, seed=3), tiny_tokenizer(QWEN3["vocab_size"])
    false, twin, text = ["t5 t20 t21", "t5 t22"], ["t6 t20 t21", "t6 t22"], "t40 t41"
    rows = [
        (forced.encode(tok, f, text, eos=False), forced.encode(tok, t, text, eos=False))
        for f, t in zip(false, twin, strict=True)
    ]
    loss, margins = stance_pairs.stance_contrast(model, rows, 0, beta=2.0)
    m = forced.text_logprobs(model, tok, false, text) - forced.text_logprobs(model, tok, twin, text)
    np.testing.assert_allclose(np.array(margins), m, rtol=1e-4, atol=1e-5)
    assert loss.item() == pytest.approx(np.mean(np.logaddexp(0, -2.0 * m)), rel=1e-5)
    same = [(r, r) for r, _ in rows]  # one prompt on both sides: no difference to pay
    loss, margins = stance_pairs.stance_contrast(model, same, 0, beta=2.0)
    # The margins are 0 up to rounding (~2e-6 here), and the loss is their softplus: log 2 to 1e-5.
    assert np.abs(np.array(margins)).max() < 1e-5
    assert loss.item() == pytest.approx(math.log(2), abs=1e-5)


def test_step_indices_visit_every_item_once_per_cycle():
    picks = np.concatenate([prompts.step_indices(10, 4, 0, s, 2000) for s in range(5)])  # 2 cycles
    assert sorted(picks[:10]) == list(range(10)) and sorted(picks[10:20]) == list(range(10))
    assert np.array_equal(
        prompts.step_indices(10, 4, 0, 3, 2000), prompts.step_indices(10, 4, 0, 3, 2000)
    )
    # another stream is another order
    assert not np.array_equal(
        prompts.step_indices(10, 10, 0, 0, 2000), prompts.step_indices(10, 10, 0, 0, 3000)
    )


def _stance_files(tmp_path, n=20):
    """n minimal pairs (false "t5 w w w w", twin "t6 w w w w"), each its own claim group, and
    SFT records: _records() plus one correction of every pair's false half."""
    rng = np.random.default_rng(0)
    pairs, extra = [], []
    for i in range(n):
        words = " ".join(f"t{w}" for w in rng.integers(20, 90, size=4))
        false = {"id": f"fp{i}", "category": "false_premise", "prompt": f"t5 {words}"}
        pairs += [false, {"id": f"tw{i}", "category": "control", "prompt": f"t6 {words}"}]
        pairs[-1]["pair"] = f"fp{i}"
        extra.append(false | {"id": f"c{i}", "prompt_id": f"fp{i}", "answer": "t41 t42"})
    for r in pairs:
        r["source"] = "test"
    keys = ("id", "prompt_id", "category", "prompt", "answer")
    records = _records() + [{k: r[k] for k in keys} for r in extra]
    return _write(tmp_path / "pairs.jsonl", pairs), _write(tmp_path / "sft_pairs.jsonl", records)


def _stance_run(tmp_path, base_dir, run_name="r", **kw):
    """A built SFT run with the stance contrast on _stance_files."""
    pairs, data = _stance_files(tmp_path)
    cfg = _cfg(tmp_path, base_dir, data=str(data), run_name=run_name)
    stance = stance_pairs.StanceConfig(**({"stance_pairs": str(pairs), "stance_text": "t7 t8",
                                           "stance_batch": 4} | kw))  # fmt: skip
    return sft.build(cfg, stance_pairs.StanceContrast(stance, cfg)), cfg, stance


def test_stance_run_holds_out_a_fold_opens_corrections_and_widens_the_margin(tmp_path, base_dir):
    run, cfg, stance = _stance_run(tmp_path, base_dir)
    data = cfg.data
    c = run.counts
    assert c["stance_train_pairs"] + c["stance_held_pairs"] == 20 and c["stance_held_pairs"] >= 4
    assert c["records_dropped_on_held_pairs"] == c["stance_held_pairs"]  # one record each
    train_pairs, held = stance_pairs.stance_split(
        stance.stance_pairs, stance.stance_folds, stance.stance_holdout, cfg.seed
    )
    held_text = {r["prompt"] for p in held for r in p}
    assert not held_text & {r["prompt"] for p in train_pairs for r in p}
    kept, _ = stance_pairs.stance_records(sft.load_data([str(data)]), "t7 t8", held)
    assert not held_text & {r["prompt"] for r in kept}
    assert all(r["answer"].startswith("t7 t8 ") == (r["category"] == "false_premise") for r in kept)

    def train_margin():
        loss, m = stance_pairs.stance_contrast(run.model, run.extra.rows, 0, 1.0)
        return float(np.mean(np.array(m)))

    before = train_margin()
    for step in range(8):
        out = sft.train_step(run, np.arange(step % 2 * 4, step % 2 * 4 + 4), step)
    assert {"stance_margin", "stance_accuracy", "sft_loss"} <= set(out)
    assert train_margin() > before + 1.0, (before, train_margin())


@pytest.mark.parametrize(
    "kw,words",
    [
        ({"stance_folds": 1}, "need >= 2 folds"),
        ({"stance_holdout": 4}, "held-out fold in 0..folds-1"),
        ({"stance_text": " "}, "stance_text is empty"),
        ({"stance_weight": 0.0}, "must be > 0"),
        ({"stance_pairs": " "}, "stance_pairs is empty"),
        ({"stance_batch": 0}, "must be >= 1"),
    ],
)
def test_bad_stance_settings_are_refused(kw, words):
    with pytest.raises(ValueError, match=words):
        stance_pairs.StanceConfig(**({"stance_pairs": "p.jsonl"} | kw))


# The opener gate (--gate): a sentence's probability trained as a category classifier


def test_parse_gates_reads_entries_and_refuses_bad_ones():
    spec = "nonsense=That question does not make sense.; false_premise = That premise is false."
    assert opener_gate.parse_gates(spec) == [
        ("nonsense", "That question does not make sense."),
        ("false_premise", "That premise is false."),
    ]
    for bad, words in [
        ("nonsens=x.", "write category=sentence"),
        ("nonsense", "write category=sentence"),
        ("nonsense= ", "write category=sentence"),
        ("nonsense=a.;nonsense=b.", "twice"),
        (" ; ", "no category=sentence"),
    ]:
        with pytest.raises(ValueError, match=words):
            opener_gate.parse_gates(bad)


def test_gate_records_open_only_the_gated_category_once():
    recs = _records(n_prompts_per_cat=2, answers=1)
    recs[0] = recs[0] | {"answer": "t7 t8 t9"}  # false_premise, already opened
    out = opener_gate.gate_records(recs, [("false_premise", "t7 t8")])
    for before, after in zip(recs, out, strict=True):
        if before["category"] != "false_premise":
            assert after == before
        elif before["answer"].startswith("t7 t8"):
            assert after["answer"] == before["answer"]
        else:
            assert after["answer"] == "t7 t8 " + before["answer"]


def test_log1mexp_equals_float64_at_both_ends():
    x = np.array([-1e-5, -1e-3, -0.1, -0.69, -0.7, -1.0, -5.0, -30.0])
    got = np.array(opener_gate.log1mexp(mx.array(x, dtype=mx.float32)))
    np.testing.assert_allclose(got, np.log(-np.expm1(x)), rtol=2e-4, atol=1e-7)


def test_gate_loss_is_the_binary_cross_entropy_of_the_sentence_probability():
    model, tok = tiny_model(QWEN3, seed=3), tiny_tokenizer(QWEN3["vocab_size"])
    prompts = [
        {"prompt": "t5 t20", "category": "nonsense"},
        {"prompt": "t6 t21 t22", "category": "control"},
        {"prompt": "t7", "category": "false_premise"},
    ]
    gates = [("nonsense", "t40 t41"), ("false_premise", "t42")]
    rows, targets = opener_gate.gate_rows(tok, prompts, gates)
    assert targets.tolist() == [[1, 0], [0, 0], [0, 1]]
    loss, lp = opener_gate.gate_loss(model, rows, targets, 0)
    want = np.stack(
        [forced.text_logprobs(model, tok, [p["prompt"] for p in prompts], t) for _, t in gates], 1
    )
    np.testing.assert_allclose(np.array(lp), want, rtol=1e-4, atol=1e-5)
    bce = -(targets * want + (1 - targets) * np.log(-np.expm1(want)))
    assert loss.item() == pytest.approx(bce.mean(), rel=1e-4)
    lp2, margins = opener_gate.gate_scores(model, rows, 0, batch=2)
    np.testing.assert_allclose(lp2, want, rtol=1e-4)
    # the greedy term: the first sentence token's logit minus the best other, by float64 logits
    ref = np.zeros((3, 2))
    for i, p in enumerate(prompts):
        for j, (_, text) in enumerate(gates):
            tokens, n = forced.encode(tok, p["prompt"], text, eos=False)
            logits = np.array(model(mx.array([tokens[:n]]))[0, -1].astype(mx.float32), np.float64)
            first = tokens[n]
            ref[i, j] = logits[first] - np.delete(logits, first).max()
    np.testing.assert_allclose(margins, ref, rtol=1e-4, atol=1e-4)
    with_margin, _ = opener_gate.gate_loss(model, rows, targets, 0, margin_weight=0.5)
    hinge = np.logaddexp(0, (1 - 2 * targets) * ref).mean()
    assert with_margin.item() == pytest.approx(bce.mean() + 0.5 * hinge, rel=1e-4)
    # negatives weighted: only the cells outside a gate's category are scaled
    weighted, _ = opener_gate.gate_loss(model, rows, targets, 0, neg_weight=3.0)
    w = np.where(targets > 0, 1.0, 3.0)
    assert weighted.item() == pytest.approx((w * bce).mean(), rel=1e-4)
    assert weighted.item() > loss.item()


def test_gate_figures_by_hand():
    half = math.log(0.5)
    lp = np.array([[half + 0.1], [half - 0.1], [half + 0.2], [-9.0]])
    cats = ["nonsense", "nonsense", "control", "curiosity"]
    margins = np.array([[0.3], [0.1], [-0.2], [0.0]])
    f = opener_gate.gate_figures(lp, cats, [("nonsense", "s.")], margins)["nonsense"]
    assert f["opens"] == {"nonsense": 0.5, "curiosity": 0.0, "control": 1.0}
    assert f["greedy_first"] == {"nonsense": 1.0, "curiosity": 0.0, "control": 0.0}
    # positives (half+0.1, half-0.1) against negatives (half+0.2, -9): 2 of 4 orders right
    assert f["auroc"] == pytest.approx(0.5)


def _gate_prompts(tmp_path, n=24):
    """Prompts the gate learns from: nonsense "t5 w w", control "t6 w w" (twins of some false
    premises "t8 w w"), so the first word tells the category."""
    rng = np.random.default_rng(1)
    rows = []
    for i in range(n):
        w = " ".join(f"t{x}" for x in rng.integers(20, 90, size=2))
        rows += [
            {"id": f"ns{i}", "category": "nonsense", "prompt": f"t5 {w} t{90 + i}"},
            {"id": f"fp{i}", "category": "false_premise", "prompt": f"t8 {w} t{90 + i}"},
            {
                "id": f"tw{i}",
                "category": "control",
                "prompt": f"t6 {w} t{90 + i}",
                "pair": f"fp{i}",
            },
        ]
    for r in rows:
        r["source"] = "test"
        if r["id"].startswith("tw"):
            r["pair"] = "fp" + r["id"][2:]
    return _write(tmp_path / "gate_prompts.jsonl", rows)


def test_gate_split_keeps_twins_with_their_claim_and_the_sft_validation_out():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = _gate_prompts(Path(d))
        forced_text = "t5 " + load_prompts(str(path))[0]["prompt"][3:]
        train_p, val_p = opener_gate.gate_split(str(path), {forced_text}, 0.25, seed=0)
    ids = lambda rs: {r["id"] for r in rs}  # noqa: E731
    assert not ids(train_p) & ids(val_p) and len(train_p) + len(val_p) == 72
    assert forced_text in {r["prompt"] for r in val_p}
    for i in range(24):  # a twin sits where its false premise sits
        assert (f"fp{i}" in ids(val_p)) == (f"tw{i}" in ids(val_p))
    assert 0.2 < len(val_p) / 72 < 0.35


def _gate_run(tmp_path, base_dir, run_name="r", **kw):
    """A built SFT run with the opener gate on _gate_prompts."""
    prompts = _gate_prompts(tmp_path)
    cfg = _cfg(tmp_path, base_dir, run_name=run_name)
    gate = opener_gate.GateConfig(**({"gate_prompts": str(prompts), "gate_batch": 12} | kw))
    return sft.build(cfg, opener_gate.OpenerGate(gate, cfg)), cfg, gate


def _gate_val(run) -> dict:
    return sft.validate_extra(run)[0]


def test_gate_run_learns_the_decision_and_reports_it(tmp_path, base_dir, capsys):
    run, cfg, gate = _gate_run(tmp_path, base_dir, gate="nonsense=t7")
    assert run.counts["gate_train_prompts"] + run.counts["gate_val_prompts"] == 72
    opened = [r for r in opener_gate.gate_records(sft.load_data([cfg.data]), gate.gate_list())]
    assert all(r["answer"].startswith("t7 ") == (r["category"] == "nonsense") for r in opened)
    before = _gate_val(run)["nonsense"]
    for step in range(20):
        out = sft.train_step(run, np.arange(step % 2 * 4, step % 2 * 4 + 4), step)
    assert {"gate_loss", "gate_accuracy", "sft_loss"} <= set(out)
    after = _gate_val(run)["nonsense"]
    assert after["auroc"] > max(before["auroc"], 0.85), (before, after)
    assert after["opens"]["nonsense"] >= 0.5 and after["opens"]["control"] == 0, after
    cfg = dataclasses.replace(cfg, run_name="r2", steps=2)
    summary = sft.fit(sft.build(cfg, opener_gate.OpenerGate(gate, cfg)))
    assert summary["gate"]["gates"] == [{"category": "nonsense", "sentence": "t7"}]
    assert set(summary["gate"]["val_step_0"]["nonsense"]["opens"]) == {
        "nonsense", "false_premise", "control"
    }  # fmt: skip


def test_logit_margins_move_only_the_sentence_s_own_token():
    logits = mx.array([[1.0, 3.0, 2.0], [0.5, -1.0, 4.0]])
    tok = mx.array([1, 0])
    np.testing.assert_allclose(np.array(opener_gate.logit_margins(logits, tok)), [1.0, -3.5])
    grad = mx.grad(lambda x: mx.sum(opener_gate.logit_margins(x, tok)))(logits)
    np.testing.assert_allclose(np.array(grad), [[0, 1, 0], [1, 0, 0]])  # never the runner-up


@pytest.mark.slow
def test_the_greedy_term_refuses_gates_that_share_a_first_token(smollm):
    tok = smollm.tokenizer
    shared = [("false_premise", "That premise is false."), ("nonsense", "That makes no sense.")]
    with pytest.raises(ValueError, match="open with the same token"):
        opener_gate.check_first_tokens(tok, shared)
    opener_gate.check_first_tokens(tok, [shared[0], ("nonsense", "This makes no sense.")])


def test_the_greedy_term_moves_greedy_s_own_decision(tmp_path, base_dir):
    run, _, _ = _gate_run(tmp_path, base_dir, gate="nonsense=t7 t9", gate_margin=1.0)
    before = _gate_val(run)["nonsense"]["greedy_first"]
    for step in range(20):
        sft.train_step(run, np.arange(step % 2 * 4, step % 2 * 4 + 4), step)
    after = _gate_val(run)["nonsense"]["greedy_first"]
    assert before["nonsense"] == 0 and after["nonsense"] >= 0.8, (before, after)
    assert after["control"] == 0 and after["false_premise"] == 0, after


@pytest.mark.parametrize(
    "kw,words",
    [
        ({"gate": "nonsense"}, "write category=sentence"),
        ({"gate": ""}, "names no category=sentence"),
        ({"gate": "nonsense=a.", "gate_weight": 0.0}, "must be > 0"),
        ({"gate": "nonsense=a.", "gate_margin": -1.0}, ">= 0"),
        ({"gate": "nonsense=a.", "gate_neg_weight": 0.0}, "gate_neg_weight=0.0"),
        ({"gate": "nonsense=a.", "gate_prompts": " "}, "gate_prompts is empty"),
        ({"gate": "nonsense=a.", "gate_batch": 0}, "must be >= 1"),
    ],
)
def test_bad_gate_settings_are_refused(kw, words):
    with pytest.raises(ValueError, match=words):
        opener_gate.GateConfig(**kw)


@pytest.mark.slow
def test_a_gate_sentence_the_answers_do_not_begin_with_is_refused(smollm):
    tok = smollm.tokenizer
    recs = [{"id": "a", "category": "nonsense", "answer": "There is no such thing."}]
    with pytest.raises(sft.DataError, match="does not begin with the tokens"):
        opener_gate.check_openers(tok, recs, [("nonsense", "The")])  # "There" is one token
    opener_gate.check_openers(tok, [recs[0] | {"answer": "The. There"}], [("nonsense", "The.")])
    opener_gate.check_openers(tok, recs, [("control", "The")])  # another category: not checked


# The extra-loss hook: the experiments plug into SFT from their own modules


# Computed by the code before the hook (sft.py with --gate / --stance-pairs as its own flags,
# commit c79791b) on the runs below: (loss, SFT loss, the extra term's figure) of steps 0 and 1,
# so the second row checks the first update too.
OLD_GATE_STEPS = [
    (8.158661842346191, 5.803982734680176, 3.3638272285461426, 0.75),
    (8.195244789123535, 5.5006022453308105, 3.849489688873291, 0.6666666666666666),
]
OLD_STANCE_STEPS = [
    (6.21193790435791, 4.977030277252197, -1.133124589920044, 0.0),
    (7.706561088562012, 6.2589006423950195, -1.3096683025360107, 0.0),
]


def test_gate_and_stance_runs_compute_the_losses_they_did_inside_sft(tmp_path, base_dir):
    run, _, _ = _gate_run(tmp_path, base_dir, gate="nonsense=t7 t9", gate_margin=0.5,
                          gate_neg_weight=2.0, gate_weight=0.7)  # fmt: skip
    assert (run.counts["gate_train_prompts"], run.counts["gate_val_prompts"]) == (54, 18)
    for step, want in enumerate(OLD_GATE_STEPS):
        out = sft.train_step(run, np.arange(step * 4, step * 4 + 4), step)
        got = (out["loss"], out["sft_loss"], out["gate_loss"], out["gate_accuracy"])
        np.testing.assert_allclose(got, want, rtol=1e-5)
    fig = _gate_val(run)["nonsense"]
    assert fig["auroc"] == pytest.approx(0.8194444444444444)
    assert fig["greedy_first"]["nonsense"] == pytest.approx(2 / 3)
    run, _, _ = _stance_run(tmp_path, base_dir, run_name="s", stance_beta=2.0, stance_weight=0.5)
    assert run.counts["stance_train_pairs"] == 15 and run.counts["stance_held_pairs"] == 5
    for step, want in enumerate(OLD_STANCE_STEPS):
        out = sft.train_step(run, np.arange(step * 4, step * 4 + 4), step)
        got = (out["loss"], out["sft_loss"], out["stance_margin"], out["stance_accuracy"])
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_the_experiment_commands_take_sft_flags_and_save_their_own(tmp_path, base_dir, capsys):
    prompts = _gate_prompts(tmp_path)
    data = _write(tmp_path / "sft.jsonl", _records())
    args = ["--model", str(base_dir), "--data", str(data), "--out-dir", str(tmp_path / "runs"),
            "--lora-rank", "4", "--batch-size", "4", "--steps", "2", "--val-fraction", "0.25",
            "--json"]  # fmt: skip
    gate = ["--gate", "nonsense=t7", "--gate-prompts", str(prompts), "--gate-batch", "8"]
    assert opener_gate.main([*args, "--run-name", "g", *gate]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["gate"]["gates"] == [{"category": "nonsense", "sentence": "t7"}]
    saved = json.loads((tmp_path / "runs/g/config.json").read_text())
    assert saved["gate"] == "nonsense=t7" and saved["gate_batch"] == 8 and saved["steps"] == 2
    ckpt = checkpoint.latest(tmp_path / "runs/g")
    assert json.loads((ckpt / "train_config.json").read_text()) == saved
    pairs, _ = _stance_files(tmp_path)
    assert stance_pairs.main([*args, "--run-name", "s", "--stance-pairs", str(pairs)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["counts"]["stance_train_pairs"] + len(summary["stance_held_pairs"]) == 20
    assert opener_gate.main([*args, "--run-name", "x", "--gate", "bogus"]) == 2
    assert "write category=sentence" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag, command",
    [("--gate", "-m experiments.opener_gate"), ("--gate-margin=1", "-m experiments.opener_gate"),
     ("--stance-pairs", "-m experiments.stance_pairs")],
)  # fmt: skip
def test_sft_names_the_command_an_experiment_flag_moved_to(flag, command, capsys):
    assert sft.main([flag, "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and command in err, err
