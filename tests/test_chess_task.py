"""chess_task: the environment's labels, the parsers and every reward band on hand-made outputs,
malformed outputs (never raising), the reward contract and the loader's errors. The generator
and the shipped data: test_chess_data.py."""

import json
import math
import random

from core.jsonl import DataError

import chess
import pytest

from tasks import chess_task as ct

START = chess.STARTING_FEN
AFTER_E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
MOVES = ["e2e4", "d2d4", "g1f3", "c2c4", "b1c3"]
EVALS = [0.35, 0.30, 0.25, 0.20, 0.10]
EXACT_P = "M: e2e4 d2d4 g1f3 c2c4 b1c3 E: 0.35 0.30 0.25 0.20 0.10 B: e2e4"


@pytest.fixture(scope="module")
def p_record():
    return ct.make_policy_record("t-p", START, MOVES, EVALS, "hand")


@pytest.fixture(scope="module")
def a_record():
    return ct.make_arbiter_record("t-a", START, "e2e4", [])


def score(completion, record):
    return ct.score_completion(completion, record)["reward"]


# ---- formats and the environment ----------------------------------------------------------


def test_formats(p_record, a_record):
    assert p_record["prompt"] == f"P: {START}"
    assert p_record["target"] == EXACT_P
    assert a_record["prompt"] == f"A: {START}+e2e4++"
    assert a_record["target"] == f"{AFTER_E4}+0+0+0"
    assert ct.arbiter_prompt(START, "e2e4", ["g1f3", "g8f6"]) == f"A: {START}+e2e4+g1f3,g8f6+"


@pytest.mark.parametrize(
    "fen, move, reward, terminated, truncated",
    [
        (START, "e2e4", 0.0, 0, 0),
        ("rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2", "d8h4", 1.0, 1, 0),
        ("7k/8/6K1/8/8/8/8/5Q2 w - - 0 1", "f1f7", 0.5, 1, 0),  # stalemate
        ("7k/8/8/8/8/8/1n6/K7 w - - 0 1", "a1b2", 0.5, 1, 0),  # bare kings
        ("7k/8/8/8/8/8/8/K6R w - - 149 120", "a1a2", 0.5, 1, 0),  # 75-move rule
        ("7k/8/8/8/8/8/8/K6R w - - 99 80", "a1a2", 0.5, 0, 1),  # fifty-move: truncated
        (START, "e2e5", -1.0, 1, 0),  # unreachable square
        ("8/4P2k/8/8/8/8/8/K7 w - - 0 1", "e7e8", -1.0, 1, 0),  # promotion needs a piece
        (START, "hello", -1.0, 1, 0),
    ],
)
def test_arbiter_conventions(fen, move, reward, terminated, truncated):
    step = ct.arbiter(fen, move)
    assert (step.reward, step.terminated, step.truncated) == (reward, terminated, truncated)
    if reward == -1.0:
        assert step.fen_after == fen  # an illegal move leaves the board as it was


def test_levenshtein():
    assert ct.levenshtein("", "abc") == 3
    assert ct.levenshtein("kitten", "sitting") == 3
    assert ct.levenshtein(START, AFTER_E4) == 5  # "8"->"4P3", "P"->"1", "w"->"b"


# ---- reward bands -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, expected",
    [
        (EXACT_P, 1.0),
        ("  M: d2d4 e2e4 c2c4 g1f3 b1c3\nE: 0.3 0.35 0.2 0.25 0.1 B: e2e4\n", 1.0),  # order free
        ("M: a2a3 h2h3 E: 5.00 5.00 B: a2a3", 0.2),  # format only: nothing right
        ("M: e2e4 E: 9.00 B: e2e4", 0.2 + 0.8 * (0.5 + 0.25 * 1 / 5)),  # best only
        (EXACT_P.replace("B: e2e4", "B: d2d4"), 0.2 + 0.8 * 0.5),  # all but best
        (EXACT_P.replace("B: e2e4", "B: e2e5"), 0.2 + 0.8 * 0.5),  # illegal best: no credit
        ("M: e2e4 d2d4 g1f3 c2c4 b1c3 E: 1.35 1.30 1.25 1.20 1.10 B: e2e4", 0.2 + 0.8 * 0.875),
        (
            "M: e2e4 d2d4 a2a3 h2h3 E: 0.35 0.30 0 0 B: e2e4",
            0.2 + 0.8 * (0.5 + 0.25 * (2 / 7 + 2 / 5)),
        ),
    ],
)
def test_policy_bands(p_record, completion, expected):
    assert score(completion, p_record) == pytest.approx(expected)


