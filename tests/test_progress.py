"""What a long run shows while it works: episodes played in lockstep end together, so their bar
counts the turns played meanwhile and gives no time estimate before a whole wave has finished."""

from __future__ import annotations

from councilzoo.agents import SimulatedAgent
from councilzoo.rollout import RolloutEngine
from councilzoo.tasks import synthetic_problems


def test_the_episode_bar_shows_turns_and_no_estimate_before_a_wave_ends(capsys):
    problems = synthetic_problems("numeric", 8, seed=0)
    agents = {"*": SimulatedAgent("s", 0.6, seed=1)}
    engine = RolloutEngine("councilzoo/debate-v0", agents, num_envs=4)
    engine.run(problems)
    frames = [f for f in capsys.readouterr().err.replace("\n", "\r").split("\r") if "/8" in f]
    assert frames and f"{engine.stats.turns:,} turns played" in frames[-1]
    for frame in frames:
        done = int(frame.split("/8")[0].split()[-1])
        assert ("<" in frame) == (done >= 4), frame  # tqdm's "elapsed<remaining" only after a wave
