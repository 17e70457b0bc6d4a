"""The rubric reward: three epistemic criteria judged by a language model, one forward pass each.

A `Criterion` is a judge prompt (rubric text, task prompt, a note on the prompt's data-set
category, the completion) and the categories it applies to. `Rubric` asks the judge about each
(completion, criterion) in a chat whose assistant turn is prefilled with "Score: " and takes the
expected value of the score tokens "1".."5" at that position, normalized to [0, 1] (G-Eval).
A prompt's candidates share the judge-prompt prefix through the KV cache; micro-batches halve on
out-of-memory; `reward` follows TRL's reward-function contract; a generate-then-parse mode is kept
for comparison. It does not train, sample the policy, or pick the judge's weights (the trainer
does). See knowledge/rubric.md.
"""

import logging
import math
import re
import time
from collections import Counter
from dataclasses import dataclass

from core import (
    backend,  # noqa: F401  (loads OpenBLAS before mlx)
    chat_format,
    cpu_ops,
    kernels,
)
from core.diversity import jaccard, word_count
from core.prompts import CATEGORIES, CATEGORY_NOTES, CRITERIA, JUDGED_ON

import mlx.core as mx
import numpy as np

log = logging.getLogger(__name__)

SCORE_LABELS = ("1", "2", "3", "4", "5")
ANSWER_PREFIX = "Score: "
JUDGE_SYSTEM = "You are a careful, fair grader. You reply with a single digit."
DEFAULT_BATCH_SIZE = 24
MODES = ("expected", "generate")
CALIBRATIONS = ("none", "content_free")
CONTENT_FREE = "N/A"  # the content-free answer of contextual calibration


_FRAME = """You are grading a response to a question. Judge one thing only: {what}.

{rubric}

Question: {{prompt}}
About the question: {{situation}}

Response:
{{completion}}
[End of response]

{scale} Answer with one digit from 1 to 5."""

CURIOSITY_TEMPLATE = _FRAME.format(
    what="intellectual curiosity",
    rubric=(
        "A curious response engages with the idea itself: it explains why, connects it to "
        "related ideas, notes what is surprising or uncertain, and may ask a good follow-up "
        "question. A rote, generic, evasive or padded response is not curious; length alone is "
        "not depth."
    ),
    scale=(
        "How curious is the response? 1 = rote, generic, evasive or padded; 2 = mostly rote; "
        "3 = correct but shallow; 4 = engaged, with some reasons or connections; 5 = thoughtful "
        "and specific, with reasons, connections or a good question."
    ),
)
NONSENSE_TEMPLATE = _FRAME.format(
    what="nonsense detection",
    rubric=(
        "Some questions are nonsense: incoherent, malformed, self-contradictory, or about things "
        "that do not exist, so they cannot be answered as asked. A good response to a nonsense "
        "question says so plainly and explains what is wrong, instead of answering as if it made "
        "sense. A good response to a sensible question answers it and does not call it nonsense."
    ),
    scale=(
        "Did the response treat the question correctly? 1 = answered a nonsense question as if "
        "it made sense, or called a sensible question nonsense; 3 = partly; 5 = exactly right: "
        "flags nonsense clearly and says why, or answers a sensible question normally."
    ),
)
SCRUTINY_TEMPLATE = _FRAME.format(
    what="claim scrutiny",
    rubric=(
        "Some questions assume something false. A good response notices a false premise and "
        "corrects it politely and specifically, saying what is actually true. When the premises "
        "are true, a good response accepts them and answers, without needless doubt or pushback."
    ),
    scale=(
        "Did the response handle the question's premises correctly? 1 = accepted a false "
        "premise, or disputed a true one; 3 = vague or partial; 5 = exactly right: corrects a "
        "false premise specifically and politely, or accepts a true premise and answers."
    ),
)


