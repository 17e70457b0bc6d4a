"""How evaluate.py grades answers, and how far each grade can be trusted.

The grader (evals/grade.py) labels every answer; `grade_answers` turns its labels into per-prompt
pushback, broken and engagement rates, and `gold_figures` gives the grader's figures on the gold
set (answers read by the team) that are printed beside them. Independence (issue 20 item 6):
`grader_in_reward` says when a model's run was paid by the grader's own classifier, and
`agreement` measures how often the grader agrees with each `stance` detector a run was paid by
(`stance_detectors`, `detector_flags`). No model answers here: evaluate.py generates.
"""

import inspect
import json
from pathlib import Path

from core import stats
from core.jsonl import file_sha256

import numpy as np

from evals import gold
from evals.cache import Cache, model_fingerprint
from evals.grade import gold_lines
from rewards.builtin import RewardError
from rewards.registry import REWARDS, load_reward_config, stance_flagger


def grade_answers(grader, records, texts, notes=None) -> dict:
    """Per record, the share of its answers the grader calls pushback, broken, and (curiosity
    prompts) engaging: {"pushback_rate", "broken_rate", "engagement_rate": [per record]}, and
    "pushback_flags": [per record [per answer bool]] for the agreement with a run's detector."""
    flat = [{"id": f"{i}-{j}", "category": r["category"], "prompt": r["prompt"], "answer": t}
            for i, (r, ans) in enumerate(zip(records, texts, strict=True))
            for j, t in enumerate(ans)]  # fmt: skip
    graded = iter(grader.grade(flat, progress=True, notes=notes))
    out = {"pushback_rate": [], "broken_rate": [], "engagement_rate": [], "pushback_flags": []}
    for r, ans in zip(records, texts, strict=True):
        g = [next(graded) for _ in ans]
        out["pushback_flags"].append([bool(x["pushback"]) for x in g])
        out["pushback_rate"].append(stats.finite_mean([float(x["pushback"]) for x in g]))
        out["broken_rate"].append(stats.finite_mean([float(x["label"] == "broken") for x in g]))
        curious = r["category"] == "curiosity"
        engages = stats.finite_mean([float(x["engages"]) for x in g]) if curious else None
        out["engagement_rate"].append(engages)
    return out


def gold_figures(grader, path: str, cache, notes=None, notes_path=None, which="135m") -> dict:
    """The grader's figures on a gold set (`which`, a gold.GOLD_SETS name: "135m", the 135M
    models' answers, or "fluent", answers written in a larger model's register; both read and
    labelled, never trained on), cached per grader and notes: printed beside every figure the
    grader makes. With `notes` (prompts.load_notes of `notes_path`) the figures are those of the
    grader with its reference check, as it grades the models. The grader folder's gold.json
    (train_grader.measure_gold) is used when it measured these very files."""
    loader, files = gold.GOLD_SETS[which]
    notes_sha = file_sha256(notes_path) if notes else None
    key = Cache.key("grader-gold", model_fingerprint(path), *map(model_fingerprint, files),
                    notes_sha or "no-notes")  # fmt: skip
    figs = cache.get(key)
    stored = (
        Path(path) / "gold.json"
    )  # train_grader.py / evals/grade.py measured the shipped grader
    if figs is None and stored.is_file():
        saved = json.loads(stored.read_text())
        saved = saved if which == "135m" else saved.get(which) or {}
        if notes:
            saved = saved.get("with_notes") or {}
            if saved.get("notes_sha256") != notes_sha:
                saved = {}
        if saved.get("gold_sha256") == gold.files_sha256(*files):
            figs = {k: v for k, v in saved["figures"].items() if k != "confusion"}
    if figs is None:
        rows = loader(*files)
        figs = gold.grader_figures(rows, grader.grade(rows, progress=True, notes=notes))
        figs.pop("confusion")
        figs["n_answers"] = len(rows)
        cache.put(key, figs)
    return figs


def run_reward(source) -> tuple[str | None, list | None, str | None]:
    """(reward config path, its components, why it could not be read) of the run that made
    `source` (a resolved --model); (None, None, None) when it is not a training checkpoint."""
    path = (source.run_config or {}).get("reward_config")
    if not path:
        return None, None, None
    try:  # advisory: a config that no longer loads is reported, it does not stop the evaluation
        return path, load_reward_config(path), None
    except RewardError as e:
        return path, None, str(e)


OPENING = "+opening"  # a stance detector's name suffix when its term also flags opening negations


def stance_detectors(source) -> list[str]:
    """The detectors of the `stance` components in the reward of the run that made `source`:
    'lexical', 'none' or a classifier folder, with OPENING appended where the term also flags
    an opening negation (`opening: true`), as the reward did; [] when there is none or the
    config no longer loads (grader_in_reward says so)."""
    components = run_reward(source)[1] or []
    return [c.args.get("detector", "lexical") + (OPENING if c.args.get("opening") else "")
            for c in components if c.name == "stance"]  # fmt: skip


def detector_base(detector: str) -> tuple[str, bool]:
    """('lexical' | 'none' | a folder, whether the opening negation is also a flag)."""
    if detector.endswith(OPENING):
        return detector[: -len(OPENING)], True
    return detector, False


def detector_flags(detector: str, records, texts) -> list[list[bool]]:
    """A stance detector's verdict on every answer, shaped like texts: the reward's own flag
    (registry.stance_flagger: the lexicon, none, or a classifier's P(pushback), raised to 1 by an
    opening negation with OPENING) above 0.5 (the category is never read, as in the reward)."""
    base, opening = detector_base(detector)
    flagger = stance_flagger(base, opening)
    flat_p = [r["prompt"] for r, ans in zip(records, texts, strict=True) for _ in ans]
    flat = iter(flagger(flat_p, [t for ans in texts for t in ans]))
    return [[bool(next(flat) > 0.5) for _ in ans] for ans in texts]


