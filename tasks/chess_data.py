"""Make the chess task's labelled JSONL data: random positions, Stockfish P: labels, the CLI.

`plan_records` draws positions (random prefixes of hand-written openings, then random legal
plies) and, for A: records, the move to play; `label_records` labels them, A: by the rules
(`chess_task.arbiter`, no engine) and P: by Stockfish's MultiPV search; `main` is the `generate`
command that writes, re-reads (`chess_task.load_chess`) and counts a file. Same seed, n, tasks,
exclude files and Stockfish version give the same bytes (knowledge/chess.md, "Generator"). Only
this module needs an engine, and only for P: records; training and scoring never do. It does
not parse or score completions (tasks/chess_task.py).
"""

import argparse
import contextlib
import itertools
import math
import random
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from core import errors, strict_json
from core.jsonl import write_jsonl

import chess
import chess.engine
from tqdm import tqdm

from tasks.chess_task import (
    HISTORY_PLIES,
    MATE_PAWNS,
    N_CANDIDATES,
    TASKS,
    episode_over,
    format_reward,
    load_chess,
    make_arbiter_record,
    make_policy_record,
)

CP_CLIP_PAWNS = 50.0  # centipawn evals are clipped here, so any |eval| > 50 is a mate
DEFAULT_DEPTH = 12
MAX_RANDOM_PLIES = 40
ILLEGAL_SHARE = 0.1  # A: tasks whose move is illegal (reward -1)
SEEK_ENDING_SHARE = 0.25  # A: tasks played on until a move ends or truncates the episode
SEEK_MAX_PLIES = 1000
MAX_ATTEMPTS = 200
STOCKFISH_MISSING = "stockfish not found: apt-get install stockfish / brew install stockfish"

# Hand-written main lines (UCI); a position starts from a random prefix of one (or of none).
OPENINGS: dict[str, tuple[str, ...]] = {
    "start": (),
    "italian": ("e2e4", "e7e5", "g1f3", "b8c6", "f1c4", "f8c5", "c2c3", "g8f6", "d2d4"),
    "ruy_lopez": ("e2e4", "e7e5", "g1f3", "b8c6", "f1b5", "a7a6", "b5a4", "g8f6", "e1g1", "f8e7"),
    "najdorf": ("e2e4", "c7c5", "g1f3", "d7d6", "d2d4", "c5d4", "f3d4", "g8f6", "b1c3", "a7a6"),
    "french": ("e2e4", "e7e6", "d2d4", "d7d5", "b1c3", "g8f6", "c1g5", "f8e7"),
    "caro_kann": ("e2e4", "c7c6", "d2d4", "d7d5", "b1c3", "d5e4", "c3e4", "c8f5"),
    "queens_gambit": ("d2d4", "d7d5", "c2c4", "e7e6", "b1c3", "g8f6", "c1g5", "f8e7"),
    "kings_indian": ("d2d4", "g8f6", "c2c4", "g7g6", "b1c3", "f8g7", "e2e4", "d7d6", "g1f3"),
    "english": ("c2c4", "e7e5", "b1c3", "g8f6", "g2g3", "d7d5", "c4d5", "f6d5"),
    "slav": ("d2d4", "d7d5", "c2c4", "c7c6", "g1f3", "g8f6", "b1c3", "d5c4"),
    "scandinavian": ("e2e4", "d7d5", "e4d5", "d8d5", "b1c3", "d5a5", "d2d4", "g8f6"),
}


class StockfishNotFound(errors.UserError, RuntimeError):
    """No Stockfish binary: the message says how to install one."""


def find_stockfish(path: str | None = None) -> str:
    """The engine binary: `path` if given, else `stockfish` on PATH, else Debian's /usr/games
    (where apt installs it, and which root's PATH usually lacks). Raises StockfishNotFound."""
    if path is not None:
        found = shutil.which(path)
        if found is None:
            raise StockfishNotFound(f"stockfish not found at {path!r}; give an executable path")
        return found
    found = shutil.which("stockfish") or shutil.which("stockfish", path="/usr/games")
    if found is None:
        raise StockfishNotFound(STOCKFISH_MISSING)
    return found


