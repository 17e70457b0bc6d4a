"""Gwen, the RL-facing model API: chat formatting, group sampling, and sequence log-probs.

`sample_group` prefills each distinct prompt once (one left-padded batch), broadcasts its KV
cache to the G samples of its group, and decodes all B*G rows together until every row has
emitted EOS or `max_new_tokens` is reached. It returns token ids, the completion mask (prompt and
padding out, the EOS that ended a completion in), the log-probs of the sampled tokens under the
tempered full softmax (the quantity GRPO's ratio uses; top-p only restricts which token is drawn)
and decoded texts. `logprobs` recomputes those log-probs with gradient, prompt prefilled once per
group. Prompts are formatted by chat_format (thinking off unless asked for); tokens are drawn by
core/sampling.py. `stream` yields one prompt's answer as it grows, token by token, from the same
prefill, cache and sampler (chat.py's page shows it). It is not a chat server: no stop strings.
"""

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core import backend, chat_format, cpu_ops, errors, flags, kernels, sampling, strict_json

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

import load_weights
from kvcache import KVCache

# Rows that must have ended before the decode drops them (Gwen.drop_finished): each drop copies
# the KV cache, and one more row costs ~2 ms of a ~130 ms decode step (knowledge/benchmarks.md).
DROP_AT = 4


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
    # The stream after the frozen bottom blocks, as sampling computed it (sample_tokens with
    # trunk_depth): the update's Trunk for free. None when not asked for or after a gather.
    trunk: "Trunk | None" = None

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


