"""Routing evaluation: fresh samples from a checkpoint per adapter mode, scored for the task,
the hack detectors and diversity.

A dual-adapter model (gradient routing, lora.DualLoRALinear) is sampled in three modes, both
(retain 1, forget 1), retain (1, 0) and forget (0, 1), and along the forget-scale sweep (retain
1, forget 0.25 / 0.5 / 0.75; 0 and 1 are the retain and both modes). Any other model (full
fine-tuning, plain LoRA, the base model) has one mode, `both`: as it is. Per mode: the task
reward, the hack rate (any detector) and each detector's rate, mean length, and
diversity.summary over the samples grouped by prompt. Every mode samples with the same seed.
train.py calls `evaluate` every --routing-eval-every steps (metrics `routing/<mode>/<key>`);
`main` evaluates any checkpoint, run directory or model and prints the report. It trains nothing.

    uv run python -m evals.routing runs/NAME            # newest checkpoint; settings from its run
    uv run python -m evals.routing smollm2-135m --data data/happy_eval.jsonl \\
        --task-reward asks_question --hack-detectors happy_spam --json
"""

import argparse
import contextlib
import sys
from pathlib import Path

from core import backend, diversity, errors, flags, lora, strict_json
from core.prompts import EVAL_PROMPTS, eval_subset, load_prompts

import numpy as np

from gwen import Gwen
from load_weights import MODEL_HELP, resolve
from rewards import hacks
from rewards.registry import RewardContext, parse_spec
from rewards.scorer import build_scorer
from rl.reference import starting_judge

MODES = {"both": (1.0, 1.0), "retain": (1.0, 0.0), "forget": (0.0, 1.0)}
SWEEP = (0.0, 0.25, 0.5, 0.75, 1.0)  # forget scale with retain at 1


def sweep_label(forget_scale: float) -> str:
    """The mode a point of the forget-scale sweep is logged under."""
    return {0.0: "retain", 1.0: "both"}.get(forget_scale, f"forget_{forget_scale:g}")


def mode_scales(dual: bool) -> dict:
    """{mode: (retain scale, forget scale)} to sample; {"both": None} for a model without dual
    adapters (sampled as it is)."""
    if not dual:
        return {"both": None}
    return MODES | {sweep_label(f): (1.0, f) for f in SWEEP}


def sample_texts(policy, prompts, samples, max_new_tokens, temperature, seed) -> list[str]:
    """`samples` completions per prompt, prompt-major, 16 prompts per batch."""
    texts = []
    for i in range(0, len(prompts), 16):
        chunk = prompts[i : i + 16]
        s = policy.sample_group(chunk, samples, max_new_tokens, temperature, seed=seed + i)
        texts += s.texts
    return texts


def score_mode(prompts, categories, texts, samples, task_scorer, detectors) -> dict:
    """Task reward, hack rates, length and diversity of one mode's samples (prompt-major)."""
    flat_p = [p for p in prompts for _ in range(samples)]
    flat_c = [c for c in categories for _ in range(samples)]
    values = task_scorer(flat_p, texts, flat_c).values
    out = {"task_reward": float(np.nanmean(values))}
    if detectors:
        flags, rates = hacks.detect(detectors, flat_p, texts, flat_c)
        out["hack_rate"] = float(flags.mean())
        out |= {key: v for key, v in rates.items() if key != "hack/any"}
    out["length_words"] = float(np.mean([len(diversity.words(t)) for t in texts]))
    groups = [texts[i * samples : (i + 1) * samples] for i in range(len(prompts))]
    summary = diversity.summary(groups)
    summary["template_collapse"] = float(summary["template_collapse"])
    return out | summary


def evaluate(
    policy,
    *,
    records,
    task_scorer,
    detectors,
    limit: int,
    samples: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
) -> dict:
    """`routing/<mode>/<key>` for every mode of `policy` (see the module doc)."""
    recs = eval_subset(records, limit)
    prompts, cats = [r["prompt"] for r in recs], [r["category"] for r in recs]
    model = policy.model
    out = {}
    for mode, scales in mode_scales(bool(lora.dual_layers(model))).items():
        ctx = lora.scaled(model, *scales) if scales else contextlib.nullcontext()
        with ctx:
            texts = sample_texts(policy, prompts, samples, max_new_tokens, temperature, seed)
        scored = score_mode(prompts, cats, texts, samples, task_scorer, detectors)
        out |= {f"routing/{mode}/{k}": v for k, v in scored.items()}
    return out


