"""The opener gate: one fixed sentence opens every answer of a category, and a loss makes the
sentence's probability after a prompt a classifier of that category, trained on many more
prompts than have written answers (knowledge/sft.md). It is SFT with an extra term
(`OpenerGate`, sft.ExtraLoss): the command takes every sft.py flag and the gate's own.

    uv run python -m experiments.opener_gate \
        --gate "nonsense=This question does not make sense." \
        --data data/sft/written.jsonl --epochs 2 --max-answer-tokens 90

Study: the opener gates, attempts 23-29 (knowledge/learning_run.md); experiments/gate_eval.py scores
them.

A binary cross-entropy on p(sentence | prompt), the category being the label, trains an absolute
decision (the stance contrast, experiments/stance_pairs.py, moves only the difference between two
prompts). Its threshold, p = 1/2, is sufficient for greedy decoding to write the sentence but not
necessary: greedy starts it whenever its first token is the likeliest, which after a plain question
happens at p of 0.2-0.4 (attempt 23, knowledge/learning_run.md). The optional greedy term
(`first_token_margins`) trains that decision itself.
"""

import math
import sys
from dataclasses import asdict, dataclass

from core import (
    backend,  # noqa: F401
    errors,
    flags,
)
from core.forced import encode, hidden_logprob, make_batch
from core.jsonl import DataError
from core.pairs import claim_key
from core.prompts import CATEGORIES, load_prompts, step_indices
from core.stats import auroc

import mlx.core as mx
import numpy as np

import sft

LOG_HALF = math.log(0.5)
_f = flags.option


@dataclass
class GateConfig:
    gate: str = _f(
        "",
        "opener gates 'category=sentence; ...': the sentence opens that category's answers and "
        "p(sentence | prompt) is trained as its classifier on --gate-prompts",
    )
    gate_prompts: str = _f(
        "data/prompts.jsonl,data/twins_v2.jsonl",
        "prompt files the gates learn from (training prompts only; twins go with their claim)",
    )
    gate_weight: float = _f(1.0, "weight of the gates' cross-entropy beside the SFT loss")
    gate_batch: int = _f(16, "gate prompts per optimizer step")
    gate_margin: float = _f(
        0.0,
        "weight of the greedy term: each sentence's first token above the likeliest other token "
        "on its category and below it elsewhere (0 = the cross-entropy alone; routed around in "
        "attempt 26: knowledge/sft.md)",
    )
    gate_neg_weight: float = _f(
        1.0,
        "weight of the cross-entropy on prompts outside a gate's category (> 1 lowers the "
        "sentence's probability there, below greedy decoding's threshold: knowledge/sft.md)",
    )

    def __post_init__(self):
        self.gate_list()  # raises on a bad entry
        if self.gate_batch < 1:
            raise ValueError(f"gate_batch={self.gate_batch} must be >= 1")
        if not (self.gate_weight > 0 and self.gate_neg_weight > 0) or self.gate_margin < 0:
            raise ValueError(
                f"gate_weight={self.gate_weight} and gate_neg_weight={self.gate_neg_weight} "
                f"must be > 0 and gate_margin={self.gate_margin} >= 0"
            )
        if not self.gate_prompts.strip():
            raise ValueError("gate_prompts is empty: name the prompt files the gates learn")

    def gate_list(self) -> list[tuple[str, str]]:
        return parse_gates(self.gate)


