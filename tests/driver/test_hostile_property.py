"""Property test: hostile input and injected exceptions never get an unsafe goal on the bus.

A seeded random driver feeds every Python entry point (``set_target``,
``set_joint_targets``, trajectories through ``load``/``play``) with hostile finite values
(±1e308, 1e155, subnormals, mixed magnitudes, huge quaternions and matrices) and
sane ones, sends lifecycle commands, and injects exceptions at every stage: the
solver, the safety layer, the backend's read, write and set_torque (before or after
the real call), and a cycle listener. ``FaultyBackend`` checks every goal that
reaches the real backend: inside the effective limits and within one step of the
previous goal while torque stayed on. After every step the loop must be alive, and
with ``estop_action: torque_off`` a faulted robot must have torque off as soon as
the backend takes it.

- >= 100,000 cycles on the simulator (manual clock: as fast as the code runs);
- >= 10,000 cycles through the real Dynamixel backend on the virtual bus, free-running
  (each cycle starts when the previous one ends: the bus sets the pace).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hilbot.driver.runtime.backends import dynamixel_backend, virtual_margin_ms
from hilbot.driver.runtime.errors import InvalidTarget, LimitViolation, TrajectoryError
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode, SafetyLayer
from hilbot.driver.runtime.state import Command, CycleRecord
from hilbot.driver.runtime.ticker import Tick
from hilbot.driver.runtime.trajectory import from_mapping, play
from hilbot.sim import running_virtual_bus

SIM_CYCLES = 100_000
VIRTUAL_CYCLES = 10_000
HOSTILE = (
    1e308, -1e308, 1.7976931348623157e308, 1e155, -1e155, 1e200, 5e-324, -5e-324, 1e-310,
    2.2250738585072014e-308, 0.0, -0.0, 1e-9, 1e3, 1e6, 99.999, 100.0, 100.001, 1000.0, 1000.1,
    math.pi, -2 * math.pi, 10**400,
)  # fmt: skip
STAGE_ERRORS = (ValueError, OverflowError, ZeroDivisionError, KeyError, RuntimeError, TypeError)


class Injected(Exception):
    """An exception no code under test expects."""


class Plan:
    """Shared schedule of injected exceptions for the stages the backend does not see."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.rates: dict[str, float] = {}

    def maybe_raise(self, stage: str) -> None:
        rate = self.rates.get(stage, 0.0)
        if rate and self.rng.random() < rate:
            cls = STAGE_ERRORS[int(self.rng.integers(len(STAGE_ERRORS)))]
            raise cls(f"injected {stage} failure")


class PlannedSolver:
    """The chain's real solver; raises when the plan says so (before or after solving)."""

    def __init__(self, inner: Any, plan: Plan) -> None:
        self.inner, self.plan = inner, plan

    def solve(self, *args: Any, **kwargs: Any) -> Any:
        self.plan.maybe_raise("solver")
        result = self.inner.solve(*args, **kwargs)
        self.plan.maybe_raise("solver")
        return result


class PlannedSafety(SafetyLayer):
    """The real safety layer; raises when the plan says so (its result is then unused)."""

    plan: Plan | None = None

    def apply(self, desired, last, cycle=0, *, possible=None, last_step=None):  # type: ignore[no-untyped-def]
        if self.plan is not None:
            self.plan.maybe_raise("safety")
        return super().apply(desired, last, cycle, possible=possible, last_step=last_step)


class FreeTicker:
    """Ticks as soon as the previous cycle is done: the bus sets the pace (wall clock)."""

    def start(self) -> None:
        pass

    async def wait(self) -> Tick:
        await asyncio.sleep(0)
        now = time.perf_counter()
        return Tick(now, now, 0, False)

    def stop(self) -> None:
        pass


# -- hostile values ----------------------------------------------------------------------------
def number(rng: np.random.Generator, sane: float = 0.0, spread: float = 0.05) -> Any:
    roll = rng.random()
    if roll < 0.5:
        return sane + rng.normal(0.0, spread)
    if roll < 0.8:
        return HOSTILE[int(rng.integers(len(HOSTILE)))] * (1 if rng.random() < 0.5 else -1)
    return float(rng.normal() * 10.0 ** int(rng.integers(-320, 309)))  # mixed magnitudes


def as_float(value: Any) -> float:
    """``value`` as a float, for building matrices (an int beyond the float range: 1e308)."""
    try:
        return float(value)
    except OverflowError:
        return 1e308 if value > 0 else -1e308


def vector(rng: np.random.Generator, center: np.ndarray, spread: float) -> list[Any]:
    return [number(rng, float(c), spread) for c in center]


def rotation(rng: np.random.Generator) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.linalg.det(q))


