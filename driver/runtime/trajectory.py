"""Scripted trajectories: timed joint or pose waypoints from YAML or CSV, interpolated.

YAML, joint space (``joints`` is the default kind)::

    kind: joints
    loop: false
    waypoints:
      - {t: 0.0, joints: {joint1: 0.0, joint2: -1.0}}
      - {t: 2.0, joints: {joint1: 1.0, joint2: -0.5}}

YAML, pose space (orientation optional: a quaternion ``[w, x, y, z]``)::

    kind: pose
    chain: arm
    waypoints:
      - {t: 0.0, position: [0.20, 0.00, 0.15], orientation: [1, 0, 0, 0]}
      - {t: 2.0, position: [0.20, 0.10, 0.15], orientation: [1, 0, 0, 0]}

CSV: a header ``t,<joint>,<joint>...`` gives joint waypoints; ``t,x,y,z`` or
``t,x,y,z,qw,qx,qy,qz`` gives pose waypoints for the first chain. Times are in
seconds from the start and must increase. Positions are interpolated linearly,
quaternions by slerp; after the last waypoint the trajectory holds it (or loops).

Every number is checked at load, with the waypoint (or CSV row) and field named:
finite, joint values within ``MAX_JOINT_VALUE``, positions within
``MAX_COORDINATE_M`` and quaternion components within ``MAX_DIRECTION_COMPONENT``
(the bounds ``Runtime.set_target`` and MQTT apply), so a file that loads plays
without a target being refused mid-run.
"""

from __future__ import annotations

import asyncio
import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import yaml
from numpy.typing import NDArray

from hilbot._bounded import load_yaml, yaml_problem
from hilbot._compat import StrEnum
from hilbot.driver.runtime.errors import TrajectoryError
from hilbot.driver.runtime.targets import (
    MAX_COORDINATE_M,
    MAX_DIRECTION_COMPONENT,
    MAX_JOINT_VALUE,
    MIN_DIRECTION_NORM,
    robust_norm,
)

POSE_COLUMNS = ("x", "y", "z")
QUAT_COLUMNS = ("qw", "qx", "qy", "qz")


class TrajectoryKind(StrEnum):
    """Whether waypoints are joint positions or poses of a chain's target link."""

    JOINTS = "joints"
    POSE = "pose"


@dataclass(frozen=True)
class Trajectory:
    """Timed waypoints, interpolated by :meth:`sample`.

    Attributes:
        kind: joints or pose.
        times: (k,) increasing [s].
        values: (k, m) joint positions, or (k, 3) positions, in ``names`` order.
        names: joint names (joints) or ``("x", "y", "z")`` (pose).
        quaternions: (k, 4) ``(w, x, y, z)`` for pose waypoints with orientation, else ``None``.
        chain: the chain of pose waypoints (``None``: the runtime's first chain).
        loop: start over after the last waypoint.
    """

    kind: TrajectoryKind
    times: NDArray[np.float64]
    values: NDArray[np.float64]
    names: tuple[str, ...]
    quaternions: NDArray[np.float64] | None = None
    chain: str | None = None
    loop: bool = False

    @property
    def duration(self) -> float:
        """Time of the last waypoint [s]."""
        return float(self.times[-1])

    def sample(self, t: float) -> Any:
        """The target at time ``t`` [s]: ``{joint: position}`` or ``(position, quaternion)``."""
        if self.loop and self.duration > 0:
            t = t % self.duration
        k = int(np.searchsorted(self.times, t, side="right")) - 1
        k = min(max(k, 0), len(self.times) - 1)
        if k == len(self.times) - 1 or t <= self.times[0]:
            s, k1 = 0.0, k
        else:
            k1 = k + 1
            s = (t - self.times[k]) / (self.times[k1] - self.times[k])
        value = self.values[k] + s * (self.values[k1] - self.values[k])
        if self.kind is TrajectoryKind.JOINTS:
            return dict(zip(self.names, value.tolist(), strict=True))
        quat = None
        if self.quaternions is not None:
            quat = slerp(self.quaternions[k], self.quaternions[k1], s)
        return (value, quat)


def slerp(q0: NDArray[np.float64], q1: NDArray[np.float64], s: float) -> NDArray[np.float64]:
    """Spherical linear interpolation of unit quaternions ``(w, x, y, z)``."""
    dot = float(np.dot(q0, q1))
    if dot < 0.0:  # take the short way round
        q1, dot = -q1, -dot
    if dot > 0.9995:  # nearly parallel: linear interpolation is exact enough and stable
        out: NDArray[np.float64] = q0 + s * (q1 - q0)
    else:
        theta = float(np.arccos(dot))
        out = (np.sin((1 - s) * theta) * q0 + np.sin(s * theta) * q1) / np.sin(theta)
    normed: NDArray[np.float64] = out / np.linalg.norm(out)
    return normed


