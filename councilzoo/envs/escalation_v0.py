"""
# Escalation (COMED)

Controlled model escalation: an anchor answers, a controller decides whether to ACCEPT, VERIFY
(peer probe, then adjudication) or ESCALATE to a full debate among k peers.

| Creation           | `make("councilzoo/escalation-v0", num_peers=3, debate_rounds=2)`             |
|--------------------|-------------------------------------------------------------------------------|
| Actions            | Discrete(8) mode (+ utterance / samples through `Action`)                     |
| Parallel API       | No                                                                            |
| Agents             | `['anchor', 'controller', 'peer_0', .., 'peer_{k-1}', 'verifier']`            |
| Roles              | `anchor`, `controller`, `peer` (peer_0 acts as `probe` in the probe turn), `verifier` |
| Legal modes        | anchor/probe/verifier: ANSWER; controller: ACCEPT/VERIFY/ESCALATE; peers: as debate |
| Observation        | Dict(transcript=Text, action_mask=Box(int8, 8), features=Box(f32, 9))         |
| Reward             | team: correct - lam * cost; rescue/harm labels in infos                       |

### Flow

1. The anchor ANSWERs with `Action.samples` = its n sampled texts (`anchor_samples`, default 5;
   `text` is the one it commits to; no samples = `text` alone). The anchor's answer is the
   plurality of the samples' answers; its *consistency* is that answer's share.
2. Gate (phase 0), the controller: ACCEPT (final = anchor's answer), VERIFY (run the probe:
   peer_0 in role `probe` ANSWERs once) or ESCALATE.
3. After the probe (phase 1), the controller again: ACCEPT (final = anchor's answer), VERIFY (the
   verifier ANSWERs once, adjudicating between the anchor's and the probe's answers; final = its
   answer, or, when its reply states none (`verifier_stated: false`), the anchor's answer it was
   asked to check (the probe's if the anchor stated none): a silent verifier is no harm) or ESCALATE.
4. ESCALATE runs debate-v0's rules (`DebateRounds`, same tie rule) among the k peers for
   `debate_rounds` rounds; peers see the anchor's answer (and the probe's, if any); round 1 all
   SPEAK, later rounds SPEAK or SKIP; rounds are simultaneous (`upcoming_turns()` lists every
   peer still to act in one). Final = the debate's plurality answer.

Turns before the debate are round 0; debate turns carry their debate round 1..R.
The router margin (COMED's p_top1 - p_top2) comes with the problem as
`problem.metadata["router_margin"]` when a router was used.

### Observation space

`features` (`FEATURE_NAMES`), the controller's information state:

| index | name               | meaning                                                           |
|-------|--------------------|-------------------------------------------------------------------|
| 0     | phase              | 0 = gate after the anchor, 1 = after the probe                    |
| 1     | anchor_consistency | share of the anchor's samples agreeing with its plurality answer  |
| 2     | router_margin      | `problem.metadata["router_margin"]` (0 when absent or NaN)        |
| 3     | has_router_margin  | 1 when the problem carries a router margin                        |
| 4     | probe_done         | 1 once the probe answered                                         |
| 5     | probe_agrees       | 1 if the probe's answer equals the anchor's                       |
| 6     | anchor_answered    | 1 if the anchor's samples gave any answer                         |
| 7     | debate_round       | current debate round (0 before any escalation)                    |
| 8     | debate_top_share   | plurality share among the peers' visible answers                  |

### Rewards and labels

Every agent gets the team reward `float(correct) - lam * cost` at the end (`cost_unit` "calls"
or "tokens"). Infos and the episode record carry `path` ("accept", "probe_accept",
"probe_verify", "escalate", "probe_escalate"), `anchor_answer`, `anchor_correct`, `collab_answer`,
`collab_correct` (None where no collaboration ran), `escalated` (1 iff the final answer came from
a collaboration path: verify or escalate), `consistency`, `probe_answer`, `probe_agrees`,
`verifier_stated` (whether the verifier's reply stated an answer; None without a verifier turn), and
the rescue/harm labels `rescue` = escalated and anchor wrong and collaboration right, `harm` =
escalated and anchor right and collaboration wrong (None on unlabeled problems), so that
final correctness = (1 - e) Y_a + e Y_c exactly.

### Arguments

`num_peers` (3), `debate_rounds` (2), `anchor_samples` (5, the n the anchor is expected to draw;
a hint in `TurnContext.extras["num_samples"]`), `problems`, `lam` (0.0), `cost_unit`
("calls"), `max_utterance_chars` (8000), `render_mode`.

### Version history

* v0: initial release.
"""

