"""Reward refresh (rl/reward_refresh.py): labels by rule on hand-made groups, the update on a tiny
reward model, its checkpoint round trip, the run's config checks, and an exact resume."""

import json

from core import backend  # noqa: F401

import mlx.core as mx
import numpy as np
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model, tiny_tokenizer, write_pairs
from mlx.utils import tree_flatten

import train
import train_rm
from gwen import Gwen
from rewards import reward_model
from rl import reward_refresh, rm_data
from rl.reward_refresh import Refresher, Settings, is_broken, label_group


def test_broken_by_rule():
    assert is_broken("It is in Paris.", finished=False), "ran to the cap"
    assert is_broken("   ", finished=True)
    loop = "the cat sat on the mat " * 4  # 24 words, 22 trigrams, 17 repeat an earlier one
    assert is_broken(loop, finished=True)
    assert not is_broken("The Eiffel Tower stands in Paris, built for the 1889 fair.", True)


def test_groups_order_unbroken_over_broken_then_stance_by_category():
    answers = ["No, it was built by the Incas.", "It was built by the Aztecs.", "cut off at"]
    finished = [True, True, False]
    denials = [True, False, False]
    # broken answer 2 loses to both others, whatever the category
    assert label_group(answers, finished, None, "false_premise") == [(0, 2), (1, 2)]
    # false premise: the denial is better; control: the denial is worse; curiosity: no order
    assert label_group(answers, finished, denials, "false_premise") == [(0, 1), (0, 2), (1, 2)]
    assert label_group(answers, finished, denials, "nonsense") == [(0, 1), (0, 2), (1, 2)]
    assert label_group(answers, finished, denials, "control") == [(0, 2), (1, 0), (1, 2)]
    assert label_group(answers, finished, denials, "curiosity") == [(0, 2), (1, 2)]
    # two broken answers are not ordered against each other
    assert label_group(["a", "b"], [False, False], [True, False], "control") == []


@pytest.fixture(scope="module")
def rm_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("refresh")
    base = tmp / "base"
    save_checkpoint(tiny_model(QWEN3, seed=3), QWEN3, base)
    cfg = train_rm.RMTrainConfig(
        model=str(base),
        pairs=write_pairs(tmp / "pairs.jsonl"),
        out=str(tmp / "rm"),
        work=str(tmp / "w"),
        steps=4,
        lora_rank=4,
        lora_alpha=8.0,
        max_prompt_tokens=8,
    )
    return train_rm.train(cfg)


def rollout(n_groups=2, G=4):
    """Groups whose finished answers hold t7 and whose cut-off answers hold t8."""
    records = [{"prompt": f"t{30 + g} t{40 + g}", "category": "control"} for g in range(n_groups)]
    texts, finished = [], []
    for g in range(n_groups):
        for k in range(G):
            done = k % 2 == 0
            texts.append(f"t{50 + g} {'t7 t9' if done else 't8 t11'} t{60 + k}")
            finished.append(done)
    return records, texts, np.array(finished)


def test_a_refresh_lowers_the_loss_on_its_pairs_and_replays_the_training_split(rm_dir):
    rm = reward_model.load(rm_dir, merge=False)
    before = {k: np.array(v) for k, v in tree_flatten(rm.trainable_parameters())}
    ref = Refresher(Settings(every=1, pairs=8, steps=6, batch=4, lr=3e-2), rm, seed=0)
    assert len(ref.replay) == 16 and len(ref.probe) == 16, "the reward model's train split"
    records, texts, finished = rollout()
    drawn, candidates, broken, _ = ref.pairs(records, texts, finished, step=1)
    assert candidates == 2 * 2 * 2 and broken == 0.5  # per group 2 finished x 2 cut off
    assert all("t7" in p["better"] and "t8" in p["worse"] for p in drawn)
    m = ref.refresh(records, texts, finished, step=1)
    assert m["refresh/pairs"] == 8 and m["refresh/candidates"] == 8
    assert m["refresh/loss_after"] < m["refresh/loss_before"], m
    assert 0 <= m["refresh/replay_accuracy_after"] <= 1
    after = dict(tree_flatten(rm.trainable_parameters()))
    assert any(not np.array_equal(before[k], np.array(v)) for k, v in after.items())
    # the scorer sees the refreshed weights: a finished answer now scores above a cut-off one
    s = rm.score([records[0]["prompt"]] * 2, [texts[0], texts[1]], ["control"] * 2)
    assert s[0] > s[1]


def test_refresh_metrics_equal_whole_row_scoring_and_the_probe_is_scored_once(rm_dir):
    rm = reward_model.load(rm_dir, merge=False)
    ref = Refresher(Settings(every=1, pairs=8, steps=2, batch=4, lr=3e-2), rm, seed=0)
    records, texts, finished = rollout()
    drawn = ref.pairs(records, texts, finished, step=1)[0]
    whole_acc, whole_loss = rm_data.PairData(rm, drawn).accuracy(rm)  # whole rows, each pair
    probe_before = ref.probe.accuracy(rm)[0]
    m = ref.refresh(records, texts, finished, step=1)
    assert m["refresh/loss_before"] == pytest.approx(whole_loss, abs=1e-4)
    assert m["refresh/replay_accuracy_before"] == probe_before
    probe_after = ref.probe.accuracy(rm)[0]
    assert m["refresh/replay_accuracy_after"] == probe_after
    calls = []
    real = ref.probe.accuracy
    ref.probe.accuracy = lambda *a: calls.append(1) or real(*a)
    m2 = ref.refresh(records, texts, finished, step=2)
    assert m2["refresh/replay_accuracy_before"] == probe_after, "the weights did not change"
    assert len(calls) == 1, "scored once per refresh: after its steps"


