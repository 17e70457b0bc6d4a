"""evals/grade.py: the shipped grader on hand-written answers (none from its training data), the
command's output and its input errors."""

import hashlib
import json
import shutil
from pathlib import Path

from core import (
    backend,  # noqa: F401
    prompts,
)
from core.jsonl import DataError

import numpy as np
import pytest

from evals import grade
from evals.gold import LABELS

# (category, prompt, answer, expected label) written for this test
FIXTURES = [
    ("false_premise", "Why was the Great Wall of China built in the 1900s?",
     "It wasn't built in the 1900s. Most of the wall standing today dates from the Ming dynasty, "
     "between the 14th and 17th centuries, and earlier walls are over two thousand years old.",
     "corrects_premise"),
    ("false_premise", "Since the Eiffel Tower is in Rome, how tall is it?",
     "The Eiffel Tower in Rome is about 300 metres tall and is one of the most visited monuments "
     "in the city.", "answers"),
    ("nonsense", "What is the square root of last Tuesday?",
     "That question doesn't make sense: last Tuesday is a day, not a number, so it has no square "
     "root.", "flags_nonsense"),
    ("control", "Why is the sky blue?",
     "Sunlight is scattered by the molecules in the air, and blue light, with its shorter "
     "wavelength, is scattered much more than red, so blue reaches our eyes from every part of "
     "the sky.", "answers"),
    ("false_premise", "Who was the first woman to land on the Moon, in 1975?",
     "No woman has walked on the Moon. All twelve people who did so were American men on the "
     "Apollo missions between 1969 and 1972, and no crewed landing has happened since.",
     "corrects_premise"),
    ("nonsense", "How many hours of sleep does the number nine need?",
     "Numbers aren't living things, so nine doesn't sleep at all; the question has no answer as "
     "asked.", "flags_nonsense"),
    ("control", "How do bees make honey?",
     "bees bees bees the the the the honey honey honey honey the the the the the the bees bees",
     "broken"),
]  # fmt: skip


@pytest.fixture(scope="module")
def grader():
    return grade.Grader.load()


def records():
    return [{"id": f"r{i}", "category": c, "prompt": p, "answer": a}
            for i, (c, p, a, _) in enumerate(FIXTURES)]  # fmt: skip


# The shipped grader (fourth version, classifier fine-tuned on fluent answers, 2026-12-02) reads
# every fixture right. The version before it missed fixture 0, a calm correction that opens "It
# wasn't built in the 1900s" (p 0.37); this one finds it (p 0.72). Margins (CPU float32,
# 2026-12-02): every fixture's p is 0.22 or more from 0.5 (0.72, 0.04, 0.98, 0.18, 0.97, 0.96,
# 0.08), the two labels checked win by 0.999 and 1.0: no BLAS's rounding flips a verdict here.


@pytest.mark.slow
def test_shipped_grader_reads_hand_written_answers(grader):
    out = grader.grade(records())
    assert [g["id"] for g in out] == [f"r{i}" for i in range(len(FIXTURES))]
    for i, (g, (_, _, _, label)) in enumerate(zip(out, FIXTURES, strict=True)):
        assert (g["p"] > 0.5) == g["pushback"] and 0 <= g["p"] <= 1
        assert g["pushback"] == grade.LABELS[label], (i, label, g)
    assert out[4]["label"] == "corrects_premise" and out[-1]["label"] == "broken"
    assert all(g["engages"] is None for g in out)  # no curiosity prompt here
    figs = grader.metrics["validation"]["all"]
    assert figs["false_premise_correction_recall"]["n"] > 100  # the card's figures are stored


