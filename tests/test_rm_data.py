"""The reward-model data (data/rm_pairs.jsonl, data/eval_external.jsonl,
data/pushback_labels.jsonl) loads, keeps its splits held out, covers every category and kind in
test, and is exactly what data/make_rm_data.py builds; the loaders and the builder reject bad
input with the file and the line."""

import json
import os
import re
from collections import Counter

from core.jsonl import DataError
from core.prompts import (
    CATEGORIES,
    PAIR_KINDS,
    PUSHBACK_KINDS,
    load_judge_pairs,
    load_pairs,
    load_prompts,
    load_pushback_labels,
    norm,
)

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data")
RM_PAIRS = os.path.join(DATA, "rm_pairs.jsonl")
EXT = os.path.join(DATA, "eval_external.jsonl")
LABELS = os.path.join(DATA, "pushback_labels.jsonl")


@pytest.fixture(scope="module")
def pairs():
    return load_pairs(RM_PAIRS)


@pytest.fixture(scope="module")
def ext():
    return load_prompts(EXT)


@pytest.fixture(scope="module")
def labels():
    return load_pushback_labels(LABELS)


@pytest.fixture(scope="module")
def train_prompts():
    return {norm(r["prompt"]) for r in load_prompts(os.path.join(DATA, "prompts.jsonl"))}


@pytest.fixture(scope="module")
def eval_prompts():
    return {norm(r["prompt"]) for r in load_prompts(os.path.join(DATA, "eval.jsonl"))}


@pytest.fixture(scope="module")
def builder():
    from data import make_rm_data

    return make_rm_data


def prompts_in(records, *splits):
    return {norm(r["prompt"]) for r in records if r["split"] in splits}


# ---- shipped files ----------------------------------------------------------------------------


def test_shipped_files_load_with_every_optional_field(pairs, ext, labels):
    assert len(pairs) >= 1500 and len(ext) >= 500 and len(labels) >= 400
    assert all({"source", "kind", "split"} <= set(p) for p in pairs)
    assert {p["kind"] for p in pairs} == set(PAIR_KINDS)
    assert {r["kind"] for r in labels} == set(PUSHBACK_KINDS)


def test_load_pairs_reads_the_old_judge_pairs_unchanged():
    path = os.path.join(DATA, "judge_pairs.jsonl")
    assert load_pairs(path) == load_judge_pairs(path)


def test_split_fractions_are_roughly_70_10_20(pairs):
    share = {s: sum(p["split"] == s for p in pairs) / len(pairs) for s in ("train", "val", "test")}
    assert 0.6 <= share["train"] <= 0.8 and 0.05 <= share["val"] <= 0.15, share
    assert 0.15 <= share["test"] <= 0.3, share


# ---- held out means held out ------------------------------------------------------------------


def test_each_prompt_is_in_one_split_across_pairs_and_labels(pairs, labels):
    seen = {}
    for r in pairs + labels:
        assert seen.setdefault(norm(r["prompt"]), r["split"]) == r["split"], r["id"]


def test_train_and_val_share_nothing_with_policy_eval_prompts(pairs, labels, eval_prompts):
    assert not prompts_in(pairs + labels, "train", "val") & eval_prompts


def test_test_shares_nothing_with_policy_training_prompts(pairs, labels, train_prompts):
    assert not prompts_in(pairs + labels, "test") & train_prompts


def test_test_pairs_never_come_from_a_train_or_val_source_item(pairs):
    """Source item = TruthfulQA question (tqa-NNNN), BullshitBench question (bsb-<id>) or
    CoCoNot prompt (cc-<id>): all pairs derived from it sit in one split."""
    splits = {}
    for p in pairs:
        m = re.match(r"(tqa-\d{4}|bsb-[a-z]{2}_\d{2})-", p["id"])
        key = m.group(1) if m else p["id"] if p["id"].startswith("cc-") else None
        if key:
            splits.setdefault(key, set()).add(p["split"])
    assert len(splits) > 700
    assert all(len(s) == 1 for s in splits.values()), [k for k, s in splits.items() if len(s) > 1]


