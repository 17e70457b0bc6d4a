"""atomic.atomic_folder and atomic_file: a folder or file is replaced whole on success and
untouched on failure."""

from core import atomic
from core.atomic import atomic_file, atomic_folder, atomic_write

import pytest


def test_a_finished_block_replaces_the_folder_whole(tmp_path):
    out = tmp_path / "deep" / "model"
    with atomic_folder(out) as tmp:
        assert tmp.parent == out.parent and tmp.name.startswith(".tmp-model-")
        (tmp / "a.txt").write_text("one")
    assert sorted(p.name for p in out.iterdir()) == ["a.txt"]
    with atomic_folder(out, fsync=True) as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "b.txt").write_text("two")
    assert sorted(p.name for p in out.iterdir()) == ["sub"]  # the old a.txt is gone
    assert (out / "sub" / "b.txt").read_text() == "two"
    assert [p.name for p in out.parent.iterdir()] == ["model"]  # no temp folder left


def test_a_failed_block_leaves_the_old_folder_and_only_a_temp_folder(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "old.txt").write_text("kept")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_folder(out) as tmp:
            (tmp / "half.txt").write_text("half")
            raise RuntimeError("disk full")
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir())[0].startswith(".tmp-model-")
    with atomic_folder(out) as tmp:  # the next write starts from an empty temp folder
        assert list(tmp.iterdir()) == []


def test_a_file_write_replaces_the_file_whole(tmp_path):
    path = tmp_path / "deep" / "events.out.tfevents.1"
    assert atomic_write(path, "a long first version\n") == path  # parents made
    atomic_write(path, "short\n")
    assert path.read_text() == "short\n"  # no tail of the longer old file
    atomic_write(path, b"\x00\xffbytes")
    assert path.read_bytes() == b"\x00\xffbytes"
    atomic_write(path, "naïve\n")
    assert path.read_bytes() == "naïve\n".encode()  # text is UTF-8
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


def test_the_temp_file_is_beside_the_target_and_named_apart_from_it(tmp_path):
    path = tmp_path / "events.out.tfevents.1"
    with atomic_file(path, "wb") as f:
        f.write(b"x")
        [tmp] = list(tmp_path.iterdir())
        assert tmp.name.startswith(".tmp-") and "tfevents" not in tmp.name
        assert not path.exists()  # nothing at the target until the block ends
    assert path.read_bytes() == b"x"


def test_a_failed_file_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("old\n")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_file(path) as f:
            f.write("half of a new file")
            f.flush()
            raise RuntimeError("disk full")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.jsonl"]
    with pytest.raises(TypeError):  # a failure inside atomic_write itself: the same
        atomic_write(path, 3)
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.jsonl"]


def test_fsync_flushes_the_file_only_when_asked(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: synced.append(fd))
    atomic_write(tmp_path / "a", "one")
    assert synced == []
    atomic_write(tmp_path / "latest", "step_000003\n", fsync=True)
    assert len(synced) == 1
    with pytest.raises(ValueError, match="mode 'a'"):
        with atomic_file(tmp_path / "b", "a"):
            pass
