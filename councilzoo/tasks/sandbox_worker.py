"""The sandbox's worker process: runs untrusted programs, one forked child per program.

Started by ``councilzoo.tasks.sandbox`` as ``python -s -B sandbox_worker.py ROOT`` with a scrubbed
environment, so this file imports nothing from councilzoo (the programs cannot import the
project). It serves jobs read from fd 0 and answers on fd 1, as 4-byte length-prefixed JSON.
Reusing one interpreter and forking it per program makes a program cost milliseconds instead of a
Python start-up.

Jobs share nothing. The worker is a clean template: it never reads a job. For each job it forks a
run process, which reads the job, forks the program's children, answers and exits, so a program's
memory holds its own job and nothing of an earlier one (freed memory is not cleared, and a job's
source or outputs once parsed in a long-lived process stayed readable to later programs).

Set-up, once per worker (``enter_namespaces``): a new user namespace (our own uid mapped to
itself) holding a network namespace (no interface but a down loopback), a mount namespace (each
program gets a fresh tmpfs: the disk quota, and a cleanup that is one unmount), an IPC namespace
(each run then enters one of its own, so System V segments, queues and semaphores die with the
run) and a PID namespace whose init is the worker: after every run it kills every other process
of the namespace (``kill(-1)``), so nothing a program started outlives its run, whatever group or
session it moved to. A kernel that refuses user namespaces (a container's seccomp profile,
Ubuntu's AppArmor restriction) gets the other layers, and the hello message says which were
granted.

Each child, before the program: its own process group, its folder, rlimits (CPU, address space,
file size, open files, processes), no capabilities, a Landlock ruleset (read-only below the
interpreter and system libraries, full access below its folder) and a seccomp filter (no new
processes, no leaving its process group or session, no rlimit change but the stack's, no signals
to others, ptrace, sockets, mounts, namespaces, System V and POSIX message-queue IPC...): the
program is one process, killed at the deadline.

Results never rest on the program's own interpreter: a ``call`` program answers calls over a pipe
with plain data (tagged JSON, integers in hex, so of any size) that the worker decodes into exact
builtin types and canonicalises itself; a ``script`` program's functions are called by a second
child, the test runner, which runs the tests against proxies and alone holds the channel that says
the tests finished. So no patch of builtins, modules, ``json.dumps`` or ``__eq__`` inside the
program reaches a comparison. Every line a child writes is parsed within bounds (the run's byte
budget, the recursion limit, 4,300-digit JSON numbers): a hostile line is the program's error.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import ctypes
import errno
import gc
import io
import json
import math
import os
import resource
import select
import signal
import stat
import struct
import sys
import tempfile
import time
import types

__all__ = [
    "MAX_DEPTH", "canonical", "canonical_stdout", "to_plain", "from_plain", "read_message",
    "write_message", "remove_tree", "Worker", "main",
]

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
CLONE_NEWIPC = 0x08000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE, MNT_DETACH = 0x2, 0x4, 0x4000, 0x40000, 0x2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
CAPABILITY_VERSION_3 = 0x20080522
PROGRAM_NAME = "solution"  # ``__name__`` of a program whose functions are tested: its main guard stays off
MAX_DEPTH = 64
# ints past the interpreter's default decimal limit (4,300 digits, there because decimal conversion
# is quadratic) are written in hex: linear, so a huge return value cannot stall the worker
DECIMAL_BOUND = 10**sys.int_info.default_max_str_digits
PREVIEW_BYTES = 2_048  # stdout/stderr kept in a result for diagnostics
MAX_ERROR_CHARS = 300
OPEN_FILES = 64
MAX_FD = 4_096
CALLER_GONE, RUN_FAILED = 1, 2  # exit codes of a run process that did not answer
EXIT_GRACE_S = 0.2  # how long a child whose channel closed gets to exit before its status is read
DISK_POLL_S = 0.05  # without a tmpfs, how often the worker measures a running program's folder
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
    "setrlimit", "setsid", "setpgid", "sethostname", "setdomainname", "settimeofday",
    "clock_settime", "adjtimex", "clock_adjtime", "swapon", "swapoff", "acct", "quotactl", "bpf",
    "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "personality", "mknod", "mknodat", "syslog",
    "shmget", "shmat", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
    "semtimedop", "semctl", "ipc", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
    "mq_notify", "mq_getsetattr",
)  # fmt: skip
LIBC = ctypes.CDLL(None, use_errno=True)


def canonical(value: object, depth: int = 0) -> str:
    """A program output as text that two equal outputs share: floats to 10 significant digits,
    integral floats as ints (``2.0`` == ``2``), dicts and sets sorted; list, tuple, set and bool
    stay distinct, as Python's ``==`` keeps them; ints of more than 4,300 digits in hex. Exact
    builtin types only: a subclass (an ``int`` with its own ``__eq__`` or ``__repr__``) is not its
    base type."""
    if depth > MAX_DEPTH:
        raise ValueError("output nested too deeply")
    kind = type(value)
    if kind is int:
        return repr(value) if -DECIMAL_BOUND < value < DECIMAL_BOUND else hex(value)
    if value is None or kind in (bool, str, bytes):
        return repr(value)
    if kind is float:
        if math.isnan(value) or math.isinf(value):
            return repr(value)
        if value.is_integer() and abs(value) < 2**53:
            return repr(int(value))
        return repr(float(f"{value:.10g}"))
    if kind is complex:
        return f"complex({canonical(value.real, depth + 1)}, {canonical(value.imag, depth + 1)})"
    if kind in (list, tuple):
        inner = ", ".join(canonical(v, depth + 1) for v in value)
        return f"[{inner}]" if kind is list else f"({inner})"
    if kind in (set, frozenset):
        return "set{" + ", ".join(sorted(canonical(v, depth + 1) for v in value)) + "}"
    if kind is dict:
        items = sorted(f"{canonical(k, depth + 1)}: {canonical(v, depth + 1)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"{kind.__name__} is not plain data")


@contextlib.contextmanager
def digits_unlimited():
    """Decimal text of ints of any size converts both ways inside: for a problem's own data (test
    inputs, expected outputs), never for a program's output (the interpreter limits conversions to
    4,300 digits because they are quadratic; one program could stall its grader)."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(limit)


