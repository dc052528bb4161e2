"""The one command that starts a whole cohort on one node: each member's world on its own devices.

``launch_cohort`` checks everything that can fail fast (output folder, data, models, trainer
settings at each world's real size) before any member starts, writes the resolved config the
members read, starts one world per member (``python``, ``torchrun`` or ``accelerate launch``, each
in its own process group with its own ``CUDA_VISIBLE_DEVICES``), waits, and stops every world when
one fails (after ``FAILURE_GRACE_S`` in which the others may exit, so every failed world is named)
or the launcher gets SIGTERM/SIGINT. Every process of a world dies with its
parent (``PR_SET_PDEATHSIG``), so no world outlives even a SIGKILLed launcher. Multi-node runs
start a subset of members per node (``members=``).

With ``warm_start`` a single-process world is forked from a server (multiprocessing's
forkserver) that imported torch, transformers, peft and TRL once, instead of a fresh ``python``
that spends ~6 s importing them: what many short runs (a reproduction's arms and seeds) pay for
over and over. The forked world runs the same ``councilzoo.learners.corl.member`` main in its own
session with its own environment; only what a library reads at import time keeps the value it
had when the server started.
"""

from __future__ import annotations

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
from councilzoo.learners.corl.config import CoRLConfig, MemberConfig
from councilzoo.learners.corl.member import (
    LAUNCHER_ENV,
    member_model_path,
    quiet_loading,
    set_parent_death_signal,
)
from councilzoo.learners.data import load_items
from councilzoo.learners.logging import read_metrics
from councilzoo.progress import phase
from councilzoo.tiny_members import build_tiny_models

__all__ = ["member_command", "launch_cohort", "CohortFailed"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What a warm-start server imports once (the member module pulls in torch and transformers).
_WARM_MODULES = ("councilzoo.learners.corl.member", "trl.trainer.grpo_trainer", "peft")
FAILURE_GRACE_S = 5.0  # after a world fails, how long the others may take to exit on their own


def _member_argv(config_path: Path, learner: str, index: int, resume: bool) -> list[str]:
    """The arguments of ``councilzoo.learners.corl.member``'s main for member ``index``."""
    argv = [str(config_path), "--learner", learner, "--member", str(index)]
    return argv + (["--resume"] if resume else [])


def member_command(
    config_path: Path, learner: str, index: int, member: MemberConfig, resume: bool
) -> list[str]:
    """How member ``index``'s world starts: python (one process), torchrun, or accelerate launch.

    A world on one machine gets a free local port; one spanning machines keeps its accelerate
    config's ``main_process_port``, which every machine must share."""
    entry = ["-m", "councilzoo.learners.corl.member", *_member_argv(config_path, learner, index, resume)]
    port = str(_free_port())
    if member.accelerate_config:
        local_port = ["--main_process_port", port] if member.machines() == 1 else []
        return [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            member.accelerate_config,
            "--num_processes",
            str(member.world_size()),
            *local_port,
            *entry,
        ]
    if member.num_processes > 1:
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(member.num_processes),
            "--master_port",
            port,
            *entry,
        ]
    return [sys.executable, *entry]


def _prepare_run(
    cfg: CoRLConfig, learner: str, resume: bool, overwrite: bool, indices: Sequence[int] | None = None
) -> tuple[Path, list[Path]]:
    """Everything that can fail fast, before any member starts and before anything is written:
    the trainer settings of each member started here (``indices``, default all) at its world's real
    size, the output folder, data, models. Returns the resolved config file the members read and
    every member's folder."""
    quiet_loading()
    out = Path(cfg.output_dir)
    indices = range(len(cfg.members)) if indices is None else indices
    for i in indices:
        _check_sharding_runs_here(cfg.members[i], f"members.{i} ({cfg.members[i].name})")
    folders = [cfg.member_dir(i) for i in range(len(cfg.members))]
    for i in indices:
        cfg.member_args(i, world_size=cfg.members[i].world_size())  # GRPOConfig errors now
    if any(engine.checkpoint_steps(folder, verify=False) for folder in folders) and not (resume or overwrite):
        raise ConfigError(
            f"output_dir {str(out)!r} already holds checkpoints of a run: pass --resume to continue "
            "it or --overwrite to start again"
        )
    if overwrite and not resume:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
    phase(f"loading training data ({cfg.data.dataset})")
    problems = load_items(cfg.data, cfg.seed, cfg.views)
    for i, member in enumerate(cfg.members):
        if not member.tiny_family:
            phase(f"model of {member.name}: {member_model_path(cfg, i)}")  # ModelNotCachedError now
    build_tiny_models(cfg, problems)
    write_run_files(out, cfg, cfg.seed, learner=learner, fingerprint=cfg.fingerprint())
    return out / "config.yaml", folders


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
) -> list[dict]:
    """Start the members' worlds on this node, wait, and return each member's last logged row.

    ``learner`` is the learner's registered name or ``module:Class`` path (the worlds import it).
    ``members`` selects a subset (multi-node: each node starts its own members). Devices come from
    each member's ``devices``. If any world exits with an error, every other world is stopped
    (its whole process group) and ``CohortFailed`` names the member and its exit status.
    """
    indices = list(range(len(cfg.members))) if members is None else list(members)
    config_path, folders = _prepare_run(cfg, learner, resume, overwrite, indices)
    names = ", ".join(cfg.members[i].name for i in indices)
    phase(f"starting {len(indices)} member world(s): {names} (each loads its model, then trains)")
    with _sigterm_interrupts():
        return _run_worlds(cfg, config_path, learner, indices, resume, timeout_s, folders)


