"""The gold set loads, is labelled throughout and meets its size targets; the loader rejects bad
files with the line number; grader_figures and wilson give hand-computed numbers."""

import json
import os

from core import stats
from core.jsonl import DataError
from core.prompts import CATEGORIES, held_out_prompts, load_prompts, norm
from core.stats import wilson

import pytest

from evals.gold import ANSWERS, LABELS, LABELS_FILE, grader_figures, load_fluent, load_gold

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECOND_LABELS = os.path.join(os.path.dirname(ANSWERS), "second_labels.jsonl")


@pytest.fixture(scope="module")
def gold():
    return load_gold(ANSWERS, LABELS_FILE)


# ---- the shipped files ---------------------------------------------------------------------


def test_gold_set_meets_its_targets(gold):
    def n(cat, pred):
        return sum(1 for g in gold if g["category"] == cat and pred(g))

    assert len(gold) >= 300
    assert {g["category"] for g in gold} == set(CATEGORIES)
    assert n("false_premise", lambda g: g["label"] == "corrects_premise") >= 30
    assert n("nonsense", lambda g: g["label"] == "flags_nonsense") >= 20
    assert n("control", lambda g: not g["pushback"]) >= 60
    assert all(isinstance(g["engages"], bool) for g in gold if g["category"] == "curiosity")


def test_gold_prompts_are_the_eval_prompts(gold):
    held_out = {r["id"]: r for r in load_prompts(os.path.join(ROOT, "data", "eval.jsonl"))}
    for g in gold:
        assert held_out[g["prompt_id"]]["prompt"] == g["prompt"]
        assert held_out[g["prompt_id"]]["category"] == g["category"]


def test_gold_prompts_are_not_training_prompts(gold):
    train = {r["prompt"] for r in load_prompts(os.path.join(ROOT, "data", "prompts.jsonl"))}
    assert not train & {g["prompt"] for g in gold}


# ---- the fluent gold set -------------------------------------------------------------------


@pytest.fixture(scope="module")
def fluent():
    return load_fluent()


def test_fluent_gold_set_meets_its_targets(fluent):
    def n(cat, pred):
        return sum(1 for g in fluent if g["category"] == cat and pred(g))

    assert len(fluent) >= 200
    assert n("false_premise", lambda g: g["label"] == "corrects_premise") >= 50
    assert n("nonsense", lambda g: g["label"] == "flags_nonsense") >= 50
    assert n("control", lambda g: not g["pushback"]) >= 60
    assert {g["label"] for g in fluent} == set(LABELS)  # the other labels are there too
    assert all(isinstance(g["engages"], bool) for g in fluent if g["category"] == "curiosity")


def test_fluent_gold_prompts_are_eval_prompts(fluent):
    held_out = {}
    for name in ("eval.jsonl", "eval_external.jsonl"):
        held_out |= {r["id"]: r for r in load_prompts(os.path.join(ROOT, "data", name))}
    for g in fluent:
        assert held_out[g["prompt_id"]]["prompt"] == g["prompt"], g["id"]
        assert held_out[g["prompt_id"]]["category"] == g["category"], g["id"]


def training_prompts() -> dict[str, str]:
    """normalized prompt -> the file that trains on it: every record of every file in the
    repository the grader or its classifier reads (train_grader.py; of a file with a `split`
    field, data/pushback_labels.jsonl, its train split: its test split holds some external eval
    prompts, which train_grader drops), and the policy's prompts. FalseQA and CoCoNot are read
    from outside the repository; build_data drops any eval prompt from them (test below)."""
    data = os.path.join(ROOT, "data")
    files = [os.path.join(data, "prompts.jsonl"), os.path.join(data, "pushback_labels.jsonl")]
    grader = os.path.join(data, "grader")
    files += [os.path.join(grader, f) for f in sorted(os.listdir(grader)) if f.endswith(".jsonl")]
    files += [os.path.join(data, "reads", d, "answers.jsonl")
              for d in ("warm_policy", "policy_runs_fpns")]  # fmt: skip
    out = {}
    for path in files:
        for line in open(path, encoding="utf-8"):
            r = json.loads(line)
            if "prompt" in r and r.get("split", "train") == "train":
                out.setdefault(norm(r["prompt"]), os.path.relpath(path, ROOT))
    return out


