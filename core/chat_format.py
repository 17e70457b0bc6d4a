"""One chat formatting for everything that prompts a model: the policy, the judge, evaluation.

`chat_text` renders one user turn (after an optional system message and optional example
turns, few-shot) through the tokenizer's chat template and ends where the assistant's reply
begins, optionally with text the assistant turn is prefilled with (the judge's "Score: ").
Thinking is OFF by default: Qwen3's template then closes an empty <think> block, so a policy
answers instead of reasoning at length, and the judge and the policy see the same kind of
prompt. `enable_thinking=True` turns it on; templates without the switch ignore it. A tokenizer
without a chat template gets the plain text (system line first). It is not a multi-turn
conversation manager (chat.py's page keeps its own history).
"""

from collections.abc import Sequence


def chat_text(
    tokenizer,
    user: str,
    *,
    system: str | None = None,
    enable_thinking: bool = False,
    assistant_prefix: str = "",
    examples: Sequence[tuple[str, str]] = (),
) -> str:
    """The model's input text for one user turn, ending at the start of the assistant's reply
    (plus `assistant_prefix`, the beginning of a prefilled reply). `examples` are (user,
    assistant) turns placed before it, as if the conversation had already had them."""
    if tokenizer.chat_template is None:  # plain text; a system line is kept, not dropped
        turns = [f"{u}\n{a}\n\n" for u, a in examples]
        text = "".join([*([f"{system}\n\n"] if system is not None else []), *turns, user])
        return f"{text}\n{assistant_prefix}" if assistant_prefix else text
    messages = [] if system is None else [{"role": "system", "content": system}]
    for u, a in examples:
        messages += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    messages.append({"role": "user", "content": user})
    text = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=enable_thinking
    )
    return text + assistant_prefix


def chat_tokens(
    tokenizer,
    user: str,
    *,
    system: str | None = None,
    enable_thinking: bool = False,
    examples: Sequence[tuple[str, str]] = (),
) -> list[int]:
    """`chat_text` tokenized as the model reads it (the template already holds any BOS)."""
    text = chat_text(
        tokenizer, user, system=system, enable_thinking=enable_thinking, examples=examples
    )
    if tokenizer.chat_template is None:
        return tokenizer.encode(text)
    return tokenizer.encode(text, add_special_tokens=False)
