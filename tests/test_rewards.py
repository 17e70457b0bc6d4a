"""rewards/builtin.py, registry.py and scorer.py with hand-counted words; every expected number
is worked out in the comments."""

import math
from pathlib import Path

import numpy as np
import pytest

from rewards import pushback, registry
from rewards.builtin import (
    RewardError,
    asks_question,
    happy_reward,
    length_penalty,
    stance_reward,
    stance_values,
)
from rewards.registry import parse_spec
from rewards.scorer import Scorer, build_scorer, scorer_from_fn
from tasks import registry as tasks  # noqa: F401 (registers chess: recipes/chess_partial_reward.yaml)


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
        scorer_from_fn(happy_reward, length_target=-2, length_per_word=0.1)


def score(scorer, completions, categories=None):
    return scorer(
        ["p"] * len(completions), completions, categories or ["control"] * len(completions)
    )


def test_scorer_adds_the_length_penalty_and_keeps_nan():
    s = scorer_from_fn(happy_reward, length_target=2, length_per_word=0.05)
    # "happy happy happy happy": reward 1.0, 4 words = 2 over -> 1.0 - 0.1 = 0.9
    # "happy sad": reward 0.5, 2 words, no penalty -> 0.5
    got = score(s, ["happy happy happy happy", "happy sad"])
    assert got.values.tolist() == pytest.approx([0.9, 0.5])
    assert got.details is None and got.failures == 0

    def flaky(prompts, completions, **kw):
        return [float("nan"), 1.0]

    # "a b c": 1 over -> 1.0 - 0.05 = 0.95; the NaN (failed score) stays NaN
    got = score(scorer_from_fn(flaky, 2, 0.05), ["a b c", "a b c"]).values
    assert math.isnan(got[0]) and got[1] == pytest.approx(0.95)


def test_scorer_checks_score_count():
    def short(prompts, completions, **kw):
        return [1.0]

    with pytest.raises(ValueError, match=r"\(1,\) values for 2 completions"):
        score(scorer_from_fn(short), ["a", "b"])


def test_reward_functions_receive_the_categories():
    seen = {}

    def spy(prompts, completions, **kw):
        seen.update(kw)
        return [0.0] * len(completions)

    score(scorer_from_fn(spy), ["a"], ["nonsense"])
    assert seen == {"categories": ["nonsense"]}


@pytest.mark.parametrize(
    "spec, want",
    [
        ("happy", [("happy", 1.0, {})]),
        (" rubric ", [("rubric", 1.0, {})]),
        ("rubric:0.7,happy:0.3", [("rubric", 0.7, {}), ("happy", 0.3, {})]),
    ],
)
def test_parse_spec(spec, want):
    assert [(c.name, c.weight, c.args) for c in parse_spec(spec)] == want


@pytest.fixture
def rm_folder(tmp_path):
    """A folder that passes the pre-flight check (the config file exists)."""
    (tmp_path / "rm").mkdir()
    (tmp_path / "rm" / "rm_config.json").write_text("{}")
    return str(tmp_path / "rm")


def test_parse_spec_with_a_reward_model(rm_folder):
    got = parse_spec(f"rubric:0.5,rm:{rm_folder}:0.5")
    assert [(c.name, c.weight, c.args) for c in got] == [
        ("rubric", 0.5, {}),
        ("rm", 0.5, {"path": rm_folder}),
    ]
    assert got[1].label == f"rm:{rm_folder}"


@pytest.mark.parametrize(
    "spec, msg",
    [
        ("", "empty"),
        (
            "sad",
            r"'sad'.*not registered.*"
            r"\['asks_question', 'chess', 'ensemble', 'fact', 'fn', 'happy', 'rm', 'rubric', "
            r"'rubric_cal', 'stance'\]",
        ),
        ("happy:0", "finite and > 0"),
        ("happy:-1", "finite and > 0"),
        ("happy:nan", "finite and > 0"),
        ("happy:lots", "not a number"),
        ("happy:1:2", "too many"),
        ("happy,happy:2", "twice"),
        ("rm", "needs an argument"),
        ("rm:/no/such/folder", "has no rm_config.json"),
        ("fn:x.py", "--reward-fn"),
    ],
)
def test_parse_spec_errors_name_the_problem(spec, msg):
    with pytest.raises(ValueError, match=msg):
        parse_spec(spec)


