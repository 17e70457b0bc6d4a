"""Does a run learn? Mean reward of the first 5 steps vs the last 5, and the reward curve.

By default trains `--model` with `--reward` for `--steps` steps (train.py's defaults otherwise),
then reads its metrics.jsonl; `--run-dir` analyses an existing run instead (e.g. one resumed
after an interruption). Prints the two means, their difference, the per-step rewards, and writes
the reward curve PNG with train.py's plotting. Not a test: a learning run takes many minutes.
"""

import argparse
import statistics
import sys
from pathlib import Path

import backend

import errors
import runlog
import strict_json
import train
from config import TrainConfig


def summarize(run_dir: Path, window: int = 5) -> dict:
    with errors.as_user_error(ValueError):  # a malformed line, named by file and line
        rows = runlog.MetricsLog.read(run_dir / "metrics.jsonl")
    if len(rows) < 2 * window:
        raise errors.UserError(f"{run_dir} has {len(rows)} steps; need >= {2 * window}")
    rewards = [r["reward_mean"] for r in rows]
    first, last = statistics.mean(rewards[:window]), statistics.mean(rewards[-window:])
    plots = [str(p) for p in runlog.plot_run(run_dir)]
    return {
        "run_dir": str(run_dir),
        "steps": len(rows),
        "first5_reward": first,
        "last5_reward": last,
        "gain": last - first,
        "reward_by_step": rewards,
        "kl_last": rows[-1].get("kl_mean"),
        "plots": plots,
    }


@errors.cli
def main(argv=None):
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="policy checkpoint")
    p.add_argument("--reward", default="happy", help="happy | rubric")
    p.add_argument("--steps", type=int, default=60, help="training steps")
    p.add_argument("--run-dir", default=None, help="analyse this existing run instead")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args(argv)
    if a.run_dir:
        run_dir = Path(a.run_dir)
    else:
        with errors.as_user_error(ValueError):  # TrainConfig's checks
            cfg = TrainConfig(model=a.model, reward=a.reward, steps=a.steps)
        backend.announce()
        run_dir = train.run(cfg)
    result = summarize(run_dir)
    if a.json:
        print(strict_json.dumps(result))
        return
    for k, v in result.items():
        print(f"{k:>16}: {v}")


if __name__ == "__main__":
    sys.exit(main())
