"""Sandbox faults: each hostile program ends as a failed result within its limit, nothing escapes
its temporary folder, no process outlives its run, and the pool goes on serving."""

from __future__ import annotations

import ast
import os
import socket
from pathlib import Path

import psutil
import pytest

from councilzoo.tasks.sandbox import Job, Limits, Sandbox

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


def program_dirs(sandbox: Sandbox) -> list[Path]:
    root = Path(sandbox._root)
    return [d for d in root.glob("w*/*") if not d.name.startswith("io-")]


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
    needs(sandbox, "landlock")
    target = tmp_path / "escaped.txt"
    for body in (f"open({str(target)!r}, 'w').write('x')", f"os.mkdir({str(tmp_path / 'd')!r})"):
        result = run_one(sandbox, call(body, prelude="import os"))
        assert result.status == "error" and "Permission" in result.error
    assert list(tmp_path.iterdir()) == []


def test_program_writes_inside_its_own_folder_which_is_then_deleted(sandbox):
    job = call(
        "open('note.txt', 'w').write('hi')\nreturn os.getcwd(), open('note.txt').read()", prelude="import os"
    )
    result = run_one(sandbox, job)
    assert result.ok
    cwd, text = ast.literal_eval(result.outputs[0])  # the canonical text of a (str, str) tuple
    assert text == "hi" and not os.path.exists(cwd)


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
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in pids)
    assert not os.path.exists(root)
