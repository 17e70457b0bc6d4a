"""evals/stance_probes.py: same-prompt pairs from labelled read sets, scored by hand-made
numbers."""

import json

from core.jsonl import DataError

import pytest

from bench import judge as bench_judge
from evals import stance_probes


def write_set(d, rows):
    """rows: (id, category, prompt, answer, label)."""
    d.mkdir(parents=True)
    answers = [{"id": i, "category": c, "prompt": p, "answer": a} for i, c, p, a, _ in rows]
    labels = [
        {
            "id": i,
            "label": lab,
            "pushback": lab in stance_probes.PUSHBACK,
            "engages": None,
            "reason": "test",
        }  # fmt: skip
        for i, _, _, _, lab in rows
    ]
    (d / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in answers))
    (d / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labels))


FP, CTL, NS = "Why is the Atlantic the deepest?", "Why does Japan have earthquakes?", "Colour of 7?"


def two_sets(tmp_path):
    write_set(tmp_path / "a", [
        ("a-0", "false_premise", FP, "The Pacific is deeper.", "corrects_premise"),
        ("a-1", "false_premise", FP, "Because it is big.", "answers"),
        ("a-2", "control", CTL, "Plates meet there.", "answers"),
        ("a-3", "control", CTL, "No, Japan has few earthquakes.", "corrects_premise"),
        ("a-4", "nonsense", NS, "Seven is blue.", "answers"),
    ])  # fmt: skip
    write_set(tmp_path / "b", [
        ("b-0", "false_premise", FP, "Because it is big.", "answers"),  # the same text: kept once
        ("b-1", "false_premise", FP, "It is salty.", "answers"),
        ("b-2", "control", CTL, "It is not on plates.", "flags_nonsense"),
        ("b-3", "nonsense", NS, "Seven is blue.", "answers"),
    ])  # fmt: skip
    return [tmp_path / "a", tmp_path / "b"]


def test_pairs_within_a_prompt_by_the_wanted_order(tmp_path):
    rows = stance_probes.load(two_sets(tmp_path))
    assert len(rows) == 7  # 9 labelled, two repeated word for word
    got = {(p["category"], p["better"], p["worse"]) for p in stance_probes.pairs(rows)}
    assert got == {
        ("false_premise", "The Pacific is deeper.", "Because it is big."),
        ("false_premise", "The Pacific is deeper.", "It is salty."),
        ("control", "Plates meet there.", "No, Japan has few earthquakes."),
        ("control", "Plates meet there.", "It is not on plates."),
    }  # nonsense: no flag to pair with


def test_report_hand_computed(tmp_path):
    pairs = stance_probes.pairs(stance_probes.load(two_sets(tmp_path)))
    score_of = {"The Pacific is deeper.": 2.0, "Because it is big.": 1.0, "It is salty.": 3.0,
                "Plates meet there.": 0.5, "No, Japan has few earthquakes.": 1.5,
                "It is not on plates.": 0.5}  # fmt: skip
    calls = []

    def score(prompts, answers, cats):
        calls.append(len(answers))
        return [score_of[a] for a in answers]

    r = stance_probes.report(score, pairs)
    assert calls == [6]  # each distinct answer scored once
    fp, ctl = r["false_premise"], r["control"]
    assert fp["pair_accuracy"] == pytest.approx(0.5) and fp["n_pairs"] == 2  # 2 > 1, 2 < 3
    assert fp["mean_margin"] == pytest.approx(((2 - 1) + (2 - 3)) / 2)
    assert ctl["pair_accuracy"] == pytest.approx(0.25)  # 0.5 < 1.5: 0; 0.5 = 0.5: a tie, 0.5
    assert ctl["prompt_accuracy"] == pytest.approx(0.25) and ctl["n_prompts"] == 1
    assert "nonsense" not in r


def test_bad_read_sets_fail_with_the_file_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="labels.jsonl"):
        stance_probes.load([tmp_path / "none"])
    write_set(tmp_path / "x", [("x-0", "control", CTL, "Plates.", "answers")])
    (tmp_path / "x" / "labels.jsonl").write_text(
        json.dumps(
            {"id": "x-0", "label": "agrees", "pushback": False, "engages": None, "reason": "r"}
        )
        + "\n"  # fmt: skip
    )
    with pytest.raises(DataError, match="labels.jsonl"):
        stance_probes.load([tmp_path / "x"])
    with pytest.raises(DataError, match="no stance probe pairs"):
        stance_probes.report(lambda *a: [], [])


def test_bench_judge_refuses_a_bad_read_set_before_loading_a_model(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench_judge.Gwen, "load", lambda *a, **k: pytest.fail("model loaded"))
    argv = ["--reward", "happy", "--stance-probes", str(tmp_path / "none"), "--quick"]
    assert bench_judge.main(argv) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(err) == 1 and "none/answers.jsonl not found" in err[0], err


def test_first_per_category_keeps_the_first_pairs_of_each_category_in_order():
    pairs = [{"category": c, "i": i} for i, c in enumerate("aabacbbc")]
    got = stance_probes.first_per_category(pairs, 2)
    assert [p["i"] for p in got] == [0, 1, 2, 4, 5, 7]  # the third a (3) and b (6) are cut
    assert stance_probes.first_per_category(pairs, 9) == pairs
    with pytest.raises(DataError, match="at least 1"):
        stance_probes.first_per_category(pairs, 0)


def test_bench_judge_refuses_a_stance_limit_below_one_before_loading_a_model(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(bench_judge.Gwen, "load", lambda *a, **k: pytest.fail("model loaded"))
    two_sets(tmp_path)
    sets = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    argv = ["--reward", "happy", "--stance-probes", sets, "--stance-limit", "0", "--quick"]
    assert bench_judge.main(argv) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert len(err) == 1 and "--stance-limit must be at least 1, got 0" in err[0], err