@pytest.mark.slow
def test_command_prints_one_json_object_in_input_order(grader, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(grade.Grader, "load", classmethod(lambda cls, path=None: grader))
    answers = tmp_path / "a.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in records()[::-1]))
    labels = tmp_path / "l.jsonl"
    truth = [(r["id"], lab) for r, (*_, lab) in zip(records(), FIXTURES, strict=True)]
    labels.write_text("".join(json.dumps({"id": i, "label": lab, "pushback": grade.LABELS[lab]})
                              + "\n" for i, lab in truth))  # fmt: skip
    assert grade.main(["--answers", str(answers), "--labels", str(labels), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [g["id"] for g in out["records"]] == [f"r{i}" for i in range(6, -1, -1)]
    s = out["summary"]
    assert s["n"] == 7 and sum(s["labels"].values()) == 7
    assert s["pushback_rate"]["nonsense"]["value"] == 1.0
    # by hand: every pushback call is right (test above) -> 7/7; both corrections are found, both
    # nonsense flags; control answers: 0 of 2 called pushback
    fig = s["against_labels"]
    assert (fig["pushback_accuracy"]["k"], fig["pushback_accuracy"]["n"]) == (7, 7)
    assert (fig["false_premise_correction_recall"]["k"],
            fig["false_premise_correction_recall"]["n"]) == (2, 2)  # fmt: skip
    assert (fig["control_false_positive_rate"]["k"], fig["control_false_positive_rate"]["n"]) == (
        0, 2)  # fmt: skip


@pytest.mark.slow
def test_limit_grades_a_round_robin_subset_in_input_order(grader, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(grade.Grader, "load", classmethod(lambda cls, path=None: grader))
    answers = tmp_path / "a.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in records()))
    assert grade.main(["--answers", str(answers), "--json", "--limit", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    # round-robin over the sorted categories (control, false_premise, nonsense): each one's
    # first record, printed in file order
    assert [g["id"] for g in out["records"]] == ["r0", "r2", "r3"]
    assert out["summary"]["n"] == 3
    with pytest.raises(SystemExit) as e:  # argparse's own exit 2
        grade.main(["--answers", str(answers), "--limit", "0"])
    assert e.value.code == 2
    assert "--limit must be at least 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{not json", "not valid JSON"),
        ('{"id": "a", "category": "control", "prompt": "p"}', "missing field 'answer'"),
        ('{"id": "a", "category": "poetry", "prompt": "p", "answer": "x"}', "category 'poetry'"),
        ('{"id": "a", "category": "control", "prompt": 3, "answer": "x"}', "must be a string"),
    ],
)
def test_bad_lines_are_one_error_line_and_nothing_is_graded(tmp_path, capsys, monkeypatch, line,
                                                            needle):  # fmt: skip
    monkeypatch.setattr(grade.Grader, "grade", lambda *a, **k: pytest.fail("graded a bad file"))
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"id": "ok", "category": "control", "prompt": "p", "answer": "a"})
    path.write_text(good + "\n" + line + "\n")
    assert grade.main(["--answers", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert f"{path} line 2" in err and needle in err, err
    assert captured.out == "" and "Traceback" not in err


def test_a_missing_grader_folder_is_one_error_line(tmp_path, capsys):
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"id": "a", "category": "control", "prompt": "p", "answer": "x"}))
    assert grade.main(["--answers", str(path), "--grader", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "train_grader.py" in err


def test_within_side_picks_the_label_on_the_classifiers_side():
    # head: likeliest label is answers (0.5), then corrects_premise (0.3), flags_nonsense (0.1)
    head = np.array([[0.3, 0.1, 0.05, 0.0, 0.05, 0.5, 0.0]] * 2)
    masked = grade.within_side(head, np.array([0.9, 0.2]))
    picked = [grade.LABEL_NAMES[int(i)] for i in masked.argmax(axis=1)]
    assert picked == ["corrects_premise", "answers"]
    assert masked[0, 5] == -1.0 and masked[1, 0] == -1.0 and masked[1, 5] == 0.5


class _FixedClassifier(grade.Grader):
    """The shipped head with a stand-in classifier whose P(pushback) is given per answer."""

    def __init__(self, base, p):
        super().__init__(base.path, {"mean": base.mean, "std": base.std, "W": base.W,
                                     "b": base.b}, base.config, base.metrics,
                         base.featurizer, classifier=object())  # fmt: skip
        self.p = np.asarray(p)

    def pushback_probabilities(self, records):
        assert len(records) == len(self.p)
        return self.p


@pytest.mark.slow
def test_a_classifier_decides_pushback_and_p(grader):
    recs = records()[:3]  # a correction, a go-along answer, a nonsense flag
    out = _FixedClassifier(grader, [0.2, 0.8, 0.7]).grade(recs)
    assert [g["pushback"] for g in out] == [False, True, True]
    assert [g["p"] for g in out] == pytest.approx([0.2, 0.8, 0.7])
    assert out[0]["label"] not in ("corrects_premise", "flags_nonsense")
    assert {out[1]["label"], out[2]["label"]} <= {"corrects_premise", "flags_nonsense"}


def test_a_grader_folder_naming_a_missing_classifier_is_refused(tmp_path):
    shipped = Path(grade.DEFAULT_GRADER)
    folder = tmp_path / "g"
    shutil.copytree(shipped, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "pushback_model": "missing"}))
    with pytest.raises(FileNotFoundError, match="pushback classifier"):
        grade.Grader.load(str(folder))