def _run_worlds(
    cfg: CoRLConfig, config_path: Path, learner: str, indices: list[int], resume: bool,
    timeout_s: float | None, folders: Sequence[Path],
) -> list[dict]:
    procs: dict[int, subprocess.Popen | _ForkedWorld] = {}
    failed: list[str] = []

    def reap() -> None:  # forget the worlds that exited; name those that failed
        for i, proc in list(procs.items()):
            code = proc.poll()
            if code is not None:
                del procs[i]
                if code != 0:
                    failed.append(f"member {cfg.members[i].name!r} exited with status {code}")

    try:
        for world in cfg.worlds(indices):  # a shared_base group is one world of several members
            if len(world) > 1:
                procs[world[0]] = _start_group_world(cfg, config_path, learner, world, resume)
            else:
                procs[world[0]] = _start_world(cfg, config_path, learner, world[0], resume)
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
    return [_last_row(folders[i]) for i in indices]


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
    cfg: CoRLConfig, config_path: Path, learner: str, index: int, resume: bool
) -> subprocess.Popen | _ForkedWorld:
    """Start member ``index``'s world in its own session, marked with the launcher's pid and
    dying with it (``member.die_with_launcher``)."""
    member = cfg.members[index]
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{LAUNCHER_ENV: str(os.getpid())})
    if member.devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = member.devices
    if cfg.warm_start and member.num_processes == 1 and not member.accelerate_config:
        return _ForkedWorld(_member_argv(config_path, learner, index, resume), env)
    cmd = member_command(config_path, learner, index, member, resume)
    return subprocess.Popen(cmd, env=env, start_new_session=True, preexec_fn=set_parent_death_signal)


def _start_group_world(
    cfg: CoRLConfig, config_path: Path, learner: str, indices: list[int], resume: bool
) -> subprocess.Popen:
    """Start a ``shared_base`` group's one-process world (``corl/shared_world.py``), as ``_start_world``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{LAUNCHER_ENV: str(os.getpid())})
    entry = ["-m", "councilzoo.learners.corl.shared_world", str(config_path), "--learner", learner]
    cmd = [sys.executable, *entry, "--members", *map(str, indices), *(["--resume"] if resume else [])]
    return subprocess.Popen(cmd, env=env, start_new_session=True, preexec_fn=set_parent_death_signal)


class CohortFailed(RuntimeError):
    """A member's world failed (or the cohort timed out); every member was stopped."""


class _ForkedWorld:
    """A single-process member world forked from the warm-start server, with ``Popen``'s
    ``pid``, ``poll`` and ``wait``; like a ``Popen`` world it leads its own process group."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(_WARM_MODULES))  # read when the server first starts
        self.process = context.Process(target=_forked_member_main, args=(argv, env), name="member-world")
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


def _forked_member_main(argv: list[str], env: dict[str, str]) -> None:
    """A forked world: its own session and environment, then the member module's main."""
    os.setsid()
    os.environ.clear()
    os.environ.update(env)
    if env.get("OMP_NUM_THREADS"):  # read by the thread pools at import: apply it now
        import torch

        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    from councilzoo.learners.corl import member

    sys.exit(member.main(argv))


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
