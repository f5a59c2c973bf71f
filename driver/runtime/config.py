"""Robot configs: one YAML per robot, loaded into validated, frozen models.

A config names the robot's URDF, its buses and servos, its IK chains, the loop
rate, the safety settings, a home pose and the teleop settings. Everything that
can be checked without touching hardware is checked by :func:`load_config`, so a
bad config fails before any port opens, with the path of the bad field::

    servos[3].joint: unknown joint 'joint9'; the URDF has: joint1, joint2, ...
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hilbot._bounded import load_yaml, yaml_problem
from hilbot._compat import StrEnum
from hilbot.driver.runtime.chains import SOLVE_OPTIONS as SOLVE_OPTIONS  # re-exported
from hilbot.driver.runtime.chains import SolverKind as SolverKind  # re-exported
from hilbot.driver.runtime.errors import ConfigError
from hilbot.driver.runtime.safety import (
    MAX_DELTA_PER_CYCLE,
    MAX_JOINT_ACCELERATION,
    MAX_JOINT_JERK,
    MAX_JOINT_VELOCITY,
    MAX_RATE_HZ,
    MAX_WATCHDOG_TIMEOUT,
    MIN_RATE_HZ,
)
from hilbot.driver.teleop.settings import TeleopSettings
from hilbot.hal.mapping import MAX_SERVO_ID, BusSpec, ServoSpec

Finite = Annotated[float, Field(allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]
#: A loop rate [Hz] (``rate_hz``, ``hilbot run --rate``).
RateHz = Annotated[float, Field(ge=MIN_RATE_HZ, le=MAX_RATE_HZ, allow_inf_nan=False)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- The ``calibration`` section of a robot config.

#: The middle pose when a config documents none: the URDF's zero pose.
DEFAULT_POSE_TEXT = "every joint at the zero of its URDF (the pose the URDF is drawn in)"


class CalibrationSettings(BaseModel):
    """How a robot is calibrated, and whether it must be before it runs.

    ``calibration: required`` is short for ``calibration: {required: true}``.

    Attributes:
        required: refuse to run on a bus (virtual or real) without a calibration file;
            the message names the ``hilbot calibrate`` command to run.
        middle_pose: the joint positions [rad or m] of the documented middle pose
            (joints not named: 0); homing offsets are set there.
        middle_pose_text: how to put the arm in the middle pose, shown by the prompt.
        stale_margin: at start-up a joint reading outside its calibrated range by more
            than this [rad or m] means the calibration no longer matches the arm.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    required: bool = False
    middle_pose: dict[str, Finite] = Field(default_factory=dict)
    middle_pose_text: str = DEFAULT_POSE_TEXT
    stale_margin: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] = 0.15

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        if value == "required":
            return {"required": True}
        if value == "optional":
            return {}
        return value


# --- The ``lead`` section of a leader arm's config: how its joints drive a follower's.

Range = tuple[Finite, Finite]


class JointLead(_Frozen):
    """How one leader joint drives a follower joint.

    ``follower = offset + scale * leader``; or, with ``range`` and ``follower_range``
    (a gripper trigger and the follower's jaw), the leader's range mapped linearly onto
    the follower's and clipped to it.

    Attributes:
        to: the follower joint (default: the same name).
        scale: multiplies the leader's position.
        offset: added after scaling [rad or m].
        range: the leader joint's range ``[lower, upper]`` (with ``follower_range``).
        follower_range: what ``range`` maps onto on the follower.
    """

    to: str | None = None
    scale: Finite = 1.0
    offset: Finite = 0.0
    range: Range | None = None
    follower_range: Range | None = None

    @model_validator(mode="after")
    def _ranges(self) -> JointLead:
        if (self.range is None) != (self.follower_range is None):
            raise ValueError("range and follower_range go together")
        if self.range is not None and not self.range[0] < self.range[1]:
            raise ValueError(f"range lower {self.range[0]} must be below upper {self.range[1]}")
        if self.scale == 0.0 or not math.isfinite(self.scale):
            raise ValueError("scale must be finite and not 0")
        return self


