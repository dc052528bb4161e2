"""Process facts shared by the code sandbox (sweeping pools of dead graders), cohort members
(stopping when their launcher is gone) and the experiments that report their CPU cost."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["pid_alive", "cpu_clock"]

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's counts: signalling it is only refused)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rusage_seconds() -> float:
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _own_cpuacct_group() -> Path | None:
    """The cgroup v1 cpuacct group this process is in, or None (cgroup v2 only, or not Linux)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return CPUACCT / path.lstrip("/")
    return None


@contextmanager
def cpu_clock(name: str) -> Iterator[dict[str, float | str]]:
    """Yields a dict that gets ``cpu_s`` (CPU seconds of this process and every process it starts
    inside the block) and ``cpu_source`` when the block ends. Where cgroup v1's cpuacct is writable
    (root), the process moves into a group of its own for the block, so processes nobody waits for
    (forked member worlds, their fork server's children) are counted; else rusage of this process
    and its waited-for children, which misses those."""
    parent = _own_cpuacct_group()
    group = None if parent is None else parent / f"{name}-{os.getpid()}"
    if group is not None:
        try:
            group.mkdir()
            (group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:  # not root, or no cgroup v1: rusage instead
            if group.is_dir():
                group.rmdir()
            group = None
    start, measured = _rusage_seconds(), {}
    try:
        yield measured
    finally:
        if group is None:
            measured.update(
                cpu_s=_rusage_seconds() - start, cpu_source="rusage of the process and its waited children"
            )
        else:
            measured.update(
                cpu_s=int((group / "cpuacct.usage").read_text()) / 1e9, cpu_source="cpuacct group"
            )
            (parent / "cgroup.procs").write_text(str(os.getpid()))
            try:
                group.rmdir()
            except OSError:  # a descendant still exiting: the empty group is left, harmless
                pass