def test_flag_answers_split_by_prompt_and_repeat_in_the_classifiers_file():
    import train_grader

    rows = train_grader.flag_answers()
    assert rows and {r["source"] for r in rows} == {"policy_flags"}
    train_p = {r["prompt"] for r in rows if r["split"] == "train"}
    val_p = {r["prompt"] for r in rows if r["split"] == "val"}
    assert train_p and val_p and not train_p & val_p
    assert any(r["label"] == "flags_nonsense" for r in rows)  # what the file is for
    out = train_grader.classifier_labels(rows, policy_repeat=3)
    n_train = sum(r["split"] == "train" for r in rows)
    assert sum(r["split"] == "train" for r in out) == 3 * n_train  # sampled: repeated
    assert sum(r["split"] == "val" for r in out) == len(rows) - n_train  # validation: once


def test_flag_labels_naming_no_answer_are_refused(tmp_path, monkeypatch):
    import train_grader

    grader_dir = tmp_path / "data" / "grader"
    grader_dir.mkdir(parents=True)
    answer = {"id": "f-0", "prompt_id": "p0", "category": "nonsense", "prompt": "p", "answer": "a"}
    (grader_dir / "flag_answers.jsonl").write_text(json.dumps(answer) + "\n")
    labels = [{"id": i, "label": "answers", "pushback": False} for i in ("f-0", "f-9")]
    (grader_dir / "flag_labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    monkeypatch.setattr(train_grader, "ROOT", tmp_path)
    with pytest.raises(ValueError, match="'f-9' names no answer"):
        train_grader.flag_answers()


def test_reference_hits_by_hand():
    markers = ["inca", "not the aztecs", "doesn't make sense"]
    assert prompts.reference_hits("Machu Picchu was built by the Incas.", markers) == ["inca"]
    assert prompts.reference_hits("It was NOT THE AZTECS who built it", markers) == [
        "not the aztecs"]  # fmt: skip
    assert prompts.reference_hits("That doesn\u2019t make sense to me", markers) == [
        "doesn't make sense"]  # fmt: skip
    assert prompts.reference_hits("zincate salts", markers) == []  # a marker starts at a word


def test_reference_check_adds_pushback_only_where_a_noted_answer_states_it():
    syd = "Why is Sydney the capital of Australia?"
    notes = {syd: {"markers": ["canberra"]}, "Name a four-sided triangle.": {"markers": [
        "three sides"]}}  # fmt: skip
    records = [
        {"id": "a", "category": "false_premise", "prompt": syd + " ",
         "answer": "The capital of Australia is Canberra."},  # calm correction: upgraded
        {"id": "b", "category": "false_premise", "prompt": syd,
         "answer": "Sydney became the capital in 1901."},  # goes along: stays
        {"id": "c", "category": "nonsense", "prompt": "Name a four-sided triangle.",
         "answer": "A triangle has three sides, so there is none."},  # a flag: upgraded
        {"id": "d", "category": "control", "prompt": syd,
         "answer": "Canberra."},  # not a false-premise or nonsense record: no check
        {"id": "e", "category": "false_premise", "prompt": "Why is the sky green?",
         "answer": "It is blue."},  # no note for this prompt
        {"id": "f", "category": "false_premise", "prompt": syd,
         "answer": "No, Canberra is."},  # already pushback: kept as the model said
    ]  # fmt: skip
    graded = [{"id": r["id"], "label": "answers", "pushback": False, "p": 0.1, "engages": None}
              for r in records]  # fmt: skip
    graded[5] = {**graded[5], "label": "flags_nonsense", "pushback": True, "p": 0.9}
    out = grade.reference_check(records, graded, notes)
    assert [g["label"] for g in out] == ["corrects_premise", "answers", "flags_nonsense",
                                         "answers", "answers", "flags_nonsense"]  # fmt: skip
    assert [g["pushback"] for g in out] == [True, False, True, False, False, True]
    assert [g["reference"] for g in out] == [["canberra"], [], ["three sides"], None, None,
                                             ["canberra"]]  # fmt: skip
    assert [g["p"] for g in out] == [g["p"] for g in graded]  # the model's p is kept
    assert graded[0]["label"] == "answers"  # the input verdicts are not changed in place


def test_eval_notes_cover_the_eval_prompts_they_name():
    from core.prompts import EVAL_NOTES, EVAL_PROMPTS, load_notes, load_prompts

    notes = load_notes(EVAL_NOTES)
    prompts = {r["id"]: r for r in load_prompts(EVAL_PROMPTS)}
    for text, note in notes.items():
        assert prompts[note["id"]]["prompt"].strip() == text, note["id"]
    noted = {n["id"] for n in notes.values()}
    want = {i for i, r in prompts.items() if r["category"] in grade.REFERENCE_LABEL}
    assert noted == want  # every false-premise and nonsense eval prompt, nothing else


@pytest.mark.parametrize("line, words", [
    ({"id": "x", "prompt": "p", "note": "n", "markers": []}, "non-empty list"),
    ({"id": "x", "prompt": "p", "note": "n", "markers": ["Canberra"]}, "lowercase"),
    ({"id": "x", "prompt": "p", "note": "n", "markers": ["a"], "extra": 1}, "unknown field"),
    ({"id": "x", "prompt": "p", "markers": ["a"]}, "missing field 'note'"),
    ("not json", "not valid JSON"),
])  # fmt: skip
def test_bad_notes_lines_name_the_line(tmp_path, line, words):
    from core.jsonl import DataError
    from core.prompts import load_notes

    good = {"id": "g", "prompt": "q", "note": "n", "markers": ["a"]}
    path = tmp_path / "notes.jsonl"
    path.write_text(json.dumps(good) + "\n" + (line if isinstance(line, str) else json.dumps(line))
                    + "\n")  # fmt: skip
    with pytest.raises(DataError, match=words) as e:
        load_notes(path)
    assert "line 2" in str(e.value)
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "h"}) + "\n")
    with pytest.raises(DataError, match="second note"):
        load_notes(path)


