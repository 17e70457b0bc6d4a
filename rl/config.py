"""The run configuration: one dataclass with defaults and one-line help, its CLI, file loading.

`TrainConfig` checks its invariants in `__post_init__` with messages that name the value and the
fix; `build_parser` derives every flag from the dataclass fields (so help and defaults cannot
drift); `resolve_config` layers defaults < a saved config file < flags given on the command line.
The resolved config is saved as JSON beside every checkpoint. Nothing here touches a model.
"""

import argparse
import dataclasses
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from core import backend, flags
from core.errors import UserError
from core.prompts import CATEGORIES

import grpo
from load_weights import MODEL_HELP
from rewards import hacks
from rewards.builtin import LENGTH_TARGET
from rewards.registry import load_reward_config, parse_function_spec, parse_spec
from tasks import registry as tasks

_f = flags.option


@dataclass
class TrainConfig:
    model: str = _f("smollm2-135m", f"the starting policy: {MODEL_HELP}")
    # The environment (tasks/registry.py) and the advantage baseline (grpo.advantages).
    task: str = _f("values", "values (rubric prompts) | chess (P:/A: tasks, graduated reward)")
    baseline: str = _f("group", "advantage baseline: group | ema (per task type) | adaptive")
    baseline_decay: float = _f(0.9, "per-step decay of the ema/adaptive baseline's average")
    advantage_cap: float = _f(5.0, "clip advantages to [-cap, cap] (bounds ema after a flat step)")
    reward: str | None = _f(
        None,
        "reward spec (default: the task's, rm:models/rm-smollm2-135m-v2 | chess): rubric | "
        "rm:PATH | rubric_cal | happy | chess | mix rubric:0.5,rm:PATH:0.5",
    )
    reward_config: str | None = _f(None, "YAML file of reward components (replaces --reward)")
    reward_fn: str | None = _f(None, "FILE.py:FUNCTION, a reward function (replaces --reward)")
    data: str | None = _f(
        None,
        "training prompts, validated before step 1 (default: the task's, data/prompts.jsonl "
        "or data/chess/train.jsonl; data/happy_prompts.jsonl for --reward happy)",
    )
    eval_data: str | None = _f(
        None, "held-out prompts for --eval-every (default: data/eval.jsonl, data/chess/val.jsonl)"
    )
    steps: int = _f(60, "optimizer steps to run (total, including resumed ones)")
    prompts_per_step: int = _f(4, "distinct prompts B per step")
    pairs_per_step: int = _f(
        0,
        "of those, this many (record, twin) pairs from records with a `pair` field, each pair "
        "in the same step; the rest from unpaired records (0 = off: one shuffled stream)",
    )
    single_categories: str | None = _f(
        None,
        "with --pairs-per-step: the categories the rest of each step is drawn from, "
        "comma-separated (default: every unpaired record), e.g. to balance the twins' controls",
    )
    group_size: int = _f(8, "completions G per prompt (>= 2 for a group baseline)")
    max_new_tokens: int = _f(64, "generation cap per completion")
    temperature: float = _f(1.0, "sampling temperature (log-probs use the same)")
    top_p: float = _f(1.0, "nucleus sampling mass")
    ignore_eos: bool = _f(False, "generate exactly max_new_tokens (for benchmarks)")
    lr: float = _f(1e-5, "peak AdamW learning rate")
    warmup_steps: int = _f(3, "linear warm-up steps")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    max_grad_norm: float = _f(1.0, "clip the global gradient norm to this")
    max_failed_updates: int = _f(
        3, "stop the run after this many non-finite updates in a row (each skipped or rolled back)"
    )
    grad_accum: int = _f(1, "micro-batches per step (splits the B groups)")
    rollout_trunk: bool = _f(
        True, "with --share-trunk: keep the frozen blocks' output from sampling for the update"
    )
    share_prefix: bool = _f(True, "reward model: read each group's prompt once (a KV cache)")
    share_trunk: bool = _f(
        True, "LoRA in the top blocks: run the frozen blocks below once for policy and reference"
    )
    head_valid_only: bool = _f(
        True, "update and reference: run the LM head on completion tokens only, not on padding"
    )
    drop_finished: bool = _f(
        True, "sampling (numpy sampler): ended answers leave the decode batch, same draws"
    )
    ragged_tail: bool = _f(
        True,
        "update, reference, reward model: skip most positions after each answer's end in the "
        "blocks (a tail pass for the longer rows)",
    )
    keep_head_logits: bool = _f(
        True, "update: keep the LM head's forward logits for its backward (no recomputed product)"
    )
    num_iterations: int = _f(1, "updates per rollout batch (PPO's mu), ratio vs rollout policy")
    loss_type: str = _f("grpo", "grpo | dr_grpo | dapo")
    clip_eps_low: float = _f(0.2, "ratio floor 1 - eps_low")
    clip_eps_high: float | None = _f(None, "ratio ceiling 1 + eps_high (default 0.28 dapo)")
    scale_by_std: bool = _f(True, "divide advantages by the group std (off for dr_grpo)")
    std_floor: float = _f(1e-2, "floor on the group std when scaling")
    min_group_std: float = _f(0.0, "drop groups whose reward std is below this (0 = keep all)")
    truncated: str = _f(
        "keep", "answers cut at max_new_tokens: keep | cap (earn at most an ended one) | mask"
    )
    kl_coef: float = _f(0.04, "KL penalty coefficient (initial value when adaptive)")
    kl_target: float | None = _f(None, "target KL per token: adapt the coefficient (Ziegler)")
    kl_horizon: int = _f(10000, "adaptive KL horizon, in samples")
    kl_estimator: str = _f("k3", "k1 | k2 | k3")
    kl_direction: str = _f("reverse", "reverse | forward | symmetric")
    lora_rank: int = _f(0, "0 = full fine-tuning, else the LoRA rank")
    lora_alpha: float = _f(16.0, "LoRA alpha (scale = alpha / rank)")
    lora_targets: str = _f("q_proj,k_proj,v_proj,o_proj", "comma-separated LoRA target layers")
    lora_layers: int = _f(
        0, "adapters in the top N blocks only (0 = all): the backward stops there"
    )
    # Gradient routing (rl/routing.py, rewards/hacks.py, evals/routing.py; knowledge/routing.md)
    routing: str = _f(
        "off",
        "off | routed: retain (--lora-rank) + forget (--forget-rank) adapters, flagged "
        "completions train only forget | baseline: plain LoRA of rank lora_rank + forget_rank",
    )
    forget_rank: int = _f(0, "forget adapter rank for --routing routed / baseline")
    retain_baseline: str = _f(
        "group",
        "routed only: group (unflagged completions' advantages against the whole group) | "
        "unflagged (against the group's unflagged completions alone: a hack's high reward no "
        "longer makes the unflagged answers look bad to the retain adapter)",
    )
    retain_rollout_every: int = _f(
        0,
        "routed only: every Nth step samples and updates with the forget adapter off (retain "
        "alone), so the retain adapter keeps on-policy task data when the hack holds the batch "
        "(0 = off)",
    )
    hack_detectors: str | None = _f(
        None,
        "hack detectors, e.g. happy_spam:min_count=2,prompt_echo (rewards/hacks.py); rates logged",
    )
    task_reward: str | None = _f(None, "reward spec of the task alone, for routing evaluation")
    routing_eval_every: int = _f(0, "adapter modes + forget-scale sweep every N steps (0 = off)")
    routing_eval_samples: int = _f(4, "fresh samples per --eval-data prompt in routing eval")
    ref_quant_bits: int = _f(0, "quantize the frozen reference to 8 or 4 bits (0 = off)")
    judge: str = _f("frozen", "frozen (starting weights) | live (the current policy)")
    judge_model: str | None = _f(None, "judge with this checkpoint instead")
    judge_batch_size: int = _f(24, "completions the judge scores per forward batch")
    enable_thinking: bool = _f(False, "let a Qwen3 policy think (<think> blocks); off by default")
    length_penalty: float = _f(0.0, "reward -= this per word beyond --length-target")
    length_target: int = _f(LENGTH_TARGET, "words allowed before the length penalty")
    # Reward refresh (rl/reward_refresh.py): the rm component learns from the run's own answers.
    reward_refresh: int = _f(
        0,
        "every K steps label that step's answers by rule (broken; with --refresh-stance, "
        "denials by the prompt's category) and update the reward model on pairs of them "
        "(0 = off)",
    )
    refresh_pairs: int = _f(64, "refresh: pairs drawn from the step's answers")
    refresh_steps: int = _f(4, "refresh: optimizer steps per refresh")
    refresh_batch: int = _f(8, "refresh: new pairs per optimizer step (and as many replayed)")
    refresh_lr: float = _f(1e-5, "refresh: the reward model's learning rate")
    refresh_stance: bool = _f(False, "refresh: also order answers by denial and category")
    refresh_replay: bool = _f(True, "refresh: mix in the reward model's own training pairs")
    eval_every: int = _f(0, "evaluate on --eval-data every N steps (0 = off)")
    eval_limit: int = _f(32, "eval prompts per evaluation")
    save_every: int = _f(10, "checkpoint every N steps (and at the end, and on Ctrl-C)")
    seed: int = _f(0, "seed for data order, sampling and LoRA init")
    dtype: str | None = flags.dtype_option()
    out_dir: str = _f("runs", "parent folder of run directories")
    run_name: str | None = _f(None, "run directory name (default: built from hyperparameters)")
    tensorboard: bool = _f(True, "TensorBoard events in RUN_DIR/tb (tensorboard --logdir runs)")

    def __post_init__(self):
        backend.parse_dtype(self.dtype)  # ValueError naming --dtype and its values

        def need(ok, msg):
            if not ok:
                raise ValueError(msg)

        need(
            self.group_size >= 2,
            f"group_size={self.group_size}: GRPO needs >= 2 completions "
            "per prompt for a group baseline; use --group-size 4",
        )
        need(self.prompts_per_step >= 1, f"prompts_per_step={self.prompts_per_step}: use >= 1")
        need(
            self.max_failed_updates >= 1,
            f"max_failed_updates={self.max_failed_updates}: use >= 1 (e.g. 3)",
        )
        need(
            0 <= 2 * self.pairs_per_step <= self.prompts_per_step,
            f"pairs_per_step={self.pairs_per_step}: use 0 to prompts_per_step / 2 "
            f"({self.prompts_per_step // 2}); each pair takes two of the step's prompts",
        )
        if self.single_categories is not None:
            named = self.single_category_list()
            need(
                self.pairs_per_step > 0,
                f"single_categories={self.single_categories!r} needs --pairs-per-step >= 1 "
                "(it picks the unpaired part of a paired step)",
            )
            bad = [c for c in named if c not in CATEGORIES]
            need(
                named and not bad and len(set(named)) == len(named),
                f"single_categories={self.single_categories!r}: name each of "
                f"{', '.join(CATEGORIES)} at most once (bad: {bad or 'empty or repeated'})",
            )
        need(
            self.prompts_per_step % self.grad_accum == 0,
            f"prompts_per_step={self.prompts_per_step} is not divisible by grad_accum="
            f"{self.grad_accum}: micro-batches split the groups evenly",
        )
        need(
            self.steps >= 1 and self.max_new_tokens >= 1 and self.num_iterations >= 1,
            "steps, max_new_tokens and num_iterations must be >= 1",
        )
        task = tasks.get(self.task)  # the one place the task's defaults are applied
        if self.reward is None:
            self.reward = task.reward
        components = self.reward_components()  # names, weights, paths: before any model loads
        tasks.check_rewards(task, [c.name for c in components])
        need(self.judge_batch_size >= 1, f"judge_batch_size={self.judge_batch_size}: use >= 1")
        if self.data is None:  # the toy reward needs prompts that sometimes draw "happy"
            happy = self.task == "values" and self.reward == "happy"
            self.data = "data/happy_prompts.jsonl" if happy else task.data
        if self.eval_data is None:
            self.eval_data = task.eval_data
        need(
            self.baseline in grpo.BASELINES,
            f"baseline={self.baseline!r}: use one of {sorted(grpo.BASELINES)}",
        )
        need(
            0 <= self.baseline_decay < 1,
            f"baseline_decay={self.baseline_decay}: must be in [0, 1), e.g. 0.9",
        )
        need(
            self.advantage_cap > 0,
            f"advantage_cap={self.advantage_cap}: must be > 0, e.g. 5 (the default)",
        )
        need(
            self.truncated in grpo.TRUNCATION,
            f"truncated={self.truncated!r}: use one of {list(grpo.TRUNCATION)}",
        )
        need(
            self.truncated == "keep" or not self.ignore_eos,
            f"truncated={self.truncated!r} with ignore_eos: every answer runs to the cap, so none "
            "ends; use truncated=keep",
        )
        need(self.judge in ("frozen", "live"), f"judge={self.judge!r}: use frozen or live")
        need(self.ref_quant_bits in (0, 4, 8), f"ref_quant_bits={self.ref_quant_bits}: 0, 4, 8")
        need(
            not (self.ref_quant_bits and self.lora_rank),
            "ref_quant_bits needs full fine-tuning: with LoRA the reference is the base model "
            "with adapters off, which costs no memory",
        )
        need(self.lr > 0 and self.kl_coef >= 0, f"lr={self.lr} must be > 0, kl_coef >= 0")
        need(
            self.kl_target is None or self.kl_coef > 0,
            f"kl_coef={self.kl_coef} with kl_target={self.kl_target}: an adaptive controller "
            "scales the coefficient, so it must start > 0; pass --kl-target none for a fixed "
            "coefficient",
        )
        need(self.lora_layers >= 0, f"lora_layers={self.lora_layers}: use >= 0 (0 = all blocks)")
        self.loss_config()  # validates loss_type, clipping and KL settings
        self._check_routing()
        self._check_refresh(components)

    def _check_refresh(self, components) -> None:
        if self.reward_refresh < 0:
            raise ValueError(f"reward_refresh={self.reward_refresh}: use >= 0 (0 = off)")
        if not self.reward_refresh:
            return
        names = [c.name for c in components]
        if names.count("rm") != 1 or "ensemble" in names:
            raise ValueError(
                f"reward_refresh={self.reward_refresh} updates one reward model: the reward "
                f"must hold exactly one rm:PATH component and no ensemble, got {names}"
            )
        sizes = (self.refresh_pairs, self.refresh_steps, self.refresh_batch)
        if min(sizes) < 1 or not self.refresh_lr > 0:
            raise ValueError(
                f"refresh_pairs, refresh_steps, refresh_batch (got {sizes}) must be >= 1 and "
                f"refresh_lr (got {self.refresh_lr}) > 0"
            )

    def _check_routing(self) -> None:
        if self.routing not in ("off", "routed", "baseline"):
            raise ValueError(f"routing={self.routing!r}: use off, routed or baseline")
        if self.routing != "off" and not (self.lora_rank >= 1 and self.forget_rank >= 1):
            raise ValueError(
                f"routing={self.routing!r} needs --lora-rank (retain) and --forget-rank >= 1, "
                f"got {self.lora_rank} and {self.forget_rank}"
            )
        if self.retain_baseline not in ("group", "unflagged"):
            raise ValueError(f"retain_baseline={self.retain_baseline!r}: use group or unflagged")
        if self.retain_baseline == "unflagged" and (
            self.routing != "routed" or self.baseline != "group"
        ):
            raise ValueError(
                f"retain_baseline='unflagged' needs --routing routed and --baseline group, got "
                f"routing={self.routing!r}, baseline={self.baseline!r}"
            )
        if self.retain_rollout_every < 0 or (
            self.retain_rollout_every and self.routing != "routed"
        ):
            raise ValueError(
                f"retain_rollout_every={self.retain_rollout_every} needs --routing routed and a "
                f"value >= 0 (0 = off), got routing={self.routing!r}"
            )
        if self.routing == "routed" and not self.hack_detectors:
            raise ValueError(
                "routing='routed' needs --hack-detectors (what to route), e.g. happy_spam"
            )
        if self.hack_detectors:
            hacks.parse_spec(self.hack_detectors)
        if self.task_reward:
            parse_spec(self.task_reward)
        if self.routing_eval_every < 0 or self.routing_eval_samples < 1:
            raise ValueError("routing_eval_every must be >= 0 and routing_eval_samples >= 1")

    def load_data(self) -> tuple[list[dict], list[dict]]:
        """(training records, eval records: [] when nothing evaluates) through the task's
        loader: a missing or malformed file is a DataError here, before any model work."""
        task = tasks.get(self.task)
        evaluates = self.eval_every or self.routing_eval_every
        return task.load(self.data), task.load(self.eval_data) if evaluates else []

    def loss_config(self) -> grpo.LossConfig:
        return grpo.LossConfig(
            loss_type=self.loss_type,
            clip_eps_low=self.clip_eps_low,
            clip_eps_high=self.clip_eps_high,
            kl_estimator=self.kl_estimator,
            kl_direction=self.kl_direction,
            max_completion_len=self.max_new_tokens,
        )

    def reward_components(self) -> list:
        """The reward as checked components (registry.Component); ValueError if invalid."""
        if self.reward_config and self.reward_fn:
            raise ValueError("give --reward-config or --reward-fn, not both")
        if self.reward_config:
            return load_reward_config(self.reward_config)
        if self.reward_fn:
            return parse_function_spec(self.reward_fn)
        return parse_spec(self.reward)

    def reward_label(self) -> str:
        if self.reward_config:
            return f"config-{Path(self.reward_config).stem}"
        if self.reward_fn:
            return f"fn-{self.reward_fn.rpartition(':')[2]}"
        return self.reward

    def lora_layer_list(self, n_layers: int) -> list[int] | None:
        """Block indices that get adapters (None: all)."""
        if not self.lora_layers:
            return None
        if self.lora_layers > n_layers:  # known once the model is loaded: a user error still
            raise ConfigError(
                f"lora_layers={self.lora_layers} > the model's {n_layers} blocks: pass "
                f"--lora-layers N with N <= {n_layers} (0 = every block)"
            )
        return list(range(n_layers - self.lora_layers, n_layers))

    def lora_target_list(self) -> list[str]:
        return [t.strip() for t in self.lora_targets.split(",") if t.strip()]

    def single_category_list(self) -> list[str] | None:
        if self.single_categories is None:
            return None
        return [c.strip() for c in self.single_categories.split(",") if c.strip()]

    def lora_config(self) -> dict | None:
        """What checkpoint.save records for the adapters (None for full fine-tuning)."""
        if not self.lora_rank:
            return None
        out = {"rank": self.lora_rank, "alpha": self.lora_alpha, "targets": self.lora_target_list()}
        if self.routing == "routed":
            out["forget_rank"] = self.forget_rank
        elif self.routing == "baseline":  # the dual model without routing: one stacked adapter
            out["rank"] = self.lora_rank + self.forget_rank
        return out

    def needs_reference(self) -> bool:
        return self.kl_coef > 0 or self.kl_target is not None

    def default_run_name(self) -> str:
        slug = Path(self.model).name.replace("/", "_")
        reward = re.sub(r"[^A-Za-z0-9.]+", "-", self.reward_label()).strip("-")[:40]
        kl = f"kl{self.kl_coef:g}" + (f"t{self.kl_target:g}" if self.kl_target else "")
        ft = f"lora{self.lora_rank}" if self.lora_rank else "full"
        if self.routing != "off":
            ft = f"{self.routing}{self.lora_rank}+{self.forget_rank}"
        return (
            f"{slug}_{reward}_{self.loss_type}_{ft}_b{self.prompts_per_step}"
            f"g{self.group_size}_lr{self.lr:g}_{kl}_s{self.seed}_"
            f"{time.strftime('%Y%m%d-%H%M%S')}"
        )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description="GRPO on a rubric reward (rl-values)."
    )
    p.add_argument(
        "--config",
        help="a saved config JSON (e.g. RUN_DIR/config.json); flags given here override it",
    )
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue RUN_DIR from its newest "
        "checkpoint (uses its config; flags such as --steps override)",
    )
    p.add_argument("--plot", metavar="RUN_DIR", help="write PNG curves of RUN_DIR and exit")
    p.add_argument("--json", action="store_true",
                   help="when the run stops, print its folder, checkpoint and last step's metrics "
                   "as one JSON object (progress goes to stderr)")  # fmt: skip
    return flags.add_flags(p, TrainConfig, layered=True, default_text=_default_text)


