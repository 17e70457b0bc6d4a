"""One chat formatting for policy, judge and evaluation: Qwen3's thinking switch is off by default
and can be turned on; a tokenizer without a template gets the plain text."""

from core import backend  # noqa: F401
from core.chat_format import chat_text, chat_tokens

import pytest
from helpers import QWEN3, tiny_model, tiny_tokenizer

from gwen import Gwen
from rubric import Rubric

# Qwen3's generation-prompt behaviour (ChatML turns; with enable_thinking false, the template
# closes an empty think block so the model answers directly), written for this test.
QWEN3_STYLE = (
    "{%- for m in messages %}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}"
)
EMPTY_THINK = "<|im_start|>assistant\n<think>\n\n</think>\n\n"


@pytest.fixture
def qwen_tok():
    tok = tiny_tokenizer(QWEN3["vocab_size"])
    tok.chat_template = QWEN3_STYLE
    return tok


def test_thinking_is_off_by_default_and_can_be_turned_on(qwen_tok):
    off = chat_text(qwen_tok, "t5 t6")
    assert off == "<|im_start|>user\nt5 t6<|im_end|>\n" + EMPTY_THINK
    on = chat_text(qwen_tok, "t5 t6", enable_thinking=True)
    assert on == "<|im_start|>user\nt5 t6<|im_end|>\n<|im_start|>assistant\n"
    with_system = chat_text(qwen_tok, "t5", system="t9", assistant_prefix="Score: ")
    assert with_system.startswith("<|im_start|>system\nt9<|im_end|>\n<|im_start|>user\nt5")
    assert with_system.endswith(EMPTY_THINK + "Score: ")


def test_policy_judge_and_evaluation_share_the_formatting(qwen_tok):
    model = tiny_model(QWEN3)
    policy = Gwen(model, qwen_tok)
    want = qwen_tok.encode(chat_text(qwen_tok, "t5 t6"), add_special_tokens=False)
    assert policy.chat_tokens("t5 t6") == want == chat_tokens(qwen_tok, "t5 t6")
    thinking = Gwen(model, qwen_tok, enable_thinking=True)
    assert thinking.chat_tokens("t5 t6") != want
    # evaluation samples through the same Gwen.chat_tokens: the prompt tokens it decodes from
    s = policy.sample_group(["t5 t6"], 1, 2, temperature=0.0)
    assert s.prompt_tokens[0].tolist() == want
    # the judge: thinking off whatever the judge Gwen says, then the prefilled "Score: "
    labels = ("t81", "t82", "t83", "t84", "t85")
    judge_text = Rubric(thinking, labels=labels, answer_prefix="")._chat("t7")
    assert judge_text.endswith(EMPTY_THINK)


def test_no_template_gives_the_plain_text():
    tok = tiny_tokenizer(QWEN3["vocab_size"])
    assert tok.chat_template is None
    assert chat_text(tok, "t5 t6") == "t5 t6"
    assert chat_text(tok, "t5", assistant_prefix="t9") == "t5\nt9"
    assert chat_text(tok, "t5", system="t8") == "t8\n\nt5"
    assert chat_tokens(tok, "t5 t6") == tok.encode("t5 t6")


def test_example_turns_come_before_the_user_turn(qwen_tok):
    shots = (("t5", "t6"), ("t7", "t8"))
    got = chat_text(qwen_tok, "t9", system="t4", examples=shots)
    assert got == (
        "<|im_start|>system\nt4<|im_end|>\n"
        "<|im_start|>user\nt5<|im_end|>\n<|im_start|>assistant\nt6<|im_end|>\n"
        "<|im_start|>user\nt7<|im_end|>\n<|im_start|>assistant\nt8<|im_end|>\n"
        "<|im_start|>user\nt9<|im_end|>\n" + EMPTY_THINK
    )
    policy = Gwen(tiny_model(QWEN3), qwen_tok, system_prompt="t4", examples=lambda p: shots)
    assert policy.chat_tokens("t9") == qwen_tok.encode(got, add_special_tokens=False)
    plain = tiny_tokenizer(QWEN3["vocab_size"])
    assert chat_text(plain, "t9", examples=shots) == "t5\nt6\n\nt7\nt8\n\nt9"


def test_thinking_is_off_in_every_prompt_a_qwen3_model_reads(qwen3_dir):
    """On the Qwen3 fixture (its own tokenizer and template): the policy's prompt, the judge's,
    an SFT record's and a reward model's input each end the prompt with Qwen3's closed, empty
    think block (what its template emits with enable_thinking=False), so nothing asks the model
    to reason; an open <think> generation prompt appears only when thinking is asked for."""
    from core.chat_format import chat_text

    import sft
    from rewards import reward_model

    policy = Gwen.load(str(qwen3_dir))
    tok = policy.tokenizer
    assert chat_text(tok, "Why?") == "<|im_start|>user\nWhy?<|im_end|>\n" + EMPTY_THINK
    assert chat_text(tok, "Why?", enable_thinking=True).endswith("<|im_start|>assistant\n")

    def closed(ids) -> str:
        text = tok.decode(ids)
        assert text.count("<think>") == text.count("</think>") == 1, text
        assert text.index("<think>") < text.index("</think>"), text
        return text

    prompt = "Why is the sky green?"
    assert closed(policy.chat_tokens(prompt)).endswith(EMPTY_THINK)
    sample = policy.sample_group([prompt], 1, 2, temperature=0.0)
    assert closed(sample.prompt_tokens[0].tolist()).endswith(EMPTY_THINK)
    head, rest = Rubric(policy).render("scrutiny", prompt, "false_premise", "It is blue.")
    assert closed(head + rest).endswith(EMPTY_THINK + "Score: ")
    record = {"id": "r", "prompt": prompt, "answer": "It is blue, not green."}
    [(tokens, n_prompt)] = sft.encode_all(tok, [record], 80)
    assert closed(tokens[:n_prompt]).endswith(EMPTY_THINK)
    assert tok.decode(tokens[n_prompt:]) == "It is blue, not green.<|im_end|>"
    cfg = reward_model.RMConfig(base_model=str(qwen3_dir), lora_rank=2)
    rm = reward_model.build(cfg)
    head, body = rm.encode_parts(prompt, "It is blue.", "false_premise")
    assert closed(head).endswith(EMPTY_THINK)
    assert tok.decode(body) == "It is blue.<|im_end|>"
