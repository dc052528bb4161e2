"""
# Debate

Multi-agent debate (Du et al. 2023) as a turn-based PettingZoo game, with the option to stay silent.

| Creation           | `make("councilzoo/debate-v0", num_agents=3, rounds=2)`               |
|--------------------|-----------------------------------------------------------------------|
| Actions            | Discrete(8) mode (+ utterance through `Action`)                       |
| Parallel API       | No (turn-based; rounds are simultaneous in what peers see)           |
| Agents             | `['peer_0', ..., 'peer_{N-1}']`, N = `num_agents` >= 2              |
| Roles              | every agent is a `peer`                                               |
| Legal modes        | round 1: SPEAK; rounds 2..R: SPEAK or SKIP                            |
| Observation        | Dict(transcript=Text, action_mask=Box(int8, 8), features=Box(f32, 6)) |
| Reward             | team: correct - lam * cost, at the end                                |

N peers answer one problem over R rounds, in peer order within a round. On its turn a peer
SPEAKs (a new answer with its reasoning, having seen every peer's answer from the previous
rounds) or SKIPs (keeps its latest answer; no model call). Rounds are simultaneous in what peers
see, as in Du et al.: during round r the transcript shows only turns of rounds < r, so
`upcoming_turns()` lists every peer still to act in the round, each context as it will be on that
peer's turn, and the rollout engine plays a whole round in one tick. In round 1 every peer must
SPEAK (nobody has an answer yet). Always-SPEAK play is Du et al.'s dense debate.

### Final answer and tie rule

The final answer is the plurality (`councilzoo.tasks.plurality`, equivalence-aware) of the peers'
latest answers, listed in peer order. Ties go to the tied answer given by the lowest-numbered
peer; peers without an answer count in the share but never win. No answer at all -> None.

### Observation space

`transcript`: the problem and the visible turns, printable ASCII (non-ASCII written as `\\uXXXX`),
at most 32,000 characters (the oldest turns are cut first). `action_mask`: int8 over
`councilzoo.envs.types.Mode`, zero for agents not on turn. `features` (`FEATURE_NAMES`):

| index | name            | meaning                                                       |
|-------|-----------------|---------------------------------------------------------------|
| 0     | round           | current round, 1..R                                           |
| 1     | is_last_round   | 1 in round R                                                  |
| 2     | has_answer      | 1 if this peer already holds an answer                        |
| 3     | num_answered    | peers holding an answer (as visible)                          |
| 4     | top_share       | plurality share among the peers' visible latest answers       |
| 5     | agrees_with_top | 1 if this peer's answer equals the visible plurality answer   |

### Action space

`Discrete(8)` over `Mode` for PettingZoo's samplers; agents pass `Action(mode, text, ...)`
(or a dict with its fields) to speak. A SPEAK turn's answer is `Action.answer` when given, else
`extract_answer(text, kind)`; an unreadable answer is recorded as None (no crash).

### Rewards

At the end every peer gets the team reward `float(correct) - lam * cost`, cost in model calls
(`cost_unit="calls"`) or prompt+completion tokens (`"tokens"`); unlabeled problems score 0.
Infos at the end: final answer, correctness, top share, cost, and per agent its own answer.

### Arguments

`num_agents` (3), `rounds` (2), `problems` (default: 100 synthetic numeric problems),
`lam` (0.0), `cost_unit` ("calls"), `max_utterance_chars` (8000), `render_mode` (None | "ansi" | "human").

### Version history

* v0: initial release.
"""

from __future__ import annotations

from typing import Any, Unpack

import numpy as np

from councilzoo.envs.council_env import RENDER_MODES, CouncilEnv, TableSettings, check_count
from councilzoo.envs.types import Mode, Turn
from councilzoo.envs.wrappers import OrderEnforcing
from councilzoo.tasks import answers_equivalent, plurality

__all__ = ["FEATURE_NAMES", "DebateRounds", "raw_env", "env"]

FEATURE_NAMES = ("round", "is_last_round", "has_answer", "num_answered", "top_share", "agrees_with_top")
ROUND, IS_LAST_ROUND, HAS_ANSWER, NUM_ANSWERED, TOP_SHARE, AGREES_WITH_TOP = range(len(FEATURE_NAMES))
FIRST_ROUND_MODES = (Mode.SPEAK,)
LATER_ROUND_MODES = (Mode.SPEAK, Mode.SKIP)


