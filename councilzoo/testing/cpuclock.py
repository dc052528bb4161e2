"""A pytest plugin that records what each test costs in CPU seconds, not only wall seconds.

On a shared machine the wall time of a test says more about the neighbours than about the test;
the CPU seconds of pytest and of the child processes it waited for (``resource.getrusage``) do not.
Each phase (setup, call, teardown) of each test appends one JSON line
``[nodeid, phase, cpu_s, wall_s]`` to the file named by ``--cpuclock``, as it ends:

    pytest -p councilzoo.testing.cpuclock --cpuclock times.jsonl -m cluster

A process the test did not wait for (a server killed with its process group, a daemon) is not
counted.
"""

from __future__ import annotations

import json
import resource
import time

import pytest

__all__: list[str] = []


def pytest_addoption(parser) -> None:
    parser.addoption("--cpuclock", metavar="PATH", help="append each test phase's CPU and wall seconds")


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _clocked(item, phase: str):
    path = item.config.getoption("cpuclock")
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    if path:
        row = [item.nodeid, phase, round(_cpu_seconds() - cpu, 2), round(time.monotonic() - wall, 2)]
        with open(path, "a") as sink:
            sink.write(json.dumps(row) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _clocked(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _clocked(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _clocked(item, "teardown")
