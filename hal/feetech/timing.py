"""The Feetech bus timing budget: how long one read + write cycle occupies the wire.

A byte is 10 bits on the wire, so it takes ``10 / baudrate`` seconds. Packets have 6
bytes around their parameters (0xFF 0xFF, id, length, instruction or error, checksum)::

    sync read (STS)   8 + n          replies n x (6 + L), each after its return delay
    read (SCS, each)  8              reply 6 + L
    sync write        8 + n x (1 + W)  no reply

Example: the SO-101, 6 STS3215 at 1 Mbps, the 8-byte state block and a 2-byte goal:
14 + 6 x 14 + 26 = 124 bytes = 1.24 ms, at most 806 cycles/s with Return Delay 0
(the factory value, 250 = 500 µs per reply, adds 3 ms: 235 cycles/s).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hilbot.hal.feetech.tables import model
from hilbot.hal.feetech.units import state_block
from hilbot.hal.mapping import BusSpec, ServoSpec

BITS_PER_BYTE = 10
RETURN_DELAY_UNIT = 2e-6  # [s] per Return Delay Time unit (memory table, address 7)
GOAL_BYTES = 2  # Goal Position (42)


@dataclass(frozen=True, slots=True)
class FeetechBudget:
    """The wire time of one read + write cycle on one Feetech bus."""

    baudrate: int
    servos: int
    sync_read: bool
    read_length: int  # [bytes] per servo
    tx_bytes: int
    rx_bytes: int
    return_delay: float  # [s] summed over one cycle's replies
    transactions: int  # round trips per cycle

    @property
    def wire_time(self) -> float:
        """[s] tx + rx bytes at 10 bits each."""
        return (self.tx_bytes + self.rx_bytes) * BITS_PER_BYTE / self.baudrate

    @property
    def cycle_time(self) -> float:
        """[s] wire time plus return delays."""
        return self.wire_time + self.return_delay

    @property
    def max_rate(self) -> float:
        """Highest cycle rate [Hz] the wire can carry."""
        return 1.0 / self.cycle_time

    def describe(self) -> str:
        """A few lines of arithmetic, for ``hilbot doctor``."""
        us = 1e6
        how = "sync read" if self.sync_read else "one read per servo"
        return (
            f"{self.servos} Feetech servos, {self.baudrate} bit/s, {how} of "
            f"{self.read_length} B + sync write of {GOAL_BYTES} B\n"
            f"  {self.tx_bytes} B out + {self.rx_bytes} B back = "
            f"{self.tx_bytes + self.rx_bytes} B x {BITS_PER_BYTE} bit = "
            f"{self.wire_time * us:.0f} µs, return delays {self.return_delay * us:.0f} µs\n"
            f"  cycle {self.cycle_time * us:.0f} µs -> at most {self.max_rate:.0f} Hz"
        )


def feetech_budget(
    bus: BusSpec, servos: Sequence[ServoSpec], *, return_delay_time: int = 0
) -> FeetechBudget:
    """The cycle budget of ``servos`` on ``bus`` (``KeyError`` for an unknown model)."""
    models = [model(s.model) for s in servos]
    length = max(state_block(m)[1] for m in models)
    n = len(servos)
    sync = all(m.has_sync_read for m in models)
    read_tx = 8 + n if sync else 8 * n
    tx = read_tx + 8 + n * (1 + GOAL_BYTES)
    rx = n * (6 + length)
    return FeetechBudget(
        baudrate=bus.baudrate,
        servos=n,
        sync_read=sync,
        read_length=length,
        tx_bytes=tx,
        rx_bytes=rx,
        return_delay=n * return_delay_time * RETURN_DELAY_UNIT,
        transactions=2 if sync else n + 1,
    )


def max_cycle_rate(
    bus: BusSpec, servos: Sequence[ServoSpec], *, return_delay_time: int = 0
) -> float:
    """Highest cycle rate [Hz] the bus can carry for ``servos`` (wire limit)."""
    if not servos:
        return float("inf")
    return feetech_budget(bus, servos, return_delay_time=return_delay_time).max_rate
