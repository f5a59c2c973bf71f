"""Preallocated per-cycle buffers that a recorder fills without allocating per cycle."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.bench.recording import (
    CHANNELS,
    NAN_FILLED,
    Recording,
    RecordingHeader,
    channel_shape,
)


class CycleBuffer:
    """Numpy buffers with one row per cycle, grown by doubling when full.

    A caller takes a row with ``next_row()`` and writes into ``arrays[name][row]``.
    Rows start as NaN for the channels where NaN means "nothing" (targets,
    commands) and as zero elsewhere, so a writer only fills what it has.

    Args:
        joint_names: the ``J`` joints (channel columns).
        chain_names: the ``C`` chains.
        capacity: rows to preallocate (the expected number of cycles).
    """

    def __init__(
        self, joint_names: tuple[str, ...], chain_names: tuple[str, ...], capacity: int = 4096
    ) -> None:
        self.joint_names = joint_names
        self.chain_names = chain_names
        self._joint_index = {name: i for i, name in enumerate(joint_names)}
        self._chain_index = {name: i for i, name in enumerate(chain_names)}
        self.arrays: dict[str, NDArray[Any]] = {}
        self._n = 0
        self._capacity = 0
        self._grow(max(16, capacity))
        self.clamp_events: list[tuple[int, int, int, float, float]] = []

    def __len__(self) -> int:
        return self._n

    def joint_index(self, name: str) -> int:
        """Return the column of joint ``name``, or -1 if it is not recorded."""
        return self._joint_index.get(name, -1)

    def chain_index(self, name: str) -> int:
        """Return the index of chain ``name``, or -1 if it is not recorded."""
        return self._chain_index.get(name, -1)

    def next_row(self) -> int:
        """Return the index of a fresh row, growing the buffers when they are full."""
        if self._n == self._capacity:
            self._grow(self._capacity * 2)
        row = self._n
        self._n += 1
        return row

    def _grow(self, capacity: int) -> None:
        joints, chains = len(self.joint_names), len(self.chain_names)
        for name, (dtype, kind) in CHANNELS.items():
            fresh = np.zeros(channel_shape(kind, capacity, joints, chains), dtype=dtype)
            if name in NAN_FILLED:
                fresh.fill(np.nan)
            old = self.arrays.get(name)
            if old is not None:
                fresh[: self._n] = old[: self._n]
            self.arrays[name] = fresh
        self._capacity = capacity

    def finish(self, header: RecordingHeader) -> Recording:
        """Return a ``Recording`` of the rows written so far (copies, trimmed to length)."""
        channels = {name: array[: self._n].copy() for name, array in self.arrays.items()}
        events = np.array(self.clamp_events, dtype=np.float64).reshape(-1, 5)
        channels["clamp_events"] = events
        return Recording(header=header, channels=channels)
