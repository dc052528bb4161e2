"""The collaboration protocols ``councilzoo eval`` compares, each built from one agents config.

A protocol is a function ``(ev) -> ProtocolResult`` of an ``EvaluationContext`` (context.py,
implemented by the harness's ``Evaluation``), which plays episodes, caches each protocol's result
and holds the test and dev problems. All protocols are played in two games, so their costs are
counted by the same code:

| protocol              | game          | what happens                                              |
|-----------------------|---------------|-----------------------------------------------------------|
| single                | escalation-v0 | the anchor answers once; ACCEPT                           |
| self_consistency      | escalation-v0 | the anchor draws ``samples`` answers; plurality; ACCEPT   |
| routing               | escalation-v0 | the router's top model answers once; ACCEPT               |
| always_verify         | escalation-v0 | anchor once, peer probe, verifier adjudicates; always     |
| debate                | debate-v0     | Du et al. dense debate: every debater, every round        |
| comed                 | escalation-v0 | anchor with ``samples``; ComedController (dev-fitted)     |
| comed_learned         | escalation-v0 | COMED's anchor; logistic expected-utility gate (dev)      |
| comed_regret          | escalation-v0 | COMED's anchor; regret matching over signal cells (dev)   |
| best_single_hindsight | (oracle)      | the pool model with the best *test* accuracy              |
| oracle_gate           | (oracle)      | COMED's anchor; escalate to dense debate iff that rescues |

Draws are shared where a protocol's paths are counterfactuals of one another (common random
numbers): on dev, the runs that observe COMED's escalation paths replay the anchor's samples and
the probe's answer of the first run, so every path of a problem starts from one anchor draw; on
test, COMED's gates replay self-consistency's anchor samples (``Evaluation.anchor_draws``), so
gates, self-consistency and their rescue/harm are compared on the same draws. A replayed turn
keeps its calls and tokens: the protocol still pays for it.

The router, COMED's thresholds and the learned gates (``councilzoo.agents.controllers.learned_gates``) are
fitted on the dev problems only (``Evaluation`` asserts that dev and test ids are disjoint). The
dev margins they see are out-of-fold (2-fold cross-fitting), so they are as noisy as the test
margins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from councilzoo.agents.base import Agent
from councilzoo.agents.controllers import Controller, FixedController
from councilzoo.agents.controllers.comed_gate import (
    ACCEPT,
    DIRECT_ESCALATE,
    PROBE_ACCEPT,
    PROBE_ESCALATE,
    PROBE_VERIFY,
    ComedController,
    ComedThresholds,
    GateOutcomes,
    fit_thresholds,
)
from councilzoo.agents.controllers.learned_gates import (
    LearnedGateController,
    LogisticGate,
    RegretGate,
    anchor_turn,
    dev_scores,
    gate_features,
)
from councilzoo.envs.types import Action, EpisodeRecord, Mode, Turn, TurnContext
from councilzoo.evaluation import metrics
from councilzoo.evaluation.context import EvaluationContext, Run
from councilzoo.evaluation.metrics import ProtocolResult
from councilzoo.evaluation.router import LogisticRouter, route
from councilzoo.tasks import Problem

__all__ = [
    "DEV_GATES", "replayed_action", "fit_router", "single", "model_alone", "anchor_draws", "self_consistency",
    "routing", "always_verify", "debate", "gate_outcomes", "comed_dev_outcomes", "comed_thresholds", "comed",
    "comed_learned", "comed_regret", "best_single_hindsight", "oracle_gate", "DEV_FITTED", "PROTOCOLS",
]

ESCALATION, DEBATE = "councilzoo/escalation-v0", "councilzoo/debate-v0"
# Scripted gates used on dev to observe every path of the COMED rule (see ``gate_outcomes``).
DEV_GATES = {
    "probe_verify": ComedThresholds(tau_accept=np.inf, tau_direct=0.0, tau_escalate=0.0),
    "probe_escalate": ComedThresholds(tau_accept=np.inf, tau_direct=0.0, tau_escalate=np.inf),
    "escalate": ComedThresholds(tau_accept=np.inf, tau_direct=np.inf, tau_escalate=np.inf),
}


class _ControllerSeat:
    """A mode-only controller seated as an Agent (its actions are silent)."""

    def __init__(self, controller: Controller):
        self.controller = controller

    def act(self, contexts: list[TurnContext]) -> list[Action]:
        return [Action(mode) for mode in self.controller.choose(contexts)]


class _RoutedAgent:
    """Plays each turn with the model named by ``problem.metadata["route"]`` (one batch per model)."""

    def __init__(self, models: dict[str, Agent]):
        self.models = models

    def act(self, contexts: list[TurnContext]) -> list[Action]:
        out: list[Action | None] = [None] * len(contexts)
        for name, model in self.models.items():
            idx = [i for i, c in enumerate(contexts) if c.problem.metadata.get("route") == name]
            for i, action in zip(idx, model.act([contexts[i] for i in idx]) if idx else [], strict=True):
                out[i] = action
        missing = [contexts[i].problem.id for i, a in enumerate(out) if a is None]
        if missing:
            raise ValueError(f"RoutedAgent: problems {missing[:5]} carry no route among {list(self.models)}")
        return out


class _Replayed:
    """Plays the recorded turns of ``records`` for ``roles`` (the same problem, the same role) and
    leaves every other turn to ``agent``: a draw shared by runs whose paths are compared."""

    def __init__(self, agent: Agent, records: list[EpisodeRecord], roles: tuple[str, ...]):
        self.agent = agent
        self.turns = {(r.problem_id, t.role): t for r in records for t in r.turns if t.role in roles}

    def act(self, contexts: list[TurnContext]) -> list[Action]:
        out: list[Action | None] = [None] * len(contexts)
        live = []
        for i, ctx in enumerate(contexts):
            turn = self.turns.get((ctx.problem.id, ctx.role))
            if turn is None:
                live.append(i)
            else:
                out[i] = replayed_action(turn)
        for i, action in zip(live, self.agent.act([contexts[i] for i in live]) if live else [], strict=True):
            out[i] = action
        return out


def replayed_action(turn: Turn) -> Action:
    """The action that makes the env write ``turn`` again: its texts, parsed answer, cut flags
    and cost."""
    return Action(
        turn.mode, turn.text, turn.samples, turn.answer, turn.verdict, turn.cost.prompt_tokens,
        turn.cost.completion_tokens, turn.cost.calls, turn.truncated, turn.samples_truncated,
    )


def _escalation_run(
    ev: EvaluationContext, anchor: Agent, gate: Agent, samples: int,
    replay: list[EpisodeRecord] | None = None, probe: bool = False,
) -> Run:
    """An escalation-v0 batch; ``replay``: records whose anchor turns (and probe turns, ``probe``)
    are played again instead of drawn."""
    council, models = ev.council, ev.models
    agents = {"anchor": anchor, "controller": gate, "verifier": models[council.verifier]}
    agents |= {f"peer_{i}": models[name] for i, name in enumerate(council.peers)}
    if replay is not None:
        agents["anchor"] = _Replayed(anchor, replay, ("anchor",))
        if probe:
            agents[ev.probe_seat] = _Replayed(agents[ev.probe_seat], replay, ("probe",))
    kwargs = dict(num_peers=len(council.peers), debate_rounds=council.debate_rounds, anchor_samples=samples)
    return Run(ESCALATION, kwargs, agents)


def _with_routes(
    problems: list[Problem], probs: np.ndarray, pool: list[str], anchor: str | None
) -> list[Problem]:
    """Copies of ``problems`` carrying the router's choice (``route``) and ``router_margin``."""
    choice, margin = route(probs, None if anchor is None else pool.index(anchor))
    return [
        replace(p, metadata={**p.metadata, "route": pool[int(c)], "router_margin": float(m)})
        for p, c, m in zip(problems, choice, margin, strict=True)
    ]


