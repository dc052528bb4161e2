"""Where every world of a run goes, decided once: the placement plan.

A run's worlds (a Co-RL cohort: one per member, or one per ``shared_base`` group, whose members
train a LoRA adapter each on one copy of their base in one process) are laid out on a description
of the machines (``Machines``: this machine, a list of hosts, or a SLURM allocation) by
``plan_cohort``; a TRACER run's one world (``num_processes`` on this machine) by ``plan_tracer``.
The ``Placement`` either returns says, for every world, its members, hosts and
devices, its processes, its per-device batch and gradient accumulation, vLLM's mode and memory
share, its rendezvous endpoint, the cohort link's address and the exact command of each of its
nodes. The launcher writes it to
``OUT/plan.json`` and runs it (``launch.py``); ``--dry-run`` prints it; each member process reads
its world from the file and derives nothing again (``member.py``).

The batch arithmetic of every learner lives here too: TRL's rule that a generation round splits
into whole global batches and whole optimizer steps (``fit_round``), TRACER's split of a round
into minibatches over a world (``split_round``) and the optimizer steps a round makes
(``updates_per_round``), each checked at a world's real size before anything starts.

``python -m councilzoo.learners.placement PLAN --world I`` runs world ``I``'s command for the node
it is on (``SLURMD_NODENAME``, else ``--host``): what each ``srun`` step of a SLURM job starts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from councilzoo.config import ConfigError

__all__ = [
    "Machines", "Node", "WorldMember", "World", "Placement", "PLAN_FILE", "VLLM_GROUP_PORT",
    "expand_hostlist", "fit_round", "split_round", "updates_per_round", "plan_cohort", "plan_tracer",
    "free_port", "main",
]

PLAN_FILE = "plan.json"
# TRL's default port of the vLLM weight-sync group; on one machine member i binds VLLM_GROUP_PORT + i
# unless the config sets one, so that members sharing a node do not collide.
VLLM_GROUP_PORT = 51216
_SLURM_PORT_BASE, _SLURM_PORTS_A_JOB = 20000, 40  # a job's ports: 20000 + (job id mod 1000) x 40


# ---- the machines ------------------------------------------------------------------------------


def expand_hostlist(text: str) -> list[str]:
    """SLURM's compact host list (``gpu[07-08,10],login1``) as host names, in order."""
    hosts = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        match = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if match is None:
            hosts.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            first, _, last = item.partition("-")
            if not first.isdigit() or (last and not last.isdigit()):
                raise ConfigError(f"SLURM_JOB_NODELIST {text!r}: cannot read the range {item!r}")
            for n in range(int(first), int(last or first) + 1):
                hosts.append(f"{prefix}{n:0{len(first)}d}{suffix}")
    if not hosts:
        raise ConfigError(f"host list {text!r} names no host")
    return hosts


