"""Answer extraction, equivalence, reviewer verdicts and plurality votes.

Every env, agent and learner grades through these functions, so a model's output is read the same
way everywhere. Bad model output is data: each function returns "no answer" (None / False)
instead of raising.

Extraction rules (``extract_answer``), first that applies wins:

1. the last *complete* ``\\boxed{...}`` or ``\\fbox{...}`` (balanced braces; a box cut off by
   truncation is ignored);
2. the last answer phrase: "the answer is X", "final answer: X", "Answer: X" (markdown such as
   ``**Final Answer:**`` is tolerated), or GSM8K's final-answer mark "#### X" (not a markdown
   heading such as "#### Step 2"); for multiple choice also "the correct choice/option is X" and
   "the answer must/would/should be X"; X runs to the end of its sentence or line;
3. multiple choice only: an option label opening the last non-empty line ("(C)", "C)",
   "**(C)**") or a last line holding nothing but the letter;
4. numeric only: the stated result, "= N" closing its sentence ("so he has 4 + 2 = 6 books now.",
   the way small instruction models answer when asked for the number): the last such result of the
   first paragraph that holds one, so a rambling paragraph after the answer does not override it,
   while "8 + 3 = 12. No: 8 + 3 = 11." gives 11. Only words may follow N in its sentence, none of
   them a connective or an operation ("= 7 and then multiply by" is reasoning, not a result).
   A later paragraph that opens with a conclusion ("In total, Ada has 2 + 4 = 6 cards.", also
   "In all", "Altogether", "So", "Thus", "Therefore", "Finally") states the final result instead;
5. numeric only: a first line that is a number alone, perhaps with one word and a period ("10",
   "10 apples."): the number a model asked for the number only gives before explaining it.

A reply cut at the token limit (``truncated=True``) is read without its unfinished last sentence:
"so the answer is 4 + 6" or "= 12 app" at the cut state nothing, while a complete ``\\boxed{}``
or a finished sentence before the cut still counts, unless the reasoning was still going: the
answer is withdrawn when the cut sentence computes ("13 - 13 =") or names another number, or when
the text after the answer announces more work ("we need to find out", "we can", "to find").

Code (``kind="code"``): the answer is the program, the last fenced ```python (or bare ```) block
that parses, else the whole text if it parses and defines a function; no usable code gives None.
A text that is only an output signature (below) is not a program: a code answer always comes
from running code, never from text that looks like an already computed result.
Two programs are compared by their *output signatures* (``councilzoo.tasks.code``): equivalent
when both ran cleanly on the same inputs and printed/returned the same canonical outputs; an
``error:`` signature (crash, timeout, limit) is equivalent to nothing, itself included.

Letters are A-J, upper case, and must stand alone: "The answer depends" never yields "D".
Numeric answers are normalised to a plain number ("$1,234.50." -> "1234.50"; units, currency,
thousands separators and a trailing period are dropped; "x = 5" -> "5"). A text that states no
answer gives None; the last-number fallback of many eval scripts (which lets truncated outputs
"vote") exists only as the explicit ``fallback_last_number=True`` option.

Verdict rule (``extract_verdict``): an explicit verdict is one of ``\\boxed{RIGHT}``; a label
("Verdict:", "Judgement:", "Final verdict is") followed by right/wrong/correct/incorrect; the
words RIGHT, WRONG, CORRECT, INCORRECT in capitals or in bold; "the solution/answer/proposal/it
is (not) correct/incorrect/right/wrong" ending a clause; or a reply that is only such a word.
The last explicit verdict in the text wins; "not correct" is WRONG. Lower-case words inside a
sentence ("a right triangle", "the correct formula") are not verdicts.
"""

from __future__ import annotations

import ast
import math
import re
import threading
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

from councilzoo.tasks.problem import KINDS

__all__ = [
    "LETTERS", "extract_program", "extract_answer", "answers_equivalent", "extract_verdict",
    "answer_groups", "plurality", "format_answer",
]

