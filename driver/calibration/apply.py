"""Applying a calibration at run time, and catching one that no longer matches the arm.

:func:`calibrated_config` gives the config the runtime and the backend are built from:
each calibrated servo with its measured offset and direction (the backend's
``ServoSpec`` mapping, so the layers above keep joint names and SI units), and each
joint's limits tightened to the range it was seen to move through. :func:`stale_joints`
compares the first reading with the recorded ranges: a joint far outside (a multi-turn
wrap, a horn put back on another spline) means the calibration is stale, and the run is
refused before anything moves. :func:`load_calibrated` and :class:`Calibrated` put the
two together for a command (``hilbot run``, ``hilbot lead``): find and apply the file,
then check the first reading before anything is enabled. A virtual arm's calibration
records the assembly errors its virtual servos had (:attr:`Calibrated.mounts`): the
virtual bus is rebuilt with them unless the command is given its own ``--mount``.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilbot.driver.calibration import files
from hilbot.driver.runtime.config import RobotConfig
from hilbot.driver.runtime.errors import DriverError
from hilbot.hal.backend import JointState
from hilbot.hal.calibration import Calibration

#: How far inside the measured range the limits go [rad or m]: a couple of ticks, so a
#: goal at a limit never rounds past a servo limit ``--write-servos`` put at the same place.
LIMIT_INSET = 0.005

log = logging.getLogger("hilbot.driver.calibration")


class CalibrationRequired(DriverError):
    """The config says ``calibration: required`` and there is no calibration file."""


class CalibrationMismatch(DriverError):
    """A calibration that does not fit the config, or no longer fits the arm."""


def calibrate_command(
    config: RobotConfig, backend: str, source: str | None = None, port: str | None = None
) -> str:
    """The command that calibrates this robot on this backend, writing the file it looks for.

    Args:
        config: the robot's config.
        backend: the backend the calibration is for (``virtual``: the ``--demo``).
        source: the config as the user named it (a YAML path; default ``config.name``).
        port: the ``--port`` the user gave, if any (the file is named after the port).
    """
    words = ["hilbot", "calibrate", shlex.quote(source or config.name)]
    if backend == "virtual":
        return " ".join([*words, "--backend", "virtual", "--demo"])
    if port is not None:
        words += ["--port", shlex.quote(port)]
    return " ".join(words)


def find(config: RobotConfig, backend: str, explicit: Path | None = None) -> Calibration | None:
    """The calibration ``hilbot run`` applies: ``explicit``, else the robot's default file.

    Raises:
        CalibrationRequired: none found and the config requires one.
        CalibrationFileError: the file is unreadable or malformed.
    """
    found = _find(config, backend, explicit, calibrate_command(config, backend))
    return None if found is None else found[1].calibration


def _find(
    config: RobotConfig, backend: str, explicit: Path | None, command: str
) -> tuple[Path, files.Saved] | None:
    """The calibration file :func:`find` reads, with the assembly it records.

    The simulator (``backend == "sim"``) has no assembly to calibrate: only an explicit
    file applies there.

    Raises:
        CalibrationRequired: none found and the config requires one.
        CalibrationFileError: the file is unreadable or malformed.
    """
    if explicit is not None:
        return explicit, files.read(explicit)
    if backend == "sim":
        return None
    path = files.default_path(config.name, config.buses[0].port, virtual=backend == "virtual")
    if path.is_file():
        return path, files.read(path)
    if config.calibration.required:
        raise CalibrationRequired(
            f"{config.name} must be calibrated before it runs (calibration: required) and "
            f"{path} does not exist: run `{command}` (or give --calibration FILE)"
        )
    return None


def calibrated_config(
    config: RobotConfig,
    calibration: Calibration,
    command: str | None = None,
    path: Path | None = None,
) -> RobotConfig:
    """``config`` with the calibration's offsets, directions and ranges.

    ``command`` is the calibrate command a hint names (default: the robot's, on hardware);
    ``path``, the file the calibration came from, which the hints offer to remove.

    Raises:
        CalibrationMismatch: the calibration is of another robot, misses a joint, or
            names another servo for a joint.
    """
    again = way_out(command or calibrate_command(config, "hardware"), path)
    if calibration.robot != config.name:
        raise CalibrationMismatch(
            f"the calibration is of {calibration.robot!r}, not {config.name!r}: {again}"
        )
    missing = [j for j in config.joint_names if j not in calibration.joints]
    if missing:
        raise CalibrationMismatch(f"the calibration has no {', '.join(missing)}: {again}")
    servos = []
    for servo in config.servos:
        cal = calibration.joints[servo.joint]
        if servo.shadow_of is not None:
            servos.append(servo)
            continue
        if cal.servo_id != servo.id:
            raise CalibrationMismatch(
                f"{servo.joint}: calibrated on servo {cal.servo_id}, the config has servo "
                f"{servo.id}: {again}"
            )
        servos.append(servo.model_copy(update={"offset": cal.offset, "direction": cal.direction}))
    limits = dict(config.safety.soft_limits)
    for joint in config.joint_names:
        cal = calibration.joints[joint]
        lower, upper = cal.lower + LIMIT_INSET, cal.upper - LIMIT_INSET
        if joint in limits:
            lower, upper = max(lower, limits[joint][0]), min(upper, limits[joint][1])
        if not lower < upper:
            raise CalibrationMismatch(
                f"{joint}: the measured range {cal.lower:.3f}..{cal.upper:.3f} leaves no room "
                "inside the config's soft limits; move the joint through its full range when "
                f"calibrating: {again}"
            )
        limits[joint] = (lower, upper)
    safety = config.safety.model_copy(update={"soft_limits": limits})
    return config.model_copy(update={"servos": tuple(servos), "safety": safety})


def way_out(command: str, path: Path | None) -> str:
    """The two ways past a calibration that does not fit: calibrate again, or remove it."""
    if path is None:
        return f"calibrate again (`{command}`)"
    return f"calibrate again (`{command}` writes {path} anew), or remove {path}"


def stale_joints(state: JointState, calibration: Calibration, margin: float) -> list[str]:
    """The joints reading outside their calibrated range by more than ``margin``, described."""
    out = []
    for joint, value in state.positions().items():
        cal = calibration.joints.get(joint)
        if cal is None:
            continue
        if value < cal.lower - margin or value > cal.upper + margin:
            out.append(
                f"{joint} reads {value:+.3f} rad, outside its calibrated range "
                f"{cal.lower:+.3f}..{cal.upper:+.3f}"
            )
    return out


def check_fresh(
    state: JointState,
    calibration: Calibration,
    config: RobotConfig,
    backend: str,
    command: str | None = None,
    path: Path | None = None,
) -> None:
    """Refuse a stale calibration before anything moves.

    ``command`` is the calibrate command the refusal names (default: the robot's);
    ``path``, the file it came from.

    Raises:
        CalibrationMismatch: naming each joint out of range and the command to run.
    """
    stale = stale_joints(state, calibration, config.calibration.stale_margin)
    if stale:
        raise CalibrationMismatch(
            "the calibration no longer matches the arm (a multi-turn wrap, or a horn "
            f"re-assembled?): {'; '.join(stale)}. Nothing was enabled; "
            f"{way_out(command or calibrate_command(config, backend), path)}"
        )


@dataclass(frozen=True, slots=True)
class Calibrated:
    """A robot config as a command drives it: with its calibration applied, if it has one.

    Attributes:
        config: the config with the calibration applied (``bus_config`` when there is none).
        calibration: the calibration applied, or ``None``.
        bus_config: the uncalibrated config (virtual buses are built from it).
        backend: the backend kind the calibration was found for.
        command: the calibrate command the hints name.
        mounts: the ``--mount`` the virtual arm was assembled with when it was calibrated
            (``--backend virtual`` only; else ``()``).
        path: the calibration's file, or ``None``.
    """

    config: RobotConfig
    calibration: Calibration | None
    bus_config: RobotConfig
    backend: str
    command: str = ""
    mounts: tuple[str, ...] = ()
    path: Path | None = None

    def backend_options(self) -> dict[str, Any]:
        """The ``build_backend`` options that go with it: the buses' uncalibrated config."""
        return {} if self.calibration is None else {"bus_config": self.bus_config}

    def check_fresh(self, state: JointState) -> None:
        """Refuse a stale calibration, given the first reading, before anything is enabled.

        Raises:
            CalibrationMismatch: naming each joint out of range and the command to run.
        """
        if self.calibration is not None:
            check_fresh(
                state,
                self.calibration,
                self.config,
                self.backend,
                self.command or None,
                self.path,
            )

    def mount_args(self, explicit: Sequence[str] = ()) -> list[str]:
        """The ``hilbot sim-bus`` ``--mount`` options of the virtual bus.

        ``explicit`` (the user's ``--mount``) wins; without it, the virtual arm is assembled
        as it was calibrated (said in one info line).
        """
        mounts = tuple(explicit) or self.mounts
        if mounts and not explicit:
            log.info("virtual arm assembled as calibrated: %s", _mount_words(mounts))
        return [word for mount in mounts for word in ("--mount", mount)]


def _mount_words(mounts: Sequence[str]) -> str:
    return " ".join(f"--mount {m}" for m in mounts)


def load_calibrated(
    config: RobotConfig,
    backend: str,
    explicit: Path | None = None,
    *,
    source: str | None = None,
    port: str | None = None,
) -> Calibrated:
    """``config`` with the calibration :func:`find` gives (``explicit``, or the robot's file).

    ``source`` (the config as the user named it) and ``port`` (the ``--port`` given, if
    any) go into the calibrate command the hints name.

    Raises:
        CalibrationRequired: none found and the config requires one.
        CalibrationFileError: the file is unreadable or malformed.
        CalibrationMismatch: the calibration does not fit the config.
    """
    command = calibrate_command(config, backend, source, port)
    found = _find(config, backend, explicit, command)
    if found is None:
        return Calibrated(config, None, config, backend, command)
    path, saved = found
    mounts = saved.mounts if backend == "virtual" else ()
    from hilbot.sim.hand import check_mount_ids

    try:  # a file recorded for another arm, or edited by hand
        check_mount_ids(mounts, [s.id for s in config.servo_specs()], config.name)
    except ValueError as exc:
        raise CalibrationMismatch(
            f"the calibration's virtual_mounts do not fit {config.name}: {exc}; "
            f"{way_out(command, path)}"
        ) from None
    return Calibrated(
        calibrated_config(config, saved.calibration, command, path),
        saved.calibration,
        config,
        backend,
        command,
        mounts,
        path,
    )