@dataclass(frozen=True)
class Machines:
    """The machines a run may use: hosts (names or addresses), each with ``gpus_per_host`` GPUs
    (0: processes on CPUs), and where that description came from."""

    hosts: tuple[str, ...]
    gpus_per_host: int
    source: str
    slurm_job: int | None = None  # the job whose id gives the ports
    local: bool = False  # this machine alone: free ports, the members' own devices

    @classmethod
    def here(cls) -> Machines:
        """This machine alone, with the GPUs torch sees (``CUDA_VISIBLE_DEVICES`` applies)."""
        import torch

        gpus = torch.cuda.device_count()
        return cls(("127.0.0.1",), gpus, f"this machine ({gpus} GPU(s))", local=True)

    @classmethod
    def listed(cls, hosts: str, gpus_per_host: int) -> Machines:
        """Hosts named on the command line (``--hosts gpu[01-04] --gpus-per-host 8``)."""
        names = tuple(expand_hostlist(hosts))
        if len(set(names)) != len(names):
            raise ConfigError(f"--hosts {hosts!r}: a host is named twice")
        if gpus_per_host < 0:
            raise ConfigError(f"--gpus-per-host must be >= 0 (0: CPU processes), got {gpus_per_host}")
        return cls(names, gpus_per_host, f"--hosts {hosts} with {gpus_per_host} GPU(s) each")

    @classmethod
    def slurm(cls, env: Mapping[str, str] | None = None) -> Machines:
        """The SLURM job's allocation: ``SLURM_JOB_NODELIST`` and its GPUs per node
        (``GPUS_PER_NODE``, else ``SLURM_GPUS_ON_NODE``, else ``SLURM_GPUS_PER_NODE``, else 0)."""
        env = os.environ if env is None else env
        if not env.get("SLURM_JOB_ID") or not env.get("SLURM_JOB_NODELIST"):
            raise ConfigError("--slurm: not inside a SLURM job (SLURM_JOB_ID or SLURM_JOB_NODELIST is unset)")
        name, raw = next(((k, env[k]) for k in ("GPUS_PER_NODE", "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE")
                          if env.get(k)), ("GPUS_PER_NODE", "0"))  # fmt: skip
        count = raw.rsplit(":", 1)[-1]  # SLURM_GPUS_PER_NODE may read "a100:8"
        if not count.isdigit():
            raise ConfigError(f"{name}={raw!r}: expected a number of GPUs a node (0: CPU processes)")
        job, nodelist = int(env["SLURM_JOB_ID"]), env["SLURM_JOB_NODELIST"]
        return cls(tuple(expand_hostlist(nodelist)), int(count),
                   f"SLURM job {job} on {nodelist}, {name}={count}", slurm_job=job)  # fmt: skip

    @classmethod
    def from_flags(cls, slurm: bool, hosts: str | None, gpus_per_host: int) -> Machines | None:
        """The machines ``councilzoo train --slurm`` or ``--hosts`` describe (None: neither, so the
        run is planned on this machine, ``here``)."""
        if slurm and hosts:
            raise ConfigError("--slurm and --hosts: give one (the SLURM job names its own hosts)")
        if slurm:
            return cls.slurm()
        return cls.listed(hosts, gpus_per_host) if hosts else None

    @property
    def gpu(self) -> bool:
        return self.gpus_per_host > 0


# ---- the plan ----------------------------------------------------------------------------------


@dataclass
class Node:
    """One machine's part of a world: its host, devices and the command that starts it there."""

    host: str
    devices: str | None  # CUDA_VISIBLE_DEVICES; None: not set
    command: list[str]


@dataclass
class WorldMember:
    """One model a world trains: the cohort member (its index in the config, its name) and its
    ``GRPOConfig`` arguments, from which alone the member builds its trainer's."""

    index: int
    name: str
    grpo: dict[str, Any]  # GRPOConfig(**grpo)


@dataclass
class World:
    """One world: a cohort member's data-parallel group, or a ``shared_base`` group's one process
    (a LoRA adapter a member on one copy of the base); where it runs and how it trains."""

    index: int
    name: str  # the member's, or the shared_base group's
    processes: int
    per_node: int
    launcher: str  # python (one process), torchrun or accelerate
    rendezvous: str | None  # host:port where the world's processes meet
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    vllm: str  # off, colocate (share of each GPU) or server (its address)
    model: str  # a shared_base group's: the base
    members: list[WorldMember]
    nodes: list[Node] = field(default_factory=list)

    def completions_per_step(self) -> int:
        return self.per_device_train_batch_size * self.processes * self.gradient_accumulation_steps


