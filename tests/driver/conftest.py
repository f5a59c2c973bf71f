"""Fixtures of the driver tests: shipped configs, a simulated backend on a manual clock,
a runtime on the virtual bus through the real Dynamixel backend, ``FaultyBackend``, the
command line run in this process (``hilbot_main``) and each robot's demo calibration.

``FaultyBackend`` wraps a real backend for the crash-safety tests: it is our own
``Backend`` protocol, not an SDK; the wrapped backend (``SimBackend`` or the real
``DynamixelBackend`` on the virtual bus) does every real transaction. The wrapper
raises injected exceptions before or after delegating, and checks the safety
invariant on every goal that actually reached the wrapped backend: inside the
effective joint limits, and within one safety step (``step_bound``) of the previous
goal as long as torque stayed on in between (a goal written with torque off moves
nothing, and enabling starts from goal := present)."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import pytest
import yaml

from hilbot.configs import config_path
from hilbot.driver.runtime import backends as virtual_margin
from hilbot.driver.runtime.backends import dynamixel_backend
from hilbot.driver.runtime.config import RobotConfig, parse_config
from hilbot.driver.runtime.loop import Runtime
from hilbot.driver.runtime.safety import Mode
from hilbot.driver.runtime.ticker import ManualClock
from hilbot.hal.backend import JointState
from hilbot.sim import running_virtual_bus
from hilbot.sim.sim_backend import SimBackend


def config_data(name: str) -> dict[str, Any]:
    """The parsed YAML of a shipped config, with its URDF path made absolute."""
    path = config_path(name)
    data = yaml.safe_load(path.read_text())
    data["urdf"] = str(path.parent / data["urdf"])
    return data


def _make_config(name: str = "openmanipulator_x", **changes: Any) -> RobotConfig:
    """A shipped config with top-level fields replaced (``safety`` is merged)."""
    data = config_data(name)
    safety = changes.pop("safety", None)
    if safety is not None:
        data["safety"] = {**data.get("safety", {}), **safety}
    data.update(changes)
    return parse_config(data)


@pytest.fixture
def make_config() -> Callable[..., RobotConfig]:
    """``make_config(name, **changes)``: a shipped config with fields replaced."""
    return _make_config


@pytest.fixture
def config_data_of() -> Callable[[str], dict[str, Any]]:
    """``config_data_of(name)``: the YAML mapping of a shipped config (URDF path absolute)."""
    return config_data


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(100.0)


@pytest.fixture
def sim_factory(clock: ManualClock) -> Callable[..., SimBackend]:
    def make(config: RobotConfig, **options: Any) -> SimBackend:
        options.setdefault("initial_positions", dict(config.home))
        options.setdefault("torque_off_on_close", False)  # so tests see what the runtime did
        return SimBackend(config.servo_specs(), clock=clock, **options)

    return make


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    def write(data: dict[str, Any], name: str = "robot.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


def virtual_margin_ms(config: RobotConfig, retries: int) -> float:
    """Reply deadline margin [ms] for a virtual bus on this host, from its measured stalls."""
    return virtual_margin.virtual_margin_ms(config.safety.bus_watchdog, retries)


VIRTUAL_RETRIES = virtual_margin.VIRTUAL_RETRIES


@contextlib.asynccontextmanager
async def runtime_on(
    config: RobotConfig, ports: Mapping[str, str], *, margin_ms: float, pipeline: bool
) -> AsyncIterator[Runtime]:
    """A runtime on the real backend of each bus, opened on the virtual buses at ``ports``.

    ``margin_ms`` is the reply margin measured for this host (:func:`virtual_margin_ms`).
    """
    backend = dynamixel_backend(
        config, ports, margin_ms=margin_ms, retries=VIRTUAL_RETRIES, pipeline=pipeline
    )
    async with Runtime(config, backend) as rt:
        yield rt


async def cycles_until(rt: Runtime, mode: Mode, cycles: int) -> None:
    """Run up to ``cycles`` control cycles, ending early once ``rt`` is in ``mode``.

    It only waits: the test asserts the mode afterwards.
    """
    for _ in range(cycles):
        await rt.wait_cycles(1)
        if rt.mode is mode:
            return


@pytest.fixture(params=[False, True], ids=["plain", "pipelined"])
def running(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``running(config)``: the virtual bus and a runtime on it, pipelined or not.

    The backend's reply margin comes from the host's scheduling stalls measured just
    before (see :func:`virtual_margin_ms`), not from a fixed short timeout.
    """

    @contextlib.asynccontextmanager
    async def run(config: RobotConfig) -> AsyncIterator[tuple[Any, Runtime]]:
        margin = virtual_margin_ms(config, VIRTUAL_RETRIES)
        logging.getLogger(__name__).info("virtual bus reply margin: %.1f ms", margin)
        async with running_virtual_bus(
            config.servo_specs(), baudrate=1_000_000, initial_positions=dict(config.home)
        ) as vbus:
            async with runtime_on(
                config, {"main": vbus.port}, margin_ms=margin, pipeline=request.param
            ) as rt:
                yield vbus, rt
            assert vbus.errors == []  # the bus server itself never failed

    return run


