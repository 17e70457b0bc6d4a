"""Read and check the hand-written sources in data/sources/*.yaml.

Each YAML file holds one group of hand-written text (claims, prompts per category, judge pairs,
happy prompts); SCHEMAS says what each must contain: keys, types, non-empty text, pairs of the
right length, frame placeholders, no duplicates. `load_source` raises one `jsonl.DataError`
naming the file, the line, the key path and the fix, so a bad edit fails before any JSONL is
written. This module only reads and checks; make_data.py and make_happy_prompts.py build the
JSONL files from what it returns.
"""

import string
from dataclasses import dataclass
from pathlib import Path

from core.jsonl import DataError
from core.prompts import CATEGORIES, CRITERIA, norm

import yaml

ROOT = Path(__file__).resolve().parent.parent

SOURCES = Path(__file__).resolve().parent / "sources"

# A follow-up question must start with one of these (it is lower-cased after "Since ..., ").
FOLLOW_UP_STARTS = (
    *("What", "Why", "How", "Which", "Who", "When", "Where", "Is", "Does", "Do", "Did"),
    *("Can", "Should", "Would", "Roughly", "If", "In"),
)
# Frame placeholders per curiosity template, in the order a filler's parts fill them.
CURIOSITY_TEMPLATES = {
    "counterfactual": ("cf",),
    "before_invention": ("act", "inv"),
    "connection": ("a", "b"),
    "topic": ("t",),
}


class _Bad(Exception):
    """One problem at a key path (a tuple of keys and indices); turned into a DataError."""

    def __init__(self, where: tuple, message: str):
        super().__init__(message)
        self.where = where
        self.message = message


def _same_key(value):
    if isinstance(value, str):
        return norm(value)
    if isinstance(value, dict):
        return tuple((k, _same_key(v)) for k, v in value.items())
    return tuple(map(_same_key, value))


def _kind(value) -> str:
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, bool):
        return "true/false (YAML reads bare yes/no/on/off/true/false as booleans)"
    if isinstance(value, dict):
        return "a mapping (YAML reads 'key: value' and '{...}' as mappings)"
    names = {int: "a number", float: "a number", str: "text", list: "a list"}
    return names.get(type(value), type(value).__name__)


# ---- schema nodes: each `check(value, where)` returns the value to use or raises _Bad ----


@dataclass(frozen=True)
class Text:
    """Non-empty text. With `fields`, a frame: {placeholders} only from `fields`, all of
    `needs` present."""

    fields: tuple | None = None
    needs: tuple = ()

    def check(self, value, where):
        if value is None:
            raise _Bad(where, "no text here; write it or delete the entry")
        if not isinstance(value, str):
            raise _Bad(where, f"expected text, got {_kind(value)}; put the text in double quotes")
        if not value.strip():
            raise _Bad(where, "empty text; write the text or delete the item")
        if self.fields is None:
            return value
        try:
            used = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        except ValueError as e:
            raise _Bad(where, f"broken braces in {value!r} ({e}); write {{name}}") from None
        unknown = sorted(used - set(self.fields))
        if unknown:
            allowed = ", ".join(f"{{{f}}}" for f in self.fields)
            raise _Bad(where, f"unknown placeholder {{{unknown[0]}}} in {value!r}; use {allowed}")
        for name in self.needs:
            if name not in used:
                raise _Bad(where, f"{value!r} lacks the placeholder {{{name}}}; add it")
        return value


@dataclass(frozen=True)
class Count:
    """A whole number >= 1."""

    def check(self, value, where):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _Bad(where, f"expected a whole number >= 1 (no quotes), got {value!r}")
        return value


@dataclass(frozen=True)
class OneOf:
    values: tuple

    def check(self, value, where):
        if value not in self.values:
            raise _Bad(where, f"{value!r} is not one of {', '.join(self.values)}; use one of those")
        return value


@dataclass(frozen=True)
class Pair:
    """A fixed-length list such as [clause, follow-up question], returned as a tuple."""

    names: tuple

    def check(self, value, where):
        want = f"[{', '.join(self.names)}]"
        if not isinstance(value, list):
            raise _Bad(where, f"expected {want}, got {_kind(value)}")
        if len(value) != len(self.names):
            n = len(value)
            raise _Bad(where, f"expected {want}, got {n} item{'' if n == 1 else 's'}")
        return tuple(Text().check(v, (*where, i)) for i, v in enumerate(value))


