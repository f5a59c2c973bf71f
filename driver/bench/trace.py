"""Recorded teleop traces (CSV or a recording) as a step: positions interpolated in time."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.bench.errors import ScenarioError
from hilbot.driver.bench.recording import Recording
from hilbot.driver.bench.scenario import TeleopStep
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
    path = Path(step.file)
    if not path.is_absolute():
        path = ctx.base_dir / path
    if path.suffix == ".npz":
        chain, times, points = _trace_from_recording(path, step.chain)
    else:
        chain, times, points = _trace_from_csv(path, step.chain)
    if chain not in ctx.ee:
        known = ", ".join(ctx.ee)
        raise ScenarioError(path, [("teleop.chain", f"unknown chain {chain!r}; known: {known}")])
    if times.size < 2 or np.any(np.diff(times) < 0):
        raise ScenarioError(path, [("teleop.file", "needs two or more samples in time order")])
    if step.relative:
        points = points - points[0] + ctx.ee[chain]
    return Trace(chain, times, points, step.speed)


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
    recording = Recording.load(path)
    names = recording.header.chain_names
    if not names:
        raise ScenarioError(path, [("teleop.file", "the recording has no chains")])
    chain = chain or names[0]
    if chain not in names:
        raise ScenarioError(path, [("teleop.chain", f"{chain!r} is not in {', '.join(names)}")])
    targets = recording["ee_target"][:, names.index(chain)]
    rows = np.all(np.isfinite(targets), axis=1)
    return chain, recording["t"][rows], targets[rows]