def load_trajectory(path: str | Path) -> Trajectory:
    """Load a trajectory from a ``.yaml``/``.yml`` or ``.csv`` file.

    Raises:
        TrajectoryError: naming the file, the row or field, and what was wrong.
    """
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise TrajectoryError(file, "file", f"cannot read it: {exc.strerror}") from exc
    if file.suffix.lower() == ".csv":
        return _from_csv(file, text)
    if file.suffix.lower() in (".yaml", ".yml"):
        try:
            data = load_yaml(text)
        except yaml.YAMLError as exc:
            raise TrajectoryError(file, "file", f"not valid YAML: {yaml_problem(exc)}") from None
        return from_mapping(data, source=file)
    raise TrajectoryError(file, "file", "expected a .yaml, .yml or .csv file")


def from_mapping(data: object, *, source: Path | None = None) -> Trajectory:
    """Build a trajectory from the parsed YAML form (see the module docstring)."""
    if not isinstance(data, dict):
        raise TrajectoryError(source, "file", "expected a mapping with 'waypoints'")
    unknown = set(data) - {"kind", "chain", "loop", "waypoints"}
    if unknown:
        raise TrajectoryError(source, sorted(unknown)[0], "unknown field")
    try:
        kind = TrajectoryKind(data.get("kind", "joints"))
    except ValueError:
        raise TrajectoryError(source, "kind", "expected 'joints' or 'pose'") from None
    waypoints = data.get("waypoints")
    if not isinstance(waypoints, list) or len(waypoints) < 1:
        raise TrajectoryError(source, "waypoints", "expected a list of at least one waypoint")
    times = [
        _number(source, f"waypoints[{i}].t", w.get("t") if isinstance(w, dict) else None)
        for i, w in enumerate(waypoints)
    ]
    if kind is TrajectoryKind.JOINTS:
        rows = [_joint_row(source, i, w) for i, w in enumerate(waypoints)]
        names = tuple(rows[0])
        for i, row in enumerate(rows):
            if tuple(row) != names:
                raise TrajectoryError(
                    source,
                    f"waypoints[{i}].joints",
                    f"must name the same joints as waypoint 0: {names}",
                )
        values = [[row[n] for n in names] for row in rows]
        return _build(source, kind, times, values, names, None, None, bool(data.get("loop", False)))
    positions, quats = [], []
    for i, w in enumerate(waypoints):
        if not isinstance(w, dict):
            raise TrajectoryError(source, f"waypoints[{i}]", "expected a mapping")
        where = f"waypoints[{i}]"
        positions.append(
            _vector(source, f"{where}.position", w.get("position"), 3, MAX_COORDINATE_M, "m")
        )
        q = w.get("orientation")
        quats.append(
            None
            if q is None
            else _vector(source, f"{where}.orientation", q, 4, MAX_DIRECTION_COMPONENT, "")
        )
    if any(q is None for q in quats) and not all(q is None for q in quats):
        raise TrajectoryError(
            source, "waypoints", "give an orientation on every waypoint or on none"
        )
    quat_rows = None if quats[0] is None else quats
    chain = data.get("chain")
    return _build(
        source,
        kind,
        times,
        positions,
        POSE_COLUMNS,
        quat_rows,
        chain,
        bool(data.get("loop", False)),
    )