def canonical_stdout(text: str) -> str:
    """Printed output as judges compare it: trailing spaces per line and trailing blank lines dropped."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


# --- plain data across processes ------------------------------------------------------------------

_SEQUENCES = {list: "l", tuple: "t", set: "s", frozenset: "F"}
_BUILD = {"l": list, "t": tuple, "s": set, "F": frozenset}


def to_plain(value: object, depth: int = 0) -> object:
    """``value`` as tagged JSON data, when it is built of exact builtin types only (None, bool, int,
    float, complex, str, bytes, list, tuple, set, frozenset, dict); anything else is a TypeError."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    kind = type(value)
    if value is None or kind in (bool, str):
        return value
    if kind is int:
        return ["i", hex(value)]  # hex: no digit limit, unlike str()
    if kind is float:
        return ["f", repr(value)]
    if kind is complex:
        return ["c", repr(value.real), repr(value.imag)]
    if kind is bytes:
        return ["y", value.hex()]
    if kind in _SEQUENCES:
        return [_SEQUENCES[kind], [to_plain(v, depth + 1) for v in value]]
    if kind is dict:
        return ["d", [[to_plain(k, depth + 1), to_plain(v, depth + 1)] for k, v in value.items()]]
    raise TypeError(f"{kind.__module__}.{kind.__qualname__} is not plain data")


