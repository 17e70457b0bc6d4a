"""The frozen models a run derives from the policy's starting weights: KL reference and judge.

With full fine-tuning the reference is a frozen copy of the starting weights (optionally with
its transformer-block Linears quantized to 8 or 4 bits); with LoRA it is the policy itself with
its adapters switched off, which costs no memory. `Reference.logprobs` gives the reference's
log-probs of sampled completions without gradient. `starting_judge` is the one rule for the
default judge, the starting weights, for training (`default_judge`) and for every command that
judges a loaded checkpoint. It is not the KL math (kernels.kl_per_token, grpo.policy_loss).
"""

import contextlib

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core import lora, quant

import mlx.core as mx

from gwen import Gwen, Trunk, frozen_depth, sequence_logprobs, sequence_trunk
from model import Model


def frozen_copy(model: Model, quant_bits: int = 0, group_size: int = 64) -> Model:
    """A frozen copy of `model`; with quant_bits, quantized by core/quant.py's one rule
    (transformer-block Linears; the embedding / LM head stays in float: log-probs read it)."""
    try:
        copy = quant.copy_model(model, quant_bits, group_size)
    except ValueError as e:
        raise ValueError(f"ref_quant_bits={quant_bits}: {e}; use --ref-quant-bits 0") from e
    copy.freeze()
    copy.eval()
    return copy


class Reference:
    """The KL reference: `model` evaluated inside `context()` (adapters off for LoRA)."""

    def __init__(self, model: Model, context=contextlib.nullcontext):
        self.model, self.context = model, context

    @classmethod
    def for_policy(cls, policy_model: Model, lora_rank: int, quant_bits: int) -> "Reference":
        """Build before LoRA is applied: the copy holds the starting weights."""
        if lora_rank:
            return cls(policy_model, lambda: lora.adapters_disabled(policy_model))
        return cls(frozen_copy(policy_model, quant_bits))

    def logprobs(
        self,
        prompt_tokens,
        prompt_pad,
        tokens,
        group_size,
        temperature,
        trunk=None,
        valid=None,
        ragged=False,
    ) -> mx.array:
        """(N, T) log-probs of `tokens` under the reference, no gradient. `trunk`: the frozen
        bottom blocks' output (gwen.sequence_trunk), shared with the policy when the reference is
        the policy with its adapters off (`shares_trunk_with`). `valid`: the LM head runs only
        where it is nonzero, 0 elsewhere, and with `ragged` the blocks skip most positions after
        a row's last valid token (gwen.sequence_logprobs)."""
        with self.context():
            lp = sequence_logprobs(
                self.model, prompt_tokens, prompt_pad, tokens, group_size, temperature,
                trunk=trunk, valid=valid, ragged=ragged,
            )  # fmt: skip
            return mx.stop_gradient(lp)

    def part_logprobs(
        self, sample, mask, parts, trunks, group_size, valid_only, ragged=False
    ) -> list:
        """The reference's log-probs of each micro-batch of `sample` ((prompt rows, completion
        rows) in `parts`, with its trunk or None), evaluated; with `valid_only` the LM head runs
        only on `mask`'s tokens, and with `ragged` too the blocks skip most positions after
        them."""
        ref = [
            self.logprobs(
                sample.prompt_tokens[p],
                sample.prompt_pad[p],
                sample.tokens[c],
                group_size,
                sample.temperature,
                trunk=t,
                valid=mask[c] if valid_only else None,
                ragged=ragged,
            )
            for (p, c), t in zip(parts, trunks, strict=True)
        ]
        mx.eval(ref)
        return ref

    def shares_trunk_with(self, model: Model) -> bool:
        """True when this reference is `model` itself with adapters off: below the adapters the
        two compute the same thing."""
        return self.model is model


def starting_judge(policy, *, judge_model=None, start=None, adapters=None, load=None, dtype=None):
    """(judge Gwen, context to judge inside): the one rule for who judges a rubric reward.

    `judge_model` (a model reference) if given, else the policy's starting weights: the policy
    with its adapters off when it has adapters (`adapters`, default: whether it has them now),
    else `start`, a Model in memory or a reference to load (a training checkpoint's
    ModelSource.start), else the policy itself (it is no checkpoint: its weights are the start).
    `load(ref, dtype)` loads a reference (default Gwen.load; a caller's cache shares weights)."""
    load = load or Gwen.load
    if judge_model:
        return load(judge_model, dtype), contextlib.nullcontext
    if lora.adapters_of(policy.model) if adapters is None else adapters:
        return policy, lambda: lora.adapters_disabled(policy.model)
    if isinstance(start, Model):
        return Gwen(start, policy.tokenizer), contextlib.nullcontext
    if start:
        return load(start, dtype), contextlib.nullcontext
    return policy, contextlib.nullcontext


def default_judge(
    policy,
    reference: Reference | None,
    *,
    judge: str,
    judge_model: str | None,
    lora_rank: int,
    ref_quant_bits: int,
    dtype=None,
):
    """The training run's judge (starting_judge; knowledge/train.md's table): "live" judges
    with the current policy; the starting weights are the LoRA policy with adapters off, the
    unquantized reference, or a frozen copy of the policy's own. Call before LoRA is applied
    (the copy must hold the start)."""
    if judge == "live" and not judge_model:
        return policy, contextlib.nullcontext
    start = None
    if not (judge_model or lora_rank):
        shared = reference is not None and not ref_quant_bits
        start = reference.model if shared else frozen_copy(policy.model)
    return starting_judge(
        policy, judge_model=judge_model, start=start, adapters=bool(lora_rank), dtype=dtype
    )


def trunk_depth(model: Model, reference: "Reference | None", enabled: bool = True) -> int:
    """How many bottom blocks the policy's forward and the reference's may share (a Trunk): 0 when
    not `enabled`, when no bottom block is frozen (full fine-tuning, adapters from block 0) or
    when the reference is another model (a copy: its bottom blocks are its own). At least one
    block stays above the trunk."""
    depth = min(frozen_depth(model), len(model.layers) - 1)
    if not enabled or (reference is not None and not reference.shares_trunk_with(model)):
        return 0
    return depth


def shared_trunks(model: Model, reference: "Reference | None", s, parts, group_size, enabled=True):
    """Per micro-batch (p, c) of GroupSample `s` (prompt and completion row indices), the output
    of the policy's frozen bottom blocks (gwen.Trunk), computed once for the policy's forward,
    the reference's and every iteration of the step: the rows of `s.trunk` when sampling kept
    it at this depth, else computed here. [None, ...] when trunk_depth is 0."""
    depth = trunk_depth(model, reference, enabled)
    if depth == 0:
        return [None] * len(parts)
    if s.trunk is not None and s.trunk.depth == depth:
        t = s.trunk
        return [
            Trunk(depth, t.prompt[p], None if t.completion is None else t.completion[c])
            for p, c in parts
        ]
    trunks = [
        sequence_trunk(model, s.prompt_tokens[p], s.prompt_pad[p], s.tokens[c], group_size, depth)
        for p, c in parts
    ]
    mx.eval([a for t in trunks for a in (t.prompt, t.completion) if a is not None])
    return trunks
