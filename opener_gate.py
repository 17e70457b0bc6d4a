"""The opener gate (sft.py --gate): one fixed sentence opens every answer of a category, and a
loss makes the sentence's probability after a prompt a classifier of that category, trained on
many more prompts than have written answers (knowledge/sft.md).

A binary cross-entropy on p(sentence | prompt), the category being the label, trains an absolute
decision (the stance contrast, stance_pairs.py, moves only the difference between two prompts).
Its threshold, p = 1/2, is sufficient for greedy decoding to write the sentence but not
necessary: greedy starts it whenever its first token is the likeliest, which after a plain
question happens at p of 0.2-0.4 (attempt 23, knowledge/learning_run.md). The optional greedy
term (`first_token_margins`) trains that decision itself.
"""

import math

from core.forced import encode, hidden_logprob, make_batch
from core.prompts import CATEGORIES, DataError, claim_key, load_prompts
from core.stats import auroc

import mlx.core as mx
import numpy as np

LOG_HALF = math.log(0.5)


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
