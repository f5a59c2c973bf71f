"""What a cycle reads from each servo: position only, plus velocity, plus effort.

Every cycle reads one contiguous span per servo, so what the span covers sets the
bytes on the wire. Per servo and cycle (data bytes of the span)::

    read set                       Protocol 2.0 (X, MX-2.0)   Protocol 1.0 (AX, MX-1.0)
    position                       132..135   4 B             36..37   2 B
    position+velocity              128..135   8 B             36..39   4 B
    position+velocity+effort       126..135  10 B             36..41   6 B

The safety-relevant state comes with every read whatever the set: each status packet
carries the servo's error byte (on 1.0 the hardware-error bits themselves, on 2.0 the
alert bit, which makes the backend read Hardware Error Status). Temperature (and the
Bus Watchdog) is read every ``temperature_every`` cycles on both protocols.
Readings outside the set are NaN in ``JointState``.

Defaults: Protocol 1.0 reads position only. AX servos have no group read, so each
servo is a round trip of its own, and position is what the control loop needs;
Protocol 2.0 reads all three: one (fast) sync read carries them, and the six extra
bytes per servo cost 60 µs a servo at 1 Mbps.
"""

from __future__ import annotations

from hilbot._compat import StrEnum
from hilbot.hal.dynamixel.tables import ModelSpec, RegisterName

N = RegisterName


class ReadSet(StrEnum):
    """The readings a cycle takes from every servo (the config's ``read`` of a bus)."""

    POSITION = "position"
    POSITION_VELOCITY = "position+velocity"
    FULL = "position+velocity+effort"

    @property
    def velocity(self) -> bool:
        """Whether the set reads velocity."""
        return self is not ReadSet.POSITION

    @property
    def effort(self) -> bool:
        """Whether the set reads effort (current or load)."""
        return self is ReadSet.FULL


def default_read_set(protocol: int) -> ReadSet:
    """The read set a bus of ``protocol`` uses when the config names none (see above)."""
    return ReadSet.POSITION if protocol == 1 else ReadSet.FULL


def resolve(read: ReadSet | str | None, protocol: int) -> ReadSet:
    """``read`` as a :class:`ReadSet` (``None``: the protocol's default).

    Raises:
        ValueError: an unknown name; the message lists the valid ones.
    """
    if read is None:
        return default_read_set(protocol)
    try:
        return ReadSet(read)
    except ValueError:
        valid = ", ".join(repr(r.value) for r in ReadSet)
        raise ValueError(f"unknown read set {read!r}; valid: {valid}") from None


def cycle_registers(spec: ModelSpec, read: ReadSet | None = None) -> tuple[RegisterName, ...]:
    """Registers a cycle reads from a servo of this model, in address order.

    Both protocols keep effort, velocity and position next to each other (in that
    order on 2.0, the reverse on 1.0), so each set is one contiguous span.
    """
    read = read or default_read_set(spec.protocol)
    names = [N.PRESENT_POSITION]
    if read.velocity:
        names.append(spec.velocity_register)
    if read.effort:
        names.append(spec.effort_register)
    return tuple(sorted(names, key=lambda n: spec.register(n).address))
