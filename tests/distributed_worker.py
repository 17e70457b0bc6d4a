"""One rank of the tests in test_distributed.py, started by `mlx.launch`: trains the tiny model
of test_train.py with GRPO and the config given as JSON, then writes this rank's weights to
OUT/rank<r>.npz so the test can check every rank holds the same ones. With --rm it runs
train_rm.train on an RMTrainConfig instead.

    mlx.launch -n 2 --backend ring -- python tests/distributed_worker.py OUT CONFIG_JSON [--resume]
"""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from core import backend  # noqa: E402,F401

import numpy as np  # noqa: E402
from test_train import low_tokens, tiny_policy, weights  # noqa: E402

import train  # noqa: E402
import train_rm  # noqa: E402
from rl import distributed  # noqa: E402


def main() -> None:
    out, config = Path(sys.argv[1]), json.loads(sys.argv[2])
    resume = "--resume" in sys.argv[3:]
    if "--rm" in sys.argv[3:]:
        train_rm.train(train_rm.RMTrainConfig(**config), resume=resume)
        print(f"rank {distributed.rank()} of {distributed.size()} done", flush=True)
        return
    cfg = train.TrainConfig(**config)
    policy = tiny_policy()
    run_dir = Path(cfg.out_dir) / cfg.run_name
    train.run(cfg, resume=resume, run_dir=run_dir, policy=policy, reward_fn=low_tokens)
    np.savez(out / f"rank{distributed.rank()}.npz", **weights(policy))
    print(f"rank {distributed.rank()} of {distributed.size()} done", flush=True)


if __name__ == "__main__":
    main()
