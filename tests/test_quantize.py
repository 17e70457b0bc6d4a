"""core/quant.py and quantize.py on tiny random models: the one rule, folder round trips (ours and
mlx-lm's layout), quantized folders as policy / judge / reference / reward model, the KL and
accuracy measures, and the CLI's reports and errors. No downloads."""

import json
import math
import os

from core import (
    backend,  # noqa: F401
    quant,
)
from core.kernels import full_kl

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest
from helpers import QWEN3, save_checkpoint, tiny_model, tiny_tokenizer
from mlx.utils import tree_flatten

import quantize
import train
import train_rm
from gwen import Gwen
from load_weights import LoadError, load
from rewards import reward_model
from rewards.registry import RewardContext, parse_spec
from rewards.scorer import build_scorer
from rl import reference, rm_data

# Hidden 64 (every Linear but down_proj divides 64); intermediate 96 (down_proj's input does
# not divide 64, so the rule leaves it in float at group 64 and quantizes it at group 32).
WIDE = dict(QWEN3, hidden_size=64, intermediate_size=96, num_attention_heads=8)
TOKENS = mx.array([[3, 1, 4, 1, 5, 9, 2, 6]])


@pytest.fixture(scope="module", autouse=True)
def float32_weights():
    """The checks compare in-memory float32 models with loaded folders, to float32 tolerances:
    load at float32 on every backend (Metal and CUDA default to float16)."""
    before = os.environ.get("GWEN_DTYPE")
    os.environ["GWEN_DTYPE"] = "float32"
    yield
    if before is None:
        del os.environ["GWEN_DTYPE"]
    else:
        os.environ["GWEN_DTYPE"] = before


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """(float model, its HF folder)."""
    path = tmp_path_factory.mktemp("wide") / "base"
    model = tiny_model(WIDE, seed=2)
    save_checkpoint(model, WIDE, path)
    return model, path


def test_rule_quantizes_block_linears_that_divide_and_keeps_the_head_float(wide):
    model, _ = wide
    q = quant.copy_model(model, 8, 64)
    parts = [f"self_attn.{n}_proj" for n in "qkvo"] + ["mlp.gate_proj", "mlp.up_proj"]
    want = {f"model.layers.{i}.{part}" for i in range(2) for part in parts}
    assert set(quant.quantized_layers(q)) == want
    assert isinstance(q.model.embed_tokens, nn.Embedding), "the embedding / LM head stays float"
    assert isinstance(q.model.layers[0].mlp.down_proj, nn.Linear), "96 is not a multiple of 64"
    assert len(quant.quantized_layers(quant.copy_model(model, 4, 32))) == 14
    assert not quant.quantized_layers(model), "copy_model leaves the source alone"
    diff = mx.abs(q(TOKENS) - model(TOKENS)).max().item()
    assert 0 < diff < 0.2, "8-bit is close to the float model, not equal"


@pytest.mark.parametrize("bits,group_size", [(8, 64), (4, 32)])
def test_round_trip_gives_the_in_memory_logits_and_mlx_lm_reads_it(
    wide, tmp_path, bits, group_size
):
    model, _ = wide
    q = quant.copy_model(model, bits, group_size)
    out = quant.save_model(q, tiny_tokenizer(WIDE["vocab_size"]), tmp_path / "q")
    config = json.loads((out / "config.json").read_text())
    assert config["quantization"] == {"group_size": group_size, "bits": bits}
    loaded, tokenizer = load(str(out))
    assert quant.quantized_layers(loaded) == quant.quantized_layers(q)
    # exact on purpose: the saved quantized weights are the same bits as those in memory
    assert mx.array_equal(loaded(TOKENS), q(TOKENS)), "the folder holds the quantized model"
    assert tokenizer.encode("t3 t4", add_special_tokens=False) == [3, 4]
    import mlx_lm

    theirs, _ = mlx_lm.load(str(out))
    assert mx.abs(theirs(TOKENS) - loaded(TOKENS)).max().item() < 1e-4, "mlx-lm's layout"
    twin = quant.dequantized_copy(loaded)
    assert not quant.quantized_layers(twin)
    assert mx.abs(twin(TOKENS) - loaded(TOKENS)).max().item() < 1e-4, "the float twin agrees"


