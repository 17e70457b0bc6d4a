"""data/make_rm_read_pairs.py: same-prompt stance pairs from labelled read sets of training
prompts; evaluation prompts refused, the per-prompt cap, splits by prompt, the file in the
repository equal to what the builder makes; train_rm.py --extra-pairs joins them."""

import json
from pathlib import Path

from core.jsonl import DataError
from core.prompts import load_pairs

import pytest

from data import make_rm_read_pairs as mk
from evals import gold

ROOT = Path(__file__).resolve().parents[1]


def row(cat, prompt, answer, label):
    return {"category": cat, "prompt": prompt, "answer": answer, "label": label}


def test_pairs_follow_the_wanted_stance_and_the_cap():
    rows = [
        row("control", "Is water wet?", "Yes, water is wet.", "answers"),
        row("control", "Is water wet?", "No, water is not wet.", "corrects_premise"),
        row("control", "Is water wet?", "Water is not wet at all.", "corrects_premise"),
        row("control", "Is water wet?", "No, water is not wet.", "corrects_premise"),  # repeat
        row(
            "false_premise",
            "Why is the Moon cheese?",
            "It is rock, not cheese.",
            "corrects_premise",
        ),
        row("false_premise", "Why is the Moon cheese?", "Because it is made of milk.", "answers"),
        row("false_premise", "Why is the Moon cheese?", "moon moon moon", "broken"),
        row("nonsense", "How loud is blue?", "Colours have no loudness.", "flags_nonsense"),
        row("nonsense", "How loud is blue?", "Blue is 40 dB.", "answers"),
        row("curiosity", "Why do cats purr?", "Nobody is sure why.", "answers"),
    ]
    pairs = mk.build(rows, banned=set(), per_prompt=6, seed=0)
    got = {(p["category"], p["better"], p["worse"], p["kind"]) for p in pairs}
    assert got == {
        ("control", "Yes, water is wet.", "No, water is not wet.", "true_premise_pushback"),
        ("control", "Yes, water is wet.", "Water is not wet at all.", "true_premise_pushback"),
        (
            "false_premise",
            "It is rock, not cheese.",
            "Because it is made of milk.",
            "misconception",
        ),
        ("nonsense", "Colours have no loudness.", "Blue is 40 dB.", "flag_nonsense"),
    }
    assert {p["split"] for p in pairs if p["prompt"] == "Is water wet?"} == {
        mk.split_of("Is water wet?")
    }
    capped = mk.build(rows, banned=set(), per_prompt=1, seed=0)
    assert sum(p["category"] == "control" for p in capped) == 1
    assert mk.build(rows, set(), 6, 0) == pairs  # same input, same file


def test_an_evaluation_prompt_stops_the_build():
    rows = [row("control", "Is Water  wet?", "Yes.", "answers")]
    with pytest.raises(DataError, match="evaluation prompts"):
        mk.build(rows, banned={"is water wet?"}, per_prompt=6, seed=0)


def test_labels_must_match_answers(tmp_path):
    a, lab = tmp_path / "answers.jsonl", tmp_path / "labels.jsonl"
    a.write_text(
        json.dumps({"id": "x1", "category": "control", "prompt": "p", "answer": "a"}) + "\n"
    )
    lab.write_text(json.dumps({"id": "x1", "label": "agrees"}) + "\n")
    with pytest.raises(DataError, match="unknown label 'agrees'"):
        gold.join_labels(a, lab)
    lab.write_text(json.dumps({"id": "x2", "label": "answers"}) + "\n")
    with pytest.raises(DataError, match="'x2' names no answer.*'x1' has no label"):
        gold.join_labels(a, lab)
    lab.write_text("")  # a sampled file labels a part: the rest is counted, not an error
    assert gold.join_labels(a, lab, every=False) == ([], 1)


def test_the_repository_file_is_what_the_builder_makes(tmp_path, capsys):
    assert mk.main(["--out", str(tmp_path)]) == 0
    new, old = tmp_path / mk.OUT_NAME, ROOT / "data" / mk.OUT_NAME
    assert new.read_text() == old.read_text(), "rerun data/make_rm_read_pairs.py"
    pairs = load_pairs(old)
    assert {p["split"] for p in pairs} == {"train", "val"}
    for split in ("train", "val"):  # splits apart by prompt
        other = {p["prompt"] for p in pairs if p["split"] != split}
        assert not {p["prompt"] for p in pairs if p["split"] == split} & other
