"""COMED's escalation gate: accept the anchor, verify it with one peer, or escalate to debate.

COMED ("The Missing Middle Between Routing and Collaboration in Multi-LLM Inference") puts a
controller between routing (one model answers) and dense collaboration (every model deliberates
on every question). It reads three cheap signals of the anchor's answer:

- **anchor self-consistency** ``c``: the agreement share of the anchor's n samples;
- **router margin** ``m``: the router's predicted correctness of the anchor minus the best other
  model's (``p_top1 - p_top2`` for a routed anchor); absent when no router is configured;
- **peer probe**: one short call to one peer; does it agree with the anchor?

Decision rule (docs/comed.md, every threshold configurable, ``ComedThresholds``):

    at the gate:   c >= tau_accept and (m >= delta or m absent)    -> ACCEPT
                   c <  tau_direct                                  -> ESCALATE (skip the probe)
                   otherwise                                        -> VERIFY (run the probe)
    after probe:   probe agrees                                     -> ACCEPT
                   c < tau_escalate or (m present and m < delta_escalate)
                                                                    -> ESCALATE (debate among peers)
                   otherwise                                        -> VERIFY (one adjudication)

The second escalation condition is the "predicted positive net gain" of the paper: a router that
rates other models above the anchor predicts that collaboration rescues more than it harms.

Thresholds are fitted on a dev split by ``fit_thresholds``: an exhaustive search over the
observed signal values that maximises ``accuracy - lambda * cost`` or, given a target, the best
accuracy whose escalation rate stays at or below it. The search scores every threshold set from
one table of per-problem outcomes (``GateOutcomes``: the anchor, probe, adjudication and debate
outcome of every dev problem), so it is exact when agents answer a problem the same way on every
run (simulated agents, greedy decoding) and an estimate otherwise. It never sees the test split.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np

from councilzoo.envs.types import Action, Mode, TurnContext

__all__ = [
    "PATH_NAMES", "ComedThresholds", "gate_paths", "route", "ComedController", "GateOutcomes",
    "fit_thresholds",
]

# Path codes, in the order of GateOutcomes' columns.
ACCEPT, PROBE_ACCEPT, PROBE_VERIFY, PROBE_ESCALATE, DIRECT_ESCALATE = range(5)
PATH_NAMES = ("accept", "probe_accept", "probe_verify", "probe_escalate", "escalate")


@dataclass(frozen=True)
class ComedThresholds:
    """The gate's thresholds; the defaults are a sensible unfitted policy for n = 5 samples."""

    tau_accept: float = field(default=1.0, metadata={"help": "consistency from which the gate accepts"})
    delta: float = field(default=0.0, metadata={"help": "router margin needed to accept at the gate"})
    tau_direct: float = field(
        default=0.0, metadata={"help": "consistency below which the gate escalates without probing"}
    )
    tau_escalate: float = field(
        default=0.6, metadata={"help": "after a disagreeing probe: consistency below this escalates"}
    )
    delta_escalate: float = field(
        default=-np.inf, metadata={"help": "after a disagreeing probe: router margin below this escalates"}
    )

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


def gate_paths(
    thresholds: ComedThresholds,
    consistency: np.ndarray,
    margin: np.ndarray,
    margin_present: np.ndarray,
    probe_agrees: np.ndarray,
) -> np.ndarray:
    """The path (``ACCEPT`` ... ``DIRECT_ESCALATE``) the rule takes on each problem; vectorised."""
    t = thresholds
    c, m = np.asarray(consistency, float), np.asarray(margin, float)
    present, agrees = np.asarray(margin_present, bool), np.asarray(probe_agrees, bool)
    accept = (c >= t.tau_accept) & (~present | (m >= t.delta))
    direct = ~accept & (c < t.tau_direct)
    return route(accept, direct, agrees, _after_disagreeing_probe(t, c, m, present))


def _after_disagreeing_probe(
    thresholds: ComedThresholds, consistency: np.ndarray, margin: np.ndarray, margin_present: np.ndarray
) -> np.ndarray:
    """``PROBE_ESCALATE`` where the rule escalates after a disagreeing probe, else ``PROBE_VERIFY``."""
    t, c, m = thresholds, np.asarray(consistency, float), np.asarray(margin, float)
    escalate = (c < t.tau_escalate) | (np.asarray(margin_present, bool) & (m < t.delta_escalate))
    return np.where(escalate, PROBE_ESCALATE, PROBE_VERIFY)


def route(
    accept: np.ndarray, direct: np.ndarray, probe_agrees: np.ndarray, disagreed: np.ndarray
) -> np.ndarray:
    """Path codes from a gate's two decisions, shared by every gate: ``ACCEPT`` where it accepts,
    ``DIRECT_ESCALATE`` where it escalates unprobed, else the probe decides: ``PROBE_ACCEPT`` when
    it agrees, the after-probe path ``disagreed`` (``PROBE_VERIFY`` or ``PROBE_ESCALATE``) when not."""
    probed = np.where(probe_agrees, PROBE_ACCEPT, disagreed)
    return np.where(accept, ACCEPT, np.where(direct, DIRECT_ESCALATE, probed))


