"""Quantize a policy or a reward model to 8 or 4 bits, write it as a folder, measure what was lost.

The quantization itself is core/quant.py's one rule (MLX affine, 8 or 4 bits, the transformer-block
Linears; the embedding / LM head stays in float). This command writes a policy's quantized copy
as a folder in mlx-lm's layout (quant.save_model), which load_weights reads back, so a quantized
folder loads anywhere a model path is accepted. A reward model becomes self-contained: its
quantized backbone inside its folder, and the head alone as its trained weights.

The CLI also measures the loss: for a policy, the exact KL(original || quantized) over the
vocabulary at every token of the original's own sampled answers to held-out prompts (mean, 95th
percentile); for a reward model, pairwise accuracy before and after; for both, size on disk,
peak memory and tokens/s. It is not a converter from other formats and it does not train.

  uv run python quantize.py --model smollm2-135m --bits 8 --json
  uv run python quantize.py --reward-model models/rm --bits 8 --pairs data/rm_pairs.jsonl
"""

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from core import backend

# isort: split
from core import errors, flags, stats, strict_json
from core.kernels import full_kl
from core.prompts import (
    EVAL_PROMPTS,
    RM_PAIRS,
    SPLITS,
    eval_subset,
    load_pairs,
    load_prompts,
    select_split,
)
from core.quant import (
    block_linears,
    check_settings,
    copy_model,
    dequantized_copy,
    quantized_layers,
    save_model,
)

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten
from tqdm import tqdm

from gwen import Gwen, sequence_hidden, sequence_logprobs
from load_weights import MODEL_HELP, LoadError, resolve
from rewards import reward_model

REPORT_FILE = "quantize_report.json"


# ----------------------------------------------------------------------------------------------
# Writing a quantized policy or reward model.


def quantize_policy(original, out, bits: int, group_size: int) -> int:
    """Write `original` (a Gwen) quantized to folder `out`; return the quantized Linear count."""
    q = copy_model(original.model, bits, group_size)
    save_model(q, original.tokenizer, out)
    return len(quantized_layers(q))


def quantize_reward_model(rm, source, out, bits: int, group_size: int) -> int:
    """Write reward model `rm` as a self-contained folder `out`: its (merged) backbone quantized
    in BACKBONE_DIR, its head as the only trained weights; return the quantized Linear count."""
    backbone = copy_model(rm.backbone, bits, group_size)
    backbone.freeze()
    cfg = dataclasses.replace(rm.config, lora_rank=0, train_layers=0, head_only=True)
    qrm = reward_model.RewardModel(backbone, rm.tokenizer, cfg)
    qrm.score_head.weight, qrm.score_head.bias = rm.score_head.weight, rm.score_head.bias
    extra = {"quantization": {"bits": bits, "group_size": group_size}, "quantized_from": source}
    reward_model.save(
        qrm, out, extra, write_backbone=lambda folder: save_model(backbone, rm.tokenizer, folder)
    )
    return len(quantized_layers(backbone))


# ----------------------------------------------------------------------------------------------
# Measuring what was lost.


