"""Seeded draws that are a pure function of a key: simulated agents and the regret-matching
controller replay the same numbers for the same (seed, problem, agent, turn), in any order."""

from __future__ import annotations

import hashlib
import struct

__all__ = ["uniforms"]

_2_53 = 2.0**-53


def uniforms(key: tuple, n: int) -> list[float]:
    """``n`` uniforms in (0, 1) that are a pure function of ``key`` (ints and strings).

    A counter-based generator (the idea of Philox) built on blake2b: building a numpy Generator
    per draw costs ~100x more, and simulated agents draw a few numbers per turn.
    """
    out: list[float] = []
    block = 0
    while len(out) < n:
        digest = hashlib.blake2b(repr((key, block)).encode(), digest_size=64).digest()
        out.extend(((k >> 11) + 0.5) * _2_53 for k in struct.unpack("<8Q", digest))
        block += 1
    return out[:n]
