"""Latest-value target slots: only the newest target of each chain counts.

Targets are validated when they arrive (``set``), so a bad one is refused to its
sender and never reaches the control loop. Each slot keeps the monotonic time
it was written, for the watchdog, and a sequence number, so the loop can tell a
new target from the one it already solved.
"""

from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.runtime.errors import InvalidTarget, TargetProblem, UnknownChain, UnknownJoint
from hilbot.kinematics.spatial import matrix_to_quat
from hilbot.kinematics.tolerances import MIN_DIRECTION_NORM as MIN_DIRECTION_NORM  # re-exported

if TYPE_CHECKING:  # the IK package is imported on the first pose target, not at start
    from hilbot.kinematics.ik.core.target import Target

JOINTS = "joints"  # the slot name of joint-space targets

# Bounds at the door, the same as the MQTT parser's (``hilbot.driver.teleop.messages``), so
# a target is refused for the same reason whichever way it comes. They are far beyond any
# arm hilbot drives, and far below where the solvers' arithmetic overflows: squared, 100 m
# is 1e4, so every norm and dot product of a target stays exact and finite. The
# tolerances a rotation, quaternion or tool axis is judged by are the IK package's
# (``hilbot.kinematics.tolerances``), applied by its ``parse_target``: one set for all.
#: Largest position coordinate [m] of a pose target (a 4 x 4 transform's translation too).
MAX_COORDINATE_M = 100.0
#: Largest joint target [rad or m]; the safety layer clamps to the joint limits anyway.
MAX_JOINT_VALUE = 1000.0
#: Largest tool-axis or quaternion component [unit-less] before normalising.
MAX_DIRECTION_COMPONENT = 1e6


class Stamped(NamedTuple):
    """A target with its receive time [s, monotonic], sequence number and sample time.

    ``stamp`` is the sender's sample time [s, on the sender's clock] where the target
    carried one (the motion layer then places it on the stream's timeline by it).
    """

    value: Any
    received: float
    seq: int
    stamp: float | None = None


def _invalid(chain: str, detail: str) -> InvalidTarget:
    return InvalidTarget(chain, detail, TargetProblem.INVALID)


def _as_array(chain: str, value: object, what: str) -> NDArray[np.float64]:
    """``value`` as a float array: numbers only (no strings, no booleans), all finite."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        array = value.astype(np.float64)
    else:
        try:
            raw = np.asarray(value, dtype=object)
        except Exception as exc:  # ragged or absurdly deep nesting
            raise _invalid(chain, f"{what} is not an array of numbers: {value!r:.200}") from exc
        if raw.ndim > 2:  # no target form has more than two (numpy iterates at most 32)
            raise _invalid(chain, f"{what} has {raw.ndim} dimensions, at most 2")
        if not all(_is_number(v) for v in raw.flat):
            raise _invalid(chain, f"{what} is not numeric: {value!r:.200}")
        try:
            array = np.array([float(v) for v in raw.flat], dtype=np.float64).reshape(raw.shape)
        except OverflowError as exc:  # an int beyond the float range
            raise InvalidTarget(
                chain, f"{what} has a number too large for a float", TargetProblem.NON_FINITE
            ) from exc
    if not np.all(np.isfinite(array)):
        raise InvalidTarget(
            chain, f"{what} contains NaN or infinity: {array.tolist()}", TargetProblem.NON_FINITE
        )
    return array


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def robust_norm(vector: NDArray[np.float64]) -> float:
    """Euclidean norm that neither overflows nor underflows: scaled by the largest entry."""
    scale = float(np.max(np.abs(vector))) if vector.size else 0.0
    if scale == 0.0:
        return 0.0
    return scale * float(np.sqrt(np.sum(np.square(vector / scale))))


def _position(chain: str, position: NDArray[np.float64], what: str) -> None:
    if np.max(np.abs(position)) > MAX_COORDINATE_M:
        raise _invalid(chain, f"{what} is beyond {MAX_COORDINATE_M} m: {position.tolist()}")


def _orientation(chain: str, value: object) -> NDArray[np.float64] | None:
    """The orientation part as numbers; its meaning is ``parse_target``'s to judge."""
    if value is None:
        return None
    array = _as_array(chain, value, "orientation")
    if array.shape in ((3,), (4,)) and np.max(np.abs(array)) > MAX_DIRECTION_COMPONENT:
        what = "the tool axis" if array.shape == (3,) else "the quaternion"
        raise _invalid(
            chain, f"{what} has a component beyond {MAX_DIRECTION_COMPONENT:g}: {array.tolist()}"
        )
    return array


def _numbers(chain: str, target: object) -> object:
    """``target`` with its parts as float arrays: numbers only, finite, within the bounds."""
    if isinstance(target, tuple | list) and len(target) == 2:
        position = _as_array(chain, target[0], "position")
        if position.shape != (3,):
            raise _invalid(chain, f"position of shape {position.shape}, expected (3,)")
        _position(chain, position, "position")
        return (position, _orientation(chain, target[1]))
    array = _as_array(chain, target, "target")
    if array.shape == (3,):
        _position(chain, array, "position")
    elif array.shape == (4, 4):
        _position(chain, array[:3, 3], "the 4x4 transform's translation")
    else:
        raise _invalid(
            chain,
            f"target of shape {array.shape}: expected a position (3,), "
            "(position, orientation) or a 4x4 transform",
        )
    return array