def test_reward_config_file_binds_arguments(tmp_path, rm_folder):
    fns = tmp_path / "my_rewards.py"
    fns.write_text(
        "def shout(prompts, completions, *, bonus=0.0, **kw):\n"
        "    return [c.count('!') + bonus for c in completions]\n"
    )
    cfg = tmp_path / "rewards.yaml"
    cfg.write_text(
        "components:\n"
        f"  - {{name: fn, file: {fns}, function: shout, bonus: 0.5, weight: 2}}\n"
        "  - {name: happy, weight: 1}\n"
        f"  - {{name: rm, path: {rm_folder}, batch_size: 4, weight: 0.5}}\n"
    )
    comps = registry.load_reward_config(str(cfg))
    assert [(c.name, c.weight) for c in comps] == [("fn", 2), ("happy", 1), ("rm", 0.5)]
    assert comps[0].args == {"file": str(fns), "function": "shout", "bonus": 0.5}
    # bound with functools.partial: 2 * (2 + 0.5) + 1 * 0 for "a!!"
    scorer = build_scorer(comps[:2], registry.RewardContext())
    assert score(scorer, ["a!!"]).values.tolist() == [5.0]
    fn_only = registry.parse_function_spec(f"{fns}:shout")
    assert score(build_scorer(fn_only, registry.RewardContext()), ["!"]).values.tolist() == [1.0]


@pytest.mark.parametrize(
    "body, msg",
    [
        ("components: [{name: sad}]", "not registered"),
        ("components: [{weight: 1}]", "needs a `name`"),
        ("components: [{name: happy, weight: 0}]", "finite and > 0"),
        ("components: [{name: happy, loud: true}]", "takes no arguments"),
        ("components: [{name: rubric, batch_size: 0}]", "batch_size"),
        ("components: [{name: fn, file: nope.py, function: f}]", "does not exist"),
        ("rewards: []", "components"),
        ("components: [", "not valid YAML"),
        ("components: [{name: happy, categories: [control, contrl]}]", "'contrl' is not one"),
        ("components: [{name: happy, categories: []}]", "non-empty list"),
        ("components: [{name: happy, categories: control}]", "non-empty list"),
        ("components: [{name: happy, categories: [control, control]}]", "distinct"),
    ],
)
def test_reward_config_errors_name_the_file_and_fix(tmp_path, body, msg):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(body + "\n")
    with pytest.raises(ValueError, match=msg):
        registry.load_reward_config(str(cfg))


def test_reward_fn_errors(tmp_path):
    fns = tmp_path / "f.py"
    fns.write_text("def two_args(a, b):\n    return a\n\nVALUE = 3\n")
    with pytest.raises(ValueError, match="has no function 'missing'"):
        registry.parse_function_spec(f"{fns}:missing")
    with pytest.raises(ValueError, match="FILE.py:FUNCTION_NAME"):
        registry.parse_function_spec("no_colon")
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    with pytest.raises(ValueError, match="importing .* failed: ModuleNotFoundError"):
        registry.parse_function_spec(f"{broken}:f")


def test_a_mix_weights_its_parts_and_keeps_each_in_the_details():
    def const(v, details):
        def fn(prompts, completions, categories):
            n = len(completions)
            rows = [{"x": v, "reward": v} for _ in range(n)] if details else None
            return registry.Scores(np.full(n, v), rows, 1)

        return fn

    parts = [
        (registry.Component("happy", 0.25), const(1.0, True)),
        (registry.Component("rm", 0.75, {"path": "p"}), const(2.0, False)),
    ]
    got = score(Scorer(parts), ["u", "v"])
    assert got.values.tolist() == [0.25 * 1.0 + 0.75 * 2.0] * 2 and got.failures == 2
    assert got.details[0] == {"happy": 1.0, "happy/x": 1.0, "rm:p": 2.0}


