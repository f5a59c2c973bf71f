"""The motion layer on its own: limits on every cycle, streams tracked, jumps limited, stops."""

from __future__ import annotations

import numpy as np
import pytest

from hilbot.driver.runtime.motion import MotionLayer, MotionLimits, Reference, StreamReference
from hilbot.driver.runtime.readings import ReadingGuard

DT = 0.002  # [s] 500 Hz
V, A, J = 3.6, 34.0, 850.0


def layer(n: int = 1, lower: float = -2.8, upper: float = 2.8) -> MotionLayer:
    limits = MotionLimits(
        tuple(f"j{i}" for i in range(n)),
        np.full(n, lower),
        np.full(n, upper),
        np.full(n, V),
        np.full(n, A),
        np.full(n, J),
    )
    return MotionLayer(limits, DT, 30.0)


def hand(t: float | np.ndarray) -> np.ndarray:
    """A hand-like motion: a few tenths of a radian at 0.3-0.8 Hz."""
    return 0.3 * np.sin(2 * np.pi * 0.8 * t) + 0.15 * np.sin(2 * np.pi * 0.33 * t + 1.0)


def derivatives(q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    v = np.diff(q) / DT
    a = np.diff(v) / DT
    return v, a, np.diff(a) / DT


def run_stream(rate: float, jitter: float, seconds: float, *, stamped: bool = False):
    rng = np.random.default_rng(3)
    sends = sorted(
        (k / rate + rng.uniform(-jitter, jitter), k / rate) for k in range(int(seconds * rate))
    )
    stream = StreamReference(1)
    m = layer()
    m.reset(np.array([hand(0.0)]))
    out, i = [], 0
    for k in range(int(seconds / DT)):
        t = k * DT
        while i < len(sends) and sends[i][0] <= t:
            arrival, sample = sends[i]
            stream.add(np.array([hand(sample)]), arrival, sample if stamped else None)
            i += 1
        ref = stream.at(t)
        reference = None if ref is None else Reference(*ref, np.array([True]))
        q = m.step(reference, t)
        m.commit(q, t)
        out.append(q[0])
    return np.arange(len(out)) * DT, np.array(out)


def best_delay(t: np.ndarray, q: np.ndarray) -> tuple[float, float]:
    errors = [
        (tau, float(np.sqrt(np.mean((q - hand(t - tau)) ** 2)))) for tau in np.arange(0, 0.1, 1e-3)
    ]
    return min(errors, key=lambda e: e[1])


@pytest.mark.parametrize("stamped", [False, True], ids=["arrival-times", "sender-stamps"])
def test_a_30hz_stream_is_tracked_smoothly_within_every_limit(stamped: bool) -> None:
    t, q = run_stream(30.0, 0.005, 12.0, stamped=stamped)
    t, q = t[500:], q[500:]  # after the stream's rate is known
    v, a, j = derivatives(q)
    slack = 1e-6
    assert np.abs(v).max() <= V + slack
    assert np.abs(a).max() <= A + slack
    assert np.abs(j).max() <= J * (1 + 1e-6) + slack
    assert np.sqrt(np.mean(j**2)) <= 1000.0  # the target for a 30 Hz stream
    assert np.count_nonzero(np.diff(q) == 0.0) == 0  # every cycle moves with the stream
    delay, error = best_delay(t, q)
    assert delay <= 0.050
    assert error <= 0.003


def test_a_100hz_leader_stream_lags_at_most_20ms() -> None:
    t, q = run_stream(100.0, 0.002, 8.0)
    delay, error = best_delay(t[500:], q[500:])
    assert delay <= 0.020 and error <= 0.003


def test_a_far_target_is_a_limited_motion_without_overshoot() -> None:
    m = layer()
    m.reset(np.array([-1.5]))
    ref = Reference(np.array([2.0]), np.zeros(1), np.zeros(1), np.array([True]))
    q = [m.position[0]]
    for k in range(1500):
        nxt = m.step(ref, k * DT)
        m.commit(nxt, k * DT)
        q.append(nxt[0])
    v, a, j = derivatives(np.array(q))
    assert np.abs(v).max() <= V + 1e-9 and np.abs(a).max() <= A + 1e-6
    assert np.abs(j).max() <= J * (1 + 1e-6)
    assert q[-1] == 2.0 and max(q) <= 2.0  # arrives exactly, never past it
    assert np.count_nonzero(np.diff(q)[:50]) == 50  # starts at once, gently


def test_a_stop_from_full_speed_ends_within_the_bound_and_holds() -> None:
    m = layer(upper=100.0, lower=-100.0)
    m.reset(np.array([0.0]))
    ref = Reference(np.array([50.0]), np.zeros(1), np.zeros(1), np.array([True]))
    for k in range(800):  # cruise at the velocity limit
        m.commit(m.step(ref, k * DT), k * DT)
    assert m.velocity[0] == pytest.approx(V, rel=1e-3)
    start = m.position.copy()
    m.begin_stop("estop", 800 * DT)
    q = [start[0]]
    for k in range(801, 1400):
        m.commit(m.step(ref, k * DT), k * DT)  # the reference no longer counts
        q.append(m.position[0])
    report = m.last_stop
    assert report is not None and report.reason == "estop" and report.within_bounds
    assert report.distance[0] == pytest.approx(q[-1] - start[0])
    assert m.velocity[0] == 0.0 and q[-1] == q[-2]  # at rest, and stays
    _, a, j = derivatives(np.array(q))
    assert np.abs(a).max() <= A + 1e-6 and np.abs(j).max() <= J * (1 + 1e-6)


def test_a_joint_limit_is_approached_without_passing_it() -> None:
    m = layer(upper=0.5)
    m.reset(np.array([0.0]))
    ref = Reference(np.array([0.5]), np.array([V]), np.zeros(1), np.array([True]))
    for k in range(1000):
        m.commit(m.step(ref, k * DT), k * DT)
        assert m.position[0] <= 0.5


def test_the_reading_guard_refuses_a_spike_and_faults_on_repeats() -> None:
    guard = ReadingGuard(("a", "b"), np.array([4.8, 4.8]), np.array([0.02, 0.02]), fault_count=3)
    base = np.array([0.1, -0.2])
    assert guard.check(base, 0.0).glitched == ()
    spike = guard.check(base + np.array([0.46, 0.0]), 0.002)
    assert spike.glitched == (0,) and spike.position.tolist() == base.tolist()
    assert guard.check(base, 0.004).glitched == ()  # back: it was a spike
    repeated: tuple[int, ...] = ()
    for k in range(3):
        repeated = guard.check(base + np.array([0.0, 1.0]), 0.006 + 0.004 * k).repeated
        guard.check(base, 0.008 + 0.004 * k)
    assert repeated == (1,) and guard.counts.tolist() == [1, 3]


def test_the_reading_guard_trusts_a_move_two_readings_confirm() -> None:
    guard = ReadingGuard(("a",), np.array([4.8]), np.array([0.02]))
    guard.check(np.array([0.0]), 0.0)
    assert guard.check(np.array([1.0]), 0.002).glitched == (0,)  # pushed while limp
    confirmed = guard.check(np.array([1.0]), 0.004)
    assert confirmed.glitched == () and confirmed.position.tolist() == [1.0]


@pytest.mark.parametrize("planner", ["off", "linear", "ruckig"])
async def test_the_planners_measured_against_stay_inside_the_safety_layer(
    planner: str, make_config, clock
) -> None:
    from hilbot.driver.runtime.backends import sim_backend
    from hilbot.driver.runtime.loop import Runtime
    from hilbot.driver.runtime.state import Command

    base = make_config("openmanipulator_x", chains=[])
    config = base.model_copy(update={"motion": base.motion.model_copy(update={"planner": planner})})
    written: list[np.ndarray] = []
    async with Runtime(config, sim_backend(config, clock=clock), clock=clock) as rt:
        rt.add_cycle_listener(lambda r: written.append(r.command.copy()) if r.written else None)
        await rt.command(Command.ENABLE)
        start = rt.state().command["joint1"]
        for k in range(120):
            if k % 7 == 0:  # a 30 Hz stream at 200 Hz
                rt.set_joint_targets({"joint1": start + 0.4 * np.sin(k / 40)})
            await rt.wait_cycles(1)
        moved = rt.state().command["joint1"] - start
        step = rt.safety.step_bound
        lower, upper = rt.limits.lower, rt.limits.upper
    assert abs(moved) > 0.05
    q = np.array(written)
    assert np.all(np.abs(np.diff(q, axis=0)) <= step + 1e-12)
    assert np.all(q >= lower) and np.all(q <= upper)


def _array_step(m: MotionLayer, reference: Reference | None) -> np.ndarray:
    """The step's cascade in its array form (the layer's step before it ran on floats)."""
    limits, dt = m.limits, m.period
    q, v, a = m.position, m.velocity, m.acceleration
    if reference is None:
        active = np.zeros(q.shape, dtype=bool)
        r, rd, rdd = q, np.zeros_like(q), np.zeros_like(q)
    else:
        active = reference.active & ~m.stopping
        r = np.clip(reference.position, limits.lower, limits.upper)
        rd = reference.velocity
        rdd = np.where(active, reference.acceleration, 0.0)
    e = np.where(active, r - q, 0.0)
    ae = np.abs(e)
    corr = np.sign(e) * np.minimum(m._kp * ae, np.sqrt(2.0 * m._braking_a * ae))
    v_des = np.where(active, rd + corr, 0.0)
    v_des = np.minimum(v_des, np.sqrt(2.0 * m._braking_a * np.maximum(limits.upper - q, 0.0)))
    v_des = np.maximum(v_des, -np.sqrt(2.0 * m._braking_a * np.maximum(q - limits.lower, 0.0)))
    v_des = np.clip(v_des, -limits.velocity, limits.velocity)
    ev = v_des - v
    aev = np.abs(ev)
    a_des = rdd + np.sign(ev) * np.minimum(m._kv * aev, np.sqrt(2.0 * m._braking_j * aev))
    a_des = np.clip(a_des, -limits.acceleration, limits.acceleration)
    j = np.clip(m._ka * (a_des - a), -limits.jerk, limits.jerk)
    q1 = q + (v + (0.5 * a + j * dt / 6.0) * dt) * dt
    q1 = np.clip(q1, q - limits.velocity * dt, q + limits.velocity * dt)
    q1 = np.clip(q1, limits.lower, limits.upper)
    settled = (np.abs(v) <= m._snap_v) & (np.abs(a) <= m._snap_a)
    still = ~active | ((rd == 0.0) & (rdd == 0.0) & (ae <= 1e-6))
    snap = settled & still
    q1[snap] = np.where(active, r, q)[snap]
    return q1


def test_the_step_on_floats_is_the_array_cascade_to_the_last_bit():
    rng = np.random.default_rng(11)
    n = 6
    limits = MotionLimits(
        tuple(f"j{i}" for i in range(n)),
        np.array([-np.inf, -2.0, -1.5, -3.0, -0.5, -0.02]),
        np.array([np.inf, 2.0, 1.5, 3.0, 0.5, 0.03]),
        rng.uniform(0.5, 5.0, n),
        rng.uniform(5.0, 50.0, n),
        rng.uniform(100.0, 1500.0, n),
    )
    m = MotionLayer(limits, DT, 30.0)
    m.reset(rng.uniform(-0.01, 0.01, n))
    for k in range(3000):
        t = k * DT
        if k == 1500:
            m.begin_stop("estop", t)
        if k == 2200:
            m.reset(m.position)
        draw = rng.random()
        reference = None
        if draw > 0.1:
            wave = np.sin(np.arange(n) + 3.0 * t)
            position = rng.uniform(-4.0, 4.0, n) if draw < 0.15 else 0.3 * wave
            velocity = np.zeros(n) if draw < 0.3 else 0.9 * np.cos(np.arange(n) + 3.0 * t)
            acceleration = np.zeros(n) if draw < 0.4 else -2.7 * wave
            reference = Reference(position, velocity, acceleration, rng.random(n) < 0.8)
        want = _array_step(m, reference)
        got = m.step(reference, t)
        np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-12)
        if rng.random() < 0.05:
            got = got + rng.uniform(-1e-3, 1e-3, n)  # the safety layer changed it
        m.commit(got, t)