@dataclass(frozen=True)
class ListOf:
    """A list of at least `at_least` items; `unique` refuses items equal up to case and
    whitespace."""

    item: object
    unique: bool = True
    at_least: int = 1

    def check(self, value, where):
        if not isinstance(value, list):
            raise _Bad(where, f"expected a list ('- item' lines), got {_kind(value)}")
        if len(value) < self.at_least:
            raise _Bad(
                where, f"{len(value)} item(s), the generator needs {self.at_least}; add more"
            )
        out, seen = [], {}
        for i, raw in enumerate(value):
            item = self.item.check(raw, (*where, i))
            if self.unique:
                key = _same_key(item)
                if key in seen:
                    shown = repr(raw)[:60] + ("..." if len(repr(raw)) > 60 else "")
                    raise _Bad((*where, i), f"{shown} repeats item [{seen[key]}]; delete one")
                seen[key] = i
            out.append(item)
        return out


@dataclass(frozen=True)
class Record:
    """A mapping with exactly these keys (a key ending in '?' is optional); `check_all(value,
    where)` runs once the keys pass, for rules spanning several keys."""

    fields: dict
    check_all: object = None

    def check(self, value, where):
        names = {k.rstrip("?"): k for k in self.fields}
        keys = ", ".join(names)
        if not isinstance(value, dict):
            raise _Bad(where, f"expected a mapping with keys {keys}, got {_kind(value)}")
        for key in value:
            if key not in names:
                raise _Bad((*where, key), f"unknown key {key!r}; allowed: {keys}")
        out = {}
        for name, spec_key in names.items():
            if name in value:
                out[name] = self.fields[spec_key].check(value[name], (*where, name))
            elif not spec_key.endswith("?"):
                raise _Bad(where, f"missing key {name!r}; expected keys: {keys}")
        if self.check_all is not None:
            self.check_all(out, where)
        return out


@dataclass(frozen=True)
class MapOf:
    """A non-empty mapping from free names (e.g. kinds of invented entity) to `item`."""

    item: object

    def check(self, value, where):
        if not isinstance(value, dict) or not value:
            raise _Bad(where, f"expected a non-empty mapping of name: entry, got {_kind(value)}")
        for key in value:
            if not isinstance(key, str):
                raise _Bad((*where, key), f"name {key!r} must be text; put it in double quotes")
        return {k: self.item.check(v, (*where, k)) for k, v in value.items()}


# ---- rules spanning several keys --------------------------------------------------------


def _check_claims(claims, where):
    first_at = {}  # normalised clause -> where it first appears
    for group in ("false_claims", "true_claims"):
        for split in ("train", "eval"):
            for i, (clause, follow_up) in enumerate(claims[group][split]):
                at = (group, split, i)
                if clause != clause.strip() or clause[-1] in ".?!,;:":
                    raise _Bad(at, f"clause {clause!r} ends in punctuation or space; remove it")
                if clause.split()[0] in ("The", "A", "An"):
                    raise _Bad(at, f"clause {clause!r} must start lower-case (it follows 'that')")
                first_word = follow_up.split()[0].split("'")[0]
                if not follow_up.endswith("?") or first_word not in FOLLOW_UP_STARTS:
                    raise _Bad(
                        at,
                        f"follow-up {follow_up!r} must be a question starting with one of "
                        f"{', '.join(FOLLOW_UP_STARTS)}",
                    )
                if norm(clause) in first_at:
                    raise _Bad(
                        at,
                        f"clause {clause!r} is also at {_dotted(first_at[norm(clause)])}; a fact "
                        f"may be used once (eval is held out; a claim is either true or false)",
                    )
                first_at[norm(clause)] = at
    clauses = {claims[g][s][i][0] for g, s, i in first_at.values()}
    for i, clause in enumerate(claims["clauses_without_why"]):
        if clause not in clauses:
            raise _Bad(
                ("clauses_without_why", i),
                f"{clause!r} is not a clause of any claim; copy the clause exactly or delete it",
            )


