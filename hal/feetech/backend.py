"""``FeetechBackend``: the ``Backend`` protocol on a real (or virtual) Feetech STS/SCS bus.

::

    async with FeetechBackend(BusSpec("/dev/ttyACM0", family="feetech"), servos) as arm:
        state = await arm.read()              # JointState in rad, rad/s, % load, °C
        await arm.set_torque(True)            # goal = present first: no jump
        await arm.write({"shoulder_pan": 0.3})

Bus I/O runs on the engine's one bus thread (:mod:`hilbot.hal.bus.worker`), never on
the event loop, and every call awaits it under a deadline (:mod:`hilbot.hal.bus.backend`:
the lifecycle, goal queueing and cancellation rules are the Dynamixel backend's). Each cycle is one
SYNC READ of the state block (one READ per servo on SCS, which has no sync read) and
one SYNC WRITE of Goal Position; the goal packet is encoded by the caller and queued
without waiting, and a failed write is raised by the next call.

Pipelining (``pipeline=True``, off by default): while goals stream (a ``write`` since the
last ``read``), ``read()`` first queues the next cycle's read and then returns the state
of the read it queued one call earlier, so the bus thread goes from one transaction to
the next without waiting for the event loop. Bus order stays read, write, read, write;
the state is one cycle older, which the safety layer does not depend on (it bounds each
command by the limits and the previous command, as for the Dynamixel backend). A read
with no write since the previous one, and any other call, read fresh.

Hardware errors: every reply's ERROR byte is the servo's status. It is reported per
joint in ``JointState.hardware_errors`` (the runtime disarms on overload, overheating,
the angle sensor or over-current, as for Dynamixel), and ``set_torque(True)`` refuses
a servo that reported one (:class:`~hilbot.hal.errors.HardwareFault`) until
:meth:`reboot` cleared it.

No Bus Watchdog: Feetech firmware has no dead-man of its own, so a servo keeps its
last goal with torque on if the host dies. What stands in for it is the host's:
the runtime's target watchdog (``safety.watchdog_timeout``) holds the arm when targets
stop, and shutdown, a crash or a bus fault turn torque off; a hung or killed process
turns nothing off. ``safety.bus_watchdog`` must therefore be ``null`` on Feetech buses
(there is nothing to arm); see docs/hardware.md for the risk and the torque limit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from hilbot.hal.backend import JointState
from hilbot.hal.bus.backend import BackendState, BusBackend
from hilbot.hal.errors import CommandError
from hilbot.hal.feetech.bus import DEFAULT_MARGIN_MS, FeetechBus
from hilbot.hal.feetech.session import FeetechSession, ServoInfo
from hilbot.hal.mapping import BusSpec, ServoSpec

__all__ = ["BackendState", "FeetechBackend"]


class FeetechBackend(BusBackend):
    """The joints of one Feetech bus.

    Args:
        bus: port and baud rate (``family`` should be ``"feetech"``).
        servos: every servo on the bus (shadows included).
        torque_off_on_exit: turn torque off when the context is left.
        retries: extra attempts after a timeout or a corrupt reply.
        margin_ms: reply deadline slack beyond wire time [ms].
        io_timeout: deadline of each call on the bus thread [s].
        joint_limits: joint limits the safety layer enforces, checked against each
            servo's Min/Max Angle Limit at start-up.
        clock: timestamp source of the states.
        logger: logger (default: this module's).
        pipeline: while goals stream, ``read()`` queues the next read before returning
            the one queued a call earlier (see the module docstring). ``"auto"``, which
            the Dynamixel backend decides per cycle, is off here: the loop limits it.
    """

    def __init__(
        self,
        bus: BusSpec,
        servos: Sequence[ServoSpec],
        *,
        torque_off_on_exit: bool = True,
        retries: int = 1,
        margin_ms: float = DEFAULT_MARGIN_MS,
        io_timeout: float = 2.0,
        joint_limits: Mapping[str, tuple[float, float]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger | None = None,
        pipeline: bool | str = False,
    ) -> None:
        if not servos:
            raise ValueError("a Feetech backend needs at least one servo")
        log = logger or logging.getLogger(__name__)
        self._bus = FeetechBus(bus.port, bus.baudrate, retries=retries, margin_ms=margin_ms)
        self._session = FeetechSession(
            self._bus, servos, joint_limits=joint_limits, clock=clock, log=log
        )
        self._ids: dict[str, list[int]] = {s.joint: [] for s in servos}  # shadows included
        for s in servos:
            self._ids[s.joint].append(s.id)
        self._init_bus(
            bus,
            self._bus,
            io_timeout=io_timeout,
            torque_off_on_exit=torque_off_on_exit,
            pipeline=pipeline is True,
            log=log,
        )

    # --- Backend protocol -------------------------------------------------------------

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints this backend drives, in ``JointState`` order."""
        return self._session.names

    @property
    def infos(self) -> tuple[ServoInfo, ...]:
        """What start-up found on each servo."""
        return self._session.infos

    async def write(self, positions: Mapping[str, float]) -> None:
        """Queue one sync write of Goal Position for ``positions`` [rad or m].

        Raises:
            CommandError: an unknown joint, or a position outside a servo's range (nothing
                is sent then).
        """
        self._require_open()
        self._raise_pending()
        for joint in positions:
            if joint not in self._ids:
                raise CommandError(
                    f"unknown joint {joint!r}; known: {', '.join(self.joint_names)}", joint=joint
                )
        await self._queue_goal(self._session.goal_packet(positions))

    async def set_torque(self, enabled: bool, joints: Iterable[str] | None = None) -> None:
        """Enable or disable torque of ``joints`` (default all), shadows included.

        Raises:
            HardwareFault: enabling a servo that reported a hardware error.
            TorqueNotConfirmed: disabling, a servo did not confirm torque off.
        """
        self._require_open()
        ids = self._servo_ids(joints)
        await self._call("set_torque", self._session.set_torque, ids, enabled)

    async def enable_holding(self, positions: Mapping[str, float]) -> None:
        """Enable torque on every servo with ``positions`` [rad or m] as goal, read nothing.

        Like ``set_torque(True)``, but the goal is the caller's verified pose instead of a
        fresh Present Position read (one reading is never trusted for a goal).

        Raises:
            CommandError: an unknown joint or a position outside a servo's range.
            HardwareFault: a servo that reported a hardware error.
        """
        self._require_open()
        wire = self._session.goal_packet(positions)  # CommandError before anything is sent
        ids = self._servo_ids(None)
        await self._call("set_torque", self._session.set_torque, ids, True, wire)

    async def reboot(self, joints: Iterable[str]) -> None:
        """Restart the servos of ``joints``: clears a latched error; torque comes back off."""
        self._require_open()
        ids = self._servo_ids(joints)
        await self._call("reboot", self._session.reboot, ids, timeout=self.io_timeout + 1.0)

    # --- helpers ------------------------------------------------------------------------

    def _servo_ids(self, joints: Iterable[str] | None) -> list[int]:
        if joints is None:
            return list(self._session.ids)
        out: list[int] = []
        for joint in joints:
            if joint not in self._ids:
                raise CommandError(
                    f"unknown joint {joint!r}; known: {', '.join(self.joint_names)}", joint=joint
                )
            out.extend(self._ids[joint])
        return out

    # --- the session on the bus thread ------------------------------------------------------

    thread_prefix = "feetech"

    def _open_session(self) -> None:
        self._session.open()

    def _read_state(self) -> JointState:
        return self._session.read_state()

    def _close_session(self, torque_off: bool) -> None:
        self._session.close(torque_off)
