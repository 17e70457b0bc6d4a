"""The chess environment task (RookWorld-style): formats, the loader and graduated rewards.

Two tasks for one model. P: (policy analysis) `P: <FEN>` -> `M: <moves> E: <evals> B: <best>`,
labelled by Stockfish. A: (environment prediction) `A: <FEN>+<move>+<history>+` ->
`<new FEN>+<reward>+<terminated>+<truncated>`, labelled by the rules of chess alone (`arbiter`).
This module defines the formats, validates labelled JSONL data (`load_chess`), parses
completions and scores them against their labels (`chess_reward`, `make_chess_reward`,
`chess_reward_details`): it never raises on a model's output and needs no engine. It does not
make the data (tasks/chess_data.py, the Stockfish generator), train, sample or hold a chat template
(tasks/registry.py). Formats, conventions and reward formulas: knowledge/chess.md.
"""

import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.jsonl import data_error, read_jsonl

import chess

TASKS = ("P", "A")
N_CANDIDATES = 5  # moves Stockfish lists per P: position (fewer where fewer are legal)
HISTORY_PLIES = 8  # recent moves shown in an A: prompt
MATE_PAWNS = 100.0  # mate in n for the side to move is +(100 - n/100) pawns, mated in n is -(...)

# Rewards. Every completion lands in one band: UNPARSABLE, or FORMAT + (1 - FORMAT) * weighted
# sum of component credits in [0, 1], so exactly right is 1.0 and right format alone is 0.2.
UNPARSABLE = -0.3
FORMAT = 0.2
# Optional partial credit for an unparsable answer's shape (score_completion's `partial`): it
# earns UNPARSABLE + partial * shape, shape in [0, 1], so `partial` below FORMAT - UNPARSABLE
# keeps every parsable answer above every unparsable one.
MAX_PARTIAL = FORMAT - UNPARSABLE
POLICY_WEIGHTS = {"p_best": 0.5, "p_moves": 0.25, "p_evals": 0.25}
ARBITER_WEIGHTS = {"a_fen": 0.6, "a_reward": 0.2, "a_terminated": 0.1, "a_truncated": 0.1}
EVAL_CLIP = 10.0  # pawns; past this a position is won or lost, so mate vs +20 is no error
EVAL_TOLERANCE = 2.0  # pawns of eval error at which a move's eval credit reaches 0
FEN_MIN_SCALE = 4  # edits; the floor of the FEN credit's scale (see fen_credit)
MAX_COMPLETION_CHARS = 512  # targets are < 150 chars; longer output is rambling, not an answer
MAX_FEN_CHARS = 100  # the longest legal FEN is about 90 chars


_UCI = re.compile(r"[a-h][1-8][a-h][1-8][qrbn]?")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_FEN_SHAPE = re.compile(r"[pnbrqkPNBRQKw0-9a-h/ -]+")

RewardFn = Callable[..., list[float]]


# ---- formats ------------------------------------------------------------------------------


def format_eval(pawns: float) -> str:
    return f"{pawns:.2f}"


def format_reward(reward: float) -> str:
    return f"{reward:g}"  # 1, 0.5, 0, -1


def policy_prompt(fen: str) -> str:
    return f"P: {fen}"


def policy_target(moves: Sequence[str], evals: Sequence[float], best: str) -> str:
    return f"M: {' '.join(moves)} E: {' '.join(map(format_eval, evals))} B: {best}"


def arbiter_prompt(fen: str, move: str, history: Sequence[str]) -> str:
    return f"A: {fen}+{move}+{','.join(history)}+"


def arbiter_target(fen_after: str, reward: float, terminated: int, truncated: int) -> str:
    return f"{fen_after}+{format_reward(reward)}+{int(terminated)}+{int(truncated)}"


# ---- the environment (A: labels) -----------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """What the environment answers to one move; reward is from the mover's point of view."""

    fen_after: str
    reward: float
    terminated: int
    truncated: int


def episode_over(board: chess.Board) -> bool:
    """The episode ends here under arbiter's rules (repetition is not one of them)."""
    return (
        board.is_checkmate()
        or board.is_stalemate()
        or board.is_insufficient_material()
        or board.halfmove_clock >= 100
    )