def test_every_category_and_kind_is_measurable_in_test(pairs):
    test = [p for p in pairs if p["split"] == "test"]
    by_category = Counter(p["category"] for p in test)
    assert all(by_category[c] >= 30 for c in CATEGORIES), by_category
    total, in_test = Counter(p["kind"] for p in pairs), Counter(p["kind"] for p in test)
    for kind in PAIR_KINDS:
        assert in_test[kind] >= (15 if total[kind] >= 40 else 1), (kind, in_test[kind])


def test_pushback_test_split_has_both_labels(labels):
    test = [r for r in labels if r["split"] == "test"]
    assert sum(r["pushback"] for r in test) >= 50
    assert sum(not r["pushback"] for r in test) >= 50
    assert 0.35 <= sum(r["pushback"] for r in labels) / len(labels) <= 0.65


def test_eval_external_is_disjoint_from_everything_trained_on(
    ext, pairs, labels, train_prompts, eval_prompts
):
    banned = prompts_in(pairs + labels, "train", "val") | train_prompts | eval_prompts
    assert not {norm(r["prompt"]) for r in ext} & banned
    for r in ext:
        assert r["id"].startswith(f"ext-{r['source'].split('_')[0]}-"), r["id"]
    assert {r["source"] for r in ext} == {
        "coconot_eval",
        "coconot_contrast_eval",
        "bullshitbench",
        "truthfulqa",
    }
    assert {r["category"] for r in ext} == set(CATEGORIES) - {"curiosity"}


# ---- the builder ------------------------------------------------------------------------------


def test_builder_reproduces_the_shipped_bytes(builder, tmp_path):
    paths = builder.write_all(builder.build(), str(tmp_path))
    for name, path in paths.items():
        with open(path, "rb") as new, open(os.path.join(DATA, f"{name}.jsonl"), "rb") as old:
            assert new.read() == old.read(), f"{name}.jsonl differs: rerun data/make_rm_data.py"


def test_labels_derived_from_pairs_repeat_their_text_and_split(pairs, labels):
    by_id = {p["id"]: p for p in pairs}
    derived = 0
    for r in labels:
        m = re.fullmatch(r"pb-(.+)-([bw])", r["id"])
        if m and m.group(1) in by_id:
            p = by_id[m.group(1)]
            assert r["answer"] == p["better" if m.group(2) == "b" else "worse"]
            assert (r["prompt"], r["split"]) == (p["prompt"], p["split"])
            derived += 1
    assert derived >= 300


def test_handwritten_length_traps_and_substance_pairs_have_the_promised_lengths(pairs):
    hw = [p for p in pairs if p["source"] == "handwritten"]
    assert all(len(p["worse"]) > len(p["better"]) for p in hw if p["kind"] == "length_trap")
    for p in hw:
        if p["kind"] == "curiosity_substance":
            assert 0.8 <= len(p["worse"]) / len(p["better"]) <= 1.25, p["id"]


def test_builder_yaml_errors_name_file_and_line(builder, tmp_path):
    (tmp_path / "broken.yaml").write_text("pairs:\n  - prompt: [unclosed\n", encoding="utf-8")
    with pytest.raises(builder.SourceError, match=r"broken\.yaml: line \d+"):
        builder.read_yaml("broken.yaml", root=str(tmp_path))
    (tmp_path / "short.yaml").write_text(
        "pairs:\n  - prompt: hi\n    better: b\n", encoding="utf-8"
    )
    path, data = builder.read_yaml("short.yaml", root=str(tmp_path))
    with pytest.raises(builder.SourceError, match=r"short\.yaml: pairs\[0\] \(line 2\): 'worse'"):
        builder.fields(path, data["pairs"][0], "pairs[0]", ("prompt", "better", "worse"))


# ---- loaders reject malformed lines -----------------------------------------------------------

GOOD_PAIR = dict(
    id="x-1",
    criterion="scrutiny",
    category="control",
    prompt="Why?",
    better="Because.",
    worse="No reason.",
    source="handwritten",
    kind="echo",
    split="train",
)
GOOD_LABEL = dict(
    id="pb-1",
    prompt="Why?",
    category="control",
    answer="Because.",
    pushback=False,
    kind="plain_answer",
    split="test",
)


