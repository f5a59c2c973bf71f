"""Fault injection for simulated servos, shared by ``SimBackend`` and ``VirtualBus``.

Each servo id has one ``ServoFaults`` record. Tests change its fields at any time::

    bus.faults(3).drop_rate = 0.5          # half the replies of servo 3 are lost
    bus.faults(3).corrupt_rate = 1.0       # every reply arrives with a bad CRC
    bus.faults(3).truncate_rate = 1.0      # replies lose their data (valid CRC): a short reply
    bus.faults(3).delay = 0.004            # replies come 4 ms late
    bus.faults(3).unplug()                 # silent until .replug() (a power-up)
    bus.faults(3).brown_out()              # silent until rebooted (a reboot is answered)
    bus.faults(3).hardware_error = HardwareErrorFlags.OVERLOAD   # latched until reboot
    bus.faults(3).glitch(200)              # the next reply reads Present Position 200 ticks off
    bus.faults(3).glitch(0.5, unit="rad", replies=None, rate=0.05)  # 5 % of replies, 0.5 rad
    bus.faults(3).reply_id = 4             # replies (and fast-read slices) say they are from 4

A glitched reply is well formed: the Present Position value in it is rewritten and the
packet's CRC (or checksum) computed over the new bytes, as an encoder glitch or two
cancelling bit flips would leave it.

Random faults draw from a per-servo generator seeded from ``(seed, id)``, so a test
sees the same sequence of drops on every run.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from hilbot.hal.backend import HardwareErrorFlags
from hilbot.hal.registers import Encoding, Register


class Presence(enum.Enum):
    """Whether a servo answers."""

    PRESENT = "present"
    UNPLUGGED = "unplugged"  # answers nothing; replug() powers it up again
    BROWNED_OUT = "browned out"  # answers nothing but a reboot, which brings it back


class ReplyFate(enum.Enum):
    """What happens to one status packet on its way back."""

    DELIVER = "deliver"
    DROP = "drop"
    CORRUPT = "corrupt"
    TRUNCATE = "truncate"  # the parameters are cut to ``truncate_keep`` bytes, CRC valid


#: Units of ``ServoFaults.glitch_offset``: position ticks, or radians of the servo shaft.
GLITCH_UNITS = ("tick", "rad")


def _check_rate(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")


@dataclass
class ServoFaults:
    """Faults injected into one servo.

    Attributes:
        servo_id: the servo these faults apply to.
        drop_rate: fraction of replies that are lost (the caller times out).
        corrupt_rate: fraction of replies sent with a corrupted CRC.
        truncate_rate: fraction of replies whose parameters are cut short, with a valid
            CRC (or checksum) over what is left: a short, well-formed reply, as a stale
            status packet or a confused servo gives.
        truncate_keep: how many parameter bytes a truncated reply keeps.
        delay: extra reply delay [s], on top of wire time and return delay time.
        hardware_error: error bits to latch on the servo at its next update; the owner
            consumes the field (sets it back to ``NONE``), the bits stay until a reboot.
        presence: whether the servo answers (see ``unplug``, ``brown_out``).
        power_cycles: how many times the servo came back from unplug or brown-out; the
            owner resets its RAM (torque off, goal = present) when this changes.
        seed: seed of the random drop/corrupt decisions.
        glitch_offset: added to the Present Position a glitched reply carries, in
            ``glitch_unit`` (see ``glitch``); 0 glitches nothing.
        glitch_unit: ``"tick"`` (the servo's position ticks) or ``"rad"`` (servo shaft
            radians, rounded to whole ticks on a bus).
        glitch_rate: chance that a reply carrying Present Position is glitched.
        glitch_replies: how many more replies may be glitched; ``None`` for no end.
        glitched: replies glitched so far.
        reply_id: the id this servo's status packets and fast-read slices carry instead
            of its own (a valid CRC or checksum over it), ``None`` for its own.
    """

    servo_id: int
    drop_rate: float = 0.0
    corrupt_rate: float = 0.0
    truncate_rate: float = 0.0
    truncate_keep: int = 0
    delay: float = 0.0
    hardware_error: HardwareErrorFlags = HardwareErrorFlags.NONE
    presence: Presence = Presence.PRESENT
    power_cycles: int = 0
    seed: int = 0
    glitch_offset: float = 0.0
    glitch_unit: str = "tick"
    glitch_rate: float = 0.0
    glitch_replies: int | None = 0
    glitched: int = 0
    reply_id: int | None = None
    _rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng([self.seed, self.servo_id])

    def __setattr__(self, name: str, value: object) -> None:
        if name in ("drop_rate", "corrupt_rate", "truncate_rate", "glitch_rate"):
            _check_rate(name, float(value))  # type: ignore[arg-type]
        elif name == "glitch_offset" and not math.isfinite(float(value)):  # type: ignore[arg-type]
            raise ValueError(f"glitch_offset must be finite, got {value!r}")
        elif name == "glitch_unit" and value not in GLITCH_UNITS:
            raise ValueError(f"glitch_unit must be one of {', '.join(GLITCH_UNITS)}, got {value!r}")
        elif name == "reply_id" and value is not None and not 0 <= int(value) <= 253:  # type: ignore[call-overload]
            raise ValueError(f"reply_id must be an id 0..253 or None, got {value!r}")
        elif name == "glitch_replies" and value is not None and not int(value) >= 0:  # type: ignore[call-overload]
            raise ValueError(f"glitch_replies must be >= 0 or None, got {value!r}")
        elif name == "truncate_keep" and not int(value) >= 0:  # type: ignore[call-overload]
            raise ValueError(f"truncate_keep must be >= 0 bytes, got {value!r}")
        elif name == "delay" and not float(value) >= 0.0:  # type: ignore[arg-type]
            raise ValueError(f"delay must be >= 0 seconds, got {value!r}")
        object.__setattr__(self, name, value)

    @property
    def answers(self) -> bool:
        """Whether the servo answers ordinary instructions."""
        return self.presence is Presence.PRESENT

    def unplug(self) -> None:
        """Disconnect the servo: it answers nothing until ``replug()``."""
        self.presence = Presence.UNPLUGGED

    def replug(self) -> None:
        """Reconnect an unplugged or browned-out servo; it powers up with torque off."""
        if self.presence is not Presence.PRESENT:
            self.presence = Presence.PRESENT
            self.power_cycles += 1

    def brown_out(self) -> None:
        """A supply dip hangs the servo: silent until it receives a reboot instruction."""
        self.presence = Presence.BROWNED_OUT

    def rebooted(self) -> bool:
        """Tell the record a reboot reached the servo; returns whether it should reply.

        A browned-out servo recovers (and powers up), an unplugged one never hears it.
        """
        if self.presence is Presence.BROWNED_OUT:
            self.replug()
        return self.presence is Presence.PRESENT

    def take_hardware_error(self) -> HardwareErrorFlags:
        """Return and clear the error bits waiting to be latched."""
        flags = self.hardware_error
        if flags:
            self.hardware_error = HardwareErrorFlags.NONE
        return flags

    def reply_fate(self) -> ReplyFate:
        """Draw what happens to the next reply (drop, corrupt, truncate or deliver)."""
        if self.drop_rate > 0.0 and self._rng.random() < self.drop_rate:
            return ReplyFate.DROP
        if self.corrupt_rate > 0.0 and self._rng.random() < self.corrupt_rate:
            return ReplyFate.CORRUPT
        if self.truncate_rate > 0.0 and self._rng.random() < self.truncate_rate:
            return ReplyFate.TRUNCATE
        return ReplyFate.DELIVER

    def glitch(
        self,
        offset: float,
        *,
        unit: str = "tick",
        replies: int | None = 1,
        rate: float = 1.0,
    ) -> None:
        """Glitch the Present Position of this servo's next replies by ``offset``.

        Args:
            offset: added to the position the reply carries, in ``unit``.
            unit: ``"tick"`` or ``"rad"`` (of the servo shaft, not the joint).
            replies: how many replies to glitch (``None``: until cleared).
            rate: chance that each reply carrying Present Position is glitched
                (1: every one, until ``replies`` are used up).

        Raises:
            ValueError: a non-finite offset, an unknown unit, a rate outside [0, 1], a
                negative count.
        """
        self.glitch_unit = unit
        self.glitch_rate = rate
        self.glitch_replies = replies
        self.glitch_offset = float(offset)  # last: the checks above came first

    @property
    def glitching(self) -> bool:
        """Whether a reply may still be glitched."""
        return (
            self.glitch_offset != 0.0
            and self.glitch_rate > 0.0
            and (self.glitch_replies is None or self.glitch_replies > 0)
        )

    def take_glitch(self, radians_per_tick: float) -> float:
        """Draw whether this reply is glitched; its offset in ticks (0.0: not glitched).

        Called once per reply that carries Present Position. ``radians_per_tick`` is the
        servo's tick size, to turn a ``"rad"`` offset into ticks.
        """
        if not self.glitching:
            return 0.0
        if self.glitch_rate < 1.0 and self._rng.random() >= self.glitch_rate:
            return 0.0
        if self.glitch_replies is not None:
            self.glitch_replies -= 1
        self.glitched += 1
        if self.glitch_unit == "rad":
            return self.glitch_offset / radians_per_tick
        return self.glitch_offset

    def clear(self) -> None:
        """Remove every injected fault (the servo answers normally again)."""
        self.drop_rate = 0.0
        self.corrupt_rate = 0.0
        self.truncate_rate = 0.0
        self.glitch_offset = 0.0
        self.glitch_rate = 0.0
        self.glitch_replies = 0
        self.reply_id = None
        self.delay = 0.0
        self.hardware_error = HardwareErrorFlags.NONE
        self.replug()


class FaultTable:
    """The ``ServoFaults`` of every servo on a bus or backend, created on first use."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._faults: dict[int, ServoFaults] = {}

    def __call__(self, servo_id: int) -> ServoFaults:
        """Return the faults record of ``servo_id``."""
        faults = self._faults.get(servo_id)
        if faults is None:
            faults = self._faults[servo_id] = ServoFaults(servo_id, seed=self.seed)
        return faults

    def get(self, servo_id: int) -> ServoFaults | None:
        """The record of ``servo_id`` if one was created (no faults otherwise)."""
        return self._faults.get(servo_id)

    def records(self) -> list[ServoFaults]:
        """Every record created so far (empty: no fault was ever injected)."""
        return list(self._faults.values()) if self._faults else []

    def clear(self) -> None:
        """Remove every injected fault on every servo."""
        for faults in self._faults.values():
            faults.clear()