LETTERS = "ABCDEFGHIJ"  # up to MMLU-Pro's ten options
RIGHT, WRONG = "RIGHT", "WRONG"
MATH_VERIFY_TIMEOUT_S = 5
MAX_MATH_CHARS = 2_000  # longer "answers" are garbage and can make sympy hang
# Parses are cached per text: an env re-reads the text an agent already parsed, and a turn's text is
# usually one of its samples. Bounded: 1,024 utterances of 8k characters are ~8 MB per cache.
PARSE_CACHE_SIZE = 1_024

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\b")
_BRACE_RE = re.compile(r"[{}]")
_PHRASE_END = r"\s*(?:\*\*|__)?\s*[:：]?"
_GSM8K_MARK = r"|(?<!#)####(?!#)(?![ \t]*[A-Za-z]{2})"  # "#### 72", not a "#### Step 2" heading
_PHRASE_RE = re.compile(
    r"\banswer(?:\s*(?:\*\*|__))?\s*(?:is\b|[:：])" + _PHRASE_END + _GSM8K_MARK, re.IGNORECASE
)  # "the answer is", "Final Answer:", "**Answer**:"; never "the answer depends"
_CHOICE_PHRASE_RE = re.compile(
    r"\b(?:answer|choice|option)(?:\s*(?:\*\*|__))?\s*(?:(?:is|(?:must|would|should)\s+be)\b|[:：])"
    + _PHRASE_END
    + _GSM8K_MARK,
    re.IGNORECASE,
)  # also "the correct choice is (A)", "so the answer must be C" (a letter, strictly parsed, follows)
_PROSE_RE = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}\b")  # an English word, not a \command
_NUMBER_RE = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*-?\d+(?:\.\d+)?)?|-?\.\d+")
_LETTER_AFTER_PHRASE_RE = re.compile(
    rf"^[\s*_$]*(?:\\text\{{)?[\s*_]*\(?([{LETTERS}])\)?(?![A-Za-z0-9])"
    r"(?=\s*(?:[).:,;*_}\]$]|$|\s+(?:because|since|as|is)\b))"
)
_LETTER_LINE_RE = re.compile(rf"^[\s*_#>-]*(?:\(([{LETTERS}])\)|([{LETTERS}])\))(?![A-Za-z0-9])")
_LETTER_ONLY_RE = re.compile(rf"^[\s*_#>(\[]*(?:option\s+)?([{LETTERS}])[\s*_)\].:]*$", re.IGNORECASE)
_LATEX_NOISE_RE = re.compile(r"\\[,;!: ]|\\(?:left|right|displaystyle)\b|\{,\}")
_TEXT_CMD_RE = re.compile(r"\\(?:text|textbf|mathrm|mbox|mathbf)\s*\{([^{}]*)\}")
_FRAC_RE = re.compile(r"\\[dt]?frac\s*\{\s*(-?[\d.]+)\s*\}\s*\{\s*(-?[\d.]+)\s*\}")

_RESULT_RE = re.compile(
    r"=\s*\$?\s*(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)([^\n.!?=]*?)\s*(?=[.!?](?!\d)|\n|$)"
)  # "= N", then the rest of its sentence
_RESULT_TAIL_BAD_RE = re.compile(
    r"[\d,;:(*/+^%-]|\b(?:and|then|but|so|which|because|plus|minus|times|of|by|from|divided|multiplied)\b",
    re.IGNORECASE,
)  # what makes "= N ..." a step of reasoning rather than its result
_CONCLUSION_RE = re.compile(r"\s*(?:in total|in all|altogether|so|thus|therefore|finally)\b", re.IGNORECASE)
_LONE_NUMBER_RE = re.compile(r"\**(-?\d[\d,]*(?:\.\d+)?)\**(?:\s+[a-zA-Z]+)?\.?")
_SENTENCE_END_RE = re.compile(r"[.!?](?=\s|$)|\n")
_MORE_WORK_RE = re.compile(r"\b(?:need to|we can|to find)\b", re.IGNORECASE)
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
CODE_LANGUAGES = ("", "python", "py", "python3")
SIGNATURE_PREFIX, ERROR_PREFIX = "out:", "error:"
DIGEST_CHARS = 24
_SIGNATURE_RE = re.compile(rf"(?:out|error:[a-z_]+):[0-9a-f]{{{DIGEST_CHARS}}}")