class OpenerGate(sft.ExtraLoss):
    """The gates as SFT's extra term: the gated answers opened by their sentence, the gates'
    prompts split against the SFT's validation prompts, and per step the cross-entropy of
    p(sentence | prompt) on --gate-batch of them (gate_loss), weighted by --gate-weight."""

    name = "gate"

    def __init__(self, cfg: GateConfig, sft_cfg: sft.SFTConfig):
        self.cfg, self.gates = cfg, cfg.gate_list()
        self.seed, self.val_fraction = sft_cfg.seed, sft_cfg.val_fraction
        self.weight = cfg.gate_weight

    def config(self) -> dict:
        return asdict(self.cfg)

    def records(self, records: list[dict]) -> list[dict]:
        return gate_records(records, self.gates)

    def split(self, train: list[dict], val: list[dict]) -> None:
        """The SFT's validation prompts stay out of the gates' training too."""
        val_texts = {r["prompt"].strip() for r in val}
        self.train_prompts, self.val_prompts = gate_split(
            self.cfg.gate_prompts, val_texts, self.val_fraction, self.seed
        )

    def encode(self, tokenizer, train: list[dict], val: list[dict]) -> dict:
        check_openers(tokenizer, train + val, self.gates)
        if self.cfg.gate_margin:
            try:
                check_first_tokens(tokenizer, self.gates)
            except ValueError as e:
                raise DataError(f"--gate {self.cfg.gate!r}: {e}") from e
        self.train_rows = gate_rows(tokenizer, self.train_prompts, self.gates)
        self.val_rows = gate_rows(tokenizer, self.val_prompts, self.gates)
        self.val_categories = [r["category"] for r in self.val_prompts]
        return {
            "gate_train_prompts": len(self.train_prompts),
            "gate_val_prompts": len(self.val_prompts),
        }

    def batch(self, step: int):
        rows, targets = self.train_rows
        pick = step_indices(len(rows), self.cfg.gate_batch, self.seed, step, 3000)
        return [rows[i] for i in pick], targets[pick]

    def loss(self, model, batch, pad_id: int):
        rows, targets = batch
        return gate_loss(
            model, rows, targets, pad_id, self.cfg.gate_margin, self.cfg.gate_neg_weight
        )

    def step_metrics(self, batch, term: float, rows: np.ndarray) -> dict:
        accuracy = float(np.mean((rows > LOG_HALF) == (batch[1] > 0.5)))
        return {"gate_loss": term, "gate_accuracy": accuracy}

    def progress(self, metrics: dict) -> dict:
        return {"gate": f"{metrics['gate_loss']:.3f}"}

    def validate(self, model, pad_id: int) -> tuple[dict, dict]:
        """The gates on their validation prompts (gate_figures), no gradient."""
        lp, margins = gate_scores(model, self.val_rows[0], pad_id)
        figures = gate_figures(lp, self.val_categories, self.gates, margins)
        return figures, flat_gate(figures)

    def summary(self, history: list[dict], best_step: int | None) -> dict:
        """The gates on their validation prompts, before and as kept."""
        at = {h["step"]: h["gate"] for h in history}
        return {
            "gate": {
                "gates": [{"category": c, "sentence": t} for c, t in self.gates],
                "val_step_0": at[0],
                "val_best_step": at.get(best_step),
            }
        }


def parse_gates(spec: str) -> list[tuple[str, str]]:
    """[(category, sentence)] from "category=sentence; category=sentence". Raises ValueError
    naming the bad entry."""
    gates = []
    for entry in spec.split(";"):
        if not entry.strip():
            continue
        cat, eq, text = entry.partition("=")
        cat, text = cat.strip(), text.strip()
        if not eq or cat not in CATEGORIES or not text:
            raise ValueError(
                f"gate entry {entry.strip()!r}: write category=sentence with a category of "
                f"{list(CATEGORIES)}, e.g. 'nonsense=That question does not make sense.'"
            )
        if cat in [c for c, _ in gates]:
            raise ValueError(f"gate {spec!r} names {cat!r} twice: one sentence per category")
        gates.append((cat, text))
    if not gates:
        raise ValueError(f"gate {spec!r} names no category=sentence entry")
    return gates


def gate_records(records: list[dict], gates: list[tuple[str, str]]) -> list[dict]:
    """The SFT records with each gated category's answers opened by its sentence (an answer that
    already begins with it is left as it is)."""
    opener = dict(gates)
    out = []
    for r in records:
        text = opener.get(r["category"])
        if text is None or r["answer"].strip().startswith(text):
            out.append(r)
        else:
            out.append(r | {"answer": f"{text} {r['answer'].strip()}"})
    return out


