"""Pure tick <-> SI conversions for one servo, from its ``ServoSpec`` and ``ModelSpec``.

The position relation is the one documented in :mod:`hilbot.hal.mapping`::

    joint = offset + direction * (ticks - center_tick) * radians_per_tick / gear_ratio

Velocity and effort follow the joint's sign convention (``direction``);
velocity is divided by the gear ratio, effort is the servo's own reading
(amperes, or percent of maximum torque on models without current sensing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hilbot.hal.backend import EffortUnit
from hilbot.hal.dynamixel.tables import ModelSpec, RegisterName, model
from hilbot.hal.errors import CommandError, ConfigError
from hilbot.hal.mapping import ServoSpec


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
