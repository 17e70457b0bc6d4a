"""atomic.atomic_folder: a folder is replaced whole on success and untouched on failure."""

import pytest

from atomic import atomic_folder


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
