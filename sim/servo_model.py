"""Servo dynamics model: the physics behind every simulated servo.

A pure, deterministic model of ``n`` servos stepped by an explicit ``dt``, shared by
``SimBackend`` and the virtual Dynamixel bus. Per servo it models, in shaft radians
relative to the center tick:

- the X-series velocity-based trapezoidal profile (profile velocity and acceleration;
  0 means unlimited, as in the firmware) producing a reference position and velocity;
- a second-order position loop (``bandwidth``, ``damping_ratio``) whose motor torque
  saturates at the stall torque, derated linearly with speed (torque-speed curve);
- an external load torque, constant or a function of position (gravity-like), which
  shows up as tracking error and as current/load;
- Coulomb and viscous friction: a servo with torque off coasts and is held by friction;
- present current (or load) from the motor torque, and a first-order thermal model
  heating with the square of the current;
- latched hardware-error bits: overload (torque near stall for ``overload_time``),
  overheating (temperature above the limit), input voltage (outside the limits); bits
  in the shutdown mask switch torque off until a reboot, as the firmware does.

The loop is integrated implicitly in sub-steps of at most 2 ms (at most 250 of them
per step), so it is stable for any ``dt`` and the same sequence of ``dt`` always gives
the same state. A model at
rest (profiles arrived, torques balanced) only integrates temperature, so idle
servos cost a few microseconds per step. Up to ``SCALAR_MAX_SERVOS`` servos a step
runs servo by servo on Python floats (the same arithmetic as the numpy path, which
larger models use): numpy's per-call overhead dominates arrays that short.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
from numpy.typing import NDArray

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.sim.servo_physics import ServoPhysics

F64 = NDArray[np.float64]
#: Position-dependent external torque: shaft positions (n,) [rad] -> torques (n,) [N·m].
LoadFunction = Callable[[F64], F64]

MAX_SUBSTEP = 2e-3  # [s]; the loop's bandwidth is ~100 rad/s, so 2 ms resolves it
MAX_SUBSTEPS = 250  # per step() call: gaps over 0.5 s use longer (still stable) sub-steps
#: X-series Shutdown register default (overheating | electrical shock | overload = 52).
DEFAULT_SHUTDOWN = (
    HardwareErrorFlags.OVERHEATING
    | HardwareErrorFlags.ELECTRICAL_SHOCK
    | HardwareErrorFlags.OVERLOAD
)
_STOP_EPS = 1e-9  # [rad] reference considered at goal
_OVERLOAD = np.uint8(HardwareErrorFlags.OVERLOAD)
_OVERHEATING = np.uint8(HardwareErrorFlags.OVERHEATING)
_INPUT_VOLTAGE = np.uint8(HardwareErrorFlags.INPUT_VOLTAGE)
_CREEP = 1e-9  # [rad/s] slower than this, friction has stopped the joint
#: Up to this many servos a step runs on Python floats, one servo after the other:
#: numpy's per-call overhead (~0.5 µs a ufunc) dominates arrays this short.
SCALAR_MAX_SERVOS = 12


def _sign(x: float) -> float:
    """``numpy.sign`` of one float (0.0 for 0.0)."""
    return 1.0 if x > 0.0 else -1.0 if x < 0.0 else 0.0


def _profile_one(
    h: float, goal: float, r0: float, rv0: float, speed: float, pv: float, amax: float
) -> tuple[float, float]:
    """``ServoModel._advance_profile`` of one enabled servo: (reference, its velocity)."""
    error = goal - r0
    if error == 0.0 and rv0 == 0.0:
        return r0, rv0
    sign = _sign(error)
    vmax = min(pv if pv > 0 else speed, speed)
    if amax > 0:
        ah = amax * h
        stop = 0.5 * ah * (math.sqrt(1.0 + 8.0 * abs(error) / (ah * h)) - 1.0)
        dv = sign * min(min(vmax, stop), abs(error) / h) - rv0
        dv = min(max(dv, -ah), ah)
    else:
        dv = sign * min(vmax, abs(error) / h) - rv0
    rv = rv0 + dv
    r = r0 + rv * h
    if _sign(goal - r) != sign or abs(goal - r) < _STOP_EPS:
        # Snapped to the goal; the velocity winds down over the next step.
        return goal, (min(max(rv, -ah), ah) if amax > 0 else 0.0)
    return r, rv


def _column(physics: Sequence[ServoPhysics], name: str) -> F64:
    return np.array([float(getattr(p, name)) for p in physics], dtype=np.float64)


class ServoModel:
    """Dynamics of ``n`` servos, vectorised with numpy.

    All positions are shaft angles [rad] relative to each servo's center tick. Arrays
    are public for reading; change commands through the methods, which validate. A
    model at rest caches that fact: after changing an array in place (a limit, the
    voltage), call ``invalidate()``.

    Args:
        physics: one entry per servo.
        initial_positions: (n,) shaft angles [rad]; default 0 (center tick).
        ambient_temperature: [°C].
        voltage: initial input voltage [V] of each servo; default its nominal voltage.
    """

    def __init__(
        self,
        physics: Sequence[ServoPhysics],
        *,
        initial_positions: npt.ArrayLike | None = None,
        ambient_temperature: float = 25.0,
        voltage: npt.ArrayLike | None = None,
    ) -> None:
        self.physics = tuple(physics)
        n = len(self.physics)
        self.n = n
        self._stall = _column(self.physics, "stall_torque")
        self._speed = _column(self.physics, "no_load_speed")
        self._stall_current = _column(self.physics, "stall_current")
        self._kp = _column(self.physics, "stiffness")
        self._inertia = _column(self.physics, "inertia")
        bw = _column(self.physics, "bandwidth")
        self._kd = 2.0 * _column(self.physics, "damping_ratio") * bw * self._inertia
        self._friction = _column(self.physics, "friction")
        self._viscous = _column(self.physics, "viscous")
        self._rise = _column(self.physics, "stall_temperature_rise")
        self._tau_th = _column(self.physics, "thermal_time_constant")
        self._overload_frac = _column(self.physics, "overload_fraction")
        self._overload_time = _column(self.physics, "overload_time")
        self._overload_torque = self._overload_frac * self._stall
        # Constants of the float path's thermal model and overload check, per servo.
        self._thermal: list[tuple[float, float, float, float, float]] = list(
            zip(
                self._stall.tolist(),
                self._stall_current.tolist(),
                self._rise.tolist(),
                self._tau_th.tolist(),
                self._overload_torque.tolist(),
                strict=True,
            )
        )
        # Constants of the float path (``_integrate_floats``), per servo: inertia,
        # viscous and Coulomb friction, stall torque, no-load speed, kp, kd.
        self._floats: list[tuple[float, float, float, float, float, float, float]] = list(
            zip(
                self._inertia.tolist(),
                self._viscous.tolist(),
                self._friction.tolist(),
                self._stall.tolist(),
                self._speed.tolist(),
                self._kp.tolist(),
                self._kd.tolist(),
                strict=True,
            )
        )
        self.quantum = _column(self.physics, "radians_per_tick")
        self.min_position = _column(self.physics, "min_position")
        self.max_position = _column(self.physics, "max_position")
        #: (n,) [N·m] the most torque the motor may give: the stall torque, or less where a
        #: current limit caps it (current-based position control).
        self.torque_limit: F64 = self._stall.copy()
        #: (n,) [rad] where the joint is blocked (end stops, or an obstacle the servo closes
        #: on, see ``set_obstacle``); goals are not clipped to these, only the motion.
        self.stop_min: F64 = self.min_position.copy()
        self.stop_max: F64 = self.max_position.copy()
        self.velocity_quantum = _column(self.physics, "velocity_resolution")
        self.temperature_limit = _column(self.physics, "temperature_limit")
        self.ambient_temperature = float(ambient_temperature)

        q0 = np.zeros(n) if initial_positions is None else np.asarray(initial_positions, float)
        if q0.shape != (n,) or not np.all(np.isfinite(q0)):
            raise ValueError(f"initial_positions must be {n} finite values, got {q0!r}")
        self.position: F64 = q0.copy()  # (n,) [rad]
        self.velocity: F64 = np.zeros(n)  # (n,) [rad/s]
        self.goal: F64 = q0.copy()  # (n,) [rad]
        self.reference: F64 = q0.copy()  # (n,) [rad], profile output
        self.reference_velocity: F64 = np.zeros(n)  # (n,) [rad/s]
        self.profile_velocity: F64 = np.zeros(n)  # (n,) [rad/s], 0 = unlimited
        self.profile_acceleration: F64 = np.zeros(n)  # (n,) [rad/s²], 0 = unlimited
        self.torque_enabled: NDArray[np.bool_] = np.zeros(n, dtype=bool)
        self.motor_torque: F64 = np.zeros(n)  # (n,) [N·m]
        self.external_torque: F64 = np.zeros(n)  # (n,) [N·m], constant load
        self._resting: bool | None = None  # cached at_rest(); None = recompute
        self._quiet = False  # at rest and no error bit can latch
        self._load_function: LoadFunction | None = None
        self._temperature: F64 = np.full(n, self.ambient_temperature)  # (n,) [°C]
        self._heat_pending = 0.0  # [s] of rest not yet integrated into the temperature
        self.voltage: F64 = (
            _column(self.physics, "nominal_voltage")
            if voltage is None
            else np.broadcast_to(np.asarray(voltage, float), (n,)).copy()
        )
        self.voltage_limits: tuple[F64, F64] = (self.voltage * 0.7, self.voltage * 1.3)
        self.hardware_error: NDArray[np.uint8] = np.zeros(n, dtype=np.uint8)
        self.shutdown_mask: NDArray[np.uint8] = np.full(n, int(DEFAULT_SHUTDOWN), dtype=np.uint8)
        self._overload_timer: F64 = np.zeros(n)  # [s]

    # ------------------------------------------------------------------ commands

    def set_goal(self, index: npt.ArrayLike, goal: npt.ArrayLike) -> None:
        """Set goal positions [rad] of servos ``index``, clamped to the position range."""
        idx = np.asarray(index, dtype=np.intp)
        values = np.asarray(goal, dtype=np.float64)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"goal positions must be finite, got {values!r}")
        clipped = np.clip(values, self.min_position[idx], self.max_position[idx])
        if (self.goal[idx] != clipped).any():
            self.goal[idx] = clipped
            self.invalidate()

    def set_goals(self, index: Sequence[int], goals: Sequence[float]) -> None:
        """``set_goal`` on Python floats (few servos: ``SimBackend.write``'s hot path)."""
        for value in goals:
            if not math.isfinite(value):
                raise ValueError(f"goal positions must be finite, got {list(goals)!r}")
        goal, low, high = self.goal, self.min_position.tolist(), self.max_position.tolist()
        changed = False
        for i, value in zip(index, goals, strict=True):
            clipped = min(max(value, low[i]), high[i])
            if goal[i] != clipped:
                goal[i] = clipped
                changed = True
        if changed:
            self.invalidate()

    def set_goal_one(self, index: int, goal: float) -> None:
        """``set_goal`` for one servo, without array overhead (the virtual bus's hot path)."""
        if not math.isfinite(goal):
            raise ValueError(f"goal position must be finite, got {goal!r}")
        clipped = min(max(goal, float(self.min_position[index])), float(self.max_position[index]))
        if self.goal[index] != clipped:
            self.goal[index] = clipped
            self.invalidate()

    def set_profile(
        self,
        index: npt.ArrayLike,
        velocity: npt.ArrayLike | None = None,
        acceleration: npt.ArrayLike | None = None,
    ) -> None:
        """Set profile velocity [rad/s] and/or acceleration [rad/s²]; 0 = unlimited."""
        idx = np.asarray(index, dtype=np.intp)
        for values, target in (
            (velocity, self.profile_velocity),
            (acceleration, self.profile_acceleration),
        ):
            if values is None:
                continue
            arr = np.asarray(values, dtype=np.float64)
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ValueError(f"profile limits must be finite and >= 0, got {arr!r}")
            target[idx] = arr
        self.invalidate()

    def set_torque(self, index: npt.ArrayLike, enabled: bool) -> NDArray[np.bool_]:
        """Enable or disable torque; returns which servos actually changed state.

        Enabling restarts the profile from the present position towards the (possibly
        stale) goal, as the firmware does. A servo with a latched shutdown error
        refuses to enable until rebooted.
        """
        idx = np.atleast_1d(np.asarray(index, dtype=np.intp))
        if enabled:
            blocked = (self.hardware_error[idx] & self.shutdown_mask[idx]) != 0
            idx = idx[~blocked]
            start = idx[~self.torque_enabled[idx]]
            self.reference[start] = self.position[start]
            self.reference_velocity[start] = self.velocity[start]
        changed = np.zeros(self.n, dtype=bool)
        changed[idx] = self.torque_enabled[idx] != enabled
        self.torque_enabled[idx] = enabled
        self.invalidate()
        return changed

    def reboot(self, index: npt.ArrayLike) -> None:
        """Reboot servos: clear latched errors, torque off, goal := present position."""
        idx = np.asarray(index, dtype=np.intp)
        self.hardware_error[idx] = 0
        self._overload_timer[idx] = 0.0
        self.torque_enabled[idx] = False
        self.goal[idx] = self.position[idx]
        self.reference[idx] = self.position[idx]
        self.reference_velocity[idx] = 0.0
        self.motor_torque[idx] = 0.0
        self.invalidate()

    def stop(self, index: int) -> None:
        """Stop a servo where it is, without a profile: goal := reference := present position.

        What the X-series firmware does when its Bus Watchdog expires ("Profile
        Acceleration and Profile Velocity are applied as 0"); torque stays as it was, so
        the position loop brakes the shaft and holds it.
        """
        self.goal[index] = self.position[index]
        self.reference[index] = self.position[index]
        self.reference_velocity[index] = 0.0
        self.invalidate()

    def raise_error(self, index: npt.ArrayLike, flags: HardwareErrorFlags) -> None:
        """Latch hardware-error ``flags`` (fault injection), with the firmware's shutdown."""
        idx = np.asarray(index, dtype=np.intp)
        self.hardware_error[idx] |= np.uint8(int(flags))
        self._apply_shutdown()
        self.invalidate()

    # ------------------------------------------------------------------ readings

    @property
    def present_ticks(self) -> NDArray[np.int64]:
        """Encoder reading [ticks from center], quantised as the firmware reports it."""
        return np.rint(self.position / self.quantum).astype(np.int64)

    @property
    def present_position(self) -> F64:
        """Quantised shaft position [rad]."""
        return np.rint(self.position / self.quantum) * self.quantum

    @property
    def present_velocity(self) -> F64:
        """Velocity [rad/s] quantised to the Present Velocity register unit."""
        return np.rint(self.velocity / self.velocity_quantum) * self.velocity_quantum

    @property
    def current(self) -> F64:
        """Motor current [A], signed like the motor torque."""
        return self.motor_torque / self._stall * self._stall_current

    @property
    def load(self) -> F64:
        """Motor load [% of stall torque], signed."""
        return 100.0 * self.motor_torque / self._stall

    @property
    def moving(self) -> NDArray[np.bool_]:
        """Whether each servo is still moving (the Moving register)."""
        done = np.abs(self.goal - self.reference) < _STOP_EPS
        return ~done | (np.abs(self.velocity) > self.velocity_quantum)

    # ------------------------------------------------------------------ stepping

    def step(self, dt: float) -> None:
        """Advance every servo by ``dt`` seconds (``dt <= 0`` does nothing)."""
        if not dt > 0:
            return
        if self._resting is None:
            self._resting = self.at_rest()
            self._quiet = self._resting and self._stays_quiet()
        if not self._resting:
            count = min(MAX_SUBSTEPS, math.ceil(dt / MAX_SUBSTEP - 1e-9))
            h = dt / count
            if self.n <= SCALAR_MAX_SERVOS:
                self._integrate_floats(h, count)
            else:
                gains = self._gains(h)
                for _ in range(count):
                    self._substep(h, gains)
            self._resting = None
        if self._resting and self._quiet:
            # Constant current at rest: the exponential can be integrated later, at once.
            self._heat_pending += dt
            return
        if self._quiet:
            self._heat(dt)
        elif self.n <= SCALAR_MAX_SERVOS:
            self._heat_and_errors_floats(dt)
        else:
            self._heat(dt)
            self._update_errors(dt)

    def invalidate(self) -> None:
        """Forget the cached "at rest" state; call after changing public arrays in place."""
        self._flush_heat()
        self._resting = None
        self._quiet = False

    def set_torque_limit(self, index: int, torque: float | None) -> None:
        """Cap servo ``index``'s motor torque [N·m] (``None``: its stall torque)."""
        stall = float(self._stall[index])
        value = stall if torque is None else min(max(float(torque), 0.0), stall)
        if not math.isfinite(value):
            raise ValueError(f"a torque limit must be finite, got {torque!r}")
        self.torque_limit[index] = value
        self.invalidate()

    def set_obstacle(self, index: int, low: float | None = None, high: float | None = None) -> None:
        """Block servo ``index`` beyond shaft angles ``low`` / ``high`` [rad] (``None``: its end).

        An object in a gripper's jaws: the goal may lie beyond it, the shaft stops at it.
        """
        for value in (low, high):
            if value is not None and not math.isfinite(value):
                raise ValueError(f"an obstacle position must be finite, got {value!r}")
        lo, hi = float(self.min_position[index]), float(self.max_position[index])
        self.stop_min[index] = lo if low is None else min(max(low, lo), hi)
        self.stop_max[index] = hi if high is None else min(max(high, lo), hi)
        self.position[index] = min(
            max(float(self.position[index]), self.stop_min[index]), self.stop_max[index]
        )
        self.invalidate()

    def set_external_torque(self, index: npt.ArrayLike, torque: npt.ArrayLike) -> None:
        """Set the constant external torque [N·m] on servos ``index``."""
        self.external_torque[np.asarray(index, dtype=np.intp)] = torque
        self.invalidate()

    @property
    def load_function(self) -> LoadFunction | None:
        """Position-dependent external torque, added to ``external_torque``."""
        return self._load_function

    @load_function.setter
    def load_function(self, function: LoadFunction | None) -> None:
        self._load_function = function
        self.invalidate()

    def _stays_quiet(self) -> bool:
        # At rest nothing changes but temperature, which relaxes monotonically towards
        # its target: if neither is above the limit, and torque and voltage are fine,
        # no error bit can latch until something is commanded.
        ratio = self.current / self._stall_current
        target = self.ambient_temperature + self._rise * ratio * ratio
        low, high = self.voltage_limits
        return not (
            (np.abs(self.motor_torque) >= self._overload_torque).any()
            or (np.maximum(target, self._temperature) > self.temperature_limit).any()
            or (self.voltage < low).any()
            or (self.voltage > high).any()
            or self._overload_timer.any()
        )

    def at_rest(self) -> bool:
        """Whether nothing moves: profiles arrived, no velocity, torques balanced."""
        # Nothing moves: every profile has arrived, nothing has velocity, and every
        # servo's torques balance (held by its loop or by friction). Then a step only
        # changes temperature, which is integrated exactly; idle servos cost ~nothing.
        if self.load_function is not None or self.velocity.any():
            return False
        on = self.torque_enabled
        if self.reference_velocity.any() or ((self.reference != self.goal) & on).any():
            return False
        drive = self._kp * (self.reference - self.position)
        drive *= on
        drive += self.external_torque
        return not (np.abs(drive) > self._friction * (1.0 + 1e-6)).any()

    def _gains(self, h: float) -> tuple[F64, F64, F64, F64]:
        on = self.torque_enabled
        kp = np.where(on, self._kp, 0.0)
        kd = np.where(on, self._kd, 0.0)
        free = self._inertia + h * (kd + self._viscous) + h * h * kp
        return kp, kd, free, self._inertia + h * self._viscous

    def _substep(self, h: float, gains: tuple[F64, F64, F64, F64]) -> None:
        kp, kd, free, free_sat = gains
        on = self.torque_enabled
        self._advance_profile(h, on)
        load = self.external_torque
        if self.load_function is not None:
            load = load + np.asarray(self.load_function(self.position), dtype=np.float64)
        q, v, m = self.position, self.velocity, self._inertia
        r, rv = self.reference, self.reference_velocity
        # Implicit Euler of m·a = kp(r - q) + kd(rv - v) + load - c·v - f·sign(v), for v+.
        base = m * v + h * (kp * (r - q) + kd * rv + load)
        direction = np.sign(np.where(v != 0.0, v, base))
        friction = h * self._friction * direction
        v_lin = (base - friction) / free
        tau = kp * (r - q - h * v_lin) + kd * (rv - v_lin)
        # Torque-speed curve: less torque available in the direction of motion.
        limit = self._stall * np.clip(1.0 - np.sign(tau) * v / self._speed, 0.0, 1.0)
        limit = np.minimum(limit, self.torque_limit)
        tau_sat = np.clip(tau, -limit, limit)
        # Where the motor saturates, integrate with the clipped torque instead.
        v_sat = (m * v + h * (tau_sat + load) - friction) / free_sat
        v_new = np.where(tau_sat != tau, v_sat, v_lin)
        # Coulomb friction stops (and then holds) a joint whose velocity would change
        # sign within the step: it cannot push the joint backwards.
        v_new = np.where((np.sign(v_new) == -direction) | (np.abs(v_new) < _CREEP), 0.0, v_new)
        q_new = q + h * v_new
        # End stops: the joint cannot leave the servo's position range.
        stopped = (q_new < self.stop_min) | (q_new > self.stop_max)
        if np.any(stopped):
            q_new = np.clip(q_new, self.stop_min, self.stop_max)
            v_new = np.where(stopped, 0.0, v_new)
        self.velocity = v_new
        self.position = q_new
        self.motor_torque = tau_sat

    def _integrate_floats(self, h: float, count: int) -> None:
        """``count`` sub-steps of ``h`` seconds, servo by servo on Python floats.

        The same arithmetic, in the same order, as ``_advance_profile`` + ``_substep``
        on arrays (``tests/sim/test_servo_model_paths.py`` checks both agree).
        """
        q, v = self.position.tolist(), self.velocity.tolist()
        r, rv = self.reference.tolist(), self.reference_velocity.tolist()
        tau_out = self.motor_torque.tolist()
        goal, on = self.goal.tolist(), self.torque_enabled.tolist()
        pv, pa = self.profile_velocity.tolist(), self.profile_acceleration.tolist()
        low, high = self.stop_min.tolist(), self.stop_max.tolist()
        caps = self.torque_limit.tolist()
        load_function = self.load_function
        load = self.external_torque.tolist()
        servos = list(zip(range(self.n), self._floats, on, pv, pa, low, high, strict=True))
        for _ in range(count):
            if load_function is not None:
                extra = np.asarray(load_function(np.array(q)), dtype=np.float64)
                load = (self.external_torque + extra).tolist()
            for i, (
                m,
                viscous,
                friction_c,
                stall,
                speed,
                kp_on,
                kd_on,
            ), on_i, vp, ap, lo, hi in servos:
                qi, vi = q[i], v[i]
                if not on_i:
                    r[i], rv[i] = ri, rvi = qi, 0.0
                    kp = kd = 0.0
                else:
                    r[i], rv[i] = ri, rvi = _profile_one(h, goal[i], r[i], rv[i], speed, vp, ap)
                    kp, kd = kp_on, kd_on
                # Implicit Euler of m·a = kp(r - q) + kd(rv - v) + load - c·v - f·sign(v).
                free = m + h * (kd + viscous) + h * h * kp
                base = m * vi + h * (kp * (ri - qi) + kd * rvi + load[i])
                x = vi if vi != 0.0 else base
                direction = 1.0 if x > 0.0 else -1.0 if x < 0.0 else 0.0
                friction = h * friction_c * direction
                v_new = (base - friction) / free
                tau = kp * (ri - qi - h * v_new) + kd * (rvi - v_new)
                # Torque-speed curve: less torque available in the direction of motion.
                x = 1.0 - (1.0 if tau > 0.0 else -1.0 if tau < 0.0 else 0.0) * vi / speed
                limit = stall * (0.0 if x < 0.0 else 1.0 if x > 1.0 else x)
                limit = min(limit, caps[i])
                tau_sat = -limit if tau < -limit else limit if tau > limit else tau
                if tau_sat != tau:
                    v_new = (m * vi + h * (tau_sat + load[i]) - friction) / (m + h * viscous)
                # Coulomb friction stops a joint whose velocity would change sign.
                x = 1.0 if v_new > 0.0 else -1.0 if v_new < 0.0 else 0.0
                if x == -direction or abs(v_new) < _CREEP:
                    v_new = 0.0
                qi = qi + h * v_new
                if qi < lo or qi > hi:  # end stops
                    qi, v_new = min(max(qi, lo), hi), 0.0
                q[i], v[i], tau_out[i] = qi, v_new, tau_sat
        self.position, self.velocity = np.array(q), np.array(v)
        self.reference, self.reference_velocity = np.array(r), np.array(rv)
        self.motor_torque = np.array(tau_out)

    def _advance_profile(self, h: float, on: NDArray[np.bool_]) -> None:
        goal, r0, rv0 = self.goal, self.reference, self.reference_velocity
        error = goal - r0
        if not np.any(error) and not np.any(rv0):
            self.reference = np.where(on, r0, self.position)
            return
        sign = np.sign(error)
        vmax = np.where(self.profile_velocity > 0, self.profile_velocity, self._speed)
        vmax = np.minimum(vmax, self._speed)
        amax = self.profile_acceleration
        limited = amax > 0
        # Fastest speed from which the profile can still stop at the goal, slowing by
        # amax·h per step: v = k·amax·h covers amax·h²·k(k+1)/2, solved for k.
        ah = np.where(limited, amax * h, 1.0)
        stop = np.where(
            limited, 0.5 * ah * (np.sqrt(1.0 + 8.0 * np.abs(error) / (ah * h)) - 1.0), np.inf
        )
        v_des = sign * np.minimum(np.minimum(vmax, stop), np.abs(error) / h)
        dv = v_des - rv0
        dv = np.where(limited, np.clip(dv, -amax * h, amax * h), dv)
        rv = rv0 + dv
        r = r0 + rv * h
        # Snap when the goal is reached or overshot by the discrete step.
        arrived = (np.sign(goal - r) != sign) | (np.abs(goal - r) < _STOP_EPS)
        self.reference = np.where(on, np.where(arrived, goal, r), self.position)
        # On arrival the velocity winds down over the next step, within the limit.
        rv_arrived = np.where(limited, np.clip(rv, -ah, ah), 0.0)
        self.reference_velocity = np.where(on, np.where(arrived, rv_arrived, rv), 0.0)

    @property
    def temperature(self) -> F64:
        """Winding temperature of each servo [°C]."""
        self._flush_heat()
        return self._temperature

    @temperature.setter
    def temperature(self, value: npt.ArrayLike) -> None:
        self._heat_pending = 0.0
        self._temperature = np.broadcast_to(np.asarray(value, dtype=np.float64), (self.n,)).copy()
        self.invalidate()

    def _flush_heat(self) -> None:
        if self._heat_pending > 0.0:
            dt, self._heat_pending = self._heat_pending, 0.0
            self._heat(dt)

    def _heat(self, dt: float) -> None:
        # First-order thermal model, integrated exactly over dt at the present current.
        ratio = self.current / self._stall_current
        target = self.ambient_temperature + self._rise * ratio * ratio
        self._temperature = target + (self._temperature - target) * np.exp(-dt / self._tau_th)

    def _heat_and_errors_floats(self, dt: float) -> None:
        # ``_heat`` then ``_update_errors``, servo by servo on Python floats.
        ambient, bits = self.ambient_temperature, self.hardware_error
        low, high = self.voltage_limits
        temperature = []
        overloaded = []
        for i, (
            (stall, stall_current, rise, tau_th, overload),
            tau,
            old,
            hot,
            volt,
            lo,
            hi,
        ) in enumerate(
            zip(
                self._thermal,
                self.motor_torque.tolist(),
                self._temperature.tolist(),
                self.temperature_limit.tolist(),
                self.voltage.tolist(),
                low.tolist(),
                high.tolist(),
                strict=True,
            )
        ):
            ratio = tau / stall * stall_current / stall_current
            target = ambient + rise * ratio * ratio
            new = target + (old - target) * math.exp(-dt / tau_th)
            temperature.append(new)
            overloaded.append(abs(tau) >= overload)
            if new > hot:
                bits[i] |= _OVERHEATING
            if volt < lo or volt > hi:
                bits[i] |= _INPUT_VOLTAGE
        self._temperature = np.array(temperature)
        timer = self._overload_timer.tolist()
        if any(overloaded) or any(timer):
            timer = [(t + dt) * o for t, o in zip(timer, overloaded, strict=True)]
            self._overload_timer = np.array(timer)
            for i, (t, limit) in enumerate(zip(timer, self._overload_time.tolist(), strict=True)):
                if t >= limit:
                    bits[i] |= _OVERLOAD
        if any(bits.tolist()):
            self._apply_shutdown()

    def _update_errors(self, dt: float) -> None:
        bits = self.hardware_error
        overloaded = np.abs(self.motor_torque) >= self._overload_torque
        if overloaded.any() or self._overload_timer.any():
            self._overload_timer = (self._overload_timer + dt) * overloaded
            bits[self._overload_timer >= self._overload_time] |= _OVERLOAD
        hot = self._temperature > self.temperature_limit
        if hot.any():
            bits[hot] |= _OVERHEATING
        low, high = self.voltage_limits
        bad_voltage = (self.voltage < low) | (self.voltage > high)
        if bad_voltage.any():
            bits[bad_voltage] |= _INPUT_VOLTAGE
        if bits.any():
            self._apply_shutdown()

    def _apply_shutdown(self) -> None:
        shut = (self.hardware_error & self.shutdown_mask) != 0
        if (shut & self.torque_enabled).any():
            self.torque_enabled[shut] = False
            self.motor_torque[shut] = 0.0
            self._resting = None
