"""Evaluate models side by side: did training make answers more curious, better at spotting
nonsense and scrutinizing claims, without making them contrarian, longer or duller?

`uv run python evaluate.py --model smollm2-135m --model runs/X/checkpoints/step_60 --prompts
data/eval.jsonl` answers the prompts with every model (greedy, or K samples at a temperature, a
seed) and reports per model and prompt category: each reward's mean score (rubric criteria, a reward
model), the pushback, broken and (curiosity) engagement rates from the grader (evals/grade.py,
printed with its figures on the gold set), answer length, diversity and degeneracy
(core/diversity.py) and the per-token KL to the base model (the first --model) on the model's own
answers; each with n and a 95% interval and, for later models, the paired difference from the base
(core/stats.py). Answers and scores are cached under --cache-dir so a second report is instant;
`--report DIR` writes Markdown with charts (evals/report.py), `--json` prints one object.
`evaluate()` is the in-training hook (train.py). No training here.
"""

import argparse
import dataclasses
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from core import backend, diversity, errors, flags, kernels, stats, strict_json
from core.jsonl import DataError, file_sha256, write_jsonl
from core.prompts import CATEGORIES, EVAL_NOTES, eval_subset, load_notes, load_prompts

import mlx.core as mx
import numpy as np
from tqdm import tqdm

from evals import report as eval_report
from evals.cache import Cache, model_fingerprint
from evals.grade import Grader
from evals.grading import (
    agreement,
    detector_base,
    detector_flags,
    dispute_paid,
    gold_figures,
    grade_answers,
    grader_in_reward,
    grader_notes,
    not_independent_line,
    stance_detectors,
)
from gwen import Gwen, sequence_hidden
from load_weights import MODEL_HELP, resolve
from rewards.pushback import pushes_back
from rewards.registry import RewardContext, needs_judge, parse_spec, rm_folder
from rewards.scorer import build_scorer
from rl.reference import starting_judge
from tasks import registry as tasks

DEFAULT_GRADER = "models/grader-smollm2-135m"
# the one error line of --pushback-model and --pushback-labels (flags.retired)
RETIRED_CLASSIFIER = (
    "the old pushback classifier's second opinion (classifier_pushback_rate) is gone; the grader "
    f"(--grader, default {DEFAULT_GRADER}) measures pushback, its gold-set figures beside every "
    "figure: drop the flag"
)


# ----------------------------------------------------------------------------------------------
# The command


@dataclass
class EvalConfig:
    models: list[str]
    prompts: list[str]
    limit: int | None = None
    samples: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    max_new_tokens: int = 128
    rewards: list[str] = field(default_factory=lambda: ["rubric"])
    judge_model: str | None = None
    grader: str | None = DEFAULT_GRADER
    notes: str | None = EVAL_NOTES  # the grader's reference notes (grade.reference_check)
    kl: bool = True
    cache_dir: str = "runs/eval_cache"
    batch_size: int = 16
    dtype: str | None = None  # --dtype (None: each model's own, backend.default_dtype)

    def __post_init__(self):
        if not self.models or not self.prompts:
            raise ValueError("give at least one --model and one --prompts file")
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"a model is given twice: {self.models}")
        if self.samples < 1 or self.max_new_tokens < 1 or self.batch_size < 1:
            raise ValueError("--samples, --max-new-tokens and --batch-size must be >= 1")
        if self.samples > 1 and self.temperature == 0:
            raise ValueError("--samples > 1 needs --temperature > 0 (greedy samples are equal)")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit {self.limit}: must be >= 1")
        for spec in self.rewards:
            parse_spec(spec)
        backend.parse_dtype(self.dtype)


def load_prompt_files(paths: list[str]) -> list[dict]:
    """Every record of every file, validated in full before anything runs (DataError names the
    file and the line); ids must be unique across files."""
    records, seen = [], {}
    for path in paths:
        for r in load_prompts(path):
            if r["id"] in seen:
                raise DataError(f"{path}: id {r['id']!r} also appears in {seen[r['id']]}")
            seen[r["id"]] = path
            records.append(r)
    return records


