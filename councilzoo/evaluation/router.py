"""A light learned router: predicts each model's chance of answering a question correctly.

RouteLLM-style routing without the weight: one L2-regularised logistic regression per model on
cheap text features (length, digit and number counts, magnitude of the numbers, hashed word
unigrams), fitted in numpy on a dev split where every model answered every question. The router
picks the model with the highest predicted correctness; COMED's *router margin* is the predicted
correctness of the anchor minus the best other model's, which equals ``p_top1 - p_top2`` when the
anchor is the router's own choice.

Pluggable: anything with ``models``, ``fit(problems, correct)`` and ``predict(problems)`` works
(``Router`` protocol); pass ``featurize=`` (for instance a sentence-embedding function) to keep
the logistic head and change the features.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from councilzoo.tasks import Problem

__all__ = ["LogisticRouter", "route"]

HASH_BUCKETS = 64
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?")
_WORD_RE = re.compile(r"[a-z]+")


@runtime_checkable
class Router(Protocol):
    """Predicts, for each problem, each model's probability of answering it correctly."""

    models: tuple[str, ...]

    def fit(self, problems: Sequence[Problem], correct: np.ndarray) -> Router: ...

    def predict(self, problems: Sequence[Problem]) -> np.ndarray: ...


def _text_features(problems: Sequence[Problem]) -> np.ndarray:
    """Cheap features of each question: shape ``(len(problems), 5 + HASH_BUCKETS)``, float64."""
    rows = []
    for problem in problems:
        text = problem.question
        numbers = [abs(float(x)) for x in _NUMBER_RE.findall(text)]
        words = _WORD_RE.findall(text.lower())
        hashed = np.zeros(HASH_BUCKETS)
        for word in words:
            hashed[zlib.crc32(word.encode()) % HASH_BUCKETS] += 1.0
        dense = [
            np.log1p(len(text)),
            np.log1p(len(words)),
            float(len(numbers)),
            np.log1p(max(numbers, default=0.0)),
            np.log1p(sum(c.isdigit() for c in text)),
        ]
        rows.append(np.concatenate([dense, hashed / max(len(words), 1)]))
    return np.asarray(rows, dtype=np.float64).reshape(len(problems), 5 + HASH_BUCKETS)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))


def _fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, iters: int = 25) -> np.ndarray:
    """Newton's method for L2-regularised logistic regression; ``x`` has a bias column last."""
    w = np.zeros(x.shape[1])
    reg = l2 * np.eye(x.shape[1])
    reg[-1, -1] = 0.0  # the bias is not shrunk
    for _ in range(iters):
        p = _sigmoid(x @ w)
        grad = x.T @ (p - y) + reg @ w
        hess = (x * (p * (1 - p))[:, None]).T @ x + reg + 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w


class LogisticRouter:
    """One logistic regression per model on ``featurize(problems)`` (default ``_text_features``)."""

    def __init__(
        self,
        models: Sequence[str],
        l2: float = 1.0,
        featurize: Callable[[Sequence[Problem]], np.ndarray] = _text_features,
    ):
        if len(models) < 1 or len(set(models)) != len(models):
            raise ValueError(f"LogisticRouter needs distinct model names, got {list(models)}")
        if l2 <= 0:
            raise ValueError(f"LogisticRouter: l2 must be > 0, got {l2}")
        self.models = tuple(models)
        self.l2 = l2
        self.featurize = featurize
        self.weights: np.ndarray | None = None  # (num_features + 1, num_models)
        self._scale: tuple[np.ndarray, np.ndarray] | None = None

    def _design(self, problems: Sequence[Problem]) -> np.ndarray:
        x = np.asarray(self.featurize(problems), dtype=np.float64)
        mean, std = self._scale
        return np.hstack([(x - mean) / std, np.ones((len(x), 1))])

    def fit(self, problems: Sequence[Problem], correct: np.ndarray) -> LogisticRouter:
        """``correct[i, j]`` = 1 when model ``models[j]`` answered ``problems[i]`` correctly."""
        correct = np.asarray(correct, dtype=np.float64)
        if correct.shape != (len(problems), len(self.models)):
            raise ValueError(
                f"correct must have shape (num_problems, num_models) = {(len(problems), len(self.models))}, "
                f"got {correct.shape}"
            )
        x = np.asarray(self.featurize(problems), dtype=np.float64)
        self._scale = (x.mean(axis=0), x.std(axis=0) + 1e-6)
        design = self._design(problems)
        columns = [_fit_logistic(design, correct[:, j], self.l2) for j in range(len(self.models))]
        self.weights = np.stack(columns, axis=1)
        return self

    def predict(self, problems: Sequence[Problem]) -> np.ndarray:
        """Predicted correctness, shape ``(len(problems), len(models))``."""
        if self.weights is None:
            raise RuntimeError("LogisticRouter.predict called before fit")
        return _sigmoid(self._design(problems) @ self.weights)


def route(probs: np.ndarray, anchor: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's chosen model index and router margin.

    With ``anchor=None`` the choice is the row's argmax and the margin ``p_top1 - p_top2``; with a
    fixed anchor index the choice is the anchor and the margin ``p_anchor - max_{j != anchor} p_j``
    (negative when the router prefers another model). One model alone gives a margin of 0.
    """
    probs = np.asarray(probs, dtype=np.float64)
    choice = probs.argmax(axis=1) if anchor is None else np.full(len(probs), anchor)
    if probs.shape[1] < 2:
        return choice, np.zeros(len(probs))
    chosen = probs[np.arange(len(probs)), choice]
    others = probs.copy()
    others[np.arange(len(probs)), choice] = -np.inf
    return choice, chosen - others.max(axis=1)
