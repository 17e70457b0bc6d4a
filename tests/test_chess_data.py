"""chess_data: the generator (A: path without an engine; P: path where Stockfish is installed,
skipped with the reason where it is not), the openings, engine scores in pawns, and the shipped
data (counts, split by position, regenerated without an engine)."""

import os
import shutil

import chess
import chess.engine
import pytest

from tasks import chess_data as cd
from tasks import chess_task as ct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data", "chess")
SPLITS = {"train": (600, 1), "val": (100, 2), "test": (100, 3)}  # n, seed: as data/chess/make.sh

try:
    STOCKFISH = cd.find_stockfish()
except cd.StockfishNotFound:
    STOCKFISH = None
needs_stockfish = pytest.mark.skipif(
    STOCKFISH is None, reason="stockfish is not installed (apt-get install stockfish)"
)


def test_mate_and_centipawn_evals():
    assert cd.engine_pawns(chess.engine.Mate(1)) == 99.99
    assert cd.engine_pawns(chess.engine.Mate(-3)) == -99.97
    assert cd.engine_pawns(chess.engine.Cp(-35)) == -0.35
    assert cd.engine_pawns(chess.engine.Cp(9000)) == cd.CP_CLIP_PAWNS
    assert ct.format_eval(-0.35) == "-0.35" and ct.format_eval(99.99) == "99.99"


def test_openings_are_legal():
    for name, line in cd.OPENINGS.items():
        board = chess.Board()
        for uci in line:
            assert chess.Move.from_uci(uci) in board.legal_moves, (name, uci)
            board.push_uci(uci)


# ---- generator ----------------------------------------------------------------------------


@pytest.fixture
def no_stockfish(monkeypatch):
    monkeypatch.setattr(cd.shutil, "which", lambda *a, **k: None)


def generate(*args):
    return cd.main(["generate", *map(str, args)])


def test_generator_a_tasks_need_no_engine_and_are_deterministic(tmp_path, no_stockfish):
    out1, out2, short = tmp_path / "one.jsonl", tmp_path / "two.jsonl", tmp_path / "short.jsonl"
    assert generate("--out", out1, "--n", 8, "--seed", 5, "--tasks", "A", "--prefix", "x") == 0
    assert generate("--out", out2, "--n", 8, "--seed", 5, "--tasks", "A", "--prefix", "x") == 0
    assert generate("--out", short, "--n", 3, "--seed", 5, "--tasks", "A", "--prefix", "x") == 0
    assert out1.read_bytes() == out2.read_bytes()
    assert out1.read_text().splitlines()[:3] == short.read_text().splitlines()
    records = ct.load_chess(out1)
    assert [r["task"] for r in records] == ["A"] * 8 and records[0]["id"] == "x-00000"


def test_generator_excludes_positions_of_other_files(tmp_path, no_stockfish):
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    assert generate("--out", first, "--n", 20, "--seed", 0, "--tasks", "A") == 0
    assert (
        generate("--out", second, "--n", 20, "--seed", 0, "--tasks", "A", "--exclude", first) == 0
    )
    epds = [{chess.Board(r["fen"]).epd() for r in ct.load_chess(p)} for p in (first, second)]
    assert len(epds[0]) == len(epds[1]) == 20 and not epds[0] & epds[1]


def test_generator_without_stockfish_says_how_to_install(tmp_path, no_stockfish, capsys):
    out = tmp_path / "p.jsonl"
    assert generate("--out", out, "--n", 2, "--seed", 0) == 2
    assert capsys.readouterr().err == f"error: {cd.STOCKFISH_MISSING}\n"
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "expect"),
    [(None, "file not found"), ('{"id": 1}\n', "line 1"), ("not json\n", "line 1")],
)
def test_bad_exclude_file_is_one_error_line_and_exit_2(tmp_path, capsys, content, expect):
    bad = tmp_path / "bad.jsonl"
    if content is not None:
        bad.write_text(content)
    out = tmp_path / "a.jsonl"
    assert generate("--out", out, "--n", 2, "--seed", 0, "--tasks", "A", "--exclude", bad) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(bad) in err and expect in err, err
    assert "Traceback" not in err and not out.exists()


