"""What a long run tells its user: one line per phase, and progress over steps.

On a terminal, progress is a tqdm bar; anywhere else (a batch job's log file, a pipe) it is one
plain line per update, since a bar redrawn with escape codes leaves only clutter in a file.
Phase lines ("building tiny model qwen", "starting 2 member worlds") are printed either way, so
no run is silent while it loads, builds or warms up.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

__all__ = ["phase", "Progress", "LockstepProgress"]
NO_ESTIMATE = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"  # tqdm's bar without its ETA


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


class LockstepProgress:
    """A bar over episodes that ``wave`` envs play in lockstep (``rollout.RolloutEngine``). They
    end together, so a count of finished episodes stands still for minutes, and an estimate from
    the first to end is off by a whole wave (hours, where the run takes minutes). So the bar also
    shows the turns played so far, progress inside the episodes, and shows its time estimate only
    once a whole wave has finished. ``enabled=False``: nothing is drawn."""

    def __init__(self, total: int, initial: int, wave: int, desc: str, enabled: bool = True) -> None:
        from tqdm.auto import tqdm

        self.estimate_from = initial + max(wave, 1)
        self.bar = tqdm(total=total, initial=initial, desc=desc, unit="ep", disable=not enabled,
                        dynamic_ncols=True, bar_format=NO_ESTIMATE)

    def played(self, turns: int) -> None:
        """``turns`` turns played so far (redrawn at tqdm's own pace)."""
        self.bar.set_postfix_str(f"{turns:,} turns played", refresh=False)
        self.bar.update(0)

    def finished(self) -> None:
        """One more episode finished; after a whole wave the bar estimates the time left."""
        self.bar.update(1)
        if self.bar.n >= self.estimate_from and self.bar.bar_format is not None:
            self.bar.bar_format = None  # tqdm's default: with the estimate

    def __enter__(self) -> LockstepProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()