def pose_target(rng: np.random.Generator, home: np.ndarray) -> Any:
    position = vector(rng, home, 0.03)
    form = int(rng.integers(8))
    if form == 0:
        return position
    if form == 1:
        return (position, None)
    if form == 2:
        return (position, vector(rng, np.array([0.0, 0.0, -1.0]), 0.2))
    if form == 3:
        quat = vector(rng, np.array([1.0, 0.0, 0.0, 0.0]), 1e-4)
        return (position, quat)
    if form == 4:
        scale = 1.0 if rng.random() < 0.5 else as_float(number(rng, 1.0))
        return (position, rotation(rng) * scale)
    if form == 5:
        transform = np.eye(4)
        scale = 1.0 if rng.random() < 0.5 else as_float(number(rng, 1.0))
        transform[:3, :3] = rotation(rng) * scale
        transform[:3, 3] = [as_float(v) for v in position]
        return transform
    if form == 6:
        return vector(rng, np.zeros(int(rng.integers(1, 6))), 1.0)  # wrong shapes
    return [[number(rng) for _ in range(3)] for _ in range(int(rng.integers(1, 5)))]


def joint_targets(rng: np.random.Generator, names: tuple[str, ...], home: np.ndarray) -> Any:
    chosen = rng.choice(len(names), size=int(rng.integers(1, len(names) + 1)), replace=False)
    return {names[i]: number(rng, float(home[i]), 0.3) for i in chosen}


def trajectory_data(rng: np.random.Generator, names: tuple[str, ...], home: np.ndarray) -> Any:
    k = int(rng.integers(1, 4))
    if rng.random() < 0.5:
        rows = [
            {
                "t": 0.05 * i,
                "joints": {n: number(rng, float(h), 0.3) for n, h in zip(names, home, strict=True)},
            }
            for i in range(k)
        ]
        return {"kind": "joints", "loop": bool(rng.random() < 0.3), "waypoints": rows}
    rows = [
        {"t": 0.05 * i, "position": vector(rng, np.array([0.2, 0.0, 0.15]), 0.03)} for i in range(k)
    ]
    if rng.random() < 0.5:
        for row in rows:
            row["orientation"] = vector(rng, np.array([1.0, 0.0, 0.0, 0.0]), 0.01)
    return {"kind": "pose", "chain": "arm", "waypoints": rows}


# -- the driver --------------------------------------------------------------------------------
COMMANDS = (Command.ENABLE, Command.ENABLE, Command.DISABLE, Command.ESTOP, Command.RESET,
            Command.RESET, Command.HOME)  # fmt: skip
STAGES = ("read", "write", "set_torque", "solver", "safety", "listener")


