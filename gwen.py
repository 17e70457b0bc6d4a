"""Gwen, the RL-facing model API: chat formatting, group sampling, and sequence log-probs.

`sample_group` prefills each distinct prompt once (one left-padded batch), broadcasts its KV
cache to the G samples of its group, and decodes all B*G rows together until every row has
emitted EOS or `max_new_tokens` is reached. It returns token ids, the completion mask (prompt and
padding out, the EOS that ended a completion in), the log-probs of the sampled tokens under the
tempered full softmax (the quantity GRPO's ratio uses; top-p only restricts which token is drawn)
and decoded texts. `logprobs` recomputes those log-probs with gradient, prompt prefilled once per
group. Sampling runs in numpy on the CPU backend (MLX's vocabulary-sized exp costs ~8x numpy's
there) and in MLX elsewhere. It is not a chat server: no streaming, no stop strings.
"""

import argparse
import sys
import time
from dataclasses import dataclass

import backend

import mlx.core as mx
import numpy as np

import kernels
from kvcache import KVCache


@dataclass
class GroupSample:
    """B prompts x G samples; completion row r belongs to prompt r // group_size."""

    prompt_tokens: mx.array  # (B, P) int32, left-padded
    prompt_pad: mx.array  # (B,) int32, pad slots at the start of each prompt row
    tokens: mx.array  # (B*G, T) int32 completion tokens, pad_id after EOS
    mask: mx.array  # (B*G, T) float32, see completion_mask
    logprobs: mx.array  # (B*G, T) float32, 0 where mask is 0
    texts: list[str]  # (B*G,) decoded completions without the EOS
    finished: np.ndarray  # (B*G,) bool: ended with EOS (False: truncated)
    group_size: int
    temperature: float

    @property
    def num_prompts(self) -> int:
        return self.prompt_tokens.shape[0]

    @property
    def lengths(self) -> np.ndarray:
        return np.asarray(self.mask.sum(axis=1)).astype(np.int64)


def completion_mask(tokens: mx.array, eos_ids) -> mx.array:
    """(N, T) float32: 1 on completion tokens up to and including the first EOS, else 0."""
    is_eos = mx.zeros(tokens.shape, dtype=mx.bool_)
    for e in eos_ids:
        is_eos = is_eos | (tokens == e)
    seen_before = mx.cumsum(is_eos.astype(mx.int32), axis=1) - is_eos.astype(mx.int32)
    return (seen_before == 0).astype(mx.float32)


def _sample_numpy(logits: np.ndarray, temperature: float, top_p: float, rng):
    """Draw one token per row; return (tokens, log-prob under softmax(logits / T)).

    Inverse-CDF sampling without a vocabulary-long cumsum (it cost 10 of 15 ms per step at
    64 x 49152): find the block of `_BLOCK` tokens holding the draw from the block sums, then
    the token inside that block. `logits` is not modified."""
    n, vocab = logits.shape
    rows = np.arange(n)
    m = logits.max(axis=1, keepdims=True)
    inv_t = np.float32(1.0 if temperature == 0 else 1.0 / temperature)
    p = np.subtract(logits, m)
    if inv_t != 1:
        p *= inv_t
    np.exp(p, out=p)
    total = p.sum(axis=1, dtype=np.float64)
    bad = np.flatnonzero(~(np.isfinite(total) & (total > 0)))
    if len(bad):
        raise ValueError(f"logits of rows {bad[:8].tolist()} hold NaN or +inf: cannot sample")
    if temperature == 0:
        tokens = logits.argmax(axis=1)
        logp = -np.log(total)  # z[token] - m = 0 at the argmax
        return tokens.astype(np.int32), logp.astype(np.float32)
    if top_p < 1.0:
        _nucleus_inplace(p, top_p, total)
    tokens = _draw(p, rng.random(n))
    logp = (logits[rows, tokens] - m[:, 0]) * inv_t - np.log(total)
    return tokens.astype(np.int32), logp.astype(np.float32)


_BLOCK = 256


