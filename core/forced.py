"""Teacher forcing: a prompt in the policy's chat format followed by a given text, batched
left-padded, and the log-probability the model gives that text.

sft.py trains on these batches (mean cross-entropy over the answer tokens); the experiments
experiments/premise_probe.py and experiments/stance_pairs.py read the summed log-probability of one
fixed text after each prompt.
"""

from core import chat_format, kernels

import mlx.core as mx
import numpy as np


def encode(tokenizer, prompt: str, answer: str, eos: bool = True) -> tuple[list[int], int]:
    """(prompt tokens + answer tokens [+ EOS], number of prompt tokens): the prompt as the policy
    reads it, the answer as the policy would write it; eos=False leaves the answer open (a text
    that begins an answer, such as a stance sentence)."""
    prompt_tokens = chat_format.chat_tokens(tokenizer, prompt)
    answer_tokens = tokenizer.encode(answer.strip(), add_special_tokens=False)
    if not answer_tokens:
        raise ValueError(f"the answer text {answer!r} has no tokens")
    closing = [tokenizer.eos_token_id] if eos else []
    return prompt_tokens + answer_tokens + closing, len(prompt_tokens)


def answer_mask(prompt_lens, seq_lens, width: int) -> np.ndarray:
    """(B, width - 1) float32: 1 where the *target* token is an answer token or the closing EOS.

    Rows are left-padded to `width`; target position t predicts slot t + 1, which is an answer
    slot iff t + 1 >= pad + prompt_len with pad = width - seq_len."""
    prompt_lens, seq_lens = np.asarray(prompt_lens), np.asarray(seq_lens)
    first = (width - seq_lens) + prompt_lens  # (B,) slot of the first answer token
    slots = np.arange(1, width)[None, :]  # (1, width - 1) the target slots
    return (slots >= first[:, None]).astype(np.float32)


def make_batch(examples: list[tuple[list[int], int]], pad_id: int):
    """Left-padded (inputs, targets, mask, pad) for examples [(tokens, prompt_len)]: inputs and
    targets (B, W - 1) int32, mask (B, W - 1) float32 (answer_mask), pad (B,) left-pad counts."""
    lens = [len(t) for t, _ in examples]
    width = max(lens)
    rows = np.full((len(examples), width), pad_id, dtype=np.int32)
    for i, (tokens, _) in enumerate(examples):
        rows[i, width - len(tokens) :] = tokens
    mask = answer_mask([p for _, p in examples], lens, width)
    pad = np.array([width - n for n in lens], dtype=np.int32)
    return mx.array(rows[:, :-1]), mx.array(rows[:, 1:]), mx.array(mask), mx.array(pad)


def row_logprob(model, inputs, targets, mask, pad) -> mx.array:
    """(B,) float32: each row's summed log p(answer tokens) (make_batch's mask)."""
    return hidden_logprob(model, model.hidden(inputs, pad=pad), targets, mask)


def hidden_logprob(model, h, targets, mask) -> mx.array:
    """row_logprob from the final hidden states `h` of its inputs (for a caller that reads
    something else from the same forward)."""
    logp = kernels.token_logprobs(h, model.lm_head_weight(), targets)
    return mx.sum(logp * mask, axis=1)


def token_nll(model, inputs, targets, mask, pad) -> tuple[mx.array, mx.array]:
    """(sum of -log p(answer token), number of answer tokens) over the batch, float32."""
    return -mx.sum(row_logprob(model, inputs, targets, mask, pad)), mx.sum(mask)


def text_logprobs(model, tokenizer, prompts: list[str], text: str, batch: int = 16) -> np.ndarray:
    """(len(prompts),) float64: log p(text | prompt) summed over the text's tokens, the text
    opening the answer (no EOS after it), no gradient."""
    rows = [encode(tokenizer, p, text, eos=False) for p in prompts]
    out = []
    for i in range(0, len(rows), batch):
        s = row_logprob(model, *make_batch(rows[i : i + batch], tokenizer.eos_token_id))
        out.append(np.array(s, dtype=np.float64))
    return np.concatenate(out) if out else np.zeros(0)
