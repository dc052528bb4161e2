"""``councilzoo demo``: every collaboration protocol on the embedded default, offline, on CPU.

The default council (``DEMO_COUNCIL``, mirrored in ``configs/demo_agents.yaml``) is simulated:
an anchor of medium skill, three heterogeneous peers (different skills, correlated errors,
harm-prone: a peer holding a right answer is often swayed to a wrong one shown by others) and an
adjudicating verifier, on seeded synthetic numeric problems. Thresholds and the router are fitted
on 300 dev problems, scored on 300 others. With ``model`` (a local model directory) or
``endpoint`` (an OpenAI-compatible base URL) every seat is played by that real model instead.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from councilzoo.config import check_output_dir, config_to_dict, load_config, run_lock, run_metadata
from councilzoo.evaluation.council import CouncilConfig
from councilzoo.evaluation.harness import PROTOCOL_ORDER, Evaluation, run_and_report
from councilzoo.evaluation.run_folder import check_rerun, start_run
from councilzoo.real_models import recommended_agent
from councilzoo.tasks import load_problems

__all__ = ["DEMO_COUNCIL", "real_model_council", "run_demo"]

_PEER = {"correlation": 0.4, "swayed_prob": 0.45, "adopt_prob": 0.4}
DEMO_COUNCIL: dict[str, Any] = {
    "models": {
        "anchor": {
            "type": "simulated",
            "kwargs": {"skill": 0.62, "correlation": 0.3, "seed": 1, "swayed_prob": 0.3},
        },
        "peer_a": {"type": "simulated", "kwargs": {"skill": 0.68, "seed": 2, **_PEER}},
        "peer_b": {"type": "simulated", "kwargs": {"skill": 0.55, "seed": 3, **_PEER}},
        "peer_c": {"type": "simulated", "kwargs": {"skill": 0.48, "seed": 4, **_PEER}},
        "judge": {
            "type": "simulated",
            "kwargs": {"skill": 0.66, "correlation": 0.3, "seed": 5, "adjudicate_prob": 0.85},
        },
    },
    "anchor": "anchor",
    "peers": ["peer_a", "peer_b", "peer_c"],
    "verifier": "judge",
    "samples": 3,
    "debate_rounds": 2,
    "comed": {"lam": 0.02, "cost_unit": "calls", "dev_size": 300},
}
DEMO_SIZE, REAL_MODEL_SIZE = 300, 20


def real_model_council(model: str | None, endpoint: str | None) -> dict[str, Any]:
    """Every seat played by one real model (transformers from ``model``, or an OpenAI endpoint); a
    model councilzoo names (``councilzoo.real_models``) gets its recommended prompt style and
    reply budget."""
    if endpoint:
        spec = {"type": "openai", "kwargs": {"base_url": endpoint, "model": model or "default"}}
    else:
        spec = {"type": "transformers", "kwargs": {"model": model}}
    spec["agent"] = {"sampling": {"max_new_tokens": 512, "temperature": 0.7}}
    recommended = recommended_agent(model) if model and not endpoint else None
    if recommended:
        spec["agent"] = {"prompt_style": recommended["prompt_style"],
                         "sampling": {**spec["agent"]["sampling"], **recommended["sampling"]}}
    council = copy.deepcopy(DEMO_COUNCIL)
    council["models"] = {"llm": spec}
    council.update(anchor="llm", peers=["llm"] * 3, verifier="llm", router_pool=["llm"])
    council["comed"] = {**council["comed"], "dev_size": 20}
    return council


def run_demo(
    out: str | Path = "demo-out",
    model: str | None = None,
    endpoint: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    overwrite: bool = False,
) -> int:
    """Run every protocol, print the comparison table, write ``report.json``/``report.md``/plots.

    A rerun into ``out`` resumes its episodes when its settings are the same, and is refused when
    they differ unless ``overwrite`` (``councilzoo.evaluation.run_folder``)."""
    check_output_dir(out)
    real = bool(model or endpoint)
    council = load_config(real_model_council(model, endpoint) if real else DEMO_COUNCIL, CouncilConfig)
    n = limit or (REAL_MODEL_SIZE if real else DEMO_SIZE)
    test = load_problems("synthetic:numeric", "test", seed=seed, limit=n)
    dev = load_problems("synthetic:numeric", "dev", seed=seed, limit=council.comed.dev_size)
    settings = {
        "command": "demo",
        "agents": config_to_dict(council),
        "dataset": "synthetic:numeric",
        "limit": n,
        "seed": seed,
    }
    check_rerun(out, settings, overwrite)
    ev = Evaluation(council, test, dev, out, seed=seed, progress=real)
    with run_lock(out):
        check_rerun(out, settings, overwrite)  # again: a run may have finished meanwhile
        start_run(out, settings, overwrite)
        names = [p for p in PROTOCOL_ORDER if not (real and p in ("routing", "best_single_hindsight"))]
        meta = run_metadata(seed, demo=True, model=model, endpoint=endpoint, n=n)
        run_and_report(ev, names, out, meta, f"councilzoo demo: {n} synthetic numeric problems")
    return 0
