"""Cohort members in separate processes: label exchange by (step, problem id), heartbeat, abort.

In multi-process Co-RL every member is its own job (its own ``accelerate launch`` / process
group, its own GPUs, vLLM colocated). Members meet at one ``torch.distributed.TCPStore`` hosted
by member 0 and share only what the reward rule needs: each member's own label per problem.

- Labels are written under ``label/{step}/{problem_id}/{member}``, never paired by position:
  a member that sees a paraphrase, or a different order, still reads the right peer label.
- Each member runs a heartbeat thread (its own store client) that bumps a counter every
  ``heartbeat_interval_s`` and watches the peers' counters. A peer whose counter stands still
  for ``heartbeat_timeout_s``, a store that stops answering (member 0 died), or an ``abort``
  message from a failing peer makes every wait raise ``PeerFailure`` with the reason; no member
  hangs or lingers as an orphan.
- A waiting member checks the store's keys every 50 ms and wakes at once when the heartbeat
  thread reports a failure; there is no file polling.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import torch.distributed as dist

__all__ = ["PeerFailure", "DistributedConfig", "CohortLink"]

_WAIT_SLICE_S = 0.05  # how often a waiting member re-checks the store (in-memory, not files)


class PeerFailure(RuntimeError):
    """Another cohort member died, hung, or reported an error; this member must stop too."""


@dataclass
class DistributedConfig:
    """Where members meet and how fast a dead member is detected (multi-process mode)."""

    host: str = field(default="127.0.0.1", metadata={"help": "Host of member 0, which serves the TCPStore."})
    port: int = field(default=29517, metadata={"help": "TCPStore port (member 0 listens on it)."})
    heartbeat_interval_s: float = field(default=1.0, metadata={"help": "Seconds between heartbeats."})
    heartbeat_timeout_s: float = field(
        default=30.0, metadata={"help": "A member silent this long is declared dead and all members stop."}
    )
    connect_timeout_s: float = field(
        default=300.0, metadata={"help": "How long to wait for all members to join."}
    )
    step_timeout_s: float = field(
        default=3600.0, metadata={"help": "Longest wait for peers' labels in one step (slow generation)."}
    )

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_interval_s < self.heartbeat_timeout_s:
            raise ValueError("need 0 < heartbeat_interval_s < heartbeat_timeout_s")


class _Heartbeat(threading.Thread):
    def __init__(self, link: CohortLink) -> None:
        super().__init__(name=f"councilzoo-heartbeat-{link.member}", daemon=True)
        self.link = link
        self.stop_event = threading.Event()

    def run(self) -> None:
        link, cfg = self.link, self.link.cfg
        try:
            store = dist.TCPStore(
                cfg.host, cfg.port, is_master=False, timeout=timedelta(seconds=cfg.heartbeat_timeout_s)
            )
        except Exception as exc:  # noqa: BLE001 - any store error means the cohort is unreachable
            link.fail(f"member {link.member}: cannot reach the cohort store at {cfg.host}:{cfg.port}: {exc}")
            return
        peers = [m for m in range(link.num_members) if m != link.member]
        last_value = {m: -1 for m in peers}
        last_change = {m: time.monotonic() for m in peers}
        while not self.stop_event.is_set():
            try:
                store.add(link.key(f"hb/{link.member}"), 1)
                if store.check([link.key("abort")]):
                    link.fail(store.get(link.key("abort")).decode())
                    return
                now = time.monotonic()
                for m in peers:
                    value = store.add(link.key(f"hb/{m}"), 0)
                    if value != last_value[m]:
                        last_value[m], last_change[m] = value, now
                    elif now - last_change[m] > cfg.heartbeat_timeout_s:
                        link.fail(
                            f"member {m} sent no heartbeat for {now - last_change[m]:.1f} s "
                            f"(timeout {cfg.heartbeat_timeout_s} s): it died or hung; "
                            f"stopping member {link.member}"
                        )
                        return
            except Exception as exc:  # noqa: BLE001
                link.fail(
                    f"member {link.member} lost the cohort store at {cfg.host}:{cfg.port} "
                    f"(member 0, which hosts it, probably died): {exc}"
                )
                return
            self.stop_event.wait(cfg.heartbeat_interval_s)


class CohortLink:
    """One member's connection to the cohort. Use as a context manager around training.

    ``publish(step, labels)`` then ``collect(step, problem_ids)`` exchange own labels;
    ``check()`` raises ``PeerFailure`` once a peer is gone; ``abort(reason)`` tells every peer
    to stop (called automatically when the ``with`` body raises).
    """

    def __init__(
        self, cfg: DistributedConfig, member: int, num_members: int, run_id: str = "corl",
        fingerprint: str = "",
    ) -> None:
        if not 0 <= member < num_members:
            raise ValueError(f"member index must be in [0, {num_members}), got {member}")
        self.cfg, self.member, self.num_members, self.run_id = cfg, member, num_members, run_id
        self.fingerprint = fingerprint
        self.failure: str | None = None
        self._failed = threading.Event()  # set by the heartbeat thread together with ``failure``
        self._published: dict[int, list[str]] = {}
        self.store = dist.TCPStore(
            cfg.host,
            cfg.port,
            world_size=num_members,
            is_master=member == 0,
            timeout=timedelta(seconds=cfg.connect_timeout_s),
            wait_for_workers=False,
        )
        self._heartbeat = _Heartbeat(self)

    def key(self, name: str) -> str:
        return f"councilzoo/{self.run_id}/{name}"

    def __enter__(self) -> CohortLink:
        self._heartbeat.start()
        self.store.set(self.key(f"joined/{self.member}"), self.fingerprint)
        keys = [self.key(f"joined/{m}") for m in range(self.num_members)]
        self._wait(keys, self.cfg.connect_timeout_s)
        prints = [self.store.get(k).decode() for k in keys]
        if len(set(prints)) > 1:
            self.abort(f"members joined with different configs (fingerprints {prints})")
            self.close(clean=False)
            raise PeerFailure(
                f"member {self.member}: the members' configs differ (fingerprints {prints}): start every "
                "member from the same config file"
            )
        return self

    def agree_on_checkpoint(self, steps: Sequence[int]) -> int | None:
        """The newest checkpoint step every member holds (None: none in common, start fresh).

        A member killed between two peers' saves has one checkpoint fewer; the cohort resumes
        where all of them can, so rounds and labels line up again.
        """
        self.store.set(self.key(f"checkpoints/{self.member}"), json.dumps(sorted(steps)))
        keys = [self.key(f"checkpoints/{m}") for m in range(self.num_members)]
        self._wait(keys, self.cfg.connect_timeout_s)
        common = set.intersection(*(set(json.loads(self.store.get(k))) for k in keys))
        return max(common) if common else None

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None and not isinstance(exc, PeerFailure):
            self.abort(f"member {self.member} failed: {exc_type.__name__}: {exc}")
        self.close(clean=exc is None)

    def fail(self, reason: str) -> None:
        """Record why the cohort must stop; every later ``check`` raises it."""
        self.failure = reason
        self._failed.set()

    def check(self) -> None:
        """Raise ``PeerFailure`` if a peer died, hung or aborted."""
        if self.failure is not None:
            raise PeerFailure(self.failure)

    def abort(self, reason: str) -> None:
        """Tell every member to stop with ``reason`` (best effort: the store may be gone)."""
        try:
            self.store.set(self.key("abort"), reason)
        except Exception:  # noqa: BLE001, S110 - the store being gone is itself what peers will notice
            pass

    def _wait(self, keys: Sequence[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        keys = list(keys)
        while True:
            self.check()
            try:
                if self.store.check(keys):
                    return
            except Exception:  # noqa: BLE001, S110 - the store is gone; the heartbeat reports why
                pass
            if time.monotonic() > deadline:
                raise PeerFailure(f"member {self.member}: peers did not answer within {timeout_s} s")
            self._failed.wait(_WAIT_SLICE_S)

    def publish(self, step: int, labels: Mapping[str, str | None]) -> None:
        """Make this member's own labels for ``step`` (problem id -> label or None) visible to peers."""
        self.check()
        for problem_id, label in labels.items():
            self.store.set(self.key(f"label/{step}/{problem_id}/{self.member}"), json.dumps(label))
        if step >= 2:  # every peer has read step - 2 (it published step - 1 after collecting step - 2)
            for problem_id in self._published.pop(step - 2, ()):
                self.store.delete_key(self.key(f"label/{step - 2}/{problem_id}/{self.member}"))
        self._published[step] = list(labels)

    def collect(self, step: int, problem_ids: Sequence[str]) -> dict[str, list[str | None]]:
        """Every member's own label for each problem of ``step``: problem id -> labels in member order.

        Blocks until all peers have published (or one fails: ``PeerFailure``).
        """
        keys = {
            (pid, m): self.key(f"label/{step}/{pid}/{m}")
            for pid in problem_ids
            for m in range(self.num_members)
        }
        self._wait(list(keys.values()), self.cfg.step_timeout_s)
        return {
            pid: [json.loads(self.store.get(keys[pid, m])) for m in range(self.num_members)]
            for pid in problem_ids
        }

    def close(self, clean: bool = True) -> None:
        """Stop the heartbeat; on a clean finish wait until every member is done (member 0 last,
        since it hosts the store)."""
        self._heartbeat.stop_event.set()
        self._heartbeat.join(timeout=5 * self.cfg.heartbeat_interval_s)
        if not clean:
            return
        grace = 3 * self.cfg.heartbeat_timeout_s
        # a slower member (a larger model of another family) may still be in its last step: wait as
        # long as a step may take; a member that dies meanwhile is stopped by the launcher
        last_step = max(grace, self.cfg.step_timeout_s)
        try:
            self.store.set(self.key(f"done/{self.member}"), "1")
            self.store.wait(
                [self.key(f"done/{m}") for m in range(self.num_members)], timedelta(seconds=last_step)
            )
            self.store.set(self.key(f"left/{self.member}"), "1")
            if self.member == 0:
                self.store.wait(
                    [self.key(f"left/{m}") for m in range(self.num_members)], timedelta(seconds=grace)
                )
        except Exception as exc:  # noqa: BLE001
            raise PeerFailure(f"member {self.member}: peers did not finish cleanly: {exc}") from exc