from __future__ import annotations

import math
from typing import Any, Unpack

import numpy as np

from councilzoo.envs.council_env import RENDER_MODES, CouncilEnv, TableSettings, check_count, grade
from councilzoo.envs.debate_v0 import TOP_SHARE, DebateRounds
from councilzoo.envs.types import Action, Mode, Turn
from councilzoo.envs.wrappers import OrderEnforcing
from councilzoo.tasks import Problem, answers_equivalent, answers_for, plurality

__all__ = ["FEATURE_NAMES", "router_margin", "raw_env", "env"]

FEATURE_NAMES = (
    "phase",
    "anchor_consistency",
    "router_margin",
    "has_router_margin",
    "probe_done",
    "probe_agrees",
    "anchor_answered",
    "debate_round",
    "debate_top_share",
)
(
    PHASE,
    ANCHOR_CONSISTENCY,
    ROUTER_MARGIN,
    HAS_ROUTER_MARGIN,
    PROBE_DONE,
    PROBE_AGREES,
    ANCHOR_ANSWERED,
    DEBATE_ROUND,
    DEBATE_TOP_SHARE,
) = range(len(FEATURE_NAMES))
PATHS = ("accept", "probe_accept", "probe_verify", "escalate", "probe_escalate")
GATE_MODES = (Mode.ACCEPT, Mode.VERIFY, Mode.ESCALATE)
ANSWER_MODES = (Mode.ANSWER,)
# stages of the flow
ANCHOR, GATE, PROBE, VERIFY, DEBATE = "anchor", "gate", "probe", "verify", "debate"


def router_margin(problem: Problem) -> float | None:
    """The router margin carried by ``problem``, or None when absent or NaN."""
    value = problem.metadata.get("router_margin")
    if value is None or not math.isfinite(float(value)):
        return None
    return float(value)