def _given_form(target: Target) -> object:
    """A ``Target`` built elsewhere, in a form ``parse_target`` checks again."""
    rotation = target.rotation
    if rotation is not None:
        return (target.point, rotation)
    return (target.point, target.axis)


def parse_pose_target(chain: str, target: object) -> Target:
    """Parse a pose target once, at the door, into the IK package's frozen ``Target``.

    Accepted: a position ``(3,)``, ``(position, orientation)`` with orientation
    ``None``, a tool axis ``(3,)``, a quaternion ``(w, x, y, z)`` or a 3 x 3
    rotation, a 4 x 4 homogeneous transform, or a ``Target``. Positions beyond
    ``MAX_COORDINATE_M`` and direction components beyond ``MAX_DIRECTION_COMPONENT``
    are refused; rotations, quaternions and tool axes are judged by the tolerances
    of ``hilbot.kinematics.tolerances`` (``parse_target``), the only ones: the runtime
    stores the result and the solvers use it as given, so a target accepted here is
    never refused later. Tool axes and quaternions come out normalised.

    Raises:
        InvalidTarget: naming what is wrong; ``reason`` is ``non_finite`` for NaN,
            infinity or an int too large for a float, ``invalid`` for the rest.
    """
    from hilbot.kinematics.ik.core.errors import InvalidTarget as Unparsable
    from hilbot.kinematics.ik.core.target import Target, parse_target

    if isinstance(target, Target):
        target = _given_form(target)
    numbers = _numbers(chain, target)
    try:
        return parse_target(numbers)
    except Unparsable as exc:
        raise _invalid(chain, exc.reason) from None


#: The name this function had when it returned numpy arrays.
normalize_pose_target = parse_pose_target


def normalize_joint_targets(positions: object, known: Sequence[str]) -> dict[str, float]:
    """Validate joint targets: a mapping of known joints to finite, bounded numbers.

    Raises:
        UnknownJoint: a joint the robot does not drive.
        InvalidTarget: not a mapping, or a value that is not a number (``invalid``), not
            finite (``non_finite``) or beyond ``MAX_JOINT_VALUE`` (``invalid``).
    """
    if not isinstance(positions, Mapping):
        raise _invalid(JOINTS, f"expected {{joint: position}}, got {type(positions).__name__}")
    if not positions:
        raise _invalid(JOINTS, "no joints given")
    out: dict[str, float] = {}
    for joint, value in positions.items():
        if not isinstance(joint, str) or joint not in known:
            raise UnknownJoint(str(joint), known)
        if not _is_number(value):
            raise _invalid(JOINTS, f"{joint}: not a number: {value!r:.100}")
        try:
            number = float(value)
        except OverflowError as exc:
            raise InvalidTarget(
                JOINTS, f"{joint}: too large for a float", TargetProblem.NON_FINITE
            ) from exc
        if not math.isfinite(number):
            raise InvalidTarget(
                JOINTS, f"{joint}: {number} is not finite", TargetProblem.NON_FINITE
            )
        if abs(number) > MAX_JOINT_VALUE:
            raise _invalid(JOINTS, f"{joint}: {number} is beyond ±{MAX_JOINT_VALUE}")
        out[joint] = number
    return out


#: Largest sample time [s] a target may carry (about 31,700 years: any clock's seconds).
MAX_STAMP = 1e12


def check_stamp(slot: str, stamp: object) -> float | None:
    """A target's sample time: ``None``, or a finite number of seconds.

    Raises:
        InvalidTarget: not a number (``invalid``), not finite (``non_finite``), or beyond
            ``MAX_STAMP``.
    """
    if stamp is None:
        return None
    if not _is_number(stamp):
        raise _invalid(slot, f"the sample time is not a number: {stamp!r:.100}")
    value = float(stamp)  # type: ignore[arg-type]
    if not math.isfinite(value):
        raise InvalidTarget(
            slot, f"the sample time {value} is not finite", TargetProblem.NON_FINITE
        )
    if abs(value) > MAX_STAMP:
        raise _invalid(slot, f"the sample time {value:g} s is beyond ±{MAX_STAMP:g} s")
    return value