# -- FaultyBackend ---------------------------------------------------------------------------
STAGES = ("read", "write", "set_torque")
SLACK = 1e-9  # [rad] float rounding allowed in the invariant checks


class Injected(Exception):
    """An exception the test injected (not one the code under test may expect)."""


class FaultyBackend:
    """Delegates to ``inner``; raises what :meth:`fail` or :meth:`set_rates` planned.

    Call :meth:`watch` with the runtime's limits before the first write.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        n = len(inner.joint_names)
        self.lower = np.full(n, -np.inf)
        self.upper = np.full(n, np.inf)
        self.step_bound = np.full(n, np.inf)
        self._plans: dict[str, deque[tuple[BaseException, bool]]] = {s: deque() for s in STAGES}
        self._rates: dict[str, float] = {}
        self._rng: np.random.Generator | None = None
        self.previous: np.ndarray | None = None  # last goal that reached ``inner``
        self.torque_on = False  # as far as the writes through this wrapper tell
        self.goals_written = 0
        self.injected = dict.fromkeys(STAGES, 0)
        self.violations: list[str] = []

    def watch(self, lower: np.ndarray, upper: np.ndarray, step_bound: np.ndarray) -> None:
        """Check every goal against these effective limits and per-cycle step bounds."""
        self.lower, self.upper, self.step_bound = lower, upper, step_bound

    # -- planning ------------------------------------------------------------------------
    def fail(
        self, stage: str, times: int = 1, *, after: bool = False, exc: BaseException | None = None
    ) -> None:
        """Make the next ``times`` calls of ``stage`` raise (``after`` delegating, or before)."""
        for _ in range(times):
            error = exc if exc is not None else Injected(f"injected {stage} failure")
            self._plans[stage].append((error, after))

    def clear_plans(self) -> None:
        """Drop the planned failures that have not happened yet, and stop random ones."""
        for plan in self._plans.values():
            plan.clear()
        self._rates = {}

    def set_rates(self, rates: Mapping[str, float], rng: np.random.Generator) -> None:
        """Raise at random: per call of a stage, with that stage's probability."""
        self._rates = dict(rates)
        self._rng = rng

    @property
    def rates(self) -> dict[str, float]:
        """The random failure rates per stage now in effect."""
        return dict(self._rates)

    def _planned(self, stage: str) -> tuple[BaseException, bool] | None:
        plan = self._plans[stage]
        if plan:
            return plan.popleft()
        rate = self._rates.get(stage, 0.0)
        if rate and self._rng is not None and self._rng.random() < rate:
            kind = (Injected, ValueError, OverflowError, ZeroDivisionError, KeyError)
            cls = kind[int(self._rng.integers(len(kind)))]
            return cls(f"injected {stage} failure"), bool(self._rng.random() < 0.5)
        return None

    async def _call(self, stage: str, call: Any, *args: Any) -> Any:
        planned = self._planned(stage)
        if planned is not None and not planned[1]:
            self.injected[stage] += 1
            raise planned[0]
        result = await call(*args)
        if planned is not None:
            self.injected[stage] += 1
            raise planned[0]
        return result

    # -- the Backend protocol --------------------------------------------------------------
    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(self.inner.joint_names)

    async def __aenter__(self) -> FaultyBackend:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.inner.__aexit__(exc_type, exc, tb)

    async def read(self) -> JointState:
        state: JointState = await self._call("read", self.inner.read)
        return state

    async def write(self, positions: Mapping[str, float]) -> None:
        await self._call("write", self._checked_write, positions)

    async def _checked_write(self, positions: Mapping[str, float]) -> None:
        goal = np.array([positions[n] for n in self.joint_names], dtype=np.float64)
        self._check(goal)
        await self.inner.write(positions)
        self.previous = goal
        self.goals_written += 1

    def _check(self, goal: np.ndarray) -> None:
        if not np.all(np.isfinite(goal)):
            self.violations.append(f"non-finite goal {goal.tolist()}")
            return
        if np.any(goal < self.lower - SLACK) or np.any(goal > self.upper + SLACK):
            self.violations.append(f"goal outside the limits: {goal.tolist()}")
        if self.torque_on and self.previous is not None:
            step = np.abs(goal - self.previous)
            if np.any(step > self.step_bound + SLACK):
                self.violations.append(
                    f"goal step {step.max():.6g} beyond the max delta "
                    f"{self.step_bound.min():.6g}: {self.previous.tolist()} -> {goal.tolist()}"
                )

    async def set_torque(self, enabled: bool, joints: Iterable[str] | None = None) -> None:
        await self._call("set_torque", self._torque, enabled, joints)

    async def _torque(self, enabled: bool, joints: Iterable[str] | None) -> None:
        if joints is None:
            await self.inner.set_torque(enabled)
        else:
            await self.inner.set_torque(enabled, joints)
        if not enabled:
            self.previous = None  # limp: the next goal may start anywhere (goal := present)
        self.torque_on = enabled if joints is None else self.torque_on or enabled

    async def reboot(self, joints: Iterable[str]) -> None:
        await self.inner.reboot(joints)
        self.previous = None  # a rebooted servo comes back with torque off
        self.torque_on = False

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:  # arm_watchdog, disarm_watchdog, counters...
        return getattr(self.inner, name)


