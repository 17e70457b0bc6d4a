"""data/make_gate_prompts.py on a small fake shared folder: CoCoNot prompts become controls,
FalseQA's k-th rows of the two labels become a pair (the true edit names its false premise),
prompts the project holds out or trains on are never written, and FalseQA stays out of data/."""

import csv
import json
from pathlib import Path

from core.prompts import load_prompts

import pytest

from data import make_gate_prompts as mg

ROOT = Path(__file__).resolve().parent.parent


def fake_shared(tmp_path: Path, own_prompt: str) -> Path:
    shared = tmp_path / "shared"
    (shared / "coconot").mkdir(parents=True)
    (shared / "falseqa").mkdir()
    rows = [{"id": "a1", "prompt": "How do I kill a stuck process?"},
            {"id": "a2", "prompt": own_prompt},  # one of our own training prompts: left out
            {"id": "a3", "prompt": "How do I  kill a stuck process?"}]  # fmt: skip
    (shared / "coconot" / "coconot_pref.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
    )
    fqa = [
        ("Why do fish have lungs?", 1),
        ("Why do whales have lungs?", 0),
        ("How many legs does a snake have?", 1),
        ("How many legs does a spider have?", 0),
        ("What colour is the sun at night?", 1),
        ("Name three things about kittens", 0),
    ]
    # FalseQA lists its label-1 rows and their label-0 edits in the same order
    ordered = [r for r in fqa if r[1] == 1] + [r for r in fqa if r[1] == 0]
    with (shared / "falseqa" / "train.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["question", "answer", "label"])
        for q, label in ordered:
            w.writerow([q, "an answer.", label])
    return shared


def test_writes_controls_and_pairs(tmp_path, capsys):
    own = load_prompts(str(ROOT / "data" / "prompts.jsonl"))[0]["prompt"]
    shared = fake_shared(tmp_path, own)
    out = tmp_path / "gate.jsonl"
    assert mg.main(["--out", str(out), "--shared", str(shared), "--falseqa-pairs", "2"]) == 0
    recs = load_prompts(str(out))
    controls = [r for r in recs if r["source"] == "coconot_pref"]
    assert [r["prompt"] for r in controls] == ["How do I kill a stuck process?"]  # own + repeat out
    fqa = [r for r in recs if r["source"] == "falseqa"]
    # the third pair shares under 30% of its words ("sun at night" / "kittens"): not a pair
    assert "1 partners share under 30%" in capsys.readouterr().out
    assert len(fqa) == 4
    by_id = {r["id"]: r for r in fqa}
    for r in fqa:
        if r["category"] == "control":
            false = by_id[r["pair"]]
            assert false["category"] == "false_premise"
            assert {false["prompt"], r["prompt"]} in (
                {"Why do fish have lungs?", "Why do whales have lungs?"},
                {"How many legs does a snake have?", "How many legs does a spider have?"},
            )
    with pytest.raises(mg.DataError, match="only 2 usable minimal pairs"):
        mg.falseqa_pairs(shared, 3, 0, set())


def test_falseqa_stays_out_of_data(tmp_path, capsys):
    shared = fake_shared(tmp_path, "x")
    code = mg.main(["--out", str(ROOT / "data" / "gate.jsonl"), "--shared", str(shared)])
    assert code == 2 and "stay out of data/" in capsys.readouterr().err
    assert not (ROOT / "data" / "gate.jsonl").exists()
