"""Report metrics of a recording: tracking errors, loop timing, clamps and faults."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hilbot.driver.bench.recording import ClampKind, Recording
from hilbot.hal.backend import HardwareErrorFlags

#: Lateness histogram bin edges [s]: 0, then log-spaced from 1 µs to 100 ms.
LATENESS_BINS: NDArray[np.float64] = np.concatenate(([0.0], np.logspace(-6, -1, 21)))


@dataclass(frozen=True)
class ErrorStats:
    """RMS and maximum of an error over the samples that had both values."""

    name: str
    rms: float
    max: float
    samples: int


@dataclass(frozen=True)
class TimingStats:
    """Loop timing of a run: rate, lateness and work-time percentiles [s]."""

    rate_hz: float
    achieved_rate_hz: float
    lateness_p50: float
    lateness_p90: float
    lateness_p99: float
    lateness_max: float
    cycle_time_p50: float
    cycle_time_p99: float
    ik_time_p50: float
    ik_time_p99: float
    overruns: int
    histogram_edges: list[float]
    histogram_counts: list[int]


@dataclass(frozen=True)
class FaultEvent:
    """A joint's hardware-error flags turning on (``flags`` as text) at a cycle."""

    cycle: int
    t: float
    joint: str
    flags: str


@dataclass(frozen=True)
class BenchReport:
    """Everything ``hilbot bench`` reports about one recording."""

    cycles: int
    duration: float
    joints: list[ErrorStats]
    end_effectors: list[ErrorStats]
    timing: TimingStats
    clamp_events: int
    clamps_by_joint: dict[str, dict[str, int]]
    faults: list[FaultEvent]
    bus_errors: int
    mode_changes: list[tuple[float, str]]
    final_mode: str
    injected_faults: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    holding_effort: dict[str, float] = field(default_factory=dict)
    stops: list[StopEvent] = field(default_factory=list)

    @property
    def command_failures(self) -> list[dict[str, Any]]:
        """The lifecycle commands that raised (with their ``error``)."""
        return [c for c in self.commands if "error" in c]

    def to_dict(self) -> dict[str, Any]:
        """Return the report as JSON-able data (the ``summary.json`` body)."""
        return asdict(self)


def build_report(recording: Recording) -> BenchReport:
    """Compute the report of a recording."""
    header = recording.header
    t = recording["t"]
    mode = recording["mode"]
    changes = [(float(t[i]), header.modes[int(mode[i])]) for i in _mode_change_indices(recording)]
    return BenchReport(
        cycles=recording.n_cycles,
        duration=float(t[-1] - t[0]) if len(t) else 0.0,
        joints=joint_tracking(recording),
        end_effectors=ee_tracking(recording),
        timing=timing_stats(recording),
        clamp_events=int(recording.clamp_events.shape[0]),
        clamps_by_joint=clamp_counts(recording),
        faults=fault_events(recording),
        bus_errors=int(recording["bus_errors"][-1]) if recording.n_cycles else 0,
        mode_changes=changes,
        final_mode=header.modes[int(recording["mode"][-1])] if recording.n_cycles else "none",
        injected_faults=list(header.faults),
        commands=list(header.commands),
        holding_effort=holding_effort(recording),
        stops=stop_events(recording),
    )


@dataclass(frozen=True)
class StopEvent:
    """A controlled stop seen in a recording: from the e-stop or fault to a still command.

    Attributes:
        time: when the mode left ``armed`` [s].
        mode: the mode it went to (``estopped`` or ``faulted``).
        duration: from the last armed cycle until the command stopped changing [s].
        joint: the joint that travelled furthest while stopping.
        distance: how far it travelled [rad or m].
        speed: its commanded speed when the stop began [rad/s or m/s].
    """

    time: float
    mode: str
    duration: float
    joint: str
    distance: float
    speed: float


def stop_events(recording: Recording) -> list[StopEvent]:
    """Every stop from ``armed`` into ``estopped`` or ``faulted`` with torque kept on."""
    header = recording.header
    mode, t = recording["mode"], recording["t"]
    command = recording["q_command"]
    armed = header.modes.index("armed") if "armed" in header.modes else -1
    stops: list[StopEvent] = []
    for i in _mode_change_indices(recording):
        name = header.modes[int(mode[i])]
        if i < 2 or int(mode[i - 1]) != armed or name not in ("estopped", "faulted"):
            continue
        start = command[i - 1]
        if not np.all(np.isfinite(start)):
            continue
        speed = np.abs(start - command[i - 2]) / max(float(t[i - 1] - t[i - 2]), 1e-9)
        end = i
        while (
            end + 1 < len(t)
            and int(mode[end + 1]) == int(mode[i])
            and np.all(np.isfinite(command[end + 1]))
            and not np.array_equal(command[end + 1], command[end])
        ):
            end += 1
        travel = np.abs(command[end] - start)
        if not np.any(np.isfinite(travel)):
            continue
        j = int(np.nanargmax(travel))
        stops.append(
            StopEvent(
                time=float(t[i]),
                mode=name,
                duration=float(t[end] - t[i - 1]),
                joint=header.joint_names[j],
                distance=float(travel[j]),
                speed=float(speed[j]),
            )
        )
    return stops


#: [s] the window at the end of the armed cycles whose effort is the holding effort.
HOLDING_WINDOW = 0.5