def _number(source: Path | None, where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TrajectoryError(source, where, f"expected a finite number, got {value!r:.100}")
    try:
        number = float(value)
    except OverflowError:  # an int beyond the float range
        raise TrajectoryError(source, where, "the number is too large for a float") from None
    if not math.isfinite(number):
        raise TrajectoryError(source, where, f"expected a finite number, got {number}")
    return number


def _bounded(source: Path | None, where: str, value: object, bound: float, unit: str) -> float:
    number = _number(source, where, value)
    if abs(number) > bound:
        unit = f" {unit}" if unit else ""
        raise TrajectoryError(source, where, f"{number:g} is beyond ±{bound:g}{unit}")
    return number


def _vector(
    source: Path | None, where: str, value: object, n: int, bound: float, unit: str
) -> list[float]:
    if not isinstance(value, list | tuple) or len(value) != n:
        raise TrajectoryError(source, where, f"expected a list of {n} numbers, got {value!r:.200}")
    return [_bounded(source, f"{where}[{k}]", v, bound, unit) for k, v in enumerate(value)]


def _joint_row(source: Path | None, i: int, waypoint: object) -> dict[str, float]:
    joints = waypoint.get("joints") if isinstance(waypoint, dict) else None
    if not isinstance(joints, dict) or not joints:
        raise TrajectoryError(source, f"waypoints[{i}].joints", "expected {joint: position}")
    return {
        str(k): _bounded(source, f"waypoints[{i}].joints.{k}", v, MAX_JOINT_VALUE, "rad or m")
        for k, v in joints.items()
    }


def _build(
    source: Path | None,
    kind: TrajectoryKind,
    times: Sequence[float],
    values: Sequence[Sequence[float]],
    names: tuple[str, ...],
    quats: Sequence[Sequence[float] | None] | None,
    chain: object,
    loop: bool,
) -> Trajectory:
    t = np.array(times, dtype=np.float64)
    if t[0] < 0 or np.any(np.diff(t) <= 0):
        raise TrajectoryError(source, "waypoints", "times must start at >= 0 and strictly increase")
    q = None
    if quats is not None:
        q = np.array(quats, dtype=np.float64)
        norms = np.array([robust_norm(row) for row in q])  # no overflow, no underflow
        if np.any(norms < MIN_DIRECTION_NORM):
            k = int(np.argmax(norms < MIN_DIRECTION_NORM))
            raise TrajectoryError(source, f"waypoint {k} orientation", "the quaternion is zero")
        q = q / norms[:, None]
    if chain is not None and not isinstance(chain, str):
        raise TrajectoryError(source, "chain", f"expected a chain name, got {chain!r}")
    return Trajectory(kind, t, np.array(values, dtype=np.float64), names, q, chain, loop)


def _from_csv(source: Path, text: str) -> Trajectory:
    rows = list(csv.reader(line for line in text.splitlines() if line.strip()))
    if len(rows) < 2 or not rows[0] or rows[0][0].strip() != "t":
        raise TrajectoryError(source, "header", "expected a header 't,<columns>' and data rows")
    header = tuple(c.strip() for c in rows[0][1:])
    data: list[list[float]] = []
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(header) + 1:
            raise TrajectoryError(source, f"row {r}", f"expected {len(header) + 1} columns")
        try:
            data.append([float(c) for c in row])
        except ValueError as exc:
            raise TrajectoryError(source, f"row {r}", f"not a number: {exc}") from None
    array = np.array(data, dtype=np.float64)
    pose = header in (POSE_COLUMNS, POSE_COLUMNS + QUAT_COLUMNS)
    _check_csv(source, ("t", *header), array, pose)
    times = array[:, 0].tolist()
    if pose:
        quats = array[:, 4:8].tolist() if len(header) == 7 else None
        return _build(
            source,
            TrajectoryKind.POSE,
            times,
            array[:, 1:4].tolist(),
            POSE_COLUMNS,
            quats,
            None,
            False,
        )
    return _build(
        source, TrajectoryKind.JOINTS, times, array[:, 1:].tolist(), header, None, None, False
    )


def _check_csv(
    source: Path, columns: tuple[str, ...], array: NDArray[np.float64], pose: bool
) -> None:
    """Every CSV value finite and within its column's bound; the first bad one named."""
    bounds = [math.inf]  # t: any finite time
    for name in columns[1:]:
        if not pose:
            bounds.append(MAX_JOINT_VALUE)
        else:
            bounds.append(MAX_COORDINATE_M if name in POSE_COLUMNS else MAX_DIRECTION_COMPONENT)
    limit = np.array(bounds)
    bad = ~np.isfinite(array) | (np.abs(array) > limit)
    if bad.any():
        r, c = (int(i) for i in np.argwhere(bad)[0])
        value = float(array[r, c])
        reason = (
            f"{value} is not finite"
            if not math.isfinite(value)
            else f"{value:g} is beyond ±{limit[c]:g}"
        )
        raise TrajectoryError(source, f"row {r + 2}, column {columns[c]}", reason)


class TargetSink(Protocol):
    """What a trajectory plays into (a ``Runtime``)."""

    chains: tuple[str, ...]

    def set_target(self, chain: str, target: object) -> None:
        """Set a chain's pose target."""
        ...

    def set_joint_targets(self, positions: Mapping[str, float]) -> None:
        """Set joint targets."""
        ...

    async def wait_cycles(self, n: int = 1) -> None:
        """Wait for control cycles."""
        ...


async def play(
    trajectory: Trajectory,
    runtime: TargetSink,
    *,
    clock: Any = None,
    period_cycles: int = 1,
) -> None:
    """Feed ``trajectory`` to ``runtime`` once per ``period_cycles`` cycles until it ends.

    A looping trajectory plays until cancelled. The runtime's safety layer still
    applies: a too-fast trajectory is slowed down by the max-delta clamp, not executed.

    Raises:
        TrajectoryError: a pose trajectory names a chain the runtime does not have.
    """
    import time

    now = clock or time.perf_counter
    chain = trajectory.chain
    if trajectory.kind is TrajectoryKind.POSE:
        if chain is None:
            if not runtime.chains:
                raise TrajectoryError(None, "chain", "the robot has no chain for pose waypoints")
            chain = runtime.chains[0]
        elif chain not in runtime.chains:
            raise TrajectoryError(
                None, "chain", f"unknown chain {chain!r}; known: {', '.join(runtime.chains)}"
            )
    start = now()
    while True:
        t = now() - start
        target = trajectory.sample(t)
        if trajectory.kind is TrajectoryKind.JOINTS:
            runtime.set_joint_targets(target)
        else:
            assert chain is not None
            runtime.set_target(chain, target)
        if not trajectory.loop and t > trajectory.duration:
            return
        await runtime.wait_cycles(period_cycles)
        await asyncio.sleep(0)