_VERDICT_WORD = r"(not\s+)?(right|wrong|correct|incorrect)"
_VERDICT_RES = (
    re.compile(r"\\boxed\s*\{\s*(?:\\text\{\s*)?" + _VERDICT_WORD + r"\s*\}?\s*\}", re.IGNORECASE),
    re.compile(
        r"(?:verdict|judge?ment|assessment|evaluation)\s*(?:\*\*|__)?\s*(?:is|:)\s*(?:\*\*|__)?\s*"
        + _VERDICT_WORD
        + r"\b",
        re.IGNORECASE,
    ),
    re.compile(r"\b()(RIGHT|WRONG|CORRECT|INCORRECT)\b"),
    re.compile(r"(?:\*\*|__)\s*()(right|wrong|correct|incorrect)[.!]?\s*(?:\*\*|__)", re.IGNORECASE),
    re.compile(
        r"\b(?:solution|answer|proposal|result|reasoning|response|it|this)\s+(?:is|was)\s+"
        + _VERDICT_WORD
        + r"(?=\s*(?:[.!,;:*]|$))",
        re.IGNORECASE | re.MULTILINE,
    ),
    re.compile(r"^[\s*_#>]*" + _VERDICT_WORD + r"[\s*_.!]*$", re.IGNORECASE),
)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _boxed_contents(text: str) -> list[str]:
    """Contents of every complete ``\\boxed{...}``/``\\fbox{...}`` in order of appearance."""
    found = []
    for match in _BOX_RE.finditer(text):
        i = match.end()
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] != "{":  # "\boxed 5" form
            token = re.match(r"[^\s$]+", text[i:])
            if token:
                found.append(token.group(0))
            continue
        depth = 0
        for brace in _BRACE_RE.finditer(text, i):
            depth += 1 if brace.group() == "{" else -1
            if depth == 0:
                found.append(text[i + 1 : brace.start()])
                break
    return found


def _phrase_answers(text: str, phrase: re.Pattern = _PHRASE_RE) -> list[str]:
    """What follows each answer ``phrase``, up to the end of its sentence or line."""
    found = []
    for match in phrase.finditer(text):
        rest = text[match.end() :].split("\n", 1)[0]
        rest = re.split(r"(?<!\d)\.(?!\d)\s|\.$", rest, maxsplit=1)[0]  # end of sentence, not 3.5
        if rest.strip(" *_:"):
            found.append(rest)
    return found


def _clean_math(raw: str, boxed: bool = False) -> str | None:
    """Strip delimiters and markdown from a captured math answer.

    A phrase answer outside $...$ is cut at its first English word ("5 apples" -> "5",
    "not clear" -> None); a boxed answer is kept whole.
    """
    s = raw.strip().strip("*_ ").rstrip(".").strip()
    inline = re.search(r"\$\$?(.+?)\$\$?|\\\((.+?)\\\)", s)
    if inline:
        s = inline.group(1) or inline.group(2)
    elif not boxed:
        s = _PROSE_RE.split(s, maxsplit=1)[0]
    s = s.strip().strip("$").rstrip(".").strip()
    return s or None


def _clean_number(raw: str) -> str | None:
    """The number a captured answer states, as a plain string ("$1,234.50." -> "1234.50")."""
    s = _TEXT_CMD_RE.sub(r" \1 ", raw)
    s = _LATEX_NOISE_RE.sub("", s)
    s = _FRAC_RE.sub(r"\1/\2", s).replace("\\$", "$").replace("\\%", "%")
    if "=" in s:  # "x = 5": the value is on the right
        s = s.rsplit("=", 1)[1]
    match = _NUMBER_RE.search(s)
    if match is None:
        return None
    return re.sub(r"\s+", "", match.group(0)).replace(",", "")


