"""The environment a run trains on, chosen once by `--task`: its prompts, reward and eval set.

`TASKS` holds one `Task` per name. `values` (the default): the rubric prompts of
data/prompts.jsonl, the model-judged rubric reward, data/eval.jsonl. `chess`: the P:/A: records
of data/chess/train.jsonl, the graduated chess reward against their labels (tasks/chess_task.py),
data/chess/val.jsonl (test.jsonl stays held out for a final figure). A task hands the loop
records with `id`, `prompt` (the user turn) and `category`, the record's group key: the prompt
category for values, the task type (P or A) for chess. Advantage baselines, rollout logs and
evaluation group by it, so evaluation reports the reward and each reward part per task type
(chess: `format` is the validity rate). A task may open every policy prompt with a system
message and example turns (chess: worked examples of the prompt's task type) and names the
registered rewards it cannot use. A task's own reward is registered here, at import
(rewards.registry.register: chess and its task types), so every command that takes --task can
parse it and rewards/ never imports a task. It loads and checks; it does not sample, score or train.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from core.prompts import EVAL_PROMPTS, TRAIN_PROMPTS, load_prompts

import numpy as np

from rewards import registry as rewards
from tasks import chess_task


def load_chess_records(path) -> list[dict]:
    """Chess records (chess_task.load_chess) with `category` = the task type, P or A."""
    return [{**r, "category": r["task"]} for r in chess_task.load_chess(path)]


def _check_chess(partial: float = 0.0):
    chess_task.check_partial(partial)


def _build_chess(ctx, partial: float = 0.0):
    """The graduated chess reward; `partial` > 0 gives an unparsable answer partial credit for
    its format's shape (chess_task.score_completion), below every parsable answer."""
    if not ctx.records or any("task" not in r for r in ctx.records):
        raise ValueError("the chess reward scores against chess labels: run with --task chess")
    find = chess_task.record_finder(ctx.records)

    def score(prompts, completions, categories):
        details = chess_task.chess_reward_details(
            prompts, completions, records=find(prompts), partial=partial
        )
        return rewards.Scores(
            np.array([d["reward"] for d in details], dtype=np.float64), details, 0
        )

    return score


CHESS_REWARD = rewards.Entry(
    _build_chess,
    _check_chess,
    None,
    "graduated chess reward vs labels (--task chess); partial: credit in [0, 0.5) for an "
    "unparsable answer's format shape (default 0)",
)
rewards.register("chess", CHESS_REWARD, task="chess", categories=chess_task.TASKS)


# Few-shot turns per task type, taken from data/chess/train.jsonl (CHESS_EXAMPLE_IDS; tests check
# they match): a P: prompt opens with two P: examples, an A: prompt with two A: ones. Measured on
# 16 val prompts (knowledge/chess.md, "Training"): with no examples, or with one of each task,
# SmolLM2-135M wrote no P: answer in format; with its own task's examples P: answers start "M:".
CHESS_EXAMPLES = {
    "P": (
        (
            "P: r4b2/1pn2kr1/2Np1ppp/B2Pp3/3Q3P/1bNK1P2/PPP3B1/R6R b - - 0 21",
            "M: e5d4 b3c2 c7d5 b7c6 f7g8 E: -5.45 -5.77 -7.32 -7.38 -7.69 B: e5d4",
        ),
        (
            "P: 2brk2r/pBp1nqpp/8/3Pp2n/3PP3/BP4P1/P4P1P/RN1K2NR b k - 2 18",
            "M: c8b7 h5f6 f7f2 c8g4 e8g8 E: 6.07 5.28 5.19 4.99 4.65 B: c8b7",
        ),
    ),
    "A": (
        (
            "A: rn3b1r/p3pkpp/4b3/2p2p2/3p2P1/QP1N4/P2P1P1P/RNB2K1R b - - 0 18+f7e8+"
            "g5f3,e2f3,c3f3,g3g4,c8e6,h3f4,f3d3,f4d3+",
            "rn2kb1r/p3p1pp/4b3/2p2p2/3p2P1/QP1N4/P2P1P1P/RNB2K1R w - - 1 19+0+0+0",
        ),
        (
            "A: r2qkrn1/1b1p4/n2bpp2/Ppp3pp/2PPP1P1/2N2Q2/P4PBP/R1B1K1NR w Kq - 2 22+e1d1+"
            "h3g2,c8b7,a1b1,f7f8,e2f3,g6g5,b1a1,e7d6+",
            "r2qkrn1/1b1p4/n2bpp2/Ppp3pp/2PPP1P1/2N2Q2/P4PBP/R1BK2NR b q - 3 22+0+0+0",
        ),
    ),
}
CHESS_EXAMPLE_IDS = ("train-00002", "train-00000", "train-00009", "train-00005")