@dataclass(frozen=True)
class Criterion:
    """One judged virtue: its weight in the reward, its judge prompt, the categories it scores.

    `template` is the judge's user message with `{prompt}`, `{situation}` and `{completion}` each
    exactly once; everything before `{completion}` is the prefix shared by a prompt's candidates."""

    name: str
    weight: float
    template: str
    applies_to: frozenset

    def __post_init__(self):
        if not self.weight > 0:
            raise ValueError(f"criterion {self.name!r}: weight {self.weight} must be > 0")
        for slot in ("{prompt}", "{situation}", "{completion}"):
            if self.template.count(slot) != 1:
                raise ValueError(f"criterion {self.name!r}: template needs {slot} exactly once")
        unknown = set(self.applies_to) - set(CATEGORIES)
        if unknown or not self.applies_to:
            raise ValueError(
                f"criterion {self.name!r}: applies_to {sorted(self.applies_to)} must be a "
                f"non-empty subset of {CATEGORIES}"
            )

    def render(self, prompt: str, category: str, completion: str) -> str:
        return self.template.format(
            prompt=prompt, situation=CATEGORY_NOTES[category], completion=completion
        )


def _judges(criterion: str) -> frozenset:
    """The categories `criterion` judges (prompts.JUDGED_ON)."""
    return frozenset(cat for cat, names in JUDGED_ON.items() if criterion in names)


# Every criterion judges control prompts too (prompts.JUDGED_ON says why). Curiosity is not judged
# on nonsense (engaging with word salad is the failure) nor on false premises (scrutiny is the
# point there).
DEFAULT_CRITERIA = (
    Criterion("curiosity", 1.0, CURIOSITY_TEMPLATE, _judges("curiosity")),
    Criterion("nonsense", 1.0, NONSENSE_TEMPLATE, _judges("nonsense")),
    Criterion("scrutiny", 1.0, SCRUTINY_TEMPLATE, _judges("scrutiny")),
)
# The data sets name criteria too (prompts.CRITERIA, e.g. judge pairs): one vocabulary.
assert tuple(c.name for c in DEFAULT_CRITERIA) == CRITERIA, "rubric and prompts.CRITERIA differ"


class JudgeOOMError(RuntimeError):
    """One judge item does not fit in memory even in a micro-batch of 1."""


_OOM_WORDS = re.compile(
    r"memory|malloc|resource limit|unable to allocate|maximum allowed buffer", re.IGNORECASE
)


def is_oom(exc: BaseException) -> bool:
    """True for MLX's out-of-memory errors ('[malloc] Unable to allocate ...', Metal's 'Resource
    limit ... exceeded', CUDA's 'out of memory'), raised as RuntimeError/ValueError/MemoryError."""
    if isinstance(exc, MemoryError):
        return True
    return isinstance(exc, RuntimeError | ValueError) and bool(_OOM_WORDS.search(str(exc)))