def generate(gwen: Gwen, records: list[dict], cfg: EvalConfig, desc: str) -> dict:
    """{"texts": K answers per record, "tokens": their token counts, "finished": ended with EOS}."""
    texts, tokens, finished = [], [], []
    bar = tqdm(total=len(records), desc=f"answers {desc}", unit="prompt", leave=False)
    for i in range(0, len(records), cfg.batch_size):
        chunk = records[i : i + cfg.batch_size]
        s = gwen.sample_group(
            [r["prompt"] for r in chunk],
            cfg.samples,
            cfg.max_new_tokens,
            cfg.temperature,
            cfg.top_p,
            seed=cfg.seed + i,
        )
        lengths, k = s.lengths.tolist(), cfg.samples
        for j in range(len(chunk)):
            texts.append(s.texts[j * k : (j + 1) * k])
            tokens.append(lengths[j * k : (j + 1) * k])
            finished.append([bool(x) for x in s.finished[j * k : (j + 1) * k]])
        bar.update(len(chunk))
    bar.close()
    return {"texts": texts, "tokens": tokens, "finished": finished}


def per_answer_kl(gwen: Gwen, base: Gwen, records, texts, batch: int = 8) -> list[list[float]]:
    """Mean per-token KL(model || base) over each answer's tokens (exact, whole vocabulary),
    both models reading the model's own answer after the same chat prompt; batches of records
    with their K answers right-padded (padding masked out)."""
    k = len(texts[0])
    out = []
    for i in range(0, len(records), batch):
        recs, answers = records[i : i + batch], texts[i : i + batch]
        prompt_tokens, prompt_pad = gwen.left_pad([gwen.chat_tokens(r["prompt"]) for r in recs])
        ids = [
            gwen.tokenizer.encode(a, add_special_tokens=False) or [gwen.pad_id]
            for group in answers
            for a in group
        ]
        width = max(len(x) for x in ids)
        comp = mx.array([x + [gwen.pad_id] * (width - len(x)) for x in ids])  # (B*K, T)
        mask = mx.arange(width)[None, :] < mx.array([len(x) for x in ids])[:, None]
        hp = sequence_hidden(gwen.model, prompt_tokens, prompt_pad, comp, k)
        hq = sequence_hidden(base.model, prompt_tokens, prompt_pad, comp, k)
        kl = kernels.full_kl(hp, gwen.model.lm_head_weight(), hq, base.model.lm_head_weight())
        per = np.array(kernels.masked_mean(kl, mask, axis=1)).tolist()
        out += [per[j * k : (j + 1) * k] for j in range(len(recs))]
    return out


def score_rewards(spec, ctx, records, texts) -> dict:
    """Mean over samples per record of each reward's value and its parts: {key: [per record]}."""
    scorer = build_scorer(parse_spec(spec), ctx)
    flat_r = [r for r, ans in zip(records, texts, strict=True) for _ in ans]
    flat_t = [t for ans in texts for t in ans]
    s = scorer([r["prompt"] for r in flat_r], flat_t, [r["category"] for r in flat_r])
    out = {spec: s.values.tolist()}
    for i, d in enumerate(s.details or []):
        for k, v in d.items():
            if k != "reward":
                out.setdefault(f"{spec}/{k}", [None] * len(flat_t))[i] = v
    k = len(texts[0])
    return {
        key: [stats.finite_mean(vals[j * k : (j + 1) * k]) for j in range(len(texts))]
        for key, vals in out.items()
    }


