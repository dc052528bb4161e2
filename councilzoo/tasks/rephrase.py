"""Answer-preserving paraphrases of word problems, written offline for co-training views.

A Co-RL member with ``view: k`` reads the k-th paraphrase of every training item (the paper's
"rephrased questions" diversity lever). Benchmark loaders store none, so ``councilzoo paraphrase``
writes them once, deterministically, into a JSONL file (``{"id": ..., "paraphrases": [...]}`` a
line) that a recipe names as ``data.paraphrases``. Two rewrites of the question's sentences:

1. question first: the final question sentence moved before the facts (``"How many ...? Facts:
   ..."``);
2. wording: whole-word substitutions from ``SUBSTITUTIONS`` (``buys`` -> ``purchases``, ``How
   many`` -> ``What number of`` ...), on the question-first form, so the two views differ.

A rewrite is kept only if it differs from the question and every other form, and holds exactly
the question's numbers (the same multiset of numerals): the answer, a function of those numbers,
survives. An item may end with fewer than two forms; a recipe whose view needs more is refused
before training (``learners.recipe_checks.check_views``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from councilzoo.tasks.problem import Problem

__all__ = ["numbers", "paraphrases", "write_paraphrases", "read_paraphrases", "with_paraphrases"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z$\d\"'(])")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")

# Whole-word, case-sensitive rewrites that keep a word problem's meaning.
SUBSTITUTIONS = (
    ("How many", "What number of"), ("how many", "what number of"), ("buys", "purchases"),
    ("bought", "purchased"), ("Each", "Every"), ("wants to", "would like to"), ("needs to", "has to"),
    ("gets", "receives"), ("got", "received"), ("If", "Suppose"), ("Then", "After that"),
    ("then", "after that"), ("starts", "begins"), ("started", "began"), ("altogether", "in all"),
)  # fmt: skip
_ABBREVIATIONS = ("Mr.", "Mrs.", "Ms.", "Dr.", "St.", "Jr.", "vs.", "etc.")


def numbers(text: str) -> Counter:
    """The multiset of numerals in ``text`` (thousands separators removed)."""
    return Counter(n.replace(",", "") for n in _NUMBER.findall(text))


def _question_first(text: str) -> str | None:
    """The final question sentence moved before the facts, or None (one sentence, or no final question)."""
    sentences: list[str] = []
    for piece in _SENTENCE.split(text.strip()):
        if sentences and sentences[-1].endswith(_ABBREVIATIONS):
            sentences[-1] += " " + piece
        else:
            sentences.append(piece)
    if len(sentences) < 2 or not sentences[-1].endswith("?"):
        return None
    return f"{sentences[-1]} Facts: {' '.join(sentences[:-1])}"


def _reword(text: str) -> str:
    """``text`` with every ``SUBSTITUTIONS`` pair applied as whole words."""
    for old, new in SUBSTITUTIONS:
        text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


def paraphrases(question: str) -> list[str]:
    """The checked rewrites of ``question`` (see the module docstring), at most two, in view order."""
    first = _question_first(question)
    candidates = [first, _reword(first if first else question)]
    kept: list[str] = []
    for form in candidates:
        if form and form not in (question, *kept) and numbers(form) == numbers(question):
            kept.append(form)
    return kept


def write_paraphrases(problems: Iterable[Problem], path: str | Path) -> dict[int, int]:
    """Write one JSONL line per problem (id and its paraphrases) to ``path``; returns how many
    problems got 0, 1 and 2 paraphrases."""
    counts: Counter = Counter()
    lines = []
    for p in problems:
        forms = paraphrases(p.question)
        counts[len(forms)] += 1
        lines.append(json.dumps({"id": p.id, "paraphrases": forms}))
    Path(path).write_text("\n".join(lines) + "\n")
    return {k: counts[k] for k in (0, 1, 2)}


def read_paraphrases(path: str | Path) -> dict[str, tuple[str, ...]]:
    """Problem id -> paraphrases, from a file written by ``write_paraphrases``."""
    if not Path(path).is_file():
        raise ValueError(
            f"paraphrases file {str(path)!r} does not exist: write it with `councilzoo paraphrase DATASET "
            f"--split train --out {path}`"
        )
    out = {}
    for k, line in enumerate(Path(path).read_text().splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out[str(row["id"])] = tuple(str(f) for f in row["paraphrases"])
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"paraphrases file {str(path)!r}, line {k + 1}: expected "
                             f'{{"id": ..., "paraphrases": [...]}} ({err})') from None
    return out


def with_paraphrases(problems: Iterable[Problem], table: dict[str, tuple[str, ...]]) -> list[Problem]:
    """``problems`` with ``metadata["paraphrases"]`` from ``table`` (problems it lacks keep theirs)."""
    import dataclasses

    return [
        dataclasses.replace(p, metadata={**p.metadata, "paraphrases": table[p.id]}) if p.id in table else p
        for p in problems
    ]
