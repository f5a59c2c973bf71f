"""Pure tick <-> SI conversions for one Feetech servo, from its ``ServoSpec`` and model.

Position follows :mod:`hilbot.hal.mapping`::

    joint = offset + direction * (ticks - center_tick) * radians_per_tick / gear_ratio

Present Speed counts encoder steps per second (STS memory table: "50 steps/s =
0.732 rpm"), so one speed unit is one position tick per second. Present Load is in
0.1 % of the maximum torque, its sign in bit 10. The state block read each cycle is
Present Position (2), Present Speed (2), Present Load (2), Present Voltage (1) and
Present Temperature (1), eight bytes from address 56.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from hilbot.hal.errors import CommandError, ConfigError
from hilbot.hal.feetech.register_names import FeetechRegister as N
from hilbot.hal.feetech.tables import FeetechModel, model
from hilbot.hal.mapping import ServoSpec
from hilbot.hal.registers import Register

LOAD_PERCENT_PER_UNIT = 0.1  # [%] of max torque per Present Load unit (STS/SCS tables)
STATE_REGISTERS = (
    N.PRESENT_POSITION,
    N.PRESENT_SPEED,
    N.PRESENT_LOAD,
    N.PRESENT_VOLTAGE,
    N.PRESENT_TEMPERATURE,
)


def state_block(spec: FeetechModel) -> tuple[int, int, tuple[Register, ...]]:
    """Address, length and registers of the cycle's read block on ``spec``.

    Raises:
        ValueError: the registers are not contiguous on this model.
    """
    regs = tuple(spec.register(n) for n in STATE_REGISTERS)
    for a, b in itertools.pairwise(regs):
        if a.end != b.address:
            raise ValueError(f"{spec.name}: {a.label} and {b.label} are not contiguous")
    return regs[0].address, regs[-1].end - regs[0].address, regs


@dataclass(frozen=True, slots=True)
class FeetechUnits:
    """Conversions for one configured Feetech servo."""

    spec: ServoSpec
    model: FeetechModel

    @classmethod
    def of(cls, spec: ServoSpec) -> FeetechUnits:
        """Build from a spec, resolving its model name (``ConfigError`` if unknown)."""
        try:
            return cls(spec, model(spec.model))
        except KeyError as exc:
            raise ConfigError(str(exc.args[0]), servo_id=spec.id, field="model") from None

    @property
    def scale(self) -> float:
        """Joint units per position tick, signed by direction."""
        return self.spec.direction * self.model.radians_per_tick / self.spec.gear_ratio

    def position(self, ticks: int) -> float:
        """Joint position [rad or m] of a Present Position reading."""
        return self.spec.offset + (ticks - self.model.center_tick) * self.scale

    def exact_ticks(self, position: float) -> float:
        """The (unrounded) tick of a joint position."""
        return self.model.center_tick + (position - self.spec.offset) / self.scale

    def ticks(self, position: float) -> int:
        """Goal Position ticks for a joint position, rounded to the nearest tick.

        Raises:
            CommandError: the position is not finite or lies outside the servo's range.
        """
        exact = self.exact_ticks(position) if math.isfinite(position) else math.nan
        raw = round(exact) if math.isfinite(exact) else None
        if raw is None or not 0 <= raw <= self.model.position_max:
            lo, hi = sorted(self.position(t) for t in (0, self.model.position_max))
            raise CommandError(
                f"joint {self.spec.joint!r}: {position!r} is outside servo {self.spec.id}'s "
                f"range [{lo:.4f}, {hi:.4f}]",
                joint=self.spec.joint,
                value=position,
            )
        return int(raw)

    def velocity(self, raw: int) -> float:
        """Joint velocity [rad/s or m/s] of a Present Speed reading (steps/s)."""
        return raw * self.scale

    def effort(self, raw: int) -> float:
        """Present Load in [%] of maximum torque, signed like the joint."""
        return self.spec.direction * raw * LOAD_PERCENT_PER_UNIT