def test_an_mlx_lm_folder_with_a_quantized_embedding_loads_with_it_dequantized(wide, tmp_path):
    model, _ = wide
    theirs = quant.copy_model(model)
    nn.quantize(
        theirs,
        64,
        4,
        class_predicate=lambda p, m: quant.quantizable(p, m, 64) or isinstance(m, nn.Embedding),
    )  # mlx-lm quantizes the embedding too
    out = tmp_path / "mlx-lm"
    save_checkpoint(theirs, WIDE, out)
    config = json.loads((out / "config.json").read_text())
    config["quantization"] = {"group_size": 64, "bits": 4}
    (out / "config.json").write_text(json.dumps(config))
    loaded, _ = load(str(out))
    assert isinstance(loaded.model.embed_tokens, nn.Embedding)
    e = theirs.model.embed_tokens
    want = mx.dequantize(e.weight, e.scales, e.biases, group_size=64, bits=4)
    assert mx.array_equal(loaded.model.embed_tokens.weight, want)
    assert set(quant.quantized_layers(loaded)) == set(quant.quantized_layers(theirs))
    import mlx_lm

    ref, _ = mlx_lm.load(str(out))
    assert mx.abs(ref(TOKENS) - loaded(TOKENS)).max().item() < 1e-4


def test_bad_settings_and_folders_are_named(wide, tmp_path):
    model, _ = wide
    with pytest.raises(ValueError, match="bits=3: use 8 or 4"):
        quant.copy_model(model, 3, 64)
    with pytest.raises(ValueError, match="group_size=48"):
        quant.copy_model(model, 8, 48)
    with pytest.raises(ValueError, match=r"multiple of 128 \(input sizes \[64, 96\]\)"):
        quant.copy_model(model, 8, 128)
    with pytest.raises(ValueError, match="already quantized"):
        quant.copy_model(quant.copy_model(model, 8, 64), 4, 64)
    with pytest.raises(ValueError, match="ref_quant_bits=8: .*multiple of 64"):
        reference.frozen_copy(tiny_model(QWEN3), quant_bits=8)
    out = quant.save_model(quant.copy_model(model, 8, 64), tiny_tokenizer(97), tmp_path / "q")
    config = json.loads((out / "config.json").read_text())
    config["quantization"] = {"group_size": 64, "bits": 4, "mode": "mxfp4"}
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(LoadError, match="mode 'mxfp4'"):
        load(str(out))


def test_a_quantized_folder_serves_as_judge_and_reference_but_is_not_trained(wide, tmp_path):
    model, _ = wide
    out = quant.save_model(quant.copy_model(model, 8, 64), tiny_tokenizer(97), tmp_path / "q")
    judge, _ = reference.default_judge(
        None, None, judge="frozen", judge_model=str(out), lora_rank=0, ref_quant_bits=0
    )
    assert quant.quantized_layers(judge.model)
    s = judge.sample_group(["t5 t6"], 2, 4, temperature=1.0, seed=0)
    assert s.tokens.shape[0] == 2
    ref = reference.frozen_copy(judge.model)
    assert quant.quantized_layers(ref) == quant.quantized_layers(judge.model)
    assert mx.array_equal(ref(TOKENS), judge.model(TOKENS))
    cfg = train.TrainConfig(model=str(out), steps=1, out_dir=str(tmp_path / "runs"), kl_coef=0.0)
    with pytest.raises(LoadError, match="is quantized"):
        train.run(cfg, policy=judge, reward_fn=lambda prompts, completions, **kw: [0.0])


def test_full_kl_by_hand():
    # p = (1/2, 1/2), q = (1/4, 3/4): KL = 1/2 ln 2 + 1/2 ln(2/3) = 0.143841
    eye = mx.eye(2)
    p, q = mx.log(mx.array([[0.5, 0.5]])), mx.log(mx.array([[0.25, 0.75]]))
    assert full_kl(p, eye, q, eye).item() == pytest.approx(0.143841, abs=1e-6)
    assert full_kl(p, eye, p, eye).item() == pytest.approx(0.0, abs=1e-7)


