"""The rubric reward: expected-score math, weights, applicability, batching equalities, OOM
backoff, failures, and the empty-completion rule. A tiny random judge stands in for the model;
two tests use the embedded SmolLM2."""

import math
from types import SimpleNamespace

from core import backend  # noqa: F401

import mlx.core as mx
import numpy as np
import pytest
from helpers import QWEN3, tiny_model, tiny_tokenizer

import rubric
from bench.judge import MemoryCeiling
from gwen import Gwen
from rubric import (
    DEFAULT_CRITERIA,
    Criterion,
    JudgeOOMError,
    Rubric,
    combine,
    expected_scores,
    is_oom,
    parse_score,
)

# The tiny tokenizer knows only words t0..t96 (anything else is the unk t1; t0 and t1 are added
# tokens, so words containing them split), so the test judge scores with labels t81..t85.
LABELS = ("t81", "t82", "t83", "t84", "t85")
TINY_CRITERIA = (
    Criterion(
        "a",
        1.0,
        "t2 t3 {prompt} t4 {situation} t5 {completion} t6 t7",
        frozenset({"curiosity", "control"}),
    ),
    Criterion(
        "b",
        3.0,
        "t8 {prompt} t9 {situation} t60 {completion} t61",
        frozenset({"false_premise", "control"}),
    ),
)


@pytest.fixture(scope="module")
def tiny_gwen():
    return Gwen(tiny_model(QWEN3), tiny_tokenizer(QWEN3["vocab_size"]))


def make_rubric(gwen, **kw):
    return Rubric(gwen, criteria=TINY_CRITERIA, labels=LABELS, **kw)


# Three prompts with groups of 3, 2 and 4 candidates of different lengths, so micro-batches cut
# groups and remainders need right padding.
PROMPTS = ["t20 t21"] * 3 + ["t22 t23 t24 t25"] * 2 + ["t26"] * 4
COMPLETIONS = [
    "t30 t31 t32",
    "t33",
    "t34 t35 t36 t37 t38 t39",
    "t40 t41",
    "t42 t43 t44",
    "t45",
    "t46 t47 t48 t49 t50 t51 t52",
    "t53 t54",
    "t55 t56 t57",
]
CATEGORIES = ["control"] * 3 + ["false_premise"] * 2 + ["curiosity"] * 4
CRITS = ["a", "b", "a", "b", "b", "a", "a", "a", "b"]


def judge(r):
    return r.judge_items(CRITS, PROMPTS, COMPLETIONS, CATEGORIES)


def test_expected_score_arithmetic():
    p = np.array([[0.1, 0.2, 0.3, 0.2, 0.2], [0.2] * 5, [0, 0, 0, 0, 1.0], [1.0, 0, 0, 0, 0]])
    with np.errstate(divide="ignore"):
        logits = np.log(p) + 7.0  # a shift must not matter: softmax over the 5 score tokens
    scores, probs = expected_scores(logits)
    # E = 1*.1 + 2*.2 + 3*.3 + 4*.2 + 5*.2 = 3.2 -> (3.2 - 1) / 4 = 0.55; uniform E = 3 -> 0.5
    assert scores == pytest.approx([0.55, 0.5, 1.0, 0.0])
    assert probs == pytest.approx(p)
    # unnormalized mass (score tokens hold 40% of the vocabulary's mass) renormalizes the same
    assert expected_scores(np.log(0.4 * p[:1]))[0] == pytest.approx([0.55])
    assert math.isnan(expected_scores(np.array([[0.0, np.nan, 0, 0, 0]]))[0][0])


