"""Mutation check: plant a known bug in a copy of the repository and confirm the tests catch it.

Each mutation names one invariant of the training math (routing reaches the loop, the ratio's
stop_gradient, the KL sign, the EOS in the completion mask, centred advantages), the exact source
lines it breaks (a mutation whose lines no longer occur exactly once is an error: update it with
the code), and the test files that guard it. For each, the tracked files are copied to a temporary
folder, the one replacement is made, and pytest runs those files there; the mutation is CAUGHT
when pytest fails. A mutation that survives means the suite cannot fail for that bug. `--full`
runs the whole suite per mutation instead of the guarding files (minutes each on 2 cores).

  uv run python -m bench.mutation_check            # every mutation, a table; exit 1 if one survives
  uv run python -m bench.mutation_check --only kl_sign_flipped --json

Not a general mutation-testing tool (no generated mutants): a short list of bugs that matter.
Results and the command: knowledge/grpo.md, "Mutation checks".
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from core import errors, strict_json

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str  # file in the repository
    old: str  # must occur exactly once in the file
    new: str
    tests: tuple[str, ...]  # the test files that should catch it
    why: str


MUTATIONS = (
    Mutation(
        "routing_off_in_loop",
        "rl/routing.py",
        "grads, sums = accumulate(model, loss_fn, micro, args)",
        "grads, sums = accumulate(model, loss_fn, micro, args, route=False)",
        ("tests/test_routing.py",),
        "flagged completions then train the retain adapter too",
    ),
    Mutation(
        "ratio_stop_gradient_removed",
        "rl/policy_update.py",
        "old = mx.stop_gradient(logp) if old is None else old",
        "old = logp if old is None else old",
        ("tests/test_train.py", "tests/test_routing.py"),
        "the ratio pi/pi_old is then 1 with zero gradient: no policy gradient at all",
    ),
    Mutation(
        "kl_sign_flipped",
        "grpo.py",
        "loss = pg_loss + kl_coef * kl_loss",
        "loss = pg_loss - kl_coef * kl_loss",
        ("tests/test_grpo.py",),
        "the KL term then pushes the policy away from the reference",
    ),
    Mutation(
        "eos_left_out_of_mask",
        "gwen.py",
        "seen_before = mx.cumsum(is_eos.astype(mx.int32), axis=1) - is_eos.astype(mx.int32)",
        "seen_before = mx.cumsum(is_eos.astype(mx.int32), axis=1)",
        ("tests/test_gwen.py",),
        "the EOS that ended a completion is then never trained (tiny-grpo's pad == EOS bug)",
    ),
    Mutation(
        "advantages_not_centred",
        "grpo.py",
        "adv = np.where(finite, r - mean[:, None], 0.0)",
        "adv = np.where(finite, r, 0.0)",
        ("tests/test_grpo.py",),
        "the group mean is then not subtracted: every sample of a good group is pushed up",
    ),
)


def tracked_files(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, text=True
    )
    return [p for p in out.stdout.split("\0") if p]


def apply(mutation: Mutation, tree: Path) -> None:
    """Make the one replacement in `tree`; raise if its lines do not occur exactly once."""
    path = tree / mutation.path
    text = path.read_text()
    count = text.count(mutation.old)
    if count != 1:
        raise ValueError(
            f"mutation {mutation.name}: {mutation.old!r} occurs {count} times in {mutation.path} "
            "(expected once): update the mutation in bench/mutation_check.py to the current code"
        )
    path.write_text(text.replace(mutation.old, mutation.new))


def copy_tree(root: Path, dest: Path) -> None:
    for rel in tracked_files(root):
        src = root / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def run_mutation(mutation: Mutation, full: bool = False) -> dict:
    """Copy, mutate, run pytest there -> {"name", "caught", "failed_tests", "seconds"}."""
    with tempfile.TemporaryDirectory(prefix=f"mut_{mutation.name}_") as tmp:
        tree = Path(tmp)
        copy_tree(ROOT, tree)
        apply(mutation, tree)
        targets = ["tests"] if full else list(mutation.tests)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *targets],
            cwd=tree,
            capture_output=True,
            text=True,
        )
        failed = [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("FAILED ")]
        return {
            "name": mutation.name,
            "file": mutation.path,
            "tests": targets,
            "caught": proc.returncode != 0,
            "pytest_exit": proc.returncode,
            "failed_tests": failed,
            "seconds": round(time.perf_counter() - t0, 1),
        }


@errors.cli
def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", help="a mutation name (repeatable); default all")
    p.add_argument("--full", action="store_true", help="run the whole suite per mutation")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    names = {m.name for m in MUTATIONS}
    for name in args.only or []:
        if name not in names:
            raise errors.UserError(f"--only {name!r} is not a mutation; use one of {sorted(names)}")
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    results = []
    for m in chosen:
        if not args.json:
            print(f"{m.name}: planting in {m.path}, running {' '.join(m.tests)} ...", flush=True)
        results.append(run_mutation(m, args.full))
    survived = [r["name"] for r in results if not r["caught"]]
    if args.json:
        print(strict_json.dumps({"results": results, "survived": survived}, indent=2))
    else:
        print(
            "\n| mutation | caught | pytest exit | first failing test | s |\n|---|---|---|---|---|"
        )
        for r in results:
            first = r["failed_tests"][0] if r["failed_tests"] else "-"
            print(
                f"| {r['name']} | {r['caught']} | {r['pytest_exit']} | {first} | {r['seconds']} |"
            )
        print(
            f"\n{len(results) - len(survived)} of {len(results)} caught"
            + (f"; SURVIVED: {', '.join(survived)}" if survived else "")
        )
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