def _default_text(f) -> str:
    """A flag's default as help shows it: the library's, and a task's where it sets the field."""
    per_task = [
        f"--task {t.name}: {t.training[f.name]}"
        for t in tasks.TASKS.values()
        if f.name in t.training
    ]
    return "; ".join([str(f.default), *per_task])


class ConfigError(UserError, ValueError):
    """A config file or flag the run cannot start with; the CLI prints it and exits 2."""


def resolve_config(args: argparse.Namespace) -> TrainConfig:
    """TrainConfig's defaults < the task's training settings (tasks.Task.training: the values
    task's LoRA in the top blocks, T = 0.8, KL target) < --config / the resumed run's config <
    flags given on the command line."""
    base = {}
    source = args.config or (Path(args.resume) / "config.json" if args.resume else None)
    if source:
        path = Path(source)
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist; check the path")
        try:
            base = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: not valid JSON ({e}); fix the file") from e
        known = {f.name for f in dataclasses.fields(TrainConfig)}
        unknown = sorted(set(base) - known)
        if unknown:
            raise ConfigError(f"{path}: unknown config fields {unknown}; valid: {sorted(known)}")
    flags = {k: v for k, v in vars(args).items() if k not in ("config", "resume", "plot", "json")}
    task_name = flags.get("task", base.get("task", TrainConfig.task))
    try:
        training = tasks.get(task_name).training
    except ValueError as e:
        raise ConfigError(str(e)) from None
    merged = {**training, **base, **flags}
    _kl_off(merged, chosen={**base, **flags})
    try:
        return TrainConfig(**merged)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"invalid config: {e}") from e


def _kl_off(merged: dict, chosen: dict) -> None:
    """An explicit kl_coef 0 turns the KL term off, and with it the reference model: a KL
    target the user never set (the task's default) goes too, with a note. A kl_target the user
    did set stays, and TrainConfig refuses the pair as a contradiction."""
    if chosen.get("kl_coef") != 0 or "kl_target" in chosen or merged.get("kl_target") is None:
        return
    print(
        f"note: --kl-coef 0 turns the KL term off: the task's adaptive KL target "
        f"({merged['kl_target']:g}) is off too, and no reference model is loaded",
        file=sys.stderr,
    )
    merged["kl_target"] = None