def test_fluent_gold_prompts_are_disjoint_from_training_data(fluent):
    train = training_prompts()
    assert len(train) > 1000  # the files were read
    overlap = {g["id"]: train[norm(g["prompt"])] for g in fluent if norm(g["prompt"]) in train}
    assert not overlap, f"fluent gold prompts that training data holds: {overlap}"
    # and train_grader.build_data drops every such prompt from whatever it reads
    assert {norm(g["prompt"]) for g in fluent} <= held_out_prompts(ROOT)


@pytest.mark.parametrize(
    "name", ["fluent.jsonl", "fluent2.jsonl", "fluent3.jsonl", "fluent4.jsonl"]
)
def test_fluent_training_file_validates_and_shares_no_prompt_with_the_fluent_gold(fluent, name):
    path = os.path.join(ROOT, "data", "grader", name)
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    assert len(rows) >= 200 and len({r["id"] for r in rows}) == len(rows)
    assert all(r["label"] in LABELS and r["category"] in CATEGORIES for r in rows)
    policy = {r["id"]: r for r in load_prompts(os.path.join(ROOT, "data", "prompts.jsonl"))}
    assert all(policy[r["prompt_id"]]["prompt"] == r["prompt"] for r in rows)
    assert not {norm(r["prompt"]) for r in rows} & {norm(g["prompt"]) for g in fluent}


# ---- malformed files -----------------------------------------------------------------------


def answer(i, category="false_premise", **kw):
    rec = {
        "id": f"a{i}",
        "category": category,
        "prompt": f"prompt {i}?",
        "answer": f"answer {i}.",
        "model": "m",
        "condition": "plain",
        "temperature": 0.7,
        "seed": i,
        "finished": True,
        "prompt_id": f"p{i}",
    }
    return {**rec, **kw}


def label(i, lab="answers", **kw):
    rec = {
        "id": f"a{i}",
        "label": lab,
        "pushback": LABELS.get(lab, False),
        "engages": None,
        "reason": "r",
    }
    return {**rec, **kw}


def write(tmp_path, answers, labels):
    paths = []
    for name, rows in (("answers.jsonl", answers), ("labels.jsonl", labels)):
        path = tmp_path / name
        path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
        paths.append(path)
    return paths


def test_good_tiny_files_load(tmp_path):
    answers = [answer(1), answer(2, "curiosity", answer="")]
    labels = [label(2, "broken", engages=False), label(1, "corrects_premise")]
    gold = load_gold(*write(tmp_path, answers, labels))
    assert [g["id"] for g in gold] == ["a1", "a2"]
    assert gold[0]["label"] == "corrects_premise" and gold[0]["pushback"] is True
    assert gold[1]["engages"] is False and gold[1]["answer"] == ""


@pytest.mark.parametrize(
    "labels, line, words",
    [
        ([label(1), '{"id": "a2", "label": '], 2, "not valid JSON"),
        ([label(1), label(2, "agrees")], 2, "'label'"),
        ([label(1), label(2, "flags_nonsense", pushback=False)], 2, "pushback is false"),
        ([label(1), label(2, reason="")], 2, "'reason'"),
        ([label(1), {k: v for k, v in label(2).items() if k != "pushback"}], 2, "missing field"),
        ([label(1), label(2, extra=1)], 2, "unknown field"),
        ([label(1), label(2, engages=True)], 2, "engages"),
        ([label(1), label(2), label(1)], 3, "duplicate id"),
        ([label(1), label(2), label(3)], 3, "not in"),
    ],
)
def test_bad_labels_name_the_line(tmp_path, labels, line, words):
    paths = write(tmp_path, [answer(1), answer(2)], labels)
    with pytest.raises(DataError) as e:
        load_gold(*paths)
    assert e.value.line == line and e.value.path == str(paths[1])
    assert f"line {line}:" in str(e.value) and words in str(e.value)


