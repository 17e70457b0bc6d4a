"""evals/read_set.py: blind sampling from evaluate.py's answers file, figures from hand-made labels
(every expected number worked out by hand), and one-line errors for bad files."""

import json

from core.jsonl import DataError

import pytest

import evaluate
from evals import read_set


def rows_for(models, prompts):
    """evaluate --answers-out rows: each model answers each (id, category) once."""
    return [
        {
            "model": m,
            "id": i,
            "category": c,
            "prompt": f"q {i}",
            "sample": 0,
            "answer": f"{m} on {i}",
        }
        for m in models
        for i, c in prompts
    ]


PROMPTS = [("c1", "control"), ("c2", "control"), ("c3", "control"), ("f1", "false_premise"),
           ("f2", "false_premise"), ("k1", "curiosity"), ("k2", "curiosity")]  # fmt: skip


def test_sample_is_blind_complete_and_seeded():
    rows = rows_for(["base", "tuned"], PROMPTS)
    blind, key = read_set.sample(rows, 2, seed=1)
    assert len(blind) == len(key) == 2 * 3 * 2  # 2 prompts x 3 categories x 2 models
    assert all(set(b) == {"id", "category", "prompt", "answer"} for b in blind)  # no model name
    assert [b["id"] for b in blind] == [f"read-{k:04d}" for k in range(12)]
    chosen = {k["prompt_id"] for k in key}
    assert len(chosen) == 6 and all(
        {k["model"] for k in key if k["prompt_id"] == p} == {"base", "tuned"} for p in chosen
    )
    for b, k in zip(blind, key, strict=True):  # the key points back to the right answer
        assert b["answer"] == f"{k['model']} on {k['prompt_id']}"
    assert read_set.sample(rows, 2, seed=1) == (blind, key)
    assert read_set.sample(rows, 2, seed=2) != (blind, key)


def test_sample_uses_only_prompts_every_model_answered():
    rows = [
        r for r in rows_for(["base", "tuned"], PROMPTS) if (r["model"], r["id"]) != ("tuned", "c1")
    ]
    blind, key = read_set.sample(rows, 2, seed=0)
    assert "c1" not in {k["prompt_id"] for k in key}
    with pytest.raises(
        ValueError, match="has 2 prompts answered by every model, fewer than --per-category 3"
    ):
        read_set.sample(rows, 3, seed=0)


def label(rid, lab, cat, engages=None):
    pushback = lab in ("corrects_premise", "flags_nonsense")
    eng = engages if cat == "curiosity" else None
    return {"id": rid, "label": lab, "pushback": pushback, "engages": eng, "reason": "read"}


def test_figures_by_hand(tmp_path):
    # control: base pushes back on 1 of 2 prompts, tuned on 0 of 2; curiosity: base engages
    # 0 of 2, tuned 2 of 2 (one of base's is broken).
    key = {
        "read-0": ("base", "c1", "control", "corrects_premise"),
        "read-1": ("tuned", "c1", "control", "answers"),
        "read-2": ("base", "c2", "control", "answers"),
        "read-3": ("tuned", "c2", "control", "answers"),
        "read-4": ("base", "k1", "curiosity", "broken"),
        "read-5": ("tuned", "k1", "curiosity", "answers"),
        "read-6": ("base", "k2", "curiosity", "answers"),
        "read-7": ("tuned", "k2", "curiosity", "answers"),
    }
    labelled = []
    for rid, (m, p, c, lab) in key.items():
        labelled.append({"id": rid, "category": c, "prompt": p, "answer": "x",
                         **label(rid, lab, c, engages=(m == "tuned"))})  # fmt: skip
    ranks = {"base": 0, "tuned": 1}
    got = read_set.figures(
        labelled,
        {k: {"id": k, "model": v[0], "prompt_id": v[1], "model_rank": ranks[v[0]]}
         for k, v in key.items()},
    )  # fmt: skip
    assert got["models"] == ["base", "tuned"]
    ctl = got["by_model"]["base"]["control"]
    assert (ctl["n"], ctl["pushback"]["k"], ctl["pushback"]["value"]) == (2, 1, 0.5)
    assert got["by_model"]["tuned"]["control"]["pushback"]["value"] == 0.0
    assert got["by_model"]["base"]["curiosity"]["broken"]["value"] == 0.5
    assert got["by_model"]["base"]["curiosity"]["labels"]["broken"] == 1
    assert got["by_model"]["tuned"]["curiosity"]["engages"]["value"] == 1.0
    assert got["vs_first"]["tuned"]["control"]["pushback"]["diff"] == -0.5  # (0 - 1 + 0 - 0) / 2
    assert got["vs_first"]["tuned"]["curiosity"]["engages"]["diff"] == 1.0
    assert "control: pushback" in read_set.table(got)


