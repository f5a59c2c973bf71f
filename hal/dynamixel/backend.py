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

A failed read raises (:class:`~hilbot.hal.errors.CommTimeout`,
:class:`~hilbot.hal.errors.CrcError`) after bounded retries, counted in
``JointState.counters``; no position is ever invented. A servo's latched
hardware error is reported in ``JointState.hardware_errors`` (and blocks
``set_torque(True)`` with :class:`~hilbot.hal.errors.HardwareFault`) until
:meth:`DynamixelBackend.reboot` clears it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Self, TypeVar

import numpy as np

from hilbot.hal.backend import BusCounters, HardwareErrorFlags, JointState
from hilbot.hal.dynamixel.bus import DynamixelBus, ServoReply
from hilbot.hal.dynamixel.layout import BusLayout, ServoSlot
from hilbot.hal.dynamixel.port import DEFAULT_MARGIN_MS
from hilbot.hal.dynamixel.protocol import ALERT_BIT, hardware_flags_from_protocol1
from hilbot.hal.dynamixel.startup import ServoReport, check_bus, hardware_status
from hilbot.hal.dynamixel.tables import RegisterName
from hilbot.hal.dynamixel.timing import CycleBudget, ReadMethod, bus_budget
from hilbot.hal.dynamixel.units import temperature
from hilbot.hal.errors import (
    CommandError,
    CommTimeout,
    CrcError,
    HalError,
    HardwareFault,
    ServoError,
)
from hilbot.hal.mapping import BusSpec, ServoSpec

N = RegisterName
T = TypeVar("T")

#: Bus Watchdog register unit [s] (X series, address 98).
WATCHDOG_UNIT = 0.02


class BackendState(enum.Enum):
    """Lifecycle of a backend; it is not reentrant."""

    CREATED = "created"
    OPEN = "open"
    CLOSED = "closed"


