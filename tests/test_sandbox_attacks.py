"""The sandbox's own attack suite: hostile and faulty programs graded by ``passes()``, each with the
verdict it must get. After every case no process of the run is left and its folder is gone.

Three problems, one per mode, all "add two numbers": ``script`` (HumanEval-style assertions,
``math.isclose`` included), ``call`` (outputs compared with ``expected_outputs``) and ``stdin``.
A case is (mode, program, verdict): ``pass`` for harmless idioms and correct programs, ``fail``
for escapes, early exits, forged passes, disk filling. Add a row for every new attack.
"""

from __future__ import annotations

import ast
import ctypes
import os
import textwrap
from pathlib import Path

import psutil
import pytest

from councilzoo.sandbox import Job, Limits, Sandbox
from councilzoo.tasks import Problem
from councilzoo.tasks.code import passes

LIMITS = Limits(timeout_s=1.0, memory_mb=512, max_output_bytes=65_536, disk_mb=8, max_files=2_000)
TESTS = """
import math
def check(candidate):
    assert candidate(2, 3) == 5
    assert math.isclose(candidate(0.5, 0.25), 0.75)
    assert abs(candidate(-1, 1)) < 1e-9
    assert all(map(lambda pair: candidate(*pair) == sum(pair), [(1, 1), (4, 5)]))
check(add)
"""
PROBLEMS = {
    "script": Problem(
        "attack-script", "add", None, "code", metadata={"entry_point": "add", "test_script": TESTS}
    ),
    "call": Problem(
        "attack-call", "add", None, "code",
        metadata={"entry_point": "add", "test_inputs": ["(2, 3)", "(-1, 1)"], "expected_outputs": ["5", "0"]},
    ),
    "stdin": Problem(
        "attack-stdin", "add", None, "code",
        metadata={"entry_point": None, "test_inputs": ["2 3", "-1 1"], "expected_outputs": ["5", "0"]},
    ),
}  # fmt: skip
ADD = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"
STDIN_ADD = "import sys\n\ndef main():\n    a, b = map(int, sys.stdin.read().split())\n    print(a + b)\n"
STDIN_WRONG = STDIN_ADD.replace("a + b", "a - b")
ALWAYS_EQUAL = """
class Yes:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
def add(a, b):
    return Yes()
"""
INT_EQUAL_TO_ALL = """
class Int(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def add(a, b):
    return Int(0)
"""
DONE_TO_EVERY_FD = """
import os
for fd in range(64):
    try:
        os.write(fd, b'{"done": true}\\n')
    except OSError:
        pass
"""
DONE_THROUGH_PROC = """
import os
for pid in os.listdir('/proc'):
    try:
        for fd in os.listdir(f'/proc/{pid}/fd'):
            with open(f'/proc/{pid}/fd/{fd}', 'w') as h:
                h.write('{"done": true}\\n')
    except OSError:
        pass
"""
REPLIES_AHEAD = """
import os
for fd in range(3, 64):
    try:
        os.write(fd, b'{"value": ["i", "0x5"]}\\n{"value": ["i", "0x0"]}\\n')
    except OSError:
        pass
"""
DEEP_RECURSION = """
import sys
sys.setrecursionlimit(20_000)
def depth(n):
    return 0 if n == 0 else 1 + depth(n - 1)
def add(a, b):
    return a + b + depth(5_000) - 5_000
"""
THREADS = """
from concurrent.futures import ThreadPoolExecutor
def add(a, b):
    with ThreadPoolExecutor(4) as pool:
        return sum(pool.map(int, [a, b]))
"""
BIG_STACK_THREAD = """
import threading
threading.stack_size(2**26)
sys.setrecursionlimit(10**6)
t = threading.Thread(target=main)
t.start()
t.join()
"""
LOOK_FOR_THE_TESTS = """
import gc, sys
def search():
    needle = "".join(["check", "(add)"])  # held in this frame only: the program's text must not match
    def holds(value):
        return needle in (value if type(value) is str else repr(value)[:10_000])
    frame = sys._getframe().f_back
    while frame is not None:
        assert not any(holds(v) for v in list(frame.f_locals.values())), "found the tests in a frame"
        frame = frame.f_back
    assert not any(holds(o) for o in gc.get_objects() if type(o) in (dict, list)), "found the tests"
search()
"""
MAIN_GUARD = "import sys\ndef main():\n    return 0\nif __name__ == '__main__':\n    sys.exit(main())"