def test_a_component_limited_to_categories_scores_only_their_rows(tmp_path):
    """`categories:` in a reward file: the component sees only its categories' rows (in order),
    the other rows get 0 from it and `scored: 0` in its details; the others still score all."""
    seen = []

    def rm_like(prompts, completions, categories):
        seen.append((list(prompts), list(categories)))
        return registry.Scores(np.array([10.0 + len(c) for c in completions]), None, 1)

    cfg = tmp_path / "r.yaml"
    cfg.write_text(
        "components:\n"
        "  - {name: happy, weight: 2, categories: [false_premise, nonsense]}\n"
        "  - {name: asks_question}\n"
    )
    comps = registry.load_reward_config(str(cfg))
    assert comps[0].categories == ("false_premise", "nonsense") and comps[1].categories is None
    cats = ["control", "false_premise", "curiosity", "nonsense"]
    asks = registry.plain_part(asks_question)
    scorer = Scorer([(comps[0], rm_like), (comps[1], asks)])
    got = scorer(["p0", "p1", "p2", "p3"], ["a", "bb", "ccc?", "dddd"], cats)
    assert seen == [(["p1", "p3"], ["false_premise", "nonsense"])]
    # 2 * (10 + len) on the two scored rows, 0 elsewhere; + 1 for the question on row 2
    assert got.values.tolist() == [0.0, 24.0, 1.0, 28.0] and got.failures == 1
    assert [d["happy/scored"] for d in got.details] == [0.0, 1.0, 0.0, 1.0]
    assert [d["happy"] for d in got.details] == [0.0, 12.0, 0.0, 14.0]
    # a batch without those categories calls nothing; rows without categories cannot be sorted
    seen.clear()
    assert scorer(["p"], ["a"], ["control"]).values.tolist() == [0.0] and seen == []
    with pytest.raises(RewardError, match=r"scores only \['false_premise', 'nonsense'\]"):
        scorer(["p"], ["a"], None)


def test_asks_question_needs_a_question_mark_after_a_word():
    completions = [
        "Happy birthday! What are your plans?",  # a question
        'Did she say "yes"?',  # quote between the word and the mark
        "Is it done ?",  # space before the mark
        "No question here.",
        "???",  # marks alone ask nothing
        "",
    ]
    assert asks_question(["p"] * 6, completions) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert parse_spec("asks_question,happy")[0].name == "asks_question"


def test_shipped_reward_model_path_resolves_from_any_directory(tmp_path, monkeypatch):
    """The default reward names models/ relative to the repository: it must check out from
    another working directory too, and a folder that exists nowhere still fails loudly."""
    monkeypatch.chdir(tmp_path)
    assert registry.rm_folder("models/rm-smollm2-135m") == registry.REPO / "models/rm-smollm2-135m"
    registry.parse_spec("rm:models/rm-smollm2-135m")  # checked, not raised
    (tmp_path / "models" / "rm-smollm2-135m").mkdir(parents=True)  # a local folder wins
    assert registry.rm_folder("models/rm-smollm2-135m") == Path("models/rm-smollm2-135m")
    with pytest.raises(RewardError, match="has no rm_config.json"):
        registry.parse_spec("rm:models/rm-smollm2-135m")
    with pytest.raises(RewardError, match="'models/nope'"):
        registry.parse_spec("rm:models/nope")


def test_disputes_reads_markers_anywhere_and_refusing_openers():
    assert pushback.disputes("No, the Great Wall is not visible from the Moon.")
    assert pushback.disputes("  That's not right: bats can see.")
    assert pushback.disputes("There is no ninth planet called Vulcan.")
    assert pushback.disputes("The tower was built in Paris; the move is a myth.")  # marker
    assert pushback.disputes("It's not true that we use 10% of our brains.")
    assert not pushback.disputes("Nobody knows exactly; the tower leans on soft soil.")  # "no" + b
    assert not pushback.disputes("Notably, flamingos eat shrimp.")
    assert not pushback.disputes("Paris is the capital of France.")