def _correct(records: list[EpisodeRecord]) -> np.ndarray:
    return np.array([bool(r.correct) for r in records])


# ---- router ----------------------------------------------------------------------------------
def fit_router(ev: EvaluationContext) -> tuple[LogisticRouter, np.ndarray]:
    """The router fitted on all dev problems, and out-of-fold dev predictions (2-fold)."""
    pool = ev.council.router_pool
    correct = np.stack([ev.dev_single(name).correct for name in pool], axis=1)
    dev = ev.dev
    router = LogisticRouter(pool).fit(dev, correct)
    folds = np.arange(len(dev)) % 2
    oof = np.zeros_like(correct, dtype=float)
    for k in (0, 1):
        train, held = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
        part = LogisticRouter(pool).fit([dev[i] for i in train], correct[train])
        oof[held] = part.predict([dev[i] for i in held])
    return router, oof


# ---- protocols -------------------------------------------------------------------------------
def _accepted(
    ev: EvaluationContext, run_name: str, anchor: Agent, samples: int, problems: list[Problem], label: str
) -> list[EpisodeRecord]:
    """Episodes where the gate always ACCEPTs: the anchor alone, with ``samples`` samples."""
    gate = _ControllerSeat(FixedController(Mode.ACCEPT))
    return ev.play(run_name, _escalation_run(ev, anchor, gate, samples), problems, label)