def folder_bytes(path) -> int:
    """Size on disk of a file, or of a folder's files (links followed; the report excluded)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and f.name != REPORT_FILE)


def param_bytes(module) -> int:
    return sum(v.nbytes for _, v in tree_flatten(module.parameters()))


def measuring_model(model):
    """The model the KL / accuracy passes run for a quantized `model`: on the CPU backend its
    dequantized twin (the same function in float32; MLX's CPU quantized matmul runs ~1-2
    GFLOP/s, so a held-out set would take an hour), elsewhere the model itself."""
    return dequantized_copy(model) if backend.backend_name() == "cpu" else model


def _memory_mark() -> int:
    """Reset MLX's peak-memory counter; return the memory allocated now (the phase's base)."""
    mx.reset_peak_memory()
    return mx.get_active_memory()


def policy_speed(load, prompts: list[str], new_tokens: int):
    """Load a policy (a Gwen) with `load()` and time a fixed job: greedy generation of exactly
    `new_tokens` tokens for every prompt in one batch, then the log-probs of those sequences as
    the KL reference computes them. Returns (gwen, stats, sample, log-probs); peak memory is
    counted from before the load."""
    base = _memory_mark()
    t0 = time.perf_counter()
    gwen = load()
    load_s = time.perf_counter() - t0
    gwen.sample_group(prompts[:1], 1, 2, temperature=0.0, stop_at_eos=False)  # warm-up
    t0 = time.perf_counter()
    s = gwen.sample_group(prompts, 1, new_tokens, temperature=0.0, stop_at_eos=False)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    lp = sequence_logprobs(gwen.model, s.prompt_tokens, s.prompt_pad, s.tokens, 1, 1.0)
    mx.eval(lp)
    fwd_s = time.perf_counter() - t0
    fwd_tokens = int(s.prompt_tokens.size - s.prompt_pad.sum().item()) + s.tokens.size
    stats = {
        "gen_tok_s": s.tokens.size / gen_s,
        "forward_tok_s": fwd_tokens / fwd_s,
        "peak_mem_bytes": mx.get_peak_memory() - base,
        "param_bytes": param_bytes(gwen.model),
        "load_s": load_s,
    }
    return gwen, stats, s, lp


def answer_kl(original, other, records, max_tokens, temperature, seed, batch) -> np.ndarray:
    """Exact KL(original || other) over the whole vocabulary at every token of the original's
    own answers, EOS included: per batch of prompts the original (a Gwen) samples one answer
    each (temperature, seed), both models read prompt + answer, kernels.full_kl compares them.
    Returns the per-token values (float32, one per answer token)."""
    values = []
    for i in tqdm(range(0, len(records), batch), desc="KL", unit="batch", leave=False):
        prompts = [r["prompt"] for r in records[i : i + batch]]
        batch_seed = int(np.random.SeedSequence([seed, i]).generate_state(1)[0])
        s = original.sample_group(prompts, 1, max_tokens, temperature, seed=batch_seed)
        h_p = sequence_hidden(original.model, s.prompt_tokens, s.prompt_pad, s.tokens, 1)
        h_q = sequence_hidden(other, s.prompt_tokens, s.prompt_pad, s.tokens, 1)
        kl = full_kl(h_p, original.model.lm_head_weight(), h_q, other.lm_head_weight())
        values.append(np.array(kl)[np.array(s.mask) > 0])
    return np.concatenate(values)


def kl_summary(values: np.ndarray) -> dict:
    return {
        "mean_kl": float(values.mean()),
        "p95_kl": float(np.percentile(values, 95)),
        "max_kl": float(values.max()),
        "kl_tokens": int(values.size),
    }


def measure_policy(a, records: list[dict], out: Path) -> dict:
    """Quantize the policy `a.model` into `out` and measure it against the original."""
    dtype = backend.parse_dtype(a.dtype)
    speed_prompts = [r["prompt"] for r in records[: a.speed_batch]]
    original, orig_stats, _, _ = policy_speed(
        lambda: Gwen.load(a.model, dtype), speed_prompts, a.speed_tokens
    )
    n_quantized = quantize_policy(original, out, a.bits, a.group_size)
    quant, quant_stats, s, lp = policy_speed(
        lambda: Gwen.load(str(out), dtype), speed_prompts, a.speed_tokens
    )
    twin = measuring_model(quant.model)
    lp_twin = sequence_logprobs(twin, s.prompt_tokens, s.prompt_pad, s.tokens, 1, 1.0)
    kl = answer_kl(original, twin, records, a.max_new_tokens, a.temperature, a.seed, a.batch)
    return {
        "kind": "policy",
        "quantized_linears": n_quantized,
        "block_linears": len(block_linears(original.model)),
        **kl_summary(kl),
        "answers": len(records),
        "data": a.data,
        "temperature": a.temperature,
        "seed": a.seed,
        "max_tokens": a.max_new_tokens,
        "kl_model": "dequantized twin" if twin is not quant.model else "quantized",
        "twin_max_logprob_diff": float(mx.abs(lp_twin - lp).max().item()),
        "original": orig_stats,
        "quantized": quant_stats,
    }


def pair_scores(rm, pairs: list[dict], desc: str | None = None, chunk: int = 32) -> np.ndarray:
    """(n, 2) float64 scores of each pair's better and worse answer, `chunk` pairs at a time
    (a progress bar named `desc` if given)."""
    out = []
    for i in tqdm(range(0, len(pairs), chunk), desc=desc, disable=desc is None, leave=False):
        part = pairs[i : i + chunk]
        n = len(part)
        prompts = [p["prompt"] for p in part] * 2
        responses = [p["better"] for p in part] + [p["worse"] for p in part]
        s = np.array(rm.score(prompts, responses, [p["category"] for p in part] * 2))
        out.append(np.stack([s[:n], s[n:]], axis=1))
    return np.concatenate(out)


def pair_accuracy(scores: np.ndarray) -> float:
    """(n, 2) scores (better, worse) -> the share of pairs ranked right, a tie counting half and
    a failed score as a miss (as train_rm's validation counts)."""
    return float(np.mean(stats.pair_credit(scores[:, 0], scores[:, 1], failed=0.0)))


def rm_speed(load, pairs: list[dict]):
    """Load a reward model with `load()` and time scoring both answers of `pairs`. Returns
    (model, stats, scores); peak memory is counted from before the load."""
    base = _memory_mark()
    t0 = time.perf_counter()
    rm = load()
    load_s = time.perf_counter() - t0
    pair_scores(rm, pairs[:1])  # warm-up
    tokens = sum(
        len(rm.encode(p["prompt"], p[k], p["category"])) for p in pairs for k in ("better", "worse")
    )
    t0 = time.perf_counter()
    scores = pair_scores(rm, pairs)
    stats = {
        "forward_tok_s": tokens / (time.perf_counter() - t0),
        "peak_mem_bytes": mx.get_peak_memory() - base,
        "param_bytes": param_bytes(rm),
        "load_s": load_s,
    }
    return rm, stats, scores


def measure_reward_model(a, pairs: list[dict], out: Path) -> dict:
    """Quantize the reward model `a.reward_model` into `out`; compare pairwise accuracy."""
    dtype = backend.parse_dtype(a.dtype)
    speed_pairs = pairs[: a.speed_batch]
    original, orig_stats, _ = rm_speed(
        lambda: reward_model.load(a.reward_model, dtype), speed_pairs
    )
    n_quantized = quantize_reward_model(original, a.reward_model, out, a.bits, a.group_size)
    quant, quant_stats, speed_scores = rm_speed(lambda: reward_model.load(out, dtype), speed_pairs)
    quant.backbone = measuring_model(quant.backbone)
    twin_diff = np.abs(pair_scores(quant, speed_pairs) - speed_scores).max()
    before = pair_scores(original, pairs, "scoring (original)")
    after = pair_scores(quant, pairs, "scoring (quantized)")
    gap_before, gap_after = before[:, 0] - before[:, 1], after[:, 0] - after[:, 1]
    acc_before, acc_after = pair_accuracy(before), pair_accuracy(after)
    return {
        "kind": "reward_model",
        "quantized_linears": n_quantized,
        "block_linears": len(block_linears(original.backbone)),
        "pairs": a.pairs,
        "split": a.split,
        "n_pairs": len(pairs),
        "accuracy_original": acc_before,
        "accuracy_quantized": acc_after,
        "accuracy_drop_points": 100 * (acc_before - acc_after),
        "flipped_pairs": int(np.sum(np.sign(gap_before) != np.sign(gap_after))),
        "mean_abs_score_diff": float(np.abs(after - before).mean()),
        "max_abs_score_diff": float(np.abs(after - before).max()),
        "score_model": "dequantized twin" if backend.backend_name() == "cpu" else "quantized",
        "twin_max_score_diff": float(twin_diff),
        "original": orig_stats,
        "quantized": quant_stats,
    }


# ----------------------------------------------------------------------------------------------
# The CLI.


def default_out(source: str, bits: int, group_size: int) -> Path:
    """Beside the source (`NAME-q8`, `NAME-q4-g32`); models/NAME-q8 for an alias or hub id."""
    suffix = f"-q{bits}" + ("" if group_size == 64 else f"-g{group_size}")
    p = Path(source).expanduser()
    if p.exists():
        return p.with_name((p.stem if p.is_file() else p.name) + suffix)
    return Path("models") / (source.rstrip("/").split("/")[-1] + suffix)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False,
        description="Quantize a policy or a reward model (MLX affine, 8 or 4 bits) into a "
        "loadable folder and measure what was lost (rl-values).",
    )
    p.add_argument("--model", help=f"policy to quantize: {MODEL_HELP}")
    p.add_argument("--reward-model", help="reward-model folder (train_rm.py) to quantize")
    p.add_argument("--bits", type=int, default=8, help="8 or 4 (default: 8)")
    p.add_argument(
        "--q-group-size", dest="group_size", type=int, default=64,
        help="input weights per quantization group: 32, 64 or 128 (default: 64)",
    )  # fmt: skip
    p.add_argument("--out", help="output folder (default: beside the source, NAME-q8)")
    flags.add_dtype(p)
    p.add_argument("--prompts", dest="data", default=EVAL_PROMPTS,
                   help="held-out prompt file (policy KL)")  # fmt: skip
    p.add_argument("--limit", type=int, default=32, help="prompts answered (round-robin)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="max tokens per answer")
    p.add_argument("--temperature", type=float, default=1.0, help="answer sampling (0 = greedy)")
    p.add_argument("--seed", type=int, default=0, help="answer sampling seed")
    p.add_argument("--batch", type=int, default=8, help="prompts sampled and read per batch")
    p.add_argument("--pairs", default=RM_PAIRS, help="preference pairs (RM)")
    p.add_argument("--split", default="test", help="train | val | test | all (RM pairs)")
    p.add_argument("--pair-limit", type=int, help="score only the split's first N pairs (RM)")
    p.add_argument(
        "--speed-batch", type=int, default=4, help="prompts / pairs in the timed job (default: 4)"
    )
    p.add_argument("--speed-tokens", type=int, default=32, help="tokens generated when timed")
    p.add_argument("--no-measure", action="store_true", help="only write the quantized folder")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    flags.renamed(p, "--max-tokens", "--max-new-tokens")
    # one flag vocabulary (issue 24): --group-size is GRPO's G elsewhere; --prompts names a file
    flags.renamed(p, "--group-size", "--q-group-size")
    flags.renamed(p, "--data", "--prompts")
    return p


def check_args(a) -> tuple[Path, list[dict]]:
    """Every input checked before any model work: (output folder, prompt or pair records).
    ValueError (DataError, LoadError-as-ValueError) naming the input and the fix."""
    if (a.model is None) == (a.reward_model is None):
        raise ValueError("give exactly one of --model (a policy) and --reward-model (a folder)")
    check_settings(a.bits, a.group_size)
    backend.parse_dtype(a.dtype)
    for name in ("limit", "max_new_tokens", "batch", "speed_batch", "speed_tokens"):
        if getattr(a, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} {getattr(a, name)}: must be >= 1")
    if not a.temperature >= 0:
        raise ValueError(f"--temperature {a.temperature}: must be >= 0 (0 = greedy)")
    if a.model is not None:
        try:
            source = resolve(a.model).path
        except LoadError as e:
            raise ValueError(str(e)) from e
        records = eval_subset(load_prompts(a.data), a.limit)
    else:
        source = Path(a.reward_model)
        if not (source / "rm_config.json").is_file():
            raise ValueError(
                f"--reward-model {a.reward_model}: no rm_config.json there; train one with "
                "`uv run python train_rm.py --out PATH`"
            )
        records = select_pairs(load_pairs(a.pairs), a.split, a.pairs)
        if a.pair_limit is not None:
            if a.pair_limit < 1:
                raise ValueError(f"--pair-limit {a.pair_limit}: must be >= 1")
            records = records[: a.pair_limit]
    out = Path(a.out) if a.out else default_out(a.model or a.reward_model, a.bits, a.group_size)
    if out.resolve() == source.resolve() or out.resolve() in source.resolve().parents:
        raise ValueError(f"--out {out} would overwrite the source {source}: choose another")
    if out.exists() and not any((out / f).is_file() for f in ("config.json", "rm_config.json")):
        raise ValueError(f"--out {out} exists and is not a model folder: refusing to replace it")
    return out, records


def select_pairs(pairs: list[dict], split: str, path) -> list[dict]:
    """The pairs of `split` ("all": every pair); a pair without a split field is train."""
    if split == "all":
        return pairs
    by_split = {s: select_split(pairs, s, missing="train") for s in SPLITS}
    if split not in by_split:
        raise ValueError(f"--split {split!r}: use train, val, test or all")
    if not by_split[split]:
        counts = {k: len(v) for k, v in by_split.items()}
        raise ValueError(
            f"{path}: no pair has split {split!r} (counts {counts}); a file without split "
            "fields is all train: pass --split all, or a pairs file with a test split"
        )
    return by_split[split]


def run(a, out: Path, records: list[dict]) -> dict:
    """Quantize (and, unless --no-measure, measure); write REPORT_FILE in `out`; the report."""
    t0 = time.perf_counter()
    source = a.model or a.reward_model
    if a.no_measure:
        report = _quantize_only(a, out)
    elif a.model is not None:
        report = measure_policy(a, records, out)
    else:
        report = measure_reward_model(a, records, out)
    source_bytes, source_is_gguf = source_size(a.model, a.reward_model)
    report = {
        "source": source,
        "out": str(out),
        "bits": a.bits,
        "group_size": a.group_size,
        **report,
        "bytes": folder_bytes(out),
        "source_bytes": source_bytes,
        "source_is_gguf": source_is_gguf,
        "backend": backend.backend_name(),
        "blas": backend.BLAS,
        "mlx": mx.__version__,
        "seconds": time.perf_counter() - t0,
    }
    (out / REPORT_FILE).write_text(strict_json.dumps(report, indent=1) + "\n")
    return report


def source_size(model: str | None, rm_folder: str | None) -> tuple[int, bool]:
    """(bytes on disk, whether that is a GGUF file) of a policy, or of a reward-model folder
    plus the base model it rebuilds from (its own backbone folder included if it has one)."""
    extra = 0
    if rm_folder is not None:
        extra = folder_bytes(rm_folder)
        model = json.loads((Path(rm_folder) / "rm_config.json").read_text())["base_model"]
        if (Path(rm_folder) / model).is_dir():
            return extra, False
    path = resolve(model).path
    return extra + folder_bytes(path), path.suffix == ".gguf"


def _quantize_only(a, out: Path) -> dict:
    dtype = backend.parse_dtype(a.dtype)
    if a.model is not None:
        original = Gwen.load(a.model, dtype)
        n = quantize_policy(original, out, a.bits, a.group_size)
        return {"kind": "policy", "quantized_linears": n}
    rm = reward_model.load(a.reward_model, dtype)
    n = quantize_reward_model(rm, a.reward_model, out, a.bits, a.group_size)
    return {"kind": "reward_model", "quantized_linears": n}


def _mb(n) -> str:
    return f"{n / 1e6:,.1f} MB"


def format_table(r: dict) -> str:
    """The report as a few lines and an original-vs-quantized table."""
    lines = [
        f"{r['source']} -> {r['out']}: {r['bits']}-bit, group {r['group_size']}, "
        f"{r['quantized_linears']} Linears quantized"
        + (f" of {r['block_linears']} in the blocks" if "block_linears" in r else "")
    ]
    if "mean_kl" in r:
        lines.append(
            f"KL(original || quantized) per token over {r['kl_tokens']:,} tokens of "
            f"{r['answers']} sampled answers (T={r['temperature']}, seed {r['seed']}): "
            f"mean {r['mean_kl']:.5f}, p95 {r['p95_kl']:.5f}, max {r['max_kl']:.4f}"
        )
    if "accuracy_original" in r:
        lines.append(
            f"pairwise accuracy on {r['n_pairs']} {r['split']} pairs: "
            f"{100 * r['accuracy_original']:.1f}% -> {100 * r['accuracy_quantized']:.1f}% "
            f"(drop {r['accuracy_drop_points']:.2f} points, {r['flipped_pairs']} pairs flipped, "
            f"mean |score change| {r['mean_abs_score_diff']:.4f})"
        )
    gguf = " (GGUF)" if r.get("source_is_gguf") else ""  # already quantized: not a float size
    rows = [("size on disk", _mb(r["source_bytes"]) + gguf, _mb(r["bytes"]))]
    if "original" in r:
        o, q = r["original"], r["quantized"]
        rows += [
            ("weights in memory", _mb(o["param_bytes"]), _mb(q["param_bytes"])),
            ("peak memory", _mb(o["peak_mem_bytes"]), _mb(q["peak_mem_bytes"])),
        ]
        if "gen_tok_s" in o:
            rows.append(("generation tok/s", f"{o['gen_tok_s']:.1f}", f"{q['gen_tok_s']:.1f}"))
        rows.append(("forward tok/s", f"{o['forward_tok_s']:.1f}", f"{q['forward_tok_s']:.1f}"))
    lines.append(f"{'':20} {'original':>14} {'quantized':>14}")
    lines += [f"{name:20} {x:>14} {y:>14}" for name, x, y in rows]
    lines.append(f"report: {Path(r['out']) / REPORT_FILE} ({r['seconds']:.0f} s)")
    return "\n".join(lines)


@errors.cli
def main(argv=None) -> int:
    """The CLI: a bad input is one `error:` line and exit status 2."""
    a = build_parser().parse_args(argv)
    with errors.as_user_error(ValueError):  # the flags, the data and the model reference
        out, records = check_args(a)
    backend.announce()
    report = run(a, out, records)
    print(strict_json.dumps(report) if a.json else format_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
