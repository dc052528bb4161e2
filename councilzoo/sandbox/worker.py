"""The sandbox's worker process: runs untrusted programs, one forked child per program.

Started by the pool (``councilzoo.sandbox.pool``) as ``python -s -B worker.py ROOT`` with a
scrubbed environment, so it imports nothing from councilzoo but its own folder's standard-library
modules (the programs cannot import the project): ``protocol`` (its messages), ``isolation`` (the
layers), ``programs`` (what runs in a program's children) and ``values`` (plain data, canonical
outputs). It serves jobs read from fd 0 and answers on fd 1. Reusing one interpreter and forking
it per program makes a program cost milliseconds instead of a Python start-up.

Jobs share nothing. The worker is a clean template: it never reads a job. For each job it forks a
run process, which reads the job, forks the program's children, answers and exits, so a program's
memory holds its own job and nothing of an earlier one (freed memory is not cleared, and a job's
source or outputs once parsed in a long-lived process stayed readable to later programs). A
program's standard streams and the run's reply are anonymous files (``memfd``), new for each
run: no path names them, so no program can read, replace or link them.

Where the kernel grants a PID namespace its init is the worker: after every run it kills every
other process of the namespace (``kill(-1)``), so nothing a program started outlives its run,
whatever group or session it moved to; the hello message says which layers were granted. Every
line a child writes is parsed within bounds (the run's byte budget, the recursion limit,
4,300-digit JSON numbers): a hostile line is the program's error.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import json
import os
import select
import signal
import sys
import tempfile
import time

if __package__:  # imported as councilzoo.sandbox.worker
    from councilzoo.sandbox import isolation, programs, protocol, values
else:  # run by path (the pool does): this folder heads sys.path and nothing of councilzoo loads
    import isolation
    import programs
    import protocol
    import values

__all__ = ["Worker", "main"]

PREVIEW_BYTES = 2_048  # stdout/stderr kept in a result for diagnostics
MAX_FD = 4_096
CALLER_GONE, RUN_FAILED = 1, 2  # exit codes of a run process that did not answer
EXIT_GRACE_S = 0.2  # how long a child whose channel closed gets to exit before its status is read
DISK_POLL_S = 0.05  # without a tmpfs, how often the worker measures a running program's folder


class _Lines:
    """JSON lines from a child's pipe, read against a deadline and a byte budget, while watching
    the caller's pipe (it only becomes readable mid-run when the caller is gone) and, where no
    tmpfs holds the quota, the program's folder every ``DISK_POLL_S``."""

    def __init__(self, fd: int, budget: int, caller_fd: int, over_quota=None) -> None:
        self.fd, self.budget, self.caller_fd, self.over_quota = fd, budget, caller_fd, over_quota
        self.buffer, self.used, self.eof = bytearray(), 0, False

    def next(self, deadline: float) -> object:
        """The next parsed line (junk lines are None), or ``"eof"``, ``"timeout"``, ``"overflow"``
        or ``"disk"``."""
        while b"\n" not in self.buffer:
            if self.eof:
                return "eof"
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            wait = left if self.over_quota is None else min(left, DISK_POLL_S)
            ready, _, _ = select.select([self.fd, self.caller_fd], [], [], wait)
            if self.caller_fd in ready:
                raise protocol.CallerGone
            if self.over_quota is not None and self.over_quota():
                return "disk"
            if not ready:
                continue
            chunk = os.read(self.fd, 65_536)
            self.eof = not chunk
            self.used += len(chunk)
            if self.used > self.budget:
                return "overflow"
            self.buffer += chunk
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        try:  # the budget bounds a line's size; json stops at the recursion limit and at 4,300 digits
            return json.loads(line)
        except (ValueError, RecursionError):
            return None


def _write_before(fd: int, data: bytes, deadline: float) -> bool:
    """Write all of ``data`` to a non-blocking pipe; False if the reader stalls past the deadline."""
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        _, ready, _ = select.select([], [fd], [], left)
        if ready:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
            except BrokenPipeError:
                return False
    return True


# --- the worker -----------------------------------------------------------------------------------


