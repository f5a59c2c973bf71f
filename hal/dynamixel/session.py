"""The bus thread's side of the Dynamixel backend: start-up, cycles, torque, reboot.

A :class:`BusSession` is confined to the backend's one worker thread: every method
blocks on the bus and none may run on the event loop. It owns the per-servo state
that cycles update (latched hardware errors, last temperatures, tripped Bus Watchdogs).

The Bus Watchdog (X series, address 98) is checked off the cycle's hot path: at
start-up (a trip left by an earlier process) and, while it is armed or tripped, in the
slow read that comes every ``temperature_every`` cycles, where it costs one 1-byte
group read. A tripped servo has stopped by itself and silently ignores the goals of
sync writes, so it must be noticed by reading: the register then reads -1.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from hilbot.hal.backend import HardwareErrorFlags, JointState
from hilbot.hal.dynamixel.bus import DynamixelBus, ServoReply
from hilbot.hal.dynamixel.layout import BusLayout, ServoSlot, temperature
from hilbot.hal.dynamixel.protocol import ALERT_BIT, hardware_flags_from_protocol1
from hilbot.hal.dynamixel.startup import (
    ServoLimits,
    ServoReport,
    check_bus,
    check_joint_range,
    check_torque,
    configure_all,
    hardware_status,
    read_limits,
)
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.dynamixel.timing import CycleBudget, ReadMethod, bus_budget
from hilbot.hal.errors import (
    CommTimeout,
    CrcError,
    DataLimitError,
    HardwareFault,
    ServoError,
    ServoLimitError,
    TorqueNotConfirmed,
)

N = RegisterName


class BusSession:
    """Start-up checks and cycles of one bus, run on the backend's worker thread.

    Args:
        layout: the validated servos.
        bus: the transactions on the port.
        temperature_every: read temperature every this many cycles.
        fast_read: force (or forbid) Fast Sync Read; ``None`` decides from the firmware.
        read_method: force the cycle's read instruction.
        clock: timestamps of ``JointState``.
        log: where warnings go.
        joint_limits: ``{joint: (lower, upper)}`` the safety layer enforces; start-up
            refuses limits that a servo's own position limits would not accept.
    """

    def __init__(
        self,
        layout: BusLayout,
        bus: DynamixelBus,
        *,
        temperature_every: int,
        fast_read: bool | None,
        read_method: ReadMethod | None,
        clock: Callable[[], float],
        log: logging.Logger,
        joint_limits: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        self.layout = layout
        self.joint_limits = dict(joint_limits or {})
        #: Each servo's limit registers, read at start-up (and again at each enable).
        self.limits: dict[int, ServoLimits] = {}
        #: ``(low, high)`` goal ticks per servo id where its firmware enforces them.
        self.goal_bounds: dict[int, tuple[int, int]] = {}
        #: Bumped whenever ``limits`` change: the backend rebuilds its goal plans then.
        self.limits_version = 0
        self.bus = bus
        self.temperature_every = temperature_every
        self._fast_read = fast_read
        self._read_method = read_method
        self._clock = clock
        self._log = log
        self.method = ReadMethod.SYNC_READ
        self.reports: tuple[ServoReport, ...] = ()
        self._cycles = 0
        self._temperatures = dict.fromkeys(layout.ids, float("nan"))
        self._faults = dict.fromkeys(layout.ids, HardwareErrorFlags.NONE)
        self._goal = layout.register(N.GOAL_POSITION)
        self._torque = layout.register(N.TORQUE_ENABLE)
        # (primary id, shadow ids) per joint, and the effort units, in joint order.
        self._groups = tuple(
            (layout.primary[j].id, tuple(s.id for s in layout.shadows[j]))
            for j in layout.joint_names
        )
        self._effort_units = tuple(layout.primary[j].units.effort_unit for j in layout.joint_names)
        self._slots = tuple((s.id, s) for s in layout.slots)
        self._decoders = tuple((d.slot.id, d) for d in layout.decoders)
        self._watchdog_slots = tuple(s for s in layout.slots if s.model.has_bus_watchdog)
        self._watchdog_armed = False
        self._tripped: set[int] = set()  # ids whose Bus Watchdog reads -1
        self._tripped_joints: tuple[str, ...] = ()

    @property
    def watchdog_slots(self) -> tuple[ServoSlot, ...]:
        """The servos with a Bus Watchdog (model and, once open, firmware allow it)."""
        return self._watchdog_slots

    def faults(self, slot: ServoSlot) -> HardwareErrorFlags:
        """The servo's hardware-error status as last read."""
        return self._faults[slot.id]

    def budget(self) -> CycleBudget:
        """The wire budget of this session's cycle."""
        rdt = max((r.return_delay_time for r in self.reports), default=0)
        fast = self.method in (ReadMethod.FAST_SYNC_READ, ReadMethod.FAST_BULK_READ)
        return bus_budget(
            self.layout.bus,
            [s.units.spec for s in self.layout.slots],
            return_delay_time=rdt,
            fast_ok=fast,
            read=self.layout.read_set,
        )

    def write_goals(self, data: Mapping[int, bytes]) -> None:
        """Sync-write encoded goal positions."""
        self.bus.sync_write(self._goal.address, self._goal.size, data)

    def set_watchdog(self, slots: Sequence[ServoSlot], value: int) -> None:
        """Write Bus Watchdog: 0 first (clears a trip), then ``value`` if non-zero; confirm.

        Raises:
            ServoError: a servo's register does not read ``value`` back.
        """
        reg = slots[0].model.register(N.BUS_WATCHDOG)
        self.bus.sync_write(reg.address, reg.size, {s.id: reg.encode(0) for s in slots})
        if value:
            self.bus.sync_write(reg.address, reg.size, {s.id: reg.encode(value) for s in slots})
        # Read back: sync writes have no reply, and a trip left uncleared would make the
        # servo ignore every goal.
        got = self.bus.group_read(self._slow_method(), [(s.id, reg.address, 1) for s in slots])
        for servo_id, reply in got.items():
            found = reg.decode(reply.data)
            if found != value:
                raise ServoError(
                    servo_id, "WRITE", reply.error, f"Bus Watchdog reads {found}, not {value}"
                )
        self._watchdog_armed = value > 0
        self._set_tripped(self._tripped - {s.id for s in slots})

    def open(self) -> None:
        """Open the port, run the start-up checks, choose the read, hold every servo."""
        self.bus.open()
        self.reports = tuple(check_bus(self.bus, self.layout, self._log))
        configure_all(self.bus, self.layout.slots, self._log)  # config's mode, current, profile
        for r in self.reports:
            self._faults[r.id] = r.hardware_errors
        self._check_limits()
        fast_ok = all(
            r.firmware >= self.layout.by_id[r.id].model.fast_read_min_firmware for r in self.reports
        )
        if self._fast_read is not None:
            fast_ok = self._fast_read
        self.method = self._read_method or self.layout.read_method(fast_ok=fast_ok)
        firmware = {r.id: r.firmware for r in self.reports}
        old = [
            s
            for s in self._watchdog_slots
            if firmware.get(s.id, 0) < s.model.bus_watchdog_min_firmware
        ]
        if old:  # the register is not there before that firmware: never arm or read it
            self._log.warning(
                "%s: servo(s) %s: firmware too old for the Bus Watchdog (needs %s); not armed",
                self.layout.bus.port,
                ", ".join(str(s.id) for s in old),
                ", ".join(sorted({str(s.model.bus_watchdog_min_firmware) for s in old})),
            )
            self._watchdog_slots = tuple(s for s in self._watchdog_slots if s not in old)
        if self._watchdog_slots:
            self._read_watchdogs()  # a trip left by an earlier process: the servos ignore goals
        self.hold(self.layout.slots)
        self._log.info(
            "%s: %d servos, %s, %s",
            self.layout.bus.port,
            len(self.layout.slots),
            self.method.value,
            self.budget().describe().splitlines()[-1].strip(),
        )

    def _check_limits(self) -> None:
        """Read every servo's limit registers; refuse limits the servo would not accept."""
        for slot in self.layout.slots:
            limits = read_limits(self.bus, slot)
            check_torque(self.bus, slot, limits)
            joint = self.joint_limits.get(slot.units.spec.joint)
            if joint is not None:
                check_joint_range(self.bus, slot, limits, joint)
            self._keep_limits(limits)

    def _keep_limits(self, limits: ServoLimits) -> None:
        self.limits[limits.id] = limits
        bounds = limits.bounds()
        if bounds is None:
            self.goal_bounds.pop(limits.id, None)
        else:
            self.goal_bounds[limits.id] = bounds
        self.limits_version += 1

    def refresh_limits(self, slots: Sequence[ServoSlot]) -> None:
        """Re-read the limit registers of ``slots`` before torque comes on.

        They are EEPROM, which the firmware locks while torque is on, but with torque
        off another tool (``hilbot servo``, the vendor's wizard) may have changed them
        since start-up. Goals are checked against what the servo holds now: a goal past
        a narrowed register is a ``DataLimitError`` out of ``write`` (a fault), not a
        sync write the firmware drops unseen. A joint range the new register no longer
        covers is logged; start-up would refuse it.

        Raises:
            StartupError: a limit register now leaves no torque (PWM or Current Limit 0).
            CommTimeout, CrcError, ServoError: a read failed.
        """
        for slot in slots:
            limits = read_limits(self.bus, slot)
            if limits == self.limits.get(slot.id):
                continue
            check_torque(self.bus, slot, limits)
            joint = self.joint_limits.get(slot.units.spec.joint)
            if joint is not None:
                try:
                    check_joint_range(self.bus, slot, limits, joint)
                except ServoLimitError as err:
                    self._log.warning(
                        "servo %d: its limit registers changed since start-up: %s; goals "
                        "past the register fault the robot",
                        slot.id,
                        err,
                    )
            self._keep_limits(limits)

    def hold(self, slots: Sequence[ServoSlot], *, strict: bool = False) -> None:
        """Copy present into goal position for ``slots`` (no jump when torque comes on).

        A servo standing outside its own position limits (moved there by hand, torque
        off) would refuse that goal unseen and keep its old one, to which it would jump
        once torque is on. ``strict`` (enabling torque) raises then; otherwise it warns.

        Raises:
            DataLimitError: ``strict`` and a servo's present position is outside its
                limit registers; nothing is written.
        """
        pos = slots[0].position.register
        replies = self.bus.group_read(self.method, [(s.id, pos.address, pos.size) for s in slots])
        ticks = {s.id: pos.decode(replies[s.id].data) for s in slots}
        for slot in slots:
            bounds = self.goal_bounds.get(slot.id)
            tick = ticks[slot.id]
            if bounds is None or bounds[0] <= tick <= bounds[1]:
                continue
            limits = self.limits[slot.id]
            below = tick < bounds[0]
            reg = limits.low_register if below else limits.high_register
            err = DataLimitError(
                slot.id,
                "TORQUE_ENABLE",
                0,
                register=reg.name.value,
                address=reg.address,
                value=tick,
                limit=bounds[0] if below else bounds[1],
                joint=slot.units.spec.joint,
            )
            message = (
                f"{err}; the servo stands outside its own limits and would keep its old "
                "goal: move it inside by hand (torque off) or widen the register"
            )
            if strict:
                self.bus.counters.data_limit_errors += 1
                err.args = (message,)
                raise err
            self._log.warning("servo %d: present position: %s", slot.id, message)
        data = {i: self._goal.encode(t) for i, t in ticks.items()}
        self.bus.sync_write(self._goal.address, self._goal.size, data)

    def read(self) -> JointState:
        """One cycle's group read, converted to a ``JointState``."""
        replies = self.bus.group_read(self.method, self.layout.reads())
        self._cycles += 1
        if (self._cycles - 1) % self.temperature_every == 0:
            self._slow_read()
        self._update_faults(replies)
        return self._state(replies)

    def _slow_read(self) -> None:
        """What is read every ``temperature_every`` cycles: temperatures, Bus Watchdogs.

        A failure here keeps the last values (counted, logged): positions are fresh.
        """
        port = self.layout.bus.port
        try:
            self._read_temperatures()
        except (CommTimeout, CrcError) as exc:
            self._log.warning("%s: temperature read failed: %s", port, exc)
        if self._watchdog_armed or self._tripped:
            try:
                self._read_watchdogs()
            except (CommTimeout, CrcError) as exc:
                self._log.warning("%s: Bus Watchdog read failed: %s", port, exc)

    def _slow_method(self) -> ReadMethod:
        """The cycle's read method, as a sync read: the slow reads use one register.

        Protocol 1.0 has no sync read: its cycle's bulk read (MX) or reads (AX) serve.
        """
        if self.layout.protocol == 1:
            return self.method
        method = ReadMethod.SYNC_READ if self.method is ReadMethod.BULK_READ else self.method
        return ReadMethod.FAST_SYNC_READ if method is ReadMethod.FAST_BULK_READ else method

    def _read_temperatures(self) -> None:
        reg = self.layout.register(N.PRESENT_TEMPERATURE)
        reads = [(i, reg.address, reg.size) for i in self.layout.ids]
        got = self.bus.group_read(self._slow_method(), reads)
        for servo_id, reply in got.items():
            self._temperatures[servo_id] = temperature(reg.decode(reply.data))

    def _read_watchdogs(self) -> None:
        """Read Bus Watchdog (address 98) of every servo that has one; -1 means tripped."""
        slots = self._watchdog_slots
        reg = slots[0].model.register(N.BUS_WATCHDOG)
        reads = [(s.id, reg.address, reg.size) for s in slots]
        got = self.bus.group_read(self._slow_method(), reads)
        tripped = {i for i, reply in got.items() if reg.decode(reply.data) < 0}
        for servo_id in sorted(tripped - self._tripped):
            self.bus.counters.watchdog_trips += 1
            self._log.error(
                "servo %d: its Bus Watchdog tripped (no instruction reached it in time): it "
                "stopped and ignores goal positions until the watchdog is cleared",
                servo_id,
            )
        self._set_tripped(tripped)

    def _set_tripped(self, tripped: set[int]) -> None:
        if tripped == self._tripped:
            return
        self._tripped = tripped
        self._tripped_joints = tuple(
            joint
            for joint, (primary, shadows) in zip(self.layout.joint_names, self._groups, strict=True)
            if primary in tripped or not tripped.isdisjoint(shadows)
        )

    def _update_faults(self, replies: Mapping[int, ServoReply]) -> None:
        faults, protocol1 = self._faults, self.layout.protocol == 1
        for servo_id, slot in self._slots:
            error = replies[servo_id].error
            if protocol1:
                faults[servo_id] = hardware_flags_from_protocol1(error)
            elif error & ALERT_BIT:
                faults[servo_id] = hardware_status(self.bus, slot)
            else:
                faults[servo_id] = HardwareErrorFlags.NONE

    def _state(self, replies: Mapping[int, ServoReply]) -> JointState:
        pos, vel, eff, tmp = [], [], [], []
        temperatures = self._temperatures
        for servo_id, decoder in self._decoders:
            p, v, e = decoder.decode(replies[servo_id].data)
            pos.append(p)
            vel.append(v)
            eff.append(e)
            tmp.append(temperatures[servo_id])
        return JointState(
            names=self.layout.joint_names,
            position=np.array(pos),
            velocity=np.array(vel),
            effort=np.array(eff),
            temperature=np.array(tmp),
            hardware_errors=self._joint_faults(),
            timestamp=self._clock(),
            effort_unit=self._effort_units,
            counters=self.bus.counters.copy(),
            bus_watchdog_tripped=self._tripped_joints,
        )

    def _joint_faults(self) -> tuple[HardwareErrorFlags, ...]:
        """Each joint's hardware-error flags: its primary's, or-ed with its shadows'."""
        faults = self._faults
        out = []
        for joint, group in self._groups:
            flags = faults[joint]
            for shadow in group:
                flags |= faults[shadow]
            out.append(flags)
        return tuple(out)

    def set_torque(
        self,
        slots: Sequence[ServoSlot],
        enabled: bool,
        goal: Callable[[], Mapping[int, bytes]] | None = None,
    ) -> None:
        """Set torque of ``slots`` (holding them first when enabling) and read it back.

        ``goal``: when enabling, gives the encoded goal of each servo to hold (computed
        after the limit registers were re-read); without it, goal := present.

        Raises:
            HardwareFault: enabling a servo whose hardware-error status is set.
            DataLimitError: enabling a servo that stands outside its own position limits.
            ServoError: an enabled servo reads torque off.
            TorqueNotConfirmed: disabling, some servo did not answer or still has torque
                on; it names which servos are off and which are not.
        """
        if not enabled:
            self._torque_off([s.id for s in slots])
            return
        for slot in slots:
            if self._faults[slot.id]:
                raise HardwareFault(slot.id, self._faults[slot.id], "TORQUE_ENABLE")
        self.refresh_limits(slots)
        if goal is None:
            self.hold(slots, strict=True)
        else:
            self.bus.sync_write(self._goal.address, self._goal.size, dict(goal()))
        value = self._torque.encode(1)
        self.bus.sync_write(self._torque.address, self._torque.size, {s.id: value for s in slots})
        # Read back: a sync write has no reply, and torque is worth one round trip to confirm.
        reads = [(s.id, self._torque.address, self._torque.size) for s in slots]
        for servo_id, reply in self.bus.group_read(self.method, reads).items():
            if self._torque.decode(reply.data) != 1:
                raise ServoError(servo_id, "TORQUE_ENABLE", reply.error, "torque did not change")

    def _torque_off(self, ids: Sequence[int]) -> None:
        """Sync-write torque off to ``ids`` and read each one back, servo by servo.

        A servo that does not answer must not hide the others: the read-back keeps every
        reply that came, so the error says which servos are off and which are unknown.

        Raises:
            TorqueNotConfirmed: some servo did not answer or still has torque on.
        """
        reg = self._torque
        self.bus.sync_write(reg.address, reg.size, dict.fromkeys(ids, reg.encode(0)))
        reads = [(i, reg.address, reg.size) for i in ids]
        replies, silent, _ = self.bus.group_read_partial(self.method, reads)
        on = tuple(i for i in ids if i in replies and reg.decode(replies[i].data))
        if on or silent:
            raise TorqueNotConfirmed(
                off=tuple(i for i in ids if i in replies and i not in on),
                on=on,
                silent=tuple(silent),
                joints={s.id: s.units.spec.joint for s in self.layout.slots},
            )

    def reboot(self, slots: Sequence[ServoSlot]) -> None:
        """Reboot ``slots``, wait until they answer, set them up again and hold them.

        Their faults are read anew, and the config's profiles and Goal Current, which a
        reboot resets with the rest of RAM, are written again.
        """
        for slot in slots:
            self.bus.reboot(slot.id)
        for slot in slots:
            self._wait_back(slot)
            self._faults[slot.id] = hardware_status(self.bus, slot)
        # A reboot resets RAM: profiles and Goal Current are back to the firmware's
        # defaults (no profile: full speed). Write the config's settings again.
        configure_all(self.bus, slots, self._log)
        self.hold(slots)

    def _wait_back(self, slot: ServoSlot, timeout: float = 3.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.bus.try_ping(slot.id) is not None:
                return
            time.sleep(0.02)
        raise CommTimeout(slot.id, "REBOOT")

    def close(self, torque_off: bool) -> None:
        """Turn torque off (and confirm) when asked, then close the port.

        Raises:
            TorqueNotConfirmed: see :meth:`set_torque`; the port is closed all the same.
        """
        try:
            if torque_off:
                # confirmed servo by servo: one left with torque on must not go unnoticed
                self._torque_off(self.layout.ids)
        finally:
            self.bus.close()
