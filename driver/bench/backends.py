"""Open the backend a bench run drives: the simulator, the virtual bus, or hardware.

Each yields a :class:`BenchBackend`: the ``Backend``, the clock the runtime
must use, and (where faults can be injected) the servo fault table.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from hilbot._compat import StrEnum
from hilbot.driver.runtime.backends import backend_name
from hilbot.driver.runtime.config import RobotConfig
from hilbot.driver.runtime.ticker import ManualClock
from hilbot.hal.backend import Backend


class BackendKind(StrEnum):
    """Backends ``hilbot bench`` can drive."""

    SIM = "sim"  # in-process simulator
    MUJOCO = "mujoco"  # the in-process simulator's servos driving a MuJoCo body
    VIRTUAL = "virtual"  # the real backends on virtual buses (pty)
    HARDWARE = "hardware"  # the real buses on the config's ports (old name: dynamixel)

    @classmethod
    def _missing_(cls, value: object) -> BackendKind | None:
        """Old names still name their backend (``BackendKind("dynamixel")``)."""
        if not isinstance(value, str) or backend_name(value) == value:
            return None
        return cls(backend_name(value))


class ClockKind(StrEnum):
    """Time base of a run."""

    REAL = "real"  # wall-clock time, a precise ticker: timing results are real
    FAKE = "fake"  # simulated time, as fast as the computation runs: deterministic


@dataclass
class BenchBackend:
    """An opened backend and what the runner needs to know about it.

    Attributes:
        kind: which backend.
        backend: the joints to drive.
        clock: the clock the runtime (and the simulator) run on.
        faults: ``faults(servo_id) -> ServoFaults`` where faults can be injected.
        sim: the simulator's keyword arguments (stored in recordings for replay).
    """

    kind: BackendKind
    backend: Backend
    clock: Callable[[], float]
    faults: Callable[[int], Any] | None = None
    sim: dict[str, Any] = field(default_factory=dict)


def make_clock(kind: ClockKind) -> Callable[[], float]:
    """Return a fresh clock of ``kind``."""
    return ManualClock() if kind is ClockKind.FAKE else time.perf_counter


def make_sim_backend(
    config: RobotConfig,
    clock: Callable[[], float],
    *,
    initial_positions: Mapping[str, float] | None = None,
    seed: int = 0,
) -> BenchBackend:
    """The simulator of ``config``'s servos (as ``hilbot run`` builds it), at ``initial_positions``.

    By default the simulated arm rests at the config's home pose.
    """
    from hilbot.driver.runtime.backends import sim_backend

    start = dict(config.home if initial_positions is None else initial_positions)
    backend = sim_backend(config, initial_positions=start, clock=clock, seed=seed)
    return BenchBackend(
        BackendKind.SIM,
        backend,
        clock,
        faults=getattr(backend, "faults", None),
        sim={"initial_positions": start, "seed": seed},
    )


def make_mujoco_backend(
    config: RobotConfig,
    clock: Callable[[], float],
    *,
    scene: Sequence[Mapping[str, Any]] = (),
    initial_positions: Mapping[str, float] | None = None,
    seed: int = 0,
) -> BenchBackend:
    """The MuJoCo body of ``config`` with ``scene`` (objects as in a scenario), at home."""
    from hilbot.driver.runtime.backends import mujoco_backend
    from hilbot.sim.mujoco_scene import scene_from_data

    start = dict(config.home if initial_positions is None else initial_positions)
    backend = mujoco_backend(
        config,
        scene=scene_from_data(list(scene)),
        initial_positions=start,
        clock=clock,
        seed=seed,
    )
    return BenchBackend(
        BackendKind.MUJOCO,
        backend,
        clock,
        faults=getattr(backend, "faults", None),
        sim={"initial_positions": start, "seed": seed, "scene": [dict(o) for o in scene]},
    )


@asynccontextmanager
async def open_backend(
    kind: BackendKind,
    config: RobotConfig,
    clock_kind: ClockKind,
    *,
    seed: int = 0,
    faults: bool = True,
    scene: Sequence[Mapping[str, Any]] = (),
) -> AsyncIterator[BenchBackend]:
    """Open the backend of ``kind`` for ``config`` (not yet entered: the runtime enters it).

    With ``faults``, a virtual bus is served in this process, where its faults can be
    injected; without, it runs in a ``hilbot sim-bus`` child process as ``hilbot run``
    does (it then shares no interpreter lock with the control loop).

    Raises:
        ValueError: a fake clock with a backend that runs in real time.
    """
    if clock_kind is ClockKind.FAKE and kind not in (BackendKind.SIM, BackendKind.MUJOCO):
        raise ValueError(f"--clock fake works with the sim and mujoco backends, not {kind.value}")
    clock = make_clock(clock_kind)
    if kind is BackendKind.SIM:
        yield make_sim_backend(config, clock, seed=seed)
    elif kind is BackendKind.MUJOCO:
        yield make_mujoco_backend(config, clock, scene=scene, seed=seed)
    elif kind is BackendKind.VIRTUAL and faults:
        async with _virtual(config, clock, seed) as bench:
            yield bench
    elif kind is BackendKind.VIRTUAL:
        from hilbot.driver.runtime.backends import dynamixel_backend, virtual_buses, virtual_options

        async with virtual_buses(config) as ports:
            options = await virtual_options(config.safety.bus_watchdog)
            backend = dynamixel_backend(config, ports, **options)
            yield BenchBackend(BackendKind.VIRTUAL, backend, clock)
    else:
        from hilbot.driver.runtime.backends import dynamixel_backend

        yield BenchBackend(BackendKind.HARDWARE, dynamixel_backend(config), clock)


@asynccontextmanager
async def _virtual(
    config: RobotConfig, clock: Callable[[], float], seed: int
) -> AsyncIterator[BenchBackend]:
    """One virtual bus per config bus, driven by the real Dynamixel backend."""
    from hilbot.driver.runtime.backends import dynamixel_backend, virtual_options
    from hilbot.sim.virtual_bus import running_virtual_bus

    async with AsyncExitStack() as stack:
        ports: dict[str, str] = {}
        tables: dict[int, Callable[[int], Any]] = {}
        for bus in config.buses:
            servos = config.servo_specs(bus.name)
            vbus = await stack.enter_async_context(
                running_virtual_bus(
                    servos,
                    baudrate=bus.baudrate,
                    protocol=bus.protocol,
                    initial_positions=dict(config.home),
                    seed=seed,
                )
            )
            ports[bus.name] = vbus.port
            tables.update({s.id: vbus.faults for s in servos})

        def faults(servo_id: int) -> Any:
            return tables[servo_id](servo_id)

        options = await virtual_options(config.safety.bus_watchdog)
        yield BenchBackend(
            BackendKind.VIRTUAL,
            dynamixel_backend(config, ports, **options),
            clock,
            faults=faults,
            sim={"initial_positions": dict(config.home), "seed": seed},
        )
