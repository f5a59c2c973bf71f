"""The asyncio runtime: read state, take the newest targets, solve IK, apply safety, write.

::

    async with Runtime(config, SimBackend(...)) as rt:   # connects, reads, holds (torque as found)
        await rt.command(Command.ENABLE)                   # torque on, goal = present
        rt.set_target("arm", (0.2, 0.0, 0.15))             # newest target wins
        await rt.wait_cycles(100)
    # on exit: hold, torque off (per config), close

Lifecycle commands and bus access are serialised on the control loop: a command
queued by ``command()`` runs between two cycles, never during bus I/O.

The loop never dies of an exception: anything unexpected raised by the solver, the
safety layer, the backend, a cycle listener or a command is reported as an
``internal`` fault and puts the robot in its safe state (``safety.estop_action``:
hold = goal := present, or torque off), and the runtime keeps answering ``estop``,
``reset``, ``disable`` and shutdown (see ``docs/runtime.md``). Only shutdown or
cancellation ends the loop. Faults, their reports and the safe state they call for are
kept by :class:`~hilbot.driver.runtime.faults.FaultHandler`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot._compat import Self
from hilbot.driver.runtime.chains import ChainRunner, limited_robot
from hilbot.driver.runtime.config import RobotConfig
from hilbot.driver.runtime.errors import (
    DriverError,
    LimitViolation,
    RuntimeStateError,
    UnknownChain,
)
from hilbot.driver.runtime.faults import BUS_ERRORS as BUS_ERRORS  # re-exported
from hilbot.driver.runtime.faults import BUS_FAULT_TIME as BUS_FAULT_TIME  # re-exported
from hilbot.driver.runtime.faults import DISARMING_ERRORS as DISARMING_ERRORS  # re-exported
from hilbot.driver.runtime.faults import FaultHandler
from hilbot.driver.runtime.motion import MotionLayer, MotionLimits, Reference, StreamReference
from hilbot.driver.runtime.readings import PRISMATIC_TOLERANCE, REVOLUTE_TOLERANCE, ReadingGuard
from hilbot.driver.runtime.safety import Mode, ModeMachine, SafetyLayer, effective_limits
from hilbot.driver.runtime.state import Command, CycleRecord, FaultKind, RuntimeState
from hilbot.driver.runtime.stats import STAGES, StatsRecorder
from hilbot.driver.runtime.targets import JOINTS, PoseForm, TargetSlots, flatten_pose, rebuild_pose
from hilbot.driver.runtime.ticker import GcPacer, ManualClock, SteppedTicker, Ticker, precise_ticker
from hilbot.hal.backend import Backend, JointState, enable_holding
from hilbot.hal.errors import DataLimitError

SHUTDOWN_TORQUE_TRIES = 3  # torque-off attempts at shutdown before giving up
#: What a command may fail with and leave the runtime as it was (refused, or a bus error
#: the command's caller hears of); anything else is an internal fault.
EXPECTED_COMMAND_ERRORS = (DriverError, *BUS_ERRORS)
#: Commands run between two cycles, at most; more wait for the next cycles, so a flood of
#: commands never starves the loop. An e-stop is never one of those that wait: every
#: command queued up to the last e-stop runs before the next cycle.
COMMANDS_PER_CYCLE = 4
#: Unset, a joint's acceleration limit is its velocity limit times this [1/s]: full speed
#: in 0.1 s, which the servos we drive reach with their arms attached.
ACCELERATION_PER_VELOCITY = 10.0
#: Unset, the motion layer's jerk limit is its acceleration limit times this [1/s]: full
#: acceleration in 40 ms.
JERK_PER_ACCELERATION = 25.0
#: Reads at enable until two in a row agree; more that disagree refuse the enable.
ENTRY_READS = 5
#: Solve options of the per-cycle IK on an interpolated pose. The pose moves a few
#: micrometres a cycle: with the default 0.1 mm tolerance the previous solution would
#: already count as solved for many cycles, and the joints would follow in 0.1 mm steps.
STREAM_SOLVE = {"tolerance": 1e-6, "orientation_tolerance": 1e-4}
#: [s] the time constant that smooths a chain's joint acceleration fed forward.
CHAIN_SMOOTHING = 0.02

CycleListener = Callable[[CycleRecord], None]


def _per_joint(
    value: float | Mapping[str, float] | None,
    names: tuple[str, ...],
    default: float | None,
    fallback: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """(n,) a config number given for every joint or per joint (``default`` for the rest).

    ``None`` (or a joint not listed, without a ``default`` key) takes ``fallback[j]``, or
    ``default`` when there is no fallback.
    """
    base = np.full(len(names), np.nan) if fallback is None else np.array(fallback, dtype=float)
    if default is not None and fallback is None:
        base[:] = default
    if value is None:
        return base
    if not isinstance(value, Mapping):
        return np.full(len(names), float(value))
    if "default" in value:
        base[:] = float(value["default"])
    for j, name in enumerate(names):
        if name in value:
            base[j] = float(value[name])
    return base


def _motion_layer(
    config: RobotConfig,
    limits: Any,
    velocity: NDArray[np.float64],
    acceleration: NDArray[np.float64],
) -> MotionLayer:
    """The motion layer, planning within a share of the safety layer's limits."""
    motion = config.motion
    share = motion.velocity_share
    names = limits.names
    # an unlimited joint still plans within the step the safety layer allows
    planned_v = share * velocity
    planned_a = share * acceleration
    jerk = _per_joint(motion.jerk_limit, names, None, planned_a * JERK_PER_ACCELERATION)
    return MotionLayer(
        MotionLimits(names, limits.lower, limits.upper, planned_v, planned_a, jerk),
        1.0 / config.rate_hz,
        motion.bandwidth,
    )


