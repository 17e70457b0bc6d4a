"""A training run's state, and its checkpoint: the `Run` dataclass, `save_run`, `resume_run`.

`Run` holds everything a GRPO run holds (config, policy, reference, scorer, optimizer, data
stream, KL controller, logs, the hooks run after each update); train.build makes it and only the
loop mutates it. `save_run` and `resume_run` write and restore all of it through
rl/checkpoint.py's primitives (which take plain models, optimizers and dicts), so an interrupted
run resumes exactly. The loop's parts that
operate on a run import its type from here (issue 24: the run's type is explicit).
"""

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core.prompts import PairedStream, PromptStream

import mlx.optimizers as optim

import grpo
from gwen import Gwen
from rewards.scorer import Scorer
from rl import checkpoint, distributed, runlog, tblog
from rl.config import TrainConfig
from rl.reference import Reference
from rl.reward_refresh import FOLDER as REFRESH_FOLDER
from rl.reward_refresh import Refresher
from rl.rollout_batch import Rollout


@dataclass
class Run:
    """Everything a run holds; built once by `build`, mutated only by the loop."""

    cfg: TrainConfig
    run_dir: Path
    policy: Gwen
    reference: Reference | None  # None: no KL term
    scorer: Scorer
    optimizer: optim.Optimizer
    stream: PromptStream | PairedStream
    eval_records: list[dict]
    controller: grpo.AdaptiveKLController
    metrics: runlog.MetricsLog
    db: runlog.RolloutDB
    tb: tblog.TBLog | None  # None: --no-tensorboard
    baseline_state: dict = field(default_factory=dict)  # grpo.baseline_update's, per category
    counters: dict = field(
        default_factory=lambda: {
            "skipped_steps": 0,
            "rolled_back_steps": 0,
            "failed_in_a_row": 0,
            "filtered_groups": 0,
            "judge_failures": 0,
        }
    )
    detectors: list = field(default_factory=list)  # [(label, fn)]: hacks.build
    routing_eval: Callable | None = None  # eval_routing.evaluate with its settings bound
    trunk_depth: int = 0  # > 0: sampling keeps the frozen blocks' output for the update
    refresher: Refresher | None = None  # --reward-refresh: updates the reward model in the run
    # After each update, in order: hook(step, rollout) -> metrics for the step's row. The
    # refresher is one (above as well: its state goes into every checkpoint).
    step_hooks: list[Callable[[int, Rollout], dict]] = field(default_factory=list)


def save_run(run: Run, step: int) -> Path | None:
    """Checkpoint a training run at `step`: weights, optimizer and everything the
    loop needs to go on exactly (rank 0 only: the other ranks hold the same state)."""
    if not distributed.is_main():
        return None
    state = {
        "data": run.stream.state(),
        "kl_controller": run.controller.state_dict(),
        "baseline": run.baseline_state,
        "counters": dict(run.counters),
        "sqlite_rows": run.db.flush(),
    }
    return checkpoint.save(
        run.run_dir,
        step,
        model=run.policy.model,
        tokenizer=run.policy.tokenizer,
        optimizer=run.optimizer,
        trainer_state=state,
        config=dataclasses.asdict(run.cfg),
        lora_cfg=run.cfg.lora_config(),
        extra=refresh_writer(run),
    )


def refresh_writer(run: Run):
    """What save_run adds to a checkpoint for --reward-refresh: the refreshed reward model."""
    if run.refresher is None:
        return None
    return lambda folder: run.refresher.save(folder / REFRESH_FOLDER)


def resume_run(run: Run) -> int:
    """Restore the newest checkpoint of run.run_dir into `run`  and cut its logs back
    to that step; return the step."""
    ckpt = checkpoint.latest(run.run_dir)
    state = checkpoint.restore(
        ckpt, model=run.policy.model, optimizer=run.optimizer, lora=bool(run.cfg.lora_rank)
    )
    if run.refresher:
        run.refresher.restore(ckpt / REFRESH_FOLDER)
    run.stream.load_state(state["data"])
    run.controller = grpo.AdaptiveKLController.from_state_dict(state["kl_controller"])
    run.baseline_state = state.get("baseline", {})  # checkpoints before issue 15 have none
    run.counters.update(state["counters"])
    run.metrics.truncate_after(state["step"])
    run.db.truncate_after(state["step"])
    if run.tb:
        run.tb.truncate_after(state["step"])
    print(f"resumed {run.run_dir} at step {state['step']} from {ckpt.name}", file=sys.stderr)
    return state["step"]
