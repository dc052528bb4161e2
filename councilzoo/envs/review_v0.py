"""
# Review (TRACER)

TRACER's proposer/reviewer game: proposers KEEP or REFRESH a pending solution, reviewers SKIP or
SPEAK a RIGHT/WRONG verdict, over R rounds that alternate propose and review.

| Creation           | `make("councilzoo/review-v0", num_agents=2, rounds=5)`                 |
|--------------------|-------------------------------------------------------------------------|
| Actions            | Discrete(8) mode (+ utterance through `Action`)                         |
| Parallel API       | No                                                                      |
| Agents             | `['proposer_0', .., 'reviewer_0', ..]`                                  |
| Roles              | `proposer`, `reviewer`                                                  |
| Legal modes        | proposer: REFRESH in round 1, else KEEP/REFRESH; reviewer: SKIP/SPEAK   |
| Observation        | Dict(transcript=Text, action_mask=Box(int8, 8), features=Box(f32, 7))   |
| Reward             | team: correct - lam * cost; per-role rewards in infos                   |

### Roles

`num_agents` N >= 2 is split so that both roles are always used: `N // 2` proposers and
`N - N // 2` reviewers (N=2: 1+1, N=3: 1+2, N=4: 2+2, N=5: 2+3). This avoids the release's flaw
where every agent holds both roles and even N leaves half the roles idle.

### Rules

Rounds are 1-indexed; odd rounds are propose rounds (proposers act in order), even rounds are
review rounds (reviewers act in order). A REFRESH generates a new solution and its parsed
answer becomes the *pending proposal* (the latest REFRESH wins); KEEP leaves it (no model
call). In round 1 proposers must REFRESH (nothing is pending yet). A reviewer SPEAKs a verdict on
the current pending proposal (`Action.verdict`, else `extract_verdict(text)`; an unparseable
verdict counts as an invalid vote) or SKIPs. With `early_stop=True` the game ends after a review
round in which every reviewer SPOKE and every verdict was RIGHT (consensus).

Final answer: `final_rule="last_pending"` (default, TRACER) takes the last pending proposal;
`"majority"` takes the plurality of all proposals made in the episode, latest first, so ties go
to the most recent proposal.

### Observation space

`transcript` and `action_mask` as in every councilzoo game. `features` (`FEATURE_NAMES`), the
information state of TRACER's controllers:

| index | name                   | meaning                                                          |
|-------|------------------------|------------------------------------------------------------------|
| 0     | round                  | current round, 1..R                                              |
| 1     | is_proposer            | 1 for proposers                                                  |
| 2     | has_pending            | 1 once a proposal is pending                                     |
| 3     | vote_score             | sum of +1 RIGHT / -1 WRONG verdicts on the current pending one   |
| 4     | num_votes              | valid verdicts on the current pending proposal                   |
| 5     | num_invalid_votes      | SPEAK turns without a parseable verdict on it                    |
| 6     | is_last_proposal_round | 1 if no propose round follows the current round                  |

Votes reset whenever a REFRESH makes a new pending proposal.

### Rewards

Every agent gets the team reward `float(correct) - lam * cost` at the end. Infos also carry
TRACER's per-role rewards (None on unlabeled problems): each turn scores, against the pending
proposal at that turn, REFRESH +1/-1 for a correct/wrong (or unreadable) new answer, KEEP and SKIP
+1/-1 for the pending answer's correctness, SPEAK +1 for a verdict that matches it, -1 for one that
does not or for none (an unparseable verdict scores as a wrong one, as an unreadable answer does;
the TRACER release gave it 0, which paid a reviewer more for saying nothing than for judging
wrong). `infos[agent]["role_reward"]` is the mean over the agent's turns, `info["turn_rewards"]`
the per-turn list. Events (first pending proposal vs final answer):
`correction` (wrong -> right), `preservation` (right -> right), `harmful_flip` (right -> wrong).

### Arguments

`num_agents` (2), `rounds` (5), `early_stop` (False), `final_rule` ("last_pending" | "majority"),
`problems`, `lam` (0.0), `cost_unit` ("calls"), `max_utterance_chars` (8000), `render_mode`.

### Version history

* v0: initial release.
"""