def arbiter(fen: str, move: str) -> Step:
    """The A: label of playing `move` (UCI) in `fen`; a function of these two alone, so the
    loader can recompute it (repetition draws would need the whole game, see knowledge/chess.md).

    illegal or malformed move: same FEN, -1, terminated; checkmate: 1, terminated; stalemate,
    insufficient material or the 75-move rule: 0.5, terminated; halfmove clock >= 100 after the
    move (fifty-move draw, claimed by the environment): 0.5, truncated; otherwise 0.
    """
    board = chess.Board(fen)
    try:
        parsed = chess.Move.from_uci(move)
    except ValueError:
        parsed = None
    if parsed is None or parsed not in board.legal_moves:
        return Step(board.fen(), -1.0, 1, 0)
    board.push(parsed)
    after = board.fen()
    if board.is_checkmate():
        return Step(after, 1.0, 1, 0)
    if board.is_stalemate() or board.is_insufficient_material() or board.is_seventyfive_moves():
        return Step(after, 0.5, 1, 0)
    if board.halfmove_clock >= 100:
        return Step(after, 0.5, 0, 1)
    return Step(after, 0.0, 0, 0)


# ---- records -------------------------------------------------------------------------------


def make_policy_record(
    id: str, fen: str, moves: Sequence[str], evals: Sequence[float], source: str
) -> dict:
    """A P: record; moves best first, evals in pawns for the side to move."""
    moves, evals = list(moves), [float(e) for e in evals]
    return {
        "id": id,
        "task": "P",
        "prompt": policy_prompt(fen),
        "target": policy_target(moves, evals, moves[0]),
        "fen": fen,
        "moves": moves,
        "evals": evals,
        "best": moves[0],
        "source": source,
    }


def make_arbiter_record(id: str, fen: str, move: str, history: Sequence[str]) -> dict:
    """An A: record labelled by `arbiter`; history is the moves before `fen`, oldest first."""
    step = arbiter(fen, move)
    return {
        "id": id,
        "task": "A",
        "prompt": arbiter_prompt(fen, move, history),
        "target": arbiter_target(step.fen_after, step.reward, step.terminated, step.truncated),
        "fen": fen,
        "move": move,
        "history": list(history),
        "fen_after": step.fen_after,
        "reward": step.reward,
        "terminated": step.terminated,
        "truncated": step.truncated,
        "source": "rules",
    }


# ---- loader --------------------------------------------------------------------------------

COMMON_FIELDS = {"id": str, "task": str, "prompt": str, "target": str, "fen": str, "source": str}
TASK_FIELDS = {
    "P": {"moves": list, "evals": list, "best": str},
    "A": {
        "move": str,
        "history": list,
        "fen_after": str,
        "reward": (int, float),
        "terminated": int,
        "truncated": int,
    },
}
_REGENERATE = (
    "regenerate the file with `uv run python -m tasks.chess_data generate` (see knowledge/chess.md)"
)


def _check_fields(record) -> list[str]:
    if not isinstance(record, dict):
        return [f"expected a JSON object, got {type(record).__name__}; write one object per line"]
    task = record.get("task")
    if task not in TASKS:
        return [f"task {task!r} is not one of {', '.join(TASKS)}; use 'P' or 'A'"]
    fields = {**COMMON_FIELDS, **TASK_FIELDS[task]}
    problems = []
    for name, kind in fields.items():
        value = record.get(name)
        if name not in record:
            problems.append(f"missing field {name!r}; a {task} record needs {', '.join(fields)}")
        elif not isinstance(value, kind) or isinstance(value, bool):
            want = (
                " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
            )
            problems.append(
                f"field {name!r} is {type(value).__name__}, expected {want}; see knowledge/chess.md"
            )
    extra = sorted(set(record) - set(fields))
    if extra:
        problems.append(
            f"unknown field(s) {', '.join(map(repr, extra))}; allowed: {', '.join(fields)}"
        )
    return problems


def _check_position(fen: str) -> tuple[chess.Board | None, list[str]]:
    try:
        board = chess.Board(fen)
    except ValueError as e:
        return None, [f"fen {fen!r} is not a FEN ({e}); {_REGENERATE}"]
    if not board.is_valid() or board.fen() != fen:
        return None, [f"fen {fen!r} is not a valid position in python-chess form; {_REGENERATE}"]
    if not any(board.legal_moves):
        return None, [f"fen {fen!r} has no legal move (game over); drop the record"]
    return board, []


def _check_policy(record: dict, board: chess.Board) -> list[str]:
    moves, evals = record["moves"], record["evals"]
    if not moves or len(moves) != len(evals) or len(set(moves)) != len(moves):
        return [f"moves/evals need 1+ distinct moves and one eval each; {_REGENERATE}"]
    if not all(isinstance(m, str) for m in moves):
        return [f"moves must be UCI strings; {_REGENERATE}"]
    illegal = [
        m for m in moves if not _UCI.fullmatch(m) or chess.Move.from_uci(m) not in board.legal_moves
    ]
    if illegal:
        return [f"move(s) {illegal} are not legal in {record['fen']!r}; {_REGENERATE}"]
    if not all(isinstance(e, int | float) and not isinstance(e, bool) for e in evals) or not all(
        math.isfinite(e) and abs(e) <= MATE_PAWNS for e in evals
    ):
        return [f"evals must be finite numbers within +-{MATE_PAWNS:g} pawns; {_REGENERATE}"]
    want = make_policy_record(record["id"], record["fen"], moves, evals, record["source"])
    return _check_derived(record, want, ("best", "prompt", "target"))


