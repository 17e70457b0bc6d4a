"""The rewards' pushback detector: does an answer dispute its prompt? Lexical on purpose and in
one place: the marker list (`pushes_back`), a marker or an opening that refuses the premise
(`disputes`, the stance reward's lexical detector), and a first sentence that negates what the
prompt does not (`opening_negation`). The stance reward (rewards/registry.py `stance_flagger`,
which can also read a classifier folder instead), the `blanket_pushback` hack detector, the
reward refresh's denial labels and the in-training control tripwire all read it.

It is not the evaluation grader (evals/grade.py) and must not become it: a run's pushback
figure is measured by an instrument its reward never used (knowledge/layout.md)."""

import re

from core.prompts import fold

# The lexical pushback markers: evaluate's in-training control tripwire and hacks'
# blanket_pushback flag read them; the stance reward adds the openers below.
PUSHBACK_MARKERS = (
    "actually",
    "not true",
    "isn't true",
    "is not true",
    "false premise",
    "misconception",
    "myth",
    "incorrect",
    "not correct",
    "doesn't make sense",
    "does not make sense",
    "no such",
    "there is no",
    "mistaken",
    "not accurate",
)
# An answer that opens by refusing the question's premise: "No, ...", "That's not ...", "There's
# no ...", "X didn't ...". The warm start's needless pushback on true premises opens this way
# (knowledge/sft.md: 5 of 15 control answers read were "No, ...").
_DISPUTE_OPENER = re.compile(
    r"^\W*(no\b|nope\b|not really\b|that'?s not\b|that is not\b|this is not\b|"
    r"it'?s not\b|it is not\b|there'?s no\b|there is no\b|there are no\b|there was no\b|"
    r"this question (doesn'?t|does not|makes no)|the (question|premise) (is|isn'?t|doesn'?t))",
    re.IGNORECASE,
)


def pushes_back(text: str) -> bool:
    """Crude lexical tripwire for an answer that disputes the prompt (a marker anywhere); the
    measured grader (evals/grade.py) is the headline figure."""
    t = text.lower()
    return any(marker in t for marker in PUSHBACK_MARKERS)


def disputes(text: str) -> bool:
    """The stance reward's detector: a pushback marker anywhere, or an opening that refuses the
    premise. Lexical on purpose: it is not the evaluation grader (evals/grade.py), so a run trained
    on it is still measured by an instrument it never saw."""
    return pushes_back(text) or bool(_DISPUTE_OPENER.match(text))


_NEGATION = re.compile(
    r"\b(?:no|not|never|none|nothing|nobody|nowhere|neither|nor|cannot)\b|\w+n't\b", re.I
)
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s|\n")


def opening_negation(answer: str, prompt: str) -> bool:
    """True when the answer's first sentence holds a negation ("not", "never", "didn't", "There's
    no ...") that the prompt does not (so "Why can't elephants jump?" answered "Elephants can't
    jump because ..." is not flagged). The policies' own denials of a true premise open this way
    ("It's not.", "The Berlin Wall didn't fall", "Van Gogh never painted ..."): on attempt 8's
    control rollouts it found 51 of 59 read disputes, with 15 of 101 false alarms
    (data/reads/ctl_disputes_grpo5). A blunt tripwire for the stance term, not a grader."""

    first = _SENTENCE_END.split(answer.strip(), maxsplit=1)[0]
    return bool(set(_NEGATION.findall(fold(first))) - set(_NEGATION.findall(fold(prompt))))