def test_refresh_state_round_trips_and_a_missing_one_is_named(rm_dir, tmp_path):
    settings = Settings(every=1, pairs=4, steps=2, batch=2, lr=1e-2)
    a = Refresher(settings, reward_model.load(rm_dir, merge=False), seed=0)
    a.refresh(*rollout(), step=1)
    a.save(tmp_path / "state")
    b = Refresher(settings, reward_model.load(rm_dir, merge=False), seed=0)
    b.restore(tmp_path / "state")
    wa, wb = (
        dict(tree_flatten(a.rm.trainable_parameters())),
        dict(tree_flatten(b.rm.trainable_parameters())),
    )  # noqa: E501
    # exact on purpose: bit-for-bit resume is the property
    assert all(mx.array_equal(wa[k], wb[k]) for k in wa)
    oa, ob = dict(tree_flatten(a.optimizer.state)), dict(tree_flatten(b.optimizer.state))
    assert set(oa) == set(ob) and all(mx.array_equal(oa[k], ob[k]) for k in oa)
    with pytest.raises(FileNotFoundError, match="holds no refreshed state"):
        b.restore(tmp_path / "nothing")


def test_refresh_needs_trainable_weights_and_its_replay_file(rm_dir, tmp_path):
    with pytest.raises(reward_refresh.RefreshError, match="merge=False"):
        Refresher(Settings(every=1), reward_model.load(rm_dir, merge=True), seed=0)
    rm = reward_model.load(rm_dir, merge=False)
    rm.config.extra = {**rm.config.extra, "data": str(tmp_path / "gone.jsonl")}
    with pytest.raises(reward_refresh.RefreshError, match="--no-refresh-replay"):
        Refresher(Settings(every=1), rm, seed=0)
    assert Refresher(Settings(every=1, replay=False), rm, seed=0).probe.enc == []


def run_config(tmp_path, rm, **kw):
    base = dict(model="tiny", steps=4, prompts_per_step=2, group_size=3, max_new_tokens=5,
                lr=1e-2, warmup_steps=1, kl_coef=0.05, save_every=2, reward=f"rm:{rm}",
                reward_refresh=2, refresh_pairs=4, refresh_steps=2, refresh_batch=2,
                refresh_lr=1e-2, out_dir=str(tmp_path), run_name="run")  # fmt: skip
    return train.TrainConfig(**{**base, **kw})


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(reward="happy"), "exactly one rm:PATH component"),
        (dict(reward="rm:{rm},rm:{rm}/."), "exactly one rm:PATH component"),
        (dict(reward_refresh=-1), "use >= 0"),
        (dict(refresh_batch=0), "must be >= 1"),
        (dict(refresh_lr=0.0), "must be >= 1 and refresh_lr"),
    ],
)
def test_refresh_settings_are_checked(rm_dir, tmp_path, kw, msg):
    if "reward" in kw:
        kw = {**kw, "reward": kw["reward"].format(rm=rm_dir)}
    with pytest.raises(ValueError, match=msg):
        run_config(tmp_path, rm_dir, **kw)


def test_refresh_with_an_in_process_reward_function_is_refused_not_skipped(rm_dir, tmp_path):
    with pytest.raises(train.ConfigError, match="in-process reward function"):
        train.run(
            run_config(tmp_path, rm_dir),
            policy=policy(),
            reward_fn=lambda p, c, **k: [0.0] * len(c),
        )


def metric_rows(run_dir):
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.endswith(("_s", "tokens_per_s", "_mb"))}
            for r in rows]  # fmt: skip


def policy():
    return Gwen(tiny_model(QWEN3, seed=1), tiny_tokenizer(QWEN3["vocab_size"]))


def test_a_refreshing_run_logs_its_refreshes_and_resumes_exactly(rm_dir, tmp_path):
    full = train.run(run_config(tmp_path / "a", rm_dir), policy=policy())
    rows = metric_rows(full)
    assert [("refresh/pairs" in r) for r in rows] == [False, True, False, True]
    ckpt = full / "checkpoints" / "step_000002" / reward_refresh.FOLDER
    assert (ckpt / reward_refresh.WEIGHTS).is_file() and (ckpt / reward_refresh.OPTIMIZER).is_file()
    half = train.run(run_config(tmp_path / "b", rm_dir, steps=2), policy=policy())
    train.run(run_config(tmp_path / "b", rm_dir), resume=True, run_dir=half, policy=policy())
    assert metric_rows(half) == rows, "the refreshed reward model came back with the checkpoint"
