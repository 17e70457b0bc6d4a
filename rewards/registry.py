"""The reward registry: what a spec, a reward file or a function names, checked before loading.

`REWARDS` maps a name to an `Entry` (build, check, positional argument, help): `rubric` (the
model judge, rubric.py), `rubric_cal`, `rm` (a trained reward model folder,
rewards/reward_model.py), `ensemble` (several reward models: their minimum or mean less spread,
optionally bounded), `happy` and `asks_question` (rewards/builtin.py), `stance` (pushback paid by
the prompt's category: + on false-premise and nonsense prompts, - on controls), `fact` and `fn` (a
user's Python function); a task adds its own with `register` (tasks/registry.py registers chess's
graduated reward and its task types at import), so this module never imports a task. A reward is
a list of weighted `Component`s, given as a spec (`rubric`, `rm:PATH`, `rubric:0.5,rm:PATH:0.5`),
a YAML file (`load_reward_config`: components with arguments, bound with functools.partial) or a
function (`FILE:NAME`); every name, weight, path and argument is checked before any model is
loaded. Each entry's build returns a score function giving `Scores`; rewards/scorer.py sums them.
"""

import dataclasses
import functools
import importlib.util
import inspect
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.diversity import jaccard
from core.jsonl import DataError
from core.prompts import CATEGORIES, load_notes, reference_hits

import numpy as np

import rubric
from rewards import reward_model
from rewards.builtin import RewardError, RewardFn, asks_question, happy_reward, stance_values
from rewards.pushback import disputes, opening_negation


@dataclass
class Scores:
    """One scoring call: values (N,) float64 (NaN = failed), per-completion detail dicts (or None
    when the reward has no parts), and how many judgments failed in this call."""

    values: np.ndarray
    details: list[dict] | None
    failures: int


@dataclass
class RewardContext:
    """What reward components may need, built only when one asks: `judge()` returns (a Gwen, a
    context manager to judge inside); `tokenizer` is the policy's and `policy` its --model (a
    reward model trained on another model's answers is noted); `records` are the task's train
    and eval records (the chess reward's labels)."""

    judge: Callable[[], tuple] | None = None
    tokenizer: object = None
    judge_batch_size: int = 24
    records: list[dict] | None = None  # the task's labelled records (a ground-truth reward's)
    share_prefix: bool = True  # a reward model reads each group's prompt once
    ragged: bool = True  # ... and skips most padding after the shorter answers (gwen.ragged_blocks)
    refresh: bool = False  # --reward-refresh: reward models stay unmerged (trainable LoRA)
    reward_models: list = field(default_factory=list)  # every rm component built, in order
    policy: str | None = None  # the policy's --model, named in the note of note_other_base


@dataclass(frozen=True)
class Entry:
    """A registry entry. `build(ctx, **args)` returns a function (prompts, completions,
    categories) -> Scores; `check(**args)` validates the arguments before any model is loaded;
    `positional` names the argument a spec item may give after the name (`rm:PATH`)."""

    build: Callable
    check: Callable
    positional: str | None
    help: str


def plain_part(fn: RewardFn):
    """A component's score function around a plain reward function (no details, no failures)."""

    def score(prompts, completions, categories):
        return Scores(np.asarray(fn(prompts, completions, categories=categories)), None, 0)

    return score


def _no_args(**args):
    if args:
        raise RewardError(f"takes no arguments, got {sorted(args)}")


def _build_happy(ctx):
    return plain_part(happy_reward)


def _build_asks_question(ctx):
    return plain_part(asks_question)