def test_answer_kl_reads_the_answer_positions(wide):
    model, _ = wide
    tok = tiny_tokenizer(WIDE["vocab_size"])
    original, other = Gwen(model, tok), quant.copy_model(model, 4, 32)
    records = [{"prompt": "t5 t6 t7"}, {"prompt": "t8"}]
    same = quantize.answer_kl(original, quant.copy_model(model), records, 5, 1.0, 0, 2)
    assert same.size > 0 and np.abs(same).max() < 1e-6, "KL of a model with itself is 0"
    got = quantize.answer_kl(original, other, records[:1], 5, 1.0, 0, 1)
    # By hand: one unpadded row, full forward of prompt + answer; position P-1+t predicts token t.
    batch_seed = int(np.random.SeedSequence([0, 0]).generate_state(1)[0])
    s = original.sample_group(["t5 t6 t7"], 1, 5, 1.0, seed=batch_seed)
    n = int(s.mask.sum().item())
    seq = mx.concatenate([s.prompt_tokens, s.tokens[:, :n]], axis=1)
    P = s.prompt_tokens.shape[1]
    lp = nn.log_softmax(model(seq)[0, P - 1 : P - 1 + n], axis=-1)
    lq = nn.log_softmax(other(seq)[0, P - 1 : P - 1 + n], axis=-1)
    want = np.array(mx.sum(mx.exp(lp) * (lp - lq), axis=-1))
    assert got.shape == (n,) and np.allclose(got, want, atol=1e-5)
    assert got.mean() > 0
    summary = quantize.kl_summary(np.array([0.0, 1.0, 2.0, 3.0]))
    assert summary == {"mean_kl": 1.5, "p95_kl": pytest.approx(2.85), "max_kl": 3.0, "kl_tokens": 4}


def write_pairs(path, n=12, split=True):
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        words = [f"t{int(w)}" for w in rng.integers(20, 90, size=3)]
        row = {
            "id": f"p{i}",
            "criterion": "scrutiny",
            "category": "control",
            "prompt": " ".join(words),
            "better": f"{words[0]} t5 t5",
            "worse": f"{words[0]} t6",
        }
        if split:
            row["split"] = "train" if i < 8 else "test"
        lines.append(row)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


@pytest.fixture(scope="module")
def rm_dir(wide, tmp_path_factory):
    _, base = wide
    tmp = tmp_path_factory.mktemp("rm")
    cfg = train_rm.RMTrainConfig(
        model=str(base),
        pairs=write_pairs(tmp / "pairs.jsonl"),
        out=str(tmp / "rm"),
        work=str(tmp / "work"),
        steps=6,
        batch_pairs=4,
        lr=3e-2,
        warmup_steps=1,
        lora_rank=4,
        lora_alpha=8.0,
        max_prompt_tokens=8,
    )
    return train_rm.train(cfg)


def test_a_quantized_reward_model_is_self_contained_and_scores_like_in_memory(rm_dir, tmp_path):
    rm = reward_model.load(rm_dir)
    out = tmp_path / "rm-q8"
    assert quantize.quantize_reward_model(rm, str(rm_dir), out, 8, 64) == 12
    saved = json.loads((out / reward_model.CONFIG_FILE).read_text())
    assert saved["base_model"] == reward_model.BACKBONE_DIR and saved["head_only"]
    assert saved["tokenizer_sha256"] == rm.config.tokenizer_sha256
    assert saved["extra"]["quantization"] == {"bits": 8, "group_size": 64}
    head = mx.load(str(out / reward_model.WEIGHTS_FILE))
    assert sorted(head) == ["score_head.bias", "score_head.weight"], "only the head is trained"
    qrm = reward_model.load(out)
    assert quant.quantized_layers(qrm.backbone)
    in_memory = reward_model.RewardModel(
        quant.copy_model(rm.backbone, 8, 64), rm.tokenizer, rm.config
    )
    in_memory.score_head = rm.score_head
    pairs = [json.loads(x) for x in open(rm_dir.parent / "pairs.jsonl")]
    got = quantize.pair_scores(qrm, pairs)
    # exact on purpose: the same bits loaded back, the same arithmetic
    assert np.array_equal(got, quantize.pair_scores(in_memory, pairs)), "the folder holds it"
    assert np.allclose(quantize.pair_scores(qrm, pairs, chunk=5), got, atol=1e-4)
    assert np.abs(got - quantize.pair_scores(rm, pairs)).max() < 0.05
    assert quantize.pair_accuracy(quantize.pair_scores(rm, pairs)) == pytest.approx(
        rm_data.PairData(rm, pairs, margin=0.0).accuracy(rm)[0]
    )
    policy_tok = tiny_tokenizer(WIDE["vocab_size"])
    ctx = RewardContext(None, policy_tok, 4)
    scorer = build_scorer(parse_spec(f"rm:{out}"), ctx)
    values = scorer(["t30 t31"], ["t30 t5 t5"], ["control"]).values
    assert np.all(np.isfinite(values))


