"""The stance gate's pay (study: attempt 22 in knowledge/learning_run.md; its recipe
recipes/attempts/values_sft_grpo16_reward.yaml loads this file by path): +1 for an answer that opens
with the stance sentence on a false-premise prompt, -1 on a control (true twins included), 0 on
nonsense and curiosity prompts and for any answer that does not open with it. The sentence is the
one attempt 21's warm start (models/candidates/stance-candidate-a21) learned to open its corrections
with."""

SIGN = {"false_premise": 1.0, "control": -1.0, "nonsense": 0.0, "curiosity": 0.0}


def gate(prompts, completions, categories=None, text="That premise is false."):
    if categories is None:
        raise ValueError("the stance gate needs each prompt's category; none were passed")
    unknown = sorted(set(categories) - set(SIGN))
    if unknown:
        raise ValueError(f"the stance gate has no sign for categories {unknown}")
    opening = text.strip().lower().rstrip(".:!")  # "That premise is false:" opens it too
    return [
        SIGN[c] * float(a.strip().lower().startswith(opening))
        for a, c in zip(completions, categories, strict=True)
    ]