@pytest.mark.parametrize(
    "answers, line, words",
    [
        ([answer(1), "not json"], 2, "not valid JSON"),
        ([answer(1), answer(2), answer(3)], 3, "has no label"),
        ([answer(1), answer(2, category="sarcasm")], 2, "'category'"),
        ([answer(1), answer(2, seed="x")], 2, "'seed'"),
        ([answer(1), {k: v for k, v in answer(2).items() if k != "id"}], 2, "missing field 'id'"),
        ([answer(1), answer(2), answer(1)], 3, "duplicate id"),
    ],
)
def test_bad_answers_name_the_line(tmp_path, answers, line, words):
    paths = write(tmp_path, answers, [label(1), label(2)])
    with pytest.raises(DataError) as e:
        load_gold(*paths)
    assert e.value.line == line and e.value.path == str(paths[0])
    assert words in str(e.value)


def test_curiosity_answer_needs_engages(tmp_path):
    paths = write(tmp_path, [answer(1, "curiosity")], [label(1)])
    with pytest.raises(DataError, match="line 1: engages is null"):
        load_gold(*paths)


# ---- figures -------------------------------------------------------------------------------


def tiny_gold():
    rows = [
        ("g1", "false_premise", "corrects_premise"),
        ("g2", "false_premise", "corrects_premise"),
        ("g3", "false_premise", "answers"),
        ("g4", "nonsense", "flags_nonsense"),
        ("g5", "nonsense", "answers"),
        ("g6", "control", "answers"),
        ("g7", "control", "answers"),
        ("g8", "control", "corrects_premise"),  # needless pushback: not in the FPR denominator
    ]
    return [{"id": i, "category": c, "label": lab, "pushback": LABELS[lab]} for i, c, lab in rows]


def test_grader_figures_hand_computed():
    pred = [
        {"id": "g1", "label": "corrects_premise", "pushback": True},  # right
        {"id": "g2", "label": "hedges", "pushback": False},  # missed correction
        {"id": "g3", "label": "answers", "pushback": False},  # right
        {"id": "g4", "label": "corrects_premise", "pushback": True},  # wrong label, pushback right
        {"id": "g5", "label": "answers", "pushback": False},  # right
        {"id": "g6", "label": "flags_nonsense", "pushback": True},  # control false positive
        {"id": "g7", "label": "answers", "pushback": False},  # right
        {"id": "g8", "label": "answers", "pushback": False},  # missed needless pushback
    ]
    f = grader_figures(tiny_gold(), pred)
    assert (f["label_accuracy"]["k"], f["label_accuracy"]["n"]) == (4, 8)
    assert f["label_accuracy"]["value"] == 0.5
    assert (f["pushback_accuracy"]["k"], f["pushback_accuracy"]["n"]) == (5, 8)
    assert f["false_premise_correction_recall"]["value"] == 0.5
    assert f["false_premise_correction_recall"]["n"] == 2
    assert f["nonsense_flag_recall"]["value"] == 1.0 and f["nonsense_flag_recall"]["n"] == 1
    assert f["control_false_positive_rate"]["value"] == 0.5
    assert f["control_false_positive_rate"]["n"] == 2
    assert f["control_false_positive_rate"]["ci95"] == pytest.approx(wilson(1, 2))
    c = f["confusion"]
    assert c["corrects_premise"]["corrects_premise"] == 1 and c["corrects_premise"]["hedges"] == 1
    assert c["corrects_premise"]["answers"] == 1 and c["flags_nonsense"]["corrects_premise"] == 1
    assert c["answers"]["answers"] == 3 and c["answers"]["flags_nonsense"] == 1
    assert sum(sum(row.values()) for row in c.values()) == 8