def _enough_frames(section, where):
    if section["frames_per_item"] > len(section["frames"]):
        raise _Bad(
            (*where, "frames_per_item"),
            f"{section['frames_per_item']} frames per item but only {len(section['frames'])} "
            f"frames; lower it or add frames",
        )


def _template(fields):
    filler = Text() if len(fields) == 1 else Pair(fields)
    frames = ListOf(Text(fields, needs=fields))
    split = Record(
        {"frames_per_item": Count(), "frames": frames, "fillers": ListOf(filler)}, _enough_frames
    )
    return Record({"train": split, "eval": split})


def _check_exclusions(section, where):
    props = {p for split in ("train", "eval") for p in section[split]["properties"]}
    things = {t for split in ("train", "eval") for t in section[split]["things"]}
    for i, (prop, thing) in enumerate(section["exclude"]):
        if prop not in props or thing not in things:
            raise _Bad(
                (*where, "exclude", i),
                f"[{prop!r}, {thing!r}] names no listed property and thing, so it excludes "
                f"nothing; copy both exactly from properties and things",
            )


def _check_nonexistent(split, where):
    shared = "frames" in split
    for kind, entry in split["kinds"].items():
        if shared == ("frames" in entry):
            raise _Bad(
                (*where, "kinds", kind),
                "give frames either here or shared beside `kinds`, not both or neither",
            )
        if "per_kind" in split:
            combos = len(entry["names"]) * len(split.get("frames", entry.get("frames")))
            if split["per_kind"] > combos:
                raise _Bad(
                    (*where, "per_kind"),
                    f"{split['per_kind']} per kind but {kind!r} has only {combos} "
                    f"(name, frame) combinations; lower it or add names or frames",
                )


def _check_pair(pair, where):
    if norm(pair["better"]) == norm(pair["worse"]):
        raise _Bad((*where, "worse"), "same text as 'better'; a pair needs two different responses")


def _per_split(spec):
    return Record({"train": spec, "eval": spec})


TEXTS = ListOf(Text())
HANDWRITTEN = _per_split(TEXTS)
_CATEGORY_ERROR_SPLIT = Record(
    {
        "count": Count(),
        "frames": ListOf(Text(("p", "t", "t2"), needs=("p", "t"))),
        "properties": TEXTS,
        "things": ListOf(Text(), at_least=2),  # {t2} is a second, different thing
    }
)
_NAME_FRAMES = ListOf(Text(("n",), needs=("n",)))
_SALAD_FIELDS = ("adj", "n1", "n1s", "n2", "n3", "v", "v3", "abs")
_CONTRA_FIELDS = ("form", "topic", "n", "m", "k", "impossible")