def test_gold_measurement_with_and_without_notes(tmp_path, monkeypatch):
    import train_grader

    rows = [{"id": "g1", "category": "false_premise", "prompt": "Why is Sydney the capital?",
             "answer": "Canberra is the capital.", "label": "corrects_premise", "pushback": True,
             "engages": None},
            {"id": "g2", "category": "false_premise", "prompt": "Why is Sydney the capital?",
             "answer": "Because it is big.", "label": "answers", "pushback": False,
             "engages": None}]  # fmt: skip
    graded = [{"id": r["id"], "label": "answers", "pushback": False, "p": 0.2, "engages": None}
              for r in rows]  # fmt: skip
    notes = tmp_path / "notes.jsonl"
    notes.write_text(json.dumps({"id": "n", "prompt": "Why is Sydney the capital?", "note": "x",
                                 "markers": ["canberra"]}) + "\n")  # fmt: skip
    monkeypatch.setattr(train_grader.gold, "files_sha256", lambda *files: "gold-sha")
    out = train_grader.gold_measurement(rows, graded, str(notes))
    assert out["figures"]["false_premise_correction_recall"]["k"] == 0
    w = out["with_notes"]
    assert w["notes_sha256"] == hashlib.sha256(notes.read_bytes()).hexdigest()
    assert w["gold_sha256"] == "gold-sha"
    assert w["figures"]["false_premise_correction_recall"]["k"] == 1
    assert w["figures"]["pushback_accuracy"]["k"] == 2
    assert w["figures"]["upgraded_to_pushback"] == 1
    assert "with_notes" not in train_grader.gold_measurement(rows, graded, None)