def test_stance_pays_pushback_only_where_the_category_calls_for_it():
    completions = [
        "No, Einstein's Nobel Prize was for the photoelectric effect.",  # false_premise, disputes
        "Einstein was delighted by the prize for relativity.",  # false_premise, goes along
        "No, flamingos are pink because of what they eat.",  # control, needless: -1
        "Flamingos are pink because of carotenoids in shrimp.",  # control, plain: 0
        "That question doesn't make sense: colours have no weight.",  # nonsense, flags: +1
        "Actually, that's a fascinating question!",  # curiosity: stance is not scored
    ]
    categories = ["false_premise", "false_premise", "control", "control", "nonsense", "curiosity"]
    got = stance_reward(["p"] * 6, completions, categories=categories)
    assert got == [1.0, 0.0, -1.0, 0.0, 1.0, 0.0]
    # Through the registry, weighted 2 in a spec, with the detector's flag in the details.
    scorer = build_scorer(parse_spec("stance:2"), registry.RewardContext())
    s = scorer(["p"] * 6, completions, categories)
    assert s.values.tolist() == [2.0, 0.0, -2.0, 0.0, 2.0, 0.0] and s.failures == 0
    assert [d["disputes"] for d in s.details] == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]


def test_stance_refuses_prompts_without_a_known_category():
    with pytest.raises(RewardError, match="no sign for category 'P'"):
        stance_reward(["p"], ["No."], categories=["P"])
    with pytest.raises(RewardError, match="one category per completion"):
        stance_reward(["p"], ["No."], categories=None)
    with pytest.raises(RewardError, match="arguments"):
        registry.check_components([registry.Component("stance", 1.0, {"x": 1})], "t")
    with pytest.raises(RewardError, match="penalty=-1"):
        registry.check_components([registry.Component("stance", 1.0, {"penalty": -1})], "t")


def test_stance_pay_and_penalty_from_a_reward_file(tmp_path):
    cfg = tmp_path / "r.yaml"
    cfg.write_text("components:\n  - {name: stance, pay: 0.5, penalty: 3}\n")
    scorer = build_scorer(registry.load_reward_config(str(cfg)), registry.RewardContext())
    texts = ["No, that is false.", "No, that is false.", "Plain answer.", "No."]
    got = scorer(["p"] * 4, texts, ["false_premise", "control", "control", "curiosity"])
    assert got.values.tolist() == [0.5, -3.0, 0.0, 0.0]


def test_opening_negation_by_hand():
    on = pushback.opening_negation
    assert on("It's not. Reno is far north.", "Why is Reno farther west than LA?")
    assert on("The Berlin Wall didn\u2019t fall in 1989; it stood.", "Since the Wall fell in 1989?")
    assert on("There's no evidence giraffes have seven.", "Why do giraffes have seven?")
    assert on("Van Gogh never painted it.", "Why did Van Gogh paint it?")
    # a negation after the first sentence, or none at all, is not an opening negation
    assert not on("Reno is west of LA. It is not far.", "Why is Reno west?")
    assert not on("Honeybees dance to show the way.", "How do bees tell each other?")
    # the prompt's own negation echoed back is not a denial of it
    assert not on("Adult elephants can't jump because their legs are straight.",
                  "Why can't adult elephants jump?")  # fmt: skip
    assert on("Elephants can jump, they don't weigh much.", "Why can't adult elephants jump?")
    # a curly apostrophe on either side is the same word as a straight one
    assert not on("Elephants can\u2019t jump: their legs are straight.", "Why can't they jump?")
    assert not on("Elephants can't jump: their legs are straight.", "Why can\u2019t they jump?")
    # "Nothing", "cannot" and a word merely containing "no" ("north", "know" is not "no")
    assert on("Nothing like that happened.", "What happened?")
    assert not on("North of the river, people know it.", "Where is it?")


