"""Token samplers for Gwen's decode loop: one draw per row from tempered, optionally top-p logits.

Each returns (tokens, log-prob of each drawn token under the tempered FULL softmax): the quantity
GRPO's ratio uses; top-p only restricts which token is drawn. Temperature 0 is greedy. The numpy
sampler serves the CPU backend, where MLX's vocabulary-sized exp costs ~8x numpy's (where the
native CPU kernels built, it draws without top-p by their `sample_rows`, ~4x faster than numpy);
the MLX one serves Metal/CUDA. `make_sampler` picks one (cpu_ops' switch) and holds its seeded
RNG, so the same seed gives the same tokens. NaN or +inf logits raise, naming the rows. It is
not a decode loop (gwen.py) and has no repetition penalties or stop strings.
"""

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core import cpu_ops

import mlx.core as mx
import numpy as np

KINDS = ("numpy", "mlx")


def default_kind() -> str:
    return "numpy" if cpu_ops.ENABLED else "mlx"


def make_sampler(kind: str, seed, temperature: float, top_p: float):
    """A function logits (N, V) mx.array -> (tokens (N,) int32, log-probs (N,) float32), numpy
    arrays, drawing from a generator seeded with `seed` and advanced by each call.

    `seed` is an int (one generator for all rows) or a sequence of N ints, one generator per
    row: then row i's draws depend on seeds[i] alone, not on which other rows share the batch
    (train.py relies on it so that ranks splitting a batch draw what one process would).
    The numpy sampler also takes `rows`, the indices into a batch of `total` rows of the
    logits' rows when the others have left the batch: each row then draws exactly what it would
    have drawn with all `total` rows present (gwen.py drops finished rows from the decode)."""
    per_row = np.ndim(seed) > 0
    if kind == "numpy":
        rng = RowGenerators(seed) if per_row else np.random.default_rng(seed)

        def draw_numpy(logits, rows=None, total=None):
            src = rng if rows is None else _SomeRows(rng, rows, total)
            if temperature > 0 and top_p >= 1.0 and (ext := cpu_ops.native(logits)) is not None:
                return sample_native(ext, logits, temperature, src)
            return sample_numpy(np.array(logits.astype(mx.float32)), temperature, top_p, src)

        return draw_numpy
    if kind == "mlx":
        if per_row:
            return _per_row_mlx(seed, temperature, top_p)
        state = {"key": mx.random.key(seed)}

        def draw_mlx(logits):
            state["key"], sub = mx.random.split(state["key"])
            tok, lp = sample_mlx(logits, temperature, top_p, sub)
            return np.array(tok), np.array(lp)

        return draw_mlx
    raise ValueError(f"sampler kind {kind!r}: use one of {KINDS}")


class RowGenerators:
    """One numpy generator per row, with the `random(n)` call sample_numpy makes: row i's
    uniform comes from seeds[i]'s generator only."""

    def __init__(self, seeds):
        self.gens = [np.random.default_rng(int(s)) for s in seeds]

    def random(self, n: int) -> np.ndarray:
        if n != len(self.gens):
            raise ValueError(f"{n} rows to sample but {len(self.gens)} row seeds: pass one per row")
        return np.array([g.random() for g in self.gens])


class _SomeRows:
    """sample_numpy's `random(n)` for the rows `rows` of a batch of `total`: per-row generators
    draw for those rows only; one shared generator draws `total` uniforms and keeps those rows',
    so its stream stays the one the whole batch would use."""

    def __init__(self, rng, rows, total: int):
        self.rng, self.rows, self.total = rng, np.asarray(rows), total

    def random(self, n: int) -> np.ndarray:
        if n != len(self.rows) or self.total is None or len(self.rows) > self.total:
            raise ValueError(
                f"{n} rows to sample as rows {self.rows[:8].tolist()} of {self.total}: pass "
                "the logits' row indices and the whole batch's size"
            )
        if isinstance(self.rng, RowGenerators):
            return np.array([self.rng.gens[i].random() for i in self.rows])
        return self.rng.random(self.total)[self.rows]


def _per_row_mlx(seeds, temperature: float, top_p: float):
    """The MLX sampler with one key per row (vmapped), split after every draw."""
    state = {"keys": mx.stack([mx.random.key(int(s)) for s in seeds])}  # (N, 2)
    split = mx.vmap(mx.random.split)

    def draw_mlx_rows(logits):
        if logits.shape[0] != state["keys"].shape[0]:
            raise ValueError(
                f"{logits.shape[0]} rows to sample but {state['keys'].shape[0]} row seeds: "
                "pass one per row"
            )
        keys = split(state["keys"])  # (N, 2, 2)
        state["keys"] = keys[:, 0]
        tok, lp = sample_mlx(logits, temperature, top_p, keys[:, 1])
        return np.array(tok), np.array(lp)

    return draw_mlx_rows


def sample_numpy(logits: np.ndarray, temperature: float, top_p: float, rng):
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


def sample_native(ext, logits: mx.array, temperature: float, rng):
    """sample_numpy's draw (temperature > 0, no top-p) by the native kernel (cpu_native's
    `sample_rows`), inside the graph that computes `logits`: the same uniform per row and the
    same inverse-CDF rule, so the same tokens but where float rounding moves a token's edge past
    the draw (about 1 in 10^4 rows; either token is a correct draw)."""
    u = mx.array(rng.random(logits.shape[0]), dtype=mx.float64)
    tok, logp, total = ext.sample_rows(logits, u, 1.0 / temperature)
    mx.eval(tok, logp, total)
    total = np.array(total)
    bad = np.flatnonzero(~(np.isfinite(total) & (total > 0)))
    if len(bad):
        raise ValueError(f"logits of rows {bad[:8].tolist()} hold NaN or +inf: cannot sample")
    return np.array(tok), np.array(logp)


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


def _categorical(logits: mx.array, key: mx.array) -> mx.array:
    """mx.random.categorical over rows; with keys (N, 2), row i draws with key i alone (the same
    Gumbel-max draw categorical makes, vmapped: categorical itself cannot be)."""
    if key.ndim == 1:
        return mx.random.categorical(logits, key=key)
    noise = mx.vmap(lambda k: mx.random.gumbel(shape=logits.shape[1:], key=k))(key)
    return mx.argmax(logits + noise, axis=-1)


def sample_mlx(logits: mx.array, temperature: float, top_p: float, key):
    """Like sample_numpy, drawing with `key`: one key (2,) for all rows, or one per row (N, 2)."""
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
        tokens = _categorical(mx.where(logz >= cutoff[:, None], logz, -mx.inf), key)
    else:
        tokens = _categorical(logz, key)
    logp = mx.take_along_axis(logz, tokens[:, None], axis=-1)[:, 0]
    return tokens.astype(mx.int32), logp