def from_plain(data: object, depth: int = 0) -> object:
    """The builtin value ``to_plain`` encoded; ValueError on anything it could not have written."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    if data is None or type(data) in (bool, str):
        return data
    if type(data) is not list or not data or type(data[0]) is not str:
        raise ValueError("not plain data")
    tag, args = data[0], data[1:]
    if tag in ("i", "f", "y") and len(args) == 1 and type(args[0]) is str:
        return int(args[0], 16) if tag == "i" else float(args[0]) if tag == "f" else bytes.fromhex(args[0])
    if tag == "c" and len(args) == 2 and all(type(a) is str for a in args):
        return complex(float(args[0]), float(args[1]))
    if tag in _BUILD and len(args) == 1 and type(args[0]) is list:
        return _BUILD[tag](from_plain(v, depth + 1) for v in args[0])
    if tag == "d" and len(args) == 1 and type(args[0]) is list:
        pairs = args[0]
        if not all(type(p) is list and len(p) == 2 for p in pairs):
            raise ValueError("not plain data")
        return {from_plain(k, depth + 1): from_plain(v, depth + 1) for k, v in pairs}
    raise ValueError("not plain data")


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


def read_secret(fd: int) -> bytearray:
    """One message's body read straight into a buffer that the caller zeroes after use, so no
    copy of it outlives the run in this process (whose memory later children inherit)."""
    header = _read_exact(fd, 4)
    if header is None:
        raise CallerGone
    body = bytearray(struct.unpack(">I", header)[0])
    view, got = memoryview(body), 0
    while got < len(body):
        n = os.readv(fd, [view[got:]])
        if not n:
            raise CallerGone
        got += n
    return body


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class CallerGone(Exception):
    """The caller closed its end of the protocol (it exited or was killed): stop everything."""


class Lines:
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
                raise CallerGone
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


# --- isolation layers -----------------------------------------------------------------------------


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def enter_namespaces() -> dict[str, bool]:
    """Enter new user + network + IPC + mount + PID namespaces (unprivileged where user namespaces
    are allowed), falling back to user + network + IPC, then to none. Maps our uid and gid to
    themselves, so files on a tmpfs belong to the caller's user."""
    uid, gid = os.getuid(), os.getgid()
    full = CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWPID
    if LIBC.unshare(full) == 0:
        granted = {"network_namespace": True, "ipc_namespace": True, "pid_namespace": True,
                   "mount_namespace": True}  # fmt: skip
    elif LIBC.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC) == 0:
        granted = {"network_namespace": True, "ipc_namespace": True, "pid_namespace": False,
                   "mount_namespace": False}  # fmt: skip
    else:
        return {"network_namespace": False, "ipc_namespace": False, "pid_namespace": False,
                "mount_namespace": False}  # fmt: skip
    with contextlib.suppress(OSError):
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    if granted["mount_namespace"]:
        LIBC.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)  # nothing we mount leaks out
    return granted


def mount_quota(path: str, disk_mb: int, max_files: int) -> bool:
    """A fresh tmpfs at ``path`` holding at most ``disk_mb`` MiB in ``max_files`` files and folders."""
    options = f"size={disk_mb}m,nr_inodes={max_files + 1},mode=0700".encode()
    return LIBC.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) == 0


def quota_works(root: str) -> bool:
    """Whether this namespace may mount a tmpfs and write in it (uid mapping included)."""
    probe = tempfile.mkdtemp(prefix="probe-", dir=root)
    try:
        if not mount_quota(probe, 1, 4):
            return False
        try:
            _write_file(os.path.join(probe, "x"), "x")
            return True
        except OSError:
            return False
        finally:
            LIBC.umount2(probe.encode(), MNT_DETACH)
    finally:
        remove_tree(probe)


def drop_capabilities() -> None:
    """Empty effective, permitted and inheritable sets: the namespace's root powers stay with the
    worker, so a child cannot reach another child's /proc entries or undo its limits."""
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    LIBC.capset(header, (ctypes.c_uint32 * 6)())