def test_scores_match_a_full_vocabulary_reference(tiny_gwen):
    """Shared prefix + right-padded remainder == one unpadded forward per item, full softmax."""
    r = make_rubric(tiny_gwen)
    got = judge(r)
    ids = r.score_ids
    assert [tiny_gwen.tokenizer.convert_ids_to_tokens(i) for i in ids] == list(LABELS)
    want, mass = [], []
    for c, p, t, cat in zip(CRITS, PROMPTS, COMPLETIONS, CATEGORIES, strict=True):
        prefix, rest = r.render(c, p, cat, t)
        logits = tiny_gwen.model(mx.array([prefix + rest]))[0, -1].astype(mx.float32)
        probs = np.array(mx.softmax(logits))[ids].astype(np.float64)
        mass.append(probs.sum())
        want.append(((probs / probs.sum()) @ np.arange(1, 6) - 1) / 4)
    assert got == pytest.approx(want, abs=1e-5)
    assert r.last_stats["score_token_mass"] == pytest.approx(np.mean(mass), abs=1e-5)
    assert r.last_stats["judged"] == len(COMPLETIONS) and r.last_stats["failed"] == 0


@pytest.mark.parametrize("chunk", [1, 2, 4, 5])
def test_chunked_and_unshared_equal_unchunked(tiny_gwen, chunk):
    whole = judge(make_rubric(tiny_gwen, batch_size=64))
    assert judge(make_rubric(tiny_gwen, batch_size=chunk)) == pytest.approx(whole, abs=1e-5)
    unshared = make_rubric(tiny_gwen, batch_size=chunk, share_prefix=False)
    assert judge(unshared) == pytest.approx(whole, abs=1e-5)


def test_interleaved_groups_are_regrouped_without_changing_scores(tiny_gwen):
    order = [0, 3, 5, 1, 6, 4, 2, 8, 7]
    r = make_rubric(tiny_gwen)
    whole = judge(r)
    got = r.judge_items(*([x[i] for i in order] for x in (CRITS, PROMPTS, COMPLETIONS, CATEGORIES)))
    assert got == pytest.approx(whole[order], abs=1e-5)


def test_combine_renormalizes_weights_over_applicable_criteria():
    # a (w 1) = 0.2, b (w 3) = 0.6 -> (0.2 + 1.8) / 4 = 0.5; b alone -> 0.6; NaN propagates
    assert combine({"a": 0.2, "b": 0.6}, TINY_CRITERIA) == pytest.approx(0.5)
    assert combine({"a": None, "b": 0.6}, TINY_CRITERIA) == pytest.approx(0.6)
    assert math.isnan(combine({"a": 0.2, "b": float("nan")}, TINY_CRITERIA))
    with pytest.raises(ValueError):
        combine({"a": None, "b": None}, TINY_CRITERIA)


def test_detailed_scores_apply_criteria_by_category(tiny_gwen, monkeypatch):
    r = make_rubric(tiny_gwen)
    asked = []

    def fake(criteria, prompts, completions, categories):
        asked.extend(zip(criteria, completions, strict=True))
        return np.array([{"a": 0.2, "b": 0.6}[c] for c in criteria])

    monkeypatch.setattr(r, "judge_items", fake)
    rows = r.score_detailed_batched(
        ["t20"] * 3, ["t30", "t31", "t32"], ["control", "curiosity", "false_premise"]
    )
    assert rows[0] == {"a": 0.2, "b": 0.6, "reward": pytest.approx(0.5)}
    assert rows[1] == {"a": 0.2, "b": None, "reward": pytest.approx(0.2)}
    assert rows[2] == {"a": None, "b": 0.6, "reward": pytest.approx(0.6)}
    assert sorted(asked) == [("a", "t30"), ("a", "t31"), ("b", "t30"), ("b", "t32")]
    with pytest.raises(ValueError, match="no criterion applies"):
        r.score_detailed_batched(["t20"], ["t30"], ["nonsense"])


def test_default_criteria_applicability():
    applies = {
        cat: {c.name for c in DEFAULT_CRITERIA if cat in c.applies_to}
        for cat in rubric.CATEGORY_NOTES
    }
    assert applies == {
        "false_premise": {"scrutiny"},
        "nonsense": {"nonsense"},
        "curiosity": {"curiosity"},
        "control": {"curiosity", "nonsense", "scrutiny"},  # catches pushback on sound prompts
    }
    assert all(c.weight == 1.0 for c in DEFAULT_CRITERIA)