class LeaderHold(_Frozen):
    """A light hold on one leader joint (the gripper trigger springs back to ``position``).

    The joint's servo gets torque on at ``position``; keep its push light in the
    leader's config so a finger overcomes it: current-based position control with a low
    ``current_limit`` on a Dynamixel servo (the Koch leader), a low ``torque_limit`` on a
    Feetech one (the SO-101 leader, whose STS3215 has no current mode).
    """

    joint: str
    position: Finite = 0.0


class LeadSettings(_Frozen):
    """A leader arm's ``lead`` section.

    Attributes:
        follower: the follower robot ``hilbot lead`` drives by default (``--to``).
        joints: per leader joint how it maps; joints not named map to the follower joint
            of the same name, unscaled. ``{joint: null}`` leaves a joint out.
        hold: a light hold on the trigger, or none (every joint limp).
        rate_hz: how often the leader is read and published; default the config's rate.
    """

    follower: str | None = None
    joints: dict[str, JointLead | None] = Field(default_factory=dict)
    hold: LeaderHold | None = None
    rate_hz: Annotated[float, Field(gt=0.0, le=1000.0, allow_inf_nan=False)] | None = None


class BusConfig(_Frozen):
    """One serial bus.

    Attributes:
        name: how servos refer to this bus (``"main"`` when there is one).
        port: serial device, e.g. ``/dev/ttyUSB0``; ``hilbot run --backend virtual``
            replaces it with the virtual bus's pty.
        baudrate: [bit/s].
        protocol: Dynamixel protocol version, 1 or 2 (ignored on a Feetech bus).
        family: the servo family on the bus, ``dynamixel`` or ``feetech`` (STS/SCS).
        read: what each cycle reads from every servo: ``position``,
            ``position+velocity`` or ``position+velocity+effort``; unset, position only
            on protocol 1 and all three on 2 (see ``hilbot.hal.dynamixel.timing``).
        reply_margin_ms: how long past a reply's wire time the backend waits for it [ms];
            unset, the backend's default (3 ms). Raise it for adapters behind hubs or
            with a long latency timer; ``--backend virtual`` sets it from the host's
            measured scheduling stalls.
    """

    name: str = "main"
    port: str
    baudrate: int = Field(default=1_000_000, gt=0)
    protocol: Literal[1, 2] = 2
    family: Literal["dynamixel", "feetech"] = "dynamixel"
    read: Literal["position", "position+velocity", "position+velocity+effort"] | None = None
    reply_margin_ms: Annotated[float, Field(gt=0.0, le=500.0, allow_inf_nan=False)] | None = None

    def bus_spec(self) -> BusSpec:
        """The HAL's ``BusSpec`` of this bus."""
        return BusSpec(self.port, self.baudrate, self.protocol, self.family)


class ServoConfig(_Frozen):
    """One servo and the joint it drives (see ``hilbot.hal.mapping.ServoSpec``).

    ``mode``, ``current_limit`` [A], ``profile_velocity`` [rad/s] and
    ``profile_acceleration`` [rad/s²] are written to the servo at start-up and read back
    (a gripper in ``current_position`` mode closes on an object and holds at the limit).
    They are Dynamixel settings. ``torque_limit``, a fraction (0, 1] of the servo's
    maximum torque, is the Feetech one: written to Torque Limit at start-up and read
    back (a Feetech gripper closing on an object pushes with at most that).
    """

    id: int = Field(ge=0, le=MAX_SERVO_ID)
    model: str
    joint: str
    bus: str | None = None
    offset: Finite = 0.0
    direction: Literal[1, -1] = 1
    gear_ratio: Positive = 1.0
    shadow_of: int | None = None
    mode: Literal["position", "extended_position", "current_position"] | None = None
    current_limit: Annotated[float, Field(gt=0.0, le=10.0, allow_inf_nan=False)] | None = None
    profile_velocity: Annotated[float, Field(ge=0.0, le=100.0, allow_inf_nan=False)] | None = None
    profile_acceleration: (
        Annotated[float, Field(ge=0.0, le=10000.0, allow_inf_nan=False)] | None
    ) = None
    torque_limit: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] | None = None