def single(ev: EvaluationContext) -> ProtocolResult:
    records = _accepted(ev, "single", ev.models[ev.council.anchor], 1, ev.test, "single · test")
    return metrics.from_escalation("single", records, note=f"anchor {ev.council.anchor!r}, one sample")


def model_alone(
    ev: EvaluationContext, name: str, problems: list[Problem], run_name: str, label: str
) -> ProtocolResult:
    """Model ``name`` answering ``problems`` once, alone (router data; the hindsight oracle)."""
    return metrics.from_escalation(name, _accepted(ev, run_name, ev.models[name], 1, problems, label))


def anchor_draws(ev: EvaluationContext) -> list[EpisodeRecord]:
    """The anchor's ``samples`` samples on every test problem (self-consistency's episodes, whose
    anchor turns COMED's gates replay)."""
    anchor = ev.models[ev.council.anchor]
    return _accepted(ev, "self_consistency", anchor, ev.council.samples, ev.test, "anchor samples · test")


def self_consistency(ev: EvaluationContext) -> ProtocolResult:
    note = f"plurality of {ev.council.samples} anchor samples"
    return metrics.from_escalation("self_consistency", ev.anchor_draws, note=note)


def routing(ev: EvaluationContext) -> ProtocolResult:
    pool = ev.council.router_pool
    problems = _with_routes(ev.test, ev.router.predict(ev.test), pool, None)
    anchor = _RoutedAgent({name: ev.models[name] for name in pool})
    records = _accepted(ev, "routing", anchor, 1, problems, "routing · test")
    return metrics.from_escalation("routing", records, note=f"logistic router over {pool}")


def always_verify(ev: EvaluationContext) -> ProtocolResult:
    gate = _ControllerSeat(FixedController(Mode.VERIFY))
    run = _escalation_run(ev, ev.models[ev.council.anchor], gate, 1)
    records = ev.play("always_verify", run, ev.test, "always_verify · test")
    return metrics.from_escalation("always_verify", records, note="peer probe + verifier on every question")


