"""PNG plots of a recording, drawn with matplotlib's Agg canvas (no display needed).

``Figure`` objects are built directly (not through ``pyplot``), so plotting
keeps no global state and works in threads and on headless machines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from numpy.typing import NDArray

from hilbot.driver.bench.metrics import LATENESS_BINS, ee_errors, fault_events
from hilbot.driver.bench.recording import Recording

DPI = 80
MIN_JOINT_SPAN = 0.02  # [rad] joint axes span at least this: one encoder tick is not a swing
#: Background of the cycles a run spent outside ``armed``, by mode.
MODE_SHADES = {"disarmed": "0.88", "estopped": "#f6d2a8", "faulted": "#f4b6b6"}


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=DPI)
    return path


def _square_limits(ax: Any, points: NDArray[np.float64]) -> None:
    """Equal-scale limits around ``points`` (n, 2), at least 1 cm wide (a still arm is a dot)."""
    points = points[np.all(np.isfinite(points), axis=1)]
    if not points.size:
        return
    low, high = points.min(axis=0), points.max(axis=0)
    centre = (low + high) / 2.0
    half = max(float(np.max(high - low)) * 0.55, 0.005)
    ax.set_xlim(centre[0] - half, centre[0] + half)
    ax.set_ylim(centre[1] - half, centre[1] + half)


def _min_span(ax: Any, span: float) -> None:
    """Widen the y axis to at least ``span`` around its centre."""
    low, high = ax.get_ylim()
    if high - low < span:
        centre = (low + high) / 2.0
        ax.set_ylim(centre - span / 2.0, centre + span / 2.0)


def _shade_modes(ax: Any, recording: Recording) -> list[str]:
    """Shade the cycles spent outside ``armed``; return the modes shaded."""
    t, mode = recording["t"], recording["mode"]
    shaded = []
    for index, name in enumerate(recording.header.modes):
        colour = MODE_SHADES.get(name)
        where = mode == index
        if colour is None or not where.any():
            continue
        ax.fill_between(
            t,
            0,
            1,
            where=where,
            step="post",
            color=colour,
            lw=0,
            transform=ax.get_xaxis_transform(),
            label=name,
            zorder=0,
        )
        shaded.append(name)
    return shaded


def _injected(recording: Recording) -> list[tuple[str, str, float, float]]:
    """Injected faults as ``(joint, action, start, end)`` [s] (end: when cleared)."""
    cycles, t = recording["cycle"], recording["t"]
    if not t.size:
        return []

    def time_of(cycle: int) -> float:
        row = min(int(np.searchsorted(cycles, cycle)), t.size - 1)
        return float(t[row])

    spans: list[tuple[str, str, float, float]] = []
    open_: dict[tuple[str, str], float] = {}
    for entry in recording.header.faults:
        key = (str(entry.get("joint")), str(entry.get("action")))
        if entry.get("clear"):
            if key in open_:
                spans.append((*key, open_.pop(key), time_of(int(entry["cycle"]))))
        else:
            open_[key] = time_of(int(entry["cycle"]))
    spans += [(*key, start, float(t[-1])) for key, start in open_.items()]
    return spans


def plot_joints(recording: Recording, path: Path) -> Path:
    """Commanded, target and measured position per joint over time.

    The background shows the mode (unshaded: armed) and, on a joint's axis, the
    faults injected into it; a vertical red line marks a hardware error it reported.
    """
    names = recording.header.joint_names
    t = recording["t"]
    fig = Figure(figsize=(8, 1.6 * max(len(names), 1) + 0.9), layout="constrained")
    axes = fig.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    injected = _injected(recording)
    onsets = fault_events(recording)
    for j, (ax, name) in enumerate(zip(axes, names, strict=True)):
        _shade_modes(ax, recording)
        ax.plot(t, recording["q_target"][:, j], color="0.6", lw=1, ls="--", label="target")
        ax.plot(t, recording["q_command"][:, j], color="C0", lw=1.2, label="commanded")
        ax.plot(t, recording["q_measured"][:, j], color="C1", lw=1, label="measured")
        clamped = np.flatnonzero(recording["clamped"][:, j])
        if clamped.size:
            ax.plot(t[clamped], recording["q_command"][clamped, j], "r.", ms=3, label="clamped")
        for joint, action, start, end in injected:
            if joint == name:
                ax.axvspan(start, max(end, start + 0.01), color="C4", alpha=0.25, lw=0)
                ax.text(
                    start,
                    0.97,
                    f" {action}",
                    transform=ax.get_xaxis_transform(),
                    va="top",
                    fontsize="x-small",
                    color="C4",
                )
        for event in onsets:
            if event.joint == name:
                ax.axvline(event.t, color="C3", lw=1.2)
                ax.text(
                    event.t,
                    0.03,
                    f" {event.flags}",
                    transform=ax.get_xaxis_transform(),
                    fontsize="x-small",
                    color="C3",
                )
        _min_span(ax, MIN_JOINT_SPAN)
        ax.set_ylabel(f"{name}\n[rad]")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    if injected:
        handles.append(Patch(color="C4", alpha=0.25))
        labels.append("fault injected")
    if onsets:
        handles.append(Line2D([], [], color="C3", lw=1.2))
        labels.append("hardware error")
    fig.legend(
        handles, labels, loc="outside lower center", fontsize="small", ncols=min(len(labels), 5)
    )
    axes[-1].set_xlabel("time [s]")
    fig.suptitle("joints: target, commanded (after the safety layer) and measured")
    return _save(fig, path)


def plot_end_effectors(recording: Recording, path: Path) -> Path:
    """Per chain: path vs target in the x-y and x-z planes, and the error over time."""
    chains = recording.header.chain_names
    t = recording["t"]
    errors = ee_errors(recording)
    fig = Figure(figsize=(10, 3.2 * max(len(chains), 1)), layout="constrained")
    axes = fig.subplots(max(len(chains), 1), 3, squeeze=False)
    for c, name in enumerate(chains):
        measured = recording["ee_measured"][:, c]
        target = recording["ee_target"][:, c]
        if not np.isfinite(measured).any():
            axes[c, 0].text(
                0.5, 0.5, "no end-effector data", ha="center", transform=axes[c, 0].transAxes
            )
            continue
        for ax, (i, k) in zip(axes[c, :2], ((0, 1), (0, 2)), strict=True):
            ax.plot(target[:, i], target[:, k], color="0.5", ls="--", lw=1, label="target")
            ax.plot(measured[:, i], measured[:, k], color="C1", lw=1, label="measured")
            first = int(np.argmax(np.all(np.isfinite(measured), axis=1)))
            ax.plot(measured[first, i], measured[first, k], "o", color="C1", ms=4, label="start")
            ax.set_xlabel(f"{'xyz'[i]} [m]")
            ax.set_ylabel(f"{'xyz'[k]} [m]")
            _square_limits(ax, np.vstack([target[:, [i, k]], measured[:, [i, k]]]))
            ax.grid(alpha=0.3)
        axes[c, 0].set_title(f"{name}: path (top view)")
        axes[c, 1].set_title(f"{name}: path (side view)")
        axes[c, 0].legend(fontsize="small")
        axes[c, 2].plot(t, errors[:, c] * 1e3, color="C3", lw=1)
        if t.size > 1:
            axes[c, 2].set_xlim(float(t[0]), float(t[-1]))
        if not np.isfinite(errors[:, c]).any():
            axes[c, 2].text(
                0.5,
                0.5,
                "no pose target in this run\n(joint-space steps only)",
                ha="center",
                va="center",
                transform=axes[c, 2].transAxes,
            )
        axes[c, 2].set_xlabel("time [s]")
        axes[c, 2].set_ylabel("error [mm]")
        axes[c, 2].set_title(f"{name}: position error")
        axes[c, 2].grid(alpha=0.3)
    return _save(fig, path)


def _lateness_bins(recording: Recording) -> tuple[NDArray[np.float64], list[float]]:
    """Lateness clipped to [1 µs, 100 ms] and log bins [µs] up to a little past its maximum."""
    lateness = np.clip(recording["lateness"], LATENESS_BINS[1], LATENESS_BINS[-1])
    top = float(lateness.max()) if lateness.size else LATENESS_BINS[1]
    count = max(int(np.searchsorted(LATENESS_BINS[1:], top * 1.5)) + 2, 9)  # to >= 100 µs
    edges = LATENESS_BINS[1 : count + 1]
    return lateness, (edges * 1e6).tolist()


def plot_lateness(recording: Recording, path: Path) -> Path:
    """Histogram of cycle lateness on a log time axis."""
    lateness, bins = _lateness_bins(recording)
    fig = Figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.subplots()
    ax.hist(lateness * 1e6, bins=bins, color="C0")
    ax.set_xscale("log")
    ax.set_xlabel("cycle lateness [µs] (values below 1 µs shown at 1 µs)")
    ax.set_ylabel("cycles")
    p99 = float(np.percentile(recording["lateness"], 99)) if lateness.size else 0.0
    label = f"p99 {p99 * 1e6:.0f} µs"
    ax.axvline(max(p99, LATENESS_BINS[1]) * 1e6, color="C3", ls="--", label=label)
    ax.legend(fontsize="small")
    ax.set_title(f"loop timing at {recording.header.rate_hz:g} Hz")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_overview(recording: Recording, path: Path) -> Path:
    """One small figure for documentation: a joint, the first chain's path, the lateness."""
    t = recording["t"]
    fig = Figure(figsize=(9, 3), layout="constrained")
    ax_joint, ax_path, ax_late = fig.subplots(1, 3)
    j = int(np.nanargmax(np.nanstd(recording["q_command"], axis=0))) if recording.n_cycles else 0
    ax_joint.plot(t, recording["q_command"][:, j], label="commanded")
    ax_joint.plot(t, recording["q_measured"][:, j], label="measured")
    _min_span(ax_joint, MIN_JOINT_SPAN)
    ax_joint.set_title(f"{recording.header.joint_names[j]}")
    ax_joint.set_xlabel("time [s]")
    ax_joint.set_ylabel("[rad]")
    ax_joint.legend(fontsize="small")
    if recording.header.chain_names and np.isfinite(recording["ee_measured"][:, 0]).any():
        target = recording["ee_target"][:, 0]
        measured = recording["ee_measured"][:, 0]
        ax_path.plot(target[:, 0], target[:, 1], "--", color="0.5", label="target")
        ax_path.plot(measured[:, 0], measured[:, 1], color="C1", label="measured")
        _square_limits(ax_path, np.vstack([target[:, :2], measured[:, :2]]))
        ax_path.set_title(f"{recording.header.chain_names[0]} path (top view)")
        ax_path.set_xlabel("x [m]")
        ax_path.set_ylabel("y [m]")
        ax_path.legend(fontsize="small")
    lateness, bins = _lateness_bins(recording)
    ax_late.hist(lateness * 1e6, bins=bins)
    ax_late.set_xscale("log")
    ax_late.set_xlabel("lateness [µs]")
    ax_late.set_title("cycle lateness")
    for ax in (ax_joint, ax_path, ax_late):
        ax.grid(alpha=0.3)
    header = recording.header
    name = (header.scenario or {}).get("name", "recording")
    fig.suptitle(
        f"{name} on {header.backend} ({header.clock} clock, {header.rate_hz:g} Hz)",
        fontsize="medium",
    )
    return _save(fig, path)


def plot_all(recording: Recording, out_dir: Path) -> list[Path]:
    """Write ``joints.png``, ``end_effector.png``, ``lateness.png`` and ``overview.png``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [
        plot_joints(recording, out_dir / "joints.png"),
        plot_lateness(recording, out_dir / "lateness.png"),
        plot_overview(recording, out_dir / "overview.png"),
    ]
    if recording.header.chain_names:
        paths.append(plot_end_effectors(recording, out_dir / "end_effector.png"))
    return paths
