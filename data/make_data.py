"""Build the rl-values prompt sets and judge-calibration pairs from data/sources/*.yaml.

Writes prompts.jsonl (training), eval.jsonl (held-out) and judge_pairs.jsonl. All text lives in
the YAML sources (hand-written prompts, claims, frames, slot fillers, judge pairs), which
load_sources.py checks; this file only combines them: frames x fillers, seeded draws, duplicate
checks, ids. It is deterministic: every random choice uses a `random.Random` seeded from SEED
plus the text of the item it concerns, so editing one list does not reshuffle the others. Ids
are sequential per (file, category) in generation order. See knowledge/data.md.

Run from the repo root:  uv run python -m data.make_data [--out DIR]
"""

import argparse
import os
import random
import re
import sys

from core import errors
from core.jsonl import output_folder, write_jsonl
from core.prompts import load_judge_pairs, load_prompts, norm

from data.load_sources import CURIOSITY_TEMPLATES, SOURCES, load_sources

HERE = os.path.dirname(os.path.abspath(__file__))

SEED = 20240611
SOURCE_FILES = ("claims", "false_premise", "control", "curiosity", "nonsense", "judge_pairs")
ID_PREFIX = {"false_premise": "fp", "nonsense": "ns", "curiosity": "cu", "control": "ctl"}
CATEGORY_ORDER = ("false_premise", "nonsense", "curiosity", "control")


def rng_for(*keys) -> random.Random:
    """A generator seeded by SEED and the given keys (stable across Python runs)."""
    return random.Random("|".join([str(SEED), *map(str, keys)]))


def lower_first(text: str) -> str:
    return text[0].lower() + text[1:]


def upper_first(text: str) -> str:
    return text[0].upper() + text[1:]


class Split:
    """Collects the prompts of one file; refuses duplicates within it and against `exclude`."""

    def __init__(self, name, exclude=()):
        self.name = name
        self.items = {c: [] for c in CATEGORY_ORDER}
        self.seen = set()
        self.exclude = set(exclude)

    def add(self, category, prompt, source, strict=True):
        """Add a prompt; return False (or raise if strict) when it duplicates another."""
        prompt = " ".join(prompt.split())
        key = norm(prompt)
        if key in self.seen or key in self.exclude:
            if strict:
                elsewhere = ", in training or among the judge pairs" if self.exclude else ""
                raise ValueError(
                    f"{self.name}: duplicate prompt {prompt!r} ({category}, {source}): it is "
                    f"already in this split{elsewhere}; edit or delete one in data/sources/"
                )
            return False
        self.seen.add(key)
        self.items[category].append((prompt, source))
        return True

    def records(self, id_prefix=""):
        out = []
        for category in CATEGORY_ORDER:
            for i, (prompt, source) in enumerate(self.items[category], start=1):
                pid = f"{id_prefix}{ID_PREFIX[category]}-{i:04d}"
                out.append({"id": pid, "category": category, "prompt": prompt, "source": source})
        return out


# ---- templates ------------------------------------------------------------------------------


def frame_fits(frame, clause, follow_up, without_why):
    """False where the combination reads badly: a 'why ...' frame around a clause that already
    gives its own cause ('... because ...') or has none (`without_why`: dates, coincidences),
    or 'Since/Given X, why is that?' (dangling 'that')."""
    why_frame = (
        "why {c}" in frame or frame.startswith("Why is it that") or frame.endswith("explain why?")
    )
    if why_frame and ("because" in clause or clause in without_why):
        return False
    anaphoric = re.search(r"\bthat( be| happen)?\?$", follow_up) is not None
    return not (anaphoric and frame.startswith(("Since", "Given")))


def add_claims(split, category, claims, frames, per_claim, source, without_why):
    for clause, follow_up in claims:
        fitting = [f for f in frames if frame_fits(f, clause, follow_up, without_why)]
        if len(fitting) < per_claim:
            raise ValueError(
                f"{split.name}: only {len(fitting)} frames fit the claim {clause!r}, wanted "
                f"{per_claim}; add frames or lower frames_per_claim in data/sources/claims.yaml"
            )
        for frame in rng_for(split.name, clause).sample(fitting, per_claim):
            prompt = frame.format(c=clause, Q=follow_up, q=lower_first(follow_up))
            split.add(category, prompt, source)


def add_frame_fill(split, template, fields, source):
    """Each filler in `frames_per_item` distinct frames, chosen by a generator seeded on it."""
    for filler in template["fillers"]:
        parts = filler if isinstance(filler, tuple) else (filler,)
        frames = rng_for(split.name, source, filler).sample(
            template["frames"], template["frames_per_item"]
        )
        for frame in frames:
            split.add("curiosity", frame.format(**dict(zip(fields, parts, strict=True))), source)