def _draw(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Token index per row with P(i) = p[i] / sum(p): the first i whose cumulative mass exceeds
    r * sum(p), for r (n,) uniform in [0, 1). A token with p = 0 is never returned."""
    n, vocab = p.shape
    rows = np.arange(n)
    nb, full = -(-vocab // _BLOCK), vocab // _BLOCK * _BLOCK
    sums = np.empty((n, nb), dtype=np.float64)
    sums[:, : full // _BLOCK] = p[:, :full].reshape(n, -1, _BLOCK).sum(axis=2)
    if full < vocab:
        sums[:, -1] = p[:, full:].sum(axis=1)
    cum = np.cumsum(sums, axis=1)
    u = r * cum[:, -1]
    block = np.minimum((cum <= u[:, None]).sum(axis=1), nb - 1)
    u -= np.where(block > 0, cum[rows, block - 1], 0.0)
    cols = block[:, None] * _BLOCK + np.arange(_BLOCK)
    seg = np.where(cols < vocab, p[rows[:, None], np.minimum(cols, vocab - 1)], 0.0)
    inside = np.minimum(
        (np.cumsum(seg, axis=1, dtype=np.float64) <= u[:, None]).sum(axis=1), _BLOCK - 1
    )
    tokens = block * _BLOCK + inside
    # Rounding can put u at (or past) a block's end: take the nearest earlier token with mass.
    for i in np.flatnonzero(p[rows, np.minimum(tokens, vocab - 1)] == 0):
        nz = np.flatnonzero(p[i])
        before = nz[nz <= tokens[i]]
        tokens[i] = before[-1] if len(before) else nz[0]
    return tokens


def _nucleus_inplace(p: np.ndarray, top_p: float, total: np.ndarray) -> None:
    """Zero every token outside the smallest set whose mass reaches top_p of the row's total
    (`total` (n,) = p.sum(axis=1), which the caller has; ties at the boundary all stay in).
    Sorts only the row's largest `_NUCLEUS_K` values unless they hold less than top_p; a full
    sort of the vocabulary cost ~200 ms per step at 64 rows."""
    n, vocab = p.shape
    k = min(vocab, _NUCLEUS_K)
    target = top_p * total
    top = -np.sort(-np.partition(p, vocab - k, axis=1)[:, vocab - k :], axis=1)  # (n, k) desc
    cum = np.cumsum(top, axis=1, dtype=np.float64)
    threshold = np.empty(n, dtype=p.dtype)
    for i in range(n):
        row_top, row_cum = top[i], cum[i]
        if row_cum[-1] < target[i]:  # the nucleus is wider than k: sort the whole row
            row_top = -np.sort(-p[i])
            row_cum = np.cumsum(row_top, dtype=np.float64)
        last = min(int(np.searchsorted(row_cum, target[i], side="left")), len(row_top) - 1)
        threshold[i] = row_top[last]
    p *= p >= threshold[:, None]


_NUCLEUS_K = 1024


def _sample_mlx(logits: mx.array, temperature: float, top_p: float, key):
    z = logits.astype(mx.float32)
    if temperature > 0:
        z = z * (1.0 / temperature)
    logz = z - mx.logsumexp(z, axis=-1, keepdims=True)
    if temperature == 0:
        tokens = mx.argmax(z, axis=-1)
    elif top_p < 1.0:
        sorted_logz = mx.sort(logz, axis=-1)[:, ::-1]
        mass_before = mx.cumsum(mx.exp(sorted_logz), axis=-1) - mx.exp(sorted_logz)
        cutoff = mx.min(mx.where(mass_before < top_p, sorted_logz, mx.inf), axis=-1)
        tokens = mx.random.categorical(mx.where(logz >= cutoff[:, None], logz, -mx.inf), key=key)
    else:
        tokens = mx.random.categorical(logz, key=key)
    logp = mx.take_along_axis(logz, tokens[:, None], axis=-1)[:, 0]
    return tokens.astype(mx.int32), logp


class Gwen:
    def __init__(self, model, tokenizer, system_prompt: str | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.system_prompt = system_prompt
        self.eos_ids = self._eos_ids()
        self.pad_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        )
        self.sampler = "numpy" if backend.backend_name() == "cpu" else "mlx"

    @classmethod
    def load(cls, model_ref: str, dtype=None, **kw) -> "Gwen":
        from load_weights import load

        return cls(*load(model_ref, dtype), **kw)

    def _eos_ids(self) -> list[int]:
        ids = [self.tokenizer.eos_token_id]
        cfg = self.model.args.eos_token_id
        ids += cfg if isinstance(cfg, list) else [cfg]
        ids = sorted({i for i in ids if i is not None})
        if not ids:
            raise ValueError("neither the tokenizer nor the config names an EOS token")
        return ids

    def chat_tokens(self, prompt: str) -> list[int]:
        messages = [{"role": "user", "content": prompt}]
        if self.system_prompt is not None:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        if self.tokenizer.chat_template is None:
            return self.tokenizer.encode(prompt)
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        return self.tokenizer.encode(text, add_special_tokens=False)

    def left_pad(self, seqs: list[list[int]]) -> tuple[mx.array, mx.array]:
        """(B, P) int32 left-padded with pad_id, and (B,) pad counts."""
        if not seqs or any(len(s) == 0 for s in seqs):
            raise ValueError("left_pad needs a non-empty list of non-empty sequences")
        width = max(len(s) for s in seqs)
        pad = [width - len(s) for s in seqs]
        rows = [[self.pad_id] * p + list(s) for p, s in zip(pad, seqs, strict=True)]
        return mx.array(rows, dtype=mx.int32), mx.array(pad, dtype=mx.int32)

    def prefill(self, tokens: mx.array, pad: mx.array, capacity: int):
        """Run the prompts once; return (cache, final-position hidden state (B, D)).
        Forward-only, so the CPU ops run blocked (kernels.CPU_BLOCK)."""
        cache = KVCache.for_model(self.model, tokens.shape[0], capacity, pad)
        h = self.model.hidden(tokens, cache, blocked=True)
        return cache, h[:, -1, :]

    def decode_texts(self, tokens: np.ndarray, mask: np.ndarray, finished: np.ndarray):
        texts = []
        for row, m, done in zip(tokens, mask, finished, strict=True):
            n = int(m.sum()) - int(done)  # drop the EOS itself
            texts.append(self.tokenizer.decode(row[:n].tolist(), skip_special_tokens=True))
        return texts

    def sample_group(
        self,
        prompts: list[str],
        group_size: int,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
        stop_at_eos: bool = True,
    ) -> GroupSample:
        """Sample `group_size` completions for each prompt; all rows decode together."""
        _check_sampling(group_size, max_new_tokens, temperature, top_p)
        prompt_tokens, prompt_pad = self.left_pad([self.chat_tokens(p) for p in prompts])
        return self.sample_tokens(
            prompt_tokens,
            prompt_pad,
            group_size,
            max_new_tokens,
            temperature,
            top_p,
            seed,
            stop_at_eos,
        )

    def sample_tokens(
        self,
        prompt_tokens,
        prompt_pad,
        group_size,
        max_new_tokens,
        temperature=1.0,
        top_p=1.0,
        seed=0,
        stop_at_eos=True,
    ) -> GroupSample:
        B, P = prompt_tokens.shape
        N = B * group_size
        W = self.model.lm_head_weight()
        cache, h_last = self.prefill(prompt_tokens, prompt_pad, P + max_new_tokens)
        cache = cache.broadcast_batch(group_size)
        logits = mx.repeat(h_last @ W.T, group_size, axis=0)  # (N, V)
        rng, key = np.random.default_rng(seed), mx.random.key(seed)
        out_tok = np.full((N, max_new_tokens), self.pad_id, dtype=np.int32)
        out_lp = np.zeros((N, max_new_tokens), dtype=np.float32)
        done = np.zeros(N, dtype=bool)
        eos = np.array(self.eos_ids)
        for t in range(max_new_tokens):
            if self.sampler == "numpy":
                tok, lp = _sample_numpy(
                    np.array(logits.astype(mx.float32)), temperature, top_p, rng
                )
            else:
                key, sub = mx.random.split(key)
                tok_mx, lp_mx = _sample_mlx(logits, temperature, top_p, sub)
                tok, lp = np.array(tok_mx), np.array(lp_mx)
            tok = np.where(done, self.pad_id, tok)
            out_tok[:, t], out_lp[:, t] = tok, np.where(done, 0.0, lp)
            if stop_at_eos:
                done |= np.isin(tok, eos)
            if done.all() or t + 1 == max_new_tokens:
                break
            h = self.model.hidden(mx.array(tok[:, None]), cache)[:, -1, :]
            logits = h @ W.T
        T = t + 1
        tokens = mx.array(out_tok[:, :T])
        mask = completion_mask(tokens, self.eos_ids if stop_at_eos else [])
        finished = done if stop_at_eos else np.zeros(N, dtype=bool)
        texts = self.decode_texts(out_tok[:, :T], np.array(mask), finished)
        return GroupSample(
            prompt_tokens,
            prompt_pad,
            tokens,
            mask,
            mx.array(out_lp[:, :T]) * mask,
            texts,
            finished,
            group_size,
            temperature,
        )

    def logprobs(self, sample: GroupSample, temperature: float | None = None) -> mx.array:
        """(B*G, T) float32 log-probs of the sampled tokens, differentiable w.r.t. the model."""
        return sequence_logprobs(
            self.model,
            sample.prompt_tokens,
            sample.prompt_pad,
            sample.tokens,
            sample.group_size,
            sample.temperature if temperature is None else temperature,
        )


def sequence_logprobs(
    model,
    prompt_tokens,
    prompt_pad,
    completions,
    group_size,
    temperature: float,
    return_entropy: bool = False,
):
    """Log-probs of completions (B*G, T) given prompts (B, P), each prompt run once.

    The prompt's final hidden state predicts completion token 0; the completion's hidden
    state at t predicts token t + 1. Temperature 0 means the untempered softmax. With
    `return_entropy`, also the (B*G, T) entropy of each position's tempered distribution."""
    B, P = prompt_tokens.shape
    N, T = completions.shape
    if N != B * group_size:
        raise ValueError(f"{N} completion rows != {B} prompts x group size {group_size}")
    cache = KVCache.for_model(model, B, P, prompt_pad)
    h_prompt = model.hidden(prompt_tokens, cache)[:, -1:, :]  # (B, 1, D)
    cache = cache.broadcast_batch(group_size, capacity=P + T)
    h = mx.repeat(h_prompt, group_size, axis=0)  # (N, 1, D)
    if T > 1:
        h = mx.concatenate([h, model.hidden(completions[:, :-1], cache)], axis=1)  # (N, T, D)
    temperature = temperature if temperature > 0 else 1.0
    return kernels.token_logprobs(
        h, model.lm_head_weight(), completions, temperature, return_entropy=return_entropy
    )


def _check_sampling(group_size, max_new_tokens, temperature, top_p) -> None:
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="Sample from a model with Gwen's group sampler.")
    p.add_argument("--model", default="smollm2-135m", help="HF folder, hub id or smollm2-135m")
    p.add_argument("--prompt", action="append", required=True, help="a user prompt (repeatable)")
    p.add_argument("--group-size", type=int, default=1, help="samples per prompt")
    p.add_argument("--max-tokens", type=int, default=128, help="max new tokens per sample")
    p.add_argument("--temperature", type=float, default=0.7, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--dtype", default=None, help="float32|float16|bfloat16 (default: backend)")
    a = p.parse_args(argv)
    backend.announce()
    gwen = Gwen.load(a.model, backend.parse_dtype(a.dtype))
    start = time.perf_counter()
    s = gwen.sample_group(a.prompt, a.group_size, a.max_tokens, a.temperature, a.top_p, a.seed)
    elapsed = time.perf_counter() - start
    for i, text in enumerate(s.texts):
        if len(s.texts) > 1:
            print(f"--- prompt {i // a.group_size}, sample {i % a.group_size}")
        print(text)
    ntok = int(s.mask.sum().item())
    print(f"[{ntok} tokens in {elapsed:.2f}s, {ntok / elapsed:.1f} tok/s]", file=sys.stderr)


if __name__ == "__main__":
    main()
