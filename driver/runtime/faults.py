"""Faults of the runtime: reported, remembered, and the safe state they put the robot in.

:class:`FaultHandler` is the part of :class:`~hilbot.driver.runtime.loop.Runtime` that deals
with what went wrong: it reports each fault (the fault log, the active faults, one log
line each), tells bus errors that pass from a bus that is down, reads the hardware and
Bus Watchdog errors of every joint state, and puts the robot in its safe state:

- a fault that disarms (bus down, a disarming hardware error, a tripped Bus Watchdog)
  turns torque off at the next cycle;
- an unexpected exception (an ``internal`` fault, reported once each: see
  :mod:`hilbot.driver.runtime.faults`) or a goal a servo's limit register refuses
  takes ``safety.estop_action``'s safe state: ``stop`` (or ``hold``) and
  ``stop_then_torque_off`` begin a controlled stop from the commanded state (the motion
  layer brakes every joint to rest; never toward a reading), ``torque_off`` turns torque
  off.

Either is retried every cycle until the backend takes it. The runtime's control loop
writes the hold goal (telling :meth:`FaultHandler.hold_written`) and calls
:meth:`FaultHandler.torque_off` when ``torque_off_pending`` says so; its commands tell
the handler what they did (:meth:`~FaultHandler.estop`, :meth:`~FaultHandler.torque_is_off`,
:meth:`~FaultHandler.reset`, ...) and never set its fields. The handler touches the bus
only to turn torque off.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.runtime.config import EstopAction, SafetyConfig
from hilbot.driver.runtime.safety import JointLimits, Mode, ModeMachine
from hilbot.driver.runtime.state import Fault, FaultKind
from hilbot.driver.runtime.stats import StatsRecorder
from hilbot.hal.backend import Backend, HardwareErrorFlags, JointState
from hilbot.hal.errors import DataLimitError, HalError, TorqueNotConfirmed

#: Hardware errors that make the runtime disarm (the servo firmware shuts torque off on these
#: by default: Shutdown register 63 of the X series, Alarm Shutdown 18 of the AX series).
DISARMING_ERRORS = (
    HardwareErrorFlags.OVERLOAD
    | HardwareErrorFlags.OVERHEATING
    | HardwareErrorFlags.ELECTRICAL_SHOCK
    | HardwareErrorFlags.MOTOR_ENCODER
)
BUS_FAULT_TIME = 0.25  # [s] of consecutive failed reads or writes before the bus counts as down
BUS_ERRORS = (HalError, OSError, TimeoutError)

FaultKey = tuple[FaultKind, str | None]  # (kind, joint or None): one active fault each


class FaultHandler:
    """The faults of one runtime and the safe state they call for.

    Args:
        backend: the runtime's backend (the handler only turns torque off through it).
        modes: the runtime's mode machine; a fault moves it to ``faulted``.
        stats: the runtime's loop statistics (``bus_errors``, ``internal_errors``).
        limits: the effective joint limits; the hold goal is clipped to them.
        safety: the robot's safety config (``estop_action``).
        clock: monotonic clock [s] (fault times, how long the bus has been failing).
        log: where to log faults.
        begin_stop: start a controlled stop of the commanded motion (``reason``); the
            runtime steps it and calls :meth:`stop_done` at rest.
        drop_targets: drop every target and the ``home`` move, so nothing is tracked.

    Attributes:
        active: the active faults, one per (kind, joint); cleared by ``reset``.
        fault_log: the last 64 faults reported, active or not.
        hold: the hold goal of the e-stop or of a fault [rad or m]: where its controlled
            stop came to rest; ``None`` when none (or while the stop is under way).
        stopping: a controlled stop is under way (the runtime writes its steps).
        hold_pending: the fault's controlled stop has yet to come to rest.
        torque_off_pending: torque is to go off (retried every cycle until it does).
        bus_watchdog_faulted: some joint's Bus Watchdog read tripped last read.
    """

    def __init__(
        self,
        *,
        backend: Backend,
        modes: ModeMachine,
        stats: StatsRecorder,
        limits: JointLimits,
        safety: SafetyConfig,
        clock: Callable[[], float],
        log: logging.Logger,
        begin_stop: Callable[[str], None],
        drop_targets: Callable[[], None],
    ) -> None:
        self._backend = backend
        self._modes = modes
        self._stats = stats
        self._limits = limits
        self._safety = safety
        self._clock = clock
        self._log = log
        self._begin_stop = begin_stop
        self._drop_targets = drop_targets
        self._stopping = False  # a controlled stop is under way
        self.active: dict[FaultKey, Fault] = {}
        self.fault_log: deque[Fault] = deque(maxlen=64)
        self._bus_failing_since: float | None = None
        self._torque_off_pending = False  # a fault disarmed the robot: torque off next cycle
        self._torque_off_failing = False  # that torque-off failed (logged once)
        self._hold_pending = False  # an internal fault (estop_action hold): write the hold goal
        self._hold: NDArray[np.float64] | None = None  # e-stop or fault hold pose
        self._internal = InternalErrors()
        self._hardware_faulted = False  # some joint reported a hardware error last read
        self.bus_watchdog_faulted = False  # some joint's Bus Watchdog read tripped last read

    @property
    def hold(self) -> NDArray[np.float64] | None:
        """The hold goal of the e-stop or of a fault [rad or m], ``None`` when none."""
        return self._hold

    @property
    def stopping(self) -> bool:
        """A controlled stop is under way: the runtime writes its steps."""
        return self._stopping

    @property
    def hold_pending(self) -> bool:
        """The fault hold goal has yet to be written."""
        return self._hold_pending

    @property
    def torque_off_pending(self) -> bool:
        """Torque is to go off (retried every cycle until it does)."""
        return self._torque_off_pending

    # -- reporting ----------------------------------------------------------------------------
    def report(
        self, kind: FaultKind, joint: str | None, detail: str, *, active: bool = True
    ) -> None:
        """Log a fault and keep it in the fault log (and, if ``active``, as active)."""
        fault = Fault(self._clock(), kind, joint, detail)
        self.fault_log.append(fault)
        if active:
            self.active[(kind, joint)] = fault
        level = logging.ERROR if active else logging.WARNING
        self._log.log(level, "fault (%s%s): %s", kind.value, f", {joint}" if joint else "", detail)

    def internal_fault(self, stage: str, err: BaseException) -> None:
        """An unexpected exception at ``stage``: report it (once) and enter the safe state.

        The safe state is ``safety.estop_action``'s: ``hold`` writes goal := present once
        (through the safety layer), ``torque_off`` turns torque off; either is retried
        every cycle until the backend takes it. A latched e-stop stays as it is.
        """
        self._stats.internal_errors += 1
        detail = describe(stage, err)
        if self._internal.is_new(detail):
            self.report(FaultKind.INTERNAL, None, detail)
            self._log.debug("internal error at %s", stage, exc_info=err)
        elif self._internal.at_limit() and not self._internal.suppressed:
            self._internal.suppressed = True
            self._log.error(
                "fault (internal): more than %d distinct internal errors; further ones are "
                "counted in stats.internal_errors, not logged, until reset",
                self._internal.limit,
            )
        self.enter_safe_state()

    def clear_internal(self) -> None:
        """After ``reset``: internal faults are no longer active and each is reported again."""
        self._internal.clear()
        self.active = {k: f for k, f in self.active.items() if k[0] is not FaultKind.INTERNAL}

    # -- the bus ------------------------------------------------------------------------------
    def bus_failure(self, what: str, err: BaseException) -> None:
        """A ``what`` (read or write) failed on the bus; down for ``BUS_FAULT_TIME``: fault."""
        self._stats.bus_errors += 1
        now = self._clock()
        if self._bus_failing_since is None:
            self._bus_failing_since = now
            self.report(FaultKind.BUS, None, f"{what} failed: {err}", active=False)
        elif (
            now - self._bus_failing_since > BUS_FAULT_TIME
            and (FaultKind.BUS, None) not in self.active
        ):
            self.report(FaultKind.BUS, None, f"bus down for {BUS_FAULT_TIME} s: {err}")
            self.fault()

    def bus_ok(self) -> None:
        """A read went through: the bus is up again."""
        self._bus_failing_since = None
        self.active.pop((FaultKind.BUS, None), None)

    def limit_fault(self, err: DataLimitError) -> None:
        """A goal a servo's own limit register refuses: a fault at once, never a clamp.

        The bus works, so this is no transient failure to ride out: the goal was not
        written (the servos keep the last one) and the robot goes to its safe state. If
        the fault's hold is itself refused, torque goes off. Counted in the backend's
        ``counters.data_limit_errors``; reported once per joint until ``reset``.
        """
        key = (FaultKind.LIMIT, err.joint or None)
        if key not in self.active:
            self.report(FaultKind.LIMIT, err.joint or None, str(err))
        if self._modes.mode is Mode.FAULTED:
            self.fault()  # the hold was refused too: torque off is the safe state left
        else:
            self.enter_safe_state()

    # -- joint states -------------------------------------------------------------------------
    def check_hardware(self, state: JointState) -> None:
        """Report new hardware errors; a new disarming one faults (unless e-stopped)."""
        if not self._hardware_faulted and not any(state.hardware_errors):
            return  # the common case, checked without building dicts
        faults = state.faults
        for key in [k for k in self.active if k[0] is FaultKind.HARDWARE]:
            if key[1] not in faults:
                del self.active[key]
        self._hardware_faulted = bool(faults)
        newly = False
        for joint, flags in faults.items():
            if (FaultKind.HARDWARE, joint) in self.active:
                continue
            self.report(FaultKind.HARDWARE, joint, flags.describe())
            newly = newly or bool(flags & DISARMING_ERRORS)
        if newly and self._modes.mode is not Mode.ESTOPPED:
            self.fault()

    def check_bus_watchdog(self, state: JointState) -> None:
        """A tripped servo Bus Watchdog: report it; while armed, disarm (fault).

        The servo has stopped by itself and ignores goals, so tracking must end. Recovery:
        ``reset`` (torque off), then ``enable``, which clears and re-arms the watchdog and
        starts from goal = present (no jump).
        """
        tripped = state.bus_watchdog_tripped
        for key in [k for k in self.active if k[0] is FaultKind.BUS_WATCHDOG]:
            if key[1] not in tripped:
                del self.active[key]
        self.bus_watchdog_faulted = bool(tripped)
        newly = False
        for joint in tripped:
            if (FaultKind.BUS_WATCHDOG, joint) in self.active:
                continue
            self.report(
                FaultKind.BUS_WATCHDOG,
                joint,
                "servo bus watchdog tripped (no instruction reached it in time): it stopped "
                "and ignores goals; reset, then enable to clear and re-arm it",
            )
            newly = True
        if newly and self._modes.mode is Mode.ARMED:
            self.fault()

    def clear_bus_watchdog(self) -> None:
        """The tripped Bus Watchdogs were cleared: their faults are no longer active."""
        self.bus_watchdog_faulted = False
        self.active = {k: f for k, f in self.active.items() if k[0] is not FaultKind.BUS_WATCHDOG}

    # -- the safe state -----------------------------------------------------------------------
    def fault(self) -> None:
        """Disarm after a fault: mode faulted, targets dropped, torque off at the next cycle."""
        self._modes.fault()
        self._drop_targets()
        if self._modes.mode is Mode.FAULTED:
            self._torque_off_pending = True
            self._hold_pending = False
            self._stopping = False
            self._hold = None
        # Else a latched e-stop keeps its own safe state, a torque-off still being
        # retried included (it was cleared here, and a refused torque-off then stopped).

    def enter_safe_state(self) -> None:
        """Fault into ``safety.estop_action``'s safe state: the hold goal, or torque off."""
        if self._modes.mode in (Mode.ESTOPPED, Mode.FAULTED):
            # Latched e-stop: its own action holds. Faulted: torque is off (or going off),
            # or the fault hold is in place: already safe.
            return
        self._modes.fault()
        self._drop_targets()
        if self._safety.estop_action is EstopAction.TORQUE_OFF:
            self._torque_off_pending = True
            return
        self._start_stop("fault")
        self._hold_pending = True

    async def estop(self, *, in_effect: bool = False) -> None:
        """The e-stop's safe state (the mode machine latched it): the hold goal, or torque off.

        ``safety.estop_action`` ``stop`` (``hold``) and ``stop_then_torque_off``: a
        controlled stop from the commanded state; at rest its final command is the hold
        goal, which the runtime writes every cycle while e-stopped (or torque then goes
        off). ``torque_off``: torque goes off now; if the backend refuses it, it is
        retried every cycle (nothing more is written).

        ``in_effect``: the robot was e-stopped already. Its safe state stays as it is (the
        same hold goal; torque off, or its torque off retried every cycle), with no bus
        traffic: a flood of e-stops costs the loop nothing.
        """
        if in_effect and (
            self._hold is not None
            or self._stopping
            or self._safety.estop_action is EstopAction.TORQUE_OFF
        ):
            return
        self._hold_pending = False
        if self._safety.estop_action is EstopAction.TORQUE_OFF:
            self._hold = None
            self._stopping = False
            self._torque_off_pending = True  # latched first, then torque off
            await self.torque_off()
            return
        self._start_stop("estop")

    def _start_stop(self, reason: str) -> None:
        self._hold = None
        self._stopping = True
        self._begin_stop(reason)

    def stop_done(self, command: NDArray[np.float64]) -> None:
        """The controlled stop came to rest at ``command``: hold it, or (category 1) cut torque."""
        self._stopping = False
        self._hold_pending = False
        self._hold = np.array(command, dtype=np.float64)
        if self._safety.estop_action is EstopAction.STOP_THEN_TORQUE_OFF:
            self._torque_off_pending = True

    def torque_is_off(self) -> None:
        """Torque went off another way (``disable``, ``reset``): no torque off is pending."""
        self._torque_off_pending = False

    def torque_must_go_off(self) -> None:
        """Torque is to go off at the next cycle (an ``enable`` that failed part way)."""
        self._torque_off_pending = True

    def enabling(self) -> None:
        """An explicit ``enable`` overrides a pending torque off."""
        self._torque_off_pending = False

    def clear_active(self) -> None:
        """``reset`` from faulted: no fault is active any more."""
        self.active.clear()

    def reset(self) -> None:
        """After ``reset``: no hold goal, and each internal fault is reported again."""
        self._hold = None
        self._hold_pending = False
        self._stopping = False
        self.clear_internal()

    async def torque_off(self) -> None:
        """Turn torque off after a fault; retried every cycle until the backend takes it."""
        try:
            await self._backend.set_torque(False)
        except BUS_ERRORS as err:
            if not self._torque_off_failing:  # once per fault, not once per cycle
                self._torque_off_failing = True
                # a TorqueNotConfirmed names, per servo, which took torque off and which
                # did not answer; anything else failed before any servo could confirm
                self._log.error(
                    "fault: torque off %s (retrying): %s",
                    "not confirmed on every servo"
                    if isinstance(err, TorqueNotConfirmed)
                    else "failed on the bus",
                    err,
                )
            return
        except Exception as err:
            self._torque_off_failing = True
            self.internal_fault("torque off", err)
            return
        self._torque_off_pending = False
        self._torque_off_failing = False
        self._log.info("fault: torque off")