def _check_stance(
    pay: float = 1.0,
    penalty: float = 1.0,
    detector: str = "lexical",
    opening: bool = False,
    curiosity_penalty: float = 0.0,
):
    if not isinstance(opening, bool):
        raise RewardError(f"stance opening={opening!r} must be true or false")
    for name, v in (("pay", pay), ("penalty", penalty), ("curiosity_penalty", curiosity_penalty)):
        _check_number("stance", name, v, zero_ok=True)
    if detector == "none":
        if not opening:
            raise RewardError(
                "stance detector 'none' flags nothing by itself: set opening: true (the opening "
                "negation is then the only flag) or name a detector"
            )
    elif detector != "lexical":
        if (
            not isinstance(detector, str)
            or not (rm_folder(detector) / reward_model.CONFIG_FILE).is_file()
        ):
            raise RewardError(
                f"stance detector {detector!r} is neither 'lexical', 'none' nor a classifier "
                f"folder with {reward_model.CONFIG_FILE} (train one with `train_rm.py --labels`)"
            )


def stance_flagger(detector: str = "lexical", opening: bool = False, share_prefix: bool = True):
    """`flags(prompts, completions) -> [float]`, the stance term's dispute flag per answer:
    'lexical' flags with pushback.disputes (0 or 1); a classifier folder (train_rm.py --labels,
    not reading the category) gives P(pushback), so wording the lexicon misses is still seen;
    'none' flags nothing by itself. `opening` true raises the flag to 1 where the answer's first
    sentence negates something the prompt does not (opening_negation): with 'none' that is the
    only flag, 0 or 1 (a classifier's probability taxes every answer a little;
    knowledge/learning_run.md, attempt 13). The reward and evaluate.py's agreement check both
    read flags from here."""
    if detector == "lexical":

        def classify(prompts, completions):
            return [float(disputes(t)) for t in completions]

    elif detector == "none":

        def classify(prompts, completions):
            return [0.0] * len(completions)

    else:
        clf = reward_model.load(rm_folder(detector))
        if clf.config.use_category:
            raise RewardError(
                f"stance detector {detector!r} reads the prompt's category: it would learn the "
                "category, not the answer; train it with --no-use-category"
            )

        def classify(prompts, completions):
            probs = clf.pushback_probabilities(prompts, completions, share_prefix=share_prefix)
            return [float(p) for p in probs]

    def flags(prompts, completions):
        out = classify(prompts, completions)
        if opening:
            out = [max(f, float(opening_negation(t, p)))
                   for f, t, p in zip(out, completions, prompts, strict=True)]  # fmt: skip
        return out

    return flags


def _build_stance(
    ctx,
    pay: float = 1.0,
    penalty: float = 1.0,
    detector: str = "lexical",
    opening: bool = False,
    curiosity_penalty: float = 0.0,
):
    """The stance term: stance_values of stance_flagger's flags (the pay or penalty scaled by a
    classifier's probability)."""
    flagger = stance_flagger(detector, opening, share_prefix=ctx.share_prefix)

    def score(prompts, completions, categories):
        flags = flagger(prompts, completions)
        values = np.asarray(stance_values(flags, categories, pay, penalty, curiosity_penalty))
        details = [
            {"disputes": float(f), "stance": float(v)} for f, v in zip(flags, values, strict=True)
        ]
        return Scores(values, details, 0)

    return score


def _check_number(component: str, name: str, v, zero_ok: bool) -> None:
    """A component's numeric argument: a finite int or float (not a bool), > 0 or >= 0."""
    ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    if not (ok and (v >= 0 if zero_ok else v > 0)):
        raise RewardError(
            f"{component} {name}={v!r} must be a finite number {'>=' if zero_ok else '>'} 0"
        )


def _check_fact(notes: str, pay: float = 1.0):
    _check_number("fact", "pay", pay, zero_ok=False)
    try:
        load_notes(notes)
    except (DataError, OSError) as e:
        raise RewardError(f"fact notes {notes!r}: {e}") from e


