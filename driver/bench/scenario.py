"""Scenario files: a timed list of steps and the thresholds a run must meet.

A scenario is YAML, validated into frozen pydantic models (a bad field fails
at load with its path, e.g. ``steps.2.cartesian_circle.radius``)::

    name: openmanipulator_circle
    description: a 3 cm circle in the horizontal plane
    steps:
      - {kind: command, command: enable}
      - {kind: move_joints, duration: 1.0}          # to the config's home pose
      - {kind: cartesian_circle, chain: arm, radius: 0.03, period: 3.0}
    thresholds: {ee_rms_max: 0.005, clamp_events_max: 0}

Durations are in [s], distances in [m], angles in [rad].
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from hilbot._bounded import load_yaml, yaml_problem
from hilbot._compat import StrEnum
from hilbot.driver.bench.errors import ScenarioError
from hilbot.driver.runtime.safety import Mode

PositiveFloat = Annotated[float, Field(gt=0)]


def _three(value: Any) -> Any:
    if isinstance(value, list | tuple) and len(value) != 3:
        raise ValueError(f"expected three numbers [x, y, z], got {len(value)}")
    return value


Vector3 = Annotated[tuple[float, float, float], BeforeValidator(_three)]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _FieldError(ValueError):
    """A model-level check that is about one field: reported with that field's path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _norm(vector: Vector3) -> float:
    return math.sqrt(sum(v * v for v in vector))


class HoldStep(_Model):
    """Hold the current joint positions (a fresh target every cycle, so the watchdog stays fed)."""

    kind: Literal["hold"]
    duration: PositiveFloat


class MoveJointsStep(_Model):
    """Move smoothly (minimum jerk) to joint positions; the config's home pose when omitted."""

    kind: Literal["move_joints"]
    duration: PositiveFloat
    positions: dict[str, float] | None = None


class JointSweepStep(_Model):
    """Sweep joints sinusoidally around where they are, within their limits.

    ``amplitude`` is a fraction of the half-range, cut so the sweep stays
    ``margin`` [rad] inside the limits. ``sequential`` sweeps one joint after
    the other (``cycles`` periods each), otherwise all together.
    """

    kind: Literal["joint_sweep"]
    joints: tuple[str, ...] | None = Field(default=None, min_length=1)
    amplitude: float = Field(default=0.5, gt=0, le=1)
    period: PositiveFloat = 2.0
    cycles: int = Field(default=1, ge=1)
    margin: float = Field(default=0.05, ge=0)
    sequential: bool = True


class CartesianLineStep(_Model):
    """Move a chain's end effector along a straight line (minimum-jerk timing).

    Give ``offset`` (relative to where the end effector is) or ``to`` (absolute,
    in the chain's source frame). With ``back``, return along the same line.
    """

    kind: Literal["cartesian_line"]
    chain: str
    duration: PositiveFloat
    offset: Vector3 | None = None
    to: Vector3 | None = None
    back: bool = False

    @model_validator(mode="after")
    def _one_goal(self) -> CartesianLineStep:
        if (self.offset is None) == (self.to is None):
            raise ValueError("give exactly one of 'offset' (relative) or 'to' (absolute)")
        return self


class CartesianCircleStep(_Model):
    """Move a chain's end effector around a circle through its current position.

    The circle lies in the plane with normal ``normal`` (source frame); its
    centre is ``radius`` away from the start, towards ``towards`` (projected
    onto the plane).
    """

    kind: Literal["cartesian_circle"]
    chain: str
    radius: PositiveFloat
    period: PositiveFloat
    cycles: int = Field(default=1, ge=1)
    normal: Vector3 = (0.0, 0.0, 1.0)
    towards: Vector3 = (-1.0, 0.0, 0.0)

    @field_validator("normal")
    @classmethod
    def _nonzero_normal(cls, normal: Vector3) -> Vector3:
        if _norm(normal) < 1e-9:
            raise ValueError("must be a non-zero vector")
        return normal

    @model_validator(mode="after")
    def _towards_in_plane(self) -> CartesianCircleStep:
        n, w = self.normal, self.towards
        along = sum(a * b for a, b in zip(n, w, strict=True)) / _norm(n)
        if math.sqrt(max(_norm(w) ** 2 - along**2, 0.0)) < 1e-9 * max(_norm(w), 1.0):
            raise _FieldError(
                "towards",
                f"{list(w)} has no component in the circle's plane (normal {list(n)}): "
                "give a direction across the normal",
            )
        return self