def _letter(raw: str) -> str | None:
    match = _LETTER_AFTER_PHRASE_RE.match(raw) or _LETTER_ONLY_RE.match(raw)
    return match.group(1).upper() if match else None


def _extract_letter(text: str, boxed: list[str]) -> str | None:
    for raw in boxed:
        letter = _letter(_TEXT_CMD_RE.sub(r"\1", raw))
        if letter:
            return letter
    for raw in reversed(_phrase_answers(text, _CHOICE_PHRASE_RE)):
        letter = _letter(raw)
        if letter:
            return letter
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    match = _LETTER_LINE_RE.match(lines[-1])
    if match:
        return match.group(1) or match.group(2)
    match = _LETTER_ONLY_RE.match(lines[-1])
    return match.group(1).upper() if match and match.group(1).isupper() else None


def _parses(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _defines(tree: ast.Module, name: str | None) -> bool:
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return any(isinstance(node, defs) and (name is None or node.name == name) for node in tree.body)


def extract_program(text: str | None, entry_point: str | None = None) -> str | None:
    """The program ``text`` states: the last fenced python/bare block that parses, else the whole
    text if it parses and defines ``entry_point`` (any function when None); else None."""
    if not isinstance(text, str) or not text.strip():
        return None
    return _extract_program(text, entry_point)


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _extract_program(text: str, entry_point: str | None) -> str | None:
    blocks = [m.group(2) for m in _FENCE_RE.finditer(text) if m.group(1).lower() in CODE_LANGUAGES]
    for block in reversed(blocks):
        if block.strip() and not is_signature(block.strip("\n")) and _parses(block) is not None:
            return block.strip("\n")
    tree = _parses(text)
    return text.strip("\n") if tree is not None and _defines(tree, entry_point) else None


def is_signature(answer: str) -> bool:
    """Whether ``answer`` is exactly an output signature (``out:<digest>`` or
    ``error:<status>:<digest>``) as ``councilzoo.tasks.code`` writes them; ``out:abc...`` also
    parses as Python (an annotated name), so extraction must never take it for a program."""
    return _SIGNATURE_RE.fullmatch(answer) is not None


def extract_answer(
    text: str | None, kind: str, *, fallback_last_number: bool = False, truncated: bool = False
) -> str | None:
    """The final answer ``text`` states, normalised for ``kind``; None when it states none.

    See the module docstring for the rules. ``truncated``: the text was cut at the token limit,
    so its unfinished last sentence is ignored. With ``fallback_last_number=True`` (math and
    numeric only) the last number anywhere in the text is used when no boxed answer or phrase is
    found; this reproduces common eval scripts and is off by default.
    """
    _check_kind(kind)
    if not isinstance(text, str) or not text.strip():
        return None
    return _extract_answer(text, kind, bool(fallback_last_number), bool(truncated))


def _finished_part(text: str) -> str:
    """``text`` up to its last sentence end or line break (what a reply cut mid-sentence finished)."""
    ends = [m.end() for m in _SENTENCE_END_RE.finditer(text)]
    return text[: ends[-1]] if ends else ""


def _still_reasoning(text: str, finished: str, answer: str) -> bool:
    """Whether a reply cut at the token limit was still working past ``answer`` (its last mention
    in ``finished``): the cut sentence computes or names another number, or more work is announced."""
    cut = text[len(finished) :]
    if "=" in cut or any(n.replace(",", "") != answer for n in _NUMBER_RE.findall(cut)):
        return True
    return bool(_MORE_WORK_RE.search(text[finished.rfind(answer) + len(answer) :]))


def _stated_result(text: str) -> str | None:
    """The last closing "= N" of the first paragraph that holds one, or of the last paragraph that
    opens with a conclusion ("In total, ...") and holds one (rule 4)."""
    found = None
    for paragraph in re.split(r"\n\s*\n", text):
        results = [m.group(1) for m in _RESULT_RE.finditer(paragraph) if not _RESULT_TAIL_BAD_RE.search(m[2])]
        if results and (found is None or _CONCLUSION_RE.match(paragraph)):
            found = results[-1].replace(",", "")
    return found


def _lone_number(text: str) -> str | None:
    """A first line that is a number and nothing else ("10", "10 apples."): what a model asked for
    the number only states (rule 5)."""
    first = text.strip().split("\n", 1)[0]
    match = _LONE_NUMBER_RE.fullmatch(first.strip())
    return match.group(1).replace(",", "") if match else None


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _extract_answer(text: str, kind: str, fallback_last_number: bool, truncated: bool = False) -> str | None:
    if kind == "code":
        return _extract_program(text, None)
    boxed = [(raw, True) for raw in reversed(_boxed_contents(text))]  # a complete box is committed
    if truncated:
        finished = _finished_part(text)
        answer = _extract_answer(finished, kind, fallback_last_number)
        if answer is not None and not _still_reasoning(text, finished, answer):
            return answer
        committed = " ".join(f"\\boxed{{{raw}}}" for raw, _ in reversed(boxed))
        return _extract_answer(committed, kind, False) if boxed else None
    if kind == "multiple_choice":
        return _extract_letter(text, [raw for raw, _ in boxed])
    phrases = [(raw, False) for raw in reversed(_phrase_answers(text))]
    for raw, is_boxed in boxed + phrases:
        answer = _clean_number(raw) if kind == "numeric" else _clean_math(raw, is_boxed)
        if answer is not None:
            return answer
    if kind == "numeric" and (result := _stated_result(text) or _lone_number(text)) is not None:
        return result
    if fallback_last_number:
        numbers = _NUMBER_RE.findall(text.replace("\\!", ""))
        return numbers[-1].replace(",", "").replace(" ", "") if numbers else None
    return None


def _as_fraction(answer: str) -> Fraction | None:
    s = _clean_number(answer)
    if s is None or _clean_number_residue(answer, s):
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def _clean_number_residue(answer: str, number: str) -> bool:
    """True when ``answer`` holds a second number besides ``number`` (e.g. "3 or 4")."""
    return len(_NUMBER_RE.findall(_FRAC_RE.sub(r"\1/\2", answer).rsplit("=", 1)[-1])) > 1


def _numeric_equal(pred: str, gold: str) -> bool:
    a, b = _as_fraction(pred), _as_fraction(gold)
    if a is None or b is None:
        return _normalise_text(pred) == _normalise_text(gold)
    if a == b:
        return True
    # A rounded decimal ("0.333333" for 1/3) may differ slightly; integers and fractions never do.
    return "." in pred + gold and math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-9)