def test_p_tasks_cannot_be_labelled_without_an_engine():
    planned = cd.plan_records(2, seed=0, tasks="PA")
    with pytest.raises(ValueError, match="needs an engine"):
        cd.label_records(planned)


@needs_stockfish
def test_generator_p_tasks_with_stockfish(tmp_path):
    out1, out2 = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    assert generate("--out", out1, "--n", 4, "--seed", 7, "--depth", 6) == 0
    assert generate("--out", out2, "--n", 4, "--seed", 7, "--depth", 6, "--prefix", "one") == 0
    assert out1.read_bytes() == out2.read_bytes()
    records = ct.load_chess(out1)  # checks legality of every labelled move
    assert [r["task"] for r in records] == ["P", "A", "P", "A"]
    assert all(r["source"].endswith("depth=6 multipv=5") for r in records if r["task"] == "P")


@needs_stockfish
def test_stockfish_is_stopped_even_on_error():
    with pytest.raises(RuntimeError, match="boom"):
        with cd.open_stockfish() as engine:
            engine.ping()
            raise RuntimeError("boom")
    with pytest.raises(chess.engine.EngineTerminatedError):
        engine.ping()


# ---- the shipped data ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped():
    return {name: ct.load_chess(os.path.join(DATA, f"{name}.jsonl")) for name in SPLITS}


def test_shipped_counts_and_split_by_position(shipped):
    for name, (n, _) in SPLITS.items():
        records = shipped[name]
        assert len(records) == n and sum(r["task"] == "P" for r in records) == n // 2
        assert os.path.getsize(os.path.join(DATA, f"{name}.jsonl")) < 1_000_000 / 2
    epds = {name: {chess.Board(r["fen"]).epd() for r in rs} for name, rs in shipped.items()}
    assert not epds["train"] & epds["val"]
    assert not (epds["train"] | epds["val"]) & epds["test"]


def test_shipped_a_tasks_cover_every_reward(shipped):
    rewards = {r["reward"] for r in shipped["train"] if r["task"] == "A"}
    assert rewards == {-1.0, 0.0, 0.5, 1.0}
    assert any(r["task"] == "A" and r["truncated"] for r in shipped["train"])


def test_shipped_files_match_the_generator_without_engine(shipped):
    """Positions, prompts and every A: record regenerate exactly (the first 100 train records
    and all of val); P: labels need Stockfish (next test)."""
    train_epds = frozenset(chess.Board(r["fen"]).epd() for r in shipped["train"])
    for name, n, exclude in (("train", 100, frozenset()), ("val", 100, train_epds)):
        planned = cd.plan_records(n, SPLITS[name][1], "PA", exclude, prefix=name)
        got = [p for p in planned if p.task == "P"]
        want = [r for r in shipped[name][:n] if r["task"] == "P"]
        assert [(p.id, p.board.fen()) for p in got] == [(r["id"], r["fen"]) for r in want]
        a_got = cd.label_records([p for p in planned if p.task == "A"])
        assert a_got == [r for r in shipped[name][:n] if r["task"] == "A"]


@needs_stockfish
def test_shipped_p_labels_match_stockfish(shipped):
    planned = cd.plan_records(6, SPLITS["train"][1], "PA", prefix="train")
    with cd.open_stockfish() as engine:
        source = shipped["train"][0]["source"]
        if not source.startswith(engine.id["name"] + " "):
            pytest.skip(f"labels come from {source!r}, this engine is {engine.id['name']!r}")
        got = cd.label_records(planned, engine, chess.engine.Limit(depth=cd.DEFAULT_DEPTH), source)
    assert got == shipped["train"][:6]


def test_stockfish_lookup_honours_an_explicit_path(tmp_path):
    with pytest.raises(cd.StockfishNotFound, match="give an executable path"):
        cd.find_stockfish(str(tmp_path / "nope"))
    if shutil.which("stockfish") is None and STOCKFISH is not None:
        assert STOCKFISH.startswith("/usr/games/")  # Debian's place, off root's PATH
