"""experiments/category_probe.py: the threshold share and folds by hand, a probe that must find a
category the first word gives away, and the command's output and input errors."""

import json

from core import backend  # noqa: F401

# isort: split
import numpy as np
import pytest
from helpers import LLAMA, save_checkpoint, tiny_model

from experiments import category_probe as cp


def test_share_at_a_control_level_by_hand():
    neg = np.arange(10.0)  # the 0.8 quantile is 7.2: 8 and 9 pass, 2 of 10
    share, passed = cp.share_at(np.array([7.0, 7.5, 9.5, 1.0]), neg, 0.2)
    assert passed == pytest.approx(0.2) and share == pytest.approx(0.5)


def test_inner_folds_keep_a_twin_with_its_false_premise():
    recs = [{"id": f"fp{i}"} for i in range(12)] + [
        {"id": f"tw{i}", "pair": f"fp{i}"} for i in range(12)
    ]
    fold = cp.inner_folds(recs, 4, seed=0)
    assert (fold[:12] == fold[12:]).all() and sorted(set(fold.tolist())) == [0, 1, 2, 3]


def test_fit_category_finds_a_separable_direction():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80, 5))
    y = np.where(x[:, 2] > 0, 1.0, -1.0)
    score, strength, inner = cp.fit_category(x, y, np.arange(80) % 4)
    assert inner > 0.95 and strength in cp.STRENGTHS
    assert np.mean((score(x) > 0) == (y > 0)) > 0.9


def _prompts(path, n, offset=0):
    """nonsense "t5 ...", false premises "t8 ...", controls "t6 ..." (their first word tells),
    all ending on "t95", as every prompt ends on the chat template's last token."""
    rng = np.random.default_rng(offset)
    rows = []
    for i in range(n):
        w = " ".join(f"t{x}" for x in rng.integers(20, 90, size=3))
        rows += [
            {"id": f"ns{offset}-{i}", "category": "nonsense", "prompt": f"t5 {w} t{i} t95"},
            {"id": f"fp{offset}-{i}", "category": "false_premise", "prompt": f"t8 {w} t{i} t95"},
            {"id": f"ct{offset}-{i}", "category": "control", "prompt": f"t6 {w} t{i} t95"},
        ]
    path.write_text("".join(json.dumps(r | {"source": "test"}) + "\n" for r in rows))
    return str(path)


def test_cli_finds_what_the_first_word_gives_away(tmp_path, capsys):
    save_checkpoint(tiny_model(LLAMA, seed=4), LLAMA, tmp_path / "m")
    train, test = _prompts(tmp_path / "tr.jsonl", 16), _prompts(tmp_path / "te.jsonl", 10, 1)
    args = ["--model", str(tmp_path / "m"), "--train", train, "--test", test, "--layer", "2"]
    assert cp.main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for cat in ("false_premise", "nonsense"):
        bow = out["bag_of_words"][cat][test]
        assert bow["auroc"] >= 0.95 and bow["share_at_control_level"] >= 0.9, bow
        assert bow["n"] == 10 and bow["n_control"] == 10
    m = out["models"][0]
    assert [r["layer"] for r in m["layers"]] == [0, 1, 2, 3] and m["read_layer"]["layer"] == 2
    # exact on purpose: before any block every prompt's state is the same token's embedding, a
    # constant ridge_fit leaves out, so every score is the same intercept and all pairs tie
    assert m["layers"][0]["nonsense"][test]["auroc"] == 0.5
    assert cp.main(args) == 0
    assert "nonsense vs control" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args,words",
    [
        (["--categories", "control"], "--categories 'control'"),
        (["--categories", "curiosity"], "has no ['curiosity'] prompts"),
        (["--control-level", "1.5"], "must be in (0, 1)"),
        (["--layer", "9"], "--layer 9 is outside 0..3"),
    ],
)
def test_cli_bad_input_is_one_error_line(tmp_path, capsys, args, words):
    save_checkpoint(tiny_model(LLAMA, seed=4), LLAMA, tmp_path / "m")
    train, test = _prompts(tmp_path / "tr.jsonl", 8), _prompts(tmp_path / "te.jsonl", 4, 1)
    rc = cp.main(["--model", str(tmp_path / "m"), "--train", train, "--test", test, *args])
    err = capsys.readouterr().err.strip().splitlines()
    err = [e for e in err if not e.startswith("[rl-values]")]
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: ") and words in err[0], err
