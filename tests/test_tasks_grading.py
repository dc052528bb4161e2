"""Answer extraction, equivalence, verdicts and plurality (the released code's parsing failures included)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from councilzoo.tasks import answers_equivalent, extract_answer, extract_verdict, format_answer, plurality

EXTRACTION = [
    # (text, kind, expected)
    ("The answer depends on the temperature.", "multiple_choice", None),  # release bug: -> "D"
    ("The answer depends", "math", None),
    ("**(C)**", "multiple_choice", "C"),
    ("Answer: C", "multiple_choice", "C"),
    ("\\boxed{C}", "multiple_choice", "C"),
    ("\\boxed{\\text{B}}", "multiple_choice", "B"),
    ("(C)", "multiple_choice", "C"),
    ("C) 42 apples", "multiple_choice", "C"),
    ("The answer is (B).", "multiple_choice", "B"),
    ("The answer is A because the others fail.", "multiple_choice", "A"),
    ("**Final Answer:** D", "multiple_choice", "D"),
    ("Answer: **B**", "multiple_choice", "B"),
    ("A good approach is to compare options.", "multiple_choice", None),
    ("I think it could be (B) or maybe\n(D) after all", "multiple_choice", "D"),
    ("Comparing A and B, neither dominates", "multiple_choice", None),
    ("The answer is a function of x", "multiple_choice", None),
    ("The answer is $1,234.50.", "numeric", "1234.50"),
    ("So the total is \\boxed{\\$1,234.50}.", "numeric", "1234.50"),
    ("The answer is 18 dollars.", "numeric", "18"),
    ("Final answer: x = 5", "numeric", "5"),
    ("#### 7,200\nThe answer is 7,200", "numeric", "7200"),
    ("The answer is -3.", "numeric", "-3"),
    ("The answer is 12%", "numeric", "12"),
    ("The answer is \\frac{1}{2}", "numeric", "1/2"),
    ("Let's compute 3 + 4 = 7 and then multiply by", "numeric", None),  # truncated: no vote
    ("Step 1: 48 / 2 = 24. Step 2: 48 + 24 =", "math", None),
    ("Therefore $\\boxed{\\frac{\\frac{1}{2}}{3}}$.", "math", "\\frac{\\frac{1}{2}}{3}"),
    ("First \\boxed{3}, then corrected: \\boxed{4}", "math", "4"),
    ("\\boxed{5} and then \\boxed{12", "math", "5"),  # the truncated box is ignored
    ("\\fbox{7}", "math", "7"),
    ("The answer is $\\frac{1}{2}$.", "math", "\\frac{1}{2}"),
    (
        "The final answer is $\\left( 3, \\frac{\\pi}{2} \\right)$",
        "math",
        "\\left( 3, \\frac{\\pi}{2} \\right)",
    ),
    ("Final Answer: 5 apples", "math", "5"),
    ("The answer is not clear yet", "math", None),
    ("\\boxed{\\{1, 2\\}}", "math", "\\{1, 2\\}"),
    ("", "math", None),
    (None, "numeric", None),
    ("   \n  ", "multiple_choice", None),
    # GSM8K's final-answer mark "#### X"
    ("Natalia sold 48 / 2 = 24 clips in May.\nSo 48 + 24 = 72 in total.\n#### 72", "numeric", "72"),
    ("She pays 3 per box for 6 boxes.\n#### $18", "numeric", "18"),
    ("#### 1,250.50", "numeric", "1250.50"),
    ("####72", "numeric", "72"),
    ("#### \\frac{1}{2}", "math", "\\frac{1}{2}"),
    ("#### 72\nOn reflection the answer is 73", "numeric", "73"),  # the last phrase wins
    ("#### C", "multiple_choice", "C"),
    ("#### Step 2: add 3 and 4\nthen multiply by 2", "numeric", None),  # a markdown heading, not the mark
    ("##### 5 apples", "numeric", None),
    ("#### Conclusion\nBoth options fail", "multiple_choice", None),
    # multiple choice stated after an explanation
    ("B is tempting, but it ignores friction, so the correct choice is (A).", "multiple_choice", "A"),
    ("Weighing each option in turn.\nAnswer: (B)", "multiple_choice", "B"),
    ("A and B contradict the data, so the answer must be C", "multiple_choice", "C"),
    ("The best option would be D because it is cheapest.", "multiple_choice", "D"),
    ("Hence the correct option is **(E)**.", "multiple_choice", "E"),
    ("The answer must be A or B; I cannot tell.", "multiple_choice", None),
    ("The best choice is unclear; A and B both fit.", "multiple_choice", None),
    ("The correct choice is Dijkstra's algorithm.", "multiple_choice", None),  # D must stand alone
    ("Option A is tempting, but the answer should be obvious.", "multiple_choice", None),
    ("The answer must be 3 more than x", "numeric", None),  # "must be" is for letters only
    # a stated result "= N" closing its sentence (rule 4), as small models answer "the number"
    ("So, Ben has 3 + 4 = 7 books now.", "numeric", "7"),
    ("Dana has 6 pencils and 2 more, so Dana has 6 + 2 = 8 pencils now", "numeric", "8"),
    ("Goro has 9 + 3 = 12 apples.\nNow, Goro has 12 apples.\n\nThen 12 * 2 = 24 apples.", "numeric", "12"),
    ("8 + 3 = 12. No: 8 + 3 = 11.", "numeric", "11"),  # restated after a wrong one
    ("Ivan has 6 + 8 = 14 apples x 10", "numeric", None),  # "= 14" is followed by more work
    ("The total is 2 + 5 = 7 and then we divide", "numeric", None),
    ("Ben has 8 - 3 = 5 shells.", "math", None),  # math answers are boxed or stated as such
]

EQUIVALENCE = [
    # (pred, gold, kind, expected)
    ("1/2", "0.5", "numeric", True),
    ("1/2", "0.5", "math", True),
    ("\\frac{1}{2}", "0.5", "math", True),
    ("\\dfrac{1}{2}", "\\frac12", "math", True),
    ("\\frac{\\frac{1}{2}}{3}", "\\frac{1}{6}", "math", True),
    ("\\sqrt{8}", "2\\sqrt{2}", "math", True),
    ("(1,2)", "(1, 2)", "math", True),
    ("[0, 1)", "[0,1)", "math", True),
    ("\\{1, 2\\}", "\\{2, 1\\}", "math", True),
    ("3", "4", "math", False),
    ("\\frac{1}{3}", "0.33", "math", False),
    ("1234.50", "1234.5", "numeric", True),
    ("1,234", "1234", "numeric", True),
    ("$18", "18", "numeric", True),
    ("18 dollars", "18.0", "numeric", True),
    ("72", "73", "numeric", False),
    ("1000000", "1000001", "numeric", False),
    ("C", "C", "multiple_choice", True),
    ("(C)", "C", "multiple_choice", True),
    ("C", "D", "multiple_choice", False),
    (None, "C", "multiple_choice", False),
    ("5", None, "math", False),
    ("}{{garbage\\frac{", "\\frac{", "math", False),
    ("", "", "numeric", False),
]

VERDICTS = [
    ("**RIGHT**", "RIGHT"),
    ("Verdict: wrong", "WRONG"),
    ("\\boxed{RIGHT}", "RIGHT"),
    ("\\boxed{\\text{WRONG}}", "WRONG"),
    ("The solution is correct.", "RIGHT"),
    ("It is incorrect", "WRONG"),
    ("The proposed answer is not correct.", "WRONG"),
    ("Checking... WRONG at first, but on review: RIGHT", "RIGHT"),
    ("**Verdict:** **Wrong**", "WRONG"),
    ("correct", "RIGHT"),
    ("This is a right triangle, so the hypotenuse is 5.", None),
    ("We use the correct formula here.", None),
    ("", None),
    (None, None),
]


@pytest.mark.parametrize("text,kind,expected", EXTRACTION)
def test_extract_answer(text, kind, expected):
    assert extract_answer(text, kind) == expected


@pytest.mark.parametrize("pred,gold,kind,expected", EQUIVALENCE)
def test_answers_equivalent(pred, gold, kind, expected):
    assert answers_equivalent(pred, gold, kind) is expected


@pytest.mark.parametrize("text,expected", VERDICTS)
def test_extract_verdict(text, expected):
    assert extract_verdict(text) == expected


def test_table_is_large_enough():
    assert len(EXTRACTION) + len(EQUIVALENCE) + len(VERDICTS) >= 60


def test_last_number_fallback_is_explicit():
    text = "Let's compute 3 + 4 = 7 and then multiply by"
    assert extract_answer(text, "numeric") is None
    assert extract_answer(text, "numeric", fallback_last_number=True) == "7"


def test_parse_cache_is_keyed_by_text_kind_and_fallback():
    text = "Options weighed: \\boxed{B}, and 3 + 4 = 7 and so on"
    for _ in range(2):  # the second pass is served from the cache
        assert extract_answer(text, "multiple_choice") == "B"
        assert extract_answer(text, "numeric") is None
        assert extract_answer(text, "numeric", fallback_last_number=True) == "7"
        assert extract_verdict(text + " RIGHT") == "RIGHT" and extract_verdict(text + " WRONG") == "WRONG"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Multiply 2 times the number of shells, so the answer is 4 + 6", None),  # the cut sentence
        ("Goro has 9 apples, so he has 9 + 3 = 12 app", None),
        ("Ada has 2 + 5 = 7 cards now.\n\nIn a deck of cards, there are", "7"),  # finished before the cut
        ("Ada has 2 + 5 = 7 cards now.\n\nIn a deck of 52, there are 5", None),  # another number at the cut
        ("So, 4 + 2 = 6 books.\n\nNow, we need to find out how many", None),  # more work announced
        ("The answer is \\boxed{8} and then we", "8"),  # a complete box is committed
        ("The answer is 8.", "8"),  # cut right after its full stop
    ],
)
def test_a_reply_cut_at_the_token_limit_states_nothing_from_its_unfinished_sentence(text, expected):
    assert extract_answer(text, "numeric", truncated=True) == expected


def test_truncation_changes_only_the_unfinished_sentence():
    text = "Multiply 2 times the number of shells, so the answer is 4 + 6"
    assert extract_answer(text, "numeric") == "4"  # read whole, the phrase states 4 ...
    assert extract_answer(text, "numeric", truncated=True) is None  # ... but the sentence never ended


def test_bad_kind_raises():
    with pytest.raises(ValueError, match="kind"):
        extract_answer("\\boxed{1}", "essay")


def test_plurality_groups_equivalents_and_counts_none():
    assert plurality(["1/2", "0.5", None, "3", "3"], "math") == ("1/2", 0.4)
    assert plurality(["3", "4"], "numeric") == ("3", 0.5)  # tie keeps the first seen
    assert plurality([None, None], "math") == (None, 0.0)
    assert plurality([], "numeric") == (None, 0.0)


def test_plurality_never_groups_unreadable_copies():
    # A blank answer, or no option letter, is equivalent to nothing, itself included, so each
    # copy is its own group of one; grouped, the two copies would tie the top and win.
    assert plurality([" ", " ", "7", "7.0"], "numeric") == ("7", 0.5)
    assert plurality(["??", "??", "B", "(B)"], "multiple_choice") == ("B", 0.5)


def plain_scan_plurality(answers, kind):
    """The definition: each answer joins the first group whose representative it equals."""
    groups = []
    for answer in answers:
        if answer is None:
            continue
        for group in groups:
            if answers_equivalent(answer, group[0], kind):
                group[1] += 1
                break
        else:
            groups.append([answer, 1])
    if not groups:
        return None, 0.0
    top = max(groups, key=lambda g: g[1])
    return top[0], top[1] / len(answers)


# Equivalent spellings, blanks and non-letters (equivalent to nothing, not even themselves).
VOTE_POOL = ["1/2", "0.5", ".5", "3", "3.0", "n/a", "", " ", "x+1", "1+x", "B", "(B)", "??", None]


@given(
    answers=st.lists(st.sampled_from(VOTE_POOL), max_size=14),
    kind=st.sampled_from(["numeric", "math", "multiple_choice"]),
)
def test_plurality_equals_the_plain_scan(answers, kind):
    assert plurality(answers, kind) == plain_scan_plurality(answers, kind)


integers = st.integers(min_value=-(10**6), max_value=10**6).map(str)
decimals = st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False).map(str)
fractions = st.builds(Fraction, st.integers(-50, 50), st.integers(1, 50)).map(
    lambda q: f"{q.numerator}/{q.denominator}"
)
numbers = st.one_of(integers, decimals, fractions)


@given(a=numbers, b=numbers, kind=st.sampled_from(["numeric", "math"]))
def test_equivalence_reflexive_and_symmetric(a, b, kind):
    assert answers_equivalent(a, a, kind)
    assert answers_equivalent(a, b, kind) == answers_equivalent(b, a, kind)


@given(x=numbers)
def test_boxed_round_trip(x):
    assert extract_answer(f"So we get \\boxed{{{x}}}.", "math") == x
    assert answers_equivalent(extract_answer(format_answer(x, "numeric"), "numeric"), x, "numeric")


@given(letter=st.sampled_from("ABCDEFGHIJ"))
def test_letter_round_trip(letter):
    assert extract_answer(format_answer(letter, "multiple_choice"), "multiple_choice") == letter


@given(
    votes=st.lists(st.integers(0, 4), min_size=1, max_size=12),
    nones=st.integers(0, 3),
    data=st.data(),
)
def test_plurality_invariant_to_order_with_unique_top(votes, nones, data):
    answers = [str(v) for v in votes] + [None] * nones
    counts = sorted((votes.count(v) for v in set(votes)), reverse=True)
    if len(counts) > 1 and counts[0] == counts[1]:
        return  # tie: order decides by design
    shuffled = data.draw(st.permutations(answers))
    assert plurality(answers, "numeric") == plurality(shuffled, "numeric")


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("fixture", "at_least_rows", "min_precision", "min_recall"),
    [("smollm2_outputs.jsonl", 100, 0.9, 0.8), ("gemma_outputs.jsonl", 20, 0.95, 0.95)],
)
def test_extraction_reads_real_replies_as_hand_labelled(fixture, at_least_rows, min_precision, min_recall):
    """Real replies to synthetic:word_problems (scripts/smollm2_outputs.py --model ...), each labelled
    by hand with the answer it commits to (None: none, or reasoning cut unfinished): 120 of
    SmolLM2-135M-Instruct (before rule 4 and the truncation rule its recall was 0.16: the model
    rarely writes \\boxed{} or "the answer is") and 20 greedy few-shot replies of Gemma-3-270M.
    Precision: extracted answers equal to the label; recall: labelled answers extracted;
    docs/tasks.md gives the figures."""
    rows = [json.loads(line) for line in (FIXTURES / fixture).read_text().splitlines()]
    got = [extract_answer(r["text"], "numeric", truncated=r["finish_reason"] == "length") for r in rows]
    hits = sum(g is not None and g == r["label"] for g, r in zip(got, rows, strict=True))
    precision = hits / sum(g is not None for g in got)
    recall = hits / sum(r["label"] is not None for r in rows)
    assert len(rows) >= at_least_rows, len(rows)
    assert precision >= min_precision and recall >= min_recall, (precision, recall)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        # a council's real replies (issue 50): the final stated result wins
        ("Ada has 2 cards and gets 2 more, so she has 2 + 2 = 4 cards.\n\n"
         "In total, Ada has 2 + 4 = 6 cards.", "6"),
        ("10\n\nThere are 10 apples left in the basket, because 14 - 4 = 10.", "10"),
        ("10\n\nThere are 10 apples left after Tom eats 4 of them.", "10"),
        ("12 apples.\n\nGoro had 9 and got 3 more.", "12"),
        # still reasoning: a later paragraph that is not a conclusion does not override the first
        ("Ada has 2 + 5 = 7 cards now.\n\nIf she gets 5 more, 7 + 5 = 12 cards.", "7"),
        ("10 + 4 is the sum.", None),
    ],
)
def test_the_final_stated_result_wins(text, label):
    assert extract_answer(text, "numeric") == label
