"""export.py: a model out to mlx_lm, transformers and GGUF, with the project's answers.

Tiny random llama and qwen3 checkpoints with a byte-level BPE tokenizer and a ChatML template
(built here, no download), LoRA and dual-adapter checkpoints on them: the exported folder is read
by mlx_lm and transformers (config, tokenizer; no torch), mlx_lm's greedy tokens equal gwen's,
the weights are the merged ones in the base's dtype, `--q-bits` loads quantized, `--gguf` reads
back through the project's GGUF loader with the same logits and tokens, and bad input is one
`error:` line. The slow tests export the shipped adapter models/values-smollm2-135m.
"""

import json
import os
from pathlib import Path

from core import backend  # noqa: F401

# isort: split
import importlib.util

from core import gguf_reader, lora, quant

import mlx.core as mx
import mlx.utils
import numpy as np
import pytest
from helpers import LLAMA, QWEN3, tiny_model

import export
import load_weights
from gwen import Gwen
from model import Model

ROOT = Path(__file__).resolve().parent.parent
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "the sky is blue because air scatters short waves 12345 times more",
    "What is the capital of France? Paris is the capital of France.",
    "I can't make sense of that; could you rephrase it? It's 42.",
] * 4
PROMPTS = ["What is the capital of France?", "Why is the sky green?", "Count to 9."]
TEXTS = [*PROMPTS, "  Spaces,\n\nnew lines 2024 and can't/won't ÄÖ ü €5.  "]


def bpe_tokenizer(pre: str):
    """A byte-level BPE tokenizer trained here on CORPUS: SmolLM2's pre-tokenizer (digits one by
    one, GPT-2's split) or Qwen2's (its regex split), ChatML specials and template."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    if pre == "smollm":
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        split = [pre_tokenizers.Digits(individual_digits=True), byte_level]
    else:
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        split = [pre_tokenizers.Split(Regex(gguf_reader.QWEN2_SPLIT), "isolated"), byte_level]
    tok.pre_tokenizer = pre_tokenizers.Sequence(split)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHATML,
    )


def hf_folder(path: Path, arch: str, dtype: str | None = "float32", seed: int = 0, **sizes):
    """A tiny random HF checkpoint of `arch` with bpe_tokenizer; returns (model, folder)."""
    tokenizer = bpe_tokenizer("smollm" if arch == "llama" else "qwen2")
    config = dict(LLAMA if arch == "llama" else QWEN3, vocab_size=len(tokenizer), **sizes)
    model = tiny_model(config, seed=seed)
    path.mkdir(parents=True)
    eos = tokenizer.eos_token_id
    extra = {"eos_token_id": eos} | ({"torch_dtype": dtype} if dtype else {})
    (path / "config.json").write_text(json.dumps(config | extra))
    mx.save_safetensors(
        str(path / "model.safetensors"), dict(mlx.utils.tree_flatten(model.parameters()))
    )
    tokenizer.save_pretrained(str(path))
    return model, path


def lora_checkpoint(base: Path, out: Path, dual: bool = False):
    """LoRA (or dual) adapters with non-zero B on `base`, saved as a training checkpoint."""
    model, _ = load_weights.load(str(base), mx.float32)
    targets = ["q_proj", "k_proj", "down_proj"]
    if dual:
        lora.apply_dual_lora(model, 2, 3, 8.0, targets)
        names = ("retain_b", "forget_b")
    else:
        lora.apply_lora(model, 4, 8.0, targets)
        names = ("lora_b",)
    for i, (_, layer) in enumerate(lora.adapters_of(model)):
        for j, name in enumerate(names):
            shape = getattr(layer, name).shape
            setattr(layer, name, 0.3 * mx.random.normal(shape, key=mx.random.key(10 * i + j)))
    if dual:
        lora.save_dual_adapters(model, out, 8.0, targets)
        for sub in lora.DUAL_ADAPTERS:
            config = json.loads((out / sub / lora.CONFIG_FILE).read_text())
            config["base_model_name_or_path"] = str(base)
            (out / sub / lora.CONFIG_FILE).write_text(json.dumps(config))
    else:
        lora.save_adapters(model, out, 4, 8.0, targets)
        config = json.loads((out / lora.CONFIG_FILE).read_text())
        (out / lora.CONFIG_FILE).write_text(
            json.dumps(config | {"base_model_name_or_path": str(base)})
        )
    return model, out


def gwen_greedy(model_ref, prompts, n: int) -> list[list[int]]:
    """The project's greedy answers (gwen.py, temperature 0), float32, EOS included."""
    g = Gwen.load(model_ref, mx.float32)
    s = g.sample_group(prompts, 1, n, temperature=0.0)
    return [row[: int(sum(m))] for row, m in zip(s.tokens.tolist(), s.mask.tolist(), strict=True)]


