"""Cross-checks of a robot config against its URDF, the servo tables and the bus budget.

Each check raises :class:`~hilbot.driver.runtime.errors.ConfigError` with the path of the
field at fault; all of them run at load, before any port is opened.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hilbot.driver.runtime.chains import SolverKind, make_solver, split_options
from hilbot.driver.runtime.errors import ConfigError
from hilbot.driver.runtime.safety import margin_problem

if TYPE_CHECKING:  # load_config calls check_config: at run time this module needs no config
    from hilbot.driver.runtime.config import RobotConfig
    from hilbot.hal.family import Family

LIMIT_SLACK = 1e-6  # [rad] rounding allowed when comparing limits with a servo's range


@functools.cache
def _load_robot_cached(path: Path, mtime: float) -> Any:
    from hilbot.kinematics import load_urdf

    return load_urdf(path)


def load_robot(urdf: Path) -> Any:
    """Load (and cache, per file and modification time) the URDF of a config."""
    path = Path(urdf).resolve()
    return _load_robot_cached(path, path.stat().st_mtime)


def check_config(config: RobotConfig, *, source: Path | None = None) -> Any:
    """Run every cross-check; return the loaded robot model.

    Raises:
        ConfigError: the first problem found, with the field path.
    """
    from hilbot.kinematics import KinematicsError

    if not config.urdf.is_file():
        raise ConfigError(source, ("urdf",), f"URDF file not found: {config.urdf}")
    try:
        robot = load_robot(config.urdf)
    except KinematicsError as exc:
        raise ConfigError(source, ("urdf",), f"cannot load the URDF: {exc}") from exc
    _check_joints(config, robot, source)
    _check_limits(config, robot, source)
    _check_home(config, robot, source)
    _check_chains(config, robot, source)
    _check_servo_ranges(config, robot, source)
    _check_bus_watchdog(config, source)
    check_rate(config, source=source)
    return robot


def _check_bus_watchdog(config: RobotConfig, source: Path | None) -> None:
    """Refuse a servo-side watchdog on a robot whose servos have none (all Feetech)."""
    from hilbot.hal.family import family

    if config.safety.bus_watchdog is not None and not any(
        family(b.family).has_bus_watchdog for b in config.buses
    ):
        raise ConfigError(
            source,
            ("safety", "bus_watchdog"),
            "Feetech servos have no Bus Watchdog: set it to null (the target watchdog, "
            "safety.watchdog_timeout, is what holds the arm; see docs/hardware.md)",
        )


def _movable(robot: Any) -> list[str]:
    return [n for n, j in robot.joints.items() if j.is_movable and j.mimic is None]


def _unknown_joint(robot: Any, joint: str) -> str:
    return f"unknown joint {joint!r}; the URDF's movable joints are: {', '.join(_movable(robot))}"


def _check_joints(config: RobotConfig, robot: Any, source: Path | None) -> None:
    movable = set(_movable(robot))
    for i, servo in enumerate(config.servos):
        if servo.joint not in movable:
            raise ConfigError(source, ("servos", i, "joint"), _unknown_joint(robot, servo.joint))
        if robot.joints[servo.joint].dof != 1:
            raise ConfigError(
                source, ("servos", i, "joint"), f"joint {servo.joint!r} has more than one DoF"
            )
    driven = set(config.joint_names)
    for field, mapping in (
        ("home", config.home),
        ("safety.soft_limits", config.safety.soft_limits),
    ):
        for joint in mapping:
            if joint not in driven:
                raise ConfigError(
                    source, (*field.split("."), joint), _unknown_driven(config, joint)
                )
    for field in ("velocity_limit", "soft_limit_margin"):
        per_joint = getattr(config.safety, field)
        for joint in per_joint if isinstance(per_joint, dict) else ():
            if joint not in driven:
                raise ConfigError(source, ("safety", field, joint), _unknown_driven(config, joint))


def _check_limits(config: RobotConfig, robot: Any, source: Path | None) -> None:
    """The margin leaves every joint a usable range; soft limits overlap the URDF's."""
    for joint in config.joint_names:
        margin = config.margin_of(joint)
        lower, upper = robot.joints[joint].bounds()
        low, high = lower, upper
        if math.isfinite(lower) and math.isfinite(upper):
            problem = margin_problem(joint, lower, upper, margin)
            if problem is not None:
                per_joint = isinstance(config.safety.soft_limit_margin, dict)
                loc = ("safety", "soft_limit_margin", *((joint,) if per_joint else ()))
                raise ConfigError(source, loc, problem)
            low, high = lower + margin, upper - margin
        soft = config.safety.soft_limits.get(joint)
        if soft is not None and not max(low, soft[0]) < min(high, soft[1]):
            raise ConfigError(
                source,
                ("safety", "soft_limits", joint),
                f"[{soft[0]:g}, {soft[1]:g}] leaves nothing of the joint's limits "
                f"[{lower:.4f}, {upper:.4f}] (after the margin of {margin:g})",
            )


def _check_home(config: RobotConfig, robot: Any, source: Path | None) -> None:
    for joint, value in config.home.items():
        lower, upper = _effective(config, robot, joint)
        if not lower - LIMIT_SLACK <= value <= upper + LIMIT_SLACK:
            raise ConfigError(
                source, ("home", joint), f"{value} is outside the joint's limits [{lower}, {upper}]"
            )


def _unknown_driven(config: RobotConfig, joint: str) -> str:
    return f"unknown joint {joint!r}; the servos drive: {', '.join(config.joint_names)}"


