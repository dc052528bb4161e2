"""Process facts shared by the code sandbox (sweeping pools of dead graders) and cohort members
(stopping when their launcher is gone)."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's counts: signalling it is only refused)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