def add_category_errors(split, spec, exclude):
    rng = rng_for(split.name, "category-error")
    things = spec["things"]
    combos = [(p, t) for p in spec["properties"] for t in things if (p, t) not in exclude]
    rng.shuffle(combos)
    added = 0
    for p, t in combos:
        if added == spec["count"]:
            break
        frame = rng.choice(spec["frames"])
        t2 = rng.choice([x for x in things if x != t and (p, x) not in exclude])
        prompt = upper_first(frame.format(p=p, t=t, t2=t2))
        added += split.add("nonsense", prompt, "template:category-error", strict=False)
    if added < spec["count"]:
        raise ValueError(
            f"{split.name}: only {added} category errors, wanted {spec['count']}; add properties "
            f"or things, or lower the count, in data/sources/nonsense.yaml"
        )


def add_nonexistent(split, spec):
    for kind, entry in spec["kinds"].items():
        combos = [(n, f) for n in entry["names"] for f in spec.get("frames") or entry["frames"]]
        if "per_kind" in spec:
            combos = rng_for(split.name, "nonexistent", kind).sample(combos, spec["per_kind"])
        for name, frame in combos:
            split.add("nonsense", upper_first(frame.format(n=name)), "template:nonexistent")


def add_drawn(split, source, count, draw):
    """Add `count` distinct prompts made by draw(k), k = how many were added so far; a
    duplicate is drawn again, and a bounded number of draws stops fillers too few to give
    `count` distinct prompts from looping forever."""
    added = draws = 0
    while added < count:
        if draws == 100 * count:
            raise ValueError(
                f"{split.name}: {source} made only {added} distinct prompts in {draws} draws, "
                f"wanted {count}; add fillers or lower the count in data/sources/nonsense.yaml"
            )
        draws += 1
        added += split.add("nonsense", draw(added), source, strict=False)


def plural(noun):
    return noun + ("es" if noun.endswith("o") else "s")


def add_word_salad(split, words, spec):
    rng = rng_for(split.name, "word-salad")

    def draw(_):
        n1, n2, n3 = rng.sample(words["nouns"], 3)
        verb, verb3 = rng.choice(words["verbs"])
        text = rng.choice(spec["skeletons"]).format(
            adj=rng.choice(words["adjectives"]),
            n1=n1,
            n1s=plural(n1),
            n2=n2,
            n3=n3,
            v=verb,
            v3=verb3,
            abs=rng.choice(words["abstracts"]),
        )
        return upper_first(re.sub(r"\b([Aa]) (?=[aeiou])", r"\1n ", text))

    add_drawn(split, "template:word-salad", spec["count"], draw)


def add_scrambles(split, spec):
    rng = rng_for(split.name, "scramble")

    def draw(_):
        text = " ".join(rng.sample(spec["pool"], rng.randint(6, 9)))
        return upper_first(text) + rng.choice(["?", "?", "."])

    add_drawn(split, "template:scramble", spec["count"], draw)


def add_contradictions(split, lists, spec):
    rng = rng_for(split.name, "contradiction")
    frames = spec["frames"]

    def draw(added):
        n = rng.choice([10, 15, 20, 50])
        return frames[added % len(frames)].format(
            form=rng.choice(lists["forms"]),
            topic=rng.choice(lists["topics"]),
            n=n,
            m=n * rng.choice([2, 3]),
            k=rng.choice(["three", "four", "five"]),
            impossible=rng.choice(spec["impossible"]),
        )

    add_drawn(split, "template:contradiction", spec["count"], draw)


def truncate(text, rng, after):
    """Cut `text` right after a word in `after` between 35% and 75% of the way in, or None."""
    words = text.split()
    if len(words) < 8:
        return None
    cuts = [
        k
        for k in range(max(3, int(0.35 * len(words))), int(0.75 * len(words)))
        if words[k].lower() in after and k + 2 < len(words)
    ]
    if not cuts:
        return None
    return " ".join(words[: rng.choice(cuts) + 1])


def add_truncations(split, spec, count, sources):
    rng = rng_for(split.name, "truncated")
    after = set(spec["after"])
    sources = sorted(sources)
    rng.shuffle(sources)
    added = 0
    cuts_seen = set()
    for text in sources:
        if added == count:
            break
        cut = truncate(text, rng, after)
        if cut is None or norm(cut) in cuts_seen:
            continue
        cuts_seen.add(norm(cut))
        wrapper = rng.choice(spec["wrappers"])
        if wrapper.startswith("hey"):
            cut = lower_first(cut)
        added += split.add("nonsense", wrapper.format(s=cut), "template:truncated", strict=False)
    if added < count:
        raise ValueError(
            f"{split.name}: only {added} truncations, wanted {count}; lower truncated.{split.name}"
            f".count in data/sources/nonsense.yaml or add longer curiosity/control prompts"
        )


