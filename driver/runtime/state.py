"""Values the runtime hands out: commands, state snapshots, per-cycle records, faults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot._compat import StrEnum
from hilbot.driver.runtime.safety import ClampEvent, ClampKind, Mode
from hilbot.driver.runtime.stats import LoopStats
from hilbot.hal.backend import JointState


class Command(StrEnum):
    """Lifecycle commands accepted by ``Runtime.command`` (and the MQTT ``cmd`` topic)."""

    ENABLE = "enable"  # torque on, goal = present; arms
    DISABLE = "disable"  # torque off; disarms
    ESTOP = "estop"  # latch: hold or torque off per config, until reset
    RESET = "reset"  # clear an e-stop or a fault; back to disarmed
    HOME = "home"  # move to the config's home pose (armed only)
    REBOOT = "reboot"  # reboot the servos with a latched hardware error (not while armed)


class FaultKind(StrEnum):
    """Where a fault came from."""

    HARDWARE = "hardware"  # a servo's hardware-error status (overload, overheating, ...)
    BUS_WATCHDOG = "bus_watchdog"  # a servo's Bus Watchdog tripped: it stopped, ignores goals
    BUS = "bus"  # reads or writes failing
    LIMIT = "limit"  # a goal a servo's own limit register refuses (Data Limit Error)
    IK = "ik"  # a target the solver rejected
    GLITCH = "glitch"  # a servo's readings repeatedly moved faster than physics allows
    INTERNAL = "internal"  # a bug: the loop caught an unexpected exception


class Fault(NamedTuple):
    """One reported fault."""

    time: float  # [s] on the runtime's clock
    kind: FaultKind
    joint: str | None
    detail: str


@dataclass(frozen=True, slots=True)
class RuntimeState:
    """A frozen snapshot of the runtime, safe to keep and to serialise.

    Attributes:
        mode: disarmed, armed, estopped or faulted.
        joints: the last joint state read (``None`` before the first read).
        command: the last command per joint [rad or m] (the hold pose while not armed).
        poses: per chain, the 4 x 4 pose of its target link in its source link,
            from the measured joint positions.
        faults: active faults (hardware errors still set, the bus failing).
        fault_log: recent faults, oldest first.
        clamps: recent clamp events, oldest first.
        clamp_counts: clamp events since start, per kind.
        watchdog_tripped: the target stream is stale and the robot holds.
        homing: a ``home`` command is moving the robot.
        stats: loop timing and error counts.
        glitches: per joint, the readings refused as glitches since start (moved faster
            than the joint can); joints with none are left out.
        last_stop: the last controlled stop that came to rest (time, distance, bounds).
        velocity: the commanded velocity per joint [rad/s or m/s] (the motion layer's).
    """

    mode: Mode
    joints: JointState | None
    command: dict[str, float]
    poses: dict[str, NDArray[np.float64]]
    faults: tuple[Fault, ...]
    fault_log: tuple[Fault, ...]
    clamps: tuple[ClampEvent, ...]
    clamp_counts: dict[ClampKind, int]
    watchdog_tripped: bool
    homing: bool
    stats: LoopStats
    glitches: dict[str, int] = field(default_factory=dict)
    last_stop: Any = None
    velocity: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class CycleRecord:
    """What happened in one cycle, handed to cycle listeners.

    One instance is reused every cycle: a listener must copy what it keeps
    (arrays included) before it returns.

    Attributes:
        cycle: cycle number, from 1.
        deadline: the tick's deadline [s].
        woke: when the cycle started [s]; ``woke - deadline`` is its lateness.
        mode: the mode during the cycle.
        state: the joint state read this cycle (``None`` when the read failed).
        desired: (n,) what the targets and IK asked for.
        command: (n,) what the safety layer let through (written when armed).
        written: whether ``command`` was written to the bus.
        targets: per slot (chain name or ``"joints"``), the target in use, or ``None``.
        ik: per chain, the ``Solution`` or the IK error of this cycle's solve (absent: no solve).
        clamps: the clamp events of this cycle.
        read_time: [s] in ``backend.read``.
        ik_time: [s] in IK solvers.
        write_time: [s] in ``backend.write``.
        cycle_time: [s] of the whole cycle.
    """

    cycle: int = 0
    deadline: float = 0.0
    woke: float = 0.0
    mode: Mode = Mode.DISARMED
    state: JointState | None = None
    desired: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    command: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    written: bool = False
    targets: dict[str, Any] = field(default_factory=dict)
    ik: dict[str, Any] = field(default_factory=dict)
    clamps: tuple[ClampEvent, ...] = ()
    read_time: float = 0.0
    ik_time: float = 0.0
    write_time: float = 0.0
    cycle_time: float = 0.0
