"""The motion layer: the command is a motion, not a position.

:class:`MotionLayer` keeps the commanded state of every joint (position, velocity,
acceleration) and advances it one cycle at a time toward a reference, within per-joint
velocity, acceleration and jerk limits. It sits between every target source and the
safety layer (which stays last and keeps its authority):

- a stream of timestamped targets becomes a reference through :class:`StreamReference`
  (a short look-behind buffer, the stream's rate and jitter estimated on the fly, linear
  interpolation ``latency`` behind now), so a 30 Hz stream gives a command that changes
  every cycle, with the stream's velocity, instead of a staircase;
- the command tracks the reference with a cascade of saturated loops (position ->
  velocity -> acceleration -> jerk). Near the reference the cascade is linear, a triple
  pole at ``bandwidth`` with the reference's velocity fed forward, so it tracks without
  lag; far from it, square-root laws brake within the acceleration and jerk limits, so
  a jump (a far target, a target after a hold) becomes a limited motion, never a step;
- :meth:`MotionLayer.begin_stop` decelerates every joint to rest along the commanded
  state (never from a reading): the controlled stop of IEC 60204-1 categories 1 and 2.

Everything here is synchronous numpy, with no I/O: the runtime calls :meth:`step` once a
cycle and :meth:`commit` with what it wrote. Shapes are ``(n,)`` over the runtime's joints;
units are rad (or m for prismatic joints), per second, per second², per second³.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

#: Fraction of the acceleration (jerk) limit the braking laws plan with, leaving the rest
#: for the transitions between phases, so the limits hold while braking.
BRAKING_SHARE = 0.6
#: Largest ``3 * bandwidth * period``: the discrete cascade stays well damped below it.
MAX_GAIN_STEP = 0.5
#: A stopping joint is at rest below these [rad/s], [rad/s²].
REST_VELOCITY = 1e-4
REST_ACCELERATION = 1e-3
#: A joint this close to a still reference [rad or m], and at rest, is put exactly on it.
SNAP_POSITION = 1e-6


@dataclass(frozen=True, slots=True)
class MotionLimits:
    """Per-joint limits the motion layer plans within, in the runtime's joint order.

    Attributes:
        names: the joints.
        lower, upper: (n,) position limits [rad or m].
        velocity: (n,) [rad/s or m/s].
        acceleration: (n,) [rad/s² or m/s²].
        jerk: (n,) [rad/s³ or m/s³].
    """

    names: tuple[str, ...]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    velocity: NDArray[np.float64]
    acceleration: NDArray[np.float64]
    jerk: NDArray[np.float64]

    def __post_init__(self) -> None:
        n = len(self.names)
        for field in ("lower", "upper", "velocity", "acceleration", "jerk"):
            array = getattr(self, field)
            if array.shape != (n,):
                raise ValueError(f"motion limit {field} must have shape ({n},), got {array.shape}")
        for field in ("velocity", "acceleration", "jerk"):
            array = getattr(self, field)
            if not (np.all(array > 0) and np.all(np.isfinite(array))):
                bad = self.names[int(np.argmax(~(np.isfinite(array) & (array > 0))))]
                raise ValueError(f"joint {bad!r}: the motion {field} limit must be finite and > 0")

    def _peak(
        self, velocity: NDArray[np.float64], acceleration: NDArray[np.float64] | None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(speed it may still reach, time to bring the acceleration to zero) at a stop's start.

        An acceleration that still speeds the joint up takes ``a / J`` to ramp down, during
        which the speed grows by ``a² / (2 J)``.
        """
        v = np.abs(velocity)
        if acceleration is None:
            return v, np.zeros_like(v)
        a = np.abs(acceleration)
        speeding_up = np.sign(acceleration) * np.sign(velocity) > 0
        ramp = a / self.jerk
        peak: NDArray[np.float64] = v + np.where(speeding_up, a * a / (2.0 * self.jerk), 0.0)
        return peak, ramp

    def stopping_distance(
        self, velocity: NDArray[np.float64], acceleration: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        """An upper bound of the distance a stop from ``velocity`` and ``acceleration`` takes.

        Jerk-limited braking first ramps any acceleration down, then reaches full
        deceleration in ``A / J``, brakes, and releases it again: at most
        ``v (a / J) + v² / (2 A') + v A / J`` from the speed ``v`` it may still reach, with
        ``A'`` the braking share of ``A``.
        """
        v, ramp = self._peak(velocity, acceleration)
        a = self.acceleration * BRAKING_SHARE
        bound: NDArray[np.float64] = (
            v * ramp + v * v / (2.0 * a) + v * self.acceleration / self.jerk
        )
        return bound

    def stopping_time(
        self, velocity: NDArray[np.float64], acceleration: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        """An upper bound of the time a stop from ``velocity`` and ``acceleration`` takes [s]."""
        v, ramp = self._peak(velocity, acceleration)
        a = self.acceleration * BRAKING_SHARE
        bound: NDArray[np.float64] = ramp + v / a + 2.0 * self.acceleration / self.jerk
        return bound


class StopReport(NamedTuple):
    """A controlled stop that came to rest.

    Attributes:
        reason: why it stopped (``estop``, ``fault``, ``watchdog``, ``disable`` ...).
        duration: from the stop's start to rest [s].
        distance: (n,) how far each joint travelled while stopping [rad or m].
        speed: (n,) each joint's speed when the stop began [rad/s or m/s].
        distance_bound: (n,) the configured limits' bound of that distance.
        time_bound: the configured limits' bound of the duration [s].
    """

    reason: str
    duration: float
    distance: NDArray[np.float64]
    speed: NDArray[np.float64]
    distance_bound: NDArray[np.float64]
    time_bound: float

    @property
    def within_bounds(self) -> bool:
        """Whether the stop stayed within the distance and time the limits promise."""
        return bool(np.all(self.distance <= self.distance_bound + 1e-9)) and (
            self.duration <= self.time_bound + 1e-9
        )

    def describe(self, names: tuple[str, ...]) -> str:
        """One line: the time and the largest distance, with the bound."""
        j = int(np.argmax(self.distance)) if self.distance.size else 0
        joint = names[j] if names else "-"
        return (
            f"stop ({self.reason}): {self.duration * 1e3:.0f} ms "
            f"(bound {self.time_bound * 1e3:.0f} ms), largest travel {joint} "
            f"{float(self.distance[j]) if self.distance.size else 0.0:.4f} "
            f"(bound {float(self.distance_bound[j]) if self.distance.size else 0.0:.4f})"
        )


class Reference(NamedTuple):
    """What the command should follow this cycle.

    Attributes:
        position: (n,) the reference position [rad or m].
        velocity: (n,) its velocity, fed forward [rad/s or m/s].
        acceleration: (n,) its acceleration, fed forward [rad/s² or m/s²].
        active: (n,) which joints follow it; the others keep braking to rest and hold.
    """

    position: NDArray[np.float64]
    velocity: NDArray[np.float64]
    acceleration: NDArray[np.float64]
    active: NDArray[np.bool_]


class StreamReference:
    """One target stream turned into a reference you can ask for at any time.

    Samples arrive at some rate with jitter; each carries its value and either the
    sender's sample time (``stamp``, on the sender's clock) or only its arrival time.
    The reference at ``now`` is the stream interpolated at ``now - latency``: late
    enough that the next sample has usually arrived, so the reference is a continuous
    path through the samples with their velocity, not a staircase.

    - Sender stamps are mapped onto the local clock by the smallest ``arrival - stamp``
      seen (the least-delayed sample), which drifts up slowly so clocks may drift.
    - Arrival times alone are de-jittered: each sample is placed one estimated period
      after the previous one, pulled a little toward its arrival.
    - ``latency=None`` (auto) is the period plus the observed lateness, bounded
      by ``max_latency``: about 40 ms for a 30 Hz stream with ±5 ms jitter, about
      12 ms for a 100 Hz leader arm.
    - Past the newest sample the reference extrapolates along the last segment for up to
      ``max_extrapolation`` periods (a late sample), then settles on the newest sample (the
      stream stopped: its last target is where to go).
    - A gap longer than ``GAP_PERIODS`` periods (or ``max_gap``) restarts the stream:
      the new sample is a new hold point, reached by a limited motion.

    Args:
        size: the number of values per sample.
        latency: the look-behind [s], or ``None`` for auto.
        max_latency: the largest auto latency [s].
        history: samples kept (a short, bounded look-behind buffer).
    """

    GAP_PERIODS = 4.0
    PULL = 0.03  # how far a de-jittered sample time moves toward its arrival time
    SMOOTH = 0.1  # the period estimate's smoothing

    def __init__(
        self,
        size: int,
        *,
        latency: float | None = None,
        max_latency: float = 0.1,
        max_extrapolation: float = 1.0,
        max_gap: float = 0.5,
        history: int = 8,
    ) -> None:
        if latency is not None and not (0.0 <= latency <= 1.0):
            raise ValueError(f"a stream latency must be in [0, 1] s, got {latency}")
        self.size = size
        self.fixed_latency = latency
        self.max_latency = max_latency
        self.max_extrapolation = max_extrapolation
        self.max_gap = max_gap
        self._times: deque[float] = deque(maxlen=history)
        self._values: deque[NDArray[np.float64]] = deque(maxlen=history)
        self._lateness: deque[float] = deque(maxlen=16)
        self._arrival: float | None = None
        self._offset: float | None = None  # local - sender clock [s]
        self.period: float | None = None  # estimated sample period [s]
        self.samples = 0

    @property
    def latency(self) -> float:
        """The look-behind in use [s]."""
        if self.fixed_latency is not None:
            return self.fixed_latency
        if self.period is None:
            return 0.0
        # the lateness most samples stay within (the third quartile of the last 16): a rarer,
        # later sample is bridged by extrapolation instead of delaying every cycle for it
        late = sorted(self._lateness)[(3 * len(self._lateness)) // 4] if self._lateness else 0.0
        return min(self.period + late + 0.001, self.max_latency)

    def reset(self) -> None:
        """Forget every sample (a new stream starts with the next one)."""
        self._times.clear()
        self._values.clear()
        self._lateness.clear()
        self._arrival = None
        self._offset = None
        self.period = None

    def add(self, value: NDArray[np.float64], arrival: float, stamp: float | None = None) -> None:
        """Add a sample that arrived at ``arrival`` [s, local clock], stamped ``stamp``."""
        value = np.asarray(value, dtype=np.float64)
        previous = self._arrival
        interval = None if previous is None else arrival - previous
        gap = self.max_gap
        if self.period is not None:
            gap = min(gap, max(self.GAP_PERIODS * self.period, 0.05))
        if interval is None or interval > gap or interval < 0:
            self.reset()
        self._arrival = arrival
        self.samples += 1
        if not self._times:
            local = arrival
            if stamp is not None:
                self._offset = arrival - stamp
        elif stamp is not None and self._offset is not None:
            assert interval is not None
            # the least-delayed sample sets the offset; it may drift up 1 ms/s (clocks)
            self._offset = min(self._offset + 1e-3 * interval, arrival - stamp)
            local = stamp + self._offset
        else:
            assert interval is not None
            self.period = (
                interval
                if self.period is None
                else self.period + self.SMOOTH * (min(interval, 4 * self.period) - self.period)
            )
            predicted = self._times[-1] + self.period
            local = min(predicted + self.PULL * (arrival - predicted), arrival)
        if self._times and stamp is not None:
            assert interval is not None
            step = local - self._times[-1]
            if step > 0:
                self.period = (
                    step
                    if self.period is None
                    else self.period + self.SMOOTH * (step - self.period)
                )
        if self._times and local <= self._times[-1]:
            local = self._times[-1] + 1e-6  # time only moves forward
        self._lateness.append(max(arrival - local, 0.0))
        self._times.append(local)
        self._values.append(value)

    def at(self, now: float) -> tuple[NDArray[np.float64], ...] | None:
        """The reference (position, velocity, acceleration) at ``now``; ``None`` before any.

        Between two samples the path is the parabola through both whose curvature is the
        change of slope from the segment before (the stream's curvature): the velocity is
        continuous across samples and the acceleration is fed forward, so the command
        follows a curving stream without the lag a linear path would leave.
        """
        if not self._times:
            return None
        times, values = self._times, self._values
        zero = np.zeros(self.size)
        if len(times) == 1:
            return values[0], zero, zero
        tau = now - self.latency
        if tau <= times[0]:
            return values[0], zero, zero
        last = len(times) - 1
        i = last
        if tau < times[last]:
            # newest segments first: tau is almost always in the last one or two
            i = next(k for k in range(last, 0, -1) if tau >= times[k - 1])
        t0, t1 = times[i - 1], times[i]
        slope = (values[i] - values[i - 1]) / (t1 - t0)
        curve = zero
        if i >= 2:
            before = (values[i - 1] - values[i - 2]) / (t0 - times[i - 2])
            curve = (slope - before) / (0.5 * (t1 - times[i - 2]))
        if tau > t1:  # past the newest sample: extrapolate a while, then settle on it
            horizon = self.max_extrapolation * (self.period or (t1 - t0))
            if tau - t1 > horizon:
                # the stream has stopped (not just a late sample): its newest value counts
                return values[i], zero, zero
        s = tau - t0
        position = values[i - 1] + slope * s + 0.5 * curve * s * (tau - t1)
        velocity = slope + curve * (tau - 0.5 * (t0 + t1))
        return position, velocity, curve

    def newest(self) -> NDArray[np.float64] | None:
        """The newest sample's value."""
        return self._values[-1] if self._values else None


class MotionLayer:
    """The commanded state of every joint, advanced one cycle at a time within limits.

    Args:
        limits: the per-joint limits to plan within.
        period: the cycle period [s].
        bandwidth: the tracking bandwidth [rad/s] (a triple pole near the reference);
            lowered where the rate is too low for it to stay well damped.
    """

    def __init__(self, limits: MotionLimits, period: float, bandwidth: float = 30.0) -> None:
        if not (period > 0 and math.isfinite(period)):
            raise ValueError(f"the period must be positive, got {period}")
        if not bandwidth > 0:
            raise ValueError(f"the bandwidth must be positive, got {bandwidth}")
        self.limits = limits
        self.period = period
        self.bandwidth = min(bandwidth, MAX_GAIN_STEP / (3.0 * period))
        w = self.bandwidth
        # (s + w)^3 = s^3 + 3w s^2 + 3w^2 s + w^3: loops kp = w/3, kv = w, ka = 3w
        self._kp, self._kv, self._ka = w / 3.0, w, 3.0 * w
        n = len(limits.names)
        self.position = np.zeros(n)
        self.velocity = np.zeros(n)
        self.acceleration = np.zeros(n)
        self._next = (np.zeros(n), np.zeros(n), np.zeros(n))
        self._braking_a = limits.acceleration * BRAKING_SHARE
        self._braking_j = limits.jerk * BRAKING_SHARE
        # within these of rest, one cycle to exact rest stays within the limits
        self._snap_v = self._braking_a * period * 0.5 + REST_VELOCITY
        self._snap_a = self._braking_j * period * 0.5 + REST_ACCELERATION
        # (reason, start time, position, velocity, acceleration) of the stop under way
        self._stop: (
            tuple[str, float, NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]] | None
        ) = None
        self.stopping = np.zeros(n, dtype=bool)  # joints braking to rest (not tracking)
        self._n = n
        # the per-joint limits as Python floats, for the step's scalar cascade
        self._scalars = tuple(
            array.astype(np.float64).tolist()
            for array in (
                limits.lower,
                limits.upper,
                limits.velocity,
                limits.acceleration,
                limits.jerk,
                2.0 * self._braking_a,
                2.0 * self._braking_j,
                limits.velocity * period,
                self._snap_v,
                self._snap_a,
            )
        )
        self.last_stop: StopReport | None = None
        self.stops = 0

    # -- state ------------------------------------------------------------------------------
    def reset(self, position: NDArray[np.float64]) -> None:
        """At rest at ``position`` (enable, a new hold): no velocity, no acceleration."""
        self.position = np.array(position, dtype=np.float64)
        self.velocity[:] = 0.0
        self.acceleration[:] = 0.0
        self.stopping[:] = False
        self._stop = None

    @property
    def at_rest(self) -> bool:
        """Every joint is at rest, or one cycle at its limits from it.

        Within ``acceleration * period / 2`` of zero velocity and ``jerk * period / 2`` of zero
        acceleration, setting both to zero is a change the limits allow in one cycle: the
        stop ends there instead of creeping to rest along the loop's exponential tail.
        """
        return bool(
            np.all(np.abs(self.velocity) <= self._snap_v)
            and np.all(np.abs(self.acceleration) <= self._snap_a)
        )

    # -- stops ------------------------------------------------------------------------------
    def begin_stop(self, reason: str, now: float) -> None:
        """Start a controlled stop of every joint from the commanded state.

        Each joint decelerates to zero velocity within its acceleration and jerk limits and
        then holds there. A stop already under way goes on (its report keeps its start).
        """
        self.stopping[:] = True
        if self._stop is None:
            self._stop = (
                reason,
                now,
                self.position.copy(),
                self.velocity.copy(),
                self.acceleration.copy(),
            )

    @property
    def stop_in_progress(self) -> bool:
        """A stop began and has not come to rest yet."""
        return self._stop is not None

    def _finish_stop(self, now: float) -> None:
        assert self._stop is not None
        reason, start, where, velocity, acceleration = self._stop
        self._stop = None
        self.velocity[:] = 0.0
        self.acceleration[:] = 0.0
        limits = self.limits
        self.last_stop = StopReport(
            reason,
            now - start,
            np.abs(self.position - where),
            np.abs(velocity),
            limits.stopping_distance(velocity, acceleration) + limits.velocity * self.period,
            float(np.max(limits.stopping_time(velocity, acceleration), initial=0.0))
            + 2 * self.period,
        )
        self.stops += 1

    # -- one cycle --------------------------------------------------------------------------
    def step(self, reference: Reference | None, now: float = 0.0) -> NDArray[np.float64]:
        """The next command (position) toward ``reference``; ``None``: brake and hold.

        Nothing changes until :meth:`commit` says what was written.

        The joints are few (a handful): the cascade runs on Python floats, joint by joint,
        with the very operations (and rounding) of its array form, instead of some thirty
        small numpy arrays a cycle.
        """
        n, dt = self._n, self.period
        q = self.position.tolist()
        v = self.velocity.tolist()
        a = self.acceleration.tolist()
        if reference is None:
            active = [False] * n
            ref_q, ref_v, ref_a = q, [0.0] * n, [0.0] * n
        else:
            wanted, stopping = reference.active.tolist(), self.stopping.tolist()
            active = [on and not stop for on, stop in zip(wanted, stopping, strict=True)]
            ref_q = reference.position.tolist()
            ref_v = reference.velocity.tolist()
            ref_a = reference.acceleration.tolist()
        kp, kv, ka = self._kp, self._kv, self._ka
        lower, upper, vmax, amax, jmax, two_a, two_j, vm_dt, snap_v, snap_a = self._scalars
        q1, v1, a1 = [0.0] * n, [0.0] * n, [0.0] * n
        for i in range(n):
            qi, vi, ai, on = q[i], v[i], a[i], active[i]
            lo, hi, vm = lower[i], upper[i], vmax[i]
            rdi = ref_v[i]
            # (min and max written out: the clips of the array form, without the calls)
            if on:
                ri = ref_q[i]
                ri = lo if ri < lo else ri
                ri = hi if ri > hi else ri
                rddi = ref_a[i]
                e = ri - qi
                # position loop -> desired velocity (a square-root law far away: braking)
                ae = abs(e)
                lin, root = kp * ae, math.sqrt(two_a[i] * ae)
                m = root if root < lin else lin
                v_des = rdi + (m if e > 0.0 else -m if e < 0.0 else e * m)
            else:
                ri, rddi, ae, v_des = qi, 0.0, 0.0, 0.0
            # never faster than a stop before the joint limit allows, nor the velocity limit
            room = hi - qi
            bound = math.sqrt(two_a[i] * (room if room > 0.0 else 0.0))
            v_des = bound if bound < v_des else v_des
            room = qi - lo
            bound = -math.sqrt(two_a[i] * (room if room > 0.0 else 0.0))
            v_des = bound if bound > v_des else v_des
            v_des = -vm if v_des < -vm else v_des
            v_des = vm if v_des > vm else v_des
            # velocity loop -> desired acceleration (square-root law: jerk-limited braking)
            ev = v_des - vi
            aev = abs(ev)
            lin, root = kv * aev, math.sqrt(two_j[i] * aev)
            m = root if root < lin else lin
            a_des = rddi + (m if ev > 0.0 else -m if ev < 0.0 else ev * m)
            limit = amax[i]
            a_des = -limit if a_des < -limit else a_des
            a_des = limit if a_des > limit else a_des
            # acceleration loop -> jerk
            j = ka * (a_des - ai)
            limit = jmax[i]
            j = -limit if j < -limit else j
            j = limit if j > limit else j
            a_next = ai + j * dt
            v_next = vi + (ai + 0.5 * j * dt) * dt
            q_next = qi + (vi + (0.5 * ai + j * dt / 6.0) * dt) * dt
            # the hard envelope, as the safety layer sees it (step per cycle)
            v_next = -vm if v_next < -vm else v_next
            v_next = vm if v_next > vm else v_next
            step = vm_dt[i]
            bound = qi - step
            q_next = bound if q_next < bound else q_next
            bound = qi + step
            q_next = bound if q_next > bound else q_next
            q_next = lo if q_next < lo else q_next
            q_next = hi if q_next > hi else q_next
            # At rest within one cycle's limits: be exactly at rest (a hold is a constant goal,
            # not an exponential tail), at the reference where there is a still one.
            if (
                abs(vi) <= snap_v[i]
                and abs(ai) <= snap_a[i]
                and (not on or (rdi == 0.0 and rddi == 0.0 and ae <= SNAP_POSITION))
            ):
                q_next = ri if on else qi
                v_next = a_next = 0.0
            q1[i], v1[i], a1[i] = q_next, v_next, a_next
        self._next = (np.array(q1), np.array(v1), np.array(a1))
        out: NDArray[np.float64] = self._next[0]
        return out

    def commit(self, command: NDArray[np.float64], now: float = 0.0) -> None:
        """``command`` went to the bus: it is the commanded state's position from now on.

        When it is the step's proposal, the step's velocity and acceleration go with it;
        otherwise (the safety layer changed it) they are taken from the command itself.
        """
        q1, v1, a1 = self._next
        if np.array_equal(command, q1):
            self.position, self.velocity, self.acceleration = q1, v1, a1
        else:
            dt = self.period
            v_new = (command - self.position) / dt
            self.acceleration = (v_new - self.velocity) / dt
            self.velocity = v_new
            self.position = np.array(command, dtype=np.float64)
        if self._stop is not None and self.at_rest:
            self._finish_stop(now)

    def hold(self, position: NDArray[np.float64]) -> None:
        """The command is ``position`` and stays there (no motion layer step was written)."""
        self.position = np.array(position, dtype=np.float64)
        self.velocity[:] = 0.0
        self.acceleration[:] = 0.0
