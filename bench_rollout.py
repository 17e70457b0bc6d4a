"""Rollout benchmark: Gwen.sample_group vs mlx_lm.batch_generate, same weights, same run.

Both sample B (--prompts-per-step) prompts x G completions of exactly --max-new-tokens tokens
(EOS ignored) at the same temperature/top-p. mlx_lm gets our float32 weights in its own model
class, all B*G rows in one batch (its fastest setting), and no log-probs; ours returns log-probs
too. After a warm-up, the sides alternate for --trials rounds; the medians give tokens/s and the
ratio. --profile times the pieces of our decode step in isolation to show where the time goes.
"""

import argparse
import dataclasses
import importlib
import statistics
import sys
import time

from core import backend, errors, flags, strict_json
from core.sampling import sample_numpy

import mlx.core as mx
import mlx.utils
import numpy as np

from gwen import Gwen, check_sampling
from load_weights import MODEL_HELP

PROMPTS = [
    "Why is the sky blue during the day but red at sunset?",
    "What would happen if the Moon were twice as far from Earth?",
    "Explain how vaccines train the immune system.",
    "Is it true that we only use ten percent of our brains?",
    "What is the boiling point of a Tuesday?",
    "How did the printing press change European politics?",
    "Why do prime numbers matter for cryptography?",
    "Can you describe the taste of the color seven?",
]


class _NoEosTokenizer:
    """Lets mlx_lm's batch_generate run to max_tokens: it stops on tokenizer.eos_token_ids."""

    eos_token_ids: list[int] = []

    def __init__(self, tokenizer):
        self._tok = tokenizer

    def decode(self, ids):
        return self._tok.decode(ids)


def mlx_lm_twin(model):
    """mlx_lm's implementation of our architecture, holding our exact weights."""
    mod = importlib.import_module(f"mlx_lm.models.{model.args.model_type}")
    twin = mod.Model(mod.ModelArgs.from_dict(dataclasses.asdict(model.args)))
    twin.load_weights(mlx.utils.tree_flatten(model.parameters()), strict=True)
    mx.eval(twin.parameters())
    return twin


def run_ours(gwen, prompts, a, seed):
    s = gwen.sample_group(
        prompts, a.group_size, a.max_new_tokens, a.temperature, a.top_p, seed, stop_at_eos=False
    )
    mx.eval(s.tokens, s.logprobs)
    return int(s.mask.sum().item())


def run_mlx_lm(twin, tokenizer, prompt_ids, a, seed):
    # start-up: mlx_lm's generate takes seconds to import; --skip-mlx-lm never needs it
    from mlx_lm.generate import batch_generate  # start-up
    from mlx_lm.sample_utils import make_sampler  # start-up

    mx.random.seed(seed)
    rows = [ids for ids in prompt_ids for _ in range(a.group_size)]
    out = batch_generate(
        twin,
        _NoEosTokenizer(tokenizer),
        rows,
        max_tokens=a.max_new_tokens,
        sampler=make_sampler(temp=a.temperature, top_p=a.top_p),
        completion_batch_size=len(rows),
        prefill_batch_size=len(rows),
        return_token_ids=True,
    )
    return sum(len(t) for t in out.token_ids)


def measure(sides: dict, trials: int) -> dict:
    """Warm each side up once, then `trials` rounds with the sides alternating (drift on a shared
    machine hits both alike). Per side: median seconds, tokens, peak MB, every trial's time."""
    for fn in sides.values():
        fn(0)
    times = {name: [] for name in sides}
    peaks, tokens = dict.fromkeys(sides, 0.0), {}
    for t in range(trials):
        for name, fn in sides.items():
            mx.clear_cache()
            mx.reset_peak_memory()
            start = time.perf_counter()
            tokens[name] = fn(t + 1)
            times[name].append(time.perf_counter() - start)
            peaks[name] = max(peaks[name], mx.get_peak_memory() / 2**20)
    return {
        name: (statistics.median(times[name]), tokens[name], peaks[name], times[name])
        for name in sides
    }


