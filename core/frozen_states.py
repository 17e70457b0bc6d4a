"""A frozen model's residual stream as features, and the ridge readout the probes fit on them.

`block_states` runs the embedding and the blocks once and keeps the stream after chosen blocks. Two
readers: the grader (grade.Featurizer: answer-averaged and last-token states after blocks 8 and 16)
and the probes (experiments/premise_probe.py and experiments/category_probe.py: the last prompt
token after every block, `last_token_states`, read by `ridge_fit`). Nothing here trains or changes
the model.
"""

import sys

from core import backend  # noqa: F401

# isort: split
from core import chat_format

import mlx.core as mx
import numpy as np
from tqdm import tqdm


def block_states(model, tokens: mx.array, stops, pad: mx.array | None = None) -> list[mx.array]:
    """[(B, L, D) residual stream after block `stop`, for each of `stops` (ascending; 0 is the
    embedding's output)], in one pass over the blocks; pad as in model.blocks."""
    h, prev, out = model.embed(tokens), 0, []
    for stop in stops:
        h = model.blocks(h, range(prev, stop), pad=pad)
        prev = stop
        out.append(h)
    return out


def last_token_states(model, tokenizer, prompts: list[str], progress: bool = True) -> np.ndarray:
    """(N, layers + 1, D) float64: the residual stream at each prompt's last token after the
    embedding (index 0) and after block i (index i + 1), the prompt in the chat template."""
    stops = range(len(model.layers) + 1)
    out = []
    for text in tqdm(prompts, desc="states", unit="prompt", disable=not progress, file=sys.stderr):
        tokens = mx.array([chat_format.chat_tokens(tokenizer, text)])
        rows = [h[0, -1] for h in block_states(model, tokens, stops)]
        out.append(np.array(mx.stack(rows).astype(mx.float32), dtype=np.float64))
    return np.stack(out)


def ridge_fit(x: np.ndarray, y: np.ndarray, strength: float):
    """Ridge regression of y (+-1) on standardized x with an intercept: returns score(x_new).
    Solved in whichever of the primal (D x D) or dual (N x N) form is smaller. A constant column
    carries nothing and is left out: were it kept, x - mean would be rounding noise (~1e-17) and
    so would the scores' differences, ranking rows by BLAS order where they tie (all-constant x,
    such as the last token before any block: every score is exactly y.mean())."""
    live = x.std(0) >= 1e-8
    x = x[:, live]
    mean, std = x.mean(0), x.std(0)
    z = (x - mean) / std
    y0 = y.mean()
    n, d = z.shape
    if d == 0:
        w = np.zeros(0)
    elif d <= n:
        w = np.linalg.solve(z.T @ z + strength * np.eye(d), z.T @ (y - y0))
    else:
        w = z.T @ np.linalg.solve(z @ z.T + strength * np.eye(n), y - y0)
    return lambda x_new: ((x_new[:, live] - mean) / std) @ w + y0
