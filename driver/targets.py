"""Latest-value target slots: only the newest target of each chain counts.

Targets are validated when they arrive (``set``), so a bad one is refused to its
sender and never reaches the control loop. Each slot keeps the monotonic time
it was written, for the watchdog, and a sequence number, so the loop can tell a
new target from the one it already solved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.errors import InvalidTarget, UnknownChain, UnknownJoint

#: A pose target, in one of the forms the IK solvers accept (see ``hilbot.kinematics.ik``).
PoseTarget = Any

JOINTS = "joints"  # the slot name of joint-space targets


class Stamped(NamedTuple):
    """A target with its receive time [s, monotonic] and sequence number."""

    value: Any
    received: float
    seq: int


def _finite(chain: str, array: NDArray[np.float64], what: str) -> NDArray[np.float64]:
    if not np.all(np.isfinite(array)):
        raise InvalidTarget(chain, f"{what} contains NaN or infinity: {array.tolist()}")
    return array


def _as_array(chain: str, value: object, what: str) -> NDArray[np.float64]:
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidTarget(chain, f"{what} is not numeric: {value!r}") from exc
    return _finite(chain, array, what)


def _orientation(chain: str, value: object) -> NDArray[np.float64] | None:
    if value is None:
        return None
    array = _as_array(chain, value, "orientation")
    if array.shape == (3,):
        if np.linalg.norm(array) < 1e-9:
            raise InvalidTarget(chain, "a tool-axis orientation must not be the zero vector")
        return array
    if array.shape == (4,):
        norm = np.linalg.norm(array)
        if abs(norm - 1.0) > 1e-3:
            raise InvalidTarget(chain, f"quaternion (w, x, y, z) must be unit length, not {norm}")
        return array / norm
    if array.shape == (3, 3):
        if not np.allclose(array @ array.T, np.eye(3), atol=1e-4) or np.linalg.det(array) < 0:
            raise InvalidTarget(chain, "a 3x3 orientation must be a rotation matrix")
        return array
    raise InvalidTarget(
        chain,
        f"orientation of shape {array.shape}: expected None, an axis (3,), "
        "a quaternion (4,) or a rotation matrix (3, 3)",
    )


def normalize_pose_target(chain: str, target: object) -> PoseTarget:
    """Validate a pose target and return it as numpy arrays (copied).

    Accepted: a position ``(3,)``, ``(position, orientation)`` with orientation
    ``None``, a tool axis ``(3,)``, a quaternion ``(w, x, y, z)`` or a 3 x 3
    rotation, or a 4 x 4 homogeneous transform.

    Raises:
        InvalidTarget: naming what is wrong.
    """
    if isinstance(target, tuple | list) and len(target) == 2:
        position = _as_array(chain, target[0], "position")
        if position.shape != (3,):
            raise InvalidTarget(chain, f"position of shape {position.shape}, expected (3,)")
        return (position, _orientation(chain, target[1]))
    array = _as_array(chain, target, "target")
    if array.shape == (3,):
        return array
    if array.shape == (4, 4):
        if not np.allclose(array[3], (0.0, 0.0, 0.0, 1.0)):
            raise InvalidTarget(chain, "the last row of a 4x4 transform must be [0, 0, 0, 1]")
        _orientation(chain, array[:3, :3])
        return array
    raise InvalidTarget(
        chain,
        f"target of shape {array.shape}: expected a position (3,), "
        "(position, orientation) or a 4x4 transform",
    )


def normalize_joint_targets(
    positions: Mapping[str, float], known: Sequence[str]
) -> dict[str, float]:
    """Validate joint targets: known joints, finite numbers.

    Raises:
        UnknownJoint: a joint the robot does not drive.
        InvalidTarget: a value that is not a finite number.
    """
    if not positions:
        raise InvalidTarget(JOINTS, "no joints given")
    out: dict[str, float] = {}
    for joint, value in positions.items():
        if joint not in known:
            raise UnknownJoint(joint, known)
        try:
            number = float(value)
        except (TypeError, ValueError) as exc:
            raise InvalidTarget(JOINTS, f"{joint}: not a number: {value!r}") from exc
        if not np.isfinite(number):
            raise InvalidTarget(JOINTS, f"{joint}: {number} is not finite")
        out[joint] = number
    return out


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

    def set_pose(self, chain: str, target: object) -> None:
        """Store a validated pose target for ``chain``."""
        if chain not in self._chains:
            raise UnknownChain(chain, self._chains)
        self._store(chain, normalize_pose_target(chain, target))

    def set_joints(self, positions: Mapping[str, float]) -> None:
        """Store validated joint targets; they merge with earlier joint targets."""
        values = normalize_joint_targets(positions, self._joints)
        previous = self._slots[JOINTS]
        if previous is not None:
            values = {**previous.value, **values}
        self._store(JOINTS, values)

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

    def _store(self, name: str, value: object) -> None:
        self._seq += 1
        self._slots[name] = Stamped(value, self._clock(), self._seq)

    def get(self, name: str) -> Stamped | None:
        """Return the newest target of ``name`` (a chain or ``"joints"``), or ``None``."""
        return self._slots[name]

    def newest_time(self) -> float | None:
        """Receive time of the newest target of any slot, ``None`` before the first one."""
        times = [s.received for s in self._slots.values() if s is not None]
        return max(times) if times else None

    def clear(self) -> None:
        """Forget every target (after an e-stop, a reset or enabling)."""
        for name in self._slots:
            self._slots[name] = None
