"""Learned escalation gates for COMED: the same decision as ``ComedController``, fitted, not hand-set.

COMED's rule compares three signals to five thresholds. The gates here read a few more cheap
signals (``FEATURES``: none needs the gold answer) and are fitted on the dev split's
``GateOutcomes``, which hold every path's outcome and cost per dev problem. Both decide in the
game's two steps, each among three actions ordered cheap to dear (ties go to the cheaper):

    at the gate:                 accept | probe (peer probe) | escalate (debate)
    after a disagreeing probe:   accept | verify (adjudication) | escalate (debate)

An agreeing probe is accepted, as in COMED's rule (the dev runs do not observe anything else
there). The utility of a path on a problem is ``correct - lam * cost``.

- ``LogisticGate``: numpy logistic regressions of each path's correctness on the features (and of
  the probe agreeing); it takes the action of highest expected utility. Escalating rather than
  accepting is thus chosen when the predicted rescue-minus-harm ``P(collab right) - P(anchor
  right)`` exceeds ``lam`` times the extra cost. The probe's value is the expectation over the
  probe's outcome of the best action after it.
- ``RegretGate``: TRACER's controller game on COMED's decision. Each cell of discretised signals
  is an information state of a ``RegretMatcher`` (states for the gate and for after a disagreeing
  probe); a state's action values are its dev problems' mean utilities (the probe's through the
  post-probe states' current policies). The average policy's most likely action is the gate; a
  cell no dev problem fell in uses the pooled state of all dev problems.

``LearnedGateController`` seats either gate as escalation-v0's controller.
"""

from __future__ import annotations

import re
from typing import Protocol

import numpy as np

from councilzoo.agents.controllers import comed_gate
from councilzoo.envs.escalation_v0 import PROBE_AGREES, PROBE_DONE, router_margin
from councilzoo.envs.types import Action, Mode, Turn, TurnContext
from councilzoo.tasks import Problem, answers_for
from councilzoo.tasks.grading import answer_groups
from councilzoo.theory.regret_matching import RegretMatcher

__all__ = [
    "FEATURES", "MODES", "anchor_turn", "gate_features", "Gate", "utilities", "learned_paths",
    "dev_scores", "LogisticGate", "RegretGate", "LearnedGateController",
]

FEATURES = (
    "anchor_consistency",  # share of the anchor's samples agreeing with their plurality
    "anchor_entropy",  # entropy (nats) of the anchor's answers; no answer counts as one more answer
    "router_margin",  # 0 when absent
    "has_router_margin",
    "log_words",  # log(1 + words in the question)
    "numbers",  # numbers in the question (a step-count proxy for word problems)
)
MODES = (Mode.ACCEPT, Mode.VERIFY, Mode.ESCALATE)  # action k of either step plays MODES[k]
AFTER_PROBE_PATHS = (comed_gate.PROBE_ACCEPT, comed_gate.PROBE_VERIFY, comed_gate.PROBE_ESCALATE)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def anchor_turn(turns: tuple[Turn, ...] | list[Turn]) -> Turn:
    """The anchor's turn of an escalation-v0 transcript."""
    return next(t for t in turns if t.role == "anchor")


def gate_features(problem: Problem, anchor: Turn) -> np.ndarray:
    """``FEATURES`` of one problem from its anchor turn: the same code on dev records and at test."""
    answers = (
        answers_for(problem, anchor.samples, truncated=anchor.spoken()[1]) if anchor.samples
        else [anchor.answer]
    )
    counts = np.array([c for _, c in answer_groups(answers, problem.kind)] + [answers.count(None)], float)
    share = counts / len(answers)
    share = share[share > 0]
    margin = router_margin(problem)
    return np.array(
        [
            counts[:-1].max(initial=0.0) / len(answers),
            float(-(share * np.log(share)).sum()),
            margin or 0.0,
            margin is not None,
            np.log1p(len(problem.question.split())),
            len(_NUMBER.findall(problem.question)),
        ]
    )


class Gate(Protocol):
    """What the controller asks a fitted gate: per problem, a score of each action of each step
    (``(n, 3)``; the highest is played): expected utilities, or the average policy."""

    def gate_scores(self, x: np.ndarray) -> np.ndarray: ...

    def after_probe_scores(self, x: np.ndarray) -> np.ndarray: ...


