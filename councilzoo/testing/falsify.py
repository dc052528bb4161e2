"""Run a property under hypothesis and turn its failure into one readable ``AssertionError``.

Every checker of the kit (``check_no_regret``, ``check_gate``, ...) is a plain function: it calls
``falsify`` with a strategy and a property that raises on a counterexample. ``falsify`` first tries
the checker's explicit examples (the boundaries a few random draws rarely reach, as hypothesis'
``@example`` does), then asks hypothesis for the *smallest* failing example (``hypothesis.find``,
which shrinks), and raises ``AssertionError`` naming the checker, what went wrong on that example,
and the example itself, so the checkers work the same under pytest, unittest or a plain script.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from hypothesis import find
from hypothesis import settings as Settings
from hypothesis.errors import NoSuchExample
from hypothesis.strategies import SearchStrategy

__all__ = ["ContractViolation", "falsify"]

T = TypeVar("T")


class ContractViolation(AssertionError):
    """A broken contract, with the (shrunk) example that shows it: every checker of the kit
    raises this (an ``AssertionError``, so any test runner reports it as a failure)."""


def _failure(prop: Callable[[T], None], example: T) -> str | None:
    """What ``prop`` raised on ``example`` (``Type: message``), or None when it held."""
    try:
        prop(example)
    except Exception as err:  # a crash of the unit under test is a counterexample too
        text = str(err).strip() or "(no message)"
        return text if isinstance(err, AssertionError) else f"{type(err).__name__}: {text}"
    return None


def falsify(
    checker: str,
    strategy: SearchStrategy[T],
    prop: Callable[[T], None],
    settings: Settings | None = None,
    examples: Iterable[T] = (),
) -> None:
    """Raise ``ContractViolation`` if one of ``examples`` (tried first, in order, under every
    profile) or an example hypothesis finds of ``strategy`` makes ``prop`` raise; the message names
    ``checker``, the failure and the example (shrunk, when hypothesis found it).

    ``settings`` defaults to the currently loaded hypothesis profile. The example database is
    off: a stored example of one checker must never be replayed against another.
    """
    for example in examples:
        failure = _failure(prop, example)
        if failure is not None:
            raise ContractViolation(f"{checker} failed: {failure}\nBoundary counterexample: {example!r}")
    run = Settings(settings if settings is not None else Settings(), database=None)
    failures: list[str] = []  # the last entry belongs to the example ``find`` returns

    def fails(example: T) -> bool:
        failure = _failure(prop, example)
        if failure is not None:
            failures.append(failure)
        return failure is not None

    try:
        example = find(strategy, fails, settings=run)
    except NoSuchExample:
        return
    raise ContractViolation(f"{checker} failed: {failures[-1]}\nShrunk counterexample: {example!r}")