from __future__ import annotations

from typing import Any, Unpack

import numpy as np

from councilzoo.envs.council_env import RENDER_MODES, CouncilEnv, TableSettings, check_count, grade
from councilzoo.envs.types import Mode, Turn
from councilzoo.envs.wrappers import OrderEnforcing
from councilzoo.tasks import plurality

__all__ = ["FEATURE_NAMES", "raw_env", "env"]

FEATURE_NAMES = (
    "round",
    "is_proposer",
    "has_pending",
    "vote_score",
    "num_votes",
    "num_invalid_votes",
    "is_last_proposal_round",
)
ROUND, IS_PROPOSER, HAS_PENDING, VOTE_SCORE, NUM_VOTES, NUM_INVALID_VOTES, IS_LAST_PROPOSAL_ROUND = range(7)
FINAL_RULES = ("last_pending", "majority")


def _split_roles(num_agents: int) -> tuple[int, int]:
    """(proposers, reviewers) for ``num_agents``: both roles are always used."""
    return num_agents // 2, num_agents - num_agents // 2


class raw_env(CouncilEnv):
    """TRACER's propose/review game (see the module docstring)."""

    metadata = {"name": "review_v0", "render_modes": list(RENDER_MODES), "is_parallelizable": False}
    env_id = "councilzoo/review-v0"
    FEATURE_NAMES = FEATURE_NAMES

    def __init__(
        self,
        num_agents: int = 2,
        rounds: int = 5,
        *,
        early_stop: bool = False,
        final_rule: str = "last_pending",
        **table: Unpack[TableSettings],
    ) -> None:
        check_count("review-v0", "num_agents", num_agents, 2)
        check_count("review-v0", "rounds", rounds, 1)
        if final_rule not in FINAL_RULES:
            raise ValueError(f"review-v0: final_rule must be one of {FINAL_RULES}, got {final_rule!r}")
        n_prop, n_rev = _split_roles(int(num_agents))
        self.proposers = [f"proposer_{i}" for i in range(n_prop)]
        self.reviewers = [f"reviewer_{i}" for i in range(n_rev)]
        roles = {**dict.fromkeys(self.proposers, "proposer"), **dict.fromkeys(self.reviewers, "reviewer")}
        super().__init__(possible_agents=self.proposers + self.reviewers, roles=roles, **table)
        self.rounds, self.early_stop, self.final_rule = int(rounds), bool(early_stop), final_rule

    # ---- game state --------------------------------------------------------------------------
    def _start(self) -> None:
        self._position = 0
        self.pending: str | None = None
        self.pending_text = ""
        self.proposals: list[str | None] = []  # every REFRESH answer, in order
        self.first_pending: str | None = None
        self.votes: list[str | None] = []  # verdicts on the current pending proposal
        self._round_verdicts: list[str | None] = []  # this review round's (None = SKIP or invalid)
        self._pending_at_turn: list[str | None] = []
        self.agent_selection = self._order()[0]

    def _order(self) -> list[str]:
        return self.proposers if self._round_no % 2 == 1 else self.reviewers

    def _legal(self, agent: str) -> tuple[Mode, ...]:
        if agent != self.agent_selection:
            return ()
        if self.roles[agent] == "reviewer":
            return (Mode.SKIP, Mode.SPEAK)
        return (Mode.REFRESH,) if self._round_no == 1 else (Mode.KEEP, Mode.REFRESH)

    def _advance(self, turn: Turn) -> bool:
        self._pending_at_turn.append(self.pending)
        if turn.mode is Mode.REFRESH:
            self.pending, self.pending_text, self.votes = turn.answer, turn.text, []
            self.proposals.append(turn.answer)
        elif turn.mode is Mode.SPEAK:
            self.votes.append(turn.verdict)
        if self.roles[turn.agent] == "reviewer":
            self._round_verdicts.append(turn.verdict if turn.mode is Mode.SPEAK else None)
        self._position += 1
        if self._position < len(self._order()):
            self.agent_selection = self._order()[self._position]
            return False
        if self._round_no == 1:
            self.first_pending = self.pending
        consensus = self._round_no % 2 == 0 and all(v == "RIGHT" for v in self._round_verdicts)
        self._round_verdicts = []
        if self._round_no >= self.rounds or (self.early_stop and consensus):
            return True
        self._round_no += 1
        self._position = 0
        self.agent_selection = self._order()[0]
        return False

    def _features(self, agent: str) -> np.ndarray:
        valid = [v for v in self.votes if v is not None]
        next_propose = self._round_no + 1 if self._round_no % 2 == 0 else self._round_no + 2
        return np.array(
            [
                self._round_no,
                self.roles[agent] == "proposer",
                self.pending is not None,
                sum(1 if v == "RIGHT" else -1 for v in valid),
                len(valid),
                len(self.votes) - len(valid),
                next_propose > self.rounds,
            ],
            np.float32,
        )

    def _extras(self, agent: str) -> dict[str, Any]:
        return {"pending_answer": self.pending, "pending_text": self.pending_text, "votes": list(self.votes)}

    # ---- outcome -----------------------------------------------------------------------------
    def _outcome(self) -> tuple[str | None, dict[str, Any], dict[str, dict[str, Any]]]:
        if self.final_rule == "majority":
            final, _ = plurality(self.proposals[::-1], self.problem.kind)
        else:
            final = self.pending
        turn_rewards = self._turn_rewards()
        per_agent: dict[str, dict[str, Any]] = {}
        for agent in self.possible_agents:
            scored = zip(self.transcript, turn_rewards, strict=True)
            mine = [r for t, r in scored if t.agent == agent and r is not None]
            per_agent[agent] = {
                "role": self.roles[agent],
                "role_reward": sum(mine) / len(mine) if mine else None,  # exact: rewards are +-1
            }
        info = {
            "pending_answer": self.pending,
            "first_pending": self.first_pending,
            "proposals": list(self.proposals),
            "rounds_played": self._round_no,
            "turn_rewards": turn_rewards,
            **self._events(final),
        }
        return final, info, per_agent

    def _turn_rewards(self) -> list[float | None]:
        if self.problem.answer is None:
            return [None] * len(self.transcript)
        rewards: list[float | None] = []
        for turn, pending in zip(self.transcript, self._pending_at_turn, strict=True):
            pending_ok = bool(grade(pending, self.problem))
            if turn.mode is Mode.REFRESH:
                rewards.append(1.0 if grade(turn.answer, self.problem) else -1.0)
            elif turn.mode is Mode.SPEAK:
                rewards.append(
                    -1.0
                    if turn.verdict is None
                    else (1.0 if (turn.verdict == "RIGHT") == pending_ok else -1.0)
                )
            else:  # KEEP / SKIP: the pending answer stands
                rewards.append(1.0 if pending_ok else -1.0)
        return rewards

    def _events(self, final: str | None) -> dict[str, bool | None]:
        first, last = grade(self.first_pending, self.problem), grade(final, self.problem)
        if first is None:
            return {"correction": None, "preservation": None, "harmful_flip": None}
        return {
            "correction": not first and last,
            "preservation": first and last,
            "harmful_flip": first and not last,
        }


def env(**kwargs: Any) -> OrderEnforcing:
    """``raw_env`` in the order-enforcing wrapper (``councilzoo.envs.wrappers``)."""
    return OrderEnforcing(raw_env(**kwargs))
