"""experiments/premise_probe.py: claim groups and folds that keep them whole, the ridge probe
(frozen_states.ridge_fit) against numpy references, the residual-stream states
(frozen_states.last_token_states) against the model's own forward, and the command's output and
input errors."""

import json

from core import backend  # noqa: F401

# isort: split
from core import forced, frozen_states
from core.jsonl import DataError

import mlx.core as mx
import numpy as np
import pytest
from helpers import LLAMA, save_checkpoint, tiny_model, tiny_tokenizer

from experiments import premise_probe as pp


def test_folds_keep_each_group_whole_and_balanced():
    groups = np.array([0, 0, 1, 2, 3, 3, 3, 4, 5, 6, 7, 8, 9, 10, 11])
    fold = pp.fold_of_groups(groups, 5, seed=3)
    for g in np.unique(groups):
        assert len(set(fold[groups == g])) == 1, f"group {g} split across folds"
    assert sorted(np.bincount(fold).tolist()) == [3, 3, 3, 3, 3]
    assert (fold == pp.fold_of_groups(groups, 5, seed=3)).all()
    assert not (fold == pp.fold_of_groups(groups, 5, seed=4)).all()
    with pytest.raises(DataError, match="9 independent groups of pairs are too few for 5 folds"):
        pp.fold_of_groups(np.arange(9), 5, seed=0)


def _pair(i, false, twin):
    return ({"id": f"fp{i}", "prompt": false}, {"id": f"tw{i}", "prompt": twin, "pair": f"fp{i}"})


def test_one_claim_in_two_frames_is_one_group_and_a_shared_frame_is_not():
    frame = "Settle a debate for us: my brother says {}. Why?"
    confirm = "Can you confirm that {}?"
    claims = ["sharks are mammals", "copper is magnetic", "bats are blind", "pi equals three",
              "glass is a slow liquid"]  # fmt: skip
    pairs = [
        _pair(i, frame.format(c), frame.format(c + " sometimes")) for i, c in enumerate(claims)
    ]
    pairs.append(_pair(9, confirm.format(claims[0]), confirm.format("whales are mammals")))
    groups = pp.claim_groups(pairs, run=3, max_share=4)
    assert groups[0] == groups[5], "the same claim in two frames"
    assert len(set(groups[:5])) == 5, "five claims sharing only the frame stay apart"
    assert len(set(pp.claim_groups(pairs, run=0))) == 6


@pytest.mark.parametrize("n,d", [(40, 6), (10, 30)])  # primal (d <= n) and dual forms
def test_ridge_equals_the_augmented_least_squares_reference(n, d):
    rng = np.random.default_rng(0)
    x, x_new = rng.normal(size=(n, d)) * 3 + 1, rng.normal(size=(5, d))
    y = np.sign(rng.normal(size=n))
    strength = 7.0
    score = frozen_states.ridge_fit(x, y, strength)(x_new)
    # reference: ridge on standardized columns, unpenalized intercept, as one lstsq problem
    mean, std = x.mean(0), x.std(0)
    z = (x - mean) / std
    a = np.vstack(
        [
            np.hstack([z, np.ones((n, 1))]),
            np.hstack([np.sqrt(strength) * np.eye(d), np.zeros((d, 1))]),
        ]
    )
    coef = np.linalg.lstsq(a, np.concatenate([y, np.zeros(d)]), rcond=None)[0]
    ref = ((x_new - mean) / std) @ coef[:d] + coef[d]
    np.testing.assert_allclose(score, ref, rtol=1e-8, atol=1e-8)


def test_ridge_leaves_constant_columns_out_so_constant_rows_tie_exactly():
    rng = np.random.default_rng(1)
    x, x_new = rng.normal(size=(30, 5)), rng.normal(size=(4, 5))
    x[:, 1] = 0.1  # no exact binary value: the column's mean is off from it by rounding
    assert x[:, 1].mean() != 0.1  # (the case that made the scores' ties rounding noise)
    y = np.tile([1.0, -1.0], 15)  # y.mean() is exactly 0
    got = frozen_states.ridge_fit(x, y, 3.0)(x_new)
    # exact on purpose: left out means the same arithmetic as without the column, bit for bit
    np.testing.assert_array_equal(
        got, frozen_states.ridge_fit(np.delete(x, 1, 1), y, 3.0)(np.delete(x_new, 1, 1))
    )
    same = np.tile(x[:1], (30, 1))  # every row one state, as before any block on one last token
    # exact on purpose: no column is live, so every score is the intercept, y.mean() == 0
    assert (frozen_states.ridge_fit(same, y, 10.0)(same) == 0.0).all()


def _paired(n_pairs, signal, rng):
    """(2P, 8) rows: false half then twin; dimension 0 carries `signal` (+ for the false half)."""
    base = rng.normal(size=(n_pairs, 8))
    x = np.repeat(base, 2, axis=0) + 0.3 * rng.normal(size=(2 * n_pairs, 8))
    x[0::2, 0] += signal
    x[1::2, 0] -= signal
    return x


