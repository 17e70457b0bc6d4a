"""The shipped prompt sets and judge pairs load and meet their targets; the loaders reject bad
files with a DataError that names the file and the line."""

import json
import os
import re

from core.jsonl import DataError, data_error, read_jsonl
from core.pairs import pairs_and_singles
from core.prompts import (
    CATEGORIES,
    CRITERIA,
    JUDGED_ON,
    PAIR_CRITERION,
    load_judge_pairs,
    load_prompts,
    norm,
    prompt_stream,
    select_split,
)

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data")
TRAIN = os.path.join(DATA, "prompts.jsonl")
EVAL = os.path.join(DATA, "eval.jsonl")
PAIRS = os.path.join(DATA, "judge_pairs.jsonl")


@pytest.fixture(scope="module")
def train():
    return load_prompts(TRAIN)


@pytest.fixture(scope="module")
def held_out():
    return load_prompts(EVAL)


@pytest.fixture(scope="module")
def pairs():
    return load_judge_pairs(PAIRS)


# ---- shipped files ------------------------------------------------------------------------


def test_train_and_eval_sizes(train, held_out):
    assert len(train) >= 1200
    assert len(held_out) >= 200


@pytest.mark.parametrize("name", ["train", "held_out"])
def test_every_category_present_and_controls_at_least_a_quarter(name, request):
    rows = request.getfixturevalue(name)
    counts = {c: sum(r["category"] == c for r in rows) for c in CATEGORIES}
    assert all(n >= 50 for n in counts.values()), counts
    assert counts["control"] / len(rows) >= 0.25, counts


def test_train_and_eval_share_no_ids_or_prompts(train, held_out):
    assert not {r["id"] for r in train} & {r["id"] for r in held_out}
    assert not {norm(r["prompt"]) for r in train} & {norm(r["prompt"]) for r in held_out}
    assert all(r["id"].startswith("eval-") for r in held_out)
    assert not any(r["id"].startswith("eval-") for r in train)


def test_sources_are_labelled(train, held_out):
    for r in train + held_out:
        assert r["source"] == "handwritten" or r["source"].startswith("template:"), r
    # eval uses held-out frames, never the training templates' own sources
    train_templates = {r["source"] for r in train if r["source"] != "handwritten"}
    eval_templates = {r["source"] for r in held_out if r["source"] != "handwritten"}
    shared = train_templates & eval_templates
    assert shared <= {
        "template:category-error",
        "template:nonexistent",
        "template:word-salad",
        "template:scramble",
        "template:contradiction",
        "template:truncated",
    }, shared  # nonsense generators: held-out fillers/frames, same generator name


def test_judge_pairs_meet_targets(pairs):
    assert len(pairs) >= 120
    for criterion in CRITERIA:
        assert sum(p["criterion"] == criterion for p in pairs) >= 35, criterion
    controls = [p for p in pairs if p["criterion"] == "scrutiny" and p["category"] == "control"]
    assert len(controls) >= 10
    assert len({p["id"] for p in pairs}) == len(pairs)
    longer_worse = [p for p in pairs if len(p["worse"].split()) > len(p["better"].split())]
    assert len(longer_worse) >= 15  # length-bias probes
    assert sum(p["criterion"] == "curiosity" for p in longer_worse) >= 5


def test_judge_pair_prompts_are_not_eval_prompts(pairs, held_out):
    # the judge may see these pairs as examples; eval prompts must stay unseen
    assert not {norm(p["prompt"]) for p in pairs} & {norm(r["prompt"]) for r in held_out}


def test_judge_pair_responses_are_short(pairs):
    for p in pairs:
        for side in ("better", "worse"):
            # rough sentence count (initials like "J. B. S." and "Jr." are not sentence ends)
            text = re.sub(r"\b(?:[A-Z]|Jr|Mr|Dr|St)\.", "", p[side])
            sentences = re.findall(r"[.!?]['\")]*(?:\s|$)", text)
            assert 1 <= len(sentences) <= 5, (p["id"], side, p[side])