class Worker:
    """Serves jobs, each in a run process of its own (``serve``); children per program (per input
    for stdin programs)."""

    def __init__(self, root: str, caller_fd: int, granted: dict[str, bool]) -> None:
        self.root, self.caller_fd, self.granted = root, caller_fd, granted
        self.jail = None
        self.remove_leftovers()  # what a killed predecessor left
        self.init = granted["pid_namespace"] and os.getpid() == 1
        self.quota = granted["mount_namespace"] and isolation.quota_works(root)
        self.jail = isolation.build_minimal_root(root) if self.quota else None
        self.seccomp = isolation.build_seccomp(deny_metadata=self.jail is None)
        self.landlock = isolation.landlock_available()

    def remove_leftovers(self) -> None:
        """Delete the program folders of the root (a run on disk leaves them to this process, so
        the caller's clock stops first)."""
        for name in os.listdir(self.root):
            if os.path.join(self.root, name) != self.jail:
                isolation.remove_tree(os.path.join(self.root, name))

    def hello(self) -> dict:
        return {"network_namespace": self.granted["network_namespace"],
                "ipc_namespace": self.granted["ipc_namespace"], "pid_namespace": self.init,
                "disk_quota": self.quota, "seccomp": self.seccomp is not None,
                "landlock": self.landlock, "minimal_root": self.jail is not None,
                "pid": os.getpid()}  # fmt: skip

    def serve(self, protocol_out: int) -> None:
        """Run jobs until the caller is gone. This process never reads a job nor its result: when
        one is there it forks a run process that reads and runs it and writes the reply to an
        anonymous file; it then kills and reaps all the run left and has the kernel copy the reply
        to the caller (``sendfile``). Ends when a run process says the caller is gone, or fails."""
        gc.freeze()  # the run processes share this one's objects untouched (fewer copied pages)
        while True:
            select.select([self.caller_fd], [], [])  # a job, or the caller's end closed
            reply = os.memfd_create("reply")
            run = os.fork()
            if run == 0:
                code = RUN_FAILED
                try:
                    code = self.serve_one(reply)
                finally:
                    os._exit(code)
            _, status = os.waitpid(run, 0)
            if self.init:
                _kill_and_reap_all()
            try:
                if os.waitstatus_to_exitcode(status) != 0:
                    return
                _send_file(protocol_out, reply)
            except BrokenPipeError:  # the caller is gone
                return
            finally:
                os.close(reply)
            self.remove_leftovers()

    def serve_one(self, reply_fd: int) -> int:
        """In the run process: one job, in IPC and mount namespaces of its own where the kernel
        allows (so whatever the run mounts goes with it)."""
        try:
            job = protocol.read_message(self.caller_fd)
            if job is None:
                return CALLER_GONE
            flags = isolation.CLONE_NEWIPC if self.granted["ipc_namespace"] else 0
            flags |= isolation.CLONE_NEWNS if self.jail is not None else 0
            if flags:
                isolation.LIBC.unshare(flags)
            reply = self.run(job)
        except protocol.CallerGone:
            return CALLER_GONE
        protocol.write_message(reply_fd, reply)
        return 0

    def run(self, job: dict) -> dict:
        start = time.perf_counter()
        if job["mode"] == "stdin":
            result = {"status": "ok", "outputs": [], "error": "", "stdout": "", "stderr": ""}
            for text in job["inputs"]:
                one = self._run_once(job, stdin=text)
                if one["status"] != "ok":
                    result.update(one, outputs=result["outputs"])
                    break
                result["outputs"].append(values.canonical_stdout(one["raw_stdout"]))
                result["stdout"], result["stderr"] = one["stdout"], one["stderr"]
        else:
            result = self._run_once(job, stdin="")
        result.pop("raw_stdout", None)
        result["wall_s"] = time.perf_counter() - start
        return result

    def _run_once(self, job: dict, stdin: str) -> dict:
        if self.jail is not None:
            workdir = self.jail + isolation.JOB_DIR
        else:
            workdir = tempfile.mkdtemp(prefix="prog-", dir=self.root)
        mounted = self.quota and isolation.mount_quota(workdir, job["disk_mb"], job["max_files"])
        streams = [os.memfd_create(name) for name in ("stdin", "stdout", "stderr")]
        os.write(streams[0], stdin.encode())
        os.lseek(streams[0], 0, os.SEEK_SET)
        run = _Run(self, job, workdir, streams)
        if not mounted:
            run.over_quota = lambda: isolation.over_quota(workdir, job["disk_mb"] * 2**20, job["max_files"])
        try:
            status, outputs, error = run.play()
            if status == "ok" and run.over_quota is not None and run.over_quota():  # it ended between polls
                status, error = "error", _quota_error(job)
        finally:
            run.end()
            if mounted:
                isolation.LIBC.umount2(workdir.encode(), isolation.MNT_DETACH)
                if self.jail is None:
                    isolation.remove_tree(workdir)
        stdout, stdout_size = _read_bounded(streams[1], job["max_output_bytes"])
        stderr, _ = _read_bounded(streams[2], PREVIEW_BYTES)
        for fd in streams:
            os.close(fd)
        if status in ("ok", "error", "crashed") and stdout_size > job["max_output_bytes"]:
            status, error = "output_limit", f"over {job['max_output_bytes']} bytes of output"
        return {"status": status, "outputs": outputs, "error": error, "raw_stdout": stdout,
                "stdout": stdout[:PREVIEW_BYTES], "stderr": stderr}  # fmt: skip