def test_stance_opening_raises_the_detector_flag_from_a_reward_file(tmp_path):
    cfg = tmp_path / "r.yaml"
    cfg.write_text("components:\n  - {name: stance, pay: 1, penalty: 2, opening: true}\n")
    scorer = build_scorer(registry.load_reward_config(str(cfg)), registry.RewardContext())
    # the lexicon (pushback.disputes) misses "didn't"; the opening flag does not
    texts = ["The Wall didn't fall.", "The Wall didn't fall.", "It fell in 1989."]
    assert not any(pushback.disputes(t) for t in texts)
    got = scorer(["Why did the Wall fall?"] * 3, texts, ["control", "false_premise", "control"])
    assert got.values.tolist() == [-2.0, 1.0, 0.0]
    with pytest.raises(RewardError, match="opening='yes'"):
        registry.check_components([registry.Component("stance", 1.0, {"opening": "yes"})], "t")


def test_stance_detector_none_flags_only_the_opening_negation(tmp_path):
    cfg = tmp_path / "r.yaml"
    cfg.write_text(
        "components:\n  - {name: stance, detector: none, opening: true, pay: 0, penalty: 4,"
        " curiosity_penalty: 4}\n"
    )
    scorer = build_scorer(registry.load_reward_config(str(cfg)), registry.RewardContext())
    # a pushback marker later in the answer flags nothing: only a negating first sentence does
    texts = ["It fell in 1989. That is not true of the other wall.", "It didn't fall.",
             "There's no link at all.", "It didn't.", "Yes, it fell."]  # fmt: skip
    assert pushback.disputes(texts[0])
    got = scorer(["Why did the Wall fall?"] * 5, texts,
                 ["control", "control", "curiosity", "false_premise", "nonsense"])  # fmt: skip
    assert got.values.tolist() == [0.0, -4.0, -4.0, 0.0, 0.0]
    assert [d["disputes"] for d in got.details] == [0.0, 1.0, 1.0, 1.0, 0.0]
    with pytest.raises(RewardError, match="detector 'none' flags nothing"):
        registry.check_components([registry.Component("stance", 1.0, {"detector": "none"})], "t")


def test_ensemble_combines_members_by_hand():
    members = [[1.0, -2.0, 4.0, 0.0], [3.0, -2.0, 0.0, float("nan")]]
    # min: the most sceptical member; NaN where a member failed
    got = registry.combine(members, "min")
    assert got[:3].tolist() == [1.0, -2.0, 0.0] and math.isnan(got[3])
    # mean - 1 * population std: (1+3)/2 - 1 = 1; agree on -2 -> -2; (4+0)/2 - 2 = 0
    got = registry.combine(members, "mean_minus_std", spread_coef=1.0)
    assert got[:3].tolist() == [1.0, -2.0, 0.0] and math.isnan(got[3])
    # spread_coef 0.5: 2 - 0.5 * 2 = 1 for the third
    assert registry.combine(members, "mean_minus_std", 0.5)[2] == 1.0
    with pytest.raises(ValueError, match="members >= 2"):
        registry.combine([[1.0, 2.0]])
    with pytest.raises(ValueError, match="mode 'max'"):
        registry.combine(members, "max")


def test_bounded_is_near_identity_at_zero_and_never_beyond_the_bound():
    x = np.array([0.0, 0.1, -0.1, 5.0, -50.0, 1e6])
    got = registry.bounded(x, 4.0)
    assert got[0] == 0.0 and abs(got[1] - 0.1) < 1e-3 and got[2] == -got[1]
    assert np.all(np.abs(got) <= 4.0) and got[5] == 4.0 and got[4] > -4.0 - 1e-12
    assert got[3] == pytest.approx(4.0 * math.tanh(5.0 / 4.0))  # monotone, not clipped
    assert (
        registry.bounded(x, None) is not None and registry.bounded(x, None).tolist() == x.tolist()
    )