def per_record(answers: dict) -> dict:
    """Figures of each record's answers (mean over its samples): {key: [per record]}, the unit
    the intervals resample (knowledge/evaluation.md, "Uncertainty")."""
    out = {k: [] for k in ("length_words_mean", "length_tokens_mean", "truncation_rate",
                           "lexical_pushback_rate", "repetition")}  # fmt: skip
    for texts, toks, fin in zip(
        answers["texts"], answers["tokens"], answers["finished"], strict=True
    ):
        out["length_words_mean"].append(float(np.mean([len(diversity.words(t)) for t in texts])))
        out["length_tokens_mean"].append(float(np.mean(toks)))
        out["truncation_rate"].append(1.0 - float(np.mean(fin)))
        out["lexical_pushback_rate"].append(float(np.mean([pushes_back(t) for t in texts])))
        out["repetition"].append(float(np.mean([diversity.repetition_rate(t) for t in texts])))
    if all(len(t) > 1 for t in answers["texts"]):
        out["self_similarity"] = [diversity.self_similarity(t) for t in answers["texts"]]
    return out


# Figures computed over a category's whole set of answers (no per-prompt value to resample):
# printed without an interval, marked as such in the JSON.
SET_LEVEL = (
    "distinct_1",
    "distinct_2",
    "cross_prompt_similarity",
    "unique_fraction",
    "top_opener_share",
)


def summarize(records, answers: dict, extra: dict) -> tuple[dict, dict]:
    """Per category and overall: means of every per-record figure plus lengths and diversity,
    and each figure with its n and 95% interval over the category's prompts (stats.figure)."""
    out, figs = {}, {}
    rows = per_record(answers) | extra
    cats = [c for c in CATEGORIES if any(r["category"] == c for r in records)]
    for cat in [*cats, "overall"]:
        idx = [i for i, r in enumerate(records) if cat == "overall" or r["category"] == cat]
        texts = [answers["texts"][i] for i in idx]
        flat = [t for g in texts for t in g]
        words = [len(diversity.words(t)) for t in flat]
        toks = [n for i in idx for n in answers["tokens"][i]]
        m = {
            "n_prompts": len(idx),
            "length_words_median": float(np.median(words)),
            "length_words_mean": float(np.mean(words)),
            "length_tokens_mean": float(np.mean(toks)),
            "truncation_rate": 1.0
            - float(np.mean([f for i in idx for f in answers["finished"][i]])),
            "lexical_pushback_rate": float(np.mean([pushes_back(t) for t in flat])),
            **diversity.summary(texts),
            "top_opener": diversity.top_opener(flat)[0],
        }
        for key, values in extra.items():
            m[key] = stats.finite_mean([values[i] for i in idx])
        f = {}
        for key, values in rows.items():
            sub = [np.nan if values[i] is None else values[i] for i in idx]
            f[key] = stats.figure(sub) | {"n_unit": "prompts"}
        lo, hi = stats.bootstrap_stat(words, np.median) if words else (None, None)
        f["length_words_median"] = {"value": m["length_words_median"], "n": len(words),
                                    "ci95": None if lo is None else [lo, hi],
                                    "ci_method": "bootstrap", "n_unit": "answers"}  # fmt: skip
        for key in SET_LEVEL:
            f[key] = {"value": _finite(m[key]), "n": len(flat), "ci95": None,
                      "ci_method": None, "n_unit": "answers (set-level: no interval)"}  # fmt: skip
        out[cat], figs[cat] = m, f
    return out, figs


def _finite(x):
    return float(x) if x is not None and math.isfinite(x) else None


def compare_to_base(records, rows: dict[str, dict], base: str) -> dict:
    """{model: {category: {key: stats.paired_diff}}} of each later model against the base,
    paired by prompt (every model answers the same records)."""
    cats = [c for c in CATEGORIES if any(r["category"] == c for r in records)]
    out = {}
    for ref, vals in rows.items():
        if ref == base:
            continue
        out[ref] = {}
        for cat in [*cats, "overall"]:
            idx = [i for i, r in enumerate(records) if cat == "overall" or r["category"] == cat]
            out[ref][cat] = {}
            for key, values in vals.items():
                if key not in rows[base]:
                    continue
                a = [np.nan if rows[base][key][i] is None else rows[base][key][i] for i in idx]
                b = [np.nan if values[i] is None else values[i] for i in idx]
                out[ref][cat][key] = stats.paired_diff(a, b)
    return out


