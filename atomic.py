"""Folders written whole or not at all: the one atomic folder write every saver uses.

`atomic_folder(out)` yields an empty temp folder beside `out` (`.tmp-NAME-PID`, the same
filesystem, so the final rename is atomic); when the block ends, a previous `out` is removed and
the temp folder renamed into its place. A crash or an exception inside the block leaves `out` as
it was and only the `.tmp-*` folder behind. With `fsync=True` every file and folder is flushed to
disk before the rename (checkpoints, which must survive a power cut). Single files (JSONL, the
checkpoint's `latest` pointer) are written beside themselves and renamed where they are written.
"""

import contextlib
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