def program(*parts: str) -> str:
    return "\n".join(textwrap.dedent(p) for p in parts)


ATTACKS = {
    # --- escapes: every process dies at the deadline or at the end of its run --------------------
    "setsid": ("script", program("import os\nos.setsid()", ADD), "fail"),
    "setpgid into the worker's group, then setsid": (
        "script", program("import os\nos.setpgid(0, os.getpgid(os.getppid()))\nos.setsid()", ADD), "fail"),
    "fork bomb": ("script", program("import os\nwhile True:\n    os.fork()", ADD), "fail"),
    "double fork": (
        "script", program("import os, time\nif os.fork() == 0:\n    os.fork()\n    time.sleep(60)", ADD),
        "fail"),
    "raw clone syscall": ("script", program(
        "import ctypes, time\nif ctypes.CDLL(None).syscall(56, 17, 0, 0, 0, 0) == 0:\n    time.sleep(60)",
        WRONG), "fail"),
    "subprocess": ("script", program("import subprocess\nsubprocess.Popen(['sleep', '60'])", ADD), "fail"),
    "clear the parent-death signal": (
        "script", program("import ctypes\nassert ctypes.CDLL(None).prctl(1, 0) == 0", ADD), "fail"),
    "kill every process": ("script", program("import os\nos.kill(-1, 9)", ADD), "fail"),
    "ignore SIGTERM and loop": ("script", program(
        "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass", ADD), "fail"),
    "sleep inside the tested function": (
        "call", "import time\ndef add(a, b):\n    time.sleep(60)\n    return a + b\n", "fail"),
    "new namespace": (
        "script", program("import ctypes\nassert ctypes.CDLL(None).unshare(0x20000000) == 0", ADD), "fail"),
    "thread left sleeping after a correct answer": (
        "call", program(
            "import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()", ADD),
        "pass"),
    # --- exits before the tests finished: a failure with its reason, in every mode ---------------
    "script: main guard exit, correct": ("script", program(ADD, MAIN_GUARD), "pass"),
    "script: main guard exit, wrong": ("script", program(WRONG, MAIN_GUARD), "fail"),
    "script: sys.exit(0)": ("script", program(WRONG, "import sys\nsys.exit(0)"), "fail"),
    "script: exit()": ("script", program(WRONG, "exit()"), "fail"),
    "script: os._exit(0)": ("script", program(WRONG, "import os\nos._exit(0)"), "fail"),
    "script: SystemExit raised in atexit": (
        "script", program(WRONG, "import atexit\ndef bye():\n    raise SystemExit(0)\natexit.register(bye)"),
        "fail"),
    "script: exit inside the tested function": ("script", "import sys\ndef add(a, b):\n    sys.exit(0)\n",
        "fail"),
    "script: a thread ends the process": (
        "script", program("import os, threading\nthreading.Timer(0.0, os._exit, (0,)).start()", WRONG),
        "fail"),
    "call: sys.exit(0) at load": ("call", program("import sys\nsys.exit(0)", ADD), "fail"),
    "call: main guard exit, correct": ("call", program(ADD, MAIN_GUARD), "pass"),
    "call: os._exit inside the function": ("call", "import os\ndef add(a, b):\n    os._exit(0)\n", "fail"),
    "stdin: main guard exit, correct": (
        "stdin", program(STDIN_ADD, "if __name__ == '__main__':\n    sys.exit(main())"), "pass"),
    "stdin: exit(0) before printing": ("stdin", program(STDIN_ADD, "sys.exit(0)\nmain()"), "fail"),
    "stdin: os._exit after printing": (
        "stdin", program(STDIN_ADD, "main()\nsys.stdout.flush()\nimport os\nos._exit(0)"), "fail"),
    "stdin: wrong answer then exit()": ("stdin", program(STDIN_WRONG, "main()\nexit()"), "fail"),
    # --- forged passes -------------------------------------------------------------------------
    "script: __eq__ always true": ("script", ALWAYS_EQUAL, "fail"),
    "script: int subclass equal to everything": ("script", INT_EQUAL_TO_ALL, "fail"),
    "script: math.isclose patched": (
        "script", program("import math\nmath.isclose = lambda *a, **k: True", WRONG), "fail"),
    "script: a function named like a builtin the tests use": (
        "script", program(WRONG, "def abs(x):\n    return 0"), "fail"),
    "script: StopIteration ends a map() in the tests early": (
        "script", "def add(a, b):\n    if (a, b) == (1, 1):\n        raise StopIteration\n    return a + b\n",
        "fail"),
    "script: builtins patched": ("script", program(
        "import builtins\nbuiltins.AssertionError = None\nbuiltins.isinstance = lambda *a: True", WRONG),
        "fail"),
    "script: json.dumps replaced to report success": (
        "script", program("import json\njson.dumps = lambda *a, **k: '{\"done\": true}'", WRONG), "fail"),
    "script: done written to every open fd": ("script", program(DONE_TO_EVERY_FD, WRONG), "fail"),
    "script: done written through /proc to every pipe": ("script", program(DONE_THROUGH_PROC, WRONG), "fail"),
    "script: the tests are nowhere in the program's memory": (
        "script", program(LOOK_FOR_THE_TESTS, ADD), "pass"),
    "call: __eq__ always true": ("call", ALWAYS_EQUAL, "fail"),
    "call: int subclass equal to everything": ("call", INT_EQUAL_TO_ALL, "fail"),
    "call: repr that prints the right answer": (
        "call", "class Five(int):\n    def __repr__(self):\n        return '5'\ndef add(a, b):\n"
        "    return Five(a - b)\n", "fail"),
    "call: str subclass": ("call", "class S(str):\n    pass\ndef add(a, b):\n    return S(a + b)\n", "fail"),
    "call: forged replies written ahead": ("call", program(REPLIES_AHEAD, WRONG), "fail"),
    "call: huge return value": ("call", "def add(a, b):\n    return 'x' * 10**7\n", "fail"),
    # --- disk filling ------------------------------------------------------------------------------
    "one huge file": (
        "script", program("with open('big', 'wb') as h:\n    h.write(b'x' * 300 * 2**20)", ADD), "fail"),
    "many small files": (
        "script", program("for i in range(100_000):\n    open(f'f{i}', 'w').close()", ADD), "fail"),
    "many files under the size limit": (
        "script", program("for i in range(1_000):\n    open(f'f{i}', 'wb').write(b'x' * 60_000)", ADD),
        "fail"),
    # --- cleanup bombs: the program passes, and its folder still goes ------------------------------
    "1,500 nested folders": (
        "script", program("import os\nfor _ in range(1_500):\n    os.mkdir('d')\n    os.chdir('d')", ADD),
        "pass"),
    "folder and file without permissions": (
        "script", program(
            "import os\nos.mkdir('locked', 0)\nos.close(os.open('secret', os.O_CREAT, 0))", ADD),
        "pass"),
    # --- harmless idioms work as outside -------------------------------------------------------
    "resource.getrlimit": (
        "script", program("import resource\nassert resource.getrlimit(resource.RLIMIT_STACK)", ADD), "pass"),
    "raise the stack limit within the hard limit": ("script", program(
        "import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_STACK)\n"
        "resource.setrlimit(resource.RLIMIT_STACK, (hard if hard > 0 else 2**28, hard))", ADD), "pass"),
    "sys.setrecursionlimit and deep recursion": ("call", DEEP_RECURSION, "pass"),
    "threads": ("call", THREADS, "pass"),
    "stdin: big stack in a thread": ("stdin", program(STDIN_ADD, BIG_STACK_THREAD), "pass"),
    "temporary file in its folder": ("script", program(
        "open('scratch.txt', 'w').write('42')\nassert open('scratch.txt').read() == '42'", ADD), "pass"),
    "stdin: exit() after printing": ("stdin", program(STDIN_ADD, "main()\nexit()"), "pass"),
}  # fmt: skip


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, limits=LIMITS) as box:
        yield box