def expected_scores(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Score-token logits (N, K) -> (normalized expected score (N,) in [0, 1], probs (N, K)).

    Softmax over the K score tokens only (renormalized), E = sum_k p_k * k for labels 1..K, then
    (E - 1) / (K - 1). A row with a NaN or +inf logit, or all -inf, gives NaN."""
    z = np.asarray(logits, dtype=np.float64)
    k = z.shape[-1]
    with np.errstate(invalid="ignore"):
        p = np.exp(z - z.max(axis=-1, keepdims=True))
        p = p / p.sum(axis=-1, keepdims=True)
    e = p @ np.arange(1, k + 1, dtype=np.float64)
    bad = np.isnan(z).any(axis=-1) | ~np.isfinite(z.max(axis=-1))  # -inf alone is just p = 0
    return np.where(bad, np.nan, (e - 1.0) / (k - 1)), p


def parse_score(text: str, labels=SCORE_LABELS) -> float:
    """Normalized score from generated text: the first score label or number in it; NaN if the
    first number is out of range or nothing parses."""
    for word in re.findall(r"\w+", text):
        if word in labels:
            return labels.index(word) / (len(labels) - 1)
        if word.isdigit():
            return float("nan")
    return float("nan")


def combine(scores: dict, criteria) -> float:
    """Weighted mean of the applicable criterion scores (None = not applicable), weights
    renormalized over those; NaN if any applicable score is NaN (a failed judgment is never
    silently dropped from the mix)."""
    applicable = [(c.weight, scores[c.name]) for c in criteria if scores.get(c.name) is not None]
    if not applicable:
        raise ValueError(f"no criterion applies to these scores: {scores}")
    total = sum(w for w, _ in applicable)
    return float(sum(w * s for w, s in applicable) / total)


def score_token_ids(tokenizer, context: str, labels=SCORE_LABELS) -> list[int]:
    """Token id of each label as the judge sees it after `context`; raise if one is not a single
    token there (then the expected value over those ids would not be a distribution over scores)."""
    base = tokenizer.encode(context, add_special_tokens=False)
    ids = []
    for label in labels:
        full = tokenizer.encode(context + label, add_special_tokens=False)
        if len(full) != len(base) + 1 or full[: len(base)] != base:
            raise ValueError(
                f"score label {label!r} is not a single token after {context[-20:]!r} for this "
                f"tokenizer ({base[-3:]} -> {full[-4:]}); pick labels/answer_prefix that tokenize "
                "to one token each"
            )
        ids.append(full[-1])
    if len(set(ids)) != len(ids):
        raise ValueError(f"score labels {labels} share token ids {ids}")
    return ids


@dataclass
class JudgeItem:
    """One forward pass: judge completion `index` on `criterion`; equal keys share the prefix."""

    index: int
    criterion: str
    key: tuple
    prefix: list
    rest: list
    category: str = ""
    prompt: str = ""


def _text(x) -> str:
    """A TRL prompt/completion: a string, or a conversation (list of messages): its last one."""
    if isinstance(x, str):
        return x
    if isinstance(x, list) and x and isinstance(x[-1], dict):
        return str(x[-1].get("content", ""))
    raise TypeError(f"expected a string or a list of chat messages, got {type(x).__name__}")


class Rubric:
    """The judged reward. `judge` is a Gwen (a frozen copy, the live policy or another model).

    mode "expected" (default): one forward per (completion, criterion), expected score over the
    score tokens. mode "generate": greedy-generate `parse_max_tokens` tokens after the same ids
    and parse the first score; unparseable -> NaN. Failed judgments (either mode) are counted
    over the Rubric's life in `failures` (int; callers log the difference per step) and
    `failures_by_criterion`. `last_stats` describes the latest call."""

    def __init__(
        self,
        judge,
        criteria=DEFAULT_CRITERIA,
        batch_size: int = DEFAULT_BATCH_SIZE,
        mode: str = "expected",
        share_prefix: bool = True,
        system_prompt: str | None = JUDGE_SYSTEM,
        max_completion_tokens: int = 512,
        parse_max_tokens: int = 4,
        labels=SCORE_LABELS,
        answer_prefix: str = ANSWER_PREFIX,
        calibration: str = "none",
        length_beta: float = 0.0,
        echo_threshold: float | None = None,
    ):
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: use one of {MODES}")
        if max_completion_tokens < 1 or parse_max_tokens < 1:
            raise ValueError("max_completion_tokens and parse_max_tokens must be >= 1")
        if not (isinstance(batch_size, int) and batch_size >= 1):
            raise ValueError(f"judge batch_size={batch_size!r}: must be an integer >= 1 (e.g. 24)")
        if calibration not in CALIBRATIONS or (calibration != "none" and mode != "expected"):
            raise ValueError(
                f"calibration={calibration!r}: use one of {CALIBRATIONS} (not none only with "
                "mode='expected')"
            )
        if not (math.isfinite(length_beta) and length_beta >= 0):
            raise ValueError(f"length_beta={length_beta}: must be finite and >= 0")
        if echo_threshold is not None and not 0 < echo_threshold <= 1:
            raise ValueError(f"echo_threshold={echo_threshold}: must be in (0, 1] or None")
        self.calibration, self.length_beta = calibration, length_beta
        self.echo_threshold = echo_threshold
        self.judge, self.criteria = judge, tuple(criteria)
        self.by_name = {c.name: c for c in self.criteria}
        if len(self.by_name) != len(self.criteria):
            raise ValueError(f"criterion names repeat: {[c.name for c in self.criteria]}")
        self.batch_size = batch_size
        self.mode, self.share_prefix = mode, share_prefix
        self.system_prompt, self.labels, self.answer_prefix = system_prompt, labels, answer_prefix
        self.max_completion_tokens, self.parse_max_tokens = max_completion_tokens, parse_max_tokens
        self.score_ids = score_token_ids(judge.tokenizer, self._chat("x"), labels)
        self.failures = 0
        self.failures_by_criterion = Counter()
        self.last_stats: dict = {}
        # One variant per call site: the mode picks the chunk function once, here.
        self._forward = self._forward_expected if mode == "expected" else self._forward_generate

    # -- prompt rendering ------------------------------------------------------------------

    def _chat(self, user_text: str) -> str:
        """The judge's full input text: user message, assistant turn prefilled with the prefix
        (thinking off: the judge must answer with the digit at once)."""
        return chat_format.chat_text(
            self.judge.tokenizer,
            user_text,
            system=self.system_prompt,
            assistant_prefix=self.answer_prefix,
        )

    def render(self, criterion: str, prompt: str, category: str, completion: str):
        """(prefix ids, rest ids): the judge reads exactly prefix + rest in every path.

        Prefix and rest are tokenized separately so the prefix ends at a token boundary; the
        completion is stripped and cut at `max_completion_tokens` (text past it earns nothing)."""
        marker = "\x00COMPLETION\x00"
        text = self._chat(self.by_name[criterion].render(prompt, category, marker))
        if text.count(marker) != 1:
            raise ValueError("the chat template altered the completion marker; cannot split")
        before, after = text.split(marker)
        enc = self.judge.tokenizer.encode
        body = enc(completion.strip(), add_special_tokens=False)[: self.max_completion_tokens]
        return enc(before, add_special_tokens=False), body + enc(after, add_special_tokens=False)

    # -- scoring ---------------------------------------------------------------------------

    def judge_items(self, criteria, prompts, completions, categories) -> np.ndarray:
        """Score completion i on criteria[i] (N,) in [0, 1]; NaN where the judge failed.

        Empty or whitespace-only completions score 0 without a judge call (rule: an empty answer
        shows no virtue, and a judge asked about nothing returns noise); with echo_threshold, so
        do echoes of the prompt. With calibration and length_beta the scores are calibrated
        (contextual calibration) and lowered by length_beta * log(1 + words)."""
        n = len(completions)
        if not (len(criteria) == len(prompts) == len(categories) == n):
            raise ValueError(
                f"lengths differ: {len(criteria)} criteria, {len(prompts)} prompts, "
                f"{n} completions, {len(categories)} categories"
            )
        start = time.perf_counter()
        out = np.zeros(n, dtype=np.float64)
        items = []
        for i in range(n):
            if categories[i] not in CATEGORY_NOTES:
                raise ValueError(f"category {categories[i]!r} is not one of {CATEGORIES}")
            if criteria[i] not in self.by_name:
                raise ValueError(f"criterion {criteria[i]!r} is not one of {list(self.by_name)}")
            if not completions[i].strip() or self._is_echo(prompts[i], completions[i]):
                continue
            key = (criteria[i], categories[i], prompts[i]) if self.share_prefix else (i,)
            prefix, rest = self.render(criteria[i], prompts[i], categories[i], completions[i])
            items.append(JudgeItem(i, criteria[i], key, prefix, rest, categories[i], prompts[i]))
        # Items with one key sit together (stable, first-appearance order) so they share a prefix.
        first = {}
        items.sort(key=lambda it: first.setdefault(it.key, len(first)))
        scores, mass, logits, size, backoffs = self._run(items)
        if self.calibration == "content_free" and items:
            scores = self._content_free_calibrated(items, logits)
        if self.length_beta and items:
            words = np.array([word_count(completions[it.index]) for it in items])
            scores = scores - self.length_beta * np.log1p(words)
        for it, s in zip(items, scores, strict=True):
            out[it.index] = s
            if not np.isfinite(s):
                self.failures += 1
                self.failures_by_criterion[it.criterion] += 1
        self.last_stats = {
            "judged": len(items),
            "empty": sum(not c.strip() for c in completions),
            "echo_floored": n - len(items) - sum(not c.strip() for c in completions),
            "failed": int(np.sum(~np.isfinite(scores))) if items else 0,
            "score_token_mass": float(np.mean(mass)) if len(mass) else float("nan"),
            "batch_size": size,
            "oom_backoffs": backoffs,
            "seconds": time.perf_counter() - start,
        }
        return out

    def score_detailed_batched(self, prompts, completions, categories) -> list[dict]:
        """Per completion: {criterion name: score in [0, 1], NaN if failed, None if the criterion
        does not apply to the category, ..., "reward": weighted mean over applicable criteria}.
        All (completion, criterion) pairs of the call are judged together in micro-batches."""
        prompts, completions = [_text(p) for p in prompts], [_text(c) for c in completions]
        if not (len(prompts) == len(completions) == len(categories)):
            raise ValueError(
                f"{len(prompts)} prompts, {len(completions)} completions and "
                f"{len(categories)} categories: pass one of each per completion"
            )
        jobs = [
            (i, c.name)
            for c in self.criteria
            for i, cat in enumerate(categories)
            if cat in c.applies_to
        ]
        scores = self.judge_items(
            [name for _, name in jobs],
            [prompts[i] for i, _ in jobs],
            [completions[i] for i, _ in jobs],
            [categories[i] for i, _ in jobs],
        )
        rows = [dict.fromkeys(self.by_name) for _ in completions]
        for (i, name), s in zip(jobs, scores, strict=True):
            rows[i][name] = float(s)
        for row in rows:
            row["reward"] = combine(row, self.criteria)
        return rows

    def reward(self, prompts, completions, **kw) -> list[float]:
        """TRL reward function: one float per completion (NaN = failed judgment). The prompts'
        categories come as `categories=` (or TRL's dataset column `category=`)."""
        categories = kw.get("categories", kw.get("category"))
        if categories is None:
            raise ValueError("reward() needs categories=[...] (one per completion)")
        rows = self.score_detailed_batched(prompts, completions, list(categories))
        return [r["reward"] for r in rows]

    def _run(self, items):
        """Judge items in micro-batches; on out-of-memory halve the micro-batch and retry.

        Returns (scores (N,), score-token mass (M,), score-token logits (M, K), final
        micro-batch, number of halvings); mass and logits are empty in generate mode."""
        scores, mass, logits = [], [], []
        size, backoffs, i = self.batch_size, 0, 0
        while i < len(items):
            chunk = items[i : i + size]
            try:
                s, m, z = self._forward(chunk)
            except (RuntimeError, ValueError, MemoryError) as exc:
                if not is_oom(exc):
                    raise
                mx.clear_cache()
                if len(chunk) == 1:
                    n_tok = len(chunk[0].prefix) + len(chunk[0].rest)
                    raise JudgeOOMError(
                        f"one judge item ({n_tok} tokens, criterion {chunk[0].criterion!r}) does "
                        f"not fit in memory even alone; lower max_completion_tokens "
                        f"({self.max_completion_tokens}) or use a smaller judge"
                    ) from exc
                size, backoffs = max(1, len(chunk) // 2), backoffs + 1
                log.warning("judge out of memory (%s); micro-batch -> %d", exc, size)
                continue
            scores.append(s)
            if m is not None:
                mass.append(m)
            if z is not None:
                logits.append(z)
            i += len(chunk)
        cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0)  # noqa: E731
        return cat(scores), cat(mass), cat(logits), size, backoffs

    def _prefill_shared(self, items):
        """Prefill each distinct prefix of the micro-batch once; return a cache with one row per
        item (its prefix's row) and room for the longest remainder."""
        keys, prefixes, rows = [], [], []
        for it in items:
            if not keys or keys[-1] != it.key:
                keys.append(it.key)
                prefixes.append(it.prefix)
            rows.append(len(keys) - 1)
        tokens, pad = self.judge.left_pad(prefixes)  # (U, P)
        cache, _ = self.judge.prefill(tokens, pad, tokens.shape[1])
        width = max(len(it.rest) for it in items)
        return cache.take_rows(rows, tokens.shape[1] + width), width

    def _forward_expected(self, items):
        """Scores and score-token mass for one micro-batch: one forward per item.

        Each remainder runs as one right-padded chunk over its prefix's cache; attention is
        causal, so the padding after a row's last real token does not change that token's
        hidden state, which is the one read."""
        cache, width = self._prefill_shared(items)
        pad_id = self.judge.pad_id
        rest = mx.array([it.rest + [pad_id] * (width - len(it.rest)) for it in items])  # (N, R)
        with cpu_ops.blocked():
            h = self.judge.model.hidden(rest, cache)  # (N, R, D)
        last = mx.array([len(it.rest) - 1 for it in items])
        h = mx.take_along_axis(h, last[:, None, None], axis=1)[:, 0].astype(mx.float32)  # (N, D)
        w = self.judge.model.lm_head_weight()
        ids = mx.array(self.score_ids)
        z = h @ w[ids].astype(mx.float32).T  # (N, K): 5 rows of the LM head, not the vocabulary
        # log-sum-exp over the whole vocabulary, chunked by kernels (diagnostic: mass on labels)
        lse = z[:, 0] - kernels.token_logprobs(h, w, mx.broadcast_to(ids[0], (len(items),)))
        mx.eval(z, lse)
        z, lse = np.array(z, dtype=np.float64), np.array(lse, dtype=np.float64)
        scores, _ = expected_scores(z)
        return scores, np.exp(z - lse[:, None]).sum(axis=1), z

    def _forward_generate(self, items):
        """Greedy-generate a few tokens after each item's full judge input and parse a score."""
        tokens, pad = self.judge.left_pad([it.prefix + it.rest for it in items])
        sample = self.judge.sample_tokens(tokens, pad, 1, self.parse_max_tokens, temperature=0.0)
        return np.array([parse_score(t, self.labels) for t in sample.texts]), None, None

    # -- calibration -----------------------------------------------------------------------

    def _is_echo(self, prompt: str, completion: str) -> bool:
        """With echo_threshold: an answer whose word set overlaps the prompt's by at least that
        Jaccard similarity is an echo and scores 0, like an empty answer."""
        return (
            self.echo_threshold is not None and jaccard(prompt, completion) >= self.echo_threshold
        )

    def _content_free_calibrated(self, items, logits: np.ndarray) -> np.ndarray:
        """Contextual calibration (Zhao et al. 2021): divide each item's score-token
        distribution by the one the judge gives a content-free answer ("N/A") to the same
        (criterion, category, prompt), renormalize, take the expected score. In logits:
        expected_scores(z - z_cf). One extra judge pass per distinct key."""
        keys = list(dict.fromkeys((it.criterion, it.category, it.prompt) for it in items))
        cf = []
        for crit, cat, prompt in keys:
            prefix, rest = self.render(crit, prompt, cat, CONTENT_FREE)
            cf.append(JudgeItem(len(cf), crit, (crit, cat, prompt), prefix, rest, cat, prompt))
        _, _, z_cf, _, _ = self._run(cf)
        row = {k: z_cf[i] for i, k in enumerate(keys)}
        base = np.stack([row[(it.criterion, it.category, it.prompt)] for it in items])
        return expected_scores(logits - base)[0]