def utilities(outcomes: comed_gate.GateOutcomes, lam: float) -> np.ndarray:
    """``correct - lam * cost`` of every path on every dev problem, ``(n, 5)``."""
    return outcomes.correct - lam * outcomes.cost


def learned_paths(gate: Gate, x: np.ndarray, probe_agrees: np.ndarray) -> np.ndarray:
    """The path code (``PATH_NAMES``) ``gate`` takes on each problem (dev scoring, tests)."""
    first = gate.gate_scores(x).argmax(axis=1)
    second = np.asarray(AFTER_PROBE_PATHS)[gate.after_probe_scores(x).argmax(axis=1)]
    return comed_gate.route(first == 0, first == 2, probe_agrees, second)


def dev_scores(gate: Gate, outcomes: comed_gate.GateOutcomes) -> dict[str, float]:
    """The gate's accuracy, mean cost and escalation rate on the dev problems it was fitted on."""
    paths = learned_paths(gate, outcomes.features, outcomes.probe_agrees)
    rows = np.arange(len(paths))
    return {
        "accuracy": float(outcomes.correct[rows, paths].mean()),
        "cost": float(outcomes.cost[rows, paths].mean()),
        "escalation_rate": float(
            np.isin(paths, (comed_gate.PROBE_ESCALATE, comed_gate.DIRECT_ESCALATE)).mean()
        ),
    }


# ---- logistic gate ---------------------------------------------------------------------------
def _fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 25) -> np.ndarray:
    """Weights (bias last) of an L2-penalised logistic regression, by Newton's method.

    The penalty (not on the bias) keeps the fit finite when a class is absent or separable.
    """
    a = np.c_[x, np.ones(len(x))]
    penalty = l2 * np.diag([1.0] * x.shape[1] + [1e-6])
    w = np.zeros(a.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-a @ w))
        grad = a.T @ (p - y) + penalty @ w
        hess = (a * (p * (1 - p))[:, None]).T @ a + penalty
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def _predict_logistic(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(x @ w[:-1] + w[-1])))


class LogisticGate:
    """Expected-utility gate from logistic models of each path's correctness (module docstring)."""

    def __init__(self, lam: float = 0.02, l2: float = 1.0):
        self.lam, self.l2 = lam, l2

    def fit(self, outcomes: comed_gate.GateOutcomes) -> LogisticGate:
        x, agrees = outcomes.features, outcomes.probe_agrees.astype(bool)
        self.mean, self.scale = x.mean(axis=0), x.std(axis=0) + 1e-9
        z = self._z(x)

        def model(path: int, rows: np.ndarray) -> tuple[np.ndarray, float]:
            rows = rows if rows.any() else np.ones_like(rows)  # no such dev problem: pool them all
            w = _fit_logistic(z[rows], outcomes.correct[rows, path].astype(float), self.l2)
            return w, float(outcomes.cost[rows, path].mean())

        everyone = np.ones(len(x), dtype=bool)
        self.agree = _fit_logistic(z, agrees.astype(float), self.l2)
        self.gate_models = [model(comed_gate.ACCEPT, everyone), model(comed_gate.DIRECT_ESCALATE, everyone)]
        self.agreed_model = model(comed_gate.PROBE_ACCEPT, agrees)
        self.after_models = [model(path, ~agrees) for path in AFTER_PROBE_PATHS]
        return self

    def _z(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, float) - self.mean) / self.scale

    def _values(self, models: list[tuple[np.ndarray, float]], z: np.ndarray) -> np.ndarray:
        return np.stack([_predict_logistic(w, z) - self.lam * cost for w, cost in models], axis=1)

    def after_probe_scores(self, x: np.ndarray) -> np.ndarray:
        return self._values(self.after_models, self._z(x))

    def gate_scores(self, x: np.ndarray) -> np.ndarray:
        z = self._z(x)
        q = _predict_logistic(self.agree, z)
        probe = q * self._values([self.agreed_model], z)[:, 0] + (1 - q) * self.after_probe_scores(x).max(1)
        accept, escalate = self._values(self.gate_models, z).T
        return np.stack([accept, probe, escalate], axis=1)