@contextlib.contextmanager
def open_stockfish(path: str | None = None) -> Iterator[chess.engine.SimpleEngine]:
    """A started Stockfish that is always stopped on exit, error or not. One thread and a fixed
    hash make a fixed-depth search reproducible for a given Stockfish version."""
    # python-chess waits 10 s per command beyond the search limit by default; a fixed-depth
    # search on a loaded 2-core machine ran past that (a TimeoutError in the tests), so allow 120.
    engine = chess.engine.SimpleEngine.popen_uci(find_stockfish(path), timeout=120)
    try:
        engine.configure({"Threads": 1, "Hash": 16})
        yield engine
    finally:
        try:
            engine.quit()
        finally:
            engine.close()  # releases the process even when quit failed (engine crashed)


def _legal(board: chess.Board) -> list[chess.Move]:
    return sorted(board.legal_moves, key=chess.Move.uci)  # sorted: no dependence on move order


def _random_plies(rng: random.Random, board: chess.Board, plies: int) -> None:
    """Play up to `plies` random legal moves, stopping before a move that ends the episode."""
    for _ in range(plies):
        board.push(rng.choice(_legal(board)))
        if episode_over(board):
            board.pop()
            return


def _sample_board(rng: random.Random) -> chess.Board:
    line = OPENINGS[rng.choice(sorted(OPENINGS))]
    board = chess.Board()
    for uci in line[: rng.randint(0, len(line))]:
        board.push_uci(uci)
    _random_plies(rng, board, rng.randint(0, MAX_RANDOM_PLIES))
    return board


def _illegal_move(rng: random.Random, board: chess.Board) -> str:
    """Half the time a pseudo-legal move that leaves the king in check (where one exists), else
    one of the mover's pieces sent to a square it cannot reach (a pawn promotion without its
    piece letter counts)."""
    pinned = sorted(m.uci() for m in board.pseudo_legal_moves if not board.is_legal(m))
    if pinned and rng.random() < 0.5:
        return rng.choice(pinned)
    own = sorted(chess.SquareSet(board.occupied_co[board.turn]))
    legal = set(board.legal_moves)
    while True:
        move = chess.Move(rng.choice(own), rng.randrange(64))
        if move.from_square != move.to_square and move not in legal:
            return move.uci()


def _play_to_ending(rng: random.Random, board: chess.Board) -> str | None:
    """Random play on `board` until some move ends or truncates the episode; that move (not
    played), or None if none came within SEEK_MAX_PLIES."""
    for _ in range(SEEK_MAX_PLIES):
        move = rng.choice(_legal(board))
        board.push(move)
        if episode_over(board):
            board.pop()
            return move.uci()
    return None


def _sample_arbiter(rng: random.Random) -> tuple[chess.Board, str]:
    board = _sample_board(rng)
    draw = rng.random()
    if draw < ILLEGAL_SHARE:
        return board, _illegal_move(rng, board)
    if draw < ILLEGAL_SHARE + SEEK_ENDING_SHARE:
        move = _play_to_ending(rng, board)
        if move is not None:
            return board, move
    return board, rng.choice(_legal(board)).uci()


@dataclass
class Planned:
    """A record before labelling: its position (with the moves that led there) and, for A:, the
    move to play."""

    id: str
    task: str
    board: chess.Board
    move: str | None


def plan_records(
    n: int,
    seed: int,
    tasks: str = "PA",
    exclude: frozenset[str] = frozenset(),
    prefix: str = "chess",
) -> list[Planned]:
    """n positions, record i of task tasks[i % len(tasks)], no position (FEN without clocks) twice
    or in `exclude`. Record i depends only on (seed, i) and the positions before it, so a
    smaller n gives a prefix of a larger one."""
    if n < 1 or not tasks or set(tasks) - set(TASKS):
        raise ValueError(f"plan_records needs n >= 1 and tasks made of P/A, got n={n}, {tasks!r}")
    seen, planned = set(exclude), []
    for i in range(n):
        task = tasks[i % len(tasks)]
        for attempt in itertools.count():
            if attempt == MAX_ATTEMPTS:
                raise RuntimeError(
                    f"no new position for record {i} in {MAX_ATTEMPTS} tries; lower --n or "
                    "exclude fewer files"
                )
            rng = random.Random(f"{seed}:{i}:{attempt}")
            board, move = _sample_arbiter(rng) if task == "A" else (_sample_board(rng), None)
            if board.epd() not in seen:
                break
        seen.add(board.epd())
        planned.append(Planned(f"{prefix}-{i:05d}", task, board, move))
    return planned


def engine_pawns(score: chess.engine.Score) -> float:
    """A score for the side to move in pawns, with mates mapped as MATE_PAWNS documents."""
    mate = score.mate()
    if mate is not None:
        n = min(abs(mate), 99)
        return math.copysign(round(MATE_PAWNS * 100 - n) / 100, mate)
    cp = max(-CP_CLIP_PAWNS * 100, min(CP_CLIP_PAWNS * 100, score.score()))
    return cp / 100


