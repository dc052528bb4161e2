"""The channel between the pool and its workers: length-prefixed JSON messages over pipes.

A message is a 4-byte big-endian length and a JSON body. Standard library only: the worker loads
this file by itself (``councilzoo.sandbox.worker``).
"""

from __future__ import annotations

import json
import os
import struct

__all__ = ["read_message", "write_message", "read_secret", "CallerGone"]


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
