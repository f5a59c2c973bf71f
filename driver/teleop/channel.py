"""Framed messages between the control process and the teleop worker (a socket pair).

Each frame is a 4-byte big-endian length and a pickle. Both ends are this
package's own code in processes of the same user, so pickle is safe here; it
never carries anything that came from the network undecoded.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any

_HEADER = struct.Struct(">I")
#: Frames larger than this are a bug (state snapshots are a few kB).
MAX_FRAME = 16 * 1024 * 1024


def pack(message: tuple[Any, ...]) -> bytes:
    """One frame holding ``message``."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def receive(reader: asyncio.StreamReader) -> tuple[Any, ...]:
    """Read one frame; raises ``asyncio.IncompleteReadError`` at end of stream."""
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    if size > MAX_FRAME:
        raise ValueError(f"teleop channel frame of {size} bytes: the peer is broken")
    message = pickle.loads(await reader.readexactly(size))
    if not isinstance(message, tuple) or not message or not isinstance(message[0], str):
        raise ValueError(f"teleop channel: unexpected frame {type(message).__name__}")
    return message
