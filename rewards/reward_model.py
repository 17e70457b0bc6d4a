"""Bradley-Terry reward model: a scalar head on the project's transformer, trained on preferences.

`RewardModel` reads a (prompt, response) pair formatted by chat_format (user turn = the prompt,
an optional system line naming the prompt's data-set category, then the response and EOS) and
returns one float: a linear head on the final-norm hidden state of the last token (batches are
left-padded, so the last position is every row's last real token). `bt_loss` is
-log sigmoid(r_better - r_worse - margin). A trained model is a folder (`save`/`load`): its
config (base model, LoRA/trainable layers, formatting, data hash, metrics) and only the weights
that training changed; `load` rebuilds the rest from the base checkpoint, merging LoRA adapters
for fast scoring. A self-contained folder (quantize.py writes one) holds its own backbone in
BACKBONE_DIR and only the head as trained weights (`head_only`). `score` is the reward
contract's scorer. Training lives in train_rm.py.
"""

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from core import backend  # noqa: F401  (loads OpenBLAS before mlx)

# isort: split
from core import chat_format, cpu_ops, lora, precision
from core.atomic import atomic_folder
from core.prompts import CATEGORIES, CATEGORY_NOTES

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten

import load_weights
from gwen import ragged_blocks
from kvcache import KVCache
from model import Model

CONFIG_FILE = "rm_config.json"
WEIGHTS_FILE = "rm_weights.safetensors"
BACKBONE_DIR = "backbone"  # base_model naming the folder's own backbone (a self-contained model)