class Gwen:
    """A model and its tokenizer as the RL loop uses them. `enable_thinking` is passed to the
    chat template (Qwen3: off by default); `system_prompt` and `examples(prompt)` (few-shot
    (user, assistant) turns for that prompt) open every prompt; `sampler` is "numpy" or "mlx"
    (core/sampling.py). `drop_finished`: with the numpy sampler, rows that have ended leave the
    decode batch (DROP_AT at a time: each drop copies the KV cache), the same draws at ~0.9x the
    time of a real rollout (knowledge/benchmarks.md)."""

    def __init__(
        self,
        model,
        tokenizer,
        system_prompt: str | None = None,
        enable_thinking: bool = False,
        examples: Callable[[str], Sequence[tuple[str, str]]] | None = None,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.system_prompt, self.enable_thinking = system_prompt, enable_thinking
        self.examples = examples
        self.eos_ids = self._eos_ids()
        self.pad_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        )
        self.sampler = sampling.default_kind()
        self.drop_finished = True

    @classmethod
    def load(cls, model_ref, dtype=None, *, base=None, merge=True, **kw) -> "Gwen":
        """Any `--model` (load_weights.resolve: a reference or its ModelSource); `base` and
        `merge` as load_weights.load takes them, `kw` to the constructor."""
        return cls(*load_weights.load(model_ref, dtype, base=base, merge=merge), **kw)

    def _eos_ids(self) -> list[int]:
        ids = [self.tokenizer.eos_token_id]
        cfg = self.model.args.eos_token_id
        ids += cfg if isinstance(cfg, list) else [cfg]
        ids = sorted({i for i in ids if i is not None})
        if not ids:
            raise ValueError("neither the tokenizer nor the config names an EOS token")
        return ids

    def chat_tokens(self, prompt: str) -> list[int]:
        return chat_format.chat_tokens(
            self.tokenizer,
            prompt,
            system=self.system_prompt,
            enable_thinking=self.enable_thinking,
            examples=self.examples(prompt) if self.examples else (),
        )

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
        Forward-only, so the CPU ops may run in blocks."""
        cache, h, _ = self._prefill(tokens, pad, capacity, 0)
        return cache, h

    def _prefill(self, tokens, pad, capacity: int, depth: int):
        """prefill, and with depth > 0 also the (B, P, D) stream after blocks [0, depth)."""
        cache = KVCache.for_model(self.model, tokens.shape[0], capacity, pad)
        with cpu_ops.blocked():
            mid, h = self._forward(tokens, cache, depth)
        return cache, h[:, -1, :], mid

    def _forward(self, tokens, cache, depth: int):
        """(stream after blocks [0, depth) or None, final-norm hidden states) of tokens that
        continue `cache`: one pass, split at `depth` when depth > 0."""
        if depth == 0:
            return None, self.model.hidden(tokens, cache)
        m = self.model
        mid = m.blocks(m.embed(tokens), range(depth), cache, advance=False)
        return mid, m.final_norm(m.blocks(mid, range(depth, len(m.layers)), cache))

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
        trunk_depth: int = 0,
    ) -> GroupSample:
        """Sample `group_size` completions for each prompt; all rows decode together. `seed` is
        an int, or one int per completion row (row b * group_size + g): then each row's draws
        depend on its own seed alone, whatever else shares the batch. With `trunk_depth` > 0 the
        sample keeps the stream after blocks [0, trunk_depth) (GroupSample.trunk)."""
        check_sampling(group_size, max_new_tokens, temperature, top_p)
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
            trunk_depth,
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
        trunk_depth=0,
    ) -> GroupSample:
        B, P = prompt_tokens.shape
        if not 0 <= trunk_depth < len(self.model.layers):
            raise ValueError(
                f"trunk_depth {trunk_depth} must be in 0..{len(self.model.layers) - 1}"
            )
        N = B * group_size
        if np.ndim(seed) > 0 and len(seed) != N:
            raise ValueError(
                f"{len(seed)} seeds for {N} rows ({B} prompts x {group_size}): pass one int, "
                "or one per completion row"
            )
        W = self.model.lm_head_weight()
        cache, h_last, mid_prompt = self._prefill(
            prompt_tokens, prompt_pad, P + max_new_tokens, trunk_depth
        )
        mids = []  # (rows, the trunk's stream of their fed-back tokens): the completion inputs
        cache = cache.broadcast_batch(group_size)
        logits = mx.repeat(h_last @ W.T, group_size, axis=0)  # (N, V)
        draw = sampling.make_sampler(self.sampler, seed, temperature, top_p)
        drop = self.drop_finished and stop_at_eos and self.sampler == "numpy"
        out_tok = np.full((N, max_new_tokens), self.pad_id, dtype=np.int32)
        out_lp = np.zeros((N, max_new_tokens), dtype=np.float32)
        done = np.zeros(N, dtype=bool)
        rows = np.arange(N)  # the rows still in the batch (the cache's and the logits' rows)
        eos = np.array(self.eos_ids)
        for t in range(max_new_tokens):
            tok, lp = draw(logits) if len(rows) == N else draw(logits, rows, N)
            ended = done[rows]
            tok = np.where(ended, self.pad_id, tok)
            out_tok[rows, t], out_lp[rows, t] = tok, np.where(ended, 0.0, lp)
            if stop_at_eos:
                done[rows] |= np.isin(tok, eos)
            if done.all() or t + 1 == max_new_tokens:
                break
            keep = np.flatnonzero(~done[rows])
            if drop and len(rows) - len(keep) >= DROP_AT:  # compacting copies the cache
                cache = cache.take_rows(keep.tolist())
                rows, tok = rows[keep], tok[keep]
            mid, h = self._forward(mx.array(tok[:, None]), cache, trunk_depth)
            if mid is not None:
                mids.append((rows, mid))
            logits = h[:, -1, :] @ W.T
        T = t + 1
        tokens = mx.array(out_tok[:, :T])
        mask = completion_mask(tokens, self.eos_ids if stop_at_eos else [])
        finished = done if stop_at_eos else np.zeros(N, dtype=bool)
        texts = self.decode_texts(out_tok[:, :T], np.array(mask), finished)
        trunk = None
        if trunk_depth:
            trunk = Trunk(trunk_depth, mid_prompt, _all_rows(mids, N) if mids else None)
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
            trunk,
        )

    def stream(
        self,
        prompt: str,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
    ):
        """Yield the decoded answer to one prompt after each new token, ending with the whole
        answer: the text `sample_group([prompt], 1, ...)` gives with the same settings and seed.
        A text that ends inside a multi-byte character waits for the token that completes it."""
        check_sampling(1, max_new_tokens, temperature, top_p)
        tokens, pad = self.left_pad([self.chat_tokens(prompt)])
        cache, h = self.prefill(tokens, pad, tokens.shape[1] + max_new_tokens)
        W = self.model.lm_head_weight()
        draw = sampling.make_sampler(self.sampler, seed, temperature, top_p)
        ids, shown = [], None
        for t in range(max_new_tokens):
            tok = int(draw(h @ W.T)[0][0])
            if tok in self.eos_ids:
                break
            ids.append(tok)
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            if not text.endswith("\ufffd"):
                shown = text
                yield text
            if t + 1 < max_new_tokens:
                h = self.model.hidden(mx.array([[tok]], dtype=mx.int32), cache)[:, -1, :]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if text != shown:
            yield text

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


def _all_rows(mids: list, n: int) -> mx.array:
    """(n, T-1, D) from each decode step's (rows, (len(rows), 1, D) stream): zeros where a row
    had left the batch, which only positions after its EOS (masked) would read."""
    cols = []
    for rows, mid in mids:
        if len(rows) < n:
            full = mx.zeros((n, *mid.shape[1:]), dtype=mid.dtype)
            full[mx.array(rows)] = mid
            mid = full
        cols.append(mid)
    return mx.concatenate(cols, axis=1)


@dataclass(frozen=True)
class Trunk:
    """The residual stream after the frozen bottom blocks [0, depth) of a batch of groups: for the
    prompts (B, P, D) and the completions' inputs (N, T-1, D; None when T == 1). Computed once
    (`sequence_trunk`), it feeds the top blocks of the policy and of the reference alike."""

    depth: int
    prompt: mx.array
    completion: mx.array | None


# A right-padded batch is cut into a head (every row) and a tail (the rows still running) only
# when that skips at least this share of its positions: a cut costs a KV-cache row gather per
# layer and a second pass of per-op overhead.
RAGGED_MIN_SAVING = 0.1


def ragged_cut(lengths, width: int) -> tuple[int, int] | None:
    """How to run `width` right-padded positions of rows that need only their first `lengths`
    (N,): (cut, top), the head [0, cut) for every row and the tail [cut, top) for the rows
    longer than cut (top = the longest row; cut == top: no tail), the cut minimizing the
    positions run, N * cut + (rows longer than cut) * (top - cut). None when that skips less
    than RAGGED_MIN_SAVING of N * width (run the batch as it is)."""
    lengths = np.minimum(np.asarray(lengths, dtype=np.int64), width)
    n = lengths.size
    top = int(lengths.max()) if n else 0
    if top == 0:
        return None
    best, cut = n * top, top
    for c in np.unique(lengths):
        cost = n * int(c) + int((lengths > c).sum()) * (top - int(c))
        if 0 < c < top and cost < best:
            best, cut = cost, int(c)
    return (cut, top) if n * width - best >= RAGGED_MIN_SAVING * n * width else None


def ragged_blocks(model, x: mx.array, layers: range, cache: KVCache, lengths=None) -> mx.array:
    """model.blocks over right-padded rows x (N, T, D) continuing `cache`, where row i needs only
    its first lengths[i] positions: run as ragged_cut says, so padding past the rows' ends costs
    (almost) nothing. The result is (N, T, D); a position at or past its row's length holds
    either what the plain pass gives there or zeros, so read only positions < lengths. The cache
    is spent (its offset no longer matches every row). Differentiable like model.blocks.
    `lengths` None: every position is needed (model.blocks itself)."""
    N, T, D = x.shape
    plan = None if lengths is None else ragged_cut(lengths, T)
    if plan is None:
        return model.blocks(x, layers, cache)
    cut, top = plan
    parts = [model.blocks(x[:, :cut], layers, cache)]
    if top > cut:
        long = np.flatnonzero(np.asarray(lengths) > cut)
        rows = mx.array(long.astype(np.int32))
        tail = model.blocks(x[rows, cut:top], layers, cache.take_rows(long.tolist()))
        back = np.full(N, long.size, dtype=np.int32)  # a zero row for rows without a tail
        back[long] = np.arange(long.size, dtype=np.int32)
        zero = mx.zeros((1, top - cut, D), dtype=tail.dtype)
        parts.append(mx.concatenate([tail, zero])[mx.array(back)])
    if top < T:
        parts.append(mx.zeros((N, T - top, D), dtype=parts[0].dtype))
    return mx.concatenate(parts, axis=1)


def _run_groups(
    model, x_prompt, x_completion, prompt_pad, group_size, layers, T, norm, lengths=None
):
    """Blocks `layers` over prompts (B, P, D), then over completion inputs (N, T-1, D) against
    the prompt's keys broadcast to its G rows: (prompt's streams, completion's streams).
    `lengths` (N,): completion positions each row needs (ragged_blocks), or None for all."""
    B, P, _ = x_prompt.shape
    cache = KVCache.for_model(model, B, P, prompt_pad)
    h_prompt = model.blocks(x_prompt, layers, cache)
    h_comp = None
    if x_completion is not None:
        cache = cache.broadcast_batch(group_size, capacity=P + T)
        h_comp = ragged_blocks(model, x_completion, layers, cache, lengths)
    if norm:
        h_prompt = model.final_norm(h_prompt)
        h_comp = None if h_comp is None else model.final_norm(h_comp)
    return h_prompt, h_comp


def _check_groups(prompt_tokens, completions, group_size) -> None:
    B, N = prompt_tokens.shape[0], completions.shape[0]
    if N != B * group_size:
        raise ValueError(f"{N} completion rows != {B} prompts x group size {group_size}")


def sequence_trunk(model, prompt_tokens, prompt_pad, completions, group_size, depth) -> Trunk:
    """The stream after blocks [0, depth) for `sequence_hidden`'s inputs, without gradient."""
    _check_groups(prompt_tokens, completions, group_size)
    if not 0 < depth < len(model.layers):
        raise ValueError(f"trunk depth {depth} must be in 1..{len(model.layers) - 1}")
    T = completions.shape[1]
    x_comp = model.embed(completions[:, :-1]) if T > 1 else None
    h_prompt, h_comp = _run_groups(
        model, model.embed(prompt_tokens), x_comp, prompt_pad, group_size, range(depth), T, False
    )
    stop = mx.stop_gradient
    return Trunk(depth, stop(h_prompt), None if h_comp is None else stop(h_comp))


