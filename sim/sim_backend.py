"""``SimBackend``: the servo dynamics model behind the ``Backend`` protocol, in process.

No bytes, no threads: ``read()`` and ``write()`` advance the model by the time the
injected clock says has passed, so a test that drives a fake clock gets the same
states on every run. It is the runtime's default backend.

    async with SimBackend(servos, clock=fake.now) as sim:
        await sim.set_torque(True)
        await sim.write({"shoulder": 0.5})
        fake.advance(1.0)
        state = await sim.read()
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType

import numpy as np
from numpy.typing import NDArray

from hilbot._compat import Self
from hilbot.hal.backend import BusCounters, EffortUnit, HardwareErrorFlags, JointState
from hilbot.hal.errors import CommandError, CommTimeout, ConfigError, HalError
from hilbot.hal.mapping import ServoSpec
from hilbot.sim.faults import FaultTable, ReplyFate, ServoFaults
from hilbot.sim.servo_model import F64, LoadFunction, ServoModel
from hilbot.sim.servo_physics import ServoPhysics, feetech_physics, physics_for

Clock = Callable[[], float]
#: [s] a write this soon after the model's last step does not step it again (see ``write``).
WRITE_WITHOUT_STEP = 0.5e-3


class _State(enum.Enum):
    IDLE = "idle"
    OPEN = "open"
    CLOSED = "closed"


class SimBackend:
    """A simulated set of joints implementing ``hilbot.hal.backend.Backend``.

    Args:
        servos: the same ``ServoSpec`` list the real backend is built from; shadow
            servos are folded into their joint (they add their torque to it).
        joint_limits: optional ``{joint: (lower, upper)}`` [rad or m]; ``write``
            refuses targets outside, as it refuses targets outside the servo range.
        initial_positions: ``{joint: position}`` at start; default the center tick.
        clock: monotonic time source [s]; the model advances by its differences.
        physics: per-model overrides of the dynamics parameters, ``{model: ServoPhysics}``.
        load: per-joint external torque [N·m, or N for prismatic joints], constant or
            a function of the joint position (gravity-like); it reaches the servo
            through the gear ratio and shows up as tracking error and effort.
        profile_velocity: joint-space profile velocity limit [rad/s]; 0 = unlimited.
        profile_acceleration: profile acceleration limit [rad/s²]; 0 = unlimited.
            A servo whose ``ServoSpec`` sets ``profile_velocity`` or
            ``profile_acceleration`` (the robot config's, [rad/s] and [rad/s²] of the
            servo shaft) runs that profile instead, rounded to its register's unit as
            the real backend writes it (see ``firmware_profile``).
        ambient_temperature: [°C].
        retries: how often a read or write is retried when an injected fault loses a
            reply (counted in ``counters.retries``), before ``CommTimeout`` is raised.
        torque_off_on_close: disable torque when the backend is closed.
        seed: seed of the injected random faults.
    """

    def __init__(
        self,
        servos: Sequence[ServoSpec],
        *,
        joint_limits: Mapping[str, tuple[float, float]] | None = None,
        initial_positions: Mapping[str, float] | None = None,
        clock: Clock = time.monotonic,
        physics: Mapping[str, ServoPhysics] | None = None,
        load: Mapping[str, float | Callable[[float], float]] | None = None,
        profile_velocity: float = 0.0,
        profile_acceleration: float = 0.0,
        ambient_temperature: float = 25.0,
        retries: int = 2,
        torque_off_on_close: bool = True,
        seed: int = 0,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries!r}")
        self._map = JointMap(servos, _physics_lookup(servos, physics or {}))
        primary = {s.joint: s for s in servos if s.shadow_of is None}
        #: per joint: the profile its servo's config sets, ``(velocity, acceleration)``
        #: [rad/s, rad/s²] of the shaft, ``None`` where it sets none.
        self._servo_profiles = [firmware_profile(primary[j]) for j in self._map.names]
        self._map.set_limits(joint_limits or {})
        self._clock = clock
        self._retries = retries
        self._torque_off_on_close = torque_off_on_close
        self.counters = BusCounters()
        self.faults = FaultTable(seed)
        start = self._map.to_shaft(initial_positions or {})
        self.model = ServoModel(
            self._map.physics, initial_positions=start, ambient_temperature=ambient_temperature
        )
        self._set_profile(profile_velocity, profile_acceleration)
        self._loads: dict[int, Callable[[float], float]] = {}
        self._set_loads(load or {})
        self._state = _State.IDLE
        self._last = clock()
        self._power_cycles = [0] * len(self._map.names)
        jm = self._map
        self._position_scale = jm.direction / jm.gear_ratio  # shaft rad -> joint units
        # Motor torque -> the joint's effort: current [A] or load [% of stall torque].
        stall = np.array([p.stall_torque for p in jm.physics])
        amps = np.array([p.stall_current for p in jm.physics]) / stall
        self._effort_scale = np.where(jm.has_current, amps, 100.0 / stall) * jm.direction
        self._all_ids = [sid for group in jm.servo_ids for sid in group]
        self._flags_raw = b""
        self._flags_cache: tuple[HardwareErrorFlags, ...] = ()

    # ------------------------------------------------------------------ Backend API

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Joints this backend drives, in ``JointState`` order."""
        return self._map.names

    async def __aenter__(self) -> Self:
        if self._state is not _State.IDLE:
            raise HalError(f"SimBackend is {self._state.value}; it cannot be entered again")
        self._state = _State.OPEN
        self._advance()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def read(self) -> JointState:
        """Read every joint (one simulated sync read)."""
        self._check_open()
        now = self._advance()
        self._transaction("SYNC_READ", None)
        m, jm = self.model, self._map
        position = jm.offset + m.present_position * self._position_scale
        if self.faults.records():
            self._glitch(position)
        return JointState(
            names=jm.names,
            position=position,
            velocity=m.present_velocity * self._position_scale,
            effort=m.motor_torque * self._effort_scale,
            temperature=np.round(m.temperature),
            hardware_errors=self._flags(),
            timestamp=now,
            effort_unit=jm.effort_units,
            counters=self.counters.copy(),
        )

    async def write(self, positions: Mapping[str, float]) -> None:
        """Command goal positions [rad or m]; nothing moves if any value is refused.

        Raises:
            CommandError: an unknown joint, a NaN/inf value, or a target outside the
                servo's range or the configured joint limits.
        """
        self._check_open()
        index, shaft = self._map.goal_to_shaft(positions)
        if self._clock() - self._last < WRITE_WITHOUT_STEP:
            # Right after a read (the control loop's read -> compute -> write): the model
            # is not stepped again for a fraction of a sub-step; the next step applies the
            # new goal from the read's time on. This halves the model's cost per cycle.
            self._apply_faults()
        else:
            self._advance()
        self._transaction("SYNC_WRITE", index)
        self.model.set_goals(index, shaft)

    async def set_torque(self, enabled: bool, joints: Iterable[str] | None = None) -> None:
        """Enable or disable torque of ``joints`` (default all)."""
        self._check_open()
        index = self._map.indices(joints)
        self._advance()
        self._transaction("SYNC_WRITE", index)
        self.model.set_torque(index, enabled)

    async def reboot(self, joints: Iterable[str]) -> None:
        """Reboot the servos of ``joints``: errors cleared, torque off, goal = present.

        A browned-out servo comes back; an unplugged one does not hear the reboot.

        Raises:
            CommTimeout: a servo of ``joints`` is unplugged.
        """
        self._check_open()
        index = self._map.indices(joints)
        self._advance()
        self.counters.transactions += len(index)
        for i in index:
            for servo_id in self._map.servo_ids[i]:
                faults = self.faults.get(servo_id)
                if faults is not None and not faults.rebooted():
                    self.counters.timeouts += 1
                    raise CommTimeout(servo_id, "REBOOT")
        self._apply_faults()  # a revived servo powers up
        self.model.reboot(index)

    async def close(self) -> None:
        """Disable torque (if configured) and close; safe to call twice."""
        if self._state is _State.CLOSED:
            return
        if self._torque_off_on_close:
            self._advance()
            self.model.set_torque(np.arange(self.model.n), False)
        self._state = _State.CLOSED

    # ------------------------------------------------------------------ simulation API

    def set_load(self, joint: str, torque: float | Callable[[float], float]) -> None:
        """Set the external torque on ``joint`` [N·m], constant or a function of its position."""
        self._set_loads({joint: torque})

    def advance(self, dt: float) -> None:
        """Advance the model by ``dt`` seconds without waiting for the clock (tests)."""
        self.model.step(dt)

    def fault(self, joint: str) -> ServoFaults:
        """The fault record of ``joint``'s primary servo."""
        return self.faults(self._map.servo_ids[self._map.indices([joint])[0]][0])

    # ------------------------------------------------------------------ internals

    def _flags(self) -> tuple[HardwareErrorFlags, ...]:
        raw = self.model.hardware_error.tobytes()
        if raw != self._flags_raw:
            self._flags_raw = raw
            self._flags_cache = tuple(HardwareErrorFlags(b) for b in raw)
        return self._flags_cache

    def _check_open(self) -> None:
        if self._state is _State.CLOSED:
            raise HalError("SimBackend is closed")

    def _advance(self) -> float:
        now = self._clock()
        self.model.step(now - self._last)
        self._last = max(self._last, now)
        self._apply_faults()
        return now

    def _apply_faults(self) -> None:
        for faults in self.faults.records():
            i = self._map.joint_of_servo(faults.servo_id)
            if i is None:
                continue
            flags = faults.take_hardware_error()
            if flags:
                self.model.raise_error([i], flags)
            if faults.power_cycles != self._power_cycles[i]:
                self._power_cycles[i] = faults.power_cycles
                self.model.reboot([i])

    def _glitch(self, position: F64) -> None:
        """Move the readings of servos with a pending glitch fault (``ServoFaults.glitch``)."""
        for faults in self.faults.records():
            i = self._map.joint_of_servo(faults.servo_id)
            # A shadow servo's position is not read: only its joint's primary one is.
            if i is None or not faults.glitching or self._map.servo_ids[i][0] != faults.servo_id:
                continue
            quantum = float(self.model.quantum[i])
            ticks = faults.take_glitch(quantum)
            position[i] += ticks * quantum * self._position_scale[i]

    def _transaction(self, instruction: str, index: Iterable[int] | None) -> None:
        """Count one bus transaction; injected faults may lose it (retried, then raised)."""
        if not self.faults.records():
            self.counters.transactions += 1
            return
        if index is None:
            ids = self._all_ids
        else:
            ids = [sid for i in index for sid in self._map.servo_ids[i]]
        for attempt in range(self._retries + 1):
            self.counters.transactions += 1
            if attempt:
                self.counters.retries += 1
            lost = self._lost_reply(ids)
            if lost is None:
                return
            self.counters.timeouts += 1
        raise CommTimeout(lost, instruction)

    def _lost_reply(self, ids: Iterable[int]) -> int | None:
        for servo_id in ids:
            faults = self.faults.get(servo_id)
            if faults is None:
                continue
            if not faults.answers or faults.reply_fate() is not ReplyFate.DELIVER:
                return servo_id
        return None

    def _set_profile(self, velocity: float, acceleration: float) -> None:
        for name, value in (("profile_velocity", velocity), ("profile_acceleration", acceleration)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
        # Joint-space limits become shaft-space limits through the gear ratio.
        ratio = self._map.gear_ratio
        shaft_velocity, shaft_acceleration = velocity * ratio, acceleration * ratio
        # A servo's own configured profile (shaft units, as its registers hold it) wins.
        for i, (v, a) in enumerate(self._servo_profiles):
            if v is not None:
                shaft_velocity[i] = v
            if a is not None:
                shaft_acceleration[i] = a
        self.model.set_profile(np.arange(self.model.n), shaft_velocity, shaft_acceleration)

    def _set_loads(self, load: Mapping[str, float | Callable[[float], float]]) -> None:
        functions = dict(self._loads)
        jm = self._map
        for joint, value in load.items():
            i = jm.indices([joint])[0]
            if callable(value):
                functions[i] = value
                self.model.set_external_torque([i], 0.0)
            else:
                functions.pop(i, None)
                # A joint torque reaches the shaft through the gearing and direction.
                torque = float(value) * jm.direction[i] / jm.gear_ratio[i]
                self.model.set_external_torque([i], torque)
        self._loads = functions
        self.model.load_function = self._combined_load() if functions else None

    def _combined_load(self) -> LoadFunction:
        items = sorted(self._loads.items())
        jm = self._map

        def load(shaft: F64) -> F64:
            out = np.zeros_like(shaft)
            for i, f in items:
                joint = jm.offset[i] + jm.direction[i] * shaft[i] / jm.gear_ratio[i]
                out[i] = f(float(joint)) * jm.direction[i] / jm.gear_ratio[i]
            return out

        return load


def firmware_profile(spec: ServoSpec) -> tuple[float | None, float | None]:
    """The profile a servo runs with its config's settings: ``(velocity, acceleration)``.

    In [rad/s] and [rad/s²] of the servo shaft, ``None`` where the spec sets none. The
    real backend writes ``round(value / unit)`` to Profile Velocity (0.229 rev/min) and
    Profile Acceleration (214.577 rev/min²) (``hilbot.hal.dynamixel.startup``); the
    firmware runs that register value, so the result is rounded the same way.

    Raises:
        ConfigError: a profile for a model without these registers, or a value outside
            the register's range (the real backend's start-up refuses both).
    """
    if spec.profile_velocity is None and spec.profile_acceleration is None:
        return None, None
    from hilbot.hal.dynamixel.startup import ACCELERATION_UNIT
    from hilbot.hal.dynamixel.tables import RegisterName, model

    out: list[float | None] = []
    for name, value, register in (
        ("profile_velocity", spec.profile_velocity, RegisterName.PROFILE_VELOCITY),
        ("profile_acceleration", spec.profile_acceleration, RegisterName.PROFILE_ACCELERATION),
    ):
        if value is None:
            out.append(None)
            continue
        try:
            table = model(spec.model)
        except KeyError:
            table = None
        if table is None or register not in table.table:
            raise ConfigError(
                f"servo {spec.id} ({spec.model}): this model has no {register.value} "
                f"register for {name}",
                servo_id=spec.id,
                field=name,
            )
        unit = (
            table.rad_per_s_per_velocity_tick
            if register is RegisterName.PROFILE_VELOCITY
            else ACCELERATION_UNIT
        )
        ticks = round(value / unit)
        reg = table.table[register]
        if not reg.min <= ticks <= reg.max:
            raise ConfigError(
                f"servo {spec.id} ({spec.model}): {name} {value} is {register.value} "
                f"{ticks}, outside {reg.min}..{reg.max}",
                servo_id=spec.id,
                field=name,
            )
        out.append(ticks * unit)
    return out[0], out[1]


def _physics_lookup(
    servos: Sequence[ServoSpec], overrides: Mapping[str, ServoPhysics]
) -> dict[int, ServoPhysics]:
    result: dict[int, ServoPhysics] = {}
    for spec in servos:
        physics = overrides.get(spec.model)
        if physics is None:
            try:
                physics = physics_for(spec.model)
            except KeyError as exc:
                try:  # model names do not collide across families: a Feetech one?
                    physics = feetech_physics(spec.model)
                except KeyError:
                    raise ConfigError(
                        f"servo {spec.id}: {exc.args[0]}", servo_id=spec.id, field="model"
                    ) from None
        result[spec.id] = replace(physics, model=spec.model)
    return result


# ------------------------------------------------------------------ joint_map
# Joints <-> simulated servo shafts: the ``ServoSpec`` mapping, with shadows folded in.
_SLACK = 1e-12  # [rad] rounding slack at the range ends


class JointMap:
    """Which servos drive which joint, and the joint <-> shaft conversion.

    Args:
        servos: the robot's servo specs (primaries and shadows, any order).
        physics: ``{servo id: ServoPhysics}`` for every primary servo.

    Raises:
        ConfigError: duplicate ids or joints, a shadow of a missing servo or of another
            joint, or a servo without physics.
    """

    def __init__(self, servos: Sequence[ServoSpec], physics: Mapping[int, ServoPhysics]) -> None:
        if not servos:
            raise ConfigError("no servos given; a backend needs at least one joint", field="servos")
        ids = [s.id for s in servos]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ConfigError(
                f"servo ids used twice: {duplicates}", servo_id=duplicates[0], field="id"
            )
        primaries = [s for s in servos if s.shadow_of is None]
        by_id = {s.id: s for s in primaries}
        shadows: dict[int, list[int]] = {s.id: [] for s in primaries}
        for s in servos:
            if s.shadow_of is None:
                continue
            primary = by_id.get(s.shadow_of)
            if primary is None:
                raise ConfigError(
                    f"servo {s.id} shadows servo {s.shadow_of}, which is not a primary servo",
                    servo_id=s.id,
                    field="shadow_of",
                )
            if primary.joint != s.joint:
                raise ConfigError(
                    f"servo {s.id} shadows servo {primary.id} but names joint {s.joint!r}, "
                    f"not {primary.joint!r}",
                    servo_id=s.id,
                    field="joint",
                )
            shadows[primary.id].append(s.id)
        joints = [s.joint for s in primaries]
        twice = sorted({j for j in joints if joints.count(j) > 1})
        if twice:
            raise ConfigError(
                f"joints driven by two primary servos (use shadow_of): {twice}", field="joint"
            )
        self.names: tuple[str, ...] = tuple(joints)
        self.servo_ids: tuple[tuple[int, ...], ...] = tuple(
            (s.id, *shadows[s.id]) for s in primaries
        )
        self.physics: tuple[ServoPhysics, ...] = tuple(
            _fold(physics, s, len(shadows[s.id])) for s in primaries
        )
        self.offset: F64 = np.array([s.offset for s in primaries], dtype=np.float64)
        self.direction: F64 = np.array([float(s.direction) for s in primaries])
        self.gear_ratio: F64 = np.array([s.gear_ratio for s in primaries], dtype=np.float64)
        self.effort_units: tuple[EffortUnit, ...] = tuple(p.effort_unit for p in self.physics)
        self.has_current: NDArray[np.bool_] = np.array(
            [u is EffortUnit.AMPERE for u in self.effort_units]
        )
        self._index = {name: i for i, name in enumerate(self.names)}
        self._last_keys: tuple[str, ...] = ()
        self._last_index: tuple[list[int], list[tuple[float, float, float, float, float]]] = (
            [],
            [],
        )
        self._servo_joint = {sid: i for i, group in enumerate(self.servo_ids) for sid in group}
        ends = np.array(
            [[p.min_position, p.max_position] for p in self.physics], dtype=np.float64
        ).T
        a, b = (self.offset + self.direction * e / self.gear_ratio for e in ends)
        self.servo_lower: F64 = np.minimum(a, b)  # (n,) joint range the servo can reach
        self.servo_upper: F64 = np.maximum(a, b)
        self.lower: F64 = self.servo_lower  # (n,) accepted targets, see set_limits
        self.upper: F64 = self.servo_upper
        # Per joint on Python floats, for goal_to_shaft: lower, upper, offset, gear, direction.
        self._rows: list[tuple[float, float, float, float, float]] = _rows(self)

    def indices(self, joints: Iterable[str] | None) -> list[int]:
        """Indices of ``joints`` (all when ``None``); unknown names raise ``CommandError``."""
        if joints is None:
            return list(range(len(self.names)))
        if isinstance(joints, str):
            joints = [joints]
        out = []
        for joint in joints:
            i = self._index.get(joint)
            if i is None:
                raise CommandError(
                    f"unknown joint {joint!r}; known: {', '.join(self.names)}", joint=joint
                )
            out.append(i)
        return out

    def joint_of_servo(self, servo_id: int) -> int | None:
        """The joint index a servo drives, or ``None`` if the id is not configured."""
        return self._servo_joint.get(servo_id)

    def set_limits(self, limits: Mapping[str, tuple[float, float]]) -> None:
        """Restrict targets to configured joint limits, within the servo range.

        Raises:
            ConfigError: an unknown joint or a limit that is not a finite interval.
        """
        lower, upper = self.servo_lower.copy(), self.servo_upper.copy()
        for joint, (lo, hi) in limits.items():
            if joint not in self._index:
                raise ConfigError(
                    f"joint_limits names unknown joint {joint!r}; known: {', '.join(self.names)}",
                    field="joint_limits",
                )
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ConfigError(
                    f"joint_limits[{joint!r}] = ({lo}, {hi}) is not a finite interval",
                    field="joint_limits",
                )
            i = self._index[joint]
            lower[i], upper[i] = max(lo, lower[i]), min(hi, upper[i])
        self.lower, self.upper = lower, upper
        self._rows = _rows(self)
        self._last_keys = ()  # rows cached by goal_to_shaft are stale

    def to_shaft(self, positions: Mapping[str, float]) -> F64:
        """Shaft angles for joint positions; joints not named stay at the center tick."""
        shaft = np.zeros(len(self.names))
        if positions:
            index, values = self.goal_to_shaft(positions)
            shaft[index] = values
        return shaft

    def goal_to_shaft(self, positions: Mapping[str, float]) -> tuple[list[int], list[float]]:
        """Validate joint targets and convert them to shaft angles [rad].

        Raises:
            CommandError: naming the joint and value that is unknown, not finite, or
                outside the servo's range or the joint limits; nothing is converted then.
        """
        keys = tuple(positions)
        if keys == self._last_keys:  # the runtime writes the same joints every cycle
            index, rows = self._last_index
        else:
            index = self.indices(keys)
            rows = [self._rows[i] for i in index]
            self._last_keys, self._last_index = keys, (index, rows)
        shaft = []
        for k, (value, (lower, upper, offset, gear_ratio, direction)) in enumerate(
            zip(positions.values(), rows, strict=True)
        ):
            value = float(value)
            if not lower - _SLACK <= value <= upper + _SLACK:  # False for NaN
                raise self._refused(index[k], value, lower, upper)
            shaft.append((value - offset) * gear_ratio / direction)
        return index, shaft

    def _refused(self, i: int, value: float, lower: float, upper: float) -> CommandError:
        name = self.names[i]
        if not math.isfinite(value):
            reason = "is not a finite number"
        else:
            reason = f"is outside [{lower:.6g}, {upper:.6g}]"
        return CommandError(f"joint {name!r}: target {value!r} {reason}", joint=name, value=value)


def _rows(jm: JointMap) -> list[tuple[float, float, float, float, float]]:
    columns = (jm.lower, jm.upper, jm.offset, jm.gear_ratio, jm.direction)
    return list(zip(*(c.tolist() for c in columns), strict=True))


def _fold(physics: Mapping[int, ServoPhysics], spec: ServoSpec, shadows: int) -> ServoPhysics:
    p = physics.get(spec.id)
    if p is None:
        raise ConfigError(
            f"servo {spec.id} ({spec.model}): no simulation parameters",
            servo_id=spec.id,
            field="model",
        )
    if not shadows:
        return p
    k = 1 + shadows
    return replace(p, stall_torque=p.stall_torque * k, stall_current=p.stall_current * k)
