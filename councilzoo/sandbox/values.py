"""Program outputs as comparable text, and builtin values as plain data between processes.

``canonical`` is the text two equal outputs share (what grading compares); ``to_plain`` and
``from_plain`` carry a value of exact builtin types across a pipe as tagged JSON, so no result
rests on a program's own objects. Standard library only: the sandbox's worker loads this file by
itself (``councilzoo.sandbox.worker``), and grading uses it in the caller's process.
"""

from __future__ import annotations

import contextlib
import math
import sys

__all__ = ["MAX_DEPTH", "canonical", "digits_unlimited", "canonical_stdout", "to_plain", "from_plain"]

MAX_DEPTH = 64
# ints past the interpreter's default decimal limit (4,300 digits, there because decimal conversion
# is quadratic) are written in hex: linear, so a huge return value cannot stall the worker
DECIMAL_BOUND = 10**sys.int_info.default_max_str_digits


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