class ChainConfig(_Frozen):
    """An IK chain: pose targets for ``target_link`` expressed in ``source_link``."""

    name: str
    source_link: str
    target_link: str
    solver: SolverKind = SolverKind.DLS
    options: dict[str, float | int | bool | str] = Field(default_factory=dict)

    @field_validator("options")
    @classmethod
    def _finite_options(
        cls, value: dict[str, float | int | bool | str]
    ) -> dict[str, float | int | bool | str]:
        for key, option in value.items():
            if isinstance(option, float) and not math.isfinite(option):
                raise ValueError(f"{key}: must be a finite number, got {option}")
        return value


class EstopAction(StrEnum):
    """What an e-stop (and an internal fault) does: the stop categories of IEC 60204-1.

    ``torque_off`` is category 0 (torque off at once). ``stop`` is category 2: a
    controlled stop along the commanded state (the motion layer decelerates every joint
    to rest within its acceleration and jerk limits), then hold that final command.
    ``stop_then_torque_off`` is category 1: the same controlled stop, then torque off.
    ``hold`` is the name earlier configs used for ``stop``; it means the same.
    """

    HOLD = "hold"
    STOP = "stop"
    STOP_THEN_TORQUE_OFF = "stop_then_torque_off"
    TORQUE_OFF = "torque_off"

    @property
    def controlled(self) -> bool:
        """Whether it begins with a controlled stop (categories 1 and 2)."""
        return self is not EstopAction.TORQUE_OFF


