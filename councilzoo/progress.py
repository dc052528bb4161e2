"""What a long run tells its user: one line per phase, and progress over steps.

On a terminal, progress is a tqdm bar; anywhere else (a batch job's log file, a pipe) it is one
plain line per update, since a bar redrawn with escape codes leaves only clutter in a file.
Phase lines ("building tiny model qwen", "starting 2 member worlds") are printed either way, so
no run is silent while it loads, builds or warms up.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

__all__ = ["phase", "Progress"]


def _on_terminal() -> bool:
    """Whether stdout is an interactive terminal (bars), not a log file or a pipe (plain lines)."""
    return sys.stdout.isatty()


def phase(message: str) -> None:
    """Announce what the run is doing now, as one flushed line on stdout."""
    print(f"councilzoo: {message}", flush=True)


class Progress:
    """Progress over ``total`` steps named ``name``: a tqdm bar on a terminal, else one plain line
    per ``update`` (``name step k/total key=value ...``)."""

    def __init__(self, name: str, total: int, *, initial: int = 0, position: int = 0) -> None:
        self.name, self.total, self.n = name, total, initial
        self.bar = None
        if _on_terminal():
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=total, initial=initial, desc=name, position=position, dynamic_ncols=True, leave=True
            )

    def update(self, step: int, values: Mapping[str, float] | None = None) -> None:
        """Move to ``step`` and show ``values`` (the step's key numbers)."""
        shown = {k: f"{v:.3f}" for k, v in (values or {}).items() if isinstance(v, (int, float))}
        if self.bar is not None:
            if shown:
                self.bar.set_postfix(shown, refresh=False)
            if step != self.bar.n:
                self.bar.update(step - self.bar.n)
            else:
                self.bar.refresh()
        else:
            cells = " ".join(f"{k}={v}" for k, v in shown.items())
            print(f"{self.name} step {step}/{self.total} {cells}".rstrip(), flush=True)
        self.n = step

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
