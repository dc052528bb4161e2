"""Seeded synthetic problems with known answers, paraphrases and distractors.

They let every env, agent and learner run offline with exact ground truth. Each item is drawn
from its own generator ``default_rng([seed, kind, index])``, so item i is the same whatever n.
Every Problem's metadata holds:

- ``difficulty``: float in [0, 1], the requested level plus per-item noise (sd 0.15, clipped);
  it sets the number of steps and the size of the numbers;
- ``paraphrases``: >= 2 alternative question texts (same id and answer, other wording), used by
  co-training (``paraphrase(problem, view)``);
- ``distractors``: >= 3 plausible wrong answers, most plausible first (a skipped step, a slip
  by one, a sign error...), never equivalent to the answer; for multiple choice the wrong letters.

Kinds: ``numeric`` multi-step arithmetic word problems; ``math`` modular arithmetic and fraction
sums (answers are integers or reduced ``\\frac{p}{q}``); ``multiple_choice`` the numeric problems
with four options; ``code`` small functions (sum of multiples, character counts, quadratics, list
spread, digit sums) with generated test inputs, whose metadata also holds the canonical
``solution``, the ``expected_outputs`` it gives, and wrong programs as ``distractors`` (each gives
other outputs on the test inputs); the answer is the solution's output signature.

Task ``word_problems`` (``numeric`` items, ``WORD_LEVELS``): one- and two-step word problems with
small numbers, graded so that a ~100M-parameter instruction model (SmolLM2-135M-Instruct) solves
about half of them (docs/tasks.md has the measured curve). Its splits are disjoint by problem key
(the template and its numbers, whatever the names): ``word_split`` assigns each key to one split,
and an item of a split is drawn until its key belongs there, so no held-out question is a
training question with another name in it.

Task ``visual`` (not a Problem kind: its items are ``numeric`` or ``multiple_choice``) draws a
small image per item (``councilzoo.tasks.visual``): count shapes of one colour, read the larger
of two numbers, pick the tallest bar; ``metadata["template"]`` names the template.
"""

from __future__ import annotations

import dataclasses
import hashlib
from fractions import Fraction

import numpy as np

from councilzoo.tasks.code import CODE_REPLY, canonical, signature_of_outputs
from councilzoo.tasks.grading import LETTERS
from councilzoo.tasks.problem import KINDS, Problem
from councilzoo.tasks.visual import visual_item

__all__ = ["NAMES", "TASKS", "synthetic_problems", "paraphrase"]

DIFFICULTY_NOISE = 0.15
NAMES = ("Ada", "Ben", "Chen", "Dana", "Eli", "Fatima", "Goro", "Hana", "Ivan", "Jade")
ITEMS = ("apples", "books", "coins", "marbles", "stamps", "pencils", "shells", "cards")
TASKS = (*KINDS, "visual", "word_problems")  # what ``synthetic:<task>`` may name


def _item_difficulty(rng: np.random.Generator, level: float) -> float:
    return float(np.clip(level + rng.normal(0.0, DIFFICULTY_NOISE), 0.0, 1.0))


def _dedupe_wrong(candidates: list, answer, n: int, rng: np.random.Generator) -> list:
    """The first ``n`` distinct candidates different from ``answer`` (padded by answer +- k)."""
    wrong: list = []
    for c in candidates:
        if c != answer and c not in wrong:
            wrong.append(c)
    k = 1
    while len(wrong) < n:
        for c in (answer + k, answer - k):
            if c != answer and c not in wrong and len(wrong) < n:
                wrong.append(c)
        k += int(rng.integers(1, 3))
    return wrong[:n]


# --- numeric: multi-step arithmetic word problems -------------------------------------------

_OPS = ("add", "sub", "mul")


