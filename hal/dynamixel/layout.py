"""The servos of one bus as the backend drives them: joint mapping, read spans, decoding.

Pure data and arithmetic, no I/O: :class:`BusLayout` validates a set of
``ServoSpec`` against the control tables (unique ids, one primary per joint,
shadows on their primary's joint, one protocol) and knows which bytes of a
cycle's read reply hold which reading for each servo.

:class:`ServoUnits` converts one servo's ticks to joint units and back.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from hilbot.hal.backend import EffortUnit
from hilbot.hal.dynamixel.tables import Encoding, ModelSpec, Register, RegisterName, model
from hilbot.hal.dynamixel.timing import (
    ReadMethod,
    ReadSet,
    choose_read_method,
    cycle_registers,
    resolve,
)
from hilbot.hal.errors import CommandError, ConfigError
from hilbot.hal.mapping import BusSpec, ServoSpec


@dataclass(frozen=True, slots=True)
class ServoUnits:
    """Conversions for one configured servo.

    Args:
        spec: the servo's configuration.
        model: its model; looked up from ``spec.model`` by :meth:`of`.
    """

    spec: ServoSpec
    model: ModelSpec

    @classmethod
    def of(cls, spec: ServoSpec) -> ServoUnits:
        """Build from a spec, resolving its model name.

        Raises:
            ConfigError: the model is unknown; the message lists supported models.
        """
        try:
            return cls(spec, model(spec.model))
        except KeyError as exc:
            raise ConfigError(str(exc.args[0]), servo_id=spec.id, field="model") from None

    @property
    def _scale(self) -> float:
        """Joint units per position tick, signed by direction."""
        return self.spec.direction * self.model.radians_per_tick / self.spec.gear_ratio

    def position(self, ticks: int) -> float:
        """Joint position [rad or m] of a Present Position reading."""
        return self.spec.offset + (ticks - self.model.center_tick) * self._scale

    def ticks(self, position: float) -> int:
        """Goal Position ticks for a joint position, rounded to the nearest tick.

        Raises:
            CommandError: the position is not finite or lies outside the servo's range.
        """
        if not math.isfinite(position):
            raise CommandError(
                f"joint {self.spec.joint!r}: position {position!r} is not finite",
                joint=self.spec.joint,
                value=position,
            )
        exact = self.model.center_tick + (position - self.spec.offset) / self._scale
        # a finite but huge position (1e308) overflows to inf here, which round() refuses
        raw = round(exact) if math.isfinite(exact) else None
        if raw is None or not self.model.position_min <= raw <= self.model.position_max:
            lo, hi = self.position_range()
            tick = f"tick {raw} not" if raw is not None else "no tick"
            raise CommandError(
                f"joint {self.spec.joint!r}: {position:.4g} is outside servo {self.spec.id}'s "
                f"range [{lo:.4f}, {hi:.4f}] ({tick} in "
                f"{self.model.position_min}..{self.model.position_max})",
                joint=self.spec.joint,
                value=position,
            )
        return int(raw)

    def position_range(self) -> tuple[float, float]:
        """Lowest and highest joint position the servo can be commanded to."""
        a = self.position(self.model.position_min)
        b = self.position(self.model.position_max)
        return (min(a, b), max(a, b))

    def velocity(self, raw: int) -> float:
        """Joint velocity [rad/s or m/s] of a Present Velocity / Present Speed reading."""
        return (
            self.spec.direction
            * raw
            * self.model.rad_per_s_per_velocity_tick
            / self.spec.gear_ratio
        )

    def effort(self, raw: int) -> float:
        """Effort in the model's :attr:`effort_unit` (A or %) of a current/load reading."""
        return self.spec.direction * raw * self.model.effort_per_tick

    @property
    def effort_unit(self) -> EffortUnit:
        """What :meth:`effort` returns."""
        return self.model.effort_unit

    @property
    def effort_register(self) -> RegisterName:
        """The register :meth:`effort` converts."""
        return self.model.effort_register


def temperature(raw: int) -> float:
    """Present Temperature [°C] (1 °C per unit on every supported model)."""
    return float(raw)


def voltage(raw: int) -> float:
    """Present Input Voltage [V] (0.1 V per unit on every supported model)."""
    return raw * 0.1


N = RegisterName


@dataclass(frozen=True, slots=True)
class Field:
    """Where one reading sits in a servo's cycle read: offset into the span, and its register."""

    offset: int
    register: Register

    def decode(self, data: bytes) -> int:
        """Integer value of this field in a span's bytes."""
        return self.register.decode(data[self.offset : self.offset + self.register.size])


