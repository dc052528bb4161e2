"""Sandbox faults: each hostile program ends as a failed result within its limit, nothing escapes
its temporary folder, no process outlives its run, and the pool goes on serving."""

from __future__ import annotations

import ast
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from councilzoo.sandbox import Job, Limits, Sandbox
from councilzoo.sandbox.isolation import remove_tree
from councilzoo.sandbox.pool import remove_abandoned_roots
from councilzoo.sandbox.values import canonical, digits_unlimited, from_plain, to_plain

LIMITS = Limits(timeout_s=1.0, memory_mb=512, max_output_bytes=65_536)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, limits=LIMITS) as box:
        box.run([Job("pass", "script")])  # start the workers
        yield box


def call(body: str, *, prelude: str = "") -> Job:
    """A program defining ``f()`` whose body is ``body``; called once with no arguments."""
    lines = "\n".join("    " + line for line in body.splitlines())
    return Job(f"{prelude}\ndef f():\n{lines}\n", "call", "f", ("()",))


def run_one(sandbox: Sandbox, job: Job):
    (result,) = sandbox.run([job])  # each case's status says which limit stopped it
    return result


def descendants(sandbox: Sandbox) -> list[psutil.Process]:
    """Processes below the workers (in a PID namespace, below the worker's init inside it)."""
    found = []
    for pid in sandbox.worker_pids():
        top = psutil.Process(pid).children() if sandbox.isolation["pid_namespace"] else [psutil.Process(pid)]
        for process in top:
            found += process.children(recursive=True)
    return found


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # ended between the listing and the look
        return False


def program_dirs(sandbox: Sandbox) -> list[Path]:
    root = Path(sandbox._root)
    return [d for d in root.glob("w*/*") if not d.name.startswith("root-")]  # the minimal root stays


def needs(sandbox: Sandbox, layer: str) -> None:
    if not sandbox.isolation[layer]:
        pytest.skip(f"this kernel did not grant the sandbox's {layer} layer")


FAULTS = {
    "infinite loop": (call("while True:\n    pass"), "timeout"),
    "sleep past the wall clock": (call("time.sleep(60)", prelude="import time"), "timeout"),
    "fork bomb": (call("while True:\n    os.fork()", prelude="import os"), "error"),
    "subprocess": (call("subprocess.run(['sh', '-c', 'echo hi'])", prelude="import subprocess"), "error"),
    "huge allocation": (call("return len(bytearray(10**11))"), "error"),
    # MemoryError at the address-space limit, or the CPU limit first on a loaded machine
    "growing allocation": (call("xs = []\nwhile True:\n    xs.append(bytearray(10**7))"), "error|timeout"),
    "printing megabytes": (call("print('x' * 10**7)\nreturn 1"), "output_limit"),
    "os._exit": (call("os._exit(0)", prelude="import os"), "crashed"),
    "recursion limit": (call("return f()"), "error"),
    "signal the caller": (call("os.kill(os.getppid(), 9)", prelude="import os"), "error"),
    "exception": (call("raise ValueError('bad')"), "error"),
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fault_is_a_failed_program_within_its_limit(sandbox, name):
    job, status = FAULTS[name]
    result = run_one(sandbox, job)
    assert result.status in status.split("|") and not result.ok
    assert len(result.stdout) <= 2_048 and len(result.stderr) <= 2_048
    assert descendants(sandbox) == []  # no process left behind
    assert program_dirs(sandbox) == []  # its temporary folder is gone
    assert run_one(sandbox, call("return 41 + 1")).outputs == ("42",)  # the pool goes on


def test_deep_recursion_with_raised_limit_fails_within_limit(sandbox):
    job = call(
        "return g(0)", prelude="import sys\nsys.setrecursionlimit(10**8)\ndef g(n):\n    return g(n + 1)"
    )
    assert not run_one(sandbox, job).ok
    assert descendants(sandbox) == []


def test_write_outside_the_temporary_folder_is_refused(sandbox, tmp_path):
    target = tmp_path / "escaped.txt"
    for body in (f"open({str(target)!r}, 'w').write('x')", f"os.mkdir({str(tmp_path / 'd')!r})"):
        result = run_one(sandbox, call(body, prelude="import os"))
        assert result.status == "error" and ("Permission" in result.error or "NotFound" in result.error)
    assert list(tmp_path.iterdir()) == []


def test_program_writes_inside_its_own_folder_which_is_then_deleted(sandbox):
    job = call("open('note.txt', 'w').write('hi')\nreturn open('note.txt').read()")
    result = run_one(sandbox, job)
    assert result.ok and result.outputs == ("'hi'",)
    later = [run_one(sandbox, call("return os.listdir('.')", prelude="import os")) for _ in range(2)]
    assert [r.outputs for r in later] == [("[]",)] * 2  # on either worker
    assert program_dirs(sandbox) == []


def test_environment_of_the_caller_is_not_visible(sandbox, monkeypatch):
    monkeypatch.setenv("COUNCILZOO_SECRET", "hunter2")
    result = run_one(sandbox, call("return os.environ['COUNCILZOO_SECRET']", prelude="import os"))
    assert result.status == "error" and "KeyError" in result.error
    needs(sandbox, "landlock")
    proc = run_one(sandbox, call(f"return open('/proc/{os.getpid()}/environ').read()"))
    assert proc.status == "error" and "hunter2" not in proc.stdout + proc.error


def test_sockets_are_refused_even_to_localhost(sandbox):
    needs(sandbox, "seccomp")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.2)
        port = server.getsockname()[1]
        body = f"s = socket.socket()\ns.connect(('127.0.0.1', {port}))\nreturn 'connected'"
        result = run_one(sandbox, call(body, prelude="import socket"))
        assert result.status == "error"
        with pytest.raises(TimeoutError):
            server.accept()