def test_probe_finds_a_planted_direction_and_stays_at_chance_without_one():
    rng = np.random.default_rng(1)
    groups = np.arange(120) // 2  # pairs in twos, as one claim in two frames
    fold = pp.fold_of_groups(groups, 5, seed=0)
    planted, _ = pp.pair_margins(_paired(120, 1.0, rng), fold, groups)
    assert pp.figure(planted)["pairwise_accuracy"] > 0.95
    none, chosen = pp.pair_margins(_paired(120, 0.0, rng), fold, groups)
    fig = pp.figure(none)
    assert 0.35 < fig["pairwise_accuracy"] < 0.65 and fig["ci95"][0] < 0.5 < fig["ci95"][1]
    assert len(chosen) == 5 and set(chosen) <= set(pp.STRENGTHS)


def test_figure_counts_ties_as_half_and_gives_a_wilson_interval():
    fig = pp.figure(np.array([1.0, -1.0, 0.0, 2.0]))
    assert fig["pairwise_accuracy"] == 2.5 / 4 and fig["n_pairs"] == 4
    lo, hi = fig["ci95"]
    assert 0 < lo < 0.5 < hi < 1


def test_bag_of_words_marks_each_prompts_words():
    x = pp.bag_of_words(["The cat sat", "the dog", "Dog's day"])
    assert x.shape == (3, 6)  # cat, day, dog, dog's, sat, the
    assert x.sum(1).tolist() == [3, 2, 2]


def test_states_match_the_models_own_forward():
    model = tiny_model(LLAMA, seed=2)
    tok = tiny_tokenizer(LLAMA["vocab_size"])
    states = frozen_states.last_token_states(model, tok, ["t5 t6 t7", "t9 t10"], progress=False)
    assert states.shape == (2, LLAMA["num_hidden_layers"] + 1, LLAMA["hidden_size"])
    for row, text in enumerate(["t5 t6 t7", "t9 t10"]):
        tokens = mx.array([tok.encode(text)])
        final = np.array(model.hidden(tokens)[0, -1])
        np.testing.assert_allclose(
            np.array(model.final_norm(mx.array(states[row, -1], dtype=mx.float32))),
            final,
            atol=1e-5,
        )
        np.testing.assert_allclose(states[row, 0], np.array(model.embed(tokens)[0, -1]), atol=1e-6)


def _pairs_file(path, n):
    """n minimal pairs "t5 <words> t95" / "t6 <words> t95": every prompt ends on one token, as
    on the chat template's last token, so before any block all states are one constant."""
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        for i in range(n):
            words = " ".join(f"t{w}" for w in rng.integers(20, 90, size=4))
            f.write(
                json.dumps(
                    {
                        "id": f"fp{i}",
                        "category": "false_premise",
                        "prompt": f"t5 {words} t95",
                        "source": "test",
                    }
                )
                + "\n"
            )
            f.write(
                json.dumps(
                    {
                        "id": f"tw{i}",
                        "category": "control",
                        "prompt": f"t6 {words} t95",
                        "source": "test",
                        "pair": f"fp{i}",
                    }
                )
                + "\n"
            )