@dataclass(frozen=True, slots=True)
class ServoSlot:
    """One servo: conversions, and the span the cycle reads from it.

    ``velocity`` and ``effort`` are ``None`` when the bus's read set leaves them out.
    """

    units: ServoUnits
    address: int
    length: int
    position: Field
    velocity: Field | None
    effort: Field | None

    @property
    def id(self) -> int:
        """The servo's bus id."""
        return self.units.spec.id

    @property
    def model(self) -> ModelSpec:
        """The servo's model."""
        return self.units.model

    @property
    def is_shadow(self) -> bool:
        """True when this servo mirrors another on the same joint."""
        return self.units.spec.shadow_of is not None


def _slot(units: ServoUnits, read: ReadSet) -> ServoSlot:
    m = units.model
    address, length = m.span(cycle_registers(m, read))

    def field(name: RegisterName) -> Field:
        reg = m.register(name)
        return Field(reg.address - address, reg)

    return ServoSlot(
        units=units,
        address=address,
        length=length,
        position=field(N.PRESENT_POSITION),
        velocity=field(m.velocity_register) if read.velocity else None,
        effort=field(m.effort_register) if read.effort else None,
    )


_FORMATS = {
    (1, Encoding.UNSIGNED): "B",
    (2, Encoding.UNSIGNED): "H",
    (4, Encoding.UNSIGNED): "I",
    (1, Encoding.SIGNED): "b",
    (2, Encoding.SIGNED): "h",
    (4, Encoding.SIGNED): "i",
}


class CycleDecoder:
    """A servo's cycle-read span -> its readings in SI units, with one ``struct`` call.

    The arithmetic is :class:`~hilbot.hal.dynamixel.layout.ServoUnits`' own, in the same
    order, so the floats are the same; spans of registers ``struct`` cannot express
    (Protocol 1.0's sign-magnitude speed and load) go through ``Field.decode``. A
    reading the read set leaves out decodes as NaN.
    """

    __slots__ = ("_constants", "_fields", "_order", "_struct", "slot")

    def __init__(self, slot: ServoSlot) -> None:
        self.slot = slot
        units = slot.units
        fields = [f for f in (slot.position, slot.velocity, slot.effort) if f is not None]
        self._fields = tuple(fields)
        self._struct: struct.Struct | None = None
        self._order: tuple[int, ...] = ()
        codes = [_FORMATS.get((f.register.size, f.register.encoding)) for f in fields]
        if all(codes):
            by_offset = sorted(range(len(fields)), key=lambda k: fields[k].offset)
            fmt, at = "<", 0
            for k in by_offset:
                fmt += "x" * (fields[k].offset - at) + str(codes[k])
                at = fields[k].offset + fields[k].register.size
            fmt += "x" * (slot.length - at)
            self._struct = struct.Struct(fmt)
            self._order = tuple(by_offset.index(k) for k in range(len(fields)))
        spec, m = units.spec, units.model
        # ServoUnits.position, .velocity and .effort, factor by factor.
        scale = spec.direction * m.radians_per_tick / spec.gear_ratio
        self._constants = (
            spec.offset,
            m.center_tick,
            scale,
            spec.direction,
            m.rad_per_s_per_velocity_tick,
            spec.gear_ratio,
            m.effort_per_tick,
        )

    def raw(self, data: bytes) -> tuple[int, ...]:
        """Register values of a span: position, then velocity and effort where read."""
        if self._struct is None or len(data) != self._struct.size:
            return tuple(f.decode(data) for f in self._fields)
        values = self._struct.unpack(data)
        return tuple(values[k] for k in self._order)

    def decode(self, data: bytes) -> tuple[float, float, float]:
        """Position, velocity, effort (as ``ServoUnits`` converts them; NaN where not read)."""
        raw = self.raw(data)
        offset, center, scale, direction, per_velocity_tick, gear, per_effort_tick = self._constants
        n = len(raw)
        return (
            offset + (raw[0] - center) * scale,
            direction * raw[1] * per_velocity_tick / gear if n > 1 else _NAN,
            direction * raw[2] * per_effort_tick if n > 2 else _NAN,
        )


_NAN = float("nan")