def test_stdin_programs_get_their_input_per_run(sandbox):
    job = Job(
        "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n", "stdin", None, ("1 2", "3 4")
    )
    result = run_one(sandbox, job)
    assert result.ok and result.outputs == ("3", "7")


def test_many_programs_run_in_parallel_in_order(sandbox):
    jobs = [call(f"return {k} * {k}") for k in range(40)]
    results = sandbox.run(jobs)
    assert [r.outputs for r in results] == [(str(k * k),) for k in range(40)]


def test_close_leaves_no_process_and_no_folder():
    box = Sandbox(workers=2, limits=LIMITS)
    box.run([call("return 1")] * 4)
    pids, root = box.worker_pids(), box._root
    assert len(pids) == 2
    box.close()
    assert not any(_running(pid) for pid in pids)
    assert not os.path.exists(root)


def test_disk_quota_bounds_bytes_and_files():
    """A program's folder holds at most ``disk_mb`` and ``max_files``: on a tmpfs the writes past it
    fail (ENOSPC); where the kernel gives no tmpfs the worker measures the folder and fails the run."""
    limits = Limits(timeout_s=2.0, memory_mb=512, max_output_bytes=1 << 20, disk_mb=4, max_files=50)
    fill = (
        "written = files = 0\nchunk = b'x' * 65_536\n"
        "try:\n    for i in range(40):\n        with open(f'f{i}', 'wb') as h:\n"
        "            files += 1\n            for _ in range(8):\n                written += h.write(chunk)\n"
        "except OSError as err:\n    return written, files, err.errno"
    )
    many = (
        "n = 0\ntry:\n    while n < 2_000:\n        open(f'f{n}', 'w').close()\n        n += 1\n"
        "except OSError:\n    return n"
    )
    with Sandbox(workers=1, limits=limits) as box:
        by_size, by_count = box.run([call(fill), call(many)])
        if box.isolation["disk_quota"]:
            written, files, code = ast.literal_eval(by_size.outputs[0])
            assert written <= 4 * 2**20 and code == errno.ENOSPC
            assert int(by_count.outputs[0]) <= 50
        else:
            for result in (by_size, by_count):
                assert result.status == "error" and "disk quota" in result.error


def test_cleanup_never_raises_on_what_a_program_leaves(tmp_path):
    root = tmp_path / "left"
    root.mkdir()
    folder = os.open(root, os.O_RDONLY)
    for _ in range(1_500):  # deeper than shutil.rmtree's recursion in Python 3.11 goes
        os.mkdir("d", dir_fd=folder)
        folder, parent = os.open("d", os.O_RDONLY, dir_fd=folder), folder
        os.close(parent)
    os.close(folder)
    os.mkfifo(root / "fifo")
    (root / "locked").mkdir()
    (root / "locked" / "secret").write_text("x")
    os.chmod(root / "locked" / "secret", 0)
    os.chmod(root / "locked", 0)
    remove_tree(str(root))
    assert not root.exists()
    remove_tree(str(root))  # gone already: still no error


GRADER = """
from councilzoo.sandbox import Job, Limits, Sandbox
box = Sandbox(workers=1, limits=Limits(timeout_s=60))
box.run([Job("pass", "script")])
print(box._root, *box.worker_pids(), flush=True)
box.run([Job("import time\\nprint('started', flush=True)\\ntime.sleep(60)", "stdin", None, ("",))])
"""


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_grader_leaves_nothing_the_next_start_does_not_remove(signum):
    grader = subprocess.Popen([sys.executable, "-c", GRADER], stdout=subprocess.PIPE, text=True)
    root, *pids = grader.stdout.readline().split()
    workers = [psutil.Process(int(pid)) for pid in pids]
    deadline = time.monotonic() + 120  # until the program runs: the worker, its init, the run and the program
    while len(processes := workers + [p for w in workers for p in w.children(recursive=True)]) < 4:
        assert time.monotonic() < deadline, "the grader's program never started"
        time.sleep(0.01)
    grader.send_signal(signum)
    grader.wait()
    _, alive = psutil.wait_procs(processes, timeout=30)
    assert alive == []  # the workers saw their caller go, and took every program with them
    assert os.path.exists(root)
    remove_abandoned_roots()  # what Sandbox() does when it starts
    assert not os.path.exists(root)


def test_plain_data_is_exact_builtin_types():
    value = {"a": [1, 2.5, (True, None)], 3: {frozenset({b"x"})}, "c": complex(1, -2), "big": 7**3_000}
    back = from_plain(json.loads(json.dumps(to_plain(value))))
    assert back == value and type(back["a"][2]) is tuple

    class Int(int):
        def __eq__(self, other):
            return True

    for forged in (Int(3), [Int(3)], {"k": Int(3)}, object()):
        with pytest.raises(TypeError):
            to_plain(forged)
    for junk in (["i", 3], ["x", "1"], [["i", "0x1"]], {"i": "0x1"}, ["d", [["i"]]]):
        with pytest.raises(ValueError):
            from_plain(junk)


def test_integers_of_any_size_cross_both_ways(sandbox):
    """A 5,001-digit input (past the interpreter's 4,300-digit default) reaches the program exactly,
    and what it returns comes back exactly (ints that long are canonical in hex)."""
    big = 10**5_000 + 7
    with digits_unlimited():
        literal = f"({big},)"
    result = run_one(sandbox, Job("def f(x):\n    return x * 3, x % 1_000\n", "call", "f", (literal,)))
    assert result.ok and result.outputs == (canonical((big * 3, big % 1_000)),)
    assert result.outputs[0] == f"({hex(big * 3)}, 7)"
