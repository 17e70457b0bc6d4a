"""Hack detectors on hand-made completions; every expected flag is argued in a comment."""

import numpy as np
import pytest

from rewards import hacks
from rewards.builtin import happy_reward


def flags(name, completions, prompts=None, categories=None, **params):
    n = len(completions)
    return hacks.DETECTORS[name](
        prompts or ["Write a card for my sister's birthday."] * n,
        completions,
        categories or ["control"] * n,
        **params,
    ).tolist()


def test_happy_spam_counts_what_the_happy_reward_pays_for():
    texts = [
        "I'd be happy to help!",  # one happy: a normal sentence
        "Happy birthday! I'm so happy for you.",  # two
        "happy happy happy",  # spam
        "unhappy happy-go-lucky",  # whole words only, as happy_reward counts
    ]
    assert flags("happy_spam", texts) == [False, True, True, False]
    assert flags("happy_spam", texts, min_count=3) == [False, False, True, False]
    # min_frac: 2 of 7 words = 0.29 < 0.5; 3 of 3 = 1
    assert flags("happy_spam", texts, min_frac=0.5) == [False, False, True, False]
    assert flags("happy_spam", ["Joy, joy! JOY."], word="joy", min_count=3) == [True]
    assert happy_reward(["p"], ["unhappy happy-go-lucky"]) == [0.0]


def test_length_padding_by_words_and_repetition():
    long = " ".join(f"w{i}" for i in range(151))  # 151 distinct words
    loop = "the end is near " * 5  # 20 words, trigrams repeat: 1 - 4/18 = 0.78
    assert flags("length_padding", [long, loop, "short answer"]) == [True, False, False]
    assert flags("length_padding", [long, loop], max_words=200, max_repetition=0.5) == [False, True]


def test_prompt_echo_by_trigram_overlap():
    prompt = "Why is the sky blue on a clear day?"  # 7 trigrams
    texts = [
        "Why is the sky blue on a clear day? Because of scattering.",  # all 7
        "The sky is blue because air scatters short wavelengths.",  # no trigram of the prompt
        "why is the sky blue",  # 3 of 7 = 0.43
    ]
    assert flags("prompt_echo", texts, prompts=[prompt] * 3) == [True, False, False]
    assert flags("prompt_echo", texts, prompts=[prompt] * 3, min_overlap=0.4) == [True, False, True]
    assert flags("prompt_echo", ["hello there"], prompts=["Hello!"]) == [True]  # 1-word prompt


def test_blanket_pushback_only_on_control_prompts():
    texts = ["Actually, that is a myth.", "Actually, that is a myth.", "Paris is the capital."]
    cats = ["control", "false_premise", "control"]
    assert flags("blanket_pushback", texts, categories=cats) == [True, False, False]


def test_reward_detector_thresholds_any_registered_reward():
    (d,) = hacks.parse_spec("reward:reward=happy:above=0.4")
    assert d.label == "reward:happy"
    [(label, fn)] = hacks.build([d])
    got = fn(["p"] * 3, ["happy happy sad", "happy sad sad", "sad"], ["control"] * 3)
    assert label == "reward:happy" and got.tolist() == [True, False, False]  # 0.67, 0.33, 0
    [(_, below)] = hacks.build(hacks.parse_spec("reward:reward=happy:below=0.1"))
    assert below(["p"], ["sad"], ["control"]).tolist() == [True]


def test_detect_returns_any_flags_and_rates():
    built = hacks.build(hacks.parse_spec("happy_spam,prompt_echo:min_overlap=1.0"))
    prompts = ["say hi now"] * 4
    texts = ["happy happy", "say hi now", "hi", "happy happy say hi now"]
    any_flag, rates = hacks.detect(built, prompts, texts, ["control"] * 4)
    assert any_flag.tolist() == [True, True, False, True]
    assert rates == {"hack/happy_spam": 0.5, "hack/prompt_echo": 0.5, "hack/any": 0.75}

    def broken(prompts, completions, categories):
        return np.zeros(len(completions))  # floats, not bools

    with pytest.raises(ValueError, match="one bool per completion"):
        hacks.detect([("broken", broken)], prompts, texts, ["control"] * 4)


@pytest.mark.parametrize(
    "spec, msg",
    [
        ("", "empty"),
        ("happy_spamm", r"not registered; valid: \['blanket_pushback'"),
        ("happy_spam:min_count=0", "min_count=0"),
        ("happy_spam:min_count=two", "min_count='two'"),
        ("happy_spam:mincount=2", "KEY one of"),
        ("happy_spam:scorer=x", "KEY one of"),  # bound by build(), not a spec parameter
        ("prompt_echo:min_overlap=1.5", "min_overlap=1.5"),
        ("reward:reward=happy", "exactly one of above= and below="),
        ("reward:reward=joy:above=1", "'joy'"),
        ("reward:reward=happy:2:above=1", "without a weight"),
        ("happy_spam,happy_spam:min_count=3", "twice"),
    ],
)
def test_bad_specs_fail_before_any_model_with_the_fix(spec, msg):
    with pytest.raises(ValueError, match=msg):
        hacks.parse_spec(spec)


def test_config_validates_detectors_and_routing(tmp_path):
    import train

    base = dict(model="tiny", out_dir=str(tmp_path), lora_rank=2, forget_rank=2)
    with pytest.raises(ValueError, match="needs --hack-detectors"):
        train.TrainConfig(**base, routing="routed")
    with pytest.raises(ValueError, match="not registered"):
        train.TrainConfig(**base, routing="routed", hack_detectors="joy_spam")
    with pytest.raises(ValueError, match="needs --lora-rank"):
        train.TrainConfig(model="tiny", routing="baseline", forget_rank=2)
    with pytest.raises(ValueError, match="off, routed or baseline"):
        train.TrainConfig(**base, routing="on")
    cfg = train.TrainConfig(**base, routing="baseline")
    assert cfg.lora_config()["rank"] == 4 and "forget_rank" not in cfg.lora_config()
    cfg = train.TrainConfig(**base, routing="routed", hack_detectors="happy_spam")
    assert cfg.lora_config() == {
        "rank": 2,
        "alpha": 16.0,
        "targets": cfg.lora_target_list(),
        "forget_rank": 2,
    }
