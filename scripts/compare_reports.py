"""Whether two `councilzoo repro` output folders hold the same reports, claim by claim:

    python scripts/compare_reports.py A.out B.out [--claims comed corl tracer]

Compares every key of each claim's ``report.json`` except the run metadata (the top-level ``run``:
revision, start time, library versions) and wall-clock fields (``seconds`` and ``*_seconds`` at any
depth), which differ between runs by design. Prints ``<claim> identical`` or ``<claim> DIFFERENT``
and, for a difference, the first paths where the reports part. Exit status 1 when any claim
differs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def comparable(report: dict) -> dict:
    """``report`` without the keys that differ between identical runs."""
    return _without_seconds({k: v for k, v in report.items() if k != "run"})


def _without_seconds(value):
    if isinstance(value, dict):
        return {k: _without_seconds(v) for k, v in value.items()
                if k != "seconds" and not k.endswith("_seconds")}
    return [_without_seconds(v) for v in value] if isinstance(value, list) else value


def differences(a, b, path: str = "") -> list[str]:
    """The paths (``/key[index]``) where ``a`` and ``b`` part."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b))
                for d in ([f"{path}/{k}: on one side only"] if (k in a) != (k in b)
                          else differences(a[k], b[k], f"{path}/{k}"))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in differences(x, y, f"{path}[{i}]")]
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # NaN equals NaN, as in the text
    return [] if same else [f"{path}: {a!r:.80} != {b!r:.80}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--claims", nargs="+", default=["comed", "corl", "tracer"])
    args = parser.parse_args(argv)
    status = 0
    for claim in args.claims:
        paths = [Path(d) / claim / "report.json" for d in (args.first, args.second)]
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            parser.error(f"no report at {', '.join(missing)} (claims are folders: corl, comed, tracer, ...)")
        a, b = (comparable(json.loads(p.read_text())) for p in paths)
        found = differences(a, b)
        print(f"{claim} {'DIFFERENT' if found else 'identical'}")
        for line in found[:10]:
            print(f"  {line}")
        status |= bool(found)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
