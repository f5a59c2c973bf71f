"""``FeetechBackend``: the ``Backend`` protocol on a real (or virtual) Feetech STS/SCS bus.

::

    async with FeetechBackend(BusSpec("/dev/ttyACM0", family="feetech"), servos) as arm:
        state = await arm.read()              # JointState in rad, rad/s, % load, °C
        await arm.set_torque(True)            # goal = present first: no jump
        await arm.write({"shoulder_pan": 0.3})

Bus I/O runs on one dedicated thread (:class:`~hilbot.hal.feetech.worker.FeetechWorker`),
never on the event loop, and every call awaits it under a deadline. Each cycle is one
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

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TypeVar

from hilbot import _compat_asyncio as aio
from hilbot._compat import Self
from hilbot.hal.backend import BusCounters, JointState
from hilbot.hal.errors import CommandError, HalError, TorqueNotConfirmed
from hilbot.hal.feetech.bus import DEFAULT_MARGIN_MS, FeetechBus
from hilbot.hal.feetech.session import FeetechSession, ServoInfo
from hilbot.hal.feetech.worker import FeetechWorker
from hilbot.hal.mapping import BusSpec, ServoSpec

T = TypeVar("T")


class BackendState(enum.Enum):
    """Lifecycle of a backend."""

    CREATED = "created"
    OPEN = "open"
    CLOSED = "closed"


class FeetechBackend:
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
        self.spec = bus
        self.torque_off_on_exit = torque_off_on_exit
        self.io_timeout = io_timeout
        self._log = logger or logging.getLogger(__name__)
        self._bus = FeetechBus(bus.port, bus.baudrate, retries=retries, margin_ms=margin_ms)
        self._session = FeetechSession(
            self._bus, servos, joint_limits=joint_limits, clock=clock, log=self._log
        )
        self._ids: dict[str, list[int]] = {s.joint: [] for s in servos}  # shadows included
        for s in servos:
            self._ids[s.joint].append(s.id)
        self._worker: FeetechWorker | None = None
        self._write_error: BaseException | None = None
        self.state = BackendState.CREATED
        self.pipeline = pipeline is True
        self._ahead: asyncio.Future[JointState] | None = None  # a read queued in advance
        self._streaming = False  # a goal was written since the last read()

    # --- Backend protocol -------------------------------------------------------------

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints this backend drives, in ``JointState`` order."""
        return self._session.names

    @property
    def counters(self) -> BusCounters:
        """A snapshot of the bus counters."""
        return self._bus.counters.copy()

    @property
    def infos(self) -> tuple[ServoInfo, ...]:
        """What start-up found on each servo."""
        return self._session.infos

    async def __aenter__(self) -> Self:
        if self.state is not BackendState.CREATED:
            raise RuntimeError(f"FeetechBackend is {self.state.value}; it is not reentrant")
        self._worker = FeetechWorker(f"feetech-{self.spec.port}", self._note_write_error)
        try:
            await self._call(self._session.open)
        except BaseException:
            self._stop_worker()
            self.state = BackendState.CLOSED
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
        """Read every joint: one sync read (STS) or a read per servo (SCS).

        Raises:
            CommTimeout: a servo did not answer (after retries).
            CrcError: a reply arrived corrupt (after retries).
        """
        self._require_open()
        streaming, self._streaming = self._streaming, False
        if not (self.pipeline and streaming and self._worker is not None):
            self._drop_ahead()
            return await self._call(self._session.read_state)
        # Streaming: queue the next read behind the goal just posted and hand over the one
        # queued a call earlier (or, on the first streamed cycle, the one queued now).
        queued = self._worker.call(self._session.read_state)
        ahead, self._ahead = self._ahead, queued
        if ahead is None:
            ahead, self._ahead = queued, self._worker.call(self._session.read_state)
        return await self._finish(ahead)

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
        wire = self._session.goal_packet(positions)
        if wire is not None and self._worker is not None:
            bus = self._bus
            self._worker.post(lambda: bus.send(wire))
            self._streaming = True

    async def set_torque(self, enabled: bool, joints: Iterable[str] | None = None) -> None:
        """Enable or disable torque of ``joints`` (default all), shadows included.

        Raises:
            HardwareFault: enabling a servo that reported a hardware error.
            TorqueNotConfirmed: disabling, a servo did not confirm torque off.
        """
        self._require_open()
        ids = self._servo_ids(joints)
        self._drop_ahead()
        await self._call(lambda: self._session.set_torque(ids, enabled))

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
        self._drop_ahead()
        await self._call(lambda: self._session.set_torque(ids, True, wire))

    async def reboot(self, joints: Iterable[str]) -> None:
        """Restart the servos of ``joints``: clears a latched error; torque comes back off."""
        self._require_open()
        ids = self._servo_ids(joints)
        self._drop_ahead()
        await self._call(lambda: self._session.reboot(ids), timeout=self.io_timeout + 1.0)

    async def close(self) -> None:
        """Turn torque off (per ``torque_off_on_exit``) and release the port; idempotent."""
        if self.state is BackendState.CLOSED:
            return
        was_open = self.state is BackendState.OPEN
        self.state = BackendState.CLOSED
        if self._worker is None:
            return
        torque_off = was_open and self.torque_off_on_exit
        self._drop_ahead()
        try:
            await self._call(lambda: self._session.close(torque_off))
        except TorqueNotConfirmed as exc:
            self._log.error("%s: closing, torque off: %s", self.spec.port, exc)
        except (HalError, TimeoutError) as exc:
            self._log.warning("%s: closing: %s", self.spec.port, exc)
        finally:
            self._stop_worker()

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

    def _require_open(self) -> None:
        if self.state is not BackendState.OPEN:
            raise RuntimeError(f"FeetechBackend is {self.state.value}; use it as `async with`")

    def _note_write_error(self, exc: BaseException) -> None:
        self._write_error = exc  # read by the event loop's next call: a plain reference swap

    def _raise_pending(self) -> None:
        exc, self._write_error = self._write_error, None
        if exc is not None:
            raise exc

    async def _call(self, fn: Callable[[], T], timeout: float | None = None) -> T:
        if self._worker is None:
            raise RuntimeError("FeetechBackend is not open")
        return await self._finish(self._worker.call(fn), timeout)

    async def _finish(self, done: asyncio.Future[T], timeout: float | None = None) -> T:
        async with aio.timeout(self.io_timeout if timeout is None else timeout):
            result = await done
        self._raise_pending()
        return result

    def _drop_ahead(self) -> None:
        """Drop a read queued in advance: the next read is fresh.

        Nothing waits for it: the bus thread runs jobs in order, so what is queued next
        goes on the wire after it, and its outcome, which nobody asks for, is dropped. A
        shutdown or a torque-off never waits behind it (a wait that a Ctrl-C cancels
        would leave torque on).
        """
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.cancel()

    def _stop_worker(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop()