class DynamixelBackend:
    """Joints driven by Dynamixel servos on one serial bus.

    Args:
        bus: port, baud rate and protocol.
        servos: the servos on it (primaries and shadows).
        torque_off_on_exit: disable torque of every servo when the context exits.
        retries: extra attempts for a timed-out or corrupt transaction.
        margin_ms: reply deadline slack beyond the wire time [ms].
        latency_ms: USB adapter latency [ms]; read from sysfs (FTDI) when ``None``.
        io_timeout: deadline [s] for any one backend call to finish on the worker.
        temperature_every: read temperature every this many ``read()`` calls
            (Protocol 2.0; it is not in the cycle's contiguous span). 1.0 reads it every cycle.
        fast_read: use Fast Sync Read; ``None`` decides from models and firmware.
        read_method: force the cycle's read instruction (e.g. ``BULK_READ``); by default
            it is chosen from the models: every supported Protocol 2.0 model keeps the
            cycle's registers at the same addresses, so a (fast) sync read covers mixed
            chains, and a bulk read is needed only when the spans differ.
        clock: monotonic clock for timestamps.
        logger: where warnings go.

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
    ) -> None:
        if temperature_every < 1:
            raise ValueError(f"temperature_every must be >= 1, got {temperature_every!r}")
        self.spec = bus
        self.layout = BusLayout(bus, servos)
        self.torque_off_on_exit = torque_off_on_exit
        self.io_timeout = io_timeout
        self.temperature_every = temperature_every
        self._fast_read = fast_read
        self._read_method = read_method
        self._clock = clock
        self._log = logger or logging.getLogger(__name__)
        self._bus = DynamixelBus(
            bus.port,
            bus.baudrate,
            bus.protocol,
            retries=retries,
            margin_ms=margin_ms,
            latency_ms=latency_ms,
        )
        self._executor: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None  # the last queued sync write
        self._write_error: BaseException | None = None  # its failure, raised by the next call
        self.state = BackendState.CREATED
        self.method = ReadMethod.SYNC_READ
        self.reports: tuple[ServoReport, ...] = ()
        self._cycles = 0
        self._temperatures = dict.fromkeys(self.layout.ids, float("nan"))
        self._faults = dict.fromkeys(self.layout.ids, HardwareErrorFlags.NONE)
        self._names = self.layout.joint_names
        self._goal = self.layout.register(N.GOAL_POSITION)
        self._torque = self.layout.register(N.TORQUE_ENABLE)

    # --- Backend protocol -------------------------------------------------------------

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints this backend drives, in ``JointState`` order."""
        return self._names

    @property
    def counters(self) -> BusCounters:
        """A snapshot of the bus counters."""
        return self._bus.counters.copy()

    async def __aenter__(self) -> Self:
        if self.state is not BackendState.CREATED:
            raise RuntimeError(f"DynamixelBackend is {self.state.value}; it is not reentrant")
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"dxl-{self.spec.port}")
        try:
            await self._call("open", self._open_sync)
        except BaseException:
            await self._shutdown(torque_off=False)
            raise
        self.state = BackendState.OPEN
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def read(self) -> JointState:
        """Read every joint (one group read; temperature every ``temperature_every`` calls).

        Raises:
            CommTimeout, CrcError: a servo did not answer validly after retries.
            ServoError: a servo rejected the read.
        """
        self._require_open()
        return await self._call("read", self._read_sync)

    async def write(self, positions: Mapping[str, float]) -> None:
        """Sync-write goal positions [rad or m] of some or all joints (and their shadows).

        A sync write has no reply, so the packet is queued on the bus thread and this
        returns without waiting for it: bus order is kept (the next call runs after it),
        and a failure to send it (a port error) is raised by the next call.

        Raises:
            CommandError: an unknown joint, or a position outside a servo's range; nothing
                is written then.
        """
        self._require_open()
        ticks = self._goal_ticks(positions)
        pending = self._pending
        if pending is not None and not pending.done():
            # back-pressure: at most one queued write, so a caller faster than the bus
            # waits here instead of piling packets up
            with contextlib.suppress(Exception):
                await asyncio.wrap_future(pending)
        self._raise_pending()
        if ticks and self._executor is not None:
            self._pending = self._executor.submit(
                self._bus.sync_write, self._goal.address, self._goal.size, ticks
            )
            self._pending.add_done_callback(self._note_write)

    async def set_torque(self, enabled: bool, joints: Iterable[str] | None = None) -> None:
        """Enable or disable torque of ``joints`` (default all), shadows included.

        Enabling first copies present into goal position, so the joint holds where it
        is instead of jumping to a stale goal.

        Raises:
            HardwareFault: enabling a servo whose hardware-error status is set.
        """
        self._require_open()
        slots = self.layout.servos_of(self._joints(joints))
        await self._call("set_torque", self._torque_sync, slots, enabled)

    async def reboot(self, joints: Iterable[str]) -> None:
        """Reboot the servos of ``joints``: clears latched hardware errors; torque comes back off.

        Raises:
            CommError: Protocol 1.0 (no reboot instruction), or a servo does not come back.
        """
        self._require_open()
        slots = self.layout.servos_of(self._joints(joints))
        await self._call("reboot", self._reboot_sync, slots, timeout=self.io_timeout + 3.0)

    async def close(self) -> None:
        """Turn torque off (per ``torque_off_on_exit``) and release the port; idempotent."""
        if self.state is BackendState.CLOSED:
            return
        was_open = self.state is BackendState.OPEN
        self.state = BackendState.CLOSED
        await self._shutdown(torque_off=was_open and self.torque_off_on_exit)

    # --- extras -------------------------------------------------------------------------

    async def arm_watchdog(self, timeout: float) -> None:
        """Arm every servo's Bus Watchdog: it stops if no instruction arrives for ``timeout`` [s].

        The runtime's dead-man: if this process hangs, the servos stop on their own.
        Models without a Bus Watchdog (Protocol 1.0) are skipped with a warning.
        """
        if not WATCHDOG_UNIT <= timeout <= 127 * WATCHDOG_UNIT:
            raise ValueError(f"watchdog timeout must be in [0.02, 2.54] s, got {timeout!r}")
        await self._set_watchdog(max(1, min(127, round(timeout / WATCHDOG_UNIT))))

    async def disarm_watchdog(self) -> None:
        """Disarm the Bus Watchdog (also clears a tripped watchdog)."""
        await self._set_watchdog(0)

    def budget(self) -> CycleBudget:
        """The wire budget of this backend's cycle."""
        rdt = max((r.return_delay_time for r in self.reports), default=0)
        fast = self.method in (ReadMethod.FAST_SYNC_READ, ReadMethod.FAST_BULK_READ)
        return bus_budget(
            self.spec,
            [s.units.spec for s in self.layout.slots],
            return_delay_time=rdt,
            fast_ok=fast,
        )

    # --- worker-thread side ----------------------------------------------------------------

    def _open_sync(self) -> None:
        self._bus.open()
        self.reports = tuple(check_bus(self._bus, self.layout, self._log))
        for r in self.reports:
            self._faults[r.id] = r.hardware_errors
        fast_ok = all(
            r.firmware >= self.layout.by_id[r.id].model.fast_read_min_firmware for r in self.reports
        )
        if self._fast_read is not None:
            fast_ok = self._fast_read
        self.method = self._read_method or self.layout.read_method(fast_ok=fast_ok)
        self._hold(self.layout.slots)
        self._log.info(
            "%s: %d servos, %s, %s",
            self.spec.port,
            len(self.layout.slots),
            self.method.value,
            self.budget().describe().splitlines()[-1].strip(),
        )

    def _hold(self, slots: Sequence[ServoSlot]) -> None:
        """Copy present into goal position for ``slots`` (no jump when torque comes on)."""
        pos = slots[0].position.register
        replies = self._bus.group_read(self.method, [(s.id, pos.address, pos.size) for s in slots])
        data = {s.id: self._goal.encode(pos.decode(replies[s.id].data)) for s in slots}
        self._bus.sync_write(self._goal.address, self._goal.size, data)

    def _read_sync(self) -> JointState:
        replies = self._bus.group_read(self.method, self.layout.reads())
        self._cycles += 1
        if self.layout.protocol == 2 and (self._cycles - 1) % self.temperature_every == 0:
            try:
                self._read_temperatures()
            except (CommTimeout, CrcError) as exc:
                # positions are fresh; temperatures keep their last value (counted, logged)
                self._log.warning("%s: temperature read failed: %s", self.spec.port, exc)
        self._update_faults(replies)
        return self._state(replies)

    def _read_temperatures(self) -> None:
        reg = self.layout.register(N.PRESENT_TEMPERATURE)
        method = ReadMethod.SYNC_READ if self.method is ReadMethod.BULK_READ else self.method
        method = ReadMethod.FAST_SYNC_READ if method is ReadMethod.FAST_BULK_READ else method
        got = self._bus.group_read(method, [(i, reg.address, reg.size) for i in self.layout.ids])
        for servo_id, reply in got.items():
            self._temperatures[servo_id] = temperature(reg.decode(reply.data))

    def _update_faults(self, replies: Mapping[int, ServoReply]) -> None:
        for slot in self.layout.slots:
            error = replies[slot.id].error
            if self.layout.protocol == 1:
                self._faults[slot.id] = hardware_flags_from_protocol1(error)
            elif error & ALERT_BIT:
                self._faults[slot.id] = hardware_status(self._bus, slot)
            else:
                self._faults[slot.id] = HardwareErrorFlags.NONE

    def _state(self, replies: Mapping[int, ServoReply]) -> JointState:
        n = len(self._names)
        pos, vel, eff, tmp = (np.empty(n) for _ in range(4))
        faults = []
        for i, joint in enumerate(self._names):
            slot = self.layout.primary[joint]
            data = replies[slot.id].data
            pos[i] = slot.units.position(slot.position.decode(data))
            vel[i] = slot.units.velocity(slot.velocity.decode(data))
            eff[i] = slot.units.effort(slot.effort.decode(data))
            if slot.temperature is not None:
                self._temperatures[slot.id] = temperature(slot.temperature.decode(data))
            tmp[i] = self._temperatures[slot.id]
            flags = self._faults[slot.id]
            for shadow in self.layout.shadows[joint]:
                flags |= self._faults[shadow.id]
            faults.append(flags)
        return JointState(
            names=self._names,
            position=pos,
            velocity=vel,
            effort=eff,
            temperature=tmp,
            hardware_errors=tuple(faults),
            timestamp=self._clock(),
            effort_unit=tuple(self.layout.primary[j].units.effort_unit for j in self._names),
            counters=self._bus.counters.copy(),
        )

    def _torque_sync(self, slots: Sequence[ServoSlot], enabled: bool) -> None:
        if enabled:
            for slot in slots:
                if self._faults[slot.id]:
                    raise HardwareFault(slot.id, self._faults[slot.id], "TORQUE_ENABLE")
            self._hold(slots)
        value = self._torque.encode(1 if enabled else 0)
        self._bus.sync_write(self._torque.address, self._torque.size, {s.id: value for s in slots})
        # Read back: a sync write has no reply, and torque is worth one round trip to confirm.
        reads = [(s.id, self._torque.address, self._torque.size) for s in slots]
        for servo_id, reply in self._bus.group_read(self.method, reads).items():
            if self._torque.decode(reply.data) != int(enabled):
                raise ServoError(servo_id, "TORQUE_ENABLE", reply.error, "torque did not change")

    def _reboot_sync(self, slots: Sequence[ServoSlot]) -> None:
        for slot in slots:
            self._bus.reboot(slot.id)
        for slot in slots:
            self._wait_back(slot)
            self._faults[slot.id] = hardware_status(self._bus, slot)
        self._hold(slots)

    def _wait_back(self, slot: ServoSlot, timeout: float = 3.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._bus.try_ping(slot.id) is not None:
                return
            time.sleep(0.02)
        raise CommTimeout(slot.id, "REBOOT")

    def _close_sync(self, torque_off: bool) -> None:
        try:
            if torque_off:
                off = self._torque.encode(0)
                self._bus.sync_write(
                    self._torque.address, self._torque.size, dict.fromkeys(self.layout.ids, off)
                )
                # confirm: a servo left with torque on must not go unnoticed
                reads = [(i, self._torque.address, self._torque.size) for i in self.layout.ids]
                for servo_id, reply in self._bus.group_read(self.method, reads).items():
                    if self._torque.decode(reply.data):
                        self._log.error("servo %d still has torque on after close", servo_id)
        finally:
            self._bus.close()

    # --- helpers ---------------------------------------------------------------------------

    async def _set_watchdog(self, value: int) -> None:
        self._require_open()
        slots = [s for s in self.layout.slots if s.model.has_bus_watchdog]
        if len(slots) < len(self.layout.slots):
            self._log.warning(
                "%s: some servos have no Bus Watchdog; they are not armed", self.spec.port
            )
        if not slots:
            return
        reg = slots[0].model.register(N.BUS_WATCHDOG)
        data = {s.id: reg.encode(0) for s in slots}
        await self._call("watchdog", self._bus.sync_write, reg.address, reg.size, data)
        if value:
            data = {s.id: reg.encode(value) for s in slots}
            await self._call("watchdog", self._bus.sync_write, reg.address, reg.size, data)

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
        for joint, value in positions.items():
            if joint not in self.layout.primary:
                raise CommandError(
                    f"unknown joint {joint!r}; this bus drives {', '.join(self._names)}",
                    joint=joint,
                    value=value,
                )
            for slot in (self.layout.primary[joint], *self.layout.shadows[joint]):
                data[slot.id] = self._goal.encode(slot.units.ticks(float(value)))
        return data

    def _require_open(self) -> None:
        if self.state is not BackendState.OPEN:
            raise RuntimeError(f"DynamixelBackend is {self.state.value}; use `async with` first")

    async def _call(
        self, what: str, fn: Callable[..., T], *args: object, timeout: float | None = None
    ) -> T:
        if self._executor is None:
            raise RuntimeError("DynamixelBackend has no worker thread")
        loop = asyncio.get_running_loop()
        self._raise_pending()
        try:
            async with asyncio.timeout(timeout or self.io_timeout):
                result = await loop.run_in_executor(self._executor, functools.partial(fn, *args))
        except TimeoutError as exc:
            if isinstance(exc, HalError):
                raise
            raise CommTimeout(None, what) from exc
        self._raise_pending()
        return result

    def _note_write(self, done: Future[None]) -> None:
        """Keep the first failure of a queued write (runs on the bus thread)."""
        exc = done.exception()
        if exc is not None and self._write_error is None:
            self._write_error = exc

    def _raise_pending(self) -> None:
        """Raise the failure of a queued write, once."""
        exc, self._write_error = self._write_error, None
        if exc is not None:
            raise exc

    async def _shutdown(self, *, torque_off: bool) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(self.io_timeout):
                await loop.run_in_executor(executor, self._close_sync, torque_off)
        except (HalError, TimeoutError) as exc:
            self._log.warning("%s: closing: %s", self.spec.port, exc)
        finally:
            executor.shutdown(wait=False)