def test_cli_round_trip_and_one_line_errors(tmp_path, capsys):
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows_for(["a", "b"], PROMPTS)))
    out = tmp_path / "read"
    assert read_set.main(["sample", "--answers", str(answers), "--per-category", "1",
                          "--out", str(out)]) == 0  # fmt: skip
    blind = [json.loads(x) for x in (out / "answers.jsonl").read_text().splitlines()]
    assert read_set.main(["figures", "--dir", str(out)]) == 2  # no labels yet
    assert "labels.jsonl not found" in capsys.readouterr().err
    labels = [label(b["id"], "answers", b["category"], engages=True) for b in blind]
    (out / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    assert read_set.main(["figures", "--dir", str(out), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["by_model"]["a"]["control"]["pushback"]["value"] == 0.0
    labels[0]["pushback"] = True  # disagrees with its label
    (out / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    assert read_set.main(["figures", "--dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "labels.jsonl line 1: pushback is true" in err[0]
    answers.write_text('{"model": "a"}\n')
    assert read_set.main(["sample", "--answers", str(answers), "--out", str(tmp_path / "r2")]) == 2
    assert "line 1: missing" in capsys.readouterr().err
    assert read_set.main(["sample", "--answers", str(answers), "--per-category", "0",
                          "--out", str(tmp_path / "r3")]) == 2  # fmt: skip


def test_evaluate_writes_every_answer_for_the_read_set(tmp_path):
    result = {
        "records": [{"id": "c1", "category": "control", "prompt": "q"},
                    {"id": "k1", "category": "curiosity", "prompt": "r"}],
        "answers": {"base": [["a0"], ["a1"]], "tuned": [["b0", "b0'"], ["b1", "b1'"]]},
    }  # fmt: skip
    path = evaluate.write_answers(result, str(tmp_path / "sub" / "answers.jsonl"))
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(rows) == 2 + 4
    assert rows[0] == {"model": "base", "id": "c1", "category": "control", "prompt": "q",
                       "sample": 0, "answer": "a0"}  # fmt: skip
    assert rows[-1]["answer"] == "b1'" and rows[-1]["sample"] == 1
    blind, key = read_set.sample(read_set.load_answers(path), 1, seed=0)
    assert {b["answer"] for b in blind} == {"a0", "a1", "b0", "b1"}  # first answers only


def test_a_later_model_read_on_the_same_prompts_joins_the_first_set(tmp_path, capsys):
    first, later = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in rows_for(["base", "sft"], PROMPTS)))
    later.write_text("".join(json.dumps(r) + "\n" for r in rows_for(["grpo"], PROMPTS)))
    for path, out, prefix in ((first, "r1", "read"), (later, "r2", "read2")):
        argv = ["sample", "--answers", str(path), "--per-category", "1", "--out",
                str(tmp_path / out), "--id-prefix", prefix]  # fmt: skip
        assert read_set.main(argv) == 0
        blind = [json.loads(x) for x in (tmp_path / out / "answers.jsonl").read_text().splitlines()]
        labels = [label(b["id"], "answers", b["category"], engages=True) for b in blind]
        (tmp_path / out / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    keys = [
        [json.loads(x)["prompt_id"] for x in (tmp_path / d / "key.jsonl").read_text().splitlines()]
        for d in ("r1", "r2")
    ]
    assert set(keys[0]) == set(keys[1])  # the same prompts drawn
    argv = ["figures", "--dir", str(tmp_path / "r1"), "--dir", str(tmp_path / "r2"), "--json"]
    capsys.readouterr()  # the samples' messages
    assert read_set.main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["models"] == ["base", "sft", "grpo"] and set(got["vs_first"]) == {"sft", "grpo"}
    argv = ["figures", "--dir", str(tmp_path / "r1"), "--dir", str(tmp_path / "r1")]
    assert read_set.main(argv) == 2 and "--id-prefix" in capsys.readouterr().err


def test_answers_and_key_files_name_every_bad_line(tmp_path):
    good = json.dumps(rows_for(["a"], PROMPTS)[0])
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join([good, "{oops", "", '{"model": "a"}', good]) + "\n")
    with pytest.raises(DataError) as e:
        read_set.load_answers(path)
    assert str(e.value).startswith(f"{path} line 2: not valid JSON") and e.value.line == 2
    assert "(and 2 more problem(s): lines 3, 4)" in str(e.value)
    path.write_text("")
    with pytest.raises(DataError, match="file is empty"):
        read_set.load_answers(path)
    key = tmp_path / "key.jsonl"
    row = {"id": "r-1", "model": "a", "prompt_id": "p", "model_rank": 0}
    key.write_text(json.dumps(row) + "\n[1, 2]\n")
    with pytest.raises(DataError, match=r"key.jsonl line 2: needs \('id'"):
        read_set.load_key(key)
    key.write_text(json.dumps(row) + "\n")
    assert read_set.load_key(key) == {"r-1": row}
    with pytest.raises(DataError, match="file not found; rewrite it with `sample`"):
        read_set.load_key(tmp_path / "nowhere.jsonl")