@dataclass
class Placement:
    """Every world of a run, where and how it starts, and the run's shared settings."""

    learner: str  # module:Class the worlds import
    machines: str
    link: str | None  # host:port of the cohort link's store (member 0's first host); None: no cohort
    fingerprint: str | None  # what the cohort's members agree on (None: one world, nothing to agree)
    resume: bool
    config: dict[str, Any]  # the resolved config every world loads
    worlds: list[World]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    def write(self, out: str | Path) -> Path:
        path = Path(out) / PLAN_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json())
        return path.absolute()

    @classmethod
    def read(cls, path: str | Path) -> Placement:
        data = json.loads(Path(path).read_text())
        worlds = [
            World(**{**w, "members": [WorldMember(**m) for m in w["members"]],
                     "nodes": [Node(**n) for n in w["nodes"]]})
            for w in data.pop("worlds")
        ]  # fmt: skip
        return cls(**data, worlds=worlds)

    def world_of(self, member: int) -> World:
        """The world that trains member ``member`` (its index in the config)."""
        return next(w for w in self.worlds if any(m.index == member for m in w.members))

    def worlds_of(self, members: Sequence[int]) -> list[int]:
        """The worlds (indices, in plan order) that train ``members``: a group's world starts whole."""
        wanted = set(members)
        return [w.index for w in self.worlds if wanted & {m.index for m in w.members}]

    def hosts(self) -> list[str]:
        return list(dict.fromkeys(n.host for w in self.worlds for n in w.nodes))

    def describe(self) -> list[str]:
        """What ``--dry-run`` prints: one block per world."""
        link = f", cohort link at {self.link}" if self.link else ""
        lines = [f"placement on {self.machines}: {len(self.worlds)} world(s){link}"]
        for w in self.worlds:
            where = "; ".join(f"{n.host} devices {n.devices}" if n.devices is not None else n.host
                              for n in w.nodes)  # fmt: skip
            lines += [
                f"world {w.index} ({w.name}): {w.processes} process(es), {w.per_node} on each of "
                f"{len(w.nodes)} node(s), {w.launcher}",
                *([f"  members          {', '.join(m.name for m in w.members)}: a LoRA adapter each on "
                   "one copy of the base"] if len(w.members) > 1 else []),
                f"  on               {where}",
                f"  batch            {w.per_device_train_batch_size} a process x {w.processes} x "
                f"accumulation {w.gradient_accumulation_steps} = {w.completions_per_step()} completions "
                "an optimizer step",
                f"  vLLM             {w.vllm}",
                f"  rendezvous       {w.rendezvous or 'none (one process)'}",
            ]  # fmt: skip
            for n in w.nodes:
                env = f"CUDA_VISIBLE_DEVICES={n.devices} " if n.devices is not None else ""
                lines.append(f"  command on {n.host}: {env}{_shell(n.command)}")
        return lines