def debate(ev: EvaluationContext) -> ProtocolResult:
    debaters = ev.council.debaters
    run = Run(
        DEBATE,
        dict(num_agents=len(debaters), rounds=ev.council.debate_rounds),
        {f"peer_{i}": ev.models[name] for i, name in enumerate(debaters)},
    )
    records = ev.play("debate", run, ev.test, "debate · test")
    note = f"Du et al. dense debate: {len(debaters)} agents x {ev.council.debate_rounds} rounds"
    return metrics.from_dense("debate", records, ev.result("single"), note=note)


def _comed_problems(ev: EvaluationContext, split: str) -> list[Problem]:
    """``split``'s problems with router choices and margins (dev: out-of-fold) when a router exists."""
    council, problems = ev.council, ev.dev if split == "dev" else ev.test
    if len(council.router_pool) < 2:
        return problems
    probs = ev.router_oof if split == "dev" else ev.router.predict(problems)
    return _with_routes(
        problems, probs, council.router_pool, None if council.comed.routed_anchor else council.anchor
    )


def _comed_anchor(ev: EvaluationContext) -> Agent:
    if ev.council.comed.routed_anchor:
        return _RoutedAgent({name: ev.models[name] for name in ev.council.router_pool})
    return ev.models[ev.council.anchor]


def gate_outcomes(ev: EvaluationContext, problems: list[Problem], unit: str = "calls") -> GateOutcomes:
    """Every path's outcome and cost on ``problems`` (dev), from three scripted runs.

    ``unit`` is "calls" or "ktokens" (thousands of decoded tokens). The probe_verify run gives
    the signals, anchor, probe and adjudication; probe_escalate run: debate after a
    disagreeing probe; escalate run: debate straight from the gate. The last two replay the first
    run's anchor samples (and probe answer), so a problem's paths are counterfactuals of one draw.
    Paths a rule never takes on a problem (e.g. verifying after an agreeing probe) are scored but
    never chosen by ``gate_paths``.
    """
    samples, anchor = ev.council.samples, _comed_anchor(ev)

    def play(name: str, replay: list[EpisodeRecord] | None = None, probe: bool = False):
        run = _escalation_run(ev, anchor, ComedController(DEV_GATES[name]), samples, replay, probe)
        return ev.play(f"dev_comed_{name}", run, problems, f"dev fit · comed {name}")

    first = play("probe_verify")
    runs = {"probe_escalate": play("probe_escalate", first, probe=True), "escalate": play("escalate", first)}

    def cost(records: list[EpisodeRecord], agent: str | None = None) -> np.ndarray:
        c = metrics.costs(records, agent)
        return c[:, 0] if unit == "calls" else c[:, 1] / 1000.0

    anchor_ok = np.array([bool(r.info["anchor_correct"]) for r in first])
    agrees = np.array([bool(r.info["probe_agrees"]) for r in first])
    probe_cost = cost(first, "anchor") + cost(first, ev.probe_seat)
    correct = np.zeros((len(first), 5), dtype=bool)
    costs = np.zeros((len(first), 5))
    correct[:, ACCEPT], costs[:, ACCEPT] = anchor_ok, cost(first, "anchor")
    correct[:, PROBE_ACCEPT], costs[:, PROBE_ACCEPT] = anchor_ok, probe_cost
    correct[:, PROBE_VERIFY], costs[:, PROBE_VERIFY] = _correct(first), cost(first)
    correct[:, PROBE_ESCALATE], costs[:, PROBE_ESCALATE] = (
        _correct(runs["probe_escalate"]),
        cost(runs["probe_escalate"]),
    )
    correct[:, DIRECT_ESCALATE], costs[:, DIRECT_ESCALATE] = (
        _correct(runs["escalate"]),
        cost(runs["escalate"]),
    )
    margins = [r.info.get("router_margin") for r in first]
    pairs = zip(problems, first, strict=True)
    features = np.stack([gate_features(p, anchor_turn(r.turns)) for p, r in pairs])
    return GateOutcomes(
        consistency=np.array([r.info["consistency"] for r in first], dtype=float),
        margin=np.array([0.0 if m is None else m for m in margins], dtype=float),
        margin_present=np.array([m is not None for m in margins]),
        probe_agrees=agrees,
        correct=correct,
        cost=costs,
        features=features,
    )


