"""The one command that starts a cohort: it runs the placement plan (``learners/placement.py``).
``run_plan`` is the part every learner's worlds share (TRACER's world of N processes too).

``launch_cohort`` plans the member worlds on the machines (this one, ``--hosts``, or a SLURM job),
checks everything that can fail fast (output folder, data, models) before any member starts,
writes the resolved config and ``plan.json``, starts each world's nodes that run here (the plan's
command, in its own process group with its own ``CUDA_VISIBLE_DEVICES``; in a SLURM job one
``srun`` step per world on its share of the allocation), waits, and stops every world when one
fails (after ``FAILURE_GRACE_S`` in which the others may exit, so every failed world is named) or
the launcher gets SIGTERM/SIGINT. Every process of a local world dies with its parent
(``PR_SET_PDEATHSIG``), so no world outlives even a SIGKILLed launcher; a SLURM step ends with
its ``srun``. With ``--hosts``, each host's launcher computes the same plan and starts its own
nodes; ``members=`` starts a subset (a ``shared_base`` group's world starts whole).

With ``warm_start`` a single-process world is forked from a server (multiprocessing's
forkserver) that imported torch, transformers, peft and TRL once, instead of a fresh ``python``
that spends ~6 s importing them: what many short runs (a reproduction's arms and seeds) pay for
over and over. The forked world runs the main of the module its plan's command names
(``councilzoo.learners.corl.member``, or ``shared_world`` for a group) in its own session with its
own environment; only what a library reads at import time keeps the value it
had when the server started.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from councilzoo.config import ConfigError, write_run_files
from councilzoo.learners import engine
from councilzoo.learners.checkpoint import TRAINER_CHECKPOINT_RE, check_checkpoint_folder
from councilzoo.learners.corl.config import CoRLConfig, MemberConfig
from councilzoo.learners.corl.member import (
    LAUNCHER_ENV,
    member_model_path,
    quiet_loading,
    set_parent_death_signal,
)
from councilzoo.learners.data import load_items
from councilzoo.learners.logging import read_metrics
from councilzoo.learners.placement import Machines, Node, Placement, World, plan_cohort
from councilzoo.progress import phase
from councilzoo.tiny_members import build_tiny_models

__all__ = ["launch_cohort", "run_plan", "CohortFailed"]


# What a warm-start server imports once (the member module pulls in torch and transformers).
_WARM_MODULES = ("councilzoo.learners.corl.member", "trl.trainer.grpo_trainer", "peft")
FAILURE_GRACE_S = 5.0  # after a world fails, how long the others may take to exit on their own


def _prepare_run(
    cfg: CoRLConfig, plan: Placement, learner: str, resume: bool, overwrite: bool, indices: Sequence[int]
) -> tuple[Path, list[Path]]:
    """Everything that can fail fast, before any member starts and before anything is written
    (the plan checked each world's batch settings at its real size): sharding on this machine, the
    output folder, data, models. Writes the resolved config and the plan; returns the plan's path and
    every member's folder."""
    quiet_loading()
    out = Path(cfg.output_dir)
    for i in indices:
        _check_sharding_runs_here(cfg.members[i], f"members.{i} ({cfg.members[i].name})")
    folders = [cfg.member_dir(i) for i in range(len(cfg.members))]
    if any(engine.checkpoint_steps(folder, verify=False) for folder in folders) and not (resume or overwrite):
        raise ConfigError(
            f"output_dir {str(out)!r} already holds checkpoints of a run: pass --resume to continue "
            "it or --overwrite to start again"
        )
    if overwrite and not resume:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    for i in indices:  # writable, and on --resume something intact to resume from
        check_checkpoint_folder(folders[i], resume, TRAINER_CHECKPOINT_RE)
    phase(f"loading training data ({cfg.data.dataset})")
    problems = load_items(cfg.data, cfg.seed, cfg.views)
    for i, member in enumerate(cfg.members):
        if not member.tiny_family:
            phase(f"model of {member.name}: {member_model_path(cfg, i)}")  # ModelNotCachedError now
    build_tiny_models(cfg, problems)
    write_run_files(out, cfg, cfg.seed, learner=learner, fingerprint=plan.fingerprint)
    return plan.write(out), folders


# What accelerate (1.16) starts only on GPUs: on a CPU it gives such a world plain data parallel
# (MULTI_CPU) without a word, so a sharded recipe would train unsharded and save unsharded.
_SHARDED_BACKENDS = ("FSDP", "DEEPSPEED")


def _check_sharding_runs_here(member: MemberConfig, where: str) -> None:
    """Refuse an FSDP or DeepSpeed member world on a machine without CUDA, before anything starts."""
    import torch

    backend = member.accelerate_settings().get("distributed_type")
    if backend in _SHARDED_BACKENDS and not torch.cuda.is_available():
        raise ConfigError(
            f"{where}: accelerate_config {member.accelerate_config} asks for {backend}, which accelerate "
            "runs on GPUs only (on a CPU the world would silently be plain data parallel); run it on a GPU "
            "machine or leave accelerate_config out"
        )


def launch_cohort(
    cfg: CoRLConfig,
    learner: str,
    *,
    members: Sequence[int] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    timeout_s: float | None = None,
    machines: Machines | None = None,
    host: str | None = None,
) -> list[dict]:
    """Plan the members' worlds on ``machines`` (default: this machine), start those that run
    here, wait, and return each started member's last logged row.

    ``learner`` is the learner's registered name or ``module:Class`` path (the worlds import it).
    ``members`` selects a subset. With several hosts (``Machines.listed``) this launcher starts the
    nodes on ``host`` (default: this host's name); in a SLURM job (``Machines.slurm``) it starts
    every world as an ``srun`` step. If any world exits with an error, every other world is stopped
    (its whole process group) and ``CohortFailed`` names the member and its exit status.
    """
    machines = machines or Machines.here()
    plan = plan_cohort(cfg, learner, machines, resume)
    worlds = plan.worlds_of(range(len(cfg.members)) if members is None else members)
    starts = _starts_here(plan, machines, worlds, host)
    indices = [m.index for w in worlds for m in plan.worlds[w].members]
    plan_path, folders = _prepare_run(cfg, plan, learner, resume, overwrite, indices)
    named = not machines.local and machines.slurm_job is None  # a host's part of a run on named hosts
    names = ", ".join(plan.worlds[w].name + (f" on {node.host}" if named else "") for w, node in starts)
    how = " as srun steps" if machines.slurm_job is not None else ""
    phase(f"starting {len(starts)} member world(s){how}: {names} (each loads its model, then trains)")
    run_plan(plan, plan_path, starts, machines, timeout_s, cfg.warm_start)
    started = dict.fromkeys(w for w, _ in starts)
    return [_last_row(folders[m.index]) for w in started for m in plan.worlds[w].members]


def _starts_here(
    plan: Placement, machines: Machines, worlds: Sequence[int], host: str | None
) -> list[tuple[int, Node | None]]:
    """(world, node) pairs this launcher starts: every node of one machine; in a SLURM job each
    world whole (node None: its ``srun`` step); with several hosts, the nodes on ``host``."""
    if machines.slurm_job is not None:
        return [(w, None) for w in worlds]
    if len(machines.hosts) == 1:
        return [(w, node) for w in worlds for node in plan.worlds[w].nodes]
    host = host or socket.gethostname().split(".")[0]
    if host not in machines.hosts:
        raise ConfigError(f"--host {host!r} is not one of --hosts {list(machines.hosts)}; name this machine "
                          "with --host")  # fmt: skip
    return [(w, node) for w in worlds for node in plan.worlds[w].nodes if node.host == host]


def run_plan(
    plan: Placement, plan_path: Path, starts: list[tuple[int, Node | None]], machines: Machines,
    timeout_s: float | None = None, warm_start: bool = False,
) -> None:
    """Start the ``(world, node)`` pairs of ``plan`` (written at ``plan_path``) that run here, wait
    for them, and stop them all (``CohortFailed``) when one fails, the time runs out or the
    launcher gets SIGTERM/SIGINT. ``warm_start``: single-process worlds forked from the warm server."""
    with _sigterm_interrupts():
        _run_worlds(plan, plan_path, starts, machines, timeout_s, warm_start)


def _run_worlds(
    plan: Placement, plan_path: Path, starts: list[tuple[int, Node | None]], machines: Machines,
    timeout_s: float | None, warm_start: bool,
) -> None:
    procs: dict[int, subprocess.Popen | _ForkedWorld] = {}
    failed: list[str] = []

    def reap() -> None:  # forget the worlds that exited; name those that failed
        for k, proc in list(procs.items()):
            code = proc.poll()
            if code is not None:
                del procs[k]
                if code != 0:
                    failed.append(f"{_who(plan.worlds[starts[k][0]])} exited with status {code}")

    try:
        for k, (i, node) in enumerate(starts):
            procs[k] = _start_world(plan, plan_path, i, node, machines, warm_start)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while procs:
            reap()
            if failed:
                # a failing world takes its peers down (their link breaks), and a peer can exit
                # first: wait a moment for the others, so the message also names the cause
                grace_end = time.monotonic() + FAILURE_GRACE_S
                while procs and time.monotonic() < grace_end:
                    time.sleep(0.05)
                    reap()
                break
            if deadline is not None and time.monotonic() > deadline:
                failed.append(f"the cohort did not finish within {timeout_s} s")
                break
            time.sleep(0.2)
    except KeyboardInterrupt as exc:
        failed.append(f"the launcher was interrupted ({str(exc) or 'SIGINT'})")
    finally:
        for proc in procs.values():
            _stop(proc)
    if failed:
        raise CohortFailed("; ".join(failed))


@contextmanager
def _sigterm_interrupts():
    """Within: SIGTERM ends the launcher as Ctrl-C does, through ``launch_cohort``'s cleanup that
    stops every world (main thread only, where Python delivers signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _start_world(
    plan: Placement, plan_path: Path, index: int, node: Node | None, machines: Machines, warm_start: bool
) -> subprocess.Popen | _ForkedWorld:
    """Start one node of world ``index`` here (or, ``node`` None, the whole world as an ``srun``
    step) in its own session; a local world is marked with the launcher's pid and dies with it
    (``member.die_with_launcher``), an ``srun`` step ends when its ``srun`` gets SIGTERM."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    world = plan.worlds[index]
    if node is None:
        cmd = _srun_step(plan_path, world, machines)
        return subprocess.Popen(cmd, env=env, start_new_session=True,
                                preexec_fn=lambda: set_parent_death_signal(signal.SIGTERM))  # fmt: skip
    env[LAUNCHER_ENV] = str(os.getpid())
    if node.devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = node.devices
    if warm_start and world.launcher == "python":
        return _ForkedWorld(node.command[1:], env)
    return subprocess.Popen(node.command, env=env, start_new_session=True, preexec_fn=set_parent_death_signal)


def _who(world: World) -> str:
    """A world as a failure names it: its member, or its group's members."""
    if len(world.members) == 1:
        return f"member {world.name!r}"
    return f"shared_base group {world.name!r} (members {', '.join(m.name for m in world.members)})"


def _srun_step(plan_path: Path, world: World, machines: Machines) -> list[str]:
    """One job step of ``world`` on its nodes: one task a node, each running the plan's command for
    its node (``python -m councilzoo.learners.placement``); steps share nodes (``--overlap``), the
    plan keeps their devices apart."""
    hosts = [n.host for n in world.nodes]
    gpus = [f"--gres=gpu:{machines.gpus_per_host}"] if machines.gpu else []
    return ["srun", "--mpi=none", "--overlap", "--kill-on-bad-exit=1", f"--job-name={world.name}",
            f"--nodes={len(hosts)}", f"--ntasks={len(hosts)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(hosts)}", *gpus,
            sys.executable, "-m", "councilzoo.learners.placement", str(plan_path),
            "--world", str(world.index)]  # fmt: skip


class CohortFailed(RuntimeError):
    """A member's world failed (or the cohort timed out); every member was stopped."""


class _ForkedWorld:
    """A single-process world forked from the warm-start server, with ``Popen``'s ``pid``,
    ``poll`` and ``wait``; like a ``Popen`` world it leads its own process group. ``argv``: the
    plan's command after the interpreter (``-m MODULE PLAN --world I``)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(_WARM_MODULES))  # read when the server first starts
        self.process = context.Process(target=_forked_world_main, args=(argv, env), name="member-world")
        self.process.start()
        self.pid = self.process.pid
        while self.process.is_alive() and _group_of(self.pid) != self.pid:
            time.sleep(0.005)  # until the world leads its group, so that stopping it reaches it all

    def poll(self) -> int | None:
        return self.process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self.process.join(timeout)
        if self.process.exitcode is None:
            raise subprocess.TimeoutExpired("member world", timeout)
        return self.process.exitcode


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _forked_world_main(argv: list[str], env: dict[str, str]) -> None:
    """A forked world: its own session and environment, then the main of the module ``argv`` names
    (``-m MODULE ARGS...``)."""
    os.setsid()
    os.environ.clear()
    os.environ.update(env)
    if env.get("OMP_NUM_THREADS"):  # read by the thread pools at import: apply it now
        import torch

        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    _, module, *args = argv
    sys.exit(importlib.import_module(module).main(args))


def _stop(proc: subprocess.Popen | _ForkedWorld) -> None:
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _last_row(member_dir: Path) -> dict:
    """A member's last logged row with a reward (empty if none)."""
    path = member_dir / "metrics.jsonl"
    rows = [r for r in read_metrics(path) if r.get("reward") is not None] if path.is_file() else []
    return rows[-1] if rows else {}