@pytest.fixture
def faulty() -> type[FaultyBackend]:
    """``faulty(inner)``: a :class:`FaultyBackend` around a real backend."""
    return FaultyBackend


async def wait_at_rest(rt: Runtime, cycles: int = 1000) -> dict[str, float]:
    """Wait until the commanded motion is at rest (a controlled stop ended); its command."""
    for _ in range(cycles):
        state = rt.state()
        if all(v == 0.0 for v in state.velocity.values()):
            await rt.wait_cycles(1)  # the cycle that wrote the rest goal has ended
            return rt.state().command
        await rt.wait_cycles(1)
    raise AssertionError(f"the command did not come to rest within {cycles} cycles")


# -- the demo calibration, once per robot per session --------------------------------------
@dataclass(frozen=True)
class DemoCalibration:
    """What ``hilbot calibrate ROBOT --backend virtual --demo`` did, in a config home of its own.

    ``home`` is the ``XDG_CONFIG_HOME`` it wrote into; it is shared: a test that changes
    the file works on a :meth:`copy`.
    """

    robot: str
    home: Path
    stdout: str
    stderr: str

    @property
    def file(self) -> Path:
        """The calibration file it wrote."""
        return self.home / "hilbot" / "calibration" / f"{self.robot}-virtual.yaml"

    def copy(self, to: Path) -> Path:
        """A config home of the test's own at ``to``, holding the same calibration."""
        shutil.copytree(self.home, to, dirs_exist_ok=True)
        return to


@pytest.fixture(scope="session")
def demo_calibration(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Callable[[str], DemoCalibration]:
    """``demo_calibration(robot)``: the robot's demo calibration, made once per test run.

    The demo runs in real time (10-20 s a robot on a busy host), through the real command
    line. Under pytest-xdist the workers share one calibration per robot: the first that
    needs it calibrates, under a file lock in the run's shared temporary folder, and the
    others read what it wrote.
    """
    base = tmp_path_factory.getbasetemp()
    if hasattr(pytestconfig, "workerinput"):  # a pytest-xdist worker
        base = base.parent  # the run's folder, shared by its workers (not by other runs)
    root = base / "demo-calibrations"
    root.mkdir(exist_ok=True)
    made: dict[str, DemoCalibration] = {}

    def get(robot: str) -> DemoCalibration:
        if robot not in made:
            folder = root / robot
            with (root / f"{robot}.lock").open("w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not (folder / "returncode").exists():
                    home = folder / "home"
                    home.mkdir(parents=True, exist_ok=True)
                    demo = ["calibrate", robot, "--backend", "virtual", "--demo"]
                    done = subprocess.run(
                        [sys.executable, "-m", "hilbot", *demo],
                        capture_output=True,
                        text=True,
                        timeout=300,
                        stdin=subprocess.DEVNULL,
                        env={**os.environ, "XDG_CONFIG_HOME": str(home)},
                    )
                    (folder / "stdout").write_text(done.stdout)
                    (folder / "stderr").write_text(done.stderr)
                    (folder / "returncode").write_text(str(done.returncode))
            code = int((folder / "returncode").read_text())
            stdout, stderr = (folder / "stdout").read_text(), (folder / "stderr").read_text()
            assert code == 0, f"the demo calibration of {robot} failed:\n{stdout}{stderr}"
            made[robot] = DemoCalibration(robot, folder / "home", stdout, stderr)
        return made[robot]

    return get


# -- the command line, in this process ------------------------------------------------------
@dataclass(frozen=True)
class CliResult:
    """What a ``hilbot`` command did: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def hilbot_main(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``hilbot_main(*args)``: ``python -m hilbot ARGS``, run in this process.

    For the tests whose point is what a command says and returns, not its process (signals,
    exit by a signal, a child's own start-up): they then cost no interpreter start. As in
    the process, an argparse error's ``SystemExit`` is the exit code, and a log record at
    warning or above is printed to stderr in the command's own format. A traceback is not
    caught: an unexpected exception fails the test, as a bug would.
    """

    def run(*args: str) -> CliResult:
        from hilbot.driver.cli import main

        capsys.readouterr()  # only what this command prints
        handler = logging.StreamHandler(sys.stderr)  # capsys's, as the command sees it
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's, or a command's sys.exit
            code = 0 if exit_.code is None else exit_.code if isinstance(exit_.code, int) else 1
        finally:
            root.removeHandler(handler)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run