# ---- building the files ---------------------------------------------------------------------


def read_sources(directory=SOURCES) -> dict:
    """The checked YAML sources make_data needs, by file name (see load_sources.py)."""
    return load_sources(SOURCE_FILES, directory)


def build_split(split: Split, src: dict, part: str) -> Split:
    """Add the prompts of `part` ('train' or 'eval'), category by category; the order fixes
    the ids and which draws are dropped as duplicates."""
    # Eval marks its held-out claim and curiosity frames; nonsense generators keep their name
    # (held-out fillers, same generator).
    heldout = "-heldout" if part == "eval" else ""
    claims = src["claims"]
    without_why = set(claims["clauses_without_why"])
    for category, group in (("false_premise", "false_claims"), ("control", "true_claims")):
        for prompt in src[category]["handwritten"][part]:
            split.add(category, prompt, "handwritten")
        per_claim = claims["frames_per_claim"][group][part]
        source = "template:claim-frames" + heldout
        frames = claims["frames"][part]
        add_claims(split, category, claims[group][part], frames, per_claim, source, without_why)
    curiosity = src["curiosity"]
    for prompt in curiosity["handwritten"][part]:
        split.add("curiosity", prompt, "handwritten")
    for name, fields in CURIOSITY_TEMPLATES.items():
        source = f"template:{name.replace('_', '-')}{heldout}"
        add_frame_fill(split, curiosity[name][part], fields, source)
    nonsense = src["nonsense"]
    for prompt in nonsense["handwritten"][part]:
        split.add("nonsense", prompt, "handwritten")
    exclude = set(nonsense["category_error"]["exclude"])
    add_category_errors(split, nonsense["category_error"][part], exclude)
    add_nonexistent(split, nonsense["nonexistent"][part])
    add_word_salad(split, nonsense["word_salad"], nonsense["word_salad"][part])
    add_scrambles(split, nonsense["scramble"][part])
    add_contradictions(split, nonsense["contradiction"], nonsense["contradiction"][part])
    truncatable = curiosity["handwritten"][part] + src["control"]["handwritten"][part]
    count = nonsense["truncated"][part]["count"]
    add_truncations(split, nonsense["truncated"], count, truncatable)
    return split


def build_train(sources=None) -> Split:
    return build_split(Split("train"), sources or read_sources(), "train")


def build_eval(train: Split, sources=None) -> Split:
    sources = sources or read_sources()
    judge_prompts = {norm(p["prompt"]) for p in sources["judge_pairs"]["pairs"]}  # judge sees them
    return build_split(Split("eval", exclude=train.seen | judge_prompts), sources, "eval")


def judge_pair_records(sources=None):
    counters = {}
    out = []
    for pair in (sources or read_sources())["judge_pairs"]["pairs"]:
        criterion = pair["criterion"]
        counters[criterion] = counters.get(criterion, 0) + 1
        out.append({"id": f"jp-{criterion[:3]}-{counters[criterion]:03d}", **pair})
    return out


@errors.cli
def main(argv=None):
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=HERE, help="directory for the JSONL files (default data/)")
    args = parser.parse_args(argv)
    output_folder(args.out)
    sources = read_sources()
    train = build_train(sources)
    held_out = build_eval(train, sources)
    os.makedirs(args.out, exist_ok=True)
    paths = {
        "train": os.path.join(args.out, "prompts.jsonl"),
        "eval": os.path.join(args.out, "eval.jsonl"),
        "pairs": os.path.join(args.out, "judge_pairs.jsonl"),
    }
    write_jsonl(train.records(), paths["train"])
    write_jsonl(held_out.records("eval-"), paths["eval"])
    write_jsonl(judge_pair_records(sources), paths["pairs"])

    # Re-read through the project's loader so the files are validated as training reads them.
    for name in ("train", "eval"):
        rows = load_prompts(paths[name])
        counts = {c: sum(r["category"] == c for r in rows) for c in CATEGORY_ORDER}
        share = counts["control"] / len(rows)
        print(f"{name}: {len(rows)} prompts {counts} control share {share:.1%}")
    pairs = load_judge_pairs(paths["pairs"])
    by_criterion = {}
    for p in pairs:
        by_criterion[p["criterion"]] = by_criterion.get(p["criterion"], 0) + 1
    print(f"judge pairs: {len(pairs)} {by_criterion}")


if __name__ == "__main__":
    sys.exit(main())
