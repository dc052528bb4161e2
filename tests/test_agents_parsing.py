"""Table-driven checks of parse_action on realistic model outputs (markdown, noise, truncation)."""

from __future__ import annotations

import pytest

from councilzoo.agents.parsing import parse_action, parse_mode
from councilzoo.envs.types import Mode

GATE = (Mode.ACCEPT, Mode.VERIFY, Mode.ESCALATE)

# (text, role, kind, expected answer)
ANSWERS = [
    ("Adding the numbers gives 12.\n\n\\boxed{12}", "peer", "numeric", "12"),
    ("**Final Answer:** $\\boxed{42}$", "peer", "numeric", "42"),
    ("### Final answer\nThe answer is **7**.", "proposer", "numeric", "7"),
    ("Step 1: 3 * 4 = 12\nStep 2: 12 + 5 = 17\n\nAnswer: 17", "anchor", "numeric", "17"),
    ("The total cost is $1,234.50.\nThe answer is $1,234.50.", "member", "numeric", "1234.50"),
    ("First I guessed \\boxed{3}, but rechecking: \\boxed{5}", "peer", "numeric", "5"),
    ("So x = 5.\nFinal answer: x = 5", "probe", "numeric", "5"),
    ("I agree with peer_1. The answer is 18 apples.", "peer", "numeric", "18"),
    ("<think>maybe 9? no</think>\nThe answer is \\boxed{10}.", "anchor", "numeric", "10"),
    ("The answer is \\boxed{\\frac{1}{2}}", "peer", "math", "\\frac{1}{2}"),
    ("Therefore $\\boxed{x^2+1}$ is the polynomial.", "proposer", "math", "x^2+1"),
    ("**Answer:** $\\sqrt{2}$", "anchor", "math", "\\sqrt{2}"),
    ("The interval is \\boxed{(0, 1]}.", "member", "math", "(0, 1]"),
    ("Final Answer: The final answer is $\\frac{3}{4}$. I hope it is correct.", "peer", "math",
     "\\frac{3}{4}"),
    ("The answer is (C).", "peer", "multiple_choice", "C"),
    ("After comparing options...\n\n**(B)** Mitochondria", "anchor", "multiple_choice", "B"),
    ("Answer: **D**", "probe", "multiple_choice", "D"),
    ("\\boxed{A}", "member", "multiple_choice", "A"),
    ("I think option C is wrong, so\nB", "peer", "multiple_choice", "B"),
    ("Both answers (A and C) seem plausible.\nFinal answer: \\boxed{\\text{C}}", "verifier",
     "multiple_choice", "C"),
    ("Comparing the anchor (12) and the probe (15), the anchor is right.\n\\boxed{12}", "verifier",
     "numeric", "12"),
    ("The answer depends on the interpretation.", "peer", "multiple_choice", None),
    ("Let me compute 3 + 4 = 7 and then multiply by", "peer", "numeric", None),  # truncated
    ("So we get \\boxed{4", "peer", "numeric", None),  # box cut off by truncation
    ("", "peer", "numeric", None),
    ("!!!###@@@ \x00 garbage tokens <|endoftext|>", "anchor", "math", None),
    ("I am not sure.", "member", "math", None),
]

# (text, expected verdict) for the reviewer role
VERDICTS = [
    ("**RIGHT**", "RIGHT"),
    ("**WRONG**", "WRONG"),
    ("Verdict: RIGHT", "RIGHT"),
    ("The arithmetic in step 2 is off.\n\nVerdict: **WRONG**", "WRONG"),
    ("**Verdict:** correct", "RIGHT"),
    ("\\boxed{WRONG}", "WRONG"),
    ("The proposal is not correct.", "WRONG"),
    ("I checked each step; the solution is correct.", "RIGHT"),
    ("At first it looks WRONG, but on reflection it is RIGHT.", "RIGHT"),
    ("The triangle is a right triangle, and the formula used is the correct formula.", None),
    ("Judgement: incorrect, the sum should be 18.", "WRONG"),
    ("wrong", "WRONG"),
    ("", None),
    ("I need more time to think about", None),
]

# (text, legal modes, expected mode)
MODES = [
    ("Decision: ESCALATE", GATE, Mode.ESCALATE),
    ("The anchor is confident. **accept**", GATE, Mode.ACCEPT),
    ("I will VERIFY this with a peer.", GATE, Mode.VERIFY),
    ("Action: `skip`", (Mode.SKIP, Mode.SPEAK), Mode.SKIP),
    ("mode = refresh", (Mode.KEEP, Mode.REFRESH), Mode.REFRESH),
    ("Should I ACCEPT? No. Decision: **ESCALATE**", GATE, Mode.ESCALATE),
    ("KEEP", (Mode.KEEP, Mode.REFRESH), Mode.KEEP),
    ("I would SKIP here.", GATE, None),  # names a mode that is not legal
    ("Let us accept that x is even.", GATE, None),  # a lower-case word in prose is not a decision
    ("no decision at all", GATE, None),
]


@pytest.mark.parametrize(("text", "role", "kind", "expected"), ANSWERS)
def test_answers(text, role, kind, expected):
    action = parse_action(text, role, kind, mode=Mode.SPEAK)
    assert action.answer == expected
    assert action.mode == Mode.SPEAK and action.text == text and action.verdict is None


@pytest.mark.parametrize(("text", "expected"), VERDICTS)
def test_verdicts(text, expected):
    action = parse_action(text, "reviewer", "numeric", mode=Mode.SPEAK)
    assert action.verdict == expected
    assert action.answer is None


@pytest.mark.parametrize(("text", "legal", "expected"), MODES)
def test_modes(text, legal, expected):
    assert parse_mode(text, legal) == expected


def test_mode_falls_back_to_first_speaking_legal_mode():
    action = parse_action("no idea", "proposer", "numeric", legal_modes=(Mode.KEEP, Mode.REFRESH))
    assert action.mode == Mode.REFRESH and action.answer is None


def test_mode_read_from_text_when_not_given():
    action = parse_action("Decision: VERIFY", "controller", "math", legal_modes=GATE)
    assert action.mode == Mode.VERIFY


@pytest.mark.parametrize("junk", [None, 17, b"bytes"])
def test_non_text_is_no_answer_not_a_crash(junk):
    action = parse_action(junk, "peer", "numeric", mode=Mode.SPEAK)
    assert action.answer is None and action.text == ""


def test_table_is_large_enough():
    assert len(ANSWERS) + len(VERDICTS) + len(MODES) >= 40