class _Run:
    """One run: the children, their pipes, the deadline, and the kill that ends them all."""

    def __init__(self, worker: Worker, job: dict, workdir: str, streams: list[int]) -> None:
        self.worker, self.job, self.workdir, self.streams = worker, job, workdir, streams
        self.deadline = time.monotonic() + job["timeout_s"]
        self.budget = job["max_output_bytes"] * max(1, len(job["inputs"])) + 65_536
        self.pids: list[int] = []
        self.statuses: dict[int, int] = {}
        self.fds: list[int] = []
        self.over_quota = None

    def pipe(self) -> tuple[int, int]:
        ends = os.pipe()
        self.fds += ends
        return ends

    def lines(self, fd: int) -> _Lines:
        return _Lines(fd, self.budget, self.worker.caller_fd, self.over_quota)

    def spawn(self, fds: list[int], body) -> int:
        """Fork a confined child whose fds 0.. are exactly ``fds``, and run ``body(job)`` in it."""
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                high = [os.dup(fd) for fd in fds]  # out of the way of the targets
                for target, fd in enumerate(high):
                    os.dup2(fd, target)
                os.closerange(len(fds), MAX_FD)
                isolation.confine(
                    self.job, self.workdir, self.worker.jail, self.worker.seccomp, self.worker.landlock
                )
                body(self.job)
            finally:
                os._exit(70)
        self.pids.append(pid)
        return pid

    def play(self) -> tuple[str, list[str], str]:
        """Status, canonical outputs and error of the run."""
        job, (stdin, stdout, stderr) = self.job, self.streams
        if job["mode"] == "call":
            requests, to_program = self.pipe()
            from_program, replies = self.pipe()
            program = self.spawn([stdin, stdout, stderr, requests, replies], programs.serve_functions)
            self.close(requests, replies)
            return self._calls(program, to_program, self.lines(from_program))
        if job["mode"] == "script":
            requests, to_program = self.pipe()
            from_program, replies = self.pipe()
            verdict, to_worker = self.pipe()
            null = os.open(os.devnull, os.O_RDWR)
            self.fds.append(null)
            self.spawn([stdin, stdout, stderr, requests, replies], programs.serve_functions)
            tests = protocol.read_secret(self.worker.caller_fd)  # only now: the program's memory lacks them
            tester = self.spawn(
                [null, null, null, from_program, to_program, to_worker],
                lambda job: programs.run_tests(job, tests),
            )
            tests[:] = bytes(len(tests))
            self.close(requests, replies, from_program, to_program, to_worker)
            return self._finish(tester, self.lines(verdict))
        verdict, to_worker = self.pipe()
        program = self.spawn([stdin, stdout, stderr, to_worker], programs.run_main)
        self.close(to_worker)
        return self._finish(program, self.lines(verdict))

    def _calls(self, program: int, to_program: int, lines: _Lines) -> tuple[str, list[str], str]:
        os.set_blocking(to_program, False)
        outputs: list[str] = []
        message = lines.next(self.deadline)
        if not (isinstance(message, dict) and "ready" in message):
            return self._failed(program, message, outputs)
        batch = []
        for text in self.job["inputs"]:
            try:
                with values.digits_unlimited():  # a test input is the problem's data
                    value = ast.literal_eval(text)
                batch.append([values.to_plain(tuple(value)), ["d", []]])
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as err:
                return "error", outputs, f"bad test input {text[:80]!r}: {programs.short_error(err)}"
        request = {"call": self.job["entry_point"], "batch": batch}  # one write: no ping-pong per input
        if batch and not _write_before(to_program, (json.dumps(request) + "\n").encode(), self.deadline):
            stalled = "timeout" if time.monotonic() >= self.deadline else "eof"
            return self._failed(program, stalled, outputs)
        for _ in batch:
            message = lines.next(self.deadline)
            if not (isinstance(message, dict) and "value" in message):
                return self._failed(program, message, outputs)
            try:
                outputs.append(values.canonical(values.from_plain(message["value"])))
            except (ValueError, TypeError, RecursionError, OverflowError) as err:
                error = programs.short_error(err)
                return "error", outputs, f"the program returned other than plain data: {error}"
        return "ok", outputs, ""

    def _finish(self, child: int, lines: _Lines) -> tuple[str, list[str], str]:
        message = lines.next(self.deadline)
        if isinstance(message, dict) and message.get("done") is True:
            return "ok", [], ""
        return self._failed(child, message, [])

    def _failed(self, child: int, message: object, outputs: list[str]) -> tuple[str, list[str], str]:
        if message == "timeout":
            return "timeout", outputs, f"over {self.job['timeout_s']} s"
        if message == "overflow":
            return "output_limit", outputs, f"over {self.job['max_output_bytes']} bytes of output"
        if message == "disk":
            return "error", outputs, _quota_error(self.job)
        if isinstance(message, dict) and isinstance(message.get("error"), str):
            kind, text = message.get("type"), message["error"]
            text = text if kind in (None, "SystemExit") else f"{kind}: {text}"
            return "error", outputs, text[:programs.MAX_ERROR_CHARS]
        if message != "eof":
            return "error", outputs, "the program wrote something other than the harness's messages"
        status = self._exit_status(child)
        if status is not None and _killed_by(status, signal.SIGXCPU, signal.SIGKILL):
            return "timeout", outputs, f"over {self.job['timeout_s']} s of CPU"
        return "crashed", outputs, _describe_exit(status)

    def _exit_status(self, pid: int) -> int | None:
        """The child's wait status if it ends within a short grace (its channel already closed)."""
        grace = min(self.deadline, time.monotonic() + EXIT_GRACE_S)
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                self.statuses[pid] = status
                return status
            if time.monotonic() >= grace:
                return None
            time.sleep(0.005)

    def close(self, *fds: int) -> None:
        for fd in fds:
            os.close(fd)
            self.fds.remove(fd)

    def end(self) -> None:
        """Kill every process of the run and reap it. In our own PID namespace ``kill(-1)`` reaches
        whatever the programs started, in any process group or session (the worker, its init,
        reaps the orphans after the run process ends); without the namespace, each child and its
        group (seccomp keeps a program to one process and group)."""
        for fd in self.fds:
            os.close(fd)
        if self.worker.init:
            _kill_and_reap_all()
            return
        for pid in self.pids:
            if pid in self.statuses:
                continue
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _send_file(fd: int, source: int) -> None:
    """The file's bytes written to ``fd`` by the kernel: they never enter this process's memory."""
    size, sent = os.fstat(source).st_size, 0
    while sent < size:
        sent += os.sendfile(fd, source, sent, size - sent)


