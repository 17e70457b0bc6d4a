"""Data-parallel training over several processes with MLX's own engine (`mx.distributed`).

Launch a trainer with `mlx.launch -n N` (ring backend: local ranks over 127.0.0.1, or several
machines from a hostfile; knowledge/distributed.md). Without a launcher `mx.distributed.init()`
is a group of one and every collective here is skipped (its input handed back), so a
single-process run takes no other path. How train.py uses it: every rank draws the step's whole
batch from the same seeded stream, samples and judges its own block of groups (`shard`), and
`gather_rollout` gives every rank the full batch, equal to what one process would have drawn
(sampler seeds are per completion row). Each rank then takes gradients on its own groups,
weighted by their share of the full batch's loss (grpo.micro_batch_shares), and
`sum_gradients` adds them, so every rank applies the same update. Rank 0 alone writes logs and
checkpoints (`is_main`, `main_only`).
Not here: model or tensor parallelism, fault tolerance (a rank that dies ends the job), launching.
"""

import hashlib
import json
import pickle
import socket
from collections.abc import Callable

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core.errors import UserError

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten, tree_map

from gwen import GroupSample
from rewards.registry import Scores

_group = None


def group() -> mx.distributed.Group:
    """The global group, initialized once: size 1 when no launcher started this process."""
    global _group
    if _group is None:
        _group = mx.distributed.init()
    return _group


def rank() -> int:
    return group().rank()


def size() -> int:
    return group().size()


def is_main() -> bool:
    """Rank 0: the one process that writes logs, checkpoints and progress bars."""
    return rank() == 0


class LaunchError(UserError, ValueError):
    """A batch that cannot be split over the launched ranks, or ranks that start from different
    settings, data or weights; the CLIs print it and exit 2."""


def check_split(n: int, parts: int, what: str) -> None:
    """`n` items (prompt groups) must split into size() ranks x `parts` equal micro-batches."""
    need = size() * parts
    if n % need:
        raise LaunchError(
            f"{what}={n} cannot be split evenly over {size()} ranks x {parts} micro-batches: "
            f"use a multiple of {need}, or launch fewer ranks"
        )