def run_cli(argv, capsys):
    code = quantize.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--model", "M", "--bits", "3"], "bits=3: use 8 or 4"),
        (["--model", "M", "--q-group-size", "48"], "group_size=48"),
        (["--model", "/no/such/folder"], "not found"),
        ([], "exactly one of --model"),
        (["--model", "M", "--reward-model", "R"], "exactly one of --model"),
        (["--reward-model", "/no/such/rm"], "no rm_config.json"),
        (["--model", "M", "--limit", "0"], "--limit 0"),
        (["--model", "M", "--out", "M"], "would overwrite the source"),
        (["--model", "M", "--prompts", "/no/such.jsonl"], "file not found"),
    ],
)
def test_cli_bad_input_is_one_error_line_and_exit_2(wide, argv, message, capsys, tmp_path):
    _, base = wide
    argv = [str(base) if x == "M" else x for x in argv]
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert message in err, err


def test_old_flag_spellings_still_work_with_a_deprecation_line(wide, capsys):
    _, base = wide
    code, out, err = run_cli(["--model", str(base), "--group-size", "48"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 2, err
    assert lines[0] == "warning: --group-size is deprecated; use --q-group-size"
    assert lines[1].startswith("error: group_size=48"), err  # the old flag reached the setting
    code, _, err = run_cli(["--model", str(base), "--data", "/no/such.jsonl"], capsys)
    assert code == 2 and "--data is deprecated; use --prompts" in err and "not found" in err


def test_cli_split_must_exist_in_the_pairs_file(rm_dir, tmp_path, capsys):
    pairs = write_pairs(tmp_path / "nosplit.jsonl", split=False)
    code, _, err = run_cli(["--reward-model", str(rm_dir), "--pairs", pairs], capsys)
    assert code == 2 and "no pair has split 'test'" in err and "--split all" in err


def test_cli_policy_report(wide, tmp_path, capsys):
    _, base = wide
    out = tmp_path / "q4"
    argv = [
        "--model",
        str(base),
        "--bits",
        "4",
        "--q-group-size",
        "32",
        "--out",
        str(out),
        "--limit",
        "3",
        "--max-new-tokens",
        "4",
        "--batch",
        "2",
        "--speed-batch",
        "2",
        "--speed-tokens",
        "3",
        "--json",
    ]
    code, stdout, _ = run_cli(argv, capsys)
    assert code == 0
    report = json.loads(stdout)
    assert report == json.loads((out / quantize.REPORT_FILE).read_text())
    assert report["kind"] == "policy" and report["quantized_linears"] == 14
    assert report["mean_kl"] > 0 and report["max_kl"] >= report["p95_kl"] > 0
    assert report["kl_tokens"] >= 3 and report["answers"] == 3
    assert report["bytes"] > 0 and report["source_bytes"] > 0
    for side in ("original", "quantized"):
        assert all(
            math.isfinite(report[side][k]) and report[side][k] > 0
            for k in ("gen_tok_s", "forward_tok_s", "param_bytes")
        )
    assert report["quantized"]["param_bytes"] < report["original"]["param_bytes"]
    assert report["twin_max_logprob_diff"] < 1e-3
    assert quant.quantized_layers(load(str(out))[0])
    code, stdout, _ = run_cli(argv[:-1], capsys)
    assert code == 0 and "KL(original || quantized)" in stdout and "forward tok/s" in stdout


def test_cli_reward_model_report(rm_dir, tmp_path, capsys):
    pairs = write_pairs(tmp_path / "pairs.jsonl")
    out = tmp_path / "rm-q8"
    argv = [
        "--reward-model",
        str(rm_dir),
        "--pairs",
        pairs,
        "--split",
        "test",
        "--out",
        str(out),
        "--speed-batch",
        "2",
        "--json",
    ]
    code, stdout, _ = run_cli(argv, capsys)
    assert code == 0
    report = json.loads(stdout)
    assert report["kind"] == "reward_model" and report["n_pairs"] == 4
    assert 0 <= report["accuracy_quantized"] <= 1 and report["twin_max_score_diff"] < 1e-3
    assert report["accuracy_drop_points"] == pytest.approx(
        100 * (report["accuracy_original"] - report["accuracy_quantized"])
    )
    assert reward_model.load(out).config.head_only


def test_weights_in_a_quantized_folder_are_packed(wide, tmp_path):
    model, _ = wide
    out = quant.save_model(quant.copy_model(model, 4, 32), tiny_tokenizer(97), tmp_path / "q")
    weights = mx.load(str(out / "model.safetensors"))
    w = weights["model.layers.0.mlp.up_proj.weight"]
    assert w.dtype == mx.uint32 and w.shape == (96, 64 * 4 // 32)
    assert "model.layers.0.mlp.up_proj.scales" in weights
    float_bytes = sum(v.nbytes for _, v in tree_flatten(model.parameters()))
    assert (out / "model.safetensors").stat().st_size < float_bytes