def sequence_hidden(
    model,
    prompt_tokens,
    prompt_pad,
    completions,
    group_size,
    trunk: Trunk | None = None,
    lengths=None,
) -> mx.array:
    """(B*G, T, D) hidden states that predict completion tokens (B*G, T) given prompts (B, P),
    each prompt run once: the prompt's final state predicts token 0, the completion's state at
    t predicts token t + 1. With `trunk` (sequence_trunk of the same inputs), only the blocks
    above its depth run. `lengths` (B*G,): only each row's first lengths[i] states are needed
    (the others are zeros or junk: ragged_blocks skips most of them)."""
    _check_groups(prompt_tokens, completions, group_size)
    T = completions.shape[1]
    if trunk is None:
        first, x_prompt = 0, model.embed(prompt_tokens)
        x_comp = model.embed(completions[:, :-1]) if T > 1 else None
    else:
        first, x_prompt, x_comp = trunk.depth, trunk.prompt, trunk.completion
    layers = range(first, len(model.layers))
    comp_lengths = None if lengths is None else np.maximum(np.asarray(lengths) - 1, 0)
    h_prompt, h_comp = _run_groups(
        model, x_prompt, x_comp, prompt_pad, group_size, layers, T, True, comp_lengths
    )
    h = mx.repeat(h_prompt[:, -1:, :], group_size, axis=0)  # (N, 1, D)
    return h if h_comp is None else mx.concatenate([h, h_comp], axis=1)  # (N, T, D)


