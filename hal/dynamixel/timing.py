"""The bus timing budget: how long one read + write cycle occupies the wire.

A UART byte is 10 bits on the wire (start, 8 data, stop), so a byte takes
``10 / baudrate`` seconds. Packet sizes (Protocol 2.0, header 7 bytes + INST +
CRC; Protocol 1.0, header 4 bytes + INST + checksum)::

    2.0 sync read       14 + n            replies n x (11 + L), each after its return delay
    2.0 fast sync read  14 + n            one reply 8 + n x (L + 4), one return delay
    2.0 bulk read       10 + 5n           replies n x (11 + L)
    2.0 sync write      14 + n x (1 + W)  no reply
    1.0 bulk read        7 + 3n           replies n x (6 + L)   (MX only)
    1.0 read (each)      8                reply 6 + L
    1.0 sync write       8 + n x (1 + W)  no reply

Example: 6 servos at 1 Mbps, 4-byte sync read and 4-byte sync write on 2.0:
20 + 6 x 15 + 44 = 154 bytes = 1.54 ms, so at most 649 cycles/s.
The runtime rejects a configured rate above :func:`max_cycle_rate`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from hilbot._compat import StrEnum
from hilbot.hal.dynamixel.tables import ModelSpec, RegisterName, model
from hilbot.hal.mapping import BusSpec, ServoSpec

__all__ = [
    "BITS_PER_BYTE",
    "RETURN_DELAY_UNIT",
    "CycleBudget",
    "ReadMethod",
    "ReadSet",
    "budget_for_lengths",
    "bus_budget",
    "byte_time",
    "choose_read_method",
    "cycle_budget",
    "cycle_registers",
    "default_read_set",
    "max_cycle_rate",
    "read_bytes",
    "resolve",
    "write_bytes",
]

BITS_PER_BYTE = 10
RETURN_DELAY_UNIT = 2e-6  # [s] per Return Delay Time unit (e-manual, address 9 / 5)


class ReadMethod(enum.Enum):
    """How one cycle reads the servos of a bus."""

    FAST_SYNC_READ = "fast sync read"
    SYNC_READ = "sync read"
    FAST_BULK_READ = "fast bulk read"
    BULK_READ = "bulk read"
    READ_EACH = "one read per servo"


def byte_time(baudrate: int) -> float:
    """Seconds one byte occupies the wire at ``baudrate`` [bit/s]."""
    if baudrate <= 0:
        raise ValueError(f"baudrate must be positive, got {baudrate!r}")
    return BITS_PER_BYTE / baudrate


def read_bytes(method: ReadMethod, protocol: int, lengths: Sequence[int]) -> tuple[int, int, int]:
    """Bytes of one group read: ``(instruction bytes, reply bytes, return delays waited)``.

    Args:
        method: the read instruction(s) used.
        protocol: 1 or 2.
        lengths: data bytes read from each servo.
    """
    n = len(lengths)
    if n == 0:
        return (0, 0, 0)
    if protocol == 2:
        match method:
            case ReadMethod.FAST_SYNC_READ:
                return (14 + n, 8 + sum(ln + 4 for ln in lengths), 1)
            case ReadMethod.SYNC_READ:
                return (14 + n, sum(11 + ln for ln in lengths), n)
            case ReadMethod.FAST_BULK_READ:
                return (10 + 5 * n, 8 + sum(ln + 4 for ln in lengths), 1)
            case ReadMethod.BULK_READ:
                return (10 + 5 * n, sum(11 + ln for ln in lengths), n)
            case ReadMethod.READ_EACH:
                return (14 * n, sum(11 + ln for ln in lengths), n)
    match method:
        case ReadMethod.BULK_READ:
            return (7 + 3 * n, sum(6 + ln for ln in lengths), n)
        case ReadMethod.READ_EACH:
            return (8 * n, sum(6 + ln for ln in lengths), n)
    raise ValueError(f"Protocol 1.0 has no {method.value}")


def write_bytes(protocol: int, n: int, length: int) -> int:
    """Bytes of one sync write of ``length`` data bytes to ``n`` servos (no reply)."""
    if n == 0:
        return 0
    return (14 if protocol == 2 else 8) + n * (1 + length)


@dataclass(frozen=True, slots=True)
class CycleBudget:
    """The wire time of one read + write cycle on one bus."""

    baudrate: int
    protocol: int
    servos: int
    method: ReadMethod
    read_length: int  # [bytes] per servo
    write_length: int  # [bytes] per servo
    tx_bytes: int
    rx_bytes: int
    return_delay: float  # [s] summed over the replies of one cycle
    wire_time: float  # [s] tx + rx bytes at 10 bits each
    transactions: int  # round trips per cycle (each costs host turnaround, e.g. USB latency)

    @property
    def cycle_time(self) -> float:
        """[s] wire time plus return delays."""
        return self.wire_time + self.return_delay

    @property
    def max_rate(self) -> float:
        """Highest cycle rate [Hz] the wire can carry."""
        return 1.0 / self.cycle_time

    def rate_with_turnaround(self, turnaround: float) -> float:
        """Cycle rate [Hz] when each round trip also costs ``turnaround`` [s] on the host."""
        return 1.0 / (self.cycle_time + self.transactions * turnaround)

    def describe(self) -> str:
        """A few lines of arithmetic, for ``hilbot doctor`` and docs."""
        us = 1e6
        return (
            f"{self.servos} servos, protocol {self.protocol}.0, {self.baudrate} bit/s, "
            f"{self.method.value} of {self.read_length} B + sync write of {self.write_length} B\n"
            f"  {self.tx_bytes} B out + {self.rx_bytes} B back = "
            f"{self.tx_bytes + self.rx_bytes} B x {BITS_PER_BYTE} bit = "
            f"{self.wire_time * us:.0f} µs"
            f", return delays {self.return_delay * us:.0f} µs\n"
            f"  cycle {self.cycle_time * us:.0f} µs -> at most {self.max_rate:.0f} Hz"
        )


def cycle_budget(
    *,
    servos: int,
    read_length: int,
    write_length: int,
    baudrate: int,
    protocol: int = 2,
    method: ReadMethod = ReadMethod.SYNC_READ,
    return_delay_time: int = 0,
) -> CycleBudget:
    """Wire budget of one cycle on a bus of identical servos.

    Args:
        servos: servos read and written per cycle.
        read_length: bytes read from each servo.
        write_length: bytes written to each servo (4 for a 2.0 goal position).
        baudrate: [bit/s].
        protocol: 1 or 2.
        method: how the servos are read.
        return_delay_time: the Return Delay Time register value (2 µs units).
    """
    return budget_for_lengths(
        lengths=[read_length] * servos,
        write_length=write_length,
        baudrate=baudrate,
        protocol=protocol,
        method=method,
        return_delay_time=return_delay_time,
    )


def budget_for_lengths(
    *,
    lengths: Sequence[int],
    write_length: int,
    baudrate: int,
    protocol: int,
    method: ReadMethod,
    return_delay_time: int = 0,
) -> CycleBudget:
    """Like :func:`cycle_budget`, with a read length per servo (bulk reads of mixed models)."""
    tx_read, rx, delays = read_bytes(method, protocol, lengths)
    tx = tx_read + write_bytes(protocol, len(lengths), write_length)
    bt = byte_time(baudrate)
    transactions = len(lengths) if method is ReadMethod.READ_EACH else 1
    return CycleBudget(
        baudrate=baudrate,
        protocol=protocol,
        servos=len(lengths),
        method=method,
        read_length=max(lengths, default=0),
        write_length=write_length,
        tx_bytes=tx,
        rx_bytes=rx,
        return_delay=delays * return_delay_time * RETURN_DELAY_UNIT,
        wire_time=(tx + rx) * bt,
        transactions=transactions,
    )


def choose_read_method(
    models: Sequence[ModelSpec], *, fast_ok: bool = True, read: ReadSet | None = None
) -> ReadMethod:
    """The read the backend uses for a bus of these models.

    Protocol 2.0: a fast sync read when every model has it (and ``fast_ok``: the
    firmware is new enough), else a sync read; bulk read when the servos need
    different spans. Protocol 1.0: bulk read when every model has it (MX), else
    one read per servo (AX).
    """
    if not models:
        return ReadMethod.SYNC_READ
    if models[0].protocol == 1:
        return (
            ReadMethod.BULK_READ if all(m.has_bulk_read for m in models) else ReadMethod.READ_EACH
        )
    spans = {m.span(cycle_registers(m, read)) for m in models}
    fast = fast_ok and all(m.has_fast_sync_read for m in models)
    if len(spans) == 1:
        return ReadMethod.FAST_SYNC_READ if fast else ReadMethod.SYNC_READ
    return ReadMethod.FAST_BULK_READ if fast else ReadMethod.BULK_READ


def bus_budget(
    bus: BusSpec,
    servos: Sequence[ServoSpec],
    *,
    return_delay_time: int = 0,
    fast_ok: bool = True,
    read: ReadSet | str | None = None,
) -> CycleBudget:
    """Budget of the cycle the Dynamixel backend runs for this bus and these servos.

    Shadow servos are read (their position is checked) and written like any other.
    ``read`` is the cycle's read set or its name (``None``: the protocol's default).

    Raises:
        KeyError: a servo names an unknown model.
        ValueError: the servos' protocol differs from the bus's.
    """
    models = [model(s.model) for s in servos]
    for s, m in zip(servos, models, strict=True):
        if m.protocol != bus.protocol:
            raise ValueError(
                f"servo {s.id} ({m.name}) speaks protocol {m.protocol}.0 "
                f"but bus {bus.port} is protocol {bus.protocol}.0"
            )
    read_set = resolve(read, bus.protocol)
    method = choose_read_method(models, fast_ok=fast_ok, read=read_set)
    lengths = [m.span(cycle_registers(m, read_set))[1] for m in models]
    write_length = 4 if bus.protocol == 2 else 2
    return budget_for_lengths(
        lengths=lengths,
        write_length=write_length,
        baudrate=bus.baudrate,
        protocol=bus.protocol,
        method=method,
        return_delay_time=return_delay_time,
    )


def max_cycle_rate(
    bus: BusSpec,
    servos: Sequence[ServoSpec],
    *,
    return_delay_time: int = 0,
    read: ReadSet | str | None = None,
) -> float:
    """Highest cycle rate [Hz] this bus can carry for these servos (wire limit).

    The runtime compares its configured rate against this; real rates are lower
    by the host turnaround (USB latency) of each round trip.
    """
    if not servos:
        return float("inf")
    return bus_budget(bus, servos, return_delay_time=return_delay_time, read=read).max_rate


N = RegisterName


class ReadSet(StrEnum):
    """The readings a cycle takes from every servo (the config's ``read`` of a bus)."""

    POSITION = "position"
    POSITION_VELOCITY = "position+velocity"
    FULL = "position+velocity+effort"

    @property
    def velocity(self) -> bool:
        """Whether the set reads velocity."""
        return self is not ReadSet.POSITION

    @property
    def effort(self) -> bool:
        """Whether the set reads effort (current or load)."""
        return self is ReadSet.FULL


def default_read_set(protocol: int) -> ReadSet:
    """The read set a bus of ``protocol`` uses when the config names none (see above)."""
    return ReadSet.POSITION if protocol == 1 else ReadSet.FULL


def resolve(read: ReadSet | str | None, protocol: int) -> ReadSet:
    """``read`` as a :class:`ReadSet` (``None``: the protocol's default).

    Raises:
        ValueError: an unknown name; the message lists the valid ones.
    """
    if read is None:
        return default_read_set(protocol)
    try:
        return ReadSet(read)
    except ValueError:
        valid = ", ".join(repr(r.value) for r in ReadSet)
        raise ValueError(f"unknown read set {read!r}; valid: {valid}") from None


def cycle_registers(spec: ModelSpec, read: ReadSet | None = None) -> tuple[RegisterName, ...]:
    """Registers a cycle reads from a servo of this model, in address order.

    Both protocols keep effort, velocity and position next to each other (in that
    order on 2.0, the reverse on 1.0), so each set is one contiguous span.
    """
    read = read or default_read_set(spec.protocol)
    names = [N.PRESENT_POSITION]
    if read.velocity:
        names.append(spec.velocity_register)
    if read.effort:
        names.append(spec.effort_register)
    return tuple(sorted(names, key=lambda n: spec.register(n).address))
