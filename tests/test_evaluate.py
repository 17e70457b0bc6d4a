"""evaluate.py: figures on hand-made answers, bad inputs (nothing evaluated half-way; the retired
second-opinion flags), and an end-to-end run on tiny checkpoints whose second report comes from
the cache."""

import json

from core import (
    backend,  # noqa: F401
    stats,
)

import pytest
from helpers import LLAMA, QWEN3, save_checkpoint, tiny_model

import evaluate
from evals import grade as grade_module
from evals import grading as eval_grading
from rewards import pushback

RECORDS = [
    {"id": "a", "category": "false_premise", "prompt": "t5 t6"},
    {"id": "b", "category": "control", "prompt": "t7 t8"},
]


def test_summarize_hand_made_answers():
    answers = {
        "texts": [["Actually that is a myth: no."], ["Yes yes yes yes yes", "Yes it is."]],
        "tokens": [[7], [5, 3]],
        "finished": [[True], [False, True]],
    }
    extra = {"pushback_rate": [1.0, 0.0], "reward/x": [0.2, None]}
    got, figs = evaluate.summarize(RECORDS, answers, extra)
    fp, ctl, overall = got["false_premise"], got["control"], got["overall"]
    assert fp["lexical_pushback_rate"] == 1.0 and ctl["lexical_pushback_rate"] == 0.0
    assert ctl["length_words_median"] == 4.0  # 5 and 3 words
    assert ctl["truncation_rate"] == 0.5 and overall["truncation_rate"] == pytest.approx(1 / 3)
    # "yes yes yes yes yes": 3 trigrams, 1 unique -> 2/3; "yes it is": 1 trigram -> 0
    assert ctl["repetition"] == pytest.approx(1 / 3)
    assert ctl["self_similarity"] == pytest.approx(1 / 3)  # {yes} vs {yes, it, is}
    assert overall["pushback_rate"] == 0.5 and overall["reward/x"] == 0.2  # None left out
    # intervals over prompts: 1 of 2 prompts pushes back -> Wilson(1, 2); reward/x has one value
    p = figs["overall"]["pushback_rate"]
    assert p["n"] == 2 and p["ci_method"] == "wilson"
    assert p["ci95"] == pytest.approx([0.0945, 0.9055], abs=1e-4)
    assert figs["overall"]["reward/x"]["n"] == 1  # the None record is not counted
    assert figs["control"]["truncation_rate"]["value"] == 0.5  # per prompt: its mean over samples
    assert figs["control"]["length_words_median"]["n"] == 2  # over answers
    # the commonest opening: "yes yes yes yes yes" and "yes it is" differ -> 1 of 2
    assert ctl["top_opener"] == "yes yes yes yes yes" and ctl["top_opener_share"] == 0.5
    assert figs["control"]["top_opener_share"]["ci95"] is None  # set-level


def test_the_retired_second_opinion_flags_exit_2_naming_the_grader(capsys, monkeypatch):
    # the old classifier's --pushback-model / --pushback-labels (issue 56): any value, even the
    # old `none`, is one error line before anything loads, naming what replaced it
    monkeypatch.setattr(evaluate.Gwen, "load", lambda *a, **k: pytest.fail("a model was loaded"))
    argv = ["--model", "smollm2-135m", "--prompts", "data/eval.jsonl", "--no-kl"]
    for extra in (["--pushback-model", "models/pushback-smollm2-135m"],
                  ["--pushback-model", "none"], ["--pushback-model"],
                  ["--pushback-labels", "data/pushback_labels.jsonl"]):  # fmt: skip
        assert evaluate.main([*argv, *extra]) == 2, extra
        lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error")]
        assert lines == [f"error: {extra[0]} was retired: {evaluate.RETIRED_CLASSIFIER}"], lines
        assert "--grader" in lines[0] and "drop the flag" in lines[0]
    assert "pushback-model" not in evaluate.build_parser().format_help()