# --- Unexpected exceptions caught by the control loop: described, and reported once each.
MAX_DISTINCT = 16  # distinct problems reported between two resets; later ones are counted
MAX_DETAIL = 300  # characters of an exception message kept in a report


def describe(stage: str, err: BaseException) -> str:
    """``"<stage>: <ExceptionType>: <message>"``, the message cut to ``MAX_DETAIL``."""
    message = str(err)
    if len(message) > MAX_DETAIL:
        message = message[:MAX_DETAIL] + "..."
    return (
        f"{stage}: {type(err).__name__}: {message}" if message else f"{stage}: {type(err).__name__}"
    )


class InternalErrors:
    """The distinct internal problems reported since the last clear."""

    def __init__(self, limit: int = MAX_DISTINCT) -> None:
        self.limit = limit
        self._seen: set[str] = set()
        self.suppressed = False  # the limit was reached; later problems are only counted

    def is_new(self, detail: str) -> bool:
        """Whether ``detail`` should be reported (and remember it if so)."""
        if detail in self._seen:
            return False
        if len(self._seen) >= self.limit:
            return False
        self._seen.add(detail)
        return True

    def at_limit(self) -> bool:
        """Whether new problems are no longer reported (say so once: see ``suppressed``)."""
        return len(self._seen) >= self.limit

    def clear(self) -> None:
        """Forget the reported problems (after a ``reset``): each is reported again once."""
        self._seen.clear()
        self.suppressed = False