def _check_arbiter(record: dict) -> list[str]:
    history = record["history"]
    if not all(isinstance(m, str) and _UCI.fullmatch(m) for m in history):
        return [f"history must be a list of UCI moves; {_REGENERATE}"]
    want = make_arbiter_record(record["id"], record["fen"], record["move"], history)
    names = ("fen_after", "reward", "terminated", "truncated", "prompt", "target")
    return _check_derived(record, want, names)


def _check_derived(record: dict, want: dict, names: Sequence[str]) -> list[str]:
    return [
        f"{name} {record[name]!r} disagrees with the label it is built from ({want[name]!r}); "
        f"do not edit labels by hand, {_REGENERATE}"
        for name in names
        if record[name] != want[name]
    ]


def check_chess_record(record) -> list[str]:
    """Problems with one parsed record, as strings (empty if fine). Labels derived from other
    fields (targets, prompts, every A: label) are recomputed and must agree."""
    problems = _check_fields(record)
    if problems:
        return problems
    board, problems = _check_position(record["fen"])
    if board is None:
        return problems
    return _check_policy(record, board) if record["task"] == "P" else _check_arbiter(record)


def load_chess(path) -> list[dict]:
    """Chess records from a JSONL file, every line checked (`check_chess_record`), ids and prompts
    unique. Raises DataError naming the file, the first bad line and the fix."""
    path = os.fspath(path)
    values, errors = read_jsonl(path, f"check the path or {_REGENERATE}")
    records, seen = [], {"id": {}, "prompt": {}}
    for line_no, record in values:
        problems = check_chess_record(record)
        if not problems:  # fields are known good, so the uniqueness checks can index them
            for name, first_lines in seen.items():
                first = first_lines.setdefault(record[name], line_no)
                if first != line_no:
                    problems.append(f"duplicate {name} (first on line {first}); delete one")
        errors.extend((line_no, p) for p in problems)
        if not problems:
            records.append(record)
    if errors:
        raise data_error(path, errors)
    return records


# ---- parsing completions -------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyOutput:
    moves: tuple[str, ...]
    evals: tuple[float, ...]
    best: str


@dataclass(frozen=True)
class ArbiterOutput:
    fen: str
    reward: float
    terminated: int
    truncated: int


def parse_policy(text) -> PolicyOutput | None:
    """`M: <uci>... E: <number>... B: <uci>` (as many evals as moves, any whitespace between
    tokens, nothing before or after), else None. Moves are checked for UCI shape, not legality."""
    if not isinstance(text, str) or len(text) > MAX_COMPLETION_CHARS:
        return None
    tokens = text.split()
    if len(tokens) < 6 or tokens[0] != "M:" or tokens[-2] != "B:" or tokens.count("E:") != 1:
        return None
    e = tokens.index("E:")
    moves, evals, best = tokens[1:e], tokens[e + 1 : -2], tokens[-1]
    if not moves or len(moves) != len(evals):
        return None
    if not all(_UCI.fullmatch(m) for m in (*moves, best)):
        return None
    if not all(_NUMBER.fullmatch(v) for v in evals):
        return None
    return PolicyOutput(tuple(moves), tuple(float(v) for v in evals), best)


def parse_arbiter(text) -> ArbiterOutput | None:
    """`<fen>+<number>+<0|1>+<0|1>` (spaces around fields allowed, nothing else), else None.
    The FEN field needs only FEN characters: a malformed FEN still parses and is graded by
    edit distance, so a near miss earns more than a confident wrong board."""
    if not isinstance(text, str) or len(text) > MAX_COMPLETION_CHARS:
        return None
    parts = [p.strip() for p in text.strip().split("+")]
    if len(parts) != 4:
        return None
    fen, reward, terminated, truncated = parts
    if not fen or len(fen) > MAX_FEN_CHARS or not _FEN_SHAPE.fullmatch(fen):
        return None
    if not _NUMBER.fullmatch(reward) or terminated not in ("0", "1") or truncated not in ("0", "1"):
        return None
    return ArbiterOutput(fen, float(reward), int(terminated), int(truncated))


