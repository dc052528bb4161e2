"""Theory: regret matching with proven bounds, normal-form games, equilibrium measures, rescue-harm.

numpy only. Every bound stated in a docstring here is checked by a test in tests/test_theory_*.py;
docs/theory.md gives the statements and proof sketches.
"""

from councilzoo.theory.controller_game import (
    ACTIONS,
    ControllerGame,
    ControllerSolution,
    OutcomeModel,
    solve_controller_game,
)
from councilzoo.theory.games import (
    MatrixGame,
    biased_rps,
    coordination,
    matching_pennies,
    prisoners_dilemma,
    random_game,
    rock_paper_scissors,
    shapley_game,
    zero_sum,
)
from councilzoo.theory.measures import cce_gap, external_regret, nash_conv
from councilzoo.theory.regret_matching import RegretMatcher, regret_bound
from councilzoo.theory.rescue_harm import RescueHarm, rescue_harm
from councilzoo.theory.self_play import SelfPlayResult, self_play
from councilzoo.theory.stats import bootstrap_ci, mean_ci

__all__ = [
    "ACTIONS",
    "ControllerGame",
    "ControllerSolution",
    "MatrixGame",
    "OutcomeModel",
    "RegretMatcher",
    "RescueHarm",
    "SelfPlayResult",
    "biased_rps",
    "bootstrap_ci",
    "cce_gap",
    "coordination",
    "external_regret",
    "matching_pennies",
    "mean_ci",
    "nash_conv",
    "prisoners_dilemma",
    "random_game",
    "regret_bound",
    "rescue_harm",
    "rock_paper_scissors",
    "self_play",
    "shapley_game",
    "solve_controller_game",
    "zero_sum",
]