def comed_dev_outcomes(ev: EvaluationContext) -> GateOutcomes:
    """``gate_outcomes`` on COMED's dev problems, in ``ComedSettings.cost_unit``."""
    return gate_outcomes(ev, _comed_problems(ev, "dev"), ev.council.comed.cost_unit)


def comed_thresholds(ev: EvaluationContext) -> tuple[ComedThresholds, dict[str, float]]:
    """COMED's thresholds fitted on the dev split (see ``ComedSettings``)."""
    settings = ev.council.comed
    return fit_thresholds(ev.comed_outcomes, settings.lam, settings.target_escalation_rate)


def _gated(ev: EvaluationContext, name: str, controller: Agent, note: str, extra: dict) -> ProtocolResult:
    """A dev-fitted gate on the test problems, with COMED's anchor (self-consistency's samples
    replayed, unless the anchor is routed) and the share of each path."""
    replay = None if ev.council.comed.routed_anchor else ev.anchor_draws
    run = _escalation_run(ev, _comed_anchor(ev), controller, ev.council.samples, replay)
    records = ev.play(name, run, _comed_problems(ev, "test"), f"{name} · test")
    paths = [r.info["path"] for r in records]
    extra = {**extra, "paths": {p: paths.count(p) / len(paths) for p in sorted(set(paths))}}
    anchor = "routed" if ev.council.comed.routed_anchor else repr(ev.council.anchor)
    note = f"{anchor} anchor x {ev.council.samples} samples; {note} on {len(ev.dev)} dev problems"
    return metrics.from_escalation(name, records, note=note, extra=extra)


def comed(ev: EvaluationContext) -> ProtocolResult:
    thresholds, scores = ev.comed_fit
    extra = {"thresholds": thresholds.to_dict(), "dev_scores": scores}
    return _gated(ev, "comed", ComedController(thresholds), "thresholds fitted", extra)


def _learned(ev: EvaluationContext, name: str, gate: LogisticGate | RegretGate, note: str) -> ProtocolResult:
    outcomes = ev.comed_outcomes
    gate.fit(outcomes)
    extra = {"dev_scores": dev_scores(gate, outcomes)}
    return _gated(ev, name, LearnedGateController(gate), note, extra)


def comed_learned(ev: EvaluationContext) -> ProtocolResult:
    gate = LogisticGate(ev.council.comed.lam)
    return _learned(ev, "comed_learned", gate, "logistic expected-utility gate fitted")


def comed_regret(ev: EvaluationContext) -> ProtocolResult:
    gate = RegretGate(ev.council.comed.lam, seed=ev.seed)
    return _learned(ev, "comed_regret", gate, "regret-matching gate over signal cells fitted")


def best_single_hindsight(ev: EvaluationContext) -> ProtocolResult:
    singles = {name: ev.test_single(name) for name in ev.council.router_pool}
    return metrics.best_single_in_hindsight(singles, ev.result("single"))


def oracle_gate(ev: EvaluationContext) -> ProtocolResult:
    return metrics.oracle_gate(ev.result("comed"), ev.result("debate"))


# Protocols fitted on the dev problems, directly or through COMED's fit: their dev set is loaded and
# checked before the first episode.
DEV_FITTED = ("routing", "comed", "comed_learned", "comed_regret", "oracle_gate")
PROTOCOLS: dict[str, Callable[[EvaluationContext], ProtocolResult]] = {
    "single": single,
    "self_consistency": self_consistency,
    "routing": routing,
    "always_verify": always_verify,
    "debate": debate,
    "comed": comed,
    "comed_learned": comed_learned,
    "comed_regret": comed_regret,
    "best_single_hindsight": best_single_hindsight,
    "oracle_gate": oracle_gate,
}