class ComedController:
    """The escalation-v0 controller: ``choose(contexts) -> modes`` by the rule above.

    Reads the features by name (``councilzoo.envs.escalation_v0.FEATURE_NAMES``); usable as the
    ``controller`` agent directly (``act`` returns silent actions carrying the modes).
    """

    def __init__(self, thresholds: ComedThresholds | None = None):
        self.thresholds = thresholds or ComedThresholds()
        from councilzoo.envs.escalation_v0 import FEATURE_NAMES

        self._index = {
            name: FEATURE_NAMES.index(name)
            for name in (
                "anchor_consistency",
                "router_margin",
                "has_router_margin",
                "probe_done",
                "probe_agrees",
            )
        }

    def _mode(self, context: TurnContext) -> Mode:
        f = np.asarray(context.features, dtype=float)
        get = {name: f[i] for name, i in self._index.items()}
        signals = (get["anchor_consistency"], get["router_margin"], get["has_router_margin"] > 0.5)
        if get["probe_done"] <= 0.5:  # at the gate
            path = int(gate_paths(self.thresholds, *signals, False))
            mode = {ACCEPT: Mode.ACCEPT, DIRECT_ESCALATE: Mode.ESCALATE}.get(path, Mode.VERIFY)
        else:  # after the probe the after-probe rule alone decides, whatever the gate would have done
            path = int(route(False, False, get["probe_agrees"] > 0.5,
                             _after_disagreeing_probe(self.thresholds, *signals)))
            mode = {PROBE_ACCEPT: Mode.ACCEPT, PROBE_ESCALATE: Mode.ESCALATE}.get(path, Mode.VERIFY)
        if mode not in context.legal_modes:
            raise ValueError(
                f"ComedController chose {mode.name} but the env allows only "
                f"{[m.name for m in context.legal_modes]} (role {context.role!r})"
            )
        return mode

    def choose(self, contexts: list[TurnContext]) -> list[Mode]:
        return [self._mode(c) for c in contexts]

    def act(self, contexts: list[TurnContext]) -> list[Action]:
        return [Action(mode) for mode in self.choose(contexts)]


@dataclass
class GateOutcomes:
    """Per-problem signals and the outcome and cost of every path, on one split (dev).

    ``correct[:, p]`` / ``cost[:, p]``: whether path ``p`` (``PATH_NAMES``) ends correct and what
    the whole episode costs along it (anchor samples and probe included).
    """

    consistency: np.ndarray
    margin: np.ndarray
    margin_present: np.ndarray
    probe_agrees: np.ndarray
    correct: np.ndarray  # (n, 5) bool
    cost: np.ndarray  # (n, 5) float
    features: np.ndarray | None = None  # (n, d): the learned gates' ``learned_gates.FEATURES``

    def evaluate(self, thresholds: ComedThresholds) -> dict[str, float]:
        """Accuracy, mean cost and escalation rate of the rule on these problems."""
        paths = gate_paths(thresholds, self.consistency, self.margin, self.margin_present, self.probe_agrees)
        rows = np.arange(len(paths))
        escalated = (paths == PROBE_ESCALATE) | (paths == DIRECT_ESCALATE)
        return {
            "accuracy": float(self.correct[rows, paths].mean()),
            "cost": float(self.cost[rows, paths].mean()),
            "escalation_rate": float(escalated.mean()),
        }


def _grid(values: np.ndarray, extra: tuple[float, ...]) -> list[float]:
    """Candidate thresholds: every observed value (a rule ``x >= v`` splits there) plus ``extra``."""
    finite = np.asarray(values, float)[np.isfinite(values)]
    quantiles = np.quantile(finite, np.linspace(0, 1, 7)) if finite.size > 8 else finite
    return sorted(set(np.round(quantiles, 6).tolist()) | set(extra))


def fit_thresholds(
    outcomes: GateOutcomes,
    lam: float = 0.02,
    target_escalation_rate: float | None = None,
    objective: Literal["penalised", "target"] | None = None,
) -> tuple[ComedThresholds, dict[str, float]]:
    """The thresholds that maximise ``accuracy - lam * cost`` on ``outcomes`` (or, with
    ``target_escalation_rate``, the best accuracy at or below that escalation rate; ties go to
    the cheaper rule). Returns the thresholds and their dev scores.
    """
    if lam < 0:
        raise ValueError(f"lam must be >= 0, got {lam}")
    if target_escalation_rate is not None and not 0.0 <= target_escalation_rate <= 1.0:
        raise ValueError(f"target_escalation_rate must be in [0, 1], got {target_escalation_rate}")
    objective = objective or ("target" if target_escalation_rate is not None else "penalised")
    present = outcomes.margin_present.astype(bool)
    c_grid = _grid(outcomes.consistency, (0.0, np.inf))
    m_grid = _grid(outcomes.margin[present], (-np.inf, np.inf)) if present.any() else [-np.inf]
    best, best_key, best_scores = None, None, None
    for tau_a, delta, tau_d, tau_e, delta_e in itertools.product(c_grid, m_grid, c_grid, c_grid, m_grid):
        if tau_d > tau_e:  # escalating at the gate below tau_e-level consistency only; prune
            continue
        thresholds = ComedThresholds(tau_a, delta, tau_d, tau_e, delta_e)
        scores = outcomes.evaluate(thresholds)
        if objective == "target":
            if scores["escalation_rate"] > target_escalation_rate + 1e-12:
                continue
            key = (scores["accuracy"], -scores["cost"])
        else:
            key = (scores["accuracy"] - lam * scores["cost"], -scores["cost"])
        if best_key is None or key > best_key:
            best, best_key, best_scores = thresholds, key, scores
    if best is None:
        raise ValueError(f"no threshold setting reaches escalation rate <= {target_escalation_rate}")
    return best, best_scores