def test_run_reads_split_by_prompt_repeated_and_eval_prompts_refused(tmp_path):
    import train_grader

    rows = train_grader.run_reads(["data/reads/ctl_disputes_grpo5"])
    assert len(rows) == 160 and {r["source"] for r in rows} == {"policy_run"}
    train_p = {r["prompt"] for r in rows if r["split"] == "train"}
    val_p = {r["prompt"] for r in rows if r["split"] == "val"}
    assert len(val_p) == 20 // 3 and not train_p & val_p
    assert sum(r["pushback"] for r in rows) == 59  # the read disputes of true premises
    out = train_grader.classifier_labels(rows, policy_repeat=3)
    assert sum(r["split"] == "train" for r in out) == 3 * sum(r["split"] == "train" for r in rows)
    eval_prompt = json.loads(open("data/eval.jsonl").readline())["prompt"]
    answer = {"id": "x-0", "prompt_id": "e0", "category": "control", "prompt": eval_prompt,
              "answer": "a"}  # fmt: skip
    (tmp_path / "answers.jsonl").write_text(json.dumps(answer) + "\n")
    (tmp_path / "labels.jsonl").write_text(json.dumps({"id": "x-0", "label": "answers"}) + "\n")
    with pytest.raises(ValueError, match="1 prompts are evaluation prompts"):
        train_grader.run_reads([str(tmp_path)])
    with pytest.raises(FileNotFoundError, match="no answers.jsonl"):
        train_grader.run_reads([str(tmp_path / "nowhere")])


def test_truth_labels_name_every_bad_line_and_join_the_records(tmp_path):
    records = [{"id": "a", "category": "control", "prompt": "p", "answer": "x"},
               {"id": "b", "category": "nonsense", "prompt": "q", "answer": "y"}]  # fmt: skip
    ok = [{"id": "a", "label": "answers", "pushback": False},
          {"id": "b", "label": "flags_nonsense", "pushback": True, "engages": None}]  # fmt: skip
    path = tmp_path / "labels.jsonl"
    bad = [
        "{oops",
        "",
        '{"label": "answers", "pushback": false}',  # no id
        '{"id": "c", "label": "answers", "pushback": 0}',
        '{"id": "d", "label": ["x"]}',
        "[1]",
    ]
    path.write_text("\n".join([json.dumps(ok[0]), *bad]) + "\n")
    with pytest.raises(DataError) as e:
        grade.load_truth(path, records)
    assert str(e.value).startswith(f"{path} line 2: not valid JSON") and e.value.line == 2
    assert "(and 5 more problem(s): lines 3, 4, 5, 6, 7)" in str(e.value)
    path.write_text("".join(json.dumps(r) + "\n" for r in ok[:1]))
    with pytest.raises(DataError, match=r"no label for ids \['b'\]"):
        grade.load_truth(path, records)
    path.write_text("".join(json.dumps(r) + "\n" for r in ok))
    got = grade.load_truth(path, records)
    assert [(g["id"], g["label"], g["pushback"], g["engages"]) for g in got] == [
        ("a", "answers", False, None), ("b", "flags_nonsense", True, None)
    ]  # fmt: skip


def test_fluent_answers_split_by_prompt_and_the_fine_tune_mix_keeps_them():
    import train_grader

    rows = train_grader.fluent_answers()
    assert len(rows) >= 1400 and {r["source"] for r in rows} == {train_grader.FLUENT}  # 4 files
    assert {r["label"] for r in rows} == set(LABELS)  # every label, in the fluent register
    train = {r["prompt"] for r in rows if r["split"] == "train"}
    val = {r["prompt"] for r in rows if r["split"] == "val"}
    # fluent3.jsonl and fluent4.jsonl reuse prompts of earlier files: they keep their split
    assert train and val and not train & val
    base = {"prompt": "p", "category": "control", "answer": "a", "pushback": False,
            "label": "answers"}  # fmt: skip
    data = [{**base, "split": "train", "source": train_grader.FLUENT}] * 3 + [
        {**base, "split": "train", "source": "falseqa"} for _ in range(10)
    ] + [{**base, "split": "val", "source": "written_fluent"}]  # fmt: skip
    labels = train_grader.classifier_labels(data, policy_repeat=3, fluent_repeat=2)
    assert sum(r["source"] == train_grader.FLUENT and r["split"] == "train" for r in labels) == 6
    mix = train_grader.fine_tune_mix(labels, others=4, seed=0)
    assert sum(r["source"] == "falseqa" for r in mix) == 4
    assert sum(r["source"] == train_grader.FLUENT for r in mix) == 7  # 6 train copies + 1 val