def sequence_logprobs(
    model,
    prompt_tokens,
    prompt_pad,
    completions,
    group_size,
    temperature: float,
    return_entropy: bool = False,
    trunk: Trunk | None = None,
    valid: mx.array | None = None,
    keep_logits: bool = False,
    ragged: bool = False,
):
    """Log-probs of completions (B*G, T) given prompts (B, P), each prompt run once.

    Temperature 0 means the untempered softmax. With `return_entropy`, also the (B*G, T) entropy
    of each position's tempered distribution, a measurement: no gradient flows back through it.
    A frozen LM head (LoRA, or the embedding not trained) gets no gradient computed.
    `trunk`: as in sequence_hidden. `valid` (B*G, T), e.g. the completion mask: the LM head runs
    only where it is nonzero (padding after EOS costs no vocabulary-sized matmul or softmax);
    elsewhere log-prob and entropy are 0, so use them only under that mask. `ragged` (with
    `valid`): the blocks also skip most positions after each row's last valid token
    (ragged_blocks). `keep_logits`: for a call that a backward follows (kernels.token_logprobs
    keeps the head's logits for it)."""
    if valid is not None and tuple(valid.shape) != tuple(completions.shape):
        raise ValueError(f"valid has shape {valid.shape}, completions {completions.shape}")
    lengths = last_nonzero(valid) if ragged and valid is not None else None
    h = sequence_hidden(model, prompt_tokens, prompt_pad, completions, group_size, trunk, lengths)
    temperature = temperature if temperature > 0 else 1.0
    keep = None
    if valid is not None:
        flat = np.flatnonzero(np.asarray(valid).reshape(-1))
        keep = flat if flat.size < valid.size else None
        if flat.size == 0:  # nothing to score: no head at all
            zeros = mx.zeros(completions.shape, dtype=mx.float32)
            return (zeros, zeros) if return_entropy else zeros
    if keep is not None:
        # Gather the valid positions' states, run the head on them alone, and read the results
        # back by a gather (index `len(keep)`: an appended 0 for every other position), so the
        # gradient flows back to exactly the positions it came from.
        n, t = completions.shape
        back = np.full(n * t, keep.size, dtype=np.int32)
        back[keep] = np.arange(keep.size, dtype=np.int32)
        idx, back = mx.array(keep.astype(np.int32)), mx.array(back)
        h, completions = h.reshape(n * t, -1)[idx], completions.reshape(n * t)[idx]
    outs = kernels.token_logprobs(
        h,
        model.lm_head_weight(),
        completions,
        temperature,
        return_entropy=return_entropy,
        weight_grad=head_trains(model),
        entropy_grad=False,
        keep_logits=keep_logits,
    )
    if keep is None:
        return outs
    zero = mx.zeros((1,), dtype=mx.float32)
    spread = [
        mx.concatenate([o, zero])[back].reshape(n, t) for o in (outs if return_entropy else (outs,))
    ]
    return tuple(spread) if return_entropy else spread[0]