def gate_split(files: str, val_texts: set, val_fraction: float, seed: int):
    """(train prompts, validation prompts) of the prompt files. A true twin goes with the prompt
    it names (one claim, one side); a group holding any text of `val_texts` (the SFT's own
    validation prompts) is validation, and so is a seeded `val_fraction` of the other groups."""
    records = load_prompts(files)
    group = {r["id"]: claim_key(r) for r in records}
    keys = sorted(set(group.values()))
    forced_val = {group[r["id"]] for r in records if r["prompt"].strip() in val_texts}
    free = [k for k in keys if k not in forced_val]
    rng = np.random.default_rng([seed, 3000])
    k = math.ceil(val_fraction * len(free))
    val_keys = forced_val | {free[i] for i in rng.permutation(len(free))[:k]}
    train = [r for r in records if group[r["id"]] not in val_keys]
    val = [r for r in records if group[r["id"]] in val_keys]
    return train, val


def gate_rows(tokenizer, prompts: list[dict], gates: list[tuple[str, str]]):
    """(rows, targets): rows[i][g] is prompt i followed by gate g's sentence (no EOS), targets
    (N, G) float32 is 1 where prompt i is of gate g's category."""
    rows = [[encode(tokenizer, r["prompt"], text, eos=False) for _, text in gates] for r in prompts]
    targets = np.array([[float(r["category"] == c) for c, _ in gates] for r in prompts])
    return rows, targets.astype(np.float32)


def log1mexp(lp: mx.array) -> mx.array:
    """log(1 - exp(lp)) for lp < 0, stable at both ends (lp is clipped to <= -1e-6)."""
    lp = mx.minimum(lp, -1e-6)
    return mx.where(lp > -math.log(2.0), mx.log(-mx.expm1(lp)), mx.log1p(-mx.exp(lp)))


def gate_loss(
    model,
    rows: list,
    targets: np.ndarray,
    pad_id: int,
    margin_weight: float = 0.0,
    neg_weight: float = 1.0,
) -> tuple[mx.array, mx.array]:
    """(mean binary cross-entropy [+ margin_weight x the greedy term], (N, G) log p(sentence |
    prompt)) over the rows of gate_rows: -log p on a prompt of the gate's category,
    -neg_weight x log(1 - p) on any other. A neg_weight w > 1 moves the learned threshold down:
    the loss is least at odds p/(1-p) = q/(w(1-q)) for a true share q, so a prompt greedy would
    open at p = 0.2-0.4 is pushed to a w-th of those odds. The greedy term (first_token_margins)
    is softplus(-m) on the gate's category and softplus(m) on any other: it puts the decision
    where greedy decoding makes it."""
    n, g = len(rows), len(rows[0])
    inputs, tgt, mask, pad = make_batch([cell for row in rows for cell in row], pad_id)
    h = model.hidden(inputs, pad=pad)
    lp = hidden_logprob(model, h, tgt, mask).reshape(n, g)
    t = mx.array(targets)
    loss = mx.mean(-(t * lp + neg_weight * (1.0 - t) * log1mexp(lp)))
    if margin_weight:
        m = first_token_margins(model, h, tgt, mask).reshape(n, g)
        loss = loss + margin_weight * mx.mean(mx.logaddexp(0.0, (1.0 - 2.0 * t) * m))
    return loss, lp


def first_token_margins(model, h: mx.array, targets: mx.array, mask: mx.array) -> mx.array:
    """(B,) logit of each row's first answer token minus the largest other logit at that
    position: > 0 exactly when greedy decoding would write that token first. The other logits
    carry no gradient (`logit_margins`)."""
    first = mx.argmax(mask, axis=1)  # left padding: the first 1 is the first answer target
    hf = mx.take_along_axis(h, first[:, None, None], axis=1)[:, 0]  # (B, D)
    logits = (hf @ model.lm_head_weight().T).astype(mx.float32)  # (B, V)
    tok = mx.take_along_axis(targets, first[:, None], axis=1)[:, 0]  # (B,)
    return logit_margins(logits, tok)


def logit_margins(logits: mx.array, tok: mx.array) -> mx.array:
    """(B,) logits[b, tok[b]] - max of the row's other logits, the max held constant: the term
    moves only the sentence's own first token. (With the max differentiable, pushing the margin
    down on every other category raised whichever token came second, the same one everywhere:
    attempt 25's answers all opened "You're right.")"""
    own = mx.take_along_axis(logits, tok[:, None], axis=1)[:, 0]
    others = mx.where(mx.arange(logits.shape[1])[None, :] == tok[:, None], -mx.inf, logits)
    return own - mx.stop_gradient(mx.max(others, axis=1))