@dataclass
class RMConfig:
    """How a reward model is built and reads its input; saved as rm_config.json."""

    base_model: str = "smollm2-135m"
    lora_rank: int = 16  # 0 = full fine-tuning of the trainable layers
    lora_alpha: float = 32.0
    lora_targets: tuple = (
        *("q_proj", "k_proj", "v_proj", "o_proj"),
        *("gate_proj", "up_proj", "down_proj"),
    )
    train_layers: int = 0  # only the top N transformer blocks train (0 = all)
    head_only: bool = False  # the backbone is used as it is: only the score head is trained
    max_prompt_tokens: int = 160
    max_response_tokens: int = 224
    use_category: bool = True  # a system line says what the data set knows about the prompt
    tokenizer_sha256: str = ""  # of the base tokenizer's vocabulary, checked against policies
    extra: dict = field(default_factory=dict)  # training provenance: data hash, metrics, ...

    def __post_init__(self):
        self.lora_targets = tuple(self.lora_targets)
        for name in ("lora_rank", "train_layers", "max_prompt_tokens", "max_response_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"RMConfig.{name}={getattr(self, name)} must be >= 0")
        if self.max_prompt_tokens < 1 or self.max_response_tokens < 1:
            raise ValueError("max_prompt_tokens and max_response_tokens must be >= 1")
        if self.head_only and (self.lora_rank or self.train_layers):
            raise ValueError(
                f"head_only=True trains no backbone weights: lora_rank={self.lora_rank} and "
                f"train_layers={self.train_layers} must both be 0"
            )

    def trainable_layers(self, n_layers: int) -> list[int]:
        k = self.train_layers or n_layers
        if k > n_layers:
            raise ValueError(f"train_layers={k} > the model's {n_layers} layers")
        return list(range(n_layers - k, n_layers))


def tokenizer_sha256(tokenizer) -> str:
    """A fingerprint of a tokenizer's vocabulary and special tokens: two models whose
    fingerprints differ do not read the same ids the same way."""
    vocab = sorted(tokenizer.get_vocab().items())
    payload = json.dumps([vocab, tokenizer.eos_token, tokenizer.bos_token], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class RewardModel(nn.Module):
    """backbone: a model.Model (its LM head is unused); head: Linear(D, 1) named `score`."""

    def __init__(self, backbone, tokenizer, config: RMConfig):
        super().__init__()
        self.backbone = backbone
        self.score_head = nn.Linear(backbone.args.hidden_size, 1)
        self.score_head.weight = mx.zeros_like(self.score_head.weight)
        self.score_head.bias = mx.zeros_like(self.score_head.bias)
        self._tokenizer, self._config = tokenizer, config  # plain attributes, not parameters
        eos = tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the reward model's tokenizer has no EOS token to end a response")
        pad = tokenizer.pad_token_id
        self._eos, self._pad = eos, eos if pad is None else pad

    @property
    def config(self) -> RMConfig:
        return self._config

    @property
    def tokenizer(self):
        return self._tokenizer

    def encode(self, prompt: str, response: str, category: str | None) -> list[int]:
        """Token ids of one (prompt, response): the chat-formatted prompt (its text cut to its
        last max_prompt_tokens tokens, so the question survives), the response (cut at
        max_response_tokens), EOS."""
        head, body = self.encode_parts(prompt, response, category)
        return head + body

    def encode_parts(self, prompt: str, response: str, category: str | None):
        """`encode`'s ids as (the chat-formatted prompt, the response + EOS)."""
        cfg, tok = self._config, self._tokenizer
        p_ids = tok.encode(prompt.strip(), add_special_tokens=False)
        if len(p_ids) > cfg.max_prompt_tokens:
            prompt = tok.decode(p_ids[-cfg.max_prompt_tokens :])
        system = None
        if cfg.use_category:
            if category not in CATEGORIES:
                raise ValueError(
                    f"category {category!r} is not one of {CATEGORIES}: this reward model reads "
                    "the prompt's category (use_category=True)"
                )
            system = f"About the question: {CATEGORY_NOTES[category]}"
        head = chat_format.chat_tokens(tok, prompt, system=system)
        body = tok.encode(response.strip(), add_special_tokens=False)[: cfg.max_response_tokens]
        return head, body + [self._eos]

    def batch(self, seqs: list[list[int]]) -> tuple[mx.array, mx.array]:
        """(B, L) int32 left-padded tokens and (B,) pad counts."""
        width = max(len(s) for s in seqs)
        pad = [width - len(s) for s in seqs]
        rows = [[self._pad] * p + s for p, s in zip(pad, seqs, strict=True)]
        return mx.array(rows, dtype=mx.int32), mx.array(pad, dtype=mx.int32)

    def __call__(self, tokens: mx.array, pad: mx.array) -> mx.array:
        """(B,) scores for left-padded tokens (B, L)."""
        h = self.backbone.hidden(tokens, pad=pad)[:, -1, :]  # (B, D): every row's last token
        return self.score_head(h.astype(mx.float32))[:, 0]

    def score(
        self,
        prompts,
        responses,
        categories,
        batch_size: int = 16,
        share_prefix: bool = True,
        ragged: bool = True,
    ) -> list[float]:
        """Scores for (prompt, response, category) triples, forward-only, returned in the input
        order. With `share_prefix`, answers to the same prompt (a GRPO group) read the prompt
        once: it is prefilled into a KV cache that each answer continues (`_score_shared`; with
        `ragged`, the padding after the shorter answers is mostly skipped: gwen.ragged_blocks);
        otherwise each row is run whole, in batches sorted by length (less padding)."""
        if not (len(prompts) == len(responses) == len(categories)):
            raise ValueError(
                f"{len(prompts)} prompts, {len(responses)} responses, {len(categories)} categories"
            )
        triples = zip(prompts, responses, categories, strict=True)
        parts = [self.encode_parts(p, r, c) for p, r, c in triples]
        with cpu_ops.blocked():
            if share_prefix:
                return self._score_shared(parts, batch_size, ragged)
            return self._score_whole([h + b for h, b in parts], batch_size)

    def pushback_probabilities(
        self, prompts, responses, categories=None, share_prefix: bool = True
    ) -> np.ndarray:
        """P(pushback) = sigmoid(score), float64, one per answer, for a classifier trained with
        `train_rm.py --labels` (the stance detector, the grader's classifier). `categories` None
        gives every row no category line, as a classifier trained with --no-use-category reads
        it."""
        if categories is None:
            categories = [None] * len(prompts)
        if not len(prompts):
            return np.zeros(0, dtype=np.float64)
        scores = np.asarray(
            self.score(prompts, responses, categories, share_prefix=share_prefix), np.float64
        )
        return 1.0 / (1.0 + np.exp(-scores))

    def _score_whole(self, seqs: list[list[int]], batch_size: int) -> list[float]:
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        out = [0.0] * len(seqs)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            tokens, pad = self.batch([seqs[i] for i in idx])
            for i, v in zip(idx, self(tokens, pad).tolist(), strict=True):
                out[i] = float(v)
        return out

    def _score_shared(self, parts: list[tuple[list[int], list[int]]], batch_size: int, ragged):
        """Rows grouped by identical prompt ids; per chunk of groups (at most `batch_size`
        answers, or one group), the prompts are prefilled left-padded, each answer's row takes
        its prompt's cache and runs its tokens right-padded; its score reads its last real
        token (padding after a row's end is never attended to by its real tokens)."""
        members: dict[tuple, list[int]] = {}
        for i, (head, _) in enumerate(parts):
            members.setdefault(tuple(head), []).append(i)
        groups = sorted(members.items(), key=lambda kv: len(kv[0]))  # similar prompt lengths
        chunks, current = [], []
        for group in groups:
            if current and sum(len(m) for _, m in current) + len(group[1]) > batch_size:
                chunks.append(current)
                current = []
            current.append(group)
        chunks.append(current)
        out = [0.0] * len(parts)
        for chunk in chunks:
            head_tokens, head_pad = self.batch([list(head) for head, _ in chunk])
            rows = [j for j, (_, m) in enumerate(chunk) for _ in m]
            idx = [i for _, m in chunk for i in m]
            bodies = [parts[i][1] for i in idx]
            width = max(len(b) for b in bodies)
            body_tokens = mx.array(
                [b + [self._pad] * (width - len(b)) for b in bodies], dtype=mx.int32
            )
            cache = KVCache.for_model(self.backbone, len(chunk), head_tokens.shape[1], head_pad)
            self.backbone.blocks(self.backbone.embed(head_tokens), range(self.n_layers), cache)
            cache = cache.take_rows(rows, capacity=head_tokens.shape[1] + width)
            x, layers = self.backbone.embed(body_tokens), range(self.n_layers)
            lengths = [len(b) for b in bodies] if ragged else None
            h = self.backbone.final_norm(ragged_blocks(self.backbone, x, layers, cache, lengths))
            last = mx.array([len(b) - 1 for b in bodies], dtype=mx.int32)
            h = h[mx.arange(len(bodies)), last]  # (N, D): each row's last real token
            values = self.score_head(h.astype(mx.float32))[:, 0].tolist()
            for i, v in zip(idx, values, strict=True):
                out[i] = float(v)
        return out

    @property
    def n_layers(self) -> int:
        return len(self.backbone.layers)


def bt_loss(r_better: mx.array, r_worse: mx.array, margin: float = 0.0) -> mx.array:
    """Mean of -log sigmoid(r_better - r_worse - margin) (Bradley-Terry), stable for any gap."""
    return mx.mean(nn.softplus(-(r_better - r_worse - margin)))


def build(config: RMConfig, dtype=None) -> RewardModel:
    """A fresh reward model on `config.base_model`: LoRA (or full weights) trainable in the top
    `train_layers` blocks (and the final norm when those are fully trained), head trainable;
    with `head_only`, the head alone."""
    backbone, tokenizer = load_weights.load(config.base_model, dtype)
    n_layers = len(backbone.layers)
    layers = config.trainable_layers(n_layers)
    backbone.freeze()
    if config.lora_rank:
        lora.apply_lora(
            backbone, config.lora_rank, config.lora_alpha, list(config.lora_targets), layers
        )
    elif not config.head_only:
        for i in layers:
            backbone.layers[i].unfreeze()
        backbone.model.norm.unfreeze()
    config.tokenizer_sha256 = tokenizer_sha256(tokenizer)
    return RewardModel(backbone, tokenizer, config)


def trained_weights(rm: RewardModel) -> dict[str, mx.array]:
    return dict(tree_flatten(rm.trainable_parameters()))


def save(rm: RewardModel, out_dir, extra: dict | None = None, write_backbone=None) -> Path:
    """Write the folder atomically (temp folder, then rename): config + trained weights. With
    `write_backbone(folder)` (a head_only model), the backbone is written as an HF folder in
    BACKBONE_DIR and the config's base_model names it: a self-contained reward model."""
    out_dir = Path(out_dir)
    cfg = dataclasses.replace(rm.config, extra={**rm.config.extra, **(extra or {})})
    precision.check_finite(rm.parameters(), f"reward model {out_dir}")
    if write_backbone is not None and not cfg.head_only:
        raise ValueError("a reward model that carries its own backbone must be head_only")
    with atomic_folder(out_dir) as tmp:
        if write_backbone is not None:
            write_backbone(tmp / BACKBONE_DIR)
            cfg = dataclasses.replace(cfg, base_model=BACKBONE_DIR)
        mx.save_safetensors(str(tmp / WEIGHTS_FILE), trained_weights(rm))
        (tmp / CONFIG_FILE).write_text(json.dumps(dataclasses.asdict(cfg), indent=1) + "\n")
    return out_dir


def check_folder(path) -> Path:
    """`path` as a Path; FileNotFoundError unless it holds a reward model's config and weights
    (checked before any model work; `load` checks it too)."""
    path = Path(path)
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        if not (path / name).is_file():
            raise FileNotFoundError(
                f"{path / name} not found: {path} is not a reward-model folder "
                "(train one with `uv run python train_rm.py`)"
            )
    return path


def load(path, dtype=None, merge: bool = True) -> RewardModel:
    """The reward model saved in folder `path`; with `merge`, LoRA folded into the weights.
    A base_model of BACKBONE_DIR is the folder's own backbone."""
    path = check_folder(path)
    raw = json.loads((path / CONFIG_FILE).read_text())
    known = {f.name for f in dataclasses.fields(RMConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{path / CONFIG_FILE}: unknown fields {unknown}")
    saved_sha = raw.get("tokenizer_sha256", "")
    if raw.get("base_model") == BACKBONE_DIR:
        raw["base_model"] = str(path / BACKBONE_DIR)
    rm = build(RMConfig(**raw), dtype)
    if saved_sha and saved_sha != rm.config.tokenizer_sha256:
        raise ValueError(
            f"{path}: base model {rm.config.base_model!r} now has a different tokenizer than the "
            "one this reward model was trained with"
        )
    weights = mx.load(str(path / WEIGHTS_FILE))
    expected = trained_weights(rm)
    if set(weights) != set(expected):
        missing, extra = sorted(set(expected) - set(weights)), sorted(set(weights) - set(expected))
        raise ValueError(
            f"{path / WEIGHTS_FILE} does not match its config: missing {missing[:4]}, "
            f"unexpected {extra[:4]}"
        )
    rm.load_weights([(k, v.astype(expected[k].dtype)) for k, v in weights.items()], strict=False)
    if merge and rm.config.lora_rank:
        merge_adapters(rm)
    rm.eval()
    mx.eval(rm.parameters())
    return rm


def merge_adapters(rm: RewardModel) -> None:
    """Replace every LoRALinear by a plain Linear holding W + scale * B A (same outputs, one
    matmul instead of three)."""
    merged = lora.merged_weights(rm.backbone)
    plain = Model(rm.backbone.args)
    plain.load_weights(list(merged.items()), strict=True)
    plain.name = getattr(rm.backbone, "name", None)
    rm.backbone = plain