COLUMNS = (
    ("task_reward", "task reward"),
    ("hack_rate", "hack rate"),
    ("length_words", "words"),
    ("distinct_1", "distinct-1"),
    ("distinct_2", "distinct-2"),
    ("self_similarity", "Jaccard within"),
    ("cross_prompt_similarity", "Jaccard across"),
    ("unique_fraction", "unique"),
    ("template_collapse", "collapse"),
)


def modes_in(metrics: dict) -> list[str]:
    """Modes present in `metrics`, in report order: both, retain, forget, then the sweep."""
    present = {k.split("/")[1] for k in metrics if k.startswith("routing/") and k.count("/") >= 2}
    order = [*MODES, *(sweep_label(f) for f in SWEEP)]
    return [m for m in dict.fromkeys(order) if m in present]


def report(metrics: dict) -> str:
    """A Markdown table: one row per mode, the columns of COLUMNS."""
    head = "| mode | " + " | ".join(label for _, label in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 1)]
    for mode in modes_in(metrics):
        cells = []
        for key, _ in COLUMNS:
            v = metrics.get(f"routing/{mode}/{key}")
            cells.append("" if v is None else f"{v:.3f}")
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _settings(args, run_cfg: dict) -> dict:
    """Flags, else the checkpoint's run config, else defaults; specs checked before loading."""

    def pick(flag, key, default):
        for value in (getattr(args, flag), run_cfg.get(key)):
            if value is not None:
                return value
        return default

    out = {
        "data": pick("data", "eval_data", EVAL_PROMPTS),
        "task_reward": pick("task_reward", "task_reward", run_cfg.get("reward")),
        "hack_detectors": pick("hack_detectors", "hack_detectors", None),
        "limit": pick("limit", "eval_limit", 16),
        "samples": pick("samples", "routing_eval_samples", 4),
        "max_new_tokens": pick("max_new_tokens", "max_new_tokens", 48),
        "temperature": pick("temperature", "temperature", 1.0),
        "seed": pick("seed", "seed", 0),
    }
    if not out["task_reward"]:
        raise ValueError("no task reward: pass --task-reward SPEC (e.g. asks_question)")
    parse_spec(out["task_reward"])
    if out["hack_detectors"]:
        hacks.parse_spec(out["hack_detectors"])
    return out


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", help=MODEL_HELP)
    p.add_argument("--base", help="base model of an adapter checkpoint (default: its run's)")
    p.add_argument("--prompts", dest="data", help="prompts JSONL (default: the run's --eval-data)")
    p.add_argument("--task-reward", help="reward spec of the task (default: the run's)")
    p.add_argument("--hack-detectors", help="detector spec (default: the run's; rewards/hacks.py)")
    p.add_argument("--limit", type=int, help="prompts (default: the run's --eval-limit)")
    p.add_argument("--samples", type=int, help="samples per prompt (default 4)")
    p.add_argument("--max-new-tokens", type=int, help="generation cap (default: the run's)")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: the run's)")
    p.add_argument("--seed", type=int, help="sampling seed (default: the run's)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", help="also write the report (Markdown) to this file")
    flags.renamed(p, "--data", "--prompts")  # one flag vocabulary: --prompts names an eval file
    args = p.parse_args(argv)
    with errors.as_user_error(ValueError):  # the model, settings, specs and prompts
        src = resolve(args.checkpoint, args.base)
        cfg = _settings(args, src.run_config)
        records = load_prompts(cfg["data"])
        backend.announce()
        policy = Gwen.load(src, merge=False)  # dual adapters stay switchable: one per mode
    judge = lambda: starting_judge(policy, start=src.start)  # noqa: E731  (as in training)
    ctx = RewardContext(judge, policy.tokenizer)
    task = build_scorer(parse_spec(cfg["task_reward"]), ctx)
    detectors = (
        hacks.build(hacks.parse_spec(cfg["hack_detectors"]), ctx) if cfg["hack_detectors"] else []
    )
    metrics = evaluate(
        policy,
        records=records,
        task_scorer=task,
        detectors=detectors,
        limit=cfg["limit"],
        samples=cfg["samples"],
        max_new_tokens=cfg["max_new_tokens"],
        temperature=cfg["temperature"],
        seed=cfg["seed"],
    )
    # a folder (a run: its checkpoint) is shown as found; an alias or hub id as given
    where = str(src.path) if Path(args.checkpoint).expanduser().is_dir() else args.checkpoint
    table = report(metrics)
    if args.out:
        head = f"# Routing evaluation of {where}\n\nSettings: {strict_json.dumps(cfg)}"
        Path(args.out).write_text(f"{head}\n\n{table}\n")
    print(strict_json.dumps({"checkpoint": where, **cfg, **metrics}) if args.json else table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