def test_bad_prompt_file_names_the_line_and_evaluates_nothing(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "p.jsonl"
    bad.write_text(
        '{"id": "a", "category": "control", "prompt": "t5", "source": "x"}\n'
        '{"id": "b", "category": "nonsensical", "prompt": "t6", "source": "x"}\n'
    )
    monkeypatch.setattr(evaluate.Gwen, "load", lambda *a, **k: pytest.fail("a model was loaded"))
    code = evaluate.main(
        [
            "--model",
            "smollm2-135m",
            "--prompts",
            str(bad),
            "--reward",
            "happy",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "line 2" in err and "nonsensical" in err and "Traceback" not in err


def test_missing_model_folder_and_bad_settings_exit_2(tmp_path, capsys):
    # each case: argv, and what its one error line must name (the bad input itself)
    cases = [
        (
            ["--model", str(tmp_path / "nope"), "--prompts", "data/eval.jsonl"],
            str(tmp_path / "nope"),
        ),
        (["--model", "smollm2-135m", "--prompts", "data/eval.jsonl", "--samples", "3"], "samples"),
        (["--model", "a", "--model", "a", "--prompts", "data/eval.jsonl"], "'a'"),
        (["--model", "smollm2-135m", "--prompts", "data/eval.jsonl", "--reward", "joy"], "joy"),
        (["--model", "smollm2-135m", "--prompts", str(tmp_path / "p.jsonl")], "p.jsonl"),
    ]
    for argv, named in cases:
        assert evaluate.main([*argv, "--no-kl"]) == 2, argv
        lines = [x for x in capsys.readouterr().err.splitlines() if not x.startswith("[rl-values]")]
        err = "\n".join(lines)  # the backend's announce line aside, exactly one error line
        assert len(lines) == 1 and err.startswith("error: "), err
        assert named in err and "Traceback" not in err, (named, err)
        assert "reward spec" not in err, err  # the default reward resolves (tasks.default_reward)


class FakeGrader:
    """Pushback when the answer holds an even token id; broken when it holds t3."""

    path = "fake-grader"
    metrics = {"validation": {"all": {}}}

    def grade(self, records, progress=False, notes=None):
        out = []
        for r in records:
            even = any(w[1:].isdigit() and int(w[1:]) % 2 == 0 for w in r["answer"].split())
            label = "broken" if "t3" in r["answer"].split() else (
                "corrects_premise" if even else "answers")  # fmt: skip
            engages = (label == "answers") if r["category"] == "curiosity" else None
            out.append({"id": r["id"], "label": label, "pushback": label == "corrects_premise",
                        "p": float(even), "engages": engages})  # fmt: skip
        return out if notes is None else grade_module.reference_check(records, out, notes)


def test_end_to_end_on_tiny_models_with_cache(tmp_path, capsys, monkeypatch):
    from evals import grade

    monkeypatch.setattr(grade.Grader, "load", classmethod(lambda cls, path=None: FakeGrader()))
    # both models as if trained with a lexical stance term: the grader's agreement with it is
    # reported, and the KL that follows still reads the base model (session 18: the detector's
    # name once overwrote the base model's variable and the KL crashed after the whole grading)
    monkeypatch.setattr(evaluate, "stance_detectors", lambda source: ["lexical"])
    (tmp_path / "grader").mkdir()  # the folder the cache fingerprints
    base, other = tmp_path / "base", tmp_path / "other"
    save_checkpoint(tiny_model(QWEN3, seed=1), QWEN3, base)
    save_checkpoint(tiny_model(QWEN3, seed=2), QWEN3, other)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "".join(
            json.dumps(
                {"id": f"q{i}", "category": c, "prompt": f"t{10 + i} t{20 + i}", "source": "x"}
            )
            + "\n"
            for i, c in enumerate(["control", "nonsense", "control", "curiosity"])
        )
    )
    argv = [
        "--model",
        str(base),
        "--model",
        str(other),
        "--prompts",
        str(prompts),
        "--samples",
        "2",
        "--temperature",
        "1.0",
        "--max-new-tokens",
        "6",
        "--reward",
        "happy",
        "--grader",
        str(tmp_path / "grader"),  # FakeGrader
        "--cache-dir",
        str(tmp_path / "cache"),
        "--report",
        str(tmp_path / "report"),
        "--json",
    ]
    assert evaluate.main(argv) == 0
    out_text = capsys.readouterr().out
    result = json.loads(out_text)
    for ref in (str(base), str(other)):
        cats = result["results"][ref]
        assert set(cats) == {"nonsense", "curiosity", "control", "overall"}
        assert cats["control"]["n_prompts"] == 2 and "reward/happy" in cats["control"]
    assert "kl_to_base" not in result["results"][str(base)]["overall"]
    assert result["results"][str(other)]["overall"]["kl_to_base"] > 0
    # the grader's rates per prompt, and its gold-set figures (FakeGrader graded the gold set)
    gold = result["grader"]["gold"]
    for ref in (str(base), str(other)):
        agree = result["grader"]["agreement_with_reward"][ref]["lexical"]
        assert 0 <= agree["grader_rate"] <= 1 and 0 <= agree["detector_rate"] <= 1, agree
    assert gold["n_answers"] >= 300 and 0 <= gold["pushback_accuracy"]["value"] <= 1
    fluent = result["grader"]["gold_fluent"]  # the fluent gold set's beside it
    assert fluent["n_answers"] >= 200 and 0 <= fluent["nonsense_flag_recall"]["value"] <= 1
    for ref in (str(base), str(other)):
        figs = result["figures"][ref]
        assert figs["overall"]["pushback_rate"]["n"] == 4
        assert figs["curiosity"]["engagement_rate"]["n"] == 1
        assert figs["control"]["engagement_rate"]["n"] == 0  # not a curiosity prompt
    report = (tmp_path / "report" / "report.md").read_text()
    assert report.count("### Sample answers") == 3 and "95% interval" in report
    # the grader's gold-set figures and its agreement lines go with its figures in the report too
    assert "on the gold set" in report and "stance detector lexical" in report
    assert "on the fluent gold set" in report
    # every per-prompt figure carries its n and interval; the second model its paired difference
    for ref in (str(base), str(other)):
        for cat, figs in result["figures"][ref].items():
            n = result["results"][ref][cat]["n_prompts"]
            for key in ("reward/happy", "lexical_pushback_rate", "truncation_rate", "repetition"):
                f = figs[key]
                assert f["n"] == n and f["n_unit"] == "prompts", (key, f)
                assert f["ci95"][0] <= f["value"] <= f["ci95"][1], (key, f)
            assert figs["distinct_2"]["ci95"] is None  # set-level: no interval, said so
    assert str(base) not in result["vs_base"]
    diff = result["vs_base"][str(other)]["overall"]["reward/happy"]
    base_all = result["results"][str(base)]["overall"]["reward/happy"]
    other_all = result["results"][str(other)]["overall"]["reward/happy"]
    assert diff["diff"] == pytest.approx(other_all - base_all) and diff["n"] == 4
    assert isinstance(diff["contains_zero"], bool)
    assert "NaN" not in out_text and "Infinity" not in out_text
    monkeypatch.setattr(evaluate, "generate", lambda *a: pytest.fail("cache missed"))
    monkeypatch.setattr(evaluate, "per_answer_kl", lambda *a: pytest.fail("cache missed"))
    assert evaluate.main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["results"] == result["results"] and again["figures"] == result["figures"]


def test_kl_to_a_model_with_another_vocabulary_is_refused(tmp_path):
    from helpers import tiny_tokenizer

    from gwen import Gwen

    a = Gwen(tiny_model(QWEN3), tiny_tokenizer(QWEN3["vocab_size"]))
    b = Gwen(tiny_model(LLAMA), tiny_tokenizer(LLAMA["vocab_size"]))
    with pytest.raises(ValueError, match="vocabularies"):
        evaluate.per_answer_kl(a, b, RECORDS[:1], [["t5 t6"]])


def test_table_marks_differences_whose_interval_contains_zero():
    fig = {"value": 0.5, "n": 60, "ci95": [0.38, 0.62]}
    assert stats.cell(fig, None) == "0.5 [0.38,0.62]"
    assert stats.cell(fig, {"diff": 0.2, "contains_zero": False}).endswith("+0.2*")
    assert stats.cell(fig, {"diff": -0.03, "contains_zero": True}).endswith("-0.03 n.s.")
    assert stats.cell({"value": None}, None) == "-"
    assert evaluate.to_json({"a": float("nan"), "b": [1.0, float("inf")]}) == (
        '{"a": null, "b": [1.0, null]}'
    )


def test_a_run_rewarded_by_the_graders_own_classifier_is_flagged(tmp_path):
    from load_weights import ModelSource

    grader = tmp_path / "grader"
    (grader / "pushback").mkdir(parents=True)
    (grader / "pushback" / "rm_config.json").write_text("{}")  # a classifier folder, to the check
    own = tmp_path / "own.yaml"
    own.write_text(f"components:\n  - {{name: stance, detector: {grader / 'pushback'}}}\n")
    other = tmp_path / "other.yaml"
    other.write_text("components:\n  - {name: stance, detector: lexical}\n  - {name: happy}\n")

    def src(run_config):
        return ModelSource("m", tmp_path, "lora", None, run_config)

    why = eval_grading.grader_in_reward(src({"reward_config": str(own)}), str(grader))
    assert why and "grader's own classifier" in why and str(own) in why
    assert eval_grading.grader_in_reward(src({"reward_config": str(other)}), str(grader)) is None
    assert eval_grading.grader_in_reward(src({}), str(grader)) is None  # not a training checkpoint
    no_file = src({"reward_config": str(tmp_path / "no.yaml")})
    gone = eval_grading.grader_in_reward(no_file, str(grader))
    assert gone and "not checked" in gone
    moved = tmp_path / "moved.yaml"  # its detector folder is gone since the run
    moved.write_text(f"components:\n  - {{name: stance, detector: {tmp_path / 'nowhere'}}}\n")
    why = eval_grading.grader_in_reward(src({"reward_config": str(moved)}), str(grader))
    assert why and "not checked" in why and "nowhere" in why


def test_a_run_paid_for_dispute_wording_is_told_to_read(tmp_path):
    from load_weights import ModelSource

    def src(yaml_text):
        if yaml_text is None:
            return ModelSource("m", tmp_path, "lora", None, {})
        path = tmp_path / f"r{abs(hash(yaml_text))}.yaml"
        path.write_text(yaml_text)
        return ModelSource("m", tmp_path, "lora", None, {"reward_config": str(path)})

    paid = src("components:\n  - {name: stance, detector: lexical, pay: 0.5, penalty: 2.0}\n")
    why = eval_grading.dispute_paid(paid)
    assert (
        why
        and "dispute wording" in why
        and "detector lexical" in why
        and "evals/read_set.py" in why
    )
    # the stance term's defaults pay 1 and cost 1: a bare stance term shapes disputes too
    assert eval_grading.dispute_paid(src("components:\n  - {name: stance}\n"))
    only_curiosity = "components:\n  - {name: stance, pay: 0, penalty: 0, curiosity_penalty: 1}\n"
    assert eval_grading.dispute_paid(src(only_curiosity))
    zero = "components:\n  - {name: stance, pay: 0, penalty: 0}\n  - {name: happy}\n"
    assert eval_grading.dispute_paid(src(zero)) is None  # a stance term that pays nothing
    assert eval_grading.dispute_paid(src("components:\n  - {name: happy}\n")) is None
    assert eval_grading.dispute_paid(src(None)) is None  # not a training checkpoint


def test_grader_notes_carry_every_warning_in_table_and_report():
    fig = {"value": 0.9, "ci95": [0.85, 0.93], "k": 450, "n": 500}
    fluent = {"value": 0.75, "ci95": [0.62, 0.85], "k": 45, "n": 60}
    keys = ("pushback_accuracy", "label_accuracy", "false_premise_correction_recall",
            "nonsense_flag_recall", "control_false_positive_rate")  # fmt: skip
    g = {
        "path": "models/g",
        "gold": {"n_answers": 500, **dict.fromkeys(keys, fig)},
        "gold_fluent": {"n_answers": 260, **dict.fromkeys(keys, fluent)},
        "not_independent_of": {"runs/a": "its reward used the grader"},
        "read_advised": {"runs/b": "its run's reward paid disputes"},
    }
    lines = eval_grading.grader_notes(g)
    assert len(lines) == 4 and "0.90 [0.85,0.93] (450/500)" in lines[0]
    assert "on the gold set (500 answers" in lines[0]
    # the fluent gold set's figures beside the 135M set's, with n and interval
    assert "on the fluent gold set (260 written" in lines[1]
    assert "nonsense-flag recall 0.75 [0.62,0.85] (45/60)" in lines[1]
    assert lines[2].startswith("runs/a: the grader's pushback figures are not independent")
    assert lines[3] == "runs/b: its run's reward paid disputes"
    del g["gold_fluent"]  # a result without it (an older JSON) prints the 135M line alone
    assert len(eval_grading.grader_notes(g)) == 3


def test_agreement_with_a_runs_detector_hand_computed():
    # grader: T T F F F ; detector: T F F F T  -> agree on 3 of 5
    grader = [[True, True], [False, False, False]]
    a = eval_grading.agreement(grader, [[True, False], [False, False, True]])
    assert a["agreement"]["value"] == pytest.approx(0.6) and a["agreement"]["n"] == 5
    assert a["grader_rate"] == pytest.approx(0.4) and a["detector_rate"] == pytest.approx(0.4)
    # chance agreement 0.4*0.4 + 0.6*0.6 = 0.52; kappa = (0.6 - 0.52) / 0.48
    assert a["kappa"] == pytest.approx(0.08 / 0.48)
    same = eval_grading.agreement([[False, False]], [[False, False]])
    assert same["agreement"]["value"] == 1.0 and same["kappa"] is None  # chance agreement is 1
    with pytest.raises(ValueError, match="paired"):
        eval_grading.agreement([[True]], [[True, False]])
    line = eval_grading.agreement_line("runs/x", "lexical", a)
    assert "0.60" in line and "of 5 answers" in line and "kappa 0.17" in line


def test_stance_detectors_of_a_run_and_the_lexical_verdicts(tmp_path):
    from load_weights import ModelSource

    cfg = tmp_path / "r.yaml"
    cfg.write_text("components:\n  - {name: stance, pay: 2.0}\n  - {name: happy}\n")

    def src(run_config):
        return ModelSource("m", tmp_path, "lora", None, run_config)

    assert eval_grading.stance_detectors(src({"reward_config": str(cfg)})) == ["lexical"]
    assert eval_grading.stance_detectors(src({})) == []
    assert eval_grading.stance_detectors(src({"reward_config": str(tmp_path / "gone.yaml")})) == []
    texts = [["Actually, that premise is false: it never happened.", "Sure, here it is."]]
    flags = eval_grading.detector_flags("lexical", [{"prompt": "p"}], texts)
    assert flags == [[pushback.disputes(t) for t in texts[0]]] and flags[0][1] is False
    # a term with opening: true is named with the suffix and flags opening negations too
    cfg.write_text("components:\n  - {name: stance, detector: none, opening: true}\n")
    assert eval_grading.stance_detectors(src({"reward_config": str(cfg)})) == ["none+opening"]
    texts = [["It didn't happen.", "It happened. That is not true of the rest.", "Sure."]]
    assert eval_grading.detector_flags("none", [{"prompt": "p"}], texts) == [[False] * 3]
    assert eval_grading.detector_flags("none+opening", [{"prompt": "p"}], texts) == [
        [True, False, False]
    ]
    assert eval_grading.detector_flags("lexical+opening", [{"prompt": "p"}], texts) == [
        [True, True, False]
    ]