def _build_fact(ctx, notes: str, pay: float = 1.0):
    """+pay for an answer that states its prompt's reference fact: one of the note's markers
    (prompts.reference_hits) is in it. Notes are per prompt (data/train_notes.jsonl: what is
    false in each false-premise training prompt and the phrases that say so), so what is paid
    is the content of a correction, never the form of a denial: "No, X" earns nothing unless X
    is the true fact of that prompt, and a prompt without a note (every control) pays 0.
    Prints how many of the run's false-premise prompts have a note; none at all is an error."""
    by_prompt = load_notes(notes)
    if ctx.records:
        fp = {r["prompt"].strip() for r in ctx.records if r.get("category") == "false_premise"}
        covered = len(fp & set(by_prompt))
        if fp and not covered:
            raise RewardError(
                f"fact notes {notes!r} hold a note for none of the run's {len(fp)} false-premise "
                "prompts: the reward would be 0 everywhere; give the notes of these prompts"
            )
        print(f"fact reward: {notes} has notes for {covered} of {len(fp)} false-premise prompts "
              "(the others, and every prompt without a note, score 0)")  # fmt: skip

    def score(prompts, completions, categories):
        notes_of = [by_prompt.get(p.strip()) for p in prompts]
        hits = [[] if n is None else reference_hits(t, n["markers"])
                for n, t in zip(notes_of, completions, strict=True)]  # fmt: skip
        values = np.array([pay if h else 0.0 for h in hits], dtype=np.float64)
        details = [{"fact": float(v), "has_note": float(n is not None)}
                   for v, n in zip(values, notes_of, strict=True)]  # fmt: skip
        return Scores(values, details, 0)

    return score


# The calibrated judge's settings, chosen on the validation pairs (knowledge/rubric.md).
RUBRIC_CAL = {"calibration": "content_free", "length_beta": 0.0, "echo_threshold": 0.8}


def _check_rubric(batch_size: int | None = None, **options):
    if batch_size is not None and not (isinstance(batch_size, int) and batch_size >= 1):
        raise RewardError(f"batch_size={batch_size!r} must be an integer >= 1")
    unknown = set(options) - {"calibration", "length_beta", "echo_threshold"}
    if unknown:
        raise RewardError(f"unknown rubric options {sorted(unknown)}")
    if options.get("calibration", "none") not in rubric.CALIBRATIONS:
        raise RewardError(f"calibration {options['calibration']!r}: use {rubric.CALIBRATIONS}")


def _build_rubric(ctx, batch_size: int | None = None, **options):
    if ctx.judge is None:
        raise RewardError("the rubric reward needs a judge model; none was provided")
    judge, judge_context = ctx.judge()
    judged = rubric.Rubric(judge, batch_size=batch_size or ctx.judge_batch_size, **options)

    def score(prompts, completions, categories):
        before = judged.failures
        with judge_context():
            details = judged.score_detailed_batched(prompts, completions, categories)
        values = np.array([d["reward"] for d in details], dtype=np.float64)
        return Scores(values, details, judged.failures - before)

    return score


# An answer whose word set overlaps the prompt's by at least this Jaccard similarity is an echo of
# the prompt; a reward model scores it ECHO_SCORE, below anything it gives a real answer (its
# scores stay within about +-8: center_coef keeps them near 0). knowledge/reward_model.md.
ECHO_THRESHOLD = 0.8
REPO = Path(__file__).resolve().parent.parent


def rm_folder(path: str) -> Path:
    """A reward-model folder: as given (absolute, or relative to the working directory), else
    relative to the repository, so the shipped models/ work from any directory."""
    folder = Path(path)
    if folder.is_absolute() or folder.exists() or not (REPO / folder).exists():
        return folder
    return REPO / folder


ECHO_SCORE = -10.0
_noted: set[tuple[str, str]] = set()  # (reward model, policy tokenizer) pairs already noted


