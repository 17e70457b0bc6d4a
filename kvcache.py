"""The one KV cache rl-values needs: preallocated, left-padded, prefilled once per prompt.

`KVCache` holds every layer's keys and values in buffers of fixed capacity (B, Hkv, S, hd); the
model writes each chunk at slot `offset` and attends over slots [0, offset). Rows share one slot
clock; a row's `pad` leading slots are empty (masked by the model). `snapshot()` freezes the
state; `broadcast_batch(G)` repeats each row G times (row b -> rows b*G .. b*G+G-1) so a prompt
prefilled once serves all G samples of its group; `take_rows` picks any rows (uneven groups).
It is not a paged or rotating cache.
"""

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

import mlx.core as mx
import numpy as np


class KVCache:
    def __init__(
        self,
        num_layers: int,
        batch: int,
        num_kv_heads: int,
        head_dim: int,
        capacity: int,
        dtype=mx.float32,
        pad: mx.array | None = None,
    ):
        if capacity <= 0:
            raise ValueError(f"KVCache capacity must be positive, got {capacity}")
        shape = (batch, num_kv_heads, capacity, head_dim)
        self.keys = [mx.zeros(shape, dtype=dtype) for _ in range(num_layers)]
        self.values = [mx.zeros(shape, dtype=dtype) for _ in range(num_layers)]
        self.pad = mx.zeros((batch,), dtype=mx.int32) if pad is None else pad.astype(mx.int32)
        if self.pad.shape != (batch,):
            raise ValueError(f"pad has shape {self.pad.shape}, expected ({batch},)")
        self.offset = 0
        self._pending = 0  # slots written by the current forward, committed by advance()

    @classmethod
    def for_model(
        cls, model, batch: int, capacity: int, pad: mx.array | None = None, dtype=None
    ) -> "KVCache":
        a = model.args
        dtype = dtype or model.model.embed_tokens.weight.dtype
        return cls(
            a.num_hidden_layers, batch, a.num_key_value_heads, a.head_dim, capacity, dtype, pad
        )

    @property
    def batch(self) -> int:
        return self.keys[0].shape[0]

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    def update(self, layer: int, k: mx.array, v: mx.array) -> tuple[mx.array, mx.array]:
        """Write k, v (B, Hkv, L, hd) at slot `offset`; return all slots [0, offset + L)."""
        L = k.shape[2]
        end = self.offset + L
        if end > self.capacity:
            raise ValueError(
                f"KV cache overflow: offset {self.offset} + {L} new slots > capacity "
                f"{self.capacity}; allocate a larger cache (prompt length + max new tokens)"
            )
        self.keys[layer][:, :, self.offset : end, :] = k
        self.values[layer][:, :, self.offset : end, :] = v
        self._pending = L
        return self.keys[layer][:, :, :end, :], self.values[layer][:, :, :end, :]

    def advance(self, n: int) -> None:
        if n != self._pending:
            raise RuntimeError(f"advance({n}) after a forward that wrote {self._pending} slots")
        self.offset += n
        self._pending = 0

    def state(self) -> list[mx.array]:
        return self.keys + self.values + [self.pad]

    def snapshot(self) -> "KVCache":
        """A frozen copy holding only the filled slots; later writes to self do not touch it."""
        snap = KVCache.__new__(KVCache)
        snap.keys = [k[:, :, : self.offset, :] for k in self.keys]
        snap.values = [v[:, :, : self.offset, :] for v in self.values]
        snap.pad, snap.offset, snap._pending = self.pad, self.offset, 0
        return snap

    def broadcast_batch(self, group_size: int, capacity: int | None = None) -> "KVCache":
        """A new cache with each row repeated `group_size` times, room for `capacity` slots."""
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        capacity = capacity or self.capacity
        if capacity < self.offset:
            raise ValueError(f"capacity {capacity} < filled slots {self.offset}")
        out = KVCache.__new__(KVCache)
        out.keys, out.values = [], []
        for src, dst in ((self.keys, out.keys), (self.values, out.values)):
            for buf in src:
                if capacity == buf.shape[2]:  # one pass; slots past offset are never read
                    dst.append(mx.repeat(buf, group_size, axis=0))
                    continue
                B, H, _, D = buf.shape
                filled = mx.repeat(buf[:, :, : self.offset, :], group_size, axis=0)
                room = mx.zeros((B * group_size, H, capacity - self.offset, D), dtype=buf.dtype)
                dst.append(mx.concatenate([filled, room], axis=2))
        out.pad = mx.repeat(self.pad, group_size, axis=0)
        out.offset, out._pending = self.offset, 0
        return out

    def take_rows(self, rows: list[int], capacity: int | None = None) -> "KVCache":
        """A new cache whose row i is this cache's row rows[i], with room for `capacity` slots.

        Sorted equal-sized groups of rows take one `broadcast_batch`; any other selection (a
        group cut by a micro-batch boundary, say) gathers rows."""
        if not rows or min(rows) < 0 or max(rows) >= self.batch:
            raise ValueError(f"rows must index this cache's {self.batch} rows, got {rows[:8]}")
        counts = np.bincount(rows, minlength=self.batch)
        if (counts == counts[0]).all() and list(rows) == sorted(rows):
            return self.broadcast_batch(int(counts[0]), capacity)
        if capacity in (None, self.capacity):  # a gather alone: no copy at the new capacity
            out = KVCache.__new__(KVCache)
            out.keys, out.values = self.keys, self.values
            out.pad, out.offset, out._pending = self.pad, self.offset, 0
        else:
            out = self.broadcast_batch(1, capacity)
        idx = mx.array(rows, dtype=mx.int32)
        out.keys = [k[idx] for k in out.keys]
        out.values = [v[idx] for v in out.values]
        out.pad = out.pad[idx]
        return out