def test_cli_prints_every_layer_and_the_peer(tmp_path, capsys):
    save_checkpoint(tiny_model(LLAMA, seed=4), LLAMA, tmp_path / "m")
    _pairs_file(tmp_path / "p.jsonl", 20)
    rc = pp.main(
        [
            "--model",
            str(tmp_path / "m"),
            "--pairs",
            str(tmp_path / "p.jsonl"),
            "--layer",
            "2",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_pairs"] == 20 and out["bag_of_words"]["pairwise_accuracy"] == 1.0  # t5 vs t6
    m = out["models"][0]
    assert [r["layer"] for r in m["layers"]] == [0, 1, 2, 3] and m["read_layer"]["layer"] == 2
    # exact on purpose: before any block every state is the last token's embedding, a constant
    # that ridge_fit leaves out, so every margin is exactly 0 and every pair a tie
    assert m["layers"][0]["pairwise_accuracy"] == 0.5
    assert len(m["pair_margins_at_read_layer"]) == 20


@pytest.mark.parametrize(
    "args,words",
    [
        (["--layer", "9"], "--layer 9 is outside 0..3"),
        (["--pairs", "NOPAIRS"], "no record with a `pair` field"),
        (["--pairs", "MISSING"], "none.jsonl: file not found"),
        (["--pairs", "REVERSED"], "name a control prompt as their false half"),
        (["--stance", " "], "--stance is empty"),
    ],
)
def test_cli_bad_input_is_one_error_line(tmp_path, capsys, args, words):
    save_checkpoint(tiny_model(LLAMA, seed=4), LLAMA, tmp_path / "m")
    _pairs_file(tmp_path / "p.jsonl", 20)
    (tmp_path / "np.jsonl").write_text(
        json.dumps({"id": "a", "category": "control", "prompt": "t5", "source": "x"}) + "\n"
    )
    control = {"id": "c", "category": "control", "prompt": "t7 t8", "source": "x"}
    twin = {"id": "d", "category": "false_premise", "prompt": "t7 t9", "source": "x", "pair": "c"}
    (tmp_path / "rev.jsonl").write_text(json.dumps(control) + "\n" + json.dumps(twin) + "\n")
    files = {"NOPAIRS": "np.jsonl", "MISSING": "none.jsonl", "REVERSED": "rev.jsonl"}
    args = [str(tmp_path / files[a]) if a in files else a for a in args]
    if "--pairs" not in args:
        args += ["--pairs", str(tmp_path / "p.jsonl")]
    rc = pp.main(["--model", str(tmp_path / "m"), *args, "--json"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: ") and words in err[0], err


def test_group_bootstrap_difference_by_hand():
    a, b = np.array([0, 0, 1, 1, 0.5]), np.array([1, 1, 1, 1, 0.5])
    d = pp.group_bootstrap_diff(a, b, np.array([0, 0, 1, 1, 2]))
    assert d["diff"] == pytest.approx(0.4) and d["n_pairs"] == 5
    assert 0 <= d["ci95"][0] <= 0.4 <= d["ci95"][1] <= 1.0  # only group 0 differs (by 1 each)
    same = pp.group_bootstrap_diff(a, a, np.array([0, 0, 1, 1, 2]))
    assert same == {"diff": 0.0, "ci95": [0.0, 0.0], "n_pairs": 5}


def test_cli_stance_scores_the_sentence_after_each_half_and_compares_models(tmp_path, capsys):
    model = tiny_model(LLAMA, seed=4)
    save_checkpoint(model, LLAMA, tmp_path / "m")
    save_checkpoint(tiny_model(LLAMA, seed=5), LLAMA, tmp_path / "n")
    _pairs_file(tmp_path / "p.jsonl", 20)
    args = [
        "--pairs",
        str(tmp_path / "p.jsonl"),
        "--folds",
        "4",
        "--layer",
        "2",
        "--stance",
        "t7 t8",
        "--json",
    ]
    rc = pp.main(["--model", str(tmp_path / "m"), "--model", str(tmp_path / "m"), *args])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    first, second = out["models"]
    pairs = pp.minimal_pairs(pp.load_prompts(str(tmp_path / "p.jsonl")))
    tok = tiny_tokenizer(LLAMA["vocab_size"])
    want = forced.text_logprobs(model, tok, [a["prompt"] for a, _ in pairs], "t7 t8")
    want -= forced.text_logprobs(model, tok, [b["prompt"] for _, b in pairs], "t7 t8")
    np.testing.assert_allclose(first["stance_pair_margins"], want, rtol=1e-4, atol=1e-5)
    # wins are signs of margins: clear of 0 by far more than rounding, no BLAS can flip one
    assert np.abs(want).min() > 1e-3, np.abs(want).min()
    st = first["stance"]
    assert st["all"]["pairwise_accuracy"] == pytest.approx(np.mean(want > 0))
    assert sum(f["n_pairs"] for f in st["by_fold"]) == 20 and len(st["by_fold"]) == 4
    np.testing.assert_allclose(second["stance_pair_margins"], want, rtol=1e-4, atol=1e-5)
    (row,) = out["stance_vs_first"]  # the same model twice: no difference anywhere
    # exact: both models' wins are the same 0/1 signs (margins clear of 0), so each mean is 0
    assert row["all"]["diff"] == 0.0 and all(f["diff"] == 0.0 for f in row["by_fold"])
    rc = pp.main(["--model", str(tmp_path / "m"), "--model", str(tmp_path / "n"), *args[:-1]])
    text = capsys.readouterr().out
    assert rc == 0 and "stance 't7 t8'" in text and f"{tmp_path / 'n'} - {tmp_path / 'm'}" in text


def test_grade_featurizer_reads_the_states_of_each_row_alone(monkeypatch):
    """grade.Featurizer through frozen_states.block_states on a padded batch: per row, the
    answer-averaged stream after each feature block and the last token's after the last one,
    equal to the row's own unpadded pass block by block."""
    from evals import grade

    model, tok = tiny_model(LLAMA, seed=2), tiny_tokenizer(LLAMA["vocab_size"])
    monkeypatch.setattr(grade, "FEATURE_BLOCKS", (1, 3))
    feat = grade.Featurizer(model, tok)
    prompts, answers = ["t5 t6 t7", "t9"], ["t20 t21", "t22 t23 t24 t25"]
    got = feat(prompts, answers, batch=2)
    for row, (p, a) in enumerate(zip(prompts, answers, strict=True)):
        tokens, n_answer = feat.encode(p, a)
        h = model.embed(mx.array([tokens]))
        parts = []
        for i in range(3):
            h = model.blocks(h, range(i, i + 1))
            if i + 1 in (1, 3):
                parts.append(np.array(h[0, -n_answer:].mean(axis=0)))
        parts.append(np.array(h[0, -1]))
        want = np.concatenate([*parts, grade.text_stats(a)])
        np.testing.assert_allclose(got[row], want, rtol=1e-4, atol=1e-5)