# ---- regret-matching gate --------------------------------------------------------------------
class _Cells:
    """Discretised signals: per feature, bins at the dev quartiles (edges fitted on dev only)."""

    def __init__(self, x: np.ndarray, columns: tuple[int, ...]):
        self.columns = columns
        self.edges = [np.unique(np.quantile(x[:, c], [0.25, 0.5, 0.75])) for c in columns]
        self.shape = tuple(len(e) + 1 for e in self.edges)
        self.size = int(np.prod(self.shape))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, float))
        bins = [np.digitize(x[:, c], e) for c, e in zip(self.columns, self.edges, strict=True)]
        return np.ravel_multi_index(bins, self.shape)


# The regret gate's cells: consistency, entropy and router margin (the question's words and
# numbers would split the few dev problems into too many cells).
REGRET_COLUMNS = tuple(FEATURES.index(f) for f in ("anchor_consistency", "anchor_entropy", "router_margin"))


def _cell_means(cells: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Mean of ``values`` rows per cell, ``(size + 1, 3)``; the last row pools every problem."""
    sums = np.zeros((size, values.shape[1]))
    np.add.at(sums, cells, values)
    counts = np.bincount(cells, minlength=size)[:, None]
    means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    return np.vstack([means, values.mean(axis=0) if len(values) else np.zeros(values.shape[1])])


class RegretGate:
    """Regret matching over discretised signal cells (module docstring)."""

    def __init__(self, lam: float = 0.02, iterations: int = 2000, seed: int = 0):
        self.lam, self.iterations, self.seed = lam, iterations, seed

    def fit(self, outcomes: comed_gate.GateOutcomes) -> RegretGate:
        x, agrees = outcomes.features, outcomes.probe_agrees.astype(bool)
        u = utilities(outcomes, self.lam)
        self.cells = _Cells(x, REGRET_COLUMNS)
        n_states = self.cells.size + 1  # + the pooled state
        cell = self.cells(x)
        self.seen_gate = np.r_[np.bincount(cell, minlength=self.cells.size) > 0, True]
        self.seen_after = np.r_[np.bincount(cell[~agrees], minlength=self.cells.size) > 0, True]
        after = _cell_means(cell[~agrees], u[~agrees][:, AFTER_PROBE_PATHS], self.cells.size)
        gate = RegretMatcher(n_states, 3, averaging="linear", seed=self.seed)
        self.after = RegretMatcher(n_states, 3, averaging="linear", seed=self.seed)
        pooled = np.full(len(x), self.cells.size)
        for _ in range(self.iterations):
            self.after.update(None, after)
            # the probe's utility on a dev problem: accept if the probe agrees, else play the
            # current post-probe policy of the problem's cell (or the pooled one if unseen)
            sigma = self.after.strategy(np.where(self.seen_after[cell], cell, pooled))
            probe = np.where(agrees, u[:, comed_gate.PROBE_ACCEPT], (sigma * u[:, AFTER_PROBE_PATHS]).sum(1))
            values = np.c_[u[:, comed_gate.ACCEPT], probe, u[:, comed_gate.DIRECT_ESCALATE]]
            gate.update(None, _cell_means(cell, values, self.cells.size))
        self.gate = gate
        return self

    def _policy(self, matcher, seen: np.ndarray, x: np.ndarray) -> np.ndarray:
        cell = self.cells(x)
        return matcher.average_strategy(np.where(seen[cell], cell, self.cells.size))

    def gate_scores(self, x: np.ndarray) -> np.ndarray:
        return self._policy(self.gate, self.seen_gate, x)

    def after_probe_scores(self, x: np.ndarray) -> np.ndarray:
        return self._policy(self.after, self.seen_after, x)


# ---- the controller --------------------------------------------------------------------------
class LearnedGateController:
    """Escalation-v0's controller playing a fitted ``Gate``: ``choose(contexts) -> modes``."""

    def __init__(self, gate: Gate):
        self.gate = gate

    def _mode(self, context: TurnContext) -> Mode:
        f = np.asarray(context.features, dtype=float)
        x = gate_features(context.problem, anchor_turn(context.transcript))[None]
        if f[PROBE_DONE] <= 0.5:
            return MODES[int(self.gate.gate_scores(x).argmax())]
        if f[PROBE_AGREES] > 0.5:
            return Mode.ACCEPT
        return MODES[int(self.gate.after_probe_scores(x).argmax())]

    def choose(self, contexts: list[TurnContext]) -> list[Mode]:
        return [self._mode(c) for c in contexts]

    def act(self, contexts: list[TurnContext]) -> list[Action]:
        return [Action(mode) for mode in self.choose(contexts)]