def analyse(engine, board: chess.Board, limit: chess.engine.Limit, key: str):
    """Stockfish's top moves (best first) and their evals (pawns, side to move) for `board`.
    A new `game` key per position makes python-chess send ucinewgame, which clears the hash, so
    a label does not depend on which positions were searched before it."""
    k = min(N_CANDIDATES, board.legal_moves.count())
    infos = engine.analyse(board, limit, multipv=k, game=key)
    if len(infos) != k or any("pv" not in i or "score" not in i for i in infos):
        raise RuntimeError(f"stockfish gave {len(infos)} lines without pv/score for {board.fen()}")
    return [i["pv"][0].uci() for i in infos], [engine_pawns(i["score"].relative) for i in infos]


def label_records(planned: Sequence[Planned], engine=None, limit=None, source="") -> list[dict]:
    """Records from plans: A: by the rules, P: by `engine` under `limit` (needed only if any)."""
    records = []
    for plan in tqdm(planned, desc="label", unit="pos", disable=len(planned) < 50):
        fen = plan.board.fen()
        if plan.task == "A":
            history = [m.uci() for m in plan.board.move_stack[-HISTORY_PLIES:]]
            records.append(make_arbiter_record(plan.id, fen, plan.move, history))
        elif engine is None:
            raise ValueError(f"{plan.id} is a P: task; labelling it needs an engine")
        else:
            moves, evals = analyse(engine, plan.board, limit, plan.id)
            records.append(make_policy_record(plan.id, fen, moves, evals, source))
    return records


def run_generate(args: argparse.Namespace) -> dict:
    """The `generate` command: plan, label, write, re-read through load_chess; returns counts."""
    exclude = frozenset(
        chess.Board(r["fen"]).epd() for path in args.exclude for r in load_chess(path)
    )
    prefix = args.prefix or Path(args.out).stem
    with errors.as_user_error(ValueError):  # --n and --tasks
        planned = plan_records(args.n, args.seed, args.tasks, exclude, prefix)
    if "P" in args.tasks:
        if args.movetime is not None:
            limit, how = chess.engine.Limit(time=args.movetime / 1000), f"movetime={args.movetime}"
        else:
            limit, how = chess.engine.Limit(depth=args.depth), f"depth={args.depth}"
        with open_stockfish(args.stockfish) as engine:
            source = f"{engine.id.get('name', 'stockfish')} {how} multipv={N_CANDIDATES}"
            records = label_records(planned, engine, limit, source)
    else:
        records = label_records(planned)
    write_jsonl(records, args.out)
    records = load_chess(args.out)
    counts = {"out": str(args.out), "records": len(records)}
    counts |= {f"task_{t}": sum(r["task"] == t for r in records) for t in TASKS}
    for reward in (-1.0, 0.0, 0.5, 1.0):
        n = sum(r["task"] == "A" and r["reward"] == reward for r in records)
        counts[f"A_reward_{format_reward(reward)}"] = n
    counts["A_truncated"] = sum(r["task"] == "A" and r["truncated"] == 1 for r in records)
    return counts


@errors.cli
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser(
        "generate", allow_abbrev=False, help="make a labelled JSONL file of P:/A: records"
    )
    gen.add_argument("--out", required=True, help="JSONL file to write (its stem prefixes ids)")
    gen.add_argument("--n", type=int, required=True, help="number of records")
    gen.add_argument("--seed", type=int, required=True, help="same seed, same file")
    limit = gen.add_mutually_exclusive_group()
    limit.add_argument(
        "--depth", type=int, default=DEFAULT_DEPTH, help="Stockfish depth (reproducible)"
    )
    limit.add_argument("--movetime", type=int, help="Stockfish ms per position (NOT reproducible)")
    gen.add_argument("--tasks", default="PA", help="task cycle: PA (alternate), P or A (no engine)")
    gen.add_argument("--exclude", nargs="*", default=[], help="JSONL files whose positions to skip")
    gen.add_argument("--stockfish", help="engine binary (default: stockfish on PATH or /usr/games)")
    gen.add_argument("--prefix", help="id prefix (default: the --out file's stem)")
    gen.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    counts = run_generate(args)  # StockfishNotFound, or a bad --exclude file's DataError
    if args.json:
        print(strict_json.dumps(counts))
    else:
        print(", ".join(f"{k}={v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
