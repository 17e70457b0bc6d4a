"""bench/judge.py's bookkeeping on hand-made pairs and scores: credit, groupings, the length-trap
subset, length correlation, echo checks, and a constant reward failing loudly."""

import json

import numpy as np
import pytest

from bench import judge as B
from rewards.builtin import RewardError
from rewards.registry import RewardContext, parse_function_spec
from rewards.scorer import build_scorer, scorer_from_fn


def pair(i, better, worse, category="control", kind="k", source="s", criterion="scrutiny"):
    return dict(
        id=f"p{i}",
        prompt=f"q{i}",
        better=better,
        worse=worse,
        category=category,
        kind=kind,
        source=source,
        criterion=criterion,
    )


def test_pair_credit_counts_ties_and_failures_half():
    # pairs: better above, below, tied, better failed -> 1, 0, 0.5, 0.5
    scores = np.array([0.7, 0.2, 0.1, 0.4, 0.5, 0.5, np.nan, 0.3])
    assert B.pair_credit(scores).tolist() == [1.0, 0.0, 0.5, 0.5]


def test_accuracy_report_groups_and_length_figures():
    pairs = [
        pair(0, "a short one", "a much longer worse answer here", kind="length_trap"),
        pair(1, "a b", "c d", category="nonsense", source="t"),
        pair(2, "a long better answer", "w", category="nonsense", criterion="nonsense"),
        pair(3, "x", "y z w", kind="length_trap"),
    ]
    # credits: 1 (better above), 0, 1, 0.5 (tie)
    scores = np.array([0.9, 0.1, 0.2, 0.3, 0.8, 0.4, 0.5, 0.5])
    r = B.accuracy_report(pairs, scores)
    assert r["overall"] == pytest.approx(2.5 / 4)
    assert r["by_category"] == {"control": 0.75, "nonsense": 0.5} and r["control"] == 0.75
    assert r["by_kind"] == {"k": 0.5, "length_trap": 0.75}
    assert r["by_source"] == {"s": pytest.approx(2.5 / 3), "t": 0.0}
    assert r["by_criterion"] == {"nonsense": 1.0, "scrutiny": 0.5}
    # the worse answer is longer in pairs 0 and 3 (the length traps): credits 1 and 0.5
    assert r["length_trap"] == 0.75 and r["n_length_trap"] == 2
    # longer answer strictly above in pairs 0 (no: better 0.9 is shorter), 2 (yes), 3 (tie: no)
    assert r["longer_preferred"] == pytest.approx(1 / 3)  # pair 1: equal lengths, not counted
    words = np.array([3, 6, 2, 2, 4, 1, 1, 3])
    assert r["corr_score_length"] == pytest.approx(np.corrcoef(scores, words)[0, 1])


def test_echo_report_counts_echoes_at_or_above_the_answer():
    pairs = [pair(0, "real answer", "w"), pair(1, "another", "w"), pair(2, "third", "w")]

    def score(prompts, answers, cats):  # an echo (answer == prompt) wins only for q1, ties q2
        return [
            {"q1": 2.0, "q2": 1.0}.get(a, 1.0) if a == p else 1.5 if p != "q2" else 1.0
            for p, a in zip(prompts, answers, strict=True)
        ]

    r = B.echo_report(pairs, score)
    assert r["n_prompts"] == 3 and r["echo_wins"] == 2 and r["examples"] == ["q1", "q2"]


def test_a_constant_reward_fails_loudly(tmp_path):
    fns = tmp_path / "const.py"
    fns.write_text("def const(prompts, completions, **kw):\n    return [0.5] * len(completions)\n")
    comps = parse_function_spec(f"{fns}:const")
    ctx = RewardContext()
    pairs = [pair(0, "a", "b"), pair(1, "c", "d")]
    spec_scorer = build_scorer(comps, ctx)
    assert spec_scorer(["q"], ["a"], ["control"]).values.tolist() == [0.5]
    with pytest.raises(RewardError, match="same score"):
        B.bench_reward_with(spec_scorer, "const", pairs, echo=False)


def test_probe_report_per_kind_with_intervals():
    # A reward that counts full stops: the intact answer (3 sentences) beats its cut-off variant
    # (fewer), loses to the repeating and filler-padded ones (more). Each answer is scored once.
    from core import stats

    from rewards import broken_text

    intact = "First point is here. Second point is there. Third one ends it."
    pairs = [pair(i, intact, "w") for i in range(5)]
    calls = []

    def dots(prompts, completions, **kw):
        calls.append(len(completions))
        return [float(c.count(".")) + 0.01 * c.endswith(".") for c in completions]

    r = B.probe_report(scorer_from_fn(dots), pairs)
    assert set(r) == set(broken_text.KINDS)
    assert all(v["n"] == 5 for v in r.values())
    assert r["cut"]["accuracy"] == 1.0 and r["cut"]["wins"] == 5
    assert r["repeat"]["accuracy"] == 0.0 and r["filler"]["accuracy"] == 0.0
    assert r["cut"]["ci95"] == pytest.approx(list(stats.wilson(5, 5)))
    assert calls == [5 + 5 * 4]  # 5 distinct prompts' intact answers + 20 variants, one call


def test_split_all_takes_every_pair_and_the_old_empty_spelling_warns(tmp_path, capsys):
    path = tmp_path / "pairs.jsonl"
    rows = [{"id": f"p{i}", "criterion": "scrutiny", "category": "control", "prompt": "q",
             "better": "a", "worse": "b",
             "split": s} for i, s in enumerate(["train", "test", "test"])]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [p["id"] for p in B.select_pairs(str(path), "test", None)] == ["p1", "p2"]
    assert len(B.select_pairs(str(path), "all", None)) == 3
    assert capsys.readouterr().err == ""
    assert len(B.select_pairs(str(path), "", None)) == 3
    assert "--split '' is deprecated; use --split all" in capsys.readouterr().err
