"""hilbot's runtime on a background thread, for callers that are not asyncio (LeRobot).

::

    arm = BackgroundRuntime(calibrated, "virtual", enable=True)
    arm.start()                          # the loop runs at its own rate from here
    arm.set_joint_targets({"elbow_flex": 0.3}, stamp=time.perf_counter())
    arm.latest()                         # the newest measured state and command
    arm.stop()                           # controlled stop, then the runtime's shutdown

The thread runs its own asyncio event loop: the backend (and, on ``virtual``, the
``hilbot sim-bus`` child), the :class:`~hilbot.driver.runtime.loop.Runtime` with its motion
layer, safety layer and watchdog, and optionally MQTT teleop into it. The caller's
thread only hands targets over (``call_soon_threadsafe``) and reads a snapshot the
control loop publishes at the end of every cycle; it never waits for bus I/O.

A fault of the runtime (a bus failure, a tripped e-stop, the loop ending) is kept and
raised by the next call of the caller's thread, as :class:`RuntimeFault`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.calibration.apply import Calibrated
from hilbot.driver.runtime.errors import DriverError

#: [s] how long ``start`` waits for the backend, the first reading and the enable.
START_TIMEOUT = 60.0
#: [s] how long ``stop`` waits for the controlled stop to come to rest.
STOP_TIMEOUT = 3.0
#: [rad/s] below this on every joint the controlled stop counts as at rest.
AT_REST = 1e-3

log = logging.getLogger("hilbot.driver.lerobot_bridge")


class RuntimeFault(DriverError):
    """The background runtime cannot go on (or never started): the reason in one line."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the control loop published at the end of its newest cycle.

    Attributes:
        cycle: the cycle number (0: before the first cycle).
        time: when it was published [s, ``time.perf_counter``].
        names: the joint names, in order.
        position: (n,) the measured positions [rad or m].
        command: (n,) the command the safety layer let through [rad or m].
        mode: the runtime's mode (``disarmed``, ``armed``, ``estopped``, ``faulted``).
    """

    cycle: int
    time: float
    names: tuple[str, ...]
    position: NDArray[np.float64]
    command: NDArray[np.float64]
    mode: str

    def positions(self) -> dict[str, float]:
        """Measured positions by joint name."""
        return dict(zip(self.names, self.position.tolist(), strict=True))

    def commands(self) -> dict[str, float]:
        """Commanded positions by joint name."""
        return dict(zip(self.names, self.command.tolist(), strict=True))


class BackgroundRuntime:
    """One robot's runtime on its own thread and event loop.

    Args:
        calibrated: the config to drive, with its calibration (see
            :func:`hilbot.driver.calibration.apply.load_calibrated`).
        backend: ``sim``, ``mujoco``, ``virtual`` or ``hardware``.
        enable: arm the robot once it runs (torque on, holding where it is).
        mqtt: serve MQTT teleop into the runtime: a broker URL, ``""`` for the embedded
            broker, ``None`` for no MQTT.
        sim_bus_args: further ``hilbot sim-bus`` options on ``virtual`` (``--hand``).
        port: ``virtual``: the pty of a ``hilbot sim-bus`` already serving the robot's
            (single) bus, driven instead of starting one.
    """

    def __init__(
        self,
        calibrated: Calibrated,
        backend: str,
        *,
        enable: bool,
        mqtt: str | None = None,
        sim_bus_args: tuple[str, ...] = (),
        port: str | None = None,
    ) -> None:
        self.calibrated = calibrated
        self._port = port
        self.config = calibrated.config
        self.backend = backend
        self._enable = enable
        self._mqtt = mqtt
        self._sim_bus_args = sim_bus_args
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runtime: Any = None
        self._stop_event: asyncio.Event | None = None
        self._started = threading.Event()
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._fault: str | None = None
        self._snapshot: Snapshot | None = None
        self._stopping = False

    # -- caller's thread ------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the thread; return once the robot runs (and is armed, if asked).

        Raises:
            RuntimeFault: it did not start (the reason: the bus, a stale calibration, ...).
        """
        if self._thread is not None:
            raise RuntimeError("a BackgroundRuntime starts once")
        self._thread = threading.Thread(
            target=self._main, name=f"hilbot-{self.config.name}", daemon=True
        )
        self._thread.start()
        # A script that ends without stop() (an exception past LeRobot's loop, sys.exit)
        # would have the interpreter kill this daemon thread mid-cycle, torque on and no
        # controlled stop: at exit the stop runs first.
        atexit.register(self.stop)
        if not self._started.wait(timeout):
            self.stop()
            raise RuntimeFault(f"{self.config.name} did not start within {timeout:g} s")
        self.check()

    @property
    def running(self) -> bool:
        """The thread runs and nothing has ended it."""
        return self._started.is_set() and not self._done.is_set() and self._error is None

    def check(self) -> None:
        """Raise what ended or stopped the runtime since it started, if anything.

        Raises:
            RuntimeFault: the runtime failed, ended, or is e-stopped or faulted.
        """
        if self._error is not None:
            err = self._error
            raise RuntimeFault(f"{self.config.name}: {_reason(err)}") from err
        if self._fault is not None:
            raise RuntimeFault(f"{self.config.name}: {self._fault}")
        if self._done.is_set():
            raise RuntimeFault(f"{self.config.name}: the runtime has stopped")

    def latest(self) -> Snapshot:
        """The newest snapshot (raises a fault first, if there is one).

        Raises:
            RuntimeFault: as :meth:`check`.
        """
        self.check()
        snap = self._snapshot
        if snap is None:
            raise RuntimeFault(f"{self.config.name}: no state read yet")
        return snap

    def set_joint_targets(self, positions: Mapping[str, float], *, stamp: float) -> None:
        """Hand joint targets [rad or m] to the motion layer, sampled at ``stamp``.

        ``stamp`` is on ``time.perf_counter``, the runtime's clock.

        Raises:
            RuntimeFault: as :meth:`check`.
            ValueError: a value that is not a finite number, or a joint it does not drive.
        """
        self.check()
        known = set(self.config.joint_names)
        for joint, value in positions.items():
            if joint not in known:
                raise ValueError(f"{self.config.name} has no joint {joint!r}")
            if not math.isfinite(value):
                raise ValueError(f"{joint}: {value!r} is not a finite number")
        loop = self._loop
        if loop is None:
            raise RuntimeFault(f"{self.config.name}: not running")
        loop.call_soon_threadsafe(self._set_targets, dict(positions), stamp)

    def stop(self, timeout: float = START_TIMEOUT) -> None:
        """Controlled stop, then the runtime's shutdown (torque per the config); idempotent."""
        thread, loop, event = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        atexit.unregister(self.stop)
        if loop is not None and event is not None and not self._done.is_set():
            with contextlib.suppress(RuntimeError):  # the loop has just closed
                loop.call_soon_threadsafe(event.set)
        thread.join(timeout)
        if thread.is_alive():
            log.error("%s: the runtime thread did not end within %g s", self.config.name, timeout)
        elif self._error is not None:
            log.warning("%s stopped after: %s", self.config.name, _reason(self._error))

    # -- the runtime's thread -------------------------------------------------------------
    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as err:  # kept for the caller's next call
            if self._error is None:
                self._error = err
        finally:
            self._done.set()
            self._started.set()

    async def _run(self) -> None:
        from hilbot.driver.runtime.loop import Runtime
        from hilbot.driver.runtime.state import Command

        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        calibrated = self.calibrated
        options: dict[str, Any] = {"virtual_return_delay": 0, **calibrated.backend_options()}
        sim_bus_args = list(self._sim_bus_args)
        if self.backend == "virtual":
            sim_bus_args += calibrated.mount_args()
        if sim_bus_args:
            options["sim_bus_args"] = sim_bus_args
        async with (
            self._backend(options) as built,
            Runtime(self.config, built) as runtime,
        ):
            self._runtime = runtime
            first = runtime.state().joints
            if first is not None:
                calibrated.check_fresh(first)  # a stale calibration: nothing enabled
            runtime.add_cycle_listener(self._on_cycle)
            if self._enable:
                await runtime.command(Command.ENABLE)
            await runtime.wait_cycles(1)
            tasks = [
                asyncio.create_task(self._stop_event.wait(), name="stop"),
                asyncio.create_task(runtime.wait_stopped(), name="loop"),
            ]
            if self._mqtt is not None:
                tasks.append(asyncio.create_task(self._teleop(runtime), name="mqtt"))
            self._started.set()
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for task in done:
                if not task.cancelled() and task.exception() is not None:
                    self._error = task.exception()
            await self._controlled_stop(runtime)
        self._runtime = None

    @contextlib.asynccontextmanager
    async def _backend(self, options: dict[str, Any]) -> AsyncIterator[Any]:
        """The backend: built as ``hilbot run`` builds it, or on a running virtual bus."""
        from hilbot.driver.runtime.backends import build_backend, dynamixel_backend, virtual_options

        if self.backend == "virtual" and self._port is not None:
            margins = await virtual_options(self.config.safety.bus_watchdog)
            ports = {self.config.buses[0].name: self._port}
            yield dynamixel_backend(self.config, ports, pipeline="auto", **margins)
            return
        async with build_backend(self.config, self.backend, **options) as built:
            yield built

    async def _teleop(self, runtime: Any) -> None:
        from hilbot.driver.teleop import serve

        await serve(
            runtime,
            self.config.teleop,
            self._mqtt or None,
            robot_name=self.config.name,
            takeover=True,
        )

    async def _controlled_stop(self, runtime: Any) -> None:
        """E-stop (the motion layer's controlled stop, then per ``estop_action``); at rest."""
        from hilbot.driver.runtime.safety import Mode
        from hilbot.driver.runtime.state import Command

        self._stopping = True
        if runtime.mode is not Mode.ARMED:
            return
        try:
            await runtime.command(Command.ESTOP)
            deadline = time.perf_counter() + STOP_TIMEOUT
            while time.perf_counter() < deadline:
                await runtime.wait_cycles(1)
                if max(map(abs, runtime.state().velocity.values()), default=0.0) < AT_REST:
                    break
        except Exception as err:  # the shutdown still turns torque off (per the config)
            log.warning("%s: controlled stop failed: %s", self.config.name, err)

    def _set_targets(self, positions: dict[str, float], stamp: float) -> None:
        runtime = self._runtime
        if runtime is None:
            return
        try:
            runtime.set_joint_targets(positions, stamp=stamp)
        except Exception as err:  # said by the caller's next call
            self._error = err

    def _on_cycle(self, record: Any) -> None:
        state = record.state
        previous = self._snapshot
        if state is not None:
            position = np.array(state.position, dtype=np.float64)
        elif previous is not None:
            position = previous.position
        else:
            return
        mode = record.mode.value
        if mode in ("estopped", "faulted") and self._fault is None and not self._stopping:
            self._fault = self._fault_text(mode)
        self._snapshot = Snapshot(
            record.cycle,
            time.perf_counter(),
            tuple(self._runtime.joint_names),
            position,
            np.array(record.command, dtype=np.float64),
            mode,
        )

    def _fault_text(self, mode: str) -> str:
        faults = self._runtime.state().faults
        detail = "; ".join(
            f.detail if f.joint is None else f"{f.joint}: {f.detail}" for f in faults
        )
        return f"{mode}" + (f": {detail}" if detail else "")


def _reason(err: BaseException) -> str:
    """One line for ``err``: its message, or its type when it has none."""
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__
