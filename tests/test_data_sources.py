"""The YAML sources in data/sources/ pass their schema; a malformed source is refused with a
DataError naming the file, the line and the key path; the builders give the same bytes on every
run (whatever the hash seed) and those bytes are the shipped JSONL files."""

import os
import subprocess
import sys

from core.jsonl import DataError

import pytest

from data import load_sources, make_data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data")


@pytest.mark.parametrize("name", sorted(load_sources.SCHEMAS))
def test_every_shipped_source_passes_its_schema(name):
    assert load_sources.load_source(name)


# (file, text to replace, replacement, key path in the message, fragment of the message)
BAD_SOURCES = {
    "claim of one item": (
        "claims",
        '["humans only use 10 percent of their brains", "What is the other 90 percent doing?"]',
        '["humans only use 10 percent of their brains"]',
        "false_claims.train[0]",
        "expected [clause, follow-up question], got 1 item",
    ),
    "unknown placeholder": (
        "claims",
        "- Since {c}, {q}",
        "- Since {c}, {qq}",
        "frames.train[1]",
        "unknown placeholder {qq}",
    ),
    "claim ending in a full stop": (
        "claims",
        '"Einstein failed mathematics at school"',
        '"Einstein failed mathematics at school."',
        "false_claims.train[1]",
        "ends in punctuation",
    ),
    "clause without why names no claim": (
        "claims",
        "- a marathon is about 42 kilometres long",
        "- a marathon is about 42 km long",
        "clauses_without_why[6]",
        "not a clause of any claim",
    ),
    "duplicate prompt": (
        "nonsense",
        "- How much does the colour blue weigh in kilograms?",
        "- what is the boiling point of  Tuesday?",
        "handwritten.train[1]",
        "repeats item [0]",
    ),
    "bare yes is a boolean": (
        "nonsense",
        "- What is the boiling point of Tuesday?",
        "- yes",
        "handwritten.train[0]",
        "put the text in double quotes",
    ),
    "count in quotes": (
        "nonsense",
        "count: 70",
        'count: "70"',
        "category_error.train.count",
        "expected a whole number",
    ),
    "exclusion that excludes nothing": (
        "nonsense",
        '["GDP", "Tuesday"]',
        '["GDP", "Tusday"]',
        "category_error.exclude[5]",
        "excludes nothing",
    ),
    "unknown key": ("control", "  eval:", "  evals:", "handwritten.evals", "unknown key 'evals'"),
    "unknown category": (
        "judge_pairs",
        "category: curiosity\n    prompt: Why do cats purr?",
        "category: trivia\n    prompt: Why do cats purr?",
        "pairs[0].category",
        "'trivia' is not one of",
    ),
    "mapping where text belongs": (
        "happy",
        "- What is the best part of a weekend?",
        "- Quick question: what is the best part of a weekend?",
        "moods[3]",
        "got a mapping",
    ),
}


def write_bad_source(tmp_path, name, old, new):
    """Copy data/sources/<name>.yaml to tmp_path with `old` replaced by `new`; return the
    path and the 1-based line where the replacement starts."""
    with open(os.path.join(load_sources.SOURCES, f"{name}.yaml"), encoding="utf-8") as f:
        text = f.read()
    assert text.count(old) >= 1, old
    start = text.index(old)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path, text[:start].count("\n") + 1


@pytest.mark.parametrize("case", sorted(BAD_SOURCES))
def test_malformed_source_names_file_line_and_key(case, tmp_path):
    name, old, new, key_path, fragment = BAD_SOURCES[case]
    path, line = write_bad_source(tmp_path, name, old, new)
    with pytest.raises(DataError) as info:
        load_sources.load_source(name, tmp_path)
    message = str(info.value)
    assert message.startswith(f"{path}: line {line}: {key_path}: "), message
    assert fragment in message
    assert info.value.path == str(path)
    assert info.value.line == line


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        ("- Since {c}, {q}", "- Quick question: {c}, right?", "invalid YAML"),
        ("  eval:", "  train:", "repeated key 'train'"),  # plain PyYAML would keep the last
    ],
)
def test_invalid_yaml_gives_the_line_yaml_reports(old, new, fragment, tmp_path):
    path, line = write_bad_source(tmp_path, "claims" if "{c}" in old else "control", old, new)
    with pytest.raises(DataError) as info:
        load_sources.load_source(path.stem, tmp_path)
    assert str(info.value).startswith(f"{path}: line {line}, column "), str(info.value)
    assert fragment in str(info.value)
    assert info.value.line == line


def test_missing_and_empty_sources_name_the_file(tmp_path):
    with pytest.raises(DataError, match="claims.yaml: file not found"):
        load_sources.load_source("claims", tmp_path)
    (tmp_path / "claims.yaml").write_text("# nothing yet\n", encoding="utf-8")
    with pytest.raises(DataError, match="claims.yaml: file is empty"):
        load_sources.load_source("claims", tmp_path)


def test_builder_refuses_a_prompt_in_two_places():
    sources = make_data.read_sources()
    repeated = sources["false_premise"]["handwritten"]["train"][0]
    sources["control"]["handwritten"]["train"].append(repeated)
    with pytest.raises(ValueError, match=r"train: duplicate prompt .*\(control, handwritten\)"):
        make_data.build_train(sources)


def run_builder(script, out, hash_seed):
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    subprocess.run(
        [sys.executable, "-m", f"data.{script.removesuffix('.py')}", "--out", str(out)],
        check=True,
        cwd=ROOT,
        capture_output=True,
        env=env,
    )
    return {name: (out / name).read_bytes() for name in sorted(os.listdir(out))}


@pytest.mark.parametrize(
    "script, files",
    [
        ("make_data.py", ["eval.jsonl", "judge_pairs.jsonl", "prompts.jsonl"]),
        ("make_happy_prompts.py", ["happy_eval.jsonl", "happy_prompts.jsonl"]),
    ],
)
def test_builders_are_reproducible_and_match_the_shipped_files(script, files, tmp_path):
    # different hash seeds: no output may depend on set or dict-of-str iteration order
    first = run_builder(script, tmp_path / "a", hash_seed=1)
    second = run_builder(script, tmp_path / "b", hash_seed=2)
    assert sorted(first) == files
    assert first == second
    for name in files:
        with open(os.path.join(DATA, name), "rb") as f:
            assert first[name] == f.read(), f"{name} differs from the builder's output"
