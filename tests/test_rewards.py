"""rewards.py with hand-counted words; every expected number is worked out in the comments."""

import math

import pytest

from rewards import get_reward, happy_reward, length_penalty, with_length_penalty


def test_happy_reward_counts_words_case_and_punctuation_insensitively():
    completions = [
        "I am happy",  # 1 of 3 words
        "Happy, HAPPY! happy.",  # 3 of 3: case and edge punctuation ignored
        "unhappy happy-go-lucky happyhappy",  # 0 of 3: only the whole word counts
        "so   happy\n\ttoday !!!",  # 1 of 4: "!!!" is a (non-happy) word
        "",  # empty -> 0, not a division by zero
        "   ",  # whitespace only -> 0
        "\"happy\" 'happy'",  # 2 of 2: quotes are punctuation
    ]
    got = happy_reward(["p"] * len(completions), completions)
    assert got == pytest.approx([1 / 3, 1.0, 0.0, 0.25, 0.0, 0.0, 1.0])
    assert all(0.0 <= r <= 1.0 for r in got)


def test_happy_reward_accepts_extra_keywords():
    assert happy_reward(["p"], ["happy"], prompt_ids=["x"], step=3) == [1.0]


def test_length_penalty_only_beyond_target():
    # word counts 2, 5, 8 against target 5: excess 0, 0, 3 -> 0, 0, -3 * 0.1
    completions = ["a b", "a b c d e", "a b c d e f g h"]
    got = length_penalty(completions, target_words=5, per_word=0.1)
    assert got == pytest.approx([0.0, 0.0, -0.3])
    assert length_penalty([], target_words=5, per_word=0.1) == []


def test_length_penalty_rejects_negative_settings():
    with pytest.raises(ValueError, match="per_word=-1"):
        length_penalty(["a"], target_words=3, per_word=-1)
    with pytest.raises(ValueError, match="target_words=-2"):
        with_length_penalty(happy_reward, target_words=-2, per_word=0.1)


def test_with_length_penalty_adds_to_reward_and_keeps_nan():
    fn = with_length_penalty(happy_reward, target_words=2, per_word=0.05)
    # "happy happy happy happy": reward 1.0, 4 words = 2 over -> 1.0 - 0.1 = 0.9
    # "happy sad": reward 0.5, 2 words, no penalty -> 0.5
    assert fn(["p", "p"], ["happy happy happy happy", "happy sad"]) == pytest.approx([0.9, 0.5])
    assert fn.__name__ == "happy_reward+length_penalty"

    def flaky(prompts, completions, **kw):
        return [float("nan"), 1.0]

    # "a b c": 1 over -> 1.0 - 0.05 = 0.95; the NaN (failed score) stays NaN
    got = with_length_penalty(flaky, 2, 0.05)(["p", "p"], ["a b c", "a b c"])
    assert math.isnan(got[0]) and got[1] == pytest.approx(0.95)


def test_with_length_penalty_checks_score_count():
    def short(prompts, completions, **kw):
        return [1.0]

    with pytest.raises(ValueError, match="1 scores for 2 completions"):
        with_length_penalty(short, 2, 0.05)(["p", "p"], ["a", "b"])


def test_get_reward():
    assert get_reward("happy") is happy_reward
    with pytest.raises(ValueError, match=r"'sad'.*\['happy'\]"):
        get_reward("sad")