def note_other_base(path: str, config, ctx) -> None:
    """One `note:` line on stderr (once per reward model and policy tokenizer in a process) when the
    reward model's base reads another tokenizer than the policy: a different model family. It still
    scores the policy's answers (it reads their text and encodes it with its own tokenizer,
    rewards/reward_model.py `encode_parts`), but it learned from another model's answers."""
    policy_sha = reward_model.tokenizer_sha256(ctx.tokenizer)
    if policy_sha == config.tokenizer_sha256 or (path, policy_sha) in _noted:
        return
    _noted.add((path, policy_sha))
    model = ctx.policy or "YOUR_MODEL"
    print(
        f"note: reward model {path!r} was trained on answers of {config.base_model!r}, another "
        "model than the policy: it scores the policy's text, but a reward model trained on your "
        f"model's answers fits it better: uv run python train_rm.py --model {model} "
        "--out models/rm-mine, then --reward rm:models/rm-mine",
        file=sys.stderr,
    )


def _check_rm(path: str, batch_size: int = 16, echo_threshold: float | None = ECHO_THRESHOLD):
    folder = rm_folder(path)
    if not (folder / reward_model.CONFIG_FILE).is_file():
        raise RewardError(
            f"reward-model folder {path!r} has no {reward_model.CONFIG_FILE}: train one with "
            "`uv run python train_rm.py --out PATH` or fix the path"
        )
    if not (isinstance(batch_size, int) and batch_size >= 1):
        raise RewardError(f"batch_size={batch_size!r} must be an integer >= 1")
    if echo_threshold is not None and not 0 < echo_threshold <= 1:
        raise RewardError(f"echo_threshold={echo_threshold!r}: must be in (0, 1] or null")


def _build_rm(ctx, path: str, batch_size: int = 16, echo_threshold: float | None = ECHO_THRESHOLD):
    rm = reward_model.load(rm_folder(path), merge=not ctx.refresh)
    ctx.reward_models.append(rm)
    if ctx.tokenizer is not None:
        note_other_base(path, rm.config, ctx)

    def score(prompts, completions, categories):
        values = np.asarray(
            rm.score(prompts, completions, categories, batch_size, ctx.share_prefix, ctx.ragged),
            dtype=np.float64,
        )
        if echo_threshold is not None:
            pairs = zip(prompts, completions, strict=True)
            echo = [jaccard(p, c) >= echo_threshold for p, c in pairs]
            values = np.where(echo, ECHO_SCORE, values)
        return Scores(values, None, 0)

    return score


# How an ensemble of reward models turns its members' scores into one (knowledge/reward_model.md,
# "Ensemble"): `min` pays what the most sceptical member pays; `mean_minus_std` pays the mean
# less `spread_coef` times the members' spread, so text the members disagree on (the blind spot
# of one of them) earns less than text they agree is good.
ENSEMBLE_MODES = ("min", "mean_minus_std")


def ensemble_paths(paths) -> list[str]:
    """The members of an ensemble: a list of folders, or one string joined with '+' (a spec
    item cannot hold ',' or ':')."""
    if isinstance(paths, str):
        paths = paths.split("+")
    if not isinstance(paths, list | tuple) or not all(isinstance(p, str) and p for p in paths):
        raise RewardError(f"ensemble paths {paths!r}: write ensemble:FOLDER+FOLDER[+FOLDER...]")
    return list(paths)