def _numeric_item(rng: np.random.Generator, level: float) -> tuple[list[str], int, list[int], float]:
    """(question forms, answer, distractors, difficulty) of one word problem."""
    d = _item_difficulty(rng, level)
    steps = 1 + int(round(d * 3))
    scale = int(10 + d * 490)
    name, item = NAMES[rng.integers(len(NAMES))], ITEMS[rng.integers(len(ITEMS))]
    value = int(rng.integers(2, scale))
    start, history, ops = value, [value], []
    for _ in range(steps):
        op = _OPS[rng.integers(3 if value < 1000 else 2)]
        if op == "sub" and value < 2:
            op = "add"
        high = 5 if op == "mul" else (value if op == "sub" else scale)
        x = int(rng.integers(2 if op == "mul" else 1, max(2, high)))
        value = {"add": value + x, "sub": value - x, "mul": value * x}[op]
        ops.append((op, x))
        history.append(value)
    story = {"add": "then gets {x} more", "sub": "then gives away {x}", "mul": "then has {x} times as many"}
    steps_text = {"add": "add {x}", "sub": "subtract {x}", "mul": "multiply by {x}"}
    symbol = {"add": "+ {x}", "sub": "- {x}", "mul": "* {x}"}
    forms = [
        f"{name} has {start} {item}, "
        + ", ".join(story[o].format(x=x) for o, x in ops)
        + f". How many {item} does {name} have now?",
        f"Start with {start} {item}. "
        + " ".join(steps_text[o].format(x=x).capitalize() + "." for o, x in ops)
        + f" How many {item} are there at the end?",
        f"Compute the result of starting at {start} and applying, in order: "
        + ", ".join(symbol[o].format(x=x) for o, x in ops)
        + ".",
    ]
    last_op, last_x = ops[-1]
    flipped = {"add": history[-2] - last_x, "sub": history[-2] + last_x, "mul": history[-2] + last_x}[last_op]
    candidates = [c for c in (history[-2], flipped, value + 1, value - 1, value + 10) if c >= 0]
    return forms, value, _dedupe_wrong(candidates, value, 3, rng), d


# --- word_problems: graded one- and two-step word problems ---------------------------------

# (operations, range of the first number, range of the others), easiest first; ``difficulty``
# picks the level (``round(d * (len - 1))``, after the per-item noise)
WORD_LEVELS = (
    (("add",), (2, 9), (2, 9)),
    (("add",), (10, 49), (2, 9)),
    (("add",), (10, 49), (10, 49)),
    (("sub",), (10, 49), (2, 9)),
    (("add", "add"), (2, 9), (2, 9)),
)
WORD_SPLIT_SHARES = {"test": 0.25, "dev": 0.15, "train": 0.60}  # of the problem keys


def word_split(key: str) -> str:
    """The split that owns problem ``key`` (a stable hash of it, shared by every seed)."""
    u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
    for split, share in WORD_SPLIT_SHARES.items():
        if u < share:
            return split
        u -= share
    return "train"


def _word_item(rng: np.random.Generator, level: float, split: str) -> tuple[list[str], int, list[int], float]:
    """(question forms, answer, distractors, difficulty) of one word problem of ``split``."""
    while True:
        d = _item_difficulty(rng, level)
        ops, first, rest = WORD_LEVELS[int(round(d * (len(WORD_LEVELS) - 1)))]
        start = int(rng.integers(first[0], first[1] + 1))
        xs = [int(rng.integers(rest[0], rest[1] + 1)) for _ in ops]
        if word_split(f"{'/'.join(ops)}:{start}:{':'.join(map(str, xs))}") == split:
            break
    name, item = NAMES[rng.integers(len(NAMES))], ITEMS[rng.integers(len(ITEMS))]
    sign = {"add": 1, "sub": -1}
    value = start + sum(sign[o] * x for o, x in zip(ops, xs, strict=True))
    story = {"add": "gets {x} more", "sub": "gives away {x}"}
    steps = {"add": "add {x}", "sub": "take away {x}"}
    symbol = {"add": "+ {x}", "sub": "- {x}"}
    pairs = list(zip(ops, xs, strict=True))
    forms = [
        f"{name} has {start} {item} and "
        + ", then ".join(story[o].format(x=x) for o, x in pairs)
        + f". How many {item} does {name} have now?",
        f"There are {start} {item}. "
        + " ".join(steps[o].format(x=x).capitalize() + "." for o, x in pairs)
        + f" How many {item} are there?",
        f"What is {start} " + " ".join(symbol[o].format(x=x) for o, x in pairs) + "?",
    ]
    slips = [value + 1, value - 1, value + 10, value - 10, start + sum(xs) if "sub" in ops else start * xs[0]]
    return forms, value, _dedupe_wrong([c for c in slips if c >= 0], value, 3, rng), d


