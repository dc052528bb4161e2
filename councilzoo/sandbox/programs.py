"""What runs in a program's children, forked and confined by the sandbox's worker.

Results never rest on the program's own interpreter: a ``call`` program answers calls over a pipe
with plain data (``councilzoo.sandbox.values``: tagged JSON, integers in hex, so of any size)
that the worker decodes into exact builtin types and canonicalises itself (``serve_functions``);
a ``script`` program's functions are called by a second child, the test runner
(``run_tests``), which runs the tests against proxies and alone holds the channel that says the
tests finished; a ``stdin`` program runs as ``__main__`` (``run_main``). So no patch of builtins,
modules, ``json.dumps`` or ``__eq__`` inside the program reaches a comparison.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import sys
import types

if __package__:  # imported as councilzoo.sandbox.programs
    from councilzoo.sandbox import values
else:  # loaded by the worker, run by path: its folder heads sys.path and nothing of councilzoo loads
    import values

__all__ = ["MAX_ERROR_CHARS", "short_error", "serve_functions", "run_tests", "run_main"]

PROGRAM_NAME = "solution"  # ``__name__`` of a program whose functions are tested: its main guard stays off
MAX_ERROR_CHARS = 300


def short_error(err: BaseException) -> str:
    """An exception as ``Type: message``, cut to ``MAX_ERROR_CHARS``."""
    return f"{type(err).__name__}: {err}"[:MAX_ERROR_CHARS]


def _exit_reason(err: BaseException, when: str) -> str:
    if isinstance(err, SystemExit):
        return f"the program exited (SystemExit: {err.code!r}) {when}"[:MAX_ERROR_CHARS]
    return short_error(err)


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
            calls = [(table[request["call"]], values.from_plain(a), values.from_plain(k)) for a, k in calls]
        except BaseException as err:
            send({"error": f"bad request: {short_error(err)}"})
            continue
        for fn, args, kwargs in calls:
            try:
                value = fn(*args, **kwargs)
                sys.stdout.flush()
                reply = {"value": values.to_plain(value)}
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
        send({"call": name, "args": values.to_plain(args), "kwargs": values.to_plain(kwargs)})
        line = replies.readline()
        if not line:
            raise ProgramError("the program's process ended before the tests finished")
        try:
            reply = json.loads(line)
            if "error" not in reply:
                return values.from_plain(reply["value"])
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
        send({"error": short_error(err)})
        os._exit(1)
    send({"done": True})
    os._exit(0)