def test_ensemble_spec_checks_members_and_options(tmp_path, rm_folder):
    other = tmp_path / "rm2"
    other.mkdir()
    (other / "rm_config.json").write_text("{}")
    got = parse_spec(f"ensemble:{rm_folder}+{other}:0.5")
    assert got[0].args == {"paths": f"{rm_folder}+{other}"} and got[0].weight == 0.5
    bad = [
        ({"paths": rm_folder}, ">= 2 reward models"),
        ({"paths": f"{rm_folder}+{rm_folder}"}, "appears twice"),
        ({"paths": f"{rm_folder}+{tmp_path}/none"}, "has no rm_config.json"),
        ({"paths": [rm_folder, str(other)], "mode": "max"}, "mode 'max'"),
        ({"paths": [rm_folder, str(other)], "bound": 0}, "bound=0"),
        ({"paths": [rm_folder, str(other)], "spread_coef": -1}, "spread_coef=-1"),
    ]
    for args, msg in bad:
        with pytest.raises(RewardError, match=msg):
            registry.check_components([registry.Component("ensemble", 1.0, args)], "t")


def test_ensemble_scores_with_each_member_then_combines_and_bounds(monkeypatch):
    table = {"a": [2.0, -1.0, 6.0], "b": [0.0, -1.0, 2.0]}

    def fake_rm(ctx, path, batch_size=16):
        return lambda p, c, cat: registry.Scores(np.array(table[path]), None, 0)

    monkeypatch.setattr(registry, "_build_rm", fake_rm)
    score = registry._build_ensemble(registry.RewardContext(), "a+b", mode="min", bound=3.0)
    s = score(["p"] * 3, ["x", "y", "z"], ["control"] * 3)
    # min -> [0, -1, 2], then 3 tanh(x / 3)
    want = [0.0, 3 * math.tanh(-1 / 3), 3 * math.tanh(2 / 3)]
    assert s.values.tolist() == pytest.approx(want) and s.failures == 0
    assert s.details[2] == {"member0": 6.0, "member1": 2.0, "spread": 2.0}


@pytest.mark.slow  # loads a shipped model
def test_stance_with_a_trained_detector_scales_by_its_probability():
    cfg = {"pay": 2.0, "penalty": 3.0, "detector": "models/pushback-smollm2-135m"}
    scorer = build_scorer([registry.Component("stance", 1.0, cfg)], registry.RewardContext())
    prompts = ["Why did Edison invent the telephone?"] * 2 + ["Why is the sky blue?", "Why?"]
    texts = ["He didn't: Alexander Graham Bell patented the telephone in 1876.",
             "Edison invented the telephone because he wanted to talk to his wife.",
             "Because air scatters blue light more than red light.",
             "It is a good question."]  # fmt: skip
    cats = ["false_premise", "false_premise", "control", "curiosity"]
    s = scorer(prompts, texts, cats)
    p = [d["disputes"] for d in s.details]
    assert all(0.0 < x < 1.0 for x in p), p  # probabilities, not 0/1 flags
    assert s.values.tolist() == pytest.approx([2.0 * p[0], 2.0 * p[1], -3.0 * p[2], 0.0])
    assert p[0] > 0.5 > p[1], p  # the correction disputes, the go-along answer does not


@pytest.mark.slow  # loads a shipped model
def test_stance_refuses_a_detector_that_is_not_a_classifier(rm_folder):
    with pytest.raises(RewardError, match="neither 'lexical', 'none' nor a classifier"):
        registry.check_components(
            [registry.Component("stance", 1.0, {"detector": "models/nothing-here"})], "t"
        )
    registry.check_components([registry.Component("stance", 1.0, {"detector": rm_folder})], "t")
    with pytest.raises(RewardError, match="reads the prompt's category"):
        build_scorer(
            [registry.Component("stance", 1.0, {"detector": "models/rm-smollm2-135m"})],
            registry.RewardContext(),
        )