def leftovers(sandbox: Sandbox) -> tuple[list[psutil.Process], list[Path]]:
    """Processes below the workers (below the worker's init when it has a PID namespace) and
    program folders in the pool's root."""
    processes = []
    for pid in sandbox.worker_pids():
        top = psutil.Process(pid).children() if sandbox.isolation["pid_namespace"] else [psutil.Process(pid)]
        for process in top:
            processes += process.children(recursive=True)
    folders = [d for d in Path(sandbox._root).glob("w*/*") if not d.name.startswith("root-")]
    return processes, folders


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_gets_its_verdict_and_leaves_nothing(sandbox, name):
    mode, source, verdict = ATTACKS[name]
    (passed,) = passes(PROBLEMS[mode], [source], sandbox=sandbox)
    assert passed == (verdict == "pass")
    assert leftovers(sandbox) == ([], [])
    correct = STDIN_ADD + "main()\n" if mode == "stdin" else ADD
    assert passes(PROBLEMS[mode], [correct], sandbox=sandbox) == [True]  # the pool goes on


# --- attacks across jobs: nothing of one job reaches a later one -----------------------------------

NEEDLE = "councilzoo-earlier-job-7f3a9c"  # in the earlier jobs' sources and outputs
SCAN_MEMORY = """
import ctypes, gc, os
PAGE = 4096
HEAD, TAIL = ("council" + "zoo-earlier").encode(), ("-job-" + "7f3a9c").encode()  # never whole here
libc = ctypes.CDLL(None, use_errno=True)
libc.sbrk.restype = ctypes.c_void_p
libc.write.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)

def regions():
    near = {id(o) >> 20 for o in gc.get_objects()}  # the interpreter's arenas
    spans = {((m - 1) << 20, (m + 2) << 20) for m in near}
    top = libc.sbrk(0)
    spans.add((top - (256 << 20), top))  # malloc's heap below the break
    return sorted(spans)

def holds_needle(data):
    at = data.find(HEAD)
    while at >= 0:
        if data[at + len(HEAD):at + len(HEAD) + len(TAIL)] == TAIL:
            return True
        at = data.find(HEAD, at + 1)
    return False

def scan():
    # write() from an address into a pipe copies readable memory and fails on the rest (no segfault)
    r, w = os.pipe()
    hits = pages = 0
    for start, end in regions():
        run = bytearray()
        for address in range(start, end, PAGE):
            if libc.write(w, address, PAGE) == PAGE:
                run += os.read(r, PAGE)
                pages += 1
                continue
            hits += holds_needle(run)
            run = bytearray()
        hits += holds_needle(run)
    return hits, pages
"""
TABLE = repr((NEEDLE + " ") * 700)  # a reference with a big lookup table: malloc keeps freed chunks
EARLIER_JOBS = [
    Job(f"TABLE = {TABLE}\ndef f():\n    return TABLE[:200]\n", "call", "f", ("()",)),
    Job(f"TABLE = {TABLE}\nprint(TABLE[:200])\n", "stdin", None, ("",)),
    Job(f"TABLE = {TABLE}\ndef f():\n    return TABLE\n", "script", test_script=f"assert f() == {TABLE}\n"),
]


