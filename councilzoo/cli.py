"""The ``councilzoo`` command: demo, eval, train, repro.

Each subcommand lives with the code it drives; this module only parses arguments and dispatches,
importing heavy modules lazily so ``councilzoo --help`` stays instant.
"""

from __future__ import annotations

import argparse
import os
import sys


def _demo(args: argparse.Namespace) -> int:
    from councilzoo.evaluation.demo import run_demo

    return run_demo(out=args.out, model=args.model, endpoint=args.endpoint, limit=args.limit, seed=args.seed)


def _eval(args: argparse.Namespace) -> int:
    from councilzoo.evaluation.harness import main as eval_main

    return eval_main(args)


def _train(args: argparse.Namespace) -> int:
    from councilzoo.learners.train import main as train_main

    return train_main(args)


def _repro(args: argparse.Namespace) -> int:
    from councilzoo.repro import main as repro_main

    return repro_main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="councilzoo", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo", help="compare every collaboration protocol on the embedded default (offline, CPU)"
    )
    demo.add_argument("--out", default="demo-out", help="output folder for report.json, report.md and plots")
    demo.add_argument("--model", default=None, help="a local model directory or hub name (uses real models)")
    demo.add_argument("--endpoint", default=None, help="an OpenAI-compatible base URL (uses real models)")
    demo.add_argument("--limit", type=int, default=None, help="number of problems (default: the demo's own)")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)

    ev = sub.add_parser("eval", help="evaluate a collaboration protocol on a dataset")
    ev.add_argument(
        "--protocol", required=True, help="comed | debate | single | self_consistency | routing | ..."
    )
    ev.add_argument("--agents", required=True, help="agents config (YAML)")
    ev.add_argument("--dataset", required=True, help="dataset name (gsm8k, math500, ...) or synthetic:<kind>")
    ev.add_argument("--split", default="test")
    ev.add_argument("--path", default=None, help="local JSON/JSONL file for the dataset")
    ev.add_argument("--limit", type=int, default=None)
    ev.add_argument("--out", default="runs/eval")
    ev.add_argument("--seed", type=int, default=0)
    ev.set_defaults(func=_eval)

    tr = sub.add_parser("train", help="train with a learner: corl, tracer, grpo, ttrl, rent, intuitor, ...")
    tr.add_argument("learner")
    tr.add_argument("config", help="experiment config (YAML)")
    tr.add_argument("--set", action="append", metavar="KEY.SUB=VALUE",
                    help="override a config value (repeatable), e.g. --set trainer.learning_rate=1e-6")
    tr.add_argument("--out", default=None, help="override the config's output_dir")
    tr.add_argument("--max-steps", type=int, default=None, help="override the config's max_steps")
    tr.add_argument("--resume", action="store_true", help="continue the run in the output folder")
    tr.add_argument("--overwrite", action="store_true", help="discard the output folder's checkpoints first")
    tr.add_argument("--members", default=None,
                    help="cohorts: start only these member indices on this node (e.g. 1,2; multi-node)")
    tr.set_defaults(func=_train)

    rp = sub.add_parser("repro", help="reproduce a paper's central claim at toy scale")
    rp.add_argument("claim", choices=["corl", "comed", "tracer", "all"])
    rp.add_argument("--out", default="runs/repro")
    rp.add_argument("--seeds", type=int, default=None)
    rp.add_argument("--quick", action="store_true")
    rp.add_argument("--jobs", type=int, default=None,
                    help="with 'all': claims run in this many processes (default: one per CPU core)")
    rp.set_defaults(func=_repro)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as err:  # bad user input: a message, not a traceback
        if os.environ.get("COUNCILZOO_TRACEBACK"):
            raise
        print(f"councilzoo {args.command}: error: {err}\n(set COUNCILZOO_TRACEBACK=1 for the traceback)",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