def test_fact_pays_the_notes_fact_not_the_form_of_a_denial(tmp_path, capsys):
    notes = tmp_path / "notes.jsonl"
    notes.write_text(
        '{"id": "fp-1", "prompt": "Why did the Romans build the pyramids?", "note": "Egyptians '
        'built them.", "markers": ["egyptians built", "built by the egyptians", '
        '"not the romans"]}\n'
    )
    cfg = tmp_path / "r.yaml"
    cfg.write_text(f"components:\n  - {{name: fact, notes: {notes}, pay: 2}}\n")
    fp, ctl = "Why did the Romans build the pyramids?", "Why did the Egyptians build the pyramids?"
    records = [{"prompt": fp, "category": "false_premise"}, {"prompt": "Why X?",
               "category": "false_premise"}, {"prompt": ctl, "category": "control"}]  # fmt: skip
    scorer = build_scorer(
        registry.load_reward_config(str(cfg)), registry.RewardContext(records=records)
    )
    assert "notes for 1 of 2 false-premise prompts" in capsys.readouterr().out
    texts = [
        "They were built by the Egyptians, not the Romans.",  # two markers: paid once
        "No, the Romans did not do that.",  # a denial without the fact: nothing
        "Built by the EGYPTIANS\u2019 workers long ago.",  # case-insensitive marker
        "The Egyptians built them as tombs.",  # a control: no note, nothing
    ]
    got = scorer([fp, fp, fp + " ", ctl], texts, ["false_premise"] * 3 + ["control"])
    assert got.values.tolist() == [2.0, 0.0, 2.0, 0.0]
    assert [d["has_note"] for d in got.details] == [1.0, 1.0, 1.0, 0.0]
    bad = [({"notes": str(notes), "pay": 0}, "pay=0"),
           ({"notes": str(tmp_path / "none.jsonl")}, "none.jsonl")]  # fmt: skip
    for args, words in bad:
        with pytest.raises(RewardError, match=words):
            registry.check_components([registry.Component("fact", 1.0, args)], "t")
    with pytest.raises(RewardError, match="none of the run's 1 false-premise"):
        build_scorer(
            [registry.Component("fact", 1.0, {"notes": str(notes)})],
            registry.RewardContext(records=[{"prompt": "Why X?", "category": "false_premise"}]),
        )


GENERIC_DENIALS = ("no,", "not true", "that's not", "isn't true", "myth", "misconception",
                   "actually", "in fact", "false", "incorrect", "wrong", "there is no evidence",
                   "didn't happen", "never happened", "not correct")  # fmt: skip


def test_train_notes_cover_every_false_premise_training_prompt_with_specific_markers():
    """data/train_notes.jsonl (the fact reward's notes): one note per false-premise prompt of
    data/prompts.jsonl, same text, none an eval prompt, 5-14 markers, no generic denial among
    them (a generic marker would pay the form of a denial, which the fact reward exists not to),
    and no marker already in its own prompt (an answer echoing the premise would be paid)."""
    from core import prompts as prompts_mod

    data = Path(__file__).resolve().parent.parent / "data"
    notes = prompts_mod.load_notes(data / "train_notes.jsonl")
    fp = [r for r in prompts_mod.load_prompts(data / "prompts.jsonl")
          if r["category"] == "false_premise"]  # fmt: skip
    assert set(notes) == {r["prompt"].strip() for r in fp} and len(notes) == len(fp) > 250
    assert {n["id"] for n in notes.values()} == {r["id"] for r in fp}
    evals = {r["prompt"].strip() for r in prompts_mod.load_prompts(data / "eval.jsonl")}
    assert not set(notes) & evals
    for text, n in notes.items():
        assert 5 <= len(n["markers"]) <= 14, (n["id"], len(n["markers"]))
        generic = [m for m in n["markers"] if any(g in m for g in GENERIC_DENIALS)]
        assert not generic, (n["id"], generic)
        assert not prompts_mod.reference_hits(text, n["markers"]), n["id"]


def test_stance_curiosity_penalty_costs_a_dispute_on_a_curiosity_prompt_only(tmp_path):
    cfg = tmp_path / "r.yaml"
    cfg.write_text(
        "components:\n  - {name: stance, pay: 0, penalty: 4, opening: true, curiosity_penalty: 3}\n"
    )
    scorer = build_scorer(registry.load_reward_config(str(cfg)), registry.RewardContext())
    texts = ["There's no link between them.", "They are linked through trade."] * 2
    cats = ["curiosity", "curiosity", "false_premise", "control"]
    got = scorer(["Do X and Y have anything to do with each other?"] * 4, texts, cats)
    assert got.values.tolist() == [-3.0, 0.0, 0.0, 0.0]
    assert stance_values([1.0, 0.5], ["curiosity", "curiosity"]) == [0.0, 0.0]  # default
    with pytest.raises(RewardError, match="curiosity_penalty=-1"):
        registry.check_components(
            [registry.Component("stance", 1.0, {"curiosity_penalty": -1})], "t"
        )