def evaluate_models(cfg: EvalConfig) -> dict:
    records = eval_subset(load_prompt_files(cfg.prompts), cfg.limit)  # bad files fail first
    cache = Cache(cfg.cache_dir)
    # a missing model (or an adapter checkpoint's base) fails now, before any model loads
    sources = {ref: resolve(ref) for ref in cfg.models}
    grader = grader_gold = grader_fluent = None
    notes = load_notes(cfg.notes) if cfg.grader and cfg.notes else None
    if cfg.grader:
        grader = Grader.load(cfg.grader)
        grader_gold = gold_figures(grader, cfg.grader, cache, notes, cfg.notes)
        grader_fluent = gold_figures(grader, cfg.grader, cache, notes, cfg.notes, "fluent")
    not_independent, read_advised = {}, {}
    for ref, src in sources.items() if cfg.grader else ():
        if why := grader_in_reward(src, cfg.grader):
            not_independent[ref] = why
            print(f"warning: {not_independent_line(ref, why)}", file=sys.stderr)
        elif why := dispute_paid(src):
            read_advised[ref] = why
            print(f"warning: {ref}: {why}", file=sys.stderr)
    settings = {
        k: v
        for k, v in dataclasses.asdict(cfg).items()
        if k in ("samples", "temperature", "top_p", "seed", "max_new_tokens")
    }
    prompt_key = [(r["id"], r["prompt"]) for r in records]
    base_ref = cfg.models[0]
    dtype = backend.parse_dtype(cfg.dtype)
    base = Gwen.load(sources[base_ref], dtype)
    weights_dtype = str(base.model.model.norm.weight.dtype).removeprefix("mlx.core.")
    if weights_dtype != "float32":  # half-precision answers are not float32's: cached apart
        settings["dtype"] = weights_dtype
    # the judge: --judge-model, else the base model's starting weights (rl/reference.py)
    start = sources[base_ref].start
    judge = cfg.judge_model or start or base_ref
    judge_cache = []

    def load_judge(ref, _dtype=None):
        return base if ref == base_ref else Gwen.load(ref, dtype)

    def judge_factory():
        if not judge_cache:
            judge_cache.append(
                starting_judge(base, judge_model=cfg.judge_model, start=start, load=load_judge)
            )
        return judge_cache[0]

    results, agree = {}, {}
    for ref in cfg.models:
        fp = model_fingerprint(ref)
        gwen = base if ref == base_ref else Gwen.load(sources[ref], dtype)
        akey = Cache.key("answers", fp, prompt_key, settings)
        answers = cache.get(akey)
        if answers is None:
            answers = generate(gwen, records, cfg, Path(ref).name)
            cache.put(akey, answers)
        extra = {}
        ctx = RewardContext(judge_factory, gwen.tokenizer, policy=base_ref)
        for spec in cfg.rewards:
            skey = Cache.key(
                "scores",
                akey,
                spec,
                judge if needs_judge(parse_spec(spec)) else None,
            )
            scored = cache.get(skey)
            if scored is None:
                scored = score_rewards(spec, ctx, records, answers["texts"])
                cache.put(skey, scored)
            extra |= {f"reward/{k}": v for k, v in scored.items()}
        if grader is not None:
            gkey = Cache.key("graded-flags", akey, model_fingerprint(cfg.grader),
                             file_sha256(cfg.notes) if notes else "no-notes")  # fmt: skip
            graded = cache.get(gkey)
            if graded is None:
                graded = grade_answers(grader, records, answers["texts"], notes)
                cache.put(gkey, graded)
            flags = graded["pushback_flags"]
            extra |= {k: v for k, v in graded.items() if k != "pushback_flags"}
            for det in stance_detectors(sources[ref]):  # issue 20 item 6: reported beside
                flagger, opening = detector_base(det)  # not `base`: that is the KL's model
                if flagger not in ("lexical", "none"):
                    flagger = model_fingerprint(str(rm_folder(flagger)))
                dkey = Cache.key("detector", akey, opening, flagger)
                dflags = cache.get(dkey)
                if dflags is None:
                    dflags = detector_flags(det, records, answers["texts"])
                    cache.put(dkey, dflags)
                agree.setdefault(ref, {})[det] = agreement(flags, dflags)
        if cfg.kl and ref != base_ref:
            kkey = Cache.key("kl", akey, model_fingerprint(base_ref))
            kl = cache.get(kkey)
            if kl is None:
                per_answer = per_answer_kl(gwen, base, records, answers["texts"])
                kl = [stats.finite_mean(x) for x in per_answer]
                cache.put(kkey, kl)
            extra["kl_to_base"] = kl
        by_category, figures = summarize(records, answers, extra)
        results[ref] = {
            "by_category": by_category,
            "figures": figures,
            "rows": per_record(answers) | extra,
            "answers": answers["texts"],
        }
    return {
        "models": cfg.models,
        "prompts": cfg.prompts,
        "records": [
            {"id": r["id"], "category": r["category"], "prompt": r["prompt"]} for r in records
        ],
        "settings": settings,
        "rewards": cfg.rewards,
        "judge_model": judge,
        "grader": None
        if grader is None
        else {
            "path": cfg.grader,
            "gold": grader_gold,
            "gold_fluent": grader_fluent,  # the fluent gold set's, beside the 135M set's
            "validation": grader.metrics["validation"],
            "not_independent_of": not_independent,
            # runs paid for dispute wording: the grader's pushback figures need reading
            "read_advised": read_advised,
            # the grader's pushback verdicts against each run's own stance detector
            "agreement_with_reward": agree,
        },
        "results": {ref: res["by_category"] for ref, res in results.items()},
        # every figure with its n and 95% interval; later models' paired differences from the
        # base (knowledge/evaluation.md, "Uncertainty")
        "figures": {ref: res["figures"] for ref, res in results.items()},
        "vs_base": compare_to_base(
            records, {ref: res["rows"] for ref, res in results.items()}, base_ref
        ),
        "answers": {ref: res["answers"] for ref, res in results.items()},
    }