class Fuzzer:
    """Drives one runtime with hostile input and injected exceptions; checks after each step."""

    def __init__(
        self, rt: Runtime, backend: Any, rng: np.random.Generator, clock: Any, model: Any
    ) -> None:
        self.rt, self.backend, self.rng, self.clock = rt, backend, rng, clock
        self.model = model  # the servo model behind the backend, for moves "by hand"
        self.model_home = model.position.copy()
        self.plan = Plan(rng)
        self.names = rt.joint_names
        self.home = np.array([rt.config.home.get(n, 0.0) for n in self.names])
        self.chain_home = np.array([0.2, 0.0, 0.15])
        self.accepted = {"pose": 0, "joints": 0, "trajectory": 0}
        self.refused = {"pose": 0, "joints": 0, "trajectory": 0}
        self.player: asyncio.Task[None] | None = None
        self.modes: dict[str, int] = {}  # cycles per mode (and written), for failure messages
        safety = PlannedSafety(
            rt.limits, rt.max_delta, rt.period, acceleration=rt.acceleration_limits
        )
        safety.plan = self.plan
        rt.safety = safety
        for runner in rt._chains.values():
            runner.solver = PlannedSolver(runner.solver, self.plan)
        rt.add_cycle_listener(self._listener)
        backend.watch(rt.limits.lower, rt.limits.upper, rt.safety.step_bound)

    def _listener(self, rec: CycleRecord) -> None:
        key = f"{rec.mode.value}{'+written' if rec.written else ''}"
        self.modes[key] = self.modes.get(key, 0) + 1
        self.plan.maybe_raise("listener")

    def _rates(self) -> None:
        """A new mix of failing stages: mostly none, sometimes one or two, at random rates."""
        rates: dict[str, float] = {}
        if self.rng.random() < 0.5:
            for stage in self.rng.choice(STAGES, size=int(self.rng.integers(1, 3)), replace=False):
                rates[str(stage)] = float(self.rng.choice((0.001, 0.01, 0.05, 0.5)))
        self.plan.rates = {k: v for k, v in rates.items() if k in ("solver", "safety", "listener")}
        self.backend.set_rates({k: v for k, v in rates.items() if k in STAGES[:3]}, self.rng)

    def _quiet(self) -> None:
        self.plan.rates = {}
        self.backend.clear_plans()

    async def step(self) -> None:
        rt, rng = self.rt, self.rng
        roll = rng.random()
        if roll < 0.02:
            self._rates()
        elif roll < 0.45:
            try:
                rt.set_target("arm", pose_target(rng, self.chain_home))
                self.accepted["pose"] += 1
            except InvalidTarget:
                self.refused["pose"] += 1
        elif roll < 0.75:
            try:
                rt.set_joint_targets(joint_targets(rng, self.names, self.home))
                self.accepted["joints"] += 1
            except InvalidTarget:
                self.refused["joints"] += 1
        elif roll < 0.78:
            await self._trajectory()
        elif roll < 0.86:
            await self._command(COMMANDS[int(rng.integers(len(COMMANDS)))])
        elif roll < 0.95:  # recover, as an operator would: reset, then enable
            await self._command(Command.ENABLE if rt.mode is Mode.DISARMED else Command.RESET)
        await rt.wait_cycles(int(rng.integers(1, 12)))
        await self._check()

    async def _command(self, cmd: Command) -> None:
        # Refused (a DriverError) or failed with an injected exception: either way the
        # runtime must stay in command, which the next steps check.
        try:
            await asyncio.wait_for(self.rt.command(cmd), timeout=30.0)
        except LimitViolation:
            # Torque went off while a joint sped towards a limit, and it coasted past it:
            # move the arm back inside by hand, as the error message asks.
            self.model.velocity[:] = 0.0
            self.model.position[:] = self.model_home
        except Exception:
            pass

    async def _trajectory(self) -> None:
        if self.player is not None and not self.player.done():
            self.player.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.player
        try:
            trajectory = from_mapping(trajectory_data(self.rng, self.names, self.home))
        except TrajectoryError:
            self.refused["trajectory"] += 1
            return
        self.accepted["trajectory"] += 1
        # What loads must play: a refused sample would raise out of play() here.
        self.player = asyncio.create_task(play(trajectory, self.rt, clock=self.clock))

    async def _check(self) -> None:
        rt = self.rt
        assert rt._task is not None and not rt._task.done(), "the loop died"
        if self.player is not None and self.player.done() and not self.player.cancelled():
            self.player.result()  # a trajectory that loaded never fails while playing
        assert self.backend.violations == [], self.backend.violations[:3]
        if rt.config.safety.estop_action.value == "torque_off" and rt.mode is Mode.FAULTED:
            # Torque off as soon as the backend takes it: quiet the injections, 2 cycles.
            rates, backend_rates = dict(self.plan.rates), dict(self.backend.rates)
            self._quiet()
            await rt.wait_cycles(2)
            assert not self.backend.torque_on, "faulted with torque_off, but torque is on"
            self.plan.rates = rates
            self.backend.set_rates(backend_rates, self.rng)

    async def run(self, cycles: int) -> None:
        while self.rt.stats.cycles < cycles:
            await self.step()
        if self.player is not None:
            self.player.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.player
        self._quiet()
        await self.rt.command(Command.ESTOP)  # still in command at the end
        await self.rt.command(Command.RESET)
        assert self.rt.mode is Mode.DISARMED


@pytest.mark.parametrize("action", ["hold", "torque_off"])
async def test_sim_hostile_input_and_injected_errors(
    action, make_config, sim_factory, clock, faulty
):
    config = make_config("openmanipulator_x", safety={"estop_action": action})
    seed = 1100 + (action == "hold")
    backend = faulty(sim_factory(config))
    async with Runtime(config, backend, clock=clock) as rt:
        fuzzer = Fuzzer(rt, backend, np.random.default_rng(seed), clock, backend.inner.model)
        await fuzzer.run(SIM_CYCLES // 2)
        stats = rt.state().stats
    assert backend.violations == [], f"seed {seed}: {backend.violations[:3]}"
    assert stats.cycles >= SIM_CYCLES // 2
    assert backend.goals_written > SIM_CYCLES // 20, f"hardly moved: {fuzzer.modes}"
    assert stats.internal_errors > 100 and sum(backend.injected.values()) > 100
    assert min(fuzzer.accepted.values()) > 0 and min(fuzzer.refused.values()) > 0


async def test_virtual_bus_hostile_input_and_injected_errors(make_config, faulty, tmp_path: Path):
    config = make_config("openmanipulator_x", rate_hz=100.0, safety={"estop_action": "torque_off"})
    async with running_virtual_bus(
        config.servo_specs(), baudrate=1_000_000, initial_positions=dict(config.home)
    ) as vbus:
        real = dynamixel_backend(config, {"main": vbus.port}, margin_ms=virtual_margin_ms())
        backend = faulty(real)
        async with Runtime(config, backend, ticker=FreeTicker()) as rt:
            rng = np.random.default_rng(1200)
            fuzzer = Fuzzer(rt, backend, rng, time.perf_counter, vbus.model)
            await fuzzer.run(VIRTUAL_CYCLES)
            stats = rt.state().stats
        assert vbus.errors == []
    assert backend.violations == [], backend.violations[:3]
    assert stats.cycles >= VIRTUAL_CYCLES
    assert backend.goals_written > VIRTUAL_CYCLES // 20, f"hardly moved: {fuzzer.modes}"
    assert stats.internal_errors > 10 and sum(backend.injected.values()) > 10