def build_seccomp():
    """The syscall filter (pyseccomp over libseccomp), built once and loaded in every child."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError):
        return None
    deny = seccomp.ERRNO(errno.EPERM)
    filt = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        with contextlib.suppress(OSError, ValueError):  # a syscall this kernel/arch lacks
            filt.add_rule(deny, name)
    clone_thread = 0x00010000  # threads are allowed, new processes are not
    filt.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, clone_thread, 0))
    filt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # glibc falls back to clone for threads
    # getrlimit and setrlimit are both prlimit64 in glibc: reading is free, setting only the stack
    filt.add_rule(deny, "prlimit64", seccomp.Arg(0, seccomp.NE, 0))
    setting, not_stack = seccomp.Arg(2, seccomp.NE, 0), seccomp.Arg(1, seccomp.NE, resource.RLIMIT_STACK)
    filt.add_rule(deny, "prlimit64", setting, not_stack)
    filt.add_rule(deny, "prctl", seccomp.Arg(0, seccomp.EQ, PR_SET_PDEATHSIG))
    return filt


def landlock_available() -> bool:
    try:
        from landlock import landlock_abi_version

        ctypes.set_errno(0)  # landlock reads ctypes' errno even on success: a refused unshare left EPERM
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


def over_quota(path: str, max_bytes: int, max_files: int) -> bool:
    """Whether the folder holds more than ``max_files`` entries or ``max_bytes``; stops counting as
    soon as it knows. It walks by changing into each folder, so a step costs one name lookup
    however deep the nesting; folders a program locked are opened back up first."""
    files = size = 0
    home = os.open(".", os.O_RDONLY)
    try:
        os.chdir(path)
        stack = [_listing()]
        while stack:
            if not stack[-1]:
                stack.pop()
                os.chdir("..")
                continue
            name, is_dir, blocks = stack[-1].pop()
            files, size = files + 1, size + blocks * 512
            if files > max_files or size > max_bytes:
                return True
            if is_dir and _enter(name):
                stack.append(_listing())
        return False
    except OSError:
        return False  # the folder went away under us
    finally:
        os.fchdir(home)
        os.close(home)


def _enter(name: str) -> bool:
    for _attempt in range(2):
        try:
            os.chdir(name)
            return True
        except PermissionError:
            with contextlib.suppress(OSError):
                os.chmod(name, 0o700)
        except OSError:
            return False
    return False


def _listing() -> list[tuple[str, bool, int]]:
    for _attempt in range(2):
        try:
            with os.scandir(".") as entries:
                found = []
                for entry in entries:
                    with contextlib.suppress(OSError):
                        info = entry.stat(follow_symlinks=False)
                        found.append((entry.name, stat.S_ISDIR(info.st_mode), info.st_blocks))
                return found
        except PermissionError:
            with contextlib.suppress(OSError):
                os.chmod(".", 0o700)
        except OSError:
            return []
    return []


def remove_tree(path: str) -> None:
    """Delete ``path`` and whatever a program left in it, never raising: nesting of any depth (each
    nested folder is first moved up to depth 1, so paths stay short and nothing recurses),
    folders without permissions, fifos, files that cannot be removed (skipped)."""
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return
    except OSError:
        return
    pending, moved = [path], 0
    while pending:
        folder = pending.pop()
        with contextlib.suppress(OSError):
            os.chmod(folder, 0o700)
        try:
            with os.scandir(folder) as entries:
                names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        except OSError:
            names = []
        for name, is_dir in names:
            with contextlib.suppress(OSError):
                if not is_dir:
                    os.unlink(os.path.join(folder, name))
                elif folder == path:
                    pending.append(os.path.join(path, name))
                else:
                    moved += 1
                    flat = os.path.join(path, f".flat-{moved}")
                    os.rename(os.path.join(folder, name), flat)
                    pending.append(flat)
        if folder != path:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
    with contextlib.suppress(OSError):
        os.rmdir(path)


# --- the children ---------------------------------------------------------------------------------


def _limit(which: int, soft: int, hard: int | None = None) -> None:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (soft, soft if hard is None else hard))


def _confine(job: dict, workdir: str, seccomp_filter, use_landlock: bool) -> None:
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the worker's death ends the child
    os.setpgid(0, 0)
    os.chdir(workdir)
    cpu = max(1, math.ceil(job["timeout_s"]))
    _limit(resource.RLIMIT_CPU, cpu, cpu + 1)
    _limit(resource.RLIMIT_AS, job["memory_mb"] * 2**20)
    _limit(resource.RLIMIT_FSIZE, job["max_output_bytes"] + 1)
    _limit(resource.RLIMIT_NOFILE, OPEN_FILES)
    if seccomp_filter is None:  # RLIMIT_NPROC counts threads too: only where seccomp cannot stop forks
        _limit(resource.RLIMIT_NPROC, 0)
    _limit(resource.RLIMIT_CORE, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long write fails instead of killing
    sys.set_int_max_str_digits(0)  # a program prints and tests compare ints of any size
    drop_capabilities()
    if use_landlock:
        apply_landlock(workdir)
    if seccomp_filter is not None:
        seccomp_filter.load()


def _short(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:MAX_ERROR_CHARS]


def _exit_reason(err: BaseException, when: str) -> str:
    if isinstance(err, SystemExit):
        return f"the program exited (SystemExit: {err.code!r}) {when}"[:MAX_ERROR_CHARS]
    return _short(err)


def _entry(namespace: dict, name: str):
    """The function to call: a top-level ``name`` or LeetCode's ``Solution().name``."""
    fn = namespace.get(name)
    if callable(fn) and not isinstance(fn, type):
        return fn
    solution = namespace.get("Solution")
    if isinstance(solution, type) and hasattr(solution, name):
        return getattr(solution(), name)
    raise NameError(f"no function {name!r} defined")