SCHEMAS = {
    "claims": Record(
        {
            "false_claims": _per_split(ListOf(Pair(("clause", "follow-up question")))),
            "true_claims": _per_split(ListOf(Pair(("clause", "follow-up question")))),
            "frames": _per_split(ListOf(Text(("c", "Q", "q"), needs=("c",)))),
            "frames_per_claim": Record(
                {"false_claims": _per_split(Count()), "true_claims": _per_split(Count())}
            ),
            "clauses_without_why": TEXTS,
        },
        _check_claims,
    ),
    "false_premise": Record({"handwritten": HANDWRITTEN}),
    "control": Record({"handwritten": HANDWRITTEN}),
    "curiosity": Record(
        {"handwritten": HANDWRITTEN}
        | {name: _template(fields) for name, fields in CURIOSITY_TEMPLATES.items()}
    ),
    "nonsense": Record(
        {
            "handwritten": HANDWRITTEN,
            "category_error": Record(
                {
                    "train": _CATEGORY_ERROR_SPLIT,
                    "eval": _CATEGORY_ERROR_SPLIT,
                    "exclude": ListOf(Pair(("property", "thing"))),
                },
                _check_exclusions,
            ),
            "nonexistent": _per_split(
                Record(
                    {
                        "per_kind?": Count(),
                        "frames?": _NAME_FRAMES,
                        "kinds": MapOf(Record({"names": TEXTS, "frames?": _NAME_FRAMES})),
                    },
                    _check_nonexistent,
                )
            ),
            "word_salad": Record(
                {
                    "nouns": ListOf(Text(), at_least=3),  # three different nouns per prompt
                    "verbs": ListOf(Pair(("base", "third person"))),
                    "adjectives": TEXTS,
                    "abstracts": TEXTS,
                }
                | {
                    split: Record({"count": Count(), "skeletons": ListOf(Text(_SALAD_FIELDS))})
                    for split in ("train", "eval")
                }
            ),
            "scramble": _per_split(
                # a scramble draws 6 to 9 different words
                Record({"count": Count(), "pool": ListOf(Text(), at_least=9)})
            ),
            "contradiction": Record(
                {"forms": TEXTS, "topics": TEXTS}
                | {
                    split: Record(
                        {
                            "count": Count(),
                            "frames": ListOf(Text(_CONTRA_FIELDS)),
                            "impossible": TEXTS,
                        }
                    )
                    for split in ("train", "eval")
                }
            ),
            "truncated": Record(
                {
                    "after": TEXTS,
                    # repeating a wrapper is how it is made more likely
                    "wrappers": ListOf(Text(("s",), needs=("s",)), unique=False),
                }
                | {split: Record({"count": Count()}) for split in ("train", "eval")}
            ),
        }
    ),
    "judge_pairs": Record(
        {
            "pairs": ListOf(
                Record(
                    {
                        "criterion": OneOf(CRITERIA),
                        "category": OneOf(CATEGORIES),
                        "prompt": Text(),
                        "better": Text(),
                        "worse": Text(),
                    },
                    _check_pair,
                )
            )
        }
    ),
    "happy": Record(
        {
            "occasions": TEXTS,
            "people": TEXTS,
            "frames": ListOf(Text(("person", "occasion"))),
            "moods": TEXTS,
        }
    ),
}


# ---- reading ----------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses a repeated key (plain PyYAML keeps the last one silently)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"repeated key {key!r}; merge the two or rename one",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def _dotted(where: tuple) -> str:
    out = ""
    for step in where:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "(top level)"


def _line_of(text: str, where: tuple) -> int:
    """1-based line of the entry at `where` (its key's line inside a mapping), or of its deepest
    existing ancestor."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    line = 0 if node is None else node.start_mark.line
    for step in where:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if k.value == str(step)]
            if not found:
                break
            key, node = found[0]
            line = key.start_mark.line
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
            if step >= len(node.value):
                break
            node = node.value[step]
            line = node.start_mark.line
        else:
            break
    return line + 1


def _shown(path: Path) -> str:
    """The path as people type it: relative to the repo root when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def load_source(name: str, directory=SOURCES) -> dict:
    """The checked contents of `directory/<name>.yaml` (pairs as tuples), or a DataError naming
    the file, the line, the key path and the fix."""
    path = Path(directory) / f"{name}.yaml"
    shown = _shown(path)
    if not path.is_file():
        raise DataError(f"{shown}: file not found; the builders need every file in SCHEMAS")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{shown}: not UTF-8 text ({e}); save it as UTF-8", path=str(path)) from e
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else None
        where = f"line {line}, column {mark.column + 1}: " if mark else ""
        fix = (
            ""  # a repeated key; its message says what to do
            if isinstance(e, yaml.constructor.ConstructorError)
            else "; fix it there (put text in double quotes when it contains ': ' or ' #' or "
            "starts with a quote or one of {[*&!|>%@`)"
        )
        raise DataError(
            f"{shown}: {where}invalid YAML: {e.problem or e}{fix}", path=str(path), line=line
        ) from None
    if data is None:
        raise DataError(f"{shown}: file is empty; see SCHEMAS in data/load_sources.py", str(path))
    try:
        return SCHEMAS[name].check(data, ())
    except _Bad as bad:
        line = _line_of(text, bad.where)
        raise DataError(
            f"{shown}: line {line}: {_dotted(bad.where)}: {bad.message}", path=str(path), line=line
        ) from None


def load_sources(names, directory=SOURCES) -> dict:
    """{name: load_source(name, directory)} for each name."""
    return {name: load_source(name, directory) for name in names}