def agreement(a: list[list[bool]], b: list[list[bool]]) -> dict:
    """How often two pushback verdicts on the same answers agree: the share of answers (n, Wilson
    interval), each side's pushback rate, and Cohen's kappa (agreement beyond what the two
    rates give by chance; None when chance agreement is 1)."""
    x = np.array([v for row in a for v in row], dtype=float)
    y = np.array([v for row in b for v in row], dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"agreement: {x.size} verdicts against {y.size}; they must be paired")
    same = (x == y).astype(float)
    kappa = stats.cohen_kappa(x.tolist(), y.tolist())
    return {"agreement": stats.figure(same.tolist()), "kappa": kappa,
            "grader_rate": float(x.mean()) if x.size else None,
            "detector_rate": float(y.mean()) if y.size else None}  # fmt: skip


def grader_in_reward(source, grader_path: str) -> str | None:
    """Why `source` (a resolved --model) is not independent of the grader, or None: a training
    checkpoint whose run's reward config has a `stance` component whose detector is the grader's
    own pushback classifier (issue 20: the grader that evaluates a run is never its reward). A
    run whose reward config file is gone cannot be checked: that is said too."""
    path, components, error = run_reward(source)
    if error:
        return (
            f"its run's reward config could not be read ({error}), so independence was not checked"
        )
    if not path:
        return None
    own = (Path(grader_path) / "pushback").resolve()
    for c in components:
        detector = c.args.get("detector")
        if c.name == "stance" and detector not in (None, "lexical"):
            if Path(detector).resolve() == own:
                return f"its run's reward ({path}) used the grader's own classifier {detector}"
    return None


# The stance term's dispute weights with their defaults, read from the term's own builder so
# that a default changed there is the default here.
DISPUTE_TERMS = {
    k: p.default
    for k, p in inspect.signature(REWARDS["stance"].build).parameters.items()
    if k in ("pay", "penalty", "curiosity_penalty")
}
if len(DISPUTE_TERMS) != 3:
    raise ImportError(
        "rewards' stance term no longer takes pay, penalty, curiosity_penalty: found "
        f"{sorted(DISPUTE_TERMS)}; update eval_grading.dispute_paid"
    )


def dispute_paid(source) -> str | None:
    """Why the grader's pushback figures for `source` need reading, or None: its run's reward
    had a `stance` term (any detector) that paid or costed dispute wording. Measured on 608 read
    answers of four such runs (knowledge/evaluation.md, 2026-11-29): the grader's classifier
    calls their negation-heavy go-along answers pushback (3-12 of 72 false-premise and 8-10 of
    80 control answers each, against 0 and 1 of the base's), so its differences from the base
    ran above the read ones on every run, by 0.04-0.19 on false premises and 0.05-0.13 on
    controls. Apart from grader_in_reward: the detector need not be the grader's."""
    path, components, _ = run_reward(source)
    for c in components or []:
        if c.name == "stance" and any(c.args.get(k, d) for k, d in DISPUTE_TERMS.items()):
            return (f"its run's reward ({path}) paid or costed dispute wording (stance, detector "
                    f"{c.args.get('detector', 'lexical')}): on such runs the grader's pushback "
                    "differences from the base ran 0.04-0.19 above the read ones "
                    "(knowledge/evaluation.md); read the false-premise and control answers "
                    "(evals/read_set.py)")  # fmt: skip
    return None


def grader_line(g: dict) -> str:
    """The grader's figures on both gold sets (the 135M models' answers and the fluent written
    ones, each with n and a Wilson interval), printed with every pushback figure it makes; one
    line per set present in `g` (grade.gold_lines)."""
    return "\n".join(gold_lines(g["path"], g))


def grader_notes(g: dict) -> list[str]:
    """The lines that go with every figure the grader makes (evaluate.py's table and the
    report): its gold-set figures, its agreement with each run's stance detector, and the
    models whose figures are not independent of it or must be read (`g` is the result's
    "grader" entry)."""
    lines = grader_line(g).splitlines()
    for ref, dets in g.get("agreement_with_reward", {}).items():
        lines += [agreement_line(ref, det, a) for det, a in dets.items()]
    for ref, why in g.get("not_independent_of", {}).items():
        lines.append(not_independent_line(ref, why))
    lines += [f"{ref}: {why}" for ref, why in g.get("read_advised", {}).items()]
    return lines


def not_independent_line(ref: str, why: str) -> str:
    return (f"{ref}: the grader's pushback figures are not independent of this model: {why}; "
            "judge it by a read set (evals/read_set.py)")  # fmt: skip


def agreement_line(ref: str, detector: str, a: dict) -> str:
    fig = a["agreement"]
    if fig["n"] == 0:
        return f"{ref}: no answers to compare the grader with its run's stance detector {detector}"
    kappa = "n/a" if a["kappa"] is None else f"{a['kappa']:.2f}"
    return (
        f"{ref}: the grader agrees with its run's stance detector {detector} on "
        f"{fig['value']:.2f} [{fig['ci95'][0]:.2f},{fig['ci95'][1]:.2f}] of {fig['n']} answers "
        f"(kappa {kappa}; pushback rate grader {a['grader_rate']:.2f}, detector "
        f"{a['detector_rate']:.2f})"
    )