def _standard_streams() -> None:
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="replace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace")


def _sender(fd: int):
    """A writer of JSON lines bound to this module's own ``json`` and ``os``, taken before the
    program runs (the program may still replace them in its process: nothing trusts this side)."""
    dumps, write = json.dumps, os.write

    def send(message: dict) -> None:
        data = (dumps(message) + "\n").encode()
        while data:
            data = data[write(fd, data) :]

    return send


def serve_functions(job: dict) -> None:
    """The program's child in ``call`` and ``script`` mode: run the program as module
    ``PROGRAM_NAME`` (so ``if __name__ == '__main__':`` stays off), report its functions, then
    answer each call read on fd 3 with its plain-data value (or error) on fd 4."""
    _standard_streams()
    send, requests = _sender(4), open(3, "rb", closefd=False)
    namespace = {"__name__": PROGRAM_NAME, "__builtins__": builtins}
    try:
        exec(compile(job["source"], "<program>", "exec"), namespace)
        if job["mode"] == "call":
            table = {job["entry_point"]: _entry(namespace, job["entry_point"])}
        else:
            table = {k: v for k, v in namespace.items() if type(v) is types.FunctionType}
        sys.stdout.flush()
    except BaseException as err:  # the program's failure is the result
        send({"error": _exit_reason(err, "before its tests ran")})
        os._exit(1)
    send({"ready": sorted(table)})
    for line in requests:
        try:
            request = json.loads(line)  # one call, or a batch: one reply per call, in order
            calls = request.get("batch") or [[request["args"], request.get("kwargs", ["d", []])]]
            calls = [(table[request["call"]], from_plain(a), from_plain(k)) for a, k in calls]
        except BaseException as err:
            send({"error": f"bad request: {_short(err)}"})
            continue
        for fn, args, kwargs in calls:
            try:
                value = fn(*args, **kwargs)
                sys.stdout.flush()
                reply = {"value": to_plain(value)}
            except SystemExit as stop:
                reply = {"error": _exit_reason(stop, "during a test"), "type": "SystemExit"}
            except BaseException as err:
                reply = {"error": str(err)[:MAX_ERROR_CHARS], "type": type(err).__name__}
            send(reply)
    os._exit(0)


