"""Run a scenario on a runtime, cycle by cycle, recording every cycle.

The runner sends one target per control cycle (``set_target`` or
``set_joint_targets``, then ``wait_cycles(1)``), so a scenario's timeline is
counted in cycles: on a fake clock the run is deterministic, in real time it
is paced by the runtime's ticker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.bench.backends import BackendKind, BenchBackend, ClockKind, open_backend
from hilbot.driver.bench.errors import RunFailed, UnsupportedStep
from hilbot.driver.bench.recorder import Recorder
from hilbot.driver.bench.recording import Recording, RecordingHeader
from hilbot.driver.bench.scenario import (
    CartesianCircleStep,
    CartesianLineStep,
    CommandName,
    CommandStep,
    FaultAction,
    FaultStep,
    Scenario,
    Step,
    TeleopStep,
    check_names,
)
from hilbot.driver.bench.segments import StepContext, Target, build_segment
from hilbot.driver.bench.stream import RecordingStream
from hilbot.driver.bench.trace import check_traces
from hilbot.driver.progress import Progress
from hilbot.driver.runtime.config import RobotConfig
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.state import Command
from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.errors import HalError

_log = logging.getLogger(__name__)
_CARTESIAN = (CartesianLineStep, CartesianCircleStep, TeleopStep)


@dataclass(frozen=True)
class RunOptions:
    """How to run a scenario.

    Attributes:
        base_dir: where the scenario's relative file names point.
        config_path: the robot config as given on the command line (stored for replay).
        clock: ``"real"`` or ``"fake"`` (stored in the recording).
        progress: show a live status line (on a terminal).
        view_port: serve a live 3D view of the run on this port (``None``: none).
        record_to: stream the recording to this file's ``.partial`` folder during the run,
            so that a crash keeps it (``None``: memory only); the caller writes the file.
    """

    base_dir: Path = Path()
    config_path: str | None = None
    clock: str = "real"
    progress: bool = True
    view_port: int | None = None
    record_to: Path | None = None


def _open_view(runtime: Runtime, port: int | None, scene: Any = (), poses: Any = None) -> Any:
    """``--view``: a live view of the bench run on ``port`` (``None``: no view)."""
    if port is None:
        return None
    from hilbot.driver.view import start_view
    from hilbot.sim.mujoco_scene import scene_from_data

    view = start_view(runtime, port=port, scene=scene_from_data(list(scene)), poses=poses)
    runtime.add_cycle_listener(view.listener)
    return view


async def run_bench(
    config: RobotConfig,
    scenario: Scenario,
    kind: BackendKind,
    clock: ClockKind,
    options: RunOptions,
    *,
    seed: int = 0,
) -> Recording:
    """Open the backend, start a runtime on it, run ``scenario`` and return its recording.

    A failure to shut down cleanly (torque could not be disabled) after the scenario
    ran is logged as a failed ``shutdown`` command in the recording, which fails the
    run's ``command_failures_max`` check, instead of losing the recording.
    """
    recording: Recording | None = None
    stream = None if options.record_to is None else RecordingStream(options.record_to)
    needs_faults = any(isinstance(step, FaultStep) for step in scenario.steps)
    if needs_faults and kind is BackendKind.HARDWARE:  # refuse before a port opens
        index = next(i for i, s in enumerate(scenario.steps) if isinstance(s, FaultStep))
        raise UnsupportedStep(index, "fault", kind.value, "faults need --backend sim or virtual")
    try:
        async with (
            open_backend(
                kind, config, clock, seed=seed, faults=needs_faults, scene=scenario.scene
            ) as bench,
            Runtime(config, bench.backend, clock=bench.clock) as runtime,
        ):
            view = _open_view(
                runtime,
                options.view_port,
                scenario.scene,
                getattr(bench.backend, "scene_poses", None),
            )
            try:
                runner = ScenarioRunner(runtime, bench, scenario, options, stream=stream)
                recording = await runner.run()
            finally:
                if view is not None:
                    view.close()
    except (HalError, OSError) as exc:
        if recording is None:
            raise
        _log.error("shutdown after the scenario failed: %s", exc)
        cycle = int(recording["cycle"][-1]) + 1 if recording.n_cycles else 1
        recording.header.commands.append({"cycle": cycle, "command": "shutdown", "error": str(exc)})
    finally:
        if stream is not None:
            stream.close()  # the runtime has stopped: waiting for the writer harms no loop
    return recording


def check_supported(
    scenario: Scenario, bench: BenchBackend, runtime: Runtime, base_dir: Path = Path()
) -> dict[int, float]:
    """Refuse, before anything moves, steps the backend or config cannot perform.

    Returns:
        The duration [s] of each teleop step (its file sets it), by step index.

    Raises:
        ScenarioError: a joint or chain the robot does not have, or a teleop file
            that cannot be read.
        UnsupportedStep: a fault step without fault injection, or a joint-space step after
            a Cartesian one without a watchdog (the pose target would never be released).
    """
    check_names(scenario, runtime.joint_names, runtime.chains)
    teleop = check_traces(scenario, base_dir, runtime.chains)
    cartesian_seen = False
    for index, step in enumerate(scenario.steps):
        if isinstance(step, FaultStep) and bench.faults is None:
            raise UnsupportedStep(
                index, step.kind, bench.kind.value, "faults need --backend sim or virtual"
            )
        if isinstance(step, _CARTESIAN):
            cartesian_seen = True
        elif cartesian_seen and runtime.config.safety.watchdog_timeout is None:
            raise UnsupportedStep(
                index,
                step.kind,
                bench.kind.value,
                "a joint-space step after a Cartesian one needs safety.watchdog_timeout "
                "(the runtime releases a pose target only when it goes stale)",
            )
    return teleop


def planned_duration(scenario: Scenario, runtime: Runtime, teleop: dict[int, float]) -> float:
    """The scenario's duration [s] on ``runtime``: its steps, teleop files, pose releases."""
    total = scenario.duration(len(runtime.limits.names)) + sum(teleop.values())
    release = (runtime.config.safety.watchdog_timeout or 0.0) + 2.5 / runtime.config.rate_hz
    cartesian_seen = False
    for step in scenario.steps:
        if isinstance(step, _CARTESIAN):
            cartesian_seen = True
        elif cartesian_seen:
            total += release
            cartesian_seen = False
    return total