def combine(values, mode: str = "mean_minus_std", spread_coef: float = 1.0) -> np.ndarray:
    """(members, N) scores -> (N,) by `mode` (ENSEMBLE_MODES); NaN where any member is NaN (a
    failed member is not outvoted silently). The spread is the population standard deviation."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] < 2:
        raise ValueError(f"combine needs (members >= 2, N) scores, got shape {v.shape}")
    if mode == "min":
        out = v.min(axis=0)
    elif mode == "mean_minus_std":
        out = v.mean(axis=0) - spread_coef * v.std(axis=0)
    else:
        raise ValueError(f"ensemble mode {mode!r}: use one of {ENSEMBLE_MODES}")
    return np.where(np.isnan(v).any(axis=0), np.nan, out)


def bounded(values, bound: float | None) -> np.ndarray:
    """bound * tanh(x / bound): about x near 0, never beyond +-bound, so no single blind spot
    of a reward model can pay more than `bound`; None leaves the values as they are."""
    v = np.asarray(values, dtype=np.float64)
    return v if bound is None else bound * np.tanh(v / bound)


def _check_ensemble(
    paths, mode: str = "mean_minus_std", spread_coef: float = 1.0, bound=None, batch_size=16
):
    members = ensemble_paths(paths)
    if len(members) < 2:
        raise RewardError(f"an ensemble needs >= 2 reward models, got {members}")
    if len(set(members)) != len(members):
        raise RewardError(f"an ensemble member appears twice: {members}")
    for p in members:
        _check_rm(p, batch_size)
    if mode not in ENSEMBLE_MODES:
        raise RewardError(f"ensemble mode {mode!r}: use one of {ENSEMBLE_MODES}")
    if not (isinstance(spread_coef, int | float) and spread_coef >= 0):
        raise RewardError(f"spread_coef={spread_coef!r} must be a number >= 0")
    if bound is not None and not (isinstance(bound, int | float) and bound > 0):
        raise RewardError(f"bound={bound!r} must be a number > 0, or null for none")


def _build_ensemble(
    ctx, paths, mode: str = "mean_minus_std", spread_coef: float = 1.0, bound=None, batch_size=16
):
    members = ensemble_paths(paths)
    scorers = [_build_rm(ctx, p, batch_size) for p in members]

    def score(prompts, completions, categories):
        per = np.stack([s(prompts, completions, categories).values for s in scorers])
        values = bounded(combine(per, mode, spread_coef), bound)
        details = [
            {
                **{f"member{k}": float(per[k, i]) for k in range(len(members))},
                "spread": float(per[:, i].std()),
            }
            for i in range(per.shape[1])
        ]
        return Scores(values, details, int(np.isnan(values).sum()))

    return score


def load_function(file: str, function: str) -> RewardFn:
    """A user's reward function `function` from the Python file `file`."""
    path = Path(file)
    if not path.is_file():
        raise RewardError(f"reward function file {file!r} does not exist")
    spec = importlib.util.spec_from_file_location(f"user_rewards_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001  (the user's file: report what broke, where)
        raise RewardError(f"importing {file!r} failed: {type(e).__name__}: {e}") from e
    fn = getattr(module, function, None)
    if not callable(fn):
        names = sorted(n for n in vars(module) if callable(vars(module)[n]) and n[0] != "_")
        raise RewardError(f"{file!r} has no function {function!r}; it defines {names}")
    return fn


def _check_fn(file: str, function: str, **kwargs):
    fn = load_function(file, function)
    try:
        inspect.signature(fn).bind(["p"], ["c"], **kwargs)
    except TypeError as e:
        raise RewardError(
            f"{file}:{function} cannot take (prompts, completions, **{sorted(kwargs)}): {e}; "
            "a reward function is fn(prompts, completions, **kw) -> list[float]"
        ) from e


def _build_fn(ctx, file: str, function: str, **kwargs):
    return plain_part(functools.partial(load_function(file, function), **kwargs))


REWARDS: dict[str, Entry] = {
    "rubric": Entry(_build_rubric, _check_rubric, None, "the model-judged rubric (rubric.py)"),
    "rubric_cal": Entry(
        functools.partial(_build_rubric, **RUBRIC_CAL),
        functools.partial(_check_rubric, **RUBRIC_CAL),
        None,
        "the rubric with contextual calibration and an echo floor (knowledge/rubric.md)",
    ),
    "rm": Entry(_build_rm, _check_rm, "path", "a trained reward model folder (train_rm.py)"),
    "happy": Entry(_build_happy, _no_args, None, "fraction of words that are 'happy' (a toy)"),
    "asks_question": Entry(
        _build_asks_question, _no_args, None, "1 if the answer asks a question (routing task)"
    ),
    "ensemble": Entry(
        _build_ensemble,
        _check_ensemble,
        "paths",
        "reward models joined by '+': min or mean minus spread, optionally bounded",
    ),
    "stance": Entry(
        _build_stance,
        _check_stance,
        None,
        "+pay disputing false/nonsense prompts, -penalty disputing controls (default 1 each); "
        "detector: lexical, a classifier folder or none (with opening: the opening negation "
        "alone); opening: true also flags a negating first sentence; curiosity_penalty: the "
        "cost of a dispute on a curiosity prompt (default 0)",
    ),
    "fact": Entry(
        _build_fact,
        _check_fact,
        None,
        "+pay when the answer states its prompt's reference fact (a marker of its note in "
        "notes: a file like data/eval_notes.jsonl); prompts without a note score 0",
    ),
    "fn": Entry(_build_fn, _check_fn, None, "a Python function: file, function, its arguments"),
}
BUILT_IN = frozenset(REWARDS)
TASK_REWARDS: dict[str, str] = {}  # a reward a task registered -> the task's name
TASK_CATEGORIES: list[str] = []  # the record categories the registered tasks add (chess: P, A)


def register(name: str, entry: Entry, task: str, categories: tuple[str, ...] = ()) -> None:
    """Add `task`'s own reward `name` to REWARDS, and the record categories its rows carry (a
    reward file's `categories:` may list them). A task calls it when it is imported
    (tasks/registry.py), so rewards/ never imports tasks/; a task imported again registers again."""
    if name in BUILT_IN or TASK_REWARDS.get(name, task) != task:
        owner = f"task {TASK_REWARDS[name]!r} has it" if name in TASK_REWARDS else "a built-in"
        raise ValueError(f"task {task!r} cannot register reward {name!r}: {owner}")
    REWARDS[name], TASK_REWARDS[name] = entry, task
    TASK_CATEGORIES.extend(c for c in categories if c not in (*CATEGORIES, *TASK_CATEGORIES))


def _not_registered(where: str) -> RewardError:
    """The error for an unknown reward name: the valid names, and where a task's rewards come from
    when no task has registered any in this process."""
    hint = (
        ""
        if TASK_REWARDS
        else " (a task's own rewards, such as chess, are registered by the commands that take "
        "--task: train.py --task chess; in Python, import tasks.registry first)"
    )
    return RewardError(f"{where} is not registered; valid names: {sorted(REWARDS)}{hint}")


@dataclass(frozen=True)
class Component:
    """One part of a reward: registry `name`, `weight` in the sum, keyword `args` for it, and
    optionally the prompt `categories` it scores (a reward file's `categories:` list)."""

    name: str
    weight: float = 1.0
    args: dict = dataclasses.field(default_factory=dict)
    # the prompt categories it scores (None: every row); other rows get 0 and are not scored
    categories: tuple[str, ...] | None = None

    @property
    def label(self) -> str:
        """How the component is named in details and metrics."""
        if self.name == "fn":
            return f"fn:{Path(self.args['file']).stem}.{self.args['function']}"
        arg = self.args.get(REWARDS[self.name].positional or "")
        return self.name if arg is None else f"{self.name}:{arg}"


def check_components(components: list[Component], source: str) -> list[Component]:
    """Validate names, weights and arguments before any model is loaded; ValueError naming
    `source` (the flag or file), the component and the fix."""
    if not components:
        raise RewardError(f"{source}: no reward component given; valid: {sorted(REWARDS)}")
    for c in components:
        if c.name not in REWARDS:
            raise _not_registered(f"{source}: reward {c.name!r}")
        if not (isinstance(c.weight, int | float) and math.isfinite(c.weight) and c.weight > 0):
            raise RewardError(f"{source}: {c.name} weight {c.weight!r} must be finite and > 0")
        _check_categories(c, source)
        try:
            REWARDS[c.name].check(**c.args)
        except TypeError as e:
            raise RewardError(f"{source}: reward {c.name!r} arguments {c.args}: {e}") from e
        except ValueError as e:
            raise RewardError(f"{source}: reward {c.name!r}: {e}") from e
    labels = [c.label for c in components]
    if len(set(labels)) != len(labels):
        raise RewardError(f"{source}: a component appears twice: {labels}")
    return components


def _check_categories(c: Component, source: str) -> None:
    if c.categories is None:
        return
    known = (*CATEGORIES, *TASK_CATEGORIES)
    cats = c.categories
    listed = isinstance(cats, tuple)
    bad = [x for x in cats if x not in known] if listed else []
    if not listed or not cats or bad or len(set(cats)) != len(cats):
        raise RewardError(
            f"{source}: {c.name} categories {list(cats) if listed else cats!r} must be a "
            f"non-empty list of distinct prompt categories from {list(known)}"
            + (f" ({bad[0]!r} is not one)" if bad else "")
        )


def parse_spec(spec: str) -> list[Component]:
    """`name[:arg][:weight]` items separated by commas (`rubric`, `rm:PATH`, `rubric:0.5,
    rm:PATH:0.5`) -> checked components; ValueError naming the bad item and the fix."""
    if not isinstance(spec, str) or not spec.strip():
        raise RewardError(f"reward spec {spec!r} is empty; valid names: {sorted(REWARDS)}")
    out = []
    for item in spec.split(","):
        parts = [p.strip() for p in item.strip().split(":")]
        name, rest = parts[0], parts[1:]
        if name not in REWARDS:
            raise _not_registered(f"reward {name!r} (in {spec!r})")
        if name == "fn":
            raise RewardError("a function reward is given with --reward-fn FILE:NAME or a file")
        args = {}
        positional = REWARDS[name].positional
        if positional:
            if not rest or not rest[0]:
                raise RewardError(f"reward {name!r} needs an argument: write {name}:PATH")
            args[positional], rest = rest[0], rest[1:]
        if len(rest) > 1:
            raise RewardError(f"reward item {item.strip()!r} has too many ':' parts")
        weight = 1.0
        if rest:
            try:
                weight = float(rest[0])
            except ValueError:
                raise RewardError(
                    f"reward item {item.strip()!r}: weight {rest[0]!r} is not a number"
                ) from None
        out.append(Component(name, weight, args))
    return check_components(out, f"--reward {spec!r}")


def load_reward_config(path: str) -> list[Component]:
    """Components from a YAML file: `components:` a list of {name, weight (default 1), and the
    component's arguments (rm: path; fn: file, function and any keyword arguments)}."""
    import yaml  # start-up: only a YAML reward file needs it, and every command imports rewards

    try:
        raw = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise RewardError(f"reward config {path!r} does not exist") from None
    except yaml.YAMLError as e:
        raise RewardError(f"reward config {path!r} is not valid YAML: {e}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("components"), list):
        raise RewardError(f"{path}: expected a mapping with a `components:` list")
    out = []
    for i, item in enumerate(raw["components"]):
        if not isinstance(item, dict) or "name" not in item:
            raise RewardError(f"{path}: components[{i}] needs a `name` (one of {sorted(REWARDS)})")
        item = dict(item)
        name, weight = item.pop("name"), item.pop("weight", 1.0)
        cats = item.pop("categories", None)
        out.append(Component(name, weight, item, tuple(cats) if isinstance(cats, list) else cats))
    return check_components(out, path)


def parse_function_spec(spec: str) -> list[Component]:
    """`FILE:NAME` -> one `fn` component (--reward-fn)."""
    file, sep, function = spec.rpartition(":")
    if not sep or not file or not function:
        raise RewardError(f"--reward-fn {spec!r}: write FILE.py:FUNCTION_NAME")
    return check_components([Component("fn", 1.0, {"file": file, "function": function})], spec)


def needs_judge(components: list[Component]) -> bool:
    return any(c.name in ("rubric", "rubric_cal") for c in components)
