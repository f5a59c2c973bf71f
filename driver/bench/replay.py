"""Run a recording again on the simulator under a fake clock and compare the commands.

The replay feeds the runtime the same inputs, cycle by cycle: the lifecycle
commands (logged by the bench runner, or inferred from mode changes for a
``hilbot run --record`` file), the injected faults, and every new target the
original run received. The simulator starts where the original robot was. On
the simulator under a fake clock the whole stack is deterministic, so a bench
run replays to identical commands; a difference points at a change in the
code, the config or the solver settings (or, for a hardware recording, at what
the hardware did differently from the simulator).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import numpy as np

from hilbot.driver.bench.backends import ClockKind, make_clock, make_sim_backend
from hilbot.driver.bench.pose_targets import OrientationKind, join_pose_target
from hilbot.driver.bench.recorder import Recorder
from hilbot.driver.bench.recording import Recording, RecordingHeader
from hilbot.driver.bench.runner import apply_fault
from hilbot.driver.bench.scenario import FaultAction
from hilbot.driver.progress import Progress
from hilbot.driver.runtime.config import RobotConfig
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.state import Command
from hilbot.driver.runtime.ticker import ManualClock, ScheduledTicker
from hilbot.hal.backend import Backend, JointState

_log = logging.getLogger(__name__)

#: (mode before, mode after) -> the command that explains the change.
_TRANSITIONS = {
    ("disarmed", "armed"): "enable",
    ("armed", "disarmed"): "disable",
    ("estopped", "disarmed"): "reset",
    ("faulted", "disarmed"): "reset",
}


def inferred_commands(recording: Recording) -> list[dict[str, Any]]:
    """Lifecycle commands that explain the recorded mode changes (when none were logged).

    A change into ``estopped`` is an e-stop; a change into ``faulted`` is not a
    command (the replayed simulator has to fault by itself).
    """
    modes = recording.header.modes
    mode = recording["mode"]
    out: list[dict[str, Any]] = []
    previous = "disarmed"
    for row in range(recording.n_cycles):
        current = modes[int(mode[row])]
        if current != previous:
            command = "estop" if current == "estopped" else _TRANSITIONS.get((previous, current))
            if command is not None:
                out.append({"cycle": int(recording["cycle"][row]), "command": command})
        previous = current
    return out


def _by_cycle(entries: list[dict[str, Any]]) -> Mapping[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        grouped[int(entry["cycle"])].append(entry)
    return grouped


class _PausingBackend:
    """The simulator, whose reads let the replay in once while ``pause`` is set.

    On a bus, reading yields to the event loop: a lifecycle command's caller
    resumes in the middle of the cycle that follows the command, and the targets
    it sends then still count for that cycle (``hilbot run --enable`` with a
    trajectory, a bench run on the virtual bus). The simulator never yields, so
    to replay such a cycle the replay sets ``pause`` and its reads yield once.
    """

    def __init__(self, inner: Backend) -> None:
        self._inner = inner
        self.pause = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __aenter__(self) -> _PausingBackend:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._inner.__aexit__(exc_type, exc, tb)

    async def read(self) -> JointState:
        """Read the simulator, yielding to the replay first while paused."""
        if self.pause:
            await asyncio.sleep(0)
        return await self._inner.read()


async def replay(recording: Recording, config: RobotConfig, *, progress: bool = True) -> Recording:
    """Replay ``recording`` on the simulator of ``config`` under a fake clock.

    Returns:
        The replay's own recording (compare it with :func:`compare_commands`).
    """
    header = recording.header
    clock = make_clock(ClockKind.FAKE)
    start = header.initial_positions or header.sim.get("initial_positions") or None
    if header.backend == "mujoco":  # the same body and scene again
        from hilbot.driver.bench.backends import make_mujoco_backend

        bench = make_mujoco_backend(
            config,
            clock,
            scene=header.sim.get("scene", ()),
            initial_positions=start,
            seed=int(header.sim.get("seed", 0)),
        )
    else:
        bench = make_sim_backend(
            config, clock, initial_positions=start, seed=int(header.sim.get("seed", 0))
        )
    backend = _PausingBackend(bench.backend)
    known = {c.value for c in Command}
    logged = [c for c in header.commands if c["command"] in known]  # not e.g. "shutdown"
    commands = _by_cycle(logged or inferred_commands(recording))
    faults = _by_cycle(header.faults)
    new_targets = [bool(new.any()) for new in recording["target_new"]]
    bar = Progress(recording.n_cycles, enabled=None if progress else False)
    # the original's tick deadlines, skipped ticks included: the motion layer is timed by them
    cycles, times = recording["cycle"], recording["t"]
    period = 1.0 / config.rate_hz
    first = clock() + (int(cycles[0]) if len(cycles) else 0) * period
    assert isinstance(clock, ManualClock)
    ticker = ScheduledTicker(
        period,
        clock,
        {int(c): first + float(t) for c, t in zip(cycles, times, strict=True)},
    )
    async with Runtime(
        _watchdog_by_recording(config), backend, clock=clock, ticker=ticker
    ) as runtime:
        replay_header = RecordingHeader(
            joint_names=(),
            chain_names=(),
            rate_hz=header.rate_hz,
            backend=bench.kind.value,
            config_path=header.config_path,
            config=config.model_dump(mode="json"),
            scenario=header.scenario,
            clock=ClockKind.FAKE.value,
            sim=bench.sim,
        )
        recorder = Recorder(runtime, replay_header, capacity=recording.n_cycles + 16)
        servo_of = {s.joint: s.id for s in config.servos if s.shadow_of is None}
        try:
            for row in range(recording.n_cycles):
                cycle = int(recording["cycle"][row])
                while runtime.stats.cycles < cycle - 1:  # idle cycles before the recording
                    await runtime.wait_cycles(1)
                recorder.start()  # from the recording's first cycle: rows line up with it
                if cycle not in commands:  # a command clears the targets itself
                    _drop_stale_poses(runtime, recording, recorder, row)
                # Targets new in a command's cycle arrived while it ran (see _PausingBackend).
                backend.pause = bool(new_targets[row]) and cycle in commands
                for entry in commands.get(cycle, ()):
                    await _command(runtime, recorder, entry["command"])
                backend.pause = False
                if runtime.stats.cycles >= cycle:
                    # A command returns after the cycle that follows it: as in the original
                    # run, nothing new could be sent for this cycle.
                    bar.update(row + 1, f"replaying cycle {cycle}")
                    continue
                for fault in faults.get(cycle, ()):
                    assert bench.faults is not None  # the simulator always has a fault table
                    record = bench.faults(servo_of[fault["joint"]])
                    action = FaultAction(fault["action"])
                    apply_fault(
                        record,
                        action,
                        float(fault.get("rate", 1.0)),
                        clear="clear" in fault,
                        offset=float(fault.get("offset", 0.0)),
                    )
                    recorder.note_fault({k: v for k, v in fault.items() if k != "cycle"})
                _send(runtime, recording, row)
                await runtime.wait_cycles(1)
                bar.update(row + 1, f"replaying cycle {cycle}")
        finally:
            bar.close()
        return recorder.finish()


#: [s] the replay's watchdog timeout: targets go stale where the recording says they did
#: (:func:`_drop_stale_poses`), never by the replay's own clock.
_NEVER = 1e9


def _watchdog_by_recording(config: RobotConfig) -> RobotConfig:
    """``config`` whose watchdog lets only :func:`_drop_stale_poses` make a target stale.

    A target's age is counted from when it arrived: in the original, on the host's clock,
    some time into the cycle it counted for; in the replay, at that cycle's deadline. So
    the replay's own watchdog could drop a target a cycle before the original did.
    """
    if config.safety.watchdog_timeout is None:
        return config
    safety = config.safety.model_copy(update={"watchdog_timeout": _NEVER})
    return config.model_copy(update={"safety": safety})


def _drop_stale_poses(runtime: Runtime, recording: Recording, replayed: Recorder, row: int) -> None:
    """Drop the pose and joint targets that the original run stopped using in ``row``.

    The runtime drops a pose target that has not been refreshed for the watchdog
    timeout. In real time that takes fewer cycles when ticks came late or were
    skipped than on the replay's fake clock, where every cycle is one period; so
    where the original dropped a target (its slot empty, no new target, no
    command), the replay lets it go stale in the same cycle (``expire_target``: its
    joints then stop as the watchdog stops them, their joint targets kept).
    """
    done = len(replayed.buffer)
    if row == 0 or done == 0:
        return
    before, now = recording["ee_target"][row - 1], recording["ee_target"][row]
    still = replayed.buffer.arrays["ee_target"][done - 1]
    for c, chain in enumerate(recording.header.chain_names):
        dropped = np.isfinite(before[c]).all() and not np.isfinite(now[c]).all()
        if dropped and not recording["target_new"][row, c] and np.isfinite(still[c]).all():
            runtime.expire_target(chain)
    # The joint targets likewise: every one the original held went at once (one slot).
    before, now = recording["q_joint_target"][row - 1], recording["q_joint_target"][row]
    still = replayed.buffer.arrays["q_joint_target"][done - 1]
    dropped = np.isfinite(before).any() and not np.isfinite(now).any()
    if dropped and not recording["target_new"][row, -1] and np.isfinite(still).any():
        runtime.expire_joint_targets()


async def _command(runtime: Runtime, recorder: Recorder, name: str) -> None:
    recorder.note_command(name)
    try:
        await runtime.command(Command(name))
    except Exception as err:  # the original may have failed the same way: compare, don't stop
        _log.warning("replayed command %s failed: %s", name, err)
        recorder.header.commands[-1]["error"] = str(err)


def _send(runtime: Runtime, recording: Recording, row: int) -> None:
    """Send the targets that were new in ``row`` of the original run."""
    new = recording["target_new"][row]
    for c, chain in enumerate(recording.header.chain_names):
        if new[c]:
            kind = OrientationKind(int(recording["ee_target_kind"][row, c]))
            position = recording["ee_target"][row, c]
            orientation = recording["ee_target_orientation"][row, c]
            runtime.set_target(chain, join_pose_target(position, kind, orientation))
    if new[-1]:
        joints = recording["q_joint_target"][row]
        names = recording.header.joint_names
        targets = {names[j]: float(joints[j]) for j in np.flatnonzero(np.isfinite(joints))}
        if targets:
            runtime.set_joint_targets(targets)
