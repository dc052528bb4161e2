"""The sandbox's worker process: runs untrusted programs, one forked child per program.

Started by ``councilzoo.tasks.sandbox`` as ``python -I -B sandbox_worker.py ROOT`` with a scrubbed
environment, so this file imports nothing from councilzoo (``-I`` keeps the caller's paths out, and
the programs cannot import the project). The worker isolates itself once (a new user + network
namespace: no interface but a down loopback), then serves jobs read from fd 0 and answers on fd 1,
as 4-byte length-prefixed JSON. Reusing one interpreter and forking it per program is what makes a
program cost ~milliseconds instead of a Python start-up.

Each child, before it runs a program: joins its own process group, moves into a fresh temporary
directory, takes rlimits (CPU, address space, file size = the output bound, open files, processes),
a Landlock ruleset (read-only below the interpreter's prefixes and system library dirs, full access
only below its temporary directory) and a seccomp filter (no fork, exec, sockets, signals to other
processes, ptrace, mounts, namespaces, chmod/chown, rlimit changes, io_uring, bpf). The worker
enforces the wall clock, kills the child's process group, and deletes the directory.

The harness runs in the same process as the program, so a deliberately adversarial program can
forge its own result (as in the HumanEval harness): the sandbox protects the machine and the caller,
not a grade against an adversary.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import errno
import json
import math
import os
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
MAX_CANONICAL_DEPTH = 64
PREVIEW_BYTES = 2_048  # stdout/stderr kept in a result for diagnostics
MAX_ERROR_CHARS = 300
OPEN_FILES = 64
MAX_FD = 4_096
READ_ONLY_DIRS = ("/usr", "/lib", "/lib64", "/bin", "/etc/alternatives")
READ_ONLY_FILES = ("/dev/null", "/dev/urandom", "/dev/zero")
DENIED_SYSCALLS = (
    "fork", "vfork", "execve", "execveat", "socket", "socketpair", "connect", "bind", "listen",
    "accept", "accept4", "sendto", "sendmsg", "kill", "tkill", "tgkill", "rt_sigqueueinfo",
    "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "ptrace",
    "process_vm_readv", "process_vm_writev", "process_madvise", "mount", "umount2", "move_mount",
    "open_tree", "fsopen", "fsmount", "pivot_root", "chroot", "unshare", "setns", "reboot",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "chmod",
    "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "setuid", "setgid",
    "setreuid", "setregid", "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid",
    "setrlimit", "prlimit64", "sethostname", "setdomainname", "settimeofday", "clock_settime",
    "adjtimex", "clock_adjtime", "swapon", "swapoff", "acct", "quotactl", "bpf",
    "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "personality", "mknod", "mknodat", "syslog",
)  # fmt: skip


def canonical(value: object, depth: int = 0) -> str:
    """A program output as text that two equal outputs share: floats to 10 significant digits,
    integral floats as ints (``2.0`` == ``2``), dicts and sets sorted; list, tuple, set and bool
    stay distinct, as Python's ``==`` keeps them."""
    if depth > MAX_CANONICAL_DEPTH:
        raise ValueError("output nested too deeply")
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return repr(value)
        if value.is_integer() and abs(value) < 2**53:
            return repr(int(value))
        return repr(float(f"{value:.10g}"))
    if isinstance(value, complex):
        return f"complex({canonical(value.real, depth + 1)}, {canonical(value.imag, depth + 1)})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(canonical(v, depth + 1) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, (set, frozenset)):
        return "set{" + ", ".join(sorted(canonical(v, depth + 1) for v in value)) + "}"
    if isinstance(value, dict):
        items = sorted(f"{canonical(k, depth + 1)}: {canonical(v, depth + 1)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return f"{type(value).__name__}:{value!r}"


def canonical_stdout(text: str) -> str:
    """Printed output as judges compare it: trailing spaces per line and trailing blank lines dropped."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


# --- protocol -------------------------------------------------------------------------------------


def read_message(fd: int) -> dict | None:
    header = _read_exact(fd, 4)
    if header is None:
        return None
    body = _read_exact(fd, struct.unpack(">I", header)[0])
    return None if body is None else json.loads(body)


def write_message(fd: int, message: dict) -> None:
    body = json.dumps(message).encode()
    view = memoryview(struct.pack(">I", len(body)) + body)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# --- isolation layers -----------------------------------------------------------------------------


def isolate_network() -> bool:
    """Enter a new user + network namespace (unprivileged where user namespaces are enabled)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0
    except (OSError, AttributeError):
        return False


def build_seccomp():
    """The syscall filter (pyseccomp over libseccomp), built once and loaded in every child."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError):
        return None
    filt = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        with contextlib.suppress(OSError, ValueError):  # a syscall this kernel/arch lacks
            filt.add_rule(seccomp.ERRNO(errno.EPERM), name)
    clone_thread = 0x00010000  # threads are allowed, new processes are not
    filt.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, clone_thread, 0))
    filt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # glibc falls back to clone for threads
    return filt


def landlock_available() -> bool:
    try:
        from landlock import landlock_abi_version

        return landlock_abi_version() >= 1
    except Exception:  # not installed, not Linux, or disabled at boot
        return False


def apply_landlock(workdir: str) -> None:
    """Read-only below the interpreter and system libraries; full access only below ``workdir``."""
    from landlock import FSAccess, Ruleset

    read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    ruleset = Ruleset()
    interpreter = os.path.dirname(os.path.realpath(sys.executable))
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, interpreter}
    for path in sorted(prefixes | set(READ_ONLY_DIRS)):
        if os.path.isdir(path):
            ruleset.allow(path, rules=read)
    for path in READ_ONLY_FILES:
        if os.path.exists(path):
            ruleset.allow(path, rules=FSAccess.READ_FILE)
    ruleset.allow(workdir)
    ruleset.apply()


# --- the child ------------------------------------------------------------------------------------


def _limit(which: int, soft: int, hard: int | None = None) -> None:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (soft, soft if hard is None else hard))


def _confine(job: dict, workdir: str, seccomp_filter, use_landlock: bool) -> None:
    os.setpgid(0, 0)
    os.chdir(workdir)
    cpu = max(1, math.ceil(job["timeout_s"]))
    _limit(resource.RLIMIT_CPU, cpu, cpu + 1)
    _limit(resource.RLIMIT_AS, job["memory_mb"] * 2**20)
    _limit(resource.RLIMIT_FSIZE, job["max_output_bytes"] + 1)
    _limit(resource.RLIMIT_NOFILE, OPEN_FILES)
    _limit(resource.RLIMIT_NPROC, 0)  # enforced for non-root users; seccomp covers root
    _limit(resource.RLIMIT_CORE, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long write fails instead of killing
    if use_landlock:
        apply_landlock(workdir)
    if seccomp_filter is not None:
        seccomp_filter.load()


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:MAX_ERROR_CHARS]


def _entry(namespace: dict, name: str):
    """The function to call: a top-level ``name`` or LeetCode's ``Solution().name``."""
    fn = namespace.get(name)
    if callable(fn) and not isinstance(fn, type):
        return fn
    solution = namespace.get("Solution")
    if isinstance(solution, type) and hasattr(solution, name):
        return getattr(solution(), name)
    raise NameError(f"no function {name!r} defined")


def run_child(job: dict, inputs: list[str], result_fd: int) -> None:
    """Run the program and stream one JSON line per finished input, then ``done``; never returns."""
    import io

    def send(message: dict) -> None:
        os.write(result_fd, (json.dumps(message) + "\n").encode())

    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace")
    code = 0
    try:
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        try:
            exec(compile(job["source"], "<program>", "exec"), namespace)
        except SystemExit as stop:  # exit() ends a stdin program normally
            if stop.code not in (None, 0):
                raise
        if job["mode"] == "call":
            fn = _entry(namespace, job["entry_point"])
            for text in inputs:
                args = ast.literal_eval(text)
                send({"out": canonical(fn(*args))})
        sys.stdout.flush()
        send({"done": True})
    except BaseException as err:  # the program's failure is the result
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
        with contextlib.suppress(BaseException):
            send({"error": _short(err)})
        code = 1
    os._exit(code)


# --- the worker -----------------------------------------------------------------------------------


class Worker:
    """Serves jobs; one child per program (per input for stdin programs)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.io_dir = tempfile.mkdtemp(prefix="io-", dir=root)
        self.network_isolated = isolate_network()
        self.seccomp = build_seccomp()
        self.landlock = landlock_available()

    def hello(self) -> dict:
        return {"network_namespace": self.network_isolated, "seccomp": self.seccomp is not None,
                "landlock": self.landlock, "pid": os.getpid()}  # fmt: skip

    def run(self, job: dict) -> dict:
        start = time.perf_counter()
        if job["mode"] == "stdin":
            result = {"status": "ok", "outputs": [], "error": "", "stdout": "", "stderr": ""}
            for text in job["inputs"]:
                one = self._run_once(job, [], stdin=text)
                if one["status"] != "ok":
                    result.update(one, outputs=result["outputs"])
                    break
                result["outputs"].append(canonical_stdout(one["raw_stdout"]))
                result["stdout"], result["stderr"] = one["stdout"], one["stderr"]
        else:
            result = self._run_once(job, job["inputs"], stdin="")
        result.pop("raw_stdout", None)
        result["wall_s"] = time.perf_counter() - start
        return result

    def _run_once(self, job: dict, inputs: list[str], stdin: str) -> dict:
        workdir = tempfile.mkdtemp(prefix="prog-", dir=self.root)
        paths = [os.path.join(self.io_dir, name) for name in ("stdin", "stdout", "stderr")]
        with open(paths[0], "w", encoding="utf-8") as handle:
            handle.write(stdin)
        fds = [os.open(paths[0], os.O_RDONLY)] + [
            os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) for p in paths[1:]
        ]
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                os.closerange(3, write_end)  # the channel to the caller among them
                os.closerange(write_end + 1, MAX_FD)
                _confine(job, workdir, self.seccomp, self.landlock)
                run_child(job, inputs, write_end)
            finally:
                os._exit(70)
        for fd in [write_end, *fds]:
            os.close(fd)
        try:
            messages, timed_out, overflow = self._collect(read_end, pid, job)
        finally:
            os.close(read_end)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # whatever is left of its process group
            _, wait_status = os.waitpid(pid, 0)
            shutil.rmtree(workdir, ignore_errors=True)
        stdout, stdout_size = _read_bounded(paths[1], job["max_output_bytes"])
        stderr, _ = _read_bounded(paths[2], PREVIEW_BYTES)
        outputs = [m["out"] for m in messages if isinstance(m.get("out"), str)]
        errors = [m["error"] for m in messages if isinstance(m.get("error"), str)]
        done = any(m.get("done") is True for m in messages)
        if timed_out or _killed_by(wait_status, signal.SIGXCPU, signal.SIGKILL):
            status, error = "timeout", f"over {job['timeout_s']} s"
        elif overflow or stdout_size > job["max_output_bytes"]:
            status, error = "output_limit", f"over {job['max_output_bytes']} bytes of output"
        elif errors:
            status, error = "error", errors[0]
        elif done and len(outputs) == len(inputs):
            status, error = "ok", ""
        else:
            status, error = "crashed", _describe_exit(wait_status)
        return {"status": status, "outputs": outputs, "error": error, "raw_stdout": stdout,
                "stdout": stdout[:PREVIEW_BYTES], "stderr": stderr}  # fmt: skip

    def _collect(self, fd: int, pid: int, job: dict) -> tuple[list[dict], bool, bool]:
        """Result lines until the child closes its pipe, the wall clock runs out or too much arrives."""
        deadline = time.monotonic() + job["timeout_s"]
        budget = job["max_output_bytes"] * max(1, len(job["inputs"])) + 65_536
        data = bytearray()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return _parse_lines(data), True, False
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65_536)
            if not chunk:
                return _parse_lines(data), False, False
            data += chunk
            if len(data) > budget:
                return _parse_lines(data), False, True


def _parse_lines(data: bytes) -> list[dict]:
    messages = []
    for line in data.split(b"\n"):
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            messages.append(message)
    return messages


def _read_bounded(path: str, limit: int) -> tuple[str, int]:
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    return data[:limit].decode("utf-8", errors="replace"), len(data)


def _killed_by(wait_status: int, *signals: int) -> bool:
    return os.WIFSIGNALED(wait_status) and os.WTERMSIG(wait_status) in signals


def _describe_exit(wait_status: int) -> str:
    if os.WIFSIGNALED(wait_status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(wait_status)).name}"
    return f"exited with status {os.WEXITSTATUS(wait_status)} before finishing"


def main(root: str) -> None:
    if sys.path and os.path.dirname(os.path.abspath(__file__)) == os.path.abspath(sys.path[0]):
        sys.path.pop(0)  # programs must not import the project's modules as top-level names
    # The protocol moves off fds 0/1 so that no child inherits the channel to the caller.
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    worker = Worker(root)
    write_message(protocol_out, worker.hello())
    while (job := read_message(protocol_in)) is not None:
        write_message(protocol_out, worker.run(job))


if __name__ == "__main__":
    main(sys.argv[1])
