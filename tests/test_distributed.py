"""Data-parallel training: the pieces in one process, then 2 ranks under `mlx.launch` (ring
backend on 127.0.0.1) against one process on the same global batch."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from core import backend  # noqa: F401

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from helpers import QWEN3, tiny_model, tiny_tokenizer
from mlx.utils import tree_flatten
from test_train import low_tokens, metric_rows, tiny_policy

import grpo
import train
from gwen import Gwen, sequence_logprobs
from rewards.registry import Scores
from rl import distributed


def flat(tree) -> np.ndarray:
    return np.concatenate([np.array(v).ravel() for _, v in tree_flatten(tree)])


ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "distributed_worker.py"
PROMPTS = ["t5 t6 t7", "t8 t9", "t10 t11 t12 t13", "t14"]


# ------------------------------------------------------------------------------------------
# One process: the pieces


@pytest.mark.parametrize("kind", ["numpy", "mlx"])
def test_row_seeded_halves_gathered_equal_the_whole_batch(kind):
    """Each half of the prompts sampled alone with its rows' seeds, then concatenated the way
    gather_rollout does it, is the sample of all prompts at once (padding included)."""
    g = Gwen(tiny_model(QWEN3, seed=1), tiny_tokenizer(QWEN3["vocab_size"]))
    g.sampler = kind
    G, seeds = 3, list(range(100, 100 + 3 * len(PROMPTS)))
    whole = g.sample_group(PROMPTS, G, 8, temperature=1.0, top_p=0.9, seed=seeds)
    halves = [
        g.sample_group(PROMPTS[a:b], G, 8, temperature=1.0, top_p=0.9, seed=seeds[a * G : b * G])
        for a, b in ((0, 2), (2, 4))
    ]
    scores = Scores(np.zeros(2 * G), None, 0)
    got = distributed.concat_samples(
        [distributed.host_fields(h, scores) for h in halves], g.pad_id, G, 1.0
    )
    assert halves[0].prompt_tokens.shape != halves[1].prompt_tokens.shape, "padding is exercised"
    for name in ("prompt_tokens", "prompt_pad", "tokens", "mask"):
        assert mx.array_equal(getattr(got, name), getattr(whole, name)), name
    assert mx.allclose(got.logprobs, whole.logprobs, atol=1e-5).item()
    assert got.texts == whole.texts and (got.finished == whole.finished).all()
    with pytest.raises(ValueError, match="one per completion row"):
        g.sample_group(PROMPTS, G, 8, seed=seeds[:-1])


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
def test_share_weighted_micro_batch_gradients_equal_the_full_batch(loss_type):
    """Micro-batch (or rank) gradients weighted by micro_batch_shares sum to the whole batch's
    gradient, with uneven lengths and a dropped group; a plain mean of them does not."""
    model = tiny_model(QWEN3, seed=3)
    g = Gwen(model, tiny_tokenizer(QWEN3["vocab_size"]))
    G = 2
    s = g.sample_group(PROMPTS, G, 7, temperature=1.0, seed=list(range(8)))
    mask = s.mask * mx.array([1, 1, 0, 0, 1, 1, 1, 1], dtype=mx.float32)[:, None]  # drop group 1
    adv = mx.array([0.5, -0.5, 1.0, -1.0, 1.5, -1.5, 0.3, -0.3])
    cfg = grpo.LossConfig(loss_type=loss_type, max_completion_len=7)

    def loss(model, p, c):
        logp = sequence_logprobs(model, s.prompt_tokens[p], s.prompt_pad[p], s.tokens[c], G, 1.0)
        # A ratio against a shifted old policy, so the gradient is not just the advantage term.
        return grpo.policy_loss(logp, mx.stop_gradient(logp) - 0.1, None, adv[c], mask[c], cfg)[0]

    grad = nn.value_and_grad(model, loss)
    full = grad(model, slice(0, 4), slice(0, 8))[1]
    parts = [(slice(0, 1), slice(0, 2)), (slice(1, 4), slice(2, 8))]
    shares = grpo.micro_batch_shares(mask, [c for _, c in parts], loss_type)
    assert sum(w for w, _ in shares) == pytest.approx(1.0)
    gs = [flat(grad(model, p, c)[1]) for p, c in parts]
    want = flat(full)
    got = sum(g * w for g, (w, _) in zip(gs, shares, strict=True))
    assert np.allclose(got, want, atol=1e-6, rtol=1e-4), np.abs(got - want).max()
    assert not np.allclose((gs[0] + gs[1]) / 2, want, atol=1e-6, rtol=1e-4), "a plain mean"


def test_combine_metrics_weights_counts_and_maxima():
    parts = [
        {"loss": mx.array(1.0), "kl_mean": mx.array(2.0), "n_tokens": mx.array(3.0),
         "ratio_max": mx.array(1.5)},
        {"loss": mx.array(3.0), "kl_mean": mx.array(4.0), "n_tokens": mx.array(9.0),
         "ratio_max": mx.array(1.1)},
    ]  # fmt: skip
    got = grpo.combine_metrics(parts, [(0.5, 0.25), (0.5, 0.75)])
    assert {k: v.item() for k, v in got.items()} == {
        "loss": 2.0,
        "kl_mean": 3.5,
        "n_tokens": 12.0,
        "ratio_max": 1.5,
    }


def test_one_process_is_a_group_of_one():
    assert (distributed.rank(), distributed.size(), distributed.is_main()) == (0, 1, True)
    assert distributed.shard(5) == range(5)
    old = [
        (slice(i * 4 // 2, (i + 1) * 4 // 2), slice(i * 12 // 2, (i + 1) * 12 // 2)) for i in (0, 1)
    ]
    assert distributed.micro_batches(4, 3, 2) == old
    tree = {"w": mx.ones(3)}
    assert distributed.sum_gradients(tree) is tree
    assert distributed.gather_objects({"a": 1}) == [{"a": 1}]
    assert distributed.any_rank(True) and not distributed.any_rank(False)
    distributed.check_same(lambda: pytest.fail("not called with one rank"))


def test_ranks_that_start_differently_are_one_error(monkeypatch):
    monkeypatch.setattr(distributed, "size", lambda: 2)
    monkeypatch.setattr(distributed, "gather_objects", lambda v: [v, v | {"step": 3}])
    with pytest.raises(distributed.LaunchError, match="rank 1 starts with a different step"):
        distributed.check_same(lambda: {"config": {"lr": 1}, "step": 2})
    other = {"lr": 2, "seed": 0}
    monkeypatch.setattr(distributed, "gather_objects", lambda v: [v, v | {"config": other}])
    with pytest.raises(distributed.LaunchError, match=r"config than rank 0 \(\{'lr': 2\}"):
        distributed.check_same(lambda: {"config": {"lr": 1, "seed": 0}, "step": 2})


def test_shards_cover_the_batch_in_order(monkeypatch):
    monkeypatch.setattr(distributed, "size", lambda: 3)
    blocks = []
    for r in range(3):
        monkeypatch.setattr(distributed, "rank", lambda r=r: r)
        blocks.append(list(distributed.shard(7)))
    assert blocks == [[0, 1], [2, 3], [4, 5, 6]]


def test_a_batch_that_does_not_split_is_one_error_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(distributed, "size", lambda: 3)
    with pytest.raises(distributed.LaunchError, match="multiple of 6"):
        distributed.check_split(4, 2, "prompts_per_step")
    rc = train.main(["--model", "tiny", "--prompts-per-step", "4", "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip().splitlines()[-1].startswith("error: prompts_per_step=4")
    assert err.count("error:") == 1 and "Traceback" not in err


# ------------------------------------------------------------------------------------------
# Two ranks under mlx.launch


def launch(n: int, out: Path, cfg: dict, *extra: str, timeout: int = 900) -> str:
    """Run the worker on n local ranks; return the output. mlx.launch exits 0 even when a rank
    fails, so success is every rank's closing line."""
    launcher = Path(sys.executable).parent / "mlx.launch"
    if not launcher.exists():
        pytest.skip(f"mlx.launch is not installed beside {sys.executable}")
    out.mkdir(parents=True, exist_ok=True)
    port = distributed.free_local_port(n)
    cmd = [str(launcher), "-n", str(n), "--backend", "ring", "--starting-port", str(port)]
    cmd += ["--", sys.executable, str(WORKER), str(out), json.dumps(cfg), *extra]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{n} ranks did not finish in {timeout} s:\n{output[-4000:]}")
    missing = [r for r in range(n) if f"rank {r} of {n} done" not in output]
    assert not missing, f"ranks {missing} did not finish:\n{output[-4000:]}"
    return output