def policy_shape(text: str) -> float:
    """How much of the P: format an answer has, in [0, 1]: the mean of five checks (opens with
    `M:`; the share of the first up-to-5 tokens after `M:` that are UCI-shaped; one `E:`; `B:`
    after `E:` followed by a UCI move; nothing after that move). 1.0 for every parsable answer;
    a near miss scores above noise, which is what GRPO needs when no sample of a group parses
    (knowledge/chess.md)."""
    tokens = text.split()
    if not tokens or tokens[0] != "M:":
        return 0.0
    e = tokens.index("E:") if "E:" in tokens else len(tokens)
    moves = tokens[1:e][:N_CANDIDATES]
    uci = sum(bool(_UCI.fullmatch(m)) for m in moves) / len(moves) if moves else 0.0
    one_e = float(tokens.count("E:") == 1)
    after = tokens[e + 1 :]
    b = after.index("B:") if "B:" in after else -1
    best = float(b >= 0 and b + 1 < len(after) and bool(_UCI.fullmatch(after[b + 1])))
    ends = float(best == 1.0 and b + 2 == len(after))
    return (1.0 + uci + one_e + best + ends) / 5.0


def arbiter_shape(text: str) -> float:
    """How much of the A: format an answer has, in [0, 1]: the mean of four checks (exactly four
    `+`-separated fields, half for 2-6; a FEN-shaped first field; a number second; 0/1 in the
    third and fourth, half each). 1.0 for every parsable answer."""
    parts = [p.strip() for p in text.strip().split("+")]
    fields = 1.0 if len(parts) == 4 else 0.5 if 2 <= len(parts) <= 6 else 0.0
    fen = float(bool(parts[0]) and len(parts[0]) <= MAX_FEN_CHARS
                and bool(_FEN_SHAPE.fullmatch(parts[0])))  # fmt: skip
    number = float(len(parts) > 1 and bool(_NUMBER.fullmatch(parts[1])))
    flags = sum(0.5 for p in parts[2:4] if p in ("0", "1"))
    return (fields + fen + number + flags) / 4.0


# ---- graduated rewards ---------------------------------------------------------------------


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute one character)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def fen_credit(predicted: str, true: str, before: str) -> float:
    """1 - d(predicted, true) / max(d(before, true), FEN_MIN_SCALE), clipped to [0, 1].

    Scaling by how far the true FEN is from the prompt's FEN means copying the input earns 0
    (a raw-length scale would pay ~0.9 for it); the floor keeps a one-character slip from
    zeroing the credit when the move changes little (an illegal move changes nothing)."""
    scale = max(levenshtein(before, true), FEN_MIN_SCALE)
    return max(0.0, 1.0 - levenshtein(predicted, true) / scale)


def eval_credit(predicted: float, true: float) -> float:
    """Linear in the error between evals clipped to +-EVAL_CLIP: 1 at 0, 0 at EVAL_TOLERANCE."""
    error = abs(_clip_eval(predicted) - _clip_eval(true))
    return max(0.0, 1.0 - error / EVAL_TOLERANCE)


def _clip_eval(pawns: float) -> float:
    return min(EVAL_CLIP, max(-EVAL_CLIP, pawns))


def _policy_parts(out: PolicyOutput, record: dict) -> dict[str, float]:
    true = dict(zip(record["moves"], record["evals"], strict=True))
    said = {}
    for move, value in zip(out.moves, out.evals, strict=True):
        said.setdefault(move, value)  # a repeated move is judged on its first eval
    union = set(true) | set(said)
    return {
        "p_best": float(out.best == record["best"]),
        "p_moves": len(set(true) & set(said)) / len(union),
        "p_evals": sum(eval_credit(said[m], e) for m, e in true.items() if m in said) / len(true),
    }


def _arbiter_parts(out: ArbiterOutput, record: dict) -> dict[str, float]:
    return {
        "a_fen": fen_credit(out.fen, record["fen_after"], record["fen"]),
        "a_reward": float(out.reward == record["reward"]),
        "a_terminated": float(out.terminated == record["terminated"]),
        "a_truncated": float(out.truncated == record["truncated"]),
    }


_EMPTY = {name: None for name in (*POLICY_WEIGHTS, *ARBITER_WEIGHTS)}


def check_partial(partial) -> float:
    """`partial` as a float in [0, MAX_PARTIAL); anything else raises, naming the bound."""
    if isinstance(partial, bool) or not isinstance(partial, int | float):
        raise ValueError(f"chess partial={partial!r} must be a number in [0, {MAX_PARTIAL:g})")
    if not 0.0 <= partial < MAX_PARTIAL:
        raise ValueError(
            f"chess partial={partial!r} must be in [0, {MAX_PARTIAL:g}): at {MAX_PARTIAL:g} or "
            f"more an unparsable answer could earn as much as a parsable one ({FORMAT:g})"
        )
    return float(partial)