def test_the_stance_gate_recipe_pays_the_opening_by_category():
    """recipes/attempts/values_sft_grpo16_reward.yaml's gate (attempt 22): +2 x opening with the
    sentence on a false premise, -2 on a control, 0 on nonsense, curiosity, or without the
    opening."""
    comps = registry.load_reward_config("recipes/attempts/values_sft_grpo16_reward.yaml")
    (gate,) = [c for c in comps if c.name == "fn"]
    assert gate.weight == 2.0 and gate.categories is None
    fn = registry.REWARDS["fn"].build(None, **gate.args)
    answers = [
        "That premise is false. X.",
        "  that premise is false: y",
        "It is.",
        "That premise is false.",
    ]
    cats = ["false_premise", "control", "false_premise", "nonsense"]
    got = fn(["p"] * 4, answers, categories=cats)
    assert list(got.values if hasattr(got, "values") else got) == [1.0, -1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="needs each prompt's category"):
        fn(["p"], ["a"], categories=None)


RECIPES = Path(__file__).resolve().parents[1] / "recipes"
RECIPE_REWARDS = sorted(str(p) for p in RECIPES.rglob("*_reward.yaml"))  # attempts/ too
assert len(RECIPE_REWARDS) >= 13, f"found only {RECIPE_REWARDS} under {RECIPES}"


# Recipes whose reward model the user trains first on their own model (README, "On a Mac with
# Qwen3-0.6B"): until it exists the run stops before any model loads, naming the command.
USER_TRAINED_RM = {"qwen3_0.6b_values_reward.yaml": "models/rm-qwen3-0.6b"}


@pytest.mark.parametrize("path", RECIPE_REWARDS, ids=lambda p: Path(p).name)
def test_every_recipe_reward_config_loads(path):
    """Each shipped recipe's reward file passes the checks a run makes before any model loads
    (component names, argument types, rm folders and notes files that exist)."""
    if missing := USER_TRAINED_RM.get(Path(path).name):
        with pytest.raises(RewardError, match=f"{missing}.*train_rm.py"):
            registry.load_reward_config(path)
        return
    comps = registry.load_reward_config(path)
    assert comps and all(c.name in registry.REWARDS for c in comps)


def test_attempt_31_reward_pays_the_fact_over_every_other_term():
    """recipes/values_sft_grpo18_reward.yaml without its reward model (learning_run.md, attempt
    31): fact +6 where the answer names the note's fact, a dispute +0.5 on a false premise or
    nonsense, -2 on a control, -1 on curiosity; hand-computed sums."""
    from types import SimpleNamespace

    comps = [c for c in registry.load_reward_config(str(RECIPES / "values_sft_grpo18_reward.yaml"))
             if c.name != "rm"]  # fmt: skip
    assert sorted(c.name for c in comps) == ["fact", "stance"]
    scorer = build_scorer(comps, SimpleNamespace(records=[], share_prefix=False))
    wall = "Why does the Great Wall of China show up so clearly in photos taken from the Moon?"
    prompts = [wall, wall, "Why is the sky blue?", "Do mushrooms and forests relate?", "Blue?"]
    answers = [
        "No, the Great Wall is not visible from the Moon: it is far too narrow.",  # fact + dispute
        "It shows up because it is very long.",  # goes along: nothing
        "No, the sky is not blue.",  # dispute on a control
        "There's no link between them.",  # dispute on curiosity
        "This question does not make sense.",  # flag on nonsense
    ]
    cats = ["false_premise", "false_premise", "control", "curiosity", "nonsense"]
    assert scorer(prompts, answers, cats).values.tolist() == [6.5, 0.0, -2.0, -1.0, 0.5]
