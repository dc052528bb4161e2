"""Co-RL learners that misbehave on purpose, importable by member processes (``tests`` on the
path): member ``FAULTY_MEMBER`` raises, or hangs, when it scores round 1."""

from __future__ import annotations

import time

from councilzoo.learners.corl import CoRL
from councilzoo.learners.corl.reward import CohortReward

FAULTY_MEMBER = 1


class _Faulty(CohortReward):
    def __call__(self, *args, round, **kwargs):
        if self.index == FAULTY_MEMBER and round[0] == 1:
            self.fault()
        return super().__call__(*args, round=round, **kwargs)


class _Crash(_Faulty):
    def fault(self):
        raise RuntimeError("deliberate failure in round 1")


class _Hang(_Faulty):
    def fault(self):
        time.sleep(3600)


class CrashingCoRL(CoRL):
    @staticmethod
    def reward_functions(cfg, index, problems, link):
        return [_Crash(cfg, index, problems, link)]


class HangingCoRL(CoRL):
    @staticmethod
    def reward_functions(cfg, index, problems, link):
        return [_Hang(cfg, index, problems, link)]
