"""Code problems: programs as answers, output signatures as votes, pass/fail against tests.

A code ``Problem`` (``kind="code"``) carries in ``metadata``:

- ``entry_point``: the function to call (``None``: a stdin program, run once per input);
- ``test_inputs``: the inputs every candidate is run on: Python literal argument tuples
  (``"([1, 2], 3)"``) for functions, standard-input texts for stdin programs; never outputs;
- labelled data also has ``test_script`` (assertions run after the program: HumanEval, MBPP) or
  ``expected_outputs`` (canonical outputs aligned with ``test_inputs``: LiveCodeBench), and
  ``solution`` (a reference program) where the dataset gives one;
- ``preamble``: import lines prepended to every program (HumanEval's ``from typing import List``).

The label-free answer of a completion is its **output signature**: ``extract_answer(text,
"code")`` gives the program, ``answers_for(problem, texts)`` runs each distinct program once in the
sandbox on ``test_inputs`` and returns ``"out:<digest of its canonical outputs>"``, or
``"error:<status>:<digest of the program>"`` when it failed anywhere, or None when the text has no
program. ``answers_equivalent`` compares signatures by equality and never matches an error, so
``plurality``, the peer reward rules, TTRL and COMED's agreement work on code unchanged, and no
program runs per equivalence check: results are cached by (problem inputs, program) hash.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence

from councilzoo.sandbox import Job, Limits, RunResult, Sandbox, canonical, canonical_stdout, default_sandbox
from councilzoo.tasks.grading import (
    DIGEST_CHARS,
    ERROR_PREFIX,
    SIGNATURE_PREFIX,
    extract_answer,
    extract_program,
    is_signature,
)
from councilzoo.tasks.problem import Problem

CODE_REPLY = "Reply with the complete Python solution in one ```python code block."
CACHE_SIZE = 65_536
__all__ = [
    "answers_for",
    "answers_for_batch",
    "canonical",
    "canonical_stdout",
    "pass_at_k",
    "passes",
    "program_for",
    "reference_answer",
    "signature_of_outputs",
    "stated_answer",
    "with_reference_answers",
]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:DIGEST_CHARS]


def signature_of_outputs(outputs: Sequence[str]) -> str:
    """The signature of a program that produced these canonical outputs, one per test input."""
    return SIGNATURE_PREFIX + _digest(json.dumps(list(outputs)))


def _require_code(problem: Problem) -> None:
    if problem.kind != "code":
        raise ValueError(f"problem {problem.id!r} has kind {problem.kind!r}, not 'code'")


def program_for(problem: Problem, text: str | None) -> str | None:
    """The runnable program a completion states for ``problem`` (preamble included), or None.

    A completion that continues the prompt (HumanEval's function body) is read as prompt + text.
    """
    entry = problem.metadata.get("entry_point")
    program = extract_program(text, entry)
    prefix = problem.metadata.get("prefix", "")
    if program is None and prefix and isinstance(text, str):
        program = extract_program(prefix + text, entry)
    if program is None:
        return None
    preamble = problem.metadata.get("preamble", "")
    return f"{preamble}\n{program}" if preamble else program


def _job(problem: Problem, program: str) -> Job:
    entry = problem.metadata.get("entry_point")
    inputs = tuple(problem.metadata.get("test_inputs", ()))
    return Job(program, "call" if entry else "stdin", entry, inputs)


def _signature(result: RunResult, program: str) -> str:
    if result.ok:
        return signature_of_outputs(result.outputs)
    return f"{ERROR_PREFIX}{result.status}:{_digest(program)}"


class _Cache:
    """Signatures by (problem inputs, program) hash, bounded LRU, shared by threads."""

    def __init__(self, size: int) -> None:
        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key: str) -> str | None:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
            return None

    def put(self, key: str, value: str) -> None:
        with self.lock:
            self.items[key] = value
            if len(self.items) > self.size:
                self.items.popitem(last=False)


_CACHE = _Cache(CACHE_SIZE)


def _key(job: Job) -> str:
    return _digest(json.dumps([job.mode, job.entry_point, list(job.inputs), job.source]))


def answers_for_batch(
    items: Sequence[tuple[Problem, Sequence[str | None]]],
    *,
    sandbox: Sandbox | None = None,
    limits: Limits | None = None,
    truncated: Sequence[Sequence[bool]] | None = None,
) -> list[list[str | None]]:
    """Answers of many (problem, completion texts) groups; every program of the batch runs in one
    parallel sandbox call. Non-code problems get ``extract_answer``'s answers; ``truncated`` (one
    flag per text, parallel to ``items``) marks texts cut at the token limit, whose unfinished
    end states nothing."""
    answers: list[list[str | None]] = []
    pending: dict[str, tuple[Job, list[tuple[int, int]]]] = {}
    for i, (problem, texts) in enumerate(items):
        if problem.kind != "code":
            cut = truncated[i] if truncated is not None else [False] * len(texts)
            answers.append(
                [extract_answer(t, problem.kind, truncated=c) for t, c in zip(texts, cut, strict=True)]
            )
            continue
        row: list[str | None] = []
        no_inputs = not problem.metadata.get("test_inputs")
        for j, text in enumerate(texts):
            program = None if no_inputs else program_for(problem, text)  # no inputs: nothing to vote on
            row.append(None)
            if program is None:
                continue
            job = _job(problem, program)
            key = _key(job)
            cached = _CACHE.get(key)
            if cached is not None:
                row[j] = cached
            else:
                pending.setdefault(key, (job, []))[1].append((i, j))
        answers.append(row)
    if pending:
        keys = list(pending)
        results = (sandbox or default_sandbox()).run([pending[k][0] for k in keys], limits)
        for key, result in zip(keys, results, strict=True):
            job, places = pending[key]
            signature = _signature(result, job.source)
            _CACHE.put(key, signature)
            for i, j in places:
                answers[i][j] = signature
    return answers


def answers_for(
    problem: Problem, texts: Sequence[str | None], truncated: Sequence[bool] | None = None, **kwargs
) -> list[str | None]:
    """The answer of each completion of ``problem`` (for code: its output signature); ``truncated``
    (one flag per text) marks texts cut at the token limit."""
    cut = None if truncated is None else [list(truncated)]
    return answers_for_batch([(problem, texts)], truncated=cut, **kwargs)[0]


def stated_answer(problem: Problem, answer: str | None) -> str | None:
    """The comparable answer of a turn that stated ``answer``: for code, the output signature of
    the stated program; an exact signature (a peer label, stated as data) is kept, and anything
    else, a program that merely starts like one included, runs. Any other kind unchanged."""
    if problem.kind != "code" or answer is None or is_signature(answer):
        return answer
    return answers_for(problem, [answer])[0]


def passes(
    problem: Problem,
    programs: Sequence[str | None],
    *,
    sandbox: Sandbox | None = None,
    limits: Limits | None = None,
) -> list[bool]:
    """Whether each program (already extracted, e.g. by ``program_for``) passes the problem's tests:
    every assertion of ``test_script`` ran to its end (in a test process of its own, against the
    program's functions), or its outputs, as plain builtin values, equal ``expected_outputs``."""
    _require_code(problem)
    script = problem.metadata.get("test_script")
    expected = problem.metadata.get("expected_outputs")
    if script is None and expected is None:
        raise ValueError(f"problem {problem.id!r} has no tests (test_script or expected_outputs)")
    verdicts: list[bool] = [False] * len(programs)
    runnable = [(k, p) for k, p in enumerate(programs) if p]
    if script is not None:
        jobs = [Job(p, "script", test_script=script) for _, p in runnable]
    else:
        jobs = [_job(problem, p) for _, p in runnable]
    results = (sandbox or default_sandbox()).run(jobs, limits)
    for (k, _), result in zip(runnable, results, strict=True):
        verdicts[k] = result.ok and (script is not None or list(result.outputs) == list(expected))
    return verdicts


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c pass: 1 - C(n-c, k) / C(n, k) (Chen et al., 2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def reference_answer(problem: Problem, *, sandbox: Sandbox | None = None) -> str | None:
    """The signature of the reference outputs: ``expected_outputs`` directly, else the ``solution``
    run in ``sandbox`` (by default a pool of its own, see ``with_reference_answers``); None when
    neither exists or the reference itself fails."""
    _require_code(problem)
    if not problem.metadata.get("test_inputs"):
        return None
    expected = problem.metadata.get("expected_outputs")
    if expected is not None:
        return signature_of_outputs(expected)
    if not problem.metadata.get("solution"):
        return None
    return with_reference_answers([dataclasses.replace(problem, answer=None)], sandbox=sandbox)[0].answer


def with_reference_answers(problems: Sequence[Problem], *, sandbox: Sandbox | None = None) -> list[Problem]:
    """``problems`` with ``answer`` set to ``reference_answer``; all references run in one batch.

    Without ``sandbox`` the references run in a pool of their own, closed after: the answer key
    never runs in a pool that grades candidates."""
    need = [p for p in problems if p.answer is None and p.metadata.get("solution")]
    found = {}
    if need:
        texts = [[f"```python\n{p.metadata['solution']}\n```"] for p in need]
        with contextlib.nullcontext(sandbox) if sandbox is not None else Sandbox() as pool:
            signatures = answers_for_batch(list(zip(need, texts, strict=True)), sandbox=pool)
        found = {p.id: s[0] for p, s in zip(need, signatures, strict=True)}
    out = []
    for p in problems:
        answer = p.answer if p.answer is not None else found.get(p.id)
        if p.answer is None and p.metadata.get("expected_outputs") is not None:
            answer = reference_answer(p)
        if answer is not None and not answer.startswith(SIGNATURE_PREFIX):
            answer = None  # the reference fails on its own inputs: no usable label
        out.append(dataclasses.replace(p, answer=answer))
    return out
