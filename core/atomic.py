"""Folders written whole or not at all: the one atomic folder write every saver uses.

`atomic_folder(out)` yields an empty temp folder beside `out` (`.tmp-NAME-PID`, the same
filesystem, so the final rename is atomic); when the block ends, a previous `out` is removed and
the temp folder renamed into its place. A crash or an exception inside the block leaves `out` as
it was and only the `.tmp-*` folder behind. With `fsync=True` every file and folder is flushed to
disk before the rename (checkpoints, which must survive a power cut). `atomic_file(path)` does the
same for one file (JSONL, caches, the checkpoint's `latest` pointer, a purged event file): it
yields the open temp file, and an exception removes the temp file and leaves `path` as it was;
`atomic_write(path, data)` writes a string or bytes through it.
"""

import contextlib
import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


def fsync_tree(path: Path) -> None:
    """Flush every file below `path`, then every folder (subfolders first, `path` last)."""
    for p in sorted(path.rglob("*")):
        if p.is_file():
            with open(p, "rb") as f:
                os.fsync(f.fileno())
    for d in [*sorted(p for p in path.rglob("*") if p.is_dir()), path]:
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_folder(out, fsync: bool = False) -> Iterator[Path]:
    """Write the folder `out` atomically: fill the yielded temp folder; on a clean exit it
    replaces `out` (parents made as needed)."""
    out = Path(out)
    tmp = out.with_name(f".tmp-{out.name}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    yield tmp
    if fsync:
        fsync_tree(tmp)
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)


_temp_ids = itertools.count()


@contextlib.contextmanager
def atomic_file(path, mode: str = "w", fsync: bool = False) -> Iterator:
    """Write the file `path` atomically: write to the yielded file object (mode "w", UTF-8, or
    "wb"); on a clean exit it replaces `path` (parents made as needed). The temp file's name
    (`.tmp-PID-N` beside `path`) carries no part of `path`'s, so a reader that picks files by name
    (TensorBoard: any name with "tfevents"; a `*.jsonl` glob) never picks up a half-written one."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file mode {mode!r}: use 'w' (text) or 'wb' (bytes)")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{os.getpid()}-{next(_temp_ids)}")
    try:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(path, data: str | bytes, fsync: bool = False) -> Path:
    """Write `data` (text as UTF-8, or bytes) to `path` atomically; returns `path`."""
    with atomic_file(path, "wb" if isinstance(data, bytes) else "w", fsync=fsync) as f:
        f.write(data)
    return Path(path)
