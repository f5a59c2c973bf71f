"""``DynamixelBackend``: the ``Backend`` protocol on a real (or virtual) Dynamixel bus.

::

    async with DynamixelBackend(BusSpec("/dev/ttyUSB0"), servos) as arm:
        state = await arm.read()              # JointState in rad, rad/s, A or %, °C
        await arm.set_torque(True)            # goal = present first: no jump
        await arm.write({"shoulder": 0.3})

Bus I/O runs on one dedicated worker thread (never on the event loop); every
call awaits it under a deadline. Start-up (``__aenter__``) pings every servo,
checks models, operating mode and return delay time, and copies present into
goal position; torque is never enabled unless asked. Leaving the context turns
torque off when ``torque_off_on_exit`` (the default).

Pipelining (``pipeline="auto"``, the default; ``True`` always, ``False`` never): a
cycle is read state, compute, write goals, and without pipelining the bus idles while
the host works (the hop to the bus thread, decoding, the hop back, the loop's own work:
0.3-0.5 ms a cycle, a fifth of a 6-servo cycle at 1 Mbps). With it, while goals are streamed,
``read()`` first queues the next cycle's read and then returns the state of the read
it queued one call earlier, so the bus thread goes from one transaction to the next
without waiting for the loop. Bus order stays read, write, read, write; every write
still goes out once, in order. What changes is the age of the state: it was read
before the previous cycle's goals went out, one cycle older than without
pipelining. The safety layer is unaffected: it bounds each command by the joint
limits and by the previous *command* (max delta, velocity), never by a measured
position, so no command can leave those bounds. Where measured positions matter,
they are fresh: a ``read()`` with no write since the one before (a disarmed loop
following the hand, the read that computes the entry command when enabling) reads
at once, and any other call (``set_torque``, ``reboot``, the watchdog) drops a read
queued before it, so the first ``read()`` after it reads after it. A servo's hardware
error reaches the caller one cycle later than without pipelining (the servo's own
shutdown does not wait for it). The bus thread (:mod:`hilbot.hal.bus.worker`)
sends a goal write queued behind the read on the wire as soon as that read's reply is
in, before decoding it; goal packets are encoded by the caller.

A failed read raises (:class:`~hilbot.hal.errors.CommTimeout`,
:class:`~hilbot.hal.errors.CrcError`) after bounded retries, counted in
``JointState.counters``; no position is ever invented. A servo's latched
hardware error is reported in ``JointState.hardware_errors`` (and blocks
``set_torque(True)`` with :class:`~hilbot.hal.errors.HardwareFault`) until
:meth:`DynamixelBackend.reboot` clears it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal

from hilbot.hal.backend import JointState
from hilbot.hal.bus.backend import AUTO, BackendState, BusBackend
from hilbot.hal.bus.port import DEFAULT_MARGIN_MS
from hilbot.hal.dynamixel.bus import DynamixelBus
from hilbot.hal.dynamixel.layout import BusLayout, ServoSlot
from hilbot.hal.dynamixel.session import BusSession
from hilbot.hal.dynamixel.startup import ServoReport
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.dynamixel.timing import CycleBudget, ReadMethod, ReadSet
from hilbot.hal.errors import CommandError, DataLimitError
from hilbot.hal.mapping import BusSpec, ServoSpec

N = RegisterName
__all__ = ["AUTO", "WATCHDOG_UNIT", "BackendState", "DynamixelBackend"]

#: Bus Watchdog register unit [s] (X series, address 98).
WATCHDOG_UNIT = 0.02


#: One servo's goal encoding: slot, center tick, offset, joint units per tick (signed),
#: the model's tick range, the servo's own limit registers (or +-inf), the encoder.
_GoalPlan = tuple[ServoSlot, int, float, float, int, int, float, float, Callable[[int], bytes]]


class DynamixelBackend(BusBackend):
    """Joints driven by Dynamixel servos on one serial bus.

    Args:
        bus: port, baud rate and protocol.
        servos: the servos on it (primaries and shadows).
        torque_off_on_exit: disable torque of every servo when the context exits.
        retries: extra attempts for a timed-out or corrupt transaction.
        margin_ms: reply deadline slack beyond the wire time [ms].
        latency_ms: USB adapter latency [ms]; read from sysfs (FTDI) when ``None``.
        io_timeout: deadline [s] for any one backend call to finish on the worker.
        temperature_every: read temperature every this many ``read()`` calls (it is not
            in the cycle's contiguous span).
        fast_read: use Fast Sync Read; ``None`` decides from models and firmware.
        read_method: force the cycle's read instruction (e.g. ``BULK_READ``); by default
            it is chosen from the models: every supported Protocol 2.0 model keeps the
            cycle's registers at the same addresses, so a (fast) sync read covers mixed
            chains, and a bulk read is needed only when the spans differ.
        clock: monotonic clock for timestamps.
        logger: where warnings go.
        read: what each cycle reads from every servo (a :class:`ReadSet` or its name:
            ``"position"``, ``"position+velocity"``, ``"position+velocity+effort"``);
            ``None`` is the protocol's default (position only on 1.0, all three on 2.0;
            see :mod:`hilbot.hal.dynamixel.timing`). Readings left out are NaN.
        joint_limits: ``{joint: (lower, upper)}`` [rad or m] the caller's safety layer
            enforces. Start-up reads each servo's own limit registers and refuses limits
            that, through offset, direction and gear ratio, pass them
            (:class:`~hilbot.hal.errors.ServoLimitError`); whatever is given, a goal
            outside them is refused by ``write()`` (see :mod:`hilbot.hal.dynamixel.startup`).
        pipeline: while goals are streamed (a ``write()`` between ``read()`` calls),
            queue the next cycle's read before this cycle's write, and return the
            state that read got one call later (see "Pipelining" above). ``"auto"``
            does so only while the bus is the bottleneck: it starts when a cycle's
            write has not gone out by the next ``read()`` and stops when a queued read
            finished before it was asked for. The default; ``False`` reads at every
            ``read()`` (the state is never a cycle old, the bus idles while the loop
            works).

    Raises:
        ConfigError: the servo list cannot work (see :class:`BusLayout`).
    """

    def __init__(
        self,
        bus: BusSpec,
        servos: Sequence[ServoSpec],
        *,
        torque_off_on_exit: bool = True,
        retries: int = 1,
        margin_ms: float = DEFAULT_MARGIN_MS,
        latency_ms: float | None = None,
        io_timeout: float = 2.0,
        temperature_every: int = 25,
        fast_read: bool | None = None,
        read_method: ReadMethod | None = None,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger | None = None,
        pipeline: bool | Literal["auto"] = AUTO,
        read: ReadSet | str | None = None,
        joint_limits: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        if temperature_every < 1:
            raise ValueError(f"temperature_every must be >= 1, got {temperature_every!r}")
        self.layout = BusLayout(bus, servos, read)
        self.temperature_every = temperature_every
        self._clock = clock
        log = logger or logging.getLogger(__name__)
        self._bus = DynamixelBus(
            bus.port,
            bus.baudrate,
            bus.protocol,
            retries=retries,
            margin_ms=margin_ms,
            latency_ms=latency_ms,
        )
        self._session = BusSession(
            self.layout,
            self._bus,
            temperature_every=temperature_every,
            fast_read=fast_read,
            read_method=read_method,
            clock=clock,
            log=log,
            joint_limits=joint_limits,
        )
        self._init_bus(
            bus,
            self._bus,
            io_timeout=io_timeout,
            torque_off_on_exit=torque_off_on_exit,
            pipeline=pipeline,
            log=log,
        )
        self._names = self.layout.joint_names
        self._goal = self.layout.register(N.GOAL_POSITION)
        self._plans: dict[str, tuple[_GoalPlan, ...]] | None = None  # built at first write
        self._plans_version = -1  # the session's limits_version the plans were built from

    # --- Backend protocol -------------------------------------------------------------

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints this backend drives, in ``JointState`` order."""
        return self._names

    @property
    def method(self) -> ReadMethod:
        """The cycle's read instruction (chosen at start-up)."""
        return self._session.method

    @property
    def reports(self) -> tuple[ServoReport, ...]:
        """What start-up found on each servo."""
        return self._session.reports

    async def write(self, positions: Mapping[str, float]) -> None:
        """Sync-write goal positions [rad or m] of some or all joints (and their shadows).

        A sync write has no reply, so the packet is queued on the bus thread and this
        returns without waiting for it: bus order is kept (the next call runs after it),
        and a failure to send it (a port error) is raised by the next call.

        Raises:
            CommandError: an unknown joint, or a position outside a servo's range; nothing
                is written then.
            DataLimitError: a goal outside a servo's own limit registers (read at
                start-up and at each enable; the servo would drop it unseen): counted in
                ``counters.data_limit_errors``, nothing is written.
        """
        self._require_open()
        ticks = self._goal_ticks(positions)
        goal = self._goal
        await self._queue_goal(
            self._bus.sync_write_packet(goal.address, goal.size, ticks) if ticks else None
        )

    async def set_torque(self, enabled: bool, joints: Iterable[str] | None = None) -> None:
        """Enable or disable torque of ``joints`` (default all), shadows included.

        Enabling first copies present into goal position, so the joint holds where it
        is instead of jumping to a stale goal.

        Raises:
            HardwareFault: enabling a servo whose hardware-error status is set.
            DataLimitError: enabling a servo that stands outside its own position limits.
            TorqueNotConfirmed: disabling, a servo did not answer the read-back or still
                has torque on; the error lists which servos are off and which are not.

        Enabling re-reads each servo's limit registers (torque off, another tool may have
        changed them): later goals are checked against what the servo holds now.
        """
        self._require_open()
        slots = self.layout.servos_of(self._joints(joints))
        await self._call("set_torque", self._session.set_torque, slots, enabled)

    async def enable_holding(self, positions: Mapping[str, float]) -> None:
        """Enable torque on every servo with ``positions`` [rad or m] as goal, read nothing.

        Like ``set_torque(True)``, but the goal is the caller's verified pose instead of a
        fresh Present Position read (one reading is never trusted for a goal).

        Raises:
            CommandError, DataLimitError: a position outside a servo's range or its own
                limit registers; nothing is written.
            HardwareFault: a servo whose hardware-error status is set.
        """
        self._require_open()
        slots = self.layout.servos_of(self._joints(None))
        # encoded on the bus thread after the limit registers were re-read (see set_torque)
        await self._call(
            "set_torque", self._session.set_torque, slots, True, lambda: self._goal_ticks(positions)
        )

    async def reboot(self, joints: Iterable[str]) -> None:
        """Reboot the servos of ``joints``: clears latched hardware errors; torque comes back off.

        Raises:
            CommandError: the bus speaks Protocol 1.0, which has no reboot instruction;
                nothing is sent.
            CommError: a servo does not come back.
        """
        self._require_open()
        names = self._joints(joints)
        if self.spec.protocol == 1:
            raise CommandError(
                "Protocol 1.0 has no reboot instruction: power the servos off and on to "
                "clear a latched hardware error",
                joint=names[0] if names else "",
            )
        slots = self.layout.servos_of(names)
        await self._call("reboot", self._session.reboot, slots, timeout=self.io_timeout + 3.0)

    # --- extras -------------------------------------------------------------------------

    async def arm_watchdog(self, timeout: float) -> None:
        """Arm every servo's Bus Watchdog: it stops if no instruction arrives for ``timeout`` [s].

        The runtime's dead-man: if this process hangs, the servos stop on their own.
        Servos without a Bus Watchdog (Protocol 1.0 models, X series before firmware 38)
        are skipped with a warning.
        """
        if not WATCHDOG_UNIT <= timeout <= 127 * WATCHDOG_UNIT:
            raise ValueError(f"watchdog timeout must be in [0.02, 2.54] s, got {timeout!r}")
        await self._set_watchdog(max(1, min(127, round(timeout / WATCHDOG_UNIT))))

    async def disarm_watchdog(self) -> None:
        """Disarm the Bus Watchdog (also clears a tripped watchdog)."""
        await self._set_watchdog(0)

    def budget(self) -> CycleBudget:
        """The wire budget of this backend's cycle."""
        return self._session.budget()

    # --- helpers ---------------------------------------------------------------------------

    async def _set_watchdog(self, value: int) -> None:
        self._require_open()
        slots = list(self._session.watchdog_slots)
        if len(slots) < len(self.layout.slots):
            self._log.warning(
                "%s: some servos have no Bus Watchdog (model or firmware); they are not armed",
                self.spec.port,
            )
        if slots:
            await self._call("watchdog", self._session.set_watchdog, slots, value)

    def _joints(self, joints: Iterable[str] | None) -> list[str]:
        if joints is None:
            return list(self._names)
        out = list(joints)
        for j in out:
            if j not in self.layout.primary:
                raise CommandError(
                    f"unknown joint {j!r}; this bus drives {', '.join(self._names)}", joint=j
                )
        return out

    def _goal_ticks(self, positions: Mapping[str, float]) -> dict[int, bytes]:
        data: dict[int, bytes] = {}
        plans = self._goal_plans()
        for joint, value in positions.items():
            plan = plans.get(joint)
            if plan is None:
                raise CommandError(
                    f"unknown joint {joint!r}; this bus drives {', '.join(self._names)}",
                    joint=joint,
                    value=value,
                )
            for slot, center, offset, per_tick, low, high, goal_low, goal_high, pack in plan:
                # ServoUnits.ticks, inlined: this runs for every servo of every cycle
                position = float(value)
                exact = center + (position - offset) / per_tick
                if not math.isfinite(exact):  # nan, inf, or finite but overflowing
                    slot.units.ticks(position)  # raises the CommandError naming the joint
                tick = round(exact)
                if not low <= tick <= high:
                    slot.units.ticks(position)  # raises the CommandError naming the range
                if not goal_low <= tick <= goal_high:
                    raise self._data_limit(slot.id, joint, tick)
                data[slot.id] = pack(tick)
        return data

    def _goal_plans(self) -> dict[str, tuple[_GoalPlan, ...]]:
        """Per joint, what encoding each of its servos' goals needs (built once open)."""
        if self._plans is None or self._plans_version != self._session.limits_version:
            self._plans_version = self._session.limits_version
            bounds = self._session.goal_bounds
            plans: dict[str, tuple[_GoalPlan, ...]] = {}
            for joint in self._names:
                rows = []
                for slot in (self.layout.primary[joint], *self.layout.shadows[joint]):
                    spec, m = slot.units.spec, slot.model
                    goal_low, goal_high = bounds.get(slot.id, (-math.inf, math.inf))
                    rows.append(
                        (
                            slot,
                            m.center_tick,
                            spec.offset,
                            spec.direction * m.radians_per_tick / spec.gear_ratio,
                            m.position_min,
                            m.position_max,
                            goal_low,
                            goal_high,
                            self._goal.encode,
                        )
                    )
                plans[joint] = tuple(rows)
            self._plans = plans
        return self._plans

    def _data_limit(self, servo_id: int, joint: str, tick: int) -> DataLimitError:
        """Count and describe a goal outside a servo's limit registers."""
        self._bus.counters.data_limit_errors += 1
        limits = self._session.limits[servo_id]
        below = tick < limits.low
        reg = limits.low_register if below else limits.high_register
        value = limits.low if below else limits.high
        return DataLimitError(
            servo_id,
            "SYNC_WRITE",
            0,
            register=reg.name.value,
            address=reg.address,
            value=tick,
            limit=value,
            joint=joint,
        )

    # --- the session on the bus thread ------------------------------------------------------

    thread_prefix = "dxl"

    def _open_session(self) -> None:
        self._session.open()

    def _read_state(self) -> JointState:
        return self._session.read()

    def _close_session(self, torque_off: bool) -> None:
        self._session.close(torque_off)