def check_openers(tokenizer, records: list[dict], gates) -> None:
    """Each gated answer's tokens must begin with its gate's sentence's tokens, or the gate would
    train tokens the SFT answers never show (DataError naming the record and the sentence)."""
    opener = dict(gates)
    for r in records:
        text = opener.get(r["category"])
        if text is None:
            continue
        want = tokenizer.encode(text, add_special_tokens=False)
        got = tokenizer.encode(r["answer"].strip(), add_special_tokens=False)[: len(want)]
        if got != want:
            raise DataError(
                f"record {r['id']!r}: its answer does not begin with the tokens of the gate "
                f"sentence {text!r} (a sentence ending mid-word merges with the next one); end "
                "the sentence with a full stop or colon"
            )


def check_first_tokens(tokenizer, gates) -> None:
    """With the greedy term, each gate's sentence must begin with its own token: two gates whose
    sentences share a first token would pull that one token up and down on the same prompt."""
    first = {}
    for cat, text in gates:
        tok = tokenizer.encode(text, add_special_tokens=False)[0]
        if tok in first:
            raise ValueError(
                f"gates {first[tok]!r} and {cat!r} open with the same token "
                f"({tokenizer.decode([tok])!r}); with --gate-margin each sentence needs its own "
                "first word"
            )
        first[tok] = cat


def gate_scores(model, rows: list, pad_id: int, batch: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """((N, G) log p(sentence | prompt), (N, G) first_token_margins) as float64, no gradient."""
    lps, margins = [], []
    for i in range(0, len(rows), batch):
        chunk = rows[i : i + batch]
        inputs, tgt, mask, pad = make_batch([c for row in chunk for c in row], pad_id)
        h = model.hidden(inputs, pad=pad)
        lp = hidden_logprob(model, h, tgt, mask)
        m = first_token_margins(model, h, tgt, mask)
        lps.append(np.array(lp, dtype=np.float64).reshape(len(chunk), -1))
        margins.append(np.array(m, dtype=np.float64).reshape(len(chunk), -1))
    return np.concatenate(lps), np.concatenate(margins)


def gate_figures(lp: np.ndarray, categories: list[str], gates, margins=None) -> dict:
    """Per gate: `opens`, the share of each category's prompts whose p(sentence) > 1/2 (greedy
    then surely writes it); `greedy_first` (with margins), the share where the sentence's first
    token is the likeliest (greedy starts it, at any p: the decision greedy acts on); and the
    AUROC of log p, the gate's category against every other."""
    cats = np.array(categories)
    present = [c for c in CATEGORIES if (cats == c).any()]
    out = {}
    for j, (cat, _) in enumerate(gates):
        out[cat] = {
            "opens": {c: float(np.mean(lp[cats == c, j] > LOG_HALF)) for c in present},
            "auroc": auroc(lp[cats == cat, j], lp[cats != cat, j]),
        }
        if margins is not None:
            out[cat]["greedy_first"] = {
                c: float(np.mean(margins[cats == c, j] > 0)) for c in present
            }
    return out


def flat_gate(figs: dict) -> dict:
    """gate_figures as flat metric names: gate/<category>/auroc, gate/<category>/opens_<c>,
    gate/<category>/greedy_first_<c>."""
    out = {}
    for cat, f in figs.items():
        out[f"gate/{cat}/auroc"] = f["auroc"]
        out |= {f"gate/{cat}/opens_{c}": v for c, v in f["opens"].items()}
        out |= {f"gate/{cat}/greedy_first_{c}": v for c, v in f.get("greedy_first", {}).items()}
    return out


@errors.cli
def main(argv=None) -> int:
    """sft.py's command with the gates' flags beside its own."""
    doc = "Supervised LoRA warm start with opener gates (rl-values; knowledge/sft.md)."
    return sft.main(argv, extra=(GateConfig, OpenerGate), description=doc)


if __name__ == "__main__":
    sys.exit(main())