class StepResponseStep(_Model):
    """Step joints by ``deltas`` [rad] from where they are, hold, and optionally step back."""

    kind: Literal["step"]
    deltas: dict[str, float] = Field(min_length=1)
    hold: PositiveFloat = 1.0
    back: bool = True


class TeleopStep(_Model):
    """Replay a recorded teleop session's targets (a recording ``.npz`` or a ``.csv``).

    A CSV has the header ``t,chain,x,y,z`` (times [s] from the start, positions
    [m] in the chain's source frame); ``relative`` shifts the whole trace so it
    starts where the end effector is.
    """

    kind: Literal["teleop"]
    file: str
    chain: str | None = None
    relative: bool = True
    speed: PositiveFloat = 1.0


class CommandName(StrEnum):
    """Runtime commands a scenario may send (the runtime's ``Command`` values)."""

    ENABLE = "enable"
    DISABLE = "disable"
    ESTOP = "estop"
    RESET = "reset"
    HOME = "home"
    REBOOT = "reboot"


class CommandStep(_Model):
    """Send a runtime command, then let ``wait`` [s] pass (holding the last target)."""

    kind: Literal["command"]
    command: CommandName
    wait: float = Field(default=0.0, ge=0)


class FaultAction(StrEnum):
    """Faults the virtual bus (and partly the simulated backend) can inject."""

    DROP_REPLIES = "drop_replies"
    CORRUPT = "corrupt"
    UNPLUG = "unplug"
    OVERLOAD = "overload"
    OVERHEATING = "overheating"
    GLITCH = "glitch"