def test_policy_eval_credit_is_linear_and_clipped():
    assert ct.eval_credit(0.35, 0.35) == 1.0
    assert ct.eval_credit(1.35, 0.35) == pytest.approx(0.5)
    assert ct.eval_credit(-5.0, 0.35) == 0.0
    assert ct.eval_credit(12.0, 99.99) == 1.0  # both past EVAL_CLIP: a win is a win
    mate = ct.make_policy_record("t-m", START, ["e2e4"], [99.99], "hand")
    assert score("M: e2e4 E: 15 B: e2e4", mate) == 1.0


def test_padding_the_move_list_costs_overlap(p_record):
    padded = "M: e2e4 d2d4 g1f3 c2c4 b1c3 a2a3 h2h3 a2a4 h2h4 b2b3 E: " + " ".join(
        ["0.35", "0.30", "0.25", "0.20", "0.10"] + ["0"] * 5
    )
    details = ct.score_completion(padded + " B: e2e4", p_record)
    assert details["p_moves"] == 0.5 and details["p_evals"] == 1.0 and details["p_best"] == 1.0


@pytest.mark.parametrize(
    "completion, expected",
    [
        (f"{AFTER_E4}+0+0+0", 1.0),
        (f" {AFTER_E4} + 0.0 + 0 + 0 \n", 1.0),
        (f"{START}+1+1+1", 0.2),  # copying the input FEN earns no FEN credit
        (f"{START}+0+0+0", 0.2 + 0.8 * 0.4),  # flags right only
        (f"{AFTER_E4}+-1+1+1", 0.2 + 0.8 * 0.6),  # board right only
        (f"{AFTER_E4.replace(' b ', ' w ')}+0+0+0", 0.2 + 0.8 * (0.6 * 0.8 + 0.4)),  # 1 of 5 edits
        (f"{AFTER_E4}+0.5+0+0", 0.2 + 0.8 * 0.8),
        (f"{AFTER_E4}+0+1+0", 0.2 + 0.8 * 0.9),
    ],
)
def test_arbiter_bands(a_record, completion, expected):
    assert score(completion, a_record) == pytest.approx(expected)


def test_bad_fen_is_valid_format_with_edit_distance_credit(a_record):
    bad = AFTER_E4.replace("/8/8/", "/8/")  # 7 ranks: not a position, 2 edits from the truth
    assert ct.parse_arbiter(f"{bad}+0+0+0") is not None
    with pytest.raises(ValueError):
        chess.Board(bad)
    assert score(f"{bad}+0+0+0", a_record) == pytest.approx(0.2 + 0.8 * (0.6 * 0.6 + 0.4))


def test_illegal_move_record_scores_the_unchanged_board():
    record = ct.make_arbiter_record("t-i", START, "e2e5", ["g1f3"])
    assert record["target"] == f"{START}+-1+1+0"
    assert score(f"{START}+-1+1+0", record) == 1.0
    slip = START.replace(" w ", " b ")
    assert score(f"{slip}+-1+1+0", record) == pytest.approx(0.2 + 0.8 * (0.6 * 0.75 + 0.4))


MALFORMED_P = [
    "",
    "   ",
    "e2e4",
    "M: e2e4 d2d4 E: 0.35",  # truncated
    "M: e2e4 d2d4 E: 0.35 0.30 B:",
    "Sure! " + EXACT_P,  # text before
    EXACT_P + " Hope this helps.",  # text after
    EXACT_P + " B: e2e4",
    "M: e2e4 d2d4 E: 0.35 B: e2e4",  # counts differ
    "M: E: B: e2e4",
    "M:e2e4 E:0.35 B:e2e4",
    "M: e2e4 E: 0.35 E: 0.1 B: e2e4",
    "M: e2-e4 E: 0.35 B: e2e4",
    "M: Nf3 E: 0.35 B: Nf3",  # SAN, not UCI
    "M: e2e4 E: mate B: e2e4",
    "M: e2e4 E: 1e3 B: e2e4",
    "M: e2e4 E: nan B: e2e4",
    EXACT_P * 10,  # repeated answer
    "M: " + "e2e4 " * 200 + "E: " + "0 " * 200 + "B: e2e4",  # huge
    f"{AFTER_E4}+0+0+0",  # the other task's format
    None,
    42,
]

MALFORMED_A = [
    "",
    AFTER_E4,
    f"{AFTER_E4}+0+0",  # truncated
    f"{AFTER_E4}+0+0+0+",  # trailing separator
    f"{AFTER_E4}+0+0+0+0",
    f"New FEN: {AFTER_E4}+0+0+0",  # text before
    f"{AFTER_E4}+0+0+0 done",  # text after
    f"{AFTER_E4}+0+false+false",
    f"{AFTER_E4}+0+2+0",
    f"{AFTER_E4}+win+0+0",
    "+0+0+0",
    f"{AFTER_E4}\n{AFTER_E4}+0+0+0",
    "x" * 5000 + "+0+0+0",  # huge
    EXACT_P,
    None,
]


