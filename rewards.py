"""Rewards a run can train on: plain reward functions, one registry, and the scorer the loop calls.

A reward function has TRL's contract: `fn(prompts: list[str], completions: list[str], **kw) ->
list[float]`, one float per completion, NaN for a failed score (grpo.py leaves it out of the
group baseline); `categories=` carries each prompt's category. `happy_reward` is a deliberately
hackable toy. `REWARDS` is the registry: a spec such as `rubric`, `happy` or
`rubric:0.7,happy:0.3` names components and weights, is checked before any model is loaded
(`parse_spec`), and `build_scorer` binds it to what the components need (a judge model) and
adds the optional length penalty. The judge itself lives in rubric.py.
"""

import math
import string
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

RewardFn = Callable[..., list[float]]


def _words(text: str) -> list[str]:
    return text.split()


def happy_reward(prompts: list[str], completions: list[str], **kw) -> list[float]:
    """Fraction of whitespace-split words that are "happy" (any case, edge punctuation stripped)."""
    scores = []
    for text in completions:
        words = _words(text)
        hits = sum(w.strip(string.punctuation).lower() == "happy" for w in words)
        scores.append(hits / len(words) if words else 0.0)
    return scores


def length_penalty(completions: list[str], *, target_words: int, per_word: float) -> list[float]:
    """-per_word for each word beyond target_words (0 at or under it); add it to a reward."""
    if target_words < 0 or per_word < 0:
        raise ValueError(
            f"length_penalty needs target_words >= 0 and per_word >= 0, got "
            f"target_words={target_words}, per_word={per_word}"
        )
    return [-per_word * max(0, len(_words(text)) - target_words) for text in completions]


def criterion_means(details: list[dict]) -> dict:
    """Per criterion named in any of the rubric's detail dicts (not "reward"): the mean of its
    finite scores, or None where it has none (not applicable, or every judgment failed)."""
    names = sorted({k for d in details for k in d if k != "reward"})
    out = {}
    for name in names:
        vals = [d.get(name) for d in details]
        vals = [v for v in vals if v is not None and math.isfinite(v)]
        out[name] = float(np.mean(vals)) if vals else None
    return out


# ----------------------------------------------------------------------------------------------
# The registry and the scorer


@dataclass
class Scores:
    """One scoring call: values (N,) float64 (NaN = failed), per-completion detail dicts (or None
    when the reward has no parts), and how many judgments failed in this call."""

    values: np.ndarray
    details: list[dict] | None
    failures: int


@dataclass
class RewardContext:
    """What reward components may need, built only when a component asks: `judge()` returns
    (a Gwen, a context manager to judge inside); `judge_batch_size` is the judge's batch."""

    judge: Callable[[], tuple]
    judge_batch_size: int = 24


@dataclass(frozen=True)
class Entry:
    """A registry entry: `build(arg, ctx)` returns a function (prompts, completions,
    categories) -> Scores; `takes_arg` says whether the spec gives it an argument (a path)."""

    build: Callable
    takes_arg: bool
    help: str


def _plain(fn: RewardFn):
    def score(prompts, completions, categories):
        return Scores(np.asarray(fn(prompts, completions, categories=categories)), None, 0)

    return score


def _build_happy(arg, ctx):
    return _plain(happy_reward)


def _build_rubric(arg, ctx):
    import rubric

    judge, judge_context = ctx.judge()
    judged = rubric.Rubric(judge, batch_size=ctx.judge_batch_size)

    def score(prompts, completions, categories):
        before = judged.failures
        with judge_context():
            details = judged.score_detailed_batched(prompts, completions, categories)
        values = np.array([d["reward"] for d in details], dtype=np.float64)
        return Scores(values, details, judged.failures - before)

    return score


REWARDS: dict[str, Entry] = {
    "rubric": Entry(_build_rubric, False, "the model-judged rubric (rubric.py)"),
    "happy": Entry(_build_happy, False, "fraction of words that are 'happy' (a hackable toy)"),
}


@dataclass(frozen=True)
class Component:
    name: str
    arg: str | None
    weight: float