def test_shipped_files_match_the_generator():
    from data import make_data

    train_split = make_data.build_train()
    eval_split = make_data.build_eval(train_split)
    with open(TRAIN, encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == train_split.records()
    with open(EVAL, encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == eval_split.records("eval-")
    with open(PAIRS, encoding="utf-8") as f:
        assert [json.loads(line) for line in f] == make_data.judge_pair_records()


# ---- validation errors --------------------------------------------------------------------

GOOD = {"id": "x-1", "category": "control", "prompt": "Why is the sky blue?", "source": "test"}


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def good(**changes):
    record = dict(GOOD, **changes)
    return json.dumps({k: v for k, v in record.items() if v is not None})


BAD_PROMPT_FILES = {
    "invalid json": ([good(), '{"id": "x-2", "category": '], 2, "not valid JSON"),
    "not an object": ([good(), "[1, 2]"], 2, "JSON object"),
    "missing field": ([good(), good(id="x-2", source=None)], 2, "missing field 'source'"),
    "wrong type": ([good(), good(id="x-2", prompt=7)], 2, "must be a string"),
    "unknown category": ([good(), good(id="x-2", category="trivia")], 2, "not one of"),
    "empty prompt": ([good(), good(id="x-2", prompt="")], 2, "empty"),
    "whitespace prompt": ([good(), good(id="x-2", prompt="   \t")], 2, "empty"),
    "duplicate id": ([good(), good(prompt="Another?"), good(id="x-3")], 2, "duplicate id"),
    "duplicate prompt": ([good(), good(id="x-2")], 2, "duplicate prompt"),
    "extra field": ([good(), good(id="x-2", extra="?")], 2, "unknown field"),
    "blank line": ([good(), "", good(id="x-2", prompt="Other?")], 2, "blank line"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROMPT_FILES))
def test_load_prompts_rejects_bad_lines_with_line_number(case, tmp_path):
    lines, line_no, fragment = BAD_PROMPT_FILES[case]
    path = write_lines(tmp_path / "bad.jsonl", lines)
    with pytest.raises(DataError) as info:
        load_prompts(path)
    message = str(info.value)
    assert str(path) in message
    assert f"line {line_no}" in message
    assert fragment in message
    assert info.value.line == line_no


def test_duplicate_id_names_the_first_line(tmp_path):
    path = write_lines(tmp_path / "dup.jsonl", [good(), good(prompt="A?"), good(prompt="B?")])
    with pytest.raises(DataError, match=r"line 2: duplicate id 'x-1' \(first on line 1\)"):
        load_prompts(path)


def test_all_problems_are_reported(tmp_path):
    path = write_lines(tmp_path / "many.jsonl", [good(), "nope", good(id="x-2", category="z")])
    with pytest.raises(DataError) as info:
        load_prompts(path)
    assert "line 2" in str(info.value) and "line 3" in str(info.value)
    assert "\n" not in str(info.value)  # the CLI's one error line


def test_missing_file_names_the_path(tmp_path):
    path = tmp_path / "nowhere.jsonl"
    with pytest.raises(DataError, match="file not found") as info:
        load_prompts(path)
    assert str(path) in str(info.value)
    with pytest.raises(DataError, match="file not found"):
        load_judge_pairs(path)


@pytest.mark.parametrize("content", ["", "\n\n", "   \n"])
def test_empty_file_is_an_error(content, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match="empty"):
        load_prompts(path)
    with pytest.raises(DataError, match="empty"):
        load_judge_pairs(path)


def test_good_file_round_trips(tmp_path):
    path = write_lines(tmp_path / "ok.jsonl", [good(), good(id="x-2", prompt="Why not?")])
    assert [r["id"] for r in load_prompts(path)] == ["x-1", "x-2"]


PAIR = {
    "id": "p-1",
    "criterion": "scrutiny",
    "category": "false_premise",
    "prompt": "Why is the Sun a planet?",
    "better": "The Sun is a star, not a planet.",
    "worse": "Because it is big.",
}


def pair(**changes):
    record = dict(PAIR, **changes)
    return json.dumps({k: v for k, v in record.items() if v is not None})


BAD_PAIR_FILES = {
    "unknown criterion": ([pair(), pair(id="p-2", criterion="honesty")], 2, "not one of"),
    "unknown category": ([pair(), pair(id="p-2", category="other")], 2, "not one of"),
    "empty better": ([pair(), pair(id="p-2", better=" ")], 2, "empty"),
    "missing worse": ([pair(), pair(id="p-2", worse=None)], 2, "missing field 'worse'"),
    "same responses": ([pair(), pair(id="p-2", worse=PAIR["better"])], 2, "identical"),
    "duplicate id": ([pair(), pair()], 2, "duplicate id"),
    "invalid json": ([pair(), pair()[:-1]], 2, "not valid JSON"),
}


@pytest.mark.parametrize("case", sorted(BAD_PAIR_FILES))
def test_load_judge_pairs_rejects_bad_lines_with_line_number(case, tmp_path):
    lines, line_no, fragment = BAD_PAIR_FILES[case]
    path = write_lines(tmp_path / "pairs.jsonl", lines)
    with pytest.raises(DataError) as info:
        load_judge_pairs(path)
    assert str(path) in str(info.value)
    assert f"line {line_no}" in str(info.value)
    assert fragment in str(info.value)


def test_data_error_is_a_value_error():
    assert issubclass(DataError, ValueError)


def test_select_split_places_a_record_without_split_where_the_caller_says():
    records = [{"id": "a", "split": "train"}, {"id": "b"}, {"id": "c", "split": "test"}]

    def ids(rs):
        return [r["id"] for r in rs]

    assert ids(select_split(records, "train", missing="train")) == ["a", "b"]
    assert ids(select_split(records, "train", missing=None)) == ["a"]
    assert ids(select_split(records, "test", missing="train")) == ["c"]
    assert ids(select_split(records, "test", missing=None)) == ["c"]
    assert select_split(records, "val", missing="train") == []


def test_a_control_pair_is_labelled_scrutiny_though_all_three_criteria_judge_control():
    # rubric.py judges a control answer on every criterion; a preference pair carries one label
    assert JUDGED_ON["control"] == CRITERIA
    assert PAIR_CRITERION == {
        "false_premise": "scrutiny",
        "nonsense": "nonsense",
        "curiosity": "curiosity",
        "control": "scrutiny",
    }
    assert all(PAIR_CRITERION[c] in JUDGED_ON[c] for c in CATEGORIES)


def test_read_jsonl_returns_values_and_the_blank_and_malformed_lines(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": "a"}\n\n{"id": \n[1, 2]\n', encoding="utf-8")
    values, errors = read_jsonl(path)
    assert values == [(1, {"id": "a"}), (4, [1, 2])]  # a non-object is the loader's to refuse
    assert [n for n, _ in errors] == [2, 3]
    assert errors[0][1].startswith("blank line") and errors[1][1].startswith("not valid JSON")
    with pytest.raises(DataError, match="file not found; regenerate it"):
        read_jsonl(tmp_path / "none.jsonl", fix="regenerate it")
    path.write_bytes(b'{"id": "\xff"}\n')
    with pytest.raises(DataError, match="not UTF-8 text"):
        read_jsonl(path)


def test_data_error_reports_the_first_line_first_whatever_the_order_found():
    err = data_error("f.jsonl", [(3, "late"), (1, "early"), (1, "second on 1")])
    assert str(err) == "f.jsonl line 1: early (and 2 more problem(s): lines 1, 3)"
    assert err.line == 1


def test_norm_folds_case_and_every_run_of_whitespace():
    assert norm("  Is the\tSky\n\nGREEN?\u00a0 ") == "is the sky green?"
    # the builders' two old spellings (lower first, or join first) give the same key, even where
    # lowercasing depends on context (a Greek final sigma before a space of any kind)
    for text in ["ΟΔΟΣ\u2003ΟΔΟΣ", "ΑΣ \u3000 Β", "İstanbul  Σ", "A\u2028b"]:
        assert norm(text) == " ".join(text.split()).lower() == " ".join(text.lower().split())
    assert norm("ΟΔΟΣ\u2003ΟΔΟΣ") == "οδος οδος"
    assert norm("") == ""


# ---- pairs: a record and its twin (PairedStream) ------------------------------------------


def write_prompts(path, rows):
    path.write_text("".join(json.dumps({"source": "t", **r}) + "\n" for r in rows))
    return str(path)


def paired_files(tmp_path, n_pairs=3, n_singles=5):
    main = [
        {"id": f"f{i}", "category": "false_premise", "prompt": f"false {i}?"}
        for i in range(n_pairs)
    ]
    main += [
        {"id": f"s{i}", "category": "nonsense", "prompt": f"single {i}?"} for i in range(n_singles)
    ]
    twins = [
        {"id": f"t{i}", "category": "control", "prompt": f"true {i}?", "pair": f"f{i}"}
        for i in range(n_pairs)
    ]
    return write_prompts(tmp_path / "main.jsonl", main), write_prompts(tmp_path / "tw.jsonl", twins)


def test_load_prompts_joins_files_and_checks_pairs(tmp_path):
    main, twins = paired_files(tmp_path)
    records = load_prompts(f"{main},{twins}")
    assert [r["id"] for r in records][-3:] == ["t0", "t1", "t2"] and len(records) == 11
    pairs, singles = pairs_and_singles(records)
    assert [(a["id"], b["id"]) for a, b in pairs] == [("f0", "t0"), ("f1", "t1"), ("f2", "t2")]
    assert [r["id"] for r in singles] == [f"s{i}" for i in range(5)]
    bad = {
        "no such id": ([{"id": "t9", "category": "control", "prompt": "x?", "pair": "f9"}],
                       "names pair 'f9', which is no id"),
        "itself": ([{"id": "t9", "category": "control", "prompt": "x?", "pair": "t9"}],
                   "names itself"),
        "named twice": ([{"id": "t8", "category": "control", "prompt": "x?", "pair": "f0"},
                         {"id": "t9", "category": "control", "prompt": "y?", "pair": "f0"}],
                        "already the pair of 't8'"),
        "a chain": ([{"id": "t8", "category": "control", "prompt": "x?", "pair": "f0"},
                     {"id": "t9", "category": "control", "prompt": "y?", "pair": "t8"}],
                    "both a twin and the pair of one"),
        "an id in both files": ([{"id": "s0", "category": "control", "prompt": "x?"}],
                                "'s0' is also in"),
        "a prompt in both files": ([{"id": "z", "category": "control", "prompt": "single 1?"}],
                                   "'single 1?' is also in"),
        "not a string": ([{"id": "t9", "category": "control", "prompt": "x?", "pair": 3}],
                         "field 'pair' must be a string"),
    }  # fmt: skip
    for case, (rows, message) in bad.items():
        other = write_prompts(tmp_path / "bad.jsonl", rows)
        with pytest.raises(DataError, match=re.escape(message)):
            load_prompts(f"{main},{other}")
            pytest.fail(f"{case}: loaded")
    with pytest.raises(DataError, match="empty file name"):
        load_prompts(f"{main},")


def test_paired_stream_keeps_each_pair_in_one_batch_and_resumes(tmp_path):
    main, twins = paired_files(tmp_path)
    records = load_prompts(f"{main},{twins}")
    stream = prompt_stream(records, seed=0, pairs_per_step=1)
    batches = [[r["id"] for r in stream.next_batch(4)] for _ in range(6)]
    for b in batches:  # the pair first, its twin right after it, then two unpaired records
        assert b[0][0] == "f" and b[1] == "t" + b[0][1:] and all(x[0] == "s" for x in b[2:]), b
    firsts = [b[0] for b in batches]
    assert sorted(firsts[:3]) == sorted(firsts[3:]) == ["f0", "f1", "f2"], "one pass per epoch"
    singles = [x for b in batches[:2] for x in b[2:]] + [batches[2][2]]
    assert sorted(singles) == [f"s{i}" for i in range(5)], "unpaired records: one pass per epoch"
    again = prompt_stream(records, seed=0, pairs_per_step=1)
    again.next_batch(4), again.next_batch(4)
    resumed = prompt_stream(records, seed=0, pairs_per_step=1)
    resumed.load_state(json.loads(json.dumps(again.state())))  # as a checkpoint stores it
    assert [[r["id"] for r in resumed.next_batch(4)] for _ in range(4)] == batches[2:]
    with pytest.raises(ValueError, match="not a plain stream's"):
        prompt_stream(records, seed=0).load_state(again.state())
    with pytest.raises(ValueError, match="not a paired stream's"):
        resumed.load_state({"epoch": 0, "position": 0})
    with pytest.raises(ValueError, match="cannot hold 3 pairs"):
        prompt_stream(records, seed=0, pairs_per_step=3).next_batch(4)
    with pytest.raises(ValueError, match="records with a `pair` field"):
        prompt_stream(load_prompts(main), seed=0, pairs_per_step=1)
    plain = prompt_stream(records, seed=0)  # pairs off: one stream over all 11 records
    assert sorted(r["id"] for r in plain.next_batch(11)) == sorted(r["id"] for r in records)


def test_paired_stream_draws_its_unpaired_part_from_the_named_categories(tmp_path):
    main, twins = paired_files(tmp_path)
    extra = [{"id": f"c{i}", "category": "control", "prompt": f"control {i}?"} for i in range(4)]
    more = write_prompts(tmp_path / "more.jsonl", extra)
    records = load_prompts(f"{main},{twins},{more}")
    every = prompt_stream(records, seed=0, pairs_per_step=1)
    drawn = {r["id"][0] for _ in range(9) for r in every.next_batch(4)[2:]}
    assert drawn == {"s", "c"}, drawn  # by default the unpaired controls come too
    only = prompt_stream(records, seed=0, pairs_per_step=1, single_categories=["nonsense"])
    batches = [[r["id"] for r in only.next_batch(4)] for _ in range(5)]
    assert all(b[0][0] == "f" and b[1][0] == "t" for b in batches), batches  # pairs untouched
    singles = [x for b in batches[:2] for x in b[2:]] + [batches[2][2]]
    assert sorted(singles) == [f"s{i}" for i in range(5)], "only nonsense, one pass per epoch"
    with pytest.raises(ValueError, match=r"names \['curiosity'\], but no unpaired record"):
        prompt_stream(records, seed=0, pairs_per_step=1, single_categories=["curiosity"])
    with pytest.raises(ValueError, match="needs pairs_per_step >= 1"):
        prompt_stream(records, seed=0, single_categories=["nonsense"])


@pytest.mark.parametrize("twins", ["twins.jsonl", "twins_v2.jsonl"])
def test_shipped_twins_pair_every_false_premise_and_stay_out_of_eval(train, held_out, twins):
    records = load_prompts(f"{TRAIN},{os.path.join(DATA, twins)}")
    pairs, _ = pairs_and_singles(records)
    false = sorted(r["id"] for r in train if r["category"] == "false_premise")
    assert sorted(a["id"] for a, _ in pairs) == false, "one twin for every false-premise prompt"
    assert all(a["category"] == "false_premise" and b["category"] == "control" for a, b in pairs)
    external = load_prompts(os.path.join(DATA, "eval_external.jsonl"))
    evals = {norm(r["prompt"]) for r in held_out + external}
    assert not [b["id"] for _, b in pairs if norm(b["prompt"]) in evals], "a twin is an eval prompt"


NEGATION = re.compile(r"\b(not|no|never|\w+n't|myth|misconception|often said|said to)\b", re.I)


def test_twins_v2_state_the_true_premise_without_a_negation_cue():
    """data/twins.jsonl made most true twins by negating the false claim ("Why isn't copper
    magnetic?"), so a cue word alone marked the true half; twins_v2 states the fact instead."""

    def cue_only_in_twin(twins):
        pairs, _ = pairs_and_singles(load_prompts(f"{TRAIN},{os.path.join(DATA, twins)}"))
        cues = [
            (set(NEGATION.findall(a["prompt"].lower())), set(NEGATION.findall(b["prompt"].lower())))
            for a, b in pairs
        ]
        return sum(bool(tw - fp) for fp, tw in cues)

    assert cue_only_in_twin("twins.jsonl") > 60  # the leak this file fixes
    assert cue_only_in_twin("twins_v2.jsonl") <= 3