def holding_effort(recording: Recording) -> dict[str, float]:
    """Per joint, the median |effort| over the last armed ``HOLDING_WINDOW`` seconds.

    The steady-state current (or load) of a pose held at the end of a run: what gravity
    or a grasp costs the servo. Joints with no effort recorded are left out.
    """
    header = recording.header
    if not recording.n_cycles or "armed" not in header.modes:
        return {}
    armed = np.flatnonzero(recording["mode"] == header.modes.index("armed"))
    if not len(armed):
        return {}
    t = recording["t"]
    last = armed[-1]
    rows = armed[(t[armed] >= t[last] - HOLDING_WINDOW) & (armed <= last)]
    effort = np.abs(recording["effort"][rows])
    out = {}
    for j, name in enumerate(header.joint_names):
        column = effort[:, j][np.isfinite(effort[:, j])]
        if len(column):
            out[name] = float(np.median(column))
    return out


def _mode_change_indices(recording: Recording) -> list[int]:
    mode = recording["mode"]
    if not len(mode):
        return []
    return [0, *(np.flatnonzero(np.diff(mode.astype(np.int64)) != 0) + 1).tolist()]


def _error_stats(name: str, error: NDArray[np.float64]) -> ErrorStats:
    """``error``: (n,) magnitudes, NaN where a sample is missing."""
    valid = error[np.isfinite(error)]
    if not valid.size:
        return ErrorStats(name, float("nan"), float("nan"), 0)
    return ErrorStats(
        name, float(np.sqrt(np.mean(valid**2))), float(np.max(np.abs(valid))), int(valid.size)
    )


def joint_errors(recording: Recording) -> NDArray[np.float64]:
    """Return (N, J) tracking errors [rad]: measured at cycle k minus the goal written at k-1.

    The goal written in the previous cycle is the one the servo was chasing when
    this cycle read it. Cycles without a previous goal are NaN.
    """
    measured = recording["q_measured"]
    errors = np.full_like(measured, np.nan)
    if measured.shape[0] > 1:
        errors[1:] = measured[1:] - recording["q_command"][:-1]
    return errors


def joint_tracking(recording: Recording) -> list[ErrorStats]:
    """RMS and max tracking error per joint [rad] (see ``joint_errors``)."""
    errors = joint_errors(recording)
    return [_error_stats(name, errors[:, j]) for j, name in enumerate(recording.header.joint_names)]


def ee_errors(recording: Recording) -> NDArray[np.float64]:
    """Return (N, C) end-effector position errors [m]: |measured - target| (NaN: no target)."""
    diff = recording["ee_measured"] - recording["ee_target"]
    out: NDArray[np.float64] = np.linalg.norm(diff, axis=-1)
    return out


def ee_tracking(recording: Recording) -> list[ErrorStats]:
    """RMS and max end-effector position error per chain [m], over cycles with a pose target."""
    errors = ee_errors(recording)
    return [_error_stats(name, errors[:, c]) for c, name in enumerate(recording.header.chain_names)]


def _percentile(values: NDArray[np.float64], q: float) -> float:
    return float(np.percentile(values, q)) if values.size else float("nan")


def timing_stats(recording: Recording) -> TimingStats:
    """Achieved rate, lateness and work-time percentiles, overruns and the lateness histogram."""
    rate = recording.header.rate_hz
    lateness = recording["lateness"]
    started = recording["t"] + lateness
    span = float(started[-1] - started[0]) if started.size > 1 else 0.0
    achieved = (started.size - 1) / span if span > 0 else float("nan")
    counts, edges = np.histogram(np.clip(lateness, 0.0, LATENESS_BINS[-1]), bins=LATENESS_BINS)
    return TimingStats(
        rate_hz=rate,
        achieved_rate_hz=achieved,
        lateness_p50=_percentile(lateness, 50),
        lateness_p90=_percentile(lateness, 90),
        lateness_p99=_percentile(lateness, 99),
        lateness_max=float(lateness.max()) if lateness.size else float("nan"),
        cycle_time_p50=_percentile(recording["cycle_time"], 50),
        cycle_time_p99=_percentile(recording["cycle_time"], 99),
        ik_time_p50=_percentile(recording["ik_time"], 50),
        ik_time_p99=_percentile(recording["ik_time"], 99),
        overruns=int(np.count_nonzero(recording["cycle_time"] > 1.0 / rate)),
        histogram_edges=edges.tolist(),
        histogram_counts=counts.astype(int).tolist(),
    )


def clamp_counts(recording: Recording) -> dict[str, dict[str, int]]:
    """Clamp events per joint and kind, e.g. ``{"joint2": {"delta": 3}}``."""
    out: dict[str, dict[str, int]] = {}
    names = recording.header.joint_names
    for _, joint, kind, _, _ in recording.clamp_events:
        joint_name = names[int(joint)] if 0 <= int(joint) < len(names) else f"#{int(joint)}"
        for flag in ClampKind:
            if flag and int(kind) & flag:
                per_joint = out.setdefault(joint_name, {})
                label = str(flag.name).lower()
                per_joint[label] = per_joint.get(label, 0) + 1
    return out


def fault_events(recording: Recording) -> list[FaultEvent]:
    """Hardware-error onsets: every cycle where a joint's flags gain a bit."""
    flags = recording["hw_errors"].astype(np.int64)
    if not flags.size:
        return []
    previous = np.vstack([np.zeros((1, flags.shape[1]), dtype=np.int64), flags[:-1]])
    rows, cols = np.nonzero(flags & ~previous)
    t = recording["t"]
    names = recording.header.joint_names
    return [
        FaultEvent(
            cycle=int(recording["cycle"][r]),
            t=float(t[r]),
            joint=names[c],
            flags=HardwareErrorFlags(int(flags[r, c])).describe(),
        )
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True)
    ]