class ProgramError(Exception):
    """A call into the program failed in a way no builtin exception describes."""


def _proxy(name: str, send, replies):
    """A stand-in for the program's function ``name``: arguments go to the program's process as
    plain data, the value comes back as exact builtin types, the program's exception as the
    builtin exception of that name (others as ``ProgramError``)."""

    def call(*args, **kwargs):
        send({"call": name, "args": to_plain(args), "kwargs": to_plain(kwargs)})
        line = replies.readline()
        if not line:
            raise ProgramError("the program's process ended before the tests finished")
        try:
            reply = json.loads(line)
            if "error" not in reply:
                return from_plain(reply["value"])
        except (ValueError, TypeError, KeyError, RecursionError) as err:
            raise ProgramError(f"{name} returned something other than plain data") from err
        kind = getattr(builtins, str(reply.get("type")), None)
        # StopIteration would end a test's map() or loop early, as if every case had been seen
        builtin = isinstance(kind, type) and issubclass(kind, Exception)
        if not builtin or kind in (StopIteration, StopAsyncIteration):
            kind = ProgramError
        raise kind(str(reply["error"]))

    call.__name__ = name
    return call


def run_tests(job: dict, tests: bytearray) -> None:
    """The test runner's child in ``script`` mode: no program code ever runs here. It waits for
    the program to load, binds a proxy for each of its functions, runs the tests (the message
    ``tests``, read after the program's child was forked), and only then writes ``done`` on fd 5,
    a pipe the program's process never holds."""
    send, result = _sender(4), _sender(5)
    replies = open(3, "rb", closefd=False)
    try:
        ready = json.loads(replies.readline() or b"{}")
        if "ready" not in ready:
            result({"error": str(ready.get("error", "the program did not load (no ready message)"))})
            os._exit(1)
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        # a program's function named like a builtin (``set``, ``abs``) must not answer for the tests
        names = [n for n in ready["ready"] if type(n) is str and not hasattr(builtins, n)]
        namespace.update({name: _proxy(name, send, replies) for name in names})
        script = json.loads(bytes(tests))["test_script"]
        exec(compile(script, "<tests>", "exec"), namespace)
    except BaseException as err:
        result({"error": _exit_reason(err, "before the tests finished")})
        os._exit(1)
    result({"done": True})
    os._exit(0)


def run_main(job: dict) -> None:
    """The program's child in ``stdin`` mode: run it as ``__main__`` on its input; ``exit()`` or
    ``exit(0)`` ends it normally (its printed output is what is judged), then ``done`` on fd 3."""
    _standard_streams()
    send = _sender(3)
    try:
        try:
            program = compile(job["source"], "<program>", "exec")
            exec(program, {"__name__": "__main__", "__builtins__": builtins})
        except SystemExit as stop:
            if stop.code not in (None, 0):
                raise
        sys.stdout.flush()
    except BaseException as err:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
        send({"error": _short(err)})
        os._exit(1)
    send({"done": True})
    os._exit(0)


# --- the worker -----------------------------------------------------------------------------------


