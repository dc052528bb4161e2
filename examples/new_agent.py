"""Plug a new agent into a game: an agent of your own plays councilzoo/debate-v0 beside simulated peers.

    python examples/new_agent.py

An agent is anything with ``act(contexts) -> actions``: it gets a batch of ``TurnContext`` (the
problem, its role, the transcript so far, the legal modes) and returns one ``Action`` per context.
The game parses the answer out of the action's text with the same grader it uses for LLM output.
"""

from collections import Counter

import councilzoo  # noqa: F401  (registers councilzoo/debate-v0, review-v0, escalation-v0, cohort-v0)
from councilzoo.agents import SimulatedAgent
from councilzoo.agents.controllers import default_mode, is_silent
from councilzoo.envs import make
from councilzoo.envs.types import Action
from councilzoo.tasks import synthetic_problems


class MajorityPeer:
    """Says the answer most peers have given so far (its first guess: 0)."""

    def act(self, contexts):
        actions = []
        for ctx in contexts:
            mode = default_mode(ctx)  # SPEAK / ANSWER when legal
            if is_silent(mode):
                actions.append(Action(mode))
                continue
            seen = Counter(t.answer for t in ctx.transcript if t.answer is not None)
            answer = seen.most_common(1)[0][0] if seen else "0"
            actions.append(Action(mode, text=f"The answer is \\boxed{{{answer}}}.", calls=1))
        return actions


problems = synthetic_problems("numeric", 20, seed=0)
env = make("councilzoo/debate-v0", problems=problems, num_agents=3, rounds=2, lam=0.01)
players = {
    "peer_0": SimulatedAgent("peer_0", skill=0.7, seed=0),
    "peer_1": SimulatedAgent("peer_1", skill=0.6, seed=1),
    "peer_2": MajorityPeer(),  # ours speaks last in each round
}

correct = 0
for episode in range(len(problems)):
    env.reset(seed=episode)
    for agent in env.agent_iter():
        obs, reward, termination, truncation, info = env.last()
        if termination or truncation:
            env.step(None)  # PettingZoo: an agent that is done steps with None
            continue
        [action] = players[agent].act([env.turn_context(agent)])
        env.step(action)
    record = env.episode_record()
    correct += record.correct
    print(f"episode {episode:2d}: final answer {record.final_answer:>6} correct={record.correct} "
          f"calls={record.cost.calls}")
print(f"team accuracy with MajorityPeer: {correct / len(problems):.2f}")
