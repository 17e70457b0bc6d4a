"""evaluate.py's cache: answers, scores and grades kept as JSON under a folder, keyed by a hash of
what produced them (the model folder's files, the prompts, the settings), so a second report of
the same models is instant. A model folder that changes (a retrained grader, a new checkpoint)
changes its fingerprint and misses the cache. Not a general store: values must be JSON.
"""

import hashlib
import json
from pathlib import Path

from core.atomic import atomic_write

from load_weights import resolve


def model_fingerprint(ref: str) -> str:
    """Identity of a model (or reward-model) folder for the cache: its files' names, sizes and
    modification times (an alias or hub id: the resolved file)."""
    path = Path(ref) if Path(ref).exists() else resolve(ref).path
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    listing = [
        (
            str(f.relative_to(path) if path.is_dir() else f.name),
            f.stat().st_size,
            f.stat().st_mtime_ns,
        )
        for f in files
        if f.is_file()
    ]
    return hashlib.sha256(json.dumps([str(path), listing]).encode()).hexdigest()[:16]


class Cache:
    """JSON values under cache_dir keyed by a hash of what produced them."""

    def __init__(self, directory: str | None):
        self.dir = Path(directory) if directory else None

    @staticmethod
    def key(*parts) -> str:
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]

    def get(self, key: str):
        if self.dir is None or not (self.dir / f"{key}.json").is_file():
            return None
        return json.loads((self.dir / f"{key}.json").read_text())

    def put(self, key: str, value) -> None:
        if self.dir is None:
            return
        atomic_write(self.dir / f"{key}.json", json.dumps(value))
