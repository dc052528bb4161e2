"""Regret-matching throughput: state-updates/s of RegretMatcher vs OpenSpiel, state by state.

Subject: ``councilzoo.theory.RegretMatcher.update`` on all S states at once (binary actions, as
in TRACER's controllers). Baseline: OpenSpiel's ``regret_matching._regret_matching_step``, the
update its ``regret_matching`` runs each iteration, called once per state with that state's
persistent regrets (a one-player game whose payoff tensor is the state's action values). The
baseline is timed on at most ``BASELINE_STATES`` states per sweep (its cost is linear in S) and
its rate reported per state-update. Both start from OpenSpiel's 1e-6 regrets and must produce
the same policies, checked before timing counts.

    python benchmarks/regret_throughput.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from open_spiel.python.algorithms import regret_matching as os_rm

from councilzoo.theory import RegretMatcher

NUM_ACTIONS = 2
BASELINE_STATES = 2000
RESULTS = Path(__file__).parent / "results" / "regret_throughput.json"


def _time_sweeps(step, min_seconds: float) -> tuple[float, int]:
    """Run ``step`` (one sweep) until ``min_seconds`` pass; return (seconds, sweeps)."""
    sweeps, start = 0, time.perf_counter()
    while True:
        step(sweeps)
        sweeps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed, sweeps


def measure(num_states: int, min_seconds: float, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    values = rng.uniform(-1, 1, size=(8, num_states, NUM_ACTIONS))  # cycled, so no RNG in timing

    matcher = RegretMatcher(num_states, NUM_ACTIONS, variant="rm")
    matcher.regrets[:] = 1.0 / os_rm.INITIAL_REGRET_DENOM
    ours_s, ours_sweeps = _time_sweeps(lambda k: matcher.update(None, values[k % 8]), min_seconds)

    n_base = min(num_states, BASELINE_STATES)
    strategies = [np.full(NUM_ACTIONS, 1.0 / NUM_ACTIONS) for _ in range(n_base)]
    regrets = [np.full(NUM_ACTIONS, 1.0 / os_rm.INITIAL_REGRET_DENOM) for _ in range(n_base)]

    def baseline_sweep(k: int) -> None:
        for s in range(n_base):
            step = os_rm._regret_matching_step([values[k % 8, s]], [strategies[s]], [regrets[s]], 0.0)
            strategies[s] = step[0]

    base_s, base_sweeps = _time_sweeps(baseline_sweep, min_seconds)

    # Same arithmetic: replay our matcher for the baseline's sweep count and compare policies.
    check = RegretMatcher(n_base, NUM_ACTIONS, variant="rm")
    check.regrets[:] = 1.0 / os_rm.INITIAL_REGRET_DENOM
    for k in range(base_sweeps):
        check.update(None, values[k % 8, :n_base])
    max_diff = float(np.abs(check.strategy() - np.array(strategies)).max())
    assert max_diff < 1e-9, f"policies differ from OpenSpiel by {max_diff}"

    ours_rate = ours_sweeps * num_states / ours_s
    base_rate = base_sweeps * n_base / base_s
    return {"states": num_states, "ours_updates_per_s": ours_rate, "openspiel_updates_per_s": base_rate,
            "speedup": ours_rate / base_rate, "max_policy_diff": max_diff,
            "load_1min_after": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing windows")
    args = parser.parse_args()
    min_seconds = 0.3 if args.quick else 1.5
    rows = [measure(s, min_seconds) for s in (1, 1_000, 100_000)]
    print(f"{'states':>8} {'ours upd/s':>14} {'OpenSpiel upd/s':>16} {'speedup':>9} {'max |dpolicy|':>14}")
    for r in rows:
        print(f"{r['states']:>8} {r['ours_updates_per_s']:>14.3g} {r['openspiel_updates_per_s']:>16.3g} "
              f"{r['speedup']:>8.1f}x {r['max_policy_diff']:>14.1e}")
    summary = {"speedup_at_1e5_states": rows[-1]["speedup"], "target_speedup": 100.0,
               "meets_target": rows[-1]["speedup"] >= 100.0, "cpu_count": os.cpu_count(),
               "load_avg": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(summary))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"num_actions": NUM_ACTIONS, "quick": args.quick, "table": rows,
                                   "summary": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