class FaultStep(_Model):
    """Inject a fault on one servo for ``duration`` [s], then clear it.

    ``rate`` is the fraction of replies dropped or corrupted (``drop_replies``,
    ``corrupt``), or glitched (``glitch``: the reply's Present Position moved by
    ``offset`` [rad of the servo shaft], the packet still valid). Hardware-error faults
    (``overload``, ``overheating``) latch in the servo as real firmware does; a later
    ``command: reboot`` clears them.
    """

    kind: Literal["fault"]
    action: FaultAction
    joint: str
    duration: PositiveFloat = 0.5
    rate: float = Field(default=1.0, gt=0, le=1)
    offset: float = Field(default=0.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _glitch_offset(self) -> FaultStep:
        if self.action is FaultAction.GLITCH and self.offset == 0.0:
            raise ValueError("a glitch fault needs a non-zero offset [rad]")
        return self


Step = Annotated[
    HoldStep
    | MoveJointsStep
    | JointSweepStep
    | CartesianLineStep
    | CartesianCircleStep
    | StepResponseStep
    | TeleopStep
    | CommandStep
    | FaultStep,
    Field(discriminator="kind"),
]


class Thresholds(_Model):
    """Pass/fail limits of a run; every limit left out is not checked.

    Tracking errors in [m] (end effector) or [rad] (joints), timing in [s].
    ``command_failures_max`` is the one limit on by default (0: a scenario whose
    lifecycle commands fail did not test what it meant to); set it to ``null``
    to allow failures. ``holding_effort_min`` is ``{joint: least |effort|}`` [A or %]
    over the last 0.5 s armed: the current a pose held against gravity must show.
    ``stop_time_max`` [s] and ``stop_distance_max`` [rad or m] bound every controlled
    stop (an e-stop or a fault while armed: from the last armed cycle until the command
    is still); ``stops_min`` asks that the run had that many.
    """

    ee_rms_max: float | None = Field(default=None, ge=0)
    ee_max_max: float | None = Field(default=None, ge=0)
    joint_rms_max: float | None = Field(default=None, ge=0)
    joint_max_max: float | None = Field(default=None, ge=0)
    lateness_p99_max: float | None = Field(default=None, ge=0)
    rate_min_fraction: float | None = Field(default=None, gt=0, le=1)
    overruns_max: int | None = Field(default=None, ge=0)
    clamp_events_max: int | None = Field(default=None, ge=0)
    faults_max: int | None = Field(default=None, ge=0)
    faults_min: int | None = Field(default=None, ge=0)
    holding_effort_min: dict[str, Annotated[float, Field(ge=0)]] | None = None
    stop_time_max: float | None = Field(default=None, gt=0)
    stop_distance_max: float | None = Field(default=None, gt=0)
    stops_min: int | None = Field(default=None, ge=0)
    final_mode: Mode | None = None
    command_failures_max: int | None = Field(default=0, ge=0)


class Scenario(_Model):
    """A bench scenario: steps run in order, then the thresholds are checked.

    Attributes:
        name: shown in reports and used for the default output folder.
        description: one line on what the scenario proves.
        rate_hz: loop rate for this scenario, overriding the config's (``--rate`` wins).
        steps: what to do, in order.
        thresholds: the pass/fail limits.
        scene: objects around the robot for ``--backend mujoco`` (a table, a box; see
            :mod:`hilbot.sim.mujoco_scene`); the other backends ignore them.
    """

    name: str = Field(min_length=1)
    description: str = ""
    rate_hz: float | None = Field(default=None, gt=0)
    steps: tuple[Step, ...] = Field(min_length=1)
    thresholds: Thresholds = Thresholds()
    scene: tuple[dict[str, Any], ...] = ()

    @field_validator("scene")
    @classmethod
    def _check_scene(cls, value: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
        from hilbot.sim.mujoco_scene import scene_from_data

        scene_from_data(list(value))  # a bad object fails at load, naming it
        return value

    def duration(self, n_joints: int | None = None) -> float:
        """Return the scripted duration [s] (a teleop step counts as zero: its file sets it).

        Args:
            n_joints: how many joints a ``joint_sweep`` without ``joints`` sweeps (all
                of the robot's); one sweep when not given.
        """
        return sum(step_duration(step, n_joints) for step in self.steps)

    def scaled(self, factor: float) -> Scenario:
        """Return a copy whose timed steps last ``factor`` times as long (short test runs)."""
        if not factor > 0:
            raise ValueError(f"duration scale must be positive, got {factor!r}")
        steps = [_scale_step(step, factor) for step in self.steps]
        return self.model_copy(update={"steps": tuple(steps)})


_TIMED_FIELDS = ("duration", "period", "hold", "wait")


def _scale_step(step: Any, factor: float) -> Any:
    update = {f: getattr(step, f) * factor for f in _TIMED_FIELDS if hasattr(step, f)}
    if isinstance(step, TeleopStep):
        update["speed"] = step.speed / factor
    return step.model_copy(update=update)


def step_duration(step: Any, n_joints: int | None = None) -> float:
    """Return the scripted duration [s] of one step (zero for a teleop step).

    ``n_joints`` is the number of joints a ``joint_sweep`` without ``joints`` sweeps.
    """
    match step:
        case HoldStep() | MoveJointsStep() | CartesianLineStep() | FaultStep():
            return float(step.duration) * (2.0 if getattr(step, "back", False) else 1.0)
        case JointSweepStep():
            swept = len(step.joints) if step.joints else (n_joints or 1)
            return float(step.period * step.cycles * (swept if step.sequential else 1))
        case CartesianCircleStep():
            return float(step.period * step.cycles)
        case StepResponseStep():
            return float(step.hold * (2.0 if step.back else 1.0))
        case CommandStep():
            return float(step.wait)
        case _:
            return 0.0


def check_names(
    scenario: Scenario, joints: Sequence[str], chains: Sequence[str], *, path: Path | None = None
) -> None:
    """Check that every joint and chain a scenario names exists on the robot.

    Raises:
        ScenarioError: one problem per unknown name, with its field path.
    """
    problems: list[tuple[str, str]] = []
    known_joints, known_chains = ", ".join(joints), ", ".join(chains) or "none"
    for index, step in enumerate(scenario.steps):
        where = f"steps.{index}.{step.kind}"
        chain = getattr(step, "chain", None)
        if chain is not None and chain not in chains:
            problems.append((f"{where}.chain", f"unknown chain {chain!r}; known: {known_chains}"))
        named: list[tuple[str, str]] = []
        match step:
            case MoveJointsStep(positions=dict() as positions):
                named = [("positions", j) for j in positions]
            case StepResponseStep():
                named = [("deltas", j) for j in step.deltas]
            case JointSweepStep(joints=tuple() as sweep):
                named = [("joints", j) for j in sweep]
            case FaultStep():
                named = [("joint", step.joint)]
        for field_name, joint in named:
            if joint not in joints:
                problems.append(
                    (f"{where}.{field_name}", f"unknown joint {joint!r}; known: {known_joints}")
                )
    if problems:
        raise ScenarioError(path, problems)


def parse_scenario(data: Mapping[str, Any], *, path: Path | None = None) -> Scenario:
    """Validate a scenario given as a mapping (the parsed YAML).

    Raises:
        ScenarioError: with the path of every bad field and what was expected.
    """
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(path, _problems(exc)) from None


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    """``(field path, message)`` per error, phrased for a person editing the YAML."""
    errors = exc.errors()
    bad_steps = any(len(e["loc"]) > 1 and e["loc"][0] == "steps" for e in errors)
    problems: list[tuple[str, str]] = []
    for err in errors:
        loc = [str(part) for part in err["loc"]]
        message = err["msg"]
        if loc == ["steps"] and err["type"] == "too_short" and bad_steps:
            continue  # pydantic's echo of the bad steps: "at least 1 item after validation"
        ctx = err.get("ctx") or {}
        cause = ctx.get("error")
        if isinstance(cause, _FieldError):
            loc, message = [*loc, cause.field], cause.message
        elif isinstance(cause, ValueError):
            message = str(cause)  # without pydantic's "Value error, " prefix
        elif err["type"] == "union_tag_invalid":
            loc, message = [*loc, "kind"], f"unknown step kind {ctx.get('tag')!r}; {_KINDS}"
        elif err["type"] == "union_tag_not_found":
            loc, message = [*loc, "kind"], f"every step needs a kind; {_KINDS}"
        elif err["type"] == "extra_forbidden":
            known = _known_fields(loc[:-1])
            if known:
                message = f"unknown field; known: {', '.join(known)}"
        problems.append((".".join(loc), message))
    return problems


_STEP_MODELS: dict[str, type[BaseModel]] = {
    get_args(model.model_fields["kind"].annotation)[0]: model
    for model in (
        HoldStep,
        MoveJointsStep,
        JointSweepStep,
        CartesianLineStep,
        CartesianCircleStep,
        StepResponseStep,
        TeleopStep,
        CommandStep,
        FaultStep,
    )
}


_KINDS = f"known: {', '.join(_STEP_MODELS)}"


def _known_fields(parent: Sequence[str]) -> list[str]:
    """The fields of the model at ``parent`` (a pydantic error location), if it is one."""
    model: type[BaseModel] | None = None
    if not parent:
        model = Scenario
    elif list(parent) == ["thresholds"]:
        model = Thresholds
    elif len(parent) == 3 and parent[0] == "steps":
        model = _STEP_MODELS.get(parent[2])
    return [] if model is None else [f for f in model.model_fields if f != "kind"]


def shipped_scenarios() -> tuple[str, ...]:
    """Names of the shipped scenarios, e.g. ``("openmanipulator_circle", ...)``."""
    from hilbot.configs import __file__ as configs_init

    folder = Path(configs_init).parent / "scenarios"
    return tuple(sorted(p.stem for p in folder.glob("*.yaml")))


def resolve_scenario(name_or_path: str | Path) -> Path:
    """Return the scenario file: a path, or the name of a shipped scenario.

    Raises:
        ScenarioError: neither a file nor a shipped scenario (the message lists those).
    """
    from hilbot.configs import __file__ as configs_init

    candidate = Path(name_or_path)
    if candidate.is_file():
        return candidate
    shipped = Path(configs_init).parent / "scenarios" / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    known = ", ".join(shipped_scenarios())
    problem = f"no such file, and no shipped scenario of that name; shipped: {known}"
    raise ScenarioError(candidate, [("", problem)])


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file (or a shipped scenario, by name).

    Raises:
        ScenarioError: the file is missing, is not YAML, or does not validate.
    """
    path = resolve_scenario(path)
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(path, [("", f"cannot read the file: {exc.strerror}")]) from exc
    except yaml.YAMLError as exc:
        raise ScenarioError(path, [("", f"not valid YAML: {yaml_problem(exc)}")]) from None
    if not isinstance(data, Mapping):
        raise ScenarioError(path, [("", "expected a mapping with 'name' and 'steps'")])
    return parse_scenario(data, path=path)