@pytest.mark.parametrize("text", MALFORMED_P)
def test_malformed_policy_output_is_unparsable(p_record, text):
    assert ct.parse_policy(text) is None
    details = ct.score_completion(text, p_record)
    assert details["reward"] == ct.UNPARSABLE and details["format"] == 0.0
    assert details["p_best"] == 0.0 and details["a_fen"] is None


@pytest.mark.parametrize("text", MALFORMED_A)
def test_malformed_arbiter_output_is_unparsable(a_record, text):
    assert ct.parse_arbiter(text) is None
    assert score(text, a_record) == ct.UNPARSABLE


def test_rewards_never_raise_on_garbage(p_record, a_record):
    rng = random.Random(0)
    alphabet = "MEB: +-.,/0123456789abcdefghkqrnpKQRBNPw\n"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120))) for _ in range(300)]
    for target in (p_record["target"], a_record["target"]):
        for _ in range(300):  # near misses: the target with a random slice cut out or repeated
            i, j = sorted(rng.sample(range(len(target) + 1), 2))
            texts += [target[:i] + target[j:], target[:j] + target[i:], target[:i]]
    for record in (p_record, a_record):
        for text in texts:
            value = score(text, record)
            assert math.isfinite(value)
            assert value == ct.UNPARSABLE or ct.FORMAT <= value <= 1.0


@pytest.mark.parametrize(
    "text, shape",
    [
        ("M: 15b2 k2b2 xqf", 1 / 5),  # opens right, nothing else
        ("M: e2e4 d2d4 zz", (1 + 2 / 3) / 5),  # two of three candidates UCI-shaped
        ("M: e2e4 E: 0.3 B: e2e4 and more", (1 + 1 + 1 + 1) / 5),  # text after the best move
        ("M: e2e4 E: 0.3 E: 0.1 B: e2e4", (1 + 1 + 0 + 1 + 1) / 5),  # two E:
        ("M: e2e4 E: 0.3 B: hello", (1 + 1 + 1) / 5),  # B: without a move
        ("e2e4 d2d4", 0.0),
        ("", 0.0),
        (EXACT_P, 1.0),
    ],
)
def test_policy_shape_by_hand(text, shape):
    assert ct.policy_shape(text) == pytest.approx(shape)


@pytest.mark.parametrize(
    "text, shape",
    [
        (f"{AFTER_E4}+0+0+0", 1.0),
        ("r1b/pp+e2e4+x", (0.5 + 1 + 0 + 0) / 4),  # 3 fields, FEN-shaped, no number, no flag
        ("r1b/pp+1+0", (0.5 + 1 + 1 + 0.5) / 4),
        ("hello world", 0.0),  # one field, not FEN-shaped ('o' is no FEN character)
        ("+++++++", 0.0),  # 8 empty fields
    ],
)
def test_arbiter_shape_by_hand(text, shape):
    assert ct.arbiter_shape(text) == pytest.approx(shape)


def test_partial_credit_stays_below_every_parsable_answer(p_record, a_record):
    near = "M: 15b2 k2b2 xqf"
    assert ct.score_completion(near, p_record)["reward"] == ct.UNPARSABLE  # default: flat
    d = ct.score_completion(near, p_record, partial=0.4)
    assert d["reward"] == pytest.approx(-0.3 + 0.4 * 0.2) and d["format"] == 0.0
    assert d["shape"] == pytest.approx(0.2)
    # parsable answers score as before, shape 1
    assert ct.score_completion(EXACT_P, p_record, partial=0.4)["reward"] == 1.0
    worst_parsable = ct.score_completion("M: a1a2 E: 9 B: a1a2", p_record, partial=0.49)
    assert worst_parsable["reward"] == ct.FORMAT
    # the best-shaped unparsable answers stay below FORMAT at the largest allowed partial
    for text, record in (("M: e2e4 E: 0.3 B: e2e4 x", p_record), ("r1b/pp+1+0+0+1", a_record)):
        assert ct.score_completion(text, record, partial=0.4999)["reward"] < ct.FORMAT
    for bad in (0.5, -0.1, True, "0.2"):
        with pytest.raises(ValueError, match="partial"):
            ct.score_completion(near, p_record, partial=bad)


# ---- the reward contract ------------------------------------------------------------------