def mlx_lm_greedy(folder, prompts, n: int, upcast: bool = False):
    """mlx_lm's greedy answers from the exported folder alone (its own load, chat template via
    the tokenizer it loads, its own generation loop with an argmax sampler), EOS included."""
    import mlx_lm
    from mlx_lm.generate import stream_generate

    model, tokenizer = mlx_lm.load(str(folder))
    if upcast:
        model.set_dtype(mx.float32)
    out = []
    for prompt in prompts:
        messages = [{"role": "user", "content": prompt}]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer.encode(text, add_special_tokens=False)
        steps = stream_generate(
            model, tokenizer, mx.array(ids), max_tokens=n, sampler=lambda x: mx.argmax(x, -1)
        )
        out.append([r.token for r in steps])
    return out


def same_tokens(ours: list[list[int]], theirs: list[list[int]]) -> None:
    """Token for token; mlx_lm stops without yielding the EOS, gwen's mask keeps it."""
    for a, b in zip(ours, theirs, strict=True):
        assert a[: len(b)] == b and len(a) - len(b) in (0, 1), (a, b)


def weights_of(folder: Path) -> dict:
    return mx.load(str(folder / export.WEIGHTS_FILE))


def run_export(*argv) -> int:
    return export.main([str(a) for a in argv])


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def lora_source(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    _, base = hf_folder(root / "base", request.param)
    adapted, ckpt = lora_checkpoint(base, root / "ckpt")
    return request.param, base, adapted, ckpt


def test_a_lora_checkpoint_exports_to_a_folder_mlx_lm_and_transformers_read(lora_source, tmp_path):
    arch, base, adapted, ckpt = lora_source
    out = tmp_path / "out"
    assert run_export("--model", ckpt, "--out", out) == 0
    want = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "generation_config.json", "README.md"}  # fmt: skip
    assert want <= {p.name for p in out.iterdir()}
    config = json.loads((out / "config.json").read_text())
    assert config["torch_dtype"] == "float32" and config["model_type"] == arch
    assert config["rope_theta"] == config["rope_parameters"]["rope_theta"] > 0
    tokens = mx.array([[5, 17, 33, 2, 64, 9]])
    merged = Model(adapted.args)
    merged.load_weights(list(weights_of(out).items()), strict=True)
    assert mx.abs(merged(tokens) - adapted(tokens)).max().item() < 1e-4, "the adapters merged"
    from transformers import AutoConfig, AutoTokenizer

    assert importlib.util.find_spec("torch") is None, "export and its readers need no torch"
    hf = AutoConfig.from_pretrained(str(out))
    assert hf.model_type == arch and hf.num_hidden_layers == adapted.args.num_hidden_layers
    tok = AutoTokenizer.from_pretrained(str(out))
    assert tok.chat_template == CHATML and tok.eos_token == "<|im_end|>"
    source_tok = bpe_tokenizer("smollm" if arch == "llama" else "qwen2")
    assert [tok.encode(t) for t in TEXTS] == [source_tok.encode(t) for t in TEXTS]
    assert json.loads((out / "tokenizer_config.json").read_text())["chat_template"] == CHATML
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["eos_token_id"] == tok.eos_token_id
    assert str(ckpt) in (out / "README.md").read_text()
    same_tokens(gwen_greedy(str(ckpt), PROMPTS, 12), mlx_lm_greedy(out, PROMPTS, 12))