class TargetSlots:
    """One latest-value slot per chain plus one for joint targets.

    Writing replaces the previous value (conflation). Reads never block and
    never copy: values are immutable once stored.
    """

    def __init__(
        self, chains: Sequence[str], joints: Sequence[str], clock: Callable[[], float]
    ) -> None:
        self._chains = tuple(chains)
        self._joints = tuple(joints)
        self._clock = clock
        self._seq = 0
        self._slots: dict[str, Stamped | None] = {name: None for name in (*chains, JOINTS)}

    def set_pose(self, chain: str, target: object, stamp: float | None = None) -> None:
        """Store ``target`` for ``chain``, parsed into a ``Target`` (sampled at ``stamp``)."""
        if chain not in self._chains:
            raise UnknownChain(chain, self._chains)
        self._store(chain, parse_pose_target(chain, target), check_stamp(chain, stamp))

    def set_joints(self, positions: Mapping[str, float], stamp: float | None = None) -> None:
        """Store validated joint targets; they merge with earlier joint targets."""
        values = normalize_joint_targets(positions, self._joints)
        stamp = check_stamp(JOINTS, stamp)
        previous = self._slots[JOINTS]
        if previous is not None:
            values = {**previous.value, **values}
        self._store(JOINTS, values, stamp)

    def clear_pose(self, chain: str) -> None:
        """Forget the pose target of ``chain`` (its joints then hold the last command).

        Raises:
            UnknownChain: no chain of that name.
        """
        if chain not in self._chains:
            raise UnknownChain(chain, self._chains)
        self._slots[chain] = None

    def clear_joints(self, joints: Iterable[str] | None = None) -> None:
        """Forget the joint targets of ``joints`` (all of them when ``None``).

        The others keep their value and their receive time, so the watchdog still
        sees how old they are.

        Raises:
            UnknownJoint: a joint the robot does not drive (nothing is cleared).
        """
        if joints is None:
            self._slots[JOINTS] = None
            return
        names = [joints] if isinstance(joints, str) else list(joints)
        for joint in names:
            if joint not in self._joints:
                raise UnknownJoint(joint, self._joints)
        previous = self._slots[JOINTS]
        if previous is None:
            return
        kept = {j: v for j, v in previous.value.items() if j not in names}
        self._slots[JOINTS] = previous._replace(value=kept) if kept else None

    def _store(self, name: str, value: object, stamp: float | None = None) -> None:
        self._seq += 1
        self._slots[name] = Stamped(value, self._clock(), self._seq, stamp)

    def get(self, name: str) -> Stamped | None:
        """Return the newest target of ``name`` (a chain or ``"joints"``), or ``None``."""
        return self._slots[name]

    def newest_time(self) -> float | None:
        """Receive time of the newest target of any slot, ``None`` before the first one."""
        times = [s.received for s in self._slots.values() if s is not None]
        return max(times) if times else None

    def expire(self, name: str) -> None:
        """Make the target of ``name`` stale now: the watchdog ignores it from this cycle on."""
        slot = self._slots.get(name)
        if slot is not None:
            self._slots[name] = slot._replace(received=-math.inf)

    def clear(self) -> None:
        """Forget every target (after an e-stop, a reset or enabling)."""
        for name in self._slots:
            self._slots[name] = None


# --- Pose targets as vectors, so a stream of them can be interpolated like joint targets.
class PoseForm(enum.Enum):
    """What a pose target asks for, and so the layout of its vector."""

    POSITION = "position"  # (3,): the point
    AXIS = "axis"  # (6,): the point, the unit tool axis
    ROTATION = "rotation"  # (7,): the point, the unit quaternion (w, x, y, z)


def flatten_pose(
    target: Any, previous: NDArray[np.float64] | None = None
) -> tuple[PoseForm, NDArray[np.float64]]:
    """``(form, vector)`` of a parsed pose target (a ``Target``).

    ``previous``: the last vector of the same form; a quaternion is flipped to its
    hemisphere (q and -q are one rotation), so the path between them is the short one.
    """
    point = target.point
    kind = target.kind.value
    if kind == "none":
        return PoseForm.POSITION, np.array(point, dtype=np.float64)
    if kind == "axis":
        return PoseForm.AXIS, np.array((*point, *target.orientation), dtype=np.float64)
    quat = matrix_to_quat(np.array(target.orientation).reshape(3, 3))
    if previous is not None and previous.shape == (7,) and np.dot(previous[3:], quat) < 0:
        quat = -quat
    return PoseForm.ROTATION, np.concatenate([point, quat])


def rebuild_pose(form: PoseForm, vector: NDArray[np.float64]) -> Any:
    """The ``Target`` of ``form`` that ``vector`` (an interpolated one) stands for.

    A vector that is not finite, or a direction the interpolation shrank to (almost)
    nothing, stands for no target: it comes back as raw arrays, which the solver refuses
    (an IK failure: the chain holds) instead of being given a made-up pose.
    """
    from hilbot.kinematics.ik.core.target import OrientationKind, Target

    values = vector.tolist()
    point = (values[0], values[1], values[2])
    direction = values[3:]
    norm = math.hypot(*direction) if direction else 1.0
    if not (math.isfinite(math.fsum(values)) and norm >= MIN_DIRECTION_NORM):
        return (vector[:3].copy(), vector[3:].copy()) if direction else vector.copy()
    if form is PoseForm.POSITION:
        return Target(point)
    if form is PoseForm.AXIS:
        return Target(point, OrientationKind.AXIS, tuple(v / norm for v in direction))
    w, x, y, z = (v / norm for v in direction)
    rotation = (
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    )  # fmt: skip
    return Target(point, OrientationKind.FULL, rotation)