def parse_spec(spec: str) -> list[Component]:
    """`name[:arg][:weight]` items separated by commas -> components; ValueError naming the bad
    item and the fix. A single component without a weight gets weight 1."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"reward spec {spec!r} is empty; valid names: {sorted(REWARDS)}")
    out = []
    for item in spec.split(","):
        parts = [p.strip() for p in item.strip().split(":")]
        name, rest = parts[0], parts[1:]
        if name not in REWARDS:
            raise ValueError(
                f"reward {name!r} (in {spec!r}) is not registered; valid names: {sorted(REWARDS)}"
            )
        arg = None
        if REWARDS[name].takes_arg:
            if not rest or not rest[0]:
                raise ValueError(f"reward {name!r} needs an argument: write {name}:PATH")
            arg, rest = rest[0], rest[1:]
        if len(rest) > 1:
            raise ValueError(f"reward item {item.strip()!r} has too many ':' parts")
        weight = 1.0
        if rest:
            try:
                weight = float(rest[0])
            except ValueError:
                raise ValueError(
                    f"reward item {item.strip()!r}: weight {rest[0]!r} is not a number"
                ) from None
        if not (math.isfinite(weight) and weight > 0):
            raise ValueError(f"reward item {item.strip()!r}: weight must be finite and > 0")
        out.append(Component(name, arg, weight))
    names = [(c.name, c.arg) for c in out]
    if len(set(names)) != len(names):
        raise ValueError(f"reward spec {spec!r} names a component twice")
    return out


def needs_judge(spec: str) -> bool:
    return any(c.name == "rubric" for c in parse_spec(spec))


class Scorer:
    """The reward the loop calls: weighted sum of the spec's components plus the length penalty.

    `scorer(prompts, completions, categories) -> Scores`; a component returning the wrong number
    of values raises. With several components each row's details hold every component's value
    (and its own details under `name/`)."""

    def __init__(self, parts, length_target: int = 120, length_per_word: float = 0.0):
        length_penalty([], target_words=length_target, per_word=length_per_word)  # validate now
        self.parts = parts  # [(Component, score function)]
        self.length_target, self.length_per_word = length_target, length_per_word

    def __call__(self, prompts, completions, categories) -> Scores:
        n = len(completions)
        total, failures, per_part = np.zeros(n), 0, []
        for comp, fn in self.parts:
            s = fn(prompts, completions, categories)
            values = np.asarray(s.values, dtype=np.float64)
            if values.shape != (n,):
                raise ValueError(
                    f"reward {comp.name!r} returned {values.shape} values for {n} completions: "
                    "a reward must give one float per completion"
                )
            total += comp.weight * values
            failures += s.failures
            per_part.append((comp, values, s.details))
        if self.length_per_word > 0:
            total += np.asarray(
                length_penalty(
                    completions, target_words=self.length_target, per_word=self.length_per_word
                )
            )
        return Scores(total, _merge_details(per_part, n), failures)


def _merge_details(per_part, n: int) -> list[dict] | None:
    if len(per_part) == 1:
        return per_part[0][2]
    rows = [{} for _ in range(n)]
    for comp, values, details in per_part:
        label = comp.name if comp.arg is None else f"{comp.name}:{comp.arg}"
        for i in range(n):
            rows[i][label] = float(values[i])
            if details:
                rows[i] |= {f"{label}/{k}": v for k, v in details[i].items() if k != "reward"}
    return rows


def build_scorer(
    spec: str, ctx: RewardContext, length_target: int = 120, length_per_word: float = 0.0
) -> Scorer:
    parts = [(c, REWARDS[c.name].build(c.arg, ctx)) for c in parse_spec(spec)]
    return Scorer(parts, length_target, length_per_word)


def scorer_from_fn(fn: RewardFn, length_target: int = 120, length_per_word: float = 0.0):
    """A Scorer around one plain reward function (tests, user code)."""
    return Scorer([(Component("custom", None, 1.0), _plain(fn))], length_target, length_per_word)