class Worker:
    """Serves jobs, each in a run process of its own (``serve``); children per program (per input
    for stdin programs)."""

    def __init__(self, root: str, caller_fd: int, granted: dict[str, bool]) -> None:
        self.root, self.caller_fd, self.granted = root, caller_fd, granted
        self.io_dir = ""
        self.remove_leftovers()  # what a killed predecessor left
        self.io_dir = tempfile.mkdtemp(prefix="io-", dir=root)
        self.reply_path = os.path.join(self.io_dir, "reply")
        self.init = granted["pid_namespace"] and os.getpid() == 1
        self.quota = granted["mount_namespace"] and quota_works(root)
        self.seccomp = build_seccomp()
        self.landlock = landlock_available()

    def remove_leftovers(self) -> None:
        """Delete the program folders of the root (a run on disk leaves them to this process, so
        the caller's clock stops first)."""
        for name in os.listdir(self.root):
            if os.path.join(self.root, name) != self.io_dir:
                remove_tree(os.path.join(self.root, name))

    def hello(self) -> dict:
        return {"network_namespace": self.granted["network_namespace"],
                "ipc_namespace": self.granted["ipc_namespace"], "pid_namespace": self.init,
                "disk_quota": self.quota, "seccomp": self.seccomp is not None,
                "landlock": self.landlock, "pid": os.getpid()}  # fmt: skip

    def serve(self, protocol_out: int) -> None:
        """Run jobs until the caller is gone. This process never reads a job nor its result: when
        one is there it forks a run process that reads and runs it and writes the reply to a
        file; it then kills and reaps all the run left and has the kernel copy the reply to the
        caller (``sendfile``). Ends when a run process says the caller is gone, or fails."""
        gc.freeze()  # the run processes share this one's objects untouched (fewer copied pages)
        while True:
            select.select([self.caller_fd], [], [])  # a job, or the caller's end closed
            run = os.fork()
            if run == 0:
                code = RUN_FAILED
                try:
                    code = self.serve_one()
                finally:
                    os._exit(code)
            _, status = os.waitpid(run, 0)
            if self.init:
                _kill_and_reap_all()
            if os.waitstatus_to_exitcode(status) != 0:
                return
            try:
                _send_file(protocol_out, self.reply_path)
            except BrokenPipeError:  # the caller is gone
                return
            os.unlink(self.reply_path)  # no later program finds it, even where Landlock is missing
            self.remove_leftovers()

    def serve_one(self) -> int:
        """In the run process: one job, in an IPC namespace of its own where the kernel allows."""
        try:
            job = read_message(self.caller_fd)
            if job is None:
                return CALLER_GONE
            if self.granted["ipc_namespace"]:
                LIBC.unshare(CLONE_NEWIPC)
            reply = self.run(job)
        except CallerGone:
            return CALLER_GONE
        fd = os.open(self.reply_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            write_message(fd, reply)
        finally:
            os.close(fd)
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
                result["outputs"].append(canonical_stdout(one["raw_stdout"]))
                result["stdout"], result["stderr"] = one["stdout"], one["stderr"]
        else:
            result = self._run_once(job, stdin="")
        result.pop("raw_stdout", None)
        result["wall_s"] = time.perf_counter() - start
        return result

    def _run_once(self, job: dict, stdin: str) -> dict:
        workdir = tempfile.mkdtemp(prefix="prog-", dir=self.root)
        mounted = self.quota and mount_quota(workdir, job["disk_mb"], job["max_files"])
        paths = [os.path.join(self.io_dir, name) for name in ("stdin", "stdout", "stderr")]
        with open(paths[0], "w", encoding="utf-8") as handle:
            handle.write(stdin)
        streams = [os.open(paths[0], os.O_RDONLY)] + [
            os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) for p in paths[1:]
        ]
        run = _Run(self, job, workdir, streams)
        if not mounted:
            run.over_quota = lambda: over_quota(workdir, job["disk_mb"] * 2**20, job["max_files"])
        try:
            status, outputs, error = run.play()
            if status == "ok" and run.over_quota is not None and run.over_quota():  # it ended between polls
                status, error = "error", _quota_error(job)
        finally:
            run.end()
            for fd in streams:
                os.close(fd)
            if mounted:
                LIBC.umount2(workdir.encode(), MNT_DETACH)
                remove_tree(workdir)
        stdout, stdout_size = _read_bounded(paths[1], job["max_output_bytes"])
        stderr, _ = _read_bounded(paths[2], PREVIEW_BYTES)
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

    def lines(self, fd: int) -> Lines:
        return Lines(fd, self.budget, self.worker.caller_fd, self.over_quota)

    def spawn(self, fds: list[int], body) -> int:
        """Fork a confined child whose fds 0.. are exactly ``fds``, and run ``body(job)`` in it."""
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                high = [os.dup(fd) for fd in fds]  # out of the way of the targets
                for target, fd in enumerate(high):
                    os.dup2(fd, target)
                os.closerange(len(fds), MAX_FD)
                _confine(self.job, self.workdir, self.worker.seccomp, self.worker.landlock)
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
            program = self.spawn([stdin, stdout, stderr, requests, replies], serve_functions)
            self.close(requests, replies)
            return self._calls(program, to_program, self.lines(from_program))
        if job["mode"] == "script":
            requests, to_program = self.pipe()
            from_program, replies = self.pipe()
            verdict, to_worker = self.pipe()
            null = os.open(os.devnull, os.O_RDWR)
            self.fds.append(null)
            self.spawn([stdin, stdout, stderr, requests, replies], serve_functions)
            tests = read_secret(self.worker.caller_fd)  # only now: the program's memory lacks them
            tester = self.spawn(
                [null, null, null, from_program, to_program, to_worker], lambda job: run_tests(job, tests)
            )
            tests[:] = bytes(len(tests))
            self.close(requests, replies, from_program, to_program, to_worker)
            return self._finish(tester, self.lines(verdict))
        verdict, to_worker = self.pipe()
        program = self.spawn([stdin, stdout, stderr, to_worker], run_main)
        self.close(to_worker)
        return self._finish(program, self.lines(verdict))

    def _calls(self, program: int, to_program: int, lines: Lines) -> tuple[str, list[str], str]:
        os.set_blocking(to_program, False)
        outputs: list[str] = []
        message = lines.next(self.deadline)
        if not (isinstance(message, dict) and "ready" in message):
            return self._failed(program, message, outputs)
        batch = []
        for text in self.job["inputs"]:
            try:
                with digits_unlimited():  # a test input is the problem's data
                    value = ast.literal_eval(text)
                batch.append([to_plain(tuple(value)), ["d", []]])
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as err:
                return "error", outputs, f"bad test input {text[:80]!r}: {_short(err)}"
        request = {"call": self.job["entry_point"], "batch": batch}  # one write: no ping-pong per input
        if batch and not _write_before(to_program, (json.dumps(request) + "\n").encode(), self.deadline):
            stalled = "timeout" if time.monotonic() >= self.deadline else "eof"
            return self._failed(program, stalled, outputs)
        for _ in batch:
            message = lines.next(self.deadline)
            if not (isinstance(message, dict) and "value" in message):
                return self._failed(program, message, outputs)
            try:
                outputs.append(canonical(from_plain(message["value"])))
            except (ValueError, TypeError, RecursionError, OverflowError) as err:
                return "error", outputs, f"the program returned other than plain data: {_short(err)}"
        return "ok", outputs, ""

    def _finish(self, child: int, lines: Lines) -> tuple[str, list[str], str]:
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
            return "error", outputs, text[:MAX_ERROR_CHARS]
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


def _send_file(fd: int, path: str) -> None:
    """The file's bytes written to ``fd`` by the kernel: they never enter this process's memory."""
    source = os.open(path, os.O_RDONLY)
    try:
        size, sent = os.fstat(source).st_size, 0
        while sent < size:
            sent += os.sendfile(fd, source, sent, size - sent)
    finally:
        os.close(source)


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


def _read_bounded(path: str, limit: int) -> tuple[str, int]:
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
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
    granted = enter_namespaces()
    if granted["pid_namespace"]:
        child = os.fork()  # the child is pid 1 of the new namespace
        if child:
            _stay_outside_until_the_namespace_ends(child)
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    LIBC.prctl(PR_SET_DUMPABLE, 0)  # no child may open this process's /proc entries (its pipes)
    # The protocol moves off fds 0/1 so that no child inherits the channel to the caller.
    protocol_in, protocol_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    worker = Worker(root, protocol_in, granted)
    write_message(protocol_out, worker.hello())
    worker.serve(protocol_out)
    remove_tree(root)


if __name__ == "__main__":
    main(sys.argv[1])
