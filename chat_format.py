"""One chat formatting for everything that prompts a model: the policy, the judge, evaluation.

`chat_text` renders one user turn (with an optional system message) through the tokenizer's
chat template and ends where the assistant's reply begins, optionally with text the assistant
turn is prefilled with (the judge's "Score: "). Thinking is OFF by default: Qwen3's template
then closes an empty <think> block, so a policy answers instead of reasoning at length, and the
judge and the policy see the same kind of prompt. `enable_thinking=True` turns it on; templates
without the switch ignore it. A tokenizer without a chat template gets the plain text (system
line first). It is not
a multi-turn conversation manager (chat.py's page keeps its own history).
"""


def chat_text(
    tokenizer,
    user: str,
    *,
    system: str | None = None,
    enable_thinking: bool = False,
    assistant_prefix: str = "",
) -> str:
    """The model's input text for one user turn, ending at the start of the assistant's reply
    (plus `assistant_prefix`, the beginning of a prefilled reply)."""
    if tokenizer.chat_template is None:  # plain text; a system line is kept, not dropped
        text = user if system is None else f"{system}\n\n{user}"
        return f"{text}\n{assistant_prefix}" if assistant_prefix else text
    messages = [{"role": "user", "content": user}]
    if system is not None:
        messages.insert(0, {"role": "system", "content": system})
    text = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=enable_thinking
    )
    return text + assistant_prefix


def chat_tokens(
    tokenizer, user: str, *, system: str | None = None, enable_thinking: bool = False
) -> list[int]:
    """`chat_text` tokenized as the model reads it (the template already holds any BOS)."""
    text = chat_text(tokenizer, user, system=system, enable_thinking=enable_thinking)
    if tokenizer.chat_template is None:
        return tokenizer.encode(text)
    return tokenizer.encode(text, add_special_tokens=False)