def _shell(argv: Sequence[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan_cohort(cfg: Any, learner: str, machines: Machines, resume: bool = False) -> Placement:
    """The placement of a cohort config's member worlds on ``machines`` (one ``ConfigError`` line
    naming the member where a world does not fit or its batch settings fail at its real size)."""
    from councilzoo.config import config_to_dict

    out = Path(cfg.output_dir).absolute()
    n = len(cfg.members)
    layout = _world_members(cfg)
    leads = [cfg.members[members[0]] for members in layout]  # a group's members share one shape
    where = [f"members.{i} ({m.name})" for i, m in enumerate(cfg.members)]
    world_where = [where[members[0]] if len(members) == 1 else f"shared_base {leads[k].shared_base!r}"
                   for k, members in enumerate(layout)]  # fmt: skip
    slots = _Slots(machines)
    shapes = [slots.shape(lead, world_where[k]) for k, lead in enumerate(leads)]
    spans = sorted(range(len(layout)), key=lambda k: -shapes[k][0])  # worlds on whole hosts first
    hosts = {k: slots.take(leads[k], *shapes[k], world_where[k]) for k in spans}
    ports = _Ports(machines, cfg.distributed.port, n)
    link_host = cfg.distributed.host if machines.local else hosts[0][0][0]
    resolved = config_to_dict(cfg)
    resolved["distributed"].update(host=link_host, port=ports.link)
    worlds = []
    for k, members in enumerate(layout):
        trained = []
        for i in members:
            member = cfg.members[i]
            group_port = {**cfg.trainer, **member.trainer}.get("vllm_group_port", ports.vllm_group(i))
            grpo = cfg.member_grpo_settings(i, member.world_size(), not machines.gpu, group_port)
            _check_grpo(grpo, where[i])
            trained.append(WorldMember(i, member.name, grpo))
        lead, grpo = leads[k], trained[0].grpo
        launcher = ("accelerate" if lead.accelerate_config
                    else "torchrun" if lead.world_size() > 1 else "python")  # fmt: skip
        rendezvous = f"{hosts[k][0][0]}:{ports.rendezvous(k)}" if launcher != "python" else None
        world = World(
            index=k, name=lead.shared_base if len(members) > 1 else lead.name, processes=lead.world_size(),
            per_node=shapes[k][1], launcher=launcher, rendezvous=rendezvous,
            per_device_train_batch_size=grpo["per_device_train_batch_size"],
            gradient_accumulation_steps=grpo.get("gradient_accumulation_steps", 1),
            vllm=_vllm(grpo), model=lead.model or str(cfg.tiny_model_dir(members[0])), members=trained,
        )  # fmt: skip
        module = "shared_world" if len(members) > 1 else "member"
        entry = ["-m", f"councilzoo.learners.corl.{module}", str(out / PLAN_FILE), "--world", str(k)]
        world.nodes = [Node(host, devices, _command(world, lead, rank, host, len(hosts[k]), entry))
                       for rank, (host, devices) in enumerate(hosts[k])]  # fmt: skip
        worlds.append(world)
    return Placement(
        learner=learner, machines=machines.source, link=f"{link_host}:{ports.link}",
        fingerprint=cfg.fingerprint(), resume=resume, config=resolved, worlds=worlds,
    )


def plan_tracer(cfg: Any, learner: str, machines: Machines, resume: bool = False) -> Placement:
    """The placement of a TRACER run: one world of ``cfg.num_processes`` processes on this machine
    (torchrun's c10d rendezvous when several; with GPUs, one a process), its trainer's
    ``GRPOConfig`` arguments checked at that size (one ``ConfigError`` line where they fail)."""
    from councilzoo.config import config_to_dict

    n = cfg.num_processes
    if not machines.local:
        raise ConfigError("TRACER runs one world on this machine; drop --hosts and --slurm")
    if machines.gpu and n > machines.gpus_per_host:
        raise ConfigError(f"num_processes {n}, but {machines.source}: lower num_processes to "
                          f"{machines.gpus_per_host} or fewer")  # fmt: skip
    members, batch, accumulation, vllm = [], 0, 1, "off (no trained model: controllers only)"
    if cfg.generation.enabled:
        grpo = cfg.trainer_settings(n, cpu=not machines.gpu)
        _check_grpo(grpo, "generation.trainer")
        members = [WorldMember(0, "tracer", grpo)]
        batch, accumulation = grpo["per_device_train_batch_size"], grpo.get("gradient_accumulation_steps", 1)
        vllm = _vllm(grpo)
    launcher = "torchrun" if n > 1 else "python"
    world = World(
        index=0, name="tracer", processes=n, per_node=n, launcher=launcher,
        rendezvous=f"127.0.0.1:{free_port()}" if n > 1 else None, per_device_train_batch_size=batch,
        gradient_accumulation_steps=accumulation, vllm=vllm, model=cfg.agents.model or "", members=members,
    )  # fmt: skip
    out = Path(cfg.output_dir).absolute()
    entry = ["-m", "councilzoo.learners.tracer.world", str(out / PLAN_FILE), "--world", "0"]
    world.nodes = [Node(machines.hosts[0], None, _command(world, None, 0, machines.hosts[0], 1, entry))]
    return Placement(learner=learner, machines=machines.source, link=None, fingerprint=None,
                     resume=resume, config=config_to_dict(cfg), worlds=[world])  # fmt: skip


def _world_members(cfg: Any) -> list[list[int]]:
    """The member indices of each world, in member order: a ``shared_base`` group's members in one
    world, every other member in a world of its own."""
    groups, layout = cfg.base_groups(), []
    for i, member in enumerate(cfg.members):
        members = groups[member.shared_base] if member.shared_base else [i]
        if members not in layout:
            layout.append(members)
    return layout


def _check_grpo(grpo: dict[str, Any], where: str) -> None:
    """``GRPOConfig``'s own checks, once, at planning time (a GPU plan made on a machine without
    one, e.g. ``--dry-run`` on a laptop, is checked without its mixed precision, which TRL tests
    against this machine)."""
    import torch
    from trl import GRPOConfig

    if not grpo.get("use_cpu") and not torch.cuda.is_available():
        grpo = {**grpo, "bf16": False, "fp16": False, "tf32": None}
    try:
        GRPOConfig(**grpo)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: trainer settings: {exc}") from exc


def _vllm(grpo: Mapping[str, Any]) -> str:
    if not grpo.get("use_vllm"):
        return "off (transformers generates)"
    port = grpo.get("vllm_group_port", VLLM_GROUP_PORT)  # TRACER's one world keeps TRL's default
    if grpo.get("vllm_mode", "colocate") == "server":
        url = grpo.get("vllm_server_base_url") or f"{grpo.get('vllm_server_host', '0.0.0.0')}:" \
                                                  f"{grpo.get('vllm_server_port', 8000)}"
        return f"server {url}, weight-sync group port {port}"
    return (f"colocate, {grpo.get('vllm_gpu_memory_utilization', 0.3)} of each GPU, "
            f"weight-sync group port {port}")  # fmt: skip


def _command(world: World, member: Any, rank: int, host: str, nodes: int, entry: list[str]) -> list[str]:
    """How one node of ``world`` starts: python (one process), torchrun (c10d rendezvous; across
    nodes each names its address, by which the rendezvous orders the ranks, so the plan's first
    node holds rank 0) or accelerate launch (its config file's machines and address replaced by the
    plan's, so no node edits a config)."""
    python = sys.executable
    if world.launcher == "python":
        return [python, *entry]
    main, port = world.rendezvous.rsplit(":", 1)
    if world.launcher == "torchrun":
        local = ["--local-addr", host] if nodes > 1 else []
        return [python, "-m", "torch.distributed.run", "--nnodes", str(nodes),
                "--nproc-per-node", str(world.per_node), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", world.rendezvous, "--rdzv-id", f"{world.name}-{port}", *local,
                *entry]  # fmt: skip
    return [python, "-m", "accelerate.commands.launch", "--config_file", member.accelerate_config,
            "--num_processes", str(world.processes), "--num_machines", str(nodes),
            "--machine_rank", str(rank), "--main_process_ip", main, "--main_process_port", port,
            *entry]  # fmt: skip


class _Slots:
    """The machines' free devices (GPUs) or process counts (CPUs), handed out world by world."""

    def __init__(self, machines: Machines) -> None:
        self.machines = machines
        self.free = {h: list(range(machines.gpus_per_host)) for h in machines.hosts}
        self.load = dict.fromkeys(machines.hosts, 0)

    def shape(self, member: Any, where: str) -> tuple[int, int]:
        """(nodes, processes a node) of the member's world. A world that names its machines keeps
        them; on several hosts, one larger than a node's GPUs spans whole nodes, so the world size
        (and with it the update) stays the config's on any node shape."""
        nodes, per_node, gpus = member.machines(), member.num_processes, self.machines.gpus_per_host
        if nodes == 1 and self.machines.gpu and per_node > gpus and not self.machines.local:
            if per_node % gpus:
                raise ConfigError(f"{where}: a world of {per_node} processes does not fill whole nodes of "
                                  f"{gpus} GPU(s) ({self.machines.source}); choose num_processes a "
                                  f"multiple of {gpus}")  # fmt: skip
            return per_node // gpus, gpus
        if self.machines.gpu and per_node > gpus:
            raise ConfigError(f"{where}: num_processes {per_node} a node, but the machines "
                              f"({self.machines.source}) have {gpus} GPU(s) each; lower num_processes "
                              "or set nodes")  # fmt: skip
        return nodes, per_node

    def take(self, member: Any, nodes: int, per_node: int, where: str) -> list[tuple[str, str | None]]:
        """(host, devices) of each node of the member's world: whole hosts for a world spanning
        several, else the least loaded host where it fits. On this machine alone a member's
        ``devices`` are kept; on several hosts the plan assigns them."""
        gpus, here = self.machines.gpus_per_host, self.machines.local

        def fits(host: str) -> bool:
            if here and member.devices is not None:
                return True
            if not self.machines.gpu:
                return nodes == 1 or self.load[host] == 0
            if nodes > 1:
                return len(self.free[host]) == gpus
            return len(self.free[host]) >= per_node

        chosen = sorted((h for h in self.machines.hosts if fits(h)), key=self.load.get)[:nodes]
        if nodes > 1:
            chosen.sort()  # the order torchrun's rendezvous ranks nodes in (by address): rank 0 first
        if len(chosen) < nodes:
            kind = f"{per_node} free GPU(s)" if self.machines.gpu else "no other world"
            raise ConfigError(f"{where}: needs {nodes} node(s) with {kind}, but the machines "
                              f"({self.machines.source}) have {len(chosen)} left: allocate more nodes "
                              "or fewer processes")  # fmt: skip
        placed = []
        for host in chosen:
            devices = member.devices if here else None
            if self.machines.gpu and devices is None:
                taken = self.free[host][:per_node]
                self.free[host] = self.free[host][per_node:]
                devices = ",".join(map(str, taken))
            self.load[host] += per_node
            placed.append((host, devices))
        return placed


class _Ports:
    """The run's ports. This machine alone: the config's store port, free rendezvous ports, member
    i's weight-sync group on 51216 + i. Named hosts: the same for every host's launcher, from a base
    (a SLURM job's id, else the config's store port): the store on the base, world i's rendezvous on
    base + 1 + i, its weight-sync group on base + 1 + N + i."""

    def __init__(self, machines: Machines, store_port: int, members: int) -> None:
        self.members, self.local = members, machines.local
        self.base = store_port
        if machines.slurm_job is not None:
            self.base = _SLURM_PORT_BASE + machines.slurm_job % 1000 * _SLURM_PORTS_A_JOB
            if 2 * members + 1 > _SLURM_PORTS_A_JOB:
                raise ConfigError(f"a SLURM job's {_SLURM_PORTS_A_JOB} ports serve up to "
                                  f"{(_SLURM_PORTS_A_JOB - 1) // 2} members, got {members}")  # fmt: skip
        self.link = self.base

    def rendezvous(self, i: int) -> int:
        return free_port() if self.local else self.base + 1 + i

    def vllm_group(self, i: int) -> int:
        return VLLM_GROUP_PORT + i if self.local else self.base + 1 + self.members + i


# ---- the batch arithmetic ----------------------------------------------------------------------


def fit_round(
    settings: Mapping[str, Any], prompts_per_round: int, num_generations: int, world: int, where: str
) -> dict[str, Any]:
    """``settings`` with the micro-batch a process takes (default: its share of the round, so a
    round is one optimizer step), checked for ``world`` processes: a generation round must split
    into whole micro-batches over the world (TRL's ``generation_batch_size`` rule) and whole
    optimizer steps (``gradient_accumulation_steps``). A wrong setting is one ``ConfigError`` line
    naming the key and values that work."""
    settings = dict(settings)
    settings.setdefault("per_device_train_batch_size", max(1, prompts_per_round * num_generations // world))
    per_device = settings["per_device_train_batch_size"]
    accumulation = settings.get("gradient_accumulation_steps", 1)
    iterations = settings.get("num_iterations", 1)

    def fits(prompts: int, per_device: int, world: int, accumulation: int) -> bool:
        batch, global_batch = prompts * num_generations, per_device * world
        return batch % global_batch == 0 and batch // global_batch * iterations % accumulation == 0

    if fits(prompts_per_round, per_device, world, accumulation):
        return settings
    batch = prompts_per_round * num_generations
    fixes = [
        f"per_device_train_batch_size {p}" for p in _nearest(per_device, batch)
        if fits(prompts_per_round, p, world, accumulation)
    ][:1]
    fixes += [
        f"num_processes {n}" for n in _nearest(world, 2 * world + 8)
        if fits(prompts_per_round, per_device, n, accumulation)
    ][:1]
    fixes += [
        f"gradient_accumulation_steps {a}" for a in _nearest(accumulation, batch)
        if fits(prompts_per_round, per_device, world, a)
    ][:1]
    fixes += [
        f"prompts_per_step {q}" for q in _nearest(prompts_per_round, 4 * prompts_per_round)
        if fits(q, per_device, world, accumulation)
    ][:1]
    use = f"; use {' or '.join(fixes)}" if fixes else ""
    processes = f"{per_device} x {world} process{'es' if world > 1 else ''}"
    if batch % (per_device * world):
        raise ConfigError(
            f"{where}: generation_batch_size {batch} (prompts_per_step {prompts_per_round} x num_generations "
            f"{num_generations}) is not divisible by the global batch {per_device * world} "
            f"(per_device_train_batch_size {processes}){use}"
        )
    micro_steps = batch // (per_device * world) * iterations
    raise ConfigError(
        f"{where}: a generation round of {batch} completions makes {micro_steps} "
        f"micro-steps (per_device_train_batch_size {processes}), which gradient_accumulation_steps="
        f"{accumulation} does not divide{use}"
    )


def split_round(turns: int, candidates: int, world: int, minibatches: int, where: str) -> int:
    """The micro-batch of each of ``world`` processes when a round of ``turns`` x ``candidates``
    completions trains in ``minibatches`` updates (TRACER's round): each process samples whole
    turns' groups (``turns`` a multiple of ``world``) and trains ``1 / minibatches`` of its share
    an update. A wrong size is one ``ConfigError`` line naming ``where``."""
    if turns % world:
        raise ConfigError(f"{where}: turns_per_step {turns} does not split into whole turns over "
                          f"{world} processes (each samples its turns' groups); choose a multiple of "
                          f"{world}")  # fmt: skip
    batch = turns * candidates
    if batch % (world * minibatches):
        raise ConfigError(
            f"{where}: a round of {batch} candidates (turns_per_step x num_candidates) does not split "
            f"into {minibatches} minibatches on each of {world} processes; choose sizes it divides"
        )
    return batch // (world * minibatches)


def updates_per_round(settings: Mapping[str, Any], world: int) -> float:
    """Optimizer steps a trainer takes on one generation round of ``GRPOConfig(**settings)`` in a
    world of ``world`` processes (TRL's ``steps_per_generation`` x passes / accumulation)."""
    micro_steps = settings["generation_batch_size"] // (settings["per_device_train_batch_size"] * world)
    return micro_steps * settings.get("num_iterations", 1) / settings.get("gradient_accumulation_steps", 1)


def _nearest(value: int, limit: int) -> list[int]:
    """1 .. ``limit`` ordered by distance from ``value`` (the smallest change first)."""
    return sorted(range(1, max(limit, value) + 1), key=lambda v: (abs(v - value), v))


# ---- one node of a world -----------------------------------------------------------------------


def node_of(world: World, host: str | None) -> Node:
    """The node of ``world`` on ``host`` (default: SLURM's name of this node, else this host's)."""
    host = host or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    for node in world.nodes:
        if node.host == host:
            return node
    raise ConfigError(f"world {world.index} ({world.name}) has no node on host {host!r}; "
                      f"its nodes: {[n.host for n in world.nodes]}")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m councilzoo.learners.placement PLAN --world I [--host H]``: exec world I's
    command for this node, with its devices."""
    parser = argparse.ArgumentParser(prog="councilzoo.learners.placement")
    parser.add_argument("plan")
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--host", default=None)
    args = parser.parse_args(argv)
    try:
        node = node_of(Placement.read(args.plan).worlds[args.world], args.host)
    except ConfigError as exc:
        sys.exit(f"councilzoo placement: error: {exc}")
    if node.devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = node.devices
    os.execv(node.command[0], node.command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