def _normalise_text(s: str) -> str:
    return re.sub(r"\s+", "", s).strip("$.").lower()


def _math_equal(pred: str, gold: str) -> bool:
    if _normalise_text(pred) == _normalise_text(gold):
        return True
    if len(pred) > MAX_MATH_CHARS or len(gold) > MAX_MATH_CHARS:
        return False
    from math_verify import parse, verify

    # math-verify times out through signal.alarm, which only works in the main thread.
    timeout = MATH_VERIFY_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        gold_parsed = parse(_wrap(gold), parsing_timeout=timeout)
        pred_parsed = parse(_wrap(pred), parsing_timeout=timeout)
        if not gold_parsed or not pred_parsed:
            return False
        return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout))
    except Exception:  # math-verify/sympy failures on garbage are "not equal", never a crash
        return False


def _wrap(answer: str) -> str:
    return answer if "\\boxed" in answer else f"\\boxed{{{answer}}}"


@lru_cache(maxsize=65_536)
def _equivalent(pred: str, gold: str, kind: str) -> bool:
    if kind == "code":  # output signatures: equal, and both from programs that ran cleanly
        return pred == gold and pred.startswith(SIGNATURE_PREFIX) and is_signature(pred)
    if kind == "multiple_choice":
        a, b = _letter(pred.strip()), _letter(gold.strip())
        return a is not None and a == b
    if kind == "numeric":
        return _numeric_equal(pred, gold)
    return _math_equal(pred, gold)