def _check_chains(config: RobotConfig, robot: Any, source: Path | None) -> None:
    from hilbot.kinematics import NotAnAncestor, UnknownLink

    driven = set(config.joint_names)
    for i, chain in enumerate(config.chains):
        try:
            joints = robot.path_joints(chain.source_link, chain.target_link)
        except UnknownLink as exc:
            role = getattr(exc, "role", "source")
            field = "target_link" if role == "target" else "source_link"
            raise ConfigError(source, ("chains", i, field), str(exc)) from exc
        except NotAnAncestor as exc:
            raise ConfigError(
                source,
                ("chains", i, "source_link"),
                f"{chain.source_link!r} is not an ancestor of {chain.target_link!r}: {exc}",
            ) from exc
        moving = [j for j in joints if j.dof > 0]
        if not moving:
            raise ConfigError(
                source, ("chains", i), "the chain has no movable joint between its links"
            )
        for joint in moving:
            if joint.name not in driven:
                raise ConfigError(
                    source,
                    ("chains", i),
                    f"chain joint {joint.name!r} is not driven by any servo",
                )
        try:
            make_solver(chain.solver, split_options(chain.options)[1])
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                source, ("chains", i, "options"), f"the {chain.solver} solver rejects them: {exc}"
            ) from exc
        if chain.solver is SolverKind.FABRIK and any(j.dof > 1 for j in moving):
            raise ConfigError(
                source, ("chains", i, "solver"), "fabrik cannot solve multi-DoF joints"
            )


def _check_servo_ranges(config: RobotConfig, robot: Any, source: Path | None) -> None:
    from hilbot.hal.family import family

    for i, servo in enumerate(config.servos):
        bus = config.bus_named(servo.bus)
        fam = family(bus.family)
        try:
            spec = fam.model(servo.model)
        except KeyError as exc:
            raise ConfigError(source, ("servos", i, "model"), str(exc.args[0])) from exc
        _check_family_settings(fam, config, i, source)
        if fam.protocols and spec.protocol != bus.protocol:
            raise ConfigError(
                source,
                ("servos", i, "model"),
                f"{spec.name} speaks protocol {spec.protocol}.0 but bus {bus.name!r} "
                f"is protocol {bus.protocol}.0",
            )
        try:
            spec.baud_value(bus.baudrate)
        except ValueError as exc:
            raise ConfigError(
                source, ("buses", _bus_index(config, bus.name), "baudrate"), str(exc)
            ) from exc
        scale = servo.direction * spec.radians_per_tick / servo.gear_ratio
        ends = sorted(
            servo.offset + scale * (tick - spec.center_tick)
            for tick in (getattr(spec, "position_min", 0), spec.position_max)
        )
        lower, upper = _effective(config, robot, servo.joint)
        if not (math.isfinite(lower) and math.isfinite(upper)):
            raise ConfigError(
                source,
                ("safety", "soft_limits", servo.joint),
                f"joint {servo.joint!r} is unlimited in the URDF; servo {servo.id} "
                f"({spec.name}) can only reach [{ends[0]:.4f}, {ends[1]:.4f}]: give soft limits",
            )
        if lower < ends[0] - LIMIT_SLACK or upper > ends[1] + LIMIT_SLACK:
            raise ConfigError(
                source,
                ("servos", i),
                f"joint {servo.joint!r} limits [{lower:.4f}, {upper:.4f}] exceed the range "
                f"of servo {servo.id} ({spec.name}, offset {servo.offset}, direction "
                f"{servo.direction}): [{ends[0]:.4f}, {ends[1]:.4f}]; fix the offset or "
                "narrow the limits with safety.soft_limits",
            )


def _check_family_settings(fam: Family, config: RobotConfig, i: int, source: Path | None) -> None:
    from hilbot.hal.errors import ConfigError as HalConfigError

    try:
        fam.check_settings(config.servo_specs()[i])
    except HalConfigError as exc:
        raise ConfigError(source, ("servos", i, exc.field), str(exc)) from None


def _effective(config: RobotConfig, robot: Any, joint: str) -> tuple[float, float]:
    """The limits the safety layer will enforce (see ``effective_limits``)."""
    from hilbot.driver.runtime.safety import effective_limits

    lower, upper = robot.joints[joint].bounds()
    limits = effective_limits(
        [joint],
        {joint: (lower, upper, 1.0)},
        soft_limits=config.safety.soft_limits,
        margin=config.safety.soft_limit_margin,
        velocity=1.0,
    )
    return float(limits.lower[0]), float(limits.upper[0])


def _bus_index(config: RobotConfig, name: str) -> int:
    return [b.name for b in config.buses].index(name)


def check_rate(config: RobotConfig, *, source: Path | None) -> None:
    """Reject a loop rate above what a bus can carry (``ConfigError`` on ``rate_hz``)."""
    from hilbot.hal.family import family

    for b, bus in enumerate(config.buses):
        servos = config.servo_specs(bus.name)
        if not servos:
            raise ConfigError(source, ("buses", b), f"no servo is on bus {bus.name!r}")
        limit = family(bus.family).max_cycle_rate(bus.bus_spec(), servos, read=bus.read)
        if config.rate_hz > limit:
            raise ConfigError(
                source,
                ("rate_hz",),
                f"{config.rate_hz:g} Hz is more than bus {bus.name!r} can carry: "
                f"{len(servos)} servos at {bus.baudrate} bit/s allow at most {limit:.0f} Hz "
                "(one sync read and one sync write per cycle)",
            )
