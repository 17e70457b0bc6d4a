"""Render an evaluate.py result as a page people would rather look at than read.

`write(result, out_dir)` writes out_dir/report.md: the settings, the grader's gold-set figures and
warnings (eval_grading.grader_notes), one table per prompt category (metric rows, a column per
model, the change from the base model), grouped bar charts (PNG: one per metric, categories on the x
axis, a bar per model) and, per category, a few prompts with every model's answer side by side. It
reads the result dict only; it computes nothing about models.
"""

from pathlib import Path

from core.stats import cell

import numpy as np

from evals.grading import grader_notes

CHART_METRICS = (
    "pushback_rate",
    "length_words_median",
    "distinct_2",
    "self_similarity",
    "kl_to_base",
)
SAMPLES_PER_CATEGORY = 3


def short(ref: str) -> str:
    """A model reference as a column title: checkpoint folders keep their run and step."""
    parts = Path(ref).parts
    if "checkpoints" in parts:
        i = parts.index("checkpoints")
        return f"{parts[i - 1]}/{parts[i + 1]}" if i > 0 and i + 1 < len(parts) else ref
    return ref


def _metrics(result: dict) -> list[str]:
    first = result["results"][result["models"][0]]
    keys = next(iter(first.values())).keys()
    rewards = [k for k in keys if k.startswith("reward/")]
    return [*rewards, *(k for k in CHART_METRICS if k in keys), "repetition", "unique_fraction"]


def _number(v) -> float:
    return float(v) if isinstance(v, int | float) else float("nan")


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _table(result: dict, cat: str) -> list[str]:
    """Each figure as value [95% interval]; later models add their paired difference from the
    base, * when its interval excludes 0, n.s. when it contains 0 (stats.cell)."""
    models = result["models"]
    n = result["results"][models[0]][cat]["n_prompts"]
    head = [f"n = {n} prompts. Value [95% interval]; (difference from the base: * its interval "
            "excludes 0, n.s. contains 0).", ""]  # fmt: skip
    head.append("| metric | " + " | ".join(short(m) for m in models) + " |")
    head.append("|---" * (len(models) + 1) + "|")
    rows = []
    for key in _metrics(result):
        cells = []
        for m in models:
            fig = result["figures"][m][cat].get(key)
            diff = result["vs_base"].get(m, {}).get(cat, {}).get(key)
            cells.append(cell(fig, diff) if fig else _fmt(result["results"][m][cat].get(key)))
        rows.append(f"| {key} | " + " | ".join(cells) + " |")
    return head + rows


def _chart(result: dict, key: str, path: Path) -> bool:
    # start-up: matplotlib only for a chart; Agg through Figure.savefig, no pyplot state
    from matplotlib.figure import Figure

    models = result["models"]
    cats = [c for c in result["results"][models[0]] if c != "overall"]
    values = np.array(
        [[_number(result["results"][m][c].get(key)) for c in cats] for m in models], dtype=float
    )
    if np.isnan(values).all():
        return False
    fig = Figure(figsize=(1.6 + 1.3 * len(cats), 3.2), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(models)
    x = np.arange(len(cats))
    for i, m in enumerate(models):  # error bars: each figure's 95% interval
        figs = [result["figures"][m][c].get(key) or {} for c in cats]
        err = np.array(
            [
                [v - f["ci95"][0], f["ci95"][1] - v] if f.get("ci95") else [0.0, 0.0]
                for v, f in zip(values[i], figs, strict=True)
            ]  # fmt: skip
        ).T
        err = np.where(np.isfinite(err), np.maximum(err, 0.0), 0.0)
        ax.bar(x + i * width - 0.4 + width / 2, values[i], width, yerr=err, capsize=2,
               label=short(m))  # fmt: skip
    ax.set_xticks(x, cats)
    ax.set_title(key)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    fig.savefig(path, dpi=100)
    return True


def _samples(result: dict, cat: str) -> list[str]:
    models = result["models"]
    idx = [i for i, r in enumerate(result["records"]) if r["category"] == cat]
    lines = []
    for i in idx[:SAMPLES_PER_CATEGORY]:
        lines.append(f"**Prompt** ({result['records'][i]['id']}): {result['records'][i]['prompt']}")
        lines.append("")
        for m in models:
            answer = result["answers"][m][i][0].strip().replace("\n", " ")
            lines.append(f"- *{short(m)}*: {answer}")
        lines.append("")
    return lines


def write(result: dict, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# Evaluation report", ""]
    s = result["settings"]
    lines.append(
        f"Models: {', '.join(f'`{m}`' for m in result['models'])} (the first is the base: KL "
        f"and the changes in brackets are against it). Prompts: "
        f"{', '.join(result['prompts'])}, {len(result['records'])} used. Answers: "
        f"{s['samples']} per prompt, temperature {s['temperature']}, top-p {s['top_p']}, "
        f"seed {s['seed']}, at most {s['max_new_tokens']} tokens. Rewards: "
        f"{', '.join(result['rewards'])} (rubric judged by `{result['judge_model']}`)."
    )
    if result.get("grader"):
        lines += ["", "The grader:", "", *(f"- {line}" for line in grader_notes(result["grader"]))]
    lines.append("")
    for key in _metrics(result):
        name = key.replace("/", "_").replace(":", "_")
        if _chart(result, key, out_dir / f"{name}.png"):
            lines.append(f"![{key}]({name}.png)")
    for cat in result["results"][result["models"][0]]:
        lines += ["", f"## {cat}", "", *_table(result, cat)]
        if cat != "overall":
            lines += ["", "### Sample answers", "", *_samples(result, cat)]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