def profile(gwen, prompts, a):
    """Median ms of each piece of one decode step at the benchmark's batch shape."""
    toks, pad = gwen.left_pad([gwen.chat_tokens(p) for p in prompts])
    n, W = len(prompts) * a.group_size, gwen.model.lm_head_weight()

    def timed(fn, reps=7):
        fn()
        ts = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - start)
        return 1e3 * statistics.median(ts)

    capacity = toks.shape[1] + a.max_new_tokens

    def prefill():
        cache, h = gwen.prefill(toks, pad, capacity)
        mx.eval(h, cache.keys)

    cache, h = gwen.prefill(toks, pad, capacity)
    big = cache.broadcast_batch(a.group_size)
    mx.eval(big.keys, big.values)
    x = mx.zeros((n, 1), dtype=mx.int32)

    def body():
        mx.eval(gwen.model.hidden(x, big))
        big.offset -= 1  # rewrite the same slot each time

    hidden = mx.random.normal((n, W.shape[1])).astype(W.dtype)
    logits = hidden @ W.T
    mx.eval(logits)
    logits_np = np.array(logits.astype(mx.float32))
    rng = np.random.default_rng(0)
    return {
        "prefill_ms (once per call)": timed(prefill, 3),
        "broadcast_ms (once per call)": timed(
            lambda: mx.eval(cache.broadcast_batch(a.group_size).keys), 3
        ),
        "body_forward_ms (per step)": timed(body),
        "lm_head_ms (per step)": timed(lambda: mx.eval(hidden @ W.T)),
        "to_numpy_ms (per step)": timed(lambda: np.array(logits.astype(mx.float32))),
        "sample_ms (per step)": timed(lambda: sample_numpy(logits_np, a.temperature, a.top_p, rng)),
    }


@errors.cli
def main(argv=None):
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help=MODEL_HELP)
    p.add_argument("--prompts-per-step", type=int, default=8, help="distinct prompts B")
    p.add_argument("--group-size", type=int, default=8, help="samples per prompt G")
    p.add_argument("--max-new-tokens", type=int, default=64, help="new tokens per sample (exact)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus mass")
    p.add_argument("--trials", type=int, default=3, help="timed runs per side (median)")
    flags.add_dtype(p)
    p.add_argument("--skip-mlx-lm", action="store_true", help="time ours only")
    p.add_argument("--profile", action="store_true", help="also time the decode-step pieces")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    flags.renamed(p, "--prompts", "--prompts-per-step")
    flags.renamed(p, "--max-tokens", "--max-new-tokens")
    a = p.parse_args(argv)
    with errors.as_user_error(ValueError):  # the flags, before the model loads
        check_sampling(a.group_size, a.max_new_tokens, a.temperature, a.top_p)
        if min(a.prompts_per_step, a.trials) < 1:
            raise errors.UserError("--prompts-per-step and --trials must be >= 1")
        dtype = backend.parse_dtype(a.dtype)
    backend.announce()
    gwen = Gwen.load(a.model, dtype)
    prompts = [
        PROMPTS[i % len(PROMPTS)] + ("" if i < len(PROMPTS) else f" ({i})")
        for i in range(a.prompts_per_step)
    ]
    result = {
        "model": a.model,
        "backend": backend.backend_name(),
        "blas": backend.BLAS,
        "dtype": str(gwen.model.lm_head_weight().dtype),
        "prompts": a.prompts_per_step,
        "group_size": a.group_size,
        "max_tokens": a.max_new_tokens,
        "temperature": a.temperature,
        "top_p": a.top_p,
        "trials": a.trials,
        "mlx": mx.__version__,
    }
    sides = {"ours": lambda seed: run_ours(gwen, prompts, a, seed)}
    if not a.skip_mlx_lm:
        twin = mlx_lm_twin(gwen.model)
        ids = [gwen.chat_tokens(q) for q in prompts]
        sides["mlx_lm"] = lambda seed: run_mlx_lm(twin, gwen.tokenizer, ids, a, seed)
    for name, (s, tokens, peak, trials) in measure(sides, a.trials).items():
        result.update(
            {
                f"{name}_s": s,
                f"{name}_tokens": tokens,
                f"{name}_tok_s": tokens / s,
                f"{name}_peak_mb": peak,
                f"{name}_trials_s": [round(x, 3) for x in trials],
            }
        )
    if not a.skip_mlx_lm:
        result["ratio"] = result["ours_tok_s"] / result["mlx_lm_tok_s"]
    if a.profile:
        result["profile"] = profile(gwen, prompts, a)
    strict_json.print_result(result, a.json, width=32)


if __name__ == "__main__":
    sys.exit(main())