def write_lines(tmp_path, records):
    path = tmp_path / "f.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(split="holdout"), r"line 2: split 'holdout' is not one of train, val, test"),
        (dict(kind="verbose"), r"line 2: kind 'verbose' is not one of"),
        (dict(source=""), r"line 2: field 'source' is empty"),
        (dict(worse=None), r"line 2: field 'worse' must be a string"),
        (dict(extra="x"), r"line 2: unknown field\(s\) 'extra'"),
    ],
)
def test_load_pairs_rejects_bad_lines_naming_file_and_line(tmp_path, change, message):
    bad = {**GOOD_PAIR, "id": "x-2", **change}
    path = write_lines(tmp_path, [GOOD_PAIR, bad])
    with pytest.raises(DataError, match=message) as err:
        load_pairs(path)
    assert err.value.path == path and err.value.line == 2 and path in str(err.value)


def test_load_pairs_rejects_a_missing_field(tmp_path):
    bad = {k: v for k, v in GOOD_PAIR.items() if k != "prompt"}
    path = write_lines(tmp_path, [bad])
    with pytest.raises(DataError, match=r"f\.jsonl line 1: missing field 'prompt'"):
        load_pairs(path)


def test_load_judge_pairs_still_rejects_the_optional_fields(tmp_path):
    path = write_lines(tmp_path, [GOOD_PAIR])
    with pytest.raises(DataError, match=r"line 1: unknown field\(s\) 'kind', 'source', 'split'"):
        load_judge_pairs(path)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(split="dev"), r"line 2: split 'dev' is not one of train, val, test"),
        (dict(pushback="false"), r"line 2: field 'pushback' must be true or false"),
        (dict(pushback=True), r"line 2: pushback is true but kind 'plain_answer' means false"),
        (dict(kind="sarcasm"), r"line 2: kind 'sarcasm' is not one of"),
        (dict(answer="  "), r"line 2: field 'answer' is empty"),
    ],
)
def test_load_pushback_labels_rejects_bad_lines_naming_file_and_line(tmp_path, change, message):
    bad = {**GOOD_LABEL, "id": "pb-2", **change}
    path = write_lines(tmp_path, [GOOD_LABEL, bad])
    with pytest.raises(DataError, match=message) as err:
        load_pushback_labels(path)
    assert err.value.line == 2 and path in str(err.value)


def test_load_pushback_labels_rejects_a_missing_field(tmp_path):
    bad = {k: v for k, v in GOOD_LABEL.items() if k != "pushback"}
    path = write_lines(tmp_path, [bad])
    with pytest.raises(DataError, match=r"line 1: missing field 'pushback'"):
        load_pushback_labels(path)


GOLD_SCHEME = {"id": "g-1", "prompt": "Why is Sydney the capital of Australia?",
               "category": "false_premise", "answer": "Canberra is the capital, not Sydney.",
               "pushback": True, "label": "corrects_premise", "split": "train",
               "source": "written"}  # fmt: skip


def test_load_pushback_labels_reads_the_gold_scheme(tmp_path):
    clarify = {**GOLD_SCHEME, "id": "g-2", "label": "asks_clarification", "pushback": False}
    rows = load_pushback_labels(write_lines(tmp_path, [GOLD_SCHEME, clarify]))
    assert [r["pushback"] for r in rows] == [True, False]  # a question is not pushback here


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(pushback=True, label="asks_clarification"),
         r"line 2: pushback is true but label 'asks_clarification' means false"),
        (dict(label="contrarian"), r"line 2: label 'contrarian' is not one of"),
        (dict(kind="plain_answer"), r"line 2: unknown field\(s\) 'kind'"),
    ],
)  # fmt: skip
def test_load_pushback_labels_gold_scheme_rejects_bad_lines(tmp_path, change, message):
    path = write_lines(tmp_path, [GOLD_SCHEME, {**GOLD_SCHEME, "id": "g-2", **change}])
    with pytest.raises(DataError, match=message) as err:
        load_pushback_labels(path)
    assert err.value.line == 2