class BusLayout:
    """The validated servos of one bus.

    Args:
        bus: the bus.
        servos: its servos.
        read: what each cycle reads (``None``: the protocol's default, see
            :mod:`hilbot.hal.dynamixel.timing`).

    Raises:
        ConfigError: duplicate ids, unknown models, a model of the other protocol,
            a joint with no or two primaries, a shadow of a missing servo or on another joint.
    """

    def __init__(
        self, bus: BusSpec, servos: Sequence[ServoSpec], read: ReadSet | str | None = None
    ) -> None:
        if not servos:
            raise ConfigError(f"bus {bus.port} has no servos", field="servos")
        try:
            self.read_set = resolve(read, bus.protocol)
        except ValueError as exc:
            raise ConfigError(str(exc), field="read") from None
        self.bus = bus
        seen: set[int] = set()
        slots = []
        for spec in servos:
            if spec.id in seen:
                raise ConfigError(f"servo id {spec.id} appears twice", servo_id=spec.id, field="id")
            seen.add(spec.id)
            units = ServoUnits.of(spec)
            if units.model.protocol != bus.protocol:
                raise ConfigError(
                    f"servo {spec.id} is a {units.model.name}, which speaks protocol "
                    f"{units.model.protocol}.0, but bus {bus.port} is protocol {bus.protocol}.0",
                    servo_id=spec.id,
                    field="model",
                )
            slots.append(_slot(units, self.read_set))
        self.slots: tuple[ServoSlot, ...] = tuple(slots)
        self.by_id = {s.id: s for s in self.slots}
        self._check_joints()
        self.joint_names: tuple[str, ...] = tuple(
            s.units.spec.joint for s in self.slots if not s.is_shadow
        )
        self.primary = {s.units.spec.joint: s for s in self.slots if not s.is_shadow}
        self.shadows: dict[str, tuple[ServoSlot, ...]] = {
            joint: tuple(s for s in self.slots if s.units.spec.shadow_of == p.id)
            for joint, p in self.primary.items()
        }
        #: One decoder per joint (its primary servo), in ``joint_names`` order.
        self.decoders: tuple[CycleDecoder, ...] = tuple(
            CycleDecoder(self.primary[j]) for j in self.joint_names
        )

    def _check_joints(self) -> None:
        primaries: dict[str, int] = {}
        for s in self.slots:
            spec = s.units.spec
            if spec.shadow_of is None:
                if spec.joint in primaries:
                    raise ConfigError(
                        f"joint {spec.joint!r} is driven by servos {primaries[spec.joint]} and "
                        f"{spec.id}; mark one as shadow_of the other",
                        servo_id=spec.id,
                        field="joint",
                    )
                primaries[spec.joint] = spec.id
        for s in self.slots:
            spec = s.units.spec
            if spec.shadow_of is None:
                continue
            primary = self.by_id.get(spec.shadow_of)
            if primary is None or primary.is_shadow:
                raise ConfigError(
                    f"servo {spec.id} is shadow_of {spec.shadow_of}, which is not a primary servo "
                    "on this bus",
                    servo_id=spec.id,
                    field="shadow_of",
                )
            if primary.units.spec.joint != spec.joint:
                raise ConfigError(
                    f"servo {spec.id} shadows servo {primary.id} but names joint {spec.joint!r}, "
                    f"not {primary.units.spec.joint!r}",
                    servo_id=spec.id,
                    field="joint",
                )

    @property
    def protocol(self) -> int:
        """The bus protocol."""
        return self.bus.protocol

    @property
    def ids(self) -> tuple[int, ...]:
        """Every servo id, primaries and shadows, in configuration order."""
        return tuple(s.id for s in self.slots)

    def read_method(self, *, fast_ok: bool) -> ReadMethod:
        """The cycle's read instruction for this bus."""
        return choose_read_method(
            [s.model for s in self.slots], fast_ok=fast_ok, read=self.read_set
        )

    def reads(self) -> list[tuple[int, int, int]]:
        """``(id, address, length)`` of the cycle read, for every servo."""
        return [(s.id, s.address, s.length) for s in self.slots]

    def register(self, name: RegisterName) -> Register:
        """The register ``name`` of the bus's models (every servo must have it at one address).

        Raises:
            ConfigError: some model lacks it or has it elsewhere.
        """
        regs = {s.id: s.model.table.get(name) for s in self.slots}
        found = {r for r in regs.values() if r is not None}
        missing = [i for i, r in regs.items() if r is None]
        if missing or len({(r.address, r.size) for r in found}) != 1:
            raise ConfigError(
                f"{name.value} is not at one address on every servo of {self.bus.port} "
                f"(missing on {missing or 'none'})",
                field="model",
            )
        return next(iter(found))

    def servos_of(self, joints: Sequence[str]) -> list[ServoSlot]:
        """The servos (primaries and shadows) driving ``joints``."""
        out = []
        for joint in joints:
            primary = self.primary[joint]
            out.append(primary)
            out.extend(self.shadows[joint])
        return out