def chess_examples(prompt: str) -> tuple[tuple[str, str], ...]:
    """The example turns for a chess prompt: those of its task type (the prefix before ':')."""
    return CHESS_EXAMPLES.get(prompt.partition(":")[0], ())


# The values task's default reward: the reward model trained on the written pairs, then on the
# same pairs plus broken variants of their better answers (cut off, shuffled, repeating, padded):
# test pairwise accuracy 0.855, intact over broken 0.82-0.98 per kind, where the first version
# preferred shuffled text to the intact answer (knowledge/reward_model.md, "Broken-text probes").
# It reads SmolLM2's tokenizer: other policies pass --reward rubric or their own rm:PATH.
DEFAULT_VALUES_REWARD = "rm:models/rm-smollm2-135m-v2"

# The values task's training settings on train.py's command line, where the library's TrainConfig
# defaults are neutral (full fine-tuning, T = 1, no KL target): LoRA r8 on every projection of the
# top 12 blocks (a 4 MB checkpoint, the backward stops there), T = 0.8, an adaptive KL target,
# answers capped at 80 tokens that earn no more than an ended one. They are the learning recipe's
# (recipes/values_smollm2.json): at T = 1 and lr 2e-4 with full fine-tuning the first learning run
# wrote word salad (knowledge/learning_run.md). --config files and flags override them.
VALUES_TRAINING = {
    "lora_rank": 8,
    "lora_alpha": 16.0,
    "lora_targets": "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
    "lora_layers": 12,
    "temperature": 0.8,
    "lr": 6e-5,
    "warmup_steps": 5,
    "kl_coef": 0.1,
    "kl_target": 0.02,
    "kl_horizon": 100,
    "max_new_tokens": 80,
    "truncated": "cap",
}


@dataclass(frozen=True)
class Task:
    """What a task supplies: default files and reward, how to load its records, what opens every
    policy prompt (a system message, example turns), the registered rewards it refuses (name ->
    why)."""

    name: str
    data: str
    eval_data: str
    reward: str
    load: Callable[[str], list[dict]]
    system_prompt: str | None = None
    examples: Callable[[str], tuple[tuple[str, str], ...]] | None = None  # prompt -> turns
    refuses: dict[str, str] = field(default_factory=dict)
    training: dict = field(default_factory=dict)  # TrainConfig fields train.py's CLI starts from


TASKS: dict[str, Task] = {
    "values": Task(
        "values",
        data=TRAIN_PROMPTS,
        eval_data=EVAL_PROMPTS,
        reward=DEFAULT_VALUES_REWARD,
        load=load_prompts,
        refuses={"chess": "it scores against chess labels; use --task chess"},
        training=VALUES_TRAINING,
    ),
    "chess": Task(
        "chess",
        data="data/chess/train.jsonl",
        eval_data="data/chess/val.jsonl",
        reward="chess",
        load=load_chess_records,
        examples=chess_examples,
        refuses={
            "rubric": "the rubric judges the values prompts by their category; use --reward chess",
            "rm": "the reward models read the values prompts' categories; use --reward chess",
            "stance": "it pays pushback by the values prompts' categories; use --reward chess",
        },
    ),
}


def get(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"task {name!r} is not one of {sorted(TASKS)}; use --task values or chess")
    return TASKS[name]


def default_reward(name: str = "values") -> str:
    """The reward spec a command uses when given none: the task's own. Every command (train,
    evaluate, bench_judge, chat, sweep through train) resolves its default here, nowhere else."""
    return get(name).reward


def default_reward_model(name: str = "values") -> str | None:
    """The reward-model folder of the task's default reward when it is one `rm:PATH` spec, else
    None (chat.py scores with it beside the rubric)."""
    spec = default_reward(name)
    return spec.removeprefix("rm:") if spec.startswith("rm:") and "," not in spec else None


def check_rewards(task: Task, names: list[str]) -> None:
    """ValueError naming the reward and the fix if `task` cannot use one of `names`."""
    for name in names:
        if name in task.refuses:
            raise ValueError(
                f"--task {task.name} cannot use the {name!r} reward: {task.refuses[name]}"
            )
