"""The ``Backend`` protocol and the values that cross the HAL boundary.

Everything above the HAL speaks joint names and SI units (rad or m, rad/s or
m/s, A, °C). Ticks, offsets, directions, gear ratios and control-table
addresses never leave ``hilbot.hal``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from hilbot._compat import Self, StrEnum


class HardwareErrorFlags(enum.IntFlag):
    """Decoded hardware-error status, common to both Dynamixel protocols.

    The bit values are those of Protocol 2.0's Hardware Error Status register
    (address 70 on X series, https://emanual.robotis.com/docs/en/dxl/x/xm430-w350/#hardware-error-status);
    Protocol 1.0 error bits are translated to these by the codec.
    """

    NONE = 0
    INPUT_VOLTAGE = 1 << 0
    OVERHEATING = 1 << 2
    MOTOR_ENCODER = 1 << 3
    ELECTRICAL_SHOCK = 1 << 4
    OVERLOAD = 1 << 5

    def describe(self) -> str:
        """Human-readable list of the set flags, e.g. ``"overload, overheating"``."""
        names = [
            str(f.name).lower().replace("_", " ") for f in HardwareErrorFlags if f and f in self
        ]
        return ", ".join(names) if names else "none"


class EffortUnit(StrEnum):
    """What a joint's effort reading means."""

    AMPERE = "A"  # present current, on models with current sensing
    PERCENT = "%"  # present load in % of max torque, on models without (AX, MX-1.0, XL430)


@dataclass(slots=True)
class BusCounters:
    """Running totals of bus activity since the backend was opened.

    ``crc_errors`` counts every corrupt reply: a bad CRC or checksum, or a well-formed
    packet of the wrong shape (too short, another id). ``watchdog_trips`` counts the
    servos found with a tripped Bus Watchdog (each trip once). ``data_limit_errors``
    counts goals outside a servo's own limit registers: refused by the backend before
    they went out, or answered with Data Limit Error (Angle Limit on Protocol 1.0); each
    is also raised as ``DataLimitError`` (and counted in ``servo_errors`` when a servo
    answered it).
    """

    transactions: int = 0
    timeouts: int = 0
    crc_errors: int = 0
    retries: int = 0
    servo_errors: int = 0
    watchdog_trips: int = 0
    data_limit_errors: int = 0

    def copy(self) -> BusCounters:
        """Return a snapshot that later bus activity does not change."""
        return BusCounters(
            self.transactions,
            self.timeouts,
            self.crc_errors,
            self.retries,
            self.servo_errors,
            self.watchdog_trips,
            self.data_limit_errors,
        )


@dataclass(frozen=True, slots=True)
class JointState:
    """One read of every joint a backend drives, in SI units.

    Arrays are in ``names`` order. ``timestamp`` is ``time.monotonic()`` (or the
    backend's injected clock) when the read completed. ``bus_watchdog_tripped`` names
    the joints whose servo (or a shadow) reports a tripped Bus Watchdog: it stopped by
    itself and refuses goal positions until the watchdog is cleared (see
    ``DynamixelBackend.arm_watchdog``); backends without one leave it empty.
    """

    names: tuple[str, ...]
    position: NDArray[np.float64]  # (n,) in [rad] or [m] for prismatic joints
    velocity: NDArray[np.float64]  # (n,) in [rad/s] or [m/s]
    effort: NDArray[np.float64]  # (n,) in the joint's effort_unit
    temperature: NDArray[np.float64]  # (n,) in [°C]
    hardware_errors: tuple[HardwareErrorFlags, ...]  # (n,) decoded per joint
    timestamp: float  # [s], monotonic
    effort_unit: tuple[EffortUnit, ...] = ()
    counters: BusCounters = field(default_factory=BusCounters)
    bus_watchdog_tripped: tuple[str, ...] = ()

    def positions(self) -> dict[str, float]:
        """Return ``{joint name: position}``."""
        return dict(zip(self.names, self.position.tolist(), strict=True))

    def index(self, joint: str) -> int:
        """Return the array index of ``joint``; raises ``KeyError`` naming known joints."""
        try:
            return self.names.index(joint)
        except ValueError:
            raise KeyError(f"unknown joint {joint!r}; known: {', '.join(self.names)}") from None

    @property
    def faults(self) -> dict[str, HardwareErrorFlags]:
        """Joints whose hardware-error status is set."""
        return {n: f for n, f in zip(self.names, self.hardware_errors, strict=True) if f}


@runtime_checkable
class Backend(Protocol):
    """A set of joints that can be read and commanded: a servo bus or a simulator.

    Used as an async context manager: entering connects and verifies the
    hardware (and leaves torque as it found it, with goal = present), leaving
    disables torque where the config says so and closes. Not reentrant.
    """

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints this backend drives, in ``JointState`` order."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def read(self) -> JointState:
        """Read position, velocity, effort, temperature and error status of every joint."""
        ...

    async def write(self, positions: Mapping[str, float]) -> None:
        """Command goal positions [rad or m] for some or all joints."""
        ...

    async def set_torque(self, enabled: bool, joints: Iterable[str] | None = None) -> None:
        """Enable or disable torque, for ``joints`` or for all joints."""
        ...

    async def reboot(self, joints: Iterable[str]) -> None:
        """Reboot the servos of ``joints`` (clears a latched hardware error)."""
        ...

    async def close(self) -> None:
        """Release the bus; safe to call twice."""
        ...


async def enable_holding(backend: Backend, positions: Mapping[str, float]) -> None:
    """Turn torque on with ``positions`` as every joint's goal, and no fresh read.

    A backend whose torque-on copies present into goal (the bus backends, so that a
    plain ``set_torque(True)`` never jumps to a stale goal) would otherwise write one
    unchecked reading as the goal. The runtime verifies the entry pose (reads that agree)
    and hands it here, so the servos hold exactly that. Backends that have their own
    ``enable_holding(positions)`` use it; the others get the goal written, then torque.
    """
    method = getattr(backend, "enable_holding", None)
    if method is not None:
        await method(positions)
        return
    await backend.write(positions)
    await backend.set_torque(True)


BitT = TypeVar("BitT", bound=int)


def flags_from_bits(error: int, table: Mapping[BitT, HardwareErrorFlags]) -> HardwareErrorFlags:
    """The flags the set bits of ``error`` stand for (bits not in ``table`` dropped)."""
    out = HardwareErrorFlags.NONE
    for bit, flag in table.items():
        if error & bit:
            out |= flag
    return out


def bits_from_flags(flags: HardwareErrorFlags, table: Mapping[BitT, HardwareErrorFlags]) -> int:
    """The ERROR bits that stand for ``flags`` (flags with no bit in ``table`` dropped)."""
    out = 0
    for bit, flag in table.items():
        if flags & flag:
            out |= int(bit)
    return out