def test_chess_reward_contract(p_record, a_record):
    prompts = [p_record["prompt"], a_record["prompt"], a_record["prompt"]]
    completions = [EXACT_P, "junk", a_record["target"]]
    records = [p_record, a_record, a_record]
    assert ct.chess_reward(prompts, completions, records=records) == [1.0, ct.UNPARSABLE, 1.0]
    bound = ct.make_chess_reward([p_record, a_record])
    assert bound(prompts, completions, categories=["x"] * 3) == [1.0, ct.UNPARSABLE, 1.0]
    details = ct.chess_reward_details(prompts, completions, records=records)
    assert details[0]["p_best"] == 1.0 and details[0]["a_fen"] is None
    assert details[1]["format"] == 0.0 and details[1]["a_fen"] == 0.0
    assert details[1]["p_best"] is None
    assert all(v is None or isinstance(v, float) for d in details for v in d.values())


def test_chess_reward_takes_conversations_and_refuses_other_types(p_record):
    prompt = [{"role": "user", "content": p_record["prompt"]}]
    completion = [{"role": "assistant", "content": EXACT_P}]
    assert ct.chess_reward([prompt], [completion], records=[p_record]) == [1.0]
    assert ct.make_chess_reward([p_record])([prompt], [completion]) == [1.0]
    with pytest.raises(TypeError, match="got NoneType"):
        ct.chess_reward([p_record["prompt"]], [None], records=[p_record])


def test_chess_reward_refuses_misaligned_or_unknown_prompts(p_record, a_record):
    with pytest.raises(ValueError, match="align records"):
        ct.chess_reward([a_record["prompt"]], [EXACT_P], records=[p_record])
    with pytest.raises(ValueError, match="1 records"):
        ct.chess_reward([p_record["prompt"]] * 2, [EXACT_P] * 2, records=[p_record])
    with pytest.raises(ValueError, match="no record"):
        ct.make_chess_reward([p_record])(["P: something else"], [EXACT_P])


# ---- loader -------------------------------------------------------------------------------


def write_lines(tmp_path, lines, name="bad.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def dump(record):
    return json.dumps(record)


def test_loader_accepts_good_records(tmp_path, p_record, a_record):
    path = write_lines(tmp_path, [dump(p_record), dump(a_record)], "ok.jsonl")
    assert ct.load_chess(path) == [p_record, a_record]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: {**r, "target": r["target"].replace("0.35", "0.36")}, "disagrees"),
        (lambda r: {**r, "moves": ["e2e5", *r["moves"][1:]]}, "not legal"),
        (lambda r: {**r, "fen": "not a fen"}, "is not a FEN"),
        (lambda r: {**r, "evals": [0.1]}, "one eval each"),
        (lambda r: {**r, "extra": 1}, "unknown field"),
        (lambda r: {k: v for k, v in r.items() if k != "best"}, "missing field 'best'"),
        (lambda r: {**r, "task": "Q"}, "task 'Q'"),
        (lambda r: {**r, "moves": "e2e4"}, "'moves' is str, expected list"),
        (lambda r: {**r, "evals": ["0.35", 0.3, 0.25, 0.2, 0.1]}, "finite numbers"),
    ],
)
def test_loader_names_file_line_and_fix(tmp_path, p_record, a_record, edit, message):
    path = write_lines(tmp_path, [dump(a_record), dump(edit(p_record))])
    with pytest.raises(DataError, match=message) as info:
        ct.load_chess(path)
    assert path in str(info.value) and "line 2" in str(info.value) and info.value.line == 2


def test_loader_recomputes_arbiter_labels(tmp_path, a_record):
    forged = {**a_record, "reward": 1.0, "target": a_record["target"].replace("+0+0+0", "+1+0+0")}
    with pytest.raises(DataError, match="reward 1.0 disagrees"):
        ct.load_chess(write_lines(tmp_path, [dump(forged)]))


@pytest.mark.parametrize(
    "lines, message",
    [
        ([], "file is empty"),
        (["{not json"], "line 1: not valid JSON"),
        (["[1, 2]"], "expected a JSON object"),
        (["", "{}"], "line 1: blank line"),
    ],
)
def test_loader_rejects_malformed_files(tmp_path, lines, message):
    with pytest.raises(DataError, match=message):
        ct.load_chess(write_lines(tmp_path, lines))


def test_loader_rejects_duplicates_and_missing_files(tmp_path, p_record):
    again = {**p_record, "id": "t-p2"}
    with pytest.raises(DataError, match="line 2: duplicate prompt"):
        ct.load_chess(write_lines(tmp_path, [dump(p_record), dump(again)]))
    with pytest.raises(DataError, match="file not found"):
        ct.load_chess(tmp_path / "missing.jsonl")