def test_a_later_job_finds_nothing_of_earlier_jobs_in_its_memory():
    """Raw memory (every readable page near the heap and the interpreter's arenas, copied through
    a pipe) of a program run after jobs whose sources and outputs held a needle."""
    with Sandbox(workers=1, limits=Limits(timeout_s=60, memory_mb=1_024)) as box:
        assert all(r.ok for r in box.run(EARLIER_JOBS))
        (found,) = box.run([Job(SCAN_MEMORY, "call", "scan", ("()",))])
    assert found.ok, found.error
    hits, pages = ast.literal_eval(found.outputs[0])
    assert pages > 1_000 and hits == 0


IPC_KEY = 0x435A0000 + (os.getpid() & 0xFFFF)
IPC_CREATE = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
def create():
    shm = libc.shmget({IPC_KEY}, 64 << 20, 0o1000 | 0o600)  # IPC_CREAT
    if shm >= 0:
        address = libc.shmat(shm, None, 0)
        if address not in (None, ctypes.c_void_p(-1).value):
            ctypes.memmove(address, b"{NEEDLE}", {len(NEEDLE)})
    queue = libc.msgget({IPC_KEY}, 0o1000 | 0o600)
    semaphores = libc.semget({IPC_KEY}, 1, 0o1000 | 0o600)
    return shm, queue, semaphores