def score_completion(completion, record: dict, partial: float = 0.0) -> dict:
    """The reward of one completion against its record, with its parts for logging:
    {"reward", "format", "shape", and the task's components in [0, 1]}; the other task's are
    None. An unparsable completion earns UNPARSABLE + partial * its shape (policy_shape or
    arbiter_shape; `partial` 0, the default, is the flat UNPARSABLE)."""
    partial = check_partial(partial)
    match record["task"]:
        case "P":
            weights, out = POLICY_WEIGHTS, parse_policy(completion)
            parts = _policy_parts(out, record) if out else None
            shape = policy_shape
        case "A":
            weights, out = ARBITER_WEIGHTS, parse_arbiter(completion)
            parts = _arbiter_parts(out, record) if out else None
            shape = arbiter_shape
        case task:
            raise ValueError(f"record {record.get('id')!r} has task {task!r}; expected P or A")
    if parts is None:
        s = shape(completion) if isinstance(completion, str) else 0.0
        return {**_EMPTY, **dict.fromkeys(weights, 0.0), "format": 0.0, "shape": s,
                "reward": UNPARSABLE + partial * s}  # fmt: skip
    credit = sum(weights[name] * parts[name] for name in weights)
    reward = FORMAT + (1.0 - FORMAT) * credit
    return {**_EMPTY, **parts, "format": 1.0, "shape": 1.0, "reward": reward}


def _text(x) -> str:
    """A prompt/completion as the reward contract allows: a string, or a conversation (list of
    chat messages) whose last message is the text. Anything else is a caller bug, not an output."""
    if isinstance(x, str):
        return x
    if isinstance(x, list) and x and isinstance(x[-1], dict):
        return str(x[-1].get("content", ""))
    raise TypeError(f"expected a string or a list of chat messages, got {type(x).__name__}")


def chess_reward_details(
    prompts, completions, *, records: Sequence[dict], partial: float = 0.0, **kw
) -> list[dict]:
    """`score_completion` for each completion; records[i] is completion i's record and must be
    the record of prompts[i] (checked: a misaligned batch would score against the wrong label)."""
    prompts, completions = [_text(p) for p in prompts], [_text(c) for c in completions]
    if not len(prompts) == len(completions) == len(records):
        raise ValueError(
            f"chess reward got {len(prompts)} prompts, {len(completions)} completions and "
            f"{len(records)} records; pass one record per completion"
        )
    for i, (prompt, record) in enumerate(zip(prompts, records, strict=True)):
        if prompt != record["prompt"]:
            raise ValueError(
                f"completion {i}: prompt {prompt[:60]!r} is not record {record['id']!r}'s prompt "
                f"{record['prompt'][:60]!r}; align records with completions"
            )
    return [score_completion(c, r, partial) for c, r in zip(completions, records, strict=True)]


def chess_reward(prompts, completions, *, records: Sequence[dict], **kw) -> list[float]:
    """The reward contract with the labels passed in, one record per completion. Never NaN:
    every output, however malformed, has a band; a wrong record is a caller bug and raises."""
    return [d["reward"] for d in chess_reward_details(prompts, completions, records=records)]


def record_finder(records: Sequence[dict]) -> Callable[[list], list[dict]]:
    """`find(prompts) -> records`, the record of each prompt (string or conversation); a prompt
    without a record raises, naming it and the fix."""
    by_prompt = {r["prompt"]: r for r in records}
    if len(by_prompt) != len(records):
        raise ValueError("chess records: two records share a prompt; load them with load_chess")

    def find(prompts) -> list[dict]:
        prompts = [_text(p) for p in prompts]
        missing = [p for p in prompts if p not in by_prompt]
        if missing:
            raise ValueError(
                f"chess reward: {len(missing)} prompt(s) have no record, first "
                f"{missing[0][:80]!r}; build the reward from the records the prompts came from"
            )
        return [by_prompt[p] for p in prompts]

    return find


def make_chess_reward(records: Sequence[dict]) -> RewardFn:
    """A reward `fn(prompts, completions, **kw)` that finds each prompt's record itself (for a
    loop that passes only prompts). Unknown prompts raise."""
    find = record_finder(records)

    def reward(prompts, completions, **kw) -> list[float]:
        return chess_reward(prompts, completions, records=find(prompts))

    reward.__name__ = "chess"
    return reward