HEADLINE = (
    "pushback_rate",
    "broken_rate",
    "engagement_rate",
    "lexical_pushback_rate",
    "length_words_median",
    "distinct_2",
    "top_opener_share",
    "repetition",
    "self_similarity",
    "kl_to_base",
)


def to_json(result: dict) -> str:
    return strict_json.dumps(result)  # NaN (no figure) is null


def table(result: dict) -> str:
    """A plain-text table per category: metric rows, one column per model; each figure with
    its 95% interval, n in the category header (prompts), later models' difference from the
    base marked `*` (interval excludes 0) or `n.s.` (contains 0)."""
    models = result["models"]
    names = [Path(m).name if "/" in m else m for m in models]
    figures, vs = result["figures"], result.get("vs_base", {})
    lines = []
    if result.get("grader"):
        lines += grader_notes(result["grader"])
    lines.append("value [95% interval]; later models: difference from the first, * = interval "
                 "excludes 0, n.s. = contains 0")  # fmt: skip
    width = 34
    for cat in result["results"][models[0]]:
        rows = [k for k in result["results"][models[0]][cat] if k.startswith("reward/")]
        rows += [k for k in HEADLINE if k in result["results"][models[0]][cat]]
        lines.append(f"\n[{cat}] n={result['results'][models[0]][cat]['n_prompts']} prompts")
        lines.append(f"{'metric':<36}" + "".join(f"{n[: width - 2]:>{width}}" for n in names))
        for key in rows:
            cells = [
                stats.cell(figures[m][cat].get(key), vs.get(m, {}).get(cat, {}).get(key))
                for m in models
            ]
            lines.append(f"{key[:36]:<36}" + "".join(f"{c:>{width}}" for c in cells))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description="Evaluate models side by side on prompt sets."
    )
    p.add_argument(
        "--model",
        action="append",
        required=True,
        help=f"a model (repeat; the first is the base for KL): {MODEL_HELP}",
    )
    p.add_argument(
        "--prompts",
        action="append",
        required=True,
        help="a prompt file (repeat): JSONL with id, category, prompt, source",
    )
    p.add_argument(
        "--limit", type=int, default=None, help="first N prompts, round-robin over categories"
    )
    p.add_argument(
        "--samples", type=int, default=1, help="answers per prompt (>1 needs a temperature)"
    )
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus mass")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--max-new-tokens", type=int, default=128, help="answer length cap")
    p.add_argument(
        "--reward",
        action="append",
        default=None,
        help="a reward spec to score with (repeat; default: train.py's default and rubric)",
    )
    p.add_argument(
        "--judge-model",
        default=None,
        help="judge for rubric rewards (default: the first model's starting weights)",
    )
    p.add_argument(
        "--grader",
        default=DEFAULT_GRADER,
        help="the pushback grader folder (train_grader.py), or 'none'",
    )
    p.add_argument(
        "--notes",
        default=EVAL_NOTES,
        help="reference notes for the grader (what is false or nonsensical in a prompt, and "
        "phrases that state it), or 'none' for the grader's model alone",
    )
    for old in ("--pushback-model", "--pushback-labels"):  # the old classifier's second opinion
        flags.retired(p, old, RETIRED_CLASSIFIER)
    p.add_argument("--no-kl", action="store_true", help="skip the KL to the base model")
    p.add_argument(
        "--cache-dir", default="runs/eval_cache", help="answer and score cache ('none': off)"
    )
    p.add_argument("--report", metavar="DIR", help="write DIR/report.md with charts and samples")
    p.add_argument(
        "--answers-out",
        metavar="FILE",
        help="write every answer as JSONL (model, id, category, prompt, sample, answer) for "
        "evals/read_set.py",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return flags.add_dtype(p)


def write_answers(result: dict, path: str) -> Path:
    """Every model's answers, one JSON line each (model, id, category, prompt, sample, answer),
    written atomically: the input of evals/read_set.py's blind sample."""
    rows = (
        {"model": model, "id": rec["id"], "category": rec["category"], "prompt": rec["prompt"],
         "sample": k, "answer": answer}
        for model, texts in result["answers"].items()
        for rec, answers in zip(result["records"], texts, strict=True)
        for k, answer in enumerate(answers)
    )  # fmt: skip
    return write_jsonl(rows, path)


def default_rewards() -> list[str]:
    """The values task's default reward (tasks.default_reward), and the rubric beside it."""
    spec = tasks.default_reward("values")
    return [spec] if spec == "rubric" else [spec, "rubric"]


@errors.cli
def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    with errors.as_user_error(ValueError):  # the settings (EvalConfig, reward specs)
        cfg = EvalConfig(
            models=a.model,
            prompts=a.prompts,
            limit=a.limit,
            samples=a.samples,
            temperature=a.temperature,
            top_p=a.top_p,
            seed=a.seed,
            max_new_tokens=a.max_new_tokens,
            rewards=a.reward or default_rewards(),
            judge_model=a.judge_model,
            grader=None if a.grader == "none" else a.grader,
            notes=None if a.notes == "none" else a.notes,
            kl=not a.no_kl,
            cache_dir=None if a.cache_dir == "none" else a.cache_dir,
            dtype=a.dtype,
        )
    backend.announce()
    result = evaluate_models(cfg)
    if a.report:
        print(f"report: {eval_report.write(result, Path(a.report))}", file=sys.stderr)
    if a.answers_out:
        print(f"answers: {write_answers(result, a.answers_out)}", file=sys.stderr)
    if a.json:
        print(to_json({k: v for k, v in result.items() if k != "answers"}))
    else:
        print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