"""
IPC_LOOK = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def look():
    return libc.shmget({IPC_KEY}, 0, 0), libc.msgget({IPC_KEY}, 0), libc.semget({IPC_KEY}, 0, 0)
"""


def host_ipc_keys() -> set[int]:
    """Keys of the System V segments, queues and semaphore sets of the host's IPC namespace."""
    keys = set()
    for table in ("shm", "msg", "sem"):
        lines = Path(f"/proc/sysvipc/{table}").read_text().splitlines()[1:]
        keys |= {int(line.split()[0]) for line in lines}
    return keys


@pytest.fixture
def host_ipc_cleanup():
    """Removes whatever a test left under ``IPC_KEY`` on the host (when the sandbox let it through)."""
    yield
    libc = ctypes.CDLL(None, use_errno=True)
    found = [(libc.shmget(IPC_KEY, 0, 0), libc.shmctl), (libc.msgget(IPC_KEY, 0), libc.msgctl),
             (libc.semget(IPC_KEY, 0, 0), libc.semctl)]  # fmt: skip
    for ident, control in found:
        if ident >= 0:
            control(ident, 0, 0)  # IPC_RMID (0) in every table's argument order


def test_system_v_ipc_carries_nothing_between_runs_and_nothing_outlives_close(host_ipc_cleanup):
    with Sandbox(workers=1, limits=LIMITS) as box:
        created, later = box.run(
            [Job(IPC_CREATE, "call", "create", ("()",)), Job(IPC_LOOK, "call", "look", ("()",))]
        )
        assert created.ok and later.ok, (created.error, later.error)
        assert ast.literal_eval(later.outputs[0]) == (-1, -1, -1)  # the later job finds none of them
    assert IPC_KEY not in host_ipc_keys()  # and none is left on the host


@pytest.mark.parametrize("mode", ["call", "stdin"])
def test_a_deeply_nested_result_line_is_the_programs_error_not_a_dead_worker(sandbox, mode):
    channel = 4 if mode == "call" else 3  # the program's result channel in each mode
    source = f"import os\nos.write({channel}, b'[' * 20_000 + b'\\n')\n{ADD}"
    job = Job(source, mode, "add" if mode == "call" else None, ("(2, 3)",) if mode == "call" else ("2 3",))
    sandbox.run([])  # the pool starts
    workers = sorted(sandbox.worker_pids())
    (result,) = sandbox.run([job])
    assert result.status == "error" and "harness" in result.error
    assert sorted(sandbox.worker_pids()) == workers  # the same workers go on
