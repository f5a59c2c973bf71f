"""Recorded teleop traces (CSV or a recording) as a step: positions interpolated in time."""

from __future__ import annotations

import csv
from collections.abc import Collection
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.bench.errors import RecordingError, ScenarioError
from hilbot.driver.bench.recording import Recording
from hilbot.driver.bench.scenario import Scenario, TeleopStep
from hilbot.driver.bench.segment import Segment, StepContext, Target


class Trace(Segment):
    """A recorded target trace of one chain, linearly interpolated in time."""

    def __init__(
        self, chain: str, times: NDArray[np.float64], points: NDArray[np.float64], speed: float
    ) -> None:
        self.chain = chain
        self.times = (times - times[0]) / speed
        self.points = points  # (n, 3)
        self.duration = float(self.times[-1])

    def at(self, t: float) -> Target:
        """Return the trace's position target at ``t``."""
        position = np.array([np.interp(t, self.times, self.points[:, k]) for k in range(3)])
        return Target(chain=self.chain, position=position)


def load_trace(step: TeleopStep, ctx: StepContext) -> Trace:
    """Read a teleop trace (CSV ``t,chain,x,y,z`` or a recording ``.npz``)."""
    chain, times, points = _read(step, ctx.base_dir, ctx.ee)
    if step.relative:
        points = points - points[0] + ctx.ee[chain]
    return Trace(chain, times, points, step.speed)


def check_traces(
    scenario: Scenario, base_dir: Path, chains: Collection[str], *, path: Path | None = None
) -> dict[int, float]:
    """Read every teleop step's file before anything moves.

    Returns:
        The duration [s] of each teleop step, by step index.

    Raises:
        ScenarioError: a file that is missing or malformed, or a chain the robot does
            not have, with the step's field path (``steps.2.teleop.file``).
    """
    durations: dict[int, float] = {}
    for index, step in enumerate(scenario.steps):
        if not isinstance(step, TeleopStep):
            continue
        try:
            _, times, _ = _read(step, base_dir, chains)
        except ScenarioError as exc:
            where = f"{exc.path.name}: " if exc.path is not None else ""
            problems = [(f"steps.{index}.{loc}", f"{where}{msg}") for loc, msg in exc.problems]
            raise ScenarioError(path, problems) from None
        durations[index] = float(times[-1] - times[0]) / step.speed
    return durations


def _read(
    step: TeleopStep, base_dir: Path, chains: Collection[str]
) -> tuple[str, NDArray[np.float64], NDArray[np.float64]]:
    path = Path(step.file)
    if not path.is_absolute():
        path = base_dir / path
    if path.suffix == ".npz":
        chain, times, points = _trace_from_recording(path, step.chain)
    else:
        chain, times, points = _trace_from_csv(path, step.chain)
    if chain not in chains:
        known = ", ".join(chains)
        raise ScenarioError(path, [("teleop.chain", f"unknown chain {chain!r}; known: {known}")])
    if times.size < 2 or np.any(np.diff(times) < 0):
        raise ScenarioError(path, [("teleop.file", "needs two or more samples in time order")])
    return chain, times, points


def _trace_from_csv(
    path: Path, chain: str | None
) -> tuple[str, NDArray[np.float64], NDArray[np.float64]]:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise ScenarioError(path, [("teleop.file", f"cannot read: {exc.strerror}")]) from exc
    if not rows or not {"t", "chain", "x", "y", "z"} <= set(rows[0]):
        raise ScenarioError(path, [("teleop.file", "expected a CSV header t,chain,x,y,z")])
    chain = chain or rows[0]["chain"]
    try:
        picked = [r for r in rows if r["chain"] == chain]
        times = np.array([float(r["t"]) for r in picked])
        points = np.array([[float(r["x"]), float(r["y"]), float(r["z"])] for r in picked])
    except ValueError as exc:
        raise ScenarioError(path, [("teleop.file", f"a value is not a number: {exc}")]) from exc
    return chain, times, points.reshape(-1, 3)


def _trace_from_recording(
    path: Path, chain: str | None
) -> tuple[str, NDArray[np.float64], NDArray[np.float64]]:
    try:
        recording = Recording.load(path)
    except RecordingError as exc:
        raise ScenarioError(path, [("teleop.file", exc.reason)]) from exc
    names = recording.header.chain_names
    if not names:
        raise ScenarioError(path, [("teleop.file", "the recording has no chains")])
    chain = chain or names[0]
    if chain not in names:
        raise ScenarioError(path, [("teleop.chain", f"{chain!r} is not in {', '.join(names)}")])
    targets = recording["ee_target"][:, names.index(chain)]
    rows = np.all(np.isfinite(targets), axis=1)
    return chain, recording["t"][rows], targets[rows]
