"""A hilbot robot as LeRobot drives one: connect, observe, act, calibrate, disconnect.

:class:`HilbotArm` is the logic of the ``lerobot_robot_hilbot`` plugin, free of LeRobot
(the plugin adds LeRobot's base class and cameras). Values are LeRobot's: ``<joint>.pos``
in the units LeRobot's own class of that arm uses (:mod:`hilbot.driver.dataset.features`).

Calibration, in this order:

1. hilbot's calibration of the robot on that port (``hilbot calibrate``, or ``calibrate()``
   here), or the file given as ``calibration``;
2. else, on ``hardware`` (or a virtual bus on a given port), LeRobot's calibration file
   of the arm (``lerobot_file``: LeRobot's ``calibration_dir/<id>.json``), imported as
   ``hilbot calibrate --from-lerobot`` does;
3. else none (the URDF's limits stand in for the ranges).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hilbot.driver.calibration.apply import Calibrated
from hilbot.driver.lerobot_bridge.background import BackgroundRuntime, RuntimeFault
from hilbot.driver.lerobot_bridge.units import LeRobotUnits
from hilbot.driver.runtime.errors import DriverError

BACKENDS = ("sim", "mujoco", "virtual", "hardware")

log = logging.getLogger("hilbot.driver.lerobot_bridge")


class HilbotArm:
    """One hilbot robot behind LeRobot's robot calls.

    Args:
        config: a shipped robot name or a YAML file.
        backend: ``sim``, ``mujoco``, ``virtual`` or ``hardware``.
        port: ``hardware``: the serial port (single-bus robots), overriding the config's;
            ``virtual``: the pty of a ``hilbot sim-bus`` already running (none is started).
        calibration: a hilbot calibration file to apply (default: the robot's own).
        lerobot_file: LeRobot's calibration file of this arm (read on ``hardware`` when
            hilbot has none; written by :meth:`calibrate`).
        rate_hz: the control loop's rate, overriding the config's.
        hand: ``virtual``: a scripted hand moving the torque-off servos (``sweep``, ``wave``).

    Raises:
        DriverError: a bad option, config or calibration (one line).
    """

    def __init__(
        self,
        config: str,
        backend: str = "sim",
        *,
        port: str | None = None,
        calibration: Path | None = None,
        lerobot_file: Path | None = None,
        rate_hz: float | None = None,
        hand: str | None = None,
    ) -> None:
        from hilbot.driver.runtime.backends import backend_name

        try:
            backend = backend_name(backend)
        except Exception:
            backend = str(backend)
        if backend not in BACKENDS:
            raise DriverError(f"backend {backend!r}: expected one of {', '.join(BACKENDS)}")
        if port is not None and backend not in ("hardware", "virtual"):
            raise DriverError(f"port is for the hardware and virtual backends, not {backend}")
        if hand is not None and backend != "virtual":
            raise DriverError(f"hand is for the virtual backend, not {backend}")
        self.source = config
        self.backend = backend
        self.port = port
        self.explicit = calibration
        self.lerobot_file = lerobot_file
        self.rate_hz = rate_hz
        self.hand = hand
        self._runtime: BackgroundRuntime | None = None
        self.calibrated = self._load()
        self.units = _units(self.calibrated)

    @property
    def name(self) -> str:
        """The hilbot config's name."""
        return str(self.calibrated.config.name)

    @property
    def robot_type(self) -> str:
        """LeRobot's robot type of this arm (its class's ``name``), or the config's name."""
        return str(self.units.features.robot_type)

    @property
    def connected(self) -> bool:
        """The runtime runs."""
        return self._runtime is not None and self._runtime.running

    @property
    def calibrated_here(self) -> bool:
        """A calibration applies, or none is needed.

        The simulators need none, nor does a virtual arm (assembled as its config says,
        unless a calibration recorded otherwise); a real arm does.
        """
        return self.calibrated.calibration is not None or self.backend != "hardware"

    def connect(self) -> None:
        """Start the runtime and arm it (torque on, holding where the arm is).

        Raises:
            RuntimeFault: it did not start (the bus, a stale calibration, ...).
        """
        if self.connected:
            return
        hand = () if self.hand is None else ("--hand", self.hand)
        on_pty = self.port if self.backend == "virtual" else None
        self._runtime = BackgroundRuntime(
            self.calibrated, self.backend, enable=True, sim_bus_args=hand, port=on_pty
        )
        try:
            self._runtime.start()
        except RuntimeFault:
            self._runtime.stop()
            self._runtime = None
            raise

    def observation(self) -> dict[str, float]:
        """The newest measured joint positions, in LeRobot's units.

        Raises:
            RuntimeFault: a fault of the runtime since the last call.
        """
        return self.units.to_lerobot(self._running().latest().positions())

    def act(self, action: Mapping[str, object]) -> dict[str, float]:
        """Hand ``action`` to the motion layer (sampled now); return the last command.

        Raises:
            RuntimeFault: a fault of the runtime since the last call.
            ValueError: a key missing, or a value that is not a finite number.
        """
        runtime = self._running()
        stamp = time.perf_counter()
        runtime.set_joint_targets(self.units.to_joints(action), stamp=stamp)
        return self.units.to_lerobot(runtime.latest().commands())

    def disconnect(self) -> None:
        """Controlled stop, then the runtime's shutdown (torque off per the config)."""
        runtime, self._runtime = self._runtime, None
        if runtime is None:
            return
        runtime.stop()

    def calibrate(self) -> None:
        """Run hilbot's guided calibration of this arm, then write LeRobot's file of it.

        ``virtual``: the scripted hand moves the arm (``hilbot calibrate --demo``);
        ``hardware``: the prompts ask you to. The simulators need none. The runtime, if
        it runs, is stopped for it (the flow has the bus to itself) and started again.

        Raises:
            DriverError: the calibration failed (its last line says why).
        """
        if self.backend in ("sim", "mujoco"):
            log.info("%s: the %s backend needs no calibration", self.name, self.backend)
            return
        was_connected = self._runtime is not None
        self.disconnect()
        words = [self.source]
        if self.backend == "virtual":
            words += ["--backend", "virtual", "--demo", "--yes"]
        elif self.port is not None:
            words += ["--port", self.port]
        if self.explicit is not None:
            words += ["--out", str(self.explicit)]
        _hilbot("calibrate", *words)
        if self.lerobot_file is not None:
            self.lerobot_file.parent.mkdir(parents=True, exist_ok=True)
            export = [w for w in words if w not in ("--demo", "--yes")]
            _hilbot("calibrate", *export, "--to-lerobot", str(self.lerobot_file), quiet=True)
        self.calibrated = self._load()
        self.units = _units(self.calibrated)
        if was_connected:
            self.connect()

    def _running(self) -> BackgroundRuntime:
        runtime = self._runtime
        if runtime is None:
            raise RuntimeFault(f"{self.name} is not connected")
        return runtime

    def _load(self) -> Calibrated:
        """The config as it is driven: the options applied, and its calibration."""
        from hilbot.driver.calibration.apply import load_calibrated
        from hilbot.driver.runtime.config import load_config

        config = load_config(self.source)
        update: dict[str, Any] = {}
        if self.rate_hz is not None:
            update["rate_hz"] = float(self.rate_hz)
        if self.port is not None:
            if len(config.buses) != 1:
                raise DriverError(f"port needs a single-bus robot; {config.name} has several")
            if self.backend == "hardware":
                update["buses"] = (config.buses[0].model_copy(update={"port": self.port}),)
        if update:
            config = config.model_copy(update=update)
        explicit = self.explicit
        if explicit is None and (self.backend == "hardware" or self.port is not None):
            explicit = self._imported(config)
        return load_calibrated(config, self.backend, explicit, source=self.source, port=self.port)

    def _imported(self, config: Any) -> Path | None:
        """LeRobot's file of this arm, imported where hilbot has no calibration of it."""
        from hilbot.driver.calibration import files
        from hilbot.driver.calibration import lerobot as lerobot_files

        port = self.port or config.buses[0].port
        own = files.default_path(config.name, port)
        if own.is_file():  # hardware finds it itself; a virtual bus on a port is told
            return own if self.backend == "virtual" else None
        if self.lerobot_file is None or not self.lerobot_file.is_file():
            return None
        data = lerobot_files.read_file(self.lerobot_file)
        imported = lerobot_files.from_lerobot(data, config, files.port_key(port), self.lerobot_file)
        imported, notes = lerobot_files.fit_urdf(imported, config)
        files.save(imported, own)
        for note in notes:
            log.info("%s", note)
        log.info("LeRobot's calibration %s imported to %s", self.lerobot_file, own)
        return own


def _units(calibrated: Calibrated) -> LeRobotUnits:
    from hilbot.driver.dataset.features import features_for

    return LeRobotUnits(
        features_for(calibrated.config, calibrated.calibration, uncalibrated=calibrated.bus_config)
    )


def _hilbot(*args: str, quiet: bool = False) -> None:
    """Run ``hilbot ARGS`` with this python, the terminal its own (prompts, progress).

    Raises:
        DriverError: it failed.
    """
    out = subprocess.DEVNULL if quiet else None
    done = subprocess.run(
        [sys.executable, "-m", "hilbot", *args],
        stdout=out,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = (done.stderr or "").strip().splitlines()
        raise DriverError(
            f"hilbot {' '.join(args[:2])} failed: {lines[-1] if lines else done.returncode}"
        )
    if done.stderr and not quiet:
        sys.stderr.write(done.stderr)