def shard(n: int) -> range:
    """This rank's contiguous block of n items; the blocks of all ranks cover 0..n-1 in order
    (sizes differ by at most one when size() does not divide n; a block may be empty)."""
    r, k = rank(), size()
    return range(r * n // k, (r + 1) * n // k)


def share_of(seq):
    """This rank's contiguous block of a sequence (list, range, array): all of it in one process."""
    mine = shard(len(seq))
    return seq[mine.start : mine.stop]


def micro_batches(n_groups: int, group_size: int, k: int) -> list[tuple[slice, slice]]:
    """This rank's k micro-batches of whole groups, as (prompt rows, completion rows) of the
    full batch; one rank gets all n_groups."""
    mine = shard(n_groups)
    ends = [mine.start + i * len(mine) // k for i in range(k + 1)]
    return [
        (slice(a, b), slice(a * group_size, b * group_size))
        for a, b in zip(ends, ends[1:], strict=False)
    ]


def sum_gradients(grads):
    """Each leaf summed over the ranks (lazy), in ~32 MB buckets: mlx.nn.average_gradients
    times N. A rank's gradient must already carry its share of the batch's weight."""
    n = size()
    if n == 1:
        return grads
    return tree_map(lambda g: g * n, nn.average_gradients(grads))


def sum_metrics(metrics: dict, maxed: tuple = ()) -> dict:
    """Scalar metrics summed over the ranks (each already weighted by its share), except the
    keys in `maxed`, which take the maximum; one collective each, lazy."""
    if size() == 1:
        return metrics
    out = {}
    for keys, op in (
        ([k for k in metrics if k not in maxed], mx.distributed.all_sum),
        ([k for k in metrics if k in maxed], mx.distributed.all_max),
    ):
        if keys:
            values = op(mx.stack([mx.array(metrics[k], dtype=mx.float32) for k in keys]))
            out |= {k: values[i] for i, k in enumerate(keys)}
    return out


def gather_objects(obj) -> list:
    """Every rank's `obj` (picklable), in rank order, on every rank."""
    if size() == 1:
        return [obj]
    data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    lengths = np.array(mx.distributed.all_gather(mx.array([len(data)], dtype=mx.int32)))
    width = int(lengths.max())
    buf = np.zeros(width, dtype=np.uint8)
    buf[: len(data)] = data
    every = np.array(mx.distributed.all_gather(mx.array(buf)))
    return [pickle.loads(every[i * width : i * width + n].tobytes()) for i, n in enumerate(lengths)]


def gather_lists(*lists: list) -> tuple[list, ...]:
    """Each list concatenated over the ranks in rank order, on every rank (one gather)."""
    parts = gather_objects(lists)
    return tuple(sum((p[i] for p in parts), []) for i in range(len(lists)))


def main_value(obj):
    """Rank 0's `obj` on every rank (e.g. a run folder named after rank 0's clock)."""
    return gather_objects(obj)[0]


def any_rank(flag: bool) -> bool:
    """True on every rank if `flag` is True on any (e.g. one rank caught Ctrl-C: all stop)."""
    if size() == 1:
        return bool(flag)
    return bool(mx.distributed.all_max(mx.array([int(bool(flag))])).item())


def check_same(make_values: Callable[[], dict]) -> None:
    """Raise LaunchError unless every rank's make_values() equals rank 0's, naming the first
    entry that differs (make_values is not called with one rank)."""
    if size() == 1:
        return
    every = gather_objects(make_values())
    for r, values in enumerate(every[1:], start=1):
        for key, value in values.items():
            if value != every[0][key]:
                mine, main = _difference(value, every[0][key])
                raise LaunchError(
                    f"rank {r} starts with a different {key} than rank 0 ({mine} vs {main}): "
                    "launch every rank with the same settings, and let every host read the same "
                    "model, data and run folder (knowledge/distributed.md)"
                )


def _difference(a, b) -> tuple[str, str]:
    """Short reprs of where a and b differ (the differing keys of two dicts)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        a, b = {k: a.get(k) for k in keys}, {k: b.get(k) for k in keys}
    return repr(a)[:160], repr(b)[:160]


def checksum(tree) -> str:
    """sha256 of an array tree's names and bytes: equal trees give equal strings, on any host."""
    h = hashlib.sha256()
    for name, v in tree_flatten(tree):
        raw = v.view(mx.uint16) if v.dtype == mx.bfloat16 else v  # numpy has no bfloat16
        h.update(name.encode() + str(v.dtype).encode())
        h.update(np.array(raw).tobytes())
    return h.hexdigest()


def digest(obj) -> str:
    """sha256 of a JSON-able object (e.g. the training records): cheap to compare over ranks."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


class _Discard:
    """Stands in for a log on ranks other than 0: every method call does nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def main_only(factory: Callable):
    """factory() on rank 0; elsewhere an object whose every method does nothing."""
    return factory() if is_main() else _Discard()


def gather_rollout(sample: GroupSample, scores: Scores, pad_id: int):
    """This rank's sampled and scored groups -> the whole batch's, in rank order, on every rank.

    Prompts are left-padded and completions right-padded with pad_id to the widest rank's, so
    the arrays equal the ones one process sampling every prompt at once builds."""
    if size() == 1:
        return sample, scores
    parts = gather_objects(host_fields(sample, scores))
    details = None if parts[0]["details"] is None else sum((p["details"] for p in parts), [])
    scores = Scores(
        np.concatenate([p["values"] for p in parts]),
        details,
        sum(p["failures"] for p in parts),
    )
    return concat_samples(parts, pad_id, sample.group_size, sample.temperature), scores


def host_fields(sample: GroupSample, scores: Scores) -> dict:
    """What a rank sends of its rollout: the sample's and the scores' fields as numpy/Python."""
    return {
        "prompt_tokens": np.array(sample.prompt_tokens),
        "prompt_pad": np.array(sample.prompt_pad),
        "tokens": np.array(sample.tokens),
        "mask": np.array(sample.mask),
        "logprobs": np.array(sample.logprobs),
        "texts": sample.texts,
        "finished": sample.finished,
        "values": scores.values,
        "details": scores.details,
        "failures": scores.failures,
    }


def concat_samples(parts: list[dict], pad_id: int, group_size: int, temperature: float):
    """host_fields of several blocks of prompts -> one GroupSample, prompts re-left-padded and
    completions right-padded to the widest block's."""
    P = max(p["prompt_tokens"].shape[1] for p in parts)
    T = max(p["tokens"].shape[1] for p in parts)

    def pad(x, left, right, value):
        return np.pad(x, ((0, 0), (left, right)), constant_values=value)

    prompts, prompt_pad, tokens, mask, logprobs = [], [], [], [], []
    for p in parts:
        extra_p, extra_t = P - p["prompt_tokens"].shape[1], T - p["tokens"].shape[1]
        prompts.append(pad(p["prompt_tokens"], extra_p, 0, pad_id))
        prompt_pad.append(p["prompt_pad"] + extra_p)
        tokens.append(pad(p["tokens"], 0, extra_t, pad_id))
        mask.append(pad(p["mask"], 0, extra_t, 0.0))
        logprobs.append(pad(p["logprobs"], 0, extra_t, 0.0))
    return GroupSample(
        mx.array(np.concatenate(prompts)),
        mx.array(np.concatenate(prompt_pad)),
        mx.array(np.concatenate(tokens)),
        mx.array(np.concatenate(mask)),
        mx.array(np.concatenate(logprobs)),
        sum((p["texts"] for p in parts), []),
        np.concatenate([p["finished"] for p in parts]),
        group_size,
        temperature,
    )


def free_local_port(n: int) -> int:
    """A port p with p .. p + n - 1 free on 127.0.0.1, for `mlx.launch -n n --starting-port p`
    (the ring backend listens on p + rank); used by the tests and bench/distributed.py."""
    rng = np.random.default_rng()
    for _ in range(200):
        p = int(rng.integers(20000, 60000))
        try:
            for q in range(p, p + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", q))
        except OSError:
            continue
        return p
    raise RuntimeError(f"found no {n} consecutive free ports on 127.0.0.1")