# ------------------------------------------------------------------ glitch
# The glitch fault on a virtual bus: a reply's Present Position rewritten, packet valid.
class PositionTable(Protocol):
    """What glitching a read needs of a servo's model (Dynamixel or Feetech)."""

    @property
    def table(self) -> Mapping[Any, Register]:
        """The model's named registers."""
        ...

    @property
    def radians_per_tick(self) -> float:
        """Shaft radians per position tick."""
        ...


def _value_range(reg: Register) -> tuple[int, int]:
    """The values ``reg``'s bytes can hold."""
    bits = 8 * reg.size
    if reg.encoding is Encoding.SIGNED:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    sign_bit = {
        Encoding.SIGN_MAGNITUDE_10: 10,
        Encoding.SIGN_MAGNITUDE_11: 11,
        Encoding.SIGN_MAGNITUDE_15: 15,
    }.get(reg.encoding)
    if sign_bit is not None:
        return -((1 << sign_bit) - 1), (1 << sign_bit) - 1
    return 0, (1 << bits) - 1


def glitch_read(
    faults: ServoFaults | None,
    model: PositionTable,
    position: enum.Enum,
    address: int,
    data: bytes,
) -> bytes:
    """``data`` read at ``address``, its Present Position moved by a pending glitch.

    A read that does not hold the whole Present Position register is returned as it
    is and uses up no glitch.

    Args:
        faults: the servo's injected faults, ``None`` for none.
        model: the servo's model (its register table and tick size).
        position: the family's Present Position register name.
        address: where the read started.
        data: the bytes read.
    """
    if faults is None or not faults.glitching:
        return data
    reg = model.table.get(position)
    if reg is None:
        return data
    start = reg.address - address
    if start < 0 or start + reg.size > len(data):
        return data
    ticks = round(faults.take_glitch(model.radians_per_tick))
    if not ticks:
        return data
    low, high = _value_range(reg)
    value = min(max(reg.decode(data[start : start + reg.size]) + ticks, low), high)
    return data[:start] + reg.encode(value) + data[start + reg.size :]