def _kill_and_reap_all() -> None:
    """In our own PID namespace: kill every process of it but init and the caller (``kill(-1)``),
    then reap the caller's children (all of them, for init)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _quota_error(job: dict) -> str:
    return f"over the disk quota ({job['disk_mb']} MiB, {job['max_files']} files)"


def _read_bounded(fd: int, limit: int) -> tuple[str, int]:
    data = os.pread(fd, limit + 1, 0)
    return data[:limit].decode("utf-8", errors="replace"), len(data)


def _killed_by(wait_status: int, *signals: int) -> bool:
    return os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) in signals


def _describe_exit(wait_status: int | None) -> str:
    if wait_status is None:
        return "closed its result channel before finishing"
    if os.WIFSIGNALED(wait_status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(wait_status)).name}"
    return f"exited with status {os.WEXITSTATUS(wait_status)} before finishing"


def _stay_outside_until_the_namespace_ends(child: int) -> None:
    """The first process keeps the pid the caller knows and waits for the worker (the namespace's
    init); killing it (the caller's kill of the group) kills the worker by its parent-death signal."""
    os.closerange(0, MAX_FD)
    _, status = os.waitpid(child, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def main(root: str) -> None:
    if sys.path and os.path.dirname(os.path.abspath(__file__)) == os.path.abspath(sys.path[0]):
        sys.path.pop(0)  # programs must not import the project's modules as top-level names
    granted = isolation.enter_namespaces()
    if granted["pid_namespace"]:
        child = os.fork()  # the child is pid 1 of the new namespace
        if child:
            _stay_outside_until_the_namespace_ends(child)
        isolation.LIBC.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
    # no child may open this process's /proc entries (its pipes)
    isolation.LIBC.prctl(isolation.PR_SET_DUMPABLE, 0)
    # The protocol moves off fds 0/1 so that no child inherits the channel to the caller.
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    worker = Worker(root, protocol_in, granted)
    protocol.write_message(protocol_out, worker.hello())
    worker.serve(protocol_out)
    if worker.jail is not None:
        isolation.LIBC.umount2(worker.jail.encode(), isolation.MNT_DETACH)
    isolation.remove_tree(root)


if __name__ == "__main__":
    main(sys.argv[1])
