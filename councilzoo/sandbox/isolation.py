"""The sandbox's isolation layers, set up by its worker process (``councilzoo.sandbox.worker``).

Once per worker (``enter_namespaces``): a new user namespace (our own uid mapped to itself)
holding a network namespace (no interface but a down loopback), a mount namespace, an IPC
namespace (each run then enters one of its own, so System V segments, queues and semaphores die
with the run) and a PID namespace whose init is the worker. In the mount namespace the worker
builds a minimal root (``build_minimal_root``): a read-only tree of the runtime alone, where each
program's folder is a fresh tmpfs at ``JOB_DIR`` (the disk quota, ``mount_quota``, and a cleanup
that is one unmount), so a program sees nothing of the machine's files, not even their metadata.
A kernel that refuses user namespaces (a container's seccomp profile, Ubuntu's AppArmor
restriction) gets the other layers; the pool refuses untrusted code there unless told to accept
weaker isolation.

Each child, before the program (``confine``): its own process group, the minimal root and its
folder, rlimits (CPU, address space, file size, open files, processes), no capabilities, a
Landlock ruleset (read-only below the interpreter and system libraries, full access below its
folder) and a seccomp filter (``build_seccomp``: no new processes, no leaving its process group or
session, no rlimit change but the stack's, no signals to others, ptrace, sockets, mounts,
namespaces, System V and POSIX message-queue IPC...; without a minimal root also no extended
attributes or timestamps set, which Landlock does not cover). Without a tmpfs the worker
measures a program's folder (``over_quota``); ``remove_tree`` deletes whatever a program left.
Standard library only (pyseccomp and landlock are imported where present).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import math
import os
import resource
import signal
import stat
import sys
import tempfile

__all__ = [
    "JOB_DIR", "enter_namespaces", "mount_quota", "quota_works", "build_minimal_root", "build_seccomp",
    "landlock_available", "over_quota", "remove_tree", "confine",
]

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
CLONE_NEWIPC = 0x08000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH = 0x2, 0x4, 0x1000, 0x4000, 0x40000, 0x2
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 0x1  # Linux >= 5.12
JOB_DIR = "/job"  # a program's folder inside the minimal root
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
CAPABILITY_VERSION_3 = 0x20080522
OPEN_FILES = 64
READ_ONLY_DIRS = ("/usr", "/lib", "/lib64", "/bin", "/etc/alternatives")
READ_ONLY_FILES = ("/dev/null", "/dev/urandom", "/dev/zero", "/etc/ld.so.cache", "/etc/localtime")
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
# Metadata a program could change outside its folder where no minimal root hides the files
# (Landlock does not cover these calls); the ``*at`` forms newer than libseccomp by number (the
# same on every architecture): setxattrat, removexattrat, file_setattr.
METADATA_SYSCALLS = (
    "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "utime",
    "utimes", "futimesat", "utimensat", 463, 466, 469,
)  # fmt: skip
LIBC = ctypes.CDLL(None, use_errno=True)


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


def _runtime() -> tuple[list[str], list[str]]:
    """What a program may read: the interpreter's prefixes and the system library folders that
    exist, and a few device and loader files."""
    interpreter = os.path.dirname(os.path.realpath(sys.executable))
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, interpreter}
    folders = [path for path in sorted(prefixes | set(READ_ONLY_DIRS)) if os.path.isdir(path)]
    return folders, [path for path in READ_ONLY_FILES if os.path.exists(path)]


def _mount_read_only(path: str) -> bool:
    """Make the mount at ``path`` and every mount below it read-only (``mount_setattr``)."""
    attr = (ctypes.c_uint64 * 4)(MOUNT_ATTR_RDONLY, 0, 0, 0)  # struct mount_attr: set, clear, ...
    path_arg = ctypes.c_char_p(path.encode())
    return LIBC.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path_arg, AT_RECURSIVE, attr, ctypes.sizeof(attr)) == 0


def build_minimal_root(root: str) -> str | None:
    """Once per worker, in its mount namespace: a folder under ``root`` holding a tmpfs with the
    runtime (``_runtime``) bound at its own paths (a symlinked path as the same symlink), an empty
    ``JOB_DIR`` where each program's folder is mounted, and ``/tmp`` pointing to it; all of it
    read-only. A child ``chroot``s into it (``confine``): the user's files, the dataset cache, the
    pool's and other workers' folders do not exist there, so neither reads, writes nor metadata
    calls (``stat``, extended attributes, timestamps) reach them. None where the kernel refuses a
    step."""
    jail = tempfile.mkdtemp(prefix="root-", dir=root)
    if LIBC.mount(b"tmpfs", jail.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,mode=0755") != 0:
        os.rmdir(jail)
        return None
    try:
        folders, files = _runtime()
        real = {os.path.realpath(path) for path in folders + files}
        for source in sorted(real):  # a path below another one comes with it
            if any(source.startswith(other + "/") for other in real):
                continue
            target = jail + source
            if os.path.isdir(source):
                os.makedirs(target, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o444))
            if LIBC.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None) != 0:
                raise OSError(ctypes.get_errno(), f"cannot bind {source}")
        for path in folders + files:
            if os.path.realpath(path) != path and not os.path.lexists(jail + path):
                os.makedirs(os.path.dirname(jail + path), exist_ok=True)
                os.symlink(os.path.realpath(path), jail + path)
        os.mkdir(jail + JOB_DIR)
        with contextlib.suppress(FileExistsError):  # a runtime below /tmp keeps its own
            os.symlink(JOB_DIR, jail + "/tmp")
        if not _mount_read_only(jail):
            raise OSError(ctypes.get_errno(), "cannot make the minimal root read-only")
        return jail
    except OSError:
        LIBC.umount2(jail.encode(), MNT_DETACH)
        os.rmdir(jail)
        return None


def _drop_capabilities() -> None:
    """Empty effective, permitted and inheritable sets: the namespace's root powers stay with the
    worker, so a child cannot reach another child's /proc entries or undo its limits."""
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    LIBC.capset(header, (ctypes.c_uint32 * 6)())


def build_seccomp(deny_metadata: bool):
    """The syscall filter (pyseccomp over libseccomp), built once and loaded in every child;
    ``deny_metadata`` where no minimal root hides the machine's files (``METADATA_SYSCALLS``)."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError):
        return None
    deny = seccomp.ERRNO(errno.EPERM)
    filt = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED_SYSCALLS + (METADATA_SYSCALLS if deny_metadata else ()):
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


def _apply_landlock(workdir: str) -> None:
    """Read-only below the interpreter and system libraries; full access only below ``workdir``."""
    from landlock import FSAccess, Ruleset

    read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    ruleset = Ruleset()
    folders, files = _runtime()
    for path in folders:
        ruleset.allow(path, rules=read)
    for path in files:
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


def _limit(which: int, soft: int, hard: int | None = None) -> None:
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(which, (soft, soft if hard is None else hard))


def confine(job: dict, workdir: str, jail: str | None, seccomp_filter, use_landlock: bool) -> None:
    """In a program's child, before the program: every layer that is per process (its group, the
    minimal root ``jail`` where there is one, its folder, rlimits, no capabilities, Landlock,
    seccomp), bound to the worker's life."""
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the worker's death ends the child
    os.setpgid(0, 0)
    if jail is not None:
        os.chroot(jail)
        workdir = JOB_DIR
    os.chdir(workdir)
    os.environ["TMPDIR"] = os.environ["HOME"] = workdir
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
    _drop_capabilities()
    if use_landlock:
        _apply_landlock(workdir)
    if seccomp_filter is not None:
        seccomp_filter.load()