def dist_config(out_dir: Path, **kw) -> dict:
    # --min-group-std drops low-variance groups (1 of the 4 at step 1 with these seeds), so the
    # ranks hold different numbers of active completions: a plain mean of the ranks' gradients
    # would not equal the full batch's (grpo divides by the batch's active completions).
    base = dict(
        model="tiny",
        steps=2,
        prompts_per_step=4,
        group_size=3,
        max_new_tokens=6,
        lr=1e-3,
        warmup_steps=1,
        kl_coef=0.05,
        min_group_std=0.1,
        save_every=1,
        out_dir=str(out_dir),
        run_name="run",
    )
    return base | kw


def checkpoint_weights(run_dir: Path, step: int) -> dict:
    return mx.load(str(run_dir / "checkpoints" / f"step_{step:06d}" / "model.safetensors"))


def rollout_rows(run_dir: Path) -> list:
    q = "SELECT step, prompt_id, completion, reward, advantage, length FROM rollouts ORDER BY rowid"
    with sqlite3.connect(run_dir / "rollouts.sqlite") as con:
        return con.execute(q).fetchall()


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("two_ranks")
    launch(2, out, dist_config(out, grad_accum=2))  # one group per micro-batch on each rank
    return out


@pytest.mark.slow
def test_two_ranks_equal_one_process_on_the_same_global_batch(two_rank_run, tmp_path):
    single = train.run(
        train.TrainConfig(**dist_config(tmp_path)), policy=tiny_policy(), reward_fn=low_tokens
    )
    dist = two_rank_run / "run"
    filtered = metric_rows(single)[0]["filtered_groups"]
    assert filtered % 2 == 1, f"{filtered} groups dropped at step 1: the ranks' shares are equal"
    for step in (1, 2):
        a, b = checkpoint_weights(single, step), checkpoint_weights(dist, step)
        assert a.keys() == b.keys()
        worst = max(mx.abs(a[k] - b[k]).max().item() for k in a)
        assert worst <= 1e-5, f"step {step}: parameters differ by {worst}"
    ranks = [np.load(two_rank_run / f"rank{r}.npz") for r in (0, 1)]
    assert all(np.array_equal(ranks[0][k], ranks[1][k]) for k in ranks[0]), "ranks disagree"
    assert rollout_rows(dist) == rollout_rows(single), "the same completions, rewards, advantages"
    for one, two in zip(metric_rows(single), metric_rows(dist), strict=True):
        assert one.keys() == two.keys()
        for k, v in one.items():
            assert v == pytest.approx(two[k], rel=1e-4, abs=1e-6), k


