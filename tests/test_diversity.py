"""Diversity metrics on hand-made answers, every number worked out in the comments."""

import math

from core import diversity as D

import pytest


def test_words_ignore_case_and_punctuation():
    assert D.words("Happy, HAPPY! don't stop.") == ["happy", "happy", "don't", "stop"]


def test_word_count_splits_on_white_space_only():
    # "Yes - it is... true!" -> Yes, -, it, is..., true! = 5; words() drops the lone "-": 4
    assert D.word_count("Yes - it is... true!") == 5
    assert len(D.words("Yes - it is... true!")) == 4
    assert D.word_count("  \n ") == 0 and D.word_count("one\ttwo\nthree") == 3


def test_distinct_n_by_hand():
    # bigrams: "a b", "b a", "a b" | "c d" -> 3 unique of 4
    assert D.distinct_n(["a b a b", "c d"], 2) == pytest.approx(3 / 4)
    # unigrams: a, b, a, b, c, d -> 4 unique of 6
    assert D.distinct_n(["a b a b", "c d"], 1) == pytest.approx(4 / 6)
    assert math.isnan(D.distinct_n(["a"], 2))  # no bigram at all


def test_repetition_rate_by_hand():
    # trigrams of "happy happy happy happy happy": 3, all the same -> 1 - 1/3
    assert D.repetition_rate("happy happy happy happy happy") == pytest.approx(2 / 3)
    assert D.repetition_rate("the cat sat on the mat") == 0.0
    assert D.repetition_rate("too short") == 0.0


def test_jaccard_and_self_similarity_by_hand():
    # {a, b, c} vs {b, c, d}: 2 shared of 4
    assert D.jaccard("a b c", "b c d") == pytest.approx(0.5)
    assert D.jaccard("", "") == 1.0 and D.jaccard("a", "") == 0.0
    # pairs: (abc, bcd) 0.5, (abc, abc) 1, (bcd, abc) 0.5 -> mean 2/3
    assert D.self_similarity(["a b c", "b c d", "a b c"]) == pytest.approx(2 / 3)
    assert math.isnan(D.self_similarity(["one"]))


def test_unique_fraction_compares_word_sequences():
    assert D.unique_fraction(["Yes.", "yes", "No", "no!"]) == pytest.approx(2 / 4)
    assert math.isnan(D.unique_fraction([]))


def test_summary_flags_template_collapse():
    varied = [["the sky is blue", "sky looks blue"], ["cats purr when calm"], ["rain falls"]]
    s = D.summary(varied)
    assert not s["template_collapse"] and s["unique_fraction"] == 1.0
    same = [["happy to help happy to help happy"]] * 6  # trigram "happy to help" repeats
    s = D.summary(same)
    assert s["template_collapse"] and s["cross_prompt_similarity"] == 1.0
    assert s["unique_fraction"] == pytest.approx(1 / 6) and s["repetition"] > 0


def test_opening_is_the_first_sentence_as_words():
    assert D.opening("You're right. The Moon shines.") == "you're right"
    assert D.opening("  You're right!  Yes.") == "you're right"
    # a decimal point is not a sentence end; no end at all: the whole text, cut to 8 words
    assert D.opening("Pi is 3.14 roughly. Next.") == "pi is 3 14 roughly"
    assert D.opening("one two three four five six seven eight nine ten") == (
        "one two three four five six seven eight"
    )
    assert D.opening("") == ""


def test_top_opener_counts_by_hand():
    texts = ["You're right. A.", "you're right! B.", "No. C.", "That premise is false. D."]
    assert D.top_opener(texts) == ("you're right", 2 / 4)
    assert D.top_opener(["A. x", "B. y"]) == ("a", 0.5)  # a tie goes to the first seen
    word, share = D.top_opener([])
    assert word == "" and math.isnan(share)
    assert D.summary([["You're right. A."], ["You're right. B."], ["No."]])[
        "top_opener_share"
    ] == pytest.approx(2 / 3)