def answers_equivalent(pred: str | None, gold: str | None, kind: str) -> bool:
    """Whether two extracted answers mean the same for ``kind``.

    ``math``: math-verify (fractions vs decimals, \\frac/\\dfrac, roots, intervals, tuples,
    sets). ``numeric``: both read as numbers (units, currency, separators dropped; "1/2" == 0.5),
    equal exactly, or within relative tolerance 1e-6 when either side is a rounded decimal.
    ``multiple_choice``: same option letter. ``code``: the same output signature of programs that
    ran cleanly (an ``error:`` signature, or a raw program, matches nothing). None on either side,
    or an answer that cannot be read, gives False. Results are cached.
    """
    _check_kind(kind)
    if not isinstance(pred, str) or not isinstance(gold, str) or not pred.strip() or not gold.strip():
        return False
    return _equivalent(pred, gold, kind)


def extract_verdict(text: str | None) -> str | None:
    """A reviewer's verdict, "RIGHT" or "WRONG", or None; the last explicit verdict wins.

    See the module docstring for what counts as explicit.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    return _extract_verdict(text)


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _extract_verdict(text: str) -> str | None:
    best: tuple[int, str] | None = None
    for pattern in _VERDICT_RES:
        for match in pattern.finditer(text):
            negated, word = match.group(1), match.group(2).lower()
            positive = word in ("right", "correct")
            verdict = RIGHT if positive != bool(negated) else WRONG
            if best is None or match.end() > best[0]:
                best = (match.end(), verdict)
    return best[1] if best else None


def answer_groups(answers: Sequence[str | None], kind: str) -> list[tuple[str, int]]:
    """The answers grouped up to equivalence: ``(representative, count)`` in first-seen order.

    None answers join no group. Each answer joins the first group whose representative it is
    equivalent to. Identical texts compare alike, so a text seen before goes straight to the
    group its first copy joined; a text that founded its group goes there only if it is
    equivalent to itself (an unreadable answer is not, so each copy founds its own group, as the
    plain scan does).
    """
    _check_kind(kind)
    groups: list[list] = []  # [representative, count]
    group_of: dict[str, list] = {}  # answer text -> the group every copy of it joins
    for answer in answers:
        if answer is None:
            continue
        group = group_of.get(answer)
        if group is None:
            group = next((g for g in groups if answers_equivalent(answer, g[0], kind)), None)
            if group is None:
                group = [answer, 0]
                groups.append(group)
                if answers_equivalent(answer, answer, kind):
                    group_of[answer] = group
            else:
                group_of[answer] = group
        group[1] += 1
    return [(rep, count) for rep, count in groups]


def plurality(answers: Sequence[str | None], kind: str) -> tuple[str | None, float]:
    """The most common answer among ``answers`` up to equivalence (``answer_groups``), and its share.

    None answers never win but count in the denominator: share = top count / len(answers).
    Ties keep the first-seen answer; the representative of a group is its first member.
    Returns (None, 0.0) when no answer is given.
    """
    groups = answer_groups(answers, kind)
    if not groups:
        return None, 0.0
    top = max(groups, key=lambda g: g[1])  # max keeps the first of equal counts
    return top[0], top[1] / len(answers)


def format_answer(answer: str, kind: str) -> str:
    """The canonical way to state ``answer``: ``\\boxed{answer}`` (code: a fenced python block);
    extract_answer reads it back."""
    _check_kind(kind)
    if kind == "code":
        return f"```python\n{answer}\n```"
    return f"\\boxed{{{answer}}}"