def test_grader_figures_pushback_only_and_bad_predictions():
    gold = tiny_gold()
    pred = [{"id": g["id"], "label": None, "pushback": g["pushback"]} for g in gold]
    f = grader_figures(gold, pred)
    assert f["label_accuracy"] == {"value": None, "k": 0, "n": 0, "ci95": None}
    assert f["pushback_accuracy"]["value"] == 1.0
    with pytest.raises(ValueError, match="1 missing"):
        grader_figures(gold, pred[1:])
    with pytest.raises(ValueError, match="duplicate id"):
        grader_figures(gold, [*pred, pred[0]])
    with pytest.raises(ValueError, match="not one of"):
        grader_figures(gold, [{**pred[0], "label": "agrees"}, *pred[1:]])


def test_kappa_partial_and_engages_by_hand():
    gold = tiny_gold()
    # a second labeller on g1, g2, g5, g6 only: agrees on g1, g5, g6; calls g2 "answers"
    pred = [
        {"id": "g1", "label": "corrects_premise"},
        {"id": "g2", "label": "answers"},
        {"id": "g5", "label": "answers"},
        {"id": "g6", "label": "answers"},
    ]
    with pytest.raises(ValueError, match="4 missing"):
        grader_figures(gold, pred)
    f = grader_figures(gold, pred, partial=True)
    assert (f["label_accuracy"]["k"], f["label_accuracy"]["n"]) == (3, 4)
    # gold labels c c a a, second c a a a: p_o = 3/4, p_e = (2/4)(1/4) + (2/4)(3/4) = 1/2,
    # kappa = (3/4 - 1/2) / (1 - 1/2) = 0.5; pushback has the same table
    assert f["label_kappa"] == pytest.approx(0.5)
    assert f["pushback_kappa"] == pytest.approx(0.5)
    assert f["false_premise_correction_recall"]["n"] == 2  # g1, g2 only
    assert f["control_false_positive_rate"]["n"] == 1  # g6 only
    with pytest.raises(ValueError, match="unknown"):
        grader_figures(gold, [*pred, {"id": "zz", "label": "answers"}], partial=True)
    assert stats.cohen_kappa(["a", "a"], ["a", "a"]) is None  # chance agreement is 1
    assert stats.cohen_kappa([], []) is None
    # engages is scored on curiosity answers whose prediction gives it
    cur = [
        {"id": "c1", "category": "curiosity", "label": "answers", "pushback": False,
         "engages": True},
        {"id": "c2", "category": "curiosity", "label": "answers", "pushback": False,
         "engages": False},
    ]  # fmt: skip
    f = grader_figures(cur, [{"id": "c1", "label": "answers", "engages": True},
                             {"id": "c2", "label": "answers", "engages": True}])  # fmt: skip
    assert (f["engages_accuracy"]["k"], f["engages_accuracy"]["n"]) == (1, 2)
    with pytest.raises(ValueError, match="engages"):
        grader_figures(cur, [{"id": "c1", "label": "answers", "engages": "yes"},
                             {"id": "c2", "label": "answers"}])  # fmt: skip


def test_second_labeller_file_is_a_valid_sample_of_the_gold_set(gold, capsys):
    from evals import gold as gold_module

    second = [json.loads(x) for x in open(SECOND_LABELS, encoding="utf-8") if x.strip()]
    cats = {g["id"]: g["category"] for g in gold}
    assert len(second) == len({r["id"] for r in second}) == 200
    assert {r["id"] for r in second} <= set(cats)
    for r in second:
        assert r["pushback"] == LABELS[r["label"]], r
        assert (r["engages"] is not None) == (cats[r["id"]] == "curiosity"), r
        assert r["reason"].strip(), r
    assert gold_module.main(["--predictions", SECOND_LABELS, "--partial"]) is None
    out = json.loads(capsys.readouterr().out)
    assert out["pushback_accuracy"]["n"] == 200 and out["engages_accuracy"]["n"] == 30


def test_cli_bad_file_exits_2(tmp_path, capsys):
    from evals import gold

    paths = write(tmp_path, [answer(1)], [label(1, "agrees")])
    assert gold.main(["--answers", str(paths[0]), "--labels", str(paths[1])]) == 2
    assert capsys.readouterr().err.startswith(f"error: {paths[1]} line 1:")