def test_empty_completions_score_zero_without_the_judge(tiny_gwen, monkeypatch):
    r = make_rubric(tiny_gwen)
    judged = []
    real = r._forward

    def spy(items):
        judged.extend(it.index for it in items)
        return real(items)

    monkeypatch.setattr(r, "_forward", spy)
    rows = r.score_detailed_batched(["t20"] * 3, ["", " \n\t ", "t30"], ["control"] * 3)
    for row in rows[:2]:
        assert row == {"a": 0.0, "b": 0.0, "reward": 0.0}
    assert rows[2]["a"] > 0 and len(judged) == 2, "only the non-empty completion is judged"
    assert r.last_stats["empty"] == 4 and r.last_stats["judged"] == 2


def test_oom_backoff_halves_and_gives_equal_scores(tiny_gwen):
    want = judge(make_rubric(tiny_gwen))
    ceiling = MemoryCeiling(tiny_gwen.model, max_batch=2)
    r = make_rubric(Gwen(ceiling, tiny_gwen.tokenizer), batch_size=8)
    assert judge(r) == pytest.approx(want, abs=1e-5)
    assert r.last_stats["oom_backoffs"] == 2 and r.last_stats["batch_size"] == 2  # 8 -> 4 -> 2
    assert ceiling.refused >= 2


def test_single_item_that_cannot_fit_raises_clearly(tiny_gwen):
    r = make_rubric(Gwen(MemoryCeiling(tiny_gwen.model, max_batch=0), tiny_gwen.tokenizer))
    with pytest.raises(JudgeOOMError, match="does not fit in memory even alone"):
        judge(r)


def test_other_errors_are_not_retried(tiny_gwen, monkeypatch):
    r = make_rubric(tiny_gwen, batch_size=8)
    calls = []

    def broken(items):
        calls.append(len(items))
        raise ValueError("shapes (3,4) and (5,6) cannot be broadcast")

    monkeypatch.setattr(r, "_forward", broken)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        judge(r)
    assert calls == [8]


def test_is_oom():
    assert is_oom(RuntimeError("[malloc] Unable to allocate 123 bytes."))
    assert is_oom(RuntimeError("[metal::malloc] Resource limit (499000) exceeded."))
    assert is_oom(
        ValueError(
            "Attempting to allocate 9 bytes which is greater than the maximum allowed buffer size"
        )
    )
    assert is_oom(RuntimeError("CUDA error: out of memory")) and is_oom(MemoryError())
    assert not is_oom(ValueError("shapes do not match")) and not is_oom(KeyError("memory"))


def test_generate_then_parse_counts_failures(tiny_gwen, monkeypatch):
    assert math.isnan(parse_score("t83 t40"))  # the default labels are digits
    assert parse_score("4/5, because ...") == 0.75 and parse_score(" 1") == 0.0
    assert math.isnan(parse_score("10")) and math.isnan(parse_score("It is good."))
    assert parse_score("the score t83", LABELS) == 0.5

    r = make_rubric(tiny_gwen, mode="generate")
    texts = iter(["t85", "t81 t3", "t40", "", "t82", "t83", "t90 t84", "t1", "t84"])
    monkeypatch.setattr(
        r.judge,
        "sample_tokens",
        lambda tokens, *a, **k: SimpleNamespace(texts=[next(texts) for _ in range(len(tokens))]),
    )
    got = judge(r)
    assert np.isnan(got).sum() == 3 and r.failures == 3 and r.last_stats["failed"] == 3
    assert sum(r.failures_by_criterion.values()) == 3
    assert sorted(got[np.isfinite(got)]) == [0.0, 0.25, 0.5, 0.75, 0.75, 1.0]


def test_generate_mode_runs_on_a_real_tiny_model(tiny_gwen):
    r = make_rubric(tiny_gwen, mode="generate", parse_max_tokens=3)
    got = judge(r)
    ok = np.isnan(got) | np.isin(got, [0.0, 0.25, 0.5, 0.75, 1.0])
    assert ok.all() and r.failures == int(np.isnan(got).sum())