def _servo_ids(runtime: Runtime) -> dict[str, int]:
    return {s.joint: s.id for s in runtime.config.servos if s.shadow_of is None}


class ScenarioRunner:
    """Runs one scenario on an entered runtime and records it.

    Args:
        runtime: an entered runtime.
        bench: the backend it drives (for fault injection).
        scenario: the scenario.
        options: run options.
        stream: stream the recording to disk as it is made (see ``RunOptions.record_to``).
    """

    def __init__(
        self,
        runtime: Runtime,
        bench: BenchBackend,
        scenario: Scenario,
        options: RunOptions,
        stream: RecordingStream | None = None,
    ) -> None:
        teleop = check_supported(scenario, bench, runtime, options.base_dir)
        self.runtime = runtime
        self.bench = bench
        self.scenario = scenario
        self.options = options
        self.rate = float(runtime.config.rate_hz)
        header = RecordingHeader(
            joint_names=(),
            chain_names=(),
            rate_hz=self.rate,
            backend=bench.kind.value,
            config_path=options.config_path,
            config=runtime.config.model_dump(mode="json"),
            scenario=scenario.model_dump(mode="json"),
            clock=options.clock,
            sim=dict(bench.sim),
        )
        duration = planned_duration(scenario, runtime, teleop)
        capacity = int(duration * self.rate * 1.2) + 64
        self.recorder = Recorder(runtime, header, capacity=capacity, stream=stream).start()
        self._servo_of = _servo_ids(runtime)
        self._chain_joints = self._chain_joint_names()
        self._pose_active = False
        self._cycles_done = 0
        self._progress = Progress(
            int(duration * self.rate), enabled=None if options.progress else False
        )

    def _chain_joint_names(self) -> dict[str, frozenset[str]]:
        robot, out = self.runtime.robot, {}
        for chain in self.runtime.config.chains:
            path = robot.path_between(chain.source_link, chain.target_link)
            out[chain.name] = frozenset(j.name for j in path.joints)
        return out

    async def run(self) -> Recording:
        """Run every step, then return the recording."""
        index = 0
        try:
            for index, step in enumerate(self.scenario.steps):
                _log.info("step %d: %s", index, step.kind)
                await self._step(index, step)
            # One more cycle, so the effect of a closing command (e.g. disable) is recorded.
            await self._cycle("done")
        except Exception as err:  # the control loop stopped or crashed: keep what was recorded
            raise RunFailed(index, err, self.recorder.finish()) from err
        finally:
            self._progress.close()
        return self.recorder.finish()

    async def _step(self, index: int, step: Step) -> None:
        if isinstance(step, CommandStep):
            await self._command(step.command)
        if isinstance(step, FaultStep):
            self._inject(step, clear=False)
        if self._pose_active and not isinstance(step, _CARTESIAN):
            await self._release_pose_targets()
        ctx = self._context()
        segment = build_segment(step, ctx)
        silent = isinstance(step, CommandStep) and step.command is CommandName.HOME
        # Steps run on the runtime's clock, not on a count of cycles: a cycle that comes
        # late (or a tick skipped by an overrun) does not slow the scenario down. On a
        # fake clock every cycle is exactly one period, so the run stays deterministic.
        period = 1.0 / self.rate
        start = self.bench.clock()
        status = f"step {index + 1}/{len(self.scenario.steps)} {step.kind}"
        while (t := self.bench.clock() - start + period) < segment.duration + period / 2:
            if not silent:
                self._send(segment.at(min(t, segment.duration)), ctx)
            await self._cycle(status)
        if isinstance(step, FaultStep):
            self._inject(step, clear=True)
        self._pose_active = self._pose_active or isinstance(step, _CARTESIAN)

    async def _cycle(self, status: str) -> None:
        await self.runtime.wait_cycles(1)
        self._cycles_done += 1
        mode = self.runtime.mode.value
        self._progress.update(self._cycles_done, f"{status}  mode {mode}")

    async def _release_pose_targets(self) -> None:
        """Hold in joint space until the last pose target goes stale (the runtime drops it)."""
        timeout = self.runtime.config.safety.watchdog_timeout or 0.0
        ctx = self._context()
        hold = Target(joints=dict(ctx.joints))
        start, period = self.bench.clock(), 1.0 / self.rate
        while self.bench.clock() - start < timeout + 2.5 * period:
            self.runtime.set_joint_targets(dict(hold.joints or {}))
            await self._cycle("releasing the pose target")
        self._pose_active = False

    async def _command(self, name: CommandName) -> None:
        self.recorder.note_command(name.value)
        try:
            await self.runtime.command(Command(name.value))
        except Exception as err:  # the report shows it; the scenario goes on
            _log.warning("command %s failed: %s", name.value, err)
            self.recorder.header.commands[-1]["error"] = str(err)

    def _send(self, target: Target, ctx: StepContext) -> None:
        if target.chain is not None and target.position is not None:
            self.runtime.set_target(target.chain, target.position)
            # Joints outside the chain hold where they are (and keep the watchdog fed).
            others = {
                j: q for j, q in ctx.joints.items() if j not in self._chain_joints[target.chain]
            }
            if others:
                self.runtime.set_joint_targets(others)
        elif target.joints:
            self.runtime.set_joint_targets(dict(target.joints))

    def _context(self) -> StepContext:
        state = self.runtime.state()
        joints = dict(state.command)
        ee: dict[str, NDArray[np.float64]] = {}
        robot = self.runtime.robot
        for chain in self.runtime.config.chains:
            path = robot.path_between(chain.source_link, chain.target_link)
            ee[chain.name] = np.asarray(path.fk(path.q_from(joints))[:3, 3], dtype=np.float64)
        limits = self.runtime.limits
        return StepContext(
            joints=joints,
            ee=ee,
            limits={
                n: (float(lo), float(hi))
                for n, lo, hi in zip(limits.names, limits.lower, limits.upper, strict=True)
            },
            home=dict(self.runtime.config.home),
            base_dir=self.options.base_dir,
        )

    def _inject(self, step: FaultStep, *, clear: bool) -> None:
        assert self.bench.faults is not None  # checked in check_supported
        record = self.bench.faults(self._servo_of[step.joint])
        apply_fault(record, step.action, step.rate, clear=clear, offset=step.offset)
        note: dict[str, Any] = {"action": step.action.value, "joint": step.joint}
        note.update({"clear": True} if clear else {"rate": step.rate})
        if step.action is FaultAction.GLITCH and not clear:
            note["offset"] = step.offset
        self.recorder.note_fault(note)


def apply_fault(
    record: Any, action: FaultAction, rate: float, *, clear: bool, offset: float = 0.0
) -> None:
    """Set (or clear) one fault on a servo's ``ServoFaults`` record.

    Hardware errors latch in the servo until it is rebooted, as real firmware
    does: clearing them here only stops injecting new ones. A glitch moves the
    Present Position of a ``rate`` share of the replies by ``offset`` [rad].
    """
    match action:
        case FaultAction.DROP_REPLIES:
            record.drop_rate = 0.0 if clear else rate
        case FaultAction.CORRUPT:
            record.corrupt_rate = 0.0 if clear else rate
        case FaultAction.GLITCH:
            if clear:
                record.glitch(0.0, replies=0)
            else:
                record.glitch(offset, unit="rad", replies=None, rate=rate)
        case FaultAction.UNPLUG:
            if clear:
                record.replug()
            else:
                record.unplug()
        case FaultAction.OVERLOAD | FaultAction.OVERHEATING:
            if not clear:
                flag = HardwareErrorFlags[action.name]
                record.hardware_error = HardwareErrorFlags(record.hardware_error | flag)