def last_nonzero(mask) -> np.ndarray:
    """(N,) one past each row's last nonzero entry of `mask` (N, T); 0 for an all-zero row."""
    m = np.asarray(mask).reshape(np.shape(mask)[0], -1) != 0
    T = m.shape[1]
    return np.where(m.any(axis=1), T - np.argmax(m[:, ::-1], axis=1), 0).astype(np.int64)


def head_trains(model) -> bool:
    """Whether the LM head's weight (the embedding when tied) holds trainable parameters."""
    owner = model.model.embed_tokens if model.args.tie_word_embeddings else model.lm_head
    return bool(tree_flatten(owner.trainable_parameters()))


def frozen_depth(model) -> int:
    """How many bottom blocks hold no trainable parameter (0 when the embedding trains): the
    blocks a `Trunk` may run once for the policy and a reference that differs only above them."""
    if tree_flatten(model.model.embed_tokens.trainable_parameters()):
        return 0
    for i, layer in enumerate(model.layers):
        if tree_flatten(layer.trainable_parameters()):
            return i
    return len(model.layers)


def check_sampling(group_size, max_new_tokens, temperature, top_p) -> None:
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description="Sample from a model with Gwen's group sampler."
    )
    p.add_argument("--model", default="smollm2-135m", help=load_weights.MODEL_HELP)
    p.add_argument("--prompt", action="append", required=True, help="a user prompt (repeatable)")
    p.add_argument("--group-size", type=int, default=1, help="samples per prompt")
    p.add_argument("--max-new-tokens", type=int, default=128, help="max new tokens per sample")
    p.add_argument("--temperature", type=float, default=0.7, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    flags.add_dtype(p)
    p.add_argument("--enable-thinking", action="store_true", help="let a Qwen3 model think first")
    flags.renamed(p, "--max-tokens", "--max-new-tokens")
    p.add_argument("--json", action="store_true", help="print one JSON object (texts and speed)")
    flags.renamed(p, "--thinking", "--enable-thinking")
    a = p.parse_args(argv)
    with errors.as_user_error(ValueError):  # the flags, before the model loads
        check_sampling(a.group_size, a.max_new_tokens, a.temperature, a.top_p)
        dtype = backend.parse_dtype(a.dtype)
    backend.announce()
    gwen = Gwen.load(a.model, dtype, enable_thinking=a.enable_thinking)
    start = time.perf_counter()
    s = gwen.sample_group(a.prompt, a.group_size, a.max_new_tokens, a.temperature, a.top_p, a.seed)
    elapsed = time.perf_counter() - start
    ntok = int(s.mask.sum().item())
    if a.json:
        samples = [
            {"prompt": a.prompt[i // a.group_size], "sample": i % a.group_size, "text": text,
             "tokens": int(s.lengths[i]), "finished": bool(s.finished[i])}
            for i, text in enumerate(s.texts)
        ]  # fmt: skip
        print(strict_json.dumps({"model": a.model, "samples": samples, "tokens": ntok,
                                 "seconds": elapsed, "tokens_per_s": ntok / elapsed}))  # fmt: skip
        return 0
    for i, text in enumerate(s.texts):
        if len(s.texts) > 1:
            print(f"--- prompt {i // a.group_size}, sample {i % a.group_size}")
        print(text)
    print(f"[{ntok} tokens in {elapsed:.2f}s, {ntok / elapsed:.1f} tok/s]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
