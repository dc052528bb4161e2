"""Escalation-gate properties: strategies for COMED's signals and dev tables, and ``check_gate``.

A gate decides twice in ``councilzoo/escalation-v0`` (docs/comed.md): after the anchor (ACCEPT,
VERIFY = run the peer probe, ESCALATE = debate) and, when it probed, after the probe (ACCEPT,
VERIFY = one adjudication, ESCALATE). ``check_gate`` plays the real game on generated signals
(the anchor's samples, the router margin, the probe's answer) and asks the gate at both steps:

- every decision is one of the env's legal modes;
- for each signal named in ``monotone``, raising it (all else equal) never makes a decision
  dearer (ACCEPT < VERIFY < ESCALATE), at the gate nor after a disagreeing probe. COMED's rule
  claims this for ``anchor_consistency`` and ``router_margin`` (its thresholds are lower bounds
  for accepting and upper bounds for escalating); the learned gates claim no monotonicity.

The after-probe step is asked in the states the gate itself reaches (it chose VERIFY at the
gate), or, with ``after_probe="all"``, in every state (the checker plays VERIFY at the gate).
Before the random examples, every profile tries ``boundary_cases``: each signal raised to its top
(every sample agreeing, a margin of 1) from just below it, the middle and the bottom, where a gate
that turns on its most confident anchors shows, and which a few random draws rarely reach.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from councilzoo.agents.controllers.comed_gate import GateOutcomes
from councilzoo.agents.controllers.learned_gates import FEATURES, LearnedGateController
from councilzoo.envs.escalation_v0 import raw_env
from councilzoo.envs.types import Action, Mode, TurnContext
from councilzoo.tasks import Problem
from councilzoo.testing.falsify import falsify

__all__ = ["GateSignals", "gate_signals", "raised", "GateCase", "gate_outcomes", "check_gate"]

PRICE = {Mode.ACCEPT: 0, Mode.VERIFY: 1, Mode.ESCALATE: 2}  # cheap to dear
MONOTONE_SIGNALS = ("anchor_consistency", "router_margin")
AFTER_PROBE = ("reached", "all")
_DISAGREE = "-1"  # never among the anchor's answers


@dataclass(frozen=True)
class GateSignals:
    """One problem's signals: ``agreeing`` of the anchor's ``samples`` give its plurality answer
    (the others give distinct wrong ones), the router ``margin`` (None: no router), whether the
    peer probe agrees, and how many numbers the question states."""

    samples: int
    agreeing: int
    margin: float | None
    probe_agrees: bool
    numbers: int = 2


@st.composite
def gate_signals(draw, max_samples: int = 8, router: bool | None = None) -> GateSignals:
    """COMED's signals; ``router`` forces a margin to be present (True) or absent (False)."""
    n = draw(st.integers(1, max_samples))
    present = draw(st.booleans()) if router is None else router
    margin = draw(st.sampled_from([0.0, 0.5, -0.5]) | st.floats(-1.0, 1.0)) if present else None
    return GateSignals(n, draw(st.integers(1, n)), margin, draw(st.booleans()), draw(st.integers(0, 4)))


@st.composite
def raised(draw, signals: GateSignals, signal: str) -> GateSignals:
    """``signals`` with ``signal`` raised and everything else kept (unchanged if at its top)."""
    if signal == "anchor_consistency":
        return replace(signals, agreeing=draw(st.integers(signals.agreeing, signals.samples)))
    if signal == "router_margin":
        low = 0.0 if signals.margin is None else signals.margin
        return replace(signals, margin=draw(st.floats(low, max(low, 1.0))))
    raise ValueError(f"monotone signals must be among {MONOTONE_SIGNALS}, got {signal!r}")


@dataclass(frozen=True)
class GateCase:
    """One example of ``check_gate``: the signals, a raised copy per monotone signal, and the dev
    table the gate is fitted on (None for a gate given fitted)."""

    signals: GateSignals
    raised: dict[str, GateSignals]
    outcomes: GateOutcomes | None


@st.composite
def gate_outcomes(draw, min_problems: int = 3, max_problems: int = 12) -> GateOutcomes:
    """Dev tables for fitting learned gates: ``learned_gates.FEATURES`` per problem, every path's
    correctness, costs increasing from accepting to debating, probes agreeing or not."""
    n = draw(st.integers(min_problems, max_problems))
    column = {  # by name, so a change of FEATURES fails here rather than shifting columns
        "anchor_consistency": st.sampled_from([0.2, 0.4, 0.6, 0.8, 1.0]),
        "anchor_entropy": st.floats(0.0, 1.6),
        "router_margin": st.floats(-1.0, 1.0),
        "has_router_margin": st.sampled_from([0.0, 1.0]),
        "log_words": st.floats(1.0, 4.0),
        "numbers": st.integers(0, 5).map(float),
    }
    x = np.stack([draw(arrays(np.float64, n, elements=column[name])) for name in FEATURES], axis=1)
    margin, present = FEATURES.index("router_margin"), FEATURES.index("has_router_margin")
    x[:, margin] *= x[:, present]  # no router, no margin
    cost = np.array([5.0, 6.0, 7.0, 9.0, 8.0]) + draw(st.floats(0.0, 3.0))
    return GateOutcomes(
        consistency=x[:, FEATURES.index("anchor_consistency")],
        margin=x[:, margin],
        margin_present=x[:, present] > 0,
        probe_agrees=draw(arrays(np.bool_, n)),
        correct=draw(arrays(np.bool_, (n, 5))),
        cost=np.tile(cost, (n, 1)),
        features=x,
    )