class DebateRounds:
    """The debate schedule and vote among ``peers`` for ``rounds`` rounds (also escalation's sub-game).

    ``answers`` holds each peer's latest answer; ``seen`` the answers as of the end of the
    previous round, which is what a peer sees in a simultaneous round. ``seen`` changes only
    between rounds, so its vote is computed once per round (``seen_majority``).
    """

    def __init__(self, peers: list[str], rounds: int) -> None:
        self.peers, self.rounds = list(peers), rounds
        self.round, self.position = 1, 0
        self.answers: dict[str, str | None] = dict.fromkeys(peers)
        self.seen: dict[str, str | None] = dict.fromkeys(peers)
        self._seen_vote: tuple[str, tuple[str | None, float]] | None = None  # (kind, vote) of seen

    @property
    def current(self) -> str:
        return self.peers[self.position]

    def legal(self) -> tuple[Mode, ...]:
        return FIRST_ROUND_MODES if self.round == 1 else LATER_ROUND_MODES

    def remaining(self) -> list[str]:
        """The peer on turn and the later peers of this round: what they see is fixed until the
        next round, so they can be played together."""
        return self.peers[self.position :]

    def play(self, turn: Turn) -> tuple[bool, bool]:
        """Record ``turn``; returns (a new round started, the debate is over)."""
        if turn.mode is Mode.SPEAK:
            self.answers[turn.agent] = turn.answer
        self.position += 1
        if self.position < len(self.peers):
            return False, False
        self.position, self.round = 0, self.round + 1
        self.seen, self._seen_vote = dict(self.answers), None
        return True, self.round > self.rounds

    def majority(self, kind: str, answers: dict[str, str | None] | None = None) -> tuple[str | None, float]:
        """Plurality of the latest answers in peer order (ties -> lowest-numbered peer)."""
        answers = self.answers if answers is None else answers
        return plurality([answers[p] for p in self.peers], kind)

    def seen_majority(self, kind: str) -> tuple[str | None, float]:
        """``majority`` of ``seen``, cached until the next round starts."""
        if self._seen_vote is None or self._seen_vote[0] != kind:
            self._seen_vote = (kind, self.majority(kind, self.seen))
        return self._seen_vote[1]

    def features(self, agent: str, kind: str) -> list[float]:
        """The six debate features (see FEATURE_NAMES) for ``agent`` from what it can see."""
        own = self.answers[agent]
        top, share = self.seen_majority(kind)
        agrees = own is not None and top is not None and answers_equivalent(own, top, kind)
        return [
            float(min(self.round, self.rounds)),
            float(self.round >= self.rounds),
            float(own is not None),
            float(sum(a is not None for a in self.seen.values())),
            share,
            float(agrees),
        ]


class raw_env(CouncilEnv):
    """Debate among ``num_agents`` peers for ``rounds`` rounds (see the module docstring)."""

    metadata = {"name": "debate_v0", "render_modes": list(RENDER_MODES), "is_parallelizable": False}
    env_id = "councilzoo/debate-v0"
    FEATURE_NAMES = FEATURE_NAMES

    def __init__(self, num_agents: int = 3, rounds: int = 2, **table: Unpack[TableSettings]) -> None:
        check_count("debate-v0", "num_agents", num_agents, 2)
        check_count("debate-v0", "rounds", rounds, 1)
        peers = [f"peer_{i}" for i in range(num_agents)]
        super().__init__(possible_agents=peers, roles=dict.fromkeys(peers, "peer"), **table)
        self.rounds = int(rounds)

    def _start(self) -> None:
        self.debate = DebateRounds(self.possible_agents, self.rounds)
        self._visible_len = 0
        self.agent_selection = self.debate.current

    def _round(self) -> int:
        return min(self.debate.round, self.rounds)

    def _legal(self, agent: str) -> tuple[Mode, ...]:
        return self.debate.legal() if agent == self.agent_selection else ()

    def _simultaneous_agents(self) -> list[str]:
        return self.debate.remaining()

    def _advance(self, turn: Turn) -> bool:
        new_round, over = self.debate.play(turn)
        if new_round:
            self._visible_len = len(self.transcript)
        self.agent_selection = self.debate.current
        return over

    def _features(self, agent: str) -> np.ndarray:
        return np.asarray(self.debate.features(agent, self.problem.kind), np.float32)

    def _extras(self, agent: str) -> dict[str, Any]:
        return {"peer_answers": dict(self.debate.seen), "own_answer": self.debate.answers[agent]}

    def _outcome(self) -> tuple[str | None, dict[str, Any], dict[str, dict[str, Any]]]:
        final, share = self.debate.majority(self.problem.kind)
        per_agent = {p: {"own_answer": a} for p, a in self.debate.answers.items()}
        return final, {"top_share": share, "answers": dict(self.debate.answers)}, per_agent


def env(**kwargs: Any) -> OrderEnforcing:
    """``raw_env`` in the order-enforcing wrapper (``councilzoo.envs.wrappers.OrderEnforcing``);
    actions may be Action objects, so no out-of-bounds assertion wrapper."""
    return OrderEnforcing(raw_env(**kwargs))
