"""``BodyServoModel``: hilbot's servo model with a MuJoCo body instead of its own inertia.

The servo model keeps everything a servo does: the trapezoidal profile, the position
loop, torque saturation on the torque-speed curve and at its torque limit (the Goal
Current of current-based position control), present current from the motor
torque, the thermal model and the latched hardware errors with their shutdown. What it
gives up is integrating the shaft: every fixed step of the body the loop's torque is
computed from the body's joint state and applied to the joint, and MuJoCo integrates
the links (inertia coupling, gravity, contacts, joint friction). So the present current
shows the real gravity load, and a joint blocked by a table saturates and overloads.

Until torque is first enabled the body rests where it was placed, as if held
(``held``). Time is consumed in whole body steps; a remainder shorter than one step waits for the
next call, so the same sequence of ``step(dt)`` always gives the same state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from hilbot.sim.mujoco_body import MujocoBody
from hilbot.sim.servo_model import SCALAR_MAX_SERVOS, ServoModel, _profile_one
from hilbot.sim.servo_physics import ServoPhysics

#: Longest gap stepped at once [s]; a longer stall (a debugger, a suspended host) skips
#: the rest, as the servo model's own sub-step cap stretches it.
MAX_GAP = 2.0


class BodyServoModel(ServoModel):
    """A :class:`ServoModel` whose shafts are the joints of a :class:`MujocoBody`.

    Args:
        physics: one entry per servo, in the body's mount order.
        body: the body; its servo joints are placed at ``initial_positions``.
        initial_positions: (n,) shaft angles [rad]; default the body's present state.
        ambient_temperature: [°C].
        voltage: initial input voltage [V].
    """

    def __init__(
        self,
        physics: Sequence[ServoPhysics],
        body: MujocoBody,
        *,
        initial_positions: npt.ArrayLike | None = None,
        ambient_temperature: float = 25.0,
        voltage: npt.ArrayLike | None = None,
    ) -> None:
        if len(body.mounts) != len(physics):
            raise ValueError(f"{len(physics)} servos but the body has {len(body.mounts)} mounts")
        if initial_positions is not None:
            body.set_shaft_positions(np.asarray(initial_positions, dtype=np.float64))
        q0, _ = body.shaft_state()
        super().__init__(
            physics, initial_positions=q0, ambient_temperature=ambient_temperature, voltage=voltage
        )
        self.body = body
        #: The body rests where it was placed (as if held) until torque is first enabled:
        #: a gravity-loaded arm would otherwise sag during start-up, before the runtime
        #: arms it, and then refuse to enable (its start pose out of the joint limits).
        self.held = True
        self._pending = 0.0  # [s] not yet stepped (less than one body step)
        self._pv = self._speed.tolist()

    def step(self, dt: float) -> None:
        """Advance by ``dt`` seconds in whole body steps (``dt <= 0`` does nothing)."""
        if not dt > 0:
            return
        self._flush_heat()
        if self.held and not self.torque_enabled.any():
            self._heat(dt)
            return
        self.held = False
        h = self.body.timestep
        self._pending += min(dt, MAX_GAP)
        count = math.floor(self._pending / h + 1e-9)
        if count <= 0:
            return
        self._pending = max(0.0, self._pending - count * h)
        for _ in range(count):
            self._step_body(h)
        elapsed = count * h
        if self.n <= SCALAR_MAX_SERVOS:
            self._heat_and_errors_floats(elapsed)
        else:
            self._heat(elapsed)
            self._update_errors(elapsed)
        self._resting = None

    def at_rest(self) -> bool:
        """Never: gravity and contacts act on the body at every step."""
        return False

    def _step_body(self, h: float) -> None:
        body = self.body
        q, v = body.shaft_state()
        on = self.torque_enabled.tolist()
        goal, pv, pa = self.goal, self.profile_velocity, self.profile_acceleration
        r, rv = self.reference, self.reference_velocity
        tau = np.zeros(self.n)
        caps = self.torque_limit.tolist()  # Goal Current in current-based position mode
        for i in range(self.n):
            if not on[i]:
                r[i], rv[i] = q[i], 0.0
                continue
            ri, rvi = _profile_one(h, goal[i], r[i], rv[i], self._pv[i], pv[i], pa[i])
            r[i], rv[i] = ri, rvi
            _, _, _, stall, speed, kp, kd = self._floats[i]
            t = kp * (ri - q[i]) + kd * (rvi - v[i])
            # Torque-speed curve: less torque available in the direction of motion.
            x = 1.0 - (1.0 if t > 0.0 else -1.0 if t < 0.0 else 0.0) * v[i] / speed
            limit = min(stall * (0.0 if x < 0.0 else 1.0 if x > 1.0 else x), caps[i])
            tau[i] = -limit if t < -limit else limit if t > limit else t
        load = self.external_torque
        if self.load_function is not None:
            load = load + np.asarray(self.load_function(q), dtype=np.float64)
        body.step(tau + load)
        self.position, self.velocity = body.shaft_state()
        self.motor_torque = tau