@pytest.mark.slow
def test_two_ranks_resume_exactly(two_rank_run, tmp_path):
    cfg = dist_config(tmp_path, steps=1, grad_accum=2)
    launch(2, tmp_path, cfg)
    launch(2, tmp_path, cfg | {"steps": 2}, "--resume")
    a, b = checkpoint_weights(two_rank_run / "run", 2), checkpoint_weights(tmp_path / "run", 2)
    assert all(mx.array_equal(a[k], b[k]) for k in a), "resumed 2-rank run differs"
    assert metric_rows(two_rank_run / "run") == metric_rows(tmp_path / "run")
    assert rollout_rows(two_rank_run / "run") == rollout_rows(tmp_path / "run")


@pytest.mark.slow
def test_reward_model_on_two_ranks_equals_one_process(tmp_path, float32_loads):
    """train_rm.py: each rank takes half of every batch of pairs; an odd pair count leaves one
    batch of a single pair, so one rank sits that step out (its share is 0). At float32 on every
    backend (`float32_loads`): the 1e-5 weight check is a float32 tolerance; at float16 the two
    summation orders differ by ~0.016 after training (measured, session 18)."""
    from helpers import save_checkpoint
    from test_reward_model import write_pairs

    base = tmp_path / "base"
    save_checkpoint(tiny_model(QWEN3, seed=3), QWEN3, base)
    pairs = tmp_path / "pairs.jsonl"
    lines = Path(write_pairs(pairs)).read_text().splitlines(keepends=True)
    pairs.write_text("".join(lines[1:]))  # 15 training pairs: batches of 2, and one of 1
    cfg = dict(model=str(base), pairs=str(pairs), steps=8, batch_pairs=2, lr=1e-3)
    cfg |= dict(warmup_steps=1, lora_rank=4, lora_alpha=8.0, eval_every=8, max_prompt_tokens=8)
    # The Bradley-Terry loss is blind to the score head's bias (it cancels in r_b - r_w): with
    # the default 1e-3 centring penalty its gradient is mostly rounding noise, which Adam turns
    # into lr-sized steps (3e-5 apart after 8 steps). A larger penalty gives it a real gradient.
    cfg |= dict(tensorboard=False, center_coef=0.1)
    one = cfg | dict(out=str(tmp_path / "one"), work=str(tmp_path / "w1"))
    two = cfg | dict(out=str(tmp_path / "two"), work=str(tmp_path / "w2"))
    import train_rm

    train_rm.train(train_rm.RMTrainConfig(**one))
    launch(2, tmp_path, two, "--rm")
    a = mx.load(str(tmp_path / "w1" / "state" / "weights.safetensors"))
    b = mx.load(str(tmp_path / "w2" / "state" / "weights.safetensors"))
    worst = max(mx.abs(a[k] - b[k]).max().item() for k in a)
    assert worst <= 1e-5, f"reward-model weights differ by {worst}"
    logs = [
        [json.loads(x) for x in (tmp_path / w / "train_log.jsonl").read_text().splitlines()]
        for w in ("w1", "w2")
    ]
    for x, y in zip(*logs, strict=True):
        for k in ("loss", "data_loss", "train_accuracy", "grad_norm", "val_accuracy"):
            if k in x:
                assert x[k] == pytest.approx(y[k], rel=1e-4, abs=1e-6), (x["step"], k)
        assert x["tokens"] >= y["tokens"], "one process pads one batch, two ranks pad two"
