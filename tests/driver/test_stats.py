"""Loop statistics: percentiles kept up to date per cycle, as numpy computes them, and the
process's CPU time per cycle with its stages."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.driver.runtime.stats import STAGES, WINDOW, Percentiles, StatsRecorder, _Window


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng, n: rng.uniform(0.0, 120e-6, n),  # the 0.1 µs bins
        lambda rng, n: rng.exponential(400e-6, n),  # the 0.1 % bins, a long tail
        lambda rng, n: rng.integers(0, 400, n) * 1e-6,  # many equal values
        lambda rng, n: np.concatenate([rng.normal(2e-3, 1e-4, n - 5), [0.0, 0.0, 5.0, 1e6, -1.0]]),
    ],
    ids=["fine", "tail", "ties", "extremes"],
)
def test_window_percentiles_match_numpy_within_a_bin(draw):
    rng = np.random.default_rng(5)
    values = draw(rng, 3 * WINDOW + 123)  # the window has wrapped around
    window = _Window(WINDOW)
    for value in values.tolist():
        window.push(value)
    got = window.percentiles()
    kept = values[-WINDOW:]
    want = Percentiles.of(np.maximum(kept, 0.0))  # negative values count as 0
    assert got.max == kept.max()  # exact
    for field in ("p50", "p99"):
        assert getattr(got, field) == pytest.approx(getattr(want, field), rel=1e-3, abs=1e-7)


def test_equal_values_in_a_bin_give_exact_percentiles():
    stats = StatsRecorder(target_rate=100.0, window=16)
    for k in range(40):
        stats.record(deadline=k * 0.01, lateness=k * 1e-6, cycle=0.002, bus_io=0.0015, ik=0.0)
    snap = stats.snapshot()
    assert snap.lateness.p50 == 31.5e-6  # as numpy interpolates 24..39 µs
    assert snap.lateness.p99 == pytest.approx(
        np.percentile(np.arange(24, 40) * 1e-6, 99), abs=1e-15
    )
    assert snap.overhead.p50 == pytest.approx(0.0005, abs=1e-15)  # no CPU time: cycle - bus I/O


def test_the_overhead_is_the_cpu_time_and_the_stages_split_it():
    stats = StatsRecorder(target_rate=500.0, window=64)
    stage = dict.fromkeys(STAGES, 10e-6) | {"read": 50e-6, "wait": 30e-6}
    for k in range(200):
        cpu = 300e-6 if k % 2 else 200e-6  # 250 µs a cycle on average
        stats.record(
            k * 0.002, 1e-6, 150e-6, 60e-6, 0.0, cpu=cpu, stages=[stage[s] for s in STAGES]
        )
    snap = stats.snapshot()
    assert snap.overhead.p50 == pytest.approx(250e-6)
    assert snap.overhead.max == pytest.approx(300e-6)
    assert snap.stages["read"] == pytest.approx(50e-6)
    assert snap.stages["wait"] == pytest.approx(30e-6)
    # the rest of the CPU time: telemetry, other threads, the event loop
    assert snap.stages["other"] == pytest.approx(250e-6 - sum(stage.values()))
    assert snap.cpu_share == pytest.approx(250e-6 * 500.0)


def test_an_empty_recorder_summarises_to_zeros():
    snap = StatsRecorder(target_rate=100.0).snapshot()
    assert snap.lateness == Percentiles() and snap.stages == {} and snap.cpu_share == 0.0