def _reading_guard(robot: Any, names: tuple[str, ...], limits: Any) -> ReadingGuard:
    """The glitch check: the URDF's velocity limits and an encoder tolerance per joint type."""
    from hilbot.kinematics import JointType

    velocity, tolerance = [], []
    for j, name in enumerate(names):
        joint = robot.joints[name]
        urdf = joint.limit.velocity if joint.limit is not None else 0.0
        velocity.append(max(urdf, float(limits.velocity[j])) if urdf > 0 else np.inf)
        prismatic = joint.type is JointType.PRISMATIC
        tolerance.append(PRISMATIC_TOLERANCE if prismatic else REVOLUTE_TOLERANCE)
    return ReadingGuard(names, np.array(velocity), np.array(tolerance))


class _IkProblem:
    """An IK problem of one chain that was reported: its kind, recurrences, the newest."""

    __slots__ = ("kind", "last", "repeats")

    def __init__(self, kind: tuple[str, str], first: Exception) -> None:
        self.kind = kind
        self.last = first
        self.repeats = 0


class Runtime:
    """Runs one robot: the control loop, the safety layer and the lifecycle.

    Args:
        config: the robot config (see :func:`hilbot.driver.runtime.config.load_config`).
        backend: the joints to drive (``SimBackend``, ``DynamixelBackend``, ...).
        robot: the kinematic model; loaded from ``config.urdf`` when omitted.
        clock: monotonic clock [s]. A :class:`ManualClock` makes the loop run as fast
            as it can on simulated time (tests, simulations).
        ticker: the tick source; by default a precise one (:func:`precise_ticker`) at
            ``config.rate_hz`` (or a :class:`SteppedTicker` on a ``ManualClock``).
        logger: where to log; ``hilbot.driver.runtime.loop`` by default.
        pace_gc: run the garbage collector only in the idle time between cycles (see
            :mod:`hilbot.driver.runtime.ticker`); by default on real time, off on a ``ManualClock``.
    """

    def __init__(
        self,
        config: RobotConfig,
        backend: Backend,
        *,
        robot: Any = None,
        clock: Callable[[], float] = time.perf_counter,
        ticker: Ticker | None = None,
        logger: logging.Logger | None = None,
        pace_gc: bool | None = None,
    ) -> None:
        if robot is None:
            from hilbot.driver.runtime.validation import load_robot

            robot = load_robot(config.urdf)
        self.config = config
        self.robot = robot
        self._backend = backend
        self._clock = clock
        self._log = logger or logging.getLogger(__name__)
        self.period = 1.0 / config.rate_hz
        if ticker is None:
            ticker = (
                SteppedTicker(self.period, clock)
                if isinstance(clock, ManualClock)
                else precise_ticker(self.period, clock)
            )
        self._ticker = ticker
        if pace_gc is None:
            pace_gc = not isinstance(clock, ManualClock)
        self._gc = GcPacer() if pace_gc else None
        self.joint_names: tuple[str, ...] = tuple(backend.joint_names)
        self._index = {name: i for i, name in enumerate(self.joint_names)}
        safety = config.safety
        urdf = {}
        for name in self.joint_names:
            joint = robot.joints[name]
            lower, upper = joint.bounds()
            velocity = joint.limit.velocity if joint.limit is not None else np.inf
            urdf[name] = (lower, upper, velocity if velocity > 0 else np.inf)
        self.limits = effective_limits(
            self.joint_names,
            urdf,
            soft_limits=safety.soft_limits,
            margin=safety.soft_limit_margin,
            velocity=safety.velocity_limit,
        )
        self.max_delta = _per_joint(safety.max_delta_per_cycle, self.joint_names, 0.02)
        step_velocity = np.minimum(self.limits.velocity, self.max_delta / self.period)  # (n,)
        self.acceleration_limits = _per_joint(
            safety.acceleration_limit,
            self.joint_names,
            None,
            step_velocity * ACCELERATION_PER_VELOCITY,
        )
        self.safety = SafetyLayer(
            self.limits, self.max_delta, self.period, acceleration=self.acceleration_limits
        )
        self.motion = _motion_layer(config, self.limits, step_velocity, self.acceleration_limits)
        self._baseline: Any = None  # the planner of motion.planner linear or ruckig
        # one stream per target slot (the joints' and each chain's): samples -> reference
        self._streams: dict[str, StreamReference] = {}
        self._fed: dict[str, int] = {}  # slot -> sequence number of the last sample fed
        self._pose_forms: dict[str, PoseForm] = {}
        # chain -> its joint reference: position, velocity, acceleration (smoothed)
        self._chain_refs: dict[str, tuple[NDArray[np.float64], ...]] = {}
        self._last_step = np.zeros(len(self.joint_names))  # the last command's step [rad]
        self._guard = _reading_guard(robot, self.joint_names, self.limits)
        ik_robot = limited_robot(robot, self.limits) if config.chains else robot
        self._chains = {
            c.name: ChainRunner(ik_robot, c, self.joint_names, 0.02) for c in config.chains
        }
        self.chains: tuple[str, ...] = tuple(self._chains)
        self._targets = TargetSlots(self.chains, self.joint_names, clock)
        self._modes = ModeMachine()
        self.stats = StatsRecorder(config.rate_hz)
        n = len(self.joint_names)
        self._command: NDArray[np.float64] = np.zeros(n)
        self._home: NDArray[np.float64] | None = None
        self._state: JointState | None = None
        # faults, and the safe state they call for: the e-stop or fault hold, torque off
        self._faults = FaultHandler(
            backend=backend,
            modes=self._modes,
            stats=self.stats,
            limits=self.limits,
            safety=safety,
            clock=clock,
            log=self._log,
            begin_stop=self._begin_stop,
            drop_targets=self._drop_targets,
        )
        self._watchdog_tripped = False
        self._deadline = 0.0  # the newest tick's deadline [s]: the motion layer's time
        self._origin: float | None = None  # the first tick's deadline [s]
        # chain -> the IK problems reported since it last solved, by kind
        self._ik_problems: dict[str, dict[tuple[str, str], _IkProblem]] = {}
        # (lo, hi) box of the goals that may be on the bus after writes that raised (a write
        # that raised may still have gone out); None: the last command is what is on the bus.
        self._possible: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None
        self._listeners: list[CycleListener] = []
        # per-stage times of the cycle under way [s] (see stats.STAGES), the listeners' of the
        # previous cycle, and the process's CPU time at the previous cycle's start
        self._stage_times = [0.0] * len(STAGES)
        self._listen_time = 0.0
        self._cpu_mark: float | None = None
        self._record = CycleRecord(desired=np.zeros(n), command=np.zeros(n))
        # commands waiting for the loop, each with the futures of its callers (an e-stop
        # queued behind another one joins it); how many of them are e-stops
        self._queue: deque[tuple[Command, list[asyncio.Future[None]]]] = deque()
        self._estops_queued = 0
        self._cycle_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._entered = False
        #: The shutdown tried to turn torque off and could not (the servos may still hold).
        self.torque_left_on = False

    # -- lifecycle --------------------------------------------------------------------------
    async def __aenter__(self) -> Self:
        if self._entered:
            raise RuntimeError("a Runtime is not reentrant")
        self._entered = True
        await self._backend.__aenter__()
        try:
            missing = set(self.config.joint_names) - set(self.joint_names)
            if missing:
                raise DriverError(f"the backend does not drive joints: {sorted(missing)}")
            state = await self._backend.read()
            self._state = state
            self._guard.trust(state.position, self._clock())
            self._command = state.position.astype(np.float64).copy()  # hold: goal = present
            self.motion.hold(self._command)
            self._faults.check_hardware(state)
            if self._gc is not None:
                self._gc.start()
            self._ticker.start()
            self._task = asyncio.create_task(
                self._loop(), name=f"hilbot-runtime-{self.config.name}"
            )
        except BaseException as exc:
            if self._gc is not None:
                self._gc.stop()
            await self._backend.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._log.info("runtime %s started at %.0f Hz", self.config.name, self.config.rate_hz)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        loop_error: BaseException | None = None
        task, self._task = self._task, None
        if task is not None:
            if task.done():
                loop_error = None if task.cancelled() else task.exception()
            else:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except Exception as err:
                    loop_error = err
        self._ticker.stop()
        if self._gc is not None:
            self._gc.stop()
        try:
            await self._shutdown()
        finally:
            await self._backend.__aexit__(exc_type, exc, tb)
            self._fail_waiters(RuntimeError("the runtime stopped"))
        if loop_error is not None and exc is None:
            raise loop_error

    async def _shutdown(self) -> None:
        """Hold and (per config) disable torque."""
        if not self.config.safety.torque_off_on_shutdown:
            self._log.info("shutdown: holding, torque left on (torque_off_on_shutdown: false)")
            return
        for attempt in range(1, SHUTDOWN_TORQUE_TRIES + 1):
            try:
                await self._backend.set_torque(False)
                break
            except Exception as err:  # a bus error, or anything else: the same retries
                if attempt == SHUTDOWN_TORQUE_TRIES:
                    # Nothing more can be done from here; the servo-side bus watchdog (where
                    # the firmware has one) stops the servos once the host falls silent.
                    self._log.error(
                        "shutdown: could not disable torque (%d attempts): %s", attempt, err
                    )
                    self.torque_left_on = True
                    return
                # One lost reply (often the read-back of a torque write that did go out)
                # must not end the shutdown's only chance to turn torque off.
                self._log.warning("shutdown: disabling torque failed, retrying: %s", err)
        self._modes.disable()
        self._log.info("shutdown: torque off")

    async def wait_stopped(self) -> None:
        """Return when the control loop ends; raises the error that ended it."""
        if self._task is None:
            raise RuntimeError("the runtime is not running")
        await asyncio.shield(self._task)

    # -- public API ---------------------------------------------------------------------------
    @property
    def mode(self) -> Mode:
        """The current mode."""
        return self._modes.mode

    def set_target(self, chain: str, target: object, *, stamp: float | None = None) -> None:
        """Set the newest pose target of ``chain``; parsed now, used from the next cycle.

        ``target`` is parsed once, here, into a ``hilbot.kinematics.ik.Target`` by the IK
        package's own tolerances (``hilbot.kinematics.tolerances``); the loop solves it as
        given, so a target accepted here is never refused later. ``stamp`` is the sender's
        sample time [s, its own clock], where it has one: the motion layer places the
        target on the stream's timeline by it (else by arrival).

        Raises:
            UnknownChain: no chain of that name.
            InvalidTarget: the target has the wrong shape, is not finite, lies beyond
                ``MAX_COORDINATE_M`` or has a malformed orientation (a rotation that is
                not one, a quaternion that is not unit length); ``reason`` is the teleop
                reject reason (``invalid`` or ``non_finite``).
        """
        self._targets.set_pose(chain, target, stamp)
        self._home = None

    def set_joint_targets(
        self, positions: Mapping[str, float], *, stamp: float | None = None
    ) -> None:
        """Set the newest joint-space targets (merged with earlier joint targets).

        ``stamp``: the sender's sample time [s], as for :meth:`set_target`.

        Raises:
            UnknownJoint: a joint the robot does not drive.
            InvalidTarget: a value that is not a finite number or lies beyond
                ``MAX_JOINT_VALUE``; ``reason`` as for ``set_target``.
        """
        self._targets.set_joints(positions, stamp)
        self._home = None

    def clear_target(self, chain: str) -> None:
        """Drop the pose target of ``chain``: from the next cycle its joints hold the command.

        The chain stays where its last command put it (no motion, no jump), and its
        stream no longer counts for the watchdog. Joint targets of the chain's joints,
        which its pose target overrode, are dropped too, so they cannot take over and
        move the chain. Like ``set_target``, it ends a ``home`` move. A later
        ``set_target`` resumes tracking.

        Raises:
            UnknownChain: no chain of that name.
        """
        runner = self._chains.get(chain)
        if runner is None:
            raise UnknownChain(chain, self.chains)
        self._targets.clear_pose(chain)
        self._targets.clear_joints(runner.joints)
        self._reset_streams([chain, JOINTS])
        self._home = None

    def expire_target(self, chain: str) -> None:
        """Let the pose target of ``chain`` count as stale from now, as the watchdog finds it.

        For replays: where the original run's watchdog found a stream stale (its timing
        was the host's), the replay makes it stale in the same cycle. Unlike
        :meth:`clear_target`, the joint targets and the stream stay as they are.
        """
        if chain not in self._chains:
            raise UnknownChain(chain, self.chains)
        self._targets.expire(chain)

    def expire_joint_targets(self) -> None:
        """Let the joint targets count as stale from now, as the watchdog finds them.

        The joint-space twin of :meth:`expire_target`, for replays.
        """
        self._targets.expire(JOINTS)

    def clear_joint_targets(self, joints: Iterable[str] | None = None) -> None:
        """Drop the joint targets of ``joints`` (all when ``None``); those joints hold.

        A joint that a chain with a pose target drives keeps following that chain.
        Like ``set_joint_targets``, it ends a ``home`` move.

        Raises:
            UnknownJoint: a joint the robot does not drive (nothing is cleared).
        """
        self._targets.clear_joints(joints)
        self._reset_streams([JOINTS])
        self._home = None

    async def command(self, cmd: Command | str) -> None:
        """Run a lifecycle command between two cycles and wait for it to finish.

        An e-stop takes effect before the next cycle. One sent while the last command
        queued is an e-stop joins it (it is one e-stop, however many ask); one sent
        while the e-stop is in effect changes nothing and costs no bus traffic.

        Raises:
            RuntimeStateError: the command is not allowed in the current mode.
            LimitViolation: ``enable`` while a joint is far outside its limits.
            ValueError: not a known command.
        """
        cmd = Command(cmd)
        if self._task is None or self._task.done():
            raise RuntimeError("the runtime is not running")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._queue
        if cmd is Command.ESTOP and queue and queue[-1][0] is Command.ESTOP:
            queue[-1][1].append(done)
        else:
            queue.append((cmd, [done]))
            self._estops_queued += cmd is Command.ESTOP
        await done

    def state(self) -> RuntimeState:
        """A frozen snapshot of mode, joints, poses, faults, clamps and loop stats."""
        names = self.joint_names
        command = dict(zip(names, self._command.tolist(), strict=True))
        poses: dict[str, NDArray[np.float64]] = {}
        if self._state is not None:
            measured = self._state.positions()
            for name, runner in self._chains.items():
                try:
                    poses[name] = runner.pose(measured)
                except Exception as err:  # a snapshot never fails on FK
                    self._log.debug("fk of chain %s failed: %s", name, err)
        return RuntimeState(
            mode=self._modes.mode,
            joints=self._state,
            command=command,
            poses=poses,
            faults=tuple(self._faults.active.values()),
            fault_log=tuple(self._faults.fault_log),
            clamps=tuple(self.safety.events),
            clamp_counts=dict(self.safety.counts),
            watchdog_tripped=self._watchdog_tripped,
            homing=self._home is not None,
            stats=self.stats.snapshot(),
            glitches={names[j]: int(c) for j, c in enumerate(self._guard.counts.tolist()) if c},
            last_stop=self.motion.last_stop,
            velocity=dict(zip(names, self.motion.velocity.tolist(), strict=True)),
        )

    def add_cycle_listener(self, listener: CycleListener) -> None:
        """Call ``listener(record)`` synchronously at the end of every cycle.

        Keep it cheap and free of I/O: it runs inside the control loop. The record is
        reused: copy what you keep.
        """
        self._listeners.append(listener)

    def remove_cycle_listener(self, listener: CycleListener) -> None:
        """Stop calling ``listener``."""
        self._listeners.remove(listener)

    async def wait_cycles(self, n: int = 1) -> None:
        """Wait until ``n`` more cycles have run."""
        if self._task is None or self._task.done():
            raise RuntimeError("the runtime is not running")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._cycle_waiters.append((self.stats.cycles + n, done))
        await done

    # -- the loop ---------------------------------------------------------------------------
    async def _loop(self) -> None:
        """Run cycles until cancelled; no exception ends it (each one faults, see above)."""
        pacer, clock, period = self._gc, self._clock, self.period
        while True:
            try:
                tick = await self._ticker.wait()
            except Exception as err:  # a broken tick source: fault, and pace by sleeping
                self._faults.internal_fault("ticker", err)
                await asyncio.sleep(period)
                self.stats.count_unrecorded()
                self._wake_waiters()
                continue
            cycles = self.stats.cycles
            try:
                self.stats.overruns += tick.skipped
                if self._queue:
                    await self._run_queued()
                self._stage_times[5] = tick.spun
                await self._cycle(tick.deadline, tick.woke)
            except Exception as err:
                self._faults.internal_fault("control loop", err)
            if self.stats.cycles == cycles:
                self.stats.count_unrecorded()
            self._wake_waiters()
            if pacer is not None:
                pacer.idle(tick.deadline + period - clock())

    async def _run_queued(self) -> None:
        """Run up to ``COMMANDS_PER_CYCLE`` queued commands, and always up to the last e-stop."""
        queue, ran = self._queue, 0
        while queue and (ran < COMMANDS_PER_CYCLE or self._estops_queued):
            cmd, waiters = queue.popleft()
            self._estops_queued -= cmd is Command.ESTOP
            await self._run_command(cmd, waiters)
            ran += 1

    async def _cycle(self, deadline: float, woke: float) -> None:
        clock = self._clock
        rec = self._record
        # the CPU time of the whole process since the previous cycle began: every thread,
        # the wait, telemetry and other tasks, not only the sections timed below
        cpu_now = time.process_time()
        cpu = None if self._cpu_mark is None else cpu_now - self._cpu_mark
        self._cpu_mark = cpu_now
        stages = self._stage_times
        stages[1] = stages[2] = 0.0
        rec.cycle = self.stats.cycles + 1
        rec.deadline, rec.woke = deadline, woke
        if self._origin is None:
            self._origin = deadline
        # whole microseconds since the first tick: the same numbers on a replay's clock
        self._deadline = round((deadline - self._origin) * 1e6) * 1e-6
        rec.ik.clear()
        rec.targets.clear()
        rec.written = False
        rec.read_time = rec.ik_time = rec.write_time = 0.0
        clamps_before = self.safety.total_clamps
        t_read = clock()
        state = await self._read()
        rec.read_time = clock() - t_read
        rec.state = state
        torque_tried = self._faults.torque_off_pending
        if torque_tried:
            await self._faults.torque_off()
        await self._command_stage(rec, state)
        if self._faults.torque_off_pending and not torque_tried:  # a fault this cycle: act now
            await self._faults.torque_off()
        rec.mode = self._modes.mode
        new_clamps = self.safety.total_clamps - clamps_before
        rec.clamps = tuple(self.safety.events)[-new_clamps:] if new_clamps else ()
        self.stats.clamps = self.safety.total_clamps
        end = clock()
        rec.cycle_time = end - woke
        stages[0], stages[3], stages[4] = rec.read_time, rec.write_time, self._listen_time
        self.stats.record(
            deadline,
            woke - deadline,
            rec.cycle_time,
            rec.read_time + rec.write_time,
            rec.ik_time,
            cpu=cpu,
            stages=stages,
        )
        listen = clock()
        for listener in self._listeners:
            try:
                listener(rec)
            except Exception as err:
                name = getattr(listener, "__qualname__", type(listener).__qualname__)
                self._faults.internal_fault(f"cycle listener {name}", err)
        self._listen_time = clock() - listen

    async def _command_stage(self, rec: CycleRecord, state: JointState | None) -> None:
        """Decide this cycle's goal and write it: tracking, a controlled stop, or a hold."""
        if self._modes.mode is Mode.ARMED and state is not None:
            t0 = self._clock()
            try:
                desired = self._desired(rec)
            except Exception as err:  # not a KinematicsError: ChainRunner passes those on
                self._faults.internal_fault("solver", err)
            else:
                self._stage_times[1] = self._clock() - t0
                await self._write_safe(desired, rec)
                return
        mode = self._modes.mode
        faults = self._faults
        if faults.stopping and mode in (Mode.ESTOPPED, Mode.FAULTED):
            # the controlled stop of an e-stop or a fault: from the command, never a reading
            stops = self.motion.stops
            desired = self.motion.step(None, self._motion_time())
            if await self._write_safe(desired, rec) and self.motion.stops != stops:
                self._stopped()
        elif mode is Mode.ESTOPPED and faults.hold is not None and state is not None:
            await self._write_safe(faults.hold, rec)
        else:
            if state is not None and mode is not Mode.ESTOPPED and faults.hold is None:
                self._command = state.position.astype(np.float64).copy()  # follows the hand
                self.motion.hold(self._command)
                self._last_step[:] = 0.0
                self._possible = None  # goals written before no longer bound the next one
            rec.desired[:] = self._command
            rec.command[:] = self._command

    def _stopped(self) -> None:
        """A controlled stop came to rest: report it, and hold there (or cut torque)."""
        report = self.motion.last_stop
        if report is not None:
            line = report.describe(self.joint_names)
            if report.within_bounds:
                self._log.info("%s", line)
            else:
                self._log.warning("%s: beyond the configured limits' bound", line)
        if self._faults.stopping:
            self._faults.stop_done(self._command)

    def _begin_stop(self, reason: str) -> None:
        """A controlled stop of the commanded motion begins (e-stop, fault, disable)."""
        self.motion.begin_stop(reason, self._motion_time())
        self._reset_streams()

    async def _write_safe(self, desired: NDArray[np.float64], rec: CycleRecord) -> bool:
        """Pass ``desired`` through the safety layer and write it; whether it was written.

        A safety layer that raises means no write at all this cycle (never an unclamped
        one): the servos keep the last goal, which the safety layer did pass.
        """
        t0 = self._clock()
        try:
            command = self.safety.apply(
                desired,
                self._command,
                rec.cycle,
                possible=self._possible,
                last_step=self._last_step,
            )
            rec.desired[:] = desired
            rec.command[:] = command
        except Exception as err:
            self._faults.internal_fault("safety layer", err)
            return False
        finally:
            self._stage_times[2] = self._clock() - t0
        rec.written = await self._write(command, rec)
        if rec.written:
            self._last_step = command - self._command
            self._command = command
            self._possible = None
            self.motion.commit(command, self._motion_time())
        else:
            self._widen_possible(command)
        return rec.written

    def _widen_possible(self, command: NDArray[np.float64]) -> None:
        """A write of ``command`` raised: it may be on the bus, or the previous goal may."""
        if self._possible is None:
            lo, hi = self._command.copy(), self._command.copy()
        else:
            lo, hi = self._possible
        self._possible = (np.minimum(lo, command), np.maximum(hi, command))

    def _desired(self, rec: CycleRecord) -> NDArray[np.float64]:
        """This cycle's command toward the home pose, the joint targets and chain targets.

        The motion layer turns each target stream into a reference (interpolated behind
        now, with its velocity and curvature) and steps the commanded state toward it
        within the velocity, acceleration and jerk limits; pose targets are solved by IK
        on the interpolated pose every cycle, so the tool follows the target's path. A
        stale stream (the watchdog) brakes its joints to rest. ``motion.enabled: false``
        hands the newest targets to the safety layer as they are.
        """
        if self._baseline is not None or self.config.motion.planner == "off":
            return self._baseline_step(rec)
        motion = self.motion
        now = self._motion_time()
        wall = self._clock()  # the watchdog's time: how old a target really is
        n = len(self.joint_names)
        position = motion.position.copy()
        velocity = np.zeros(n)
        acceleration = np.zeros(n)
        active = np.zeros(n, dtype=bool)
        if self._home is not None:
            rec.targets["home"] = self._home
            reference = Reference(self._home, velocity, acceleration, np.ones(n, dtype=bool))
            return motion.step(reference, now)
        joints, chains = self._fresh_targets(rec, wall)
        if joints is not None:
            ref = self._stream_at(JOINTS, joints, now)
            if ref is not None:
                mask = np.isfinite(ref[0])
                position[mask] = ref[0][mask]
                velocity[mask] = ref[1][mask]
                acceleration[mask] = ref[2][mask]
                active |= mask
        for name, runner, slot in chains:
            solved = self._chain_reference(name, runner, slot, now, rec)
            if solved is not None:
                idx = runner.indices
                position[idx], velocity[idx], acceleration[idx] = solved
                active[idx] = True
        return motion.step(Reference(position, velocity, acceleration, active), now)

    def _fresh_targets(
        self, rec: CycleRecord, now: float
    ) -> tuple[Any, list[tuple[str, ChainRunner, Any]]]:
        """The joint slot and the chain slots younger than the watchdog timeout at ``now``.

        Each is noted in ``rec.targets``; a stale one trips the watchdog (its joints then
        stop: no reference, or no new desired value).
        """
        timeout = self.config.safety.watchdog_timeout or math.inf
        stale = False
        joints = self._targets.get(JOINTS)
        if joints is not None and now - joints.received > timeout:
            joints, stale = None, True
        if joints is not None:
            rec.targets[JOINTS] = joints.value
        chains = []
        for name, runner in self._chains.items():
            slot = self._targets.get(name)
            if slot is None:
                continue
            if now - slot.received > timeout:
                stale = True
                continue
            rec.targets[name] = slot.value
            chains.append((name, runner, slot))
        self._note_watchdog(stale, timeout)
        return joints, chains

    def _baseline_step(self, rec: CycleRecord) -> NDArray[np.float64]:
        """``motion.planner`` off, linear or ruckig: the newest targets, as that planner moves."""
        desired = self._desired_direct(rec)
        if self._baseline is None:
            return desired
        return np.asarray(self._baseline.step(desired, self._motion_time()), dtype=np.float64)

    def _new_baseline(self, start: NDArray[np.float64]) -> Any:
        from hilbot.driver.runtime.planners import LinearPlanner, RuckigPlanner

        planner = self.config.motion.planner
        if planner == "linear":
            return LinearPlanner(start)
        if planner == "ruckig":
            return RuckigPlanner(start, self.motion.limits, self.period)
        return None

    def _stream_at(
        self, name: str, slot: Any, now: float
    ) -> tuple[NDArray[np.float64], ...] | None:
        """The reference of slot ``name`` at ``now``, after feeding it the slot's newest sample."""
        stream = self._streams.get(name)
        if slot.seq != self._fed.get(name):
            self._fed[name] = slot.seq
            if name == JOINTS:
                value = np.full(len(self.joint_names), np.nan)
                for joint, target in slot.value.items():
                    value[self._index[joint]] = target
            else:
                previous = stream.newest() if stream is not None else None
                form, value = flatten_pose(slot.value, previous)
                if self._pose_forms.get(name) is not form:  # a new form: a new stream
                    self._pose_forms[name] = form
                    stream = None
            if stream is None or stream.size != value.size:
                stream = StreamReference(
                    value.size,
                    latency=self.config.motion.latency_of(name),
                    max_extrapolation=self.config.motion.max_extrapolation,
                )
                self._streams[name] = stream
            stream.add(value, now, slot.stamp)  # seen this cycle: the loop's own timeline
        return None if stream is None else stream.at(now)

    def _chain_reference(
        self, name: str, runner: ChainRunner, slot: Any, now: float, rec: CycleRecord
    ) -> tuple[NDArray[np.float64], ...] | None:
        """The chain's joint reference (position, velocity, acceleration): IK of the stream."""
        ref = self._stream_at(name, slot, now)
        if ref is None:
            return None
        pose, pose_velocity = ref[0], ref[1]
        previous = self._chain_refs.get(name)
        moving = bool(np.any(pose_velocity != 0.0))
        if (
            previous is not None
            and not moving
            and runner.last_reached
            and not runner.needs_solve(slot.seq)
        ):
            return previous[0], np.zeros_like(previous[0]), np.zeros_like(previous[0])
        seed = self.motion.position.copy()
        if previous is not None:
            seed[runner.indices] = previous[0]  # continue the reference's own branch
        target = rebuild_pose(self._pose_forms[name], pose)
        values = self._solve(runner, target, slot.seq, seed, rec, STREAM_SOLVE)
        if values is None:
            return None
        velocity = np.zeros_like(values)
        acceleration = np.zeros_like(values)
        if previous is not None and moving:
            velocity = (values - previous[0]) / self.period
            # the acceleration fed forward: differences of IK solutions are rough where the
            # interpolated pose changes segment, so it is smoothed over CHAIN_SMOOTHING
            share = self.period / (CHAIN_SMOOTHING + self.period)
            raw = (velocity - previous[1]) / self.period
            acceleration = previous[2] + share * (raw - previous[2])
        self._chain_refs[name] = (values, velocity, acceleration)
        return values, velocity, acceleration

    def _motion_time(self) -> float:
        """The motion layer's clock [s]: this cycle's tick deadline.

        Target streams are timed by the deadline of the cycle that first saw each target,
        not by a clock read mid-cycle: the timeline follows real time (a skipped tick is
        time that passed) and is what a replay reproduces from the recorded deadlines, so
        a recording replays to the same commands.
        """
        return self._deadline

    def _note_watchdog(self, stale: bool, timeout: float) -> None:
        if stale and not self._watchdog_tripped:
            self.stats.watchdog_trips += 1
            self._log.warning("watchdog: no fresh target for %.3f s, stopping", timeout)
        self._watchdog_tripped = stale

    def _reset_streams(self, names: Iterable[str] | None = None) -> None:
        """Forget the target streams of ``names`` (all when ``None``): the next sample restarts."""
        for name in list(self._streams) if names is None else names:
            self._streams.pop(name, None)
            self._fed.pop(name, None)
            self._chain_refs.pop(name, None)

    def _desired_direct(self, rec: CycleRecord) -> NDArray[np.float64]:
        """The newest targets as they are (``motion.enabled: false``)."""
        desired = self._command.copy()
        if self._home is not None:
            desired[:] = self._home
            rec.targets["home"] = self._home
            return desired
        joints, chains = self._fresh_targets(rec, self._clock())
        if joints is not None:
            for name, value in joints.value.items():
                desired[self._index[name]] = value
        for _name, runner, slot in chains:
            if not runner.needs_solve(slot.seq):
                # Same target, already solved: keep heading for that solution (the safety
                # layer may still be stepping towards it).
                if runner.last_q is not None:
                    desired[runner.indices] = runner.last_q
                continue
            values = self._solve(runner, slot.value, slot.seq, self._command, rec)
            if values is not None:
                desired[runner.indices] = values
        return desired

    def _solve(
        self,
        runner: ChainRunner,
        target: Any,
        seq: int,
        seed: NDArray[np.float64],
        rec: CycleRecord,
        overrides: Mapping[str, Any] | None = None,
    ) -> NDArray[np.float64] | None:
        """Solve a chain's target, timed and recorded; problems reported once per kind."""
        t0 = self._clock()
        values, result, _ = runner.solve(target, seq, seed, overrides)
        rec.ik_time += self._clock() - t0
        rec.ik[runner.name] = result
        if isinstance(result, Exception):
            self.stats.ik_failures += 1
            self._ik_failed(runner, result)
        else:
            self._ik_solved(runner)
        return values

    def _ik_failed(self, runner: ChainRunner, err: Exception) -> None:
        """Report a chain's IK problem once, not per cycle nor per target.

        Problems are told apart by their kind (the error type and solver status), not by
        their numbers: a stream of unreachable targets, each a little further off, is one
        problem, logged (and kept in the fault log) once until the chain solves again,
        even if another kind comes and goes meanwhile (each kind is reported once). How
        often each recurred is logged when the chain solves again.
        """
        kind = (type(err).__name__, str(getattr(err, "status", "")))
        problems = self._ik_problems.setdefault(runner.name, {})
        problem = problems.get(kind)
        if problem is not None:
            problem.repeats += 1
            problem.last = err
            return
        problems[kind] = _IkProblem(kind, err)
        runner.last_error = f"chain {runner.name}: {err}"
        self._faults.report(FaultKind.IK, None, runner.last_error, active=False)

    def _ik_solved(self, runner: ChainRunner) -> None:
        """The chain solved: say how often each problem since its last solve recurred."""
        runner.last_error = None
        problems = self._ik_problems.pop(runner.name, None)
        for problem in (problems or {}).values():
            if problem.repeats:
                self._log.warning(
                    "fault (ik): chain %s: the same problem (%s) %d more time%s; the last: %s",
                    runner.name,
                    problem.kind[0],
                    problem.repeats,
                    "" if problem.repeats == 1 else "s",
                    problem.last,
                )

    async def _read(self) -> JointState | None:
        try:
            state = await self._backend.read()
            self._check_state(state)
        except BUS_ERRORS as err:
            self._faults.bus_failure("read", err)
            return None
        except Exception as err:
            self._faults.internal_fault("backend read", err)
            return None
        self._faults.bus_ok()
        state = self._check_reading(state)
        self._state = state
        try:
            self._faults.check_hardware(state)
            if state.bus_watchdog_tripped or self._faults.bus_watchdog_faulted:
                self._faults.check_bus_watchdog(state)
        except Exception as err:
            self._faults.internal_fault("fault check", err)
        return state

    def _check_reading(self, state: JointState) -> JointState:
        """The state with glitched positions replaced by their last trusted values."""
        checked = self._guard.check(state.position, self._clock())
        if not checked.glitched:
            return state
        self.stats.glitches += len(checked.glitched)
        for j in checked.repeated:
            joint = self.joint_names[j]
            if (FaultKind.GLITCH, joint) in self._faults.active:
                continue
            detail = (
                f"{self._guard.fault_count} implausible readings within "
                f"{self._guard.fault_window:g} s (moved faster than the joint can): check "
                "the servo's encoder, cabling and ids"
            )
            if self._modes.mode is Mode.ARMED:
                self._faults.report(FaultKind.GLITCH, joint, detail)
                self._faults.enter_safe_state()
            else:
                self._faults.report(FaultKind.GLITCH, joint, detail, active=False)
        return dataclasses.replace(state, position=checked.position)

    def _check_state(self, state: JointState) -> None:
        """Refuse a joint state the loop cannot use (a backend bug): wrong size, NaN, inf."""
        position = np.asarray(state.position, dtype=np.float64)
        if position.shape != (len(self.joint_names),) or not np.isfinite(position).all():
            raise ValueError(
                f"the backend read positions of shape {position.shape} "
                f"(expected ({len(self.joint_names)},), finite): {position.tolist()}"
            )

    async def _write(self, command: NDArray[np.float64], rec: CycleRecord) -> bool:
        t0 = self._clock()
        try:
            await self._backend.write(dict(zip(self.joint_names, command.tolist(), strict=True)))
        except DataLimitError as err:
            self._faults.limit_fault(err)
            if self._faults.stopping:
                # The servo refuses goals past its own limit register: a stop that travels on
                # would be refused too. The last goal it took is the command: hold it there
                # (the servo's own profile brakes onto it).
                self.motion.hold(self._command)
                self._faults.stop_done(self._command)
            return False
        except BUS_ERRORS as err:
            self._faults.bus_failure("write", err)
            return False
        except Exception as err:
            self._faults.internal_fault("backend write", err)
            return False
        finally:
            rec.write_time = self._clock() - t0
        return True

    def _drop_targets(self) -> None:
        """Drop every target and the ``home`` move: nothing is tracked until new targets."""
        self._targets.clear()
        self._reset_streams()
        self._home = None

    def _wake_waiters(self) -> None:
        if not self._cycle_waiters:
            return
        cycles = self.stats.cycles
        keep = []
        for target, fut in self._cycle_waiters:
            if cycles >= target:
                if not fut.done():
                    fut.set_result(None)
            else:
                keep.append((target, fut))
        self._cycle_waiters = keep

    def _fail_waiters(self, err: BaseException) -> None:
        for _, fut in self._cycle_waiters:
            if not fut.done():
                fut.set_exception(err)
        self._cycle_waiters = []
        while self._queue:
            _, waiters = self._queue.popleft()
            for fut in waiters:
                if not fut.done():
                    fut.set_exception(err)
        self._estops_queued = 0

    # -- commands -----------------------------------------------------------------------------
    async def _run_command(self, cmd: Command, waiters: list[asyncio.Future[None]]) -> None:
        handler = {
            Command.ENABLE: self._enable,
            Command.DISABLE: self._disable,
            Command.ESTOP: self._estop,
            Command.RESET: self._reset,
            Command.HOME: self._start_home,
            Command.REBOOT: self._reboot,
        }[cmd]
        try:
            await handler()
        except Exception as err:
            if not isinstance(err, EXPECTED_COMMAND_ERRORS):
                self._faults.internal_fault(f"command {cmd.value}", err)
            for done in waiters:
                if not done.done():
                    done.set_exception(err)
            return
        self._log.info("command %s done; mode %s", cmd.value, self._modes.mode.value)
        for done in waiters:
            if not done.done():
                done.set_result(None)

    async def _enable(self) -> None:
        if self._modes.mode is Mode.ARMED:
            return
        self._modes.require("enable", Mode.DISARMED)
        state = await self._consistent_read()
        self._state = state
        blocking = {j: f for j, f in state.faults.items() if f & DISARMING_ERRORS}
        if blocking:
            joint, flags = next(iter(blocking.items()))
            raise RuntimeStateError(
                "enable", "disarmed", f"joint {joint!r} reports {flags.describe()}; reboot it first"
            )
        entry, bad = self.safety.entry_command(state.position.astype(np.float64))
        if bad is not None:
            j = int(bad)
            raise LimitViolation(
                self.joint_names[j],
                float(state.position[j]),
                float(self.limits.lower[j]),
                float(self.limits.upper[j]),
            )
        self._targets.clear()  # a target sent before enabling must not make the arm jump
        self._home = None
        self._faults.enabling()  # an explicit enable overrides a pending torque off
        try:
            await self._arm_bus_watchdog()  # first: a tripped watchdog refuses the entry goal
            goal = dict(zip(self.joint_names, entry.tolist(), strict=True))
            await self._backend.write(goal)
            self._command = entry
            self.motion.reset(entry)
            self._baseline = self._new_baseline(entry)
            self._last_step[:] = 0.0
            self._reset_streams()
            self._possible = None
            await enable_holding(self._backend, goal)  # the verified pose, no fresh read
        except BaseException:
            # Torque may have come on before the failure: make sure it goes off (retried
            # every cycle), so a failed enable leaves the robot disarmed and limp.
            self._faults.torque_must_go_off()
            raise
        self._modes.enable()

    async def _consistent_read(self) -> JointState:
        """A joint state from reads that agree: never one unchecked reading.

        Reads until two in a row agree within what the joints can move between them
        (the glitch check's bound), at most ``ENTRY_READS`` times.

        Raises:
            RuntimeStateError: no two reads in a row agreed; names the joint.
        """
        guard, clock = self._guard, self._clock
        previous = await self._backend.read()
        before = clock()
        for _ in range(ENTRY_READS - 1):
            state = await self._backend.read()
            now = clock()
            if guard.agree(state.position, previous.position, now - before):
                guard.trust(state.position, now)
                return state
            previous, before = state, now
        j = int(np.argmax(np.abs(state.position - previous.position) - guard.allowed(0.0)))
        raise RuntimeStateError(
            "enable",
            "disarmed",
            f"joint {self.joint_names[j]!r} read {float(previous.position[j]):.4f} then "
            f"{float(state.position[j]):.4f}: no {ENTRY_READS} reads in a row agreed; check "
            "its encoder and the bus (hilbot doctor)",
        )

    async def _arm_bus_watchdog(self) -> None:
        timeout = self.config.safety.bus_watchdog
        arm = getattr(self._backend, "arm_watchdog", None)
        if timeout is None or arm is None:
            return
        disarm = getattr(self._backend, "disarm_watchdog", None)
        if disarm is not None:  # clears a watchdog that tripped while the loop was away
            await disarm()
        await arm(timeout)

    async def _clear_bus_watchdog(self) -> None:
        """Clear a tripped servo Bus Watchdog (torque is off); ``enable`` re-arms it."""
        state = self._state
        disarm = getattr(self._backend, "disarm_watchdog", None)
        if state is None or not state.bus_watchdog_tripped or disarm is None:
            return
        await disarm()
        self._state = await self._backend.read()
        self._faults.clear_bus_watchdog()

    async def _disable(self) -> None:
        await self._backend.set_torque(False)
        self._faults.torque_is_off()
        self._modes.disable()
        self._targets.clear()
        self._reset_streams()
        self._home = None

    async def _estop(self) -> None:
        in_effect = self._modes.mode is Mode.ESTOPPED
        self._modes.estop()
        self._targets.clear()
        self._home = None
        # hold: goal := present from now on; torque_off: latched first, then torque off,
        # retried every cycle if the backend refuses it (nothing more is written). An
        # e-stop in effect already keeps its hold goal and its torque off: no bus traffic.
        await self._faults.estop(in_effect=in_effect)

    async def _reset(self) -> None:
        mode = self._modes.mode
        if mode is Mode.FAULTED:
            state = await self._backend.read()
            self._state = state
            self._faults.check_hardware(state)
            latched = {j: f for j, f in state.faults.items() if f & DISARMING_ERRORS}
            if latched:
                joint, flags = next(iter(latched.items()))
                raise RuntimeStateError(
                    "reset",
                    mode.value,
                    f"joint {joint!r} still reports {flags.describe()}; reboot it",
                )
            self._faults.clear_active()
        if mode in (Mode.ESTOPPED, Mode.FAULTED):
            await self._backend.set_torque(False)
            self._faults.torque_is_off()
            await self._clear_bus_watchdog()
        self._modes.reset()
        self._faults.reset()

    async def _start_home(self) -> None:
        self._modes.require("home", Mode.ARMED)
        home = self._command.copy()
        for joint, value in self.config.home.items():
            if joint in self._index:
                home[self._index[joint]] = value
        self._home = home

    async def _reboot(self) -> None:
        self._modes.require("reboot", Mode.DISARMED, Mode.FAULTED, Mode.ESTOPPED)
        state = self._state
        joints = (
            list(state.faults) if state is not None and state.faults else list(self.joint_names)
        )
        await self._backend.reboot(joints)
        self._state = await self._backend.read()
        self._faults.check_hardware(self._state)
