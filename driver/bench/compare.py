"""Compare two recordings: the same scenario on two backends, or a run and its replay."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from numpy.typing import NDArray

from hilbot.driver.bench.metrics import ErrorStats, build_report
from hilbot.driver.bench.recording import Recording


@dataclass(frozen=True)
class CommandDiff:
    """Where two recordings' commands differ (NaN, "nothing written", equals only NaN)."""

    cycles_compared: int
    cycles_differing: int
    first_cycle: int | None
    max_abs: float
    joints_differing: list[str]
    length_mismatch: bool
    written_in_one: int = 0  # cycles where one run wrote a command and the other did not

    @property
    def identical(self) -> bool:
        """True when every compared cycle matches and both have the same length."""
        return self.cycles_differing == 0 and not self.length_mismatch


def _common_joints(a: Recording, b: Recording) -> tuple[list[str], list[int], list[int]]:
    names = [n for n in a.header.joint_names if n in b.header.joint_names]
    return (
        names,
        [a.header.joint_names.index(n) for n in names],
        [b.header.joint_names.index(n) for n in names],
    )


def compare_commands(a: Recording, b: Recording, *, atol: float = 1e-9) -> CommandDiff:
    """Compare the goal positions written cycle by cycle, within ``atol`` [rad]."""
    names, ia, ib = _common_joints(a, b)
    n = min(a.n_cycles, b.n_cycles)
    ca, cb = a["q_command"][:n][:, ia], b["q_command"][:n][:, ib]
    nan_a, nan_b = np.isnan(ca), np.isnan(cb)
    delta = np.abs(np.where(nan_a | nan_b, 0.0, ca - cb))
    differs = (nan_a != nan_b) | (delta > atol)
    rows = np.flatnonzero(differs.any(axis=1))
    one_sided = int(np.count_nonzero((nan_a != nan_b).any(axis=1)))
    return CommandDiff(
        cycles_compared=n,
        cycles_differing=int(rows.size),
        first_cycle=int(rows[0]) if rows.size else None,
        max_abs=float(delta.max()) if delta.size else 0.0,
        joints_differing=[names[j] for j in np.flatnonzero(differs.any(axis=0)).tolist()],
        length_mismatch=a.n_cycles != b.n_cycles,
        written_in_one=one_sided,
    )


@dataclass(frozen=True)
class BackendComparison:
    """How two runs of the same scenario differ (``b`` minus ``a``, at equal times)."""

    backend_a: str
    backend_b: str
    cycles: int
    measured_diff: list[ErrorStats]  # per joint [rad]
    ee_diff: list[ErrorStats]  # per chain [m]
    commands: CommandDiff  # cycle by cycle (meaningful when both ran on a fake clock)
    command_diff: list[ErrorStats]  # per joint [rad], at equal times
    summary_a: dict[str, Any]
    summary_b: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (``comparison.json``)."""
        out = asdict(self)
        out["commands"]["identical"] = self.commands.identical
        return out


def _stats(name: str, diff: NDArray[np.float64]) -> ErrorStats:
    valid = diff[np.isfinite(diff)]
    if not valid.size:
        return ErrorStats(name, float("nan"), float("nan"), 0)
    rms = float(np.sqrt(np.mean(valid**2)))
    return ErrorStats(name, rms, float(np.abs(valid).max()), int(valid.size))


def _on_time_base(a: Recording, b: Recording, values: NDArray[np.float64]) -> NDArray[np.float64]:
    """``b``'s per-cycle ``values`` (n_b, ...) interpolated onto ``a``'s cycle times.

    Real-time runs on two backends do not run the same cycles (a busy host skips
    ticks), so they are compared at equal times since the first cycle, not at equal
    cycle numbers. Times outside ``b``'s span are NaN.
    """
    ta, tb = a["t"], b["t"]
    flat = values.reshape(values.shape[0], -1)
    out = np.full((ta.shape[0], flat.shape[1]), np.nan)
    if tb.size < 2:
        return out.reshape((ta.shape[0], *values.shape[1:]))
    inside = (ta >= tb[0]) & (ta <= tb[-1])
    for k in range(flat.shape[1]):
        out[inside, k] = np.interp(ta[inside], tb, flat[:, k])
    return out.reshape((ta.shape[0], *values.shape[1:]))


def compare_runs(a: Recording, b: Recording) -> BackendComparison:
    """Compare two runs of one scenario at equal times (``b`` interpolated onto ``a``'s cycles)."""
    names, ia, ib = _common_joints(a, b)
    qb = _on_time_base(a, b, b["q_measured"][:, ib])
    dq = qb - a["q_measured"][:, ia]
    dc = _on_time_base(a, b, b["q_command"][:, ib]) - a["q_command"][:, ia]
    chains = [c for c in a.header.chain_names if c in b.header.chain_names]
    ee = []
    for chain in chains:
        pa = a["ee_measured"][:, a.header.chain_names.index(chain)]
        pb = _on_time_base(a, b, b["ee_measured"][:, b.header.chain_names.index(chain)])
        ee.append(_stats(chain, np.linalg.norm(pb - pa, axis=-1)))
    report_a, report_b = build_report(a), build_report(b)
    return BackendComparison(
        backend_a=a.header.backend,
        backend_b=b.header.backend,
        cycles=a.n_cycles,
        measured_diff=[_stats(name, dq[:, j]) for j, name in enumerate(names)],
        ee_diff=ee,
        commands=compare_commands(a, b, atol=1e-6),
        command_diff=[_stats(name, dc[:, j]) for j, name in enumerate(names)],
        summary_a={"timing": asdict(report_a.timing), "final_mode": report_a.final_mode},
        summary_b={"timing": asdict(report_b.timing), "final_mode": report_b.final_mode},
    )


def plot_comparison(a: Recording, b: Recording, path: Path) -> Path:
    """Measured position per joint on both backends, and their difference."""
    names, ia, ib = _common_joints(a, b)
    t = a["t"]
    qb_all = _on_time_base(a, b, b["q_measured"][:, ib])
    fig = Figure(figsize=(10, 1.6 * max(len(names), 1) + 0.6), layout="constrained")
    axes = fig.subplots(max(len(names), 1), 2, sharex=True, squeeze=False)
    for row, name in enumerate(names):
        qa, qb = a["q_measured"][:, ia[row]], qb_all[:, row]
        commanded = a["q_command"][:, ia[row]]
        axes[row, 0].plot(t, commanded, color="0.6", ls="--", lw=1, label="commanded")
        axes[row, 0].plot(t, qa, lw=1, label=a.header.backend)
        axes[row, 0].plot(t, qb, lw=1, label=b.header.backend)
        axes[row, 0].set_ylabel(f"{name}\n[rad]")
        axes[row, 1].plot(t, (qb - qa) * 1e3, color="C3", lw=1)
        axes[row, 1].set_ylabel("diff [mrad]")
        for ax in axes[row]:
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize="small", ncols=3)
    axes[0, 0].set_title("measured position")
    axes[0, 1].set_title(f"{b.header.backend} minus {a.header.backend}")
    axes[-1, 0].set_xlabel("time [s]")
    axes[-1, 1].set_xlabel("time [s]")
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=80)
    return path
