"""experiments/gate_eval.py: the gates' figures on held-out prompts. greedy_first is checked against
the model's own greedy first token (one forward per prompt, no padding), the gates read back from an
sft.json as sft.py writes it."""

import json

from core import chat_format
from core.prompts import eval_subset, load_prompts

import mlx.core as mx
import numpy as np
import pytest

from experiments import gate_eval
from load_weights import load


@pytest.fixture(scope="module")
def real():
    return load("smollm2-135m", mx.float32)


def greedy_first_token(model, tokenizer, prompt: str) -> int:
    ids = chat_format.chat_tokens(tokenizer, prompt)
    logits = model(mx.array([ids]))[0, -1]
    return int(mx.argmax(logits))


@pytest.mark.slow
def test_greedy_first_matches_greedy_decoding(real):
    model, tok = real
    records = eval_subset(load_prompts("data/eval.jsonl"), 8)
    firsts = [greedy_first_token(model, tok, r["prompt"]) for r in records]
    # a gate sentence that starts with the token greedy writes first after record 0, another
    # that starts with a token greedy writes after none of them
    word = tok.decode([firsts[0]]).strip()
    other = next(w for w in ("Zebra", "Quartz", "Ocelot") if tok.encode(w)[0] not in firsts)
    cats = list(dict.fromkeys(r["category"] for r in records))
    gates = [(cats[0], f"{word} is what I say."), (cats[1], f"{other} stripes.")]
    res = gate_eval.score(model, tok, records, gates)
    sentence_first = [tok.encode(t, add_special_tokens=False)[0] for _, t in gates]
    assert sentence_first[0] == firsts[0], (word, sentence_first[0], firsts[0])
    for j, (cat, _) in enumerate(gates):
        for c, share in res["gates"][cat]["greedy_first"].items():
            want = np.mean(
                [
                    f == sentence_first[j]
                    for f, r in zip(firsts, records, strict=True)
                    if r["category"] == c
                ]
            )
            assert share == pytest.approx(want), (cat, c, share, want)
    assert res["gates"][cats[0]]["greedy_first"][records[0]["category"]] > 0
    assert res["n"] == {c: sum(r["category"] == c for r in records) for c in cats}


def test_trained_gates_read_from_sft_json(tmp_path):
    (tmp_path / "a").mkdir()
    gate = {"gates": [{"category": "nonsense", "sentence": "This question does not make sense."}]}
    (tmp_path / "a" / "sft.json").write_text(json.dumps({"gate": gate, "history": []}))
    assert gate_eval.trained_gates(str(tmp_path / "a")) == [
        ("nonsense", "This question does not make sense.")
    ]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "sft.json").write_text(json.dumps({"history": []}))
    assert gate_eval.trained_gates(str(tmp_path / "b")) is None
    assert gate_eval.trained_gates(str(tmp_path / "none")) is None


def test_a_model_without_gates_needs_gate(capsys):
    assert gate_eval.main(["--model", "smollm2-135m", "--prompts", "data/eval.jsonl"]) == 2
    assert "--gate" in capsys.readouterr().err
    assert gate_eval.main(["--model", "x", "--prompts", "data/eval.jsonl", "--gate", "bogus"]) == 2