def test_a_run_folder_exports_its_latest_checkpoint_with_its_config_and_figures(tmp_path):
    import mlx.optimizers as optim

    from rl import checkpoint

    _, base = hf_folder(tmp_path / "base", "llama")
    adapted, _ = lora_checkpoint(base, tmp_path / "unused")
    run = tmp_path / "run"
    run.mkdir()
    rows = [{"step": 1, "reward_mean": 0.1}, {"step": 2, "eval/reward_mean": 0.42}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    optimizer = optim.AdamW(learning_rate=1e-3)
    optimizer.init(adapted.trainable_parameters())
    config = {"model": str(base), "task": "values", "steps": 2, "lr": 1e-5}
    lora_cfg = {"rank": 4, "alpha": 8.0, "targets": ["q_proj", "k_proj", "down_proj"]}
    tokenizer = bpe_tokenizer("smollm")
    checkpoint.save(run, 2, model=adapted, tokenizer=tokenizer, optimizer=optimizer,
                    trainer_state={}, config=config, lora_cfg=lora_cfg)  # fmt: skip
    assert run_export("--model", run, "--out", tmp_path / "out") == 0
    card = (tmp_path / "out" / "README.md").read_text()
    assert '"task": "values"' in card and "eval/reward_mean: 0.42" in card, card
    tokens = mx.array([[5, 17, 33, 2]])
    merged = Model(adapted.args)
    merged.load_weights(list(weights_of(tmp_path / "out").items()), strict=True)
    assert mx.abs(merged(tokens) - adapted(tokens)).max().item() < 1e-4


def test_weights_are_saved_in_the_bases_dtype(tmp_path):
    _, base = hf_folder(tmp_path / "base", "qwen3", dtype="bfloat16")
    adapted, ckpt = lora_checkpoint(base, tmp_path / "ckpt")
    assert run_export("--model", ckpt, "--out", tmp_path / "out") == 0
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["torch_dtype"] == config["dtype"] == "bfloat16"
    saved = weights_of(tmp_path / "out")
    assert {str(w.dtype) for w in saved.values()} == {"mlx.core.bfloat16"}
    merged = lora.merged_weights(adapted)  # float32: the base cast, adapters folded, then cast
    for name, w in saved.items():
        assert mx.array_equal(w, merged[name].astype(mx.bfloat16)), name
    assert run_export("--model", ckpt, "--out", tmp_path / "f32", "--dtype", "float32") == 0
    assert {str(w.dtype) for w in weights_of(tmp_path / "f32").values()} == {"mlx.core.float32"}


def test_a_checkpoint_without_torch_dtype_keeps_its_stored_dtype(tmp_path):
    model, folder = hf_folder(tmp_path / "full", "llama", dtype=None)
    assert export.source_dtype(load_weights.resolve(str(folder))) == "float32"
    model.set_dtype(mx.bfloat16)
    weights = dict(mlx.utils.tree_flatten(model.parameters()))
    mx.save_safetensors(str(folder / "model.safetensors"), weights)
    assert export.source_dtype(load_weights.resolve(str(folder))) == "bfloat16"


def test_a_dual_checkpoint_merges_the_retain_adapter_unless_told_both(tmp_path):
    _, base = hf_folder(tmp_path / "base", "llama")
    dual, ckpt = lora_checkpoint(base, tmp_path / "dual", dual=True)
    tokens = mx.array([[5, 17, 33, 2, 64, 9]])

    def logits(folder):
        m = Model(dual.args)
        m.load_weights(list(weights_of(folder).items()), strict=True)
        return m(tokens)

    assert run_export("--model", ckpt, "--out", tmp_path / "retain") == 0
    assert run_export("--model", ckpt, "--out", tmp_path / "both", "--adapters", "both") == 0
    with lora.scaled(dual, 1.0, 0.0):
        retain = dual(tokens)
    assert mx.abs(logits(tmp_path / "retain") - retain).max().item() < 1e-4
    assert mx.abs(logits(tmp_path / "both") - dual(tokens)).max().item() < 1e-4
    assert mx.abs(retain - dual(tokens)).max().item() > 1e-2, "forget changes the answers"
    assert "merged `retain`" in (tmp_path / "retain" / "README.md").read_text()


@pytest.mark.parametrize("bits", [8, 4])
def test_q_bits_writes_mlx_lms_quantized_layout(tmp_path, bits):
    source, base = hf_folder(tmp_path / "base", "qwen3", hidden_size=64)  # inputs of 32s
    out = tmp_path / "q"
    assert run_export("--model", base, "--out", out, "--q-bits", bits, "--group-size", 32) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["quantization"] == {"group_size": 32, "bits": bits}
    import mlx_lm

    model, _ = mlx_lm.load(str(out))
    assert any(k.endswith(".scales") for k, _ in mlx.utils.tree_flatten(model.parameters()))
    tokens = mx.array([[5, 17, 33, 2, 64, 9]])
    ours, _ = load_weights.load(str(out), mx.float32)
    theirs = model(tokens).astype(mx.float32)
    assert mx.abs(theirs - ours(tokens)).max().item() < 1e-3, "mlx_lm computes what we load"
    quantized = quant.copy_model(source, bits, 32)  # the project's quantization of the source
    assert mx.abs(theirs - quantized(tokens)).max().item() < 1e-3
    assert mx.abs(theirs - source(tokens)).max().item() > 1e-4, "the weights were quantized"


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
@pytest.mark.parametrize("dtype,tol", [("float32", 1e-4), ("float16", 2e-2)])
def test_gguf_reads_back_through_the_projects_loader(tmp_path, arch, dtype, tol, monkeypatch):
    monkeypatch.setenv("RL_VALUES_CACHE", "off")
    source, base = hf_folder(tmp_path / "base", arch)
    out = tmp_path / "out"
    assert run_export("--model", base, "--out", out, "--gguf", "--dtype", dtype) == 0
    files = list(out.glob("*.gguf"))
    assert [f.name for f in files] == [f"out-{export.GGUF_TYPES[dtype]}.gguf"]
    back, tok = load_weights.load(str(files[0]), mx.float32)
    assert back.args.model_type == arch and back.args.head_dim == source.args.head_dim
    tokens = mx.array([[5, 17, 33, 2, 64, 9, 120, 7]])
    error = mx.abs(back(tokens) - source(tokens)).max().item()
    assert error < tol, f"{arch} {dtype} GGUF logits differ by {error}"
    source_tok = bpe_tokenizer("smollm" if arch == "llama" else "qwen2")
    assert [tok.encode(t) for t in TEXTS] == [source_tok.encode(t) for t in TEXTS]
    assert tok.chat_template == CHATML and tok.eos_token_id == source_tok.eos_token_id
    if dtype == "float32":
        same_tokens(gwen_greedy(str(files[0]), PROMPTS, 10), gwen_greedy(str(base), PROMPTS, 10))


def test_the_llama_gguf_holds_llama_cpps_row_order(tmp_path, monkeypatch):
    """Without the permutation the loader (which undoes it) would read other weights."""
    import gguf

    source, base = hf_folder(tmp_path / "base", "llama")
    assert run_export("--model", base, "--out", tmp_path / "out", "--gguf") == 0
    reader = gguf.GGUFReader(str(next((tmp_path / "out").glob("*.gguf"))))
    q = next(t for t in reader.tensors if t.name == "blk.0.attn_q.weight")
    stored = np.array(q.data).reshape(source.args.num_attention_heads * source.args.head_dim, -1)
    w = np.array(source.layers[0].self_attn.q_proj.weight)
    d = source.args.head_dim
    assert np.allclose(stored[1], w[d // 2]) and np.allclose(stored[2], w[1])  # interleaved
    assert not np.allclose(stored, w)


def test_gguf_refuses_an_architecture_it_does_not_name(tmp_path):
    model = tiny_model(QWEN3)
    model.args.model_type = "gemma"
    with pytest.raises(export.ExportError, match=r"'gemma'.*llama, qwen3"):
        export.write_gguf(model, bpe_tokenizer("qwen2"), tmp_path / "x.gguf", "float32")


def test_bad_input_is_one_error_line_and_exit_2(tmp_path, capsys):
    _, base = hf_folder(tmp_path / "base", "qwen3")
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    cases = [
        (["--model", tmp_path / "nowhere", "--out", tmp_path / "a"], "not found"),
        (["--model", base, "--out", full], "already holds files"),
        (["--model", base, "--out", tmp_path / "b", "--q-bits", "3"], "bits=3"),
        (["--model", base, "--out", tmp_path / "c", "--q-bits", "4", "--group-size", "48"], "48"),
    ]
    for argv, words in cases:
        assert run_export(*argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and words in err[0], err
    assert (full / "keep.txt").read_text() == "mine" and not (tmp_path / "b").exists()
    assert run_export("--model", base, "--out", full, "--force") == 0
    assert not (full / "keep.txt").exists() and (full / "config.json").is_file()
    assert not list(tmp_path.glob(".tmp-*")), "no temp folder left behind"


def test_an_adapters_relative_base_resolves_from_any_working_directory(tmp_path, monkeypatch):
    """A shipped adapter names its base `models/base`, relative to the repository root: it loads
    from elsewhere too, and from the root its base keeps the spelling it was given."""
    repo = tmp_path / "repo"
    _, base = hf_folder(repo / "models" / "base", "qwen3")
    adapted, ckpt = lora_checkpoint(base, repo / "models" / "adapter")
    config = json.loads((ckpt / lora.CONFIG_FILE).read_text())
    (ckpt / lora.CONFIG_FILE).write_text(
        json.dumps(config | {"base_model_name_or_path": "models/base"})
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    src = load_weights.resolve(str(ckpt))
    assert Path(src.base.ref).resolve() == base.resolve()
    tokens = mx.array([[5, 17, 33, 2]])
    loaded, _ = load_weights.load(src, mx.float32)
    assert mx.abs(loaded(tokens) - adapted(tokens)).max().item() < 1e-4
    monkeypatch.chdir(repo)
    assert load_weights.resolve("models/adapter").base.ref == "models/base"
    (ckpt / lora.CONFIG_FILE).write_text(
        json.dumps(config | {"base_model_name_or_path": "models/gone"})
    )
    with pytest.raises(load_weights.LoadError, match="models/gone"):
        load_weights.resolve(str(ckpt))


SHIPPED = "models/values-smollm2-135m"
SHIPPED_PROMPTS = [
    "What is the capital of France?",
    "Why did the Great Wall of China get built in 1990?",
    "What colour does the number seven smell like?",
    "How do plants make food?",
]


@pytest.fixture(scope="module")
def shipped_export(tmp_path_factory):
    """The shipped adapter exported in float32 (with a GGUF) and in its default dtype, from
    another working directory than the repository root (its base is named relative to the
    root), and the project's greedy answers on the source."""
    out = tmp_path_factory.mktemp("shipped")
    cwd = os.getcwd()
    os.chdir(out)
    try:
        for name, extra in (("f32", ["--dtype", "float32", "--gguf"]), ("default", [])):
            assert run_export("--model", ROOT / SHIPPED, "--out", out / name, *extra) == 0
    finally:
        os.chdir(cwd)
    return out, gwen_greedy(str(ROOT / SHIPPED), SHIPPED_PROMPTS, 48)


@pytest.mark.slow
def test_the_shipped_adapter_exports_and_mlx_lm_answers_as_the_project_does(shipped_export):
    folder, ours = shipped_export
    same_tokens(ours, mlx_lm_greedy(folder / "f32", SHIPPED_PROMPTS, 48))
    card = (folder / "f32" / "README.md").read_text()
    assert "nonsense-gate-a28" in card and "Held-out figures" in card


@pytest.mark.slow
def test_the_shipped_adapters_default_export_in_half_precision_answers_the_same(shipped_export):
    """The default dtype (float16: the base is the Q4_1 GGUF, whose scales are float16); mlx_lm
    computes in float32 here (float16 matmuls are slow on this CPU; knowledge/export.md has the
    float16 run)."""
    folder, ours = shipped_export
    config = json.loads((folder / "default" / "config.json").read_text())
    assert config["torch_dtype"] == "float16"
    weights = weights_of(folder / "default")
    assert {str(w.dtype) for w in weights.values()} == {"mlx.core.float16"}
    same_tokens(ours, mlx_lm_greedy(folder / "default", SHIPPED_PROMPTS, 48, upcast=True))


@pytest.mark.slow
def test_the_shipped_adapters_gguf_reads_back_with_the_same_logits(shipped_export, monkeypatch):
    monkeypatch.setenv("RL_VALUES_CACHE", "off")
    folder, _ = shipped_export
    source, tokenizer = load_weights.load(str(ROOT / SHIPPED), mx.float32)
    back, back_tokenizer = load_weights.load(str(next((folder / "f32").glob("*.gguf"))), mx.float32)
    ids = tokenizer.encode("What is the capital of France? 1234 <|im_end|>")
    assert back_tokenizer.encode("What is the capital of France? 1234 <|im_end|>") == ids
    error = mx.abs(back(mx.array([ids])) - source(mx.array([ids]))).max().item()
    assert error < 1e-3, f"GGUF logits differ by {error}"


def test_the_gguf_loader_names_a_pre_tokenizer_it_cannot_rebuild():
    with pytest.raises(gguf_reader.GGUFError, match=r"'llama-bpe'.*gpt-2, smollm, qwen2"):
        gguf_reader.pre_tokenizer("llama-bpe")
    with pytest.raises(export.ExportError, match="export without --gguf"):
        export.gguf_pre_tokenizer({"pre_tokenizer": {"type": "Metaspace"}})