class raw_env(CouncilEnv):
    """COMED's accept / verify / escalate game (see the module docstring)."""

    metadata = {"name": "escalation_v0", "render_modes": list(RENDER_MODES), "is_parallelizable": False}
    env_id = "councilzoo/escalation-v0"
    FEATURE_NAMES = FEATURE_NAMES

    def __init__(
        self,
        num_peers: int = 3,
        debate_rounds: int = 2,
        anchor_samples: int = 5,
        **table: Unpack[TableSettings],
    ) -> None:
        check_count("escalation-v0", "num_peers", num_peers, 1)
        check_count("escalation-v0", "debate_rounds", debate_rounds, 1)
        check_count("escalation-v0", "anchor_samples", anchor_samples, 1)
        self.peers = [f"peer_{i}" for i in range(num_peers)]
        agents = ["anchor", "controller", *self.peers, "verifier"]
        roles = {
            "anchor": "anchor",
            "controller": "controller",
            **dict.fromkeys(self.peers, "peer"),
            "verifier": "verifier",
        }
        super().__init__(possible_agents=agents, roles=roles, **table)
        self.debate_rounds, self.anchor_samples = int(debate_rounds), int(anchor_samples)

    # ---- game state --------------------------------------------------------------------------
    def _start(self) -> None:
        self.stage = ANCHOR
        self.path: str | None = None
        self.anchor_answer: str | None = None
        self.consistency = 0.0
        self.probe_answer: str | None = None
        self.probe_done = False
        self.collab_answer: str | None = None
        self.verifier_stated: bool | None = None  # None: no verifier turn
        self.debate: DebateRounds | None = None
        self._round_no = 0
        self.agent_selection = "anchor"

    def _round(self) -> int:
        return 0 if self.debate is None else min(self.debate.round, self.debate_rounds)

    def _simultaneous_agents(self) -> list[str]:
        return self.debate.remaining() if self.stage == DEBATE else []

    def _turn_role(self, agent: str) -> str:
        return "probe" if self.stage == PROBE and agent == self.peers[0] else self.roles[agent]

    def _legal(self, agent: str) -> tuple[Mode, ...]:
        if agent != self.agent_selection:
            return ()
        if self.stage == GATE:
            return GATE_MODES
        return self.debate.legal() if self.stage == DEBATE else ANSWER_MODES

    def _parse(self, agent: str, action: Action) -> Turn:
        turn = super()._parse(agent, action)
        if self.stage == ANCHOR:
            texts, cut = turn.spoken()
            answers = answers_for(self.problem, texts, truncated=cut)  # code: each program's output signature
            if action.answer is not None and not turn.samples:
                answers = [turn.answer]
            turn.answer, self.consistency = plurality(answers, self.problem.kind)
        return turn

    def _advance(self, turn: Turn) -> bool:
        if self.stage == ANCHOR:
            self.anchor_answer, self.stage, self.agent_selection = turn.answer, GATE, "controller"
            return False
        if self.stage == GATE:
            return self._gate(turn.mode)
        if self.stage == PROBE:
            self.probe_answer, self.probe_done = turn.answer, True
            self.stage, self.agent_selection = GATE, "controller"
            return False
        if self.stage == VERIFY:  # a verifier that states no answer leaves the one it was asked to check
            self.verifier_stated = turn.answer is not None
            checked = self.anchor_answer if self.anchor_answer is not None else self.probe_answer
            self.collab_answer = turn.answer if self.verifier_stated else checked
            return True
        new_round, over = self.debate.play(turn)
        if new_round:
            self._visible_len = len(self.transcript)
        self.agent_selection = self.debate.current
        if over:
            self.collab_answer, _ = self.debate.majority(self.problem.kind)
        return over

    def _gate(self, mode: Mode) -> bool:
        prefix = "probe_" if self.probe_done else ""
        if mode is Mode.ACCEPT:
            self.path = prefix + "accept"
            return True
        if mode is Mode.VERIFY and not self.probe_done:
            self.stage, self.agent_selection = PROBE, self.peers[0]
        elif mode is Mode.VERIFY:
            self.path, self.stage, self.agent_selection = "probe_verify", VERIFY, "verifier"
        else:
            self.path, self.stage = prefix + "escalate", DEBATE
            self.debate = DebateRounds(self.peers, self.debate_rounds)
            self._visible_len = len(self.transcript)
            self.agent_selection = self.debate.current
        return False

    def _probe_agrees(self) -> bool | None:
        if not self.probe_done:
            return None
        kind = self.problem.kind
        return self.anchor_answer is not None and answers_equivalent(
            self.probe_answer, self.anchor_answer, kind
        )

    def _features(self, agent: str) -> np.ndarray:
        margin = router_margin(self.problem)
        debate = (
            self.debate.features(agent, self.problem.kind) if self.debate and agent in self.peers else None
        )
        return np.array(
            [
                self.probe_done,
                self.consistency,
                margin or 0.0,
                margin is not None,
                self.probe_done,
                bool(self._probe_agrees()),
                self.anchor_answer is not None,
                0.0 if self.debate is None else self._round(),
                debate[TOP_SHARE] if debate else 0.0,
            ],
            np.float32,
        )

    def _extras(self, agent: str) -> dict[str, Any]:
        extras: dict[str, Any] = {"anchor_answer": self.anchor_answer, "probe_answer": self.probe_answer}
        if agent == "anchor":
            extras["num_samples"] = self.anchor_samples
        if self.debate is not None:
            extras["peer_answers"] = dict(self.debate.seen)
        return extras

    # ---- outcome -----------------------------------------------------------------------------
    def _outcome(self) -> tuple[str | None, dict[str, Any], dict[str, dict[str, Any]]]:
        escalated = self.path in ("probe_verify", "escalate", "probe_escalate")
        final = self.collab_answer if escalated else self.anchor_answer
        anchor_ok = grade(self.anchor_answer, self.problem)
        collab_ok = grade(self.collab_answer, self.problem) if escalated else None
        rescue = harm = None
        if anchor_ok is not None:  # COMED's labels: only an escalated episode can rescue or harm
            rescue = escalated and not anchor_ok and bool(collab_ok)
            harm = escalated and anchor_ok and not collab_ok
        info = {
            "path": self.path,
            "escalated": int(escalated),
            "anchor_answer": self.anchor_answer,
            "anchor_correct": anchor_ok,
            "collab_answer": self.collab_answer if escalated else None,
            "collab_correct": collab_ok,
            "consistency": self.consistency,
            "router_margin": router_margin(self.problem),
            "probe_answer": self.probe_answer,
            "probe_agrees": self._probe_agrees(),
            "verifier_stated": self.verifier_stated,
            "rescue": rescue,
            "harm": harm,
        }
        return final, info, {}


def env(**kwargs: Any) -> OrderEnforcing:
    """``raw_env`` in the order-enforcing wrapper (``councilzoo.envs.wrappers``)."""
    return OrderEnforcing(raw_env(**kwargs))