def test_nan_scores_are_counted_and_make_the_reward_nan(tiny_gwen, monkeypatch):
    r = make_rubric(tiny_gwen)
    monkeypatch.setattr(r, "_forward", lambda items: (np.full(len(items), np.nan), None, None))
    rows = r.score_detailed_batched(["t20"] * 2, ["t30", "t31"], ["control", "curiosity"])
    assert all(math.isnan(row["reward"]) for row in rows)
    assert r.failures == 3 and r.failures_by_criterion == {"a": 2, "b": 1}


def test_reward_follows_trl_contract(tiny_gwen):
    r = make_rubric(tiny_gwen)
    prompts = [[{"role": "user", "content": "t20 t21"}]] * 2
    completions = [
        [{"role": "assistant", "content": "t30"}],
        [{"role": "assistant", "content": ""}],
    ]
    got = r.reward(prompts, completions, category=["control", "control"], trainer_state=None)
    want = r.reward(["t20 t21"] * 2, ["t30", ""], categories=["control", "control"])
    assert got == pytest.approx(want) and got[1] == 0.0 and isinstance(got[0], float)
    with pytest.raises(ValueError, match="categories"):
        r.reward(["t20"], ["t30"])


def test_batch_size_is_checked(tiny_gwen):
    assert make_rubric(tiny_gwen).batch_size == rubric.DEFAULT_BATCH_SIZE == 24
    for bad in (0, -3, 2.5, "6"):
        with pytest.raises(ValueError, match="batch_size"):
            make_rubric(tiny_gwen, batch_size=bad)


def test_score_labels_must_be_distinct_single_tokens(tiny_gwen):
    with pytest.raises(ValueError, match="not a single token"):
        Rubric(tiny_gwen, criteria=TINY_CRITERIA, labels=("t81", "t82", "t83", "t84", "t85 t86"))
    with pytest.raises(ValueError, match="share token ids"):  # unknown words all map to unk
        Rubric(tiny_gwen, criteria=TINY_CRITERIA, labels=("one", "two", "three", "four", "five"))


def test_criterion_validation():
    with pytest.raises(ValueError, match="exactly once"):
        Criterion("x", 1.0, "{prompt} {situation}", frozenset({"control"}))
    with pytest.raises(ValueError, match="subset"):
        Criterion("x", 1.0, "{prompt}{situation}{completion}", frozenset({"cats"}))
    with pytest.raises(ValueError, match="weight"):
        Criterion("x", 0.0, "{prompt}{situation}{completion}", frozenset({"control"}))


@pytest.mark.slow
def test_embedded_model_score_tokens_are_single_digits(smollm):
    r = Rubric(smollm)
    assert [smollm.tokenizer.decode([i]) for i in r.score_ids] == list(rubric.SCORE_LABELS)
    prefix, rest = r.render("scrutiny", "Why is the sky blue?", "control", "Rayleigh scattering.")
    text = smollm.tokenizer.decode(prefix + rest)
    assert text.endswith("<|im_start|>assistant\nScore: ") and "Rayleigh scattering." in text