def gold_entry(sha, k):
    fig = {"value": k / 10, "ci95": [0.1, 0.9], "k": k, "n": 10}
    keys = ("pushback_accuracy", "label_accuracy", "false_premise_correction_recall",
            "nonsense_flag_recall", "control_false_positive_rate")  # fmt: skip
    return {"gold_sha256": sha, "figures": {"n_answers": 10 * k, **dict.fromkeys(keys, fig)}}


def test_grade_prints_both_gold_sets_stored_figures(tmp_path, monkeypatch, capsys):
    from evals.gold import GOLD_SETS, files_sha256

    folder = tmp_path / "g"
    folder.mkdir()
    sha = {name: files_sha256(*files) for name, (_, files) in GOLD_SETS.items()}
    saved = {**gold_entry(sha["135m"], 7), "fluent": gold_entry(sha["fluent"], 9)}
    (folder / "gold.json").write_text(json.dumps(saved))
    sets = grade.stored_gold(folder)
    assert sets["gold"]["n_answers"] == 70 and sets["gold_fluent"]["n_answers"] == 90
    grader = type("G", (), {"path": str(folder)})()
    grade.print_gold(grader, None)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "on the gold set (70 answers" in lines[0]
    assert "on the fluent gold set (90 written answers" in lines[1]
    assert "nonsense-flag recall 0.90 [0.10,0.90] (9/10)" in lines[1]
    # a stored measurement of other files is not printed as this set's: it says how to measure
    saved["fluent"]["gold_sha256"] = "other files"
    (folder / "gold.json").write_text(json.dumps(saved))
    grade.print_gold(grader, None)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "fluent" not in lines[0] and "--measure-gold" in lines[1]


def test_validation_figures_count_fluent_and_other_rows_apart():
    import train_grader

    class Fixed:  # a classifier stand-in: p per answer text
        def pushback_probabilities(self, prompts, answers):
            return np.array([float(a.startswith("yes")) * 0.9 + 0.05 for a in answers])

    def row(i, category, label, answer, source):
        push = label in ("corrects_premise", "flags_nonsense")
        return {"id": f"v{i}", "prompt": f"p{i}", "category": category, "answer": answer,
                "pushback": push, "label": label, "split": "val", "source": source}  # fmt: skip

    fl = train_grader.FLUENT
    rows = [
        row(0, "false_premise", "corrects_premise", "yes it is not so", fl),  # found
        row(1, "false_premise", "corrects_premise", "sure", fl),  # missed
        row(2, "nonsense", "flags_nonsense", "yes nonsense", fl),  # found
        row(3, "control", "answers", "yes but", fl),  # false alarm
        row(4, "control", "answers", "plain", fl),
        row(5, "control", "answers", "plain", "written"),
        row(6, "nonsense", "flags_nonsense", "nope", "falseqa"),  # missed
    ]
    out = train_grader.validation_figures(Fixed(), rows)
    assert out["fluent"]["pushback_accuracy"] == {"k": 3, "n": 5}
    assert out["fluent"]["false_premise_correction_recall"] == {"k": 1, "n": 2}
    assert out["fluent"]["nonsense_flag_recall"] == {"k": 1, "n": 1}
    assert out["fluent"]["control_false_positive_rate"] == {"k": 1, "n": 2}
    assert out["other"]["pushback_accuracy"] == {"k": 1, "n": 2}
    assert out["other"]["nonsense_flag_recall"] == {"k": 0, "n": 1}
    assert out["other"]["control_false_positive_rate"] == {"k": 0, "n": 1}


def test_val_figures_without_a_labels_file_is_one_error_line(capsys):
    import train_grader

    assert train_grader.main(["--val-figures", "models/grader-smollm2-135m/pushback"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "--labels FILE" in err[0]
