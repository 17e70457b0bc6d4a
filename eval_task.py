"""Held-out evaluation on a ground-truth task: greedy answers of a model or checkpoint to a
task's file, scored by the task's judge-free reward (chess: graduated against Stockfish and the
rules), per record type. The values task is evaluated by evaluate.py (several models, judged
rewards, pushback, diversity, KL); this command serves rewards that need no judge model.

    uv run python eval_task.py --task chess --data data/chess/test.jsonl \
        --model runs/X/checkpoints/step_000100
"""

import argparse

from core import backend, errors, flags, strict_json

from gwen import Gwen
from load_weights import MODEL_HELP
from rewards.registry import RewardContext, needs_judge, parse_spec
from rewards.scorer import build_scorer
from rl.eval_hook import evaluate
from tasks import registry as tasks


@errors.cli
def main(argv=None) -> int:
    """CLI: evaluate --model on --task's eval file (or --prompts); bad input is one error line."""
    p = argparse.ArgumentParser(
        allow_abbrev=False, description="Greedy held-out evaluation on a ground-truth task."
    )
    p.add_argument("--model", default="smollm2-135m", help=MODEL_HELP)
    p.add_argument("--task", default="chess", help=f"one of {sorted(tasks.TASKS)}")
    p.add_argument("--prompts", dest="data", help="eval records (default: the task's eval file)")
    p.add_argument("--reward", help="reward spec (default: the task's); no judge-model rewards")
    p.add_argument("--limit", type=int, default=100, help="records to answer")
    p.add_argument("--max-new-tokens", type=int, default=80, help="generation cap")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    flags.add_dtype(p)
    flags.renamed(p, "--data", "--prompts")  # one flag vocabulary: --prompts names an eval file
    args = p.parse_args(argv)
    with errors.as_user_error(ValueError):  # the task, reward spec, data and model
        task = tasks.get(args.task)
        spec = args.reward or task.reward
        components = parse_spec(spec)
        tasks.check_rewards(task, [c.name for c in components])
        if needs_judge(components):
            raise errors.UserError(
                f"--reward {spec!r} needs a judge model: use evaluate.py for the values task"
            )
        records = task.load(args.data or task.eval_data)
        policy = Gwen.load(args.model, backend.parse_dtype(args.dtype))
        policy.system_prompt, policy.examples = task.system_prompt, task.examples
        scorer = build_scorer(components, RewardContext(records=records))
    out = evaluate(policy, scorer, records, limit=args.limit, max_new_tokens=args.max_new_tokens)
    out = {"model": args.model, "data": args.data or task.eval_data, **out}
    print(strict_json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