# --- math: modular arithmetic and fraction sums ---------------------------------------------


def _fraction_text(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"\\frac{{{q.numerator}}}{{{q.denominator}}}"


def _math_item(rng: np.random.Generator, level: float) -> tuple[list[str], str, list[str], float]:
    d = _item_difficulty(rng, level)
    if rng.random() < 0.5:
        m = int(rng.integers(5, 10 + int(d * 90)))
        a, b, c = (int(rng.integers(2, 10 + int(d * 990))) for _ in range(3))
        r = (a * b + c) % m
        forms = [
            f"What is $({a} \\cdot {b} + {c}) \\bmod {m}$?",
            f"Find the remainder when {a} times {b} plus {c} is divided by {m}.",
            f"Compute the least non-negative residue of ${a} \\times {b} + {c}$ modulo ${m}$.",
        ]
        candidates = [(r + 1) % m, (a * b) % m, (r - 1) % m, a * b + c, (a + b + c) % m]
        wrong = _dedupe_wrong(candidates, r, 3, rng)
        return forms, str(r), [str(w) for w in wrong], d
    top = 2 + int(d * 18)
    a, c = (int(rng.integers(1, top)) for _ in range(2))
    b, e = (int(rng.integers(2, top + 1)) for _ in range(2))
    q = Fraction(a, b) + Fraction(c, e)
    forms = [
        f"Compute $\\frac{{{a}}}{{{b}}} + \\frac{{{c}}}{{{e}}}$ as a fraction in lowest terms.",
        f"What is {a}/{b} plus {c}/{e}? Give the reduced fraction.",
        f"Add the fractions {a} over {b} and {c} over {e} and simplify.",
    ]
    slip = Fraction(1, q.denominator)
    candidates = [Fraction(a + c, b + e), Fraction(a * c, b * e), q + slip, q - slip]
    wrong = _dedupe_wrong(candidates, q, 3, rng)
    return forms, _fraction_text(q), [_fraction_text(w) for w in wrong], d


# --- code: small functions with generated inputs ------------------------------------------


def _int_list(rng: np.random.Generator, d: float) -> list[int]:
    high = 10 + int(d * 90)
    return [int(x) for x in rng.integers(-high, high + 1, size=3 + int(rng.integers(0, 3 + int(d * 6))))]


def _code_template(rng: np.random.Generator, d: float) -> tuple[str, list[str], str, list[str], list[tuple]]:
    """(entry point, task forms, solution, wrong bodies, argument tuples) of one function."""
    n_inputs = 4 + int(d * 6)
    which = int(rng.integers(5))
    if which == 0:
        k = int(rng.integers(2, 3 + int(d * 7)))
        forms = [
            f"returns the sum of the elements of the list `xs` that are divisible by {k}",
            f"adds up every number in the list xs that is a multiple of {k} and returns the total",
            f"gives the total of those integers in xs whose remainder modulo {k} is zero",
        ]
        body = f"sum(x for x in xs if x % {k} == 0)"
        wrong = [f"sum(x for x in xs if x % {k} != 0)", "sum(xs)", f"sum(x for x in xs if x % {k + 1} == 0)"]
        return "sum_multiples", forms, body, wrong, [(_int_list(rng, d),) for _ in range(n_inputs)]
    if which == 1:
        letters = "abcde"[: 3 + int(d * 2)]
        c = letters[int(rng.integers(len(letters)))]
        forms = [
            f"returns how many times the letter '{c}' occurs in the string `s`",
            f"counts the occurrences of the character '{c}' in s",
            f"gives the number of positions of s that hold '{c}'",
        ]
        sizes = rng.integers(3, 6 + int(d * 20), size=n_inputs)
        words = ["".join(rng.choice(list(letters), size=int(size))) for size in sizes]
        wrong = [f"s.count('{c}') + 1", "len(s)", f"len(s) - s.count('{c}')"]
        return "count_char", forms, f"s.count('{c}')", wrong, [(w,) for w in words]
    if which == 2:
        a, b, c = (int(rng.integers(1, 5 + int(d * 20))) for _ in range(3))
        forms = [
            f"returns {a}*n**2 + {b}*n + {c} for the integer `n`",
            f"evaluates the quadratic {a}n^2 + {b}n + {c} at n",
            f"computes {a} times n squared, plus {b} times n, plus {c}",
        ]
        wrong = [f"{a} * n + {b} * n + {c}", f"{a} * n * n + {b} * n", f"{a} * n * n - {b} * n + {c}"]
        high = 10 + int(d * 90)
        inputs = [(int(n),) for n in rng.integers(-high, high + 1, size=n_inputs)]
        return "quadratic", forms, f"{a} * n * n + {b} * n + {c}", wrong, inputs
    if which == 3:
        forms = [
            "returns the largest element of the non-empty list `xs` minus its smallest",
            "gives the spread max(xs) - min(xs) of the list xs",
            "computes the difference between the maximum and the minimum of xs",
        ]
        wrong = ["max(xs)", "max(xs) - min(xs) + 1", "xs[-1] - xs[0]"]
        return "spread", forms, "max(xs) - min(xs)", wrong, [(_int_list(rng, d),) for _ in range(n_inputs)]
    m = int(rng.integers(3, 4 + int(d * 10)))
    forms = [
        f"returns the sum of the decimal digits of the integer `n` (ignoring its sign) modulo {m}",
        f"adds the digits of abs(n) and returns that sum's remainder when divided by {m}",
        f"gives (digit sum of |n|) mod {m}",
    ]
    body = f"sum(int(ch) for ch in str(abs(n))) % {m}"
    wrong = [
        f"sum(int(ch) for ch in str(abs(n))) % {m + 1}",
        "sum(int(ch) for ch in str(abs(n)))",
        f"abs(n) % {m + 2}",
    ]
    high = 10 ** (2 + int(d * 6))
    inputs = [(int(n),) for n in rng.integers(-high, high, size=n_inputs)]
    return "digit_sum_mod", forms, body, wrong, inputs


def _outputs(source: str, entry: str, inputs: list[tuple]) -> list[str]:
    """Canonical outputs of one of our own generated programs (trusted: run in-process)."""
    namespace: dict = {}
    exec(source, namespace)
    return [canonical(namespace[entry](*args)) for args in inputs]


def _code_item(rng: np.random.Generator, level: float) -> tuple[list[str], str, dict]:
    d = _item_difficulty(rng, level)
    entry, forms, body, wrong_bodies, inputs = _code_template(rng, d)
    arg = "s" if entry == "count_char" else ("n" if entry in ("quadratic", "digit_sum_mod") else "xs")
    program = f"def {entry}({arg}):\n    return {{}}\n"
    solution = program.format(body)
    expected = _outputs(solution, entry, inputs)
    candidates = [program.format(w) for w in (*wrong_bodies, f"({body}) + 1", f"({body}) - 1")]
    wrong = [w for w in candidates if _outputs(w, entry, inputs) != expected][:3]  # each must differ
    questions = [f"Write a Python function `{entry}({arg})` that {form}.\n{CODE_REPLY}" for form in forms]
    metadata = {
        "difficulty": d,
        "entry_point": entry,
        "test_inputs": [repr(args) for args in inputs],
        "expected_outputs": expected,
        "solution": solution,
        "distractors": wrong,
    }
    return questions, signature_of_outputs(expected), metadata


# --- public API -----------------------------------------------------------------------------


def _shuffled_choices(
    rng: np.random.Generator, answer: str, wrong: list[str]
) -> tuple[tuple[str, ...], str, list[str]]:
    """(choices, answer letter, wrong letters in ``wrong``'s order) with the options shuffled."""
    options = [answer, *wrong]
    order = rng.permutation(len(options))
    choices = tuple(options[k] for k in order)
    letters = [LETTERS[int(np.flatnonzero(order == k)[0])] for k in range(len(options))]
    return choices, letters[0], letters[1:]


def _visual_problem(rng: np.random.Generator, pid: str, level: float) -> Problem:
    d = _item_difficulty(rng, level)
    item = visual_item(rng, d)
    if item.kind == "multiple_choice":
        choices, answer, wrong = _shuffled_choices(rng, item.answer, item.wrong)
    else:
        choices, answer = (), str(item.answer)
        wrong = [str(w) for w in _dedupe_wrong([w for w in item.wrong if w >= 0], item.answer, 3, rng)]
    metadata = {
        "difficulty": d,
        "template": item.template,
        "paraphrases": tuple(item.forms[1:]),
        "distractors": tuple(wrong),
    }
    return Problem(pid, item.forms[0], answer, item.kind, choices, "synthetic", metadata, (item.image,))


def synthetic_problems(
    kind: str, n: int, seed: int, difficulty: float = 0.5, split: str = "test"
) -> list[Problem]:
    """``n`` seeded problems of ``kind`` (a task of ``TASKS``) around ``difficulty`` in [0, 1];
    same seed, same items. ``split`` matters to ``word_problems`` only (``word_split``)."""
    if kind not in TASKS:
        raise ValueError(f"kind must be one of {TASKS}, got {kind!r}")
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    if not 0.0 <= difficulty <= 1.0:
        raise ValueError(f"difficulty must be in [0, 1], got {difficulty!r}")
    if split not in WORD_SPLIT_SHARES:
        raise ValueError(f"split must be one of {list(WORD_SPLIT_SHARES)}, got {split!r}")
    problems = []
    for i in range(n):
        rng = np.random.default_rng([seed, TASKS.index(kind), i])
        pid = f"{kind}-s{seed}-{i:05d}"
        if kind == "visual":
            problems.append(_visual_problem(rng, pid, difficulty))
            continue
        if kind == "code":
            forms, answer, metadata = _code_item(rng, difficulty)
            metadata["paraphrases"] = forms[1:]
            problems.append(Problem(pid, forms[0], answer, kind, source="synthetic", metadata=metadata))
            continue
        if kind == "math":
            forms, answer, wrong, d = _math_item(rng, difficulty)
            choices: tuple[str, ...] = ()
        elif kind == "word_problems":
            forms, value, wrong_values, d = _word_item(rng, difficulty, split)
            answer, wrong, choices = str(value), [str(w) for w in wrong_values], ()
        else:
            forms, value, wrong_values, d = _numeric_item(rng, difficulty)
            answer, wrong, choices = str(value), [str(w) for w in wrong_values], ()
            if kind == "multiple_choice":
                choices, answer, wrong = _shuffled_choices(rng, answer, wrong)
        problems.append(
            Problem(
                id=pid,
                question=forms[0],
                answer=answer,
                kind="numeric" if kind == "word_problems" else kind,
                choices=choices,
                source="synthetic",
                metadata={"difficulty": d, "paraphrases": tuple(forms[1:]), "distractors": tuple(wrong)},
            )
        )
    return problems


def paraphrase(problem: Problem, view: int) -> Problem:
    """The ``view``-th surface form of ``problem`` (0 = original), same id, answer and choices.

    Views cycle through (question, *metadata["paraphrases"]). A view > 0 of a problem without
    paraphrases (a benchmark item: see ``councilzoo paraphrase``) is refused: it would be the
    original wording, a co-training view that silently adds no diversity.
    """
    if view < 0:
        raise ValueError(f"view must be >= 0, got {view}")
    forms = (problem.question, *problem.metadata.get("paraphrases", ()))
    if view > 0 and len(forms) == 1:
        raise ValueError(
            f"problem {problem.id!r} has no paraphrases for view {view}: write them with `councilzoo "
            "paraphrase` (data.paraphrases) or use view 0"
        )
    k = view % len(forms)
    if k == 0:
        return problem
    metadata = {**problem.metadata, "view": k}
    return dataclasses.replace(problem, question=forms[k], metadata=metadata)