class SafetyConfig(_Frozen):
    """Limits applied to every command, whatever its source.

    Attributes:
        max_delta_per_cycle: largest change of any joint's command per cycle [rad or m],
            or per joint ``{joint: delta}`` with a ``default`` key for the others (0.02);
            a bigger step is scaled down as a whole, so its direction is kept.
        velocity_limit: a scale (0, 1] of the URDF velocity limits, or per-joint
            limits [rad/s or m/s] (joints not listed keep their URDF limit).
        acceleration_limit: per-joint acceleration limits [rad/s² or m/s²], or one number
            for every joint; unset (or joints not listed), ``ACCELERATION_PER_VELOCITY``
            times the joint's velocity limit (full speed in 0.1 s). The safety layer
            enforces it on every command, whatever its source.
        watchdog_timeout: hold when no fresh target arrived for this long [s];
            ``None`` disables it (targets are then held until replaced). It must be
            longer than one cycle of ``rate_hz``.
        soft_limit_margin: shrink every URDF position limit by this much [rad or m],
            or by a margin per joint ``{joint: margin}`` (joints not listed: none), for
            robots that mix revolute [rad] and prismatic [m] joints. It must leave every
            limited joint at least 10 % (``MIN_RANGE_FRACTION``) of its URDF range, or the
            config fails at load naming the joint.
        soft_limits: per-joint ``[lower, upper]`` limits, intersected with the URDF's
            (the intersection must not be empty).
        estop_action: ``stop`` (category 2: controlled stop, then hold), ``stop_then_torque_off``
            (category 1) or ``torque_off`` (category 0); ``hold`` is ``stop``.
        torque_off_on_shutdown: disable torque when the runtime exits.
        bus_watchdog: servo-side dead-man [s] where the firmware has one (X series):
            the servos stop by themselves when the host goes silent this long;
            ``None`` disables it. A host stall longer than this faults the run (the
            servos refuse goals until re-enabled), so it must exceed the host's worst
            stall: 0.5 s by default (a loaded 2-core machine stalled up to 133 ms).
    """

    max_delta_per_cycle: float | dict[str, float] = 0.02
    velocity_limit: float | dict[str, float] = 1.0
    acceleration_limit: float | dict[str, float] | None = None
    watchdog_timeout: (
        Annotated[float, Field(gt=0.0, le=MAX_WATCHDOG_TIMEOUT, allow_inf_nan=False)] | None
    ) = 0.5
    # No fixed cap: each joint's range bounds it (``hilbot.driver.runtime.safety.margin_problem``).
    soft_limit_margin: float | dict[str, float] = 0.0
    soft_limits: dict[str, tuple[Finite, Finite]] = Field(default_factory=dict)
    estop_action: EstopAction = EstopAction.HOLD
    torque_off_on_shutdown: bool = True
    bus_watchdog: float | None = Field(  # X series: 20 ms units
        default=0.5, ge=0.02, le=2.54, allow_inf_nan=False
    )

    @field_validator("velocity_limit")
    @classmethod
    def _velocity(cls, value: float | dict[str, float]) -> float | dict[str, float]:
        if not isinstance(value, dict):
            if not (math.isfinite(value) and 0.0 < value <= 1.0):
                raise ValueError(
                    "a single velocity_limit is a scale of the URDF limits in (0, 1]; "
                    "give per-joint limits as a mapping {joint: rad/s}"
                )
            return value
        for joint, limit in value.items():
            if not (math.isfinite(limit) and 0.0 < limit <= MAX_JOINT_VELOCITY):
                raise ConfigError(
                    None,
                    (joint,),
                    f"a per-joint velocity limit must be in (0, {MAX_JOINT_VELOCITY:g}] "
                    f"rad/s or m/s, got {limit}",
                )
        return value

    @field_validator("max_delta_per_cycle", "acceleration_limit", mode="before")
    @classmethod
    def _per_joint_numbers(cls, value: object, info: ValidationInfo) -> object:
        """One number for every joint, or ``{joint: number}``: each finite, > 0, sane."""
        top = (
            MAX_DELTA_PER_CYCLE
            if info.field_name == "max_delta_per_cycle"
            else (MAX_JOINT_ACCELERATION)
        )
        if value is None and info.field_name == "acceleration_limit":
            return None
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for joint, number in items:
            where = () if joint is None else (str(joint),)
            if isinstance(number, bool) or not isinstance(number, int | float):
                raise ConfigError(None, where, f"Input should be a number (got {number!r:.60})")
            if not math.isfinite(number):
                raise ConfigError(None, where, f"Input should be a finite number (got {number})")
            if not 0.0 < number <= top:
                raise ConfigError(
                    None,
                    where,
                    "Input should be greater than 0 and less than or equal to "
                    f"{top:g} (got {number})",
                )
        return value

    @field_validator("soft_limit_margin")
    @classmethod
    def _margin(cls, value: float | dict[str, float]) -> float | dict[str, float]:
        problem = "a margin must be a finite number >= 0 [rad or m], got {}"
        if not isinstance(value, dict):
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(problem.format(value))
            return value
        for joint, margin in value.items():
            if not (math.isfinite(margin) and margin >= 0.0):
                raise ConfigError(None, (joint,), problem.format(margin))
        return value

    @field_validator("soft_limits")
    @classmethod
    def _ordered(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for joint, (lower, upper) in value.items():
            if not lower < upper:
                raise ValueError(f"{joint}: lower {lower} must be below upper {upper}")
        return value


class MotionConfig(_Frozen):
    """The motion layer: how the command moves toward the targets (see ``docs/runtime.md``).

    Attributes:
        planner: ``stream`` (the default): track the target streams as a jerk-limited
            motion. The others are there to measure it against (``benchmarks/motion_bench.py``):
            ``off`` sends each newest target to the safety layer as it is (the runtime before
            the motion layer), ``linear`` interpolates linearly to each new target, ``ruckig``
            re-targets Ruckig at each new target (``pip install ruckig``). Every stop is a
            controlled stop of the motion layer whichever planner tracks.
        velocity_share: the share of the safety layer's velocity, acceleration and
            max-delta limits the motion layer plans with, so that it stays inside them.
        jerk_limit: per-joint jerk limits [rad/s³ or m/s³], or one number; unset,
            ``JERK_PER_ACCELERATION`` times the joint's acceleration limit.
        bandwidth: how tightly the command follows the reference [rad/s]; lower is smoother
            and lags more (lowered automatically where the loop rate is too low for it).
        latency: per target source (``joints`` or a chain's name, ``default`` for the
            rest), the look-behind [s] at which the stream is interpolated; ``auto`` (the
            default) is the stream's period plus its observed lateness.
        max_extrapolation: how many periods the reference runs on past the newest target
            before it stops there.
    """

    planner: Literal["stream", "off", "linear", "ruckig"] = "stream"
    velocity_share: float = Field(default=0.95, gt=0.0, le=1.0, allow_inf_nan=False)
    jerk_limit: (
        Annotated[float, Field(gt=0.0, le=MAX_JOINT_JERK, allow_inf_nan=False)]
        | dict[str, Annotated[float, Field(gt=0.0, le=MAX_JOINT_JERK, allow_inf_nan=False)]]
        | None
    ) = None
    bandwidth: float = Field(default=30.0, gt=0.0, le=500.0, allow_inf_nan=False)
    latency: dict[
        str, Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | Literal["auto"]
    ] = Field(default_factory=dict)
    max_extrapolation: float = Field(default=1.0, ge=0.0, le=10.0, allow_inf_nan=False)

    def latency_of(self, source: str) -> float | None:
        """The configured look-behind of ``source`` [s], ``None`` for auto."""
        value = self.latency.get(source, self.latency.get("default", "auto"))
        return None if value == "auto" else float(value)


class RobotConfig(_Frozen):
    """A robot: URDF, buses, servos, chains, rate, safety, home, teleop, calibration, lead.

    Build it with :func:`load_config`, which also checks it against the URDF,
    the servo control tables and the bus timing budget.
    """

    name: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    urdf: Path
    buses: tuple[BusConfig, ...] = Field(min_length=1)
    servos: tuple[ServoConfig, ...] = Field(min_length=1)
    chains: tuple[ChainConfig, ...] = ()
    rate_hz: RateHz = 100.0
    safety: SafetyConfig = SafetyConfig()
    motion: MotionConfig = MotionConfig()
    home: dict[str, Finite] = Field(default_factory=dict)
    teleop: TeleopSettings = TeleopSettings()
    calibration: CalibrationSettings = CalibrationSettings()
    lead: LeadSettings | None = None

    @field_validator("urdf")
    @classmethod
    def _relative_to_yaml(cls, value: Path, info: ValidationInfo) -> Path:
        base = (info.context or {}).get("base_dir")
        if base is not None and not value.is_absolute():
            value = Path(base) / value
        return value

    @model_validator(mode="after")
    def _cross_fields(self) -> RobotConfig:
        _check_buses(self)
        _check_servos(self)
        _check_chain_names(self)
        check_watchdog(self)
        return self

    # -- derived views ---------------------------------------------------------------------
    def bus_named(self, name: str | None) -> BusConfig:
        """Return the bus called ``name`` (``None``: the only bus)."""
        if name is None:
            return self.buses[0]
        for bus in self.buses:
            if bus.name == name:
                return bus
        raise KeyError(name)

    def bus_specs(self) -> dict[str, BusSpec]:
        """Return ``{bus name: BusSpec}`` for the HAL."""
        return {b.name: b.bus_spec() for b in self.buses}

    def servo_specs(self, bus: str | None = None) -> tuple[ServoSpec, ...]:
        """Return the ``ServoSpec`` of every servo, or of those on ``bus``."""
        return tuple(
            ServoSpec(
                s.id,
                s.model,
                s.joint,
                s.offset,
                s.direction,
                s.gear_ratio,
                s.shadow_of,
                s.mode,
                s.current_limit,
                s.profile_velocity,
                s.profile_acceleration,
                s.torque_limit,
            )
            for s in self.servos
            if bus is None or self.bus_named(s.bus).name == bus
        )

    def margin_of(self, joint: str) -> float:
        """The soft-limit margin of ``joint`` [rad or m]."""
        margin = self.safety.soft_limit_margin
        return margin.get(joint, 0.0) if isinstance(margin, dict) else margin

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints driven by servos, in config order (shadow servos add none)."""
        return tuple(s.joint for s in self.servos if s.shadow_of is None)

    @property
    def chain_names(self) -> tuple[str, ...]:
        """Names of the IK chains."""
        return tuple(c.name for c in self.chains)


def check_watchdog(cfg: RobotConfig) -> None:
    """Refuse a target watchdog no longer than one cycle: it would trip on every cycle.

    Raises:
        ConfigError: on ``safety.watchdog_timeout``.
    """
    timeout = cfg.safety.watchdog_timeout
    if timeout is not None and timeout <= 1.0 / cfg.rate_hz:
        raise ConfigError(
            None,
            ("safety", "watchdog_timeout"),
            f"{timeout:g} s is not longer than one cycle at {cfg.rate_hz:g} Hz "
            f"({1.0 / cfg.rate_hz:g} s): every target would be stale",
        )


def _check_buses(cfg: RobotConfig) -> None:
    names = [b.name for b in cfg.buses]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise ConfigError(None, ("buses", i, "name"), f"duplicate bus name {name!r}")


def _check_settings(cfg: RobotConfig, i: int, servo: ServoConfig) -> None:
    """Refuse the settings only one family's start-up writes on the other family's bus."""
    if servo.bus is not None and servo.bus not in [b.name for b in cfg.buses]:
        return  # reported as an unknown bus
    from hilbot.hal.family import FAMILIES

    here = FAMILIES[cfg.bus_named(servo.bus).family]
    for other in FAMILIES.values():
        given = other.settings_given(servo) if other is not here else []
        if given and not other.knows(servo.model):  # else the model check names the model
            raise ConfigError(
                None,
                ("servos", i, given[0]),
                f"is written to {other.title} servos at start-up{other.settings_note}; a "
                f"{here.title} servo would ignore it{here.ignore_note}",
            )


def _check_servos(cfg: RobotConfig) -> None:
    bus_names = [b.name for b in cfg.buses]
    seen: dict[tuple[str, int], int] = {}
    primaries: dict[str, int] = {}
    for i, servo in enumerate(cfg.servos):
        _check_settings(cfg, i, servo)
        if servo.bus is None and len(bus_names) > 1:
            raise ConfigError(
                None, ("servos", i, "bus"), f"several buses: name one of {', '.join(bus_names)}"
            )
        if servo.bus is not None and servo.bus not in bus_names:
            raise ConfigError(
                None,
                ("servos", i, "bus"),
                f"unknown bus {servo.bus!r}; expected one of {', '.join(bus_names)}",
            )
        key = (cfg.bus_named(servo.bus).name, servo.id)
        if key in seen:
            raise ConfigError(
                None,
                ("servos", i, "id"),
                f"duplicate servo id {servo.id} on bus {key[0]!r} (also servos[{seen[key]}])",
            )
        seen[key] = i
        if servo.shadow_of is None:
            if servo.joint in primaries:
                raise ConfigError(
                    None,
                    ("servos", i, "joint"),
                    f"joint {servo.joint!r} already driven by servos[{primaries[servo.joint]}]; "
                    "a second servo on one joint needs shadow_of: <primary id>",
                )
            primaries[servo.joint] = i
    for i, servo in enumerate(cfg.servos):
        if servo.shadow_of is None:
            continue
        primary = seen.get((cfg.bus_named(servo.bus).name, servo.shadow_of))
        if primary is None or cfg.servos[primary].shadow_of is not None:
            raise ConfigError(
                None,
                ("servos", i, "shadow_of"),
                f"no primary servo with id {servo.shadow_of} on the same bus",
            )
        if cfg.servos[primary].joint != servo.joint:
            raise ConfigError(
                None,
                ("servos", i, "joint"),
                f"a shadow drives its primary's joint {cfg.servos[primary].joint!r}",
            )


def _check_chain_names(cfg: RobotConfig) -> None:
    counts = Counter(c.name for c in cfg.chains)
    for i, chain in enumerate(cfg.chains):
        if counts[chain.name] > 1:
            raise ConfigError(None, ("chains", i, "name"), f"duplicate chain name {chain.name!r}")
        if chain.name == "joints":
            raise ConfigError(None, ("chains", i, "name"), "'joints' is reserved for joint targets")


def parse_config(
    data: Mapping[str, Any], *, source: Path | None = None, base_dir: Path | None = None
) -> RobotConfig:
    """Validate a config mapping (the parsed YAML) without loading its URDF.

    Raises:
        ConfigError: naming the first bad field and what was expected.
    """
    try:
        return RobotConfig.model_validate(dict(data), context={"base_dir": base_dir})
    except ValidationError as exc:
        raise _config_error(exc, source) from None


def _config_error(exc: ValidationError, source: Path | None) -> ConfigError:
    from hilbot._bounded import quote  # the input may be huge: quoted in bounded effort

    errors = exc.errors()
    first = errors[0]
    loc: tuple[str | int, ...] = tuple(first["loc"])
    original = (first.get("ctx") or {}).get("error")
    if isinstance(original, ConfigError):
        return ConfigError(source, loc + original.loc, original.problem)
    problem = first["msg"]
    if first["type"] == "extra_forbidden":
        problem = "unknown field (check its spelling)"
    elif first["type"] == "missing":
        problem = "required field is missing"
    if "input" in first and first["type"] not in ("missing", "extra_forbidden"):
        problem += f" (got {quote(first['input'])})"
    if len(errors) > 1:
        problem += f"; and {len(errors) - 1} more error(s)"
    return ConfigError(source, loc, problem)


def load_config(path: str | Path) -> RobotConfig:
    """Load, validate and cross-check a robot config.

    ``path`` is a YAML file, or the name of a shipped robot (``"openmanipulator_x"``).
    Checks the config against its URDF (joints, links, chains, limits), the servo
    control tables (limits inside each servo's range) and the bus timing budget.

    Raises:
        ConfigError: the file is missing or unreadable, or a field is bad.
    """
    from hilbot._bounded import load_yaml, yaml_problem
    from hilbot.driver.runtime.validation import check_config  # imports the URDF parser lazily

    file = _resolve(path)
    try:
        data = load_yaml(file.read_text())
    except OSError as exc:
        raise ConfigError(file, (), f"cannot read the config: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(file, (), f"not valid YAML: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(file, (), "expected a mapping of config fields at the top level")
    from hilbot.driver.runtime.config import expand  # extends:, and the URDF wherever it is

    data = expand(data, file)
    config = parse_config(data, source=file, base_dir=file.parent.absolute())
    check_config(config, source=file)
    return config


def _resolve(path: str | Path) -> Path:
    candidate = Path(path)
    if candidate.suffix in (".yaml", ".yml") or candidate.exists():
        return candidate
    from hilbot.configs import config_path

    try:
        return config_path(str(path))
    except FileNotFoundError as exc:
        raise ConfigError(None, (), str(exc)) from exc


# --- Where a robot config's fields come from: its YAML, the robot it ``extends``, the URDF
# file.
#: The key naming the robot a config is based on.
EXTENDS = "extends"
#: How deep ``extends`` may chain (a loop is refused before this).
MAX_DEPTH = 8
#: The lists merged item by item, and the field that names an item.
_KEYED_LISTS = {"buses": "name", "chains": "name", "servos": "joint"}


def expand(data: Mapping[str, Any], file: Path) -> dict[str, Any]:
    """``data`` (the YAML of ``file``) merged onto what it ``extends``, its URDF absolute.

    Raises:
        ConfigError: a base that cannot be found or read, or a loop of ``extends``.
    """
    return _expand(dict(data), file.absolute(), ())


def _expand(data: dict[str, Any], file: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    data = dict(data)
    if "urdf" in data and isinstance(data["urdf"], str | Path):
        data["urdf"] = str(find_urdf(Path(data["urdf"]), file.parent))
    base_name = data.pop(EXTENDS, None)
    if base_name is None:
        return data
    if not isinstance(base_name, str) or not base_name:
        raise ConfigError(file, (EXTENDS,), "expected the name or YAML file of a robot config")
    base_file = _base_file(base_name, file)
    chain = (*seen, file)
    if base_file.resolve() in {p.resolve() for p in chain} or len(chain) >= MAX_DEPTH:
        raise ConfigError(file, (EXTENDS,), f"{base_name!r} leads back to itself")
    base = _expand(_read(base_file), base_file, chain)
    return merge(base, data)


def find_urdf(urdf: Path, folder: Path) -> Path:
    """``urdf`` beside the YAML in ``folder``, else the shipped one of that file name.

    An absolute path, or one found nowhere, is returned as given (relative ones made
    absolute from ``folder``): the URDF check then names it.
    """
    if urdf.is_absolute():
        return urdf
    beside = folder / urdf
    if beside.is_file():
        return beside
    from hilbot.configs import ROBOTS_DIR

    shipped = ROBOTS_DIR / urdf.name
    return shipped if shipped.is_file() else beside


def _base_file(name: str, file: Path) -> Path:
    """The YAML ``extends: name`` means: a file (relative to ``file``), or a shipped robot."""
    from hilbot.configs import config_path

    candidate = Path(name)
    if not candidate.is_absolute():
        candidate = file.parent / candidate
    if candidate.suffix in (".yaml", ".yml") or candidate.is_file():
        if not candidate.is_file():
            raise ConfigError(file, (EXTENDS,), f"no config file {candidate}")
        return candidate
    try:
        found: Path = config_path(name)
    except FileNotFoundError as exc:
        raise ConfigError(file, (EXTENDS,), str(exc)) from None
    return found


def _read(file: Path) -> dict[str, Any]:
    try:
        data = load_yaml(file.read_text())
    except OSError as exc:
        raise ConfigError(file, (), f"cannot read the config: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(file, (), f"not valid YAML: {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(file, (), "expected a mapping of config fields at the top level")
    return data


def merge(base: Mapping[str, Any], over: Mapping[str, Any], key: str = "") -> dict[str, Any]:
    """``over`` merged onto ``base``: mappings key by key, named lists item by item."""
    out = dict(base)
    for name, value in over.items():
        old = out.get(name)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            out[name] = merge(old, value, name)
        elif not key and name in _KEYED_LISTS and isinstance(old, list) and isinstance(value, list):
            out[name] = _merge_items(old, value, _KEYED_LISTS[name], name)
        else:
            out[name] = value
    return out


def _merge_items(base: list[Any], over: list[Any], key: str, field: str) -> list[Any]:
    """Items of ``over`` merged onto the item of ``base`` with the same ``key``, or added.

    A single bus naming no ``name`` is the single bus of the base (both are ``main``).
    """
    out = list(base)
    for item in over:
        if not isinstance(item, Mapping):
            out.append(item)  # validation names it
            continue
        name = item.get(key)
        if name is None and field == "buses" and len(base) == 1 and len(over) == 1:
            name = base[0].get(key, "main") if isinstance(base[0], Mapping) else None
        default = "main" if field == "buses" else None
        match = [
            i
            for i, old in enumerate(out)
            if isinstance(old, Mapping) and name is not None and old.get(key, default) == name
        ]
        if match:
            out[match[0]] = merge(out[match[0]], item, field)
        else:
            out.append(dict(item))
    return out