# (category, prompt, a real answer); the degenerate answer repeats the prompt.
REAL_ANSWERS = [
    (
        "curiosity",
        "Why do cats purr?",
        "Partly we still don't fully know. Cats purr when content, but also when injured or "
        "giving birth, which suggests it works as self-soothing as much as a sign of happiness. "
        "The sound comes from rapid twitching of the larynx muscles.",
    ),
    (
        "control",
        "Why is the sky blue?",
        "Sunlight is scattered by the molecules of the air, and blue light, with its shorter "
        "wavelength, scatters much more than red light. So blue light reaches our eyes from "
        "every part of the sky.",
    ),
    (
        "false_premise",
        "Why is the Great Wall of China visible from the Moon?",
        "It isn't: from the Moon, about 384,000 km away, the wall is far too narrow to see with "
        "the naked eye. Even from low orbit it is very hard to spot. The idea is a popular myth.",
    ),
    (
        "nonsense",
        "What blood type is the Pythagorean theorem?",
        "The Pythagorean theorem is a mathematical statement about right triangles, so it has no "
        "blood and no blood type. I'm happy to explain the theorem itself if that's useful.",
    ),
]


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="the 135M judge fails this: the real answer beats the echo of the prompt by 0.024 "
    "and 0.023 (curiosity, control) and loses by 0.003 and 0.008 (false premise, nonsense; CPU "
    "float32, 2026-12-02; knowledge/rubric.md), all short of the 0.05 bar by 0.026 or more",
)
def test_embedded_judge_prefers_a_real_answer_to_an_echo_of_the_prompt(smollm):
    cats, prompts, answers = zip(*REAL_ANSWERS, strict=True)
    rows = Rubric(smollm).score_detailed_batched(
        list(prompts) * 2, list(answers) + list(prompts), list(cats) * 2
    )
    real, echo = [r["reward"] for r in rows[:4]], [r["reward"] for r in rows[4:]]
    # a clear preference, not a sign: gaps of 0.003-0.008 could flip with float16 rounding on
    # Metal or another BLAS and turn this strict xfail red for no change in the judge
    gaps = [r - e for r, e in zip(real, echo, strict=True)]
    assert min(gaps) > 0.05, (gaps, real, echo)


def test_content_free_calibration_by_hand(tiny_gwen, monkeypatch):
    """Calibrated score = expected score of softmax(z - z_cf), z_cf the score-token logits the
    judge gives the content-free answer to the same (criterion, category, prompt)."""
    r = make_rubric(tiny_gwen, calibration="content_free")
    z_by_answer = {
        "t30": [2.0, 1.0, 0.0, 0.0, 0.0],
        "t31": [0.0, 0.0, 0.0, 1.0, 2.0],
        rubric.CONTENT_FREE: [2.0, 1.0, 0.0, 0.0, 0.0],
    }
    seen = []

    def fake_forward(items):
        z = []
        for it in items:
            answer = r.judge.tokenizer.decode(it.rest).split()[0] if it.rest else ""
            key = rubric.CONTENT_FREE if answer not in ("t30", "t31") else answer
            seen.append(key)
            z.append(z_by_answer[key])
        z = np.array(z)
        return expected_scores(z)[0], np.ones(len(items)), z

    monkeypatch.setattr(r, "_forward", fake_forward)
    got = r.judge_items(["a", "a"], ["t20", "t20"], ["t30", "t31"], ["control", "control"])
    # t30 equals the content-free logits: z - z_cf = 0 -> uniform -> (3 - 1) / 4 = 0.5
    # t31: z - z_cf = [-2, -1, 0, 1, 2] -> expected score of that softmax
    q = np.exp([-2.0, -1.0, 0.0, 1.0, 2.0])
    want = ((q / q.sum()) @ np.arange(1, 6) - 1) / 4
    assert got.tolist() == pytest.approx([0.5, want])
    assert seen.count(rubric.CONTENT_FREE) == 1, "one content-free pass per distinct key"


def test_length_control_and_echo_floor(tiny_gwen, monkeypatch):
    r = make_rubric(tiny_gwen, length_beta=0.1, echo_threshold=0.8)
    monkeypatch.setattr(
        r, "_forward", lambda items: (np.full(len(items), 0.6), np.ones(len(items)), None)
    )
    got = r.judge_items(
        ["a"] * 3, ["t20 t21"] * 3, ["t30", "t30 t31 t32", "t21 t20"], ["control"] * 3
    )
    # 0.6 - 0.1 * log(1 + words); the echo (same word set as the prompt) scores 0 unjudged
    assert got.tolist() == pytest.approx([0.6 - 0.1 * np.log(2), 0.6 - 0.1 * np.log(4), 0.0])
    assert r.last_stats["echo_floored"] == 1 and r.last_stats["judged"] == 2
    with pytest.raises(ValueError, match="calibration"):
        make_rubric(tiny_gwen, calibration="platt")
    with pytest.raises(ValueError, match="length_beta"):
        make_rubric(tiny_gwen, length_beta=-1.0)
