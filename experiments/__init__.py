"""Experiments: each module served one study of knowledge/learning_run.md and names it in its
docstring. They run as `uv run python -m experiments.NAME` from the repository root. Nothing
outside this folder imports them (tests/test_layers.py holds the rule); a gate or a contrast
plugs into sft.py through its hook (sft.ExtraLoss), not a branch in the core.

    premise_probe   does a frozen model know which premise is false? (the probe studies)
    category_probe  can a frozen model's states tell a category from controls? (the probe studies)
    stance_pairs    SFT with the stance contrast (attempt 21)
    opener_gate     SFT with opener gates (attempts 23-29)
    gate_eval       where would a model's opener gates open? (attempts 23-29)
    stance_gate     the stance gate's reward, loaded by file from its recipe (attempt 22)
"""