# ---- playing the gate in escalation-v0 ---------------------------------------------------------
def _problem(signals: GateSignals) -> Problem:
    numbers = " ".join(str(3 + k) for k in range(signals.numbers))
    metadata = {} if signals.margin is None else {"router_margin": signals.margin}
    question = f"How many in total? {numbers}".strip()
    return Problem("gate-check", question, "7", kind="numeric", metadata=metadata)


def _decide(controller: Any, context: TurnContext, step: str) -> Mode:
    [mode] = controller.choose([context])
    if not isinstance(mode, Mode) or mode not in context.legal_modes:
        raise AssertionError(f"{step}: the gate chose {mode!r}, not one of the legal modes "
                             f"{[m.name for m in context.legal_modes]}")
    return mode


def _play_gate(controller: Any, signals: GateSignals, force_probe: bool = False) -> tuple[Mode, Mode | None]:
    """The gate's decision after the anchor and, if the probe ran, after it (else None); the
    probe runs when the gate chose VERIFY, or always with ``force_probe``."""
    env = raw_env(problems=[_problem(signals)], anchor_samples=signals.samples)
    env.reset(seed=0)
    answers = ["7"] * signals.agreeing + [str(100 + k) for k in range(signals.samples - signals.agreeing)]
    texts = tuple(f"The answer is \\boxed{{{a}}}" for a in answers)
    env.step(Action(Mode.ANSWER, text=texts[0], samples=texts))
    context = env.turn_context("controller")
    first = _decide(controller, context, "after the anchor")
    if first is not Mode.VERIFY and not force_probe:
        return first, None
    env.step(Action(Mode.VERIFY))
    probe = context.extras["anchor_answer"] if signals.probe_agrees else _DISAGREE
    env.step(Action(Mode.ANSWER, text=f"The answer is \\boxed{{{probe}}}"))
    return first, _decide(controller, env.turn_context("controller"), "after the probe")


BOUNDARY_SAMPLES = (1, 2, 3, 5, 8)
BOUNDARY_MARGINS = (-1.0, 0.0, 0.5, 0.9, 0.99)


def boundary_cases(monotone: tuple[str, ...]) -> list[GateCase]:
    """Each monotone signal raised to its top from below it (``BOUNDARY_SAMPLES`` samples, one to
    all but one agreeing; margins from ``BOUNDARY_MARGINS``), with and without a router margin
    (always with one when ``router_margin`` is checked) and an agreeing or disagreeing probe."""
    margins: tuple[float | None, ...] = BOUNDARY_MARGINS
    if "router_margin" not in monotone:
        margins = (None, *margins)
    cases = []
    for n in BOUNDARY_SAMPLES:
        for agreeing in sorted({1, max(1, n // 2), max(1, n - 1)}):
            for margin in margins:
                for probe_agrees in (False, True):
                    base = GateSignals(n, agreeing, margin, probe_agrees)
                    top = {"anchor_consistency": replace(base, agreeing=n),
                           "router_margin": replace(base, margin=1.0)}
                    cases.append(GateCase(base, {signal: top[signal] for signal in monotone}, None))
    return cases


def _controller(gate: Any, outcomes: GateOutcomes | None) -> Any:
    if outcomes is not None:
        gate = gate.fit(outcomes)
    return gate if hasattr(gate, "choose") else LearnedGateController(gate)


def check_gate(
    gate: Any,
    *,
    monotone: tuple[str, ...] = (),
    after_probe: str = "reached",
    fit: bool = False,
    settings: Settings | None = None,
) -> None:
    """Check an escalation gate's decisions (module docstring); raise ``AssertionError`` with a
    shrunk counterexample on the first violation.

    ``gate`` is a controller (``choose(contexts) -> modes``, e.g. ``ComedController``), a fitted
    learned gate (``gate_scores``/``after_probe_scores``, played by ``LearnedGateController``), or
    with ``fit=True`` an unfitted one, fitted (``gate.fit(outcomes)``) on a generated dev table
    per example.
    """
    unknown = set(monotone) - set(MONOTONE_SIGNALS)
    if unknown or after_probe not in AFTER_PROBE:
        raise ValueError(f"monotone must be among {MONOTONE_SIGNALS} (got {sorted(unknown)}) and "
                         f"after_probe one of {AFTER_PROBE} (got {after_probe!r})")
    force = after_probe == "all"

    @st.composite
    def cases(draw) -> GateCase:
        base = draw(gate_signals(router=True if "router_margin" in monotone else None))
        ups = {signal: draw(raised(base, signal)) for signal in monotone}
        return GateCase(base, ups, draw(gate_outcomes()) if fit else None)

    def prop(case: GateCase) -> None:
        base, ups = case.signals, case.raised
        controller = _controller(gate, case.outcomes)
        low = _play_gate(controller, base, force)
        for signal, up in ups.items():
            high = _play_gate(controller, up, force)
            for step, a, b in (("after the anchor", low[0], high[0]), ("after the probe", low[1], high[1])):
                if a is not None and b is not None and PRICE[b] > PRICE[a]:
                    raise AssertionError(f"not monotone in {signal} {step}: {a.name} at {base}, but "
                                         f"the dearer {b.name} at {up}")

    boundaries = boundary_cases(monotone) if monotone and not fit else []  # fit: each case its own table
    falsify("check_gate", cases(), prop, settings, examples=boundaries)
